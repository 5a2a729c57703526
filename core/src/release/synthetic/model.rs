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

/// A released table clipped at 0 and normalised (uniform when nothing is left).
pub fn clipped_probs(t: &[i64]) -> Vec<f64> {
    normalise(&t.iter().map(|&x| x.max(0) as f64).collect::<Vec<_>>())
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
    /// Tree2: the cliques after the first pair, [a, b, c] with (a, b) an edge already in the model
    /// (a < b), in the order added. Empty for the other methods.
    cliques: Vec<[usize; 3]>,
    /// The released noisy 3-way tables, row-major c_a × c_b × c_c, one per clique.
    raw_three: Vec<Vec<i64>>,
    /// The model's joint distribution of each clique (a-major, then b, then c).
    three_joints: Vec<Vec<f64>>,
    /// Per clique: c's alias table given each value x·c_b + y of (a, b).
    three_conditionals: Vec<Vec<Alias>>,
}

impl Model {
    /// The estimate from the released tables: the 1-way tables (variance `one_var` per cell), the
    /// tree's pair tables (parent-major, every parent before its children) and, for Tree2, the
    /// 3-way tables of the cliques [a, b, c] whose edge (a, b) is already in the model (both of
    /// variance `two_var` per cell).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn estimate(
        cards: &[usize], raw_one: Vec<Vec<i64>>, one_var: f64, edges: Vec<(usize, usize)>, raw_two: Vec<Vec<i64>>,
        three: Vec<([usize; 3], Vec<i64>)>, two_var: f64, check: &mut dyn FnMut() -> Result<(), Interrupted>,
    ) -> Result<Model, ReleaseFailure> {
        let (cliques, raw_three): (Vec<[usize; 3]>, Vec<Vec<i64>>) = three.into_iter().unzip();
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
        for t in &raw_three {
            let v = t.len() as f64 * two_var;
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
        for (t, &[a, b, c]) in raw_three.iter().zip(&cliques) {
            let (ca, cb, cc) = (cards[a], cards[b], cards[c]);
            let cells = (ca * cb * cc) as f64;
            // the margin of one column sums cells/c_j noisy cells per value
            let (wa, wb, wc) = (ca as f64 / (cells * two_var), cb as f64 / (cells * two_var), cc as f64 / (cells * two_var));
            for x in 0..ca {
                for y in 0..cb {
                    for z in 0..cc {
                        let v = t[(x * cb + y) * cc + z] as f64;
                        acc[a][x] += v * wa;
                        acc[b][y] += v * wb;
                        acc[c][z] += v * wc;
                    }
                    ticker.tick(cc, check)?;
                }
            }
            wsum[a] += wa;
            wsum[b] += wb;
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

        // cliques: each 3-way table clipped, then raked to the model's joint of its edge (a, b)
        // and to c's consensus margin; the model's joint of the new edges (a, c), (b, c) follows
        let mut edge_joint: std::collections::HashMap<(usize, usize), Vec<f64>> = std::collections::HashMap::new();
        for (j, &(p, c)) in joints.iter().zip(&edges) {
            edge_joint.insert((p.min(c), p.max(c)), if p < c { j.clone() } else { transpose(j, cards[p], cards[c]) });
        }
        let mut three_joints = Vec::with_capacity(cliques.len());
        let mut three_conditionals = Vec::with_capacity(cliques.len());
        for (t, &[a, b, c]) in raw_three.iter().zip(&cliques) {
            let (ca, cb, cc) = (cards[a], cards[b], cards[c]);
            let ab = match edge_joint.get(&(a, b)) {
                Some(j) => j.clone(),
                // unreachable for a model built by select_cliques; the product of the margins
                None => (0..ca * cb).map(|k| probs[a][k / cb] * probs[b][k % cb]).collect(),
            };
            let pc = &probs[c];
            let clipped: Vec<f64> = t.iter().map(|&x| x.max(0) as f64).collect();
            let total: f64 = clipped.iter().sum();
            let outer = |k: usize| ab[k / cc] * pc[k % cc];
            let mut joint: Vec<f64> = if total > 0.0 {
                clipped.iter().enumerate().map(|(k, x)| (1.0 - MIX) * x / total + MIX * outer(k)).collect()
            } else {
                (0..ca * cb * cc).map(outer).collect()
            };
            rake(&mut joint, &ab, pc, &mut ticker, check)?;
            // the model's joint: P_ab(x, y) · P(z | x, y), with c's margin where a fibre is empty
            let child_margin = Alias::new(pc);
            let mut cond = Vec::with_capacity(ca * cb);
            for (xy, &w) in ab.iter().enumerate() {
                let fibre = &mut joint[xy * cc..(xy + 1) * cc];
                let s: f64 = fibre.iter().sum();
                if s > 0.0 && s.is_finite() {
                    cond.push(Alias::new(fibre));
                    fibre.iter_mut().for_each(|v| *v *= w / s);
                } else {
                    cond.push(child_margin.clone());
                    fibre.iter_mut().zip(pc).for_each(|(v, &p)| *v = w * p);
                }
                ticker.tick(cc, check)?;
            }
            let (mut jac, mut jbc) = (vec![0.0; ca * cc], vec![0.0; cb * cc]);
            for x in 0..ca {
                for y in 0..cb {
                    for z in 0..cc {
                        let v = joint[(x * cb + y) * cc + z];
                        jac[x * cc + z] += v;
                        jbc[y * cc + z] += v;
                    }
                }
            }
            for (u, m) in [(a, jac), (b, jbc)] {
                let m = if u < c { m } else { transpose(&m, cards[u], cc) };
                edge_joint.insert((u.min(c), u.max(c)), m);
            }
            three_joints.push(joint);
            three_conditionals.push(cond);
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
            cliques,
            raw_three,
            three_joints,
            three_conditionals,
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
    /// output (part of the public report). Tree2: the first pair, then each clique [a, b, c] as
    /// two edges (a, c), (b, c) — c's two parents — 2d − 3 edges in all.
    pub fn structure(&self) -> Vec<(usize, usize)> {
        let mut out = self.edges.clone();
        for &[a, b, c] in &self.cliques {
            out.push((a, c));
            out.push((b, c));
        }
        out
    }

    /// Tree2: the cliques after the first pair, [a, b, c] in the order added, (a, b) (a < b) an
    /// edge already in the model and c the new column. Empty for the other methods.
    pub fn cliques(&self) -> &[[usize; 3]] {
        &self.cliques
    }

    /// The released noisy 3-way table of the k-th clique, row-major c_a × c_b × c_c.
    pub fn raw_three_way(&self, k: usize) -> &[i64] {
        &self.raw_three[k]
    }

    /// The model's joint distribution of the k-th clique (row-major c_a × c_b × c_c).
    pub fn clique_table(&self, k: usize) -> &[f64] {
        &self.three_joints[k]
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
        let mut out = crate::release::try_vec(len)?;
        let mut row = vec![0u32; d];
        let mut ticker = Ticker::default();
        for _ in 0..m {
            row[self.root] = self.root_alias.sample(rng);
            for (e, &(p, c)) in self.edges.iter().enumerate() {
                row[c] = self.conditionals[e][row[p] as usize].sample(rng);
            }
            for (k, &[a, b, c]) in self.cliques.iter().enumerate() {
                row[c] = self.three_conditionals[k][row[a] as usize * self.cards[b] + row[b] as usize].sample(rng);
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
