//! Estimation and sampling: post-processing of the noisy tables (no access to the data).
use super::{Interrupted, ReleaseFailure, Ticker, IPF_SWEEPS};
use crate::noise::rng::uniform01;
use rand::Rng;

/// Weight of the product of the margins mixed into each clipped pair table before raking.
const MIX: f64 = 1e-6;

/// n̂ and the margins p̂_j from the noisy 1-way tables alone: n̂ is the inverse-variance average of
/// the d table sums (variance c_j·v each), p̂_j the table clipped at 0 and normalised (uniform if
/// nothing is left). Public: a function of released tables.
pub fn reference(cards: &[usize], raw_one: &[Vec<i64>]) -> (f64, Vec<Vec<f64>>) {
    let (mut num, mut den) = (0.0, 0.0);
    for (t, &c) in raw_one.iter().zip(cards) {
        let s: f64 = t.iter().map(|&x| x as f64).sum();
        num += s / c as f64;
        den += 1.0 / c as f64;
    }
    let n_hat = (num / den).max(0.0);
    let probs = raw_one.iter().map(|t| normalise(&t.iter().map(|&x| x.max(0) as f64).collect::<Vec<_>>())).collect();
    (n_hat, probs)
}

/// Nonnegative values scaled to sum 1 (uniform when they sum to 0).
fn normalise(v: &[f64]) -> Vec<f64> {
    let s: f64 = v.iter().sum();
    if s > 0.0 && s.is_finite() {
        v.iter().map(|x| x / s).collect()
    } else {
        vec![1.0 / v.len() as f64; v.len()]
    }
}

/// Orients the edges of a tree on d nodes away from `root`, in breadth-first order.
pub fn orient(d: usize, edges: &[(usize, usize)], root: usize) -> Vec<(usize, usize)> {
    let mut adj = vec![Vec::new(); d];
    for &(a, b) in edges {
        adj[a].push(b);
        adj[b].push(a);
    }
    let mut seen = vec![false; d];
    let mut out = Vec::with_capacity(edges.len());
    let mut queue = std::collections::VecDeque::from([root]);
    seen[root] = true;
    while let Some(u) = queue.pop_front() {
        for &v in &adj[u] {
            if !seen[v] {
                seen[v] = true;
                out.push((u, v));
                queue.push_back(v);
            }
        }
    }
    out
}

/// The transpose of a row-major r × c table.
pub fn transpose<T: Copy>(t: &[T], r: usize, c: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(t.len());
    for b in 0..c {
        for a in 0..r {
            out.push(t[a * c + b]);
        }
    }
    out
}

/// Vose's alias table of a discrete distribution on 0..k.
#[derive(Debug, Clone, PartialEq)]
pub struct Alias {
    prob: Vec<f64>,
    alias: Vec<u32>,
}

impl Alias {
    /// From nonnegative weights (uniform if they sum to 0).
    pub fn new(weights: &[f64]) -> Self {
        let p = normalise(weights);
        let k = p.len();
        let mut scaled: Vec<f64> = p.iter().map(|x| x * k as f64).collect();
        let mut prob = vec![1.0; k];
        let mut alias: Vec<u32> = (0..k as u32).collect();
        let (mut small, mut large): (Vec<usize>, Vec<usize>) = (0..k).partition(|&i| scaled[i] < 1.0);
        while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
            small.pop();
            prob[s] = scaled[s];
            alias[s] = l as u32;
            scaled[l] -= 1.0 - scaled[s];
            if scaled[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        // leftovers (rounding) keep probability 1 and alias themselves
        Alias { prob, alias }
    }

    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        let i = rng.random_range(0..self.prob.len());
        if uniform01(rng) < self.prob[i] {
            i as u32
        } else {
            self.alias[i]
        }
    }
}

/// The fitted model: the released noisy tables, their estimates and the samplers.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    cards: Vec<usize>,
    /// The released noisy 1-way tables.
    raw_one: Vec<Vec<i64>>,
    /// The tree's edges (parent, child), every parent before its children; the first parent is
    /// the root.
    edges: Vec<(usize, usize)>,
    /// The released noisy pair tables, parent-major (c_parent × c_child), one per edge.
    raw_two: Vec<Vec<i64>>,
    root: usize,
    n_hat: f64,
    /// Consensus margins in counts (summing to n̂).
    margins: Vec<Vec<f64>>,
    /// Raked pair tables as joint probabilities, parent-major, one per edge.
    joints: Vec<Vec<f64>>,
    root_alias: Alias,
    /// Per edge: the child's alias table given each parent value.
    conditionals: Vec<Vec<Alias>>,
}

impl Model {
    pub(crate) fn estimate(
        cards: &[usize], raw_one: Vec<Vec<i64>>, one_var: f64, edges: Vec<(usize, usize)>, raw_two: Vec<Vec<i64>>, two_var: f64,
        check: &mut dyn FnMut() -> Result<(), Interrupted>,
    ) -> Result<Model, ReleaseFailure> {
        let d = cards.len();
        let mut ticker = Ticker::default();
        // n̂: inverse-variance average of the sums of every noisy table
        let (mut num, mut den) = (0.0, 0.0);
        for (t, &c) in raw_one.iter().zip(cards) {
            let v = c as f64 * one_var;
            num += t.iter().map(|&x| x as f64).sum::<f64>() / v;
            den += 1.0 / v;
        }
        for (t, &(p, c)) in raw_two.iter().zip(&edges) {
            let v = (cards[p] * cards[c]) as f64 * two_var;
            num += t.iter().map(|&x| x as f64).sum::<f64>() / v;
            den += 1.0 / v;
        }
        let n_hat = if den > 0.0 && (num / den).is_finite() { (num / den).max(0.0) } else { 0.0 };

        // consensus margins: own noisy table and the margins of every pair table containing j
        let mut acc: Vec<Vec<f64>> = raw_one.iter().map(|t| t.iter().map(|&x| x as f64 / one_var).collect()).collect();
        let mut wsum = vec![1.0 / one_var; d];
        for (t, &(p, c)) in raw_two.iter().zip(&edges) {
            let (cp, cc) = (cards[p], cards[c]);
            let (wp, wc) = (1.0 / (cc as f64 * two_var), 1.0 / (cp as f64 * two_var));
            for a in 0..cp {
                for b in 0..cc {
                    let x = t[a * cc + b] as f64;
                    acc[p][a] += x * wp;
                    acc[c][b] += x * wc;
                }
                ticker.tick(cc, check)?;
            }
            wsum[p] += wp;
            wsum[c] += wc;
        }
        let probs: Vec<Vec<f64>> = acc.iter().zip(&wsum).map(|(a, w)| normalise(&a.iter().map(|x| (x / w).max(0.0)).collect::<Vec<_>>())).collect();
        let margins: Vec<Vec<f64>> = probs.iter().map(|p| p.iter().map(|x| x * n_hat).collect()).collect();

        // pair tables: clipped, then raked to the consensus margins
        let mut joints = Vec::with_capacity(edges.len());
        let mut conditionals = Vec::with_capacity(edges.len());
        for (t, &(p, c)) in raw_two.iter().zip(&edges) {
            let (cp, cc) = (cards[p], cards[c]);
            let clipped: Vec<f64> = t.iter().map(|&x| x.max(0) as f64).collect();
            let total: f64 = clipped.iter().sum();
            // a trace (MIX) of the product of the margins keeps every cell the margins need
            // reachable by the raking: without it a clipped table with an empty column where the
            // consensus margin has mass would rake to all zeros
            let outer = |k: usize| probs[p][k / cc] * probs[c][k % cc];
            let mut joint: Vec<f64> = if total > 0.0 {
                clipped.iter().enumerate().map(|(k, x)| (1.0 - MIX) * x / total + MIX * outer(k)).collect()
            } else {
                (0..cp * cc).map(outer).collect()
            };
            rake(&mut joint, &probs[p], &probs[c], &mut ticker, check)?;
            let child_margin = Alias::new(&probs[c]);
            let mut cond = Vec::with_capacity(cp);
            for a in 0..cp {
                let row = &joint[a * cc..(a + 1) * cc];
                let s: f64 = row.iter().sum();
                cond.push(if s > 0.0 && s.is_finite() { Alias::new(row) } else { child_margin.clone() });
                ticker.tick(cc, check)?;
            }
            joints.push(joint);
            conditionals.push(cond);
        }
        let root = edges.first().map_or(0, |e| e.0);
        Ok(Model {
            cards: cards.to_vec(),
            raw_one,
            root_alias: Alias::new(&probs[root]),
            edges,
            raw_two,
            root,
            n_hat,
            margins,
            joints,
            conditionals,
        })
    }

    /// The released row count: n̂ (the inverse-variance combination of the sums of every noisy
    /// table) rounded, 0 when n̂ ≤ 0.
    pub fn noisy_rows(&self) -> u64 {
        if self.n_hat >= 1.8e19 {
            u64::MAX
        } else {
            self.n_hat.round() as u64
        }
    }

    /// n̂ before rounding.
    pub fn noisy_total(&self) -> f64 {
        self.n_hat
    }

    /// The chosen edges (parent, child): every parent before its children, the root first. A DP
    /// output (part of the public report).
    pub fn structure(&self) -> Vec<(usize, usize)> {
        self.edges.clone()
    }

    /// The column sampled first.
    pub fn root(&self) -> usize {
        self.root
    }

    /// Column j's consensus margin in counts (summing to n̂): post-processing of the released tables.
    pub fn noisy_one_way(&self, j: usize) -> Vec<f64> {
        self.margins[j].clone()
    }

    /// Column j's released noisy 1-way table (true counts plus noise, before any estimation).
    pub fn raw_one_way(&self, j: usize) -> &[i64] {
        &self.raw_one[j]
    }

    /// The released noisy pair table of the e-th edge of [`Self::structure`], parent-major.
    pub fn raw_two_way(&self, e: usize) -> &[i64] {
        &self.raw_two[e]
    }

    /// The model's joint distribution of the e-th edge (parent-major probabilities, raked).
    pub fn pair_table(&self, e: usize) -> &[f64] {
        &self.joints[e]
    }

    /// m rows drawn from the model, row-major (m × d codes). Uniform draws from `rng`.
    pub fn sample<R: Rng + ?Sized>(
        &self, rng: &mut R, m: usize, check: &mut dyn FnMut() -> Result<(), Interrupted>,
    ) -> Result<Vec<u32>, ReleaseFailure> {
        let d = self.cards.len();
        let len = m.checked_mul(d).ok_or(ReleaseFailure::OutOfMemory)?;
        let mut out = Vec::new();
        out.try_reserve_exact(len).map_err(|_| ReleaseFailure::OutOfMemory)?;
        let mut row = vec![0u32; d];
        let mut ticker = Ticker::default();
        for _ in 0..m {
            row[self.root] = self.root_alias.sample(rng);
            for (e, &(p, c)) in self.edges.iter().enumerate() {
                row[c] = self.conditionals[e][row[p] as usize].sample(rng);
            }
            out.extend_from_slice(&row);
            ticker.tick(d.max(1), check)?;
        }
        Ok(out)
    }
}

/// Iterative proportional fitting of a joint table (row-major r × c) to row margin `rm` and column
/// margin `cm` (both probabilities), [`IPF_SWEEPS`] sweeps.
fn rake(
    joint: &mut [f64], rm: &[f64], cm: &[f64], ticker: &mut Ticker, check: &mut dyn FnMut() -> Result<(), Interrupted>,
) -> Result<(), Interrupted> {
    let (r, c) = (rm.len(), cm.len());
    let mut col = vec![0.0; c];
    for _ in 0..IPF_SWEEPS {
        for a in 0..r {
            let row = &mut joint[a * c..(a + 1) * c];
            let s: f64 = row.iter().sum();
            if s > 0.0 {
                let f = rm[a] / s;
                row.iter_mut().for_each(|x| *x *= f);
            }
        }
        col.iter_mut().for_each(|x| *x = 0.0);
        for a in 0..r {
            for b in 0..c {
                col[b] += joint[a * c + b];
            }
        }
        for a in 0..r {
            for b in 0..c {
                if col[b] > 0.0 {
                    joint[a * c + b] *= cm[b] / col[b];
                }
            }
        }
        ticker.tick(3 * r * c, check)?;
    }
    Ok(())
}
