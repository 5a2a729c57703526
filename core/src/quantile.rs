//! The releases behind dp_median, dp_percentile and dp_percentile_em.
//!
//! Neighbouring relation: add or remove one row. Values are clamped to [lower, upper] and mapped to
//! a power-of-two grid of about 2^40 steps across the bounds (a per-row monotone map, so neighbours
//! stay neighbours and order statistics stay order statistics); everything after that is integer
//! arithmetic on grid indices, and every random choice is drawn exactly from uniform integers.
//!
//! - **Smooth sensitivity** (Nissim, Raskhodnikova & Smith 2007): the p-quantile plus noise scaled
//!   to a β-smooth upper bound S(x) of its local sensitivity ([`crate::smooth`]):
//!   - δ > 0: Laplace noise of scale 2·S/ε with β = ln(1 + ε/(2 ln(2/δ))), (ε, δ)-DP;
//!   - δ = 0: noise of density ∝ (1 + |z|)^-4 and scale 8·S/ε with β = ε/6, ε-DP.
//!   The continuous noise is rounded to the grid, and that rounded distribution is what is sampled,
//!   exactly. Derivation: docs/privacy/smooth-sensitivity.md.
//! - **Exponential mechanism** (McSherry & Talwar 2007; Smith 2011): a grid point y drawn with
//!   probability ∝ exp(−ε·|#{x < y} − p̃·n| / (2·max(p̃, 1 − p̃))), ε-DP. Derivation:
//!   docs/privacy/percentile-em.md.
use crate::accounting::mechanism_epsilon;
use crate::error::{DpError, DpResult};
use crate::grid::{pow2, Grid};
use crate::mechanisms::ReleaseInfo;
use crate::params::{check_delta, check_epsilon, check_float_bounds, fmt_f64};
use crate::sampling::{bernoulli_exp, dyadic, geometric_exp, LazyUniform};
use crate::smooth::{check_p, p_numerator, rank, smooth_sensitivity_ln, P_SCALE};
use rand::Rng;

/// Mechanism names recorded in receipts.
pub const SMOOTH_SENSITIVITY: &str = "smooth_sensitivity";
pub const EXPONENTIAL: &str = "exponential";

/// Grid resolution: the bounds span 2^40..2^41 grid steps.
pub const QUANTILE_GRID_BITS: i32 = 40;

/// Exponent of the polynomial noise density ∝ (1 + |z|)^-γ of the pure-ε variant.
pub const POLY_GAMMA: f64 = 4.0;

/// Floating-point safety margin η (see docs/privacy/smooth-sensitivity.md, "Arithmetic"): the
/// computed ln S is within η of the true value (each term within 2e-14, and a near-tie misjudged at
/// each of at most 42 levels of the search loses at most two such errors), so S is inflated by
/// e^(2η) and β is reduced by [`beta_margin`].
pub const ETA: f64 = 1.0 / (1u64 << 38) as f64;

/// What the search takes off β: 4η, or a relative 2^-44 where β is so large that 4η would vanish in
/// its rounding.
pub fn beta_margin(beta: f64) -> f64 {
    (4.0 * ETA).max(beta * pow2(-44))
}

/// The smallest noise scale, in grid steps. Raising a scale to a public floor keeps it β-smooth
/// (max(a, c)/max(b, c) ≤ max(a/b, 1)) and keeps every integer below 2^127.
pub const MIN_SCALE_STEPS: f64 = 1.0 / 128.0;

/// Smooth-sensitivity terms below 2^-60 grid steps cannot move the scale above its floor (the
/// factor c/ε is at most 8/1e-9 < 2^33) and are not evaluated.
const PRUNE_LN: f64 = -60.0 * std::f64::consts::LN_2;

/// Margin taken off ε/2 by the exponential mechanism for the rounding of its weights.
const EM_MARGIN: f64 = 1.0 / (1u64 << 40) as f64;

/// Which release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Smooth sensitivity with Laplace noise (δ > 0).
    SmoothLaplace,
    /// Smooth sensitivity with polynomial-tailed noise (δ = 0).
    SmoothPolynomial,
    /// The exponential mechanism over the grid points (δ = 0).
    Exponential,
}

/// The raw parameters of one call, compared bit for bit between the charge and the final function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuantileParams {
    /// 0: smooth sensitivity (the noise follows from δ); 1: exponential mechanism.
    pub method: u64,
    pub p: u64,
    pub lower: u64,
    pub upper: u64,
    pub epsilon: u64,
    pub delta: u64,
}

impl QuantileParams {
    pub fn smooth(p: f64, lower: f64, upper: f64, epsilon: f64, delta: f64) -> Self {
        QuantileParams { method: 0, p: p.to_bits(), lower: lower.to_bits(), upper: upper.to_bits(), epsilon: epsilon.to_bits(), delta: delta.to_bits() }
    }
    pub fn exponential(p: f64, lower: f64, upper: f64, epsilon: f64) -> Self {
        QuantileParams { method: 1, ..Self::smooth(p, lower, upper, epsilon, 0.0) }
    }

    /// Validates the parameters and builds the mechanism.
    pub fn spec(&self) -> DpResult<QuantileSpec> {
        let f = f64::from_bits;
        let (p, l, u, e, d) = (f(self.p), f(self.lower), f(self.upper), f(self.epsilon), f(self.delta));
        match self.method {
            0 => QuantileSpec::smooth(p, l, u, e, d),
            1 => QuantileSpec::exponential(p, l, u, e),
            m => Err(DpError::CorruptState(format!("unknown quantile method {m}"))),
        }
    }
}

/// A validated quantile release.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantileSpec {
    pub method: Method,
    pub p: f64,
    pub grid: Grid,
    pub epsilon: f64,
    pub delta: f64,
    /// Smoothness parameter β of the smooth variants (0 for the exponential mechanism).
    pub beta: f64,
    /// Noise scale per unit of smooth sensitivity (2/ε or 8/ε), at the mechanism's ε.
    pub factor: f64,
}

impl QuantileSpec {
    /// dp_median / dp_percentile: smooth sensitivity, Laplace noise if δ > 0, polynomial if δ = 0.
    pub fn smooth(p: f64, lower: f64, upper: f64, epsilon: f64, delta: f64) -> DpResult<Self> {
        let (p, grid, epsilon) = Self::common(p, lower, upper, epsilon)?;
        let delta = check_delta("delta", delta, true)?;
        let eps = mechanism_epsilon(epsilon);
        let (method, beta, factor) = if delta > 0.0 {
            // like ε, δ runs at the next float below the one charged (its shortest decimal)
            let l = (2.0 / mechanism_epsilon(delta)).ln();
            (Method::SmoothLaplace, (eps / (2.0 * l)).ln_1p().min(eps / 2.0), 2.0 / eps)
        } else {
            // ε = γ·α + (γ − 1)·β with half on each: α = ε/(2γ), β = ε/(2(γ − 1))
            (Method::SmoothPolynomial, eps / (2.0 * (POLY_GAMMA - 1.0)), 2.0 * POLY_GAMMA / eps)
        };
        if beta <= 8.0 * ETA {
            return Err(DpError::invalid(
                "epsilon",
                format!("large enough that the smoothness beta exceeds {:e} at delta {}", 8.0 * ETA, fmt_f64(delta)),
                fmt_f64(epsilon),
            ));
        }
        Ok(QuantileSpec { method, p, grid, epsilon, delta, beta, factor })
    }

    /// dp_percentile_em: the exponential mechanism.
    pub fn exponential(p: f64, lower: f64, upper: f64, epsilon: f64) -> DpResult<Self> {
        let (p, grid, epsilon) = Self::common(p, lower, upper, epsilon)?;
        Ok(QuantileSpec { method: Method::Exponential, p, grid, epsilon, delta: 0.0, beta: 0.0, factor: 0.0 })
    }

    fn common(p: f64, lower: f64, upper: f64, epsilon: f64) -> DpResult<(f64, Grid, f64)> {
        let p = check_p(p)?;
        let (lower, upper) = check_float_bounds(lower, upper)?;
        let epsilon = check_epsilon("epsilon", epsilon)?;
        Ok((p, Grid::new(lower, upper, upper - lower, QUANTILE_GRID_BITS), epsilon))
    }

    /// Number of grid steps between the bounds.
    pub fn steps(&self) -> i64 {
        self.grid.q_upper - self.grid.q_lower
    }

    /// Sensitivity of the utility of the exponential mechanism: max(p̃, 1 − p̃).
    pub fn utility_sensitivity(&self) -> f64 {
        let num = p_numerator(self.p);
        num.max(P_SCALE - num) as f64 / P_SCALE as f64
    }

    /// The receipt, known before any data is read. For smooth sensitivity the actual noise scale is
    /// factor·S(x): it depends on the data and is never recorded; `scale` is its largest possible
    /// value, factor·(upper − lower), and `sensitivity` the global sensitivity upper − lower.
    pub fn describe(&self) -> ReleaseInfo {
        let span = self.steps() as f64 * self.grid.step();
        match self.method {
            Method::Exponential => {
                let du = self.utility_sensitivity();
                ReleaseInfo {
                    mechanism: EXPONENTIAL,
                    epsilon: self.epsilon,
                    delta: 0.0,
                    sensitivity: du,
                    scale: 2.0 * du / mechanism_epsilon(self.epsilon),
                    count_scale: None,
                }
            }
            _ => ReleaseInfo {
                mechanism: SMOOTH_SENSITIVITY,
                epsilon: self.epsilon,
                delta: self.delta,
                sensitivity: span,
                scale: self.factor * span,
                count_scale: None,
            },
        }
    }

    /// Mechanism details for the receipt (JSON): the noise family, β and the scale per unit of
    /// smooth sensitivity, or the utility sensitivity of the exponential mechanism.
    pub fn details(&self) -> String {
        let v = match self.method {
            Method::SmoothLaplace => serde_json::json!({
                "noise": "laplace", "beta": self.beta, "scale_per_smooth_sensitivity": self.factor,
                "p": self.p, "grid_step": self.grid.step(),
            }),
            Method::SmoothPolynomial => serde_json::json!({
                "noise": "polynomial (1+|z|)^-4", "beta": self.beta, "scale_per_smooth_sensitivity": self.factor,
                "p": self.p, "grid_step": self.grid.step(),
            }),
            Method::Exponential => serde_json::json!({
                "utility": "-|#{x < y} - p*n|", "utility_sensitivity": self.utility_sensitivity(),
                "p": self.p, "grid_step": self.grid.step(),
            }),
        };
        v.to_string()
    }

    /// Releases the quantile of `values` (NaN-free; clamped here). Sorts `values` in place and
    /// overwrites them with their grid indices: no memory beyond the slice is used, except the
    /// O(log n) stack of the smooth-sensitivity search.
    pub fn release<R: Rng + ?Sized>(&self, rng: &mut R, values: &mut [f64]) -> f64 {
        values.sort_unstable_by(f64::total_cmp);
        let q0 = self.grid.q_lower;
        for v in values.iter_mut() {
            // monotone, so the slice stays sorted; indices are below 2^42, exact in f64
            *v = (self.grid.quantize_finite(*v) - q0) as f64;
        }
        let j = match self.method {
            Method::Exponential => self.exponential_index(rng, values),
            _ => self.smooth_index(rng, values),
        };
        self.grid.value((q0 + j) as i128).clamp(self.grid.lower, self.grid.upper)
    }

    /// The noise scale, in grid steps, as an exact rational a/b (b a power of two), for sorted
    /// grid indices: factor·S(x) with the safety margins, at least [`MIN_SCALE_STEPS`].
    pub fn scale_steps(&self, idx: &[f64]) -> (u128, u128) {
        let n_steps = self.steps() as f64;
        let ln_s = smooth_sensitivity_ln(idx, self.p, 0.0, n_steps, self.beta - beta_margin(self.beta), PRUNE_LN);
        let s = (ln_s + 2.0 * ETA).exp();
        let t = (self.factor * s * (1.0 + pow2(-50))).max(MIN_SCALE_STEPS);
        let (m, k) = dyadic(t);
        // t ∈ [2^-7, 2^75]: k ≤ 7 + 52 and m·2^-k ≤ 2^76
        if k >= 0 {
            (m as u128, 1u128 << k)
        } else {
            ((m as u128) << (-k), 1)
        }
    }

    fn smooth_index<R: Rng + ?Sized>(&self, rng: &mut R, idx: &[f64]) -> i64 {
        let n_steps = self.steps();
        let m = rank(idx.len(), self.p);
        let f = if m == 0 { 0 } else if m > idx.len() { n_steps } else { idx[m - 1] as i64 };
        let (a, b) = self.scale_steps(idx);
        // |K| ≥ n_steps + 1 lands outside [0, n_steps] whatever f is: one outcome, clamped
        let cap = n_steps as u128 + 1;
        let k = match self.method {
            Method::SmoothLaplace => rounded_laplace(rng, a, b),
            _ => rounded_polynomial(rng, a, b, cap),
        };
        (f as i128 + k).clamp(0, n_steps as i128) as i64
    }

    /// The exponential mechanism over the grid points 0..=N. With d(y) = |#{x < y} − p̃n| and d* its
    /// smallest value, y has weight max(exp(−q·(d(y) − d*)), 2^-40) with
    /// q = (ε/2 − margin)/max(p̃, 1 − p̃), rounded up to an integer multiple of 2^-85. Dividing by
    /// exp(−q·d*) does not change the distribution, and the floor is relative to the largest
    /// weight, which moves by the same factor as every weight between neighbours
    /// (docs/privacy/percentile-em.md). Points between consecutive data share a weight, so one pass
    /// over the n + 1 gaps computes the exact integer total, and a second finds the drawn point.
    fn exponential_index<R: Rng + ?Sized>(&self, rng: &mut R, idx: &[f64]) -> i64 {
        let n = idx.len();
        let n_steps = self.steps();
        let half = mechanism_epsilon(self.epsilon) / 2.0;
        // an absolute margin for the weights' rounding, relative where ε is so large it would vanish
        let q = (half - EM_MARGIN.max(half * EM_MARGIN)) / self.utility_sensitivity();
        let pn = p_numerator(self.p) * n as u128; // p̃·n·2^60, exact
        let gap = move |i: usize| {
            // gap i: the points y with exactly i data below them; its distance d·2^60, exact
            let start = if i == 0 { 0 } else { idx[i - 1] as i64 + 1 };
            let end = if i == n { n_steps } else { idx[i] as i64 };
            let count = (end - start + 1).max(0) as u128;
            (start, count, ((i as u128) * P_SCALE).abs_diff(pn))
        };
        let d_min = (0..=n).map(gap).filter(|g| g.1 > 0).map(|g| g.2).min().expect("some gap has points");
        let weighted = move || {
            (0..=n).map(gap).map(move |(start, count, d)| {
                // d − d* ≥ 0 for gaps with points; an empty gap (between equal values) has no mass,
                // and its distance may be below d*
                let excess = d.saturating_sub(d_min) as f64 / P_SCALE as f64;
                (start, count, em_weight(q * excess))
            })
        };
        let total: u128 = weighted().map(|(_, c, w)| c * w).sum();
        let mut u = rng.random_range(0..total);
        for (start, count, w) in weighted() {
            let mass = count * w;
            if u < mass {
                return start + (u / w) as i64;
            }
            u -= mass;
        }
        unreachable!("the draw is below the total")
    }
}

/// ceil(2^85·max(e^-x, 2^-40)·(1 + 2^-45)): an integer in [2^45, 2^85 + 2^41]. The upward
/// margin covers the float error of exp; the ceiling adds at most 2^-45 relative.
fn em_weight(x: f64) -> u128 {
    const FLOOR: u128 = 1 << 45;
    if !(x < 40.0 * std::f64::consts::LN_2) {
        return FLOOR;
    }
    let w = ((-x).exp() * pow2(85) * (1.0 + pow2(-45))).ceil();
    (w as u128).max(FLOOR)
}

/// round(t·Z) for Z standard Laplace and t = a/b, exactly: 0 with probability 1 − e^(−1/(2t));
/// otherwise a sign and a magnitude m ≥ 1 with P(|K| ≥ m) = e^(−(m − 1/2)/t).
pub fn rounded_laplace<R: Rng + ?Sized>(rng: &mut R, a: u128, b: u128) -> i128 {
    if !bernoulli_exp(rng, b, 2 * a) {
        return 0;
    }
    let m = 1 + geometric_exp(rng, a, b).min(i128::MAX as u128 - 1);
    if rng.random::<bool>() {
        -(m as i128)
    } else {
        m as i128
    }
}

/// round(t·Z) for Z with density (3/2)(1 + |z|)^-4 and t = a/b, exactly, with magnitudes of `cap`
/// or more reported as `cap`. P(|K| ≥ m) = (2a / (2a + b(2m − 1)))³ for m ≥ 1, which is
/// P(W < 2a / (2a + b(2m − 1))) for W the largest of three uniforms: |K| is the largest m that
/// passes, found by doubling then bisection on the same lazily drawn W.
pub fn rounded_polynomial<R: Rng + ?Sized>(rng: &mut R, a: u128, b: u128, cap: u128) -> i128 {
    let mut w = [LazyUniform::new(), LazyUniform::new(), LazyUniform::new()];
    let mut passes = |m: u128| -> bool {
        let den = 2 * a + b * (2 * m - 1);
        // all three below the threshold (evaluate all: each is a fixed uniform, order is irrelevant)
        w.iter_mut().fold(true, |all, u| u.less_than(rng, 2 * a, den) && all)
    };
    if !passes(1) {
        return 0;
    }
    let (mut lo, mut hi) = (1u128, None);
    while lo < cap {
        let next = (lo * 2).min(cap);
        if passes(next) {
            lo = next;
        } else {
            hi = Some(next);
            break;
        }
    }
    if let Some(mut hi) = hi {
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if passes(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
    }
    if rng.random::<bool>() {
        -(lo as i128)
    } else {
        lo as i128
    }
}
