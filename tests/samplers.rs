//! Distribution tests of the exact samplers in `pg_dp_core::noise::sampling`.
//!
//! Every statistical test uses a seeded ChaCha20 generator (reproducible) and a family-wise level
//! of 1e-6, so a correct sampler fails with probability below 1e-6; the critical values are
//! computed in `common` (exact χ² tail via the incomplete gamma function, Kolmogorov asymptotics).
//! `discrete_laplace_wrong_scale_is_rejected` shows that the χ² test has the power to notice a
//! sampler whose scale is off by 10%.
mod common;

use common::*;
use pg_dp_core::noise::rng::seeded_rng;
use pg_dp_core::noise::sampling::{
    bernoulli_exp, bernoulli_frac, discrete_gaussian, discrete_laplace, dyadic, isqrt, laplace_scale, MAX_SCALE_NUMERATOR,
};

/// The helpers' distribution functions agree with closed forms, so the critical values are right.
#[test]
fn helpers_match_closed_forms() {
    // χ²₂ tail is exp(-x/2); χ²₁ tail is erfc(sqrt(x/2)); χ²₄ tail is exp(-x/2)(1 + x/2).
    for &x in &[0.01, 0.5, 1.0, 3.0, 10.0, 27.6, 40.0, 80.0] {
        let rel = |a: f64, b: f64| ((a - b) / b).abs();
        assert!(rel(chi2_sf(x, 2), (-x / 2.0).exp()) < 1e-12, "df 2 at {x}");
        assert!(rel(chi2_sf(x, 1), libm::erfc((x / 2.0).sqrt())) < 1e-10, "df 1 at {x}");
        assert!(rel(chi2_sf(x, 4), (-x / 2.0).exp() * (1.0 + x / 2.0)) < 1e-12, "df 4 at {x}");
    }
    // Large df: the χ² median is close to df(1 - 2/(9df))³, and the Wilson–Hilferty critical value
    // has a tail probability close to alpha.
    for df in [10usize, 50, 200, 1000] {
        let med = df as f64 * (1.0 - 2.0 / (9.0 * df as f64)).powi(3);
        assert!((chi2_sf(med, df) - 0.5).abs() < 0.01, "median of df {df}");
        let crit = chi2_critical_wh(df, ALPHA);
        let p = chi2_sf(crit, df);
        assert!(p > ALPHA / 3.0 && p < ALPHA * 3.0, "WH critical value df {df}: tail {p}");
    }
    // Normal quantile: P(|Z| > 4.8916) = 1e-6.
    let z = z_two_sided(1e-6);
    assert!((2.0 * normal_sf(z) - 1e-6).abs() < 1e-15);
    assert!((z - 4.8916).abs() < 1e-3);
    // KS critical value from 2·exp(-2x²) = alpha.
    let d = ks_critical(10_000, ALPHA);
    assert!((2.0 * (-2.0 * (d * 100.0).powi(2)).exp() - ALPHA).abs() < 1e-12);
}

/// Binomial z statistic of `hits` successes in `n` trials against probability p.
fn binomial_z(hits: u64, n: u64, p: f64) -> f64 {
    let n_f = n as f64;
    (hits as f64 - n_f * p) / (n_f * p * (1.0 - p)).sqrt()
}

#[test]
fn bernoulli_frac_matches_probability() {
    let mut rng = seeded_rng(1);
    let cases: &[(u128, u128)] = &[(1, 3), (2, 7), (999, 1000), (1 << 100, 3 << 99), ((1 << 120) / 3, 1 << 120)];
    let z = z_two_sided(ALPHA / cases.len() as f64);
    let n = 200_000u64;
    for &(num, den) in cases {
        let hits = (0..n).filter(|_| bernoulli_frac(&mut rng, num, den)).count() as u64;
        let p = num as f64 / den as f64;
        let zs = binomial_z(hits, n, p);
        assert!(zs.abs() < z, "Bernoulli({num}/{den}): z = {zs}");
    }
    // the degenerate cases are exact
    assert!((0..1000).all(|_| !bernoulli_frac(&mut rng, 0, 5)));
    assert!((0..1000).all(|_| bernoulli_frac(&mut rng, 5, 5)));
}

#[test]
fn bernoulli_exp_matches_exp_of_minus_rational() {
    let mut rng = seeded_rng(2);
    // n/d below and above 1, non-reduced fractions, and 120-bit numerators and denominators
    let cases: &[(u128, u128)] = &[
        (1, 3),
        (1, 1),
        (3, 2),
        (5, 2),
        (7, 3),
        (4, 1),
        (10, 20),
        ((1 << 119) + 1, 1 << 120),
        (3 << 118, 1 << 118),
    ];
    let z = z_two_sided(ALPHA / cases.len() as f64);
    let n = 400_000u64;
    for &(num, den) in cases {
        let hits = (0..n).filter(|_| bernoulli_exp(&mut rng, num, den)).count() as u64;
        let p = (-(num as f64 / den as f64)).exp();
        let zs = binomial_z(hits, n, p);
        eprintln!("bernoulli_exp({num}, {den}): {hits}/{n}, p = {p:.6}, z = {zs:.2}");
        assert!(zs.abs() < z, "Bernoulli(exp(-{num}/{den})): {hits}/{n} vs p = {p}, z = {zs}");
    }
    // exp(-0) = 1 exactly
    assert!((0..1000).all(|_| bernoulli_exp(&mut rng, 0, 7)));
}

/// P(X = x) of the discrete Laplace distribution with scale t/s.
fn dlap_pmf(scale: f64) -> impl Fn(i64) -> f64 {
    let p = (-1.0 / scale).exp();
    let c = -(-1.0 / scale).exp_m1() / (1.0 + p); // (1-p)/(1+p) without cancellation
    move |x: i64| c * p.powi(x.unsigned_abs().min(i32::MAX as u64) as i32)
}

fn dlap_samples(seed: u64, t: u128, s: u128, n: usize) -> Vec<i64> {
    let mut rng = seeded_rng(seed);
    (0..n).map(|_| discrete_laplace(&mut rng, t, s) as i64).collect()
}

#[test]
fn discrete_laplace_small_scales_chi_square() {
    // (t, s): scales 1/3, 1, 7/2, 10, 10 written as 1000/100, and 1 written with 100-bit integers
    let cases: &[(u128, u128)] = &[(1, 3), (1, 1), (7, 2), (10, 1), (1000, 100), (1 << 100, 1 << 100)];
    let alpha = ALPHA / cases.len() as f64;
    for (i, &(t, s)) in cases.iter().enumerate() {
        let xs = dlap_samples(100 + i as u64, t, s, 200_000);
        let g = chi2_gof(&xs, dlap_pmf(t as f64 / s as f64), 0, 20.0);
        eprintln!("discrete_laplace({t}, {s}): chi2 = {:.1}, df = {}, p = {:.3e}", g.stat, g.df, g.p_value);
        assert!(g.df >= 2, "too few bins for scale {t}/{s}: {g:?}");
        assert!(!g.rejects(alpha), "discrete_laplace({t}, {s}) fails χ²: {g:?}");
    }
}

/// Negative control: the same χ² test must reject samples of scale 10 tested as scale 11 (and
/// scale 1/3 tested as 0.3), so the acceptance above is not for lack of power.
#[test]
fn discrete_laplace_wrong_scale_is_rejected() {
    let xs = dlap_samples(200, 10, 1, 200_000);
    let g = chi2_gof(&xs, dlap_pmf(11.0), 0, 20.0);
    eprintln!("scale 10 tested as 11: chi2 = {:.1}, df = {}, p = {:.3e}", g.stat, g.df, g.p_value);
    assert!(g.rejects(ALPHA), "χ² failed to notice a 10% scale error: {g:?}");
    let xs = dlap_samples(201, 1, 3, 200_000);
    let g = chi2_gof(&xs, dlap_pmf(0.3), 0, 20.0);
    eprintln!("scale 1/3 tested as 0.3: chi2 = {:.1}, df = {}, p = {:.3e}", g.stat, g.df, g.p_value);
    assert!(g.rejects(ALPHA), "χ² failed to notice scale 0.3 vs 1/3: {g:?}");
}

/// CDF of the standard Laplace distribution (scale 1).
fn laplace_cdf(y: f64) -> f64 {
    if y < 0.0 {
        0.5 * y.exp()
    } else {
        1.0 - 0.5 * (-y).exp()
    }
}

#[test]
fn discrete_laplace_huge_scale_ks_against_laplace() {
    // At scales of 2^30 and more the lattice is invisible: x/(t/s) must follow Laplace(0, 1).
    // Includes the largest accepted numerator (2^121) to exercise the overflow guards.
    let cases: &[(u128, u128)] = &[(1 << 30, 1), ((1 << 90) + 12345, 7), (MAX_SCALE_NUMERATOR, 3)];
    let alpha = ALPHA / cases.len() as f64;
    let n = 100_000;
    for (i, &(t, s)) in cases.iter().enumerate() {
        let mut rng = seeded_rng(300 + i as u64);
        let scale = t as f64 / s as f64;
        let ys: Vec<f64> = (0..n).map(|_| discrete_laplace(&mut rng, t, s) as f64 / scale).collect();
        let d = ks_stat(ys, laplace_cdf);
        let crit = ks_critical(n, alpha);
        eprintln!("discrete_laplace({t}, {s}): KS D = {d:.5} (critical {crit:.5})");
        assert!(d < crit, "discrete_laplace({t}, {s}): KS D = {d} >= {crit}");
    }
}

#[test]
fn discrete_gaussian_chi_square() {
    let cases = [1u128, 10, 1000];
    let alpha = ALPHA / cases.len() as f64;
    for (i, &s2) in cases.iter().enumerate() {
        let mut rng = seeded_rng(400 + i as u64);
        let xs: Vec<i64> = (0..200_000).map(|_| discrete_gaussian(&mut rng, s2) as i64).collect();
        let g = chi2_gof(&xs, dgauss_pmf(s2 as f64), 0, 20.0);
        eprintln!("discrete_gaussian({s2}): chi2 = {:.1}, df = {}, p = {:.3e}", g.stat, g.df, g.p_value);
        assert!(g.df >= 2, "too few bins for sigma2 {s2}: {g:?}");
        assert!(!g.rejects(alpha), "discrete_gaussian({s2}) fails χ²: {g:?}");
    }
    // negative control: sigma2 = 10 is distinguishable from sigma2 = 11
    let mut rng = seeded_rng(410);
    let xs: Vec<i64> = (0..200_000).map(|_| discrete_gaussian(&mut rng, 10) as i64).collect();
    assert!(chi2_gof(&xs, dgauss_pmf(11.0), 0, 20.0).rejects(ALPHA));
}

#[test]
fn discrete_gaussian_huge_sigma_ks_against_normal() {
    // sigma2 = 2^40 and the largest accepted sigma2 = 2^60: x/σ must follow N(0, 1)
    let cases = [(1u128 << 40, 100_000usize), (1u128 << 60, 50_000)];
    let alpha = ALPHA / cases.len() as f64;
    for (i, &(s2, n)) in cases.iter().enumerate() {
        let mut rng = seeded_rng(500 + i as u64);
        let sigma = (s2 as f64).sqrt();
        let ys: Vec<f64> = (0..n).map(|_| discrete_gaussian(&mut rng, s2) as f64 / sigma).collect();
        let d = ks_stat(ys, normal_cdf);
        let crit = ks_critical(n, alpha);
        eprintln!("discrete_gaussian({s2}): KS D = {d:.5} (critical {crit:.5})");
        assert!(d < crit, "discrete_gaussian({s2}): KS D = {d} >= {crit}");
    }
}

/// Number of significant bits of x.
fn bits(x: u128) -> u32 {
    128 - x.leading_zeros()
}

#[test]
fn laplace_scale_exact_or_larger() {
    use pg_dp_core::params::{EPSILON_MAX, EPSILON_MIN};
    let mut rng = seeded_rng(600);
    let mut eps_list = vec![
        EPSILON_MIN,
        EPSILON_MIN.next_up(),
        EPSILON_MAX,
        EPSILON_MAX.next_down(),
        1.0,
        0.5,
        0.1,
        1.0 / 3.0,
        0.7,
        0.3 * (1.0 - 4.0 * f64::EPSILON),
        2.0_f64.powi(-29),
        1024.0,
        12345.678,
    ];
    let (lmin, lmax) = (EPSILON_MIN.ln(), EPSILON_MAX.ln());
    for _ in 0..20_000 {
        let u: f64 = rand::Rng::random(&mut rng);
        eps_list.push((lmin + u * (lmax - lmin)).exp().clamp(EPSILON_MIN, EPSILON_MAX));
    }
    let mut deltas: Vec<u128> = vec![
        1,
        2,
        3,
        7,
        1000,
        (1 << 32) - 1,
        1 << 34,
        (1 << 34) + 1,
        (1 << 38) - 1,
        (1 << 53) + 1,
        1 << 63,
        (1 << 64) - 1,
        1 << 64,
    ];
    for _ in 0..8 {
        deltas.push(rand::Rng::random_range(&mut rng, 1..=(1u128 << 64)));
    }
    let (mut exact, mut rounded) = (0u64, 0u64);
    for &delta in &deltas {
        for &eps in &eps_list {
            let (t, s) = laplace_scale(delta, eps);
            assert!(t >= 1 && s >= 1 && t <= MAX_SCALE_NUMERATOR, "laplace_scale({delta}, {eps}) = {t}/{s}");
            // eps = m·2^-k, so delta/eps = delta·2^k/m; compare t/s with it as exact integers:
            // t·m·2^a vs s·delta·2^b with a = max(-k, 0), b = max(k, 0)
            let (m, k) = dyadic(eps);
            // every accepted ε has k <= 82, so Δ < 2^38 always gives an exact scale
            assert!(k <= 82, "ε = {eps:e} has k = {k}");
            let (a, b) = (k.min(0).unsigned_abs(), k.max(0) as u32);
            let lhs = Big::from_u128(t).mul(&Big::from_u128(m as u128)).shl(a);
            let rhs = Big::from_u128(s).mul(&Big::from_u128(delta)).shl(b);
            assert!(lhs >= rhs, "laplace_scale({delta}, {eps}) = {t}/{s} is below delta/eps");
            // enlargement below 2^-25 relative: lhs·2^25 <= rhs·(2^25 + 1)
            assert!(
                lhs.shl(25) <= rhs.mul(&Big::from_u128((1 << 25) + 1)),
                "laplace_scale({delta}, {eps}) = {t}/{s} enlarges the scale by more than 2^-25"
            );
            let fits = k <= 0 || bits(delta) + k as u32 <= 120;
            if fits || delta <= 1 << 34 {
                assert_eq!(lhs, rhs, "laplace_scale({delta}, {eps}) = {t}/{s} is not exactly delta/eps");
            }
            if lhs == rhs {
                exact += 1;
            } else {
                rounded += 1;
            }
        }
    }
    eprintln!("laplace_scale: {exact} exact, {rounded} rounded up");
    // both branches were exercised
    assert!(exact > 0 && rounded > 0, "exact {exact}, rounded {rounded}");
}

#[test]
fn isqrt_exact_on_edge_cases() {
    let check = |n: u128| {
        let x = isqrt(n);
        assert!(x.checked_mul(x).is_some_and(|sq| sq <= n), "isqrt({n}) = {x} is too large");
        assert!((x + 1).checked_mul(x + 1).is_none_or(|sq| sq > n), "isqrt({n}) = {x} is too small");
    };
    let mut cases: Vec<u128> = (0..=1000).collect();
    for e in 1..128 {
        let p = 1u128 << e;
        cases.extend([p - 1, p, p + 1]);
    }
    // squares around the limits of f64 precision (2^26.5, 2^53) and of u128
    for r in [(1u128 << 26) + 1, (1 << 53) - 1, 1 << 53, (1 << 53) + 1, 3_037_000_499, u64::MAX as u128 - 1, u64::MAX as u128] {
        let sq = r * r;
        cases.extend([sq - 1, sq, sq + 1]);
    }
    cases.extend([u128::MAX, u128::MAX - 1]);
    let mut rng = seeded_rng(700);
    for _ in 0..20_000 {
        let r: u64 = rand::Rng::random(&mut rng);
        let sq = r as u128 * r as u128;
        cases.extend([sq, sq.saturating_sub(1), sq.saturating_add(1), rand::Rng::random(&mut rng)]);
    }
    for &n in &cases {
        check(n);
    }
    assert_eq!(isqrt(u128::MAX), u64::MAX as u128);
    assert_eq!(isqrt((u64::MAX as u128).pow(2)), u64::MAX as u128);
    assert_eq!(isqrt((u64::MAX as u128).pow(2) - 1), u64::MAX as u128 - 1);
}

#[test]
fn dyadic_exact_on_edge_cases() {
    let check = |x: f64| {
        let (m, k) = dyadic(x);
        assert_eq!(m % 2, 1, "dyadic({x:e}): mantissa {m} is even");
        assert!(m < 1 << 53, "dyadic({x:e}): mantissa {m} has more than 53 bits");
        assert_eq!(libm::ldexp(m as f64, -k), x, "dyadic({x:e}) = {m}·2^-{k}");
    };
    // IEEE-754 facts: 0.1 = 3602879701896397·2^-55, 5e-324 = 2^-1074, MIN_POSITIVE = 2^-1022,
    // MAX = (2^53 - 1)·2^971.
    assert_eq!(dyadic(1.0), (1, 0));
    assert_eq!(dyadic(0.75), (3, 2));
    assert_eq!(dyadic(6.0), (3, -1));
    assert_eq!(dyadic(0.1), (3_602_879_701_896_397, 55));
    assert_eq!(dyadic(f64::from_bits(1)), (1, 1074));
    assert_eq!(dyadic(f64::MIN_POSITIVE), (1, 1022));
    assert_eq!(dyadic(f64::MAX), ((1 << 53) - 1, -971));
    for x in [1e-9, 1e6, 0.3, 1.0 / 3.0, f64::EPSILON, f64::MIN_POSITIVE.next_down(), f64::MIN_POSITIVE.next_up(), 3.0 * f64::from_bits(1)] {
        check(x);
    }
    let mut rng = seeded_rng(800);
    for _ in 0..100_000 {
        let bits: u64 = rand::Rng::random::<u64>(&mut rng) & !(1 << 63);
        let x = f64::from_bits(bits);
        if x.is_finite() && x > 0.0 {
            check(x);
        }
    }
}
