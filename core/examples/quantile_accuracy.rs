//! Accuracy of the quantile releases on one data set, for bench/quantile_accuracy.sh:
//!
//!   cargo run --release -p pg_dp_core --example quantile_accuracy -- FILE.csv LOWER UPPER LABEL [--reps R] [--seed S]
//!
//! FILE.csv holds one numeric column (a non-numeric first line is taken as a header). For
//! p ∈ {0.5, 0.9} and ε ∈ {0.1, 0.5, 1, 2}, every method is run R times (default 1000) with fixed
//! seeds, and the median and the 90th percentile of |released − true quantile| are printed as a
//! Markdown table (cells "median / p90"):
//! - smooth sensitivity, δ = 1e-6 (Laplace noise, (ε, δ)-DP): `QuantileSpec::smooth(.., 1e-6)`;
//! - smooth sensitivity, δ = 0 (polynomial-tailed noise, ε-DP): `QuantileSpec::smooth(.., 0)`;
//! - exponential mechanism (ε-DP): `QuantileSpec::exponential`;
//! - naive baseline: true quantile + Laplace noise of scale (upper − lower)/ε (the global
//!   sensitivity of a quantile of clamped data), clamped to [lower, upper] (ε-DP).
//!
//! The true quantile is `pg_dp_core::mechanisms::smooth::quantile` on the clamped, sorted data: the rank
//! convention of the releases (round(p·(n + 1)), bounds as the outermost order statistics).
//! Seeds make the numbers reproducible; a seeded release is of course not private.
mod shared;

use pg_dp_core::mechanisms::quantile::{rounded_laplace, QuantileSpec};
use pg_dp_core::noise::rng::{seeded_rng, DpRng};
use pg_dp_core::noise::sampling::dyadic;
use pg_dp_core::mechanisms::smooth::{prepare_sorted, quantile};

const PS: [f64; 2] = [0.5, 0.9];
const EPSILONS: [f64; 4] = [0.1, 0.5, 1.0, 2.0];
const DELTA: f64 = 1e-6;
/// The naive baseline adds noise on a grid of 2^NAIVE_BITS steps across [lower, upper].
const NAIVE_BITS: i32 = 32;

/// Global-sensitivity Laplace: q + Lap((upper − lower)/ε), rounded to a grid of 2^NAIVE_BITS steps
/// across the bounds and clamped to them. With ε = m·2^-k the scale in steps is exactly
/// 2^NAIVE_BITS/ε = 2^(NAIVE_BITS + k)/m, which `rounded_laplace` samples as round(t·Z).
fn naive_release(rng: &mut DpRng, q: f64, lower: f64, upper: f64, epsilon: f64) -> f64 {
    let (m, k) = dyadic(epsilon);
    let e = NAIVE_BITS + k;
    let (a, b) = if e >= 0 { (1u128 << e, m as u128) } else { (1u128, (m as u128) << -e) };
    let steps = rounded_laplace(rng, a, b);
    let step = (upper - lower) / (1u64 << NAIVE_BITS) as f64;
    (q + steps as f64 * step).clamp(lower, upper)
}

fn median(v: &[f64]) -> f64 {
    let n = v.len();
    if !n.is_multiple_of(2) {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The 90th percentile of sorted values (the value at rank ⌈0.9·n⌉).
fn p90(v: &[f64]) -> f64 {
    v[(v.len() * 9).div_ceil(10) - 1]
}

/// Rounds to 3 significant digits (at least), for the table.
fn fmt(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    let digits = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    let s = format!("{x:.digits$}");
    // thousands separators for the integer part of large values
    if digits == 0 && x.abs() >= 1000.0 {
        let neg = s.starts_with('-');
        let d: Vec<char> = s.trim_start_matches('-').chars().collect();
        let mut g = String::new();
        for (i, c) in d.iter().enumerate() {
            if i > 0 && (d.len() - i).is_multiple_of(3) {
                g.push(',');
            }
            g.push(*c);
        }
        return if neg { format!("-{g}") } else { g };
    }
    s
}

fn main() {
    let shared::Args { path, lower, upper, label, reps, seed } = shared::parse_args("quantile_accuracy", 1000, 20240601);
    let raw = shared::read_column(&path);
    let n = raw.len();
    let clamped = raw.iter().filter(|&&v| v < lower || v > upper).count();
    // clamped and sorted once: every release gets a copy (release() sorts and overwrites its input)
    let sorted = prepare_sorted(raw, lower, upper).expect("valid bounds");

    println!(
        "**{label}**: n = {n}, bounds [{}, {}] ({clamped} outside, clamped); median / 90th percentile of |error| over {reps} releases per cell\n",
        lower, upper
    );
    println!("| p | ε | true quantile | smooth, δ = 1e-6 | smooth, δ = 0 | exponential | naive Laplace |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for (pi, &p) in PS.iter().enumerate() {
        let truth = quantile(&sorted, p, lower, upper);
        for (ei, &eps) in EPSILONS.iter().enumerate() {
            let specs = [
                Some(QuantileSpec::smooth(p, lower, upper, eps, DELTA).unwrap()),
                Some(QuantileSpec::smooth(p, lower, upper, eps, 0.0).unwrap()),
                Some(QuantileSpec::exponential(p, lower, upper, eps).unwrap()),
                None, // naive baseline
            ];
            let mut cells = Vec::new();
            for (mi, spec) in specs.iter().enumerate() {
                // one fixed seed per (p, ε, method): cells do not depend on each other's draws
                let mut rng = seeded_rng(seed ^ ((pi as u64) << 32 | (ei as u64) << 16 | mi as u64));
                let mut errors: Vec<f64> = (0..reps)
                    .map(|_| {
                        let released = match spec {
                            Some(s) => s.release(&mut rng, &mut sorted.clone()),
                            None => naive_release(&mut rng, truth, lower, upper, eps),
                        };
                        (released - truth).abs()
                    })
                    .collect();
                errors.sort_by(f64::total_cmp);
                cells.push(format!("{} / {}", fmt(median(&errors)), fmt(p90(&errors))));
            }
            println!("| {p} | {eps} | {} | {} |", fmt(truth), cells.join(" | "));
        }
    }
    println!();
}
