//! Accuracy of dp_avg for shares of ε between the centred sum and the count, and for estimators
//! (post-processing of the noisy centred sum S̃ and noisy count ñ):
//!
//!   cargo run --release -p pg_dp_core --example avg_split [-- --reps R --seed S]
//!
//! Data (generated here from the seed, then clamped and quantized exactly as dp_avg does):
//! - bounds [0, 100]: uniform (mean at the centre), 100·U² (mean 33), 100·U⁴ (mean 20), 90 + 10·U
//!   (mean 95, near the upper bound);
//! - bounds [0, 4000]: a WDBC-like area column, lognormal with median 700 and σ 0.45 for the log
//!   (mean about 770, 0.6 half-widths below the centre);
//! n ∈ {100, 300, 570, 1 000, 10 000, 100 000}, ε ∈ {0.01, 0.1, 1}, shares of ε on the sum
//! 0.5, 0.55, …, 0.8 and 0.9. Every method gets the same exact
//! statistics and exact discrete Laplace noise; each cell is released R times (default 2000).
//! Prints CSV: data, lower, upper, n, epsilon, share, estimator, rel_rmse (RMSE over upper − lower),
//! rel_bias, at_bound (fraction of releases equal to a bound). With `--summary`, prints instead the
//! tables of docs/privacy/avg.md: for each (n, ε) with n ∈ {100, 300, 1 000, 10 000, 100 000} the
//! worst relative RMSE over the five data sets, for selected methods and the best of all, with each
//! method's largest and geometric-mean ratio to that best; and the releases at a bound at n = 300 and
//! 570, ε = 0.01.
//!
//! Estimators, with m the mean in grid steps relative to the centre c, H the half-width in steps,
//! b_S and b_n the scales of the sum and count noise:
//! - ratio: c + S̃/max(ñ, 1) (dp_avg before this measurement);
//! - floorK: c + S̃/max(ñ, K·b_n);
//! - shrink: c + S̃·n̂/(n̂² + 6·b_S²/H²) with n̂ = max(ñ, 1): the posterior mode of m for a Gaussian
//!   approximation of the sum noise (variance 2b_S²) and a prior of variance H²/3 (uniform over the
//!   bounds), taking n = n̂;
//! - shrink_floor: the same with n̂ = max(ñ, b_n);
//! - posterior: the posterior mean of m for a uniform prior over the bounds and a flat prior over
//!   the count ([`avg_posterior_mean`], what dp_avg releases since this measurement).
//! Seeds make the numbers reproducible; a seeded release is of course not private.
use pg_dp_core::mechanisms::{avg_posterior_mean, AvgSpec};
use pg_dp_core::noise::rng::{seeded_rng, uniform01, DpRng};
use pg_dp_core::noise::sampling::{discrete_laplace, laplace_scale};

fn normal(rng: &mut DpRng) -> f64 {
    let u = 1.0 - uniform01(rng);
    let v = uniform01(rng);
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

fn generate(name: &str, rng: &mut DpRng) -> f64 {
    let u = uniform01(rng);
    match name {
        "uniform" => 100.0 * u,
        "square" => 100.0 * u * u,
        "fourth" => 100.0 * u.powi(4),
        "near_upper" => 90.0 + 10.0 * u,
        _ => (700f64.ln() + 0.45 * normal(rng)).exp(),
    }
}

/// The estimators, from (S̃, ñ) in steps, the centre c, H, b_S and b_n; before the clamp.
fn estimate(name: &str, s: f64, n: f64, c: f64, h: f64, bs: f64, bn: f64) -> f64 {
    let ridge = |nh: f64| c + s * nh / (nh * nh + 6.0 * bs * bs / (h * h));
    match name {
        "ratio" => c + s / n.max(1.0),
        "floor1" => c + s / n.max(bn),
        "floor2" => c + s / n.max(2.0 * bn),
        "floor3" => c + s / n.max(3.0 * bn),
        "shrink" => ridge(n.max(1.0)),
        "shrink_floor" => ridge(n.max(bn)),
        "posterior" => c + avg_posterior_mean(s, n, h, bs, bn),
        _ => unreachable!(),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str, default: u64| -> u64 {
        args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|s| s.parse().ok()).unwrap_or(default)
    };
    let reps = flag("--reps", 2000) as usize;
    let summary = args.iter().any(|a| a == "--summary");
    // (data, n, ε, share, estimator) → (relative RMSE, relative bias, fraction at a bound)
    let mut results: Vec<(&str, usize, f64, f64, &str, f64, f64, f64)> = Vec::new();
    let seed = flag("--seed", 20240612);
    let shares = [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9];
    let estimators = ["ratio", "floor1", "floor2", "floor3", "shrink", "shrink_floor", "posterior"];
    if !summary {
        println!("data,lower,upper,n,epsilon,share,estimator,rel_rmse,rel_bias,at_bound");
    }
    let datasets = [("uniform", 100.0), ("square", 100.0), ("fourth", 100.0), ("near_upper", 100.0), ("wdbc_area", 4000.0)];
    for (di, &(data, upper)) in datasets.iter().enumerate() {
        let spec0 = AvgSpec::new(0.0, upper, 1.0).unwrap();
        let (step, c) = (spec0.grid.step(), spec0.center as f64);
        let h = spec0.sensitivity_steps() as f64;
        for (ni, &n) in [100usize, 300, 570, 1_000, 10_000, 100_000].iter().enumerate() {
            let mut gen = seeded_rng(seed + 1000 * di as u64 + ni as u64);
            let mut sum_q: i128 = 0;
            for _ in 0..n {
                sum_q += spec0.quantize(generate(data, &mut gen)).unwrap() as i128;
            }
            let truth = sum_q as f64 * step / n as f64;
            let centred = sum_q - n as i128 * spec0.center as i128;
            for (ei, &eps) in [0.01, 0.1, 1.0].iter().enumerate() {
                for (si, &share) in shares.iter().enumerate() {
                    let (e_sum, e_cnt) = (eps * share, eps * (1.0 - share));
                    let (ts, ss) = laplace_scale(spec0.sensitivity_steps(), e_sum);
                    let (tn, sn) = laplace_scale(1, e_cnt);
                    let (bs, bn) = (ts as f64 / ss as f64, tn as f64 / sn as f64);
                    // the same noise for every estimator of this cell
                    let mut rng = seeded_rng(seed ^ ((((di * 10 + ni) * 10 + ei) * 10 + si) as u64) << 32);
                    let draws: Vec<(f64, f64)> = (0..reps)
                        .map(|_| ((centred + discrete_laplace(&mut rng, ts, ss)) as f64, (n as i128 + discrete_laplace(&mut rng, tn, sn)) as f64))
                        .collect();
                    for est in estimators {
                        let (mut se, mut bias, mut at) = (0.0, 0.0, 0usize);
                        for &(s, m) in &draws {
                            let v = (estimate(est, s, m, c, h, bs, bn) * step).clamp(0.0, upper);
                            se += (v - truth).powi(2);
                            bias += v - truth;
                            at += (v == 0.0 || v == upper) as usize;
                        }
                        let r = reps as f64;
                        let (rmse, bias, at) = ((se / r).sqrt() / upper, bias / r / upper, at as f64 / r);
                        results.push((data, n, eps, share, est, rmse, bias, at));
                        if !summary {
                            println!("{data},0,{upper},{n},{eps},{share},{est},{rmse:.6},{bias:.6},{at:.4}");
                        }
                    }
                }
            }
        }
    }
    if summary {
        print_summary(&results, &datasets.map(|d| d.0));
    }
}

type Row<'a> = (&'a str, usize, f64, f64, &'a str, f64, f64, f64);

fn print_summary(results: &[Row], datasets: &[&str]) {
    let ns = [100usize, 300, 1_000, 10_000, 100_000];
    let epsilons = [0.01, 0.1, 1.0];
    let methods: Vec<(f64, &str)> = {
        let mut m: Vec<(f64, &str)> = results.iter().map(|r| (r.3, r.4)).collect();
        m.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(b.1)));
        m.dedup();
        m
    };
    // worst relative RMSE over the data sets, per method and (n, ε)
    let worst = |m: (f64, &str), n: usize, e: f64| -> f64 {
        results.iter().filter(|r| r.1 == n && r.2 == e && r.3 == m.0 && r.4 == m.1).map(|r| r.5).fold(0.0, f64::max)
    };
    let cells: Vec<(usize, f64)> = ns.iter().flat_map(|&n| epsilons.iter().map(move |&e| (n, e))).collect();
    let best: Vec<f64> = cells.iter().map(|&(n, e)| methods.iter().map(|&m| worst(m, n, e)).fold(f64::INFINITY, f64::min)).collect();
    let ratios = |m: (f64, &str)| -> (f64, f64) {
        let r: Vec<f64> = cells.iter().zip(&best).map(|(&(n, e), &b)| worst(m, n, e) / b).collect();
        (r.iter().cloned().fold(0.0, f64::max), (r.iter().map(|x| x.ln()).sum::<f64>() / r.len() as f64).exp())
    };
    let shown: Vec<(f64, &str)> = vec![(0.7, "ratio"), (0.7, "floor3"), (0.6, "floor2"), (0.6, "posterior"), (0.65, "posterior"), (0.7, "posterior"), (0.8, "posterior")];
    let pct = |x: f64| format!("{:.3}%", 100.0 * x);
    println!("| n | ε | {} | best of all |", shown.iter().map(|m| format!("{} {}", m.1, m.0)).collect::<Vec<_>>().join(" | "));
    println!("|---|---|{}---|", "---|".repeat(shown.len()));
    for (i, &(n, e)) in cells.iter().enumerate() {
        println!("| {n} | {e} | {} | {} |", shown.iter().map(|&m| pct(worst(m, n, e))).collect::<Vec<_>>().join(" | "), pct(best[i]));
    }
    println!("| largest ratio to the best | | {} | |", shown.iter().map(|&m| format!("{:.3}", ratios(m).0)).collect::<Vec<_>>().join(" | "));
    println!("| geometric-mean ratio | | {} | |", shown.iter().map(|&m| format!("{:.3}", ratios(m).1)).collect::<Vec<_>>().join(" | "));
    println!();
    println!("all methods, ordered by their largest ratio to the best:");
    let mut order = methods.clone();
    order.sort_by(|a, b| ratios(*a).0.total_cmp(&ratios(*b).0));
    for m in order {
        let (mx, gm) = ratios(m);
        println!("  share {:.2} {:<13} largest {mx:.3}  geometric mean {gm:.3}", m.0, m.1);
    }
    println!();
    println!("| data | n | at a bound, ratio 0.7 | at a bound, posterior 0.7 | RMSE, ratio 0.7 | RMSE, posterior 0.7 | bias, posterior 0.7 |");
    println!("|---|---|---|---|---|---|---|");
    for d in datasets {
        for n in [300usize, 570] {
            let get = |est: &str| results.iter().find(|r| r.0 == *d && r.1 == n && r.2 == 0.01 && r.3 == 0.7 && r.4 == est).unwrap();
            let (r, p) = (get("ratio"), get("posterior"));
            println!("| {d} | {n} | {:.1}% | {:.1}% | {:.1}% | {:.1}% | {:+.1}% |", 100.0 * r.7, 100.0 * p.7, 100.0 * r.5, 100.0 * p.5, 100.0 * p.6);
        }
    }
}
