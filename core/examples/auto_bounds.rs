//! Accuracy of dp_sum and dp_avg with automatic bounds, for several shares of ε spent on the bounds:
//!
//!   cargo run --release -p pg_dp_core --example auto_bounds [-- --reps R --seed S]
//!
//! Synthetic data (generated here from the seed): incomes (lognormal, median 50 000, σ of the log
//! 1.0), adult ages (17 + Gamma(2, 10), at most 90), a signed amount (normal, mean 200, sd 1000) and a
//! uniform [0, 1000] column; n ∈ {1 000, 10 000, 100 000}; ε ∈ {0.1, 1}. Each cell is released R
//! times (default 300) per share. Prints CSV: data, n, epsilon, share, statistic, rel_rmse (root mean
//! squared error over the true unclamped value's magnitude), error_rate (the too-few-rows error),
//! median_upper (median chosen upper bound) and p99 (the data's 99th percentile). Seeds make the
//! numbers reproducible; a seeded release is of course not private.
use pg_dp_core::mechanisms::autobounds::{AutoBoundsSpec, MagnitudeHistogram};
use pg_dp_core::noise::rng::{seeded_rng, uniform01, DpRng};

fn normal(rng: &mut DpRng) -> f64 {
    // Box–Muller, for generating data only
    let u = 1.0 - uniform01(rng);
    let v = uniform01(rng);
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// The synthetic columns, by name.
pub fn generate(name: &str, n: usize, rng: &mut DpRng) -> Vec<f64> {
    (0..n)
        .map(|_| match name {
            "incomes" => (50_000f64.ln() + normal(rng)).exp(),
            "ages" => (17.0 - 10.0 * ((1.0 - uniform01(rng)).ln() + (1.0 - uniform01(rng)).ln())).min(90.0).floor(),
            "signed" => 200.0 + 1000.0 * normal(rng),
            _ => 1000.0 * uniform01(rng),
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str, default: u64| -> u64 {
        args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|s| s.parse().ok()).unwrap_or(default)
    };
    let reps = flag("--reps", 300) as usize;
    let seed = flag("--seed", 20240611);
    let shares = [0.1, 0.2, 0.25, 0.3, 0.4, 0.5];
    println!("data,n,epsilon,share,statistic,rel_rmse,error_rate,median_upper,p99");
    for (di, data_name) in ["incomes", "ages", "signed", "uniform"].iter().enumerate() {
        for (ni, &n) in [1_000usize, 10_000, 100_000].iter().enumerate() {
            let mut gen = seeded_rng(seed + 100 * di as u64 + ni as u64);
            let xs = generate(data_name, n, &mut gen);
            let mut h = MagnitudeHistogram::new();
            for &x in &xs {
                h.add(x);
            }
            let true_sum: f64 = xs.iter().sum();
            let true_mean = true_sum / n as f64;
            let mut sorted = xs.clone();
            sorted.sort_by(f64::total_cmp);
            let p99 = sorted[(0.99 * n as f64) as usize];
            for &eps in &[0.1, 1.0] {
                for &share in &shares {
                    let spec = AutoBoundsSpec::with_share(eps, share).unwrap();
                    for (stat, truth) in [("sum", true_sum), ("mean", true_mean)] {
                        let mut rng = seeded_rng(seed ^ (((di * 10 + ni) * 1000 + (share * 100.0) as usize) as u64) ^ ((eps * 10.0) as u64) << 40);
                        let (mut se, mut errors, mut uppers) = (0.0, 0usize, Vec::new());
                        for _ in 0..reps {
                            let r = if stat == "sum" { spec.release_sum(&mut rng, &h) } else { spec.release_avg(&mut rng, &h) };
                            match r {
                                Ok(r) => {
                                    se += (r.value - truth).powi(2);
                                    uppers.push(r.bounds.upper());
                                }
                                Err(_) => errors += 1,
                            }
                        }
                        let ok = reps - errors;
                        let rmse = if ok > 0 { (se / ok as f64).sqrt() / truth.abs() } else { f64::NAN };
                        uppers.sort_by(f64::total_cmp);
                        let med = uppers.get(uppers.len() / 2).copied().unwrap_or(f64::NAN);
                        println!("{data_name},{n},{eps},{share},{stat},{rmse:.5},{:.3},{med},{p99:.1}", errors as f64 / reps as f64);
                    }
                }
            }
        }
    }
}
