//! Exact samplers built from uniform integers only (no floating point on the sampling path).
//!
//! Following Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy" (2020):
//! - [`bernoulli_exp`] draws Bernoulli(exp(-n/d)) exactly for rational n/d;
//! - [`discrete_laplace`] draws from P(x) ∝ exp(-|x|·s/t) on the integers (the two-sided
//!   geometric distribution) for a rational scale t/s;
//! - [`discrete_gaussian`] draws from P(x) ∝ exp(-x²/(2σ²)) on the integers for an integer σ².
//!
//! Every probability these functions realise is exactly the stated one, given uniform integers.
use rand::Rng;

/// Bernoulli(n/d), exactly. Requires `d > 0` and `n <= d`.
#[inline]
pub fn bernoulli_frac<R: Rng + ?Sized>(rng: &mut R, n: u128, d: u128) -> bool {
    debug_assert!(d > 0 && n <= d);
    if n == 0 {
        return false;
    }
    if n == d {
        return true;
    }
    rng.random_range(0..d) < n
}

/// Bernoulli(exp(-n/d)) for 0 <= n/d <= 1 (CKS20, Algorithm 1).
fn bernoulli_exp_le1<R: Rng + ?Sized>(rng: &mut R, n: u128, d: u128) -> bool {
    debug_assert!(n <= d);
    let mut k: u128 = 1;
    // Bernoulli(n/(d·k)) as the product of Bernoulli(n/d) and Bernoulli(1/k): no overflow of d·k.
    while bernoulli_frac(rng, n, d) && bernoulli_frac(rng, 1, k) {
        k += 1;
    }
    k % 2 == 1
}

/// Bernoulli(exp(-n/d)) for any rational n/d >= 0, exactly.
pub fn bernoulli_exp<R: Rng + ?Sized>(rng: &mut R, n: u128, d: u128) -> bool {
    assert!(d > 0, "bernoulli_exp: zero denominator");
    let whole = n / d;
    let frac = n % d;
    // exp(-(w + f)) = exp(-1)^w · exp(-f): the product of independent coins, stopping at the first 0.
    let mut i: u128 = 0;
    while i < whole {
        if !bernoulli_exp_le1(rng, 1, 1) {
            return false;
        }
        i += 1;
    }
    bernoulli_exp_le1(rng, frac, d)
}

/// Permute-and-flip's choice (McKenna & Sheldon 2020), exactly: offer every candidate once with its
/// acceptance probability exp(−num/den); the kept candidate is a uniform one of those whose coin came
/// up (the k-th accepted replaces the kept one with probability 1/k). That is the first accepted
/// candidate of a uniformly random order, whatever the set of accepted ones, so the candidates may be
/// offered in any fixed order.
#[derive(Debug)]
pub struct AcceptedUniform<T> {
    accepted: u128,
    kept: Option<T>,
}

impl<T> Default for AcceptedUniform<T> {
    fn default() -> Self {
        AcceptedUniform { accepted: 0, kept: None }
    }
}

impl<T> AcceptedUniform<T> {
    /// Flips the candidate's coin, Bernoulli(exp(−num/den)), and keeps it with probability 1/k if it
    /// is the k-th accepted.
    #[inline]
    pub fn offer<R: Rng + ?Sized>(&mut self, rng: &mut R, num: u128, den: u128, item: T) {
        if bernoulli_exp(rng, num, den) {
            self.accepted += 1;
            if bernoulli_frac(rng, 1, self.accepted) {
                self.kept = Some(item);
            }
        }
    }

    /// The kept candidate (None if no coin came up: never when the best candidate's num is 0).
    pub fn kept(self) -> Option<T> {
        self.kept
    }
}

/// The largest scale numerator accepted by [`discrete_laplace`]; keeps `u + t·v` far from overflow.
pub const MAX_SCALE_NUMERATOR: u128 = 1 << 121;

/// Geometric with P(Y >= j) = exp(-j·s/t) for j = 0, 1, … (CKS20, the core of Algorithm 2).
/// Requires `1 <= t <= MAX_SCALE_NUMERATOR` and `s >= 1`.
pub fn geometric_exp<R: Rng + ?Sized>(rng: &mut R, t: u128, s: u128) -> u128 {
    assert!(t >= 1 && s >= 1 && t <= MAX_SCALE_NUMERATOR, "geometric_exp: bad scale {t}/{s}");
    loop {
        let u = rng.random_range(0..t);
        if !bernoulli_exp_le1(rng, u, t) {
            continue;
        }
        let mut v: u128 = 0;
        while bernoulli_exp_le1(rng, 1, 1) {
            v += 1;
        }
        // X = u + t·v is Geometric(1 - exp(-1/t)); Y = floor(X/s) is Geometric(1 - exp(-s/t)).
        // With t <= 2^121 an overflow needs v >= 2^6... only after e^-64-probability runs of coins;
        // saturating there keeps the sampler total without measurably changing the distribution.
        return match t.checked_mul(v).and_then(|tv| tv.checked_add(u)) {
            Some(x) => x / s,
            None => u128::MAX / s,
        };
    }
}

/// Discrete Laplace with scale t/s: P(x) = (1-p)/(1+p) · p^|x| with p = exp(-s/t), x ∈ ℤ
/// (CKS20, Algorithm 2): a geometric magnitude with a uniform sign, where (−, 0) is redrawn.
/// Requires `1 <= t <= MAX_SCALE_NUMERATOR` and `s >= 1`.
pub fn discrete_laplace<R: Rng + ?Sized>(rng: &mut R, t: u128, s: u128) -> i128 {
    loop {
        let y = geometric_exp(rng, t, s);
        let negative = rng.random::<bool>();
        if negative && y == 0 {
            continue;
        }
        let y = y.min(i128::MAX as u128) as i128;
        return if negative { -y } else { y };
    }
}

/// A uniform real U in [0, 1) whose binary digits are drawn only as far as a comparison needs them,
/// so that U can be compared exactly with any number of rationals (the same U every time).
#[derive(Debug, Default, Clone)]
pub struct LazyUniform {
    words: Vec<u64>,
}

impl LazyUniform {
    pub fn new() -> Self {
        LazyUniform { words: Vec::new() }
    }

    /// U < num/den, exactly. Requires `0 < den < 2^127` and `num <= den`.
    pub fn less_than<R: Rng + ?Sized>(&mut self, rng: &mut R, num: u128, den: u128) -> bool {
        assert!(den > 0 && den < (1u128 << 127) && num <= den, "LazyUniform: bad fraction {num}/{den}");
        if num == den {
            return true;
        }
        // Long division yields the binary digits of num/den (< 1); the first digit where U differs
        // decides. Equal forever has probability 0; the loop ends with probability 1 (half the
        // time per digit).
        let mut rem = num;
        let mut i = 0usize;
        loop {
            if i / 64 == self.words.len() {
                self.words.push(rng.random::<u64>());
            }
            let u_bit = (self.words[i / 64] >> (63 - i % 64)) & 1;
            rem <<= 1;
            let q_bit = (rem >= den) as u64;
            if q_bit == 1 {
                rem -= den;
            }
            if u_bit != q_bit {
                return u_bit < q_bit;
            }
            if rem == 0 {
                // num/den ends here: U (with a non-zero digit still to come, almost surely) is larger
                return false;
            }
            i += 1;
        }
    }
}

/// Discrete Gaussian with variance parameter σ² = `sigma2` (an integer), P(x) ∝ exp(-x²/(2σ²))
/// (CKS20, Algorithm 3). Requires `1 <= sigma2 <= 2^60`.
pub fn discrete_gaussian<R: Rng + ?Sized>(rng: &mut R, sigma2: u128) -> i128 {
    assert!((1..=1u128 << 60).contains(&sigma2), "discrete_gaussian: sigma2 out of range");
    let t = isqrt(sigma2) + 1; // floor(σ) + 1
    loop {
        let y = discrete_laplace(rng, t, 1);
        let ay = y.unsigned_abs();
        // γ = (|y| - σ²/t)² / (2σ²) = (|y|·t - σ²)² / (2·σ²·t²)
        let num = ay.checked_mul(t).map(|yt| yt.abs_diff(sigma2)).and_then(|d| d.checked_mul(d));
        let den = sigma2.checked_mul(2).and_then(|x| x.checked_mul(t)).and_then(|x| x.checked_mul(t));
        match (num, den) {
            (Some(n), Some(d)) => {
                if bernoulli_exp(rng, n, d) {
                    return y;
                }
            }
            // Overflow only happens for |y| so far out that exp(-γ) < exp(-2^60): reject.
            _ => continue,
        }
    }
}

/// floor(sqrt(n)) for u128, exactly.
pub fn isqrt(n: u128) -> u128 {
    if n < 2 {
        return n;
    }
    let mut x = (n as f64).sqrt() as u128;
    while x.checked_mul(x).is_none_or(|sq| sq > n) {
        x -= 1;
    }
    while (x + 1).checked_mul(x + 1).is_some_and(|sq| sq <= n) {
        x += 1;
    }
    x
}

/// Writes the exact dyadic value of a positive finite f64 as `m · 2^-k` with odd `m`.
pub fn dyadic(x: f64) -> (u64, i32) {
    assert!(x.is_finite() && x > 0.0);
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    let (mut m, mut k) = if exp == 0 { (frac, 1074) } else { (frac | (1u64 << 52), 1075 - exp) };
    let tz = m.trailing_zeros();
    m >>= tz;
    k -= tz as i32;
    (m, k)
}

/// The dyadic value of a positive finite `x` truncated to `bits` significant bits, as `m · 2^-k`
/// with `m < 2^bits`: never above `x`. For rates whose products with large integers must stay exact
/// in 128 bits (permute-and-flip's coins).
pub fn dyadic_at_most(x: f64, bits: u32) -> (u64, i32) {
    let (mut m, mut k) = dyadic(x);
    let len = 64 - m.leading_zeros();
    if len > bits {
        m >>= len - bits;
        k -= (len - bits) as i32;
    }
    (m, k)
}

/// A rational t/s >= `delta`/`epsilon` to use as a discrete Laplace scale.
///
/// It is exactly `delta/epsilon` whenever that fits in 120 bits, which covers every integer
/// sensitivity up to 2^34 at every ε pg_dp accepts; otherwise the denominator is rounded down,
/// which can only enlarge the scale (relative change below 2^-25 in the accepted ranges).
pub fn laplace_scale(delta: u128, epsilon: f64) -> (u128, u128) {
    assert!(delta >= 1 && delta <= (1u128 << 100));
    let (m, k) = dyadic(epsilon);
    let m = m as u128;
    if k <= 0 {
        // ε = m·2^|k| is an integer
        return (delta, m << (-k) as u32);
    }
    let k = k as u32;
    let dbits = 128 - delta.leading_zeros();
    if dbits + k <= 120 {
        (delta << k, m)
    } else {
        let r = dbits + k - 120;
        assert!(r <= k);
        (delta << (k - r), (m >> r).max(1))
    }
}
