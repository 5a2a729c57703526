//! dp_variance and dp_stddev in the core: the joint privacy loss of the three noisy statistics at
//! every ε (and that the joint accounting beats adding up separate sensitivities), the noise scale of
//! the released estimate against its delta-method prediction (with a control that must be rejected),
//! bias for large n, empirical privacy on worst-case neighbouring inputs with a negative control,
//! the accumulator and receipt, the clamp of every output, and the parameter errors.
mod common;

use common::*;
use pg_dp_core::accounting::charge::mechanism_epsilon;
use pg_dp_core::mechanisms::accum::{Acc, Params, Spec};
use pg_dp_core::mechanisms::{variance_row_loss, VarianceSpec, VAR_KAPPA, VAR_WEIGHTS};
use pg_dp_core::noise::rng::{seeded_rng, DpRng};
use pg_dp_core::DpError;
use rand::Rng;

const SAMPLES: usize = 200_000;

fn sample<T>(seed: u64, n: usize, mut f: impl FnMut(&mut DpRng) -> T) -> Vec<T> {
    let mut rng = seeded_rng(seed);
    (0..n).map(|_| f(&mut rng)).collect()
}

/// The exact statistics of `data` for `spec`: (Σ q, Σ (q − c)², n).
fn stats(spec: &VarianceSpec, data: &[f64]) -> (i128, i128, i64) {
    let mut acc = Acc::new(if spec.stddev {
        Params::stddev(spec.grid.lower, spec.grid.upper, spec.epsilon)
    } else {
        Params::variance(spec.grid.lower, spec.grid.upper, spec.epsilon)
    })
    .unwrap();
    for &x in data {
        acc.add_f64(x).unwrap();
    }
    (acc.sum, acc.sum_sq, acc.n)
}

fn release(spec: &VarianceSpec, rng: &mut DpRng, data: &[f64]) -> f64 {
    let (s, s2, n) = stats(spec, data);
    spec.release(rng, s, s2, n).value
}

/// Sample variance (n − 1) of the clamped values, in f64.
fn sample_variance(data: &[f64], lower: f64, upper: f64) -> f64 {
    let x: Vec<f64> = data.iter().map(|v| v.clamp(lower, upper)).collect();
    let m = x.iter().sum::<f64>() / x.len() as f64;
    x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (x.len() - 1) as f64
}

/// The Laplace scales (count, centred sum, shifted squares) in rows, steps and steps².
fn scales(spec: &VarianceSpec) -> (f64, f64, f64) {
    let [(t0, s0), (t1, s1), (t2, s2)] = spec.scales();
    (t0 as f64 / s0 as f64, t1 as f64 / s1 as f64, t2 as f64 / s2 as f64)
}

#[test]
fn the_joint_row_loss_is_epsilon_at_every_epsilon() {
    let mut gains = Vec::new();
    for i in 0..=150 {
        let eps = (1e-9 * 10f64.powf(i as f64 * 15.0 / 150.0)).min(1e6);
        for &(l, u) in &[(0.0, 1.0), (-3.0, 1e6), (1e29, 1e30), (-1e-300, 1e-300), (7.0, 7.5)] {
            let spec = VarianceSpec::new(l, u, eps, false).unwrap();
            let e = mechanism_epsilon(eps);
            let loss = spec.row_loss();
            // (the exact scales round a 120-bit denominator down where needed: at most 2^-25 more noise)
            assert!(loss <= e && loss >= e * (1.0 - 1e-6), "ε = {eps}, [{l}, {u}]: row loss {loss}");
            // the loss of single rows at integer deviations y, evaluated directly, never exceeds it
            let (b0, b1, b2) = scales(&spec);
            let (h, k) = (spec.half as f64, spec.kappa as f64);
            let mut rng = seeded_rng(i as u64);
            let mut ys: Vec<f64> = vec![0.0, h, -h, k.sqrt().floor(), k.sqrt().ceil(), (h * h * b1 / (2.0 * h * b2)).round()];
            ys.extend((0..200).map(|_| rng.random_range(-h..=h).round()));
            for y in ys {
                let row = 1.0 / b0 + y.abs() / b1 + (y * y - k).abs() / b2;
                assert!(row <= loss * (1.0 + 1e-12), "ε = {eps}: a row at {y} loses {row} > {loss}");
            }
            // separate accounting (basic composition of the three sensitivities) would charge more
            gains.push((1.0 / b0 + h / b1 + k.max(h * h - k) / b2) / loss);
        }
    }
    let (lo, hi) = gains.iter().fold((f64::INFINITY, 0.0f64), |(a, b), &g| (a.min(g), b.max(g)));
    eprintln!("separate accounting / joint row loss: {lo:.3} .. {hi:.3}");
    assert!(lo > 1.15, "the joint accounting gains only {lo}");
    // the closed form of max over t of e1·t + e2·|t² − k| against a fine scan
    for &(e1, e2, k) in &[(0.36, 0.76, VAR_KAPPA), (1.0, 0.1, 0.5), (0.01, 2.0, 0.9), (0.5, 0.5, 0.0), (3.0, 0.2, 1.0)] {
        let scan = (0..=100_000).map(|i| i as f64 / 100_000.0).map(|t| e1 * t + e2 * (t * t - k).abs()).fold(0.0, f64::max);
        let closed = variance_row_loss(e1, e2, k);
        assert!(closed >= scan && closed <= scan * (1.0 + 1e-8), "({e1}, {e2}, {k}): {closed} vs scan {scan}");
    }
}

/// Values in [lower, upper] with a mean off the centre: lower + w·frac(i·φ)^1.5.
fn skewed(n: usize, lower: f64, upper: f64) -> Vec<f64> {
    (0..n).map(|i| lower + (upper - lower) * ((i as f64 * 0.618_033_988_749_895).fract()).powf(1.5)).collect()
}

/// Delta-method variance of the released sample variance, in output units², for statistics
/// (Σq, Σ(q − c)², n) and noise scales (b0, b1, b2) in rows, steps and steps².
fn predicted_variance(spec: &VarianceSpec, (s, s2, n): (i128, i128, i64), (b0, b1, b2): (f64, f64, f64)) -> f64 {
    let nf = n as f64;
    let mu = (s - n as i128 * spec.center as i128) as f64 / nf; // mean deviation, steps
    let m2 = s2 as f64 / nf;
    let coef = spec.kappa as f64 - m2 + 2.0 * mu * mu;
    let v = dlap_variance(b2) + 4.0 * mu * mu * dlap_variance(b1) + coef * coef * dlap_variance(b0);
    v / ((nf - 1.0) * (nf - 1.0)) * spec.grid.step().powi(4)
}

#[test]
fn noise_of_the_estimate_matches_its_scales() {
    // 100,000 skewed rows in [0, 10] (mean 4, off the centre): the released sample variance varies as
    // the delta method predicts from the three scales (z-test at 1e-6), which predictions without the
    // centred sum's noise or with 10% larger scales fail; and it is unbiased.
    let data = skewed(100_000, 0.0, 10.0);
    let truth = sample_variance(&data, 0.0, 10.0);
    for (seed, eps) in [(800u64, 0.01), (801, 0.1)] {
        let spec = VarianceSpec::new(0.0, 10.0, eps, false).unwrap();
        let st = stats(&spec, &data);
        let (b0, b1, b2) = scales(&spec);
        let want = predicted_variance(&spec, st, (b0, b1, b2));
        let rel: Vec<f64> = sample(seed, 20_000, |rng| spec.release(rng, st.0, st.1, st.2).value - truth);
        let z = variance_z(&rel, want);
        let mean = rel.iter().sum::<f64>() / rel.len() as f64;
        let zmean = mean / (want / rel.len() as f64).sqrt();
        eprintln!("ε = {eps}: sd of the estimate {:.4e} (predicted {:.4e}), z = {z:.2}; bias z = {zmean:.2}", (rel.iter().map(|d| d * d).sum::<f64>() / rel.len() as f64).sqrt(), want.sqrt());
        let crit = z_two_sided(ALPHA / 4.0);
        assert!(z.abs() < crit, "ε = {eps}: variance z = {z}");
        assert!(zmean.abs() < crit, "ε = {eps}: bias z = {zmean}");
        // controls: the centred sum's noise left out (it matters when the mean is off the centre), and
        // every scale 10% larger
        let without = predicted_variance(&spec, st, (b0, 0.0, b2));
        assert!(variance_z(&rel, without).abs() > crit, "ε = {eps}: the centred sum's noise is not seen");
        let larger = predicted_variance(&spec, st, (b0 * 1.1, b1 * 1.1, b2 * 1.1));
        assert!(variance_z(&rel, larger).abs() > crit, "ε = {eps}: 10% larger scales not rejected");
    }
}

#[test]
fn variance_and_stddev_are_nearly_unbiased_and_converge() {
    // 20,000 rows, ε = 1: the mean of 2,000 releases is the sample variance within 1e-6 confidence,
    // and the standard deviation release is its square root's neighbourhood
    let data = skewed(20_000, -5.0, 15.0);
    let truth = sample_variance(&data, -5.0, 15.0);
    let spec = VarianceSpec::new(-5.0, 15.0, 1.0, false).unwrap();
    let xs = sample(810, 2_000, |rng| release(&spec, rng, &data));
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt();
    assert!((mean - truth).abs() < z_two_sided(ALPHA) * sd / (xs.len() as f64).sqrt(), "{mean} vs {truth} (sd {sd})");
    let sspec = VarianceSpec::new(-5.0, 15.0, 1.0, true).unwrap();
    let ys = sample(811, 2_000, |rng| release(&sspec, rng, &data));
    let m = ys.iter().sum::<f64>() / ys.len() as f64;
    assert!((m - truth.sqrt()).abs() < 0.01 * truth.sqrt(), "stddev {m} vs {}", truth.sqrt());
    // at ε = 1e6 the release is the sample variance up to the grid
    let spec = VarianceSpec::new(-5.0, 15.0, 1e6, false).unwrap();
    let mut rng = seeded_rng(812);
    for _ in 0..20 {
        let v = release(&spec, &mut rng, &data);
        assert!((v - truth).abs() < 1e-6 * truth, "{v} vs {truth}");
    }
}

/// Worst-case neighbours for small n: four rows at the centre, and the same with a fifth row at the
/// upper bound (the row of largest privacy loss).
fn pair() -> (Vec<f64>, Vec<f64>) {
    let a = vec![0.5; 4];
    let mut b = a.clone();
    b.push(1.0);
    (a, b)
}

/// The released variance on both data sets, bucketed in twentieths of its range.
fn check_release(spec: &VarianceSpec, eps_bound: f64, seed: u64) -> RatioReport {
    let (a, b) = pair();
    let top = spec.max_variance();
    let bucket = |v: f64| ((v / top * 20.0).floor() as i64).min(19);
    let xa = sample(seed, SAMPLES, |rng| bucket(release(spec, rng, &a)));
    let xb = sample(seed + 1, SAMPLES, |rng| bucket(release(spec, rng, &b)));
    let r = privacy_check(&xa, &xb, eps_bound, 1000, ALPHA / 4.0);
    eprintln!("released variance, ε {eps_bound} (noise for ε {}): {} buckets, max |ln ratio| {:.4}, excess {:.4}", spec.epsilon, r.bins, r.max_abs_log_ratio, r.max_excess);
    r
}

/// The noisy statistics on both data sets, bucketed by the privacy loss L(o) = ln P(o | a)/P(o | b)
/// of the mechanism `loss_spec` describes (a fixed function of the output, so post-processing): in
/// twentieths of ε. Where every statistic lies beyond both data sets' values, L = ε exactly, so this
/// bucketing shows the largest ratio the mechanism can produce.
fn check_statistics(spec: &VarianceSpec, loss_spec: &VarianceSpec, eps_bound: f64, seed: u64) -> RatioReport {
    let (a, b) = pair();
    let (sa, sb) = (stats(spec, &a), stats(spec, &b));
    let exact = |(s, s2, n): (i128, i128, i64)| -> [f64; 3] {
        [n as f64, (s - n as i128 * spec.center as i128) as f64, (s2 - n as i128 * spec.kappa as i128) as f64]
    };
    let (ea, eb) = (exact(sa), exact(sb));
    let (b0, b1, b2) = scales(loss_spec);
    let loss = |o: (i128, i128, i128)| -> f64 {
        let o = [o.0 as f64, o.1 as f64, o.2 as f64];
        (0..3).map(|i| ((o[i] - eb[i]).abs() - (o[i] - ea[i]).abs()) / [b0, b1, b2][i]).sum()
    };
    let bucket = |l: f64| (l / eps_bound * 20.0).round() as i64;
    let xa = sample(seed, SAMPLES, |rng| bucket(loss(spec.noisy_statistics(rng, sa.0, sa.1, sa.2))));
    let xb = sample(seed + 1, SAMPLES, |rng| bucket(loss(spec.noisy_statistics(rng, sb.0, sb.1, sb.2))));
    let r = privacy_check(&xa, &xb, eps_bound, 1000, ALPHA / 4.0);
    eprintln!("noisy statistics, ε {eps_bound} (noise for ε {}): {} buckets, max |ln ratio| {:.4}, excess {:.4}", spec.epsilon, r.bins, r.max_abs_log_ratio, r.max_excess);
    r
}

#[test]
fn variance_is_private_empirically_with_negative_controls() {
    let spec = VarianceSpec::new(0.0, 1.0, 1.0, false).unwrap();
    let r = check_release(&spec, 1.0, 820);
    assert!(r.bins >= 5 && !r.violates(), "{r:?}");
    let r = check_statistics(&spec, &spec, 1.0, 822);
    assert!(r.bins >= 10 && !r.violates() && r.max_abs_log_ratio > 0.9, "{r:?}");
    // the noise of ε = 4 checked against ε = 1 must be caught on the release, and that of ε = 1.3
    // on the statistics
    let loud = VarianceSpec::new(0.0, 1.0, 4.0, false).unwrap();
    let r = check_release(&loud, 1.0, 824);
    assert!(r.violates(), "four times too little noise went unnoticed: {r:?}");
    let loud = VarianceSpec::new(0.0, 1.0, 1.3, false).unwrap();
    let r = check_statistics(&loud, &loud, 1.0, 826);
    assert!(r.violates(), "1.3 times too little noise went unnoticed: {r:?}");
}

#[test]
fn outputs_are_clamped_and_degenerate_cases_are_exact() {
    let mut rng = seeded_rng(830);
    for &(l, u) in &[(0.0, 1.0), (-1e30, 1e30), (0.0, 1e-300), (1e29, 1e30), (-7.0, -6.5)] {
        for &eps in &[1e-9, 0.01, 1.0, 1e6] {
            for stddev in [false, true] {
                let spec = VarianceSpec::new(l, u, eps, stddev).unwrap();
                let top = if stddev { (u - l) / 2.0 } else { ((u - l) / 2.0).powi(2) };
                for n in [0usize, 1, 2, 100] {
                    let data: Vec<f64> = (0..n).map(|i| [f64::INFINITY, f64::NEG_INFINITY, l, u, 0.0][i % 5]).collect();
                    for _ in 0..20 {
                        let v = release(&spec, &mut rng, &data);
                        assert!(v >= 0.0 && v <= top, "[{l}, {u}], ε {eps}, n {n}: {v} outside [0, {top}]");
                    }
                }
            }
        }
    }
    // lower = upper: every row has that value, the variance is 0, released without noise
    let spec = VarianceSpec::new(2.0, 2.0, 1.0, false).unwrap();
    assert_eq!(release(&spec, &mut rng, &[1.0, 5.0, 2.0]), 0.0);
    assert_eq!((spec.describe().scale, spec.describe().count_scale), (0.0, Some(0.0)));
    // NaN is skipped like NULL; ±Infinity is clamped
    let p = Params::variance(0.0, 1.0, 1.0);
    let mut a = Acc::new(p).unwrap();
    let mut b = Acc::new(p).unwrap();
    for x in [0.25, f64::NAN, f64::INFINITY] {
        a.add_f64(x).unwrap();
    }
    for x in [0.25, 1.0] {
        b.add_f64(x).unwrap();
    }
    assert!(a == b, "NaN must be skipped and +Infinity clamped to the upper bound");
    assert!(!a.try_add_f64(f64::NAN) && a.try_add_f64(0.5) && a.n == 3);
}

#[test]
fn receipt_and_state() {
    let spec = VarianceSpec::new(-1.0, 3.0, 0.5, false).unwrap();
    let (b0, b1, b2) = scales(&spec);
    let step = spec.grid.step();
    let info = spec.describe();
    assert_eq!((info.mechanism, info.epsilon, info.delta), ("discrete_laplace", 0.5, 0.0));
    assert_eq!(info.scale, b2 * step * step);
    assert_eq!(info.count_scale, Some(b0));
    let h = spec.half as f64 * step;
    assert!((h - 2.0).abs() < 1e-9 && (info.sensitivity - VAR_KAPPA * 4.0).abs() < 1e-6, "{h} {}", info.sensitivity);
    // the scales follow the weights w, normalised so that w0 + max_t(w1·t + w2·|t² − κ/H²|) = 1:
    // 1/(w0·ε), H/(w1·ε) and H²/(w2·ε) in output units, with H = 2
    let (w0, w1, w2) = VAR_WEIGHTS;
    let norm = w0 + variance_row_loss(w1, w2, VAR_KAPPA);
    let e = 0.5 / norm;
    assert!((b0 * w0 * e - 1.0).abs() < 1e-6 && (b1 * step * w1 * e / 2.0 - 1.0).abs() < 1e-6, "{b0} {}", b1 * step);
    assert!((info.scale * w2 * e / 4.0 - 1.0).abs() < 1e-6, "{}", info.scale);
    let d: serde_json::Value = serde_json::from_str(&Spec::Variance(spec).details()).unwrap();
    assert_eq!(d["estimate"], "sample variance");
    assert!((d["centred_sum"]["scale"].as_f64().unwrap() - b1 * step).abs() < 1e-12);
    assert!((d["center"].as_f64().unwrap() - 1.0).abs() < 1e-9);
    let sd: serde_json::Value = serde_json::from_str(&VarianceSpec::new(-1.0, 3.0, 0.5, true).unwrap().details()).unwrap();
    assert_eq!(sd["estimate"], "sample standard deviation");
    // the accumulator builds the same spec; variance and stddev states do not merge
    let v = Acc::new(Params::variance(-1.0, 3.0, 0.5)).unwrap();
    assert_eq!(v.spec, Spec::Variance(spec));
    assert_eq!(v.spec.describe(), info);
    let mut s = Acc::new(Params::stddev(-1.0, 3.0, 0.5)).unwrap();
    assert!(matches!(s.merge(&v), Err(DpError::ParameterChanged { .. })));
    assert_eq!(Spec::Count(pg_dp_core::mechanisms::CountSpec::new(1.0).unwrap()).details(), "{}");
}

#[test]
fn parameter_errors_name_the_argument() {
    let arg = |e: DpError| match e {
        DpError::InvalidParameter { arg, .. } => arg,
        other => panic!("{other:?}"),
    };
    for stddev in [false, true] {
        assert_eq!(arg(VarianceSpec::new(1.0, 0.0, 1.0, stddev).unwrap_err()), "lower");
        assert_eq!(arg(VarianceSpec::new(f64::NAN, 1.0, 1.0, stddev).unwrap_err()), "lower");
        assert_eq!(arg(VarianceSpec::new(0.0, f64::INFINITY, 1.0, stddev).unwrap_err()), "upper");
        assert_eq!(arg(VarianceSpec::new(0.0, 2e30, 1.0, stddev).unwrap_err()), "upper");
        assert_eq!(arg(VarianceSpec::new(0.0, 1.0, 0.0, stddev).unwrap_err()), "epsilon");
        assert_eq!(arg(VarianceSpec::new(0.0, 1.0, 2e6, stddev).unwrap_err()), "epsilon");
        assert_eq!(arg(VarianceSpec::new(0.0, 1.0, f64::NAN, stddev).unwrap_err()), "epsilon");
    }
    assert_eq!(arg(Acc::new(Params::variance(0.0, 1.0, -1.0)).unwrap_err()), "epsilon");
    assert_eq!(arg(Acc::new(Params::stddev(3.0, 1.0, 1.0)).unwrap_err()), "lower");
    let msg = VarianceSpec::new(0.0, 1.0, 0.0, false).unwrap_err().to_string();
    assert!(msg.contains("epsilon must be a finite number between 1e-9 and 1e6"), "{msg}");
}
