// Each aggregate: values, clamping, NULL skipping, empty input, literal resolution, GUCs, seeds.

#[pg_test]
fn count_star_and_values_exact_at_large_epsilon() {
    sample_table();
    assert_eq!(one_i64("SELECT dp_count(x, 1e6) FROM s"), 1000);
    // NULLs are skipped: 250 of the 1000 rows have xn NULL
    assert_eq!(one_i64("SELECT dp_count(xn, 1e6) FROM s"), 750);
    assert_eq!(one_i64("SELECT dp_count(t, 1e6) FROM s"), 1000);
    Spi::run("SET dp.default_epsilon = 1e6").unwrap();
    assert_eq!(one_i64("SELECT dp_count(*) FROM s"), 1000);
    assert_eq!(one_i64("SELECT dp_count(xn) FROM s"), 750);
}

#[pg_test]
fn count_is_noisy_at_small_epsilon() {
    sample_table();
    // 40 releases at ε = 0.1 (scale 10): all equal to 1000 has probability < 1e-40
    let vals: Vec<i64> = (0..40).map(|_| one_i64("SELECT dp_count(x, 0.1) FROM s")).collect();
    assert!(vals.iter().any(|&v| v != 1000), "no noise: {vals:?}");
    // |Laplace(10)| > 400 has probability e^-40 per draw
    assert!(vals.iter().all(|&v| (v - 1000).abs() < 400), "noise too large: {vals:?}");
}

#[pg_test]
fn integer_sums_clamp_and_are_exact_at_large_epsilon() {
    sample_table();
    // Σ min(i, 100) = 5050 + 900·100
    assert_eq!(one_i64("SELECT dp_sum(i, 0, 100, 1e6) FROM s"), 95050);
    assert_eq!(one_i64("SELECT dp_sum(sm, 0::int2, 100::int2, 1e6) FROM s"), 95050);
    assert_eq!(one_text("SELECT dp_sum(b, 0, 100, 1e6)::text FROM s"), "95050");
    // lower bound clamps too: Σ max(i, 500) over 1..1000
    let expect: i64 = (1..=1000).map(|i: i64| i.max(500)).sum();
    assert_eq!(one_i64("SELECT dp_sum(i, 500, 2000, 1e6) FROM s"), expect);
    // negative bounds
    Spi::run("CREATE TABLE neg AS SELECT -i AS v FROM s").unwrap();
    assert_eq!(one_i64("SELECT dp_sum(v, -10, 0, 1e6) FROM neg"), -10 * 1000 + 45);
}

#[pg_test]
fn real_sums_and_averages_are_close_at_large_epsilon() {
    sample_table();
    // grid step is max(|l|,|u|)·2^-32; noise scale ≈ 1000/1e6 = 0.001
    let s = one_f64("SELECT dp_sum(x, 0, 1000, 1e6) FROM s");
    assert!((s - 500500.0).abs() < 0.1, "{s}");
    let s = one_f64("SELECT dp_sum(x, 0, 100, 1e6) FROM s");
    assert!((s - 95050.0).abs() < 0.1, "{s}");
    let s = one_f64("SELECT dp_sum(n, 0, 1000, 1e6)::float8 FROM s");
    assert!((s - 500500.0).abs() < 0.1, "{s}");
    let a = one_f64("SELECT dp_avg(x, 0, 1000, 1e6) FROM s");
    assert!((a - 500.5).abs() < 0.01, "{a}");
    let a = one_f64("SELECT dp_avg(xn, 0, 1000, 1e6) FROM s");
    let exact = Spi::get_one::<f64>("SELECT avg(xn) FROM s").unwrap().unwrap();
    assert!((a - exact).abs() < 0.01, "{a} vs {exact}");
    let a = one_f64("SELECT dp_avg(n, 0, 1000, 1e6)::float8 FROM s");
    assert!((a - 500.5).abs() < 0.01, "{a}");
}

#[pg_test]
fn averages_stay_within_bounds_and_infinities_clamp() {
    sample_table();
    for _ in 0..20 {
        let a = one_f64("SELECT dp_avg(x, 10, 20, 0.01) FROM s WHERE i < 5");
        assert!((10.0..=20.0).contains(&a), "{a}");
    }
    Spi::run("CREATE TABLE inf AS SELECT v FROM unnest(ARRAY['Infinity', '-Infinity', '5']::float8[]) v").unwrap();
    let s = one_f64("SELECT dp_sum(v, -10, 10, 1e6) FROM inf");
    assert!((s - 5.0).abs() < 0.01, "{s}");
    let a = one_f64("SELECT dp_avg(v, 0, 10, 1e6) FROM inf");
    assert!((a - 5.0).abs() < 0.01, "{a}");
}

#[pg_test]
fn numeric_beyond_the_float8_range_is_clamped_not_an_error() {
    // 1e400 does not fit float8: it must clamp like Infinity, not raise an error that depends on the data
    Spi::run("CREATE TABLE big_n AS SELECT v FROM unnest(ARRAY[1e400, -1e400, 1e-400, 5]::numeric[]) v").unwrap();
    let s = one_f64("SELECT dp_sum(v, -10, 10, 1e6)::float8 FROM big_n");
    assert!((s - 5.0).abs() < 0.01, "{s}");
    let a = one_f64("SELECT dp_avg(v, 0, 10, 1e6)::float8 FROM big_n");
    assert!((a - 3.75).abs() < 0.01, "{a}");
}

#[pg_test]
fn empty_input_gives_a_noisy_answer_not_null() {
    sample_table();
    for q in [
        "SELECT dp_count(*)::text FROM s WHERE false",
        "SELECT dp_count(x, 0.5)::text FROM s WHERE false",
        "SELECT dp_sum(i, 0, 10, 0.5)::text FROM s WHERE false",
        "SELECT dp_sum(b, 0, 10)::text FROM s WHERE false",
        "SELECT dp_sum(x, 0, 10, 0.5)::text FROM s WHERE false",
        "SELECT dp_sum(n, 0, 10)::text FROM s WHERE false",
        "SELECT dp_avg(x, 0, 10, 0.5)::text FROM s WHERE false",
        "SELECT dp_avg(n, 0, 10, 0.5)::text FROM s WHERE false",
    ] {
        let v = Spi::get_one::<String>(q).unwrap();
        assert!(v.is_some(), "NULL from {q}");
    }
    // 30 empty real sums at ε = 1: all exactly 0 would mean no noise (probability < 1e-200)
    let zeros = (0..30).filter(|_| one_f64("SELECT dp_sum(x, 0, 10, 1) FROM s WHERE false") == 0.0).count();
    assert!(zeros < 30);
    // an empty average is still inside the bounds
    let a = one_f64("SELECT dp_avg(x, 3, 7, 1) FROM s WHERE false");
    assert!((3.0..=7.0).contains(&a), "{a}");
}

#[pg_test]
fn plain_literals_resolve_for_every_value_type() {
    sample_table();
    let cases = [
        ("sm", "bigint"),
        ("i", "bigint"),
        ("b", "numeric"),
        ("r", "double precision"),
        ("x", "double precision"),
        ("n", "numeric"),
    ];
    for (col, ty) in cases {
        let got = one_text(&format!("SELECT pg_typeof(dp_sum({col}, 0, 100, 0.5))::text FROM s"));
        assert_eq!(got, ty, "dp_sum({col}, 0, 100, 0.5)");
        let got = one_text(&format!("SELECT pg_typeof(dp_sum({col}, 0, 100))::text FROM s"));
        assert_eq!(got, ty, "dp_sum({col}, 0, 100)");
        // fractional literal bounds also resolve
        one_text(&format!("SELECT dp_sum({col}, 0.5, 99.5, 0.5)::text FROM s"));
        one_text(&format!("SELECT dp_avg({col}, 0, 100, 0.5)::text FROM s"));
        one_text(&format!("SELECT dp_avg({col}, 0.5, 99.5)::text FROM s"));
        one_text(&format!("SELECT dp_count({col}, 0.5)::text FROM s"));
    }
    assert_eq!(one_text("SELECT pg_typeof(dp_avg(n, 0, 100, 0.5))::text FROM s"), "numeric");
    assert_eq!(one_text("SELECT pg_typeof(dp_count(*))::text FROM s"), "bigint");
}

#[pg_test]
fn group_by_gives_one_release_per_group() {
    sample_table();
    let rows = column("SELECT dp_count(x, 1e6)::text FROM s GROUP BY i % 4 ORDER BY 1");
    assert_eq!(rows, vec![Some("250".into()); 4]);
}

#[pg_test]
fn seed_reproduces_and_restarts_on_every_set() {
    sample_table();
    let q = "SELECT dp_sum(x, 0, 1000, 0.1)::text FROM s";
    Spi::run("SET dp.seed = 7").unwrap();
    let a = one_text(q);
    let b = one_text(q);
    Spi::run("SET dp.seed = 7").unwrap();
    let a2 = one_text(q);
    let b2 = one_text(q);
    assert_eq!((a.clone(), b.clone()), (a2, b2));
    assert_ne!(a, b, "the stream must advance between releases");
    Spi::run("RESET dp.seed").unwrap();
    let c = one_text(q);
    let d = one_text(q);
    assert_ne!(c, d);
}

#[pg_test]
fn real_sum_outputs_lie_on_the_grid() {
    sample_table();
    // bounds [0, 1]: grid 2^-32. Every release times 2^32 must be an integer.
    Spi::run("CREATE TABLE thirds AS SELECT x / 3.0 AS third FROM s").unwrap();
    for _ in 0..20 {
        let v = one_f64("SELECT dp_sum(third, 0, 1, 0.5) FROM thirds");
        let steps = v * 4294967296.0;
        assert_eq!(steps, steps.trunc(), "{v} is not on the grid");
    }
}

#[pg_test]
fn aggregates_and_final_functions_are_volatile() {
    let n = one_i64(
        "SELECT count(*) FROM pg_proc p JOIN pg_namespace ns ON ns.oid = p.pronamespace
          WHERE (p.proname IN ('dp_count', 'dp_sum', 'dp_avg') AND p.prokind = 'a'
             OR ns.nspname = 'dp' AND p.proname LIKE '%final') AND p.provolatile <> 'v'",
    );
    assert_eq!(n, 0);
    // volatile, and yet the same call written twice in one level is one release (grammar.rs tags both
    // alike, charge.rs gives them one receipt and one value per group): equal, where two releases at
    // ε = 0.1 would differ by noise of scale 10 000
    sample_table();
    for _ in 0..10 {
        let (a, b) = Spi::get_two::<f64, f64>("SELECT dp_sum(x, 0, 1000, 0.1), dp_sum(x, 0, 1000, 0.1) FROM s").unwrap();
        assert_eq!(a, b);
    }
    // two calls that differ (here in ε) are two releases
    let differ = (0..10)
        .filter(|_| {
            Spi::get_two::<f64, f64>("SELECT dp_sum(x, 0, 1000, 0.1), dp_sum(x, 0, 1000, 0.1000001) FROM s")
                .map(|(a, b)| a != b)
                .unwrap()
        })
        .count();
    assert!(differ > 0);
}

#[pg_test]
fn prepared_statement_with_epsilon_parameter() {
    sample_table();
    Spi::run("SET plan_cache_mode = force_generic_plan").unwrap();
    Spi::run("PREPARE p(float8) AS SELECT dp_count(x, $1) FROM s").unwrap();
    assert_eq!(one_i64("EXECUTE p(1e6)"), 1000);
    Spi::run("PREPARE pe(float8) AS SELECT dp_sum(i, 0, 10, $1) FROM s WHERE false").unwrap();
    assert_eq!(one_i64("EXECUTE pe(1e6)"), 0);
    let plan = column("EXPLAIN (VERBOSE, COSTS OFF) EXECUTE p(1e6)").into_iter().flatten().collect::<Vec<_>>().join("\n");
    assert!(plan.contains("$1"), "not a generic plan: {plan}");
}

#[pg_test]
fn every_extension_object_has_a_comment() {
    let missing = column(
        "SELECT pg_describe_object(classid, objid, 0) FROM pg_depend
          WHERE refclassid = 'pg_extension'::regclass
            AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_dp')
            AND deptype = 'e'
            AND obj_description(objid, classid::regclass::text) IS NULL
            AND pg_describe_object(classid, objid, 0) !~ '^(schema tests|function tests\\.)'",
    );
    assert!(missing.is_empty(), "objects without COMMENT: {missing:?}");
}

#[pg_test]
fn averages_with_a_public_count_divide_the_noisy_sum_by_it() {
    sample_table();
    Spi::run("SET dp.require_budget = off").unwrap();
    // at ε = 1e6 the centred sum is exact: c + Σ(x − c)/count with c = 500 and Σ(x − c) = 500
    let a = one_f64("SELECT dp_avg(x, 0, 1000, 1e6, 1000) FROM s");
    assert!((a - 500.5).abs() < 0.01, "{a}");
    let a = one_f64("SELECT dp_avg(n, 0, 1000, 1e6, 2000)::float8 FROM s");
    assert!((a - 500.25).abs() < 0.01, "a count that is not the number of rows: {a}");
    // the receipt: all of ε on the sum, the count public and not noised
    let r = one_text("SELECT concat_ws('|', epsilon, details->>'count', details->>'public_count', details->>'count_interval95') FROM dp.ledger ORDER BY id DESC LIMIT 1");
    assert_eq!(r, "1000000|public|2000|0.0");
    one_f64("SELECT dp_avg(x, 0, 1000, 0.5, 1000) FROM s");
    let scale = one_f64("SELECT noise_scale FROM dp.ledger ORDER BY id DESC LIMIT 1");
    one_f64("SELECT dp_avg(x, 0, 1000, 0.5) FROM s");
    let split = one_f64("SELECT noise_scale FROM dp.ledger ORDER BY id DESC LIMIT 1");
    assert!((split / scale - 1.0 / pg_dp_core::mechanisms::AVG_SUM_SHARE).abs() < 1e-6, "{scale} {split}");
    let e = error_of("SELECT dp_avg(x, 0, 1000, 0.5, 0) FROM s").unwrap();
    assert!(e.contains("count must be a whole number of rows, at least 1"), "{e}");
    // a count read from the data is refused before the query runs
    let e = error_of("SELECT dp_avg(x, 0, 1000, 0.5, i) FROM s").unwrap();
    assert!(e.contains("public_count"), "{e}");
}
