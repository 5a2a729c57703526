//! 95% half-widths of the noise pg_dp adds, from public parameters only (docs/privacy/intervals.md).
//!
//! Every function here takes the exact noise parameters a mechanism samples with (a rational scale in
//! grid steps, or σ² of a discrete Gaussian) and returns the smallest non-negative integer h, in the
//! same grid steps, such that P(|noise| ≤ h) ≥ [`COVERAGE`] for that noise distribution. The caller
//! multiplies by the grid step to state it in output units. Nothing here reads data: a half-width is
//! a fixed function of the mechanism's parameters, as public as the noise scale in the receipt.
//!
//! The tail probabilities are transcendental (e^(−x)), so they are evaluated in floating point
//! (relative error about 1e-15) and the candidate h is checked against its neighbours: h is the
//! smallest integer whose computed coverage is at least 0.95, which is the exact answer unless the
//! true coverage of h − 1 or h lies within about 1e-15 of 0.95. Above 2^52 steps (integers beyond the
//! f64 mantissa) the closed form is used without the neighbour check (relative error below 2^-50).

/// The coverage every half-width is computed for.
pub const COVERAGE: f64 = 0.95;

/// The two-sided 95% quantile of the standard normal, Φ⁻¹(0.975).
pub const Z95: f64 = 1.959_963_984_540_054;

/// Beyond this many steps the neighbour check is skipped (f64 no longer holds every integer).
const CHECK_LIMIT: u128 = 1 << 52;

/// ln(1/(1 − COVERAGE)) = ln 20.
fn ln_inv_miss() -> f64 {
    (1.0 / (1.0 - COVERAGE)).ln()
}

/// The smallest h ≥ 0 with `covers(h)`, starting from an estimate, for a coverage monotone in h.
fn smallest_covering(estimate: f64, covers: impl Fn(u128) -> bool) -> u128 {
    let mut h = if estimate.is_finite() && estimate > 0.0 { estimate.ceil().min(u128::MAX as f64 / 4.0) as u128 } else { 0 };
    if h >= CHECK_LIMIT {
        return h;
    }
    // a few steps at most: the estimate is within rounding of the answer
    let mut guard = 0;
    while !covers(h) && guard < 64 {
        h += 1;
        guard += 1;
    }
    while h > 0 && covers(h - 1) && guard < 128 {
        h -= 1;
        guard += 1;
    }
    h
}

/// P(|Z| ≤ h) for Z discrete Laplace with scale b (P(z) ∝ e^(−|z|/b)): 1 − 2p^(h+1)/(1 + p),
/// p = e^(−1/b).
pub fn discrete_laplace_coverage(b: f64, h: u128) -> f64 {
    if b <= 0.0 {
        return 1.0;
    }
    let p = (-1.0 / b).exp();
    1.0 - 2.0 * (-((h as f64) + 1.0) / b).exp() / (1.0 + p)
}

/// The 95% half-width, in steps, of discrete Laplace noise of scale t/s (the parameters of
/// [`crate::noise::sampling::discrete_laplace`]): the smallest h ≥ 0 with 2p^(h+1)/(1 + p) ≤ 0.05,
/// i.e. h + 1 ≥ b·ln(40/(1 + p)) with b = t/s and p = e^(−1/b). 0 when t = 0 (no noise).
pub fn discrete_laplace_halfwidth(t: u128, s: u128) -> u128 {
    if t == 0 {
        return 0;
    }
    let b = t as f64 / s as f64;
    let p = (-1.0 / b).exp();
    let ln_target = (2.0 / (1.0 - COVERAGE)).ln() - p.ln_1p(); // ln(40/(1 + p))
    // coverage ≥ 0.95 ⇔ (h + 1)/b ≥ ln(40/(1 + p))
    let covers = |h: u128| ((h as f64) + 1.0) / b >= ln_target;
    smallest_covering(b * ln_target - 1.0, covers)
}

/// P(|K| ≤ h) for K = round(t·Z), Z standard Laplace (the smooth-sensitivity quantile noise with
/// δ > 0, [`crate::mechanisms::quantile::rounded_laplace`]): 1 − e^(−(h + 1/2)/t).
pub fn rounded_laplace_coverage(t: f64, h: u128) -> f64 {
    if t <= 0.0 {
        return 1.0;
    }
    -(-((h as f64) + 0.5) / t).exp_m1()
}

/// The 95% half-width, in steps, of round(t·Z), Z standard Laplace, t > 0 in steps: the smallest
/// h ≥ 0 with e^(−(h + 1/2)/t) ≤ 0.05, i.e. h ≥ t·ln 20 − 1/2.
pub fn rounded_laplace_halfwidth(t: f64) -> u128 {
    let covers = |h: u128| ((h as f64) + 0.5) / t >= ln_inv_miss();
    smallest_covering(t * ln_inv_miss() - 0.5, covers)
}

/// P(|K| ≤ h) for K = round(t·Z), Z with density (3/2)(1 + |z|)^-4 (the pure-ε quantile noise,
/// [`crate::mechanisms::quantile::rounded_polynomial`], before its cap): 1 − (2t/(2t + 2h + 1))³.
pub fn rounded_polynomial_coverage(t: f64, h: u128) -> f64 {
    if t <= 0.0 {
        return 1.0;
    }
    let r = 2.0 * t / (2.0 * t + 2.0 * h as f64 + 1.0);
    1.0 - r * r * r
}

/// The 95% half-width, in steps, of round(t·Z), Z with density (3/2)(1 + |z|)^-4, t > 0 in steps,
/// with magnitudes of `cap` or more reported as `cap` (so h ≤ cap): the smallest h ≥ 0 with
/// (2t/(2t + 2h + 1))³ ≤ 0.05, i.e. h ≥ t·(20^(1/3) − 1) − 1/2, or `cap`.
pub fn rounded_polynomial_halfwidth(t: f64, cap: u128) -> u128 {
    let root = (1.0 / (1.0 - COVERAGE)).cbrt(); // 20^(1/3)
    let covers = |h: u128| (2.0 * t + 2.0 * h as f64 + 1.0) >= 2.0 * t * root;
    smallest_covering(t * (root - 1.0) - 0.5, covers).min(cap)
}

/// P(Z > x) for a standard normal Z.
pub fn normal_sf(x: f64) -> f64 {
    0.5 * libm::erfc(x / std::f64::consts::SQRT_2)
}

/// A 95% half-width, in steps, of the discrete Gaussian with P(x) ∝ e^(−x²/(2σ²)) on the integers
/// (σ² = `sigma2`, an upper bound of the sampler's): the smallest h with 2·Q((h + 1/2)/σ) ≤ 0.05, Q the
/// normal tail. P(|X| ≤ h) ≥ 1 − 2Q((h + 1/2)/σ) for every σ > 0 (the normaliser is at least √(2π)σ,
/// and beyond σ the density is convex, so each term is at most the integral over its unit cell), so
/// the coverage is at least 0.95; and h is at most one step above the smallest such integer
/// (docs/privacy/intervals.md).
pub fn discrete_gaussian_halfwidth(sigma2: f64) -> u128 {
    if !(sigma2 > 0.0) {
        return 0;
    }
    let sigma = sigma2.sqrt();
    // a relative margin for erfc's rounding (about 1 ulp)
    let covers = |h: u128| 2.0 * normal_sf(((h as f64) + 0.5) / sigma) <= (1.0 - COVERAGE) * (1.0 - 1e-12);
    smallest_covering(Z95 * sigma - 0.5, covers)
}

/// P(|X| > x) for X = Σ Lᵢ, independent continuous Laplace variables of distinct scales bᵢ > 0:
/// Σ cᵢ·e^(−x/bᵢ) with cᵢ = Π_{j≠i} bᵢ²/(bᵢ² − bⱼ²) (partial fractions of the characteristic
/// function Π 1/(1 + bᵢ²t²)).
fn laplace_sum_tail(b: &[f64], x: f64) -> f64 {
    b.iter()
        .enumerate()
        .map(|(i, &bi)| {
            let c: f64 = b.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, &bj)| bi * bi / (bi * bi - bj * bj)).product();
            c * (-x / bi).exp()
        })
        .sum()
}

/// The 95% half-width of a sum of independent continuous Laplace variables with scales `scales`
/// (zeros ignored): the x with P(|X| > x) = 0.05, by bisection on the closed-form tail. Scales
/// within a relative 10^-4 of each other are spread apart upwards (which only widens the interval)
/// so that the partial fractions stay well conditioned. The approximate intervals of ratios use it
/// on their linearised noise (docs/privacy/intervals.md).
pub fn laplace_sum_halfwidth(scales: &[f64]) -> f64 {
    let mut b: Vec<f64> = scales.iter().map(|s| s.abs()).filter(|&s| s > 0.0 && s.is_finite()).collect();
    if b.is_empty() {
        return 0.0;
    }
    b.sort_by(f64::total_cmp);
    for i in 1..b.len() {
        b[i] = b[i].max(b[i - 1] * (1.0 + 1e-4));
    }
    let miss = 1.0 - COVERAGE;
    if b.len() == 1 {
        return b[0] * (1.0 / miss).ln();
    }
    // P(|X| > x) ≤ Σ P(|Lᵢ| > x·bᵢ/Σb) = Σ e^(−x/Σb), so x = Σb·ln(k/0.05) is above the answer
    let total: f64 = b.iter().sum();
    let (mut lo, mut hi) = (0.0, total * (b.len() as f64 / miss).ln());
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if laplace_sum_tail(&b, mid) > miss {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= hi * 1e-12 {
            break;
        }
    }
    hi
}

/// Variance of the discrete Laplace distribution with scale b: 2p/(1 − p)², p = e^(−1/b).
pub fn discrete_laplace_variance(b: f64) -> f64 {
    if b <= 0.0 {
        return 0.0;
    }
    let p = (-1.0 / b).exp();
    let q = -(-1.0 / b).exp_m1();
    2.0 * p / (q * q)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_forms_at_known_points() {
        // b = 1: coverage(2) = 1 − 2e^-3/(1 + e^-1) = 0.927, coverage(3) = 0.973
        assert_eq!(discrete_laplace_halfwidth(1, 1), 3);
        // tiny scale: no noise beyond 0 with probability (1 − p)/(1 + p) ≥ 0.95
        assert_eq!(discrete_laplace_halfwidth(1, 10), 0);
        assert_eq!(discrete_laplace_halfwidth(0, 1), 0);
        // large scale: about b·ln 20
        let h = discrete_laplace_halfwidth(1_000_000, 1) as f64;
        assert!((h / 1e6 - 20f64.ln()).abs() < 1e-5, "{h}");
        // rounded Laplace with t = 10: h ≥ 10 ln 20 − 1/2 = 29.46
        assert_eq!(rounded_laplace_halfwidth(10.0), 30);
        // polynomial with t = 10: h ≥ 10(20^(1/3) − 1) − 1/2 = 16.64
        assert_eq!(rounded_polynomial_halfwidth(10.0, 1000), 17);
        assert_eq!(rounded_polynomial_halfwidth(10.0, 5), 5);
        // discrete Gaussian with σ = 100: about 1.96σ − 1/2
        let h = discrete_gaussian_halfwidth(1e4);
        assert!(h == 196 || h == 195, "{h}");
        // sums of Laplace variables: one term is b·ln 20; two equal terms solve e^(−x)(2 + x)/2 = 0.05
        assert!((laplace_sum_halfwidth(&[2.0, 0.0]) - 2.0 * 20f64.ln()).abs() < 1e-12);
        let x = laplace_sum_halfwidth(&[1.0, 1.0]);
        assert!(((-x).exp() * (2.0 + x) / 2.0 - 0.05).abs() < 1e-4, "{x}");
        // a much smaller second term barely matters; three terms lie between the extremes
        let one = laplace_sum_halfwidth(&[1.0]);
        assert!(laplace_sum_halfwidth(&[1.0, 1e-3]) - one < 1e-2);
        let three = laplace_sum_halfwidth(&[1.0, 0.5, 0.25]);
        assert!(three > one && three < 1.75 * one);
    }
}
