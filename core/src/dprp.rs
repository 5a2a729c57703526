//! DPRP: differentially private random projection release of a whole table
//! (Gondara & Wang, "Differentially Private Small Dataset Release Using Random Projections", UAI 2020),
//! with a corrected calibration. The derivation is in docs/privacy/dprp.md.
//!
//! Each row is clamped to public per-column bounds, scaled into [−1, 1]^d and mapped into the L2 ball
//! of radius Z ([`RowNorm`]). With a data-independent Gaussian projection R (d×k1, scaled so that its
//! largest singular value is 1) the release computes
//!   P′ = XR + N₁            (n×k1, one noisy projected row per input row),
//!   C′ = XᵀX + N₂           (noise on the upper triangle incl. the diagonal, mirrored),
//!   V  = top-k2 eigenvectors of C′,
//!   X′ = P′ (VᵀR)⁺ Vᵀ       (post-processing), mapped back to the original units and clamped.
//!
//! Neighbouring relation: **replace one row**; n is released. Both statistics are exact integers on
//! power-of-two grids whose per-row contributions are norm-bounded in integer arithmetic, the noise is
//! an exactly sampled discrete Gaussian on the same grid, and the privacy loss is accounted in zCDP
//! (Bun & Steinke 2016; CKS20 for the discrete Gaussian) and converted to (ε, δ) once.
use crate::accounting::mechanism_epsilon;
use crate::error::{DpError, DpResult};
use crate::grid::{floor_log2, pow2, round_half_away};
use crate::params::{check_delta, check_epsilon, check_float_bounds, fmt_f64};
use crate::sampling::dyadic;
use crate::sampling64::discrete_gaussian_u64;
use nalgebra::{DMatrix, SymmetricEigen};
use rand::Rng;
use serde::Serialize;

/// Method name recorded in every receipt.
pub const METHOD: &str = "dprp";
/// Noise distribution recorded in every receipt.
pub const NOISE: &str = "discrete_gaussian";
/// The neighbouring relation the guarantee is stated for.
pub const NEIGHBOURS: &str = "replace one row; the row count is released";
/// Default share of the privacy loss ρ spent on the projection (the rest goes to the covariance).
pub const DEFAULT_PROJECTION_SHARE: f64 = 0.8;
/// Largest number of columns: the covariance is d×d and its eigen-decomposition costs O(d³).
pub const MAX_COLUMNS: usize = 1024;
/// Largest projection width k1.
pub const MAX_K1: usize = 4096;
/// Noise grids: σ spans 2^GRID_BITS..2^(GRID_BITS+2) grid steps. Rounding the statistic to the grid
/// moves each cell by at most σ·2^-(GRID_BITS+1), negligible next to the noise; a coarser grid keeps
/// every integer and every σ² within 64 bits.
pub const GRID_BITS: i32 = 8;

/// How each scaled row is brought into an L2 ball, which bounds the sensitivities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowNorm {
    /// Rows whose L2 norm exceeds Z are shrunk to norm Z; others are unchanged. Keeps the original
    /// units. Z defaults to √d (rounded up, [`default_clip_norm`]), the largest norm in [−1, 1]^d, so
    /// no row is changed.
    Clip,
    /// Every nonzero row is divided by its norm (the paper's normalisation), Z = 1. Keeps only the
    /// direction of each scaled row: the output is in the scaled space [−1, 1]^d, not in the original
    /// units.
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

/// How the random projection R (d×k1) is drawn. Both are data-independent and have largest singular
/// value 1, so the sensitivity of XR is the same; they differ in how much the reconstruction
/// amplifies the noise (docs/privacy/dprp.md, "Choosing k1 and k2").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Projection {
    /// The paper's R: independent N(0, 1) entries, divided by the largest singular value.
    Gaussian,
    /// The polar factor U·Wᵀ of the same Gaussian draw G = U·Σ·Wᵀ: a uniformly random matrix with
    /// all singular values 1 (orthonormal rows when k1 >= d).
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
    /// Share of ρ spent on the projection, strictly between 0 and 1.
    pub projection_share: f64,
    pub row_norm: RowNorm,
    /// Z for [`RowNorm::Clip`], in (0, √d]; `None` means √d. Must be `None` for [`RowNorm::Unit`].
    pub clip_norm: Option<f64>,
    pub projection: Projection,
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
        }
    }
}

/// One noised statistic: its grid, its integer row bound and its noise, all fixed before any data is
/// read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoisePart {
    /// zCDP ρ spent on this part.
    pub rho: f64,
    /// L2 sensitivity under replace-one, in scaled units.
    pub sensitivity: f64,
    /// The statistic and its noise live on the grid 2^exp.
    pub exp: i32,
    /// Grid of the rounded rows (the covariance squares rows rounded to 2^row_exp; 2·row_exp = exp).
    pub row_exp: i32,
    /// Every row's integer vector has squared norm at most this (enforced in integers).
    pub row_bound2: u64,
    /// Variance parameter of the discrete Gaussian, in grid steps squared.
    pub sigma2_steps: u64,
}

impl NoisePart {
    /// Standard deviation parameter of the noise in scaled units: √σ²_steps · 2^exp.
    pub fn sigma(&self) -> f64 {
        (self.sigma2_steps as f64).sqrt() * pow2(self.exp)
    }
}

/// Everything a release will spend and do, known before any data is read: the receipt's content.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DprpReceipt {
    pub method: &'static str,
    pub noise: &'static str,
    pub neighbours: &'static str,
    pub epsilon: f64,
    pub delta: f64,
    /// Total zCDP ρ; (ε, δ) follows from it by the conversion in [`zcdp_delta`].
    pub rho: f64,
    pub projection_share: f64,
    pub rho_projection: f64,
    pub rho_covariance: f64,
    pub n: usize,
    pub d: usize,
    pub k1: usize,
    pub k2: usize,
    pub row_norm: &'static str,
    pub projection_matrix: &'static str,
    /// Z: every scaled row has L2 norm at most Z.
    pub clip_norm: f64,
    /// Replace-one L2 sensitivity of XR (2Z, R scaled to largest singular value 1).
    pub sensitivity_projection: f64,
    /// Replace-one L2 sensitivity of the upper triangle of XᵀX (Z·√(Z² + min(1, Z)²)).
    pub sensitivity_covariance: f64,
    /// Noise σ on each cell of XR and of the upper triangle of XᵀX, in scaled units.
    pub sigma_projection: f64,
    pub sigma_covariance: f64,
}

/// A validated release: parameters, defaults resolved and noise calibrated.
#[derive(Debug, Clone, PartialEq)]
pub struct DprpSpec {
    pub lower: Vec<f64>,
    pub upper: Vec<f64>,
    pub n: usize,
    pub d: usize,
    pub k1: usize,
    pub k2: usize,
    pub epsilon: f64,
    pub delta: f64,
    pub projection_share: f64,
    pub row_norm: RowNorm,
    pub projection_kind: Projection,
    pub clip_norm: f64,
    /// Total zCDP ρ allowed by (ε, δ).
    pub rho: f64,
    pub projection: NoisePart,
    pub covariance: NoisePart,
}

// ---------------------------------------------------------------------------------------------
// zCDP accounting

/// ln of the δ bound at order α for a ρ-zCDP mechanism at ε:
/// (α−1)(αρ−ε) + (α−1)·ln(1−1/α) − ln α.
fn zcdp_log_delta_at(rho: f64, eps: f64, alpha: f64) -> f64 {
    (alpha - 1.0) * (alpha * rho - eps) + (alpha - 1.0) * (-1.0 / alpha).ln_1p() - alpha.ln()
}

/// A δ such that every ρ-zCDP mechanism is (ε, δ)-DP (CKS20, Proposition 12 / Corollary 13; proof in
/// docs/privacy/dprp.md): the minimum over α > 1 of exp((α−1)(αρ−ε)) · (1−1/α)^(α−1) / α.
///
/// Every α gives a valid bound. The exponent is convex in α with derivative
/// (2α−1)ρ − ε + ln(1−1/α), increasing, so α is found by bisection on its sign; only the value at the
/// α finally used matters, so an imprecise α can only loosen the bound.
pub fn zcdp_delta(rho: f64, eps: f64) -> f64 {
    zcdp_log_delta(rho, eps).exp().min(1.0)
}

fn zcdp_log_delta(rho: f64, eps: f64) -> f64 {
    assert!(rho >= 0.0 && eps >= 0.0);
    if rho == 0.0 {
        return f64::NEG_INFINITY;
    }
    let slope = |a: f64| (2.0 * a - 1.0) * rho - eps + (-1.0 / a).ln_1p();
    // the slope is positive at (ε + 1)/(2ρ) + 1 (there (2α−1)ρ − ε > 1 > −ln(1−1/α))
    let (mut lo, mut hi) = (1.0 + 1e-9, (eps + 1.0) / (2.0 * rho) + 2.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if slope(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    zcdp_log_delta_at(rho, eps, 0.5 * (lo + hi))
}

/// The largest ρ (to a relative 1e-12, rounded down) with zcdp_delta(ρ, ε) ≤ δ, with a relative
/// margin of 1e-9 on δ for the rounding of the evaluation.
pub fn zcdp_rho(eps: f64, delta: f64) -> f64 {
    let target = delta.ln() + (-1e-9f64).ln_1p();
    let ok = |rho: f64| zcdp_log_delta(rho, eps) <= target;
    let mut lo = 0.0;
    let mut hi = eps.max(1e-300);
    while ok(hi) {
        lo = hi;
        hi *= 2.0;
    }
    while hi - lo > hi * 1e-12 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if ok(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

// ---------------------------------------------------------------------------------------------
// calibration

/// Smallest s ≥ 0 integer with s ≥ x², for x = m·2^-44 with m < 2^64 (x < 2^20), exactly.
fn ceil_square(x: f64) -> u64 {
    assert!(x >= 0.0 && x < pow2(20));
    let m = (x * pow2(44)) as u128; // exact: x is a multiple of 2^-44 when x >= 2^8
    assert_eq!(m as f64, x * pow2(44), "ceil_square: x not on the 2^-44 grid");
    let sq = m * m; // < 2^128
    let r = (sq >> 88) + ((sq & ((1u128 << 88) - 1)) != 0) as u128;
    u64::try_from(r).expect("ceil_square overflow")
}

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

/// The default Z for [`RowNorm::Clip`]: the smallest float whose square is at least d (so that no
/// row of [−1, 1]^d, corners included, is shrunk).
pub fn default_clip_norm(d: usize) -> f64 {
    let z = (d as f64).sqrt();
    let (m, k) = if z > 0.0 { dyadic(z) } else { (0, 0) };
    // z² < d exactly? then take the next float up (z is within half an ulp of √d)
    let below = (m as u128) * (m as u128) < (d as u128) << (2 * k.max(0) as u32);
    if below { f64::from_bits(z.to_bits() + 1) } else { z }
}

/// σ = Δ/√(2ρ), nudged up by a relative 2^-40 so that rounding cannot make it too small.
fn sigma_for(sensitivity: f64, rho: f64) -> f64 {
    sensitivity / (2.0 * rho).sqrt() * (1.0 + pow2(-40))
}

/// The projection part: rows of XR are rounded to the noise grid and kept within norm Z there.
fn projection_part(z: f64, rho: f64) -> NoisePart {
    let sensitivity = 2.0 * z;
    let sigma = sigma_for(sensitivity, rho);
    let exp = floor_log2(sigma) - GRID_BITS;
    NoisePart {
        rho,
        sensitivity,
        exp,
        row_exp: exp,
        row_bound2: floor_square(z * pow2(-exp)),
        sigma2_steps: ceil_square(sigma * pow2(-exp)),
    }
}

/// The covariance part: rows are rounded to 2^row_exp and squared exactly, so XᵀX lives on
/// 2^(2·row_exp). Sensitivity Z·√(Z² + m²) with m = min(1, Z) the bound on one scaled entry
/// (docs/privacy/dprp.md); σ² in steps also covers the same bound evaluated on the integer row and
/// entry bounds actually enforced, which is the larger one only on grids coarser than the data.
fn covariance_part(z: f64, rho: f64) -> NoisePart {
    let m = z.min(1.0);
    let sensitivity = z * (z * z + m * m).sqrt();
    let sigma = sigma_for(sensitivity, rho);
    let mut exp = floor_log2(sigma) - GRID_BITS;
    if exp % 2 != 0 {
        exp -= 1; // an even exponent, so that it is the square of the row grid; σ spans 2^8..2^10 steps
    }
    let row_exp = exp / 2;
    let row_bound2 = floor_square(z * pow2(-row_exp));
    // |scaled entry| <= 1, so after monotone rounding |u_j| <= round(2^-row_exp); enforce_norm only shrinks
    let entry = round_half_away(pow2(-row_exp)) as u128;
    let entry2 = (entry * entry).min(row_bound2 as u128);
    let sens2_steps = row_bound2 as u128 * (row_bound2 as u128 + entry2);
    let need = (sens2_steps as f64 / (2.0 * rho) * (1.0 + pow2(-40))).ceil() as u64;
    NoisePart {
        rho,
        sensitivity,
        exp,
        row_exp,
        row_bound2,
        sigma2_steps: ceil_square(sigma * pow2(-exp)).max(need),
    }
}

/// Default projection width from public quantities only (docs/privacy/dprp.md, "Choosing k1 and
/// k2"). With the orthonormal projection any k1 >= d gives the same reconstruction noise, so k1 = d
/// (the cheapest); the paper's Gaussian R amplifies the noise by about (1 + √(d/k1))², so k1 = 4d.
pub fn default_k1(projection: Projection, d: usize) -> usize {
    match projection {
        Projection::Orthonormal => d,
        Projection::Gaussian => (4 * d).min(MAX_K1),
    }
}

/// Default number of principal directions from public quantities only: round(√ρ₁ / 2), between 1
/// and d, with ρ₁ the zCDP ρ of the projection. Each kept direction adds noise of variance
/// σ₁² = 2Z²/ρ₁ per row; the rule is fitted to the measurements in docs/privacy/dprp.md (k2 = 1 for
/// every ε up to about 32 at δ = 1e-5).
pub fn default_k2(d: usize, rho_projection: f64) -> usize {
    ((rho_projection.sqrt() / 2.0).round() as usize).clamp(1, d)
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
    let max = default_clip_norm(d);
    match (row_norm, clip) {
        (RowNorm::Unit, None) => Ok(1.0),
        (RowNorm::Unit, Some(z)) => Err(DpError::invalid("clip_norm", "NULL with unit row normalisation", fmt_f64(z))),
        (RowNorm::Clip, None) => Ok(max),
        (RowNorm::Clip, Some(z)) if z.is_finite() && z > 0.0 && z <= max => Ok(z),
        (RowNorm::Clip, Some(z)) => {
            Err(DpError::invalid("clip_norm", format!("greater than 0 and at most sqrt(d) = {}", fmt_f64(max)), fmt_f64(z)))
        }
    }
}

impl DprpSpec {
    /// Validates the parameters for a table of `n` rows and calibrates both noises.
    pub fn new(n: usize, p: &DprpParams) -> DpResult<Self> {
        let d = check_bounds(&p.lower, &p.upper)?;
        let epsilon = check_epsilon("epsilon", p.epsilon)?;
        let delta = check_delta("delta", p.delta, false)?;
        let share = check_share(p.projection_share)?;
        if n == 0 {
            return Err(DpError::invalid("source", "a table with at least one row", "0 rows"));
        }
        let k1 = check_k("k1", p.k1, MAX_K1, default_k1(p.projection, d))?;
        let clip_norm = check_clip_norm(p.row_norm, p.clip_norm, d)?;
        // run at the float just below the charged ε and δ (see accounting::mechanism_epsilon)
        let rho = zcdp_rho(mechanism_epsilon(epsilon), mechanism_epsilon(delta));
        let rho1 = rho * share;
        let k2 = check_k("k2", p.k2, d.min(k1), default_k2(d, rho1).min(k1))?;
        // shave 2^-50 so that rounding cannot make ρ₁ + ρ₂ exceed ρ
        let rho2 = (rho - rho1) * (1.0 - pow2(-50));
        Ok(DprpSpec {
            lower: p.lower.clone(),
            upper: p.upper.clone(),
            n,
            d,
            k1,
            k2,
            epsilon,
            delta,
            projection_share: share,
            row_norm: p.row_norm,
            projection_kind: p.projection,
            clip_norm,
            rho,
            projection: projection_part(clip_norm, rho1),
            covariance: covariance_part(clip_norm, rho2),
        })
    }

    /// The receipt: fixed by the parameters and n, before any data is read.
    pub fn describe(&self) -> DprpReceipt {
        DprpReceipt {
            method: METHOD,
            noise: NOISE,
            neighbours: NEIGHBOURS,
            epsilon: self.epsilon,
            delta: self.delta,
            rho: self.rho,
            projection_share: self.projection_share,
            rho_projection: self.projection.rho,
            rho_covariance: self.covariance.rho,
            n: self.n,
            d: self.d,
            k1: self.k1,
            k2: self.k2,
            row_norm: self.row_norm.name(),
            projection_matrix: self.projection_kind.name(),
            clip_norm: self.clip_norm,
            sensitivity_projection: self.projection.sensitivity,
            sensitivity_covariance: self.covariance.sensitivity,
            sigma_projection: self.projection.sigma(),
            sigma_covariance: self.covariance.sigma(),
        }
    }

    /// Releases a synthetic table of n rows for `data` (row-major n×d). Returns the rows (row-major
    /// n×d) and the receipt.
    pub fn release<R: Rng + ?Sized>(&self, rng: &mut R, data: &[f64]) -> DpResult<(Vec<f64>, DprpReceipt)> {
        let scaled = self.scale_rows(data)?;
        let r = projection_matrix(rng, self.projection_kind, self.d, self.k1);
        let p_noisy = self.noisy_projection(rng, &scaled, &r);
        let c_noisy = self.noisy_covariance(rng, &scaled);
        let x = reconstruct(&p_noisy, &c_noisy, &r, self.k2);
        Ok((self.unscale(x), self.describe()))
    }

    // -----------------------------------------------------------------------------------------
    // the per-row map

    /// Clamps each value to its bounds, scales it into [−1, 1] and maps the row into the ball of
    /// radius Z. Row-major in and out. NaN anywhere is an error.
    pub fn scale_rows(&self, data: &[f64]) -> DpResult<Vec<f64>> {
        let (n, d) = (self.n, self.d);
        if data.len() != n * d {
            return Err(DpError::invalid("data", format!("{n} rows of {d} values ({} values)", n * d), data.len()));
        }
        if data.iter().any(|x| x.is_nan()) {
            return Err(DpError::NanInput { arg: "data" });
        }
        let mut out = vec![0.0; n * d];
        for (row, o) in data.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
            self.scale_row(row, o);
        }
        Ok(out)
    }

    fn scale_row(&self, row: &[f64], out: &mut [f64]) {
        for (j, (&x, o)) in row.iter().zip(out.iter_mut()).enumerate() {
            let (l, u) = (self.lower[j], self.upper[j]);
            let c = if x < l { l } else if x > u { u } else { x };
            *o = if u > l { (2.0 * ((c - l) / (u - l)) - 1.0).clamp(-1.0, 1.0) } else { 0.0 };
        }
        let norm = out.iter().map(|v| v * v).sum::<f64>().sqrt();
        let target = match self.row_norm {
            RowNorm::Clip if norm > self.clip_norm => self.clip_norm,
            RowNorm::Unit if norm > 0.0 => 1.0,
            _ => return,
        };
        let f = target / norm;
        out.iter_mut().for_each(|v| *v *= f);
    }

    /// Maps released scaled rows back to the original units (clip) or keeps them in the scaled space
    /// (unit), and clamps: post-processing. Takes the d×n column-major matrix, returns row-major n×d.
    fn unscale(&self, x: DMatrix<f64>) -> Vec<f64> {
        let mut v = x.as_slice().to_vec();
        for row in v.chunks_exact_mut(self.d) {
            for (j, o) in row.iter_mut().enumerate() {
                let s = o.clamp(-1.0, 1.0);
                *o = match self.row_norm {
                    RowNorm::Unit => s,
                    RowNorm::Clip => {
                        let (l, u) = (self.lower[j], self.upper[j]);
                        (l + (s + 1.0) * 0.5 * (u - l)).clamp(l, u)
                    }
                };
            }
        }
        v
    }

    // -----------------------------------------------------------------------------------------
    // the two noisy statistics

    /// P′ᵀ (k1×n, column i = noisy projection of row i): each projected row is rounded to the grid,
    /// kept within the integer norm bound, and gets discrete Gaussian noise on the same grid.
    pub fn noisy_projection<R: Rng + ?Sized>(&self, rng: &mut R, scaled: &[f64], r: &DMatrix<f64>) -> DMatrix<f64> {
        let st = DMatrix::from_column_slice(self.d, self.n, scaled);
        let mut pt = r.transpose() * st;
        let part = &self.projection;
        let (inv_step, step) = (pow2(-part.exp), pow2(part.exp));
        let mut q = vec![0i64; self.k1];
        for col in pt.as_mut_slice().chunks_exact_mut(self.k1) {
            for (qj, &p) in q.iter_mut().zip(col.iter()) {
                *qj = round_half_away(p * inv_step);
            }
            enforce_norm(&mut q, part.row_bound2);
            for (o, &qj) in col.iter_mut().zip(&q) {
                *o = (qj + discrete_gaussian_u64(rng, part.sigma2_steps)) as f64 * step;
            }
        }
        pt
    }

    /// C′ (d×d): the exact integer XᵀX of the rounded, norm-bounded rows, with discrete Gaussian
    /// noise on the upper triangle (diagonal included), mirrored.
    pub fn noisy_covariance<R: Rng + ?Sized>(&self, rng: &mut R, scaled: &[f64]) -> DMatrix<f64> {
        let d = self.d;
        let part = &self.covariance;
        let inv_step = pow2(-part.row_exp);
        let mut acc = vec![0i128; d * (d + 1) / 2];
        let mut u = vec![0i64; d];
        for row in scaled.chunks_exact(d) {
            for (uj, &s) in u.iter_mut().zip(row) {
                *uj = round_half_away(s * inv_step);
            }
            enforce_norm(&mut u, part.row_bound2);
            accumulate_upper(&mut acc, &u);
        }
        let step = pow2(part.exp);
        let mut c = DMatrix::zeros(d, d);
        let mut idx = 0;
        for i in 0..d {
            for j in i..d {
                let noisy = acc[idx] + discrete_gaussian_u64(rng, part.sigma2_steps) as i128;
                let v = noisy as f64 * step;
                c[(i, j)] = v;
                c[(j, i)] = v;
                idx += 1;
            }
        }
        c
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
            // cannot happen for f < 1 unless every entry is already tiny; zero is always within bound
            q.iter_mut().for_each(|v| *v = 0);
            return;
        }
        n2 = m;
    }
}

/// acc += upper triangle (row by row, diagonal included) of u·uᵀ, in exact integers.
fn accumulate_upper(acc: &mut [i128], u: &[i64]) {
    let mut idx = 0;
    for (i, &ui) in u.iter().enumerate() {
        if ui == 0 {
            idx += u.len() - i;
            continue;
        }
        for &uj in &u[i..] {
            acc[idx] += (ui as i128) * (uj as i128);
            idx += 1;
        }
    }
}

/// R (d×k1) of the given kind, from independent N(0, 1) draws (Box–Muller on 53-bit uniforms from
/// the CSPRNG). Largest singular value 1. Data-independent: the privacy argument holds for every R.
pub fn projection_matrix<R: Rng + ?Sized>(rng: &mut R, kind: Projection, d: usize, k1: usize) -> DMatrix<f64> {
    loop {
        let g = gaussian_matrix(rng, d, k1);
        let svd = g.clone().svd(true, true);
        let smax = svd.singular_values.max();
        if !(smax > 0.0 && smax.is_finite()) {
            continue;
        }
        return match kind {
            Projection::Gaussian => g / smax,
            Projection::Orthonormal => svd.u.expect("u computed") * svd.v_t.expect("v_t computed"),
        };
    }
}

fn gaussian_matrix<R: Rng + ?Sized>(rng: &mut R, d: usize, k1: usize) -> DMatrix<f64> {
    let mut g = DMatrix::zeros(d, k1);
    let mut it = g.iter_mut();
    while let Some(a) = it.next() {
        let (z0, z1) = box_muller(rng);
        *a = z0;
        if let Some(b) = it.next() {
            *b = z1;
        }
    }
    g
}

fn box_muller<R: Rng + ?Sized>(rng: &mut R) -> (f64, f64) {
    let u1 = ((rng.random::<u64>() >> 11) + 1) as f64 * pow2(-53); // (0, 1]
    let u2 = (rng.random::<u64>() >> 11) as f64 * pow2(-53); // [0, 1)
    let r = (-2.0 * u1.ln()).sqrt();
    let t = std::f64::consts::TAU * u2;
    (r * t.cos(), r * t.sin())
}

/// Post-processing: X′ᵀ = (P′ (VᵀR)⁺ Vᵀ)ᵀ with V the top-k2 eigenvectors of C′. Returns d×n.
pub fn reconstruct(p_noisy_t: &DMatrix<f64>, c_noisy: &DMatrix<f64>, r: &DMatrix<f64>, k2: usize) -> DMatrix<f64> {
    let v = top_eigenvectors(c_noisy, k2); // d×k2
    let m = v.transpose() * r; // k2×k1
    let m_pinv = pseudo_inverse(&m); // k1×k2
    let w_t = v * m_pinv.transpose(); // d×k2 · k2×k1 = d×k1 = ((VᵀR)⁺Vᵀ)ᵀ
    w_t * p_noisy_t
}

/// The eigenvectors of the k largest eigenvalues of a symmetric matrix, as columns (d×k).
pub fn top_eigenvectors(c: &DMatrix<f64>, k: usize) -> DMatrix<f64> {
    let eig = SymmetricEigen::new(c.clone());
    let mut order: Vec<usize> = (0..c.nrows()).collect();
    order.sort_by(|&a, &b| eig.eigenvalues[b].total_cmp(&eig.eigenvalues[a]));
    DMatrix::from_fn(c.nrows(), k, |i, j| eig.eigenvectors[(i, order[j])])
}

/// Moore–Penrose pseudo-inverse by SVD, dropping singular values below a relative 1e-12.
fn pseudo_inverse(m: &DMatrix<f64>) -> DMatrix<f64> {
    let svd = m.clone().svd(true, true);
    let tol = svd.singular_values.max() * 1e-12;
    svd.pseudo_inverse(tol).expect("SVD with both factors computed")
}
