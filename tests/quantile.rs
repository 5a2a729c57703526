//! dp_median / dp_percentile / dp_percentile_em in the core: the exact noise samplers against their
//! distributions (χ² and KS at α = 1e-6), the release against its stated distribution, empirical
//! privacy on a worst-case neighbouring pair (with negative controls that must fail), and the
//! parameter errors.
mod common;

use common::*;
use pg_dp_core::quantile::{rounded_laplace, rounded_polynomial, QuantileParams, QuantileSpec, Method, MIN_SCALE_STEPS};
use pg_dp_core::rng::{seeded_rng, DpRng};
use pg_dp_core::sampling::LazyUniform;
use pg_dp_core::smooth::{quantile, smooth_sensitivity, smooth_sensitivity_ln};
use pg_dp_core::DpError;

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
        assert!(scale > 1e3 * spec.grid.step() * 1e6, "scale {scale}");
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
    let beta = (eps / (2.0 * (2.0 / f64::from_bits(1e-6f64.to_bits() - 1)).ln())).ln_1p();
    assert_eq!(spec.beta, beta);
    assert_eq!(spec.factor, 2.0 / eps);
    let mut v: Vec<f64> = (0..1000).map(|i| ((i * 7919) % 1000) as f64 / 100.0 - 5.0).collect();
    let _ = spec.release(&mut seeded_rng(1), &mut v);
    let (a, b) = spec.scale_steps(&v);
    let t = a as f64 / b as f64;
    // the search runs at β − margin and inflates by e^(2η)·(1 + 2^-50): within 1e-10 of factor·S
    let s = smooth_sensitivity(&v, 0.3, 0.0, spec.steps() as f64, beta - pg_dp_core::quantile::beta_margin(beta));
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

/// The largest |ln of the density ratio| between A(x) = f + s·Z and A(x') = f' + s'·Z over a grid of
/// outputs y, for a slide of at most 1/factor·S (|f − f'| ≤ S(x')) and a dilation s'/s = e^λ,
/// |λ| ≤ β, restricted to |(y − f)/s| ≤ zmax. In units where S(x) = 1.
fn worst_log_ratio(ln_h: fn(f64) -> f64, factor: f64, beta: f64, zmax: f64) -> f64 {
    let mut worst: f64 = 0.0;
    for li in 0..=8 {
        let lambda = beta * (li as f64 / 4.0 - 1.0);
        let (s, s2) = (factor, factor * lambda.exp()); // noise scales at S = 1 and S' = e^λ
        for di in 0..=8 {
            let shift = lambda.exp() * (di as f64 / 4.0 - 1.0); // |f' − f| ≤ S(x') = e^λ
            for zi in -400..=400 {
                let y = zmax * zi as f64 / 400.0 * s; // output offset from f
                let a = ln_h(y / s) - s.ln();
                let b = ln_h((y - shift) / s2) - s2.ln();
                worst = worst.max((a - b).abs());
            }
        }
    }
    worst
}

#[test]
fn the_noise_parameters_satisfy_the_derivation_at_every_epsilon() {
    // The pointwise bounds the derivation proves, checked numerically with the spec's own β and
    // scale factor, at small and large ε (the usual β = ε/(2 ln(2/δ)) fails above ε ≈ 4) and at a
    // δ close to 1 (where β must also stay below ε/2).
    for &eps in &[0.1, 1.0, 5.0, 20.0, 100.0] {
        // δ = 0: ε-DP pointwise everywhere
        let spec = QuantileSpec::smooth(0.5, 0.0, 1.0, eps, 0.0).unwrap();
        let w = worst_log_ratio(ln_poly, spec.factor, spec.beta, 1e6);
        assert!(w <= eps * (1.0 + 1e-9), "polynomial, ε = {eps}: pointwise loss {w}");
        if eps <= 5.0 {
            assert!(w >= 0.5 * eps, "polynomial, ε = {eps}: loss {w} far below ε, too much noise?");
        }
        for &delta in &[1e-9, 1e-3, 0.9] {
            // δ > 0: ε-DP pointwise wherever |z| ≤ ln(2/δ), which has probability 1 − δ/2
            let spec = QuantileSpec::smooth(0.5, 0.0, 1.0, eps, delta).unwrap();
            let l = (2.0f64 / delta).ln();
            let w = worst_log_ratio(ln_laplace, spec.factor, spec.beta, l);
            assert!(w <= eps * (1.0 + 1e-9), "Laplace, ε = {eps}, δ = {delta}: pointwise loss {w} on |z| ≤ {l}");
        }
    }
}
