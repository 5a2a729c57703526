// dp_median, dp_percentile and dp_percentile_em: values, empty input, NULLs, errors, parallel
// plans and receipts. At ε = 1e6 the smooth-sensitivity noise on these tables is below 1e-3 with
// probability above 1 − 1e-12, and the exponential mechanism picks the gap of the true rank.

#[pg_test]
fn quantiles_are_close_at_large_epsilon() {
    sample_table();
    // x = 1..1000: the median is the order statistic of rank round(0.5·1001) = 501
    for q in [
        "SELECT dp_median(x, 0, 2000, 1e6, 1e-6) FROM s",
        "SELECT dp_median(x, 0, 2000, 1e6, 0) FROM s",
        "SELECT dp_percentile(x, 0.5, 0, 2000, 1e6, 1e-9) FROM s",
    ] {
        let v = one_f64(q);
        assert!((v - 501.0).abs() < 1e-3, "{q}: {v}");
    }
    // without δ, dp_median and dp_percentile are the exponential mechanism: a point of the gap
    // (500, 501] of the true rank
    for q in ["SELECT dp_median(x, 0, 2000, 1e6) FROM s", "SELECT dp_percentile(x, 0.5, 0, 2000, 1e6) FROM s"] {
        let v = one_f64(q);
        assert!(v > 500.0 && v <= 501.0, "{q}: {v}");
        assert_eq!(one_text("SELECT mechanism FROM dp.ledger ORDER BY id DESC LIMIT 1"), "exponential", "{q}");
    }
    // rank round(0.9·1001) = 901
    let v = one_f64("SELECT dp_percentile(x, 0.9, 0, 2000, 1e6, 1e-6) FROM s");
    assert!((v - 901.0).abs() < 1e-3, "{v}");
    // the exponential mechanism draws a point of the gap (900, 901] (900 data below it)
    for _ in 0..20 {
        let v = one_f64("SELECT dp_percentile_em(x, 0.9, 0, 2000, 1e6) FROM s");
        assert!(v > 900.0 && v <= 901.0, "{v}");
    }
    // NULLs are skipped: xn has the 750 values i with i % 4 <> 0
    let v = one_f64("SELECT dp_median(xn, 0, 2000, 1e6, 1e-6) FROM s");
    let mut kept: Vec<f64> = (1..=1000).filter(|i| i % 4 != 0).map(|i| i as f64).collect();
    kept.sort_by(f64::total_cmp);
    assert!((v - kept[375]).abs() < 1e-3, "{v} vs {}", kept[375]); // rank round(0.5·751) = 376
    // values are clamped: every row above the bound counts as the bound
    let v = one_f64("SELECT dp_percentile(x, 0.9, 0, 100, 1e6, 1e-6) FROM s");
    assert!((v - 100.0).abs() < 1e-3, "{v}");
}

#[pg_test]
fn quantiles_are_noisy_at_small_epsilon_and_stay_in_bounds() {
    sample_table();
    for q in [
        "SELECT dp_median(x, 0, 2000, 0.1, 1e-6) FROM s",
        "SELECT dp_median(x, 0, 2000, 0.1) FROM s",
        "SELECT dp_percentile_em(x, 0.5, 0, 2000, 0.1) FROM s",
    ] {
        let vals: Vec<f64> = (0..20).map(|_| one_f64(q)).collect();
        assert!(vals.iter().all(|v| (0.0..=2000.0).contains(v)), "{q}: {vals:?}");
        let first = vals[0];
        assert!(vals.iter().any(|&v| v != first), "{q}: no noise: {vals:?}");
    }
}

#[pg_test]
fn empty_input_releases_a_noisy_value_within_bounds() {
    sample_table();
    for q in [
        "SELECT dp_median(x, -5, 5) FROM s WHERE false",
        "SELECT dp_median(x, -5, 5, 1, 1e-6) FROM s WHERE false",
        "SELECT dp_percentile(x, 0.2, -5, 5, 1) FROM s WHERE x IS NULL",
        "SELECT dp_percentile_em(x, 0.2, -5, 5, 1) FROM s WHERE false",
    ] {
        let v = one_f64(q);
        assert!((-5.0..=5.0).contains(&v), "{q}: {v}");
    }
    // lower = upper has one possible answer
    assert_eq!(one_f64("SELECT dp_median(x, 3, 3, 1) FROM s"), 3.0);
}

#[pg_test(error = "dp_percentile: p must be a number between 0 and 1, got 1.5")]
fn percentile_p_above_one_is_refused() {
    sample_table();
    one_f64("SELECT dp_percentile(x, 1.5, 0, 10) FROM s");
}

#[pg_test(error = "dp_percentile_em: p must be a number between 0 and 1, got -0.1")]
fn percentile_em_negative_p_is_refused() {
    sample_table();
    one_f64("SELECT dp_percentile_em(x, -0.1, 0, 10) FROM s");
}

#[pg_test(error = "dp_median: delta must be at least 0 and less than 1, got 1")]
fn delta_of_one_is_refused() {
    sample_table();
    one_f64("SELECT dp_median(x, 0, 10, 1, 1) FROM s");
}

#[pg_test(error = "dp_median: delta must be at least 0 and less than 1, got -0.1")]
fn negative_delta_is_refused() {
    sample_table();
    one_f64("SELECT dp_median(x, 0, 10, 1, -0.1) FROM s");
}

#[pg_test(error = "dp_median: lower must be less than or equal to upper (0), got 10")]
fn quantile_bounds_out_of_order_are_refused() {
    sample_table();
    one_f64("SELECT dp_median(x, 10, 0) FROM s");
}

#[pg_test(error = "dp_percentile: epsilon must be a finite number between 1e-9 and 1e6, got 0")]
fn quantile_zero_epsilon_is_refused() {
    sample_table();
    one_f64("SELECT dp_percentile(x, 0.5, 0, 10, 0) FROM s");
}

#[pg_test]
fn quantile_nan_values_are_skipped_like_null() {
    Spi::run("CREATE TABLE nan_t AS SELECT unnest(ARRAY[1.0, 'NaN', 2.0, 'NaN', 3.0]::float8[]) AS v").unwrap();
    // the median of 1, 2, 3 (NaN skipped) at a huge epsilon: noise of scale about 2·S/ε ≈ 4e-6
    let m = one_f64("SELECT dp_median(v, 0, 10, 1e6, 1e-6) FROM nan_t");
    assert!((m - 2.0).abs() < 1e-3, "{m}");
}

#[pg_test(error = "dp_percentile: p must not be NULL")]
fn quantile_null_p_is_refused() {
    sample_table();
    one_f64("SELECT dp_percentile(x, NULL, 0, 10) FROM s");
}

#[pg_test(error = "dp_median cannot be used as a window function")]
fn quantile_window_use_is_refused() {
    sample_table();
    column("SELECT dp_median(x, 0, 10) OVER () FROM s");
}

#[pg_test(error = "p of dp_percentile must be a literal or a bind parameter ($1), not an expression")]
fn quantile_p_from_a_column_is_refused() {
    sample_table();
    one_f64("SELECT dp_percentile(x, x / 1000, 0, 10) FROM s");
}

#[pg_test]
fn quantiles_never_aggregate_partially_and_work_under_parallel_settings() {
    Spi::run("CREATE TABLE big AS SELECT g % 3 AS k, (g * 7919 % 200000)::float8 / 7 AS x FROM generate_series(1, 200000) g").unwrap();
    Spi::run("ANALYZE big").unwrap();
    force_parallel();
    let q = "SELECT concat_ws(' ', dp_median(x, 0, 30000, 0.5, 1e-6), dp_median(x, 0, 30000, 0.5),
                                   dp_percentile(x, 0.1, 0, 30000, 0.5), dp_percentile_em(x, 0.75, 0, 30000, 0.5)) FROM big";
    // no combine function: a worker's values never travel as one (size-limited) bytea
    let plan = column(&format!("EXPLAIN (COSTS OFF) {q}")).into_iter().flatten().collect::<Vec<_>>().join("\n");
    assert!(!plan.contains("Partial Aggregate"), "partial quantile aggregation:\n{plan}");
    Spi::run("SET dp.seed = 5").unwrap();
    let forced = one_text(q);
    Spi::run("SET max_parallel_workers_per_gather = 0").unwrap();
    Spi::run("SET dp.seed = 5").unwrap();
    assert_eq!(one_text(q), forced);
    force_parallel();
    let v = one_f64("SELECT dp_median(x, 0, 10, 0.5) FROM big WHERE x < 0");
    assert!((0.0..=10.0).contains(&v));
    let rows = column("SELECT dp_median(x, 0, 30000, 1e6, 1e-6)::text FROM big GROUP BY k ORDER BY k");
    assert_eq!(rows.len(), 3);
}

#[pg_test]
fn quantile_receipts_record_mechanism_delta_and_details() {
    sample_table();
    one_f64("SELECT dp_median(x, 0, 2000, 0.5, 1e-6) FROM s");
    let row = one_text(
        "SELECT concat_ws('|', aggregate, mechanism, sensitivity, round(noise_scale::numeric, 6), epsilon, delta,
                          details->>'noise', round((details->>'scale_per_smooth_sensitivity')::numeric, 6),
                          round((details->>'beta')::numeric, 9))
           FROM dp.ledger ORDER BY id DESC LIMIT 1",
    );
    // scale ≤ 2·2000/0.5; β calibrated to the exact δ of the Laplace release (core)
    let beta = pg_dp_core::mechanisms::quantile::laplace_calibration(pg_dp_core::accounting::charge::mechanism_epsilon(0.5), pg_dp_core::accounting::charge::mechanism_epsilon(1e-6)).0;
    assert!(beta > (0.5f64 / (2.0 * (2e6f64).ln())).ln_1p(), "tighter than the old calibration");
    assert_eq!(
        row,
        format!("dp_median(double precision,double precision,double precision,double precision,double precision)|smooth_sensitivity|2000|8000.000000|0.5|0.000001|laplace|4.000000|{beta:.9}")
    );
    one_f64("SELECT dp_percentile(x, 0.25, 0, 2000, 0.5, 0) FROM s");
    let row = one_text("SELECT concat_ws('|', mechanism, delta, details->>'noise', round((details->>'beta')::numeric, 9)) FROM dp.ledger ORDER BY id DESC LIMIT 1");
    // β of the exact-loss calibration of the polynomial noise (core)
    let beta = pg_dp_core::mechanisms::quantile::polynomial_calibration(pg_dp_core::accounting::charge::mechanism_epsilon(0.5)).0;
    assert_eq!(row, format!("smooth_sensitivity|0|polynomial (1+|z|)^-4|{beta:.9}"));
    one_f64("SELECT dp_percentile_em(x, 0.25, 0, 2000, 0.5) FROM s");
    let row = one_text("SELECT concat_ws('|', mechanism, sensitivity, delta, details->>'utility_sensitivity') FROM dp.ledger ORDER BY id DESC LIMIT 1");
    assert_eq!(row, "exponential|0.75|0|0.75");
}

#[pg_test]
fn delta_is_recorded_exactly_as_its_shortest_decimal() {
    sample_table();
    one_f64("SELECT dp_median(x, 0, 2000, 0.5, 3e-6) FROM s");
    assert_eq!(one_text("SELECT delta::text FROM dp.ledger ORDER BY id DESC LIMIT 1"), "0.000003");
}

// Integer columns: dp_median, dp_percentile and dp_percentile_em over int4 and int8 values with
// bounds of their type release on the grid of the integers (core/tests/integer_quantiles.rs).

/// The newest receipt's aggregate and whether its grid is the integers.
fn last_quantile_grid() -> String {
    one_text("SELECT concat_ws('|', aggregate, coalesce(details->>'integer_grid', 'false')) FROM dp.ledger ORDER BY id DESC LIMIT 1")
}

#[pg_test]
fn integer_columns_resolve_to_the_integer_forms() {
    sample_table();
    let f8 = "double precision";
    for (q, sig, integer) in [
        ("SELECT dp_median(i, 0, 2000, 0.5) FROM s", "dp_median(integer,integer,integer,double precision)".to_string(), true),
        // the default ε is supplied to the integer form
        ("SELECT dp_median(i, 0, 2000) FROM s", "dp_median(integer,integer,integer,double precision)".into(), true),
        ("SELECT dp_median(i, 0, 2000, 0.5, 1e-6) FROM s", format!("dp_median(integer,integer,integer,{f8},{f8})"), true),
        // an int8 column with integer literal bounds: the int8 form
        ("SELECT dp_median(b, 0, 2000, 0.5) FROM s", "dp_median(bigint,bigint,bigint,double precision)".into(), true),
        ("SELECT dp_percentile(i, 0.9, 0, 2000, 0.5) FROM s", format!("dp_percentile(integer,{f8},integer,integer,{f8})"), true),
        ("SELECT dp_percentile(b, 0.9, 0, 2000, 0.5, 0) FROM s", format!("dp_percentile(bigint,{f8},bigint,bigint,{f8},{f8})"), true),
        ("SELECT dp_percentile_em(i, 0.25, 0, 2000, 0.5) FROM s", format!("dp_percentile_em(integer,{f8},integer,integer,{f8})"), true),
        ("SELECT dp_percentile_em(b, 0.25, 0, 2000, 0.5) FROM s", format!("dp_percentile_em(bigint,{f8},bigint,bigint,{f8})"), true),
        // smallint: integer literal bounds give the int4 form, smallint bounds the float8 one
        ("SELECT dp_median(sm, 0, 2000, 0.5) FROM s", "dp_median(integer,integer,integer,double precision)".into(), true),
        ("SELECT dp_median(sm, 0::int2, 2000::int2, 0.5) FROM s", format!("dp_median({f8},{f8},{f8},{f8})"), false),
        // float8 columns, non-integer bounds and an explicit cast keep the float8 form (a numeric column
        // is refused: its cast to float8 could overflow)
        ("SELECT dp_median(x, 0, 2000, 0.5) FROM s", format!("dp_median({f8},{f8},{f8},{f8})"), false),
        ("SELECT dp_median(i, 0, 2000.5, 0.5) FROM s", format!("dp_median({f8},{f8},{f8},{f8})"), false),
        ("SELECT dp_median(i::float8, 0, 2000, 0.5) FROM s", format!("dp_median({f8},{f8},{f8},{f8})"), false),
    ] {
        one_f64(q);
        assert_eq!(last_quantile_grid(), format!("{sig}|{integer}"), "{q}");
    }
    // the float8 result type of every form: existing queries keep theirs
    assert_eq!(one_text("SELECT pg_typeof(dp_median(i, 0, 2000, 0.5))::text FROM s"), "double precision");
    assert_eq!(one_text("SELECT pg_typeof(dp_percentile_em(b, 0.5, 0, 2000, 0.5))::text FROM s"), "double precision");
}

#[pg_test]
fn integer_quantiles_release_integers_within_the_bounds() {
    sample_table();
    for q in [
        "SELECT dp_median(i, 0, 2000, 0.1) FROM s",
        "SELECT dp_median(b, -7, 1500, 0.1, 1e-6) FROM s",
        "SELECT dp_median(i, 0, 2000, 0.1, 0) FROM s",
        "SELECT dp_percentile(b, 0.9, 0, 2000, 0.1) FROM s",
        "SELECT dp_percentile(i, 0.1, 0, 2000, 0.1, 1e-6) FROM s",
        "SELECT dp_percentile_em(i, 0.3, 0, 2000, 0.1) FROM s",
        "SELECT dp_percentile_em(b, 0.3, 0, 2000, 0.1) FROM s WHERE false",
        "SELECT dp_median(b, -5, 5, 0.1) FROM s WHERE false",
        // wide bounds: a grid of every 2^k-th integer, still integers
        "SELECT dp_median(b, -4000000000000000, 4000000000000000, 0.1) FROM s",
    ] {
        let (lo, hi) = if q.contains("-5, 5") { (-5.0, 5.0) } else if q.contains("-4000") { (-4e15, 4e15) } else { (-7.0, 2000.0) };
        for _ in 0..10 {
            let v = one_f64(q);
            assert_eq!(v.fract(), 0.0, "{q}: {v}");
            assert!((lo..=hi).contains(&v), "{q}: {v}");
        }
    }
    // at a large ε the exponential mechanism releases the median itself: 1..1000 has 500 and 501 at
    // distance 0 from rank 500 (the float8 form draws a point of [500, 501])
    for _ in 0..10 {
        let v = one_f64("SELECT dp_median(i, 0, 2000, 1e6) FROM s");
        assert!(v == 500.0 || v == 501.0, "{v}");
    }
    assert_eq!(one_f64("SELECT dp_median(i, 0, 2000, 1e6, 1e-6) FROM s"), 501.0);
    // ages with ties: 200 rows of 40 around the median are released exactly at ε = 0.5
    Spi::run(
        "CREATE TABLE ages AS SELECT (CASE WHEN g <= 400 THEN 20 + g % 10 WHEN g <= 600 THEN 40 ELSE 60 + g % 10 END)::int4 AS age
           FROM generate_series(1, 1000) g",
    )
    .unwrap();
    for _ in 0..10 {
        assert_eq!(one_f64("SELECT dp_median(age, 0, 120, 0.5) FROM ages"), 40.0);
        assert_eq!(one_f64("SELECT dp_percentile_em(age, 0.5, 0, 120, 0.5) FROM ages"), 40.0);
    }
    // grids of at most 4,096 integers release by permute-and-flip, wider ones by the exponential
    // mechanism (core/src/mechanisms/quantile.rs, PF_MAX_POINTS)
    let last_mechanism = || one_text("SELECT mechanism FROM dp.ledger ORDER BY id DESC LIMIT 1");
    one_f64("SELECT dp_median(age, 0, 4095, 0.5) FROM ages");
    assert_eq!(last_mechanism(), "permute_and_flip");
    one_f64("SELECT dp_percentile_em(age::int8, 0.5, 0, 4096, 0.5) FROM ages");
    assert_eq!(last_mechanism(), "exponential");
    // lower = upper: the one integer
    assert_eq!(one_f64("SELECT dp_median(i, 3, 3, 1) FROM s"), 3.0);
}

#[pg_test(error = "dp_median: lower must be less than or equal to upper (0), got 10")]
fn integer_quantile_bounds_out_of_order_are_refused() {
    sample_table();
    one_f64("SELECT dp_median(i, 10, 0) FROM s");
}

#[pg_test]
fn integer_quantiles_over_privacy_units_use_per_unit_means() {
    // the per-unit mean of an integer column is a float8: the call becomes the float8 form
    visits_setup(1, 1);
    Spi::run("INSERT INTO visits SELECT 10000 + g, 5000, 'north', 90, 90 FROM generate_series(1, 1000) g").unwrap();
    let median = one_f64("SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY m) FROM (SELECT patient_id, avg(icost)::float8 m FROM visits GROUP BY 1) u");
    for q in [
        "SELECT dp_median(icost, 0, 100, 1e6) FROM visits",
        "SELECT dp_median(icost, 0, 100, 1e6, 1e-6) FROM visits",
        "SELECT dp_percentile(icost, 0.5, 0, 100, 1e6) FROM visits",
        "SELECT dp_percentile_em(icost::int8, 0.5, 0, 100, 1e6) FROM visits",
    ] {
        let got = one_f64(q);
        assert!((got - median).abs() <= 1.0, "{q}: {got} vs {median}");
        let grid = one_text("SELECT coalesce(details->>'integer_grid', 'false') FROM dp.ledger ORDER BY id DESC LIMIT 1");
        assert_eq!(grid, "false", "{q}: the per-unit means are not integers");
    }
    // grouped by a private key too
    let rows = column("SELECT region, dp_median(icost, 0, 100, 1)::text FROM visits GROUP BY region");
    assert!(rows.len() <= 3);
}

#[pg_test]
fn integer_quantiles_over_a_public_domain_keep_the_integer_grid() {
    // no privacy unit, a key with a public domain: each row is its own value, an integer
    protected_setup();
    Spi::run("SELECT dp.set_domain('patients', 'region', ARRAY[0, 1, 2, 3, 4])").unwrap();
    let rows = as_analyst(|| column("SELECT dp_median(big, 0, 2000, 0.5)::text FROM patients GROUP BY region ORDER BY region"));
    assert_eq!(rows.len(), 5);
    for r in rows {
        let v: f64 = r.unwrap().parse().unwrap();
        assert!(v.fract() == 0.0 && (0.0..=2000.0).contains(&v), "{v}");
    }
    assert_eq!(last_quantile_grid(), "dp_median(bigint,bigint,bigint,double precision)|true");
}

#[pg_test]
fn declared_bounds_of_an_integer_column_give_the_integer_form() {
    sample_table();
    Spi::run("SET dp.require_budget = off").unwrap();
    Spi::run("SELECT dp.set_bounds('s', 'i', 0, 2000)").unwrap();
    Spi::run("SELECT dp.set_bounds('s', 'sm', 0, 2000)").unwrap();
    Spi::run("SELECT dp.set_bounds('s', 'x', 0, 2000)").unwrap();
    for (q, want) in [
        ("SELECT dp_median(i, 0.5) FROM s", "dp_median(integer,integer,integer,double precision)|true"),
        ("SELECT dp_median(sm, 0.5) FROM s", "dp_median(integer,integer,integer,double precision)|true"),
        ("SELECT dp_percentile(i, 0.9) FROM s", "dp_percentile(integer,double precision,integer,integer,double precision)|true"),
        ("SELECT dp_percentile_em(i, 0.9, 0.5) FROM s", "dp_percentile_em(integer,double precision,integer,integer,double precision)|true"),
        ("SELECT dp_median(x, 0.5) FROM s", "dp_median(double precision,double precision,double precision,double precision)|false"),
    ] {
        let v = one_f64(q);
        assert!(v.fract() == 0.0 || q.contains("(x"), "{q}: {v}");
        assert_eq!(last_quantile_grid(), want, "{q}");
    }
    let v = one_f64("SELECT dp_median(i, 1e6) FROM s");
    assert!(v == 500.0 || v == 501.0, "{v}");
}
