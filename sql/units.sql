-- pg_dp: privacy units and private GROUP BY keys (hand-written; loaded after protect.sql).
--
-- A DP query over a protected table that declares a privacy unit is rewritten into two levels
-- (src/query/rewrite.rs): the per-unit aggregates below compute one value per unit and group from
-- that unit's rows, and the DP aggregate of the second level treats each value as one row. They
-- release nothing (the grammar refuses them over protected tables in any query pg_dp did not write)
-- and are executable by PUBLIC so that the rewritten query runs with the caller's rights.
-- dp.keep_group is the DP partition selection of a group whose key is private: a release, charged
-- like the aggregates.

CREATE FUNCTION dp.unit_sum_int2_step(int8, int2, int2, int2) RETURNS int8
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unit_sum_int2_step';
CREATE FUNCTION dp.unit_sum_int4_step(int8, int4, int4, int4) RETURNS int8
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unit_sum_int4_step';
CREATE FUNCTION dp.unit_sum_int8_step(int8, int8, int8, int8) RETURNS int8
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unit_sum_int8_step';
CREATE FUNCTION dp.unit_sum_float8_step(float8, float8, float8, float8) RETURNS float8
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unit_sum_float8_step';
CREATE FUNCTION dp.unit_int_combine(int8, int8) RETURNS int8 LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unit_int_combine';
CREATE FUNCTION dp.unit_float_combine(float8, float8) RETURNS float8 LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unit_float_combine';
CREATE FUNCTION dp.unit_sum_to_int2(int8) RETURNS int2 LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unit_sum_to_int2';
CREATE FUNCTION dp.unit_sum_to_int4(int8) RETURNS int4 LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unit_sum_to_int4';
CREATE FUNCTION dp.unit_float8_trans(internal, float8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unit_float8_trans';
CREATE FUNCTION dp.unit_numeric_trans(internal, numeric, numeric, numeric) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unit_numeric_trans';
CREATE FUNCTION dp.unit_sum_numeric_final(internal) RETURNS numeric LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unit_sum_numeric_final';
CREATE FUNCTION dp.unit_mean_float8_final(internal) RETURNS float8 LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unit_mean_float8_final';
CREATE FUNCTION dp.unit_mean_numeric_final(internal) RETURNS numeric LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unit_mean_numeric_final';
CREATE FUNCTION dp.unit_count_final(int8) RETURNS int4 LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unit_count_final';
CREATE FUNCTION dp.unit_combine(internal, internal) RETURNS internal LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unit_combine';
CREATE FUNCTION dp.unit_serialize(internal) RETURNS bytea LANGUAGE c STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unit_serialize';
CREATE FUNCTION dp.unit_deserialize(bytea, internal) RETURNS internal LANGUAGE c STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unit_deserialize';

CREATE AGGREGATE dp.unit_sum(int2, int2, int2) (SFUNC = dp.unit_sum_int2_step, STYPE = int8, FINALFUNC = dp.unit_sum_to_int2,
    COMBINEFUNC = dp.unit_int_combine, PARALLEL = SAFE);
CREATE AGGREGATE dp.unit_sum(int4, int4, int4) (SFUNC = dp.unit_sum_int4_step, STYPE = int8, FINALFUNC = dp.unit_sum_to_int4,
    COMBINEFUNC = dp.unit_int_combine, PARALLEL = SAFE);
CREATE AGGREGATE dp.unit_sum(int8, int8, int8) (SFUNC = dp.unit_sum_int8_step, STYPE = int8,
    COMBINEFUNC = dp.unit_int_combine, PARALLEL = SAFE);
CREATE AGGREGATE dp.unit_sum(float8, float8, float8) (SFUNC = dp.unit_sum_float8_step, STYPE = float8,
    COMBINEFUNC = dp.unit_float_combine, PARALLEL = SAFE);
CREATE AGGREGATE dp.unit_sum(numeric, numeric, numeric) (SFUNC = dp.unit_numeric_trans, STYPE = internal, FINALFUNC = dp.unit_sum_numeric_final,
    COMBINEFUNC = dp.unit_combine, SERIALFUNC = dp.unit_serialize, DESERIALFUNC = dp.unit_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE dp.unit_mean(float8, float8, float8) (SFUNC = dp.unit_float8_trans, STYPE = internal, FINALFUNC = dp.unit_mean_float8_final,
    COMBINEFUNC = dp.unit_combine, SERIALFUNC = dp.unit_serialize, DESERIALFUNC = dp.unit_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE dp.unit_mean(numeric, numeric, numeric) (SFUNC = dp.unit_numeric_trans, STYPE = internal, FINALFUNC = dp.unit_mean_numeric_final,
    COMBINEFUNC = dp.unit_combine, SERIALFUNC = dp.unit_serialize, DESERIALFUNC = dp.unit_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE dp.unit_count(*) (SFUNC = pg_catalog.int8inc, STYPE = int8, INITCOND = '0', FINALFUNC = dp.unit_count_final,
    COMBINEFUNC = pg_catalog.int8pl, PARALLEL = SAFE);
CREATE AGGREGATE dp.unit_count("any") (SFUNC = pg_catalog.int8inc_any, STYPE = int8, INITCOND = '0', FINALFUNC = dp.unit_count_final,
    COMBINEFUNC = pg_catalog.int8pl, PARALLEL = SAFE);

CREATE FUNCTION dp.random_order() RETURNS float8 LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_random_order';
CREATE FUNCTION dp.per_group(bool) RETURNS bool LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_per_group';

CREATE FUNCTION dp.keep_group_trans(int8, "any", float8, float8) RETURNS int8
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_keep_group_trans';
CREATE FUNCTION dp.keep_group_final(int8) RETURNS bool
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_keep_group_final';
CREATE AGGREGATE dp.keep_group("any", float8, float8) (SFUNC = dp.keep_group_trans, STYPE = int8, INITCOND = '0',
    FINALFUNC = dp.keep_group_final, COMBINEFUNC = pg_catalog.int8pl, PARALLEL = SAFE);

COMMENT ON AGGREGATE dp.unit_sum(int2, int2, int2) IS 'pg_dp internal: one privacy unit''s sum of values clamped to [lower, upper], saturated to int2 (the per-unit level of dp_sum, which clamps it to [lower, upper])';
COMMENT ON AGGREGATE dp.unit_sum(int4, int4, int4) IS 'pg_dp internal: one privacy unit''s sum of values clamped to [lower, upper], saturated to int4 (the per-unit level of dp_sum, which clamps it to [lower, upper])';
COMMENT ON AGGREGATE dp.unit_sum(int8, int8, int8) IS 'pg_dp internal: one privacy unit''s sum of values clamped to [lower, upper], saturated (the per-unit level of dp_sum, which clamps it to [lower, upper])';
COMMENT ON AGGREGATE dp.unit_sum(float8, float8, float8) IS 'pg_dp internal: one privacy unit''s sum of values clamped to [lower, upper], NaN skipped (the per-unit level of dp_sum, which clamps it to [lower, upper])';
COMMENT ON AGGREGATE dp.unit_sum(numeric, numeric, numeric) IS 'pg_dp internal: one privacy unit''s sum of values clamped to [lower, upper], clamped to [lower, upper] (the per-unit level of dp_sum)';
COMMENT ON AGGREGATE dp.unit_mean(float8, float8, float8) IS 'pg_dp internal: the mean of one privacy unit''s values clamped to [lower, upper] (the per-unit level of dp_avg and the quantiles)';
COMMENT ON AGGREGATE dp.unit_mean(numeric, numeric, numeric) IS 'pg_dp internal: the mean of one privacy unit''s values clamped to [lower, upper] (the per-unit level of dp_avg)';
COMMENT ON AGGREGATE dp.unit_count(*) IS 'pg_dp internal: one privacy unit''s rows as int4 (the per-unit level of dp_count(*); the DP level clamps it to max_count_per_unit)';
COMMENT ON AGGREGATE dp.unit_count("any") IS 'pg_dp internal: one privacy unit''s non-NULL values as int4 (the per-unit level of dp_count(value))';
COMMENT ON FUNCTION dp.per_group(bool) IS 'pg_dp internal: returns its argument; volatile, so that a condition on the GROUP BY keys that pg_dp''s rewrite places in a DP level''s HAVING stays there and runs once per group';
COMMENT ON FUNCTION dp.random_order() IS 'pg_dp internal: a uniform random number from the CSPRNG, which orders each privacy unit''s groups when it contributes to too many';
COMMENT ON AGGREGATE dp.keep_group("any", float8, float8) IS 'pg_dp: DP partition selection of one group: counts the group''s non-NULL values (privacy units) and returns whether the group may appear, (epsilon, delta)-DP per group; charged like the DP aggregates';
COMMENT ON FUNCTION dp.keep_group_trans(int8, "any", float8, float8) IS 'pg_dp internal: transition function of dp.keep_group';
COMMENT ON FUNCTION dp.keep_group_final(int8) IS 'pg_dp internal: final function of dp.keep_group (draws the selection)';

DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'dp'::regnamespace
                AND (p.proname LIKE 'unit\_%' OR p.proname IN ('keep_group_trans', 'keep_group_final')) AND p.prokind = 'f' LOOP
        EXECUTE pg_catalog.format('COMMENT ON FUNCTION %s IS %L', f,
            'pg_dp internal: support function of the per-unit aggregates or of dp.keep_group');
        EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
END
$$;
-- the aggregates themselves run in the queries pg_dp writes, with the caller's rights
GRANT EXECUTE ON FUNCTION dp.unit_sum(int2, int2, int2), dp.unit_sum(int4, int4, int4), dp.unit_sum(int8, int8, int8),
    dp.unit_sum(float8, float8, float8), dp.unit_sum(numeric, numeric, numeric), dp.unit_mean(float8, float8, float8),
    dp.unit_mean(numeric, numeric, numeric), dp.unit_count(), dp.unit_count("any"), dp.random_order(), dp.per_group(bool),
    dp.keep_group("any", float8, float8) TO PUBLIC;
