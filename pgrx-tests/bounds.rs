// Declared bounds (dp.set_bounds, dp.learn_bounds; src/query/bounds.rs): calls without bounds take the
// column's declared bounds before planning and give the same release as the bounded call; without a
// declaration, those without automatic bounds are refused (SQLSTATE 22023); learning reads only
// public tables and charges nothing.

fn bounds_setup() {
    sample_table();
    Spi::run("SET dp.require_budget = off").unwrap();
    Spi::run("SELECT dp.set_bounds('s', 'x', 0, 100)").unwrap();
    Spi::run("SELECT dp.set_bounds('s', 'i', 0, 100)").unwrap();
    Spi::run("SELECT dp.set_bounds('s', 'n', 0, 100)").unwrap();
}

#[pg_test]
fn calls_without_bounds_use_the_declared_bounds() {
    bounds_setup();
    // Σ min(i, 100) = 5050 + 900·100, exact at ε = 1e6
    assert_eq!(one_i64("SELECT dp_sum(i, 1e6) FROM s"), 95050);
    let v = one_f64("SELECT dp_sum(x, 1e6) FROM s");
    assert!((v - 95050.0).abs() < 0.01, "{v}");
    let v = one_f64("SELECT dp_avg(n, 1e6)::float8 FROM s");
    assert!((v - 95.05).abs() < 0.01, "{v}");
    let v = one_f64("SELECT dp_median(x, 1e6) FROM s");
    assert!((v - 100.0).abs() < 0.5, "{v}");
    let v = one_f64("SELECT dp_percentile(x, 0.05, 1e6) FROM s");
    assert!((v - 50.0).abs() < 1.5, "{v}");
    let exact = one_f64("SELECT var_samp(least(x, 100)) FROM s");
    let v = one_f64("SELECT dp_variance(x, 1e6) FROM s");
    assert!((v - exact).abs() < 1e-3 * exact, "{v} vs {exact}");
    // through a view, a subquery, a join alias and an implicit cast (smallint → bigint sum)
    Spi::run("CREATE VIEW sv AS SELECT x AS value, i FROM s").unwrap();
    let v = one_f64("SELECT dp_sum(value, 1e6) FROM sv");
    assert!((v - 95050.0).abs() < 0.01, "{v}");
    let v = one_f64("SELECT dp_sum(y, 1e6) FROM (SELECT x AS y FROM s WHERE i > 0) q");
    assert!((v - 95050.0).abs() < 0.01, "{v}");
    Spi::run("SELECT dp.set_bounds('s', 'r', 0, 10)").unwrap();
    let v = one_f64("SELECT dp_avg(r, 1e6) FROM s");
    assert!((v - 9.955).abs() < 0.01, "a real column through its implicit cast to float8: {v}");
    // GROUP BY and the default ε
    assert_eq!(column("SELECT dp_sum(i)::text FROM s GROUP BY i % 2").len(), 2);
}

#[pg_test]
fn a_declared_release_is_the_bounded_release_with_the_same_receipt() {
    bounds_setup();
    one_f64("SELECT dp_avg(x, 0.5) FROM s");
    let declared = one_text("SELECT concat_ws('|', aggregate, sensitivity, noise_scale, epsilon, details->>'bounds') FROM dp.ledger ORDER BY id DESC LIMIT 1");
    one_f64("SELECT dp_avg(x, 0, 100, 0.5) FROM s");
    let given = one_text("SELECT concat_ws('|', aggregate, sensitivity, noise_scale, epsilon, details->>'bounds') FROM dp.ledger ORDER BY id DESC LIMIT 1");
    assert_eq!(declared, format!("{given}|declared for the column (dp.set_bounds)"));
    // with a seed, the same noise
    Spi::run("SET dp.seed = 11").unwrap();
    let a = one_f64("SELECT dp_sum(x, 0.5) FROM s");
    Spi::run("SET dp.seed = 11").unwrap();
    let b = one_f64("SELECT dp_sum(x, 0, 100, 0.5) FROM s");
    assert_eq!(a, b);
}

#[pg_test]
fn calls_without_bounds_are_refused_without_a_declaration() {
    bounds_setup();
    // dp_variance, dp_stddev and dp_percentile_em have no automatic bounds (dp_sum, dp_avg, dp_median
    // and dp_percentile do: autobounds.rs)
    let e = error_of("SELECT dp_variance(b, 1) FROM s").unwrap();
    assert!(e.contains("column s.b has no declared bounds") && e.contains("dp.set_bounds"), "{e}");
    let e = error_of("SELECT dp_stddev(x * 2, 1) FROM s").unwrap();
    assert!(e.contains("not an expression"), "{e}");
    // an explicit cast is an expression: the declared bounds are for the column's values
    assert!(error_of("SELECT dp_percentile_em(x::int, 0.5, 1) FROM s").is_some());
    // nothing was charged for a refusal
    let before = one_i64("SELECT count(*) FROM dp.ledger");
    assert!(error_of("SELECT dp_variance(xn) FROM s").is_some());
    assert_eq!(one_i64("SELECT count(*) FROM dp.ledger"), before);
}

#[pg_test]
fn declared_bounds_are_checked_against_the_column() {
    sample_table();
    let e = error_of("SELECT dp.set_bounds('s', 't', 0, 1)").unwrap();
    assert!(e.contains("numeric type"), "{e}");
    let e = error_of("SELECT dp.set_bounds('s', 'x', 10, 0)").unwrap();
    assert!(e.contains("lower must be less than or equal to upper"), "{e}");
    let e = error_of("SELECT dp.set_bounds('s', 'i', 0, 10.5)").unwrap();
    assert!(e.contains("upper of integer column \"i\" must be an integer"), "{e}");
    let e = error_of("SELECT dp.set_bounds('s', 'sm', 0, 100000)").unwrap();
    assert!(e.contains("must be an integer of its type"), "{e}");
    let e = error_of("SELECT dp.set_bounds('s', 'x', 0, 1e31)").unwrap();
    assert!(e.contains("between -1e30 and 1e30"), "{e}");
    // 10.0 is the integer 10
    Spi::run("SELECT dp.set_bounds('s', 'i', 0, 10.0)").unwrap();
    assert_eq!(one_text("SELECT concat_ws('|', lower, upper) FROM dp.declared_bounds WHERE column_name = 'i'"), "0|10");
    // one declaration per column
    Spi::run("SELECT dp.protect_table('s')").unwrap();
    let e = error_of("SELECT dp.set_domain('s', 'i', ARRAY[1, 2])").unwrap();
    assert!(e.contains("already has a bounds declaration"), "{e}");
    Spi::run("SELECT dp.drop_bounds('s', 'i')").unwrap();
    Spi::run("SELECT dp.set_domain('s', 'i', ARRAY[1, 2])").unwrap();
    assert_eq!(one_i64("SELECT count(*) FROM dp.declared_bounds"), 0);
}

#[pg_test]
fn bounds_are_learned_from_a_public_table_only_and_charge_nothing() {
    sample_table();
    Spi::run("CREATE TABLE reference AS SELECT g::numeric AS age FROM generate_series(17, 90) g").unwrap();
    let before = one_i64("SELECT count(*) FROM dp.ledger");
    assert_eq!(one_text("SELECT concat_ws('|', lower, upper) FROM dp.learn_bounds('reference', 'age', 's', 'x')"), "17|90");
    assert_eq!(one_text("SELECT concat_ws('|', lower, upper) FROM dp.declared_bounds WHERE column_name = 'x'"), "17|90");
    assert_eq!(one_text("SELECT concat_ws('|', lower, upper) FROM dp.learn_bounds('reference', 'age', 's', 'x', 0.1, 0.9)"), "24|83");
    assert_eq!(one_i64("SELECT count(*) FROM dp.ledger"), before, "learning charges nothing");
    Spi::run("SELECT dp.protect_table('reference')").unwrap();
    let e = error_of("SELECT dp.learn_bounds('reference', 'age', 's', 'x')").unwrap();
    assert!(e.contains("is protected"), "{e}");
    let e = error_of("SELECT dp.learn_bounds('s', 'x', 's', 'x', 0.5, 0.2)").unwrap();
    assert!(e.contains("lower_quantile"), "{e}");
}

#[pg_test]
fn only_admins_declare_bounds() {
    sample_table();
    Spi::run("CREATE ROLE dp_bounds_analyst").unwrap();
    Spi::run("GRANT SELECT ON s TO dp_bounds_analyst").unwrap();
    Spi::run("SET ROLE dp_bounds_analyst").unwrap();
    for sql in [
        "SELECT dp.set_bounds('s', 'x', 0, 1)",
        "SELECT dp.drop_bounds('s', 'x')",
        "SELECT dp.learn_bounds('s', 'x', 's', 'x')",
        "SECURITY LABEL FOR pg_dp ON COLUMN s.x IS '{\"bounds\": {\"lower\": \"0\", \"upper\": \"1\"}}'",
    ] {
        let e = error_of(sql).unwrap_or_else(|| panic!("{sql} was allowed"));
        assert!(e.contains("permission denied") || e.contains("dp_admin") || e.contains("must be owner"), "{sql}: {e}");
    }
}

// ----- public row counts (dp.set_public_count; bounds.rs, supply_public_count) -----------------

/// The pg_dp receipt details of the newest release, after running `sql`.
fn newest_details(sql: &str) -> String {
    Spi::run(sql).unwrap();
    one_text("SELECT details::text FROM dp.ledger WHERE aggregate LIKE 'dp_avg%' ORDER BY id DESC LIMIT 1")
}

#[pg_test]
fn a_declared_public_count_gives_whole_table_means_all_of_epsilon() {
    Spi::run(
        "CREATE TABLE census AS SELECT g AS id, (g % 100)::float8 AS age,
                CASE WHEN g % 10 = 0 THEN NULL ELSE g % 50 END::float8 AS maybe FROM generate_series(1, 1000) g",
    )
    .unwrap();
    Spi::run("ALTER TABLE census ALTER COLUMN age SET NOT NULL").unwrap();
    Spi::run("SELECT dp.protect_table('census')").unwrap();
    Spi::run("SET dp.require_budget = off").unwrap();
    Spi::run("SELECT dp.set_public_count('census', 1000)").unwrap();
    assert_eq!(one_i64("SELECT public_count FROM dp.protected_tables WHERE table_name = 'census'::regclass"), 1000);
    let public = "\"public_count\": 1000";
    // every row of the table, a NOT NULL column: the declared count, all of ε on the sum
    for q in [
        "SELECT dp_avg(age, 0, 100, 1) FROM census",
        "SELECT dp_avg(age, 0, 100) FROM census",
        "SELECT s.m FROM (SELECT dp_avg(age, 0, 100, 1) AS m FROM census) s",
        "SELECT dp_avg(age, 0, 100, 1) FROM census HAVING dp_count(id, 1) > 0",
    ] {
        let d = newest_details(q);
        assert!(d.contains(public), "{q}: {d}");
    }
    assert_eq!(one_text("SELECT epsilon::text FROM dp.ledger WHERE aggregate LIKE 'dp_avg%' ORDER BY id DESC LIMIT 1"), "1");
    // declared bounds too
    Spi::run("SELECT dp.set_bounds('census', 'age', 0, 100)").unwrap();
    assert!(newest_details("SELECT dp_avg(age, 1) FROM census").contains(public));
    // at a huge ε the mean of 0..99 ten times
    let m = one_f64("SELECT dp_avg(age, 0, 100, 1e6) FROM census");
    assert!((m - 49.5).abs() < 1e-3, "{m}");
    // not for a subset of the rows, groups, a nullable column or an expression: the count is not theirs
    for q in [
        "SELECT dp_avg(age, 0, 100, 1) FROM census WHERE id > 10",
        "SELECT dp_avg(age, 0, 100, 1) FILTER (WHERE id > 10) FROM census",
        "SELECT dp_avg(maybe, 0, 50, 1) FROM census",
        "SELECT dp_avg(age + 1, 0, 100, 1) FROM census",
        "SELECT dp_avg(age, 0, 100, 1) FROM census GROUP BY id % 2",
    ] {
        let d = newest_details(q);
        assert!(!d.contains("public_count") && d.contains("count_interval95"), "{q}: {d}");
    }
    // the receipt says where the count came from, and not that the bounds were declared
    let d = newest_details("SELECT dp_avg(age, 0, 100, 1) FROM census");
    assert!(d.contains("count_declared") && !d.contains("dp.set_bounds"), "{d}");
    // row security leaves a subset of the rows: not the table's count
    Spi::run("ALTER TABLE census ENABLE ROW LEVEL SECURITY").unwrap();
    Spi::run("CREATE POLICY few ON census FOR SELECT USING (id < 100)").unwrap();
    Spi::run("CREATE ROLE census_reader").unwrap();
    Spi::run("GRANT SELECT ON census TO census_reader").unwrap();
    Spi::run("SET ROLE census_reader").unwrap();
    Spi::run("SELECT dp_avg(age, 0, 100, 1) FROM census").unwrap();
    Spi::run("RESET ROLE").unwrap();
    let d = newest_details("SELECT 1");
    assert!(!d.contains("public_count"), "{d}");
    Spi::run("ALTER TABLE census DISABLE ROW LEVEL SECURITY").unwrap();
    // labels hold commas and spaces only: the SQL functions that read them split on those
    refused("SECURITY LABEL FOR pg_dp ON TABLE census IS E'\\tprotected,\\tpublic_count=7'", "invalid pg_dp label for a table");
    // the count the caller passes wins over the declared one
    assert!(newest_details("SELECT dp_avg(age, 0, 100, 1, 500) FROM census").contains("\"public_count\": 500"));
    // bad input names the argument and its range; bad labels are refused
    refused("SELECT dp.set_public_count('census', 0)", "n must be an integer between 1 and 9007199254740992 (2^53), got 0");
    refused("SECURITY LABEL FOR pg_dp ON TABLE census IS 'protected, public_count=0'", "invalid pg_dp label for a table");
    refused("SECURITY LABEL FOR pg_dp ON TABLE census IS 'protected, public_count=5, public_count=6'", "invalid pg_dp label for a table");
    // replacing and dropping it
    Spi::run("SELECT dp.set_public_count('census', 900)").unwrap();
    assert_eq!(one_text("SELECT label FROM pg_seclabel WHERE objoid = 'census'::regclass AND objsubid = 0"), "protected, public_count=900");
    Spi::run("SELECT dp.drop_public_count('census')").unwrap();
    assert!(!newest_details("SELECT dp_avg(age, 0, 100, 1) FROM census").contains("public_count"));
    assert_eq!(one_text("SELECT label FROM pg_seclabel WHERE objoid = 'census'::regclass AND objsubid = 0"), "protected");
}
