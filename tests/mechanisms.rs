//! Tests of the releases in `pg_dp_core::mechanisms`, the accumulator in `pg_dp_core::mechanisms::accum` and the
//! Gaussian calibration in `pg_dp_core::noise::gaussian`: reported noise scales, empirical noise variance,
//! grid outputs, exact order-independent accumulation, clamping, parameter validation and state
//! (de)serialization. Statistical checks use seeded generators and level 1e-6 (see `common`).
mod common;

use common::*;
use pg_dp_core::mechanisms::accum::{Acc, Params, Spec, ACC_BYTES};
use pg_dp_core::noise::gaussian::{analytic_sigma, gaussian_delta, sample_on_grid};
use pg_dp_core::noise::grid::{floor_log2, pow2};
use pg_dp_core::mechanisms::{AvgSpec, CountSpec, FloatSumSpec, IntSumSpec, AVG_SUM_SHARE, DISCRETE_LAPLACE};
use pg_dp_core::noise::rng::seeded_rng;
use pg_dp_core::DpError;
use rand::Rng;

const N_RELEASES: usize = 100_000;

/// Asserts that a reported noise scale is `expected` = sensitivity/ε: never smaller, and larger by at
/// most a few units in the last place (the mechanism may run at an ε a hair below the requested one,
/// and rounding of t/s to f64).
fn assert_scale(scale: f64, expected: f64, what: &str) {
    assert!(scale >= expected, "{what}: scale {scale:e} is below sensitivity/ε = {expected:e}");
    assert!((scale - expected) / expected <= 1e-14, "{what}: scale {scale:e} is not sensitivity/ε = {expected:e}");
}

/// Asserts that the empirical second moment of `d` (mean 0) matches `expected_var` at level alpha.
fn assert_variance(d: &[f64], expected_var: f64, alpha: f64, what: &str) {
    let z = variance_z(d, expected_var);
    let crit = z_two_sided(alpha);
    eprintln!("{what}: variance z = {z:.2} (critical {crit:.2})");
    assert!(z.abs() < crit, "{what}: empirical variance does not match {expected_var:e} (z = {z:.2})");
}

#[test]
fn count_scale_is_one_over_epsilon_and_variance_matches() {
    let cases = [0.1, 0.5, 1.0, 1.0 / 3.0, 2.0];
    let alpha = ALPHA / cases.len() as f64;
    let mut rng = seeded_rng(1000);
    for &eps in &cases {
        let spec = CountSpec::new(eps).unwrap();
        let n = 1000;
        let r = spec.release(&mut rng, n);
        assert_eq!(r.info.mechanism, DISCRETE_LAPLACE);
        assert_eq!(r.info.epsilon, eps);
        assert_eq!(r.info.delta, 0.0);
        assert_eq!(r.info.sensitivity, 1.0);
        assert_scale(r.info.scale, 1.0 / eps, &format!("count at eps {eps}"));
        assert_eq!(r.info.count_scale, None);
        let d: Vec<f64> = (0..N_RELEASES).map(|_| (spec.release(&mut rng, n).value - n) as f64).collect();
        // the discrete Laplace variance 2p/(1-p)², p = exp(-ε), which tends to 2·scale² for small ε
        assert_variance(&d, dlap_variance(r.info.scale), alpha, &format!("count eps {eps}"));
        if eps == 0.1 {
            let two_b2 = 2.0 * r.info.scale * r.info.scale;
            assert!((dlap_variance(r.info.scale) - two_b2).abs() / two_b2 < 1e-3);
            // power: a 10% larger variance is rejected
            assert!(variance_z(&d, 1.1 * dlap_variance(r.info.scale)).abs() > z_two_sided(ALPHA));
        }
    }
}

#[test]
fn int_sum_scale_is_max_abs_bound_over_epsilon_and_variance_matches() {
    let cases: [(i64, i64, f64); 5] =
        [(-5, 3, 0.7), (0, 100, 0.25), (-1000, -10, 2.0), (-7, 7, 1.0 / 3.0), (i64::MIN, i64::MAX, 1.0)];
    let alpha = ALPHA / cases.len() as f64;
    let mut rng = seeded_rng(1100);
    for &(l, u, eps) in &cases {
        let spec = IntSumSpec::new(l, u, eps).unwrap();
        let sens = l.unsigned_abs().max(u.unsigned_abs());
        assert_eq!(spec.sensitivity(), sens as u128);
        let mut acc = Acc::new(Params::int_sum(l, u, eps)).unwrap();
        let mut true_sum: i128 = 0;
        for _ in 0..50 {
            let v: i64 = rng.random_range(-2000..2000);
            acc.add_i64(v).unwrap();
            true_sum += v.clamp(l, u) as i128;
        }
        let acc_sum = acc.sum;
        assert_eq!(acc_sum, true_sum);
        let r = spec.release(&mut rng, acc_sum);
        assert_eq!(r.info.sensitivity, sens as f64);
        assert_scale(r.info.scale, sens as f64 / eps, &format!("int sum [{l}, {u}] at eps {eps}"));
        let d: Vec<f64> = (0..N_RELEASES).map(|_| (spec.release(&mut rng, acc_sum).value - acc_sum) as f64).collect();
        assert_variance(&d, dlap_variance(r.info.scale), alpha, &format!("int sum [{l}, {u}] eps {eps}"));
    }
}

#[test]
fn float_sum_scale_is_max_abs_bound_over_epsilon_and_variance_matches() {
    let cases: [(f64, f64, f64); 5] = [(-1.0, 2.5, 1.3), (0.0, 1e-3, 0.2), (-1e30, 1e30, 1.0), (-0.1, 1.0 / 3.0, 0.05), (-7.0, -3.0, 4.0)];
    let alpha = ALPHA / cases.len() as f64;
    let mut rng = seeded_rng(1200);
    for &(l, u, eps) in &cases {
        let spec = FloatSumSpec::new(l, u, eps).unwrap();
        let g = spec.grid;
        let maxabs = l.abs().max(u.abs());
        // g = floor(log2(max(|l|, |u|))) - 32
        assert_eq!(g.exp, floor_log2(maxabs) - 32);
        let step = g.step();
        let sens = spec.sensitivity_steps();
        assert_eq!(sens, g.q_lower.unsigned_abs().max(g.q_upper.unsigned_abs()) as u128);
        let mut acc = Acc::new(Params::float_sum(l, u, eps)).unwrap();
        for _ in 0..20 {
            acc.add_f64(rng.random_range(2.0 * l - 1.0..2.0 * u + 1.0)).unwrap();
        }
        let sum_q = acc.sum;
        let r = spec.release(&mut rng, sum_q);
        assert_eq!(r.info.sensitivity, sens as f64 * step);
        assert_scale(r.info.scale, sens as f64 / eps * step, &format!("float sum [{l:e}, {u:e}] at eps {eps}"));
        let rel = |a: f64, b: f64| ((a - b) / b).abs();
        assert!(rel(r.info.sensitivity, maxabs) <= pow2(-30), "sensitivity {} vs {maxabs}", r.info.sensitivity);
        assert!(rel(r.info.scale, maxabs / eps) <= pow2(-30), "scale {} vs {}", r.info.scale, maxabs / eps);
        // noise in grid steps; at 2^32 steps the discrete variance equals 2·scale² to 1e-12
        let b = r.info.scale / step;
        assert!(rel(dlap_variance(b), 2.0 * b * b) < 1e-12);
        let d: Vec<f64> = (0..N_RELEASES).map(|_| spec.release(&mut rng, sum_q).value / step - sum_q as f64).collect();
        assert_variance(&d, 2.0 * b * b, alpha, &format!("float sum [{l:e}, {u:e}] eps {eps}"));
    }
}

#[test]
fn avg_splits_epsilon_and_noise_variance_matches() {
    let eps = 1.0;
    let mut rng = seeded_rng(1300);
    let spec = AvgSpec::new(-1.0, 1.0, eps).unwrap();
    let g = spec.grid;
    let step = g.step();
    assert_eq!(spec.center, 0);
    let (e_sum, e_cnt) = spec.split();
    assert_eq!(AVG_SUM_SHARE, 0.7);
    assert!(e_sum <= 0.7 * eps && e_sum >= 0.7 * eps * (1.0 - 1e-14), "sum share {e_sum}");
    assert!(e_cnt <= 0.3 * eps && e_cnt >= 0.3 * eps * (1.0 - 1e-14), "count share {e_cnt}");
    assert!(e_sum + e_cnt <= eps);
    // the shares never add up to more than ε, for any ε
    let mut rng2 = seeded_rng(1301);
    for _ in 0..100_000 {
        let e = (rng2.random_range(-9.0f64..6.0) * std::f64::consts::LN_10).exp();
        let (a, b) = AvgSpec::new(-1.0, 1.0, e).unwrap().split();
        assert!(a > 0.0 && b > 0.0 && a + b <= e, "split of {e:e}: {a:e} + {b:e}");
    }
    let sens = spec.sensitivity_steps();
    // half-width sensitivity: (upper - lower)/2 in grid steps
    assert_eq!(sens as f64 * step, 1.0);
    let r = spec.release(&mut rng, 0, 10);
    assert_eq!(r.info.epsilon, eps);
    assert_eq!(r.info.sensitivity, sens as f64 * step);
    assert_scale(r.info.scale, sens as f64 / e_sum * step, "avg sum part");
    assert_scale(r.info.scale, 1.0 / (0.7 * eps), "avg sum part vs half-width/(0.7 ε)");
    assert_scale(r.info.count_scale.unwrap(), 1.0 / e_cnt, "avg count part");
    assert!((r.info.count_scale.unwrap() * 0.3 * eps - 1.0).abs() < 1e-14, "avg count part vs 1/(0.3 ε)");
    let b_sum = r.info.scale / step; // in grid steps
    let b_cnt = r.info.count_scale.unwrap();

    // (1) mean at the centre (r = 0), n = 2^20: value ≈ step·Z_sum/n, so n·value/step measures the
    //     sum noise alone (the count noise enters at relative order Var(Z_cnt)/n² ≈ 2e-11).
    let n: i64 = 1 << 20;
    let d: Vec<f64> = (0..N_RELEASES).map(|_| spec.release(&mut rng, 0, n).value * n as f64 / step).collect();
    assert_variance(&d, dlap_variance(b_sum), ALPHA / 2.0, "avg sum part (mean at centre)");

    // (2) all n = 1000 values at 0.5 (r = 0.5): by the delta method
    //     value - 0.5 ≈ (step·Z_sum - 0.5·Z_cnt)/n, variance (step²·V_sum + 0.25·V_cnt)/n².
    let n: i64 = 1000;
    let q = spec.quantize(0.5).unwrap();
    let sum_q = n as i128 * q as i128;
    let mean = q as f64 * step;
    let expected = (step * step * dlap_variance(b_sum) + mean * mean * dlap_variance(b_cnt)) / (n * n) as f64;
    let d: Vec<f64> = (0..N_RELEASES).map(|_| spec.release(&mut rng, sum_q, n).value - mean).collect();
    assert_variance(&d, expected, ALPHA / 2.0, "avg sum and count parts (r = 0.5)");
}

#[test]
fn float_sum_outputs_lie_on_the_grid() {
    let mut rng = seeded_rng(1400);
    let bounds = [
        (0.0, 1.0),
        (-0.1, 0.1),
        (-1.0 / 3.0, 1.0 / 3.0),
        (0.1, 0.7),
        (-1e30, 1e30),
        (-1e-300, 1e-300),
        (-3.0, 1e10),
        (-12345.678, -0.001),
        (0.0, 0.0),
    ];
    let inputs = [0.1, 1.0 / 3.0, -0.7, 0.2, 1e-20, 12345.678, f64::INFINITY, f64::NEG_INFINITY, 2.0f64.sqrt(), -0.0];
    let mut checked = 0;
    for &(l, u) in &bounds {
        for eps in [0.01, 1.0, 1e6] {
            let spec = FloatSumSpec::new(l, u, eps).unwrap();
            let (exp, step) = (spec.grid.exp, spec.grid.step());
            for k in 0..50 {
                let mut acc = Acc::new(Params::float_sum(l, u, eps)).unwrap();
                for _ in 0..k {
                    let x = if rng.random::<bool>() { inputs[rng.random_range(0..inputs.len())] } else { rng.random_range(-1e3..1e3) };
                    acc.add_f64(x).unwrap();
                }
                let v = spec.release(&mut rng, acc.sum).value;
                assert!(v.is_finite());
                // v / 2^exp is an exact integer: nothing below the grid carries information
                let m = v * pow2(-exp);
                assert_eq!(m.fract(), 0.0, "{v:e} is not on the grid 2^{exp} for [{l}, {u}]");
                assert_eq!(m * step, v);
                assert_eq!(v % step, 0.0);
                checked += 1;
            }
        }
    }
    assert_eq!(checked, bounds.len() * 3 * 50);
}

#[test]
fn grid_quantization_is_nearest_and_monotone() {
    // q(x) is the nearest grid integer to clamp(x), and q is monotone: the two facts the exactness and
    // the sensitivity arguments rest on (docs/privacy/sum.md, avg.md)
    let mut rng = seeded_rng(1450);
    for (l, u) in [(-1.0, 2.5), (0.0, 1e-3), (-1e30, 1e30), (1e6, 1e6 + 1.0), (-0.1, 1.0 / 3.0), (-1e-300, 1e-300)] {
        for spec_grid in [FloatSumSpec::new(l, u, 1.0).unwrap().grid, AvgSpec::new(l, u, 1.0).unwrap().grid] {
            let step = spec_grid.step();
            let mut xs: Vec<f64> = (0..20_000).map(|_| rng.random_range(l..=u)).collect();
            xs.extend([l, u, 0.5 * (l + u), l.next_up(), u.next_down()]);
            xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let mut prev = i64::MIN;
            for &x in &xs {
                let q = spec_grid.quantize(x, "value").unwrap();
                // |q·2^g - x| <= 2^g / 2, computed exactly enough: both terms are within 2^62 steps
                let err = (q as f64 - x / step).abs();
                assert!(err <= 0.5, "q({x:e}) = {q} is not the nearest grid point (error {err} steps)");
                assert!(q >= prev, "quantization is not monotone at {x:e}");
                assert!(q >= spec_grid.q_lower && q <= spec_grid.q_upper);
                prev = q;
            }
        }
    }
}

/// The exact state of an accumulator: (integer sum, sum of squared deviations, row count).
fn acc_sum(acc: &Acc) -> (i128, i128, i64) {
    (acc.sum, acc.sum_sq, acc.n)
}

#[test]
fn exact_accumulation_is_order_and_partition_independent() {
    let mut rng = seeded_rng(1500);
    let mut data = vec![1e16, 1.0, -1e16, 0.1, 0.2, 0.3, 1.0 / 3.0, -0.7, 2f64.powi(-30), 1e-300, 12345.678, -1e16, 1e16, 3.0, -2.5];
    for _ in 0..500 {
        data.push(match rng.random_range(0..4) {
            0 => rng.random_range(-1e16..1e16),
            1 => rng.random_range(-1.0..1.0),
            2 => 1e16 * if rng.random::<bool>() { 1.0 } else { -1.0 },
            _ => rng.random_range(-1e3..1e3),
        });
    }
    let all_params = [
        Params::float_sum(-1e16, 1e16, 1.0),
        Params::float_sum(-2.0, 2.0, 0.5),
        Params::avg(-1e16, 1e16, 1.0),
        Params::avg(-1.0, 3.0, 2.0),
        Params::int_sum(-1000, 1000, 1.0),
        Params::variance(-1e16, 1e16, 1.0),
        Params::stddev(-1.0, 3.0, 2.0),
    ];
    let mut naive_sums = std::collections::HashSet::new();
    for params in all_params {
        let mut reference = Acc::new(params).unwrap();
        for &x in &data {
            reference.add_f64(x).unwrap();
        }
        // the reference equals the i128 sum of the per-row grid integers
        let independent: i128 = data
            .iter()
            .map(|&x| match reference.spec {
                Spec::FloatSum(s) => s.quantize(x).unwrap() as i128,
                Spec::Avg(s) => s.quantize(x).unwrap() as i128,
                Spec::IntSum(s) => s.clamp(x as i64) as i128,
                Spec::Count(_) => 0,
                Spec::Variance(s) => s.quantize(x).unwrap() as i128,
            })
            .sum();
        // and, for dp_variance/dp_stddev, the sum of squares is that of the centred integers
        let squares: i128 = match reference.spec {
            Spec::Variance(s) => data.iter().map(|&x| (s.quantize(x).unwrap() as i128 - s.center as i128).pow(2)).sum(),
            _ => 0,
        };
        assert_eq!(acc_sum(&reference), (independent, squares, data.len() as i64));
        for _ in 0..40 {
            let mut shuffled = data.clone();
            shuffle(&mut rng, &mut shuffled);
            naive_sums.insert(shuffled.iter().sum::<f64>().to_bits());
            // one pass in shuffled order
            let mut acc = Acc::new(params).unwrap();
            for &x in &shuffled {
                acc.add_f64(x).unwrap();
            }
            assert_eq!(acc_sum(&acc), acc_sum(&reference));
            // random partition into partial states, shipped as bytes and merged in random order
            let parts = rng.random_range(1..8);
            let mut partial: Vec<Acc> = (0..parts).map(|_| Acc::new(params).unwrap()).collect();
            for &x in &shuffled {
                let i = rng.random_range(0..parts);
                partial[i].add_f64(x).unwrap();
            }
            let mut bytes: Vec<[u8; ACC_BYTES]> = partial.iter().map(|a| a.to_bytes()).collect();
            shuffle(&mut rng, &mut bytes);
            let mut merged = Acc::from_bytes(&bytes[0]).unwrap();
            for b in &bytes[1..] {
                merged.merge(&Acc::from_bytes(b).unwrap()).unwrap();
            }
            assert_eq!(acc_sum(&merged), acc_sum(&reference));
            assert!(merged == reference, "merged state differs from the sequential one");
        }
    }
    // the same data summed naively in f64 gives order-dependent results
    assert!(naive_sums.len() > 1, "naive f64 sums happened to agree");
    let (a, b) = ([1e16, 1.0, -1e16].iter().sum::<f64>(), [1e16, -1e16, 1.0].iter().sum::<f64>());
    assert_ne!(a, b);
    eprintln!("naive f64 summation gave {} distinct results over the shuffles", naive_sums.len());
}

#[test]
fn clamping_infinities_and_nan() {
    // integer sums: clamp every value, including values given as floats
    let mut acc = Acc::new(Params::int_sum(-10, 10, 1.0)).unwrap();
    for v in [i64::MAX, i64::MIN, 5, -3] {
        acc.add_i64(v).unwrap();
    }
    for x in [1e300, f64::NEG_INFINITY, f64::INFINITY, 2.9] {
        acc.add_f64(x).unwrap();
    }
    assert_eq!(acc_sum(&acc), (10 - 10 + 5 - 3 + 10 - 10 + 10 + 2, 0, 8));
    assert_eq!(acc.add_f64(f64::NAN), Ok(()), "a NaN value is skipped like NULL, never an error");
    assert_eq!(acc_sum(&acc), (14, 0, 8), "a NaN row must not change the state");

    for params in [Params::float_sum(-2.5, 4.0, 1.0), Params::avg(-2.5, 4.0, 1.0)] {
        let mut acc = Acc::new(params).unwrap();
        let (q_lower, q_upper) = match acc.spec {
            Spec::FloatSum(s) => (s.grid.q_lower, s.grid.q_upper),
            Spec::Avg(s) => (s.grid.q_lower, s.grid.q_upper),
            _ => unreachable!(),
        };
        let cases = [
            (f64::INFINITY, q_upper),
            (f64::NEG_INFINITY, q_lower),
            (1e308, q_upper),
            (-1e308, q_lower),
            (4.0000001, q_upper),
            (-2.5000001, q_lower),
            (4.0, q_upper),
            (-2.5, q_lower),
        ];
        for (x, q) in cases {
            let before = acc.sum;
            acc.add_f64(x).unwrap();
            assert_eq!(acc.sum - before, q as i128, "{x} must clamp to grid integer {q}");
        }
        let state = acc_sum(&acc);
        assert_eq!(acc.add_f64(f64::NAN), Ok(()), "a NaN value is skipped like NULL, never an error");
        assert_eq!(acc_sum(&acc), state, "a NaN row must not change the state");
        assert!(!acc.try_add_f64(f64::NAN), "the fast path leaves NaN to the slow path");
        assert_eq!(acc_sum(&acc), state);
    }
}

/// Asserts an InvalidParameter error naming `arg` whose message names it and contains `range`.
fn assert_invalid<T: std::fmt::Debug>(r: Result<T, DpError>, arg: &str, range: &str) {
    match r {
        Err(e @ DpError::InvalidParameter { .. }) => {
            let DpError::InvalidParameter { arg: a, .. } = &e else { unreachable!() };
            assert_eq!(*a, arg, "wrong argument named in {e}");
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("{arg} must be")), "message does not start with the argument: {msg}");
            assert!(msg.contains(range), "message does not state the range {range:?}: {msg}");
            assert!(msg.contains(", got "), "message does not show the value: {msg}");
        }
        other => panic!("expected InvalidParameter({arg}), got {other:?}"),
    }
}

#[test]
fn invalid_parameters_are_named() {
    let eps_range = "between 1e-9 and 1e6";
    let bad_eps = [0.0, -1.0, -0.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e6f64.next_up(), 1e-9f64.next_down(), 2e6, 1e-10];
    for &e in &bad_eps {
        assert_invalid(CountSpec::new(e), "epsilon", eps_range);
        assert_invalid(IntSumSpec::new(0, 1, e), "epsilon", eps_range);
        assert_invalid(FloatSumSpec::new(0.0, 1.0, e), "epsilon", eps_range);
        assert_invalid(AvgSpec::new(0.0, 1.0, e), "epsilon", eps_range);
        assert_invalid(Acc::new(Params::count(e)), "epsilon", eps_range);
        assert_invalid(analytic_sigma(e, 1e-6, 1.0), "epsilon", eps_range);
    }
    for e in [1e-9, 1e6] {
        assert!(CountSpec::new(e).is_ok() && FloatSumSpec::new(-1.0, 1.0, e).is_ok() && AvgSpec::new(-1.0, 1.0, e).is_ok());
    }
    assert!(CountSpec::new(0.0).unwrap_err().to_string().contains("got 0"));
    assert!(CountSpec::new(f64::NAN).unwrap_err().to_string().contains("got NaN"));

    // lower > upper
    let order = "less than or equal to upper";
    assert_invalid(IntSumSpec::new(5, 4, 1.0), "lower", order);
    assert_invalid(FloatSumSpec::new(1.0, 0.0, 1.0), "lower", order);
    assert_invalid(AvgSpec::new(-1.0, -2.0, 1.0), "lower", order);
    assert_invalid(Acc::new(Params::int_sum(1, 0, 1.0)), "lower", order);
    assert!(IntSumSpec::new(4, 4, 1.0).is_ok() && FloatSumSpec::new(0.5, 0.5, 1.0).is_ok());

    // bounds of real sums and averages: finite, |bound| <= 1e30
    let bound_range = "a finite number between -1e30 and 1e30";
    let too_big = 1e30f64.next_up();
    for (l, u, arg) in [
        (-too_big, 0.0, "lower"),
        (0.0, too_big, "upper"),
        (-2e30, 2e30, "lower"),
        (f64::NAN, 1.0, "lower"),
        (0.0, f64::NAN, "upper"),
        (f64::NEG_INFINITY, 1.0, "lower"),
        (0.0, f64::INFINITY, "upper"),
    ] {
        assert_invalid(FloatSumSpec::new(l, u, 1.0), arg, bound_range);
        assert_invalid(AvgSpec::new(l, u, 1.0), arg, bound_range);
        assert_invalid(Acc::new(Params::avg(l, u, 1.0)), arg, bound_range);
    }
    assert!(FloatSumSpec::new(-1e30, 1e30, 1.0).is_ok() && AvgSpec::new(-1e30, 1e30, 1.0).is_ok());

    // delta of the Gaussian mechanism
    for d in [0.0, -1e-9, 1.0, 2.0, f64::NAN, f64::INFINITY] {
        assert_invalid(analytic_sigma(1.0, d, 1.0), "delta", "greater than 0 and less than 1");
    }
}

#[test]
fn avg_result_within_bounds() {
    let mut rng = seeded_rng(1600);
    let bounds = [(0.0, 1.0), (-1e30, 1e30), (5.0, 5.000001), (-3.0, -2.0), (0.0, 1e-300), (-1.0, 1e6), (1e29, 1e30)];
    let mut count = 0;
    for &(l, u) in &bounds {
        for eps in [1e-9, 1e-3, 1.0, 1e6] {
            let spec = AvgSpec::new(l, u, eps).unwrap();
            for n in [0usize, 1, 2, 5, 100] {
                let mut acc = Acc::new(Params::avg(l, u, eps)).unwrap();
                for _ in 0..n {
                    let x = match rng.random_range(0..4) {
                        0 => f64::INFINITY,
                        1 => f64::NEG_INFINITY,
                        2 => rng.random_range(l..=u),
                        _ => rng.random_range(-1e31..1e31),
                    };
                    acc.add_f64(x).unwrap();
                }
                for _ in 0..40 {
                    let v = spec.release(&mut rng, acc.sum, acc.n).value;
                    assert!(v >= l && v <= u, "dp_avg on [{l}, {u}] at eps {eps}, n = {n} released {v}");
                    count += 1;
                }
            }
        }
    }
    assert_eq!(count, bounds.len() * 4 * 5 * 40);
}

#[test]
fn avg_empty_input_and_degenerate_bounds() {
    let mut rng = seeded_rng(1700);
    // n = 0 still releases a value (noise), within the bounds
    let spec = AvgSpec::new(-2.0, 7.0, 0.5).unwrap();
    let vals: Vec<f64> = (0..10_000).map(|_| spec.release(&mut rng, 0, 0).value).collect();
    assert!(vals.iter().all(|v| (-2.0..=7.0).contains(v)));
    assert!(vals.iter().any(|&v| v != vals[0]), "an empty release should still be random");
    // lower == upper: that value, whatever the data
    for x in [3.25, 0.1, -7.3, 0.0, 1e30, -1e30, 1.0 / 3.0, f64::from_bits(1)] {
        let spec = AvgSpec::new(x, x, 1.0).unwrap();
        for (sum, n) in [(0i128, 0i64), (12345, 3), (-999_999_999, 1_000_000)] {
            let r = spec.release(&mut rng, sum, n);
            assert_eq!(r.value, x, "dp_avg with lower = upper = {x:e}");
            assert_eq!(r.info.scale, 0.0);
        }
    }
}

#[test]
fn avg_is_nearly_unbiased_for_large_n() {
    let mut rng = seeded_rng(1800);
    let (l, u, eps) = (0.0, 10.0, 1.0);
    let spec = AvgSpec::new(l, u, eps).unwrap();
    let mut acc = Acc::new(Params::avg(l, u, eps)).unwrap();
    for _ in 0..20_000 {
        // skewed data with mean away from the centre
        let x: f64 = rng.random::<f64>();
        acc.add_f64(10.0 * x * x).unwrap();
    }
    let (sum_q, n) = (acc.sum, acc.n);
    let true_mean = sum_q as f64 * spec.grid.step() / n as f64;
    let releases = 2000;
    let v: Vec<f64> = (0..releases).map(|_| spec.release(&mut rng, sum_q, n).value).collect();
    let m = v.iter().sum::<f64>() / releases as f64;
    let sd = (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (releases - 1) as f64).sqrt();
    let se = sd / (releases as f64).sqrt();
    let z = (m - true_mean) / se;
    eprintln!("dp_avg: true mean {true_mean}, mean of releases {m}, z = {z:.2}");
    assert!(z.abs() < z_two_sided(ALPHA), "dp_avg is biased: mean {m} vs {true_mean} (z = {z:.2})");
    assert!((m - true_mean).abs() < 1e-3);
}

#[test]
fn acc_from_bytes_rejects_corrupt_states() {
    let all_params = [
        Params::count(0.5),
        Params::int_sum(-3, 9, 1.0),
        Params::float_sum(-1.5, 2.0, 2.0),
        Params::avg(0.0, 1.0, 0.25),
        Params::variance(0.0, 10.0, 0.5),
        Params::stddev(-1.0, 1.0, 3.0),
    ];
    for params in all_params {
        let mut acc = Acc::new(params).unwrap();
        for x in [0.5, 7.0, -1.0] {
            acc.add_f64(x).unwrap();
        }
        let bytes = acc.to_bytes();
        assert_eq!(bytes.len(), ACC_BYTES);
        assert!(Acc::from_bytes(&bytes).unwrap() == acc, "roundtrip changed the state");

        let corrupt = |r: Result<Acc, DpError>, what: &str| match r {
            Err(DpError::CorruptState(msg)) => assert!(msg.contains(what), "{msg}"),
            other => panic!("expected CorruptState({what}), got {other:?}"),
        };
        corrupt(Acc::from_bytes(&bytes[..ACC_BYTES - 1]), "bytes");
        corrupt(Acc::from_bytes(&[]), "bytes");
        let mut longer = bytes.to_vec();
        longer.push(0);
        corrupt(Acc::from_bytes(&longer), "bytes");
        for kind in [6u8, 7, 255] {
            let mut b = bytes;
            b[0] = kind;
            corrupt(Acc::from_bytes(&b), "unknown kind");
        }
        let mut b = bytes;
        b[57..65].copy_from_slice(&(-1i64).to_le_bytes());
        corrupt(Acc::from_bytes(&b), "negative row count");
        let mut b = bytes;
        b[57..65].copy_from_slice(&i64::MIN.to_le_bytes());
        corrupt(Acc::from_bytes(&b), "negative row count");
        // a sum of squares is never negative, and only dp_variance/dp_stddev states hold one
        let mut b = bytes;
        b[41..57].copy_from_slice(&(if matches!(acc.spec, Spec::Variance(_)) { -1i128 } else { 1 }).to_le_bytes());
        corrupt(Acc::from_bytes(&b), "sum of squares");
        // invalid parameters inside a state are re-validated
        let mut b = bytes;
        b[17..25].copy_from_slice(&0f64.to_bits().to_le_bytes());
        assert!(matches!(Acc::from_bytes(&b), Err(DpError::InvalidParameter { arg: "epsilon", .. })));
    }
}

#[test]
fn acc_merge_with_different_params_is_an_error() {
    let base = Params::float_sum(-1.0, 1.0, 1.0);
    let mut acc = Acc::new(base).unwrap();
    acc.add_f64(0.5).unwrap();
    let state = acc;
    for (other, arg) in [
        (Params::float_sum(-1.0, 1.0, 0.5), "epsilon"),
        (Params::float_sum(-2.0, 1.0, 1.0), "lower"),
        (Params::float_sum(-1.0, 2.0, 1.0), "upper"),
        (Params::float_sum(-1.0, 1.0, 1.0f64.next_up()), "epsilon"),
    ] {
        let mut o = Acc::new(other).unwrap();
        o.add_f64(0.25).unwrap();
        assert_eq!(acc.merge(&o), Err(DpError::ParameterChanged { arg }));
        assert_eq!(acc.check(&other), Err(DpError::ParameterChanged { arg }));
        assert!(acc == state, "a failed merge changed the state");
    }
    // a state of another aggregate (same numbers, other kind) is refused too
    let o = Acc::new(Params::avg(-1.0, 1.0, 1.0)).unwrap();
    assert!(matches!(acc.merge(&o), Err(DpError::ParameterChanged { .. })));
    assert!(acc == state);
    // equal parameters merge
    let mut o = Acc::new(base).unwrap();
    o.add_f64(0.25).unwrap();
    acc.merge(&o).unwrap();
    assert_eq!(acc.n, 2);
}

/// δ(ε) of N(0, σ²) against N(Δ, σ²) by direct numerical integration of
/// ∫ max(0, p(x) - e^ε q(x)) dx (Simpson's rule), independent of the closed form.
fn gaussian_delta_numeric(eps: f64, sens: f64, sigma: f64) -> f64 {
    let pdf = |x: f64, mu: f64| (-(x - mu).powi(2) / (2.0 * sigma * sigma)).exp() / (sigma * (2.0 * std::f64::consts::PI).sqrt());
    // p(x) > e^ε q(x) exactly for x < x*
    let x_star = sens / 2.0 - eps * sigma * sigma / sens;
    let f = |x: f64| (pdf(x, 0.0) - eps.exp() * pdf(x, sens)).max(0.0);
    let (a, b) = (x_star - 40.0 * sigma, x_star);
    let n = 400_000;
    let h = (b - a) / n as f64;
    let mut s = f(a) + f(b);
    for i in 1..n {
        s += f(a + i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    s * h / 3.0
}

#[test]
fn gaussian_analytic_sigma_is_valid_and_tight() {
    for eps in [0.05, 0.1, 0.5, 1.0, 2.0, 5.0] {
        for delta in [1e-3, 1e-5, 1e-7, 1e-10] {
            for sens in [1.0, 0.37, 1000.0] {
                let sigma = analytic_sigma(eps, delta, sens).unwrap();
                assert!(gaussian_delta(eps, sens, sigma) <= delta, "σ = {sigma} does not achieve δ = {delta} at ε = {eps}");
                let smaller = sigma * (1.0 - 1e-9);
                assert!(gaussian_delta(eps, sens, smaller) > delta, "σ = {sigma} is not tight at ε = {eps}, δ = {delta}");
            }
            // the closed form agrees with direct integration of the privacy-loss tail
            let sigma = analytic_sigma(eps, delta, 1.0).unwrap();
            let closed = gaussian_delta(eps, 1.0, sigma);
            let numeric = gaussian_delta_numeric(eps, 1.0, sigma);
            assert!(((closed - numeric) / numeric).abs() < 1e-6, "ε = {eps}, δ = {delta}: closed form {closed:e} vs integral {numeric:e}");
        }
    }
}

#[test]
fn gaussian_sigma_is_linear_in_sensitivity_and_beats_the_classical_bound() {
    for eps in [0.1, 0.5, 0.9, 3.0] {
        for delta in [1e-5, 1e-8] {
            let unit = analytic_sigma(eps, delta, 1.0).unwrap();
            for sens in [1e-3, 0.5, 3.0, 1000.0, 1e6] {
                let s = analytic_sigma(eps, delta, sens).unwrap();
                assert!((s / sens / unit - 1.0).abs() < 1e-10, "σ not linear in Δ: {s} for Δ = {sens} vs {unit}");
            }
            if eps < 1.0 {
                let classic = (2.0 * (1.25 / delta).ln()).sqrt() / eps;
                assert!(unit < classic, "analytic {unit} >= classical {classic} at ε = {eps}, δ = {delta}");
                // and the classical σ is itself valid
                assert!(gaussian_delta(eps, 1.0, classic) <= delta);
                eprintln!("ε = {eps}, δ = {delta:e}: analytic σ = {unit:.4}, classical σ = {classic:.4}");
            }
        }
    }
}

#[test]
fn gaussian_sample_on_grid_matches_sigma_and_lies_on_grid() {
    let sigmas = [1e-3, 3.7, 1000.0, 12345.678, 2f64.powi(20) + 2f64.powi(-16)];
    let alpha = ALPHA / sigmas.len() as f64;
    let mut rng = seeded_rng(1900);
    for &sigma in &sigmas {
        let n = 40_000;
        let mut d = Vec::with_capacity(n);
        for _ in 0..n {
            let (x, g) = sample_on_grid(&mut rng, sigma);
            assert_eq!(g, floor_log2(sigma) - 20);
            let m = x * pow2(-g);
            assert_eq!(m.fract(), 0.0, "{x:e} is not a multiple of 2^{g}");
            d.push(x / sigma);
        }
        // normalized noise has variance 1 (σ² is rounded up by less than one grid step²)
        assert_variance(&d, 1.0, alpha, &format!("sample_on_grid σ = {sigma}"));
    }
}

// dp.exact_grid (the exact query of a DP level over Citus) sums `Acc::row_f64`/`row_i64` per row; the
// coordinator rebuilds the state from those sums. They must be exactly what adding the row changes.
#[test]
fn a_rows_grid_value_is_exactly_what_adding_it_changes() {
    let bounds: [(f64, f64); 6] = [(0.0, 100.0), (-100.0, 100.0), (900.0, 1000.0), (-1e30, 1e30), (-5.5, -0.25), (0.0, 0.0)];
    let mut values: Vec<f64> = vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, 1e-300, -1e-300, f64::MAX, f64::MIN, 5e-324];
    let mut rng = seeded_rng(7);
    for _ in 0..2000 {
        values.push(f64::from_bits(rng.random::<u64>()));
        values.push(rng.random_range(-2000.0..2000.0));
    }
    for (l, u) in bounds {
        values.extend([l, u, l - 1.0, u + 1.0, (l + u) / 2.0]);
        for p in [Params::float_sum(l, u, 1.0), Params::avg(l, u, 0.5), Params::variance(l, u, 1.0), Params::stddev(l, u, 1.0)] {
            let empty = Acc::new(p).unwrap();
            for &v in &values {
                let mut acc = empty;
                acc.add_f64(v).unwrap();
                let (sum, sum_sq, n) = (acc.sum, acc.sum_sq, acc.n);
                match (empty.row_f64(v, false), empty.row_f64(v, true)) {
                    (None, None) => assert!(v.is_nan() && n == 0, "{v} {l} {u}"),
                    (Some(q), Some(q2)) => assert_eq!((sum, sum_sq, n), (q as i128, q2 as i128, 1), "{v} in [{l}, {u}], kind {}", p.kind),
                    other => panic!("{other:?}"),
                }
            }
        }
    }
    for (l, u) in [(0i64, 100i64), (-7, 3), (i64::MIN, i64::MAX), (5, 5)] {
        let empty = Acc::new(Params::int_sum(l, u, 1.0)).unwrap();
        for v in [0i64, 1, -1, 4, 6, 101, -8, i64::MIN, i64::MAX, 1 << 40] {
            let mut acc = empty;
            acc.add_i64(v).unwrap();
            let (sum, n) = (acc.sum, acc.n);
            assert_eq!((sum, n), (empty.row_i64(v, false).unwrap() as i128, 1), "{v} in [{l}, {u}]");
            assert_eq!(empty.row_i64(v, true), Some(0));
        }
    }
}

// dp_avg puts values on dp_sum's grid when the bounds hold 0 (one grid value per row serves both in the
// exact query over Citus), and never on a grid coarser than 2^32 steps across the bound width.
#[test]
fn dp_avg_shares_dp_sums_grid_when_the_bounds_hold_zero() {
    use pg_dp_core::mechanisms::{avg_grid, sum_grid};
    for (l, u) in [(0.0, 100.0), (-100.0, 100.0), (-1.0, 1e6), (0.0, 1e30), (-3.5, 0.0), (-1e-300, 1e-300)] {
        let (a, s) = (avg_grid(l, u), sum_grid(l, u));
        assert_eq!((a.exp, a.q_lower, a.q_upper), (s.exp, s.q_lower, s.q_upper), "[{l}, {u}]");
        assert_eq!(AvgSpec::new(l, u, 1.0).unwrap().grid.exp, FloatSumSpec::new(l, u, 1.0).unwrap().grid.exp);
    }
    for (l, u) in [(1e9, 1e9 + 10.0), (900.0, 1000.0), (-2000.0, -1990.0), (1.0, 1.0 + 1e-6)] {
        let (a, s) = (avg_grid(l, u), sum_grid(l, u));
        let steps = a.q_upper as i128 - a.q_lower as i128;
        assert!(steps >= 1i128 << 32, "[{l}, {u}]: {steps} steps");
        assert!(a.exp <= s.exp, "[{l}, {u}]");
    }
    // a negative control: dp_sum's grid alone leaves a narrow range far from 0 a few steps wide
    let s = sum_grid(1e9, 1e9 + 10.0);
    assert!(s.q_upper - s.q_lower < 1 << 8);
}
