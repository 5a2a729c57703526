//! Time of one DPRP release in the core (no PostgreSQL), for several table sizes.
//!
//!     cargo run -p pg_dp_core --release --example dprp_bench [-- [--threads T] ROWSxCOLS ...]
//!
//! Prints one line per size: rows, columns, k1, k2, threads, best and median of 5 releases in
//! seconds (start, all rows pushed, finish). The data is a synthetic rank-4 table plus noise in
//! [0, 1]; timing does not depend on the values. Memory limit 4 GiB. `--threads 0` (the default)
//! uses every available core.
use pg_dp_core::release::dprp::{DprpParams, DprpSpec};
use pg_dp_core::noise::rng::seeded_rng;
use rand::Rng;
use std::time::Instant;

fn table(n: usize, d: usize, seed: u64) -> Vec<f64> {
    let mut rng = seeded_rng(seed);
    let basis: Vec<f64> = (0..4 * d).map(|_| rng.random::<f64>() - 0.5).collect();
    let mut x = Vec::with_capacity(n * d);
    for _ in 0..n {
        let w: Vec<f64> = (0..4).map(|_| rng.random::<f64>()).collect();
        for j in 0..d {
            let v: f64 = (0..4).map(|k| w[k] * basis[k * d + j]).sum::<f64>();
            x.push((0.5 + 0.5 * v + 0.05 * (rng.random::<f64>() - 0.5)).clamp(0.0, 1.0));
        }
    }
    x
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut threads = 0usize;
    if let Some(i) = args.iter().position(|a| a == "--threads") {
        threads = args.get(i + 1).expect("--threads N").parse().expect("--threads N");
        args.drain(i..i + 2);
    }
    if threads == 0 {
        threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    }
    let sizes: Vec<(usize, usize)> = if args.is_empty() {
        vec![(10_000, 8), (10_000, 32), (100_000, 8), (100_000, 32), (100_000, 64), (1_000_000, 16)]
    } else {
        args.iter()
            .map(|a| {
                let (n, d) = a.split_once('x').expect("ROWSxCOLS");
                (n.parse().unwrap(), d.parse().unwrap())
            })
            .collect()
    };
    println!("rows\tcols\tk1\tk2\tthreads\tbest_s\tmedian_s");
    let mut rng = seeded_rng(7);
    for (n, d) in sizes {
        let x = table(n, d, 1);
        let spec = DprpSpec::new(&DprpParams::new(vec![0.0; d], vec![1.0; d], 1.0, 1e-5)).unwrap();
        let plan = spec.plan_memory(4 << 30, threads).unwrap();
        let mut times: Vec<f64> = (0..5)
            .map(|_| {
                let t = Instant::now();
                let out = spec.release(&mut rng, &x, &plan, &mut || Ok(())).unwrap();
                std::hint::black_box(out);
                t.elapsed().as_secs_f64()
            })
            .collect();
        times.sort_by(f64::total_cmp);
        println!("{n}\t{d}\t{}\t{}\t{threads}\t{:.4}\t{:.4}", spec.k1, spec.k2, times[0], times[2]);
    }
}
