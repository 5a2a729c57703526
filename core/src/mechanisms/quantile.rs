//! The releases behind dp_median, dp_percentile and dp_percentile_em.
//!
//! Neighbouring relation: add or remove one row. Values are clamped to [lower, upper] and mapped to
//! a power-of-two grid of about 2^40 steps across the bounds (a per-row monotone map, so neighbours
//! stay neighbours and order statistics stay order statistics); everything after that is integer
//! arithmetic on grid indices, and every random choice is drawn exactly from uniform integers.
//!
//! The integer overloads (an integer column with integer bounds: the query decides, never the data)
//! use the grid of the integers instead ([`Grid::integers`]): spacing 1, coarsened to a power of
//! two only where the bounds span more than 2^41 integers. Its points are the integer candidates,
//! an integer's rank interval covers all of its ties, and every release is an integer. Both
//! mechanisms and their derivations are the same on any power-of-two grid (docs/privacy/
//! percentile-em.md and smooth-sensitivity.md, "Integer columns").
//!
//! - **Smooth sensitivity** (Nissim, Raskhodnikova & Smith 2007): the p-quantile plus noise scaled
//!   to a β-smooth upper bound S(x) of its local sensitivity ([`crate::mechanisms::smooth`]), each calibrated to
//!   its exact privacy loss:
//!   - δ > 0: Laplace noise of scale 2·S/ε, β the largest with exact δ at most the δ charged
//!     ([`laplace_calibration`]), (ε, δ)-DP;
//!   - δ = 0: noise of density ∝ (1 + |z|)^-4 and scale S/a with β = ε/3 and a the largest with
//!     exact loss ε ([`polynomial_calibration`]; a ≈ 0.253 at ε = 1), ε-DP.
//!   The continuous noise is rounded to the grid, and that rounded distribution is what is sampled,
//!   exactly. Derivation: docs/privacy/smooth-sensitivity.md.
//! - **Exponential mechanism** (McSherry & Talwar 2007; Smith 2011): a grid point y drawn with
//!   probability ∝ exp(−ε·d(y) / (2·max(p̃, 1 − p̃))), d(y) = |(1 − p̃)·#{x < y} − p̃·#{x > y}|, the
//!   distance from p̃·n to the point #{x < y} + p̃·#{x = y} of the ranks y occupies, ε-DP.
//!   Derivation: docs/privacy/percentile-em.md.
//! - **Permute-and-flip** (McKenna & Sheldon 2020) in place of the exponential mechanism on grids of
//!   at most [`PF_MAX_POINTS`] points (integer columns with narrow bounds: ages, ratings, years): the
//!   same utility and the same ε, never less accurate in expectation, and more accurate where a few
//!   candidates compete at middling acceptance probabilities. Derivation:
//!   docs/privacy/percentile-em.md, "Permute-and-flip".
use crate::accounting::charge::mechanism_epsilon;
use crate::error::{DpError, DpResult};
use crate::noise::grid::{pow2, Grid};
use crate::mechanisms::intervals;
use crate::mechanisms::ReleaseInfo;
use crate::params::{check_delta, check_epsilon, check_float_bounds, check_integer_bounds, fmt_f64, largest_where};
use crate::noise::sampling::{bernoulli_exp, dyadic, dyadic_at_most, geometric_exp, AcceptedUniform, LazyUniform};
use crate::mechanisms::smooth::{check_p, p_numerator, rank, smooth_sensitivity_ln, P_SCALE};
use rand::Rng;

/// Mechanism names recorded in receipts.
pub const SMOOTH_SENSITIVITY: &str = "smooth_sensitivity";
pub const EXPONENTIAL: &str = "exponential";
pub const PERMUTE_AND_FLIP: &str = "permute_and_flip";

/// The largest number of grid points on which the exponential-mechanism releases run permute-and-flip
/// (one exact coin per point: about 0.25 ms at this size, 3.9 ms at 2^16). Decided by the bounds and the column's type
/// alone. Wider grids keep the exponential mechanism, whose categories cost O(n) whatever the grid;
/// there most points lie in long runs of equal weight and the two distributions nearly coincide.
pub const PF_MAX_POINTS: i64 = 1 << 12;

/// Significant bits kept of permute-and-flip's rate q (rounded down): q·(d − m) is then an exact
/// rational with a numerator below 2^128 for any n below 2^44 rows (also the private bin edges').
pub const PF_RATE_BITS: u32 = 24;

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
    /// The exponential mechanism over the grid points (δ = 0); permute-and-flip on grids of at most
    /// [`PF_MAX_POINTS`] points.
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
    /// The grid of the integers (an integer overload: integer value and bounds), else the fine
    /// power-of-two grid of about 2^40 steps.
    pub integer: bool,
}

impl QuantileParams {
    pub fn smooth(p: f64, lower: f64, upper: f64, epsilon: f64, delta: f64) -> Self {
        QuantileParams {
            method: 0, p: p.to_bits(), lower: lower.to_bits(), upper: upper.to_bits(), epsilon: epsilon.to_bits(), delta: delta.to_bits(),
            integer: false,
        }
    }
    pub fn exponential(p: f64, lower: f64, upper: f64, epsilon: f64) -> Self {
        QuantileParams { method: 1, ..Self::smooth(p, lower, upper, epsilon, 0.0) }
    }
    /// The same release on the grid of the integers (the integer overloads).
    pub fn on_integers(self) -> Self {
        QuantileParams { integer: true, ..self }
    }

    /// Validates the parameters and builds the mechanism.
    pub fn spec(&self) -> DpResult<QuantileSpec> {
        let f = f64::from_bits;
        let (p, l, u, e, d) = (f(self.p), f(self.lower), f(self.upper), f(self.epsilon), f(self.delta));
        match self.method {
            0 => QuantileSpec::smooth_on(self.integer, p, l, u, e, d),
            1 => QuantileSpec::exponential_on(self.integer, p, l, u, e),
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
    /// Noise scale per unit of smooth sensitivity, 1/a (2/ε for Laplace noise; about 3.95 at ε = 1
    /// for the polynomial noise), at the mechanism's ε.
    pub factor: f64,
    /// On the grid of the integers ([`Grid::integers`]): candidates and releases are integers.
    pub integer: bool,
}

impl QuantileSpec {
    /// dp_median / dp_percentile: smooth sensitivity, Laplace noise if δ > 0, polynomial if δ = 0.
    /// β and the scale factor 1/a come from [`laplace_calibration`] and [`polynomial_calibration`].
    pub fn smooth(p: f64, lower: f64, upper: f64, epsilon: f64, delta: f64) -> DpResult<Self> {
        Self::smooth_on(false, p, lower, upper, epsilon, delta)
    }

    /// [`QuantileSpec::smooth`] on the grid of the integers (the integer overloads): lower is
    /// rounded up and upper down to integers, and releases are integers.
    pub fn smooth_integer(p: f64, lower: f64, upper: f64, epsilon: f64, delta: f64) -> DpResult<Self> {
        Self::smooth_on(true, p, lower, upper, epsilon, delta)
    }

    /// [`QuantileSpec::exponential`] on the grid of the integers: the candidates are the integers
    /// between the bounds (lower rounded up, upper down), and releases are integers.
    pub fn exponential_integer(p: f64, lower: f64, upper: f64, epsilon: f64) -> DpResult<Self> {
        Self::exponential_on(true, p, lower, upper, epsilon)
    }

    fn smooth_on(integer: bool, p: f64, lower: f64, upper: f64, epsilon: f64, delta: f64) -> DpResult<Self> {
        let (p, grid, epsilon) = Self::common(integer, p, lower, upper, epsilon)?;
        let delta = check_delta("delta", delta, true)?;
        let eps = mechanism_epsilon(epsilon);
        let (method, (beta, factor)) = if delta > 0.0 {
            // like ε, δ runs at the next float below the one charged (its shortest decimal)
            (Method::SmoothLaplace, laplace_calibration(eps, mechanism_epsilon(delta)))
        } else {
            (Method::SmoothPolynomial, polynomial_calibration(eps))
        };
        if beta <= 8.0 * ETA {
            return Err(DpError::invalid(
                "epsilon",
                format!("large enough that the smoothness beta exceeds {:e} at delta {}", 8.0 * ETA, fmt_f64(delta)),
                fmt_f64(epsilon),
            ));
        }
        Ok(QuantileSpec { method, p, grid, epsilon, delta, beta, factor, integer })
    }

    /// dp_percentile_em: the exponential mechanism.
    pub fn exponential(p: f64, lower: f64, upper: f64, epsilon: f64) -> DpResult<Self> {
        Self::exponential_on(false, p, lower, upper, epsilon)
    }

    fn exponential_on(integer: bool, p: f64, lower: f64, upper: f64, epsilon: f64) -> DpResult<Self> {
        let (p, grid, epsilon) = Self::common(integer, p, lower, upper, epsilon)?;
        Ok(QuantileSpec { method: Method::Exponential, p, grid, epsilon, delta: 0.0, beta: 0.0, factor: 0.0, integer })
    }

    fn common(integer: bool, p: f64, lower: f64, upper: f64, epsilon: f64) -> DpResult<(f64, Grid, f64)> {
        let p = check_p(p)?;
        let grid = if integer {
            let (lower, upper) = check_integer_bounds(lower, upper)?;
            Grid::integers(lower, upper, QUANTILE_GRID_BITS)
        } else {
            let (lower, upper) = check_float_bounds(lower, upper)?;
            Grid::new(lower, upper, upper - lower, QUANTILE_GRID_BITS)
        };
        let epsilon = check_epsilon("epsilon", epsilon)?;
        Ok((p, grid, epsilon))
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
    /// `interval95` is the 95% half-width of the noise at that largest scale, capped at the span
    /// (the release is clamped to the bounds); the exponential mechanism adds no noise and reports
    /// None (its rank bound, [`QuantileSpec::rank_interval95`], is in the details).
    pub fn describe(&self) -> ReleaseInfo {
        let span = self.steps() as f64 * self.grid.step();
        match self.method {
            Method::Exponential => {
                let du = self.utility_sensitivity();
                ReleaseInfo {
                    mechanism: if self.permute_and_flip() { PERMUTE_AND_FLIP } else { EXPONENTIAL },
                    epsilon: self.epsilon,
                    delta: 0.0,
                    sensitivity: du,
                    // the temperature: 1/q without the margin
                    scale: if self.monotone() { 1.0 } else { 2.0 } * du / mechanism_epsilon(self.epsilon),
                    count_scale: None,
                    interval95: None,
                    count_interval95: None,
                }
            }
            _ => ReleaseInfo {
                mechanism: SMOOTH_SENSITIVITY,
                epsilon: self.epsilon,
                delta: self.delta,
                sensitivity: span,
                scale: self.factor * span,
                count_scale: None,
                interval95: Some(self.interval95_steps(self.max_scale_steps()) as f64 * self.grid.step()),
                count_interval95: None,
            },
        }
    }

    /// The largest noise scale the smooth-sensitivity release can use, in grid steps: factor times
    /// the span (the smooth bound never exceeds it), with a relative 2^-30 for the safety margins of
    /// [`QuantileSpec::scale_steps`].
    pub fn max_scale_steps(&self) -> f64 {
        (self.factor * self.steps() as f64 * (1.0 + pow2(-30))).max(MIN_SCALE_STEPS)
    }

    /// The 95% half-width, in grid steps, of the smooth-sensitivity noise at scale `t` steps (rounded
    /// Laplace or rounded polynomial), capped at the number of steps between the bounds: the release
    /// is clamped to them, so its error never exceeds that. 0 for the exponential mechanism.
    pub fn interval95_steps(&self, t: f64) -> u128 {
        let n = self.steps() as u128;
        match self.method {
            Method::SmoothLaplace => intervals::rounded_laplace_halfwidth(t).min(n),
            Method::SmoothPolynomial => intervals::rounded_polynomial_halfwidth(t, n + 1).min(n),
            Method::Exponential => 0,
        }
    }

    /// The 95% half-width of the smooth-sensitivity noise per unit of smooth sensitivity, in the
    /// continuous limit (rounding to the grid adds at most half a step): factor·ln 20 for Laplace
    /// noise, factor·(20^(1/3) − 1) for the polynomial noise. Public: the noise is within this
    /// multiple of S(x) with probability 0.95, S(x) itself is never released.
    pub fn interval95_per_smooth_sensitivity(&self) -> f64 {
        let miss = 1.0 - intervals::COVERAGE;
        match self.method {
            Method::SmoothLaplace => self.factor * (1.0 / miss).ln(),
            Method::SmoothPolynomial => self.factor * ((1.0 / miss).cbrt() - 1.0),
            Method::Exponential => 0.0,
        }
    }

    /// For the exponential mechanism: D, in ranks, such that with probability at least 0.95 the
    /// released point's distance d(y) = |L + p̃E − p̃n| is within D of the smallest, m. Every point
    /// farther has weight at most e^(−qD)·(1 + 2^-44) of the best one (weight 1), and there are at
    /// most 2^42 points, so D = ln((N + 1)(1 + 2^-44)/0.05)/q (docs/privacy/intervals.md). The
    /// point's ranks [L, L + E] are then within D + m of the target rank p̃n (d(y) is at least that
    /// rank distance), and m is at most max(p̃, 1 − p̃) times the rows tied at the value whose rank
    /// interval holds the target (0 when a grid point between two values holds it). A bound from the
    /// public parameters, not the smallest such D.
    ///
    /// The same D holds for permute-and-flip, at its own q: it releases a uniform point among those
    /// whose coin came up, the best point's always does, so the chance of a point farther than D is
    /// at most the expected number of such points accepted, below (N + 1)·e^(−qD).
    pub fn rank_interval95(&self) -> f64 {
        let q = if self.permute_and_flip() {
            let (qm, qk) = self.pf_rate();
            qm as f64 * pow2(-qk)
        } else {
            self.em_rate()
        };
        let points = self.steps() as f64 + 1.0;
        (points * (1.0 + pow2(-44)) / (1.0 - intervals::COVERAGE)).ln() / q
    }

    /// Mechanism details for the receipt (JSON): the noise family, β and the scale per unit of
    /// smooth sensitivity (1/a), or the utility sensitivity of the exponential mechanism; the 95%
    /// half-width per unit of smooth sensitivity, or the exponential mechanism's rank bound; on the
    /// grid of the integers, `"integer_grid": true` (its `grid_step` is 1 unless the bounds are very
    /// wide).
    pub fn details(&self) -> String {
        let mut v = match self.method {
            Method::SmoothLaplace => serde_json::json!({
                "noise": "laplace", "beta": self.beta, "scale_per_smooth_sensitivity": self.factor,
                "interval95_per_smooth_sensitivity": self.interval95_per_smooth_sensitivity(),
                "p": self.p, "grid_step": self.grid.step(),
            }),
            Method::SmoothPolynomial => serde_json::json!({
                "noise": "polynomial (1+|z|)^-4", "beta": self.beta, "scale_per_smooth_sensitivity": self.factor,
                "interval95_per_smooth_sensitivity": self.interval95_per_smooth_sensitivity(),
                "p": self.p, "grid_step": self.grid.step(),
            }),
            Method::Exponential => serde_json::json!({
                "utility": "-|(1 - p)*#{x < y} - p*#{x > y}|", "utility_sensitivity": self.utility_sensitivity(),
                "monotone": self.monotone(),
                "rank_interval95": self.rank_interval95(),
                "p": self.p, "grid_step": self.grid.step(),
            }),
        };
        if let (true, Some(o)) = (self.integer, v.as_object_mut()) {
            o.insert("integer_grid".into(), true.into());
        }
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
            Method::Exponential if self.permute_and_flip() => self.permute_and_flip_index(rng, values),
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

    /// Whether the exponential-mechanism release runs permute-and-flip: a grid of at most
    /// [`PF_MAX_POINTS`] points, known from the bounds and the column's type, and p̃ strictly between
    /// 0 and 1 (the minimum and maximum take the exponential mechanism at its monotone rate).
    pub fn permute_and_flip(&self) -> bool {
        self.method == Method::Exponential && self.steps() < PF_MAX_POINTS && !self.monotone()
    }

    /// p̃ = 0 or 1 (a private minimum or maximum): the distance d(y) is #{x < y} or #{x > y}, which
    /// adding a row never lowers and removing one never raises, the same direction for every y. The
    /// exponential mechanism then needs no factor 2: rate ε/Δ (Δ = 1) is ε-DP (docs/privacy/
    /// percentile-em.md, "The minimum and the maximum").
    pub fn monotone(&self) -> bool {
        let n = p_numerator(self.p);
        n == 0 || n == P_SCALE
    }

    /// The exponential mechanism's rate q: (ε/2 − margin)/Δ, or (ε − margin)/Δ when monotone. The
    /// margin (absolute 2^-40, relative where ε is so large it would vanish) absorbs the rounding of
    /// the weights ([`em_weight`]).
    fn em_rate(&self) -> f64 {
        let e = mechanism_epsilon(self.epsilon) / if self.monotone() { 1.0 } else { 2.0 };
        (e - EM_MARGIN.max(e * EM_MARGIN)) / self.utility_sensitivity()
    }

    /// Permute-and-flip's rate q = (ε/2)/Δ as qm·2^-qk, qm below 2^24: rounded down (a hair below
    /// the exact quotient, then truncated to [`PF_RATE_BITS`] bits), so that it never exceeds ε/(2Δ).
    /// qk lies in [−21, 56] for ε in [1e-9, 1e6].
    pub fn pf_rate(&self) -> (u128, i32) {
        let q = mechanism_epsilon(self.epsilon) / 2.0 / self.utility_sensitivity() * (1.0 - pow2(-40));
        let (m, k) = dyadic_at_most(q, PF_RATE_BITS);
        (m as u128, k)
    }

    /// Permute-and-flip over the grid points 0..=N (McKenna & Sheldon 2020): visit the points in a
    /// uniformly random order and release the first whose coin, of probability exp(−q·(d(y) − m)),
    /// comes up; the best point's coin always does. The first accepted point of a uniform order is
    /// a uniform point of the accepted set, so this flips every point's coin independently, in grid
    /// order, and keeps a uniform one of those accepted ([`AcceptedUniform`]). Each coin is Bernoulli(exp(−x)) for the exact
    /// rational x = qm·(d − m)/2^(60 + qk) ([`bernoulli_exp`]); no weight is rounded and there is no
    /// floor. ε-DP with q = ε/(2Δ), as the exponential mechanism (docs/privacy/percentile-em.md).
    fn permute_and_flip_index<R: Rng + ?Sized>(&self, rng: &mut R, idx: &[f64]) -> i64 {
        let n_steps = self.steps();
        let (qm, qk) = self.pf_rate();
        let den = 1u128 << (60 + qk);
        let p_num = p_numerator(self.p);
        let mut m = u128::MAX;
        em_categories(idx, n_steps, p_num, |_, _, d| {
            m = m.min(d);
            true
        });
        let mut choice = AcceptedUniform::default();
        em_categories(idx, n_steps, p_num, |start, count, d| {
            // (d − m) < 2^60·(n + 1) and qm < 2^24: exact below 2^44 rows (the values are in memory)
            let num = qm.saturating_mul(d - m);
            for y in start..start + count {
                choice.offer(rng, num, den, y);
            }
            true
        });
        choice.kept().expect("the best point always accepts")
    }

    /// The exponential mechanism over the grid points 0..=N. A point y has L = #{x < y} rows below it,
    /// E = #{x = y} at it and G = #{x > y} above, and its distance from the p-quantile is
    /// d(y) = |(1 − p̃)·L − p̃·G| = |L + p̃·E − p̃·n|: how far the point L + p̃·E of its rank interval
    /// [L, L + E] lies from the target rank p̃n (a point between data values, E = 0, is at |L − p̃n|).
    /// Adding or removing a row moves d by at most max(p̃, 1 − p̃). Among tied values this prefers
    /// the value whose interval holds the target well inside it over its neighbours, which share an
    /// end with it (integer data: ages). y has weight max(exp(−q·(d(y) − m)), 2^-64) with m the
    /// smallest distance of any point (the best point weighs exactly 1), q = (ε/2 − margin)/max(p̃,
    /// 1 − p̃) (ε − margin at p̃ = 0 or 1, [`QuantileSpec::monotone`]), rounded up to an integer
    /// multiple of 2^-109 ([`em_weight`]). The floor 2^-64·e^(−q·m)
    /// moves between neighbours by at most e^(q·max(p̃, 1 − p̃)), as each weight does, since m does
    /// (docs/privacy/percentile-em.md); all floored points together weigh at most 2^-22 of one best
    /// point. The points fall into at most 2n + 1 categories of equal weight ([`em_categories`]), so
    /// one pass finds m, one computes the exact total (below 2^152, in 256-bit integers), a uniform
    /// integer below it picks the category, and a uniform point of it is released.
    fn exponential_index<R: Rng + ?Sized>(&self, rng: &mut R, idx: &[f64]) -> i64 {
        let n_steps = self.steps();
        let q = self.em_rate();
        let p_num = p_numerator(self.p); // p̃·2^60, exact
        let mut m = u128::MAX;
        em_categories(idx, n_steps, p_num, |_, _, d| {
            m = m.min(d);
            true
        });
        let weight = |d: u128| em_weight(q * ((d - m) as f64 / P_SCALE as f64));
        let mut total = U256::ZERO;
        em_categories(idx, n_steps, p_num, |_, count, d| {
            total = total.add(U256::mul(count as u128, weight(d)));
            true
        });
        let mut u = total.random_below(rng);
        let mut drawn = None;
        em_categories(idx, n_steps, p_num, |start, count, d| {
            let mass = U256::mul(count as u128, weight(d));
            if u < mass {
                drawn = Some((start, count));
                return false;
            }
            u = u.sub(mass);
            true
        });
        let (start, count) = drawn.expect("the draw is below the total");
        start + rng.random_range(0..count)
    }
}

/// The categories of grid points 0..=`n_steps` of the exponential mechanism, in order, for sorted grid
/// indices `idx`: each distinct value v (one point, L = #{x < v} rows below and E = #{x = v} at it) and
/// each non-empty run of points strictly between consecutive distinct values, before the first or
/// after the last (L the number of values below, E = 0). Calls `f(start, count, d)` with
/// d·2^60 = |L·2^60 + P·E − P·n| exact, P = `p_num` = p̃·2^60, until `f` returns false.
pub fn em_categories(idx: &[f64], n_steps: i64, p_num: u128, mut f: impl FnMut(i64, i64, u128) -> bool) {
    let pn = p_num * idx.len() as u128;
    // L + p̃·E against p̃·n, in units of 2^-60: below 2^60·(n + 1), exact
    let dist = |below: usize, at: usize| (below as u128 * P_SCALE + p_num * at as u128).abs_diff(pn);
    let (mut next, mut below) = (0i64, 0usize); // first point not yet covered; values below it
    let mut i = 0;
    while i < idx.len() {
        let v = idx[i] as i64;
        let mut j = i;
        while j < idx.len() && idx[j] as i64 == v {
            j += 1;
        }
        if v > next && !f(next, v - next, dist(below, 0)) {
            return;
        }
        if !f(v, 1, dist(i, j - i)) {
            return;
        }
        (next, below, i) = (v + 1, j, j);
    }
    if next <= n_steps {
        f(next, n_steps - next + 1, dist(below, 0));
    }
}

/// Relative floor of the exponential mechanism's weights: with at most 2^42 grid points, all floored
/// points together weigh at most 2^-22 of the best point.
pub const EM_FLOOR_BITS: i32 = 64;

/// ceil(2^109·max(e^-x, 2^-64)·(1 + 2^-45)): an integer in [2^45, 2^109 + 2^65]. The upward margin
/// covers the float error of exp; the ceiling adds at most 2^-45 relative (the floor is 2^45).
pub fn em_weight(x: f64) -> u128 {
    const FLOOR: u128 = 1 << 45;
    if !(x < EM_FLOOR_BITS as f64 * std::f64::consts::LN_2) {
        return FLOOR;
    }
    // below 2^110, an integer-valued f64 (no fraction to round above 2^53), exactly converted
    let w = ((-x).exp() * pow2(45 + EM_FLOOR_BITS) * (1.0 + pow2(-45))).ceil();
    (w as u128).max(FLOOR)
}

/// An unsigned integer below 2^256, as 128-bit halves (the total weight of the exponential mechanism,
/// below 2^152). Field order makes the derived ordering numeric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct U256 {
    pub hi: u128,
    pub lo: u128,
}

impl U256 {
    pub const ZERO: U256 = U256 { hi: 0, lo: 0 };

    /// The full product a·b.
    pub fn mul(a: u128, b: u128) -> U256 {
        const MASK: u128 = (1 << 64) - 1;
        let (a1, a0, b1, b0) = (a >> 64, a & MASK, b >> 64, b & MASK);
        let (p00, p01, p10, p11) = (a0 * b0, a0 * b1, a1 * b0, a1 * b1);
        let mid = (p00 >> 64) + (p01 & MASK) + (p10 & MASK); // < 3·2^64
        U256 { hi: p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64), lo: (p00 & MASK) | (mid << 64) }
    }

    /// self + o; the caller keeps sums below 2^256.
    pub fn add(self, o: U256) -> U256 {
        let (lo, carry) = self.lo.overflowing_add(o.lo);
        U256 { hi: self.hi + o.hi + carry as u128, lo }
    }

    /// self − o for o ≤ self.
    pub fn sub(self, o: U256) -> U256 {
        debug_assert!(o <= self);
        let (lo, borrow) = self.lo.overflowing_sub(o.lo);
        U256 { hi: self.hi - o.hi - borrow as u128, lo }
    }

    /// A uniform integer in [0, self), self > 0: uniform bits up to self's length, redrawn while not
    /// below self (accepted with probability above 1/2).
    pub fn random_below<R: Rng + ?Sized>(self, rng: &mut R) -> U256 {
        assert!(self > U256::ZERO, "random_below(0)");
        let bits = if self.hi > 0 { 256 - self.hi.leading_zeros() } else { 128 - self.lo.leading_zeros() };
        let mask = |b: u32| if b >= 128 { u128::MAX } else { (1u128 << b) - 1 };
        loop {
            let hi = if bits > 128 { rng.random::<u128>() & mask(bits - 128) } else { 0 };
            let lo = rng.random::<u128>() & mask(bits.min(128));
            let u = U256 { hi, lo };
            if u < self {
                return u;
            }
        }
    }
}

/// ln(e^x − 1) for x > 0, without overflow for large x.
fn ln_expm1(x: f64) -> f64 {
    if x > 36.0 {
        x + (-(-x).exp()).ln_1p()
    } else {
        x.exp_m1().ln()
    }
}

/// The exact worst-case privacy loss of the polynomial mechanism f(x) + (S(x)/a)·Z, Z with density
/// ∝ (1 + |z|)^-4, over neighbours whose outputs differ by at most min(S(x), S(x')) and whose
/// smooth bounds differ by a factor e^λ, |λ| ≤ β (docs/privacy/smooth-sensitivity.md):
/// max(3β, 4 ln(1 + a), β + 4 ln(1 + a·e^(−β))).
pub fn polynomial_loss(a: f64, beta: f64) -> f64 {
    let g = POLY_GAMMA;
    ((g - 1.0) * beta).max(g * a.ln_1p()).max(beta + g * (a * (-beta).exp()).ln_1p())
}

/// β and the scale factor 1/a of the pure-ε (polynomial) smooth-sensitivity release at ε (the
/// mechanism's ε): β = ε/3, the largest the dilation term 3β ≤ ε allows, and the largest a with
/// [`polynomial_loss`] ≤ ε at that β: a = min(e^β·(e^((ε − β)/4) − 1), e^(ε/4) − 1). Both are taken a
/// hair inside (β by 2^-50, a by 2^-40, relative) so that rounding cannot push the loss above ε.
/// At ε = 1: β = 0.333, a = 0.253 (the split-in-halves calibration had β = ε/6 and a = ε/8).
pub fn polynomial_calibration(eps: f64) -> (f64, f64) {
    let beta = eps / (POLY_GAMMA - 1.0) * (1.0 - pow2(-50));
    let ln_a = (beta + ln_expm1((eps - beta) / POLY_GAMMA)).min(ln_expm1(eps / POLY_GAMMA));
    // factor = 1/a, with a shrunk by 2^-40: exp is within an ulp or two, far inside that margin.
    // For ε above about 2800 the factor underflows towards 0; the scale then sits at its floor,
    // which only adds noise.
    (beta, (-(ln_a - pow2(-40))).exp())
}

/// ln δ for the Laplace smooth-sensitivity release f(x) + (S(x)/a)·Z, Z standard Laplace, at ε with
/// smoothness β, when β + a·e^(−β) ≤ ε and a ≤ ε: the largest hockey-stick divergence
/// ∫(p − e^ε q)₊ over neighbours (docs/privacy/smooth-sensitivity.md) is attained when the neighbour's
/// scale is e^(−β) times smaller and its centre a·e^(−β) scales away, and equals
/// (1 − e^(−β))·e^(−(ε + β)/m)·cosh(a/m) with m = e^β − 1.
pub fn laplace_ln_delta(eps: f64, a: f64, beta: f64) -> f64 {
    let m = beta.exp_m1();
    // ln cosh(x) = x + ln(1 + e^(−2x)) − ln 2
    (-(-beta).exp_m1()).ln() - (eps + beta - a) / m + (-2.0 * a / m).exp().ln_1p() - std::f64::consts::LN_2
}

/// β and the scale factor 1/a of the (ε, δ) (Laplace) smooth-sensitivity release at ε and δ (the
/// mechanism's): a = ε/2 (the factor 2/ε, rounded up), and β the largest value with
/// β + a·e^(−β) ≤ ε (so that neighbours with a larger smooth bound lose at most ε pointwise) and
/// [`laplace_ln_delta`] ≤ ln δ (the exact δ of neighbours with a smaller one), both found by
/// bisection (each side is monotone in β) and taken with margins: 2^-40 of ε, 2^-30 in ln δ.
/// At ε = 1, δ = 1e-6: β = 0.0530 (ln(1 + ε/(2 ln(2/δ))) = 0.0339 spent only 0.3% of δ).
pub fn laplace_calibration(eps: f64, delta: f64) -> (f64, f64) {
    let a = eps / 2.0;
    let factor = 2.0 / eps * (1.0 + pow2(-50)); // 1/factor ≤ a
    // β + a·e^(−β) is convex in β and equals a < ε at 0: the admissible β form an interval [0, b]
    let limit = eps * (1.0 - pow2(-40));
    let beta_dilate = largest_where(|b| b + a * (-b).exp() <= limit, 0.0, eps, 0.0);
    let ln_target = delta.ln() - pow2(-30);
    let beta = largest_where(|b| laplace_ln_delta(eps, a, b) <= ln_target, 0.0, beta_dilate, 0.0);
    (beta, factor)
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
