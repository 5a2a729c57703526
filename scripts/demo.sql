-- Sample data and DP queries for scripts/demo.sh.
CREATE EXTENSION pg_dp;

-- 20,000 synthetic patients. The values come from a deterministic hash of the row number, so every
-- demo shows the same table; they are sample data, not noise.
CREATE TABLE patients AS
SELECT g AS id,
       18 + (abs(hashint4(g)) % 73) AS age,
       (ARRAY['north', 'south', 'east', 'west', 'centre'])[1 + abs(hashint4(g + 1)) % 5] AS region,
       round((18.5 + (abs(hashint4(g + 2)) % 1000) / 1000.0 * 14 + (abs(hashint4(g + 3)) % 1000) / 1000.0 * 6)::numeric, 1)::float8 AS bmi,
       95 + (abs(hashint4(g + 4)) % 40) + (abs(hashint4(g + 5)) % 35) AS systolic,
       round((12000 + (abs(hashint4(g + 6)) % 1000)^2 / 8.0)::numeric, 2)::float8 AS income,
       abs(hashint4(g + 7)) % 5 = 0 AS smoker
  FROM generate_series(1, 20000) g;
ALTER TABLE patients ADD PRIMARY KEY (id);
COMMENT ON TABLE patients IS 'pg_dp demo: synthetic patients';

-- a public dimension table: one row per region, unique name
CREATE TABLE regions (name text PRIMARY KEY, climate text);
INSERT INTO regions VALUES ('north', 'cold'), ('south', 'warm'), ('east', 'mild'), ('west', 'mild'), ('centre', 'mild');
COMMENT ON TABLE regions IS 'pg_dp demo: public facts about regions';

-- 60,000 visits over the last two years, with what each cost
CREATE TABLE visits AS
SELECT g AS id, 1 + abs(hashint4(g)) % 20000 AS patient_id,
       current_date - (abs(hashint4(g + 1)) % 730) AS visit_date,
       round((20 + (abs(hashint4(g + 2)) % 18000) / 100.0)::numeric, 2) AS price,
       1 + abs(hashint4(g + 3)) % 4 AS quantity
  FROM generate_series(1, 60000) g;
ALTER TABLE visits ADD PRIMARY KEY (id);
COMMENT ON TABLE visits IS 'pg_dp demo: synthetic visits';

\echo
\echo 'Every dp_ aggregate below is one epsilon-DP release with fresh noise (run the file again: new answers).'
\echo
\echo '1. How many patients? (dp_count(*) uses dp.default_epsilon = 1)'
SELECT count(*) AS exact, dp_count(*) AS dp_count FROM patients;

\echo '2. Patients per region at epsilon = 0.5 (one release per group; groups are disjoint)'
SELECT region, count(*) AS exact, dp_count(id, 0.5) AS dp_count
  FROM patients GROUP BY region ORDER BY region;

\echo '3. Mean BMI, values clamped to [15, 50], epsilon = 0.5'
SELECT round(avg(bmi)::numeric, 3) AS exact, round(dp_avg(bmi, 15, 50, 0.5)::numeric, 3) AS dp_avg FROM patients;

\echo '4. Smokers'' total income, clamped to [0, 150000], epsilon = 1'
SELECT round(sum(income)::numeric, 2) AS exact, round(dp_sum(income, 0, 150000, 1.0)::numeric, 2) AS dp_sum FROM patients WHERE smoker;

\echo '5. Mean systolic pressure by age band (age / 20: band 1 is 20-39), epsilon = 1 each'
SELECT age / 20 AS age_band, round(avg(systolic), 2) AS exact,
       round(dp_avg(systolic, 80, 200, 1.0)::numeric, 2) AS dp_avg
  FROM patients GROUP BY 1 ORDER BY 1;

\echo '6. Median income, clamped to [0, 150000], epsilon = 0.5: smooth sensitivity with delta = 1e-6, its pure'
\echo '   (delta = 0) variant, and the default (the exponential mechanism); and the 90th percentile of systolic pressure'
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY income) AS exact,
       round(dp_median(income, 0, 150000, 0.5, 1e-6)::numeric, 2) AS dp_median_smooth,
       round(dp_median(income, 0, 150000, 0.5, 0)::numeric, 2) AS dp_median_smooth_pure,
       round(dp_median(income, 0, 150000, 0.5)::numeric, 2) AS dp_median
  FROM patients;
SELECT percentile_cont(0.9) WITHIN GROUP (ORDER BY systolic) AS exact,
       round(dp_percentile(systolic, 0.9, 80, 200, 0.5, 1e-6)::numeric, 1) AS dp_percentile FROM patients;

\echo '7. Bad input is an error that names the argument and its range:'
\set ON_ERROR_STOP 0
SELECT dp_sum(bmi, 50, 15, 0.5) FROM patients;
SELECT dp_avg(bmi, 15, 50, 0) FROM patients;
SELECT dp_percentile(bmi, 1.5, 15, 50) FROM patients;
\set ON_ERROR_STOP 1

\echo
\echo '8. The DBA protects the table: from now on role analyst reads it only through DP queries, and'
\echo '   needs no SELECT privilege on it. Its budget is epsilon = 1.5; every release is paid before it runs.'
SELECT dp.protect_table('patients');
DROP ROLE IF EXISTS analyst;
CREATE ROLE analyst LOGIN;
GRANT SELECT ON regions TO analyst;
SELECT role, epsilon_granted, epsilon_remaining FROM dp.grant_budget('analyst', 1.5);
SET ROLE analyst;
\echo 'Patients per climate: a join with the public regions table (many patients to one region)'
SELECT r.climate, dp_count(p.id, 0.5) AS patients
  FROM patients p JOIN regions r ON r.name = p.region GROUP BY r.climate ORDER BY r.climate;
BEGIN;
SELECT round(dp_avg(bmi, 15, 50, 0.5)::numeric, 2) AS mean_bmi FROM patients WHERE age >= 65;
ROLLBACK;
\echo 'ROLLBACK refunds nothing: 0.5 + 0.5 spent'
SELECT epsilon_spent, epsilon_remaining FROM dp.my_budget;
\echo 'Refused before anything is read or charged: a raw read, a query that makes every row depend on'
\echo 'one person (a window function), a data-dependent error, the planner''s estimates, and overspending'
\set ON_ERROR_STOP 0
SELECT * FROM patients WHERE id = 7;
SELECT dp_avg(top, 0, 150000, 0.01) FROM (SELECT max(income) OVER () AS top FROM patients) s;
SELECT dp_count(id, 0.01) FROM patients WHERE (CASE WHEN id = 7 AND income > 50000 THEN 100000 ELSE 1 END)::int2 > 0;
EXPLAIN SELECT dp_count(id, 0.01) FROM patients WHERE income > 100000;
SELECT dp_sum(income, 0, 150000, 0.75) FROM patients;
\set ON_ERROR_STOP 1
RESET ROLE;
\echo 'The ledger: one receipt per paid release'
SELECT id, role, aggregate, epsilon, round(noise_scale::numeric, 3) AS noise_scale, details->>'source' AS source,
       left(query_text, 50) AS query
  FROM dp.ledger WHERE role = 'analyst'::regrole ORDER BY id;

\echo
\echo '9. A data steward releases a private copy of the numeric columns (DPRP random projection) at'
\echo '   epsilon = 2, delta = 1e-5: paid before the table is read, padded to a noisy row count, with a receipt.'
DROP ROLE IF EXISTS steward;
CREATE ROLE steward LOGIN;
GRANT CREATE ON SCHEMA public TO steward;
SELECT role, epsilon_granted, delta_granted FROM dp.grant_budget('steward', 3, 1e-5);
SET ROLE steward;
SELECT r->>'rows_released' AS rows_released, r->>'epsilon' AS epsilon, r->>'delta' AS delta, r->>'k1' AS k1,
       r->>'k2' AS k2, r->>'neighbours' AS neighbours
  FROM dp.release_projection('patients', 'patients_private', ARRAY['age', 'bmi', 'systolic', 'income'],
                             ARRAY[18, 15, 80, 0]::float8[], ARRAY[90, 50, 200, 150000]::float8[], 2, 1e-5) r;
RESET ROLE;
\echo 'Column means of the table and of its private copy: every released row carries noise and is clamped to'
\echo 'the bounds, which pulls means toward the middle of the bounds; the copy serves models fitted on many rows'
SELECT 'patients' AS source, round(avg(age)::numeric, 1) AS age, round(avg(bmi)::numeric, 1) AS bmi,
       round(avg(systolic)::numeric, 1) AS systolic, round(avg(income)::numeric) AS income FROM patients
UNION ALL
SELECT 'patients_private', round(avg(age)::numeric, 1), round(avg(bmi)::numeric, 1),
       round(avg(systolic)::numeric, 1), round(avg(income)::numeric) FROM patients_private;

\echo
\echo '9b. The steward releases a synthetic copy of every column at epsilon = 1 (pure): each column''s public'
\echo '    values or bins declared first, a tree of 2-way marginals chosen and measured privately, a public report.'
SELECT dp.set_domain('patients', 'region', ARRAY['north', 'south', 'east', 'west', 'centre']);
SELECT dp.set_bounds('patients', 'age', 18, 90), dp.set_bounds('patients', 'bmi', 15, 50),
       dp.set_bounds('patients', 'systolic', 80, 200), dp.set_bounds('patients', 'income', 0, 150000);
SET ROLE steward;
SELECT r->>'rows_released' AS rows_released, r->>'epsilon' AS epsilon, r->'structure' AS tree
  FROM dp.release_synthetic('patients', 'patients_synthetic', ARRAY['age', 'region', 'bmi', 'systolic', 'income', 'smoker'], 1,
                            bins => 8) r;
RESET ROLE;
SELECT kind, item, left(detail::text, 70) AS detail FROM patients_synthetic_report WHERE kind IN ('model part', 'breakdown', 'released');
\echo 'The share of smokers and the mean income by region, in the table and in its synthetic copy'
SELECT 'patients' AS source, region, round(avg(smoker::int), 3) AS smokers, round(avg(income)::numeric) AS income
  FROM patients GROUP BY region
UNION ALL
SELECT 'patients_synthetic', region, round(avg(smoker::int), 3), round(avg(income)::numeric) FROM patients_synthetic GROUP BY region
ORDER BY region, source;

\echo
\echo '10. Choosing parameters (as the superuser, budget checks off for the demonstration):'
SET dp.require_budget = off;
\echo '    what a query would cost, without running it'
SELECT aggregate, epsilon, round(noise_scale::numeric, 4) AS noise_scale, (details->>'interval95')::numeric(12, 4) AS interval95
  FROM dp.preview('SELECT region, dp_avg(bmi, 15, 50, 0.5) FROM patients GROUP BY region');
\echo '    named privacy levels instead of epsilon, and a sum without bounds (20% of epsilon picks them privately)'
SET dp.privacy_level = 'high';
SELECT round(sum(income)::numeric) AS exact FROM patients;
SELECT round(dp_sum(income)::numeric) AS dp_sum_auto_bounds FROM patients;
RESET dp.privacy_level;
\echo '    the last releases of this session, with a 95% interval half-width of their noise'
SELECT aggregate, epsilon, round(value::numeric, 2) AS value, round(interval_95::numeric, 2) AS interval_95
  FROM dp.last_releases(3);
RESET dp.require_budget;

\echo
\echo '11. A time series, as BI tools send it: visits and revenue per month over the last year, with 95%'
\echo '    error bars. The time range is read from the clock once; the arithmetic below the aggregate'
\echo '    cannot fail (it saturates, and a division by 0 is skipped)'
SELECT dp.protect_table('visits');
SET dp.require_budget = off;
SELECT date_trunc('month', visit_date)::date AS month, dp_count(*) AS visits,
       dp_interval_low(dp_count(*)) AS low, dp_interval_high(dp_count(*)) AS high,
       round(dp_sum(price * quantity, 0, 1000)::numeric) AS revenue
  FROM visits WHERE visit_date > current_date - 365
 GROUP BY 1 ORDER BY 1;
RESET dp.require_budget;
