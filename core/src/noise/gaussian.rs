//! The Gaussian mechanism with analytic calibration (Balle & Wang, ICML 2018, Theorem 8).
//!
//! Adding N(0, σ²) to a statistic of L2 sensitivity Δ is (ε, δ)-DP if and only if
//!   Φ(Δ/(2σ) − εσ/Δ) − e^ε · Φ(−Δ/(2σ) − εσ/Δ) ≤ δ.
//! [`analytic_sigma`] returns the smallest σ (up to a relative 1e-12, rounded up) that satisfies it.
//! [`sample_on_grid`] draws the noise as a discrete Gaussian on a power-of-two grid, exactly.
use crate::error::DpResult;
use crate::noise::grid::{floor_log2, pow2};
use crate::params::{check_delta, check_epsilon};
use crate::noise::sampling::discrete_gaussian;
use rand::Rng;

/// Standard normal CDF.
pub fn phi(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// δ achieved by Gaussian noise σ for sensitivity Δ at ε (Balle & Wang, Theorem 8).
pub fn gaussian_delta(epsilon: f64, sensitivity: f64, sigma: f64) -> f64 {
    let a = sensitivity / (2.0 * sigma);
    let b = epsilon * sigma / sensitivity;
    let first = phi(a - b);
    // e^ε · Φ(−a − b) in log space; if Φ underflows to 0 this term is dropped, which can only
    // overstate δ (the safe direction).
    let tail = phi(-a - b);
    let second = if tail > 0.0 { (epsilon + tail.ln()).exp() } else { 0.0 };
    (first - second).max(0.0)
}

/// The smallest σ with gaussian_delta(ε, Δ, σ) ≤ δ, by bisection (δ(σ) is decreasing in σ).
pub fn analytic_sigma(epsilon: f64, delta: f64, sensitivity: f64) -> DpResult<f64> {
    let epsilon = check_epsilon("epsilon", epsilon)?;
    let delta = check_delta("delta", delta, false)?;
    assert!(sensitivity > 0.0 && sensitivity.is_finite());
    let mut lo = 0.0_f64;
    let mut hi = sensitivity;
    while gaussian_delta(epsilon, sensitivity, hi) > delta {
        lo = hi;
        hi *= 2.0;
    }
    while (hi - lo) > hi * 1e-12 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if gaussian_delta(epsilon, sensitivity, mid) > delta {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(hi)
}

/// Gaussian noise of standard deviation at least `sigma`, drawn exactly as a discrete Gaussian on
/// the grid 2^g with g chosen so that σ spans 2^20..2^21 grid steps. Returns (noise, grid exponent).
/// The result is a multiple of 2^g.
pub fn sample_on_grid<R: Rng + ?Sized>(rng: &mut R, sigma: f64) -> (f64, i32) {
    assert!(sigma > 0.0 && sigma.is_finite());
    let g = floor_log2(sigma) - 20;
    let sigma_steps = sigma * pow2(-g); // in [2^20, 2^21)
    // Round σ² up to an integer: more noise, never less. σ_steps is a multiple of 2^-32 below 2^21,
    // so σ_steps = m·2^-32 with m < 2^53 and σ² = m²·2^-64 exactly; the ceiling is taken in
    // integers (the f64 product σ_steps·σ_steps could round down onto an integer below σ²).
    let m = (sigma_steps * pow2(32)) as u128;
    let sigma2 = (m * m).div_ceil(1u128 << 64);
    let z = discrete_gaussian(rng, sigma2);
    (z as f64 * pow2(g), g)
}
