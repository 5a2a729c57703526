//! Statistical helpers shared by the integration tests (no statistics library is available, so the
//! distribution functions and critical values are computed here and checked against closed forms in
//! `samplers.rs::helpers_match_closed_forms`).
//!
//! Every statistical test in this directory runs at family-wise level [`ALPHA`] = 1e-6 with a fixed
//! seed, so a run is reproducible and a correct implementation fails with probability below 1e-6
//! per test.
#![allow(dead_code)]

use std::collections::HashMap;

/// Significance level of every statistical test.
pub const ALPHA: f64 = 1e-6;

/// P(Z > z) for a standard normal Z.
pub fn normal_sf(z: f64) -> f64 {
    0.5 * libm::erfc(z / std::f64::consts::SQRT_2)
}

/// P(Z <= z) for a standard normal Z.
pub fn normal_cdf(z: f64) -> f64 {
    0.5 * libm::erfc(-z / std::f64::consts::SQRT_2)
}

/// The z with P(Z > z) = p, for 0 < p < 1/2, by bisection on the exact tail.
pub fn normal_isf(p: f64) -> f64 {
    assert!(p > 0.0 && p < 0.5);
    let (mut lo, mut hi) = (0.0_f64, 40.0_f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if normal_sf(mid) > p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// Two-sided critical value: P(|Z| > z) = alpha.
pub fn z_two_sided(alpha: f64) -> f64 {
    normal_isf(alpha / 2.0)
}

/// Regularized upper incomplete gamma function Q(a, x) = Γ(a, x)/Γ(a)
/// (series for x < a + 1, Lentz continued fraction otherwise).
pub fn gamma_q(a: f64, x: f64) -> f64 {
    assert!(a > 0.0 && x >= 0.0);
    if x == 0.0 {
        return 1.0;
    }
    let ln_pre = -x + a * x.ln() - libm::lgamma(a);
    if x < a + 1.0 {
        // P(a, x) = e^-x x^a / Γ(a) · Σ x^n / (a (a+1) ... (a+n))
        let mut ap = a;
        let mut del = 1.0 / a;
        let mut sum = del;
        for _ in 0..100_000 {
            ap += 1.0;
            del *= x / ap;
            sum += del;
            if del.abs() < sum.abs() * 1e-17 {
                break;
            }
        }
        1.0 - sum * ln_pre.exp()
    } else {
        let tiny = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..100_000 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            if d.abs() < tiny {
                d = tiny;
            }
            c = b + an / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            let del = d * c;
            h *= del;
            if (del - 1.0).abs() < 1e-16 {
                break;
            }
        }
        ln_pre.exp() * h
    }
}

/// P(χ²_df > x).
pub fn chi2_sf(x: f64, df: usize) -> f64 {
    gamma_q(df as f64 / 2.0, x / 2.0)
}

/// Wilson–Hilferty approximation of the upper-alpha critical value of χ²_df.
pub fn chi2_critical_wh(df: usize, alpha: f64) -> f64 {
    let k = df as f64;
    let z = normal_isf(alpha);
    let c = 2.0 / (9.0 * k);
    k * (1.0 - c + z * c.sqrt()).powi(3)
}

/// Outcome of a chi-square goodness-of-fit test.
#[derive(Debug, Clone)]
pub struct Gof {
    pub stat: f64,
    pub df: usize,
    pub p_value: f64,
    /// Lowest and highest value with a bin of its own; everything below/above is one tail bin each.
    pub lo: i64,
    pub hi: i64,
}

impl Gof {
    pub fn rejects(&self, alpha: f64) -> bool {
        self.p_value < alpha
    }
}

/// Sum of pmf(x) for x = start, start + step, ... until the terms are negligible.
fn tail_mass(pmf: &dyn Fn(i64) -> f64, start: i64, step: i64) -> f64 {
    let mut s = 0.0;
    let mut x = start;
    for _ in 0..10_000_000 {
        let p = pmf(x);
        s += p;
        if p == 0.0 || p < s * 1e-18 {
            break;
        }
        x += step;
    }
    s
}

/// Chi-square goodness of fit of integer samples against a unimodal pmf with mode `mode`.
///
/// Every value in [lo, hi] gets its own bin, where [lo, hi] is the widest interval around the mode
/// whose values all have expected count >= `min_expected`; the values below lo and above hi form
/// two tail bins (merged into the edge bins if their expected count is too small).
pub fn chi2_gof(samples: &[i64], pmf: impl Fn(i64) -> f64, mode: i64, min_expected: f64) -> Gof {
    let n = samples.len() as f64;
    let pmf: &dyn Fn(i64) -> f64 = &pmf;
    let mut lo = mode;
    while n * pmf(lo - 1) >= min_expected {
        lo -= 1;
    }
    let mut hi = mode;
    while n * pmf(hi + 1) >= min_expected {
        hi += 1;
    }
    let mut left = tail_mass(pmf, lo - 1, -1);
    while n * left < min_expected && lo < hi {
        left += pmf(lo);
        lo += 1;
    }
    let mut right = tail_mass(pmf, hi + 1, 1);
    while n * right < min_expected && hi > lo {
        right += pmf(hi);
        hi -= 1;
    }
    let width = (hi - lo + 1) as usize;
    let mut counts = vec![0u64; width + 2];
    for &x in samples {
        let i = if x < lo {
            0
        } else if x > hi {
            width + 1
        } else {
            (x - lo) as usize + 1
        };
        counts[i] += 1;
    }
    let mut probs = Vec::with_capacity(width + 2);
    probs.push(left);
    for x in lo..=hi {
        probs.push(pmf(x));
    }
    probs.push(right);
    let mut stat = 0.0;
    let mut bins = 0;
    for (c, p) in counts.iter().zip(&probs) {
        let e = n * p;
        if e <= 0.0 {
            assert_eq!(*c, 0, "a sample fell where the pmf is zero");
            continue;
        }
        stat += (*c as f64 - e).powi(2) / e;
        bins += 1;
    }
    let df = bins - 1;
    Gof { stat, df, p_value: chi2_sf(stat, df), lo, hi }
}

/// Kolmogorov–Smirnov statistic of samples against a continuous CDF.
pub fn ks_stat(mut xs: Vec<f64>, cdf: impl Fn(f64) -> f64) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = xs.len() as f64;
    let mut d = 0.0_f64;
    for (i, &x) in xs.iter().enumerate() {
        let f = cdf(x);
        d = d.max(f - i as f64 / n).max((i + 1) as f64 / n - f);
    }
    d
}

/// Critical KS distance at level alpha from the Kolmogorov distribution's asymptotic tail
/// P(√n·D > x) ≈ 2·exp(-2x²).
pub fn ks_critical(n: usize, alpha: f64) -> f64 {
    (-(alpha / 2.0).ln() / 2.0).sqrt() / (n as f64).sqrt()
}

/// z statistic of the second moment of `d` (whose mean is known to be 0) against `expected_var`,
/// using the empirical variance of d² for the standard error (asymptotic normality of the mean
/// of d²).
pub fn variance_z(d: &[f64], expected_var: f64) -> f64 {
    let n = d.len() as f64;
    let m2 = d.iter().map(|x| x * x).sum::<f64>() / n;
    let v2 = d.iter().map(|x| (x * x - m2).powi(2)).sum::<f64>() / (n - 1.0);
    (m2 - expected_var) / (v2 / n).sqrt()
}

/// Variance of the discrete Laplace distribution with scale b (P(x) ∝ exp(-|x|/b)):
/// 2p/(1-p)² with p = exp(-1/b). Tends to the continuous 2b² as b grows (2b² - 1/6 + O(1/b²)).
pub fn dlap_variance(b: f64) -> f64 {
    let p = (-1.0 / b).exp();
    let one_minus_p = -(-1.0 / b).exp_m1();
    2.0 * p / (one_minus_p * one_minus_p)
}

/// Result of the empirical privacy check of two output samples from neighbouring inputs.
#[derive(Debug, Clone)]
pub struct RatioReport {
    /// Bins with at least `min_count` outputs in both samples.
    pub bins: usize,
    /// Critical value used per bin (Bonferroni over bins, two-sided).
    pub z: f64,
    /// Largest observed |ln(P̂₁(bin)/P̂₂(bin))|.
    pub max_abs_log_ratio: f64,
    /// Largest |ln ratio| − z·se − ε over bins: positive means a significant violation of ε-DP.
    pub max_excess: f64,
    /// The bin attaining `max_excess`.
    pub worst_bin: i64,
}

impl RatioReport {
    /// True if some bin's log ratio exceeds ε beyond the family-wise 1 − ALPHA confidence margin.
    pub fn violates(&self) -> bool {
        self.max_excess > 0.0
    }
}

/// Empirical ε-DP check. `a` and `b` are (post-processed, e.g. bucketed) outputs of a mechanism on
/// two neighbouring inputs. For every bin with at least `min_count` hits in both samples, the
/// estimated log ratio of the bin's probabilities must satisfy |ln r̂| − z·se <= ε, where
/// se = sqrt(1/c₁ + 1/c₂) is the delta-method standard error of ln r̂ and z is the two-sided
/// critical value for `alpha` divided over the bins (Bonferroni). If the mechanism is ε-DP, every
/// true |ln r| <= ε (bucketing is post-processing), so a report of violation has probability at
/// most about `alpha`.
pub fn privacy_check(a: &[i64], b: &[i64], eps: f64, min_count: u64, alpha: f64) -> RatioReport {
    let mut h: HashMap<i64, (u64, u64)> = HashMap::new();
    for &x in a {
        h.entry(x).or_default().0 += 1;
    }
    for &x in b {
        h.entry(x).or_default().1 += 1;
    }
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let eligible: Vec<(i64, u64, u64)> =
        h.into_iter().filter(|(_, (c1, c2))| *c1 >= min_count && *c2 >= min_count).map(|(k, (c1, c2))| (k, c1, c2)).collect();
    let bins = eligible.len();
    assert!(bins > 0, "no bin has {min_count} outputs in both samples");
    let z = z_two_sided(alpha / bins as f64);
    let mut rep = RatioReport { bins, z, max_abs_log_ratio: 0.0, max_excess: f64::NEG_INFINITY, worst_bin: 0 };
    for (k, c1, c2) in eligible {
        let (c1, c2) = (c1 as f64, c2 as f64);
        let lr = ((c1 / na) / (c2 / nb)).ln();
        let se = (1.0 / c1 + 1.0 / c2).sqrt();
        rep.max_abs_log_ratio = rep.max_abs_log_ratio.max(lr.abs());
        let excess = lr.abs() - z * se - eps;
        if excess > rep.max_excess {
            rep.max_excess = excess;
            rep.worst_bin = k;
        }
    }
    rep
}

/// A fixed permutation of `v` (Fisher–Yates driven by the given rng).
pub fn shuffle<T, R: rand::Rng>(rng: &mut R, v: &mut [T]) {
    for i in (1..v.len()).rev() {
        let j = rng.random_range(0..=i);
        v.swap(i, j);
    }
}

/// Minimal unsigned big integer (little-endian u64 limbs) for exact rational comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Big(Vec<u64>);

impl Big {
    pub fn from_u128(x: u128) -> Big {
        let mut b = Big(vec![x as u64, (x >> 64) as u64]);
        b.trim();
        b
    }
    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }
    pub fn mul(&self, o: &Big) -> Big {
        let mut r = vec![0u64; self.0.len() + o.0.len() + 1];
        for (i, &a) in self.0.iter().enumerate() {
            let mut carry: u128 = 0;
            for (j, &b) in o.0.iter().enumerate() {
                let t = r[i + j] as u128 + a as u128 * b as u128 + carry;
                r[i + j] = t as u64;
                carry = t >> 64;
            }
            let mut k = i + o.0.len();
            while carry > 0 {
                let t = r[k] as u128 + carry;
                r[k] = t as u64;
                carry = t >> 64;
                k += 1;
            }
        }
        let mut b = Big(r);
        b.trim();
        b
    }
    pub fn shl(&self, bits: u32) -> Big {
        let (words, rem) = ((bits / 64) as usize, bits % 64);
        let mut r = vec![0u64; self.0.len() + words + 1];
        for (i, &a) in self.0.iter().enumerate() {
            r[i + words] |= a << rem;
            if rem > 0 {
                r[i + words + 1] |= a >> (64 - rem);
            }
        }
        let mut b = Big(r);
        b.trim();
        b
    }
}

impl PartialOrd for Big {
    fn partial_cmp(&self, o: &Big) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Big {
    fn cmp(&self, o: &Big) -> std::cmp::Ordering {
        self.0.len().cmp(&o.0.len()).then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }
}

/// P(X = x) of the discrete Gaussian with variance parameter sigma2, normalized numerically.
pub fn dgauss_pmf(sigma2: f64) -> impl Fn(i64) -> f64 {
    let w = move |x: i64| (-((x * x) as f64) / (2.0 * sigma2)).exp();
    let l = (40.0 * sigma2.sqrt()) as i64 + 10;
    let z: f64 = (-l..=l).map(w).sum();
    move |x: i64| if x.abs() > 1 << 30 { 0.0 } else { w(x) / z }
}

/// The exact distribution of permute-and-flip with acceptance probabilities `acc` (the best is 1),
/// from its definition: the points are visited in a uniformly random order and the first whose coin
/// comes up is released. That is a uniform point of the set A of points whose independent coins come
/// up, so P(y) = acc(y)·E[1/(1 + #(A∖{y}))], with #(A∖{y}) the Poisson-binomial count of the others.
pub fn pf_pmf_of(acc: &[f64]) -> Vec<f64> {
    (0..acc.len())
        .map(|y| {
            let mut dist = vec![1.0]; // P(#others accepted = k)
            for (z, &a) in acc.iter().enumerate() {
                if z == y {
                    continue;
                }
                let mut next = vec![0.0; dist.len() + 1];
                for (k, &pk) in dist.iter().enumerate() {
                    next[k] += pk * (1.0 - a);
                    next[k + 1] += pk * a;
                }
                dist = next;
            }
            acc[y] * dist.iter().enumerate().map(|(k, pk)| pk / (k as f64 + 1.0)).sum::<f64>()
        })
        .collect()
}
