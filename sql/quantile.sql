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
