-- pg_dp: private release of a whole table by random projection (DPRP; hand-written, loaded last).
-- Both functions check every argument and the catalog, charge the caller's budget in the ledger,
-- and only then read the source by a direct scan of its leaves. VOLATILE. Derivation:
-- docs/privacy/dprp.md.

CREATE FUNCTION dp.release_projection(source regclass, target text, columns text[], lower float8[], upper float8[],
                                      epsilon float8, delta float8, k1 int DEFAULT NULL, k2 int DEFAULT NULL,
                                      projection_share float8 DEFAULT 0.5, row_norm text DEFAULT 'clip',
                                      clip_norm float8 DEFAULT NULL, centring text DEFAULT 'midpoint')
    RETURNS jsonb LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'release_projection_wrapper';
COMMENT ON FUNCTION dp.release_projection(regclass, text, text[], float8[], float8[], float8, float8, int, int, float8, text, float8, text) IS
    'pg_dp: creates table target (owned by the caller) with a differentially private copy of the numeric columns of source (a table or partitioned table) by random projection (DPRP): (epsilon, delta)-DP for adding or removing one row; m = n + padding rows released in random order (a noisy row count); NULL and NaN at the midpoint of their bounds, other values clamped to the bounds; k1 = projection width, k2 = principal directions kept, projection_share of the budget for the projection, row_norm clip (keeps units, clip_norm default sqrt(d)/2) or unit, centring midpoint or mean (a DP mean paid from the budget); memory bounded by maintenance_work_mem; charged to the caller''s budget before the source is read; returns the receipt';

CREATE FUNCTION dp.release_projection_rows(source regclass, columns text[], lower float8[], upper float8[],
                                           epsilon float8, delta float8, k1 int DEFAULT NULL, k2 int DEFAULT NULL,
                                           projection_share float8 DEFAULT 0.5, row_norm text DEFAULT 'clip',
                                           clip_norm float8 DEFAULT NULL, centring text DEFAULT 'midpoint')
    RETURNS SETOF float8[] LANGUAGE c VOLATILE ROWS 1000 AS 'MODULE_PATHNAME', 'dp_release_projection_rows';
COMMENT ON FUNCTION dp.release_projection_rows(regclass, text[], float8[], float8[], float8, float8, int, int, float8, text, float8, text) IS
    'pg_dp: the DPRP release of dp.release_projection as rows (float8[] in column order) instead of a table; charged the same way, receipt in dp.ledger';

-- DP releases charged to the caller, like the aggregates: executable by everyone with a budget.
GRANT EXECUTE ON FUNCTION dp.release_projection(regclass, text, text[], float8[], float8[], float8, float8, int, int, float8, text, float8, text) TO PUBLIC;
GRANT EXECUTE ON FUNCTION dp.release_projection_rows(regclass, text[], float8[], float8[], float8, float8, int, int, float8, text, float8, text) TO PUBLIC;
