//! dp_sum: integer sums exactly, real sums on a power-of-two grid, clamped to the bounds
//! (docs/privacy/sum.md).
use crate::accounting::charge::mechanism_epsilon;
use crate::error::DpResult;
use crate::noise::grid::Grid;
use crate::params::{check_epsilon, check_float_bounds, check_int_bounds};
use rand::Rng;
use crate::mechanisms::laplace::*;

/// Grid resolution of real-valued sums: the sensitivity spans 2^32..2^33 grid steps.
pub const SUM_GRID_BITS: i32 = 32;

/// The grid of a real-valued dp_sum with checked bounds [lower, upper]: max(|lower|, |upper|) spans
/// 2^32..2^33 steps.
pub fn sum_grid(lower: f64, upper: f64) -> Grid {
    Grid::new(lower, upper, lower.abs().max(upper.abs()), SUM_GRID_BITS)
}

/// dp_sum over integers: clamp to [lower, upper], exact i128 sum, + DLap(max(|lower|,|upper|)/ε).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntSumSpec {
    pub lower: i64,
    pub upper: i64,
    pub epsilon: f64,
}

impl IntSumSpec {
    pub fn new(lower: i64, upper: i64, epsilon: f64) -> DpResult<Self> {
        let (lower, upper) = check_int_bounds(lower, upper)?;
        Ok(IntSumSpec { lower, upper, epsilon: check_epsilon("epsilon", epsilon)? })
    }

    #[inline]
    pub fn clamp(&self, v: i64) -> i64 {
        v.clamp(self.lower, self.upper)
    }

    /// Adding or removing one row moves the sum by at most max(|lower|, |upper|).
    pub fn sensitivity(&self) -> u128 {
        self.lower.unsigned_abs().max(self.upper.unsigned_abs()) as u128
    }

    pub fn describe(&self) -> ReleaseInfo {
        let sens = self.sensitivity();
        let eps = mechanism_epsilon(self.epsilon);
        info(self.epsilon, sens as f64, laplace_scale_f64(sens, eps), laplace_halfwidth_steps(sens, eps) as f64)
    }

    pub fn release<R: Rng + ?Sized>(&self, rng: &mut R, sum: i128) -> Noisy<i128> {
        let (z, _) = laplace_noise(rng, self.sensitivity(), mechanism_epsilon(self.epsilon));
        Noisy { value: sum.saturating_add(z), info: self.describe() }
    }
}

/// dp_sum over reals: clamp, quantize to the grid, exact i128 sum, + DLap on the same grid.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FloatSumSpec {
    pub grid: Grid,
    pub epsilon: f64,
}

impl FloatSumSpec {
    pub fn new(lower: f64, upper: f64, epsilon: f64) -> DpResult<Self> {
        let (lower, upper) = check_float_bounds(lower, upper)?;
        let epsilon = check_epsilon("epsilon", epsilon)?;
        Ok(FloatSumSpec { grid: sum_grid(lower, upper), epsilon })
    }

    #[inline]
    pub fn quantize(&self, x: f64) -> DpResult<i64> {
        self.grid.quantize(x, "value")
    }

    /// Sensitivity in grid steps: every row's integer lies in [q(lower), q(upper)].
    pub fn sensitivity_steps(&self) -> u128 {
        self.grid.q_lower.unsigned_abs().max(self.grid.q_upper.unsigned_abs()) as u128
    }

    pub fn describe(&self) -> ReleaseInfo {
        let sens = self.sensitivity_steps();
        let step = self.grid.step();
        let eps = mechanism_epsilon(self.epsilon);
        info(self.epsilon, sens as f64 * step, laplace_scale_f64(sens, eps) * step, laplace_halfwidth_steps(sens, eps) as f64 * step)
    }

    pub fn release<R: Rng + ?Sized>(&self, rng: &mut R, sum_q: i128) -> Noisy<f64> {
        let (z, _) = laplace_noise(rng, self.sensitivity_steps(), mechanism_epsilon(self.epsilon));
        Noisy { value: self.grid.value(sum_q.saturating_add(z)), info: self.describe() }
    }
}
