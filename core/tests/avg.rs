//! dp_avg's estimator and its public-count variant (docs/privacy/avg.md): the posterior mean against
//! a direct numerical integration, its agreement with the ratio for large counts, the end of the
//! collapse to a bound on small tables at small ε, and for the public count the receipt, the noise
//! variance and empirical privacy on neighbouring inputs with a negative control.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::*;
use pg_dp_core::mechanisms::accum::{Acc, Params};
use pg_dp_core::mechanisms::{avg_posterior_mean, AvgSpec, PublicCountAvgSpec, AVG_SUM_SHARE};
use pg_dp_core::noise::rng::{seeded_rng, DpRng};
use pg_dp_core::noise::sampling::{discrete_laplace, laplace_scale};
use pg_dp_core::DpError;
use rand::Rng;

/// E[m | s, ñ] by brute force: a fine grid over both the count n and the centred mean m, Laplace
/// densities, the uniform prior over [−h, h] and the flat prior over n > 0.
fn posterior_by_grid(s: f64, nt: f64, h: f64, bs: f64, bn: f64) -> f64 {
    let (gn, gm) = (1500, 1500);
    let lo = (nt - 40.0 * bn).max(0.0);
    let hi = nt.max(0.0) + 40.0 * bn;
    let mut lw = Vec::with_capacity(gn * gm);
    for i in 0..gn {
        let n = lo + (i as f64 + 0.5) * (hi - lo) / gn as f64;
        for j in 0..gm {
            let m = -h + (j as f64 + 0.5) * 2.0 * h / gm as f64;
            lw.push((-(nt - n).abs() / bn - (s - n * m).abs() / bs, m));
        }
    }
    let top = lw.iter().map(|x| x.0).fold(f64::NEG_INFINITY, f64::max);
    let (mut num, mut den) = (0.0, 0.0);
    for (l, m) in lw {
        let w = (l - top).exp();
        num += w * m;
        den += w;
    }
    num / den
}

#[test]
fn posterior_mean_matches_a_direct_numerical_integration() {
    let mut rng = seeded_rng(8000);
    let mut cases = vec![
        // (s, ñ, h, b_sum, b_cnt): small tables at small ε, negative and zero noisy counts, large ones
        (-8000.0, 400.0, 50.0, 7143.0, 333.0),
        (20_000.0, 30.0, 50.0, 7143.0, 333.0),
        (-3.0e4, -250.0, 50.0, 7143.0, 333.0),
        (0.0, 0.0, 1.0, 2.0, 3.0),
        (1.0e6, 1.0e4, 200.0, 300.0, 3.3),
        (-450.0, 12.0, 40.0, 30.0, 1.5),
    ];
    for _ in 0..40 {
        let h = 10f64.powf(rng.random_range(0.0..3.0));
        let bn = 10f64.powf(rng.random_range(-0.5..2.5));
        let bs = h * bn * rng.random_range(0.3..3.0);
        let n = rng.random_range(-3.0..30.0) * bn;
        let m = rng.random_range(-1.0..1.0) * h;
        let s = n.max(0.0) * m + rng.random_range(-3.0..3.0) * bs;
        cases.push((s, n, h, bs, bn));
    }
    let mut worst = 0.0f64;
    for &(s, n, h, bs, bn) in &cases {
        let fast = avg_posterior_mean(s, n, h, bs, bn);
        let grid = posterior_by_grid(s, n, h, bs, bn);
        worst = worst.max((fast - grid).abs() / h);
        assert!(fast.abs() <= h, "outside the prior's support: {fast} for h = {h}");
        assert!((fast - grid).abs() <= 2e-3 * h, "s {s}, ñ {n}, h {h}, b {bs}/{bn}: closed form {fast}, grid {grid}");
    }
    eprintln!("posterior mean vs a 1500×1500 grid: worst difference {worst:.2e} half-widths over {} cases", cases.len());
}

#[test]
fn the_estimate_is_the_ratio_when_the_count_is_large_and_stays_in_bounds() {
    let mut rng = seeded_rng(8100);
    let spec = AvgSpec::new(0.0, 10.0, 1.0).unwrap();
    for _ in 0..2000 {
        let n: i128 = rng.random_range(20_000..1_000_000);
        let m = rng.random_range(-1.0..1.0) * spec.sensitivity_steps() as f64;
        let s = (n as f64 * m) as i128 + rng.random_range(-100_000_000_000i128..100_000_000_000);
        let (p, r) = (spec.estimate(s, n), spec.ratio_estimate(s, n));
        assert!((p - r).abs() <= 1e-6 * 10.0, "n {n}: posterior {p}, ratio {r}");
    }
    // above 1000 count-noise scales the count is taken as known: continuous across that threshold
    for &(h, bs, bn, m) in &[(50.0, 7143.0, 333.0, -20.0), (1.0, 2.0, 3.0, 0.9), (200.0, 300.0, 3.3, 150.0)] {
        let t = 1000.0 * bn;
        let (below, at) = (avg_posterior_mean(t * (1.0 - 1e-9) * m, t * (1.0 - 1e-9), h, bs, bn), avg_posterior_mean(t * m, t, h, bs, bn));
        assert!((below - at).abs() <= 1e-5 * h, "h {h}: {below} below the threshold, {at} at it");
    }
    // any noisy statistics, however extreme, give a value within the bounds
    for &(l, u, eps) in &[(0.0, 1.0, 1e-9), (-1e30, 1e30, 1e6), (0.0, 1e-300, 1.0), (-3.0, -2.0, 0.01)] {
        let spec = AvgSpec::new(l, u, eps).unwrap();
        for &(s, n) in &[(0i128, 0i128), (i128::MAX / 2, -5), (i128::MIN / 2, 1), (12345, i128::MAX / 4), (-7, -(1 << 100))] {
            let v = spec.estimate(s, n);
            assert!(v >= l && v <= u, "[{l}, {u}] at ε {eps}: {v} for ({s}, {n})");
        }
    }
}

fn draws(rng: &mut DpRng, spec: &AvgSpec, sum_q: i128, n: i64, reps: usize) -> Vec<(i128, i128)> {
    (0..reps).map(|_| spec.noisy_statistics(rng, sum_q, n)).collect()
}

#[test]
fn small_tables_at_small_epsilon_no_longer_collapse_to_a_bound() {
    // the seed-000 situation: 300 to 570 rows at ε = 0.01 with bounds [0, 100] or [0, 4000]; the
    // count noise (scale 333 rows) often makes ñ tiny or negative, and the ratio S̃/ñ then lands on a
    // bound. The posterior mean does not, and its error is smaller.
    let mut rng = seeded_rng(8200);
    let reps = 4000;
    for &(upper, n, frac) in &[(100.0, 300i64, 0.3), (100.0, 570, 0.3), (4000.0, 300, 0.2), (4000.0, 570, 0.2)] {
        let spec = AvgSpec::new(0.0, upper, 0.01).unwrap();
        let q = spec.quantize(frac * upper).unwrap();
        let truth = q as f64 * spec.grid.step();
        let stats = draws(&mut rng, &spec, n as i128 * q as i128, n, reps);
        let at_bound = |f: &dyn Fn(i128, i128) -> f64| stats.iter().filter(|&&(s, m)| [0.0, upper].contains(&f(s, m))).count();
        let rmse = |f: &dyn Fn(i128, i128) -> f64| (stats.iter().map(|&(s, m)| (f(s, m) - truth).powi(2)).sum::<f64>() / reps as f64).sqrt() / upper;
        let post = |s, m| spec.estimate(s, m);
        let ratio = |s, m| spec.ratio_estimate(s, m);
        let (bp, br) = (at_bound(&post), at_bound(&ratio));
        let (ep, er) = (rmse(&post), rmse(&ratio));
        eprintln!("[0, {upper}], n = {n}: at a bound {bp} (posterior) vs {br} (ratio) of {reps}; relative RMSE {ep:.3} vs {er:.3}");
        assert!(bp == 0, "the posterior mean landed on a bound {bp} times");
        assert!(br > reps / 10, "the ratio is expected to collapse here ({br}): the test would not notice a revert");
        assert!(ep < 0.9 * er, "posterior RMSE {ep} is not below the ratio's {er}");
    }
}

#[test]
fn public_count_average_spends_all_epsilon_on_the_sum() {
    assert_eq!(AVG_SUM_SHARE, 0.7);
    let eps = 0.5;
    let avg = AvgSpec::new(-1.0, 1.0, eps).unwrap();
    let n: i64 = 1000;
    let spec = avg.with_public_count(n).unwrap();
    let step = avg.grid.step();
    let sens = avg.sensitivity_steps();
    let info = spec.describe();
    // half-width 1 in output units, scale 1/ε (not 1/(0.7ε)), no count noise
    assert_eq!(info.sensitivity, 1.0);
    assert!((info.scale * mechanism_eps(eps) - 1.0).abs() < 1e-14, "{}", info.scale);
    assert_eq!((info.count_scale, info.count_interval95), (Some(0.0), Some(0.0)));
    assert!((spec.mean_interval95() - info.interval95.unwrap() / n as f64).abs() < 1e-15);
    let d: serde_json::Value = serde_json::from_str(&spec.details()).unwrap();
    assert_eq!(d["public_count"], 1000);
    // the noise of the released mean, all values at 0.5: variance V(b)·step²/n² with b = Δ/ε steps
    let mut rng = seeded_rng(8300);
    let q = avg.quantize(0.5).unwrap();
    let mean = q as f64 * step;
    let dd: Vec<f64> = (0..100_000).map(|_| spec.release(&mut rng, n as i128 * q as i128, n).value - mean).collect();
    let (t, s) = laplace_scale(sens, mechanism_eps(eps));
    let expected = dlap_variance(t as f64 / s as f64) * step * step / (n * n) as f64;
    let z = variance_z(&dd, expected);
    eprintln!("public count: variance z = {z:.2}");
    assert!(z.abs() < z_two_sided(ALPHA), "variance does not match Δ/ε noise (z = {z:.2})");
    // power: the variance of dp_avg's split (0.7 of ε on the sum) is rejected
    assert!(variance_z(&dd, expected / (0.7 * 0.7)).abs() > z_two_sided(ALPHA));
    // the count is a parameter: it must be a whole number of rows, at least 1
    for bad in [0, -5] {
        assert!(matches!(PublicCountAvgSpec::new(avg, bad), Err(DpError::InvalidParameter { arg: "count", .. })));
    }
    // degenerate bounds: that value, no noise
    let flat = AvgSpec::new(3.0, 3.0, 1.0).unwrap().with_public_count(10).unwrap();
    assert_eq!(flat.release(&mut rng, 0, 0).value, 3.0);
}

fn mechanism_eps(eps: f64) -> f64 {
    pg_dp_core::accounting::charge::mechanism_epsilon(eps)
}

#[test]
fn public_count_average_is_private_empirically_with_a_negative_control() {
    // D: 5 rows at the lower bound; D': the same plus one at the upper bound (the centred sum moves by
    // the half-width H); the public count is 6 for both (a constant of the release). 200 000 releases
    // each, outputs in twentieths of the bounds.
    let (l, u, eps) = (0.0, 1.0, 1.0);
    let avg = AvgSpec::new(l, u, eps).unwrap();
    let spec = avg.with_public_count(6).unwrap();
    let mut acc = Acc::new(Params::avg(l, u, eps)).unwrap();
    for _ in 0..5 {
        acc.add_f64(l).unwrap();
    }
    let mut acc2 = acc;
    acc2.add_f64(u).unwrap();
    let sample = |seed: u64, f: &dyn Fn(&mut DpRng) -> f64| -> Vec<i64> {
        let mut rng = seeded_rng(seed);
        (0..200_000).map(|_| ((f(&mut rng) / 0.05).floor() as i64).min(19)).collect()
    };
    let a = sample(8400, &|rng| spec.release(rng, acc.sum, acc.n).value);
    let b = sample(8401, &|rng| spec.release(rng, acc2.sum, acc2.n).value);
    let r = privacy_check(&a, &b, eps, 1000, ALPHA / 2.0);
    eprintln!("public-count average: {} buckets, max |ln ratio| {:.4}, excess {:.4}", r.bins, r.max_abs_log_ratio, r.max_excess);
    assert!(!r.violates(), "{r:?}");
    assert!(r.max_abs_log_ratio > 0.5 * eps, "the pair is not informative: {}", r.max_abs_log_ratio);
    // negative control: the same release with half the noise scale (Δ/(2ε)) violates ε
    let sens = avg.sensitivity_steps();
    let (t, s) = laplace_scale(sens, 2.0 * eps);
    let c = avg.center as i128;
    let step = avg.grid.step();
    let broken = |rng: &mut DpRng, sum_q: i128, n: i64| {
        let noisy = sum_q - n as i128 * c + discrete_laplace(rng, t, s);
        ((c as f64 + noisy as f64 / 6.0) * step).clamp(l, u)
    };
    let a = sample(8402, &|rng| broken(rng, acc.sum, acc.n));
    let b = sample(8403, &|rng| broken(rng, acc2.sum, acc2.n));
    let r = privacy_check(&a, &b, eps, 1000, ALPHA / 2.0);
    eprintln!("negative control (half the scale): max |ln ratio| {:.4}, excess {:.4}", r.max_abs_log_ratio, r.max_excess);
    assert!(r.violates(), "the checker did not notice half the noise: {r:?}");
}
