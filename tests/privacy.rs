//! Empirical privacy on neighbouring inputs.
//!
//! For each release, draw ≥ 200 000 outputs on an input D and on a neighbour D' (one row added,
//! chosen to be worst case: the row sits at the bound of largest magnitude), bucket the outputs
//! (post-processing, so the ε bound still applies to bucket probabilities) and check, for every
//! bucket with enough mass, that the estimated log ratio of probabilities does not exceed ε beyond a
//! family-wise 1e-6 confidence margin (`common::privacy_check`). Where the bound is attained (count,
//! sums), the largest observed log ratio must also come close to ε: the noise is not excessive.
//!
//! The negative controls run the same checker on deliberately broken mechanisms (noise of half the
//! scale; a row that escaped clamping) and require it to report a violation: the check can fail.
mod common;

use common::*;
use pg_dp_core::mechanisms::accum::{Acc, Params};
use pg_dp_core::mechanisms::{AvgSpec, CountSpec, FloatSumSpec, IntSumSpec};
use pg_dp_core::noise::rng::{seeded_rng, DpRng};
use pg_dp_core::noise::sampling::{discrete_laplace, laplace_scale};

const SAMPLES: usize = 200_000;
/// A bucket takes part in the check when both samples have at least this many outputs in it.
const MIN_COUNT: u64 = 1000;

fn sample<T>(seed: u64, f: impl Fn(&mut DpRng) -> T) -> Vec<T> {
    let mut rng = seeded_rng(seed);
    (0..SAMPLES).map(|_| f(&mut rng)).collect()
}

/// Bucket index of a real output for bucket width w.
fn bucket(x: f64, w: f64) -> i64 {
    (x / w).floor() as i64
}

fn report(what: &str, eps: f64, r: &RatioReport) {
    eprintln!(
        "{what}: ε = {eps}, {} buckets, max |ln ratio| = {:.4}, max excess over ε (after margin z = {:.2}) = {:.4}",
        r.bins, r.max_abs_log_ratio, r.z, r.max_excess
    );
}

/// Asserts ε-DP on the sample pair and, if `tight`, that the log ratio comes within 20% of ε.
fn assert_dp(what: &str, a: &[i64], b: &[i64], eps: f64, alpha: f64, tight: bool) {
    let r = privacy_check(a, b, eps, MIN_COUNT, alpha);
    report(what, eps, &r);
    assert!(r.bins >= 5, "{what}: only {} buckets have enough mass", r.bins);
    assert!(!r.violates(), "{what}: log ratio exceeds ε = {eps} in bucket {} ({r:?})", r.worst_bin);
    if tight {
        assert!(r.max_abs_log_ratio >= 0.8 * eps, "{what}: max log ratio {} is far below ε = {eps}: too much noise?", r.max_abs_log_ratio);
    }
}

#[test]
fn count_is_eps_dp_empirically() {
    let n = 1000;
    let cases = [0.5, 1.0];
    for (i, &eps) in cases.iter().enumerate() {
        let spec = CountSpec::new(eps).unwrap();
        let a = sample(2000 + 2 * i as u64, |rng| spec.release(rng, n).value);
        let b = sample(2001 + 2 * i as u64, |rng| spec.release(rng, n + 1).value);
        assert_dp(&format!("dp_count n vs n+1 (ε = {eps})"), &a, &b, eps, ALPHA / cases.len() as f64, true);
    }
}

#[test]
fn int_sum_is_eps_dp_empirically() {
    // D: a few rows; D': the same plus one row at the bound of largest magnitude (7)
    let (l, u, eps) = (-3, 7, 1.0);
    let spec = IntSumSpec::new(l, u, eps).unwrap();
    let data = [4, -3, 100, 0, 7, -50];
    let mut acc = Acc::new(Params::int_sum(l, u, eps)).unwrap();
    for v in data {
        acc.add_i64(v).unwrap();
    }
    let mut acc2 = acc;
    acc2.add_i64(u).unwrap();
    let (s1, s2) = (acc.sum, acc2.sum);
    assert_eq!(s2 - s1, 7);
    let a = sample(2100, |rng| bucket(spec.release(rng, s1).value as f64, 3.0));
    let b = sample(2101, |rng| bucket(spec.release(rng, s2).value as f64, 3.0));
    assert_dp("dp_sum(int) D vs D + {upper}", &a, &b, eps, ALPHA, true);
}

#[test]
fn float_sum_is_eps_dp_empirically() {
    let (l, u, eps) = (-1.5, 2.0, 0.8);
    let spec = FloatSumSpec::new(l, u, eps).unwrap();
    let mut acc = Acc::new(Params::float_sum(l, u, eps)).unwrap();
    for x in [0.1, 1.0 / 3.0, -1.5, 7.0, -0.2] {
        acc.add_f64(x).unwrap();
    }
    let mut acc2 = acc;
    acc2.add_f64(u).unwrap();
    let (s1, s2) = (acc.sum, acc2.sum);
    assert_eq!((s2 - s1) as u128, spec.sensitivity_steps());
    let w = 0.5; // noise scale is 2.5
    let a = sample(2200, |rng| bucket(spec.release(rng, s1).value, w));
    let b = sample(2201, |rng| bucket(spec.release(rng, s2).value, w));
    assert_dp("dp_sum(float8) D vs D + {upper}", &a, &b, eps, ALPHA, true);
}

#[test]
fn avg_is_eps_dp_empirically() {
    // small n, all rows at the lower bound; the neighbour adds one row at the upper bound
    let (l, u, eps) = (0.0, 1.0, 1.0);
    let spec = AvgSpec::new(l, u, eps).unwrap();
    let cases = [(5usize, 0.0), (5, 0.5)];
    for (i, &(n, x)) in cases.iter().enumerate() {
        let mut acc = Acc::new(Params::avg(l, u, eps)).unwrap();
        for _ in 0..n {
            acc.add_f64(x).unwrap();
        }
        let mut acc2 = acc;
        acc2.add_f64(u).unwrap();
        let w = 0.05;
        let a = sample(2300 + 2 * i as u64, |rng| bucket(spec.release(rng, acc.sum, acc.n).value, w).min(19));
        let b = sample(2301 + 2 * i as u64, |rng| bucket(spec.release(rng, acc2.sum, acc2.n).value, w).min(19));
        assert_dp(&format!("dp_avg {n} rows at {x} vs plus one at upper"), &a, &b, eps, ALPHA / cases.len() as f64, false);
    }
}

/// Negative control: noise of half the scale (effective 2ε) must be reported as a violation of ε.
#[test]
fn checker_rejects_half_scale_noise() {
    let eps = 1.0;
    let n: i64 = 1000;
    let (t, s) = laplace_scale(1, eps);
    let broken = |rng: &mut DpRng, n: i64| n + discrete_laplace(rng, t, 2 * s) as i64;
    let a = sample(2400, |rng| broken(rng, n));
    let b = sample(2401, |rng| broken(rng, n + 1));
    let r = privacy_check(&a, &b, eps, MIN_COUNT, ALPHA);
    report("broken count (half scale)", eps, &r);
    assert!(r.violates(), "the checker did not notice noise of half the scale: {r:?}");

    // the same on a real sum whose noise uses half the sensitivity
    let (l, u) = (-1.5, 2.0);
    let spec = FloatSumSpec::new(l, u, eps).unwrap();
    let sens = spec.sensitivity_steps();
    let (t, s) = laplace_scale(sens / 2, eps);
    let step = spec.grid.step();
    let broken = |rng: &mut DpRng, sum: i128| (sum + discrete_laplace(rng, t, s)) as f64 * step;
    let a = sample(2402, |rng| bucket(broken(rng, 0), 0.5));
    let b = sample(2403, |rng| bucket(broken(rng, sens as i128), 0.5));
    let r = privacy_check(&a, &b, eps, MIN_COUNT, ALPHA);
    report("broken float sum (half sensitivity)", eps, &r);
    assert!(r.violates(), "the checker did not notice half-sensitivity noise: {r:?}");
}

/// Negative control: a row that escaped clamping (value 2·upper added without clamping) breaks the
/// sensitivity bound, and the checker must say so even though the noise itself is correct.
#[test]
fn checker_rejects_unclamped_row() {
    let (l, u, eps) = (-1.5, 2.0, 1.0);
    let spec = FloatSumSpec::new(l, u, eps).unwrap();
    let q_unclamped = (2.0 * u / spec.grid.step()) as i128; // what the sum would gain without clamping
    let a = sample(2500, |rng| bucket(spec.release(rng, 0).value, 0.5));
    let b = sample(2501, |rng| bucket(spec.release(rng, q_unclamped).value, 0.5));
    let r = privacy_check(&a, &b, eps, MIN_COUNT, ALPHA);
    report("float sum with an unclamped row", eps, &r);
    assert!(r.violates(), "the checker did not notice an unclamped row: {r:?}");
}
