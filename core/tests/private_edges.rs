//! Private bin edges of the synthetic release (PrivateEdges: `bin_edges => '{"x": "private"}'`):
//! the chosen encoding has exactly `bins` bins whose edges are fine-grid edges in order, for any
//! counts; the first edge's distribution against permute-and-flip's exact one (χ² at α = 1e-6, with
//! the exponential mechanism's as a control that must be rejected); the exact privacy loss of the
//! whole choice (every edge, one after the other) over every small neighbouring pair, with a
//! negative control at twice the rate; and edges at the quantiles when ε is large.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::*;
use pg_dp_core::noise::rng::seeded_rng;
use pg_dp_core::release::synthetic::columns::{ColumnCode, PrivateEdges};
use rand::Rng;

/// Edge indices (into the fine grid's edges) of a chosen encoding.
fn indices(fine: &ColumnCode, chosen: &ColumnCode) -> Vec<usize> {
    match (fine, chosen) {
        (ColumnCode::Real { edges: f }, ColumnCode::Real { edges: c }) => c.iter().map(|e| f.iter().position(|x| x == e).expect("a fine edge")).collect(),
        (ColumnCode::Integer { edges: f }, ColumnCode::Integer { edges: c }) => c.iter().map(|e| f.iter().position(|x| x == e).expect("a fine edge")).collect(),
        _ => panic!("kind changed"),
    }
}

#[test]
fn private_edges_are_exactly_bins_fine_edges_in_order() {
    let mut rng = seeded_rng(4100);
    let cases = [
        (ColumnCode::real_bins(0.0, 100.0, PrivateEdges::GRID).unwrap(), 10),
        (ColumnCode::integer_bins(17, 90, PrivateEdges::GRID).unwrap(), 8), // 74 integers: 74 fine bins
        (ColumnCode::integer_bins(0, 1_000_000, PrivateEdges::GRID).unwrap(), 4096),
        (ColumnCode::real_bins(-1.0, 1.0, 8).unwrap(), 8),
    ];
    for (fine, bins) in cases {
        let pe = PrivateEdges::new(fine.clone(), bins, 0.05).unwrap();
        let m = pe.fine_bins();
        // empty, one row, all rows in one fine bin, random
        let mut one = vec![0u64; m];
        one[m / 3] = 1;
        let mut pile = vec![0u64; m];
        pile[m - 1] = 10_000;
        let random: Vec<u64> = (0..m).map(|_| rng.random_range(0..50)).collect();
        for counts in [vec![0u64; m], one, pile, random] {
            let chosen = pe.choose(&mut rng, &counts, &mut || Ok(())).unwrap();
            assert_eq!(chosen.cardinality(), bins + 1, "bins plus the NULL code");
            let idx = indices(&fine, &chosen);
            assert_eq!(idx.first(), Some(&0));
            assert_eq!(idx.last(), Some(&m));
            assert!(idx.windows(2).all(|w| w[0] < w[1]), "{idx:?}");
        }
    }
    // more bins than fine bins: refused, naming the argument
    let few = ColumnCode::integer_bins(1, 5, PrivateEdges::GRID).unwrap();
    assert!(PrivateEdges::new(few, 6, 1.0).is_err());
    assert!(PrivateEdges::new(ColumnCode::categorical(3).unwrap(), 2, 1.0).is_err());
}

/// The exact distribution of edge j (as a fine-edge index) given the previous edge `prev`:
/// permute-and-flip on −|bins·L(i) − j·n| over i in prev + 1 ..= m − (bins − j), at `rate`·ε/(2·max(j,
/// bins − j)). Returns (first index, probabilities).
fn edge_pmf(counts: &[u64], bins: usize, j: usize, prev: usize, eps: f64, rate: f64) -> (usize, Vec<f64>) {
    let m = counts.len();
    let below: Vec<f64> = (0..=m).map(|i| counts[..i].iter().sum::<u64>() as f64).collect();
    let n = below[m];
    let (lo, hi) = (prev + 1, m - (bins - j));
    let d: Vec<f64> = (lo..=hi).map(|i| (bins as f64 * below[i] - j as f64 * n).abs()).collect();
    let best = d.iter().cloned().fold(f64::INFINITY, f64::min);
    let q = rate * eps / (2.0 * (j.max(bins - j)) as f64);
    (lo, pf_pmf_of(&d.iter().map(|x| (-q * (x - best)).exp()).collect::<Vec<_>>()))
}

/// The exact joint distribution of all inner edges, as (edge indices, probability).
fn joint(counts: &[u64], bins: usize, eps: f64, rate: f64) -> Vec<(Vec<usize>, f64)> {
    let mut out = vec![(vec![0usize], 1.0)];
    for j in 1..bins {
        let mut next = Vec::new();
        for (path, p) in out {
            let (lo, probs) = edge_pmf(counts, bins, j, *path.last().unwrap(), eps, rate);
            for (k, q) in probs.iter().enumerate() {
                let mut e = path.clone();
                e.push(lo + k);
                next.push((e, p * q));
            }
        }
        out = next;
    }
    out
}

/// The largest |ln P(edges | a) − ln P(edges | b)| over every fine histogram a of at most `max_n` rows
/// on `m` fine bins and every b = a plus one row.
fn worst_loss(m: usize, bins: usize, max_n: u64, eps: f64, rate: f64) -> f64 {
    fn histograms(m: usize, n: u64) -> Vec<Vec<u64>> {
        if m == 1 {
            return vec![vec![n]];
        }
        (0..=n).flat_map(|k| histograms(m - 1, n - k).into_iter().map(move |mut h| {
            h.push(k);
            h
        })).collect()
    }
    let mut worst: f64 = 0.0;
    for n in 0..max_n {
        for a in histograms(m, n) {
            let pa = joint(&a, bins, eps, rate);
            for k in 0..m {
                let mut b = a.clone();
                b[k] += 1;
                let pb = joint(&b, bins, eps, rate);
                for ((ea, x), (eb, y)) in pa.iter().zip(&pb) {
                    assert_eq!(ea, eb);
                    worst = worst.max((x.ln() - y.ln()).abs());
                }
            }
        }
    }
    worst
}

#[test]
fn private_edges_lose_at_most_their_epsilon_on_every_small_neighbouring_pair() {
    // 3 bins (two edges, each at ε per edge: 2ε in all) on 5 fine bins, every histogram of up to 6 rows
    for eps in [0.3, 1.0, 2.5] {
        let worst = worst_loss(5, 3, 7, eps, 1.0);
        let loud = worst_loss(5, 3, 7, eps, 2.0);
        eprintln!("private edges, 3 bins, ε per edge {eps}: worst loss {worst:.4} of {:.4}; at twice the rate {loud:.4}", 2.0 * eps);
        assert!(worst <= 2.0 * eps * (1.0 + 1e-9), "ε per edge {eps}: loss {worst}");
        assert!(worst > 0.5 * eps, "ε per edge {eps}: the search saw little of the bound ({worst})");
        // negative control: the rate without the factor 2 loses more than the claim somewhere
        assert!(loud > 2.0 * eps * 1.05, "ε per edge {eps}: twice the rate went unnoticed ({loud})");
    }
}

#[test]
fn the_first_private_edge_matches_its_exact_distribution() {
    // 2 bins: one edge, the median's, among 11 fine edges of 12 fine bins; 40 rows
    let fine = ColumnCode::real_bins(0.0, 12.0, 12).unwrap();
    let counts: Vec<u64> = vec![1, 3, 0, 6, 9, 2, 0, 4, 8, 5, 1, 1];
    let pe = PrivateEdges::new(fine.clone(), 2, 0.4).unwrap();
    let mut rng = seeded_rng(4200);
    let xs: Vec<i64> = (0..200_000).map(|_| indices(&fine, &pe.choose(&mut rng, &counts, &mut || Ok(())).unwrap())[1] as i64).collect();
    let (lo, probs) = edge_pmf(&counts, 2, 1, 0, 0.4, 1.0);
    let at = |probs: Vec<f64>| move |i: i64| if i >= lo as i64 && ((i as usize) - lo) < probs.len() { probs[i as usize - lo] } else { 0.0 };
    let mode = lo as i64 + (0..probs.len()).max_by(|&a, &b| probs[a].total_cmp(&probs[b])).unwrap() as i64;
    let g = chi2_gof(&xs, at(probs), mode, 20.0);
    // control: the exponential mechanism with the same utility and rate
    let d: Vec<f64> = (1..=11).map(|i| (2.0 * counts[..i].iter().sum::<u64>() as f64 - 40.0).abs()).collect();
    let best = d.iter().cloned().fold(f64::INFINITY, f64::min);
    let w: Vec<f64> = d.iter().map(|x| (-0.4 / 2.0 * (x - best)).exp()).collect();
    let total: f64 = w.iter().sum();
    let em = chi2_gof(&xs, at(w.iter().map(|x| x / total).collect()), mode, 20.0);
    eprintln!("first private edge: χ² = {:.1}, df = {}, p-value = {:.3e}; against the exponential mechanism: p-value = {:.3e}", g.stat, g.df, g.p_value, em.p_value);
    assert!(g.df >= 3 && !g.rejects(ALPHA), "{g:?}");
    assert!(em.rejects(ALPHA), "the exponential mechanism's distribution went unnoticed: {em:?}");
}

#[test]
fn private_edges_sit_at_the_quantiles_when_epsilon_is_large() {
    // 10,000 rows, a ramp over 4096 fine bins of [0, 1000]: at ε = 10 per edge the 4 quartile and
    // quintile edges are within a few fine bins of the exact ones
    let fine = ColumnCode::real_bins(0.0, 1000.0, PrivateEdges::GRID).unwrap();
    let counts: Vec<u64> = (0..PrivateEdges::GRID).map(|i| (i as u64 * 5) / PrivateEdges::GRID as u64).collect();
    let n: u64 = counts.iter().sum();
    let pe = PrivateEdges::new(fine.clone(), 5, 10.0).unwrap();
    let mut rng = seeded_rng(4300);
    let idx = indices(&fine, &pe.choose(&mut rng, &counts, &mut || Ok(())).unwrap());
    for (j, &i) in idx[1..5].iter().enumerate() {
        let below: u64 = counts[..i].iter().sum();
        let want = (j as u64 + 1) * n / 5;
        eprintln!("edge {}: fine edge {i}, {below} rows below, target {want}", j + 1);
        assert!(below.abs_diff(want) <= 10, "edge {}: {below} rows below, want {want}", j + 1);
    }
}

// The edges are chosen one after the other, up to 4,096 exact coins each: the caller's interrupt check
// runs before each, and stops the choice when it asks to.
#[test]
fn choosing_private_edges_checks_for_interrupts_before_each_edge() {
    let fine = ColumnCode::real_bins(0.0, 1000.0, PrivateEdges::GRID).unwrap();
    let counts: Vec<u64> = (0..PrivateEdges::GRID).map(|i| (i % 7) as u64).collect();
    let pe = PrivateEdges::new(fine, 64, 0.5).unwrap();
    let mut calls = 0;
    assert!(pe.choose(&mut seeded_rng(4400), &counts, &mut || {
        calls += 1;
        Ok(())
    })
    .is_ok());
    assert_eq!(calls, 63, "one check per inner edge");
    for stop_at in [1, 30, 63] {
        let mut n = 0;
        let r = pe.choose(&mut seeded_rng(4400), &counts, &mut || {
            n += 1;
            if n >= stop_at { Err(pg_dp_core::release::dprp::Interrupted) } else { Ok(()) }
        });
        assert!(r.is_err() && n == stop_at);
    }
}
