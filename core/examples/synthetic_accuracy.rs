//! Accuracy of the synthetic engine on data drawn from a known Bayesian network that is not a tree
//! (10 columns, cardinalities 2–16, n = 48,842, fixed seeds): mean total variation distance over
//! all 2-way and all 3-way marginals between the data and a sample of the same size, for the tree
//! engine (Mst), the minimal PrivBayes, the 2-tree of 3-column cliques (Tree2), independent noisy
//! margins (the same ε on the 1-way tables alone), and the tree and the 2-tree on exact counts
//! (ε = 10^6: no noise to speak of). Averages over 5 runs.
//!
//!     cargo run --release -p pg_dp_core --example synthetic_accuracy [one_way_share selection_share]
use pg_dp_core::noise::rng::{seeded_rng, uniform01, DpRng};
use pg_dp_core::noise::sampling::{discrete_gaussian, discrete_laplace, laplace_scale};
use pg_dp_core::release::synthetic::{zcdp_rho, Alias, Method, SyntheticParams, SyntheticSpec};
use std::time::Instant;

const N: usize = 48_842;
const RUNS: u64 = 5;

/// A Bayesian network: cardinalities, parents and one conditional table per parent configuration.
struct Network {
    cards: Vec<usize>,
    parents: Vec<Vec<usize>>,
    cpts: Vec<Vec<Vec<f64>>>,
}

fn network() -> Network {
    let cards = vec![2, 4, 8, 16, 3, 5, 6, 2, 10, 7];
    let parents: Vec<Vec<usize>> =
        vec![vec![], vec![0], vec![0, 1], vec![2], vec![1, 3], vec![2], vec![4, 5], vec![6, 0], vec![3, 7], vec![8, 5]];
    let mut rng = seeded_rng(20_240_601);
    let mut cpts = Vec::new();
    for j in 0..cards.len() {
        let configs: usize = parents[j].iter().map(|&p| cards[p]).product();
        let mut table = Vec::with_capacity(configs);
        for k in 0..configs {
            // decode the configuration and place the child near the parents' mean position
            let (mut rest, mut pos, mut np) = (k, 0.0, 0.0);
            for &p in parents[j].iter().rev() {
                let v = rest % cards[p];
                rest /= cards[p];
                pos += (v as f64 + 0.5) / cards[p] as f64;
                np += 1.0;
            }
            let centre = if np > 0.0 { pos / np } else { 0.3 };
            let sharp = 3.0 + 4.0 * uniform01(&mut rng);
            let w: Vec<f64> = (0..cards[j])
                .map(|v| {
                    let x = (v as f64 + 0.5) / cards[j] as f64;
                    (-sharp * (x - centre).abs() * 2.0).exp() * (0.5 + uniform01(&mut rng))
                })
                .collect();
            let s: f64 = w.iter().sum();
            table.push(w.iter().map(|x| x / s).collect());
        }
        cpts.push(table);
    }
    Network { cards, parents, cpts }
}

fn draw(net: &Network, rng: &mut DpRng, n: usize) -> Vec<u32> {
    let d = net.cards.len();
    let alias: Vec<Vec<Alias>> = net.cpts.iter().map(|t| t.iter().map(|p| Alias::new(p)).collect()).collect();
    let mut out = vec![0u32; n * d];
    for r in 0..n {
        for j in 0..d {
            let mut k = 0;
            for &p in &net.parents[j] {
                k = k * net.cards[p] + out[r * d + p] as usize;
            }
            out[r * d + j] = alias[j][k].sample(rng);
        }
    }
    out
}

/// Mean TVD over all 2-way and all 3-way marginals.
fn tvd(cards: &[usize], a: &[u32], b: &[u32]) -> (f64, f64) {
    let d = cards.len();
    let (na, nb) = ((a.len() / d) as f64, (b.len() / d).max(1) as f64);
    let marg = |rows: &[u32], cols: &[usize]| {
        let size: usize = cols.iter().map(|&c| cards[c]).product();
        let mut h = vec![0.0; size];
        for r in rows.chunks_exact(d) {
            let mut k = 0;
            for &c in cols {
                k = k * cards[c] + r[c] as usize;
            }
            h[k] += 1.0;
        }
        h
    };
    let dist = |cols: &[usize]| {
        let (ha, hb) = (marg(a, cols), marg(b, cols));
        0.5 * ha.iter().zip(&hb).map(|(x, y)| (x / na - y / nb).abs()).sum::<f64>()
    };
    let (mut t2, mut k2, mut t3, mut k3) = (0.0, 0, 0.0, 0);
    for i in 0..d {
        for j in i + 1..d {
            t2 += dist(&[i, j]);
            k2 += 1;
            for k in j + 1..d {
                t3 += dist(&[i, j, k]);
                k3 += 1;
            }
        }
    }
    (t2 / k2 as f64, t3 / k3 as f64)
}

/// Independent noisy margins: the whole budget on the d 1-way tables, columns sampled independently.
fn independent(cards: &[usize], data: &[u32], eps: f64, delta: f64, rng: &mut DpRng) -> Vec<u32> {
    let d = cards.len();
    let n = data.len() / d;
    let mut alias = Vec::new();
    for j in 0..d {
        let mut t = vec![0i128; cards[j]];
        for r in data.chunks_exact(d) {
            t[r[j] as usize] += 1;
        }
        let noisy: Vec<f64> = if delta == 0.0 {
            let (a, b) = laplace_scale(d as u128, eps);
            t.iter().map(|&x| (x + discrete_laplace(rng, a, b)).max(0) as f64).collect()
        } else {
            let rho = zcdp_rho(eps, delta);
            let s2 = (d as f64 / (2.0 * rho)).ceil() as u128;
            t.iter().map(|&x| (x + discrete_gaussian(rng, s2)).max(0) as f64).collect()
        };
        alias.push(Alias::new(&noisy));
    }
    let mut out = vec![0u32; n * d];
    for r in 0..n {
        for j in 0..d {
            out[r * d + j] = alias[j].sample(rng);
        }
    }
    out
}

fn main() {
    let args: Vec<f64> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (one_way_share, selection_share) = (args.first().copied(), args.get(1).copied());
    let net = network();
    let cards = net.cards.clone();
    let data = draw(&net, &mut seeded_rng(7), N);
    let d = cards.len();
    println!("network: {d} columns, cardinalities {cards:?}, n = {N}; mean TVD over 45 2-way / 120 3-way marginals, {RUNS} runs");
    println!("shares: one_way {one_way_share:?}, selection {selection_share:?} (None: defaults)");
    let run = |method: Method, eps: f64, delta: f64, seed: u64| -> (f64, f64, f64) {
        let mut p = SyntheticParams::new(cards.clone(), eps, delta, method);
        p.one_way_share = one_way_share;
        p.selection_share = selection_share;
        let spec = SyntheticSpec::new(&p).expect("valid parameters");
        let t = Instant::now();
        let mut counts = spec.counter();
        for r in data.chunks_exact(d) {
            counts.push(r);
        }
        let count_secs = t.elapsed().as_secs_f64();
        let mut rng = seeded_rng(seed);
        let t = Instant::now();
        let model = spec.fit(&mut rng, &counts, &mut || Ok(())).expect("fit");
        let secs = t.elapsed().as_secs_f64();
        if seed == 1000 && eps == 1.0 && delta == 0.0 && method == Method::Mst {
            println!("(one scan of the {N} rows into the count tables: {:.1} ms)", count_secs * 1e3);
        }
        let sample = model.sample(&mut rng, N, &mut || Ok(())).expect("sample");
        let (a, b) = tvd(&cards, &data, &sample);
        (a, b, secs)
    };
    let avg = |f: &dyn Fn(u64) -> (f64, f64, f64)| {
        let (mut a, mut b, mut c) = (0.0, 0.0, 0.0);
        for s in 0..RUNS {
            let (x, y, z) = f(1000 + s);
            a += x;
            b += y;
            c += z;
        }
        (a / RUNS as f64, b / RUNS as f64, c / RUNS as f64)
    };
    let exact = avg(&|s| run(Method::Mst, 1e6, 0.0, s));
    println!("exact tree (ε = 1e6): 2-way {:.4}  3-way {:.4}  fit {:.1} ms", exact.0, exact.1, exact.2 * 1e3);
    let exact2 = avg(&|s| run(Method::Tree2, 1e6, 0.0, s));
    println!("exact 2-tree (ε = 1e6): 2-way {:.4}  3-way {:.4}  fit {:.1} ms", exact2.0, exact2.1, exact2.2 * 1e3);
    println!(
        "{:>5} {:>6} | {:>15} | {:>15} | {:>15} | {:>15} | {:>9} | {:>9}",
        "ε", "δ", "mst 2w/3w", "privbayes 2w/3w", "tree2 2w/3w", "indep 2w/3w", "mst fit", "tree2 fit"
    );
    for &delta in &[0.0, 1e-9] {
        for &eps in &[0.3, 1.0, 3.0, 10.0] {
            let m = avg(&|s| run(Method::Mst, eps, delta, s));
            let pb = avg(&|s| run(Method::PrivBayes, eps, delta, s));
            let t2 = avg(&|s| run(Method::Tree2, eps, delta, s));
            let ind = avg(&|s| {
                let mut rng = seeded_rng(5000 + s);
                let sample = independent(&cards, &data, eps, delta, &mut rng);
                let (a, b) = tvd(&cards, &data, &sample);
                (a, b, 0.0)
            });
            println!(
                "{:>5} {:>6} | {:.4} / {:.4} | {:.4} / {:.4} | {:.4} / {:.4} | {:.4} / {:.4} | {:>6.1} ms | {:>6.1} ms",
                eps,
                delta,
                m.0,
                m.1,
                pb.0,
                pb.1,
                t2.0,
                t2.1,
                ind.0,
                ind.1,
                m.2 * 1e3,
                t2.2 * 1e3
            );
        }
    }
    // timing at the size of a binned census table: 14 columns, random codes
    let big = vec![20, 9, 16, 16, 7, 15, 6, 5, 2, 20, 20, 20, 42, 2];
    let mut rng = seeded_rng(99);
    let rows: Vec<u32> = (0..N).flat_map(|_| big.iter().map(|&c| rand::Rng::random_range(&mut rng, 0..c as u32)).collect::<Vec<_>>()).collect();
    for (method, delta) in [(Method::Mst, 0.0), (Method::Mst, 1e-9), (Method::Tree2, 0.0), (Method::Tree2, 1e-9)] {
        let spec = SyntheticSpec::new(&SyntheticParams::new(big.clone(), 1.0, delta, method)).expect("valid");
        let t = Instant::now();
        let mut counts = spec.counter();
        for r in rows.chunks_exact(big.len()) {
            counts.push(r);
        }
        let scan = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let model = spec.fit(&mut rng, &counts, &mut || Ok(())).expect("fit");
        let fit = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let _ = model.sample(&mut rng, N, &mut || Ok(())).expect("sample");
        println!(
            "{} 14 columns {big:?}, δ = {delta}: {} count bytes; scan {:.1} ms, fit {:.1} ms, sample of {N} rows {:.1} ms",
            method.name(),
            spec.count_bytes(),
            scan * 1e3,
            fit * 1e3,
            t.elapsed().as_secs_f64() * 1e3
        );
    }
}
