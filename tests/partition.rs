//! Tests of `pg_dp_core::mechanisms::partition` (DP partition selection; docs/privacy/partition-selection.md):
//! the keep probabilities follow the optimal recursion, both DP constraints hold exactly for the
//! integers the coin uses (with a negative control at twice the ε), the coin's frequencies match
//! its probabilities, a group of one unit is kept with probability at most δ, large groups always,
//! and the selection keeps at least as much as Laplace thresholding at the same (ε, δ).
mod common;

use common::*;
use pg_dp_core::mechanisms::partition::{Selection, ONE};
use pg_dp_core::noise::rng::seeded_rng;
use pg_dp_core::DpError;

const CASES: &[(f64, f64)] = &[(1.0, 1e-6), (0.1, 1e-5), (0.01, 1e-9), (5.0, 1e-12), (2.0, 0.1), (0.001, 1e-6), (20.0, 1e-15)];

/// The ideal recursion in floating point.
fn ideal(eps: f64, delta: f64, n: usize) -> Vec<f64> {
    let a = eps.exp();
    let mut p = vec![0.0];
    for _ in 0..n {
        let q = *p.last().unwrap();
        p.push((a * q + delta).min(1.0 - (1.0 - q - delta) / a).min(1.0).max(q));
    }
    p
}

#[test]
fn keep_probabilities_follow_the_optimal_recursion() {
    for &(eps, delta) in CASES {
        let s = Selection::new(eps, delta).unwrap();
        let n = s.certain_units() as usize + 3;
        let p = ideal(eps, delta, n);
        for (i, want) in p.iter().enumerate() {
            let got = s.keep_probability(i as u64);
            assert!((got - want).abs() < 1e-9, "ε {eps} δ {delta} n {i}: {got} vs {want}");
        }
        assert_eq!(s.keep_probability(0), 0.0);
        assert_eq!(s.keep_numerator(s.certain_units()), ONE);
        assert!(s.keep_numerator(s.certain_units() - 1) < ONE);
    }
}

/// a · b as a 256-bit number (hi, lo).
fn mul_wide(a: u128, b: u128) -> (u128, u128) {
    let (a1, a0) = (a >> 64, a & (ONE - 1));
    let (b1, b0) = (b >> 64, b & (ONE - 1));
    let (p00, p01, p10, p11) = (a0 * b0, a0 * b1, a1 * b0, a1 * b1);
    let mid = (p00 >> 64) + (p01 & (ONE - 1)) + (p10 & (ONE - 1));
    let lo = (p00 & (ONE - 1)) | ((mid & (ONE - 1)) << 64);
    let hi = p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64);
    (hi, lo)
}

fn add_wide(a: (u128, u128), b: (u128, u128)) -> (u128, u128) {
    let (lo, carry) = a.1.overflowing_add(b.1);
    (a.0 + b.0 + carry as u128, lo)
}

/// Checks, exactly, that the integers t_n / 2^64 satisfy both (ε, δ) constraints between every n−1
/// and n, with e^ε replaced by a lower bound of it (so that the check is conservative):
/// t_n ≤ e^ε·t_{n−1} + δ and 1 − t_{n−1} ≤ e^ε·(1 − t_n) + δ. Returns the first violation.
fn first_violation(t: &[u128], eps: f64, delta: f64) -> Option<usize> {
    // a lower bound of e^ε at least as large as any the implementation may use: exp is within an
    // ulp (2^-52), the margin here is 2^-51
    let a = (eps.exp() * (1.0 - 2f64.powi(-51)) * ONE as f64) as u128;
    // δ·2^128 from below, as a 256-bit number
    let d = (delta * ONE as f64) as u128;
    let d128 = (d >> 64, d << 64);
    for n in 1..t.len() {
        // t_n · 2^64 ≤ a · t_{n−1} + δ·2^128
        let lhs = (t[n] >> 64, t[n] << 64);
        if lhs > add_wide(mul_wide(a, t[n - 1]), d128) {
            return Some(n);
        }
        // (2^64 − t_{n−1}) · 2^64 ≤ a · (2^64 − t_n) + δ·2^128
        let l2 = ONE - t[n - 1];
        let lhs = (l2 >> 64, l2 << 64);
        if lhs > add_wide(mul_wide(a, ONE - t[n]), d128) {
            return Some(n);
        }
    }
    None
}

#[test]
fn both_dp_constraints_hold_exactly_for_the_integers_the_coin_uses() {
    for &(eps, delta) in CASES {
        let s = Selection::new(eps, delta).unwrap();
        let t: Vec<u128> = (0..=s.certain_units() + 2).map(|n| s.keep_numerator(n)).collect();
        assert_eq!(first_violation(&t, eps, delta), None, "ε {eps} δ {delta}");
        // monotone: the reverse constraints then hold as well
        assert!(t.windows(2).all(|w| w[0] <= w[1]));
    }
    // negative control: probabilities made for 2ε (or 2δ) violate the constraints at ε (or δ)
    for &(eps, delta) in &[(1.0, 1e-6), (0.1, 1e-5)] {
        for (e2, d2) in [(2.0 * eps, delta), (eps, 2.0 * delta)] {
            let loose = Selection::new(e2, d2).unwrap();
            let t: Vec<u128> = (0..=loose.certain_units()).map(|n| loose.keep_numerator(n)).collect();
            assert!(first_violation(&t, eps, delta).is_some(), "({e2}, {d2}) passed as ({eps}, {delta})");
        }
    }
}

#[test]
fn the_coin_lands_with_its_stated_probability() {
    let s = Selection::new(0.5, 1e-3).unwrap();
    let mut rng = seeded_rng(11);
    let draws = 200_000u64;
    let z = z_two_sided(ALPHA / 40.0);
    for n in 1..s.certain_units().min(40) {
        let p = s.keep_probability(n);
        let kept = (0..draws).filter(|_| s.keep(&mut rng, n)).count() as f64;
        let sd = (draws as f64 * p * (1.0 - p)).sqrt().max(1.0);
        assert!((kept - draws as f64 * p).abs() <= z * sd + 1.0, "n {n}: {kept} kept of {draws}, p {p}");
    }
    // negative control: the same test against a probability 5% too high fails for some n
    let mut rng = seeded_rng(12);
    let wrong = (5..20).any(|n| {
        let p = (s.keep_probability(n) * 1.05).min(1.0);
        let kept = (0..draws).filter(|_| s.keep(&mut rng, n)).count() as f64;
        let sd = (draws as f64 * p * (1.0 - p)).sqrt().max(1.0);
        (kept - draws as f64 * p).abs() > z * sd + 1.0
    });
    assert!(wrong, "the frequency test cannot tell a 5% error");
}

#[test]
fn a_group_of_one_unit_almost_never_appears_and_a_large_one_always_does() {
    // ε = 1, δ = 1e-6: a group of one unit is kept with probability at most 1e-6. In 10^6 draws the
    // number kept is Binomial(10^6, ≤ 1e-6): more than 12 has probability below 1e-6.
    let s = Selection::new(1.0, 1e-6).unwrap();
    assert!(s.keep_probability(1) <= 1e-6);
    let mut rng = seeded_rng(5);
    let kept = (0..1_000_000).filter(|_| s.keep(&mut rng, 1)).count();
    assert!(kept <= 12, "{kept}");
    // groups of 10,000 units: kept with probability exactly 1
    assert!(s.certain_units() < 100, "{}", s.certain_units());
    assert!((0..100_000).all(|_| s.keep(&mut rng, 10_000)));
    assert_eq!(s.keep_numerator(10_000), ONE);
}

/// P(n + L > τ) for L ~ Laplace(1/ε) and τ = 1 + ln(1/(2δ))/ε: Laplace thresholding, (ε, δ)-DP for
/// one group per unit.
fn laplace_threshold(eps: f64, delta: f64, n: f64) -> f64 {
    let tau = 1.0 + (1.0 / (2.0 * delta)).ln() / eps;
    let x = n - tau;
    if x >= 0.0 {
        1.0 - 0.5 * (-eps * x).exp()
    } else {
        0.5 * (eps * x).exp()
    }
}

#[test]
fn the_selection_keeps_at_least_as_much_as_laplace_thresholding() {
    for &(eps, delta) in CASES {
        let s = Selection::new(eps, delta).unwrap();
        for n in 1..=s.certain_units() + 1 {
            let lap = laplace_threshold(eps, delta, n as f64);
            // within the fixed point's resolution (δ·2^64 is an integer: relative 1e-4 at δ = 1e-15)
            assert!(s.keep_probability(n) >= lap * (1.0 - 1e-4) - 1e-12, "ε {eps} δ {delta} n {n}: {} < {lap}", s.keep_probability(n));
        }
        // and strictly more somewhere
        assert!((1..=s.certain_units()).any(|n| s.keep_probability(n) > laplace_threshold(eps, delta, n as f64) + 1e-6));
    }
}

#[test]
fn invalid_parameters_are_named() {
    for (eps, delta, arg) in [
        (0.0, 1e-6, "group selection epsilon"),
        (1e-4, 1e-6, "group selection epsilon"),
        (21.0, 1e-6, "group selection epsilon"),
        (f64::NAN, 1e-6, "group selection epsilon"),
        (1.0, 0.0, "group selection delta"),
        (1.0, 1e-16, "group selection delta"),
        (1.0, 1.0, "group selection delta"),
    ] {
        match Selection::new(eps, delta) {
            Err(DpError::InvalidParameter { arg: a, .. }) => assert_eq!(a, arg),
            other => panic!("({eps}, {delta}): {other:?}"),
        }
    }
}
