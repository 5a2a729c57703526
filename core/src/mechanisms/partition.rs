//! DP partition selection: which groups of a GROUP BY may appear in a release when the group keys
//! themselves are private (docs/privacy/partition-selection.md).
//!
//! A group is kept with a probability π_n that depends only on n, the number of privacy units in
//! it, after each unit was limited to its groups. The probabilities are the optimal ones for
//! (ε, δ)-DP when each unit is in one group (Desfontaines, Voss, Gipson & Mandayam, "Differentially
//! private partition selection", PoPETs 2022): π_0 = 0 and
//!
//! ```text
//! π_n = min(e^ε·π_{n−1} + δ,  1 − e^{−ε}·(1 − π_{n−1} − δ),  1)
//! ```
//!
//! each the largest value the two DP constraints between neighbours n−1 and n allow. A unit in k
//! groups composes k such releases: (kε, kδ).
//!
//! **Exactness.** The probabilities are kept as integers t_n / 2^64, computed with a lower bound of
//! e^ε and with every rounding in the direction that keeps both constraints, so that the constraints
//! hold exactly for the t_n; the coin compares a uniform 64-bit integer with t_n, so its probability
//! is exactly t_n / 2^64.
use crate::accounting::charge::mechanism_epsilon;
use crate::error::{DpError, DpResult};
use crate::params::fmt_f64;
use rand::Rng;

/// 2^64, the denominator of every keep probability.
pub const ONE: u128 = 1 << 64;
/// Smallest ε of a selection: below it a group needs tens of thousands of units to be kept.
pub const EPSILON_MIN: f64 = 1e-3;
/// Largest ε of a selection (keeps e^ε within the fixed-point arithmetic).
pub const EPSILON_MAX: f64 = 20.0;
/// Smallest δ of a selection (δ·2^64 must be well above one step of the fixed point).
pub const DELTA_MIN: f64 = 1e-15;

/// A validated partition selection: the keep probabilities t_n / 2^64 for n = 0, 1, … up to the
/// first n that is kept with certainty.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    pub epsilon: f64,
    pub delta: f64,
    /// t_n for n = 0..len; the last entry is 2^64 (every larger group is kept).
    table: Vec<u128>,
}

/// floor(a · t / 2^64) for a < 2^100 and t < 2^64, exactly.
fn mul_shift(a: u128, t: u128) -> u128 {
    let (hi, lo) = (a >> 64, a & (ONE - 1));
    hi * t + ((lo * t) >> 64)
}

impl Selection {
    /// Checks ε and δ and computes the keep probabilities.
    pub fn new(epsilon: f64, delta: f64) -> DpResult<Self> {
        if !(epsilon.is_finite() && (EPSILON_MIN..=EPSILON_MAX).contains(&epsilon)) {
            return Err(DpError::invalid("group selection epsilon", "a number between 0.001 and 20", fmt_f64(epsilon)));
        }
        if !(delta.is_finite() && (DELTA_MIN..1.0).contains(&delta)) {
            return Err(DpError::invalid("group selection delta", "at least 1e-15 and less than 1", fmt_f64(delta)));
        }
        // the mechanism runs at the floats just below the charged ε and δ; e^ε from below: the
        // platform's exp is within an ulp, the factor (1 − 2^-50) is 4 ulps
        let eps = mechanism_epsilon(epsilon);
        let a = (eps.exp() * (1.0 - 2f64.powi(-50)) * ONE as f64) as u128;
        let d = (mechanism_epsilon(delta) * ONE as f64) as u128;
        debug_assert!(a >= ONE && d >= 1);
        let mut table = vec![0u128];
        loop {
            let prev = *table.last().expect("t_0");
            if prev >= ONE {
                break;
            }
            // t ≤ a·t_{n−1} + δ (rounded down: a lower bound of e^ε, floor, δ floored)
            let grow = mul_shift(a, prev) + d;
            // 1 − t ≥ (1 − t_{n−1} − δ)/e^ε (rounded so that 1 − t only grows: ceil of the division
            // by a lower bound of e^ε)
            let shrink = match ONE.checked_sub(prev + d) {
                None | Some(0) => ONE,
                Some(rest) => ONE - ((rest << 64).div_ceil(a)).min(ONE),
            };
            let t = grow.min(shrink).min(ONE).max(prev);
            table.push(t);
        }
        Ok(Selection { epsilon, delta, table })
    }

    /// The probability that a group of `n` units is kept, as t_n (out of 2^64).
    pub fn keep_numerator(&self, n: u64) -> u128 {
        self.table.get(n as usize).copied().unwrap_or(ONE)
    }

    /// The probability that a group of `n` units is kept.
    pub fn keep_probability(&self, n: u64) -> f64 {
        self.keep_numerator(n) as f64 / ONE as f64
    }

    /// The smallest number of units that is kept with certainty.
    pub fn certain_units(&self) -> u64 {
        (self.table.len() - 1) as u64
    }

    /// The smallest number of units kept with probability at least 1/2.
    pub fn median_units(&self) -> u64 {
        self.table.iter().position(|&t| t >= ONE / 2).unwrap_or(self.table.len() - 1) as u64
    }

    /// Draws whether a group of `n` units is kept: exactly Bernoulli(t_n / 2^64).
    pub fn keep<R: Rng + ?Sized>(&self, rng: &mut R, n: u64) -> bool {
        let t = self.keep_numerator(n);
        t >= ONE || (rng.random::<u64>() as u128) < t
    }

    /// The mechanism's details for a receipt.
    pub fn details(&self) -> String {
        format!(
            "{{\"method\":\"optimal partition selection\",\"units_kept_half_the_time\":{},\"units_always_kept\":{}}}",
            self.median_units(),
            self.certain_units()
        )
    }
}
