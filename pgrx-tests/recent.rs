// dp.last_releases: what the session received, with ε, δ, scale and a 95% interval; never the
// values of groups HAVING or the selection of private keys dropped; replays are not counted twice.

#[pg_test]
fn last_releases_lists_what_the_session_received_newest_first() {
    sample_table();
    Spi::run("SET dp.require_budget = off").unwrap();
    one_i64("SELECT dp_count(x, 0.5) FROM s");
    one_f64("SELECT dp_avg(x, 0, 1000, 0.25) FROM s");
    one_f64("SELECT dp_median(x, 0, 1000, 0.125) FROM s");
    let rows = column("SELECT concat_ws('|', aggregate, epsilon, delta, mechanism, interval_95 IS NOT NULL) FROM dp.last_releases(3)");
    assert_eq!(
        rows,
        vec![
            Some("dp_median|0.125|0|exponential|f".into()),
            Some("dp_avg|0.25|0|discrete_laplace|t".into()),
            Some("dp_count|0.5|0|discrete_laplace|t".into()),
        ]
    );
    // the value shown is the value returned
    let v = one_f64("SELECT dp_sum(x, 0, 1000, 0.5) FROM s");
    assert_eq!(one_f64("SELECT value FROM dp.last_releases(1)"), v);
    // the count's interval is its receipt's
    let receipt = one_f64("SELECT (details->>'interval95')::float8 FROM dp.ledger WHERE aggregate LIKE 'dp_count%' ORDER BY id DESC LIMIT 1");
    assert_eq!(one_f64("SELECT interval_95 FROM dp.last_releases(100) WHERE aggregate = 'dp_count'"), receipt);
    let e = error_of("SELECT * FROM dp.last_releases(101)").unwrap();
    assert!(e.contains("n must be between 0 and 100"), "{e}");
}

#[pg_test]
fn last_releases_omits_groups_having_dropped() {
    sample_table();
    Spi::run("SET dp.require_budget = off").unwrap();
    Spi::run("SELECT * FROM dp.last_releases(0)").unwrap();
    let before = one_i64("SELECT count(*) FROM dp.last_releases(100)");
    // 10 groups, HAVING keeps 3 (i % 10 < 3, a condition on the key)
    let shown = column("SELECT dp_count(x, 1e6)::text FROM s GROUP BY i % 10 HAVING i % 10 < 3");
    assert_eq!(shown.len(), 3);
    assert_eq!(one_i64("SELECT count(*) FROM dp.last_releases(100)") - before, 3);
    // a HAVING on the noisy value itself: only the groups shown
    let shown = column("SELECT dp_sum(i, 0, 1000, 1e6)::text FROM s GROUP BY i % 4 HAVING dp_count(x, 1e6) > 0 AND i % 4 = 1");
    assert_eq!(shown.len(), 1);
    let kept = column("SELECT aggregate FROM dp.last_releases(2) ORDER BY 1");
    assert_eq!(kept, vec![Some("dp_count".into()), Some("dp_sum".into())], "both calls of the one group shown");
    assert_eq!(one_i64("SELECT count(*) FROM dp.last_releases(100)") - before, 5);
}

#[pg_test]
fn last_releases_of_a_scrolled_cursor_are_counted_once() {
    sample_table();
    Spi::run("SET dp.require_budget = off").unwrap();
    let before = one_i64("SELECT count(*) FROM dp.last_releases(100)");
    Spi::run("DECLARE c SCROLL CURSOR FOR SELECT i % 5 AS k, dp_count(x, 1) FROM s GROUP BY i % 5 ORDER BY 1").unwrap();
    Spi::run("FETCH ALL FROM c").unwrap();
    Spi::run("FETCH BACKWARD ALL FROM c").unwrap();
    Spi::run("FETCH ALL FROM c").unwrap();
    Spi::run("CLOSE c").unwrap();
    assert_eq!(one_i64("SELECT count(*) FROM dp.last_releases(100)") - before, 5);
}

#[pg_test]
fn count_intervals_cover_the_noise_at_their_stated_rate() {
    sample_table();
    Spi::run("SET dp.require_budget = off").unwrap();
    // 400 releases of a count of 1000 at ε = 0.5: the fraction within the stated half-width is 0.95
    // or a little more (the smallest grid value with coverage ≥ 0.95); below 0.95 − 5.3 σ (σ = 0.011,
    // α ≈ 1e-7) the interval is too narrow
    let mut inside = 0;
    for _ in 0..400 {
        let v = one_i64("SELECT dp_count(x, 0.5) FROM s");
        let h = one_f64("SELECT interval_95 FROM dp.last_releases(1)");
        if ((v - 1000) as f64).abs() <= h {
            inside += 1;
        }
    }
    assert!(inside >= 357, "{inside} of 400 within the interval");
    // and not vacuous: the half-width is finite and a small multiple of the scale 2
    let h = one_f64("SELECT interval_95 FROM dp.last_releases(1)");
    assert!((4.0..=8.0).contains(&h), "{h}");
}

#[pg_test]
fn last_releases_never_count_groups_the_key_selection_dropped() {
    // 60 wards, most with one patient: the selection drops most of them; the session list must hold
    // exactly the releases of the wards shown, or its length would count the hidden ones
    Spi::run("CREATE TABLE stays AS SELECT g AS id, g AS patient, CASE WHEN g <= 400 THEN g % 3 ELSE g END AS ward FROM generate_series(1, 460) g").unwrap();
    Spi::run("SELECT dp.protect_table('stays', privacy_unit => 'patient')").unwrap();
    Spi::run("SET dp.require_budget = off").unwrap();
    let before = one_i64("SELECT count(*) FROM dp.last_releases(100)");
    let shown = column("SELECT ward::text FROM (SELECT ward, dp_count(id, 1) AS n FROM stays GROUP BY ward) q");
    assert!(shown.len() >= 3 && shown.len() < 60, "{}", shown.len());
    assert_eq!(one_i64("SELECT count(*) FROM dp.last_releases(100)") - before, shown.len() as i64);
}

// dp_interval_low / dp_interval_high: the 95% interval of the very release, as columns

#[pg_test]
fn interval_columns_are_the_receipts_half_width_around_the_value() {
    sample_table();
    Spi::run("SET dp.require_budget = off").unwrap();
    Spi::run("SET dp.release_cache = off").unwrap();
    for (call, agg) in [
        ("dp_count(x, 0.5)", "dp_count"),
        ("dp_sum(x, 0, 1000, 0.5)", "dp_sum"),
        ("dp_avg(x, 0, 1000, 0.5)", "dp_avg"),
        ("dp_variance(x, 0, 1000, 0.5)", "dp_variance"),
    ] {
        // under ORDER BY, by group: each row carries its own group's interval
        let rows = column(&format!(
            "SELECT concat_ws('|', {call}, dp_interval_low({call}), dp_interval_high({call})) FROM s GROUP BY i % 4 ORDER BY i % 4 DESC"
        ));
        let shown = column(&format!(
            "SELECT concat_ws('|', value, interval_95) FROM dp.last_releases(4) WHERE aggregate = '{agg}' ORDER BY released_at"
        ));
        assert_eq!(rows.len(), 4, "{call}");
        let mut got: Vec<(f64, f64, f64)> = rows
            .iter()
            .map(|r| {
                let v: Vec<f64> = r.as_ref().unwrap().split('|').map(|x| x.parse().unwrap()).collect();
                (v[0], v[1], v[2])
            })
            .collect();
        let mut want: Vec<(f64, f64)> = shown
            .iter()
            .map(|r| {
                let v: Vec<f64> = r.as_ref().unwrap().split('|').map(|x| x.parse().unwrap()).collect();
                (v[0], v[1])
            })
            .collect();
        got.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
        want.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
        for ((v, lo, hi), (wv, h)) in got.iter().zip(&want) {
            assert_eq!(v, wv, "{call}");
            assert!((v - h - lo).abs() <= 1e-9 * v.abs().max(1.0) && (v + h - hi).abs() <= 1e-9 * v.abs().max(1.0), "{call}: {v} {lo} {hi} {h}");
        }
    }
    // the exponential mechanism states none
    assert_eq!(column("SELECT dp_interval_low(dp_percentile_em(x, 0.5, 0, 1000, 0.5))::text FROM s"), vec![None]);
    // anything but a pg_dp aggregate call is refused before planning, or where no DP query runs
    let e = error_of("SELECT dp_interval_low(dp_count(x, 0.5) * 2) FROM s").unwrap();
    assert!(e.contains("dp_interval_low takes a pg_dp aggregate call"), "{e}");
    let e = error_of("SELECT dp_interval_high(5)").unwrap();
    assert!(e.contains("dp_interval_high takes a pg_dp aggregate call"), "{e}");
}

#[pg_test]
fn interval_columns_cover_the_true_value_95_percent_of_the_time() {
    // 2,000 releases of a count whose true value is 1,000 at ε = 0.5: the interval covers it with
    // probability ≥ 0.95 by construction; fewer than 1,850 covers (z ≈ −6.8) fail at α < 1e-6. A
    // half-width halved (the negative control below) covers about 78% and fails.
    sample_table();
    Spi::run("SET dp.require_budget = off").unwrap();
    Spi::run("SET dp.release_cache = off").unwrap();
    let n = 2000;
    let mut covered = 0;
    let mut covered_by_half = 0;
    for _ in 0..n {
        let r = column("SELECT concat_ws('|', dp_count(x, 0.5), dp_interval_low(dp_count(x, 0.5)), dp_interval_high(dp_count(x, 0.5))) FROM s");
        let v: Vec<f64> = r[0].as_ref().unwrap().split('|').map(|x| x.parse().unwrap()).collect();
        if v[1] <= 1000.0 && 1000.0 <= v[2] {
            covered += 1;
        }
        let half = (v[2] - v[1]) / 4.0;
        if (v[0] - 1000.0).abs() <= half {
            covered_by_half += 1;
        }
    }
    assert!(covered >= 1850, "the interval covered the true count {covered} times in {n}");
    assert!(covered_by_half < 1850, "the negative control (half-width halved) covered {covered_by_half} times in {n}");
}
