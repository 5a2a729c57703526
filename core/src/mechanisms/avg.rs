//! dp_avg: a noisy centred sum over a noisy count, released as the posterior mean, or over a
//! public count (docs/privacy/avg.md).
use crate::accounting::charge::mechanism_epsilon;
use crate::error::DpResult;
use crate::noise::grid::Grid;
use crate::mechanisms::intervals::{self};
use crate::params::{check_epsilon, check_float_bounds};
use crate::noise::sampling::laplace_scale;
use rand::Rng;
use crate::mechanisms::laplace::*;
use crate::mechanisms::sum::sum_grid;

/// Grid resolution of averages whose bounds lie far from 0 next to their width: the bound width
/// spans 2^33..2^34 grid steps.
pub const AVG_GRID_BITS: i32 = 33;

/// The grid of dp_avg with checked bounds [lower, upper]: dp_sum's grid for the same bounds
/// ([`sum_grid`]) wherever the bound width spans at least 2^32 of its steps, which it does whenever
/// the bounds hold 0 (one grid value per row then serves both aggregates, which the exact query of a
/// DP level over Citus shares); else, for bounds far from 0 next to their width, a grid of
/// 2^33..2^34 steps across the width.
pub fn avg_grid(lower: f64, upper: f64) -> Grid {
    let sum = sum_grid(lower, upper);
    if sum.q_upper as i128 - sum.q_lower as i128 >= 1i128 << 32 {
        sum
    } else {
        Grid::new(lower, upper, upper - lower, AVG_GRID_BITS)
    }
}

/// Share of ε that dp_avg spends on the centred sum; the rest goes to the count
/// (docs/privacy/avg.md explains the choice).
pub const AVG_SUM_SHARE: f64 = 0.7;

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
        let grid = avg_grid(lower, upper);
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
            let mut i = info(self.epsilon, 0.0, 0.0, 0.0);
            i.count_scale = Some(0.0);
            i.count_interval95 = Some(0.0);
            return i;
        }
        let (e_sum, e_cnt) = self.split();
        let mut i = info(
            self.epsilon,
            sens as f64 * step,
            laplace_scale_f64(sens, e_sum) * step,
            laplace_halfwidth_steps(sens, e_sum) as f64 * step,
        );
        i.count_scale = Some(laplace_scale_f64(1, e_cnt));
        i.count_interval95 = Some(laplace_halfwidth_steps(1, e_cnt) as f64);
        i
    }

    /// The mechanism proper: the noisy centred sum S̃ = Σ(q(x) − c) + Z₁ (grid steps) and the noisy
    /// count ñ = n + Z₂, from the exact Σq(x) and n. Everything after it is post-processing.
    /// Requires a sensitivity above 0.
    pub fn noisy_statistics<R: Rng + ?Sized>(&self, rng: &mut R, sum_q: i128, n: i64) -> (i128, i128) {
        let (e_sum, e_cnt) = self.split();
        let centred = sum_q - (n as i128) * (self.center as i128);
        let (z_sum, _) = laplace_noise(rng, self.sensitivity_steps(), e_sum);
        let (z_cnt, _) = laplace_noise(rng, 1, e_cnt);
        (centred.saturating_add(z_sum), (n as i128).saturating_add(z_cnt))
    }

    /// The exact rational scales (t, s) of the sum noise (grid steps) and the count noise (rows).
    pub fn scales(&self) -> [(u128, u128); 2] {
        let (e_sum, e_cnt) = self.split();
        [laplace_scale(self.sensitivity_steps().max(1), e_sum), laplace_scale(1, e_cnt)]
    }

    /// The released mean from the noisy statistics (post-processing, docs/privacy/avg.md): the
    /// posterior mean of the centred mean given (S̃, ñ) ([`avg_posterior_mean`]: a uniform prior
    /// over the bounds, a flat prior over the count, the noise scales of the release), shifted back
    /// and clamped to the bounds. For ñ large next to the count noise it is S̃/ñ; for a small or
    /// negative ñ it moves toward the centre instead of dividing by a tiny count.
    pub fn estimate(&self, noisy_sum: i128, noisy_n: i128) -> f64 {
        let sens = self.sensitivity_steps();
        if sens == 0 {
            return self.grid.value(self.center as i128).clamp(self.grid.lower, self.grid.upper);
        }
        let [(ts, ss), (tn, sn)] = self.scales();
        let m = avg_posterior_mean(noisy_sum as f64, noisy_n as f64, sens as f64, ts as f64 / ss as f64, tn as f64 / sn as f64);
        let m = if m.is_finite() { m } else { noisy_sum as f64 / noisy_n.max(1) as f64 };
        ((self.center as f64 + m) * self.grid.step()).clamp(self.grid.lower, self.grid.upper)
    }

    /// The plain ratio estimate c + S̃/max(ñ, 1), clamped: dp_avg's estimator before the posterior
    /// mean (kept for comparison; it collapses to a bound when ñ is small next to its noise).
    pub fn ratio_estimate(&self, noisy_sum: i128, noisy_n: i128) -> f64 {
        let noisy_n = noisy_n.max(1);
        let mean_steps = self.center as f64 + noisy_sum as f64 / noisy_n as f64;
        (mean_steps * self.grid.step()).clamp(self.grid.lower, self.grid.upper)
    }

    /// dp_avg over a table whose row count n is public (declared for the table, or given): all of ε
    /// goes to the centred sum. See [`PublicCountAvgSpec`].
    pub fn with_public_count(&self, count: i64) -> DpResult<PublicCountAvgSpec> {
        PublicCountAvgSpec::new(*self, count)
    }

    /// An approximate 95% half-width of the released mean, from the noisy statistics only
    /// (post-processing; never the true n): the delta method linearises the error as
    /// (Z₁ − m̃·Z₂)/ñ, m̃ = S̃/ñ the noisy centred mean, and the half-width is the 95% point of that
    /// sum of two Laplace variables ([`intervals::laplace_sum_halfwidth`]), at most the width of the
    /// bounds. Approximate: it assumes ñ large next to the count noise, where the released posterior
    /// mean is S̃/ñ; for small ñ the estimate's error is mostly its bias toward the centre, which this
    /// does not describe (docs/privacy/intervals.md).
    pub fn mean_interval95(&self, noisy_sum: i128, noisy_n: i128) -> f64 {
        let sens = self.sensitivity_steps();
        let width = self.grid.upper - self.grid.lower;
        if sens == 0 {
            return 0.0;
        }
        let step = self.grid.step();
        let (e_sum, e_cnt) = self.split();
        let n = noisy_n.max(1) as f64;
        let m = (noisy_sum as f64 / n).clamp(-(sens as f64), sens as f64);
        let h = intervals::laplace_sum_halfwidth(&[laplace_scale_f64(sens, e_sum) / n, m * laplace_scale_f64(1, e_cnt) / n]);
        (h * step).min(width)
    }

    pub fn release<R: Rng + ?Sized>(&self, rng: &mut R, sum_q: i128, n: i64) -> Noisy<f64> {
        if self.sensitivity_steps() == 0 {
            // lower and upper fall on the same grid point: every row has that value, nothing to hide
            let value = self.grid.value(self.center as i128).clamp(self.grid.lower, self.grid.upper);
            return Noisy { value, info: self.describe() };
        }
        let (noisy_sum, noisy_n) = self.noisy_statistics(rng, sum_q, n);
        Noisy { value: self.estimate(noisy_sum, noisy_n), info: self.describe() }
    }
}

/// Points of the count grid over which [`avg_posterior_mean`] integrates.
pub const POSTERIOR_POINTS: usize = 256;

/// Half-width of that grid around the noisy count, in count-noise scales (the likelihood there is
/// e^-40 of its peak).
pub const POSTERIOR_SPAN: f64 = 40.0;

/// From ñ ≥ this many count-noise scales on, [`avg_posterior_mean`] takes the count as known (ñ).
pub const POSTERIOR_POINT_COUNT: f64 = 1000.0;

/// dp_avg's estimator (post-processing of the noisy statistics, docs/privacy/avg.md): the posterior
/// mean of the centred mean m ∈ [−h, h] (grid steps) given the noisy centred sum s and noisy count
/// ñ, for a uniform prior of m over the bounds, a flat prior of the count n over (0, ∞) and the
/// release's noises taken as continuous Laplace of scales `b_sum` (steps) and `b_cnt` (rows):
///
/// E[m | s, ñ] = Σ_k w_k·(s + E[V | I_k])/n_k / Σ_k w_k,
/// w_k = e^(−|ñ − n_k|/b_cnt)·P(V ∈ I_k)/n_k, I_k = [−n_k·h − s, n_k·h − s], V ~ Laplace(b_sum),
///
/// over [`POSTERIOR_POINTS`] counts n_k spaced evenly (midpoints) across
/// [max(0, ñ − 40·b_cnt), max(ñ, 0) + 40·b_cnt]. The inner integral over m is exact: given n, S̃ is
/// n·m plus Laplace noise, so m's posterior is that noise's density restricted to an interval.
/// From ñ ≥ 1000·b_cnt on, the single count ñ is used (the average over n would differ by a relative
/// O((b_cnt/ñ)²) ≤ 10^-6). Always within [−h, h].
pub fn avg_posterior_mean(s: f64, n: f64, h: f64, b_sum: f64, b_cnt: f64) -> f64 {
    if n >= POSTERIOR_POINT_COUNT * b_cnt {
        // the count is known to a relative 10^-3: averaging over it would move the result by a
        // relative O((b_cnt/ñ)²) ≤ 10^-6, far below the noise; take n = ñ
        let (_, ev) = laplace_interval(-n * h - s, n * h - s, b_sum);
        return ((s + ev) / n).clamp(-h, h);
    }
    let lo = (n - POSTERIOR_SPAN * b_cnt).max(0.0);
    let hi = n.max(0.0) + POSTERIOR_SPAN * b_cnt;
    let dn = (hi - lo) / POSTERIOR_POINTS as f64;
    let mut terms = [(0.0f64, 0.0f64); POSTERIOR_POINTS];
    let mut top = f64::NEG_INFINITY;
    for (k, t) in terms.iter_mut().enumerate() {
        let nk = lo + (k as f64 + 0.5) * dn;
        let (ln_p, ev) = laplace_interval(-nk * h - s, nk * h - s, b_sum);
        let lw = -(n - nk).abs() / b_cnt + ln_p - nk.ln();
        *t = (lw, ((s + ev) / nk).clamp(-h, h));
        top = top.max(lw);
    }
    let (mut num, mut den) = (0.0, 0.0);
    for &(lw, m) in &terms {
        let w = (lw - top).exp();
        num += w * m;
        den += w;
    }
    (num / den).clamp(-h, h)
}

/// dp_avg with a public row count n (declared by the DBA for the table, or given): the noisy
/// centred sum S̃ = Σ(q(x) − c) + DLap(Δ/ε) with all of ε, and the release clamp(c + S̃/n). ε-DP
/// under add/remove neighbours for any fixed n: n is a constant of the release, not a statistic of
/// the rows. It must be public, that is fixed without looking at the rows this query reads (a count
/// computed from them would be released without noise); when it differs from the number of rows, the
/// release estimates c + Σ(clamped value − c)/n, the mean pulled toward (n above the true count) or
/// pushed away from (n below it) the centre c, instead of the mean (docs/privacy/avg.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PublicCountAvgSpec {
    pub avg: AvgSpec,
    /// The public count, at least 1.
    pub count: i64,
}

impl PublicCountAvgSpec {
    pub fn new(avg: AvgSpec, count: i64) -> DpResult<Self> {
        if count < 1 {
            return Err(crate::error::DpError::invalid("count", "a whole number of rows, at least 1", count));
        }
        Ok(PublicCountAvgSpec { avg, count })
    }

    /// The receipt: the centred sum's sensitivity, scale Δ/ε and 95% half-width (sum units); the
    /// count is not noised (count_scale and count_interval95 are 0).
    pub fn describe(&self) -> ReleaseInfo {
        let sens = self.avg.sensitivity_steps();
        let step = self.avg.grid.step();
        let eps = mechanism_epsilon(self.avg.epsilon);
        let mut i = info(self.avg.epsilon, sens as f64 * step, laplace_scale_f64(sens, eps) * step, laplace_halfwidth_steps(sens, eps) as f64 * step);
        i.count_scale = Some(0.0);
        i.count_interval95 = Some(0.0);
        i
    }

    /// The exact 95% half-width of the released mean's noise, Z/n in output units (the clamp only
    /// shortens the error): the sum's half-width over n, at most the width of the bounds.
    pub fn mean_interval95(&self) -> f64 {
        let sens = self.avg.sensitivity_steps();
        let h = laplace_halfwidth_steps(sens, mechanism_epsilon(self.avg.epsilon)) as f64 * self.avg.grid.step();
        (h / self.count as f64).min(self.avg.grid.upper - self.avg.grid.lower)
    }

    /// Details for the receipt (JSON).
    pub fn details(&self) -> String {
        serde_json::json!({"count": "public", "public_count": self.count, "mean_interval95": self.mean_interval95()}).to_string()
    }

    /// The release from the exact Σq(x) and number of rows n of the accumulator (the same state as
    /// dp_avg: `Acc` with `Params::avg`); n enters only the centred sum Σ(q(x) − c) = Σq(x) − n·c.
    pub fn release<R: Rng + ?Sized>(&self, rng: &mut R, sum_q: i128, n: i64) -> Noisy<f64> {
        let a = &self.avg;
        let sens = a.sensitivity_steps();
        if sens == 0 {
            return Noisy { value: a.grid.value(a.center as i128).clamp(a.grid.lower, a.grid.upper), info: self.describe() };
        }
        let centred = sum_q - (n as i128) * (a.center as i128);
        let (z, _) = laplace_noise(rng, sens, mechanism_epsilon(a.epsilon));
        let mean_steps = a.center as f64 + centred.saturating_add(z) as f64 / self.count as f64;
        Noisy { value: (mean_steps * a.grid.step()).clamp(a.grid.lower, a.grid.upper), info: self.describe() }
    }
}
