// Attacks found in review. Each query here used to obtain more releases than it paid for, or
// information without paying; each must now be refused before anything is charged.

fn refused_without_charge(sql: &str, expect: &str) {
    let before = receipts();
    refused(sql, expect);
    assert_eq!(receipts(), before, "charged although refused: {sql}");
}

/// The query fails with `expect` in its message or hint.
fn refused(sql: &str, expect: &str) {
    let err = PgTryBuilder::new(|| {
        Spi::run(sql).unwrap();
        None
    })
    .catch_others(|e| match e {
        pg_sys::panic::CaughtError::PostgresError(r)
        | pg_sys::panic::CaughtError::ErrorReport(r)
        | pg_sys::panic::CaughtError::RustPanic { ereport: r, .. } => {
            Some(format!("{} (hint: {})", r.message(), r.hint().unwrap_or("")))
        }
    })
    .execute();
    let msg = err.unwrap_or_else(|| panic!("not refused: {sql}"));
    assert!(msg.contains(expect), "{sql}\n  got: {msg}\n  expected: {expect}");
}

/// As the test role: refused, and (checked as superuser afterwards) nothing charged.
fn refused_as_role(role: &str, sql: &str, expect: &str) {
    let before = receipts();
    Spi::run(&format!("SET ROLE {role}")).unwrap();
    refused(sql, expect);
    Spi::run("RESET ROLE").unwrap();
    assert_eq!(receipts(), before, "charged although refused: {sql}");
}

#[pg_test]
fn a_join_cannot_repeat_rows_under_a_dp_aggregate() {
    sample_table();
    refused_without_charge(
        "SELECT dp_count(x, 0.1) FROM s CROSS JOIN generate_series(1, 1000) k",
        "dp_count must aggregate the rows of one table: its input joins tables",
    );
    refused_without_charge(
        "SELECT k, dp_count(x, 0.1) FROM s CROSS JOIN generate_series(1, 50) k GROUP BY k",
        "joins tables",
    );
    refused_without_charge("SELECT dp_sum(a.x, 0, 10, 0.1) FROM s a JOIN s b ON a.i = b.i", "joins tables");
}

#[pg_test]
fn a_set_returning_function_cannot_repeat_rows() {
    sample_table();
    refused_without_charge(
        "SELECT dp_count(g, 0.1) FROM (SELECT generate_series(1, 100) AS g, x FROM s) q",
        "set-returning function",
    );
}

#[pg_test]
fn a_table_cannot_be_read_twice() {
    sample_table();
    refused_without_charge(
        "SELECT dp_count(x, 0.1) FROM (SELECT x FROM s UNION ALL SELECT x FROM s) u",
        "reads the same table more than once",
    );
}

#[pg_test]
fn rows_cannot_be_selected_by_a_subquery() {
    sample_table();
    refused_without_charge(
        "SELECT dp_count(x, 0.1) FROM s WHERE x > (SELECT avg(x) FROM s)",
        "selects rows with a subquery",
    );
    refused_without_charge(
        "SELECT dp_count(x, 0.1) FROM s WHERE i IN (SELECT i FROM s WHERE x < 10)",
        "dp_count must aggregate the rows of one table",
    );
}

#[pg_test]
fn an_aggregate_of_an_aggregate_is_refused() {
    sample_table();
    refused_without_charge(
        "SELECT dp_sum(c, 0, 10, 0.1) FROM (SELECT i % 7 AS k, count(*) AS c FROM s GROUP BY 1) g",
        "aggregates the result of another aggregation",
    );
}

#[pg_test]
fn one_table_through_views_partitions_and_filters_is_allowed() {
    sample_table();
    Spi::run("CREATE VIEW sv AS SELECT x, i FROM s WHERE i % 2 = 0").unwrap();
    assert_eq!(one_i64("SELECT dp_count(x, 1e6) FROM sv WHERE x < 501"), 250);
    Spi::run("CREATE TABLE pt (i int, x float8) PARTITION BY RANGE (i)").unwrap();
    Spi::run("CREATE TABLE pt1 PARTITION OF pt FOR VALUES FROM (0) TO (500)").unwrap();
    Spi::run("CREATE TABLE pt2 PARTITION OF pt FOR VALUES FROM (500) TO (1001)").unwrap();
    Spi::run("INSERT INTO pt SELECT i, x FROM s").unwrap();
    assert_eq!(one_i64("SELECT dp_count(x, 1e6) FROM pt"), 1000);
    assert_eq!(one_i64("SELECT dp_count(x, 1e6) FROM (SELECT DISTINCT ON (i) x FROM s ORDER BY i LIMIT 10) d"), 10);
}

#[pg_test]
fn a_scrollable_cursor_is_refused() {
    sample_table();
    Spi::run("BEGIN").ok();
    refused_without_charge(
        "DECLARE c SCROLL CURSOR FOR SELECT i % 3, dp_count(x, 0.1) FROM s GROUP BY 1 ORDER BY 2",
        "cannot be used in a scrollable cursor",
    );
    // implicitly scrollable (the Sort on top can run backwards): refused too
    refused_without_charge(
        "DECLARE c2 CURSOR FOR SELECT (i % 3)::text, dp_count(x, 0.1) FROM s GROUP BY 1 ORDER BY 2 LIMIT 10",
        "cannot be used in a scrollable cursor",
    );
    let before = receipts();
    Spi::run("DECLARE c3 NO SCROLL CURSOR FOR SELECT (i % 3)::text, dp_count(x, 0.1) FROM s GROUP BY 1 ORDER BY 2").unwrap();
    assert_eq!(column("FETCH ALL FROM c3").len(), 3);
    assert_eq!(receipts(), before + 1);
}

#[pg_test]
fn window_use_is_refused_even_without_rows() {
    sample_table();
    refused_without_charge("SELECT dp_count(*) OVER () FROM s WHERE false", "cannot be used as a window function");
}

#[pg_test]
fn parameters_computed_by_functions_are_refused() {
    sample_table();
    Spi::run("CREATE FUNCTION dp_t_leak() RETURNS float8 LANGUAGE sql STABLE AS $$ SELECT 1e7 + count(*) FROM s $$").unwrap();
    refused_without_charge("SELECT dp_count(x, dp_t_leak()) FROM s", "uses a user-defined function");
    Spi::run("CREATE FUNCTION dp_t_leak2(v float8) RETURNS float8 LANGUAGE plpgsql STABLE AS $$ BEGIN RETURN v + (SELECT max(x) FROM s); END $$").unwrap();
    refused_without_charge("SELECT dp_sum(x, 0, dp_t_leak2(1), 0.1) FROM s", "uses a user-defined function");
    refused_without_charge("SELECT dp_sum(x, 0, current_setting('dp.t_hi')::float8, 0.1) FROM s", "not immutable");
}

#[pg_test]
fn analyst_cannot_see_exact_row_counts_through_explain_analyze() {
    sample_table();
    Spi::run("CREATE ROLE dp_mallory").unwrap();
    Spi::run("GRANT SELECT ON s TO dp_mallory").unwrap();
    Spi::run("SET dp.require_budget = off").unwrap();
    refused_as_role("dp_mallory", "EXPLAIN ANALYZE SELECT dp_count(x, 0.1) FROM s WHERE x < 10", "cannot run under EXPLAIN ANALYZE");
}

#[pg_test]
fn nothing_is_charged_when_the_caller_may_not_read_the_table() {
    sample_table();
    Spi::run("CREATE ROLE dp_mallory").unwrap();
    Spi::run("SET dp.require_budget = off").unwrap();
    refused_as_role("dp_mallory", "SELECT dp_count(x, 0.5) FROM s", "permission denied");
}

#[pg_test]
fn the_seed_is_hidden_from_and_ignored_for_non_superusers() {
    sample_table();
    Spi::run("CREATE ROLE dp_mallory").unwrap();
    Spi::run("GRANT SELECT ON s TO dp_mallory").unwrap();
    Spi::run("SET dp.require_budget = off").unwrap();
    let q = "SELECT dp_sum(x, 0, 1000, 0.1)::text FROM s";
    Spi::run("SET dp.seed = 5").unwrap();
    Spi::run("SET ROLE dp_mallory").unwrap();
    let a = one_text(q);
    Spi::run("RESET ROLE").unwrap();
    Spi::run("SET dp.seed = 5").unwrap();
    Spi::run("SET ROLE dp_mallory").unwrap();
    let b = one_text(q);
    assert_ne!(a, b, "a non-superuser's noise followed the seed");
    let shown = PgTryBuilder::new(|| Some(one_text("SELECT current_setting('dp.seed')")))
        .catch_others(|_| None)
        .execute();
    assert!(shown.is_none(), "a non-superuser read dp.seed: {shown:?}");
}

#[pg_test]
fn my_budget_matches_the_role_by_name_not_by_a_regrole_cast() {
    Spi::run("CREATE ROLE dp_victim").unwrap();
    Spi::run("SELECT dp.grant_budget('dp_victim', 7)").unwrap();
    let oid = one_text("SELECT 'dp_victim'::regrole::oid::text");
    // a role whose name is the victim's OID, and one whose name differs only in case
    Spi::run(&format!("CREATE ROLE \"{oid}\"")).unwrap();
    Spi::run("CREATE ROLE \"DP_VICTIM\"").unwrap();
    for r in [format!("\"{oid}\""), "\"DP_VICTIM\"".to_string()] {
        Spi::run(&format!("SET ROLE {r}")).unwrap();
        assert_eq!(one_i64("SELECT count(*) FROM dp.my_budget"), 0, "{r} sees another role's budget");
        Spi::run("RESET ROLE").unwrap();
    }
    Spi::run("SET ROLE dp_victim").unwrap();
    assert_eq!(one_text("SELECT epsilon_remaining::text FROM dp.my_budget"), "7");
}

// A subquery in the aggregated value or in FILTER is computed in the Agg node itself, above the
// input the hook checks: it could make every row's value depend on one person's row.
#[pg_test(error = "dp_median must aggregate the rows of one table: its input computes its value or FILTER with a subquery, which can read other rows")]
fn a_subquery_in_the_aggregated_value_is_refused() {
    sample_table();
    one_f64("SELECT dp_median(x * (SELECT count(*) FROM s WHERE i = 42), 0, 100) FROM s");
}

#[pg_test(error = "dp_count must aggregate the rows of one table: its input computes its value or FILTER with a subquery, which can read other rows")]
fn a_subquery_in_filter_is_refused() {
    sample_table();
    one_i64("SELECT dp_count(*) FILTER (WHERE (SELECT count(*) FROM s WHERE i = 42) > 0) FROM s");
}
