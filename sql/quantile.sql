-- pg_dp: quantile aggregates (hand-written; loaded after inspect.sql).
--
-- dp_median and dp_percentile add noise scaled to the smooth sensitivity of the quantile: Laplace
-- noise with delta > 0, polynomial-tailed noise with delta = 0 (the default). dp_percentile_em uses
-- the exponential mechanism. The state holds the values (8 bytes per row). There is no partial
-- (parallel) aggregation: a worker's values would have to travel as one bytea, limited to 1 GB, and
-- a state cut short or an error past that size would depend on the data. The final function sorts
-- the values in place (FINALFUNC_MODIFY = READ_WRITE). Derivations: docs/privacy/.


-- dp_median ---------------------------------------------------------------------------------
CREATE FUNCTION dp.median_final(internal) RETURNS float8
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_median_final';
COMMENT ON FUNCTION dp.median_final(internal) IS 'pg_dp internal: final function of dp_median; sorts the values and releases the noisy quantile';
REVOKE EXECUTE ON FUNCTION dp.median_final(internal) FROM PUBLIC;
CREATE FUNCTION dp.median_trans(internal, float8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_median_trans';
COMMENT ON FUNCTION dp.median_trans(internal, float8, float8, float8) IS 'pg_dp internal: transition function of dp_median(value, lower, upper)';
REVOKE EXECUTE ON FUNCTION dp.median_trans(internal, float8, float8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_median(value float8, lower float8, upper float8) (
    SFUNC = dp.median_trans, STYPE = internal, FINALFUNC = dp.median_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_median(float8, float8, float8) IS 'dp_median(value, lower, upper): median of values clamped to [lower, upper] by the exponential mechanism over a grid of the bounds (as dp_percentile_em; the most accurate pure-epsilon quantile measured, docs/quantile-accuracy.md); epsilon-DP (epsilon = dp.default_epsilon or dp.privacy_level); the five-argument form (with delta) uses smooth sensitivity; result within [lower, upper]; never NULL';
CREATE FUNCTION dp.median_trans(internal, float8, float8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_median_trans';
COMMENT ON FUNCTION dp.median_trans(internal, float8, float8, float8, float8) IS 'pg_dp internal: transition function of dp_median(value, lower, upper, epsilon)';
REVOKE EXECUTE ON FUNCTION dp.median_trans(internal, float8, float8, float8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_median(value float8, lower float8, upper float8, epsilon float8) (
    SFUNC = dp.median_trans, STYPE = internal, FINALFUNC = dp.median_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_median(float8, float8, float8, float8) IS 'dp_median(value, lower, upper, epsilon): median of values clamped to [lower, upper] by the exponential mechanism over a grid of the bounds (as dp_percentile_em; the most accurate pure-epsilon quantile measured, docs/quantile-accuracy.md); epsilon-DP; the five-argument form (with delta) uses smooth sensitivity; result within [lower, upper]; never NULL';
CREATE FUNCTION dp.median_trans(internal, float8, float8, float8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_median_trans';
COMMENT ON FUNCTION dp.median_trans(internal, float8, float8, float8, float8, float8) IS 'pg_dp internal: transition function of dp_median(value, lower, upper, epsilon, delta)';
REVOKE EXECUTE ON FUNCTION dp.median_trans(internal, float8, float8, float8, float8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_median(value float8, lower float8, upper float8, epsilon float8, delta float8) (
    SFUNC = dp.median_trans, STYPE = internal, FINALFUNC = dp.median_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_median(float8, float8, float8, float8, float8) IS 'dp_median(value, lower, upper, epsilon, delta): median of values clamped to [lower, upper] with smooth-sensitivity noise (NRS 2007; S the smaller of the window and reachable-range bounds for add/remove neighbours); (epsilon, delta)-DP (epsilon; delta > 0: Laplace noise of scale 2 S/epsilon, beta the largest whose exact delta is within delta; delta = 0: the pure variant); S is the beta-smooth sensitivity; result within [lower, upper]; never NULL';

-- dp_percentile -----------------------------------------------------------------------------
CREATE FUNCTION dp.percentile_final(internal) RETURNS float8
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_final';
COMMENT ON FUNCTION dp.percentile_final(internal) IS 'pg_dp internal: final function of dp_percentile; sorts the values and releases the noisy quantile';
REVOKE EXECUTE ON FUNCTION dp.percentile_final(internal) FROM PUBLIC;
CREATE FUNCTION dp.percentile_trans(internal, float8, float8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_trans';
COMMENT ON FUNCTION dp.percentile_trans(internal, float8, float8, float8, float8) IS 'pg_dp internal: transition function of dp_percentile(value, p, lower, upper)';
REVOKE EXECUTE ON FUNCTION dp.percentile_trans(internal, float8, float8, float8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile(value float8, p float8, lower float8, upper float8) (
    SFUNC = dp.percentile_trans, STYPE = internal, FINALFUNC = dp.percentile_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile(float8, float8, float8, float8) IS 'dp_percentile(value, p, lower, upper): p-quantile (p in [0, 1]) of values clamped to [lower, upper] by the exponential mechanism over a grid of the bounds (as dp_percentile_em); epsilon-DP (epsilon = dp.default_epsilon or dp.privacy_level); the six-argument form (with delta) uses smooth sensitivity; result within [lower, upper]; never NULL';
CREATE FUNCTION dp.percentile_trans(internal, float8, float8, float8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_trans';
COMMENT ON FUNCTION dp.percentile_trans(internal, float8, float8, float8, float8, float8) IS 'pg_dp internal: transition function of dp_percentile(value, p, lower, upper, epsilon)';
REVOKE EXECUTE ON FUNCTION dp.percentile_trans(internal, float8, float8, float8, float8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile(value float8, p float8, lower float8, upper float8, epsilon float8) (
    SFUNC = dp.percentile_trans, STYPE = internal, FINALFUNC = dp.percentile_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile(float8, float8, float8, float8, float8) IS 'dp_percentile(value, p, lower, upper, epsilon): p-quantile (p in [0, 1]) of values clamped to [lower, upper] by the exponential mechanism over a grid of the bounds (as dp_percentile_em); epsilon-DP; the six-argument form (with delta) uses smooth sensitivity; result within [lower, upper]; never NULL';
CREATE FUNCTION dp.percentile_trans(internal, float8, float8, float8, float8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_trans';
COMMENT ON FUNCTION dp.percentile_trans(internal, float8, float8, float8, float8, float8, float8) IS 'pg_dp internal: transition function of dp_percentile(value, p, lower, upper, epsilon, delta)';
REVOKE EXECUTE ON FUNCTION dp.percentile_trans(internal, float8, float8, float8, float8, float8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile(value float8, p float8, lower float8, upper float8, epsilon float8, delta float8) (
    SFUNC = dp.percentile_trans, STYPE = internal, FINALFUNC = dp.percentile_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile(float8, float8, float8, float8, float8, float8) IS 'dp_percentile(value, p, lower, upper, epsilon, delta): p-quantile (p in [0, 1]) of values clamped to [lower, upper] with smooth-sensitivity noise (NRS 2007; S the smaller of the window and reachable-range bounds for add/remove neighbours); (epsilon, delta)-DP (epsilon; delta > 0: Laplace noise of scale 2 S/epsilon, beta the largest whose exact delta is within delta; delta = 0: the pure variant); S is the beta-smooth sensitivity; result within [lower, upper]; never NULL';

-- dp_percentile_em --------------------------------------------------------------------------
CREATE FUNCTION dp.percentile_em_final(internal) RETURNS float8
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_em_final';
COMMENT ON FUNCTION dp.percentile_em_final(internal) IS 'pg_dp internal: final function of dp_percentile_em; sorts the values and releases the noisy quantile';
REVOKE EXECUTE ON FUNCTION dp.percentile_em_final(internal) FROM PUBLIC;
CREATE FUNCTION dp.percentile_em_trans(internal, float8, float8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_em_trans';
COMMENT ON FUNCTION dp.percentile_em_trans(internal, float8, float8, float8, float8) IS 'pg_dp internal: transition function of dp_percentile_em(value, p, lower, upper)';
REVOKE EXECUTE ON FUNCTION dp.percentile_em_trans(internal, float8, float8, float8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile_em(value float8, p float8, lower float8, upper float8) (
    SFUNC = dp.percentile_em_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile_em(float8, float8, float8, float8) IS 'dp_percentile_em(value, p, lower, upper): p-quantile (p in [0, 1]) of values clamped to [lower, upper] by the exponential mechanism over a grid of the bounds; epsilon-DP (epsilon = dp.default_epsilon or dp.privacy_level); result within [lower, upper]; never NULL';
CREATE FUNCTION dp.percentile_em_trans(internal, float8, float8, float8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_em_trans';
COMMENT ON FUNCTION dp.percentile_em_trans(internal, float8, float8, float8, float8, float8) IS 'pg_dp internal: transition function of dp_percentile_em(value, p, lower, upper, epsilon)';
REVOKE EXECUTE ON FUNCTION dp.percentile_em_trans(internal, float8, float8, float8, float8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile_em(value float8, p float8, lower float8, upper float8, epsilon float8) (
    SFUNC = dp.percentile_em_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile_em(float8, float8, float8, float8, float8) IS 'dp_percentile_em(value, p, lower, upper, epsilon): p-quantile (p in [0, 1]) of values clamped to [lower, upper] by the exponential mechanism over a grid of the bounds; epsilon-DP (epsilon); result within [lower, upper]; never NULL';

-- Noisy aggregates are VOLATILE (CREATE AGGREGATE records them as IMMUTABLE).
UPDATE pg_catalog.pg_proc SET provolatile = 'v'
 WHERE oid IN ('dp_median(float8, float8, float8)'::regprocedure,
               'dp_median(float8, float8, float8, float8)'::regprocedure,
               'dp_median(float8, float8, float8, float8, float8)'::regprocedure,
               'dp_percentile(float8, float8, float8, float8)'::regprocedure,
               'dp_percentile(float8, float8, float8, float8, float8)'::regprocedure,
               'dp_percentile(float8, float8, float8, float8, float8, float8)'::regprocedure,
               'dp_percentile_em(float8, float8, float8, float8)'::regprocedure,
               'dp_percentile_em(float8, float8, float8, float8, float8)'::regprocedure);

-- Integer columns -----------------------------------------------------------------------------
-- dp_median, dp_percentile and dp_percentile_em over integer (int4) and bigint (int8) values with
-- bounds of the same type: the grid is the integers themselves (spacing 1, a power of two only for
-- bounds more than 2^41 apart), so every candidate and every result is an integer (returned as
-- float8, like the float8 forms). An int4 column with integer bounds resolves to the int4 forms, an
-- int8 column to the int8 forms; a smallint column with integer literal bounds resolves to the int4
-- forms, with smallint bounds to the float8 ones. The same final functions as the float8 forms.
-- Derivation: docs/privacy/percentile-em.md and smooth-sensitivity.md, "Integer columns".
CREATE FUNCTION dp.median_trans(internal, int4, int4, int4) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_median_int4_trans';
COMMENT ON FUNCTION dp.median_trans(internal, int4, int4, int4) IS 'pg_dp internal: transition function of dp_median(value, lower, upper) over integer values';
REVOKE EXECUTE ON FUNCTION dp.median_trans(internal, int4, int4, int4) FROM PUBLIC;
CREATE AGGREGATE dp_median(value int4, lower int4, upper int4) (
    SFUNC = dp.median_trans, STYPE = internal, FINALFUNC = dp.median_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_median(int4, int4, int4) IS 'dp_median(value, lower, upper): median of integer values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon = dp.default_epsilon or dp.privacy_level); the five-argument form (with delta) uses smooth sensitivity; result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.median_trans(internal, int4, int4, int4, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_median_int4_trans';
COMMENT ON FUNCTION dp.median_trans(internal, int4, int4, int4, float8) IS 'pg_dp internal: transition function of dp_median(value, lower, upper, epsilon) over integer values';
REVOKE EXECUTE ON FUNCTION dp.median_trans(internal, int4, int4, int4, float8) FROM PUBLIC;
CREATE AGGREGATE dp_median(value int4, lower int4, upper int4, epsilon float8) (
    SFUNC = dp.median_trans, STYPE = internal, FINALFUNC = dp.median_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_median(int4, int4, int4, float8) IS 'dp_median(value, lower, upper, epsilon): median of integer values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon); the five-argument form (with delta) uses smooth sensitivity; result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.median_trans(internal, int4, int4, int4, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_median_int4_trans';
COMMENT ON FUNCTION dp.median_trans(internal, int4, int4, int4, float8, float8) IS 'pg_dp internal: transition function of dp_median(value, lower, upper, epsilon, delta) over integer values';
REVOKE EXECUTE ON FUNCTION dp.median_trans(internal, int4, int4, int4, float8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_median(value int4, lower int4, upper int4, epsilon float8, delta float8) (
    SFUNC = dp.median_trans, STYPE = internal, FINALFUNC = dp.median_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_median(int4, int4, int4, float8, float8) IS 'dp_median(value, lower, upper, epsilon, delta): median of integer values clamped to [lower, upper] with smooth-sensitivity noise on the grid of the integers; (epsilon, delta)-DP (delta > 0: Laplace noise, delta = 0: the pure variant); result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.percentile_trans(internal, int4, float8, int4, int4) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_int4_trans';
COMMENT ON FUNCTION dp.percentile_trans(internal, int4, float8, int4, int4) IS 'pg_dp internal: transition function of dp_percentile(value, p, lower, upper) over integer values';
REVOKE EXECUTE ON FUNCTION dp.percentile_trans(internal, int4, float8, int4, int4) FROM PUBLIC;
CREATE AGGREGATE dp_percentile(value int4, p float8, lower int4, upper int4) (
    SFUNC = dp.percentile_trans, STYPE = internal, FINALFUNC = dp.percentile_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile(int4, float8, int4, int4) IS 'dp_percentile(value, p, lower, upper): p-quantile (p in [0, 1]) of integer values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon = dp.default_epsilon or dp.privacy_level); the six-argument form (with delta) uses smooth sensitivity; result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.percentile_trans(internal, int4, float8, int4, int4, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_int4_trans';
COMMENT ON FUNCTION dp.percentile_trans(internal, int4, float8, int4, int4, float8) IS 'pg_dp internal: transition function of dp_percentile(value, p, lower, upper, epsilon) over integer values';
REVOKE EXECUTE ON FUNCTION dp.percentile_trans(internal, int4, float8, int4, int4, float8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile(value int4, p float8, lower int4, upper int4, epsilon float8) (
    SFUNC = dp.percentile_trans, STYPE = internal, FINALFUNC = dp.percentile_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile(int4, float8, int4, int4, float8) IS 'dp_percentile(value, p, lower, upper, epsilon): p-quantile (p in [0, 1]) of integer values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon); the six-argument form (with delta) uses smooth sensitivity; result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.percentile_trans(internal, int4, float8, int4, int4, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_int4_trans';
COMMENT ON FUNCTION dp.percentile_trans(internal, int4, float8, int4, int4, float8, float8) IS 'pg_dp internal: transition function of dp_percentile(value, p, lower, upper, epsilon, delta) over integer values';
REVOKE EXECUTE ON FUNCTION dp.percentile_trans(internal, int4, float8, int4, int4, float8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile(value int4, p float8, lower int4, upper int4, epsilon float8, delta float8) (
    SFUNC = dp.percentile_trans, STYPE = internal, FINALFUNC = dp.percentile_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile(int4, float8, int4, int4, float8, float8) IS 'dp_percentile(value, p, lower, upper, epsilon, delta): p-quantile (p in [0, 1]) of integer values clamped to [lower, upper] with smooth-sensitivity noise on the grid of the integers; (epsilon, delta)-DP (delta > 0: Laplace noise, delta = 0: the pure variant); result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.percentile_em_trans(internal, int4, float8, int4, int4) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_em_int4_trans';
COMMENT ON FUNCTION dp.percentile_em_trans(internal, int4, float8, int4, int4) IS 'pg_dp internal: transition function of dp_percentile_em(value, p, lower, upper) over integer values';
REVOKE EXECUTE ON FUNCTION dp.percentile_em_trans(internal, int4, float8, int4, int4) FROM PUBLIC;
CREATE AGGREGATE dp_percentile_em(value int4, p float8, lower int4, upper int4) (
    SFUNC = dp.percentile_em_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile_em(int4, float8, int4, int4) IS 'dp_percentile_em(value, p, lower, upper): p-quantile (p in [0, 1]) of integer values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon = dp.default_epsilon or dp.privacy_level); result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.percentile_em_trans(internal, int4, float8, int4, int4, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_em_int4_trans';
COMMENT ON FUNCTION dp.percentile_em_trans(internal, int4, float8, int4, int4, float8) IS 'pg_dp internal: transition function of dp_percentile_em(value, p, lower, upper, epsilon) over integer values';
REVOKE EXECUTE ON FUNCTION dp.percentile_em_trans(internal, int4, float8, int4, int4, float8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile_em(value int4, p float8, lower int4, upper int4, epsilon float8) (
    SFUNC = dp.percentile_em_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile_em(int4, float8, int4, int4, float8) IS 'dp_percentile_em(value, p, lower, upper, epsilon): p-quantile (p in [0, 1]) of integer values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon); result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.median_trans(internal, int8, int8, int8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_median_int8_trans';
COMMENT ON FUNCTION dp.median_trans(internal, int8, int8, int8) IS 'pg_dp internal: transition function of dp_median(value, lower, upper) over bigint values';
REVOKE EXECUTE ON FUNCTION dp.median_trans(internal, int8, int8, int8) FROM PUBLIC;
CREATE AGGREGATE dp_median(value int8, lower int8, upper int8) (
    SFUNC = dp.median_trans, STYPE = internal, FINALFUNC = dp.median_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_median(int8, int8, int8) IS 'dp_median(value, lower, upper): median of bigint values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon = dp.default_epsilon or dp.privacy_level); the five-argument form (with delta) uses smooth sensitivity; result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.median_trans(internal, int8, int8, int8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_median_int8_trans';
COMMENT ON FUNCTION dp.median_trans(internal, int8, int8, int8, float8) IS 'pg_dp internal: transition function of dp_median(value, lower, upper, epsilon) over bigint values';
REVOKE EXECUTE ON FUNCTION dp.median_trans(internal, int8, int8, int8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_median(value int8, lower int8, upper int8, epsilon float8) (
    SFUNC = dp.median_trans, STYPE = internal, FINALFUNC = dp.median_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_median(int8, int8, int8, float8) IS 'dp_median(value, lower, upper, epsilon): median of bigint values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon); the five-argument form (with delta) uses smooth sensitivity; result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.median_trans(internal, int8, int8, int8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_median_int8_trans';
COMMENT ON FUNCTION dp.median_trans(internal, int8, int8, int8, float8, float8) IS 'pg_dp internal: transition function of dp_median(value, lower, upper, epsilon, delta) over bigint values';
REVOKE EXECUTE ON FUNCTION dp.median_trans(internal, int8, int8, int8, float8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_median(value int8, lower int8, upper int8, epsilon float8, delta float8) (
    SFUNC = dp.median_trans, STYPE = internal, FINALFUNC = dp.median_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_median(int8, int8, int8, float8, float8) IS 'dp_median(value, lower, upper, epsilon, delta): median of bigint values clamped to [lower, upper] with smooth-sensitivity noise on the grid of the integers; (epsilon, delta)-DP (delta > 0: Laplace noise, delta = 0: the pure variant); result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.percentile_trans(internal, int8, float8, int8, int8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_int8_trans';
COMMENT ON FUNCTION dp.percentile_trans(internal, int8, float8, int8, int8) IS 'pg_dp internal: transition function of dp_percentile(value, p, lower, upper) over bigint values';
REVOKE EXECUTE ON FUNCTION dp.percentile_trans(internal, int8, float8, int8, int8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile(value int8, p float8, lower int8, upper int8) (
    SFUNC = dp.percentile_trans, STYPE = internal, FINALFUNC = dp.percentile_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile(int8, float8, int8, int8) IS 'dp_percentile(value, p, lower, upper): p-quantile (p in [0, 1]) of bigint values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon = dp.default_epsilon or dp.privacy_level); the six-argument form (with delta) uses smooth sensitivity; result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.percentile_trans(internal, int8, float8, int8, int8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_int8_trans';
COMMENT ON FUNCTION dp.percentile_trans(internal, int8, float8, int8, int8, float8) IS 'pg_dp internal: transition function of dp_percentile(value, p, lower, upper, epsilon) over bigint values';
REVOKE EXECUTE ON FUNCTION dp.percentile_trans(internal, int8, float8, int8, int8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile(value int8, p float8, lower int8, upper int8, epsilon float8) (
    SFUNC = dp.percentile_trans, STYPE = internal, FINALFUNC = dp.percentile_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile(int8, float8, int8, int8, float8) IS 'dp_percentile(value, p, lower, upper, epsilon): p-quantile (p in [0, 1]) of bigint values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon); the six-argument form (with delta) uses smooth sensitivity; result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.percentile_trans(internal, int8, float8, int8, int8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_int8_trans';
COMMENT ON FUNCTION dp.percentile_trans(internal, int8, float8, int8, int8, float8, float8) IS 'pg_dp internal: transition function of dp_percentile(value, p, lower, upper, epsilon, delta) over bigint values';
REVOKE EXECUTE ON FUNCTION dp.percentile_trans(internal, int8, float8, int8, int8, float8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile(value int8, p float8, lower int8, upper int8, epsilon float8, delta float8) (
    SFUNC = dp.percentile_trans, STYPE = internal, FINALFUNC = dp.percentile_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile(int8, float8, int8, int8, float8, float8) IS 'dp_percentile(value, p, lower, upper, epsilon, delta): p-quantile (p in [0, 1]) of bigint values clamped to [lower, upper] with smooth-sensitivity noise on the grid of the integers; (epsilon, delta)-DP (delta > 0: Laplace noise, delta = 0: the pure variant); result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.percentile_em_trans(internal, int8, float8, int8, int8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_em_int8_trans';
COMMENT ON FUNCTION dp.percentile_em_trans(internal, int8, float8, int8, int8) IS 'pg_dp internal: transition function of dp_percentile_em(value, p, lower, upper) over bigint values';
REVOKE EXECUTE ON FUNCTION dp.percentile_em_trans(internal, int8, float8, int8, int8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile_em(value int8, p float8, lower int8, upper int8) (
    SFUNC = dp.percentile_em_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile_em(int8, float8, int8, int8) IS 'dp_percentile_em(value, p, lower, upper): p-quantile (p in [0, 1]) of bigint values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon = dp.default_epsilon or dp.privacy_level); result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.percentile_em_trans(internal, int8, float8, int8, int8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_em_int8_trans';
COMMENT ON FUNCTION dp.percentile_em_trans(internal, int8, float8, int8, int8, float8) IS 'pg_dp internal: transition function of dp_percentile_em(value, p, lower, upper, epsilon) over bigint values';
REVOKE EXECUTE ON FUNCTION dp.percentile_em_trans(internal, int8, float8, int8, int8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile_em(value int8, p float8, lower int8, upper int8, epsilon float8) (
    SFUNC = dp.percentile_em_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile_em(int8, float8, int8, int8, float8) IS 'dp_percentile_em(value, p, lower, upper, epsilon): p-quantile (p in [0, 1]) of bigint values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon); result an integer within [lower, upper] (as float8); never NULL';

-- Noisy aggregates are VOLATILE (CREATE AGGREGATE records them as IMMUTABLE).
UPDATE pg_catalog.pg_proc SET provolatile = 'v'
 WHERE oid IN ('dp_median(int4, int4, int4)'::regprocedure,
               'dp_median(int4, int4, int4, float8)'::regprocedure,
               'dp_median(int4, int4, int4, float8, float8)'::regprocedure,
               'dp_percentile(int4, float8, int4, int4)'::regprocedure,
               'dp_percentile(int4, float8, int4, int4, float8)'::regprocedure,
               'dp_percentile(int4, float8, int4, int4, float8, float8)'::regprocedure,
               'dp_percentile_em(int4, float8, int4, int4)'::regprocedure,
               'dp_percentile_em(int4, float8, int4, int4, float8)'::regprocedure,
               'dp_median(int8, int8, int8)'::regprocedure,
               'dp_median(int8, int8, int8, float8)'::regprocedure,
               'dp_median(int8, int8, int8, float8, float8)'::regprocedure,
               'dp_percentile(int8, float8, int8, int8)'::regprocedure,
               'dp_percentile(int8, float8, int8, int8, float8)'::regprocedure,
               'dp_percentile(int8, float8, int8, int8, float8, float8)'::regprocedure,
               'dp_percentile_em(int8, float8, int8, int8)'::regprocedure,
               'dp_percentile_em(int8, float8, int8, int8, float8)'::regprocedure);
