//! Smooth sensitivity of a quantile (Nissim, Raskhodnikova & Smith 2007), for add/remove-one
//! neighbours, computed in O(n log n).
//!
//! Data are clamped to [lower, upper] and sorted; the bounds act as the outermost order statistics:
//! z_0 = lower, z_1 ≤ … ≤ z_n the data, z_{n+1} = upper, and Z(i) = z_{clamp(i, 0, n+1)}. The p-quantile
//! is f(x) = z_m with m = [`rank`](n, p) = round(p̃·(n+1)) (p̃: p on the grid 2^-60), so that m changes
//! by 0 or 1 when a row is added or removed.
//!
//! Two bounds on the local sensitivity at distance k are each β-smooth, and so is their minimum
//! (docs/privacy/smooth-sensitivity.md):
//! - the widest window of k + 1 gaps containing m, A^(k)(x) = max_{0 ≤ t ≤ k+1} (Z(m+t) − Z(m+t−k−1)),
//!   which gives S_A(x) = max_k e^(−kβ)·A^(k)(x);
//! - the exactly reachable range R^(k)(x) = Z(hi_{k+1}) − Z(lo_{k+1}), where [lo_j, hi_j] ([`reach`]) holds
//!   the position of the quantile of every data set within j additions and removals of x. The rank
//!   moves by at most max(p, 1 − p) positions per step, so this range is narrower than the windows
//!   wherever the data are sparse on one side of the quantile; it gives S_R(x) = max_k e^(−kβ)·R^(k)(x).
//!
//! The release uses S(x) = min(S_A(x), S_R(x)). Over pairs of indices,
//! S_A(x) = max_{0 ≤ i ≤ m ≤ j ≤ n+1, i < j} (z_j − z_i)·e^(−β(j−i−1)); for a fixed i the best j is
//! non-decreasing in i (the advantage of a larger j grows with z_i), so a divide and conquer over i
//! finds every row's best partner in O(n log n) evaluations. S_R is one pass over k.

use crate::error::{DpError, DpResult};
use crate::params::{check_float_bounds, fmt_f64};

/// Checks a quantile level p ∈ [0, 1].
pub fn check_p(p: f64) -> DpResult<f64> {
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(DpError::invalid("p", "a number between 0 and 1", fmt_f64(p)))
    }
}

/// Checks a smoothness parameter β > 0.
pub fn check_beta(beta: f64) -> DpResult<f64> {
    if beta.is_finite() && beta > 0.0 {
        Ok(beta)
    } else {
        Err(DpError::invalid("beta", "a finite number greater than 0", fmt_f64(beta)))
    }
}

/// Clamps values to [lower, upper] (NaN is an error, ±Infinity is clamped) and sorts them.
pub fn prepare_sorted(values: impl IntoIterator<Item = f64>, lower: f64, upper: f64) -> DpResult<Vec<f64>> {
    let (lower, upper) = check_float_bounds(lower, upper)?;
    let mut v = Vec::new();
    for x in values {
        if x.is_nan() {
            return Err(DpError::NanInput { arg: "vals" });
        }
        v.push(x.clamp(lower, upper));
    }
    v.sort_by(f64::total_cmp);
    Ok(v)
}

/// Quantile levels are read on the grid 2^-60: p̃ = round(p·2^60)/2^60 (exactly representable).
/// Returns the integer numerator round(p·2^60) ∈ [0, 2^60].
pub fn p_numerator(p: f64) -> u128 {
    debug_assert!((0.0..=1.0).contains(&p));
    (p * P_SCALE as f64).round() as u128 // p·2^60 is exact; the rounded value is an integer ≤ 2^60
}

/// Denominator of [`p_numerator`]: 2^60.
pub const P_SCALE: u128 = 1 << 60;

/// The rank of the p-quantile among the n+2 extended order statistics: round(p̃·(n+1)) (halves
/// up), in [0, n+1], computed exactly in integers, so that it moves by 0 or 1 when a row is added.
pub fn rank(n: usize, p: f64) -> usize {
    let num = p_numerator(p) * (n as u128 + 1); // ≤ 2^60 · 2^64 would overflow only for n ≥ 2^67
    ((2 * num + P_SCALE) / (2 * P_SCALE)) as usize
}

/// Z(i): the extended order statistics with the bounds at both ends.
#[inline]
fn z(sorted: &[f64], lower: f64, upper: f64, i: isize) -> f64 {
    let n = sorted.len() as isize;
    if i <= 0 {
        lower
    } else if i > n {
        upper
    } else {
        sorted[(i - 1) as usize]
    }
}

/// The quantile itself: Z(m).
pub fn quantile(sorted: &[f64], p: f64, lower: f64, upper: f64) -> f64 {
    z(sorted, lower, upper, rank(sorted.len(), p) as isize)
}

/// A^(k)(x) for k = 0 ..= kmax (A^(0) is the local sensitivity bound). O(kmax²): for inspection.
pub fn ls_table(sorted: &[f64], p: f64, lower: f64, upper: f64, kmax: usize) -> Vec<f64> {
    let m = rank(sorted.len(), p) as isize;
    (0..=kmax as isize)
        .map(|k| {
            (0..=k + 1)
                .map(|t| z(sorted, lower, upper, m + t) - z(sorted, lower, upper, m + t - k - 1))
                .fold(0.0, f64::max)
        })
        .collect()
}

/// The local sensitivity bound A^(0)(x) = max(z_{m+1} − z_m, z_m − z_{m−1}).
pub fn local_sensitivity(sorted: &[f64], p: f64, lower: f64, upper: f64) -> f64 {
    ls_table(sorted, p, lower, upper, 0)[0]
}

/// The positions [lo_j, hi_j] between which the p-quantile of every data set within j additions and
/// removals of a data set of n rows lies, as extended order statistics of that data set:
/// r additions and s removals (r + s ≤ j) move every extended order statistic from Z(i) into
/// [Z(i − r), Z(i + s)] and the rank to m(n + r − s), so
/// lo_j = min m(n + r − s) − r and hi_j = max m(n + r − s) + s over those (r, s), s ≤ n + r.
/// For a net change d = r − s the best r is ⌊(j + d)/2⌋ (for lo; ⌊(j − d)/2⌋ removals for hi), and over
/// d of one parity both are monotone (m moves by at most 1 per two rows when p̃ ≤ 1/2 and by at
/// least 1 when p̃ ≥ 1/2), so only the four extreme d need to be evaluated. Positions may lie outside
/// [0, n + 1], where Z is the bound.
pub fn reach(n: usize, p: f64, j: usize) -> (i64, i64) {
    let (n, j) = (n as i64, j as i64);
    let d_min = (-j).max(-n);
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    for d in [d_min, d_min + 1, j - 1, j] {
        if d < d_min || d > j {
            continue;
        }
        let m = rank((n + d) as usize, p) as i64;
        lo = lo.min(m - (j + d).div_euclid(2));
        hi = hi.max(m + (j - d).div_euclid(2));
    }
    (lo, hi)
}

/// R^(k)(x) = Z(hi_{k+1}) − Z(lo_{k+1}) for k = 0 ..= kmax: the width of the range the quantile can
/// reach within k + 1 steps, which bounds the local sensitivity of every data set within k steps.
pub fn range_table(sorted: &[f64], p: f64, lower: f64, upper: f64, kmax: usize) -> Vec<f64> {
    (0..=kmax)
        .map(|k| {
            let (lo, hi) = reach(sorted.len(), p, k + 1);
            z(sorted, lower, upper, clamp_pos(hi, sorted.len())) - z(sorted, lower, upper, clamp_pos(lo, sorted.len()))
        })
        .collect()
}

fn clamp_pos(i: i64, n: usize) -> isize {
    i.clamp(-1, n as i64 + 2) as isize
}

/// ln max(S_R(x), e^floor_ln) with S_R(x) = max_k e^(−kβ)·R^(k)(x) (see [`range_table`]): one pass over
/// k, stopped once (upper − lower)·e^(−kβ) cannot beat the best term or the range covers both
/// bounds (later terms are then (upper − lower)·e^(−kβ), decreasing).
pub fn range_sensitivity_ln(sorted: &[f64], p: f64, lower: f64, upper: f64, beta: f64, floor_ln: f64) -> f64 {
    let n = sorted.len();
    let log_range = if upper > lower { (upper - lower).ln() } else { f64::NEG_INFINITY };
    let mut best = floor_ln;
    let mut k = 0usize;
    loop {
        if log_range - beta * k as f64 <= best {
            return best;
        }
        let (lo, hi) = reach(n, p, k + 1);
        let width = z(sorted, lower, upper, clamp_pos(hi, n)) - z(sorted, lower, upper, clamp_pos(lo, n));
        if width > 0.0 {
            best = best.max(width.ln() - beta * k as f64);
        }
        if lo <= 0 && hi > n as i64 {
            return best;
        }
        k += 1;
    }
}

/// The window bound alone, S_A(x) = max_k e^(−kβ)·A^(k)(x), in O(n log n) (see [`smooth_sensitivity_ln`]).
pub fn window_sensitivity(sorted: &[f64], p: f64, lower: f64, upper: f64, beta: f64) -> f64 {
    window_sensitivity_ln(sorted, p, lower, upper, beta, f64::NEG_INFINITY, f64::INFINITY).exp()
}

/// The β-smooth sensitivity S(x) = min(S_A(x), S_R(x)) (module documentation), in O(n log n).
/// `sorted` must be sorted ascending and within [lower, upper]; β > 0.
pub fn smooth_sensitivity(sorted: &[f64], p: f64, lower: f64, upper: f64, beta: f64) -> f64 {
    smooth_sensitivity_ln(sorted, p, lower, upper, beta, f64::NEG_INFINITY).exp()
}

/// ln max(S(x), e^floor_ln): the log of the smooth sensitivity, or `floor_ln` if that is larger.
/// Terms below the floor are pruned without being evaluated, which is what makes the release fast;
/// the window search also stops as soon as it reaches S_R, the smaller bound then being S_R.
pub fn smooth_sensitivity_ln(sorted: &[f64], p: f64, lower: f64, upper: f64, beta: f64, floor_ln: f64) -> f64 {
    assert!(beta > 0.0 && beta.is_finite(), "beta must be positive and finite");
    let r = range_sensitivity_ln(sorted, p, lower, upper, beta, floor_ln);
    window_sensitivity_ln(sorted, p, lower, upper, beta, floor_ln, r).min(r)
}

/// ln max(S_A(x), e^floor_ln), or any value ≥ `cap` once the search finds one (the caller takes the
/// minimum with `cap`).
fn window_sensitivity_ln(sorted: &[f64], p: f64, lower: f64, upper: f64, beta: f64, floor_ln: f64, cap: f64) -> f64 {
    assert!(beta > 0.0 && beta.is_finite(), "beta must be positive and finite");
    debug_assert!(sorted.windows(2).all(|w| w[0] <= w[1]));
    let n = sorted.len();
    let m = rank(n, p);
    // log of the value of the pair (i, j), i ≤ m ≤ j, i < j. Log space: e^(−β(j−i−1)) underflows for
    // large n, and ties at 0 would break the monotone choice of partners the recursion relies on.
    let log_value = |i: usize, j: usize| -> f64 {
        let width = z(sorted, lower, upper, j as isize) - z(sorted, lower, upper, i as isize);
        if width > 0.0 {
            width.ln() - beta * (j - i - 1) as f64
        } else {
            f64::NEG_INFINITY
        }
    };
    let log_range = if upper > lower { (upper - lower).ln() } else { f64::NEG_INFINITY };
    let mut best = floor_ln;
    // solve(i range, j range): for the middle i, scan its admissible j range for the best partner,
    // then recurse on the left i's with j ≤ that partner and the right i's with j ≥ it.
    let mut stack = vec![(0usize, m, m, n + 1)];
    while let Some((ilo, ihi, jlo, jhi)) = stack.pop() {
        if ilo > ihi {
            continue;
        }
        let i = ilo + (ihi - ilo) / 2;
        let start = jlo.max(m).max(i + 1);
        let (mut bj, mut bv) = (start.min(jhi), f64::NEG_INFINITY);
        let mut j = start;
        while j <= jhi {
            // every later j is worth at most (upper − lower)·e^(−β(j−i−1)); once that is below the best
            // so far, neither this i nor any smaller i (further from those j) can improve on it there
            if log_range - beta * ((j - i - 1) as f64) < best {
                break;
            }
            let v = log_value(i, j);
            if v >= bv {
                bv = v;
                bj = j;
            }
            j += 1;
        }
        if bv > best {
            best = bv;
            if best >= cap {
                return best;
            }
        }
        if i > ilo {
            stack.push((ilo, i - 1, jlo, bj));
        }
        if i < ihi {
            stack.push((i + 1, ihi, bj, jhi));
        }
    }
    best
}
