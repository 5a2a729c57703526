//! Reconstruction error of DPRP releases over a grid of k1, k2, projection kind and ε, used to choose
//! the defaults (docs/privacy/dprp.md, "Choosing k1 and k2").
//!
//!     cargo run -p pg_dp_core --release --example dprp_eval -- DATA [EPS,..] [REPS] [SHARES] [orthonormal]
//!
//! DATA is a headerless numeric CSV (bench/dprp/datasets.py writes the tables used in the doc) or
//! `synth:N:D:RANK` for a random rank-RANK table plus 5% noise in [0, 1]. The bounds are the columns'
//! minimum and maximum: a stand-in for public bounds, as an evaluation needs some.
//!
//! Output (TSV): data, n, d, eps, projection, k1, k2, share, err, where err is the mean over REPS
//! releases of ‖X′ − X‖²_F / ‖X − X̄‖²_F in units scaled by the bounds: 0 is perfect, 1 is as far
//! from X as the (non-private) column means.
use pg_dp_core::dprp::{DprpParams, DprpSpec, Projection};
use pg_dp_core::rng::seeded_rng;
use rand::Rng;

fn read_csv(path: &str) -> (Vec<f64>, usize, usize) {
    let text = std::fs::read_to_string(path).expect("read CSV");
    let rows: Vec<Vec<f64>> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split(',').map(|v| v.trim().parse::<f64>().expect("number")).collect())
        .collect();
    let d = rows[0].len();
    (rows.concat(), rows.len(), d)
}

fn synth(n: usize, d: usize, rank: usize) -> Vec<f64> {
    let mut rng = seeded_rng(11);
    let basis: Vec<f64> = (0..rank * d).map(|_| rng.random::<f64>() - 0.5).collect();
    let mut x = Vec::with_capacity(n * d);
    for _ in 0..n {
        let w: Vec<f64> = (0..rank).map(|_| rng.random::<f64>() * 2.0 - 1.0).collect();
        for j in 0..d {
            let v: f64 = (0..rank).map(|k| w[k] * basis[k * d + j]).sum::<f64>();
            x.push(0.5 + 0.5 * v / (rank as f64).sqrt() + 0.05 * (rng.random::<f64>() - 0.5));
        }
    }
    x
}

/// Bounds from the data (evaluation only) and the normalised error of a release.
fn bounds(x: &[f64], d: usize) -> (Vec<f64>, Vec<f64>) {
    let mut lo = vec![f64::INFINITY; d];
    let mut hi = vec![f64::NEG_INFINITY; d];
    for row in x.chunks_exact(d) {
        for j in 0..d {
            lo[j] = lo[j].min(row[j]);
            hi[j] = hi[j].max(row[j]);
        }
    }
    (lo, hi)
}

fn rel_error(x: &[f64], y: &[f64], lo: &[f64], hi: &[f64], d: usize) -> f64 {
    let n = x.len() / d;
    let w: Vec<f64> = (0..d).map(|j| if hi[j] > lo[j] { 1.0 / (hi[j] - lo[j]) } else { 0.0 }).collect();
    let mean: Vec<f64> = (0..d).map(|j| x.iter().skip(j).step_by(d).sum::<f64>() / n as f64).collect();
    let (mut num, mut den) = (0.0, 0.0);
    for (i, (a, b)) in x.iter().zip(y).enumerate() {
        let j = i % d;
        num += ((a - b) * w[j]).powi(2);
        den += ((a - mean[j]) * w[j]).powi(2);
    }
    num / den
}

fn k2_grid(d: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (1..=d.min(8)).collect();
    let mut k = 10;
    while k <= d {
        v.push(k);
        k = if k < 16 { k + 2 } else { k + k / 4 };
    }
    if *v.last().unwrap() != d {
        v.push(d);
    }
    v
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let data = args.first().expect("DATA");
    let eps: Vec<f64> = args.get(1).map_or("0.5,1,2,4,8", |s| s).split(',').map(|v| v.parse().unwrap()).collect();
    let reps: usize = args.get(2).map_or(3, |s| s.parse().unwrap());
    let shares: Vec<f64> = args.get(3).map_or("0.8", |s| s).split(',').map(|v| v.parse().unwrap()).collect();
    let (x, n, d, name) = if let Some(spec) = data.strip_prefix("synth:") {
        let p: Vec<usize> = spec.split(':').map(|v| v.parse().unwrap()).collect();
        (synth(p[0], p[1], p[2]), p[0], p[1], data.clone())
    } else {
        let (x, n, d) = read_csv(data);
        let name = std::path::Path::new(data).file_stem().unwrap().to_string_lossy().into_owned();
        (x, n, d, name)
    };
    let (lo, hi) = bounds(&x, d);
    let mut rng = seeded_rng(5);
    let all = [(Projection::Orthonormal, 1), (Projection::Gaussian, 2), (Projection::Gaussian, 4), (Projection::Gaussian, 8)];
    // a fifth argument `orthonormal` restricts the grid to the orthonormal projection
    let kinds = if args.get(4).is_some_and(|a| a == "orthonormal") { &all[..1] } else { &all[..] };
    println!("data\tn\td\teps\tprojection\tk1\tk2\tshare\terr");
    for &e in &eps {
        for &(kind, m) in kinds {
            for &share in &shares {
                for k2 in k2_grid(d) {
                    let mut p = DprpParams::new(lo.clone(), hi.clone(), e, 1e-5);
                    p.projection = kind;
                    p.k1 = Some(m * d);
                    p.k2 = Some(k2);
                    p.projection_share = share;
                    let spec = DprpSpec::new(n, &p).unwrap();
                    let err: f64 = (0..reps)
                        .map(|_| rel_error(&x, &spec.release(&mut rng, &x).unwrap().0, &lo, &hi, d))
                        .sum::<f64>()
                        / reps as f64;
                    println!("{name}\t{n}\t{d}\t{e}\t{}\t{}\t{k2}\t{share}\t{err:.4}", kind.name(), m * d);
                }
            }
        }
    }
}
