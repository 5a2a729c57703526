//! Clamping and quantization of real values to a power-of-two grid.
//!
//! A value x is clamped to [lower, upper] and mapped to the integer q(x) = round(x / 2^g). Both steps
//! are monotone, so every row's integer lies in [q(lower), q(upper)] whatever the input, and integer
//! sums of such values are exact and independent of row order and parallel partitioning. The released
//! value is (integer sum + integer noise) · 2^g: a point of the grid, whose low bits carry nothing.
//! The quantiles of integer columns use the grid of the integers themselves (g = 0, or a larger
//! power of two for very wide bounds: [`Grid::integers`]).
use crate::error::{DpError, DpResult};

/// Grid exponent floor: keeps 2^-g representable even for absurdly small bounds.
const MIN_EXP: i32 = -1000;

/// 2^n as an f64, exactly, for -1022 <= n <= 1023.
pub fn pow2(n: i32) -> f64 {
    assert!((-1022..=1023).contains(&n), "pow2 out of range: {n}");
    f64::from_bits(((n + 1023) as u64) << 52)
}

/// floor(log2(x)) for finite x > 0 (subnormals report -1023, which the grid floor absorbs).
pub fn floor_log2(x: f64) -> i32 {
    debug_assert!(x > 0.0 && x.is_finite());
    let e = ((x.to_bits() >> 52) & 0x7ff) as i32;
    if e == 0 {
        -1023
    } else {
        e - 1023
    }
}

/// Rounds to the nearest integer, halves away from zero, for |q| < 2^62: exactly `q.round()`, but
/// with a truncating conversion and one exact subtraction instead of a libm call on baseline x86-64.
/// Monotone non-decreasing in q, which is what the sensitivity argument needs.
#[inline]
pub fn round_half_away(q: f64) -> i64 {
    // Grid values are clamped to bounds that need at most 62 bits, so this branch is never taken;
    // it keeps the function total (no panic: it runs on the unguarded per-row path).
    if !(q.abs() < 4.611686018427388e18) {
        return if q > 0.0 { i64::MAX } else { i64::MIN };
    }
    // SAFETY: q is finite and |q| < 2^62, so the truncating conversion is defined
    let t = unsafe { q.to_int_unchecked::<i64>() }; // truncates toward zero
    let frac = q - t as f64; // exact: q and its integer part share the binade
    t + (frac >= 0.5) as i64 - (frac <= -0.5) as i64
}

/// A power-of-two grid 2^exp together with the bounds it clamps to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grid {
    /// Grid spacing is 2^exp.
    pub exp: i32,
    pub lower: f64,
    pub upper: f64,
    /// q(lower) and q(upper).
    pub q_lower: i64,
    pub q_upper: i64,
    inv_step: f64,
}

impl Grid {
    /// The grid for bounds [lower, upper] whose spacing is about `span / 2^bits`, but never so fine
    /// that a bound needs more than 62 bits. Bounds must already be checked.
    pub fn new(lower: f64, upper: f64, span: f64, bits: i32) -> Grid {
        Grid::at_least(lower, upper, span, bits, MIN_EXP)
    }

    /// The grid of the integers (spacing 1, exponent 0) for integer bounds [lower, upper], coarsened
    /// to the power of two of [`Grid::new`] where that is larger: where the bounds span more than
    /// 2^(bits + 1) integers, or need more than 62 bits at spacing 1. Every grid point is an integer.
    /// Bounds must already be checked and be integers.
    pub fn integers(lower: f64, upper: f64, bits: i32) -> Grid {
        debug_assert!(lower.fract() == 0.0 && upper.fract() == 0.0);
        Grid::at_least(lower, upper, upper - lower, bits, 0)
    }

    /// [`Grid::new`] with an exponent of at least `min_exp`.
    fn at_least(lower: f64, upper: f64, span: f64, bits: i32, min_exp: i32) -> Grid {
        let maxabs = lower.abs().max(upper.abs());
        let mut exp = if span > 0.0 { floor_log2(span) - bits } else { MIN_EXP };
        if maxabs > 0.0 {
            exp = exp.max(floor_log2(maxabs) + 1 - 62);
        }
        let exp = exp.max(MIN_EXP).max(min_exp);
        let inv_step = pow2(-exp);
        let mut g = Grid { exp, lower, upper, q_lower: 0, q_upper: 0, inv_step };
        g.q_lower = g.quantize_clamped(lower);
        g.q_upper = g.quantize_clamped(upper);
        g
    }

    /// Grid spacing 2^exp.
    pub fn step(&self) -> f64 {
        pow2(self.exp)
    }

    #[inline]
    fn quantize_clamped(&self, x: f64) -> i64 {
        // x·2^-exp is exact (a change of exponent) unless it underflows, and then it rounds to 0.
        round_half_away(x * self.inv_step)
    }

    /// Clamps x to the bounds and maps it to the grid. NaN is an error; ±Infinity is clamped.
    #[inline]
    pub fn quantize(&self, x: f64, arg: &'static str) -> DpResult<i64> {
        if x.is_nan() {
            return Err(DpError::NanInput { arg });
        }
        // max/min rather than clamp: no per-row check of lower <= upper (validated once)
        Ok(self.quantize_finite(x))
    }

    /// Clamps and maps a value known not to be NaN.
    #[inline(always)]
    pub fn quantize_finite(&self, x: f64) -> i64 {
        // plain comparisons: cheaper than IEEE max/min, and equal for non-NaN input
        let c = if x < self.lower {
            self.lower
        } else if x > self.upper {
            self.upper
        } else {
            x
        };
        self.quantize_clamped(c)
    }

    /// The real value of a grid integer (post-processing: rounding here is a fixed function of it).
    pub fn value(&self, q: i128) -> f64 {
        // at most 2^127 · 2^exp, far inside the f64 range for bounds <= 1e30
        (q as f64) * self.step()
    }
}

#[cfg(test)]
mod tests {
    use super::round_half_away;

    #[test]
    fn round_half_away_equals_f64_round() {
        let mut v = vec![0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, 0.49999999999999994, -0.49999999999999994,
                         4503599627370495.5, -4503599627370495.5, 4503599627370497.0, 1e18, -1e18, 3.0e-300];
        let mut x = 0.123456789_f64;
        for _ in 0..100_000 {
            x = (x * 9301.0 + 0.49297).fract();
            v.push((x - 0.5) * 1e6);
            v.push((x - 0.5) * 7.0);
        }
        for q in v {
            assert_eq!(round_half_away(q), q.round() as i64, "{q}");
        }
    }
}
