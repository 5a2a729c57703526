//! dp_variance and dp_stddev: noisy count, centred sum and shifted sum of squares with a joint
//! per-row privacy loss (docs/privacy/variance.md).
use crate::accounting::charge::mechanism_epsilon;
use crate::error::DpResult;
use crate::noise::grid::{pow2, Grid};
use crate::mechanisms::intervals::{self, discrete_laplace_halfwidth};
use crate::params::{check_epsilon, check_float_bounds};
use crate::noise::sampling::{discrete_laplace, laplace_scale};
use rand::Rng;
use crate::mechanisms::laplace::*;

/// Grid resolution of variances: the bound width spans 2^31..2^32 grid steps, so a row's squared
/// deviation from the centre is below 2^62 + 2^33 steps² and the exact sum of squares of up to 2^63
/// rows fits in an i128.
pub const VAR_GRID_BITS: i32 = 31;

/// Relative privacy-loss weights of dp_variance's three statistics, before normalisation: the count
/// (per row), the centred sum (per half-width H) and the shifted sum of squares (per H²)
/// (docs/privacy/variance.md explains the choice).
pub const VAR_WEIGHTS: (f64, f64, f64) = (0.40, 0.36, 0.76);

/// The shift κ of the squares, as a fraction of H²: each row adds (x − c)² − κ to the third statistic.
pub const VAR_KAPPA: f64 = 0.7;

/// The largest privacy loss of one row, max over t ∈ [0, 1] of e1·t + e2·|t² − k|: the loss of the
/// centred sum and of the shifted sum of squares together when a row at distance t·H from the centre
/// is added or removed, with e1 = H/b1 and e2 = H²/b2 (b1, b2 the Laplace scales). For t² ≥ k the
/// function increases to t = 1; below, it is concave with its top at t = e1/(2e2).
pub fn variance_row_loss(e1: f64, e2: f64, k: f64) -> f64 {
    let at_bound = e1 + e2 * (1.0 - k);
    let t = e1 / (2.0 * e2);
    let inner = if t < k.sqrt() { e2 * k + e1 * e1 / (4.0 * e2) } else { e1 * k.sqrt() };
    at_bound.max(inner).max(e2 * k)
}

/// dp_variance and dp_stddev: noisy count n, centred sum Σ(q(x) − c) and shifted sum of squares
/// Σ((q(x) − c)² − κ), each with its own discrete Laplace noise, whose privacy losses are accounted
/// jointly per row (a row moves all three at once, but not all by their largest amounts); the sample
/// variance is computed from them (post-processing) and clamped to [0, ((upper − lower)/2)²].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VarianceSpec {
    pub grid: Grid,
    pub epsilon: f64,
    /// The grid integer the values are centred on.
    pub center: i64,
    /// H = max(q(upper) − c, c − q(lower)): the largest |q(x) − c|, at most 2^31 + 1. (u64, not u128:
    /// the spec lives in an 8-byte-aligned aggregate state.)
    pub half: u64,
    /// κ = round(VAR_KAPPA·H²), an integer below 2^62.
    pub kappa: u64,
    /// Release the standard deviation (the square root) instead of the variance.
    pub stddev: bool,
}

impl VarianceSpec {
    pub fn new(lower: f64, upper: f64, epsilon: f64, stddev: bool) -> DpResult<Self> {
        let (lower, upper) = check_float_bounds(lower, upper)?;
        let epsilon = check_epsilon("epsilon", epsilon)?;
        let grid = Grid::new(lower, upper, upper - lower, VAR_GRID_BITS);
        let center = ((grid.q_lower as i128 + grid.q_upper as i128).div_euclid(2)) as i64;
        let half = ((grid.q_upper as i128 - center as i128).max(center as i128 - grid.q_lower as i128)) as u64;
        let kappa = (VAR_KAPPA * (half as f64) * (half as f64)).round() as u64;
        Ok(VarianceSpec { grid, epsilon, center, half, kappa, stddev })
    }

    #[inline]
    pub fn quantize(&self, x: f64) -> DpResult<i64> {
        self.grid.quantize(x, "value")
    }

    /// The ε of the count, of the centred sum (per H) and of the shifted sum of squares (per H²):
    /// the weights scaled so that the loss of one row, 1/b0 + max over rows of (|y|/b1 + |y² − κ|/b2),
    /// is ε (less 2^-40 relative, for rounding).
    pub fn shares(&self) -> (f64, f64, f64) {
        let (w0, w1, w2) = VAR_WEIGHTS;
        let k = self.kappa_fraction();
        let total = w0 + variance_row_loss(w1, w2, k);
        let eps = mechanism_epsilon(self.epsilon) * (1.0 - pow2(-40)) / total;
        (w0 * eps, w1 * eps, w2 * eps)
    }

    /// κ/H², the shift as a fraction of the largest squared deviation (VAR_KAPPA up to rounding).
    pub fn kappa_fraction(&self) -> f64 {
        if self.half == 0 {
            return VAR_KAPPA;
        }
        self.kappa as f64 / self.h2() as f64
    }

    /// H², exactly.
    pub fn h2(&self) -> u128 {
        self.half as u128 * self.half as u128
    }

    /// The exact rational Laplace scales (t, s) of the count, the centred sum and the shifted sum of
    /// squares, in rows, grid steps and grid steps², each at least sensitivity/ε-share.
    pub fn scales(&self) -> [(u128, u128); 3] {
        let (e0, e1, e2) = self.shares();
        [laplace_scale(1, e0), laplace_scale(self.half as u128, e1), laplace_scale(self.h2(), e2)]
    }

    /// The privacy loss of adding or removing one row under the exact scales:
    /// 1/b0 + max over t ∈ [0, 1] of (H/b1)·t + (H²/b2)·|t² − κ/H²|. At most the mechanism's ε.
    pub fn row_loss(&self) -> f64 {
        if self.half == 0 {
            return 0.0;
        }
        let [(t0, s0), (t1, s1), (t2, s2)] = self.scales();
        let h = self.half as f64;
        let (b0, b1, b2) = (t0 as f64 / s0 as f64, t1 as f64 / s1 as f64, t2 as f64 / s2 as f64);
        1.0 / b0 + variance_row_loss(h / b1, h * h / b2, self.kappa_fraction())
    }

    /// The largest variance of values in the bounds, ((upper − lower)/2)²: the top of the clamp.
    pub fn max_variance(&self) -> f64 {
        let h = (self.grid.upper - self.grid.lower) / 2.0;
        h * h
    }

    /// The receipt: the sensitivity and noise scale of the shifted sum of squares, in output units²
    /// (max(κ, H² − κ)·step² and b2·step²), and the count's noise scale; the centred sum's are in
    /// [`VarianceSpec::details`]. Known before any data is read.
    pub fn describe(&self) -> ReleaseInfo {
        if self.half == 0 {
            let mut i = info(self.epsilon, 0.0, 0.0, 0.0);
            i.count_scale = Some(0.0);
            i.count_interval95 = Some(0.0);
            return i;
        }
        let step = self.grid.step();
        let [(t0, s0), _, (t2, s2)] = self.scales();
        let kappa = self.kappa as u128;
        let sens = kappa.max(self.h2() - kappa) as f64 * step * step;
        let mut i = info(
            self.epsilon,
            sens,
            t2 as f64 / s2 as f64 * step * step,
            discrete_laplace_halfwidth(t2, s2) as f64 * step * step,
        );
        i.count_scale = Some(t0 as f64 / s0 as f64);
        i.count_interval95 = Some(discrete_laplace_halfwidth(t0, s0) as f64);
        i
    }

    /// The 95% half-widths of the three noises, in rows, output units and output units²: count,
    /// centred sum, shifted sum of squares (0 for all when H = 0).
    pub fn intervals95(&self) -> (f64, f64, f64) {
        if self.half == 0 {
            return (0.0, 0.0, 0.0);
        }
        let step = self.grid.step();
        let [(t0, s0), (t1, s1), (t2, s2)] = self.scales();
        (
            discrete_laplace_halfwidth(t0, s0) as f64,
            discrete_laplace_halfwidth(t1, s1) as f64 * step,
            discrete_laplace_halfwidth(t2, s2) as f64 * step * step,
        )
    }

    /// An approximate 95% half-width of the released variance (or standard deviation), from the
    /// noisy statistics only (post-processing; never the true n). For the variance, the delta
    /// method: the 95% point of the estimate's error linearised in (Ñ, S̃, T̃), a sum of three Laplace
    /// variables ([`intervals::laplace_sum_halfwidth`]), at most the top of the clamp. For the standard deviation, the larger
    /// distance from its value to the square roots of the variance interval's ends. Approximate: it
    /// assumes Ñ large next to the count noise (docs/privacy/intervals.md).
    pub fn estimate_interval95(&self, noisy_n: i128, noisy_sum: i128, noisy_squares: i128) -> f64 {
        if self.half == 0 {
            return 0.0;
        }
        let step2 = self.grid.step() * self.grid.step();
        let [(t0, s0), (t1, s1), (t2, s2)] = self.scales();
        let b = |t: u128, s: u128| t as f64 / s as f64;
        let m = noisy_n.max(2) as f64;
        let (sum, sq) = (noisy_sum as f64, noisy_squares as f64);
        // population variance p = T/m + κ − S²/m², sample variance p·m/(m − 1)
        let d_t = 1.0 / m;
        let d_s = -2.0 * sum / (m * m);
        let d_n = -sq / (m * m) + 2.0 * sum * sum / (m * m * m);
        let f = m / (m - 1.0);
        let scales = [f * d_t * b(t2, s2), f * d_s * b(t1, s1), f * d_n * b(t0, s0)];
        let top = self.max_variance();
        let h = (intervals::laplace_sum_halfwidth(&scales) * step2).min(top);
        if !self.stddev {
            return h;
        }
        let est = self.estimate(noisy_n, noisy_sum, noisy_squares);
        let sd = est.sqrt();
        ((est + h).min(top).sqrt() - sd).max(sd - (est - h).max(0.0).sqrt())
    }

    /// Mechanism details for the receipt (JSON): the three statistics with their sensitivities and
    /// noise scales in output units, the centre and shift, and the estimate.
    pub fn details(&self) -> String {
        let step = self.grid.step();
        let h = self.half as f64 * step;
        let (b0, b1, b2) = if self.half == 0 {
            (0.0, 0.0, 0.0)
        } else {
            let [(t0, s0), (t1, s1), (t2, s2)] = self.scales();
            (t0 as f64 / s0 as f64, t1 as f64 / s1 as f64 * step, t2 as f64 / s2 as f64 * step * step)
        };
        let (h0, h1, h2) = self.intervals95();
        serde_json::json!({
            "estimate": if self.stddev { "sample standard deviation" } else { "sample variance" },
            "center": self.center as f64 * step,
            "count": {"sensitivity": 1, "scale": b0, "interval95": h0},
            "centred_sum": {"sensitivity": h, "scale": b1, "interval95": h1},
            "shifted_sum_of_squares": {"shift": self.kappa as f64 * step * step, "range": [-(self.kappa as f64) * step * step, (self.h2() - self.kappa as u128) as f64 * step * step], "scale": b2, "interval95": h2},
            "row_loss": "1/count.scale + max over rows of |x - center|/centred_sum.scale + |(x - center)^2 - shift|/shifted_sum_of_squares.scale",
            "grid_step": step,
        })
        .to_string()
    }

    /// The sample variance of the clamped values from the noisy statistics (post-processing):
    /// m = max(ñ, 2), mean m₁ = S̃₁/m, population variance T̃/m + κ − m₁², times m/(m − 1), clamped
    /// to [0, ((upper − lower)/2)²]. In output units².
    pub fn estimate(&self, noisy_n: i128, noisy_sum: i128, noisy_squares: i128) -> f64 {
        let step = self.grid.step();
        let m = noisy_n.max(2) as f64;
        let mean = noisy_sum as f64 / m;
        let pop = noisy_squares as f64 / m + self.kappa as f64 - mean * mean;
        (pop * m / (m - 1.0) * step * step).clamp(0.0, self.max_variance())
    }

    /// The mechanism proper, from the exact statistics sum_q = Σ q(x), sum_sq = Σ (q(x) − c)² and n
    /// rows: the noisy count, centred sum Σ(q(x) − c) and shifted sum of squares Σ((q(x) − c)² − κ).
    /// Everything after it is post-processing. Requires H > 0.
    pub fn noisy_statistics<R: Rng + ?Sized>(&self, rng: &mut R, sum_q: i128, sum_sq: i128, n: i64) -> (i128, i128, i128) {
        let [(t0, s0), (t1, s1), (t2, s2)] = self.scales();
        let n = n as i128;
        let centred = sum_q - n * self.center as i128;
        let shifted = sum_sq - n * self.kappa as i128;
        (
            n.saturating_add(discrete_laplace(rng, t0, s0)),
            centred.saturating_add(discrete_laplace(rng, t1, s1)),
            shifted.saturating_add(discrete_laplace(rng, t2, s2)),
        )
    }

    /// The release from the exact statistics (see [`VarianceSpec::noisy_statistics`]): the sample
    /// variance, or its square root for dp_stddev.
    pub fn release<R: Rng + ?Sized>(&self, rng: &mut R, sum_q: i128, sum_sq: i128, n: i64) -> Noisy<f64> {
        if self.half == 0 {
            // the bounds fall on one grid point: every row has that value
            return Noisy { value: 0.0, info: self.describe() };
        }
        let (noisy_n, noisy_sum, noisy_sq) = self.noisy_statistics(rng, sum_q, sum_sq, n);
        let var = self.estimate(noisy_n, noisy_sum, noisy_sq);
        Noisy { value: if self.stddev { var.sqrt() } else { var }, info: self.describe() }
    }
}
