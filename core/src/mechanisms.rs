//! The releases behind dp_count, dp_sum, dp_avg, dp_variance and dp_stddev.
//!
//! Neighbouring relation everywhere: add or remove one row (each row belongs to one person).
//! Every mechanism adds discrete Laplace noise to an exact integer statistic, so it is ε-DP with
//! exactly the stated sensitivity; derivations are in docs/privacy/.
use crate::accounting::mechanism_epsilon;
use crate::error::DpResult;
use crate::grid::{pow2, Grid};
use crate::intervals::{self, discrete_laplace_halfwidth};
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
    /// For dp_avg, dp_variance and dp_stddev: the scale of the noise on the count.
    pub count_scale: Option<f64>,
    /// Half-width h of a 95% interval of the noise, in output units (the units of `scale`): the
    /// smallest grid multiple with P(|noise| ≤ h) ≥ 0.95 for the noise actually added, from public
    /// parameters only (docs/privacy/intervals.md). For a smooth-sensitivity quantile, whose scale
    /// depends on the data, it is the half-width at the receipt's `scale` (the largest possible
    /// one), capped at the span of the bounds; None for the exponential mechanism, which adds no
    /// noise (its rank bound is in the details).
    pub interval95: Option<f64>,
    /// For dp_avg, dp_variance and dp_stddev: the 95% half-width of the count noise, in rows.
    pub count_interval95: Option<f64>,
}

impl ReleaseInfo {
    /// The receipt's half-widths as a JSON object (`interval95`, and `count_interval95` where there
    /// is a noisy count), for the details of a receipt.
    pub fn intervals_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        m.insert("interval95".into(), self.interval95.into());
        if let Some(c) = self.count_interval95 {
            m.insert("count_interval95".into(), c.into());
        }
        serde_json::Value::Object(m)
    }
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

/// The 95% half-width, in steps, of the discrete Laplace noise [`laplace_noise`] draws.
fn laplace_halfwidth_steps(sens: u128, eps: f64) -> u128 {
    if sens == 0 {
        return 0;
    }
    let (t, s) = laplace_scale(sens, eps);
    discrete_laplace_halfwidth(t, s)
}

fn info(epsilon: f64, sensitivity: f64, scale: f64, interval95: f64) -> ReleaseInfo {
    ReleaseInfo {
        mechanism: DISCRETE_LAPLACE,
        epsilon,
        delta: 0.0,
        sensitivity,
        scale,
        count_scale: None,
        interval95: Some(interval95),
        count_interval95: None,
    }
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
        let eps = mechanism_epsilon(self.epsilon);
        info(self.epsilon, 1.0, laplace_scale_f64(1, eps), laplace_halfwidth_steps(1, eps) as f64)
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
        let eps = mechanism_epsilon(self.epsilon);
        info(self.epsilon, sens as f64 * step, laplace_scale_f64(sens, eps) * step, laplace_halfwidth_steps(sens, eps) as f64 * step)
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

/// ln P(x1 ≤ V ≤ x2) and E[V | x1 ≤ V ≤ x2] for V continuous Laplace with scale b, x1 ≤ x2,
/// without cancellation in either tail.
fn laplace_interval(x1: f64, x2: f64, b: f64) -> (f64, f64) {
    let d = x2 - x1;
    if x1 >= 0.0 {
        // P = e^(−x1/b)(1 − e^(−d/b))/2; the conditional mean x1 + b − d/(e^(d/b) − 1)
        let ln_p = -std::f64::consts::LN_2 - x1 / b + (-(-d / b).exp_m1()).ln();
        let mean = if d > b * 1e-6 { x1 + b - d / (d / b).exp_m1() } else { x1 + d / 2.0 };
        (ln_p, mean.clamp(x1, x2))
    } else if x2 <= 0.0 {
        let (ln_p, mean) = laplace_interval(-x2, -x1, b);
        (ln_p, -mean)
    } else {
        let p = -0.5 * (x1 / b).exp_m1() - 0.5 * (-x2 / b).exp_m1();
        let mean = if d > b * 1e-6 {
            // ∫ v f(v) dv = G(x2) − G(x1), G(v) = −(v + b)e^(−v/b)/2 above 0 and (v − b)e^(v/b)/2 below
            (-0.5 * (x2 + b) * (-x2 / b).exp() - 0.5 * (x1 - b) * (x1 / b).exp()) / p
        } else {
            (x1 + x2) / 2.0
        };
        (p.ln(), mean.clamp(x1, x2))
    }
}

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
