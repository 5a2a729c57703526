-- pg_dp: dp_variance and dp_stddev (hand-written; loaded after units.sql). Derivation: docs/privacy/variance.md.
-- Same conventions as sql/pg_dp.sql: internal state shared with the other aggregates (combine, serial,
-- deserial), support functions not executable by PUBLIC, the aggregates VOLATILE.

CREATE FUNCTION dp.variance_float8_trans(internal, float8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_variance_float8_trans';
CREATE FUNCTION dp.variance_float8_trans(internal, float8, float8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_variance_float8_trans';
CREATE FUNCTION dp.variance_float8_final(internal) RETURNS float8
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_variance_float8_final';
CREATE AGGREGATE dp_variance(float8, float8, float8) (
    SFUNC = dp.variance_float8_trans, STYPE = internal, FINALFUNC = dp.variance_float8_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_variance(float8, float8, float8) IS 'dp_variance(value, lower, upper): epsilon-DP sample variance (n - 1, as variance()) (epsilon = dp.default_epsilon or dp.privacy_level) of values clamped to [lower, upper], from a noisy count, a noisy centred sum and a noisy shifted sum of squares accounted jointly; result within [0, ((upper - lower)/2)^2]';
CREATE AGGREGATE dp_variance(float8, float8, float8, float8) (
    SFUNC = dp.variance_float8_trans, STYPE = internal, FINALFUNC = dp.variance_float8_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_variance(float8, float8, float8, float8) IS 'dp_variance(value, lower, upper, epsilon): epsilon-DP sample variance (n - 1, as variance()) of values clamped to [lower, upper], from a noisy count, a noisy centred sum and a noisy shifted sum of squares accounted jointly; result within [0, ((upper - lower)/2)^2]';
COMMENT ON FUNCTION dp.variance_float8_trans(internal, float8, float8, float8) IS 'pg_dp internal: transition function of dp_variance(float8, lower, upper)';
COMMENT ON FUNCTION dp.variance_float8_trans(internal, float8, float8, float8, float8) IS 'pg_dp internal: transition function of dp_variance(float8, lower, upper, epsilon)';
COMMENT ON FUNCTION dp.variance_float8_final(internal) IS 'pg_dp internal: final function of dp_variance over float8; adds discrete Laplace noise to the three statistics';
REVOKE EXECUTE ON FUNCTION dp.variance_float8_trans(internal, float8, float8, float8), dp.variance_float8_trans(internal, float8, float8, float8, float8), dp.variance_float8_final(internal) FROM PUBLIC;

CREATE FUNCTION dp.variance_numeric_trans(internal, numeric, numeric, numeric) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_variance_numeric_trans';
CREATE FUNCTION dp.variance_numeric_trans(internal, numeric, numeric, numeric, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_variance_numeric_trans';
CREATE FUNCTION dp.variance_numeric_final(internal) RETURNS numeric
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_variance_numeric_final';
CREATE AGGREGATE dp_variance(numeric, numeric, numeric) (
    SFUNC = dp.variance_numeric_trans, STYPE = internal, FINALFUNC = dp.variance_numeric_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_variance(numeric, numeric, numeric) IS 'dp_variance(value, lower, upper): epsilon-DP sample variance (n - 1, as variance()) (epsilon = dp.default_epsilon or dp.privacy_level) of values clamped to [lower, upper], from a noisy count, a noisy centred sum and a noisy shifted sum of squares accounted jointly; result within [0, ((upper - lower)/2)^2]';
CREATE AGGREGATE dp_variance(numeric, numeric, numeric, float8) (
    SFUNC = dp.variance_numeric_trans, STYPE = internal, FINALFUNC = dp.variance_numeric_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_variance(numeric, numeric, numeric, float8) IS 'dp_variance(value, lower, upper, epsilon): epsilon-DP sample variance (n - 1, as variance()) of values clamped to [lower, upper], from a noisy count, a noisy centred sum and a noisy shifted sum of squares accounted jointly; result within [0, ((upper - lower)/2)^2]';
COMMENT ON FUNCTION dp.variance_numeric_trans(internal, numeric, numeric, numeric) IS 'pg_dp internal: transition function of dp_variance(numeric, lower, upper)';
COMMENT ON FUNCTION dp.variance_numeric_trans(internal, numeric, numeric, numeric, float8) IS 'pg_dp internal: transition function of dp_variance(numeric, lower, upper, epsilon)';
COMMENT ON FUNCTION dp.variance_numeric_final(internal) IS 'pg_dp internal: final function of dp_variance over numeric; adds discrete Laplace noise to the three statistics';
REVOKE EXECUTE ON FUNCTION dp.variance_numeric_trans(internal, numeric, numeric, numeric), dp.variance_numeric_trans(internal, numeric, numeric, numeric, float8), dp.variance_numeric_final(internal) FROM PUBLIC;

CREATE FUNCTION dp.stddev_float8_trans(internal, float8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_stddev_float8_trans';
CREATE FUNCTION dp.stddev_float8_trans(internal, float8, float8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_stddev_float8_trans';
CREATE FUNCTION dp.stddev_float8_final(internal) RETURNS float8
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_stddev_float8_final';
CREATE AGGREGATE dp_stddev(float8, float8, float8) (
    SFUNC = dp.stddev_float8_trans, STYPE = internal, FINALFUNC = dp.stddev_float8_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_stddev(float8, float8, float8) IS 'dp_stddev(value, lower, upper): epsilon-DP sample standard deviation (n - 1, as stddev()) (epsilon = dp.default_epsilon or dp.privacy_level) of values clamped to [lower, upper], from a noisy count, a noisy centred sum and a noisy shifted sum of squares accounted jointly; result within [0, (upper - lower)/2]';
CREATE AGGREGATE dp_stddev(float8, float8, float8, float8) (
    SFUNC = dp.stddev_float8_trans, STYPE = internal, FINALFUNC = dp.stddev_float8_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_stddev(float8, float8, float8, float8) IS 'dp_stddev(value, lower, upper, epsilon): epsilon-DP sample standard deviation (n - 1, as stddev()) of values clamped to [lower, upper], from a noisy count, a noisy centred sum and a noisy shifted sum of squares accounted jointly; result within [0, (upper - lower)/2]';
COMMENT ON FUNCTION dp.stddev_float8_trans(internal, float8, float8, float8) IS 'pg_dp internal: transition function of dp_stddev(float8, lower, upper)';
COMMENT ON FUNCTION dp.stddev_float8_trans(internal, float8, float8, float8, float8) IS 'pg_dp internal: transition function of dp_stddev(float8, lower, upper, epsilon)';
COMMENT ON FUNCTION dp.stddev_float8_final(internal) IS 'pg_dp internal: final function of dp_stddev over float8; adds discrete Laplace noise to the three statistics';
REVOKE EXECUTE ON FUNCTION dp.stddev_float8_trans(internal, float8, float8, float8), dp.stddev_float8_trans(internal, float8, float8, float8, float8), dp.stddev_float8_final(internal) FROM PUBLIC;

CREATE FUNCTION dp.stddev_numeric_trans(internal, numeric, numeric, numeric) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_stddev_numeric_trans';
CREATE FUNCTION dp.stddev_numeric_trans(internal, numeric, numeric, numeric, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_stddev_numeric_trans';
CREATE FUNCTION dp.stddev_numeric_final(internal) RETURNS numeric
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_stddev_numeric_final';
CREATE AGGREGATE dp_stddev(numeric, numeric, numeric) (
    SFUNC = dp.stddev_numeric_trans, STYPE = internal, FINALFUNC = dp.stddev_numeric_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_stddev(numeric, numeric, numeric) IS 'dp_stddev(value, lower, upper): epsilon-DP sample standard deviation (n - 1, as stddev()) (epsilon = dp.default_epsilon or dp.privacy_level) of values clamped to [lower, upper], from a noisy count, a noisy centred sum and a noisy shifted sum of squares accounted jointly; result within [0, (upper - lower)/2]';
CREATE AGGREGATE dp_stddev(numeric, numeric, numeric, float8) (
    SFUNC = dp.stddev_numeric_trans, STYPE = internal, FINALFUNC = dp.stddev_numeric_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_stddev(numeric, numeric, numeric, float8) IS 'dp_stddev(value, lower, upper, epsilon): epsilon-DP sample standard deviation (n - 1, as stddev()) of values clamped to [lower, upper], from a noisy count, a noisy centred sum and a noisy shifted sum of squares accounted jointly; result within [0, (upper - lower)/2]';
COMMENT ON FUNCTION dp.stddev_numeric_trans(internal, numeric, numeric, numeric) IS 'pg_dp internal: transition function of dp_stddev(numeric, lower, upper)';
COMMENT ON FUNCTION dp.stddev_numeric_trans(internal, numeric, numeric, numeric, float8) IS 'pg_dp internal: transition function of dp_stddev(numeric, lower, upper, epsilon)';
COMMENT ON FUNCTION dp.stddev_numeric_final(internal) IS 'pg_dp internal: final function of dp_stddev over numeric; adds discrete Laplace noise to the three statistics';
REVOKE EXECUTE ON FUNCTION dp.stddev_numeric_trans(internal, numeric, numeric, numeric), dp.stddev_numeric_trans(internal, numeric, numeric, numeric, float8), dp.stddev_numeric_final(internal) FROM PUBLIC;

-- noisy aggregates are VOLATILE (CREATE AGGREGATE records them as IMMUTABLE); dp.keep_group too
UPDATE pg_catalog.pg_proc SET provolatile = 'v'
 WHERE oid IN ('dp_variance(float8, float8, float8)'::regprocedure,
               'dp_variance(float8, float8, float8, float8)'::regprocedure,
               'dp_variance(numeric, numeric, numeric)'::regprocedure,
               'dp_variance(numeric, numeric, numeric, float8)'::regprocedure,
               'dp_stddev(float8, float8, float8)'::regprocedure,
               'dp_stddev(float8, float8, float8, float8)'::regprocedure,
               'dp_stddev(numeric, numeric, numeric)'::regprocedure,
               'dp_stddev(numeric, numeric, numeric, float8)'::regprocedure,
               'dp.keep_group("any", float8, float8)'::regprocedure);

-- dp_avg with a public count (src/aggregates/avg.rs; docs/privacy/avg.md "dp_avg with a public count"): the
-- caller gives the number of rows, fixed without looking at them; all of epsilon goes to the centred
-- sum, and the count is not released. The state is dp_avg's.
CREATE FUNCTION dp.avg_float8_trans(internal, float8, float8, float8, float8, int8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_avg_float8_trans';
CREATE FUNCTION dp.avg_numeric_trans(internal, numeric, numeric, numeric, float8, int8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_avg_numeric_trans';
COMMENT ON FUNCTION dp.avg_float8_trans(internal, float8, float8, float8, float8, int8) IS 'pg_dp internal: transition function of dp_avg(float8, lower, upper, epsilon, public_count)';
COMMENT ON FUNCTION dp.avg_numeric_trans(internal, numeric, numeric, numeric, float8, int8) IS 'pg_dp internal: transition function of dp_avg(numeric, lower, upper, epsilon, public_count)';
REVOKE EXECUTE ON FUNCTION dp.avg_float8_trans(internal, float8, float8, float8, float8, int8),
    dp.avg_numeric_trans(internal, numeric, numeric, numeric, float8, int8) FROM PUBLIC;
CREATE AGGREGATE dp_avg(float8, float8, float8, float8, int8) (
    SFUNC = dp.avg_float8_trans, STYPE = internal, FINALFUNC = dp.avg_float8_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_avg(float8, float8, float8, float8, int8) IS 'dp_avg(value, lower, upper, epsilon, public_count): epsilon-DP mean of values clamped to [lower, upper] when the number of rows is public (given by the caller, fixed without looking at the rows): noisy centred sum (all of epsilon) over public_count; result within [lower, upper]';
CREATE AGGREGATE dp_avg(numeric, numeric, numeric, float8, int8) (
    SFUNC = dp.avg_numeric_trans, STYPE = internal, FINALFUNC = dp.avg_numeric_final,
    COMBINEFUNC = dp.combine, SERIALFUNC = dp.serialize, DESERIALFUNC = dp.deserialize,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_avg(numeric, numeric, numeric, float8, int8) IS 'dp_avg(value, lower, upper, epsilon, public_count): epsilon-DP mean of values clamped to [lower, upper] when the number of rows is public (given by the caller, fixed without looking at the rows): noisy centred sum (all of epsilon) over public_count; result within [lower, upper]';
UPDATE pg_catalog.pg_proc SET provolatile = 'v'
 WHERE oid IN ('dp_avg(float8, float8, float8, float8, int8)'::regprocedure,
               'dp_avg(numeric, numeric, numeric, float8, int8)'::regprocedure);
