//! Automatic bounds against explicit ones, at the same total ε: the accuracy benchmark of
//! docs/privacy/automatic-bounds.md ("Against explicit bounds").
//!
//!   cargo run --release -p pg_dp_core --example auto_bounds_vs_explicit [-- --reps R --seed S]
//!
//! For each synthetic column (uniform on [0, 1000], uniform on [0, 520], skewed: lognormal incomes
//! with median 50 000 and σ of the log 1.0, heavy-tailed: Pareto with α = 1.5 from 1 000, sparse: 95%
//! zeros and 5% lognormal incomes), n ∈ {300, 10 000, 1 000 000} and ε ∈ {0.1, 0.5, 1}, it releases
//! dp_sum and dp_avg R times (default 300) each with
//!
//! - automatic bounds (`AutoBoundsSpec`, the release pg_dp runs for `dp_sum(x)`/`dp_avg(x)`),
//! - the explicit bounds [0, max] (the data's maximum: the best bound a user can know without clipping),
//! - the explicit bounds [0, 10·max] (a user who guesses a bound ten times too wide),
//!
//! and prints CSV: data, n, epsilon, statistic, rmse_auto, rmse_max, rmse_10max, ratio_max
//! (rmse_auto / rmse_max) and ratio_10max, then the worst ratio over the cells the issue targets
//! (n ≥ 10 000, ε ≥ 0.5) and over the small tables (n = 300) against [0, 10·max]. Errors are against
//! the true, unclamped sum or mean. Seeds make the numbers reproducible; a seeded release is of course
//! not private.
use pg_dp_core::mechanisms::autobounds::{AutoBoundsSpec, MagnitudeHistogram};
use pg_dp_core::mechanisms::avg::AvgSpec;
use pg_dp_core::mechanisms::sum::FloatSumSpec;
use pg_dp_core::noise::rng::{seeded_rng, uniform01, DpRng};

fn normal(rng: &mut DpRng) -> f64 {
    // Box–Muller, for generating data only
    let u = 1.0 - uniform01(rng);
    let v = uniform01(rng);
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

fn generate(name: &str, n: usize, rng: &mut DpRng) -> Vec<f64> {
    (0..n)
        .map(|_| match name {
            "uniform1000" => 1000.0 * uniform01(rng),
            "uniform520" => 520.0 * uniform01(rng),
            "skewed" => (50_000f64.ln() + normal(rng)).exp(),
            "heavy" => 1000.0 * (1.0 - uniform01(rng)).powf(-1.0 / 1.5),
            _ => {
                if uniform01(rng) < 0.95 {
                    0.0
                } else {
                    (50_000f64.ln() + normal(rng)).exp()
                }
            }
        })
        .collect()
}

/// Root mean squared error of `reps` releases against `truth`.
fn rmse(reps: usize, truth: f64, mut release: impl FnMut() -> f64) -> f64 {
    let se: f64 = (0..reps).map(|_| (release() - truth).powi(2)).sum();
    (se / reps as f64).sqrt()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str, default: u64| -> u64 {
        args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|s| s.parse().ok()).unwrap_or(default)
    };
    let reps = flag("--reps", 300) as usize;
    let seed = flag("--seed", 20261127);
    println!("data,n,epsilon,statistic,rmse_auto,rmse_max,rmse_10max,ratio_max,ratio_10max");
    let (mut worst_large, mut worst_small) = (0f64, 0f64);
    for (di, data) in ["uniform1000", "uniform520", "skewed", "heavy", "sparse"].iter().enumerate() {
        for (ni, &n) in [300usize, 10_000, 1_000_000].iter().enumerate() {
            let mut gen = seeded_rng(seed + 100 * di as u64 + ni as u64);
            let xs = generate(data, n, &mut gen);
            let mut h = MagnitudeHistogram::new();
            for &x in &xs {
                h.add(x);
            }
            let max = xs.iter().copied().fold(0.0, f64::max);
            let true_sum: f64 = xs.iter().sum();
            let true_mean = true_sum / n as f64;
            for &eps in &[0.1, 0.5, 1.0] {
                let auto = AutoBoundsSpec::new(eps).unwrap();
                let mut rng = seeded_rng(seed ^ ((di * 10 + ni) as u64) << 32 ^ (eps * 100.0) as u64);
                for stat in ["sum", "mean"] {
                    let (truth, auto_rmse) = if stat == "sum" {
                        (true_sum, rmse(reps, true_sum, || auto.release_sum(&mut rng, &h).unwrap().value))
                    } else {
                        (true_mean, rmse(reps, true_mean, || auto.release_avg(&mut rng, &h).unwrap().value))
                    };
                    let mut explicit = |upper: f64| -> f64 {
                        if stat == "sum" {
                            let spec = FloatSumSpec::new(0.0, upper, eps).unwrap();
                            let s: i128 = xs.iter().map(|&x| spec.quantize(x).unwrap() as i128).sum();
                            rmse(reps, truth, || spec.release(&mut rng, s).value)
                        } else {
                            let spec = AvgSpec::new(0.0, upper, eps).unwrap();
                            let s: i128 = xs.iter().map(|&x| spec.quantize(x).unwrap() as i128).sum();
                            rmse(reps, truth, || spec.release(&mut rng, s, n as i64).value)
                        }
                    };
                    let (r_max, r_10) = (explicit(max), explicit(10.0 * max));
                    let (ratio_max, ratio_10) = (auto_rmse / r_max, auto_rmse / r_10);
                    if n >= 10_000 && eps >= 0.5 {
                        worst_large = worst_large.max(ratio_max);
                    }
                    if n == 300 {
                        worst_small = worst_small.max(ratio_10);
                    }
                    println!("{data},{n},{eps},{stat},{auto_rmse:.6e},{r_max:.6e},{r_10:.6e},{ratio_max:.3},{ratio_10:.3}");
                }
            }
        }
    }
    println!("# worst rmse_auto / rmse_max at n >= 10000, epsilon >= 0.5: {worst_large:.3}");
    println!("# worst rmse_auto / rmse_10max at n = 300: {worst_small:.3}");
}
