//! The releases behind dp_count, dp_sum and dp_avg.
//!
//! Neighbouring relation everywhere: add or remove one row (each row belongs to one person).
//! Every mechanism adds discrete Laplace noise to an exact integer statistic, so it is ε-DP with
//! exactly the stated sensitivity; derivations are in docs/privacy/.
use crate::accounting::mechanism_epsilon;
use crate::error::DpResult;
use crate::grid::Grid;
use crate::params::{check_epsilon, check_float_bounds, check_int_bounds};
use crate::sampling::{discrete_laplace, laplace_scale};
use rand::Rng;

/// Name of the noise mechanism recorded in every receipt.
pub const DISCRETE_LAPLACE: &str = "discrete_laplace";

/// Grid resolution of real-valued sums: the sensitivity spans 2^32..2^33 grid steps.
pub const SUM_GRID_BITS: i32 = 32;
/// Grid resolution of averages: the bound width spans 2^33..2^34 grid steps.
pub const AVG_GRID_BITS: i32 = 33;
/// Share of ε that dp_avg spends on the centred sum; the rest goes to the count
/// (docs/privacy/avg.md explains the choice).
pub const AVG_SUM_SHARE: f64 = 0.7;

/// What a release spent and how it was noised: the content of a privacy receipt.
#[derive(Debug, Clone, PartialEq)]
pub struct ReleaseInfo {
    pub mechanism: &'static str,
    pub epsilon: f64,
    pub delta: f64,
    /// L1 sensitivity of the noised statistic, in output units.
    pub sensitivity: f64,
    /// Laplace scale b of the noise, in output units (variance 2b² in the continuous limit).
    pub scale: f64,
    /// For dp_avg: the scale of the noise on the count.
    pub count_scale: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Noisy<T> {
    pub value: T,
    pub info: ReleaseInfo,
}

/// Discrete Laplace noise for integer sensitivity `sens` at ε (already reduced to the mechanism's ε,
/// see [`mechanism_epsilon`]), and its exact scale sens/ε as f64.
fn laplace_noise<R: Rng + ?Sized>(rng: &mut R, sens: u128, eps: f64) -> (i128, f64) {
    if sens == 0 {
        return (0, 0.0);
    }
    let (t, s) = laplace_scale(sens, eps);
    (discrete_laplace(rng, t, s), t as f64 / s as f64)
}

/// The exact scale sens/ε (as f64) that [`laplace_noise`] uses, without drawing.
fn laplace_scale_f64(sens: u128, eps: f64) -> f64 {
    if sens == 0 {
        return 0.0;
    }
    let (t, s) = laplace_scale(sens, eps);
    t as f64 / s as f64
}

fn info(epsilon: f64, sensitivity: f64, scale: f64) -> ReleaseInfo {
    ReleaseInfo { mechanism: DISCRETE_LAPLACE, epsilon, delta: 0.0, sensitivity, scale, count_scale: None }
}

fn saturate_i64(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// dp_count: n + DLap(1/ε).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CountSpec {
    pub epsilon: f64,
}

impl CountSpec {
    pub fn new(epsilon: f64) -> DpResult<Self> {
        Ok(CountSpec { epsilon: check_epsilon("epsilon", epsilon)? })
    }

    /// The receipt of a release, known before any data is read.
    pub fn describe(&self) -> ReleaseInfo {
        info(self.epsilon, 1.0, laplace_scale_f64(1, mechanism_epsilon(self.epsilon)))
    }

    pub fn release<R: Rng + ?Sized>(&self, rng: &mut R, n: i64) -> Noisy<i64> {
        let (z, _) = laplace_noise(rng, 1, mechanism_epsilon(self.epsilon));
        Noisy { value: saturate_i64(n as i128 + z), info: self.describe() }
    }
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
        info(self.epsilon, sens as f64, laplace_scale_f64(sens, mechanism_epsilon(self.epsilon)))
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
        let span = lower.abs().max(upper.abs());
        Ok(FloatSumSpec { grid: Grid::new(lower, upper, span, SUM_GRID_BITS), epsilon })
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
        info(self.epsilon, sens as f64 * step, laplace_scale_f64(sens, mechanism_epsilon(self.epsilon)) * step)
    }

    pub fn release<R: Rng + ?Sized>(&self, rng: &mut R, sum_q: i128) -> Noisy<f64> {
        let (z, _) = laplace_noise(rng, self.sensitivity_steps(), mechanism_epsilon(self.epsilon));
        Noisy { value: self.grid.value(sum_q.saturating_add(z)), info: self.describe() }
    }
}

/// dp_avg: a noisy sum of values centred on the middle of the bounds, divided by a noisy count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AvgSpec {
    pub grid: Grid,
    pub epsilon: f64,
    /// The grid integer the values are centred on.
    pub center: i64,
}

impl AvgSpec {
    pub fn new(lower: f64, upper: f64, epsilon: f64) -> DpResult<Self> {
        let (lower, upper) = check_float_bounds(lower, upper)?;
        let epsilon = check_epsilon("epsilon", epsilon)?;
        let grid = Grid::new(lower, upper, upper - lower, AVG_GRID_BITS);
        let center = ((grid.q_lower as i128 + grid.q_upper as i128).div_euclid(2)) as i64;
        Ok(AvgSpec { grid, epsilon, center })
    }

    #[inline]
    pub fn quantize(&self, x: f64) -> DpResult<i64> {
        self.grid.quantize(x, "value")
    }

    /// Sensitivity of the centred sum Σ(q(x) - c), in grid steps.
    pub fn sensitivity_steps(&self) -> u128 {
        let c = self.center as i128;
        ((self.grid.q_upper as i128 - c).max(c - self.grid.q_lower as i128)) as u128
    }

    /// ε spent on the centred sum and on the count; their sum never exceeds the mechanism's ε.
    pub fn split(&self) -> (f64, f64) {
        let eps = mechanism_epsilon(self.epsilon);
        let e_sum = eps * AVG_SUM_SHARE;
        // shave one part in 2^50 so that floating-point rounding cannot push e_sum + e_cnt above ε
        let e_cnt = (eps - e_sum) * (1.0 - f64::EPSILON * 4.0);
        (e_sum, e_cnt)
    }

    pub fn describe(&self) -> ReleaseInfo {
        let sens = self.sensitivity_steps();
        let step = self.grid.step();
        if sens == 0 {
            let mut i = info(self.epsilon, 0.0, 0.0);
            i.count_scale = Some(0.0);
            return i;
        }
        let (e_sum, e_cnt) = self.split();
        let mut i = info(self.epsilon, sens as f64 * step, laplace_scale_f64(sens, e_sum) * step);
        i.count_scale = Some(laplace_scale_f64(1, e_cnt));
        i
    }

    pub fn release<R: Rng + ?Sized>(&self, rng: &mut R, sum_q: i128, n: i64) -> Noisy<f64> {
        let sens = self.sensitivity_steps();
        let step = self.grid.step();
        if sens == 0 {
            // lower and upper fall on the same grid point: every row has that value, nothing to hide
            let value = self.grid.value(self.center as i128).clamp(self.grid.lower, self.grid.upper);
            return Noisy { value, info: self.describe() };
        }
        let (e_sum, e_cnt) = self.split();
        let centred = sum_q - (n as i128) * (self.center as i128);
        let (z_sum, _) = laplace_noise(rng, sens, e_sum);
        let (z_cnt, _) = laplace_noise(rng, 1, e_cnt);
        let noisy_sum = centred.saturating_add(z_sum);
        let noisy_n = (n as i128).saturating_add(z_cnt).max(1);
        // post-processing: divide, shift back, clamp to the bounds
        let mean_steps = self.center as f64 + noisy_sum as f64 / noisy_n as f64;
        let value = (mean_steps * step).clamp(self.grid.lower, self.grid.upper);
        Noisy { value, info: self.describe() }
    }
}
