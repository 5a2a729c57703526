//! DPRP: differentially private random projection release of a whole table
//! (Gondara & Wang, "Differentially Private Small Dataset Release Using Random Projections", UAI 2020),
//! with a corrected calibration. The derivation is in docs/privacy/dprp.md.
//!
//! **Neighbouring relation: add or remove one row**, the same as every other pg_dp release.
//!
//! Each row is clamped to public per-column bounds (NULL/NaN cells go to the midpoint), scaled into
//! [−1, 1]^d and mapped into the L2 ball of radius Z ([`RowNorm`]). With a data-independent
//! projection R (d×k1, largest singular value 1) the release computes, from the rows read:
//!   v  = n + τ + N₀            a noisy row count (τ a public offset),
//!   S′ = Σ x + N_S             a noisy column sum, for the mean (only with [`Centring::Mean`]),
//!   C′ = XᵀX + N₂              noise on the upper triangle incl. the diagonal, mirrored,
//! and then pads the table with m − n all-midpoint rows up to m = max(n, ⌈v⌉) rows and releases
//!   P′ = X̃R + N₁               (m×k1, one noisy projected row per real or padding row).
//! Post-processing: μ̂ = S′/v, V = top-k2 eigenvectors of C′ − v·μ̂μ̂ᵀ, X′ = μ̂ + (P′ − μ̂R)(VᵀR)⁺Vᵀ,
//! mapped back to the original units, clamped, and the m rows shuffled.
//!
//! Every statistic is an exact integer on a power-of-two grid whose per-row contribution is
//! norm-bounded in integer arithmetic; every noise is an exactly sampled discrete Gaussian on the same
//! grid. The accounting is the exact (ε, δ) profile of one Gaussian mechanism (μ-GDP, Dong, Roth &
//! Su 2022) composed of all parts, plus the probability β that the padding offset is too small; the
//! discrete noise is shown to be as private as the continuous one up to a factor 1 ± 1e-130.
//!
//! # Calling order (pay before reading)
//!
//! 1. [`DprpSpec::new`] validates the arguments and calibrates every noise: no data, no n.
//! 2. [`DprpSpec::describe`] gives the receipt; [`DprpSpec::plan_memory`] checks d, k1, k2 against
//!    the memory limit. Both only read the arguments.
//! 3. [`DprpSpec::start`] draws R and the row-count noise and reserves all memory (still no data).
//! 4. The caller charges the budget, then feeds rows with [`DprpRelease::push_row`].
//! 5. [`DprpRelease::finish`] adds the noise, reconstructs and shuffles.
//!
//! After the charge only two failures exist, neither of them dependent on the data beyond what is
//! released: [`ReleaseFailure::MemoryLimit`] (a function of the released row count m) and
//! [`ReleaseFailure::Interrupted`] (the caller's interrupt check asked to stop).
use crate::release::try_filled;
use crate::accounting::charge::mechanism_epsilon;
use crate::error::{DpError, DpResult};
use crate::noise::gaussian::gaussian_delta;
use crate::noise::grid::{floor_log2, pow2, round_half_away};
use crate::params::{check_delta, check_epsilon, check_float_bounds, fmt_f64, largest_where};
use crate::noise::rng::DpRng;
use crate::noise::sampling::dyadic;
use crate::mechanisms::intervals::discrete_gaussian_halfwidth;
use crate::noise::sampling64::{Base2Gaussian, BitPool};
use nalgebra::{DMatrix, DMatrixView, DMatrixViewMut, DVector, SymmetricEigen};
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Method name recorded in every receipt.
pub const METHOD: &str = "dprp";
/// Noise distribution recorded in every receipt.
pub const NOISE: &str = "discrete_gaussian";
/// The neighbouring relation the guarantee is stated for (the same as the aggregates').
pub const NEIGHBOURS: &str = "add or remove one row";
/// How the parts are accounted: their exact composition into one Gaussian mechanism (μ-GDP).
pub const ACCOUNTING: &str = "gaussian_dp";
/// What a NULL (or NaN) cell becomes: the midpoint of its column's bounds.
pub const NULL_VALUE: &str = "midpoint of the bounds";
/// Default share of the (μ²) budget left after the row count and the mean that goes to the
/// projection; the rest goes to the covariance.
pub const DEFAULT_PROJECTION_SHARE: f64 = 0.5;
/// Share of μ² spent on the noisy row count (docs/privacy/dprp.md, "Choosing the shares").
pub const COUNT_SHARE: f64 = 0.02;
/// Share of μ² spent on the noisy column sum with [`Centring::Mean`].
pub const MEAN_SHARE: f64 = 0.05;
/// Share of δ reserved for the probability β that the padding offset τ is too small.
pub const PADDING_DELTA_SHARE: f64 = 0.25;
/// Largest number of columns: the covariance is d×d and its eigen-decomposition costs O(d³).
pub const MAX_COLUMNS: usize = 1024;
/// Largest projection width k1.
pub const MAX_K1: usize = 4096;
/// The count, mean and projection grids put σ (and, for the mean and projection, Z) at least
/// 2^NOISE_STEP_BITS steps apart: rounding to the grid is negligible next to the noise and the data.
pub const NOISE_STEP_BITS: i32 = 12;
/// The covariance noise has σ between 2^27 and 2^29 steps of its grid 2^(2r), so that the rows are
/// rounded to the fine grid 2^r ≈ √σ₂·2^-14 (docs/privacy/dprp.md, "The covariance grid").
pub const COVARIANCE_STEP_BITS: i32 = 27;
/// s² of the lattice-smoothing argument: a discrete Gaussian of variance σ² is treated as a
/// continuous Gaussian of variance σ² − s² followed by a data-independent rounding kernel.
pub const SMOOTHING_S2: u64 = 16;
/// Largest σ of the row-count noise, in rows: below the corresponding ε every release would pad
/// with more than about 2^30 rows.
pub const MAX_COUNT_SIGMA: f64 = (1u64 << 28) as f64;
/// Fewest rows the memory limit must hold.
pub const MIN_ROW_CAPACITY: usize = 1024;
/// Draws or rows between two calls of the interrupt check.
pub const CHECK_EVERY: usize = 4096;

/// How each scaled row is brought into an L2 ball, which bounds the sensitivities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowNorm {
    /// Rows whose L2 norm exceeds Z are shrunk to norm Z; others are unchanged. Keeps the original
    /// units. Z defaults to [`default_clip_norm`] (√d/2), at most [`max_clip_norm`] (√d).
    Clip,
    /// Every nonzero row is divided by its norm (the paper's normalisation), Z = 1. Keeps only the
    /// direction of each scaled row: the output is in the scaled space [−1, 1]^d.
    Unit,
}

impl RowNorm {
    pub fn name(self) -> &'static str {
        match self {
            RowNorm::Clip => "clip",
            RowNorm::Unit => "unit",
        }
    }
}

/// How the random projection R (d×k1) is drawn. Both are data-independent with largest singular
/// value 1, so the sensitivity of XR is the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Projection {
    /// The paper's R: independent N(0, 1) entries, divided by the largest singular value.
    Gaussian,
    /// The polar factor of the same Gaussian draw: all singular values 1.
    Orthonormal,
}

impl Projection {
    pub fn name(self) -> &'static str {
        match self {
            Projection::Gaussian => "gaussian",
            Projection::Orthonormal => "orthonormal",
        }
    }
}

/// Where the principal directions are centred.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Centring {
    /// The midpoint of the bounds (public; the scaled space's origin): no budget spent. The default.
    Midpoint,
    /// A DP mean: a noisy column sum divided by the noisy row count, paid with [`MEAN_SHARE`] of μ².
    /// It did not beat the midpoint in the measurements of docs/dprp-utility.md.
    Mean,
}

impl Centring {
    pub fn name(self) -> &'static str {
        match self {
            Centring::Midpoint => "midpoint",
            Centring::Mean => "mean",
        }
    }
}

/// The caller's choices for one release. Bounds must have one entry per column.
#[derive(Debug, Clone, PartialEq)]
pub struct DprpParams {
    pub lower: Vec<f64>,
    pub upper: Vec<f64>,
    pub epsilon: f64,
    pub delta: f64,
    /// Projection width; `None` takes [`default_k1`].
    pub k1: Option<usize>,
    /// Number of principal directions kept; `None` takes [`default_k2`].
    pub k2: Option<usize>,
    /// Share of the projection in the budget of the two main statistics, strictly between 0 and 1.
    pub projection_share: f64,
    pub row_norm: RowNorm,
    /// Z for [`RowNorm::Clip`], in [[`MIN_CLIP_NORM`], √d]; `None` takes [`default_clip_norm`] (√d/2). Must be `None` for
    /// [`RowNorm::Unit`].
    pub clip_norm: Option<f64>,
    pub projection: Projection,
    pub centring: Centring,
}

impl DprpParams {
    /// Defaults for everything but the bounds and the privacy parameters.
    pub fn new(lower: Vec<f64>, upper: Vec<f64>, epsilon: f64, delta: f64) -> Self {
        DprpParams {
            lower,
            upper,
            epsilon,
            delta,
            k1: None,
            k2: None,
            projection_share: DEFAULT_PROJECTION_SHARE,
            row_norm: RowNorm::Clip,
            clip_norm: None,
            projection: Projection::Orthonormal,
            centring: Centring::Midpoint,
        }
    }
}

/// One noised vector statistic: its grid, its integer row bound and its noise, all fixed before any
/// data is read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoisePart {
    /// GDP μ of this part: its integer sensitivity over the continuous-equivalent σ (both in steps).
    pub mu: f64,
    /// Add/remove L2 sensitivity in scaled units (the real-valued bound the grid approximates).
    pub sensitivity: f64,
    /// The noisy statistic lives on the grid 2^exp.
    pub exp: i32,
    /// Each row is rounded to the grid 2^row_exp (the covariance squares it: exp = 2·row_exp).
    pub row_exp: i32,
    /// Every row's integer vector has squared norm at most this (enforced in integers).
    pub row_bound2: u64,
    /// Every entry of a row's integer vector is at most this in magnitude.
    pub entry_bound: u64,
    /// Add/remove L2 sensitivity in grid steps, from the enforced integer bounds.
    pub sensitivity_steps: f64,
    /// The noise, in grid steps: a discrete Gaussian with σ² = k²/(2 ln 2).
    pub noise: Base2Gaussian,
}

impl NoisePart {
    /// Standard deviation parameter of the noise in scaled units: √σ²_steps · 2^exp.
    pub fn sigma(&self) -> f64 {
        self.noise.sigma2().sqrt() * pow2(self.exp)
    }

    /// The 95% half-width of the noise in scaled units (per cell), from σ² rounded up.
    pub fn interval95(&self) -> f64 {
        discrete_gaussian_halfwidth(self.noise.sigma2_upper()) as f64 * pow2(self.exp)
    }

    /// One noise draw, in steps.
    #[inline]
    pub fn draw<R: Rng + ?Sized>(&self, rng: &mut R, bits: &mut BitPool) -> i128 {
        self.noise.sample(rng, bits) as i128
    }

    /// Rounds a scaled vector to this part's row grid and enforces the integer bounds.
    pub fn integer_row(&self, s: &[f64], out: &mut [i64]) {
        let inv = pow2(-self.row_exp);
        let e = self.entry_bound.min(i64::MAX as u64) as i64;
        for (o, &v) in out.iter_mut().zip(s) {
            *o = round_half_away(v * inv).clamp(-e, e);
        }
        enforce_norm(out, self.row_bound2);
    }
}

/// The noisy row count: v = n + (t + N)/2^h rows with N ~ N_ℤ(0, σ²_steps), released through the
/// number of output rows m = n + max(0, ⌈(t + N)/2^h⌉).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowCountPart {
    pub mu: f64,
    /// The count lives on the grid 2^-h rows (h ≥ 0), so that σ spans at least 2^12 steps.
    pub h: i32,
    /// The noise, in steps of 2^-h rows.
    pub noise: Base2Gaussian,
    /// The public offset t, in steps (τ = t/2^h rows).
    pub offset_steps: u128,
    /// β = P(N ≤ −t), bounded above by Φ̄((t − 1)/σ): the probability that no padding row is added.
    pub padding_failure: f64,
}

impl RowCountPart {
    pub fn sigma_rows(&self) -> f64 {
        self.noise.sigma2().sqrt() * pow2(-self.h)
    }
    /// The 95% half-width of the count noise N, in rows.
    pub fn interval95_rows(&self) -> f64 {
        discrete_gaussian_halfwidth(self.noise.sigma2_upper()) as f64 * pow2(-self.h)
    }
    pub fn offset_rows(&self) -> f64 {
        self.offset_steps as f64 * pow2(-self.h)
    }
    /// The count noise N, in steps.
    pub fn draw<R: Rng + ?Sized>(&self, rng: &mut R) -> i128 {
        self.noise.sample(rng, &mut BitPool::new()) as i128
    }
    /// Number of padding rows for a count noise N: max(0, ⌈(t + N)/2^h⌉) (saturating).
    pub fn padding_rows(&self, noise: i128) -> usize {
        let x = self.offset_steps as i128 + noise;
        if x <= 0 {
            return 0;
        }
        let rows = (x + (1i128 << self.h) - 1) >> self.h;
        usize::try_from(rows).unwrap_or(usize::MAX)
    }
    /// The released row count m for a table of n rows (what an observer of the output sees).
    pub fn released_rows<R: Rng + ?Sized>(&self, rng: &mut R, n: usize) -> usize {
        n.saturating_add(self.padding_rows(self.draw(rng)))
    }
}

/// Everything a release will spend and do, known from the arguments alone: the receipt's content.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DprpReceipt {
    pub method: &'static str,
    pub noise: &'static str,
    pub neighbours: &'static str,
    pub accounting: &'static str,
    pub epsilon: f64,
    pub delta: f64,
    /// GDP μ of the whole release: every part composed into one Gaussian mechanism.
    pub mu: f64,
    /// δ of the μ-GDP profile at ε (the mechanism runs at the float just below ε).
    pub delta_gaussian: f64,
    /// β: probability that the padding offset is too small (no padding row); δ ≥ β + delta_gaussian.
    pub delta_padding: f64,
    pub d: usize,
    pub k1: usize,
    pub k2: usize,
    pub row_norm: &'static str,
    pub projection_matrix: &'static str,
    pub centring: &'static str,
    pub null_value: &'static str,
    /// Z: every scaled row has L2 norm at most Z.
    pub clip_norm: f64,
    pub projection_share: f64,
    pub count_share: f64,
    pub mean_share: f64,
    pub mu_count: f64,
    pub mu_mean: f64,
    pub mu_projection: f64,
    pub mu_covariance: f64,
    /// Add/remove sensitivities: 1 row, Z, Z (R has largest singular value 1) and Z·√((Z² + m²)/2).
    pub sensitivity_count: f64,
    pub sensitivity_mean: f64,
    pub sensitivity_projection: f64,
    pub sensitivity_covariance: f64,
    /// Noise σ: of the row count in rows; of each cell of Σx, XR and the upper triangle of XᵀX in
    /// scaled units (0 for an absent part).
    pub sigma_count: f64,
    pub sigma_mean: f64,
    pub sigma_projection: f64,
    pub sigma_covariance: f64,
    /// τ: the public offset of the padded row count, in rows.
    pub padding_offset: f64,
    /// 95% half-widths of the same noises (per cell), in the same units: the smallest grid multiple
    /// h with P(|noise| ≤ h) ≥ 0.95 up to one grid step (docs/privacy/intervals.md). They describe
    /// the noise on the internal statistics, not the error of the released rows.
    pub interval95_count: f64,
    pub interval95_mean: f64,
    pub interval95_projection: f64,
    pub interval95_covariance: f64,
}

/// A validated release: parameters, defaults resolved and every noise calibrated. Depends on the
/// arguments only (no row count, no data).
#[derive(Debug, Clone, PartialEq)]
pub struct DprpSpec {
    pub lower: Vec<f64>,
    pub upper: Vec<f64>,
    /// 2/(upper − lower) per column (0 where they are equal).
    inv_half_span: Vec<f64>,
    pub d: usize,
    pub k1: usize,
    pub k2: usize,
    pub epsilon: f64,
    pub delta: f64,
    pub projection_share: f64,
    pub row_norm: RowNorm,
    pub projection_kind: Projection,
    pub centring: Centring,
    pub clip_norm: f64,
    /// Total GDP μ allowed by (ε, δ − β), and the μ actually reached after discretisation.
    pub mu_budget: f64,
    pub mu: f64,
    /// δ of the μ-GDP profile at the mechanism's ε.
    pub delta_gaussian: f64,
    pub count: RowCountPart,
    pub mean: Option<NoisePart>,
    pub projection: NoisePart,
    pub covariance: NoisePart,
}

// ---------------------------------------------------------------------------------------------
// accounting

/// δ(ε) of a μ-GDP mechanism (the Gaussian mechanism with Δ/σ = μ; Balle & Wang 2018, Theorem 8):
/// Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ).
pub fn gdp_delta(eps: f64, mu: f64) -> f64 {
    if mu <= 0.0 {
        return 0.0;
    }
    gaussian_delta(eps, mu, 1.0)
}

/// The largest μ (to a relative 1e-12, rounded down) with gdp_delta(ε, μ) ≤ δ.
pub fn gdp_mu(eps: f64, delta: f64) -> f64 {
    let ok = |mu: f64| gdp_delta(eps, mu) <= delta;
    let (mut lo, mut hi) = (0.0, 1.0);
    while ok(hi) {
        lo = hi;
        hi *= 2.0;
    }
    largest_where(ok, lo, hi, 1e-12)
}

/// P(Z > x) for a standard normal Z.
fn normal_sf(x: f64) -> f64 {
    0.5 * libm::erfc(x / std::f64::consts::SQRT_2)
}

/// ln of the δ bound at order α for a ρ-zCDP mechanism at ε.
fn zcdp_log_delta_at(rho: f64, eps: f64, alpha: f64) -> f64 {
    (alpha - 1.0) * (alpha * rho - eps) + (alpha - 1.0) * (-1.0 / alpha).ln_1p() - alpha.ln()
}

/// The zCDP conversion (CKS20, Corollary 13): a δ such that every ρ-zCDP mechanism is (ε, δ)-DP.
/// No longer used for calibration (the exact Gaussian profile [`gdp_delta`] is tighter); kept to
/// document and test the gain.
pub fn zcdp_delta(rho: f64, eps: f64) -> f64 {
    assert!(rho >= 0.0 && eps >= 0.0);
    if rho == 0.0 {
        return 0.0;
    }
    let slope = |a: f64| (2.0 * a - 1.0) * rho - eps + (-1.0 / a).ln_1p();
    let (mut lo, mut hi) = (1.0 + 1e-9, (eps + 1.0) / (2.0 * rho) + 2.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if slope(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    zcdp_log_delta_at(rho, eps, 0.5 * (lo + hi)).exp().min(1.0)
}

/// The largest ρ (relative 1e-12, rounded down) with zcdp_delta(ρ, ε) ≤ δ.
pub fn zcdp_rho(eps: f64, delta: f64) -> f64 {
    let ok = |rho: f64| zcdp_delta(rho, eps) <= delta;
    let (mut lo, mut hi) = (0.0, eps.max(1e-300));
    while ok(hi) {
        lo = hi;
        hi *= 2.0;
    }
    largest_where(ok, lo, hi, 1e-12)
}

// ---------------------------------------------------------------------------------------------
// calibration

/// floor(x²), exactly: x = m·2^-k with integer m < 2^53, so x² = m²·2^-2k is computed in integers.
fn floor_square(x: f64) -> u64 {
    if x == 0.0 {
        return 0;
    }
    let (m, k) = dyadic(x);
    let sq = (m as u128) * (m as u128);
    let v = if k >= 0 {
        if 2 * k >= 128 { 0 } else { sq >> (2 * k) }
    } else {
        let shift = (-2 * k) as u32;
        assert!(128 - sq.leading_zeros() + shift <= 62, "row bound too large");
        sq << shift
    };
    u64::try_from(v).ok().filter(|&v| v < 1 << 62).expect("row bound too large")
}

/// The default Z for [`RowNorm::Clip`]: half of [`max_clip_norm`]. Rows of the scaled cube longer
/// than √d/2 are shrunk to it (a corner by half; a row whose values all lie in the middle half of
/// their ranges not at all), and every noise but the count's is halved (docs/dprp-utility.md).
pub fn default_clip_norm(d: usize) -> f64 {
    max_clip_norm(d) / 2.0
}

/// The smallest Z accepted for [`RowNorm::Clip`]: the noise grids scale with Z, and below about
/// 2^-900 their exponents leave the range of float8 (a clip norm of 1e-300 failed inside the
/// calibration instead of naming the argument).
pub const MIN_CLIP_NORM: f64 = 1e-12;

/// The largest Z accepted for [`RowNorm::Clip`]: the smallest float whose square is at least d (no
/// row of [−1, 1]^d, corners included, is shrunk).
pub fn max_clip_norm(d: usize) -> f64 {
    let z = (d as f64).sqrt();
    let (m, k) = if z > 0.0 { dyadic(z) } else { (0, 0) };
    let below = (m as u128) * (m as u128) < (d as u128) << (2 * k.max(0) as u32);
    if below { f64::from_bits(z.to_bits() + 1) } else { z }
}

/// The noise for a squared sensitivity (in steps², an upper bound) and a part's μ: the smallest k
/// whose σ² = k²/(2 ln 2) is at least (Δ/μ)² + s², with a relative margin of 2^-40 for the
/// floating-point evaluation.
fn noise_for(sens2_steps: f64, mu: f64) -> Base2Gaussian {
    let c2 = sens2_steps / (mu * mu) * (1.0 + pow2(-40));
    assert!(c2.is_finite() && c2 < pow2(60), "noise out of range");
    Base2Gaussian::covering(c2 + SMOOTHING_S2 as f64)
}

/// A part whose per-row vector has L2 norm at most Z (the mean's Σx and the projection's XR): the
/// noise grid puts σ and Z at 2^12 steps or more (σ below 2^30), the integer rows are rounded to it and enforced to
/// ‖q‖² ≤ ⌊(Z/2^g)²⌋, and a padding row is 0, so the add/remove sensitivity is √⌊(Z/2^g)²⌋ steps.
fn norm_bounded_part(z: f64, mu: f64) -> NoisePart {
    let sigma = z / mu;
    // σ and Z both at least 2^12 steps, σ below 2^30 steps (the sampler's range)
    let exp = (floor_log2(sigma) - 29).max(floor_log2(sigma).min(floor_log2(z)) - NOISE_STEP_BITS);
    let row_bound2 = floor_square(z * pow2(-exp));
    NoisePart {
        mu,
        sensitivity: z,
        exp,
        row_exp: exp,
        row_bound2,
        entry_bound: u64::MAX,
        sensitivity_steps: (row_bound2 as f64).sqrt(),
        noise: noise_for(row_bound2 as f64 * (1.0 + pow2(-50)), mu),
    }
}

/// The covariance part: rows are rounded to the fine grid 2^r, squared exactly, so XᵀX lives on
/// 2^(2r) where σ₂ spans 2^27..2^29 steps. Adding a row u adds upper(uuᵀ), whose squared norm is
/// (‖u‖⁴ + Σu_j⁴)/2 ≤ (U⁴ + M²U²)/2 with ‖u‖² ≤ U² and |u_j| ≤ M enforced in integers
/// (docs/privacy/dprp.md). U² is ⌊(Z/2^r + √d/2)²⌋, room for the rounding of a row of norm Z, so the
/// enforcement almost never changes a row; any U² is valid because it is enforced.
fn covariance_part(z: f64, d: usize, mu: f64) -> NoisePart {
    let m = z.min(1.0);
    let sensitivity = z * ((z * z + m * m) / 2.0).sqrt();
    let sigma = sensitivity / mu;
    let exp = (floor_log2(sigma) - COVARIANCE_STEP_BITS).div_euclid(2) * 2;
    let row_exp = exp / 2;
    let inv = pow2(-row_exp);
    let room = z * inv + (d as f64).sqrt() / 2.0;
    let row_bound2 = (room * room).floor() as u64;
    // U is about 2^14·(√2·μ)^(1/2) whatever Z: below 2^21 for every accepted ε (μ < 2^11)
    assert!(row_bound2 < 1 << 52, "covariance row bound too large");
    let entry_bound = round_half_away(inv).max(0) as u64;
    let u2 = row_bound2 as u128;
    let e2 = ((entry_bound as u128) * (entry_bound as u128)).min(u2);
    let sens2 = (u2 * u2 + e2 * u2).div_ceil(2);
    NoisePart {
        mu,
        sensitivity,
        exp,
        row_exp,
        row_bound2,
        entry_bound,
        sensitivity_steps: (sens2 as f64).sqrt(),
        noise: noise_for(sens2 as f64 * (1.0 + pow2(-50)), mu),
    }
}

/// The row count: sensitivity one row = 2^h steps; offset t the smallest integer with
/// Φ̄((t − 1)/σ) ≤ β_target, which bounds P(N ≤ −t) (docs/privacy/dprp.md).
fn count_part(mu: f64, beta_target: f64, epsilon: f64) -> DpResult<RowCountPart> {
    let sigma_rows = 1.0 / mu;
    if !(sigma_rows <= MAX_COUNT_SIGMA) {
        return Err(DpError::invalid(
            "epsilon",
            format!("large enough that the noise of the released row count stays below 2^28 rows (it would be σ = {} rows)", fmt_f64(sigma_rows)),
            fmt_f64(epsilon),
        ));
    }
    let h = (NOISE_STEP_BITS - floor_log2(sigma_rows)).max(0);
    let noise = noise_for(pow2(2 * h), mu);
    let sigma = noise.sigma2_upper().sqrt();
    let ok = |t: u128| normal_sf((t - 1) as f64 / sigma) <= beta_target;
    let (mut lo, mut hi) = (1u128, 2 + (40.0 * sigma).ceil() as u128);
    if ok(lo) {
        hi = lo;
    }
    // invariant: ok(hi), !ok(lo) unless lo == hi
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let t = hi;
    Ok(RowCountPart { mu, h, noise, offset_steps: t, padding_failure: normal_sf((t - 1) as f64 / sigma) })
}

/// Default projection width from public quantities only: k1 = d for the orthonormal projection
/// (any k1 ≥ d gives the same reconstruction noise), 4d for the Gaussian one.
pub fn default_k1(projection: Projection, d: usize) -> usize {
    match projection {
        Projection::Orthonormal => d,
        Projection::Gaussian => (4 * d).min(MAX_K1),
    }
}

/// Default number of principal directions: 3 (docs/dprp-utility.md), at most d and k1.
pub fn default_k2(d: usize, k1: usize) -> usize {
    3.min(d).min(k1)
}

// ---------------------------------------------------------------------------------------------
// validation

fn check_bounds(lower: &[f64], upper: &[f64]) -> DpResult<usize> {
    let d = lower.len();
    if d == 0 || d > MAX_COLUMNS {
        return Err(DpError::invalid("columns", format!("between 1 and {MAX_COLUMNS} columns"), d));
    }
    if upper.len() != d {
        return Err(DpError::invalid("upper", format!("an array of {d} values (one per column)"), upper.len()));
    }
    for (l, u) in lower.iter().zip(upper) {
        check_float_bounds(*l, *u)?;
    }
    Ok(d)
}

fn check_share(share: f64) -> DpResult<f64> {
    if share.is_finite() && share > 0.0 && share < 1.0 {
        Ok(share)
    } else {
        Err(DpError::invalid("projection_share", "greater than 0 and less than 1", fmt_f64(share)))
    }
}

fn check_k(arg: &'static str, k: Option<usize>, max: usize, default: usize) -> DpResult<usize> {
    match k {
        None => Ok(default),
        Some(k) if (1..=max).contains(&k) => Ok(k),
        Some(k) => Err(DpError::invalid(arg, format!("an integer between 1 and {max}"), k)),
    }
}

fn check_clip_norm(row_norm: RowNorm, clip: Option<f64>, d: usize) -> DpResult<f64> {
    let max = max_clip_norm(d);
    match (row_norm, clip) {
        (RowNorm::Unit, None) => Ok(1.0),
        (RowNorm::Unit, Some(z)) => Err(DpError::invalid("clip_norm", "NULL with unit row normalisation", fmt_f64(z))),
        (RowNorm::Clip, None) => Ok(default_clip_norm(d)),
        (RowNorm::Clip, Some(z)) if z.is_finite() && z >= MIN_CLIP_NORM && z <= max => Ok(z),
        (RowNorm::Clip, Some(z)) => Err(DpError::invalid(
            "clip_norm",
            format!("greater than 0 and at most sqrt(d) = {}, and at least {}", fmt_f64(max), fmt_f64(MIN_CLIP_NORM)),
            fmt_f64(z),
        )),
    }
}

impl DprpSpec {
    /// Validates the parameters and calibrates every noise, from the arguments alone.
    pub fn new(p: &DprpParams) -> DpResult<Self> {
        let d = check_bounds(&p.lower, &p.upper)?;
        let epsilon = check_epsilon("epsilon", p.epsilon)?;
        let delta = check_delta("delta", p.delta, false)?;
        let share = check_share(p.projection_share)?;
        let k1 = check_k("k1", p.k1, MAX_K1, default_k1(p.projection, d))?;
        let k2 = check_k("k2", p.k2, d.min(k1), default_k2(d, k1))?;
        let clip_norm = check_clip_norm(p.row_norm, p.clip_norm, d)?;

        // run at the floats just below the charged ε and δ (see accounting::mechanism_epsilon),
        // with a relative 1e-9 margin on δ for the floating-point evaluation of the profile
        let eps_m = mechanism_epsilon(epsilon);
        let delta_m = mechanism_epsilon(delta) * (1.0 - 1e-9);
        let beta_target = PADDING_DELTA_SHARE * delta_m;
        let mu_budget = gdp_mu(eps_m, (delta_m - beta_target) * (1.0 - 1e-9));
        let mu2 = mu_budget * mu_budget;
        let mean_share = if p.centring == Centring::Mean { MEAN_SHARE } else { 0.0 };
        let rest = (1.0 - COUNT_SHARE - mean_share) * mu2;
        let count = count_part((COUNT_SHARE * mu2).sqrt(), beta_target, epsilon)?;
        let mean = (mean_share > 0.0).then(|| norm_bounded_part(clip_norm, (mean_share * mu2).sqrt()));
        let projection = norm_bounded_part(clip_norm, (share * rest).sqrt());
        let covariance = covariance_part(clip_norm, d, ((1.0 - share) * rest * (1.0 - pow2(-50))).sqrt());

        // the μ actually reached: Σ (Δ_steps)² / (σ²_steps − s²) over the parts, each at most its share
        let cont = |sens_steps: f64, noise: &Base2Gaussian| sens_steps * sens_steps / (noise.sigma2_lower() - SMOOTHING_S2 as f64);
        let mut mu_sq = cont(pow2(count.h), &count.noise);
        for part in mean.iter().chain([&projection, &covariance]) {
            mu_sq += cont(part.sensitivity_steps, &part.noise);
        }
        let mu = mu_sq.sqrt();
        assert!(mu <= mu_budget * (1.0 + 1e-12), "calibration exceeded its budget: {mu} > {mu_budget}");
        let delta_gaussian = gdp_delta(eps_m, mu);
        assert!(delta_gaussian + count.padding_failure <= delta_m * (1.0 + 1e-12), "calibration exceeded δ");
        Ok(DprpSpec {
            lower: p.lower.clone(),
            upper: p.upper.clone(),
            inv_half_span: p.lower.iter().zip(&p.upper).map(|(l, u)| if u > l { 2.0 / (u - l) } else { 0.0 }).collect(),
            d,
            k1,
            k2,
            epsilon,
            delta,
            projection_share: share,
            row_norm: p.row_norm,
            projection_kind: p.projection,
            centring: p.centring,
            clip_norm,
            mu_budget,
            mu,
            delta_gaussian,
            count,
            mean,
            projection,
            covariance,
        })
    }

    /// The receipt: fixed by the arguments, before any data is read.
    pub fn describe(&self) -> DprpReceipt {
        let z = self.clip_norm;
        DprpReceipt {
            method: METHOD,
            noise: NOISE,
            neighbours: NEIGHBOURS,
            accounting: ACCOUNTING,
            epsilon: self.epsilon,
            delta: self.delta,
            mu: self.mu,
            delta_gaussian: self.delta_gaussian,
            delta_padding: self.count.padding_failure,
            d: self.d,
            k1: self.k1,
            k2: self.k2,
            row_norm: self.row_norm.name(),
            projection_matrix: self.projection_kind.name(),
            centring: self.centring.name(),
            null_value: NULL_VALUE,
            clip_norm: z,
            projection_share: self.projection_share,
            count_share: COUNT_SHARE,
            mean_share: if self.mean.is_some() { MEAN_SHARE } else { 0.0 },
            mu_count: self.count.mu,
            mu_mean: self.mean.map_or(0.0, |m| m.mu),
            mu_projection: self.projection.mu,
            mu_covariance: self.covariance.mu,
            sensitivity_count: 1.0,
            sensitivity_mean: self.mean.map_or(0.0, |m| m.sensitivity),
            sensitivity_projection: self.projection.sensitivity,
            sensitivity_covariance: self.covariance.sensitivity,
            sigma_count: self.count.sigma_rows(),
            sigma_mean: self.mean.map_or(0.0, |m| m.sigma()),
            sigma_projection: self.projection.sigma(),
            sigma_covariance: self.covariance.sigma(),
            padding_offset: self.count.offset_rows(),
            interval95_count: self.count.interval95_rows(),
            interval95_mean: self.mean.map_or(0.0, |m| m.interval95()),
            interval95_projection: self.projection.interval95(),
            interval95_covariance: self.covariance.interval95(),
        }
    }

    // -----------------------------------------------------------------------------------------
    // the per-row map

    /// Maps one stored row into the scaled ball: NULL (NaN) → 0 (the midpoint), ±∞ and any other
    /// value clamped to its bounds, scaled into [−1, 1] (0 if lower = upper), then the row brought
    /// into the ball of radius Z. Never fails.
    pub fn scale_row(&self, row: &[f64], out: &mut [f64]) {
        for (j, (&x, o)) in row.iter().zip(out.iter_mut()).enumerate() {
            let (l, u) = (self.lower[j], self.upper[j]);
            *o = if x.is_nan() || u <= l {
                0.0
            } else {
                let c = if x < l { l } else if x > u { u } else { x };
                ((c - l) * self.inv_half_span[j] - 1.0).clamp(-1.0, 1.0)
            };
        }
        let norm = out.iter().map(|v| v * v).sum::<f64>().sqrt();
        let target = match self.row_norm {
            RowNorm::Clip if norm > self.clip_norm => self.clip_norm,
            RowNorm::Unit if norm > 0.0 => 1.0,
            _ => return,
        };
        let f = target / norm;
        out.iter_mut().for_each(|v| *v = (*v * f).clamp(-1.0, 1.0));
    }

    /// Maps one released scaled row back to the original units (clip) or keeps it in the scaled
    /// space (unit), clamped: post-processing.
    fn unscale_row(&self, row: &mut [f64]) {
        for (j, o) in row.iter_mut().enumerate() {
            let s = if o.is_nan() { 0.0 } else { o.clamp(-1.0, 1.0) };
            *o = match self.row_norm {
                RowNorm::Unit => s,
                RowNorm::Clip => {
                    let (l, u) = (self.lower[j], self.upper[j]);
                    (l + (s + 1.0) * 0.5 * (u - l)).clamp(l, u)
                }
            };
        }
    }

    // -----------------------------------------------------------------------------------------
    // memory

    /// Rows per chunk of the parallel passes: about 2^15 noise draws per chunk.
    fn chunk_rows(&self) -> usize {
        (32_768 / self.k1).clamp(8, 1024)
    }

    /// Bytes needed whatever the number of rows, for `threads` threads: an upper bound of every
    /// buffer the release holds at once (R, the per-thread accumulators and buffers, the d×d
    /// matrices and nalgebra's temporaries for the eigen-decompositions).
    pub fn fixed_bytes(&self, threads: usize) -> usize {
        let (d, k1, k2) = (self.d, self.k1, self.k2);
        let g = d.min(k1);
        let b = self.chunk_rows();
        let cells = d * (d + 1) / 2;
        let per_thread = 8 * (k1 * b + 2 * k1 + 2 * d) + 24 * cells + 16 * d;
        let shared = 8 * (5 * k1 * d + 5 * g * g + 5 * d * d + 2 * k1 * k2 + 4 * k2 * k2 + d * k2) + 16 * cells + 16 * d;
        shared + threads.max(1) * per_thread + (1 << 16)
    }

    /// Checks the public sizes (d, k1, k2, threads) against the memory limit, before the charge,
    /// and returns how many rows (real and padding) the rest of the limit holds: 8·d bytes each.
    pub fn plan_memory(&self, memory_limit: usize, threads: usize) -> DpResult<MemoryPlan> {
        let threads = threads.max(1);
        let fixed = self.fixed_bytes(threads);
        let per_row = 8 * self.d;
        let capacity = memory_limit.saturating_sub(fixed) / per_row;
        let min_rows = MIN_ROW_CAPACITY.max((2.0 * self.count.offset_rows()).ceil().min(1e18) as usize);
        if capacity < min_rows {
            let need = fixed.saturating_add(min_rows.saturating_mul(per_row));
            let (arg, got) = if self.k1 > self.d { ("k1", self.k1.to_string()) } else { ("memory_limit", memory_limit.to_string()) };
            return Err(DpError::invalid(
                arg,
                format!(
                    "small enough for the memory limit of {memory_limit} bytes: {} columns with k1 = {} and {threads} threads need {need} bytes to hold {min_rows} rows",
                    self.d, self.k1
                ),
                got,
            ));
        }
        Ok(MemoryPlan { memory_limit, threads, chunk_rows: self.chunk_rows(), fixed_bytes: fixed, row_capacity: capacity })
    }

    // -----------------------------------------------------------------------------------------
    // the release

    /// Draws R and the row-count noise and reserves all memory (the whole row buffer of the plan):
    /// no data is read. Call it before the charge; its only failures are an allocation refused by
    /// the system and an interrupt.
    pub fn start<R: Rng + ?Sized>(&self, rng: &mut R, plan: &MemoryPlan, check: &mut dyn FnMut() -> Result<(), Interrupted>) -> Result<DprpRelease, ReleaseFailure> {
        let d = self.d;
        let count_noise = self.count.draw(rng);
        let padding = self.count.padding_rows(count_noise);
        let rt = projection_matrix_t(rng, self.projection_kind, d, self.k1, check)?;
        let mut rows = Vec::new();
        rows.try_reserve_exact(plan.row_capacity * d).map_err(|_| ReleaseFailure::OutOfMemory)?;
        let cells = d * (d + 1) / 2;
        // the block sums are exact in f64 while below 2^53: each product is at most ‖u‖² ≤ U² < 2^52
        let block_rows = ((1u64 << 53) / self.covariance.row_bound2.max(1)).clamp(1, 1 << 40) as usize;
        let workers = (0..plan.threads)
            .map(|_| {
                Ok(Worker {
                    cov_block: try_filled(cells, 0.0)?,
                    cov: try_filled(cells, 0i128)?,
                    block_left: block_rows,
                    sum: try_filled(if self.mean.is_some() { d } else { 0 }, 0i128)?,
                    int_row: try_filled(d.max(self.k1), 0i64)?,
                    float_row: try_filled(d, 0.0)?,
                    projected: try_filled(self.k1 * plan.chunk_rows, 0.0)?,
                })
            })
            .collect::<Result<Vec<_>, ReleaseFailure>>()?;
        Ok(DprpRelease { spec: self.clone(), plan: plan.clone(), rt: Arc::new(rt), count_noise, padding, rows, n: 0, failed: false, block_rows, workers })
    }

    /// The whole release in one call, for tests and tools: start, push every row of `data`
    /// (row-major, NaN for NULL), finish.
    pub fn release<R: Rng + ?Sized>(
        &self, rng: &mut R, data: &[f64], plan: &MemoryPlan, check: &mut dyn FnMut() -> Result<(), Interrupted>,
    ) -> Result<DprpOutput, ReleaseFailure> {
        assert_eq!(data.len() % self.d, 0, "data must hold whole rows of {} values", self.d);
        let mut r = self.start(rng, plan, check)?;
        for (i, row) in data.chunks_exact(self.d).enumerate() {
            if i % CHECK_EVERY == CHECK_EVERY - 1 {
                check()?;
            }
            r.push_row(row)?;
        }
        r.finish(rng, check)
    }
}

/// How much memory a release may use, decided from public quantities before the charge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryPlan {
    pub memory_limit: usize,
    pub threads: usize,
    pub chunk_rows: usize,
    /// Bytes reserved whatever the data (R, accumulators, d×d matrices, per-thread buffers).
    pub fixed_bytes: usize,
    /// Rows (real and padding) the rest of the limit holds, 8·d bytes each.
    pub row_capacity: usize,
}

/// The caller's interrupt check asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupted;

/// Why a started release did not produce rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReleaseFailure {
    /// The released row count m (real plus padding rows) exceeds the memory plan's row capacity.
    /// A function of m, which is released anyway: post-processing, it reveals nothing more.
    #[error("the released table does not fit in the memory limit")]
    MemoryLimit,
    /// The interrupt check returned [`Interrupted`].
    #[error("the release was interrupted")]
    Interrupted,
    /// The system refused an allocation in [`DprpSpec::start`] (before any row is read).
    #[error("out of memory")]
    OutOfMemory,
}

impl From<Interrupted> for ReleaseFailure {
    fn from(_: Interrupted) -> Self {
        ReleaseFailure::Interrupted
    }
}

/// The released table.
#[derive(Debug, Clone, PartialEq)]
pub struct DprpOutput {
    /// m rows of d values, row-major, in a uniformly random order.
    pub rows: Vec<f64>,
    /// m: the number of released rows (real rows plus padding rows).
    pub rows_released: usize,
    /// The noisy row count v = n + (t + N)/2^h (covered by the same guarantee).
    pub noisy_count: f64,
    pub receipt: DprpReceipt,
}

/// The noisy statistics of pass 1, in scaled units.
#[derive(Debug, Clone, PartialEq)]
pub struct NoisyStatistics {
    /// v = n + (t + N)/2^h.
    pub noisy_count: f64,
    /// Σx + N_S (empty with [`Centring::Midpoint`]).
    pub sum: Vec<f64>,
    /// XᵀX + N₂, the noise on the upper triangle mirrored (not centred).
    pub xtx: DMatrix<f64>,
}

/// One thread's buffers, allocated in [`DprpSpec::start`].
struct Worker {
    /// Exact integer sums of upper(uuᵀ) over the current block of rows, held in f64 (every partial
    /// sum is an integer below 2^53), flushed to the i128 totals `cov`.
    cov_block: Vec<f64>,
    cov: Vec<i128>,
    block_left: usize,
    sum: Vec<i128>,
    int_row: Vec<i64>,
    float_row: Vec<f64>,
    /// k1 × chunk_rows projected rows.
    projected: Vec<f64>,
}

/// A release in progress: R drawn, count noise drawn, memory reserved; rows are pushed one by one.
pub struct DprpRelease {
    spec: DprpSpec,
    plan: MemoryPlan,
    /// Rᵀ (k1×d), shared with the helper thread of [`run_interruptibly`].
    rt: Arc<DMatrix<f64>>,
    count_noise: i128,
    padding: usize,
    /// The scaled rows read so far (row-major), later overwritten in place by the output.
    rows: Vec<f64>,
    n: usize,
    failed: bool,
    block_rows: usize,
    workers: Vec<Worker>,
}

impl DprpRelease {
    /// Rows read so far.
    pub fn rows_read(&self) -> usize {
        self.n
    }

    /// Adds one stored row (d values; NaN marks a NULL): clamps, scales and keeps it. Values never
    /// cause an error; the only failure is [`ReleaseFailure::MemoryLimit`], returned (and kept) once
    /// the rows read plus the padding rows exceed the row capacity, i.e. exactly when the released
    /// row count m exceeds it.
    pub fn push_row(&mut self, row: &[f64]) -> Result<(), ReleaseFailure> {
        let d = self.spec.d;
        assert_eq!(row.len(), d, "a row must have {d} values");
        if self.failed || self.n.saturating_add(1).saturating_add(self.padding) > self.plan.row_capacity {
            self.failed = true;
            return Err(ReleaseFailure::MemoryLimit);
        }
        let start = self.rows.len();
        debug_assert!(start + d <= self.rows.capacity());
        self.rows.resize(start + d, 0.0);
        self.spec.scale_row(row, &mut self.rows[start..]);
        self.n += 1;
        Ok(())
    }

    /// Pass 1 and the noise of the three small statistics: the exact integer XᵀX and Σx of the real
    /// rows (per thread, then summed exactly), plus their discrete Gaussian noise, and the noisy
    /// count. Fails only with an interrupt.
    fn statistics<R: Rng + ?Sized>(&mut self, rng: &mut R, bits: &mut BitPool, check: &mut dyn FnMut() -> Result<(), Interrupted>) -> Result<NoisyStatistics, ReleaseFailure> {
        let spec = &self.spec;
        let d = spec.d;
        let count = &spec.count;
        let noisy_count = self.n as f64 + (count.offset_steps as i128 + self.count_noise) as f64 * pow2(-count.h);
        let block_rows = self.block_rows;
        for_each_chunk(&mut self.rows, self.plan.chunk_rows * d, &mut self.workers, check, &|_, chunk, w| {
            for s in chunk.chunks_exact(d) {
                spec.covariance.integer_row(s, &mut w.int_row[..d]);
                for (f, &u) in w.float_row.iter_mut().zip(&w.int_row[..d]) {
                    *f = u as f64;
                }
                accumulate_upper(&mut w.cov_block, &w.float_row);
                w.block_left -= 1;
                if w.block_left == 0 {
                    flush(&mut w.cov_block, &mut w.cov);
                    w.block_left = block_rows;
                }
                if let Some(mean) = &spec.mean {
                    mean.integer_row(s, &mut w.int_row[..d]);
                    for (a, &v) in w.sum.iter_mut().zip(&w.int_row[..d]) {
                        *a += v as i128;
                    }
                }
            }
        })?;
        let (first, others) = self.workers.split_first_mut().expect("at least one worker");
        flush(&mut first.cov_block, &mut first.cov);
        for w in others {
            flush(&mut w.cov_block, &mut w.cov);
            first.cov.iter_mut().zip(&w.cov).for_each(|(a, b)| *a += b);
            first.sum.iter_mut().zip(&w.sum).for_each(|(a, b)| *a += b);
            w.cov.fill(0);
            w.sum.fill(0);
        }
        let sum = match &spec.mean {
            Some(part) => first.sum.iter().map(|&s| (s + part.draw(rng, bits)) as f64 * pow2(part.exp)).collect(),
            None => Vec::new(),
        };
        let cov = &spec.covariance;
        let step = pow2(cov.exp);
        let mut xtx = DMatrix::<f64>::zeros(d, d);
        let mut idx = 0;
        for i in 0..d {
            for j in i..d {
                if idx % CHECK_EVERY == CHECK_EVERY - 1 {
                    check()?;
                }
                let v = (first.cov[idx] + cov.draw(rng, bits)) as f64 * step;
                xtx[(i, j)] = v;
                xtx[(j, i)] = v;
                idx += 1;
            }
        }
        Ok(NoisyStatistics { noisy_count, sum, xtx })
    }

    /// The noisy row count, Σx and XᵀX alone (scaled units), without the projection: for tests and
    /// inspection. A sub-release of the full one, so it is covered by the same receipt.
    pub fn noisy_statistics<R: Rng + ?Sized>(mut self, rng: &mut R, check: &mut dyn FnMut() -> Result<(), Interrupted>) -> Result<NoisyStatistics, ReleaseFailure> {
        if self.failed || self.n + self.padding > self.plan.row_capacity {
            return Err(ReleaseFailure::MemoryLimit);
        }
        self.statistics(rng, &mut BitPool::new(), check)
    }

    /// Accumulates the exact integer statistics, adds the noise, pads, projects, reconstructs and
    /// shuffles. The passes over rows run on `plan.threads` threads (the calling thread included);
    /// only the calling thread calls `check`: between chunks of at most about 2^15 draws, and every
    /// [`CHECK_EVERY`] draws or rows of its own loops, and every 10 ms while a helper thread
    /// computes the eigen-decompositions and the reconstruction matrix ([`run_interruptibly`]).
    pub fn finish<R: Rng + ?Sized>(mut self, rng: &mut R, check: &mut dyn FnMut() -> Result<(), Interrupted>) -> Result<DprpOutput, ReleaseFailure> {
        let m = self.n + self.padding; // ≤ row_capacity unless push_row refused a row
        if self.failed || m > self.plan.row_capacity {
            return Err(ReleaseFailure::MemoryLimit);
        }
        let mut bits = BitPool::new();
        let NoisyStatistics { noisy_count, sum, xtx: mut c } = self.statistics(rng, &mut bits, check)?;
        let spec = &self.spec;
        let d = spec.d;
        let denominator = noisy_count.max(1.0);
        // the noisy mean (clamped to the scaled cube) or the midpoint, and the covariance centred
        // on it (post-processing)
        let mean: Vec<f64> = if sum.is_empty() { vec![0.0; d] } else { sum.iter().map(|s| (s / denominator).clamp(-1.0, 1.0)).collect() };
        for i in 0..d {
            for j in 0..d {
                c[(i, j)] -= denominator * mean[i] * mean[j];
            }
        }
        // V = top-k2 eigenvectors of the centred C′, Wᵀ = V (RᵀV)⁺ (d×k1) and the offset
        // b = μ̂ − Wᵀ Rᵀ μ̂: O(d³ + k1·d·k2), off the calling thread
        let (rt, k2) = (Arc::clone(&self.rt), spec.k2);
        let mu = DVector::from_column_slice(&mean);
        let (wt, offset) = run_interruptibly(check, move || {
            let v = top_eigenvectors(&c, k2); // d×k2
            drop(c);
            let rtv = &*rt * &v; // k1×k2
            let wt = &v * pseudo_inverse(&rtv); // d×k2 · k2×k1
            let offset = &mu - &wt * (&*rt * &mu);
            (wt, offset)
        })?;

        // pass 2: padding rows are all-midpoint (zero in the scaled space); every row projected,
        // noised with its chunk's own ChaCha20 stream, reconstructed and unscaled in place
        self.rows.resize(m * d, 0.0);
        let mut key = [0u8; 32];
        rng.fill_bytes(&mut key);
        let ctx = PassContext { spec, rt: &self.rt, wt: &wt, offset: offset.as_slice(), key };
        for_each_chunk(&mut self.rows, self.plan.chunk_rows * d, &mut self.workers, check, &|i, chunk, w| ctx.process(i, chunk, w))?;

        // a uniformly random order (Fisher–Yates): the guarantee is for the multiset of rows
        let mut rows = std::mem::take(&mut self.rows);
        for i in (1..m).rev() {
            if i % CHECK_EVERY == 0 {
                check()?;
            }
            let j = rng.random_range(0..=i);
            if i != j {
                let (a, b) = rows.split_at_mut(i * d);
                a[j * d..(j + 1) * d].swap_with_slice(&mut b[..d]);
            }
        }
        Ok(DprpOutput { rows, rows_released: m, noisy_count, receipt: spec.describe() })
    }
}

/// Runs `work(chunk index, chunk, worker)` over the chunks of `data`, on one thread per worker (the
/// calling thread runs the first and calls `check` before each of its chunks). An interrupt stops
/// every thread at its next chunk.
fn for_each_chunk(
    data: &mut [f64], chunk_len: usize, workers: &mut [Worker], check: &mut dyn FnMut() -> Result<(), Interrupted>,
    work: &(dyn Fn(usize, &mut [f64], &mut Worker) + Sync),
) -> Result<(), Interrupted> {
    let chunks = Mutex::new(data.chunks_mut(chunk_len.max(1)).enumerate());
    let abort = AtomicBool::new(false);
    let (main, others) = workers.split_first_mut().expect("at least one worker");
    let mut interrupted = false;
    std::thread::scope(|scope| {
        for w in others {
            let (chunks, abort) = (&chunks, &abort);
            scope.spawn(move || {
                crate::release::block_signals();
                while !abort.load(Ordering::Relaxed) {
                    let Some((i, chunk)) = next_chunk(chunks) else { break };
                    work(i, chunk, w);
                }
            });
        }
        // dropped when the loop ends or the check unwinds: the other threads stop at their next chunk
        let _stop_others = AbortOnDrop(&abort);
        loop {
            if check().is_err() {
                interrupted = true;
                break;
            }
            let Some((i, chunk)) = next_chunk(&chunks) else { break };
            work(i, chunk, main);
        }
    });
    if interrupted {
        Err(Interrupted)
    } else {
        Ok(())
    }
}

/// Sets the abort flag if the calling thread leaves the loop, normally or by unwinding (a panicking
/// interrupt check), so that the other threads stop at their next chunk.
struct AbortOnDrop<'a>(&'a AtomicBool);

impl Drop for AbortOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

type ChunkIter<'a> = std::iter::Enumerate<std::slice::ChunksMut<'a, f64>>;

fn next_chunk<'a>(chunks: &Mutex<ChunkIter<'a>>) -> Option<(usize, &'a mut [f64])> {
    chunks.lock().unwrap_or_else(|e| e.into_inner()).next()
}

/// What every thread of the projection pass shares (read-only).
struct PassContext<'a> {
    spec: &'a DprpSpec,
    rt: &'a DMatrix<f64>,
    wt: &'a DMatrix<f64>,
    offset: &'a [f64],
    key: [u8; 32],
}

impl PassContext<'_> {
    /// One chunk of rows, in place: P = Rᵀ·S (k1×b), each column rounded, norm-enforced and noised
    /// with the chunk's own ChaCha20 stream (the key drawn from the parent generator, the stream
    /// number the chunk index), then X′ = Wᵀ·P′ + b (d×b), unscaled and clamped.
    fn process(&self, index: usize, chunk: &mut [f64], w: &mut Worker) {
        let (d, k1) = (self.spec.d, self.spec.k1);
        let b = chunk.len() / d;
        let part = &self.spec.projection;
        let (inv, step) = (pow2(-part.exp), pow2(part.exp));
        let mut bits = BitPool::new();
        let mut rng = DpRng::from_seed(self.key);
        rng.set_stream(index as u64);
        let pbuf = &mut w.projected[..k1 * b];
        let q = &mut w.int_row[..k1];
        DMatrixViewMut::from_slice(pbuf, k1, b).gemm(1.0, self.rt, &DMatrixView::from_slice(chunk, d, b), 0.0);
        for col in pbuf.chunks_exact_mut(k1) {
            for (qj, &v) in q.iter_mut().zip(col.iter()) {
                *qj = round_half_away(v * inv);
            }
            enforce_norm(q, part.row_bound2);
            for (o, &qj) in col.iter_mut().zip(q.iter()) {
                *o = (qj + part.noise.sample(&mut rng, &mut bits)) as f64 * step;
            }
        }
        DMatrixViewMut::from_slice(chunk, d, b).gemm(1.0, self.wt, &DMatrixView::from_slice(pbuf, k1, b), 0.0);
        for row in chunk.chunks_exact_mut(d) {
            for (o, &c) in row.iter_mut().zip(self.offset) {
                *o += c;
            }
            self.spec.unscale_row(row);
        }
    }
}

/// Shrinks an integer vector toward zero until its squared norm is at most `bound2` (checked in exact
/// integer arithmetic). A per-row map, so the sensitivity argument holds whatever floating-point
/// rounding produced the vector.
pub fn enforce_norm(q: &mut [i64], bound2: u64) {
    let norm2 = |q: &[i64]| q.iter().map(|&v| (v as i128) * (v as i128)).sum::<i128>();
    let mut n2 = norm2(q);
    while n2 > bound2 as i128 {
        let f = ((bound2 as f64) / (n2 as f64)).sqrt() * (1.0 - 1e-12);
        for v in q.iter_mut() {
            *v = (*v as f64 * f).trunc() as i64; // toward zero: never increases |v|
        }
        let m = norm2(q);
        if m >= n2 {
            q.iter_mut().for_each(|v| *v = 0);
            return;
        }
        n2 = m;
    }
}

/// acc += upper triangle (row by row, diagonal included) of u·uᵀ, for integer-valued u. Exact while
/// every product and every partial sum is an integer below 2^53 in magnitude: each product is at most
/// the enforced ‖u‖² ≤ U² < 2^52, and the block is flushed every ⌊2^53/U²⌋ rows.
pub fn accumulate_upper(acc: &mut [f64], u: &[f64]) {
    let mut idx = 0;
    for (i, &ui) in u.iter().enumerate() {
        let len = u.len() - i;
        if ui != 0.0 {
            for (a, &uj) in acc[idx..idx + len].iter_mut().zip(&u[i..]) {
                *a += ui * uj;
            }
        }
        idx += len;
    }
}

fn flush(block: &mut [f64], total: &mut [i128]) {
    for (b, t) in block.iter_mut().zip(total.iter_mut()) {
        *t += *b as i128; // an integer below 2^53: exact
        *b = 0.0;
    }
}

fn box_muller<R: Rng + ?Sized>(rng: &mut R) -> (f64, f64) {
    let u1 = ((rng.random::<u64>() >> 11) + 1) as f64 * pow2(-53); // (0, 1]
    let u2 = (rng.random::<u64>() >> 11) as f64 * pow2(-53); // [0, 1)
    let r = (-2.0 * u1.ln()).sqrt();
    let t = std::f64::consts::TAU * u2;
    (r * t.cos(), r * t.sin())
}

/// Rᵀ (k1×d) of the given kind, from independent N(0, 1) draws (Box–Muller on 53-bit uniforms from
/// the CSPRNG): the Gaussian G scaled to largest singular value 1, or its polar factor (all singular
/// values 1), computed from the eigen-decomposition of the smaller Gram matrix. Data-independent:
/// the privacy argument holds for every R, and the integer norm enforcement covers any rounding.
pub fn projection_matrix_t<R: Rng + ?Sized>(
    rng: &mut R, kind: Projection, d: usize, k1: usize, check: &mut dyn FnMut() -> Result<(), Interrupted>,
) -> Result<DMatrix<f64>, ReleaseFailure> {
    const BLOCK: usize = 256;
    loop {
        let mut vals = try_filled(k1 * d, 0.0f64)?;
        for (i, pair) in vals.chunks_mut(2).enumerate() {
            if i % CHECK_EVERY == CHECK_EVERY - 1 {
                check()?;
            }
            let (a, b) = box_muller(rng);
            pair[0] = a;
            if pair.len() > 1 {
                pair[1] = b;
            }
        }
        let gt = DMatrix::from_vec(k1, d, vals); // Gᵀ
        // Gram of the smaller side: GGᵀ = (Gᵀ)ᵀGᵀ (d×d) or GᵀG = Gᵀ(Gᵀ)ᵀ (k1×k1), by blocks
        let small_d = d <= k1;
        let g = d.min(k1);
        let mut gram = DMatrix::<f64>::zeros(g, g);
        if small_d {
            for start in (0..k1).step_by(BLOCK) {
                check()?;
                let blk = gt.rows(start, BLOCK.min(k1 - start));
                gram.gemm(1.0, &blk.transpose(), &blk, 1.0);
            }
        } else {
            for start in (0..d).step_by(BLOCK) {
                check()?;
                let blk = gt.columns(start, BLOCK.min(d - start));
                gram.gemm(1.0, &blk, &blk.transpose(), 1.0);
            }
        }
        // the O(g³) eigen-decomposition and the last product, off the calling thread
        let polar = run_interruptibly(check, move || {
            let eig = SymmetricEigen::new(gram);
            let (lmin, lmax) = (eig.eigenvalues.min(), eig.eigenvalues.max());
            if !(lmax.is_finite() && lmax > 0.0 && lmin > lmax * 1e-20) {
                return None; // probability 0: a degenerate draw
            }
            Some(match kind {
                Projection::Gaussian => gt / lmax.sqrt(),
                Projection::Orthonormal => {
                    // A^(-1/2) = Q Λ^(-1/2) Qᵀ; Rᵀ = Gᵀ A^(-1/2) (A = GGᵀ) or A^(-1/2) Gᵀ (A = GᵀG)
                    let mut scaled_q = eig.eigenvectors.clone();
                    for (mut col, &l) in scaled_q.column_iter_mut().zip(eig.eigenvalues.iter()) {
                        col /= l.sqrt();
                    }
                    let inv_sqrt = &scaled_q * eig.eigenvectors.transpose();
                    if small_d { &gt * inv_sqrt } else { inv_sqrt * &gt }
                }
            })
        })?;
        if let Some(rt) = polar {
            return Ok(rt);
        }
    }
}

/// Runs `work` (a computation without interrupt checks of its own: an eigen-decomposition, a large
/// matrix product) on a helper thread that owns its inputs, while the calling thread calls `check`
/// every 10 ms. On an interrupt it returns at once; the helper thread finishes its computation in
/// the background, touches nothing else, and drops its result. A panic in `work` is resumed here.
pub fn run_interruptibly<T: Send + 'static>(
    check: &mut dyn FnMut() -> Result<(), Interrupted>, work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Interrupted> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let handle = std::thread::spawn(move || {
        crate::release::block_signals();
        let _ = tx.send(work());
    });
    loop {
        check()?;
        match rx.recv_timeout(std::time::Duration::from_millis(10)) {
            Ok(v) => {
                let _ = handle.join();
                return Ok(v);
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
                Err(panic) => std::panic::resume_unwind(panic),
                Ok(()) => unreachable!("the helper thread ended without a result"),
            },
        }
    }
}

/// The eigenvectors of the k largest eigenvalues of a symmetric matrix, as columns (d×k).
pub fn top_eigenvectors(c: &DMatrix<f64>, k: usize) -> DMatrix<f64> {
    let eig = SymmetricEigen::new(c.clone());
    let mut order: Vec<usize> = (0..c.nrows()).collect();
    order.sort_by(|&a, &b| eig.eigenvalues[b].total_cmp(&eig.eigenvalues[a]));
    DMatrix::from_fn(c.nrows(), k, |i, j| eig.eigenvectors[(i, order[j])])
}

/// Moore–Penrose pseudo-inverse of a tall k1×k2 matrix M through its k2×k2 Gram matrix:
/// M⁺ = (MᵀM)⁺Mᵀ, dropping singular values below a relative 1e-12.
fn pseudo_inverse(m: &DMatrix<f64>) -> DMatrix<f64> {
    let eig = SymmetricEigen::new(m.transpose() * m);
    let lmax = eig.eigenvalues.max().max(0.0);
    let mut scaled_q = eig.eigenvectors.clone();
    for (mut col, &l) in scaled_q.column_iter_mut().zip(eig.eigenvalues.iter()) {
        if l > lmax * 1e-24 && l > 0.0 {
            col /= l;
        } else {
            col.fill(0.0);
        }
    }
    (scaled_q * eig.eigenvectors.transpose()) * m.transpose()
}
