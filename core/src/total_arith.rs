//! Total arithmetic: `+ - * / %` below a DP aggregate, defined for every pair of stored values, so
//! that no value in the data can make a query fail (an error there would answer a question about one
//! row whatever ε the query paid).
//!
//! - Integers (`int2`, `int4`, `int8`, mixed widths): the exact result, saturated at the result
//!   type's range. Division truncates toward zero; division or remainder by 0 is NULL (the value is
//!   skipped, like any NULL); the smallest integer divided by −1 saturates; `x % -1` is 0.
//! - Floats (`real`, `double precision`, mixed): IEEE arithmetic. Overflow gives ±Infinity (then
//!   clamped to the aggregate's bounds like any value), underflow gives 0 or a subnormal, NaN
//!   propagates (and is skipped by the aggregates); division by 0 is NULL.
//! - `numeric` (in the SQL layer): PostgreSQL's own arithmetic without its errors: overflow gives
//!   ±Infinity, division or remainder by 0 is NULL.
//!
//! PostgreSQL's own operators raise an error in each of these cases; pg_dp swaps them for these
//! functions in the levels it admits, and nowhere else.

use std::ops::{Add, Div, Mul, Neg, Sub};

/// The arithmetic operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Neg,
}

impl Op {
    /// The operator of a PostgreSQL operator name and arity.
    pub fn from_name(name: &str, unary: bool) -> Option<Op> {
        Some(match (name, unary) {
            ("+", false) => Op::Add,
            ("-", false) => Op::Sub,
            ("*", false) => Op::Mul,
            ("/", false) => Op::Div,
            ("%", false) => Op::Mod,
            ("-", true) => Op::Neg,
            _ => return None,
        })
    }
}

/// An integer operation on values of any integer width, saturated at `[min, max]` (the result
/// type's range). None means NULL (division or remainder by 0).
pub fn int(op: Op, a: i64, b: i64, min: i64, max: i64) -> Option<i64> {
    let (a, b) = (a as i128, b as i128);
    let r = match op {
        Op::Add => a + b,
        Op::Sub => a - b,
        Op::Mul => a * b,
        Op::Div => {
            if b == 0 {
                return None;
            }
            a / b
        }
        Op::Mod => {
            if b == 0 {
                return None;
            }
            a % b
        }
        Op::Neg => -a,
    };
    Some(r.clamp(min as i128, max as i128) as i64)
}

/// A floating-point operation (IEEE): None means NULL (division by 0).
pub fn float(op: Op, a: f64, b: f64) -> Option<f64> {
    ieee(op, a, b)
}

/// The same in single precision (both operands `real`).
pub fn float4(op: Op, a: f32, b: f32) -> Option<f32> {
    ieee(op, a, b)
}

fn ieee<T>(op: Op, a: T, b: T) -> Option<T>
where
    T: Copy + PartialEq + Default + Add<Output = T> + Sub<Output = T> + Mul<Output = T> + Div<Output = T> + Neg<Output = T>,
{
    Some(match op {
        Op::Add => a + b,
        Op::Sub => a - b,
        Op::Mul => a * b,
        // -0.0 == 0.0: a division by either zero is NULL
        Op::Div if b == T::default() => return None,
        Op::Div => a / b,
        Op::Mod => return None,
        Op::Neg => -a,
    })
}

/// The sign of an overflowed `numeric` result, from the operands' signs (−1, 0, 1): a sum overflows
/// only when both operands have the sign of the result, a difference has the sign of `a` (or of
/// −b), a product or quotient the product of the signs.
pub fn overflow_sign(op: Op, sa: i32, sb: i32) -> i32 {
    match op {
        Op::Add => if sa != 0 { sa } else { sb },
        Op::Sub => if sa != 0 { sa } else { -sb },
        Op::Mul | Op::Div => sa * sb,
        Op::Neg => -sa,
        Op::Mod => sa,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const I4: (i64, i64) = (i32::MIN as i64, i32::MAX as i64);
    const I8: (i64, i64) = (i64::MIN, i64::MAX);

    #[test]
    fn integers_saturate_and_never_fail() {
        let vals = [i64::MIN, i64::MIN + 1, -2, -1, 0, 1, 2, i64::MAX - 1, i64::MAX, i32::MIN as i64, i32::MAX as i64];
        for op in [Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Mod, Op::Neg] {
            for &a in &vals {
                for &b in &vals {
                    for (lo, hi) in [I4, I8, (i16::MIN as i64, i16::MAX as i64)] {
                        if let Some(r) = int(op, a, b, lo, hi) {
                            assert!(r >= lo && r <= hi);
                        } else {
                            assert!(matches!(op, Op::Div | Op::Mod) && b == 0);
                        }
                    }
                }
            }
        }
        assert_eq!(int(Op::Add, i32::MAX as i64, 1, I4.0, I4.1), Some(i32::MAX as i64));
        assert_eq!(int(Op::Mul, i64::MIN, -1, I8.0, I8.1), Some(i64::MAX));
        assert_eq!(int(Op::Div, i64::MIN, -1, I8.0, I8.1), Some(i64::MAX));
        assert_eq!(int(Op::Mod, i64::MIN, -1, I8.0, I8.1), Some(0));
        assert_eq!(int(Op::Neg, i32::MIN as i64, 0, I4.0, I4.1), Some(i32::MAX as i64));
        assert_eq!(int(Op::Div, 7, -2, I4.0, I4.1), Some(-3)); // truncation toward zero, as PostgreSQL
        assert_eq!(int(Op::Mod, -7, 2, I4.0, I4.1), Some(-1));
        assert_eq!(int(Op::Div, 1, 0, I4.0, I4.1), None);
        // within range, the exact result (a negative control of the saturation)
        assert_eq!(int(Op::Mul, 46340, 46340, I4.0, I4.1), Some(2147395600));
    }

    #[test]
    fn floats_follow_ieee_and_division_by_zero_is_null() {
        assert_eq!(float(Op::Mul, 1e308, 10.0), Some(f64::INFINITY));
        assert_eq!(float(Op::Div, 5e-324, 3.0), Some(0.0));
        assert!(float(Op::Sub, f64::INFINITY, f64::INFINITY).unwrap().is_nan());
        assert_eq!(float(Op::Div, 1.0, 0.0), None);
        assert_eq!(float(Op::Div, 1.0, -0.0), None);
        assert_eq!(float4(Op::Mul, 3e38, 10.0), Some(f32::INFINITY));
        assert_eq!(float(Op::Add, 0.1, 0.2), Some(0.1 + 0.2));
    }

    #[test]
    fn the_sign_of_an_overflow() {
        assert_eq!(overflow_sign(Op::Add, 1, 1), 1);
        assert_eq!(overflow_sign(Op::Sub, -1, 1), -1);
        assert_eq!(overflow_sign(Op::Sub, 0, 1), -1);
        assert_eq!(overflow_sign(Op::Mul, -1, 1), -1);
        assert_eq!(overflow_sign(Op::Div, -1, -1), 1);
    }
}
