-- pg_dp: private synthetic microdata (hand-written). dp.release_synthetic checks every argument and
-- each column's public encoding, creates the target and its report, charges the caller's budget in
-- the ledger, and only then reads the source by a direct scan of its leaves. VOLATILE. Derivations:
-- docs/privacy/synthetic.md (the model) and docs/privacy/synthetic-criteria.md (criteria, selection).

CREATE FUNCTION dp.release_synthetic(source regclass, target text, columns text[], epsilon float8, delta float8 DEFAULT 0,
                                     bins int DEFAULT 16, bin_edges jsonb DEFAULT NULL, method text DEFAULT 'mst',
                                     criteria jsonb DEFAULT NULL, gamma float8 DEFAULT 0.1, epsilon0 float8 DEFAULT 0.01,
                                     refit boolean DEFAULT false, rows bigint DEFAULT NULL, min_count int DEFAULT 1,
                                     constraints text DEFAULT NULL)
    RETURNS jsonb LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'release_synthetic_wrapper';
COMMENT ON FUNCTION dp.release_synthetic(regclass, text, text[], float8, float8, int, jsonb, text, jsonb, float8, float8, boolean, bigint, int, text) IS
    'pg_dp: creates table target (owned by the caller) with a differentially private synthetic copy of columns of source (a table or partitioned table, one row per person) and target_report with the public report; (epsilon, delta)-DP in total for adding or removing one row (delta = 0: pure epsilon). Each column needs public values: a domain (dp.set_domain; NULL and values outside it are released as NULL), bin edges in bin_edges ({"column": [edges]}), or declared bounds (dp.set_bounds) cut into bins equal bins, or, with {"column": "private"}, into bins bins whose edges are chosen with DP after the charge (a tenth of epsilon for all such edges); booleans are their two values. method mst (a tree of 2-way marginals chosen privately), tree2 (a 2-tree of 3-column cliques) or privbayes. criteria (a JSON array) are acceptance criteria computed with DP; candidates are drawn until one passes them all by private selection (stopping probability gamma, epsilon0 for the cap on tries; refit fits a new model per try), and epsilon is split between the model, the criteria and the loop. Post-processing, free: rows (the number of rows drawn; NULL: the noisy row count), constraints (a boolean SQL expression over the columns: rows for which it is not true are drawn again, at most 20 draws per row) and min_count (rows whose binned values occur fewer times are dropped). Charged to the caller''s budget before the source is read; returns the receipt';

-- A DP release charged to the caller, like the aggregates: executable by everyone with a budget.
GRANT EXECUTE ON FUNCTION dp.release_synthetic(regclass, text, text[], float8, float8, int, jsonb, text, jsonb, float8, float8, boolean, bigint, int, text) TO PUBLIC;

CREATE FUNCTION dp.preview_synthetic(source regclass, columns text[], epsilon float8, delta float8 DEFAULT 0,
                                     bins int DEFAULT 16, bin_edges jsonb DEFAULT NULL, method text DEFAULT 'mst',
                                     criteria jsonb DEFAULT NULL, gamma float8 DEFAULT 0.1, epsilon0 float8 DEFAULT 0.01,
                                     refit boolean DEFAULT false, rows bigint DEFAULT NULL, min_count int DEFAULT 1,
                                     constraints text DEFAULT NULL, runs int DEFAULT 10)
    RETURNS jsonb LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'preview_synthetic_wrapper';
COMMENT ON FUNCTION dp.preview_synthetic(regclass, text[], float8, float8, int, jsonb, text, jsonb, float8, float8, boolean, bigint, int, text, int) IS
    'pg_dp: runs the pipeline of dp.release_synthetic with the same arguments runs times (1 to 100) on a table the caller may read directly (not protected, or the caller owns it, is trusted or a superuser), uncharged and writing nothing; returns how often a candidate was accepted, the mean rows, the criteria''s mean values and the mean total-variation distance of the copies'' 1-way and 2-way tables from the table''s. For choosing settings on public look-alike data before paying for a release';
GRANT EXECUTE ON FUNCTION dp.preview_synthetic(regclass, text[], float8, float8, int, jsonb, text, jsonb, float8, float8, boolean, bigint, int, text, int) TO PUBLIC;
