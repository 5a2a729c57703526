//! Smooth sensitivity of quantiles: the O(n log n) algorithm against the definition, the reachable
//! range against a brute force over additions and removals, and the properties the privacy argument
//! needs (docs/privacy/smooth-sensitivity.md), on many random small inputs with ties, all-equal data,
//! n = 0, 1, 2 and values at the bounds; and the smooth bound against the true smooth sensitivity
//! computed by exhaustive search over the data sets within a few steps.
use pg_dp_core::noise::rng::seeded_rng;
use pg_dp_core::mechanisms::smooth::{
    local_sensitivity, ls_table, quantile, range_table, rank, reach, smooth_sensitivity, window_sensitivity,
};
use rand::Rng;
use std::collections::HashSet;

const L: f64 = -3.0;
const U: f64 = 7.0;

/// max over k of e^(−kβ)·table[k], for a table that reaches U − L by its last entry.
fn smooth_of(table: &[f64], beta: f64) -> f64 {
    table.iter().enumerate().map(|(k, a)| a * (-(k as f64) * beta).exp()).fold(0.0, f64::max)
}

/// The definition of the window bound: max over k of e^(−kβ)·A^(k); A^(k) = U − L for k ≥ n + 1.
fn brute(sorted: &[f64], p: f64, beta: f64) -> f64 {
    smooth_of(&ls_table(sorted, p, L, U, sorted.len() + 1), beta)
}

/// The definition of the range bound: R^(k) reaches U − L within 2(n + 2) steps (the rank moves by at
/// least 1/2 a position per step towards each end).
fn brute_range(sorted: &[f64], p: f64, beta: f64) -> f64 {
    smooth_of(&range_table(sorted, p, L, U, 2 * sorted.len() + 4), beta)
}

fn random_data<R: Rng>(rng: &mut R) -> Vec<f64> {
    let n = rng.random_range(0..14);
    let kind = rng.random_range(0..4);
    let mut v: Vec<f64> = (0..n)
        .map(|_| match kind {
            0 => rng.random_range(0..4) as f64,                   // many ties
            1 => [L, U, 2.0][rng.random_range(0..3)],              // values at the bounds
            2 => 1.5,                                              // all equal
            _ => rng.random_range(L..U),                           // continuous
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

fn random_p<R: Rng>(rng: &mut R) -> f64 {
    [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0, rng.random::<f64>()][rng.random_range(0..8)]
}

/// Every neighbour of x: each row removed, and a row added at each value that can matter.
fn neighbours(x: &[f64]) -> Vec<Vec<f64>> {
    let mut out = Vec::new();
    for i in 0..x.len() {
        let mut y = x.to_vec();
        y.remove(i);
        out.push(y);
    }
    let mut candidates = vec![L, U];
    candidates.extend_from_slice(x);
    for w in x.windows(2) {
        candidates.push((w[0] + w[1]) / 2.0);
    }
    candidates.push((L + x.first().copied().unwrap_or(U)) / 2.0);
    for c in candidates {
        let mut y = x.to_vec();
        y.push(c);
        y.sort_by(f64::total_cmp);
        out.push(y);
    }
    out
}

/// The true local sensitivity of the quantile, over all neighbours.
fn true_ls(x: &[f64], p: f64) -> f64 {
    let f = quantile(x, p, L, U);
    neighbours(x).iter().map(|y| (quantile(y, p, L, U) - f).abs()).fold(0.0, f64::max)
}

#[test]
fn rank_moves_by_at_most_one_when_a_row_is_added() {
    for n in 0..500 {
        for p in [0.0, 0.01, 0.3, 0.5, 0.77, 0.999, 1.0] {
            let (a, b) = (rank(n, p), rank(n + 1, p));
            assert!(b == a || b == a + 1, "n {n} p {p}: {a} -> {b}");
            assert!(a <= n + 1);
        }
    }
    assert_eq!(rank(3, 0.5), 2); // the middle of 3 rows
    assert_eq!(rank(0, 0.5), 1); // no rows: between the bounds... index 1 is the upper bound
}

#[test]
fn fast_algorithm_equals_the_definition() {
    let mut rng = seeded_rng(1);
    for case in 0..20_000 {
        let x = random_data(&mut rng);
        let p = random_p(&mut rng);
        let beta = [1e-3, 0.05, 0.3, 1.0, 5.0][case % 5] * rng.random_range(0.5..1.5);
        let fast = window_sensitivity(&x, p, L, U, beta);
        let slow = brute(&x, p, beta);
        assert!((fast - slow).abs() <= 1e-12 * slow.max(1.0), "x {x:?} p {p} beta {beta}: fast {fast} brute {slow}");
        // the release's bound: the smaller of the window and range bounds
        let both = smooth_sensitivity(&x, p, L, U, beta);
        let slow = slow.min(brute_range(&x, p, beta));
        assert!((both - slow).abs() <= 1e-12 * slow.max(1.0), "x {x:?} p {p} beta {beta}: {both} vs {slow}");
    }
}

#[test]
fn a0_bounds_the_true_local_sensitivity() {
    let mut rng = seeded_rng(2);
    for _ in 0..5_000 {
        let x = random_data(&mut rng);
        let p = random_p(&mut rng);
        let ls = true_ls(&x, p);
        let a0 = local_sensitivity(&x, p, L, U);
        assert!(ls <= a0 + 1e-12, "x {x:?} p {p}: true LS {ls} > A0 {a0}");
    }
}

#[test]
fn window_and_range_bound_the_local_sensitivity_at_distance_k() {
    // a random walk of k additions and removals: the true local sensitivity at its end never exceeds
    // A^(k) or R^(k) of its start
    let mut rng = seeded_rng(3);
    for _ in 0..5_000 {
        let x = random_data(&mut rng);
        let p = random_p(&mut rng);
        let k = rng.random_range(0..5);
        let (windows, ranges) = (ls_table(&x, p, L, U, k), range_table(&x, p, L, U, k));
        let mut y = x.clone();
        for _ in 0..k {
            let ns = neighbours(&y);
            y = ns[rng.random_range(0..ns.len())].clone();
        }
        let ls = true_ls(&y, p);
        assert!(ls <= windows[k] + 1e-12, "x {x:?} -> y {y:?}, p {p}, k {k}: LS(y) {ls} > A^(k)(x) {}", windows[k]);
        assert!(ls <= ranges[k] + 1e-12, "x {x:?} -> y {y:?}, p {p}, k {k}: LS(y) {ls} > R^(k)(x) {}", ranges[k]);
    }
}

#[test]
fn smooth_sensitivity_is_beta_smooth_and_bounds_ls() {
    let mut rng = seeded_rng(4);
    let mut worst = 0.0_f64;
    for case in 0..5_000 {
        let x = random_data(&mut rng);
        let p = random_p(&mut rng);
        let beta = [0.01, 0.1, 0.5, 2.0][case % 4];
        let s = smooth_sensitivity(&x, p, L, U, beta);
        assert!(true_ls(&x, p) <= s + 1e-12);
        for y in neighbours(&x) {
            let sy = smooth_sensitivity(&y, p, L, U, beta);
            // S(x) <= e^β S(y) for neighbours, both ways
            assert!(s <= beta.exp() * sy * (1.0 + 1e-12), "x {x:?} y {y:?} p {p} beta {beta}: {s} vs {sy}");
            if sy > 0.0 {
                worst = worst.max((s / sy).ln() / beta);
            }
        }
    }
    // the bound is used, not just satisfied: some neighbours change S by close to e^β
    assert!(worst > 0.5, "largest observed log-ratio / beta: {worst}");
}

#[test]
fn degenerate_inputs() {
    // no rows: the window spans the bounds
    assert_eq!(local_sensitivity(&[], 0.5, L, U), U - L);
    assert!((smooth_sensitivity(&[], 0.5, L, U, 0.1) - (U - L)).abs() < 1e-12);
    // all rows equal, many of them: tiny sensitivity, smooth bound decays towards it
    let x = vec![2.0; 1000];
    assert_eq!(local_sensitivity(&x, 0.5, L, U), 0.0);
    let s = smooth_sensitivity(&x, 0.5, L, U, 0.1);
    let expect = (U - L) * (-0.1f64 * 500.0).exp(); // reach a bound: about 500 removals
    assert!(s > 0.0 && s < 1e-15 * (U - L) + expect * 10.0, "{s} vs about {expect}");
    // a large input runs (n log n) and agrees with the definition restricted to small k where it matters
    let mut rng = seeded_rng(5);
    let mut big: Vec<f64> = (0..200_000).map(|_| rng.random_range(L..U)).collect();
    big.sort_by(f64::total_cmp);
    let s = window_sensitivity(&big, 0.5, L, U, 0.05);
    let table = ls_table(&big, 0.5, L, U, 600);
    let partial = table.iter().enumerate().map(|(k, a)| a * (-(k as f64) * 0.05).exp()).fold(0.0, f64::max);
    // beyond k = 600 the factor e^(−30)·(U − L) is far below the maximum found
    assert!((s - partial).abs() <= 1e-12 * s, "{s} vs {partial}");
}

#[test]
fn reach_equals_the_brute_force_extremes() {
    // lo_j = min m(n + r − s) − r and hi_j = max m(n + r − s) + s over r + s ≤ j, s ≤ n + r
    for n in 0..40usize {
        for p in [0.0, 0.01, 0.1, 0.3, 0.5, 0.5 + 1e-12, 0.7, 0.9, 0.99, 1.0, 1.0 / 3.0] {
            for j in 0..25usize {
                let (mut lo, mut hi) = (i64::MAX, i64::MIN);
                for r in 0..=j {
                    for s in 0..=(j - r) {
                        if s > n + r {
                            continue;
                        }
                        let m = rank(n + r - s, p) as i64;
                        lo = lo.min(m - r as i64);
                        hi = hi.max(m + s as i64);
                    }
                }
                assert_eq!(reach(n, p, j), (lo, hi), "n {n} p {p} j {j}");
            }
        }
    }
    // the rank moves by at most max(p, 1 − p) per step, so the range is narrower than the windows'
    let (lo, hi) = reach(1001, 0.5, 100);
    assert!(hi - lo <= 102, "{lo}..{hi}");
    let (lo, hi) = reach(1001, 0.9, 100);
    assert!((lo, hi) >= (901 - 91, 901 + 89) && hi - lo <= 182, "{lo}..{hi}");
}

/// Every data set within `k` additions and removals of x (additions at the values that can matter:
/// the bounds, x's values and the midpoints between them and the bounds), sorted, without duplicates.
fn ball(x: &[f64], k: usize) -> Vec<Vec<f64>> {
    let key = |v: &Vec<f64>| v.iter().map(|f| f.to_bits()).collect::<Vec<u64>>();
    let mut seen: HashSet<Vec<u64>> = HashSet::from([key(&x.to_vec())]);
    let mut frontier = vec![x.to_vec()];
    let mut all = frontier.clone();
    for _ in 0..k {
        let mut next = Vec::new();
        for y in &frontier {
            for z in neighbours(y) {
                if seen.insert(key(&z)) {
                    next.push(z);
                }
            }
        }
        all.extend(next.iter().cloned());
        frontier = next;
    }
    all
}

#[test]
fn smooth_bound_dominates_the_exhaustive_smooth_sensitivity() {
    // The true smooth sensitivity max_k e^(−kβ)·max{LS(y) : y within k steps of x}, by exhaustive
    // search up to K steps (a lower bound on it: larger k are left out), must never exceed the
    // release's bound; the bound must be β-smooth on every neighbour; and on skewed small data it
    // must be much tighter than the window bound alone.
    const K: usize = 3;
    let mut rng = seeded_rng(7);
    let (mut tightest, mut gain) = (f64::INFINITY, 1.0f64);
    for case in 0..300 {
        let n = rng.random_range(0..6);
        let mut x: Vec<f64> = (0..n)
            .map(|_| match case % 3 {
                0 => rng.random_range(0..3) as f64,
                1 => [L, U, -2.9, 6.9][rng.random_range(0..4)],
                _ => (rng.random_range(0.0..1.0f64)).powi(4) * (U - L) + L, // skewed towards L
            })
            .collect();
        x.sort_by(f64::total_cmp);
        let p = [0.0, 0.25, 0.5, 0.8, 1.0][case % 5];
        let beta = [0.1, 0.5, 1.5][case % 3];
        let mut per_k = vec![0.0f64; K + 1];
        for (k, slot) in per_k.iter_mut().enumerate() {
            *slot = ball(&x, k).iter().map(|y| true_ls(y, p)).fold(0.0, f64::max);
        }
        let exhaustive = smooth_of(&per_k, beta);
        let s = smooth_sensitivity(&x, p, L, U, beta);
        assert!(exhaustive <= s * (1.0 + 1e-12), "x {x:?} p {p} beta {beta}: exhaustive {exhaustive} > bound {s}");
        if exhaustive > 0.0 {
            tightest = tightest.min(s / exhaustive);
        }
        for y in neighbours(&x) {
            let sy = smooth_sensitivity(&y, p, L, U, beta);
            assert!(s <= beta.exp() * sy * (1.0 + 1e-12), "x {x:?} y {y:?} p {p} beta {beta}: {s} vs {sy}");
        }
        gain = gain.max(window_sensitivity(&x, p, L, U, beta) / s);
    }
    eprintln!("bound / exhaustive smooth sensitivity: at best {tightest:.3}; window bound / bound: up to {gain:.2}");
    // the exhaustive search reaches the bound somewhere (both can be attained at distance 0 or 1)
    assert!(tightest < 1.0 + 1e-9, "the bound is never attained: {tightest}");
    assert!(gain > 2.0, "the range bound never helps: {gain}");
}

#[test]
fn range_bound_is_much_tighter_on_skewed_data() {
    // 200 heavy-tailed values (Pareto-like, dense near 1, sparse up to 1000) in [0, 1000]: the median's
    // window bound reaches up into the tail one position per step, the range bound half a position
    let mut x: Vec<f64> = (1..=200).map(|i| (1.0 / (1.0 - i as f64 / 201.0)).powf(1.5)).collect();
    x.sort_by(f64::total_cmp);
    let (window, both) = (window_sensitivity(&x, 0.5, 0.0, 1000.0, 0.1 / 3.0), smooth_sensitivity(&x, 0.5, 0.0, 1000.0, 0.1 / 3.0));
    eprintln!("skewed median, β = 0.1/3: window bound {window:.4}, with the range bound {both:.4}");
    assert!(window > 5.0 * both, "{window} vs {both}");
}
