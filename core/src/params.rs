//! Validation of privacy parameters and bounds. Every error names the argument and its valid range.
use crate::error::{DpError, DpResult};

/// Smallest accepted ε. Below it the answer is pure noise for any realistic table.
pub const EPSILON_MIN: f64 = 1e-9;
/// Largest accepted ε. Above it the release is, for practical purposes, not private at all.
pub const EPSILON_MAX: f64 = 1e6;
/// Largest accepted magnitude of a real-valued bound; keeps every exact sum far from overflow.
pub const BOUND_MAX: f64 = 1e30;

pub const EPSILON_RANGE: &str = "a finite number between 1e-9 and 1e6";

/// Checks one ε.
pub fn check_epsilon(arg: &'static str, eps: f64) -> DpResult<f64> {
    if eps.is_finite() && (EPSILON_MIN..=EPSILON_MAX).contains(&eps) {
        Ok(eps)
    } else {
        Err(DpError::invalid(arg, EPSILON_RANGE, fmt_f64(eps)))
    }
}

/// Checks δ for an (ε, δ) mechanism: 0 < δ < 1 (`allow_zero` admits δ = 0).
pub fn check_delta(arg: &'static str, delta: f64, allow_zero: bool) -> DpResult<f64> {
    let ok = delta.is_finite() && delta < 1.0 && (delta > 0.0 || (allow_zero && delta == 0.0));
    if ok {
        Ok(delta)
    } else {
        let range = if allow_zero { "at least 0 and less than 1" } else { "greater than 0 and less than 1" };
        Err(DpError::invalid(arg, range, fmt_f64(delta)))
    }
}

/// Checks a pair of real bounds: finite, |value| <= 1e30, lower <= upper.
pub fn check_float_bounds(lower: f64, upper: f64) -> DpResult<(f64, f64)> {
    for (arg, v) in [("lower", lower), ("upper", upper)] {
        if !v.is_finite() || v.abs() > BOUND_MAX {
            return Err(DpError::invalid(arg, "a finite number between -1e30 and 1e30", fmt_f64(v)));
        }
    }
    if lower > upper {
        return Err(DpError::invalid(
            "lower",
            format!("less than or equal to upper ({})", fmt_f64(upper)),
            fmt_f64(lower),
        ));
    }
    Ok((lower, upper))
}

/// Checks a pair of real bounds as [`check_float_bounds`] does, then rounds them to integers for an
/// integer grid: lower up, upper down (so the integers between them are the same). Rounded, lower
/// must still be at most upper: bounds with no integer between them are an error naming both.
pub fn check_integer_bounds(lower: f64, upper: f64) -> DpResult<(f64, f64)> {
    let (lower, upper) = check_float_bounds(lower, upper)?;
    let (lo, hi) = (lower.ceil(), upper.floor());
    if lo > hi {
        return Err(DpError::invalid(
            "lower",
            format!(
                "at most upper ({}) once both are rounded to integers for an integer column (lower up to {}, upper down to {})",
                fmt_f64(upper),
                fmt_f64(lo),
                fmt_f64(hi)
            ),
            fmt_f64(lower),
        ));
    }
    // -0.0 (the ceiling of a small negative lower) is 0
    Ok((lo + 0.0, hi + 0.0))
}

/// Checks a pair of integer bounds: lower <= upper.
pub fn check_int_bounds(lower: i64, upper: i64) -> DpResult<(i64, i64)> {
    if lower > upper {
        return Err(DpError::invalid("lower", format!("less than or equal to upper ({upper})"), lower));
    }
    Ok((lower, upper))
}

/// Formats a float the way PostgreSQL users read them (NaN, Infinity, -Infinity).
pub fn fmt_f64(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "Infinity".into()
    } else if v == f64::NEG_INFINITY {
        "-Infinity".into()
    } else if v != 0.0 && (v.abs() >= 1e15 || v.abs() < 1e-4) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// The largest x in [lo, hi] with `ok(x)`, for a predicate true up to some point and false after it
/// (with `ok(lo)` true): `hi` itself if `ok(hi)`, else bisection until the interval is within `rel_tol`
/// of hi or cannot be split in floating point. The result always satisfies `ok`. Used by the noise
/// calibrations, whose constraints are monotone in the calibrated parameter.
pub fn largest_where(ok: impl Fn(f64) -> bool, lo: f64, hi: f64, rel_tol: f64) -> f64 {
    if ok(hi) {
        return hi;
    }
    let (mut lo, mut hi) = (lo, hi);
    while hi - lo > hi * rel_tol {
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
