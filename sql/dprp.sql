-- pg_dp: private release of a whole table by random projection (DPRP; hand-written, loaded last).
-- Both functions read the source with the caller's privileges, charge the caller's budget in the
-- ledger before writing anything, and are VOLATILE. Derivation: docs/privacy/dprp.md.

CREATE FUNCTION dp.release_projection(source regclass, target text, columns text[], lower float8[], upper float8[],
                                      epsilon float8, delta float8, k1 int DEFAULT NULL, k2 int DEFAULT NULL,
                                      projection_share float8 DEFAULT 0.8, row_norm text DEFAULT 'clip')
    RETURNS jsonb LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'release_projection_wrapper';
COMMENT ON FUNCTION dp.release_projection(regclass, text, text[], float8[], float8[], float8, float8, int, int, float8, text) IS
    'pg_dp: creates table target (owned by the caller) with a differentially private copy of the numeric columns of source by random projection (DPRP): (epsilon, delta)-DP for replacing one row, the row count is released; values scaled by the public bounds; projection_share splits the zCDP budget between the projection and the covariance; row_norm clip (keeps units) or unit (the paper''s row normalisation); charged to the caller''s budget; returns the receipt';

CREATE FUNCTION dp.release_projection_rows(source regclass, columns text[], lower float8[], upper float8[],
                                           epsilon float8, delta float8, k1 int DEFAULT NULL, k2 int DEFAULT NULL,
                                           projection_share float8 DEFAULT 0.8, row_norm text DEFAULT 'clip')
    RETURNS SETOF float8[] LANGUAGE c VOLATILE ROWS 1000 AS 'MODULE_PATHNAME', 'release_projection_rows_wrapper';
COMMENT ON FUNCTION dp.release_projection_rows(regclass, text[], float8[], float8[], float8, float8, int, int, float8, text) IS
    'pg_dp: the DPRP release of dp.release_projection as rows (float8[] in column order) instead of a table; charged the same way, receipt in dp.ledger';

-- DP releases charged to the caller, like the aggregates: executable by everyone with a budget.
GRANT EXECUTE ON FUNCTION dp.release_projection(regclass, text, text[], float8[], float8[], float8, float8, int, int, float8, text) TO PUBLIC;
GRANT EXECUTE ON FUNCTION dp.release_projection_rows(regclass, text[], float8[], float8[], float8, float8, int, int, float8, text) TO PUBLIC;
