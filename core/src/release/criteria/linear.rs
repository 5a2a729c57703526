//! Numeric columns of the criteria: values clamped to public bounds, centred on the midpoint, scaled
//! to [−1, 1] and put on the grid 2^-[`VALUE_GRID_BITS`]; the exact integer sufficient statistics of
//! a linear model (ZᵀZ, Zᵀy, yᵀy) of such values, and the least-squares solve used for both the
//! real (noisy) and the synthetic (exact) statistics (docs/privacy/synthetic-criteria.md).
use crate::noise::grid::round_half_away;
use nalgebra::{DMatrix, DVector};

/// Numeric values are scaled to [−1, 1] and rounded to multiples of 2^-VALUE_GRID_BITS: every row's
/// grid integer lies in [−ONE, ONE].
pub const VALUE_GRID_BITS: u32 = 16;
/// The grid integer of the scaled value 1 (and of the intercept column).
pub const ONE: i64 = 1 << VALUE_GRID_BITS;

/// Public bounds of one numeric column, with the midpoint and half-span used for scaling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scaling {
    pub lower: f64,
    pub upper: f64,
    pub mid: f64,
    pub half: f64,
}

impl Scaling {
    pub fn new(lower: f64, upper: f64) -> Scaling {
        let mid = lower / 2.0 + upper / 2.0;
        Scaling { lower, upper, mid, half: upper / 2.0 - lower / 2.0 }
    }

    /// The grid integer of a value: clamped to the bounds, scaled to [−1, 1], rounded; NaN (a NULL)
    /// is the midpoint (0). Total, and always within [−ONE, ONE] whatever the float rounding.
    #[inline]
    pub fn quantize(&self, x: f64) -> i64 {
        if x.is_nan() || self.half <= 0.0 {
            return 0;
        }
        let c = if x < self.lower {
            self.lower
        } else if x > self.upper {
            self.upper
        } else {
            x
        };
        let u = ((c - self.mid) / self.half).clamp(-1.0, 1.0);
        round_half_away(u * ONE as f64).clamp(-ONE, ONE)
    }

    /// The value of a scaled quantity u ∈ [−1, 1] in the column's units.
    pub fn unscale(&self, u: f64) -> f64 {
        self.mid + self.half * u
    }
}

/// Number of entries of the upper triangle (with the diagonal) of a q×q matrix.
pub fn triangle_len(q: usize) -> usize {
    q * (q + 1) / 2
}

/// Exact sufficient statistics of a linear model with an intercept: z = (ONE, x₁, …, x_p) and y, all
/// grid integers in [−ONE, ONE]. ZᵀZ is kept as its upper triangle (row-major), in units 2^-32.
#[derive(Debug, Clone, PartialEq)]
pub struct LinearStats {
    /// q = p + 1 (the intercept and the features).
    pub q: usize,
    pub zz: Vec<i128>,
    pub zy: Vec<i128>,
    pub yy: i128,
}

impl LinearStats {
    pub fn new(features: usize) -> LinearStats {
        let q = features + 1;
        LinearStats { q, zz: vec![0; triangle_len(q)], zy: vec![0; q], yy: 0 }
    }

    /// Adds one row: `z` holds q grid integers (z[0] = ONE), `y` one. Wrapping arithmetic: every sum
    /// is exact while the table has fewer than 2^62 rows (each product is at most 2^32).
    #[inline]
    pub fn push(&mut self, z: &[i64], y: i64) {
        debug_assert_eq!(z.len(), self.q);
        let mut t = 0;
        for a in 0..self.q {
            let za = z[a] as i128;
            for &zb in &z[a..] {
                self.zz[t] = self.zz[t].wrapping_add(za * zb as i128);
                t += 1;
            }
            self.zy[a] = self.zy[a].wrapping_add(za * y as i128);
        }
        self.yy = self.yy.wrapping_add(y as i128 * y as i128);
    }

    pub fn merge(&mut self, o: &LinearStats) {
        assert_eq!(self.q, o.q);
        for (a, b) in self.zz.iter_mut().zip(&o.zz) {
            *a = a.wrapping_add(*b);
        }
        for (a, b) in self.zy.iter_mut().zip(&o.zy) {
            *a = a.wrapping_add(*b);
        }
        self.yy = self.yy.wrapping_add(o.yy);
    }

    /// ZᵀZ (upper triangle) followed by Zᵀy: the vector the regression criterion releases.
    pub fn released_vector(&self) -> Vec<i128> {
        let mut v = self.zz.clone();
        v.extend_from_slice(&self.zy);
        v
    }

    /// L1 add/remove sensitivity of [`released_vector`](Self::released_vector), in units 2^-32:
    /// one row adds z_a·z_b (|·| ≤ ONE²) to each of the q(q+1)/2 + q entries.
    pub fn released_sensitivity(q: usize) -> u128 {
        (triangle_len(q) + q) as u128 * (ONE as u128 * ONE as u128)
    }
}

/// Least-squares coefficients (scaled units: intercept, then one per feature) from ZᵀZ's upper
/// triangle and Zᵀy given in units 2^-32 (possibly noisy). The minimum-norm solution through the
/// SVD's pseudo-inverse, so that singular or indefinite noisy matrices still give a value. Zero when
/// the statistics are all zero (no rows).
pub fn solve(q: usize, zz: &[i128], zy: &[i128]) -> Vec<f64> {
    let unit = (ONE as f64) * (ONE as f64);
    let mut a = DMatrix::<f64>::zeros(q, q);
    let mut t = 0;
    for i in 0..q {
        for j in i..q {
            let v = zz[t] as f64 / unit;
            a[(i, j)] = v;
            a[(j, i)] = v;
            t += 1;
        }
    }
    let b = DVector::from_iterator(q, zy.iter().map(|&v| v as f64 / unit));
    let scale = a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if scale.is_nan() || scale <= 0.0 || !scale.is_finite() {
        return vec![0.0; q];
    }
    let svd = a.svd(true, true);
    match svd.solve(&b, scale * 1e-10) {
        Ok(x) if x.iter().all(|v| v.is_finite()) => x.iter().copied().collect(),
        _ => vec![0.0; q],
    }
}

/// The candidate's model on the integer grid of the train-on-synthetic-test-on-real criterion:
/// coefficients b_a = round(β_a·K) with K = 2^kb, and the per-row bound R of the residual
/// r = y·K − Σ_a z_a·b_a (units 2^-16/K), so that every row's loss r² is at most R².
#[derive(Debug, Clone, PartialEq)]
pub struct GridModel {
    pub kb: u32,
    pub b: Vec<i128>,
    /// R = ONE·(K + Σ|b_a|).
    pub bound: u128,
}

/// Largest L1 norm (1 + Σ|β_a|) of a candidate's coefficients, in scaled units; larger models are
/// shrunk to it (a public function of the candidate). Keeps R below 2^41 and every sum of squared
/// residuals of fewer than 2^45 rows inside i128.
pub const MAX_MODEL_L1: f64 = (1u64 << 24) as f64;

impl GridModel {
    pub fn new(beta: &[f64]) -> GridModel {
        let mut beta: Vec<f64> = beta.iter().map(|&v| if v.is_finite() { v } else { 0.0 }).collect();
        let mut l1 = 1.0 + beta.iter().map(|v| v.abs()).sum::<f64>();
        if l1 > MAX_MODEL_L1 {
            let f = (MAX_MODEL_L1 - 1.0) / (l1 - 1.0) * (1.0 - 1e-12);
            beta.iter_mut().for_each(|v| *v *= f);
            l1 = MAX_MODEL_L1;
        }
        // K·(1 + Σ|β|) ≤ 2^24: as fine a grid for the coefficients as the bound allows
        let mut kb = 24u32;
        while kb > 0 && (1u64 << kb) as f64 * l1 > MAX_MODEL_L1 {
            kb -= 1;
        }
        let k = (1i128) << kb;
        let b: Vec<i128> = beta.iter().map(|&v| round_half_away(v * k as f64) as i128).collect();
        let sum_b: u128 = b.iter().map(|v| v.unsigned_abs()).sum();
        GridModel { kb, b, bound: ONE as u128 * (k as u128 + sum_b) }
    }

    pub fn k(&self) -> i128 {
        1i128 << self.kb
    }

    /// Σ over rows of r², exactly, from the sufficient statistics: K²·yᵀy − 2K·bᵀZᵀy + bᵀZᵀZb. The
    /// identity is exact in integers; wrapping arithmetic gives the exact value because the result,
    /// a sum of n squares each at most R² < 2^82, fits in i128 for n < 2^45.
    pub fn sum_squared_residuals(&self, s: &LinearStats) -> i128 {
        let q = s.q;
        let k = self.k();
        let mut acc = (k * k).wrapping_mul(s.yy);
        for a in 0..q {
            acc = acc.wrapping_sub((2 * k).wrapping_mul(self.b[a]).wrapping_mul(s.zy[a]));
        }
        let mut t = 0;
        for a in 0..q {
            for c in a..q {
                let w = if a == c { 1 } else { 2 };
                acc = acc.wrapping_add((w * self.b[a] * self.b[c]).wrapping_mul(s.zz[t]));
                t += 1;
            }
        }
        acc
    }

    /// One row's squared residual, directly (for the tests of the identity above).
    pub fn row_loss(&self, z: &[i64], y: i64) -> i128 {
        let r = y as i128 * self.k() - z.iter().zip(&self.b).map(|(&za, &ba)| za as i128 * ba).sum::<i128>();
        r * r
    }
}
