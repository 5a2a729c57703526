-- Regression script run by scripts/test.sh against a real server; output compared with
-- pgrx-tests/expected/basics.out. dp.seed makes the noise reproducible (a superuser-only
-- demonstration setting that removes all privacy).
CREATE EXTENSION pg_dp;
CREATE TABLE r AS SELECT g AS i, g::float8 / 4 AS x, (g % 3) AS k FROM generate_series(1, 100) g;
SET dp.seed = 42;
SELECT dp_count(*) AS n, dp_count(i, 0.5) AS n_half, dp_sum(i, 0, 50, 0.5) AS s_int,
       dp_sum(x, 0, 25, 0.5) AS s_real, round(dp_avg(x, 0, 25, 0.5)::numeric, 6) AS mean FROM r;
SELECT k, dp_count(i, 1.0) FROM r GROUP BY k ORDER BY k;
SELECT dp_sum(x, 0, 10, 0.25) AS empty_sum FROM r WHERE false;
-- quantiles: smooth sensitivity (delta > 0 and the pure default) and the exponential mechanism
SELECT round(dp_median(x, 0, 25, 0.5, 1e-6)::numeric, 6) AS med, round(dp_median(x, 0, 25, 0.5)::numeric, 6) AS med_pure,
       round(dp_percentile(x, 0.9, 0, 25, 0.5, 1e-6)::numeric, 6) AS p90,
       round(dp_percentile_em(x, 0.9, 0, 25, 0.5)::numeric, 6) AS p90_em FROM r;
SELECT dp_percentile(x, 2, 0, 25) FROM r;
SELECT dp_median(x, 0, 25, 0.5, 1) FROM r;
-- the same seed gives the same releases
SET dp.seed = 42;
SELECT dp_count(*) AS n, dp_count(i, 0.5) AS n_half FROM r;
-- errors name the argument and its range
SELECT dp_sum(x, 10, 0) FROM r;
SELECT dp_avg(x, 0, 10, 0) FROM r;
SELECT dp_count(i, 'Infinity') FROM r;
SELECT dp_sum(x, 0, 'NaN') FROM r;
SELECT dp_sum(i, 0, i) FROM r;
SELECT dp_sum(x, 0, 10) OVER () FROM r LIMIT 1;
\da dp_*
