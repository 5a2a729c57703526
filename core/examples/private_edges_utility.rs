//! What private bin edges buy a synthetic column, one column at a time: the Kolmogorov–Smirnov
//! distance between a column and its synthetic copy when the copy is drawn from a noisy histogram on
//! `bins` bins (discrete Laplace, as the model's 1-way table; a value uniform in its bin), with
//! equal-width bins over the declared bounds against bins whose edges PrivateEdges chose (a tenth of
//! ε for the edges, the rest for the histogram), at the same total ε. Columns: a lognormal income
//! (median 40,000, σ = 1) in [0, 500,000], ages 17 + ⌊74·u^1.8⌋ (many young, none below 17) with
//! the loose bounds [0, 120], and a uniform [0, 1000].
//!
//! `cargo run --release -p pg_dp_core --example private_edges_utility -- [rows] [reps]`
use pg_dp_core::noise::rng::{seeded_rng, uniform01, DpRng};
use pg_dp_core::noise::sampling::{discrete_laplace, laplace_scale};
use pg_dp_core::release::synthetic::columns::{ColumnCode, Decoded, PrivateEdges};

/// A standard normal draw (Box–Muller), for the test data only.
fn normal(rng: &mut DpRng) -> f64 {
    let (u, v) = (uniform01(rng).max(1e-300), uniform01(rng));
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// The synthetic copy of `xs` (n values) drawn from a noisy histogram of `code` at ε.
fn copy(rng: &mut DpRng, code: &ColumnCode, xs: &[f64], eps: f64) -> Vec<f64> {
    let k = code.null_code() as usize;
    let mut counts = vec![0i128; k];
    for &x in xs {
        counts[code.encode_real(x) as usize] += 1;
    }
    let (t, s) = laplace_scale(1, eps);
    let noisy: Vec<i128> = counts.iter().map(|c| (c + discrete_laplace(rng, t, s)).max(0)).collect();
    let total: i128 = noisy.iter().sum::<i128>().max(1);
    // n draws from the noisy histogram, each uniform in its bin
    (0..xs.len())
        .map(|_| {
            let mut u = (uniform01(rng) * total as f64) as i128;
            let mut b = 0;
            while b + 1 < k && u >= noisy[b] {
                u -= noisy[b];
                b += 1;
            }
            match code.decode(rng, b as u32) {
                Decoded::Real(x) => x,
                Decoded::Integer(x) => x as f64,
                _ => f64::NAN,
            }
        })
        .collect()
}

/// The largest distance between the two empirical distribution functions.
fn ks(a: &[f64], b: &[f64]) -> f64 {
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (mut i, mut j, mut d) = (0, 0, 0.0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / a.len() as f64 - j as f64 / b.len() as f64).abs());
    }
    d
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).map(|s| s.parse().expect("rows")).unwrap_or(10_000);
    let reps: usize = args.get(2).map(|s| s.parse().expect("reps")).unwrap_or(20);
    let mut rng = seeded_rng(20261128);
    let columns: Vec<(&str, f64, f64, Vec<f64>)> = vec![
        ("income, lognormal", 0.0, 500_000.0, (0..n).map(|_| (40_000f64.ln() + normal(&mut rng)).exp()).collect()),
        ("ages 17…90 in [0, 120]", 0.0, 120.0, (0..n).map(|_| (17.0 + 74.0 * uniform01(&mut rng).powf(1.8)).floor()).collect()),
        ("uniform [0, 1000]", 0.0, 1000.0, (0..n).map(|_| 1000.0 * uniform01(&mut rng)).collect()),
    ];
    println!("KS distance of a synthetic column to the original, {n} rows, mean of {reps} copies (lower is better)\n");
    println!("| column | bins | ε | equal-width bins | private edges |");
    println!("|---|---:|---:|---:|---:|");
    for (name, lower, upper, xs) in &columns {
        for bins in [8usize, 16] {
            for eps in [0.3, 1.0] {
                let equal = ColumnCode::real_bins(*lower, *upper, bins).unwrap();
                let fine = ColumnCode::real_bins(*lower, *upper, PrivateEdges::GRID).unwrap();
                let (mut ks_eq, mut ks_pe) = (0.0, 0.0);
                for _ in 0..reps {
                    ks_eq += ks(xs, &copy(&mut rng, &equal, xs, eps));
                    // a tenth of ε over the bins − 1 inner edges, the rest for the histogram
                    let pe = PrivateEdges::new(fine.clone(), bins, 0.1 * eps / (bins - 1) as f64).unwrap();
                    let mut counts = vec![0u64; pe.fine_bins()];
                    for &x in xs.iter() {
                        counts[fine.encode_real(x) as usize] += 1;
                    }
                    let chosen = pe.choose(&mut rng, &counts, &mut || Ok(())).unwrap();
                    ks_pe += ks(xs, &copy(&mut rng, &chosen, xs, 0.9 * eps));
                }
                println!("| {name} | {bins} | {eps} | {:.4} | {:.4} |", ks_eq / reps as f64, ks_pe / reps as f64);
            }
        }
    }
}
