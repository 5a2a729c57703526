//! Accuracy of dp_variance against the alternatives it was chosen over, on one data set:
//!
//!   cargo run --release -p pg_dp_core --example variance_accuracy -- FILE.csv LOWER UPPER LABEL [--reps R] [--seed S]
//!
//! FILE.csv holds one numeric column (a non-numeric first line is a header), e.g. the files that
//! bench/quantile_accuracy.sh writes to target/accuracy/. For ε ∈ {0.1, 0.5, 1, 2} each method is run
//! R times (default 2000) with fixed seeds, and the root mean squared error of the released sample
//! variance is printed relative to the true sample variance of the clamped data. Every method uses
//! the same grid, centre, exact statistics, exact discrete Laplace noise, estimator and clamp
//! ([`VarianceSpec::estimate`]); they differ in the third statistic and the split of ε:
//! - textbook: ε/3 each on the count, Σ(x − c) (sensitivity H) and the uncentred Σ(x − c)²
//!   (sensitivity H²), separate accounting;
//! - centred squares: ε/3 each, the squares shifted by H²/2 (sensitivity H²/2);
//! - centred, best split: the same with the split 0.328/0.372/0.300 that minimises the geometric mean
//!   of the delta-method variance over typical data (docs/privacy/variance.md);
//! - pg_dp: `VarianceSpec` (shift 0.7·H², joint accounting of the three statistics per row).
//! Seeds make the numbers reproducible; a seeded release is of course not private.
mod shared;

use pg_dp_core::mechanisms::VarianceSpec;
use pg_dp_core::noise::rng::{seeded_rng, DpRng};
use pg_dp_core::noise::sampling::{discrete_laplace, laplace_scale};

const EPSILONS: [f64; 4] = [0.1, 0.5, 1.0, 2.0];

/// A separately accounted alternative: shift κ (fraction of H²) and the shares of ε.
struct Alt {
    kappa: f64,
    shares: (f64, f64, f64),
}

impl Alt {
    fn release(&self, spec: &VarianceSpec, rng: &mut DpRng, (s1, s2, n): (i128, i128, i128), eps: f64) -> f64 {
        let h = spec.half as u128;
        let kappa = (self.kappa * (h * h) as f64).round() as u64;
        let sens2 = (kappa as u128).max(h * h - kappa as u128);
        let (t0, d0) = laplace_scale(1, eps * self.shares.0);
        let (t1, d1) = laplace_scale(h, eps * self.shares.1);
        let (t2, d2) = laplace_scale(sens2, eps * self.shares.2);
        let noisy_n = n + discrete_laplace(rng, t0, d0);
        let noisy_s1 = s1 + discrete_laplace(rng, t1, d1);
        let noisy_t = s2 - n * kappa as i128 + discrete_laplace(rng, t2, d2);
        VarianceSpec { kappa, ..*spec }.estimate(noisy_n, noisy_s1, noisy_t)
    }
}

fn fmt(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn main() {
    let shared::Args { path, lower, upper, label, reps, seed } = shared::parse_args("variance_accuracy", 2000, 20240607);
    let data: Vec<f64> = shared::read_column(&path).into_iter().map(|v| v.clamp(lower, upper)).collect();
    let n = data.len();
    let mean = data.iter().sum::<f64>() / n as f64;
    let truth = data.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1) as f64;
    let half = (upper - lower) / 2.0;
    println!(
        "**{}**: n = {n}, bounds [{}, {}], sample variance {truth:.4e} (sd {:.4e}; mean {:+.2} half-widths from the centre); RMSE / true variance, {reps} releases per cell\n",
        label, lower, upper, truth.sqrt(), (mean - (lower + upper) / 2.0) / half
    );
    println!("| ε | textbook (thirds, uncentred squares) | centred squares, thirds | centred, best split | pg_dp (joint) |");
    println!("|---:|---:|---:|---:|---:|");
    let alts = [
        Alt { kappa: 0.0, shares: (1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0) },
        Alt { kappa: 0.5, shares: (1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0) },
        Alt { kappa: 0.5, shares: (0.328, 0.372, 0.300) },
    ];
    for (ei, &eps) in EPSILONS.iter().enumerate() {
        let spec = VarianceSpec::new(lower, upper, eps, false).unwrap();
        let step = spec.grid.step();
        let (mut s, mut s2) = (0i128, 0i128);
        for &x in &data {
            let q = spec.quantize(x).unwrap() as i128;
            s += q;
            s2 += (q - spec.center as i128).pow(2);
        }
        let stats = (s - n as i128 * spec.center as i128, s2, n as i128);
        let mut cells = Vec::new();
        for mi in 0..4 {
            let mut rng = seeded_rng(seed ^ ((ei as u64) << 16 | mi as u64));
            let mse = (0..reps)
                .map(|_| {
                    let v = if mi < 3 {
                        // the separately accounted alternatives run at the same ε as the mechanism
                        alts[mi].release(&spec, &mut rng, stats, eps * (1.0 - 1e-12))
                    } else {
                        spec.release(&mut rng, s, s2, n as i64).value
                    };
                    (v - truth).powi(2)
                })
                .sum::<f64>()
                / reps as f64;
            cells.push(format!("{}%", fmt(100.0 * mse.sqrt() / truth)));
        }
        let _ = step;
        println!("| {eps} | {} |", cells.join(" | "));
    }
    println!();
}
