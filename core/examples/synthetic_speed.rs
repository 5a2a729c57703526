//! Speed of the synthetic engine on a table of Adult's shape (14 columns with Adult's cardinalities:
//! 17, 9, 17, 17, 8, 15, 7, 6, 3, 6, 6, 17, 42, 3 codes; 48,842 rows, each column drawn near its
//! predecessor's code, fixed seed): the scan into the count tables, the fit at ε = 1 (mst, tree2,
//! privbayes), and the sampling of 1,000,000 rows, codes alone and decoded into values (every column
//! numeric, uniform in its bin), in rows per second. Medians of 5 runs.
//!
//!     cargo run --release -p pg_dp_core --example synthetic_speed
use pg_dp_core::noise::rng::seeded_rng;
use pg_dp_core::release::synthesis::Sample;
use pg_dp_core::release::synthetic::columns::ColumnCode;
use pg_dp_core::release::synthetic::{Method, SyntheticParams, SyntheticSpec};
use rand::Rng;
use std::time::Instant;

const N: usize = 48_842;
const M: usize = 1_000_000;
const RUNS: usize = 5;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let cards = [17usize, 9, 17, 17, 8, 15, 7, 6, 3, 6, 6, 17, 42, 3];
    let d = cards.len();
    let mut rng = seeded_rng(2026_11_28);
    let mut data = Vec::with_capacity(N * d);
    for _ in 0..N {
        let mut prev = 0usize;
        for (j, &c) in cards.iter().enumerate() {
            let v = if j == 0 || rng.random_bool(0.3) { rng.random_range(0..c) } else { (prev * c / cards[j - 1] + rng.random_range(0..2)) % c };
            data.push(v as u32);
            prev = v;
        }
    }
    // every column numeric: a value uniform in its bin, as a release of binned numbers writes
    let cols: Vec<ColumnCode> = cards.iter().map(|&c| ColumnCode::real_bins(0.0, c as f64, c - 1).expect("bins")).collect();
    println!("Adult-shaped table: {N} rows, {d} columns; sampling {M} rows; medians of {RUNS} runs");
    println!();
    println!("| method | scan (ms) | fit (ms) | sample codes (rows/s) | sample and decode (rows/s) |");
    println!("|---|---:|---:|---:|---:|");
    for method in [Method::Mst, Method::Tree2, Method::PrivBayes] {
        let spec = SyntheticSpec::new(&SyntheticParams::new(cols.iter().map(|c| c.cardinality()).collect(), 1.0, 0.0, method)).expect("spec");
        let (mut scan, mut fit, mut codes, mut decoded) = (vec![], vec![], vec![], vec![]);
        for run in 0..RUNS {
            let t = Instant::now();
            let mut counts = spec.counter();
            for r in data.chunks_exact(d) {
                counts.push(r);
            }
            scan.push(t.elapsed().as_secs_f64());
            let mut rng = seeded_rng(run as u64);
            let t = Instant::now();
            let model = spec.fit(&mut rng, &counts, &mut || Ok(())).expect("fit");
            fit.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            let s = model.sample(&mut rng, M, &mut || Ok(())).expect("sample");
            codes.push(M as f64 / t.elapsed().as_secs_f64());
            assert_eq!(s.len(), M * d);
            let t = Instant::now();
            let s = Sample::draw(&model, &cols, M, &mut rng, &mut || Ok(())).expect("draw");
            decoded.push(M as f64 / t.elapsed().as_secs_f64());
            assert_eq!(s.rows(d), M);
        }
        println!(
            "| {method:?} | {:.1} | {:.1} | {:.0} | {:.0} |",
            median(scan) * 1e3,
            median(fit) * 1e3,
            median(codes),
            median(decoded)
        );
    }
}
