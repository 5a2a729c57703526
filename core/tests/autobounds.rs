//! Automatic DP bounds (docs/privacy/automatic-bounds.md): the magnitude histogram (merge, bytes,
//! exact clamped sums, the sensitivity of the rounded sum), the choice of bounds (empirical privacy on
//! neighbouring inputs with a negative control; the clear error on small data), the ε split, and the
//! accuracy of dp_sum, dp_avg and dp_median with automatic bounds on 100 000 rows.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::*;
use pg_dp_core::accounting::charge::mechanism_epsilon;
use pg_dp_core::mechanisms::autobounds::{
    extension_threshold, threshold, window_threshold, AutoBoundsSpec, WINDOWS, EXPONENTS, ChosenBounds, MagnitudeHistogram, AUTO_BOUNDS_MECHANISM, AUTO_BOUNDS_SHARE,
    DEFAULT_MAX_EXP, DEFAULT_MIN_EXP, MAX_SERIALIZED_BYTES,
};
use pg_dp_core::noise::grid::pow2;
use pg_dp_core::mechanisms::{AvgSpec, FloatSumSpec};
use pg_dp_core::mechanisms::quantile::QuantileSpec;
use pg_dp_core::noise::rng::{seeded_rng, uniform01, DpRng};
use pg_dp_core::DpError;
use rand::Rng;

const SAMPLES: usize = 200_000;

fn hist(xs: &[f64]) -> MagnitudeHistogram {
    let mut h = MagnitudeHistogram::new();
    for &x in xs {
        h.add(x);
    }
    h
}

/// Awkward values: every sign, tiny and huge magnitudes, bin edges and the values just below them,
/// infinities, NaN.
fn awkward(rng: &mut DpRng, n: usize) -> Vec<f64> {
    let specials = [
        0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1e-300, -5e-324, pow2(-64), pow2(-65), pow2(99), -pow2(99),
        pow2(99).next_down(), 1e30, -1e300, 1.0, 1.0f64.next_down(), 1024.0, -1024.0f64.next_down(), 0.1, 1.0 / 3.0,
    ];
    (0..n)
        .map(|_| {
            if rng.random_range(0..4) == 0 {
                specials[rng.random_range(0..specials.len())]
            } else {
                let e = rng.random_range(-80..110);
                let s = if rng.random::<bool>() { 1.0 } else { -1.0 };
                s * (1.0 + uniform01(rng)) * 2f64.powi(e)
            }
        })
        .collect()
}

#[test]
fn merge_is_associative_and_matches_a_single_pass() {
    let mut rng = seeded_rng(7000);
    for round in 0..50 {
        let xs = awkward(&mut rng, 1 + round * 40);
        let whole = hist(&xs);
        let cut1 = rng.random_range(0..=xs.len());
        let cut2 = rng.random_range(cut1..=xs.len());
        let (a, b, c) = (hist(&xs[..cut1]), hist(&xs[cut1..cut2]), hist(&xs[cut2..]));
        // (a + b) + c, a + (b + c), and c + a + b through bytes
        let mut left = a.clone();
        left.merge(&b);
        left.merge(&c);
        let mut bc = b.clone();
        bc.merge(&c);
        let mut right = a.clone();
        right.merge(&bc);
        let mut via_bytes = MagnitudeHistogram::from_bytes(&c.to_bytes()).unwrap();
        via_bytes.merge(&MagnitudeHistogram::from_bytes(&a.to_bytes()).unwrap());
        via_bytes.merge(&MagnitudeHistogram::from_bytes(&b.to_bytes()).unwrap());
        assert!(left == whole && right == whole && via_bytes == whole, "round {round}");
        assert_eq!(whole.count(), xs.iter().filter(|x| !x.is_nan()).count() as i64);
        let bytes = whole.to_bytes();
        assert!(bytes.len() <= MAX_SERIALIZED_BYTES);
        assert!(MagnitudeHistogram::from_bytes(&bytes).unwrap() == whole);
    }
    // an empty histogram is 11 bytes; a full one stays within the documented maximum
    assert_eq!(MagnitudeHistogram::new().to_bytes().len(), 11);
    let mut full = MagnitudeHistogram::new();
    for e in -64..=100 {
        full.add(pow2(e));
        full.add(-pow2(e));
    }
    full.add(0.0);
    assert_eq!(full.to_bytes().len(), MAX_SERIALIZED_BYTES);
}

/// A Citus worker's histogram: the rows grouped by `bin_of`, each group's count and significand sum
/// added with `add_bin`, in any order, is the histogram `add` builds row by row.
#[test]
fn a_histogram_of_binned_rows_is_the_histogram_of_the_rows() {
    let mut rng = seeded_rng(7050);
    for round in 0..50 {
        let xs = awkward(&mut rng, 1 + round * 40);
        let mut groups: std::collections::BTreeMap<i32, (i64, i128)> = std::collections::BTreeMap::new();
        for &x in &xs {
            if let Some((code, m)) = MagnitudeHistogram::bin_of(x) {
                let g = groups.entry(code).or_default();
                g.0 += 1;
                g.1 += m as i128;
            }
        }
        let mut binned = MagnitudeHistogram::new();
        // largest bin first: the order of the groups does not matter
        for (code, (count, sum)) in groups.iter().rev() {
            binned.add_bin(*code, *count, *sum).unwrap();
        }
        assert!(binned == hist(&xs), "round {round}");
    }
    assert_eq!(MagnitudeHistogram::bin_of(f64::NAN), None);
    assert_eq!(MagnitudeHistogram::bin_of(-0.0), Some((0, 0)));
    assert_eq!(MagnitudeHistogram::bin_of(f64::NEG_INFINITY), Some((-(EXPONENTS as i32 + 1), 0)));
    assert_eq!(MagnitudeHistogram::bin_of(1.0), Some((65, 1 << 52)));
    // negative control: a row put in the neighbouring bin gives another histogram
    let mut wrong = MagnitudeHistogram::new();
    wrong.add_bin(66, 1, 1 << 52).unwrap();
    assert!(wrong != hist(&[1.0]));
    // what no rows could give is refused
    let mut h = MagnitudeHistogram::new();
    assert!(h.add_bin(0, 1, 5).is_err(), "a zero bin with a sum");
    assert!(h.add_bin(65, 2, 1 << 52).is_err(), "a sum too small for its count");
    assert!(h.add_bin(65, -1, 0).is_err(), "a negative count");
    assert!(h.add_bin(EXPONENTS as i32 + 2, 1, 0).is_err(), "an unknown bin");
    assert!(h.add_bin(-(EXPONENTS as i32 + 1), 1, 3).is_err(), "an overflow bin with a sum");
}

#[test]
fn corrupt_histograms_are_refused() {
    let mut rng = seeded_rng(7100);
    let h = hist(&awkward(&mut rng, 500));
    let good = h.to_bytes();
    let corrupt = |b: &[u8]| matches!(MagnitudeHistogram::from_bytes(b), Err(DpError::CorruptState(_)));
    assert!(corrupt(&good[..good.len() - 1]), "truncated");
    assert!(corrupt(&[]), "empty");
    let mut v = good.clone();
    v[0] = 9;
    assert!(corrupt(&v), "unknown version");
    // first entry: index at 11..13, count at 13..21, sum at 21..37
    let mut v = good.clone();
    v[13..21].copy_from_slice(&0i64.to_le_bytes());
    assert!(corrupt(&v), "empty bin");
    let mut v = good.clone();
    let sum = i128::from_le_bytes(v[21..37].try_into().unwrap());
    v[21..37].copy_from_slice(&(sum + (1i128 << 60)).to_le_bytes());
    assert!(corrupt(&v), "significand sum too large for its count");
    let mut v = good.clone();
    v[11..13].copy_from_slice(&u16::MAX.to_le_bytes());
    assert!(corrupt(&v), "index out of range");
    let mut v = good.clone();
    v[1..9].copy_from_slice(&(-1i64).to_le_bytes());
    assert!(corrupt(&v), "negative zero count");
}

/// ⌊S·2^-40/2^g + 1/2⌋ for an exact sum S in units of 2^-40.
fn rounded(s: i128, g: i32) -> i128 {
    let k = 40 + g;
    if k >= 1 {
        (s + (1i128 << (k - 1))) >> k
    } else {
        s << (-k)
    }
}

#[test]
fn clamped_sums_are_exact() {
    // values on the grid 2^-40 with magnitudes up to 2^60: their clamped sums are exact i128 sums in
    // units of 2^-40, an independent reference for the histogram's wide arithmetic
    let mut rng = seeded_rng(7200);
    let mut checked = 0;
    for _ in 0..300 {
        let n = rng.random_range(0..400);
        let xs: Vec<f64> = (0..n)
            .map(|_| {
                let e = rng.random_range(-40..60);
                let s = if rng.random_range(0..3) == 0 { -1.0 } else { 1.0 };
                (s * (1.0 + uniform01(&mut rng)) * 2f64.powi(e) * pow2(40)).round() * pow2(-40)
            })
            .collect();
        let h = hist(&xs);
        for _ in 0..5 {
            let pick = |rng: &mut DpRng| if rng.random_range(0..5) == 0 { None } else { Some(rng.random_range(-40..60)) };
            let b = ChosenBounds { lower_exp: pick(&mut rng), upper_exp: pick(&mut rng), epsilon: 1.0, threshold: 1, fallback: false };
            let (lo, up) = (b.lower(), b.upper());
            let exact: i128 = xs.iter().map(|&x| (x.clamp(lo, up) * pow2(40)) as i128).sum();
            for g in [-45, -40, -12, 0, 7, 30, 70] {
                assert_eq!(h.clamped_sum_steps(&b, g), rounded(exact, g), "bounds [{lo}, {up}], g = {g}");
                checked += 1;
            }
        }
    }
    assert!(checked > 10_000);
    // values below 2^-64 count as 0; ±Infinity and values beyond 2^99 are clamped like the rest
    let h = hist(&[pow2(-65), -pow2(-70), f64::INFINITY, f64::NEG_INFINITY, 1e300, 3.0]);
    let b = ChosenBounds { lower_exp: Some(1), upper_exp: Some(3), epsilon: 1.0, threshold: 1, fallback: false };
    assert_eq!(h.clamped_sum_steps(&b, 0), 8 - 2 + 8 + 3);
}

#[test]
fn one_row_moves_the_rounded_clamped_sum_by_at_most_the_charged_sensitivity() {
    // the released integer is ⌊S/2^g + 1/2⌋; one row moves S by at most the bound of largest magnitude
    // (2^32 steps of the sum's grid), or by a value in [lower − c, upper − c] after centring for the
    // average, and the rounding adds nothing beyond the ceiling of that
    let mut rng = seeded_rng(7300);
    let extra_rows = [f64::INFINITY, f64::NEG_INFINITY, 0.0, 1e30, -1e30, pow2(-64), 0.1, -0.7];
    for _ in 0..400 {
        let n = rng.random_range(0..60);
        let xs = awkward(&mut rng, n);
        let h = hist(&xs);
        let b = ChosenBounds {
            lower_exp: if rng.random::<bool>() { Some(rng.random_range(-64..100)) } else { None },
            upper_exp: Some(rng.random_range(-64..100)),
            epsilon: 1.0,
            threshold: 1,
            fallback: false,
        };
        let sum = FloatSumSpec::new(b.lower(), b.upper(), 1.0).unwrap();
        let ab = b.aligned_for_average();
        let avg = AvgSpec::new(ab.lower(), ab.upper(), 1.0).unwrap();
        assert_eq!(avg.grid.q_lower as f64 * avg.grid.step(), ab.lower(), "lower bound off the average's grid");
        assert_eq!(avg.grid.q_upper as f64 * avg.grid.step(), ab.upper(), "upper bound off the average's grid");
        let mut extras: Vec<f64> = extra_rows.to_vec();
        for a in [b.lower_exp, b.upper_exp].into_iter().flatten() {
            extras.extend([pow2(a), pow2(a).next_down(), pow2(a).next_up(), -pow2(a), -pow2(a).next_down()]);
        }
        extras.push(awkward(&mut rng, 1)[0]);
        for x in extras {
            if x.is_nan() {
                continue;
            }
            let mut h2 = h.clone();
            h2.add(x);
            let d = (h2.clamped_sum_steps(&b, sum.grid.exp) - h.clamped_sum_steps(&b, sum.grid.exp)).unsigned_abs();
            assert!(d <= sum.sensitivity_steps(), "sum moved by {d} > {} steps for row {x:e}", sum.sensitivity_steps());
            // the average's centred statistic: ⌊S/2^g + 1/2⌋ − n·c
            let c = avg.center as i128;
            let centred = |h: &MagnitudeHistogram| h.clamped_sum_steps(&ab, avg.grid.exp) - h.count() as i128 * c;
            let d = (centred(&h2) - centred(&h)).unsigned_abs();
            assert!(d <= avg.sensitivity_steps(), "centred sum moved by {d} > {} steps for row {x:e}", avg.sensitivity_steps());
        }
    }
}

/// The choice as one integer per outcome: error, or (fallback, lower, upper exponents).
fn outcome(r: Result<ChosenBounds, DpError>) -> i64 {
    match r {
        Err(_) => -1,
        Ok(b) => {
            (b.fallback as i64) * 1_000_000 + (b.lower_exp.map_or(0, |a| a + 200) as i64) * 1000 + b.upper_exp.map_or(0, |a| a + 200) as i64
        }
    }
}

fn outcomes(seed: u64, h: &MagnitudeHistogram, eps: f64, n: usize) -> Vec<i64> {
    let mut rng = seeded_rng(seed);
    (0..n).map(|_| outcome(h.choose_bounds(&mut rng, eps))).collect()
}

/// Outcomes on a neighbouring pair, drawn on two threads (each choice draws 329 noises).
fn outcome_pair(seed: u64, d: &MagnitudeHistogram, d2: &MagnitudeHistogram, eps: f64, n: usize) -> (Vec<i64>, Vec<i64>) {
    std::thread::scope(|s| {
        let a = s.spawn(|| outcomes(seed, d, eps, n));
        let b = outcomes(seed + 1, d2, eps, n);
        (a.join().unwrap(), b)
    })
}

#[test]
fn choose_bounds_is_private_empirically_with_a_negative_control() {
    let eps = 1.0;
    let tau = threshold(mechanism_epsilon(eps)) as usize;
    let tau_ext = extension_threshold(mechanism_epsilon(eps)) as usize;
    assert_eq!((tau, tau_ext), (20, 5));
    // (1) τ rows in the bin [512, 1024) against τ + 1: whether the bin passes (or the query errors)
    //     changes by the factor e^ε at most, and the checker sees the ratio come close to it
    // (2) τ rows there and τ_ext − 1 in the bin above against τ_ext: whether the bound extends
    // (3) a row of the other sign in a histogram with τ − 1 negative rows at −3
    let base = vec![1000.0; tau];
    let mut cases: Vec<(&str, Vec<f64>, f64)> = vec![("bin at threshold", base.clone(), 1000.0)];
    let mut ext = base.clone();
    ext.extend(vec![1500.0; tau_ext - 1]);
    cases.push(("extension bin", ext, 1500.0));
    let mut neg = base.clone();
    neg.extend(vec![-3.0; tau - 1]);
    cases.push(("other sign", neg, -3.0));
    let alpha = ALPHA / cases.len() as f64;
    for (i, (what, xs, row)) in cases.iter().enumerate() {
        let d = hist(xs);
        let mut d2 = d.clone();
        d2.add(*row);
        // the bound of the ratio is symmetric: adding the row (D → D') and removing it (D' → D) are
        // checked by the same pair of samples; 200 000 choices each for the main pair, 100 000 for the
        // others (each choice draws 329 noises)
        let n = if i == 0 { SAMPLES } else { SAMPLES / 2 };
        let (a, b) = outcome_pair(7400 + 2 * i as u64, &d, &d2, eps, n);
        let r = privacy_check(&a, &b, eps, 1000, alpha);
        eprintln!("choose_bounds, {what}: {} outcomes, max |ln ratio| {:.4}, excess {:.4}", r.bins, r.max_abs_log_ratio, r.max_excess);
        assert!(!r.violates(), "{what}: {r:?}");
        assert!(r.max_abs_log_ratio > 0.8 * eps, "{what}: the pair is not a tight one ({})", r.max_abs_log_ratio);
    }
    // negative control: a choice made with twice the ε (noise of half the scale) on the same kind of
    // pair must be reported as a violation of ε
    let tau2 = threshold(mechanism_epsilon(2.0 * eps)) as usize;
    let d = hist(&vec![1000.0; tau2]);
    let mut d2 = d.clone();
    d2.add(1000.0);
    let (a, b) = outcome_pair(7450, &d, &d2, 2.0 * eps, SAMPLES / 2);
    let r = privacy_check(&a, &b, eps, 1000, ALPHA);
    eprintln!("negative control (ε doubled): max |ln ratio| {:.4}, excess {:.4}", r.max_abs_log_ratio, r.max_excess);
    assert!(r.violates(), "the checker did not notice noise of half the scale: {r:?}");
}

#[test]
fn small_and_degenerate_data_always_get_a_release_at_the_charged_epsilon() {
    // no bin can reach the threshold: the bounds come from the largest noisy count of the default
    // range (or the zero bin), never an error
    let mut rng = seeded_rng(7500);
    let spec = AutoBoundsSpec::new(0.1).unwrap();
    let tables: Vec<Vec<f64>> = vec![
        vec![],
        vec![42.0],
        vec![3.0, 17.5, 240.0, 99.0, 1.0],
        vec![7.0; 300],
        vec![0.0; 300],
        vec![1e300, -1e300, f64::INFINITY],
        (0..300).map(|i| i as f64 * 1e-9).collect(),
    ];
    let trials = 300;
    let (mut fallbacks, mut zeros) = (0, 0);
    for xs in &tables {
        let h = hist(xs);
        for i in 0..trials {
            let (bounds, value) = match i % 3 {
                0 => spec.release_sum(&mut rng, &h).map(|r| (r.bounds, r.value)).unwrap(),
                1 => spec.release_avg(&mut rng, &h).map(|r| (r.bounds, r.value)).unwrap(),
                _ => {
                    let (b, e) = spec.quantile_bounds(&mut rng, xs).unwrap();
                    let q = QuantileSpec::exponential(0.5, b.lower(), b.upper(), e).unwrap();
                    (b, q.release(&mut rng, &mut xs.clone()))
                }
            };
            assert!(value.is_finite(), "{xs:?}: {value}");
            assert!(bounds.lower() <= 0.0 && bounds.upper() >= 0.0, "{bounds:?}");
            if bounds.fallback {
                fallbacks += 1;
                // one side at most, within the default range
                assert!(bounds.lower_exp.is_none() || bounds.upper_exp.is_none(), "{bounds:?}");
                for a in [bounds.lower_exp, bounds.upper_exp].into_iter().flatten() {
                    assert!((DEFAULT_MIN_EXP + 1..=DEFAULT_MAX_EXP + 1).contains(&a), "{bounds:?}");
                }
                zeros += (bounds.lower_exp.is_none() && bounds.upper_exp.is_none()) as usize;
            }
        }
    }
    eprintln!("{} releases on tiny tables: {fallbacks} with fallback bounds, {zeros} of them [0, 0]", tables.len() * trials);
    assert_eq!(fallbacks, tables.len() * trials, "a tiny table passed the threshold at epsilon 0.02");
    // a table with many rows in one bin still passes the threshold, without the fallback
    let big = hist(&vec![300.0; 5000]);
    let r = AutoBoundsSpec::new(1.0).unwrap().release_sum(&mut rng, &big).unwrap();
    assert!(!r.bounds.fallback && r.bounds.upper() == 512.0, "{:?}", r.bounds);
    // a column of zeros is fine: its bounds are [0, 0] and its sum is exactly 0
    let zeros = hist(&vec![0.0; 5000]);
    let r = AutoBoundsSpec::new(1.0).unwrap().release_sum(&mut rng, &zeros).unwrap();
    assert_eq!((r.value, r.bounds.lower(), r.bounds.upper(), r.bounds.fallback), (0.0, 0.0, 0.0, false));
}

#[test]
fn the_fallback_finds_a_small_table_at_a_large_epsilon() {
    // 40 rows in [64, 128) at a bound ε of 0.2 (threshold about 100 rows): below the threshold, but
    // far above the noise, so the largest noisy count is that bin nearly always
    let mut rng = seeded_rng(7510);
    let h = hist(&vec![100.0; 40]);
    let (mut found, n) = (0, 400);
    for _ in 0..n {
        let b = h.choose_bounds(&mut rng, 0.2).unwrap();
        assert!(b.fallback, "{b:?}");
        found += (b.upper() == 128.0 && b.lower() == 0.0) as usize;
    }
    eprintln!("fallback found the data's bin in {found} of {n} choices");
    assert!(found >= n * 95 / 100, "{found} of {n}");
}

#[test]
fn the_split_charges_exactly_the_callers_epsilon() {
    assert_eq!(AUTO_BOUNDS_SHARE, 0.2);
    let mut rng = seeded_rng(7600);
    for _ in 0..100_000 {
        let e = (rng.random_range(-9.0f64..6.0) * std::f64::consts::LN_10).exp();
        let spec = AutoBoundsSpec::new(e).unwrap();
        let (b, r) = spec.split();
        let m = mechanism_epsilon(e);
        assert!(b > 0.0 && r > 0.0 && b + r <= m && m < e, "{e:e}: {b:e} + {r:e}");
        assert!((b / m - AUTO_BOUNDS_SHARE).abs() < 1e-15 && ((b + r) / m - 1.0).abs() < 1e-14);
    }
    // the receipt charges the caller's ε and names the bounds
    let mut xs: Vec<f64> = (0..5000).map(|i| (i % 100) as f64).collect();
    xs.push(-1.0);
    let h = hist(&xs);
    let r = AutoBoundsSpec::new(0.7).unwrap().release_avg(&mut rng, &h).unwrap();
    assert_eq!((r.info.epsilon, r.info.mechanism), (0.7, AUTO_BOUNDS_MECHANISM));
    assert_eq!((r.bounds.lower(), r.bounds.upper()), (0.0, 128.0));
    let d: serde_json::Value = serde_json::from_str(&r.details).unwrap();
    assert_eq!(d["bounds"]["upper"].as_f64(), Some(128.0));
    assert_eq!(d["bounds_share"].as_f64(), Some(AUTO_BOUNDS_SHARE));
    assert!(d["interval95"].as_f64().unwrap() > 0.0 && d["count_interval95"].as_f64().unwrap() > 0.0);
    assert!(matches!(AutoBoundsSpec::with_share(1.0, 1.0), Err(DpError::InvalidParameter { arg: "share", .. })));
    assert!(matches!(AutoBoundsSpec::new(0.0), Err(DpError::InvalidParameter { arg: "epsilon", .. })));
}

fn normal(rng: &mut DpRng) -> f64 {
    let u = 1.0 - uniform01(rng);
    let v = uniform01(rng);
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

#[test]
fn large_data_gets_good_bounds_and_accurate_releases() {
    // 100 000 rows at ε = 1: incomes (lognormal, median 50 000, σ of the log 1) and adult ages
    // (17 + Gamma(2, 10), at most 90). Documented tolerances (automatic-bounds.md): in every release
    // the lower bound is 0 and the upper bound at least the 99th percentile and at most twice the
    // maximum, except when noise alone extends it by one empty bin (at most 1% of releases; then at
    // most four times the maximum); the sum and mean are within 1% (incomes) and 0.1% (ages) of the
    // truth; the median within 2% of the true median.
    let mut gen = seeded_rng(7700);
    let incomes: Vec<f64> = (0..100_000).map(|_| (50_000f64.ln() + normal(&mut gen)).exp()).collect();
    let ages: Vec<f64> = (0..100_000)
        .map(|_| (17.0 - 10.0 * ((1.0 - uniform01(&mut gen)).ln() + (1.0 - uniform01(&mut gen)).ln())).min(90.0).floor())
        .collect();
    let mut rng = seeded_rng(7701);
    let spec = AutoBoundsSpec::new(1.0).unwrap();
    for (name, xs, tol) in [("incomes", &incomes, 0.01), ("ages", &ages, 0.001)] {
        let h = hist(xs);
        let mut sorted = xs.clone();
        sorted.sort_by(f64::total_cmp);
        let (p99, max) = (sorted[99_000], sorted[99_999]);
        let (sum, median) = (xs.iter().sum::<f64>(), sorted[50_000]);
        let mean = sum / xs.len() as f64;
        let (mut worst_sum, mut worst_mean, mut worst_median) = (0.0f64, 0.0f64, 0.0f64);
        let (mut extended, mut uppers) = (0, Vec::new());
        for _ in 0..200 {
            let s = spec.release_sum(&mut rng, &h).unwrap();
            let a = spec.release_avg(&mut rng, &h).unwrap();
            for b in [s.bounds, a.bounds] {
                assert_eq!(b.lower(), 0.0, "{name}");
                assert!(b.upper() >= p99 && b.upper() <= 4.0 * max, "{name}: upper {} against p99 {p99}, max {max}", b.upper());
                extended += (b.upper() > 2.0 * max) as usize;
                uppers.push(b.upper());
            }
            worst_sum = worst_sum.max((s.value / sum - 1.0).abs());
            worst_mean = worst_mean.max((a.value / mean - 1.0).abs());
            let (bounds, e_rest) = spec.quantile_bounds(&mut rng, xs).unwrap();
            let q = QuantileSpec::smooth(0.5, bounds.lower(), bounds.upper(), e_rest, 0.0).unwrap();
            let mut v = xs.clone();
            worst_median = worst_median.max((q.release(&mut rng, &mut v) / median - 1.0).abs());
        }
        eprintln!(
            "{name}: p99 {p99}, max {max}; upper bounds from {} to {}, {extended} of 400 above twice the maximum; worst relative \
             error over 200 releases: sum {worst_sum:.2e}, mean {worst_mean:.2e}, median {worst_median:.2e}",
            uppers.iter().cloned().fold(f64::INFINITY, f64::min),
            uppers.iter().cloned().fold(0.0, f64::max)
        );
        // at most 1% expected; 12 of 400 is beyond 3.5 standard deviations of a 1% binomial
        assert!(extended <= 12, "{name}: {extended} extended bounds");
        assert!(worst_sum <= tol && worst_mean <= tol, "{name}: sum {worst_sum}, mean {worst_mean} beyond {tol}");
        assert!(worst_median <= 0.02, "{name}: median {worst_median}");
    }
}

// The window thresholds bound the noise of empty windows: at a per-window target of 1% (a loose miss,
// so that it can be measured), the noisy sum of k empty bins reaches τ_k in at most 1% of 400 000 draws
// (within 5 standard errors) for every window size and two ε; the bound is not vacuous either (at
// least 0.05% of the draws come within 2 scales of it). Negative control: the threshold of one bin at
// that miss, ⌈b·ln(1/0.01)⌉, applied to a window's sum, is reached more often than 1%.
#[test]
fn window_thresholds_bound_the_noise_of_empty_windows() {
    use pg_dp_core::noise::sampling::{discrete_laplace, laplace_scale};
    let windows = (2 * WINDOWS.len() * (EXPONENTS + 1)) as f64;
    let target = 0.01;
    let mut rng = seeded_rng(7700);
    for eps in [1.0, 0.1] {
        let (t, s) = laplace_scale(1, eps);
        let b = t as f64 / s as f64;
        for k in WINDOWS {
            let tau = window_threshold(eps, k, target * windows) as i128;
            assert!(tau > 0 && (tau as f64) < k as f64 * threshold(eps) as f64, "τ_{k} = {tau}");
            let n = 400_000;
            let (mut over, mut near, mut low) = (0usize, 0usize, 0usize);
            for _ in 0..n {
                let sum: i128 = (0..k).map(|_| discrete_laplace(&mut rng, t, s)).sum();
                over += (sum >= tau) as usize;
                near += (sum as f64 >= tau as f64 - 2.0 * b) as usize;
                low += (sum as f64 >= (b * (1.0 / target).ln()).ceil()) as usize;
            }
            let p = over as f64 / n as f64;
            let se = (target * (1.0 - target) / n as f64).sqrt();
            eprintln!("ε = {eps}, k = {k}: τ = {tau}, P(sum ≥ τ) = {p:.5}, P(≥ τ − 2b) = {:.5}", near as f64 / n as f64);
            assert!(p <= target + 5.0 * se, "ε = {eps}, k = {k}: {p}");
            assert!(near as f64 / n as f64 >= 0.0005, "ε = {eps}, k = {k}: the bound is vacuous");
            assert!(low as f64 / n as f64 > target + 5.0 * se, "negative control: one bin's threshold should be reached more often by a window");
        }
    }
}

// A sign whose rows are spread over a few binary orders of magnitude, none of which holds τ rows (500
// incomes among 9 500 zeros at a bound ε of 0.1: τ = 196 rows), gets its bound from a window of bins
// instead of 0 (which clipped every income to 0): the upper bound lies between the median of the
// incomes and four times their maximum in at least 95% of 300 choices.
#[test]
fn a_sparse_sign_gets_a_bound_from_a_window_of_bins() {
    let mut gen = seeded_rng(7800);
    let mut xs: Vec<f64> = vec![0.0; 9_500];
    let mut incomes: Vec<f64> = (0..500)
        .map(|_| {
            let (u, v) = (1.0 - uniform01(&mut gen), uniform01(&mut gen));
            (50_000f64.ln() + (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()).exp()
        })
        .collect();
    xs.extend(&incomes);
    incomes.sort_by(f64::total_cmp);
    let (p50, max) = (incomes[250], incomes[499]);
    let h = hist(&xs);
    let mut rng = seeded_rng(7801);
    let (mut good, n) = (0, 300);
    for _ in 0..n {
        let b = h.choose_bounds(&mut rng, 0.1).unwrap();
        assert!(!b.fallback && b.lower() == 0.0, "{b:?}");
        good += (b.upper() >= p50 && b.upper() <= 4.0 * max) as usize;
    }
    eprintln!("upper bound within [p50 {p50:.0}, 4·max {:.0}] in {good} of {n} choices", 4.0 * max);
    assert!(good >= n * 95 / 100, "{good} of {n}");
}
