-- pg_dp: SQL objects (hand-written; loaded by extension_sql_file! from src/lib.rs).
--
-- Aggregates use STYPE = internal with combine/serial/deserial functions so that they run in parallel
-- plans. Support functions live in schema dp and are not executable by PUBLIC: nobody can read an
-- exact state. Final functions, which add the noise, are VOLATILE, and so are the aggregates.

CREATE SCHEMA dp;
COMMENT ON SCHEMA dp IS 'pg_dp internals and administration';
GRANT USAGE ON SCHEMA dp TO PUBLIC;

CREATE FUNCTION dp.combine(internal, internal) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_combine';
CREATE FUNCTION dp.serialize(internal) RETURNS bytea
    LANGUAGE c STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_serialize';
CREATE FUNCTION dp.deserialize(bytea, internal) RETURNS internal
    LANGUAGE c STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_deserialize';
COMMENT ON FUNCTION dp.combine(internal, internal) IS 'pg_dp internal: merges two partial aggregate states (parallel aggregation)';
COMMENT ON FUNCTION dp.serialize(internal) IS 'pg_dp internal: serializes a partial aggregate state for a parallel worker';
COMMENT ON FUNCTION dp.deserialize(bytea, internal) IS 'pg_dp internal: deserializes a partial aggregate state from a parallel worker';


-- dp_count -------------------------------------------------------------------------------------
CREATE FUNCTION dp.count_star_trans(internal) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_count_star_trans';
CREATE FUNCTION dp.count_trans(internal, "any") RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_count_trans';
CREATE FUNCTION dp.count_trans(internal, "any", float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_count_trans';
CREATE FUNCTION dp.count_final(internal) RETURNS int8
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_count_final';
CREATE AGGREGATE dp_count(*) (
    SFUNC = dp.count_star_trans, STYPE = internal, FINALFUNC = dp.count_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_count(*) IS 'epsilon-DP row count (epsilon = dp.default_epsilon or dp.privacy_level): count + discrete Laplace noise of scale 1/epsilon; never NULL';
CREATE AGGREGATE dp_count("any") (
    SFUNC = dp.count_trans, STYPE = internal, FINALFUNC = dp.count_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_count("any") IS 'epsilon-DP count of non-NULL values (epsilon = dp.default_epsilon or dp.privacy_level); never NULL';
CREATE AGGREGATE dp_count("any", float8) (
    SFUNC = dp.count_trans, STYPE = internal, FINALFUNC = dp.count_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_count("any", float8) IS 'dp_count(value, epsilon): epsilon-DP count of non-NULL values: count + discrete Laplace noise of scale 1/epsilon; never NULL';

-- dp_sum ---------------------------------------------------------------------------------------
CREATE FUNCTION dp.sum_int2_trans(internal, int2, int2, int2) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_sum_int2_trans';
CREATE FUNCTION dp.sum_int2_trans(internal, int2, int2, int2, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_sum_int2_trans';
CREATE FUNCTION dp.sum_int4_trans(internal, int4, int4, int4) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_sum_int4_trans';
CREATE FUNCTION dp.sum_int4_trans(internal, int4, int4, int4, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_sum_int4_trans';
CREATE FUNCTION dp.sum_int8_trans(internal, int8, int8, int8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_sum_int8_trans';
CREATE FUNCTION dp.sum_int8_trans(internal, int8, int8, int8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_sum_int8_trans';
CREATE FUNCTION dp.sum_int_final(internal) RETURNS int8
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_sum_int_final';
CREATE FUNCTION dp.sum_int8_final(internal) RETURNS numeric
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_sum_int8_final';
CREATE FUNCTION dp.sum_float8_trans(internal, float8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_sum_float8_trans';
CREATE FUNCTION dp.sum_float8_trans(internal, float8, float8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_sum_float8_trans';
CREATE FUNCTION dp.sum_float8_final(internal) RETURNS float8
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_sum_float8_final';
CREATE FUNCTION dp.sum_numeric_trans(internal, numeric, numeric, numeric) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_sum_numeric_trans';
CREATE FUNCTION dp.sum_numeric_trans(internal, numeric, numeric, numeric, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_sum_numeric_trans';
CREATE FUNCTION dp.sum_numeric_final(internal) RETURNS numeric
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_sum_numeric_final';
CREATE AGGREGATE dp_sum(int2, int2, int2) (
    SFUNC = dp.sum_int2_trans, STYPE = internal, FINALFUNC = dp.sum_int_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_sum(int2, int2, int2) IS 'dp_sum(value, lower, upper): epsilon-DP exact integer sum (epsilon = dp.default_epsilon or dp.privacy_level) of values clamped to [lower, upper], noise scale max(|lower|,|upper|)/epsilon; returns int8';
CREATE AGGREGATE dp_sum(int2, int2, int2, float8) (
    SFUNC = dp.sum_int2_trans, STYPE = internal, FINALFUNC = dp.sum_int_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_sum(int2, int2, int2, float8) IS 'dp_sum(value, lower, upper, epsilon): epsilon-DP exact integer sum of values clamped to [lower, upper], noise scale max(|lower|,|upper|)/epsilon; returns int8';
CREATE AGGREGATE dp_sum(int4, int4, int4) (
    SFUNC = dp.sum_int4_trans, STYPE = internal, FINALFUNC = dp.sum_int_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_sum(int4, int4, int4) IS 'dp_sum(value, lower, upper): epsilon-DP exact integer sum (epsilon = dp.default_epsilon or dp.privacy_level) of values clamped to [lower, upper], noise scale max(|lower|,|upper|)/epsilon; returns int8';
CREATE AGGREGATE dp_sum(int4, int4, int4, float8) (
    SFUNC = dp.sum_int4_trans, STYPE = internal, FINALFUNC = dp.sum_int_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_sum(int4, int4, int4, float8) IS 'dp_sum(value, lower, upper, epsilon): epsilon-DP exact integer sum of values clamped to [lower, upper], noise scale max(|lower|,|upper|)/epsilon; returns int8';
CREATE AGGREGATE dp_sum(int8, int8, int8) (
    SFUNC = dp.sum_int8_trans, STYPE = internal, FINALFUNC = dp.sum_int8_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_sum(int8, int8, int8) IS 'dp_sum(value, lower, upper): epsilon-DP exact integer sum (epsilon = dp.default_epsilon or dp.privacy_level) of values clamped to [lower, upper], noise scale max(|lower|,|upper|)/epsilon; returns numeric';
CREATE AGGREGATE dp_sum(int8, int8, int8, float8) (
    SFUNC = dp.sum_int8_trans, STYPE = internal, FINALFUNC = dp.sum_int8_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_sum(int8, int8, int8, float8) IS 'dp_sum(value, lower, upper, epsilon): epsilon-DP exact integer sum of values clamped to [lower, upper], noise scale max(|lower|,|upper|)/epsilon; returns numeric';
CREATE AGGREGATE dp_sum(float8, float8, float8) (
    SFUNC = dp.sum_float8_trans, STYPE = internal, FINALFUNC = dp.sum_float8_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_sum(float8, float8, float8) IS 'dp_sum(value, lower, upper): epsilon-DP sum on a power-of-two grid (epsilon = dp.default_epsilon or dp.privacy_level) of values clamped to [lower, upper], noise scale max(|lower|,|upper|)/epsilon; returns float8';
CREATE AGGREGATE dp_sum(float8, float8, float8, float8) (
    SFUNC = dp.sum_float8_trans, STYPE = internal, FINALFUNC = dp.sum_float8_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_sum(float8, float8, float8, float8) IS 'dp_sum(value, lower, upper, epsilon): epsilon-DP sum on a power-of-two grid of values clamped to [lower, upper], noise scale max(|lower|,|upper|)/epsilon; returns float8';
CREATE AGGREGATE dp_sum(numeric, numeric, numeric) (
    SFUNC = dp.sum_numeric_trans, STYPE = internal, FINALFUNC = dp.sum_numeric_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_sum(numeric, numeric, numeric) IS 'dp_sum(value, lower, upper): epsilon-DP sum on a power-of-two grid (epsilon = dp.default_epsilon or dp.privacy_level) of values clamped to [lower, upper], noise scale max(|lower|,|upper|)/epsilon; returns numeric';
CREATE AGGREGATE dp_sum(numeric, numeric, numeric, float8) (
    SFUNC = dp.sum_numeric_trans, STYPE = internal, FINALFUNC = dp.sum_numeric_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_sum(numeric, numeric, numeric, float8) IS 'dp_sum(value, lower, upper, epsilon): epsilon-DP sum on a power-of-two grid of values clamped to [lower, upper], noise scale max(|lower|,|upper|)/epsilon; returns numeric';

-- dp_avg ---------------------------------------------------------------------------------------
CREATE FUNCTION dp.avg_float8_trans(internal, float8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_avg_float8_trans';
CREATE FUNCTION dp.avg_float8_trans(internal, float8, float8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_avg_float8_trans';
CREATE FUNCTION dp.avg_float8_final(internal) RETURNS float8
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_avg_float8_final';
CREATE FUNCTION dp.avg_numeric_trans(internal, numeric, numeric, numeric) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_avg_numeric_trans';
CREATE FUNCTION dp.avg_numeric_trans(internal, numeric, numeric, numeric, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_avg_numeric_trans';
CREATE FUNCTION dp.avg_numeric_final(internal) RETURNS numeric
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_avg_numeric_final';
CREATE AGGREGATE dp_avg(float8, float8, float8) (
    SFUNC = dp.avg_float8_trans, STYPE = internal, FINALFUNC = dp.avg_float8_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_avg(float8, float8, float8) IS 'dp_avg(value, lower, upper): epsilon-DP mean (epsilon = dp.default_epsilon or dp.privacy_level) of values clamped to [lower, upper]: noisy centred sum (70% of epsilon) and noisy count (30%), combined by their posterior mean; result within [lower, upper]';
CREATE AGGREGATE dp_avg(float8, float8, float8, float8) (
    SFUNC = dp.avg_float8_trans, STYPE = internal, FINALFUNC = dp.avg_float8_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_avg(float8, float8, float8, float8) IS 'dp_avg(value, lower, upper, epsilon): epsilon-DP mean of values clamped to [lower, upper]: noisy centred sum (70% of epsilon) and noisy count (30%), combined by their posterior mean; result within [lower, upper]';
CREATE AGGREGATE dp_avg(numeric, numeric, numeric) (
    SFUNC = dp.avg_numeric_trans, STYPE = internal, FINALFUNC = dp.avg_numeric_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_avg(numeric, numeric, numeric) IS 'dp_avg(value, lower, upper): epsilon-DP mean (epsilon = dp.default_epsilon or dp.privacy_level) of values clamped to [lower, upper]: noisy centred sum (70% of epsilon) and noisy count (30%), combined by their posterior mean; result within [lower, upper]';
CREATE AGGREGATE dp_avg(numeric, numeric, numeric, float8) (
    SFUNC = dp.avg_numeric_trans, STYPE = internal, FINALFUNC = dp.avg_numeric_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_avg(numeric, numeric, numeric, float8) IS 'dp_avg(value, lower, upper, epsilon): epsilon-DP mean of values clamped to [lower, upper]: noisy centred sum (70% of epsilon) and noisy count (30%), combined by their posterior mean; result within [lower, upper]';

-- comments and privileges of support functions ------------------------------------------------
COMMENT ON FUNCTION dp.count_star_trans(internal) IS 'pg_dp internal: transition function of dp_count(*)';
COMMENT ON FUNCTION dp.count_trans(internal, "any") IS 'pg_dp internal: transition function of dp_count(value)';
COMMENT ON FUNCTION dp.count_trans(internal, "any", float8) IS 'pg_dp internal: transition function of dp_count(value, epsilon)';
COMMENT ON FUNCTION dp.count_final(internal) IS 'pg_dp internal: final function of dp_count; adds discrete Laplace noise';
COMMENT ON FUNCTION dp.sum_int2_trans(internal, int2, int2, int2) IS 'pg_dp internal: transition function of dp_sum(int2, lower, upper)';
COMMENT ON FUNCTION dp.sum_int2_trans(internal, int2, int2, int2, float8) IS 'pg_dp internal: transition function of dp_sum(int2, lower, upper, epsilon)';
COMMENT ON FUNCTION dp.sum_int4_trans(internal, int4, int4, int4) IS 'pg_dp internal: transition function of dp_sum(int4, lower, upper)';
COMMENT ON FUNCTION dp.sum_int4_trans(internal, int4, int4, int4, float8) IS 'pg_dp internal: transition function of dp_sum(int4, lower, upper, epsilon)';
COMMENT ON FUNCTION dp.sum_int8_trans(internal, int8, int8, int8) IS 'pg_dp internal: transition function of dp_sum(int8, lower, upper)';
COMMENT ON FUNCTION dp.sum_int8_trans(internal, int8, int8, int8, float8) IS 'pg_dp internal: transition function of dp_sum(int8, lower, upper, epsilon)';
COMMENT ON FUNCTION dp.sum_int_final(internal) IS 'pg_dp internal: final function of dp_sum over int2/int4; adds discrete Laplace noise';
COMMENT ON FUNCTION dp.sum_int8_final(internal) IS 'pg_dp internal: final function of dp_sum over int8; adds discrete Laplace noise';
COMMENT ON FUNCTION dp.sum_float8_trans(internal, float8, float8, float8) IS 'pg_dp internal: transition function of dp_sum(float8, lower, upper)';
COMMENT ON FUNCTION dp.sum_float8_trans(internal, float8, float8, float8, float8) IS 'pg_dp internal: transition function of dp_sum(float8, lower, upper, epsilon)';
COMMENT ON FUNCTION dp.sum_float8_final(internal) IS 'pg_dp internal: final function of dp_sum over float8; adds discrete Laplace noise on the grid';
COMMENT ON FUNCTION dp.sum_numeric_trans(internal, numeric, numeric, numeric) IS 'pg_dp internal: transition function of dp_sum(numeric, lower, upper)';
COMMENT ON FUNCTION dp.sum_numeric_trans(internal, numeric, numeric, numeric, float8) IS 'pg_dp internal: transition function of dp_sum(numeric, lower, upper, epsilon)';
COMMENT ON FUNCTION dp.sum_numeric_final(internal) IS 'pg_dp internal: final function of dp_sum over numeric; adds discrete Laplace noise on the grid';
COMMENT ON FUNCTION dp.avg_float8_trans(internal, float8, float8, float8) IS 'pg_dp internal: transition function of dp_avg(float8, lower, upper)';
COMMENT ON FUNCTION dp.avg_float8_trans(internal, float8, float8, float8, float8) IS 'pg_dp internal: transition function of dp_avg(float8, lower, upper, epsilon)';
COMMENT ON FUNCTION dp.avg_float8_final(internal) IS 'pg_dp internal: final function of dp_avg; noisy centred sum divided by noisy count';
COMMENT ON FUNCTION dp.avg_numeric_trans(internal, numeric, numeric, numeric) IS 'pg_dp internal: transition function of dp_avg(numeric, lower, upper)';
COMMENT ON FUNCTION dp.avg_numeric_trans(internal, numeric, numeric, numeric, float8) IS 'pg_dp internal: transition function of dp_avg(numeric, lower, upper, epsilon)';
COMMENT ON FUNCTION dp.avg_numeric_final(internal) IS 'pg_dp internal: final function of dp_avg; noisy centred sum divided by noisy count';

REVOKE EXECUTE ON FUNCTION dp.combine(internal, internal), dp.serialize(internal), dp.deserialize(bytea, internal) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.count_star_trans(internal) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.count_trans(internal, "any") FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.count_trans(internal, "any", float8) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.count_final(internal) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.sum_int2_trans(internal, int2, int2, int2) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.sum_int2_trans(internal, int2, int2, int2, float8) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.sum_int4_trans(internal, int4, int4, int4) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.sum_int4_trans(internal, int4, int4, int4, float8) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.sum_int8_trans(internal, int8, int8, int8) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.sum_int8_trans(internal, int8, int8, int8, float8) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.sum_int_final(internal) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.sum_int8_final(internal) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.sum_float8_trans(internal, float8, float8, float8) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.sum_float8_trans(internal, float8, float8, float8, float8) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.sum_float8_final(internal) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.sum_numeric_trans(internal, numeric, numeric, numeric) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.sum_numeric_trans(internal, numeric, numeric, numeric, float8) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.sum_numeric_final(internal) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.avg_float8_trans(internal, float8, float8, float8) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.avg_float8_trans(internal, float8, float8, float8, float8) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.avg_float8_final(internal) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.avg_numeric_trans(internal, numeric, numeric, numeric) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.avg_numeric_trans(internal, numeric, numeric, numeric, float8) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.avg_numeric_final(internal) FROM PUBLIC;

-- A noisy aggregate must never be merged with an identical call or treated as a constant: mark the
-- aggregates themselves VOLATILE (CREATE AGGREGATE always records them as IMMUTABLE).
UPDATE pg_catalog.pg_proc SET provolatile = 'v'
 WHERE oid IN ('dp_count()'::regprocedure,
               'dp_count("any")'::regprocedure,
               'dp_count("any", float8)'::regprocedure,
               'dp_sum(int2, int2, int2)'::regprocedure,
               'dp_sum(int2, int2, int2, float8)'::regprocedure,
               'dp_sum(int4, int4, int4)'::regprocedure,
               'dp_sum(int4, int4, int4, float8)'::regprocedure,
               'dp_sum(int8, int8, int8)'::regprocedure,
               'dp_sum(int8, int8, int8, float8)'::regprocedure,
               'dp_sum(float8, float8, float8)'::regprocedure,
               'dp_sum(float8, float8, float8, float8)'::regprocedure,
               'dp_sum(numeric, numeric, numeric)'::regprocedure,
               'dp_sum(numeric, numeric, numeric, float8)'::regprocedure,
               'dp_avg(float8, float8, float8)'::regprocedure,
               'dp_avg(float8, float8, float8, float8)'::regprocedure,
               'dp_avg(numeric, numeric, numeric)'::regprocedure,
               'dp_avg(numeric, numeric, numeric, float8)'::regprocedure);
