-- Regression script for protected tables and the DP query grammar, run by scripts/test.sh against a
-- real server; output compared with pgrx-tests/expected/protection.out. Counts are released at
-- epsilon = 1e6, where their noise is zero: the output is the same at every run.
CREATE EXTENSION pg_dp;
CREATE TABLE patients AS
  SELECT g AS id, CASE WHEN g = 7 THEN 'Bob' ELSE 'p' || g END AS name, g % 4 AS region,
         CASE WHEN g = 7 THEN 123456 ELSE g * 37 % 90000 END::float8 AS income, g % 3 = 0 AS smoker
    FROM generate_series(1, 400) g;
ALTER TABLE patients ADD PRIMARY KEY (id);
CREATE TABLE regions AS SELECT r AS id, (ARRAY['north', 'south', 'east', 'west'])[r + 1] AS name FROM generate_series(0, 3) r;
ALTER TABLE regions ADD PRIMARY KEY (id);
SELECT dp.protect_table('patients');
SELECT table_name, owner FROM dp.protected_tables;
SET client_min_messages = warning;
DROP ROLE IF EXISTS regress_dp_only;
RESET client_min_messages;
CREATE ROLE regress_dp_only;
GRANT SELECT ON regions TO regress_dp_only;
SET dp.require_budget = off;
SET ROLE regress_dp_only;
-- admitted
SELECT dp_count(id, 1e6) FROM patients;
SELECT r.name, dp_count(p.id, 1e6) FROM patients p JOIN regions r ON r.id = p.region GROUP BY r.name ORDER BY r.name;
SELECT region, dp_count(id, 1e6) FILTER (WHERE smoker) AS smokers FROM patients WHERE income BETWEEN 0 AND 50000 GROUP BY region ORDER BY region;
SELECT (SELECT dp_count(id, 1e6) FROM patients WHERE smoker) * 100 / (SELECT dp_count(id, 1e6) FROM patients) AS smoker_percent;
-- refused
SELECT * FROM patients WHERE name = 'Bob';
SELECT count(*) FROM patients;
SELECT dp_avg(b, 0, 2000000, 0.01) FROM (SELECT max(CASE WHEN name = 'Bob' THEN income END) OVER () AS b FROM patients) s;
SELECT dp_count(id, 1e-9) FROM patients WHERE (CASE WHEN name = 'Bob' AND income > 100000 THEN 100000 ELSE 1 END)::int2 > 0;
SELECT dp_count(id, 1e-9) FROM patients WHERE EXISTS (SELECT 1 FROM patients p WHERE p.name = 'Bob' AND p.income > 100000);
SELECT dp_count(id, 0.1) FROM (SELECT id FROM patients ORDER BY income DESC LIMIT 1) s;
SELECT dp_count(p.id, 0.1) FROM patients p JOIN patients q ON q.id = p.id;
SELECT dp_sum(income, 0, (SELECT max(id) FROM regions), 0.1) FROM patients;
EXPLAIN SELECT dp_count(id, 0.1) FROM patients WHERE income > 100000;
SELECT histogram_bounds FROM pg_stats WHERE tablename = 'patients';
SELECT dp.unprotect_table('patients');
RESET ROLE;
-- the owner reads the table directly
SELECT count(*) FROM patients;
