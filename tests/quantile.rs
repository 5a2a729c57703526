//! dp_median / dp_percentile / dp_percentile_em in the core: the exact noise samplers against their
//! distributions (χ² and KS at α = 1e-6), the release against its stated distribution, the noise
//! calibrations against their exact privacy loss (numerically, and empirically on samples under the
//! worst shift and dilation), empirical privacy on a worst-case neighbouring pair (with negative
//! controls that must fail), the exponential mechanism at p = 0 and 1, and the parameter errors.
mod common;

use common::*;
use pg_dp_core::accounting::charge::mechanism_epsilon;
use pg_dp_core::mechanisms::quantile::{
    laplace_calibration, laplace_ln_delta, polynomial_calibration, polynomial_loss, rounded_laplace, rounded_polynomial,
    em_categories, Method, QuantileParams, QuantileSpec, U256, MIN_SCALE_STEPS,
};
use pg_dp_core::noise::rng::{seeded_rng, DpRng};
use pg_dp_core::noise::sampling::{dyadic, LazyUniform};
use pg_dp_core::mechanisms::smooth::{quantile, smooth_sensitivity, smooth_sensitivity_ln};
use pg_dp_core::DpError;
use rand::Rng;

const SAMPLES: usize = 200_000;

fn sample<T>(seed: u64, n: usize, mut f: impl FnMut(&mut DpRng) -> T) -> Vec<T> {
    let mut rng = seeded_rng(seed);
    (0..n).map(|_| f(&mut rng)).collect()
}

/// P(round(t·Z) = k) for standard Laplace Z.
fn rounded_laplace_pmf(t: f64, k: i64) -> f64 {
    let sf = |m: f64| if m <= 0.0 { 1.0 } else { (-(m - 0.5) / t).exp() }; // P(|K| ≥ m)
    let m = k.unsigned_abs() as f64;
    if k == 0 {
        1.0 - sf(1.0)
    } else {
        (sf(m) - sf(m + 1.0)) / 2.0
    }
}

/// P(round(t·Z) = k) for Z with density (3/2)(1 + |z|)^-4.
fn rounded_poly_pmf(t: f64, k: i64) -> f64 {
    let sf = |m: f64| if m <= 0.0 { 1.0 } else { (2.0 * t / (2.0 * t + 2.0 * m - 1.0)).powi(3) };
    let m = k.unsigned_abs() as f64;
    if k == 0 {
        1.0 - sf(1.0)
    } else {
        (sf(m) - sf(m + 1.0)) / 2.0
    }
}

#[test]
fn lazy_uniform_compares_exactly() {
    // the same U against many thresholds is consistent, and P(U < x) = x
    let mut rng = seeded_rng(1);
    let mut hits = [0u64; 3];
    let fracs = [(1u128, 3u128), (2, 7), (999_999, 1_000_000)];
    let n = 200_000;
    for _ in 0..n {
        let mut u = LazyUniform::new();
        let mut prev = false;
        for d in (2..40u128).rev() {
            // thresholds 1/d increase: once below one, below every larger one
            let below = u.less_than(&mut rng, 1, d);
            assert!(!prev || below, "inconsistent comparisons of one uniform");
            prev = below;
        }
        for (h, &(a, b)) in hits.iter_mut().zip(&fracs) {
            *h += u.less_than(&mut rng, a, b) as u64;
        }
    }
    let z = z_two_sided(ALPHA / 3.0);
    for (h, &(a, b)) in hits.iter().zip(&fracs) {
        let p = a as f64 / b as f64;
        let se = (p * (1.0 - p) / n as f64).sqrt();
        let got = *h as f64 / n as f64;
        assert!((got - p).abs() < z * se + 1e-12, "P(U < {a}/{b}) = {got}, want {p}");
    }
    assert!(LazyUniform::new().less_than(&mut rng, 5, 5));
    assert!(!LazyUniform::new().less_than(&mut rng, 0, 5));
}

#[test]
fn rounded_laplace_matches_its_pmf() {
    // t = a/b: below one step, a few steps, many steps
    let cases = [(1u128, 4u128), (3, 1), (25, 2), (1000, 1)];
    for (i, &(a, b)) in cases.iter().enumerate() {
        let t = a as f64 / b as f64;
        let xs = sample(100 + i as u64, SAMPLES, |rng| rounded_laplace(rng, a, b) as i64);
        let g = chi2_gof(&xs, |k| rounded_laplace_pmf(t, k), 0, 20.0);
        eprintln!("rounded Laplace t = {t}: χ² = {:.1}, df = {}, p = {:.3e}", g.stat, g.df, g.p_value);
        assert!(!g.rejects(ALPHA / cases.len() as f64), "rounded Laplace t = {t}: {g:?}");
    }
}

#[test]
fn rounded_polynomial_matches_its_pmf() {
    let cases = [(1u128, 4u128), (3, 1), (25, 2), (1000, 1)];
    let cap = 1u128 << 40;
    for (i, &(a, b)) in cases.iter().enumerate() {
        let t = a as f64 / b as f64;
        let xs = sample(200 + i as u64, SAMPLES, |rng| rounded_polynomial(rng, a, b, cap) as i64);
        let g = chi2_gof(&xs, |k| rounded_poly_pmf(t, k), 0, 20.0);
        eprintln!("rounded polynomial t = {t}: χ² = {:.1}, df = {}, p = {:.3e}", g.stat, g.df, g.p_value);
        assert!(!g.rejects(ALPHA / cases.len() as f64), "rounded polynomial t = {t}: {g:?}");
    }
    // the cap is one outcome: every magnitude at or beyond it reports the cap
    let (a, b, cap) = (50u128, 1u128, 7u128);
    let xs = sample(250, SAMPLES, |rng| rounded_polynomial(rng, a, b, cap) as i64);
    assert!(xs.iter().all(|x| x.unsigned_abs() as u128 <= cap));
    let at_cap = xs.iter().filter(|x| x.unsigned_abs() as u128 == cap).count() as f64 / SAMPLES as f64;
    let want = (2.0 * 50.0 / (2.0 * 50.0 + 2.0 * 7.0 - 1.0_f64)).powi(3);
    assert!((at_cap - want).abs() < 6.0 * (want * (1.0 - want) / SAMPLES as f64).sqrt(), "P(|K| = cap) = {at_cap}, want {want}");
}

/// The continuous noise CDFs, for KS tests at scales where the grid is negligible.
fn laplace_cdf(z: f64) -> f64 {
    if z < 0.0 { 0.5 * z.exp() } else { 1.0 - 0.5 * (-z).exp() }
}
fn poly_cdf(z: f64) -> f64 {
    let tail = 0.5 * (1.0 + z.abs()).powi(-3);
    if z < 0.0 { tail } else { 1.0 - tail }
}

#[test]
fn released_noise_passes_ks_against_the_continuous_distribution() {
    // 2001 rows spaced 100 apart in [−1e6, 1e6]: the median is 0, the scale (about 1e3) spans
    // billions of grid steps and is far from the bounds, so the released value divided by the scale
    // is the continuous noise to within 1e-6.
    let data: Vec<f64> = (0..2001).map(|i| (i as f64 - 1000.0) * 1e2).collect();
    for (seed, delta, cdf) in [(300u64, 1e-6, laplace_cdf as fn(f64) -> f64), (301, 0.0, poly_cdf)] {
        let spec = QuantileSpec::smooth(0.5, -1e6, 1e6, 1.0, delta).unwrap();
        let mut idx = data.clone();
        let _ = spec.release(&mut seeded_rng(0), &mut idx); // idx: sorted grid indices
        let (a, b) = spec.scale_steps(&idx);
        let scale = a as f64 / b as f64 * spec.grid.step();
        assert!(scale > 1e8 * spec.grid.step() && scale < 1e4, "scale {scale}");
        let zs = sample(seed, 50_000, |rng| {
            let mut v = data.clone();
            spec.release(rng, &mut v) / scale
        });
        let d = ks_stat(zs, cdf);
        let crit = ks_critical(50_000, ALPHA);
        eprintln!("{:?}: scale {scale:.1}, KS D = {d:.5} (critical {crit:.5})", spec.method);
        assert!(d < crit, "{:?}: KS D = {d} ≥ {crit}", spec.method);
    }
}

#[test]
fn exponential_mechanism_matches_its_distribution() {
    // 5 data in [0, 1]: the gap between the order statistics each y falls in has probability
    // ∝ (points in the gap)·exp(−ε|i − p·n|/(2·max(p, 1 − p))); χ² over the gaps.
    let data = [0.1, 0.2, 0.35, 0.7, 0.9];
    for (k, &(p, eps)) in [(0.5, 1.0), (0.25, 2.0), (0.9, 0.5)].iter().enumerate() {
        let spec = QuantileSpec::exponential(p, 0.0, 1.0, eps).unwrap();
        let n = data.len();
        let step = spec.grid.step();
        let q: Vec<f64> = data.iter().map(|x| (x / step).round()).collect();
        let n_steps = spec.steps() as f64;
        let du = f64::max(p, 1.0 - p);
        let weights: Vec<f64> = (0..=n)
            .map(|i| {
                let start = if i == 0 { 0.0 } else { q[i - 1] + 1.0 };
                let end = if i == n { n_steps } else { q[i] };
                (end - start + 1.0).max(0.0) * (-eps / (2.0 * du) * (i as f64 - p * n as f64).abs()).exp()
            })
            .collect();
        let total: f64 = weights.iter().sum();
        let gap_of = |y: f64| -> i64 { data.iter().filter(|&&x| x < y).count() as i64 };
        let xs = sample(400 + k as u64, SAMPLES, |rng| gap_of(spec.release(rng, &mut data.to_vec())));
        let mode = (0..=n).max_by(|&a, &b| weights[a].total_cmp(&weights[b])).unwrap() as i64;
        let g = chi2_gof(&xs, |i| if (0..=n as i64).contains(&i) { weights[i as usize] / total } else { 0.0 }, mode, 20.0);
        eprintln!("EM p = {p}, ε = {eps}: χ² = {:.1}, df = {}, p-value = {:.3e}", g.stat, g.df, g.p_value);
        assert!(!g.rejects(ALPHA / 3.0), "EM p = {p}, ε = {eps}: {g:?}");
    }
    // tied data leave an empty gap, which is never drawn: 2 data below y is impossible here
    let tied = [0.1, 0.2, 0.2, 0.7];
    let spec = QuantileSpec::exponential(0.5, 0.0, 1.0, 0.1).unwrap();
    let mut rng = seeded_rng(450);
    for _ in 0..20_000 {
        let y = spec.release(&mut rng, &mut tied.to_vec());
        assert_ne!(tied.iter().filter(|&&x| x < y).count(), 2, "y = {y}");
    }
}

/// Worst case for the median: removing the middle row moves the median from 0.5 to 1.
fn worst_pair() -> (Vec<f64>, Vec<f64>) {
    let mut a = vec![0.0; 4];
    a.extend([1.0; 4]);
    let mut b = a.clone();
    b.insert(4, 0.5);
    (a, b)
}

fn bucketed(spec: &QuantileSpec, data: &[f64], seed: u64) -> Vec<i64> {
    sample(seed, SAMPLES, |rng| (spec.release(rng, &mut data.to_vec()) * 20.0).floor() as i64)
}

fn check_pair(what: &str, spec: &QuantileSpec, eps_bound: f64, seed: u64) -> RatioReport {
    let (a, b) = worst_pair();
    assert_ne!(quantile(&a, 0.5, 0.0, 1.0), quantile(&b, 0.5, 0.0, 1.0));
    let r = privacy_check(&bucketed(spec, &a, seed), &bucketed(spec, &b, seed + 1), eps_bound, 1000, ALPHA / 6.0);
    eprintln!("{what}: {} buckets, max |ln ratio| = {:.4}, bound {eps_bound:.4}, excess {:.4}", r.bins, r.max_abs_log_ratio, r.max_excess);
    r
}

#[test]
fn smooth_and_exponential_releases_are_private_empirically() {
    // (ε, δ) with δ = 1e-9: on buckets of mass ≥ 0.5%, the ratio may exceed e^ε by at most δ/0.005.
    let eps = 1.0;
    let cases = [
        ("smooth Laplace", QuantileSpec::smooth(0.5, 0.0, 1.0, eps, 1e-9).unwrap(), eps + 1e-6),
        ("smooth polynomial", QuantileSpec::smooth(0.5, 0.0, 1.0, eps, 0.0).unwrap(), eps),
        ("exponential", QuantileSpec::exponential(0.5, 0.0, 1.0, eps).unwrap(), eps),
    ];
    for (i, (what, spec, bound)) in cases.iter().enumerate() {
        let r = check_pair(what, spec, *bound, 500 + 2 * i as u64);
        assert!(r.bins >= 5, "{what}: only {} buckets", r.bins);
        assert!(!r.violates(), "{what}: ln ratio exceeds ε in bucket {} ({r:?})", r.worst_bin);
    }
}

#[test]
fn the_privacy_check_catches_too_little_noise() {
    // negative controls: an eighth of the noise, for each noise family
    let good = QuantileSpec::smooth(0.5, 0.0, 1.0, 1.0, 0.0).unwrap();
    let quiet = QuantileSpec { factor: good.factor / 8.0, ..good };
    let r = check_pair("polynomial, noise / 8", &quiet, 1.0, 600);
    assert!(r.violates(), "an eighth of the noise went unnoticed: {r:?}");
    let lap = QuantileSpec::smooth(0.5, 0.0, 1.0, 1.0, 1e-9).unwrap();
    let quiet = QuantileSpec { factor: lap.factor / 8.0, ..lap };
    let r = check_pair("Laplace, noise / 8", &quiet, 1.0 + 1e-6, 602);
    assert!(r.violates(), "an eighth of the Laplace noise went unnoticed: {r:?}");
}

#[test]
fn scale_is_factor_times_smooth_sensitivity_with_margins_and_floor() {
    let spec = QuantileSpec::smooth(0.3, -5.0, 5.0, 0.7, 1e-6).unwrap();
    assert_eq!(spec.method, Method::SmoothLaplace);
    let eps = f64::from_bits(0.7f64.to_bits() - 1);
    let (beta, factor) = laplace_calibration(eps, f64::from_bits(1e-6f64.to_bits() - 1));
    assert_eq!((spec.beta, spec.factor), (beta, factor));
    assert!(factor >= 2.0 / eps && factor <= 2.0 / eps * (1.0 + 1e-15));
    let mut v: Vec<f64> = (0..1000).map(|i| ((i * 7919) % 1000) as f64 / 100.0 - 5.0).collect();
    let _ = spec.release(&mut seeded_rng(1), &mut v);
    let (a, b) = spec.scale_steps(&v);
    let t = a as f64 / b as f64;
    // the search runs at β − margin and inflates by e^(2η)·(1 + 2^-50): within 1e-10 of factor·S
    let s = smooth_sensitivity(&v, 0.3, 0.0, spec.steps() as f64, beta - pg_dp_core::mechanisms::quantile::beta_margin(beta));
    let want = spec.factor * s;
    assert!(t >= want && t <= want * (1.0 + 1e-10), "scale {t} vs factor·S = {want}");
    // all rows equal: S is astronomically small and the scale sits at its floor
    let mut same = vec![1.0; 100_000];
    let _ = spec.release(&mut seeded_rng(1), &mut same);
    let (a, b) = spec.scale_steps(&same);
    assert_eq!(a as f64 / b as f64, MIN_SCALE_STEPS);
    // pruning with a floor returns max(S, floor) exactly as the unpruned search
    for floor in [-5.0, 0.0, 3.0, 30.0] {
        let full = smooth_sensitivity_ln(&v, 0.3, 0.0, spec.steps() as f64, beta, f64::NEG_INFINITY);
        let pruned = smooth_sensitivity_ln(&v, 0.3, 0.0, spec.steps() as f64, beta, floor);
        assert_eq!(pruned, full.max(floor));
    }
}

#[test]
fn releases_stay_in_bounds_and_converge_at_large_epsilon() {
    let data: Vec<f64> = (0..2001).map(|i| i as f64 / 2000.0 * 90.0 + 5.0).collect(); // 5..95
    let truth = quantile(&data, 0.25, 0.0, 100.0);
    let mut rng = seeded_rng(7);
    for spec in [
        QuantileSpec::smooth(0.25, 0.0, 100.0, 1000.0, 1e-6).unwrap(),
        QuantileSpec::smooth(0.25, 0.0, 100.0, 1000.0, 0.0).unwrap(),
        QuantileSpec::exponential(0.25, 0.0, 100.0, 1000.0).unwrap(),
    ] {
        for _ in 0..200 {
            let y = spec.release(&mut rng, &mut data.clone());
            assert!((y - truth).abs() < 0.1, "{:?}: {y} far from {truth}", spec.method);
        }
    }
    // tiny ε: noise everywhere, but never outside the bounds; empty input releases too
    for spec in [
        QuantileSpec::smooth(0.5, -1.0, 3.0, 1e-3, 1e-6).unwrap(),
        QuantileSpec::smooth(0.5, -1.0, 3.0, 1e-3, 0.0).unwrap(),
        QuantileSpec::exponential(0.5, -1.0, 3.0, 1e-3).unwrap(),
    ] {
        for n in [0usize, 1, 50] {
            for _ in 0..200 {
                let mut v = vec![f64::INFINITY; n];
                let y = spec.release(&mut rng, &mut v);
                assert!((-1.0..=3.0).contains(&y), "{y}");
            }
        }
    }
    // lower = upper: the only possible answer
    let spec = QuantileSpec::smooth(0.5, 2.0, 2.0, 1.0, 0.0).unwrap();
    assert_eq!(spec.release(&mut rng, &mut vec![1.0, 5.0]), 2.0);
}

#[test]
fn parameter_errors_name_the_argument() {
    let arg = |e: DpError| match e {
        DpError::InvalidParameter { arg, .. } => arg,
        other => panic!("{other:?}"),
    };
    assert_eq!(arg(QuantileSpec::smooth(1.5, 0.0, 1.0, 1.0, 0.0).unwrap_err()), "p");
    assert_eq!(arg(QuantileSpec::smooth(-0.1, 0.0, 1.0, 1.0, 0.0).unwrap_err()), "p");
    assert_eq!(arg(QuantileSpec::smooth(f64::NAN, 0.0, 1.0, 1.0, 0.0).unwrap_err()), "p");
    assert_eq!(arg(QuantileSpec::smooth(0.5, 2.0, 1.0, 1.0, 0.0).unwrap_err()), "lower");
    assert_eq!(arg(QuantileSpec::smooth(0.5, 0.0, f64::INFINITY, 1.0, 0.0).unwrap_err()), "upper");
    assert_eq!(arg(QuantileSpec::smooth(0.5, 0.0, 1.0, 0.0, 0.0).unwrap_err()), "epsilon");
    assert_eq!(arg(QuantileSpec::smooth(0.5, 0.0, 1.0, f64::INFINITY, 0.0).unwrap_err()), "epsilon");
    assert_eq!(arg(QuantileSpec::smooth(0.5, 0.0, 1.0, 1.0, 1.0).unwrap_err()), "delta");
    assert_eq!(arg(QuantileSpec::smooth(0.5, 0.0, 1.0, 1.0, -1e-9).unwrap_err()), "delta");
    assert_eq!(arg(QuantileSpec::smooth(0.5, 0.0, 1.0, 1.0, f64::NAN).unwrap_err()), "delta");
    assert_eq!(arg(QuantileSpec::exponential(2.0, 0.0, 1.0, 1.0).unwrap_err()), "p");
    // the raw parameters build the same mechanism
    let p = QuantileParams::smooth(0.1, -2.0, 3.0, 0.25, 1e-7);
    assert_eq!(p.spec().unwrap(), QuantileSpec::smooth(0.1, -2.0, 3.0, 0.25, 1e-7).unwrap());
    assert_eq!(QuantileParams::exponential(0.1, -2.0, 3.0, 0.25).spec().unwrap().method, Method::Exponential);
}

/// ln of the continuous noise densities, written out here independently of the core.
fn ln_laplace(z: f64) -> f64 {
    -(2.0f64).ln() - z.abs()
}
fn ln_poly(z: f64) -> f64 {
    (1.5f64).ln() - 4.0 * (1.0 + z.abs()).ln()
}

/// The neighbour configurations of the derivation, in units where x's smooth bound is S(x) = 1 and its
/// noise scale s = factor: the neighbour's bound is S(x') = e^λ (|λ| ≤ β) and its output is shifted by
/// Δ with |Δ| ≤ min(S(x), S(x')) = min(1, e^λ) (`slide` = e^λ instead is the looser max(…) of the
/// old derivation, for the negative control). Returns (λ, Δ) over a grid that includes the extremes.
fn configurations(beta: f64, loose_slide: bool) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for li in 0..=8 {
        let lambda = beta * (li as f64 / 4.0 - 1.0);
        let bound = if loose_slide { lambda.exp() } else { lambda.exp().min(1.0) };
        for di in 0..=8 {
            out.push((lambda, bound * (di as f64 / 4.0 - 1.0)));
        }
    }
    out
}

/// The largest |ln of the density ratio| of f + s·Z and f' + s'·Z over outputs y with
/// |y − f| ≤ zmax·s (log-spaced out to zmax, plus a fine grid near the centres).
fn worst_log_ratio(ln_h: fn(f64) -> f64, factor: f64, beta: f64, zmax: f64, loose_slide: bool) -> f64 {
    let mut ys: Vec<f64> = (0..=4000).map(|i| i as f64 / 1000.0 - 2.0).collect();
    for i in 0..=2000 {
        let y = (zmax.ln() * i as f64 / 2000.0).exp();
        ys.extend([y, -y]);
    }
    let mut worst: f64 = 0.0;
    for (lambda, shift) in configurations(beta, loose_slide) {
        let (s, s2) = (factor, factor * lambda.exp());
        for &y in &ys {
            let y = y * s;
            let a = ln_h(y / s) - s.ln();
            let b = ln_h((y - shift) / s2) - s2.ln();
            worst = worst.max((a - b).abs());
        }
    }
    worst
}

#[test]
fn polynomial_calibration_meets_its_exact_loss() {
    // The pointwise loss of the calibrated polynomial mechanism, found numerically over the
    // neighbour configurations, is at most ε, and reaches it (the calibration spends all of ε); the
    // closed form max(3β, 4 ln(1 + a), β + 4 ln(1 + a e^−β)) agrees with the numeric search.
    for &eps in &[0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 20.0, 100.0] {
        let spec = QuantileSpec::smooth(0.5, 0.0, 1.0, eps, 0.0).unwrap();
        let e = mechanism_epsilon(eps);
        assert_eq!((spec.beta, spec.factor), polynomial_calibration(e));
        assert!(3.0 * spec.beta <= e, "ε = {eps}: 3β = {} > ε", 3.0 * spec.beta);
        let a = 1.0 / spec.factor;
        let closed = polynomial_loss(a, spec.beta);
        assert!(closed <= e && closed >= e * (1.0 - 1e-9), "ε = {eps}: closed-form loss {closed}");
        let w = worst_log_ratio(ln_poly, spec.factor, spec.beta, 1e9, false);
        assert!(w <= e * (1.0 + 1e-9), "ε = {eps}: numeric loss {w}");
        assert!(w >= closed * 0.999, "ε = {eps}: numeric loss {w} below the closed form {closed}");
        // negative controls: 3% less noise, or the looser slide bound Δ ≤ S(x'), exceed ε
        let w = worst_log_ratio(ln_poly, spec.factor / 1.03, spec.beta, 1e9, false);
        assert!(w > e, "ε = {eps}: 3% less noise went unnoticed ({w})");
        let w = worst_log_ratio(ln_poly, spec.factor, spec.beta, 1e9, true);
        assert!(w > e, "ε = {eps}: the slide Δ ≤ S(x') stays within ε ({w})");
    }
    // at ε = 1: β = 1/3 and a = e^(1/3)(e^(1/6) − 1) ≈ 0.2531, against β = 1/6 and a = 1/8 before
    let (beta, factor) = polynomial_calibration(1.0);
    assert!((beta - 1.0 / 3.0).abs() < 1e-12 && (1.0 / factor - 0.25311).abs() < 1e-4, "{beta} {}", 1.0 / factor);
    // the calibration stays finite and within ε at every accepted ε, up to 1e6
    for i in 0..=300 {
        let eps = 1e-9 * 10f64.powf(i as f64 * 15.0 / 300.0);
        let (beta, factor) = polynomial_calibration(eps);
        assert!(beta > 0.0 && factor.is_finite() && factor >= 0.0);
        if factor > 0.0 {
            assert!(polynomial_loss(1.0 / factor, beta) <= eps, "ε = {eps}");
        }
    }
}

/// ∫(p − e^ε q)₊ for p = Laplace(0, 1) and q = Laplace(Δ, e^λ), by the trapezoid rule on [−70, 70].
fn hockey_stick(eps: f64, lambda: f64, shift: f64) -> f64 {
    let (h, sigma) = (1.0 / 1024.0, lambda.exp());
    let f = |y: f64| (0.5 * (-y.abs()).exp() - eps.exp() * 0.5 / sigma * (-(y - shift).abs() / sigma).exp()).max(0.0);
    let steps = (140.0 / h) as i64;
    (0..=steps).map(|i| f(-70.0 + i as f64 * h) * if i == 0 || i == steps { 0.5 } else { 1.0 }).sum::<f64>() * h
}

#[test]
fn laplace_calibration_meets_its_exact_delta() {
    // The (ε, δ) calibration: over the neighbour configurations the largest hockey-stick divergence,
    // integrated numerically, is at most δ and reaches it up to the integration error (unless the
    // dilation condition β + a·e^−β ≤ ε is what limits β); the closed form agrees; neighbours with a
    // larger bound (λ ≥ 0) lose at most ε pointwise. Negative control: β 25% larger exceeds δ.
    for &(eps, delta) in &[(0.1, 1e-6), (0.5, 1e-9), (1.0, 1e-6), (1.0, 1e-3), (2.0, 0.05), (5.0, 1e-6), (1.0, 0.5)] {
        let spec = QuantileSpec::smooth(0.5, 0.0, 1.0, eps, delta).unwrap();
        let (e, d) = (mechanism_epsilon(eps), mechanism_epsilon(delta));
        let a = 1.0 / spec.factor;
        let worst = |beta: f64| configurations(beta, false).iter().map(|&(l, s)| hockey_stick(e, l, s * a)).fold(0.0, f64::max);
        let got = worst(spec.beta);
        let closed = laplace_ln_delta(e, a, spec.beta).exp();
        let capped = spec.beta + a * (-spec.beta).exp() >= e * (1.0 - 1e-9);
        eprintln!("ε = {eps}, δ = {delta}: β = {:.5}, numeric δ = {got:.4e}, closed form {closed:.4e}{}", spec.beta,
                  if capped { " (β limited by the dilation)" } else { "" });
        assert!(got <= d * (1.0 + 1e-3), "ε = {eps}, δ = {delta}: numeric δ {got}");
        assert!((got - closed).abs() <= 1e-3 * closed + 1e-15, "ε = {eps}, δ = {delta}: numeric {got} vs closed {closed}");
        if !capped {
            assert!(got >= 0.99 * d, "ε = {eps}, δ = {delta}: only {got} of δ spent");
            assert!(worst(spec.beta * 1.25) > d * 1.01, "ε = {eps}, δ = {delta}: β·1.25 still within δ");
        }
        // λ ≥ 0 (x' has the larger bound): pointwise within ε everywhere
        let w = configurations(spec.beta, false)
            .iter()
            .filter(|(l, _)| *l >= 0.0)
            .map(|&(l, s)| {
                (-40_000..=40_000)
                    .map(|i| {
                        let y = i as f64 / 1000.0 * spec.factor;
                        let (s1, s2) = (spec.factor, spec.factor * l.exp());
                        (ln_laplace(y / s1) - s1.ln()) - (ln_laplace((y - s) / s2) - s2.ln())
                    })
                    .fold(f64::NEG_INFINITY, f64::max)
            })
            .fold(f64::NEG_INFINITY, f64::max);
        assert!(w <= e * (1.0 + 1e-9), "ε = {eps}, δ = {delta}: pointwise loss {w} for λ ≥ 0");
    }
    // the exact δ of the previous calibration β = ln(1 + ε/(2 ln(2/δ))) at ε = 1, δ = 1e-6: 3e-9
    let old = (1.0f64 / (2.0 * (2e6f64).ln())).ln_1p();
    let spent = laplace_ln_delta(1.0, 0.5, old).exp();
    assert!(spent < 0.01 * 1e-6, "{spent}");
    let (beta, _) = laplace_calibration(1.0, 1e-6);
    assert!(beta > 1.5 * old, "β = {beta} against {old} before");
}

/// The noise of x's release and of its worst neighbour, in grid steps, drawn by the release's own
/// samplers at a scale t = 2^16 steps (where rounding is negligible): x's scale is t, the
/// neighbour's t·e^λ and its centre Δ·t.
fn noise_pair(rng: &mut DpRng, poly: bool, lambda: f64, shift: f64) -> (i64, i64) {
    let t = 65536.0;
    let draw = |rng: &mut DpRng, scale: f64| {
        let (m, k) = dyadic(scale);
        let (a, b) = (m as u128, 1u128 << k.max(0));
        let (a, b) = if k < 0 { (a << -k, 1) } else { (a, b) };
        if poly {
            rounded_polynomial(rng, a, b, 1 << 60) as i64
        } else {
            rounded_laplace(rng, a, b) as i64
        }
    };
    (draw(rng, t), (shift * t).round() as i64 + draw(rng, t * lambda.exp()))
}

#[test]
fn polynomial_noise_is_private_under_the_worst_shift_and_dilation() {
    // x's noise against its worst neighbour's (scale e^β larger, centre shifted by a scales): the
    // binned outputs' log ratios stay within ε at α = 1e-6; with the shift of 2a (a slide bound
    // twice too loose) the check reports a violation.
    let run = |seed: u64, shift_mult: f64| {
        let spec = QuantileSpec::smooth(0.5, 0.0, 1.0, 1.0, 0.0).unwrap();
        let a = 1.0 / spec.factor;
        let mut rng = seeded_rng(seed);
        let (mut xs, mut ys) = (Vec::new(), Vec::new());
        for _ in 0..SAMPLES {
            // outputs in buckets of an eighth of x's scale
            let (u, v) = noise_pair(&mut rng, true, spec.beta, shift_mult * a);
            xs.push(u.div_euclid(65536 / 8));
            ys.push(v.div_euclid(65536 / 8));
        }
        let r = privacy_check(&xs, &ys, mechanism_epsilon(1.0), 1000, ALPHA / 2.0);
        eprintln!("polynomial, shift {shift_mult}·a, dilation e^β: {} bins, max |ln ratio| {:.4}, excess {:.4}", r.bins, r.max_abs_log_ratio, r.max_excess);
        r
    };
    let r = run(700, 1.0);
    assert!(!r.violates() && r.max_abs_log_ratio > 0.8, "{r:?}");
    assert!(run(701, 2.0).violates(), "a slide of 2a went unnoticed");
}

#[test]
fn laplace_noise_spends_its_delta_under_the_worst_shift_and_dilation() {
    // Monte Carlo of δ = E_P[(1 − e^ε q/p)₊] under the worst neighbour (scale e^−β smaller, centre
    // a·e^−β away), with x's noise drawn by the release's sampler: within a 1e-6 confidence interval
    // of the calibrated δ = 0.05 (ε = 1), and well above it for β 1.5 times larger.
    let run = |seed: u64, beta_mult: f64| {
        let spec = QuantileSpec::smooth(0.5, 0.0, 1.0, 1.0, 0.05).unwrap();
        let (e, a, beta) = (mechanism_epsilon(1.0), 1.0 / spec.factor, spec.beta * beta_mult);
        let (sigma, shift) = ((-beta).exp(), a * (-beta).exp());
        let mut rng = seeded_rng(seed);
        let vals: Vec<f64> = (0..SAMPLES)
            .map(|_| {
                let y = noise_pair(&mut rng, false, 0.0, 0.0).0 as f64 / 65536.0;
                let ln_ratio = ln_laplace(y) - (ln_laplace((y - shift) / sigma) - sigma.ln());
                (1.0 - (e - ln_ratio).exp()).max(0.0)
            })
            .collect();
        let mean = vals.iter().sum::<f64>() / vals.len() as f64;
        let sd = (vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (vals.len() - 1) as f64).sqrt();
        let half = z_two_sided(ALPHA) * sd / (vals.len() as f64).sqrt();
        eprintln!("Laplace, β × {beta_mult}: δ estimate {mean:.5} ± {half:.5} (calibrated 0.05)");
        (mean, half)
    };
    let (m, h) = run(710, 1.0);
    assert!((m - 0.05).abs() <= h, "δ estimate {m} ± {h}");
    let (m, h) = run(711, 1.5);
    assert!(m - h > 0.05, "β × 1.5 went unnoticed: {m} ± {h}");
}

#[test]
fn exponential_mechanism_releases_the_minimum_and_maximum_at_p_0_and_1() {
    // Regression: with many rows at a bound (clamped data), p = 0 must release the lower bound and
    // p = 1 the upper one. A relative weight floor of 2^-40 gave the other ~2^40 grid points together
    // as much weight as the one best point, so about half the releases were a near-uniform value.
    let mut low = vec![0.0; 30];
    low.extend((0..30).map(|i| 0.2 + i as f64 / 40.0));
    let high: Vec<f64> = low.iter().map(|x| 1.0 - x).collect();
    let mut rng = seeded_rng(720);
    for (p, data, want) in [(0.0, &low, 0.0), (1.0, &high, 1.0)] {
        let spec = QuantileSpec::exponential(p, 0.0, 1.0, 5.0).unwrap();
        let off = (0..20_000).filter(|_| spec.release(&mut rng, &mut data.clone()) != want).count();
        // the exact probability of any other point is below 1e-6
        assert!(off <= 2, "p = {p}: {off} of 20,000 releases were not {want}");
    }
    // With 12 rows at the lower bound and 8 above 0.5, the mass beyond the bound is small but
    // visible: the released category matches the exact (floor-free) probabilities at p = 0, ε = 5.
    let mut data = vec![0.0; 12];
    data.extend((0..8).map(|i| 0.5 + i as f64 * 0.05));
    let spec = QuantileSpec::exponential(0.0, 0.0, 1.0, 5.0).unwrap();
    let step = spec.grid.step();
    let q = 5.0; // ε over the utility sensitivity 1: the minimum's distance #{x < y} is monotone
    // categories: y = 0 (distance 0), (0, 0.5) with 12 rows below, then the later gaps and points
    let idx: Vec<f64> = data.iter().map(|x| (x / step).round()).collect();
    let mut probs: Vec<(f64, f64, f64)> = vec![(0.0, 0.0, 1.0)]; // (from, to, weight), y in [from, to]
    for i in 12..20 {
        let (lo, hi) = (idx[i - 1] + 1.0, idx[i] - 1.0);
        probs.push((lo, hi, (hi - lo + 1.0) * (-q * i as f64).exp()));
        probs.push((idx[i], idx[i], (-q * i as f64).exp()));
    }
    probs.push((idx[19] + 1.0, spec.steps() as f64, (spec.steps() as f64 - idx[19]) * (-q * 20.0).exp()));
    let total: f64 = probs.iter().map(|p| p.2).sum();
    let category = |y: f64| probs.iter().position(|&(lo, hi, _)| y / step >= lo && y / step <= hi).unwrap() as i64;
    let xs = sample(721, SAMPLES, |rng| category(spec.release(rng, &mut data.clone())));
    let g = chi2_gof(&xs, |i| if (0..probs.len() as i64).contains(&i) { probs[i as usize].2 / total } else { 0.0 }, 0, 20.0);
    eprintln!("EM at p = 0 over a pile at the bound: P(lower) = {:.4}, χ² = {:.1}, df = {}, p-value = {:.3e}", 1.0 / total, g.stat, g.df, g.p_value);
    assert!(!g.rejects(ALPHA), "{g:?}");
}

#[test]
fn exponential_mechanism_categories_tile_the_grid_with_each_points_distance() {
    // the categories cover every grid point once, in order, and each point's distance is
    // |(1 − p̃)·#{x < y} − p̃·#{x > y}| (in units of 2^-60), counted here point by point; the best
    // point lies in the category holding the target rank, at most max(p̃, 1 − p̃) times its ties away
    let mut rng = seeded_rng(740);
    for case in 0..3_000 {
        let n_steps = [0i64, 1, 5, 100][case % 4];
        let n = rng.random_range(0..12);
        let mut idx: Vec<f64> = (0..n).map(|_| rng.random_range(0..=n_steps) as f64).collect();
        idx.sort_by(f64::total_cmp);
        let p = [0.0, 0.3, 0.5, 1.0, rng.random::<f64>()][case % 5];
        let p_num = (p * (1u128 << 60) as f64).round() as u128;
        let scale = 1i128 << 60;
        let (mut next, mut best) = (0i64, u128::MAX);
        em_categories(&idx, n_steps, p_num, |start, count, d| {
            assert_eq!(start, next, "{idx:?}");
            assert!(count >= 1);
            for y in start..start + count {
                let below = idx.iter().filter(|&&x| (x as i64) < y).count() as i128;
                let above = idx.iter().filter(|&&x| (x as i64) > y).count() as i128;
                let want = ((scale - p_num as i128) * below - p_num as i128 * above).unsigned_abs();
                assert_eq!(d, want, "{idx:?}, p = {p}, y = {y}");
            }
            next = start + count;
            best = best.min(d);
            true
        });
        assert_eq!(next, n_steps + 1, "{idx:?}");
        // the target rank p̃n lies in some point's [L, L + E]: that point is at most
        // max(p̃, 1 − p̃)·E away, and E = 0 between distinct values
        let pn = p_num * n as u128;
        let bound = (0..=n_steps)
            .filter_map(|y| {
                let below = idx.iter().filter(|&&x| (x as i64) < y).count() as u128;
                let at = idx.iter().filter(|&&x| x as i64 == y).count() as u128;
                (below << 60 <= pn && pn <= (below + at) << 60).then(|| p_num.max((1u128 << 60) - p_num) * at)
            })
            .min()
            .expect("the points' rank intervals tile [0, n]");
        assert!(best <= bound, "{idx:?}, p = {p}: best {best} > {bound}");
    }
}

/// Integer data with heavy ties (ages): the target rank inside one value's rows is released at
/// that value far more often than under the former utility, the distance of the target rank from
/// the value's rank interval, which gave a neighbouring value whose interval ends near the target
/// almost the same weight.
#[test]
fn exponential_mechanism_prefers_the_value_whose_ties_hold_the_target() {
    // 0..=10 with 100 rows each and 50 more at 0: the median's rank 575 lies in 5's ranks [550, 650],
    // a quarter of its rows from the lower end; ε = 0.02 (q = 0.02). Bounds [0, 4096]: 4,097 integer
    // candidates, the exponential mechanism (the 4,086 empty ones above 10 are at distance 575);
    // bounds [0, 10]: 11 candidates, permute-and-flip, with the same utility
    let mut data = Vec::new();
    for v in 0..=10 {
        data.extend(std::iter::repeat_n(v as f64, if v == 0 { 150 } else { 100 }));
    }
    let target = data.len() as f64 / 2.0;
    assert_eq!(target, 575.0);
    let n = SAMPLES / 4;
    // exact: weights e^(−q·|L + E/2 − 575|): 5 at 25, 4 at 75, 6 at 125, 3 at 175, 7 at 225, …
    let q = 0.02 * (1.0 - 2f64.powi(-40));
    let d = |v: i64| -> f64 {
        let below: f64 = data.iter().filter(|&&x| (x as i64) < v).count() as f64;
        let at: f64 = data.iter().filter(|&&x| x as i64 == v).count() as f64;
        (below + at / 2.0 - target).abs()
    };
    let w: Vec<f64> = (0..=10).map(|v| (-q * d(v)).exp()).collect();
    let em_want = w[5] / (w.iter().sum::<f64>() + 4086.0 * (-q * 575.0).exp());
    // permute-and-flip: P(5) = E[1/(1 + #others accepted)], 5 the best (coin 1), the others' coins
    // e^(−q·(d − 25)), Poisson-binomial
    let mut others = vec![1.0];
    for v in (0..=10).filter(|&v| v != 5) {
        let a = (-q * (d(v) - d(5))).exp();
        let mut next = vec![0.0; others.len() + 1];
        for (k, &pk) in others.iter().enumerate() {
            next[k] += pk * (1.0 - a);
            next[k + 1] += pk * a;
        }
        others = next;
    }
    let pf_want: f64 = others.iter().enumerate().map(|(k, pk)| pk / (k as f64 + 1.0)).sum();
    let mut hits = Vec::new();
    for (k, (upper, want)) in [(4096.0, em_want), (10.0, pf_want)].into_iter().enumerate() {
        let spec = QuantileSpec::exponential_integer(0.5, 0.0, upper, 0.02).unwrap();
        assert_eq!(spec.permute_and_flip(), upper == 10.0);
        let xs = sample(760 + k as u64, n, |rng| spec.release(rng, &mut data.clone()) as i64);
        let got = xs.iter().filter(|&&x| x == 5).count() as f64 / n as f64;
        let sd = (want * (1.0 - want) / n as f64).sqrt();
        eprintln!("bounds [0, {upper}]: P(release 5) = {got:.4}, exact {want:.4}");
        assert!((got - want).abs() < 5.0 * sd, "bounds [0, {upper}]: {got} against {want}");
        hits.push((got, sd));
    }
    // the former utility (distance to the interval: 0 for 5, 25 for 4, 75 for 6, 125 for 3, …)
    // gave 5 less weight: the new one must beat it clearly
    let old: Vec<f64> = (0..=10i64)
        .map(|v| {
            let below: f64 = data.iter().filter(|&&x| (x as i64) < v).count() as f64;
            let at: f64 = data.iter().filter(|&&x| x as i64 == v).count() as f64;
            (-q * (below - target).max(target - below - at).max(0.0)).exp()
        })
        .collect();
    let old_p = old[5] / (old.iter().sum::<f64>() + 4086.0 * (-q * 575.0).exp());
    eprintln!("P(release 5) under the earlier utility: {old_p:.4}");
    let (em_hits, sd) = hits[0];
    assert!(em_hits > old_p + 10.0 * sd, "{em_hits} against the former {old_p}");
    // and permute-and-flip beats the exponential mechanism on the same 11 candidates (0.632 exactly)
    let em_11 = w[5] / w.iter().sum::<f64>();
    let (pf_hits, pf_sd) = hits[1];
    assert!(pf_hits > em_11 + 10.0 * pf_sd, "{pf_hits} against the exponential mechanism's {em_11}");
}

#[test]
fn wide_integers_of_the_exponential_mechanism() {
    // products, sums and differences against u128 where they fit, and against exact identities
    let mut rng = seeded_rng(730);
    for _ in 0..10_000 {
        let (a, b) = (rng.random::<u64>() as u128, rng.random::<u64>() as u128);
        assert_eq!(U256::mul(a, b), U256 { hi: 0, lo: a * b });
        let (x, y) = (rng.random::<u128>(), rng.random::<u128>());
        let p = U256::mul(x, y);
        // (x·y) = (x·(y − 1)) + x, and the difference back
        if y > 0 {
            let q = U256::mul(x, y - 1);
            assert_eq!(q.add(U256 { hi: 0, lo: x }), p);
            assert_eq!(p.sub(U256 { hi: 0, lo: x }), q);
        }
    }
    assert_eq!(U256::mul(u128::MAX, u128::MAX), U256 { hi: u128::MAX - 1, lo: 1 });
    // uniform below a bound above 2^128: the top bits are uniform too (χ² on 8 top-level buckets)
    let bound = U256 { hi: 8, lo: 0 };
    let xs = sample(731, SAMPLES, |rng| bound.random_below(rng).hi as i64);
    let g = chi2_gof(&xs, |i| if (0..8).contains(&i) { 0.125 } else { 0.0 }, 0, 20.0);
    assert!(!g.rejects(ALPHA), "{g:?}");
}
