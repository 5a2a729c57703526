//! The exact samplers of [`crate::sampling`] specialised to 64-bit integers, for releases that need
//! millions of draws (DPRP adds one discrete Gaussian per released cell).
//!
//! The algorithms are the same (Canonne, Kamath & Steinke 2020, Algorithms 1–3) and every
//! probability is realised exactly from uniform integers; only the integer width differs. Uniform
//! draws below 2^64 cost a fraction of the 128-bit ones, which makes [`discrete_gaussian_u64`]
//! about five times faster than [`crate::sampling::discrete_gaussian`] for σ² ≤ [`MAX_SIGMA2`].
use crate::sampling::isqrt;
use rand::Rng;

/// Largest σ² accepted by [`discrete_gaussian_u64`]: keeps 2σ²t² below 2^62.
pub const MAX_SIGMA2: u64 = 1 << 30;

/// Bernoulli(n/d), exactly, for n <= d.
#[inline]
fn bernoulli_frac<R: Rng + ?Sized>(rng: &mut R, n: u64, d: u64) -> bool {
    debug_assert!(d > 0 && n <= d);
    if n == 0 {
        return false;
    }
    n == d || uniform_below(rng, d) < n
}

/// A uniform integer in [0, d), exactly, for 1 <= d: Lemire's multiply-and-reject ("Fast random
/// integer generation in an interval", 2019). A draw x is mapped to floor(x·d / 2^w) and rejected when
/// the low word of x·d is below 2^w mod d, which leaves exactly floor(2^w / d) draws for every output.
/// 32-bit draws when d <= 2^32 (half the generator output of 64-bit ones). The remainder 2^w mod d is
/// computed only when a rejection is possible, so most calls need no division.
#[inline]
pub fn uniform_below<R: Rng + ?Sized>(rng: &mut R, d: u64) -> u64 {
    debug_assert!(d >= 1);
    if d < 1 << 32 {
        let d32 = d as u32;
        let mut m = rng.next_u32() as u64 * d;
        if (m as u32) < d32 {
            let threshold = d32.wrapping_neg() % d32; // 2^32 mod d
            while (m as u32) < threshold {
                m = rng.next_u32() as u64 * d;
            }
        }
        m >> 32
    } else {
        let mut m = rng.next_u64() as u128 * d as u128;
        if (m as u64) < d {
            let threshold = d.wrapping_neg() % d; // 2^64 mod d
            while (m as u64) < threshold {
                m = rng.next_u64() as u128 * d as u128;
            }
        }
        (m >> 64) as u64
    }
}

/// Bernoulli(exp(-n/d)) for 0 <= n/d <= 1 (CKS20, Algorithm 1).
#[inline]
fn bernoulli_exp_le1<R: Rng + ?Sized>(rng: &mut R, n: u64, d: u64) -> bool {
    let mut k: u64 = 1;
    while bernoulli_frac(rng, n, d) && bernoulli_frac(rng, 1, k) {
        k += 1;
    }
    k % 2 == 1
}

/// Bernoulli(exp(-(whole + frac/d))), exactly: exp(-1)^whole · exp(-frac/d) as independent coins.
#[inline]
fn bernoulli_exp<R: Rng + ?Sized>(rng: &mut R, whole: u128, frac: u64, d: u64) -> bool {
    let mut i: u128 = 0;
    while i < whole {
        if !bernoulli_exp_le1(rng, 1, 1) {
            return false;
        }
        i += 1;
    }
    bernoulli_exp_le1(rng, frac, d)
}

/// Discrete Laplace with scale t, P(x) ∝ exp(-|x|/t) on ℤ (CKS20, Algorithm 2 with s = 1).
fn discrete_laplace_u64<R: Rng + ?Sized>(rng: &mut R, t: u64) -> i64 {
    debug_assert!(t >= 1);
    loop {
        let u = uniform_below(rng, t);
        if !bernoulli_exp_le1(rng, u, t) {
            continue;
        }
        let mut v: u64 = 0;
        while bernoulli_exp_le1(rng, 1, 1) {
            v += 1;
        }
        // X = u + t·v is Geometric(1 - exp(-1/t)). An overflow needs a run of about 2^33 coins of
        // probability e^-1: retrying there changes the distribution by less than e^-(2^33).
        let Some(y) = t.checked_mul(v).and_then(|tv| tv.checked_add(u)).filter(|&y| y <= i64::MAX as u64) else {
            continue;
        };
        let negative = rng.random::<bool>();
        if negative && y == 0 {
            continue;
        }
        return if negative { -(y as i64) } else { y as i64 };
    }
}

/// Discrete Gaussian with integer variance parameter σ² = `sigma2`, P(x) ∝ exp(-x²/(2σ²)) on ℤ
/// (CKS20, Algorithm 3). Requires 1 <= sigma2 <= [`MAX_SIGMA2`].
pub fn discrete_gaussian_u64<R: Rng + ?Sized>(rng: &mut R, sigma2: u64) -> i64 {
    assert!((1..=MAX_SIGMA2).contains(&sigma2), "discrete_gaussian_u64: sigma2 out of range");
    let t = isqrt(sigma2 as u128) as u64 + 1; // floor(σ) + 1
    let den = 2 * sigma2 * t * t; // < 2^62
    loop {
        let y = discrete_laplace_u64(rng, t);
        // γ = (|y|·t − σ²)² / (2σ²t²), split into its integer part and a remainder below den
        let a = (y.unsigned_abs() as u128 * t as u128).abs_diff(sigma2 as u128);
        let (whole, frac) = if a < 1 << 32 {
            // the common case, in 64-bit arithmetic (a u128 division costs more than the draws)
            let num = (a * a) as u64;
            ((num / den) as u128, num % den)
        } else {
            let Some(num) = a.checked_mul(a) else {
                // |y|·t >= 2^64: γ > 2^66, the acceptance probability exp(-γ) is nil
                continue;
            };
            (num / den as u128, (num % den as u128) as u64)
        };
        if bernoulli_exp(rng, whole, frac, den) {
            return y;
        }
    }
}
