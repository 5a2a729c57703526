// dp_variance and dp_stddev in SQL: values at the largest ε, clamping, NULL skipping, empty input,
// the range of the result, noise at small ε, receipts, bad parameters and the per-unit form.

#[pg_test]
fn variance_and_stddev_match_the_sample_statistics_at_large_epsilon() {
    sample_table();
    // at ε = 1e6 the three statistics get no noise (integer noise is zero); the estimate is the sample
    // variance of the values on a grid of 2^-31 of the bound width
    let exact = one_f64("SELECT var_samp(x) FROM s");
    let v = one_f64("SELECT dp_variance(x, 0, 1000, 1e6) FROM s");
    assert!((v - exact).abs() < 1e-3 * exact, "{v} vs {exact}");
    let sd = one_f64("SELECT dp_stddev(x, 0, 1000, 1e6) FROM s");
    assert!((sd - exact.sqrt()).abs() < 1e-3 * exact.sqrt(), "{sd}");
    let vn = one_f64("SELECT dp_variance(n, 0, 1000, 1e6)::float8 FROM s");
    assert!((vn - exact).abs() < 1e-3 * exact, "{vn}");
    let sdn = one_f64("SELECT dp_stddev(n, 0, 1000, 1e6)::float8 FROM s");
    assert!((sdn - exact.sqrt()).abs() < 1e-3 * exact.sqrt(), "{sdn}");
    // NULLs are skipped: the sample variance of the 750 non-NULL values
    let exact_n = one_f64("SELECT var_samp(xn) FROM s");
    let vx = one_f64("SELECT dp_variance(xn, 0, 1000, 1e6) FROM s");
    assert!((vx - exact_n).abs() < 1e-3 * exact_n, "{vx} vs {exact_n}");
}

#[pg_test]
fn variance_clamps_values_to_the_bounds() {
    sample_table();
    // values clamped to [0, 100]: 900 rows at 100 and 1..100
    let exact = one_f64("SELECT var_samp(least(x, 100)) FROM s");
    let v = one_f64("SELECT dp_variance(x, 0, 100, 1e6) FROM s");
    assert!((v - exact).abs() < 1e-3 * exact, "{v} vs {exact}");
    // infinities clamp like any other value
    Spi::run("CREATE TABLE inf AS SELECT CASE WHEN g % 2 = 0 THEN 'infinity'::float8 ELSE '-infinity'::float8 END AS v FROM generate_series(1, 1000) g").unwrap();
    let exact = one_f64("SELECT var_samp(CASE WHEN v > 0 THEN 10.0::float8 ELSE 0.0::float8 END) FROM inf");
    let v = one_f64("SELECT dp_variance(v, 0, 10, 1e6) FROM inf");
    // half the rows at each bound: the sample variance 25·n/(n − 1) is above ((upper − lower)/2)² = 25,
    // the largest population variance, and the release is clamped there (docs/privacy/variance.md)
    assert!(exact > 25.0 && v == 25.0, "{v} vs {exact}");
}

#[pg_test]
fn variance_results_stay_in_their_range_and_are_noisy_at_small_epsilon() {
    sample_table();
    // the result is within [0, ((upper − lower)/2)²] (stddev within [0, (upper − lower)/2]) whatever the
    // noise; at ε = 0.01 on 1000 rows the noise is large, so 40 draws are not all equal
    let vals: Vec<f64> = (0..40).map(|_| one_f64("SELECT dp_variance(x, 0, 1000, 0.01) FROM s")).collect();
    assert!(vals.iter().all(|v| (0.0..=250_000.0).contains(v)), "{vals:?}");
    assert!(vals.windows(2).any(|w| w[0] != w[1]), "no noise: {vals:?}");
    let sds: Vec<f64> = (0..40).map(|_| one_f64("SELECT dp_stddev(x, 0, 1000, 0.01) FROM s")).collect();
    assert!(sds.iter().all(|v| (0.0..=500.0).contains(v)), "{sds:?}");
    // an empty input still gives a value in range, never NULL
    let e = one_f64("SELECT dp_variance(x, 0, 1000, 0.5) FROM s WHERE false");
    assert!((0.0..=250_000.0).contains(&e), "{e}");
    let e = one_text("SELECT dp_stddev(n, 0, 1000, 0.5)::text FROM s WHERE false");
    assert!(e.parse::<f64>().is_ok(), "{e}");
}

#[pg_test]
fn variance_receipts_state_the_three_noisy_statistics() {
    sample_table();
    one_f64("SELECT dp_variance(x, 0, 1000, 0.5) FROM s");
    let row = one_text(
        "SELECT concat_ws('|', aggregate, mechanism, epsilon, delta, details->>'estimate',
                          details->'count'->>'sensitivity', details->'centred_sum'->>'sensitivity')
           FROM dp.ledger ORDER BY id DESC LIMIT 1",
    );
    assert_eq!(
        row,
        "dp_variance(double precision,double precision,double precision,double precision)|discrete_laplace|0.5|0|sample variance|1|500.0"
    );
    // the receipt's scales are the core's, for the same bounds and ε
    let spec = pg_dp_core::mechanisms::VarianceSpec::new(0.0, 1000.0, 0.5, false).unwrap();
    let details: serde_json::Value =
        serde_json::from_str(&one_text("SELECT details::text FROM dp.ledger ORDER BY id DESC LIMIT 1")).unwrap();
    let want: serde_json::Value = serde_json::from_str(&spec.details()).unwrap();
    for (k, v) in want.as_object().unwrap() {
        assert_eq!(&details[k], v, "{k}");
    }
    one_f64("SELECT dp_stddev(n, 0, 1000, 0.25)::float8 FROM s");
    assert_eq!(
        one_text("SELECT concat_ws('|', epsilon, details->>'estimate') FROM dp.ledger ORDER BY id DESC LIMIT 1"),
        "0.25|sample standard deviation"
    );
}

#[pg_test]
fn variance_parameters_are_checked_and_named() {
    sample_table();
    let e = error_of("SELECT dp_variance(x, 10, 0, 1) FROM s").unwrap();
    assert!(e.contains("lower") && e.contains("upper"), "{e}");
    let e = error_of("SELECT dp_stddev(x, 0, 10, 0) FROM s").unwrap();
    assert!(e.contains("epsilon"), "{e}");
    let e = error_of("SELECT dp_variance(x, 0, 'infinity', 1) FROM s").unwrap();
    assert!(e.contains("upper"), "{e}");
    // a bound read from the data is refused before the query runs
    let e = error_of("SELECT dp_variance(x, 0, x, 1) FROM s").unwrap();
    assert!(e.contains("upper") || e.contains("bound") || e.contains("parameter"), "{e}");
    // a window is refused: every frame would be a release
    assert!(error_of("SELECT dp_variance(x, 0, 10, 1) OVER () FROM s").is_some());
}

#[pg_test]
fn variance_over_a_protected_table_with_a_unit_bounds_each_unit() {
    // 50 units with 20 rows each: the per-unit form uses each unit's mean, so the variance is that of
    // the 50 unit means at ε = 1e6
    Spi::run("CREATE TABLE visits AS SELECT g % 50 AS person, (g % 50)::float8 AS v FROM generate_series(1, 1000) g").unwrap();
    Spi::run("SELECT dp.protect_table('visits', privacy_unit => 'person', max_groups_contributed => 1, max_count_per_unit => 20)").unwrap();
    Spi::run("SET dp.require_budget = off").unwrap();
    let exact = one_f64("SELECT var_samp(m) FROM (SELECT avg(v) AS m FROM visits GROUP BY person) u");
    let v = one_f64("SELECT dp_variance(v, 0, 100, 1e6) FROM visits");
    assert!((v - exact).abs() < 1e-3 * exact, "{v} vs {exact}");
    let row = one_text("SELECT concat_ws('|', epsilon, details->'privacy_unit'->>'column') FROM dp.ledger ORDER BY id DESC LIMIT 1");
    assert_eq!(row, "1000000|visits.person");
}
