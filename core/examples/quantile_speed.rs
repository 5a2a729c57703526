//! Time of the core quantile releases on n rows (sort + grid + smooth sensitivity + noise, or the
//! exponential mechanism / permute-and-flip), for
//! bench/: `cargo run --release -p pg_dp_core --example quantile_speed -- 1000000`.
use pg_dp_core::mechanisms::quantile::QuantileSpec;
use pg_dp_core::noise::rng::seeded_rng;
use rand::Rng;
use std::time::Instant;

fn main() {
    let n: usize = std::env::args().nth(1).map(|s| s.parse().expect("row count")).unwrap_or(1_000_000);
    let mut rng = seeded_rng(1);
    let data: Vec<f64> = (0..n).map(|_| rng.random::<f64>() * 1000.0).collect();
    for (what, spec) in [
        ("smooth, delta > 0", QuantileSpec::smooth(0.5, 0.0, 1000.0, 1.0, 1e-6).unwrap()),
        ("smooth, delta = 0", QuantileSpec::smooth(0.5, 0.0, 1000.0, 1.0, 0.0).unwrap()),
        ("exponential", QuantileSpec::exponential(0.5, 0.0, 1000.0, 1.0).unwrap()),
        // integer bounds: permute-and-flip over 101 and 4,096 integer candidates, the exponential
        // mechanism over 4,097
        ("p&f, 101 ints", QuantileSpec::exponential_integer(0.5, 0.0, 100.0, 1.0).unwrap()),
        ("p&f, 4096 ints", QuantileSpec::exponential_integer(0.5, 0.0, 4095.0, 1.0).unwrap()),
        ("EM, 4097 ints", QuantileSpec::exponential_integer(0.5, 0.0, 4096.0, 1.0).unwrap()),
    ] {
        let mut times = Vec::new();
        for _ in 0..5 {
            let mut v = data.clone();
            let t = Instant::now();
            std::hint::black_box(spec.release(&mut rng, &mut v));
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        let mut v = data.clone();
        let t = Instant::now();
        v.sort_unstable_by(f64::total_cmp);
        let sort = t.elapsed().as_secs_f64() * 1e3;
        println!("{what:>18}: {:.1} ms median of 5 on {n} rows (sorting alone: {sort:.1} ms)", times[2]);
    }
}
