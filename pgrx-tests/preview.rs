// dp.preview: the receipts a query would write, without running it or charging; equal to the
// receipts the query then writes; refused exactly when the query is.

/// The receipts written since receipt `mark`, as comparable text (the fields preview shows).
fn receipts_since(mark: i64) -> Vec<Option<String>> {
    column(&format!(
        "SELECT concat_ws('|', aggregate, mechanism, epsilon, delta, sensitivity, round(noise_scale::numeric, 6), (details - 'execution')::text)
           FROM dp.ledger WHERE id > {mark} ORDER BY id"
    ))
}

fn preview_of(sql: &str) -> Vec<Option<String>> {
    column(&format!(
        "SELECT concat_ws('|', aggregate, mechanism, epsilon, delta, sensitivity, round(noise_scale::numeric, 6), details::text)
           FROM dp.preview({})",
        pgrx::spi::quote_literal(sql)
    ))
}

#[pg_test]
fn preview_matches_the_charge_and_charges_nothing() {
    sample_table();
    Spi::run("SET dp.require_budget = off").unwrap();
    Spi::run("SELECT dp.set_bounds('s', 'x', 0, 100)").unwrap();
    Spi::run("SET dp.privacy_level = 'high'").unwrap();
    for sql in [
        "SELECT dp_count(*) FROM s",
        "SELECT dp_sum(i, 0, 100, 0.5), dp_avg(x, 0, 1000) FROM s WHERE i > 10",
        "SELECT i % 3, dp_variance(x, 0, 1000, 0.25), dp_median(x, 0, 1000, 0.5, 1e-6) FROM s GROUP BY i % 3",
        "SELECT dp_percentile_em(x, 0.9, 0, 1000, 0.5), dp_sum(x) FROM s",
        "SELECT dp_count(*) FROM s GROUP BY GROUPING SETS ((i % 2), (i % 5))",
        "SELECT dp_count(*) FROM s GROUP BY i % 2 HAVING dp_count(i, 0.1) > 10",
    ] {
        let mark = one_i64("SELECT coalesce(max(id), 0) FROM dp.ledger");
        let shown = preview_of(sql);
        assert_eq!(one_i64("SELECT coalesce(max(id), 0) FROM dp.ledger"), mark, "preview charged: {sql}");
        assert!(!shown.is_empty(), "{sql}");
        Spi::run(sql).unwrap();
        assert_eq!(shown, receipts_since(mark), "{sql}");
    }
    // the cost: sum(epsilon)
    assert_eq!(one_text("SELECT sum(epsilon)::text FROM dp.preview('SELECT dp_count(x, 0.25), dp_sum(x, 0.5) FROM s')"), "0.75");
}

#[pg_test]
fn preview_with_units_and_private_keys_matches_the_charge() {
    Spi::run("CREATE TABLE visits AS SELECT g AS id, g % 100 AS person, g % 7 AS ward, (g % 50)::float8 AS cost FROM generate_series(1, 2000) g").unwrap();
    Spi::run("SELECT dp.protect_table('visits', privacy_unit => 'person', max_groups_contributed => 2)").unwrap();
    Spi::run("SET dp.require_budget = off").unwrap();
    for sql in [
        "SELECT dp_sum(cost, 0, 50, 0.5) FROM visits",
        "SELECT ward, dp_count(id, 0.5), dp_avg(cost, 0, 50, 0.5) FROM visits GROUP BY ward",
    ] {
        let mark = one_i64("SELECT coalesce(max(id), 0) FROM dp.ledger");
        let shown = preview_of(sql);
        Spi::run(sql).unwrap();
        assert_eq!(shown, receipts_since(mark), "{sql}");
    }
}

#[pg_test]
fn preview_refuses_what_the_query_check_refuses() {
    sample_table();
    for sql in [
        "SELECT dp_sum(x, 0, 1, 1) OVER () FROM s",
        "SELECT dp_avg(b, 0, 1, 1) FROM (SELECT max(x) OVER () AS b FROM s) q",
        "SELECT dp_count(*) FROM s WHERE ln(i - 5) = 1",
        "SELECT dp_variance(xn, 1) FROM s",
    ] {
        let shown = error_of(&format!("SELECT * FROM dp.preview({})", pgrx::spi::quote_literal(sql))).unwrap_or_else(|| panic!("previewed: {sql}"));
        let ran = error_of(sql).unwrap();
        assert_eq!(shown, ran, "{sql}");
    }
    let e = error_of("SELECT * FROM dp.preview('SELECT dp_count(x, $1) FROM s')").unwrap();
    assert!(e.contains("must be literals here"), "{e}");
    let e = error_of("SELECT * FROM dp.preview('SELECT 1; SELECT 2')").unwrap();
    assert!(e.contains("one statement"), "{e}");
    let e = error_of("SELECT * FROM dp.preview('DELETE FROM s')").unwrap();
    assert!(e.contains("must be a SELECT"), "{e}");
    let e = error_of("SELECT * FROM dp.preview('SELECT dp_count(x, 0) FROM s')").unwrap();
    assert!(e.contains("epsilon"), "{e}");
    // a query without DP aggregates previews to nothing
    assert_eq!(one_i64("SELECT count(*) FROM dp.preview('SELECT 1')"), 0);
}

#[pg_test]
fn preview_reads_no_rows() {
    sample_table();
    // the table's scan counter does not move: the query is never run
    let before = one_i64("SELECT coalesce(sum(seq_scan), 0)::int8 FROM pg_stat_xact_user_tables WHERE relname = 's'");
    one_i64("SELECT count(*) FROM dp.preview('SELECT dp_count(x, 1) FROM s')");
    assert_eq!(one_i64("SELECT coalesce(sum(seq_scan), 0)::int8 FROM pg_stat_xact_user_tables WHERE relname = 's'"), before);
}
