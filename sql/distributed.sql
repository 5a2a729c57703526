-- pg_dp: DP levels over Citus tables (hand-written; loaded after cache.sql). docs/distributed.md and
-- docs/privacy/distributed.md. The coordinator rewrites an admitted level over a Citus table into an
-- exact query (built-in sum and count of pg_dp's grid integers, which Citus aggregates partially on the
-- workers) run by dp.distributed_rows as the bootstrap superuser, and an outer level of "merge"
-- aggregates that rebuild each group's exact state and release it with the DP aggregate's own final
-- function, charged once before any shard is read.

CREATE FUNCTION dp.exact_grid(value "any", kind int4, lower "any", upper "any", epsilon float8, squared bool) RETURNS int8
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_exact_grid';
COMMENT ON FUNCTION dp.exact_grid("any", int4, "any", "any", float8, bool) IS 'pg_dp internal: one row''s value as the DP aggregate of this kind and parameters accumulates it (clamped to [lower, upper], on its grid), or its squared distance from the grid''s centre; NULL for NULL and NaN. Run only by the exact query of a DP level over a Citus table';
REVOKE EXECUTE ON FUNCTION dp.exact_grid("any", int4, "any", "any", float8, bool) FROM PUBLIC;

CREATE FUNCTION dp.distributed_rows(exact_query text) RETURNS SETOF record
    LANGUAGE c VOLATILE STRICT AS 'MODULE_PATHNAME', 'dp_distributed_rows';
COMMENT ON FUNCTION dp.distributed_rows(text) IS 'pg_dp internal: runs the exact query of a DP level over a Citus table for the DP Release node that was charged for it; refuses any other call';

CREATE FUNCTION dp.merge_trans(internal, numeric[], float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_trans';
CREATE FUNCTION dp.merge_trans(internal, numeric[], "any", "any", float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_trans';
CREATE FUNCTION dp.merge_trans(internal, numeric[], "any", "any", float8, int8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_trans';
CREATE FUNCTION dp.merge_keep_group_trans(int8, numeric[], float8, float8) RETURNS int8
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_keep_group_trans';
COMMENT ON FUNCTION dp.merge_trans(internal, numeric[], float8) IS 'pg_dp internal: transition function of the merge aggregates (a group''s exact sums from the workers)';
COMMENT ON FUNCTION dp.merge_trans(internal, numeric[], "any", "any", float8) IS 'pg_dp internal: transition function of the merge aggregates (a group''s exact sums from the workers)';
COMMENT ON FUNCTION dp.merge_trans(internal, numeric[], "any", "any", float8, int8) IS 'pg_dp internal: transition function of the merge aggregates (a group''s exact sums from the workers)';
COMMENT ON FUNCTION dp.merge_keep_group_trans(int8, numeric[], float8, float8) IS 'pg_dp internal: transition function of dp.merge_keep_group';
REVOKE EXECUTE ON FUNCTION dp.merge_trans(internal, numeric[], float8), dp.merge_trans(internal, numeric[], "any", "any", float8),
    dp.merge_trans(internal, numeric[], "any", "any", float8, int8), dp.merge_keep_group_trans(int8, numeric[], float8, float8) FROM PUBLIC;

CREATE AGGREGATE dp.merge_count(numeric[], float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.count_final);
COMMENT ON AGGREGATE dp.merge_count(numeric[], float8) IS 'pg_dp internal: dp_count from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_sum(numeric[], int2, int2, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.sum_int_final);
COMMENT ON AGGREGATE dp.merge_sum(numeric[], int2, int2, float8) IS 'pg_dp internal: dp_sum over int2 from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_sum(numeric[], int4, int4, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.sum_int_final);
COMMENT ON AGGREGATE dp.merge_sum(numeric[], int4, int4, float8) IS 'pg_dp internal: dp_sum over int4 from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_sum(numeric[], int8, int8, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.sum_int8_final);
COMMENT ON AGGREGATE dp.merge_sum(numeric[], int8, int8, float8) IS 'pg_dp internal: dp_sum over int8 from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_sum(numeric[], float8, float8, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.sum_float8_final);
COMMENT ON AGGREGATE dp.merge_sum(numeric[], float8, float8, float8) IS 'pg_dp internal: dp_sum over float8 from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_sum(numeric[], numeric, numeric, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.sum_numeric_final);
COMMENT ON AGGREGATE dp.merge_sum(numeric[], numeric, numeric, float8) IS 'pg_dp internal: dp_sum over numeric from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_avg(numeric[], float8, float8, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.avg_float8_final);
COMMENT ON AGGREGATE dp.merge_avg(numeric[], float8, float8, float8) IS 'pg_dp internal: dp_avg over float8 from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_avg(numeric[], float8, float8, float8, int8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.avg_float8_final);
COMMENT ON AGGREGATE dp.merge_avg(numeric[], float8, float8, float8, int8) IS 'pg_dp internal: dp_avg over float8 with a public count from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_variance(numeric[], float8, float8, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.variance_float8_final);
COMMENT ON AGGREGATE dp.merge_variance(numeric[], float8, float8, float8) IS 'pg_dp internal: dp_variance over float8 from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_stddev(numeric[], float8, float8, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.stddev_float8_final);
COMMENT ON AGGREGATE dp.merge_stddev(numeric[], float8, float8, float8) IS 'pg_dp internal: dp_stddev over float8 from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_avg(numeric[], numeric, numeric, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.avg_numeric_final);
COMMENT ON AGGREGATE dp.merge_avg(numeric[], numeric, numeric, float8) IS 'pg_dp internal: dp_avg over numeric from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_avg(numeric[], numeric, numeric, float8, int8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.avg_numeric_final);
COMMENT ON AGGREGATE dp.merge_avg(numeric[], numeric, numeric, float8, int8) IS 'pg_dp internal: dp_avg over numeric with a public count from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_variance(numeric[], numeric, numeric, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.variance_numeric_final);
COMMENT ON AGGREGATE dp.merge_variance(numeric[], numeric, numeric, float8) IS 'pg_dp internal: dp_variance over numeric from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_stddev(numeric[], numeric, numeric, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.stddev_numeric_final);
COMMENT ON AGGREGATE dp.merge_stddev(numeric[], numeric, numeric, float8) IS 'pg_dp internal: dp_stddev over numeric from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_keep_group(numeric[], float8, float8) (SFUNC = dp.merge_keep_group_trans, STYPE = int8, FINALFUNC = dp.keep_group_final, INITCOND = '0');
COMMENT ON AGGREGATE dp.merge_keep_group(numeric[], float8, float8) IS 'pg_dp internal: dp.keep_group from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
-- a noisy aggregate is VOLATILE (CREATE AGGREGATE records IMMUTABLE)
UPDATE pg_catalog.pg_proc SET provolatile = 'v'
 WHERE oid IN ('dp.merge_count(numeric[], float8)'::regprocedure,
               'dp.merge_sum(numeric[], int2, int2, float8)'::regprocedure,
               'dp.merge_sum(numeric[], int4, int4, float8)'::regprocedure,
               'dp.merge_sum(numeric[], int8, int8, float8)'::regprocedure,
               'dp.merge_sum(numeric[], float8, float8, float8)'::regprocedure,
               'dp.merge_sum(numeric[], numeric, numeric, float8)'::regprocedure,
               'dp.merge_avg(numeric[], float8, float8, float8)'::regprocedure,
               'dp.merge_avg(numeric[], float8, float8, float8, int8)'::regprocedure,
               'dp.merge_variance(numeric[], float8, float8, float8)'::regprocedure,
               'dp.merge_stddev(numeric[], float8, float8, float8)'::regprocedure,
               'dp.merge_avg(numeric[], numeric, numeric, float8)'::regprocedure,
               'dp.merge_avg(numeric[], numeric, numeric, float8, int8)'::regprocedure,
               'dp.merge_variance(numeric[], numeric, numeric, float8)'::regprocedure,
               'dp.merge_stddev(numeric[], numeric, numeric, float8)'::regprocedure,
               'dp.merge_keep_group(numeric[], float8, float8)'::regprocedure);

-- Quantiles: the exact query groups by the value too, one row per group and value with its count
-- (ARRAY[value, count], float8[] or int8[]); the merge aggregates push each value count times into
-- the quantile's own state and release it with the quantile's own final function.

CREATE FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any") RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_quantile_trans';
COMMENT ON FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any") IS 'pg_dp internal: transition function of the quantiles'' merge aggregates (a group''s values and their counts from the workers)';
REVOKE EXECUTE ON FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any") FROM PUBLIC;
CREATE FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any", "any") RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_quantile_trans';
COMMENT ON FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any", "any") IS 'pg_dp internal: transition function of the quantiles'' merge aggregates (a group''s values and their counts from the workers)';
REVOKE EXECUTE ON FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any", "any") FROM PUBLIC;
CREATE FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any", "any", "any") RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_quantile_trans';
COMMENT ON FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any", "any", "any") IS 'pg_dp internal: transition function of the quantiles'' merge aggregates (a group''s values and their counts from the workers)';
REVOKE EXECUTE ON FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any", "any", "any") FROM PUBLIC;
CREATE FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any", "any", "any", "any") RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_quantile_trans';
COMMENT ON FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any", "any", "any", "any") IS 'pg_dp internal: transition function of the quantiles'' merge aggregates (a group''s values and their counts from the workers)';
REVOKE EXECUTE ON FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any", "any", "any", "any") FROM PUBLIC;
CREATE AGGREGATE dp.merge_median(float8[], float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(float8[], float8, float8) IS 'pg_dp internal: dp_median over float8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_median(float8[], float8, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(float8[], float8, float8, float8) IS 'pg_dp internal: dp_median over float8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_median(float8[], float8, float8, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(float8[], float8, float8, float8, float8) IS 'pg_dp internal: dp_median over float8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_median(int8[], int4, int4) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(int8[], int4, int4) IS 'pg_dp internal: dp_median over int4 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_median(int8[], int4, int4, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(int8[], int4, int4, float8) IS 'pg_dp internal: dp_median over int4 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_median(int8[], int4, int4, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(int8[], int4, int4, float8, float8) IS 'pg_dp internal: dp_median over int4 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_median(int8[], int8, int8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(int8[], int8, int8) IS 'pg_dp internal: dp_median over int8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_median(int8[], int8, int8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(int8[], int8, int8, float8) IS 'pg_dp internal: dp_median over int8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_median(int8[], int8, int8, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(int8[], int8, int8, float8, float8) IS 'pg_dp internal: dp_median over int8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(float8[], float8, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(float8[], float8, float8, float8) IS 'pg_dp internal: dp_percentile over float8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(float8[], float8, float8, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(float8[], float8, float8, float8, float8) IS 'pg_dp internal: dp_percentile over float8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(float8[], float8, float8, float8, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(float8[], float8, float8, float8, float8, float8) IS 'pg_dp internal: dp_percentile over float8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(int8[], float8, int4, int4) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(int8[], float8, int4, int4) IS 'pg_dp internal: dp_percentile over int4 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(int8[], float8, int4, int4, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(int8[], float8, int4, int4, float8) IS 'pg_dp internal: dp_percentile over int4 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(int8[], float8, int4, int4, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(int8[], float8, int4, int4, float8, float8) IS 'pg_dp internal: dp_percentile over int4 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(int8[], float8, int8, int8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(int8[], float8, int8, int8) IS 'pg_dp internal: dp_percentile over int8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(int8[], float8, int8, int8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(int8[], float8, int8, int8, float8) IS 'pg_dp internal: dp_percentile over int8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(int8[], float8, int8, int8, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(int8[], float8, int8, int8, float8, float8) IS 'pg_dp internal: dp_percentile over int8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile_em(float8[], float8, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile_em(float8[], float8, float8, float8) IS 'pg_dp internal: dp_percentile_em over float8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile_em(float8[], float8, float8, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile_em(float8[], float8, float8, float8, float8) IS 'pg_dp internal: dp_percentile_em over float8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile_em(int8[], float8, int4, int4) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile_em(int8[], float8, int4, int4) IS 'pg_dp internal: dp_percentile_em over int4 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile_em(int8[], float8, int4, int4, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile_em(int8[], float8, int4, int4, float8) IS 'pg_dp internal: dp_percentile_em over int4 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile_em(int8[], float8, int8, int8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile_em(int8[], float8, int8, int8) IS 'pg_dp internal: dp_percentile_em over int8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile_em(int8[], float8, int8, int8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile_em(int8[], float8, int8, int8, float8) IS 'pg_dp internal: dp_percentile_em over int8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
UPDATE pg_catalog.pg_proc SET provolatile = 'v'
 WHERE oid IN ('dp.merge_median(float8[], float8, float8)'::regprocedure,
               'dp.merge_median(float8[], float8, float8, float8)'::regprocedure,
               'dp.merge_median(float8[], float8, float8, float8, float8)'::regprocedure,
               'dp.merge_median(int8[], int4, int4)'::regprocedure,
               'dp.merge_median(int8[], int4, int4, float8)'::regprocedure,
               'dp.merge_median(int8[], int4, int4, float8, float8)'::regprocedure,
               'dp.merge_median(int8[], int8, int8)'::regprocedure,
               'dp.merge_median(int8[], int8, int8, float8)'::regprocedure,
               'dp.merge_median(int8[], int8, int8, float8, float8)'::regprocedure,
               'dp.merge_percentile(float8[], float8, float8, float8)'::regprocedure,
               'dp.merge_percentile(float8[], float8, float8, float8, float8)'::regprocedure,
               'dp.merge_percentile(float8[], float8, float8, float8, float8, float8)'::regprocedure,
               'dp.merge_percentile(int8[], float8, int4, int4)'::regprocedure,
               'dp.merge_percentile(int8[], float8, int4, int4, float8)'::regprocedure,
               'dp.merge_percentile(int8[], float8, int4, int4, float8, float8)'::regprocedure,
               'dp.merge_percentile(int8[], float8, int8, int8)'::regprocedure,
               'dp.merge_percentile(int8[], float8, int8, int8, float8)'::regprocedure,
               'dp.merge_percentile(int8[], float8, int8, int8, float8, float8)'::regprocedure,
               'dp.merge_percentile_em(float8[], float8, float8, float8)'::regprocedure,
               'dp.merge_percentile_em(float8[], float8, float8, float8, float8)'::regprocedure,
               'dp.merge_percentile_em(int8[], float8, int4, int4)'::regprocedure,
               'dp.merge_percentile_em(int8[], float8, int4, int4, float8)'::regprocedure,
               'dp.merge_percentile_em(int8[], float8, int8, int8)'::regprocedure,
               'dp.merge_percentile_em(int8[], float8, int8, int8, float8)'::regprocedure);

-- Automatic bounds: dp_sum and dp_avg without bounds keep a histogram of binary magnitudes. The exact
-- query groups by each such value's bin too (dp.exact_magnitude(value, false)) and writes ARRAY[bin,
-- rows, Σ significands] (dp.exact_magnitude(value, true) summed); dp.merge_auto_* add the bins into
-- the same histogram and release with the same final function. Quantiles without bounds keep their
-- values, merged like the bounded ones.
CREATE FUNCTION dp.exact_magnitude(value "any", significand bool) RETURNS int8
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_exact_magnitude';
COMMENT ON FUNCTION dp.exact_magnitude("any", bool) IS 'pg_dp internal: one row''s magnitude bin as dp_sum and dp_avg without bounds count it, or (significand) what it adds to the bin''s significand sum; NULL for NULL and NaN. Run only by the exact query of a DP level over a Citus table';
REVOKE EXECUTE ON FUNCTION dp.exact_magnitude("any", bool) FROM PUBLIC;
CREATE FUNCTION dp.merge_auto_trans(internal, numeric[]) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_auto_trans';
CREATE FUNCTION dp.merge_auto_trans(internal, numeric[], float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_auto_trans';
COMMENT ON FUNCTION dp.merge_auto_trans(internal, numeric[]) IS 'pg_dp internal: transition function of the merge aggregates of dp_sum and dp_avg without bounds (a group''s magnitude bins from the workers)';
COMMENT ON FUNCTION dp.merge_auto_trans(internal, numeric[], float8) IS 'pg_dp internal: transition function of the merge aggregates of dp_sum and dp_avg without bounds (a group''s magnitude bins from the workers)';
REVOKE EXECUTE ON FUNCTION dp.merge_auto_trans(internal, numeric[]), dp.merge_auto_trans(internal, numeric[], float8) FROM PUBLIC;
CREATE FUNCTION dp.merge_quantile_trans(internal, "any") RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_quantile_trans';
COMMENT ON FUNCTION dp.merge_quantile_trans(internal, "any") IS 'pg_dp internal: transition function of the quantiles'' merge aggregates (a group''s values and their counts from the workers)';
REVOKE EXECUTE ON FUNCTION dp.merge_quantile_trans(internal, "any") FROM PUBLIC;
CREATE FUNCTION dp.merge_quantile_trans(internal, "any", "any") RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_quantile_trans';
COMMENT ON FUNCTION dp.merge_quantile_trans(internal, "any", "any") IS 'pg_dp internal: transition function of the quantiles'' merge aggregates (a group''s values and their counts from the workers)';
REVOKE EXECUTE ON FUNCTION dp.merge_quantile_trans(internal, "any", "any") FROM PUBLIC;
CREATE AGGREGATE dp.merge_auto_sum_int2(numeric[]) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_int8);
COMMENT ON AGGREGATE dp.merge_auto_sum_int2(numeric[]) IS 'pg_dp internal: dp_sum over int2 without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_sum_int2(numeric[], float8) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_int8);
COMMENT ON AGGREGATE dp.merge_auto_sum_int2(numeric[], float8) IS 'pg_dp internal: dp_sum over int2 without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_sum_int4(numeric[]) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_int8);
COMMENT ON AGGREGATE dp.merge_auto_sum_int4(numeric[]) IS 'pg_dp internal: dp_sum over int4 without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_sum_int4(numeric[], float8) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_int8);
COMMENT ON AGGREGATE dp.merge_auto_sum_int4(numeric[], float8) IS 'pg_dp internal: dp_sum over int4 without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_sum_int8(numeric[]) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_numeric);
COMMENT ON AGGREGATE dp.merge_auto_sum_int8(numeric[]) IS 'pg_dp internal: dp_sum over int8 without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_sum_int8(numeric[], float8) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_numeric);
COMMENT ON AGGREGATE dp.merge_auto_sum_int8(numeric[], float8) IS 'pg_dp internal: dp_sum over int8 without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_sum_float8(numeric[]) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_float8);
COMMENT ON AGGREGATE dp.merge_auto_sum_float8(numeric[]) IS 'pg_dp internal: dp_sum over float8 without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_sum_float8(numeric[], float8) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_float8);
COMMENT ON AGGREGATE dp.merge_auto_sum_float8(numeric[], float8) IS 'pg_dp internal: dp_sum over float8 without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_sum_numeric(numeric[]) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_numeric);
COMMENT ON AGGREGATE dp.merge_auto_sum_numeric(numeric[]) IS 'pg_dp internal: dp_sum over numeric without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_sum_numeric(numeric[], float8) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_numeric);
COMMENT ON AGGREGATE dp.merge_auto_sum_numeric(numeric[], float8) IS 'pg_dp internal: dp_sum over numeric without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_avg_float8(numeric[]) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_float8);
COMMENT ON AGGREGATE dp.merge_auto_avg_float8(numeric[]) IS 'pg_dp internal: dp_avg over float8 without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_avg_float8(numeric[], float8) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_float8);
COMMENT ON AGGREGATE dp.merge_auto_avg_float8(numeric[], float8) IS 'pg_dp internal: dp_avg over float8 without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_avg_numeric(numeric[]) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_numeric);
COMMENT ON AGGREGATE dp.merge_auto_avg_numeric(numeric[]) IS 'pg_dp internal: dp_avg over numeric without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_avg_numeric(numeric[], float8) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_numeric);
COMMENT ON AGGREGATE dp.merge_auto_avg_numeric(numeric[], float8) IS 'pg_dp internal: dp_avg over numeric without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_median(float8[]) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_auto_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(float8[]) IS 'pg_dp internal: dp_median over float8 without bounds from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_median(float8[], float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_auto_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(float8[], float8) IS 'pg_dp internal: dp_median over float8 without bounds from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(float8[], float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_auto_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(float8[], float8) IS 'pg_dp internal: dp_percentile over float8 without bounds from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(float8[], float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_auto_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(float8[], float8, float8) IS 'pg_dp internal: dp_percentile over float8 without bounds from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
UPDATE pg_catalog.pg_proc SET provolatile = 'v'
 WHERE oid IN ('dp.merge_auto_sum_int2(numeric[])'::regprocedure,
               'dp.merge_auto_sum_int2(numeric[], float8)'::regprocedure,
               'dp.merge_auto_sum_int4(numeric[])'::regprocedure,
               'dp.merge_auto_sum_int4(numeric[], float8)'::regprocedure,
               'dp.merge_auto_sum_int8(numeric[])'::regprocedure,
               'dp.merge_auto_sum_int8(numeric[], float8)'::regprocedure,
               'dp.merge_auto_sum_float8(numeric[])'::regprocedure,
               'dp.merge_auto_sum_float8(numeric[], float8)'::regprocedure,
               'dp.merge_auto_sum_numeric(numeric[])'::regprocedure,
               'dp.merge_auto_sum_numeric(numeric[], float8)'::regprocedure,
               'dp.merge_auto_avg_float8(numeric[])'::regprocedure,
               'dp.merge_auto_avg_float8(numeric[], float8)'::regprocedure,
               'dp.merge_auto_avg_numeric(numeric[])'::regprocedure,
               'dp.merge_auto_avg_numeric(numeric[], float8)'::regprocedure,
               'dp.merge_median(float8[])'::regprocedure,
               'dp.merge_median(float8[], float8)'::regprocedure,
               'dp.merge_percentile(float8[], float8)'::regprocedure,
               'dp.merge_percentile(float8[], float8, float8)'::regprocedure);
