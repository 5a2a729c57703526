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
