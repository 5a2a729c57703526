-- pg_dp: sensitivity inspection functions (hand-written; loaded after ledger.sql).
-- They return exact values computed from the data: superusers and dp_admin only.

CREATE FUNCTION dp.local_sensitivity_percentile(vals float8[], p float8, lower float8, upper float8)
    RETURNS float8 LANGUAGE c IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_local_sensitivity_percentile';
COMMENT ON FUNCTION dp.local_sensitivity_percentile(float8[], float8, float8, float8) IS
    'pg_dp: local sensitivity bound A^(0) of the p-quantile of vals clamped to [lower, upper], bounds as outer order statistics, add/remove neighbours (exact, not private: dp_admin)';

CREATE FUNCTION dp.smooth_sensitivity_percentile(vals float8[], p float8, lower float8, upper float8, beta float8)
    RETURNS float8 LANGUAGE c IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_smooth_sensitivity_percentile';
COMMENT ON FUNCTION dp.smooth_sensitivity_percentile(float8[], float8, float8, float8, float8) IS
    'pg_dp: beta-smooth sensitivity of the p-quantile as dp_median and dp_percentile use it: the smaller of max_k e^(-k beta) A^(k) and the reachable-range bound, computed in O(n log n) (exact, not private: dp_admin)';

CREATE FUNCTION dp.local_sensitivity_array(vals float8[], p float8, lower float8, upper float8, kmax int)
    RETURNS float8[] LANGUAGE c IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_local_sensitivity_array';
COMMENT ON FUNCTION dp.local_sensitivity_array(float8[], float8, float8, float8, int) IS
    'pg_dp internal: A^(k) for k = 0..kmax as an array; use dp.local_sensitivity_table';

CREATE FUNCTION dp.local_sensitivity_table(vals float8[], p float8, lower float8, upper float8, kmax int DEFAULT 10)
    RETURNS TABLE (k int, local_sensitivity float8)
    LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT (t.k - 1)::int, t.a FROM unnest(dp.local_sensitivity_array(vals, p, lower, upper, kmax)) WITH ORDINALITY AS t(a, k)
$$;
COMMENT ON FUNCTION dp.local_sensitivity_table(float8[], float8, float8, float8, int) IS
    'pg_dp: the table of A^(k), the bound on the local sensitivity at distance k, for k = 0..kmax (exact, not private: dp_admin)';

REVOKE EXECUTE ON FUNCTION dp.local_sensitivity_percentile(float8[], float8, float8, float8) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.smooth_sensitivity_percentile(float8[], float8, float8, float8, float8) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.local_sensitivity_array(float8[], float8, float8, float8, int) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.local_sensitivity_table(float8[], float8, float8, float8, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dp.local_sensitivity_percentile(float8[], float8, float8, float8) TO dp_admin;
GRANT EXECUTE ON FUNCTION dp.smooth_sensitivity_percentile(float8[], float8, float8, float8, float8) TO dp_admin;
GRANT EXECUTE ON FUNCTION dp.local_sensitivity_array(float8[], float8, float8, float8, int) TO dp_admin;
GRANT EXECUTE ON FUNCTION dp.local_sensitivity_table(float8[], float8, float8, float8, int) TO dp_admin;
