// Automatic bounds (src/aggregates/autobounds.rs, docs/privacy/automatic-bounds.md): dp_sum, dp_avg,
// dp_median and dp_percentile without bounds on a column without declared ones choose DP bounds
// with a share of ε, charge the whole ε before running, work in parallel plans, and release a value
// whatever the data (on too little data, bounds from the largest noisy count of a default range, listed
// by dp.last_releases).

/// 100,000 rows: ages 17..=90 (`age`, int4) and a skewed income (`income`, float8, 20·e^(…) up to
/// about 2.9 million).
fn people() {
    Spi::run(
        "CREATE TABLE people AS SELECT g AS id, 17 + (g * 7919) % 74 AS age,
                round(20 * exp(((g::int8 * 104729) % 1000) / 1000.0 * 11.9))::float8 AS income
           FROM generate_series(1, 100000) g",
    )
    .unwrap();
    Spi::run("SET dp.require_budget = off").unwrap();
}

#[pg_test]
fn automatic_bounds_land_near_the_truth_on_large_data() {
    people();
    let sum = one_i64("SELECT dp_sum(age, 1) FROM people");
    let exact = one_i64("SELECT sum(age)::int8 FROM people");
    assert!(((sum - exact) as f64).abs() < 0.01 * exact as f64, "{sum} vs {exact}");
    let avg = one_f64("SELECT dp_avg(age::float8, 1) FROM people");
    let exact = one_f64("SELECT avg(age)::float8 FROM people");
    assert!((avg - exact).abs() < 0.5, "{avg} vs {exact}");
    let med = one_f64("SELECT dp_median(age::float8, 1) FROM people");
    assert!((med - 53.0).abs() <= 2.0, "{med}");
    let p90 = one_f64("SELECT dp_percentile(income, 0.9, 1) FROM people");
    let exact = one_f64("SELECT percentile_disc(0.9) WITHIN GROUP (ORDER BY income) FROM people");
    assert!((p90 - exact).abs() < 0.1 * exact, "{p90} vs {exact}");
    // a skewed column: the chosen upper bound is a power of two at or above most of the mass; the sum
    // of incomes lands within 5% (the top rows may be clamped)
    let s = one_f64("SELECT dp_sum(income, 1) FROM people");
    let exact = one_f64("SELECT sum(income) FROM people");
    assert!((s - exact).abs() < 0.05 * exact, "{s} vs {exact}");
}

#[pg_test]
fn automatic_bounds_charge_the_whole_epsilon_before_running() {
    people();
    let mark = one_i64("SELECT coalesce(max(id), 0) FROM dp.ledger");
    one_f64("SELECT dp_avg(income, 0.5) FROM people");
    let r = one_text(&format!(
        "SELECT concat_ws('|', aggregate, mechanism, epsilon, details->>'bounds_share') FROM dp.ledger WHERE id > {mark}"
    ));
    assert_eq!(r, "dp_avg(double precision,double precision)|discrete_laplace_with_dp_bounds|0.5|0.2");
    // the preview shows the same receipt
    let shown = one_text("SELECT concat_ws('|', aggregate, mechanism, epsilon) FROM dp.preview('SELECT dp_avg(income, 0.5) FROM people')");
    assert_eq!(shown, "dp_avg(double precision,double precision)|discrete_laplace_with_dp_bounds|0.5");
    // the session list shows the release's own scale and interval at the chosen bounds
    let row = one_text("SELECT concat_ws('|', aggregate, epsilon, mechanism, noise_scale > 0, interval_95 > 0) FROM dp.last_releases(1)");
    assert_eq!(row, "dp_avg|0.5|discrete_laplace_with_dp_bounds|t|t");
}

#[pg_test]
fn too_little_data_still_releases_a_value_at_the_charged_epsilon() {
    Spi::run("CREATE TABLE few AS SELECT g::float8 AS x FROM generate_series(1, 5) g").unwrap();
    Spi::run("CREATE TABLE same AS SELECT 7::float8 AS x FROM generate_series(1, 300) g").unwrap();
    Spi::run("SET dp.require_budget = off").unwrap();
    for (sql, table) in [
        ("SELECT dp_sum(x, 0.1) FROM few", "few"),
        ("SELECT dp_avg(x, 0.1) FROM few", "few"),
        ("SELECT dp_median(x, 0.1) FROM few", "few"),
        ("SELECT dp_avg(x, 0.01) FROM few WHERE false", "an empty table"),
        ("SELECT dp_sum(x, 0.01) FROM same", "all values equal"),
        ("SELECT dp_percentile(x, 0.9, 0.01) FROM same", "all values equal"),
    ] {
        let before = one_i64("SELECT count(*) FROM dp.ledger");
        assert!(error_of(sql).is_none(), "{table}: {sql} failed: {:?}", error_of(sql));
        assert_eq!(one_i64("SELECT count(*) FROM dp.ledger"), before + 1, "{table}: charged once");
        // the bounds it used: 0 or a power of two within the default range, one side at most
        let lower = one_f64("SELECT lower FROM dp.last_releases(1)");
        let upper = one_f64("SELECT upper FROM dp.last_releases(1)");
        assert!(lower <= 0.0 && upper >= 0.0 && (lower == 0.0 || upper == 0.0), "{table}: [{lower}, {upper}]");
        assert!(upper <= 2f64.powi(32) && lower >= -(2f64.powi(32)), "{table}: [{lower}, {upper}]");
    }
    // a call with bounds lists none
    Spi::run("SELECT dp_sum(x, 0, 10, 0.1) FROM few").unwrap();
    assert_eq!(one_i64("SELECT count(*) FROM dp.last_releases(1) WHERE lower IS NULL AND upper IS NULL"), 1);
}

#[pg_test]
fn automatic_bounds_run_in_parallel_plans_and_groups() {
    people();
    Spi::run("SET max_parallel_workers_per_gather = 2").unwrap();
    Spi::run("SET parallel_setup_cost = 0").unwrap();
    Spi::run("SET parallel_tuple_cost = 0").unwrap();
    Spi::run("SET min_parallel_table_scan_size = 0").unwrap();
    let plan = column("EXPLAIN (COSTS OFF) SELECT dp_sum(age, 1) FROM people").into_iter().flatten().collect::<Vec<_>>().join("\n");
    assert!(plan.contains("Partial Aggregate"), "{plan}");
    let sum = one_i64("SELECT dp_sum(age, 1) FROM people");
    let exact = one_i64("SELECT sum(age)::int8 FROM people");
    assert!(((sum - exact) as f64).abs() < 0.01 * exact as f64, "{sum} vs {exact}");
    let groups = column("SELECT dp_avg(income, 1)::text FROM people GROUP BY age % 4");
    assert_eq!(groups.len(), 4);
    // numeric and bigint inputs
    let s: AnyNumeric = Spi::get_one("SELECT dp_sum(id::int8, 1) FROM people").unwrap().unwrap();
    let s: f64 = s.try_into().unwrap();
    assert!((s - 5_000_050_000.0).abs() < 0.01 * 5_000_050_000.0, "{s}");
    let a = one_f64("SELECT dp_avg(age::numeric, 1)::float8 FROM people");
    assert!((a - 53.5).abs() < 1.0, "{a}");
}

#[pg_test]
fn automatic_bounds_are_refused_with_a_privacy_unit_and_where_unsupported() {
    people();
    Spi::run("SELECT dp.protect_table('people', privacy_unit => 'id')").unwrap();
    let e = error_of("SELECT dp_sum(age, 1) FROM people").unwrap();
    assert!(e.contains("without bounds over a table with a privacy unit") && e.contains("dp.set_bounds"), "{e}");
    Spi::run("SELECT dp.set_bounds('people', 'age', 0, 100)").unwrap();
    assert!(one_i64("SELECT dp_sum(age, 1e6) FROM people") > 0, "declared bounds work with the unit");
    // the other aggregates have no automatic bounds
    let e = error_of("SELECT dp_variance(income, 1) FROM people").unwrap();
    assert!(e.contains("has no declared bounds"), "{e}");
}
