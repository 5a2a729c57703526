//! The faithfulness criterion of the synthetic release (docs/privacy/synthetic-criteria.md,
//! "Faithfulness"): the flow computes a maximum one-to-one matching of the rows (checked against a
//! row-level augmenting-path matching, exact and hashed keys), one row of D moves it by at most one
//! (with a negative control: the count of synthetic rows that merely have a real row nearby moves by
//! many), its noise is discrete Laplace of scale 1/ε, and the flow stops when asked to.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::*;
use pg_dp_core::noise::rng::seeded_rng;
use pg_dp_core::release::criteria::faithfulness::{matching, Keys};
use pg_dp_core::release::criteria::*;
use rand::Rng;

fn counts_of(keys: &Keys, rows: &[Vec<u32>]) -> Vec<u32> {
    let mut c = vec![0u32; keys.keys()];
    for r in rows {
        c[keys.key(r) as usize] += 1;
    }
    c
}

fn within_one(a: &[u32], b: &[u32]) -> bool {
    a.iter().zip(b).filter(|(x, y)| x != y).count() <= 1
}

/// Every type within one column of `s`.
fn ball(cards: &[u32], s: &[u32]) -> Vec<Vec<u32>> {
    let mut out = vec![s.to_vec()];
    for (j, &c) in cards.iter().enumerate() {
        for v in 0..c {
            if v != s[j] {
                let mut t = s.to_vec();
                t[j] = v;
                out.push(t);
            }
        }
    }
    out
}

/// Maximum bipartite matching of the rows (Kuhn's augmenting paths), with `ok(real, synthetic)`.
fn row_matching(real: &[Vec<u32>], synth: &[Vec<u32>], ok: impl Fn(&[u32], &[u32]) -> bool) -> u64 {
    let adj: Vec<Vec<usize>> = synth.iter().map(|s| (0..real.len()).filter(|&r| ok(&real[r], s)).collect()).collect();
    let mut owner: Vec<Option<usize>> = vec![None; real.len()];
    fn try_kuhn(s: usize, adj: &[Vec<usize>], seen: &mut [bool], owner: &mut [Option<usize>]) -> bool {
        for &r in &adj[s] {
            if !seen[r] {
                seen[r] = true;
                if owner[r].is_none() || try_kuhn(owner[r].unwrap(), adj, seen, owner) {
                    owner[r] = Some(s);
                    return true;
                }
            }
        }
        false
    }
    let mut size = 0;
    for s in 0..synth.len() {
        let mut seen = vec![false; real.len()];
        if try_kuhn(s, &adj, &mut seen, &mut owner) {
            size += 1;
        }
    }
    size
}

fn random_rows(rng: &mut impl Rng, cards: &[u32], n: usize, skew: bool) -> Vec<Vec<u32>> {
    (0..n)
        .map(|_| {
            cards
                .iter()
                .map(|&c| if skew { (rng.random_range(0..c) * rng.random_range(0..c)) / c.max(1) } else { rng.random_range(0..c) })
                .collect()
        })
        .collect()
}

fn flow_size(keys: &Keys, counts: &[u32], synth: &[Vec<u32>], d: usize) -> u64 {
    let codes: Vec<u32> = synth.iter().flatten().copied().collect();
    matching(keys, counts, &codes, d, &mut || Ok(())).unwrap()
}

#[test]
fn the_flow_is_a_maximum_matching_of_the_rows_exact_keys() {
    let mut rng = seeded_rng(31_000);
    let mut reached_greedy_gap = false;
    for trial in 0..600 {
        let cards: Vec<u32> = (0..rng.random_range(1..=4)).map(|_| rng.random_range(1..=4)).collect();
        let keys = Keys::new(&cards);
        assert!(!keys.hashed());
        let skew = trial % 2 == 0;
        let real = { let n = rng.random_range(0..=25); random_rows(&mut rng, &cards, n, skew) };
        let synth = { let n = rng.random_range(0..=25); random_rows(&mut rng, &cards, n, !skew) };
        let counts = counts_of(&keys, &real);
        let want = row_matching(&real, &synth, within_one);
        assert_eq!(flow_size(&keys, &counts, &synth, cards.len()), want, "cards {cards:?} real {real:?} synth {synth:?}");
        // the greedy start alone (each synthetic row to the first free compatible real row, types in
        // order) is not always maximum: the augmenting phase is exercised
        let mut used = vec![false; real.len()];
        let mut sorted = synth.clone();
        sorted.sort();
        let mut greedy = 0;
        for s in &sorted {
            if let Some(r) = (0..real.len()).find(|&r| !used[r] && within_one(&real[r], s)) {
                used[r] = true;
                greedy += 1;
            }
        }
        reached_greedy_gap |= greedy < want;
    }
    assert!(reached_greedy_gap, "no instance where a greedy matching falls short: the test would not catch a flow that stops early");
}

#[test]
fn hashed_keys_match_by_key_and_never_below_the_exact_matching() {
    // 4096 · 4096 · 3 types: above 2^23, so the counts are hashed
    let cards = [4096u32, 4096, 3];
    let keys = Keys::new(&cards);
    assert!(keys.hashed() && keys.keys() == 1 << 23);
    let mut rng = seeded_rng(31_100);
    for _ in 0..40 {
        // codes drawn from a small corner so that pairs within one column are common
        let small = [6u32, 6, 3];
        let real = { let n = rng.random_range(0..=20); random_rows(&mut rng, &small, n, true) };
        let synth = { let n = rng.random_range(1..=15); random_rows(&mut rng, &small, n, false) };
        let counts = counts_of(&keys, &real);
        let got = flow_size(&keys, &counts, &synth, 3);
        // the relation the flow uses: the real row's key is the key of a type in the synthetic row's ball
        let by_key = row_matching(&real, &synth, |r, s| {
            let kr = keys.key(r);
            ball(&cards, s).iter().any(|t| keys.key(t) == kr)
        });
        assert_eq!(got, by_key);
        assert!(got >= row_matching(&real, &synth, within_one));
    }
}

#[test]
fn one_row_moves_the_matching_by_at_most_one_and_mere_coverage_by_many() {
    let cards = [3u32, 4, 2, 5];
    let keys = Keys::new(&cards);
    let d = cards.len();
    let mut rng = seeded_rng(31_200);
    let mut all_types = vec![vec![]];
    for &c in &cards {
        all_types = all_types.into_iter().flat_map(|t: Vec<u32>| (0..c).map(move |v| [t.clone(), vec![v]].concat())).collect();
    }
    let (mut worst, mut worst_coverage) = (0u64, 0u64);
    for _ in 0..60 {
        let real = { let n = rng.random_range(0..=60); random_rows(&mut rng, &cards, n, true) };
        let synth = { let n = rng.random_range(1..=60); random_rows(&mut rng, &cards, n, true) };
        let counts = counts_of(&keys, &real);
        let base = flow_size(&keys, &counts, &synth, d);
        let coverage = |counts: &[u32]| synth.iter().filter(|s| ball(&cards, s).iter().any(|t| counts[keys.key(t) as usize] > 0)).count() as u64;
        let cov0 = coverage(&counts);
        for x in &all_types {
            let k = keys.key(x) as usize;
            let mut added = counts.clone();
            added[k] += 1;
            let a = flow_size(&keys, &added, &synth, d);
            worst = worst.max(a.abs_diff(base));
            worst_coverage = worst_coverage.max(coverage(&added).abs_diff(cov0));
            if counts[k] > 0 {
                let mut removed = counts.clone();
                removed[k] -= 1;
                let r = flow_size(&keys, &removed, &synth, d);
                worst = worst.max(r.abs_diff(base));
                worst_coverage = worst_coverage.max(coverage(&removed).abs_diff(cov0));
            }
        }
    }
    eprintln!("largest change of the matching {worst}, of the coverage count {worst_coverage}");
    assert_eq!(worst, 1, "sensitivity 1, and reached");
    // negative control: without the one-to-one constraint one real row changes many synthetic rows
    assert!(worst_coverage > 1);
}

#[test]
fn faithfulness_noise_is_discrete_laplace_with_scale_one_over_epsilon() {
    let eps = 0.6;
    let cards = vec![3u32, 4, 2];
    let spec = CriteriaSpec::new(CriteriaParams { cardinalities: cards.clone(), numeric: vec![], criteria: vec![CriterionParams::Faithfulness { threshold: 0.5, epsilon: eps }] }).unwrap();
    let mut rng = seeded_rng(31_300);
    let mut real = spec.start();
    for r in random_rows(&mut rng, &cards, 300, true) {
        real.push(&r, &[]);
    }
    let codes: Vec<u32> = random_rows(&mut rng, &cards, 80, false).into_iter().flatten().collect();
    let cand = Candidate::new(&spec, &codes, &[]).unwrap();
    let exact = spec.loop_statistics(&real, &cand)[0].values[0];
    assert!(exact > 0 && exact <= 80);
    let hoisted = spec.release_hoisted(&mut seeded_rng(1), &real);
    let xs: Vec<i64> = (0..200_000)
        .map(|_| (spec.evaluate(&mut rng, &real, &hoisted, &cand, &mut || Ok(())).unwrap().results[0].noisy_statistic.unwrap() - exact) as i64)
        .collect();
    let pmf = |b: f64| {
        let p = (-1.0 / b).exp();
        move |x: i64| (1.0 - p) / (1.0 + p) * p.powi(x.unsigned_abs() as i32)
    };
    let b = 1.0 / f64::from_bits(eps.to_bits() - 1);
    let g = chi2_gof(&xs, pmf(b), 0, 20.0);
    eprintln!("faithfulness noise vs DLap({b:.4}): chi2 {:.1}, df {}, p {:.3e}", g.stat, g.df, g.p_value);
    assert!(!g.rejects(ALPHA));
    // negative control: the scale of ε = 0.66 (10% off) is rejected
    assert!(chi2_gof(&xs, pmf(1.0 / 0.66), 0, 20.0).rejects(ALPHA));
    // the value is the noisy size over m, compared with the threshold
    let e = spec.evaluate(&mut rng, &real, &hoisted, &cand, &mut || Ok(())).unwrap();
    let r = &e.results[0];
    assert_eq!(r.value, r.noisy_statistic.unwrap() as f64 / 80.0);
    assert_eq!(r.passed, r.value >= 0.5);
}

/// Six columns of 4 codes; n real rows whose first three columns are equal, and the last three too;
/// the faithfulness criterion alone. Returns the spec, D's statistics, its rows and the hoisted
/// release (empty), and the random stream.
fn triples(n: usize, threshold: f64, epsilon: f64, seed: u64) -> (CriteriaSpec, RealStatistics, Vec<Vec<u32>>, HoistedStatistics, pg_dp_core::noise::rng::DpRng) {
    let spec = CriteriaSpec::new(CriteriaParams { cardinalities: vec![4u32; 6], numeric: vec![], criteria: vec![CriterionParams::Faithfulness { threshold, epsilon }] }).unwrap();
    let mut rng = seeded_rng(seed);
    let rows: Vec<Vec<u32>> = (0..n)
        .map(|_| {
            let (a, b) = (rng.random_range(0..4), rng.random_range(0..4));
            vec![a, a, a, b, b, b]
        })
        .collect();
    let mut real = spec.start();
    for r in &rows {
        real.push(r, &[]);
    }
    let hoisted = spec.release_hoisted(&mut rng, &real);
    (spec, real, rows, hoisted, rng)
}

/// A row two columns from every real type of [`triples`]: one code of each triple moved.
fn two_away(r: &[u32]) -> Vec<u32> {
    vec![r[0], (r[1] + 1) % 4, r[2], r[3], (r[4] + 1) % 4, r[5]]
}

#[test]
fn a_copy_passes_and_rows_two_columns_away_fail() {
    let (spec, real, rows, hoisted, mut rng) = triples(2000, 0.9, 5.0, 31_500);
    let copy: Vec<u32> = rows.iter().flatten().copied().collect();
    let good = spec.evaluate(&mut rng, &real, &hoisted, &Candidate::new(&spec, &copy, &[]).unwrap(), &mut || Ok(())).unwrap();
    assert!(good.passed && (good.results[0].value - 1.0).abs() < 0.01, "{good:?}");
    // each synthetic row breaks both triples: at least two columns from every real type
    let far: Vec<u32> = rows.iter().flat_map(|r| two_away(r)).collect();
    let bad = spec.evaluate(&mut rng, &real, &hoisted, &Candidate::new(&spec, &far, &[]).unwrap(), &mut || Ok(())).unwrap();
    assert!(!bad.passed && bad.results[0].value.abs() < 0.01, "{bad:?}");
}

#[test]
fn a_candidate_above_the_row_cap_is_matched_through_a_uniform_subset() {
    use pg_dp_core::release::criteria::faithfulness::MAX_ROWS;
    let cards = vec![4u32; 6];
    let (spec, real, rows, hoisted, mut rng) = triples(30_000, 0.4, 10.0, 31_600);
    // 30,000 synthetic rows: the even ones copies, the odd ones two columns from every real type
    let half: Vec<u32> = rows.iter().enumerate().flat_map(|(i, r)| if i % 2 == 0 { r.clone() } else { two_away(r) }).collect();
    let cand = Candidate::new(&spec, &half, &[]).unwrap();
    let mut values = Vec::new();
    for _ in 0..20 {
        let e = spec.evaluate(&mut rng, &real, &hoisted, &cand, &mut || Ok(())).unwrap();
        let r = &e.results[0];
        // the value is over the MAX_ROWS rows matched
        assert!((r.value - r.noisy_statistic.unwrap() as f64 / MAX_ROWS as f64).abs() < 1e-12);
        values.push(r.value);
    }
    // a uniform subset holds about half copies: binomial(10,000, 1/2)/10,000 has sd 0.005
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    eprintln!("subset values: mean {mean:.4}, {values:?}");
    assert!(values.iter().all(|v| (v - 0.5).abs() < 0.03), "{values:?}");
    // and a fresh subset each time (a fixed one would repeat its value up to the noise of scale 0.1)
    assert!(values.iter().any(|v| (v - values[0]).abs() > 0.001));
    // the flow's memory bound stops growing with m past the cap, but for the subset's indices
    assert_eq!(faithfulness::flow_bytes(&cards, 40_000) - faithfulness::flow_bytes(&cards, 30_000), 4 * 10_000);
}

#[test]
fn the_flow_stops_when_asked() {
    let cards = [5u32, 5, 5];
    let keys = Keys::new(&cards);
    let mut rng = seeded_rng(31_400);
    let counts = counts_of(&keys, &random_rows(&mut rng, &cards, 5000, true));
    let codes: Vec<u32> = random_rows(&mut rng, &cards, 3000, false).into_iter().flatten().collect();
    let mut calls = 0;
    assert!(matching(&keys, &counts, &codes, 3, &mut || {
        calls += 1;
        Ok(())
    })
    .is_ok());
    assert!(calls >= 2);
    for stop_at in 1..=calls {
        let mut n = 0;
        let r = matching(&keys, &counts, &codes, 3, &mut || {
            n += 1;
            if n >= stop_at { Err(pg_dp_core::release::dprp::Interrupted) } else { Ok(()) }
        });
        assert!(r.is_err() && n == stop_at);
    }
}
