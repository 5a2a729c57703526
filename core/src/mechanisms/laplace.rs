//! What every release records (its receipt's content) and the discrete Laplace noise that count,
//! sum, average and variance add to an exact integer statistic.
use crate::mechanisms::intervals::discrete_laplace_halfwidth;
use crate::noise::sampling::{discrete_laplace, laplace_scale};
use rand::Rng;

/// Name of the noise mechanism recorded in every receipt.
pub const DISCRETE_LAPLACE: &str = "discrete_laplace";

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
pub(crate) fn laplace_noise<R: Rng + ?Sized>(rng: &mut R, sens: u128, eps: f64) -> (i128, f64) {
    if sens == 0 {
        return (0, 0.0);
    }
    let (t, s) = laplace_scale(sens, eps);
    (discrete_laplace(rng, t, s), t as f64 / s as f64)
}

/// The exact scale sens/ε (as f64) that [`laplace_noise`] uses, without drawing.
pub(crate) fn laplace_scale_f64(sens: u128, eps: f64) -> f64 {
    if sens == 0 {
        return 0.0;
    }
    let (t, s) = laplace_scale(sens, eps);
    t as f64 / s as f64
}

/// The 95% half-width, in steps, of the discrete Laplace noise [`laplace_noise`] draws.
pub(crate) fn laplace_halfwidth_steps(sens: u128, eps: f64) -> u128 {
    if sens == 0 {
        return 0;
    }
    let (t, s) = laplace_scale(sens, eps);
    discrete_laplace_halfwidth(t, s)
}

pub(crate) fn info(epsilon: f64, sensitivity: f64, scale: f64, interval95: f64) -> ReleaseInfo {
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

pub(crate) fn saturate_i64(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// ln P(x1 ≤ V ≤ x2) and E[V | x1 ≤ V ≤ x2] for V continuous Laplace with scale b, x1 ≤ x2,
/// without cancellation in either tail.
pub(crate) fn laplace_interval(x1: f64, x2: f64, b: f64) -> (f64, f64) {
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
