//! The exact samplers of [`crate::noise::sampling`] specialised to 64-bit integers, for releases that need
//! millions of draws (DPRP adds one discrete Gaussian per released cell).
//!
//! The algorithms are the same (Canonne, Kamath & Steinke 2020, Algorithms 1–3) and every
//! probability is realised exactly from uniform integers; only the integer width differs. Uniform
//! draws below 2^64 cost a fraction of the 128-bit ones, which makes [`discrete_gaussian_u64`]
//! about five times faster than [`crate::noise::sampling::discrete_gaussian`] for σ² ≤ [`MAX_SIGMA2`].
use crate::noise::sampling::isqrt;
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

/// Fair bits from the generator, 64 at a time.
#[derive(Debug, Default, Clone)]
pub struct BitPool {
    word: u64,
    left: u32,
}

impl BitPool {
    pub fn new() -> Self {
        BitPool { word: 0, left: 0 }
    }

    /// One uniformly random bit.
    #[inline]
    pub fn bit<R: Rng + ?Sized>(&mut self, rng: &mut R) -> bool {
        if self.left == 0 {
            self.word = rng.next_u64();
            self.left = 64;
        }
        let b = self.word & 1 == 1;
        self.word >>= 1;
        self.left -= 1;
        b
    }
}

/// Bernoulli(n/d), exactly, for n <= d, with d possibly as large as 2^64 − 1.
#[inline]
fn bernoulli_ratio<R: Rng + ?Sized>(rng: &mut R, n: u64, d: u64) -> bool {
    n != 0 && (n == d || uniform_below(rng, d) < n)
}

/// Bernoulli(2^(−num/den)) for 0 <= num < den, exactly, with the Bernoulli factory for p^a
/// (p = 1/2, a = num/den < 1): for j = 1, 2, …, a fair bit 1 returns true; otherwise a
/// Bernoulli(a/j) success returns false. P(true) = Σ_j p·Π_{i<j} (1 − p)(1 − a/i)
/// = p·Σ_m (1 − p)^m (1 − a)_m / m! = p·p^(a−1) = p^a (docs/privacy/dprp.md, "Sampling").
#[inline]
pub fn bernoulli_pow2_frac<R: Rng + ?Sized>(rng: &mut R, bits: &mut BitPool, num: u64, den: u64) -> bool {
    if num == 0 {
        return true;
    }
    let mut j: u64 = 1;
    loop {
        if bits.bit(rng) {
            return true;
        }
        // Bernoulli(num/(den·j)): one draw when den·j fits, else the product of two coins
        let fail = match den.checked_mul(j) {
            Some(dj) => uniform_below(rng, dj) < num,
            None => bernoulli_ratio(rng, num, den) && bernoulli_ratio(rng, 1, j),
        };
        if fail {
            return false;
        }
        j += 1;
    }
}

/// The discrete Gaussian whose pmf is proportional to 2^(−x²/k²) on ℤ, i.e. variance parameter
/// σ² = k²/(2 ln 2), sampled exactly from fair bits and uniform integers (no floating point, no
/// table): x = k·y + z with y ≥ 0 drawn with probability ∝ 2^(−y²) (fair bits only), z uniform in
/// [0, k), accepted with probability 2^(−z(z + 2ky)/k²), then a random sign (0 kept with probability
/// 1/2). The structure is the "binary Gaussian" sampler of Ducas, Durmus, Lepoint & Lyubashevsky
/// (BLISS, 2013), with its table-based acceptance replaced by an exact Bernoulli factory; it needs
/// about a quarter of the time of [`discrete_gaussian_u64`]. Proof in docs/privacy/dprp.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Base2Gaussian {
    k: u64,
    k2: u64,
}

impl Base2Gaussian {
    /// Largest accepted k: keeps k·y and k² within 64 bits for every y that can occur.
    pub const MAX_K: u64 = 1 << 31;

    /// The sampler with pmf ∝ 2^(−x²/k²). Requires 1 <= k <= [`Self::MAX_K`].
    pub fn new(k: u64) -> Self {
        assert!((1..=Self::MAX_K).contains(&k), "Base2Gaussian: k out of range");
        Base2Gaussian { k, k2: k * k }
    }

    /// The smallest k whose σ² = k²/(2 ln 2) is at least `sigma2` (with a relative margin of 2^-40
    /// for the floating-point evaluation).
    pub fn covering(sigma2: f64) -> Self {
        assert!(sigma2 > 0.0 && sigma2.is_finite());
        let k = (sigma2 * 2.0 * std::f64::consts::LN_2 * (1.0 + 2f64.powi(-40))).sqrt().ceil() as u64;
        Self::new(k.max(1))
    }

    pub fn k(&self) -> u64 {
        self.k
    }

    /// σ² = k²/(2 ln 2), rounded down by a relative 2^-50 (a lower bound, for privacy accounting).
    pub fn sigma2_lower(&self) -> f64 {
        (self.k2 as f64) / (2.0 * std::f64::consts::LN_2) * (1.0 - 2f64.powi(-50))
    }

    /// σ² = k²/(2 ln 2), rounded up by a relative 2^-50 (an upper bound, for tail bounds).
    pub fn sigma2_upper(&self) -> f64 {
        (self.k2 as f64) / (2.0 * std::f64::consts::LN_2) * (1.0 + 2f64.powi(-50))
    }

    /// σ² = k²/(2 ln 2) (nearest float, for reporting).
    pub fn sigma2(&self) -> f64 {
        (self.k2 as f64) / (2.0 * std::f64::consts::LN_2)
    }

    /// y ≥ 0 with probability ∝ 2^(−y²): one bit 0 gives y = 0; else, for i = 1, 2, …, 2i − 2 bits
    /// must all be 0 (otherwise start over) and the next bit 0 returns i, 1 goes on to i + 1. One
    /// pass returns i with probability (1/2)·2^(−(1 + 3 + … + (2i − 1))) = (1/2)·2^(−i²).
    #[inline]
    fn half_binary<R: Rng + ?Sized>(rng: &mut R, bits: &mut BitPool) -> u64 {
        'restart: loop {
            if !bits.bit(rng) {
                return 0;
            }
            let mut i = 1u64;
            loop {
                for _ in 0..2 * i - 2 {
                    if bits.bit(rng) {
                        continue 'restart;
                    }
                }
                if !bits.bit(rng) {
                    return i;
                }
                i += 1;
            }
        }
    }

    /// One draw.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R, bits: &mut BitPool) -> i64 {
        let k = self.k;
        loop {
            let y = Self::half_binary(rng, bits);
            let z = uniform_below(rng, k);
            // accept with probability 2^(−e/k²), e = z(z + 2ky): whole part by fair bits, the
            // fraction by the Bernoulli factory
            let e64 = k.checked_mul(2 * y).and_then(|a| a.checked_add(z)).and_then(|a| a.checked_mul(z));
            let (whole, frac) = match e64 {
                // the common case: e < k²(1 + 2y), so the quotient is at most 2y and found by
                // subtraction (a division costs more than the draws)
                Some(mut e) if y < 8 => {
                    let mut whole = 0;
                    while e >= self.k2 {
                        e -= self.k2;
                        whole += 1;
                    }
                    (whole, e)
                }
                Some(e) => (e / self.k2, e % self.k2),
                None => {
                    let e = (z as u128) * (z as u128 + 2 * k as u128 * y as u128);
                    ((e / self.k2 as u128).min(u64::MAX as u128) as u64, (e % self.k2 as u128) as u64)
                }
            };
            let mut accept = true;
            for _ in 0..whole {
                if !bits.bit(rng) {
                    accept = false;
                    break;
                }
            }
            if !accept || !bernoulli_pow2_frac(rng, bits, frac, self.k2) {
                continue;
            }
            let Some(x) = k.checked_mul(y).and_then(|ky| ky.checked_add(z)).filter(|&x| x <= i64::MAX as u64) else {
                continue; // y this large has probability below 2^(−2^60)
            };
            if x == 0 && !bits.bit(rng) {
                continue;
            }
            return if bits.bit(rng) { -(x as i64) } else { x as i64 };
        }
    }
}
