//! Private synthetic microdata: the engine (count tables, structure selection, measurement,
//! estimation, sampling) and the public encoding of columns into codes ([`columns`]).
//!
//! **Neighbouring relation: add or remove one row.** The data are encoded: column j has a public
//! cardinality c_j ≥ 1 and every row is a code vector with row[j] < c_j. The derivation is in
//! docs/privacy/synthetic.md.
//!
//! The model is a tree of 2-way marginals (MST style):
//! 1. measure every 1-way table (discrete Laplace, or discrete Gaussian under zCDP);
//! 2. choose a spanning tree by d − 1 rounds of Kruskal, each round a private choice among the
//!    pairs that join two components (permute-and-flip under pure ε, the exponential mechanism
//!    under zCDP, both with exact Bernoulli(exp(−x)) coins) on integer scores of sensitivity 1:
//!    Σ_cells |N_ij − r_ij| − penalty_ij, with r_ij = round(n̂·p̂_i·p̂_j) from the released 1-way
//!    tables and penalty_ij the expected L1 norm of the planned noise on that table;
//! 3. measure the d − 1 chosen pair tables;
//! 4. estimate (post-processing): consensus margins by inverse-variance combination, each pair
//!    table clipped ≥ 0 and raked to its two margins;
//! 5. sample ancestrally along the tree with alias tables.
//!
//! [`Method::Tree2`] widens the model to 3-column cliques on a 2-tree: the first pair as above,
//! then d − 2 private choices of a new column c and an edge (a, b) already in the model, scored
//! by Σ |N_abc − round(n̂·P̂_ab·p̂_c)| − penalty with P̂_ab from the released table that made the
//! edge (sensitivity 1); each clique is measured as soon as it is chosen (the same d − 1 tables'
//! L1 = d − 1), raked to its edge's joint and c's margin, and c is sampled given (a, b). Its
//! counter holds every 3-way table ([`MAX_TREE2_COLUMNS`], [`MAX_CELLS`]).
//!
//! [`Method::PrivBayes`] is a minimal degree-1 PrivBayes for comparison: the same scores, budget,
//! measurements, estimator and sampler, with the network grown greedily from a random root (each
//! step a private choice of a new child and its parent already in the network).
//!
//! # Calling order (pay before reading)
//! 1. [`SyntheticSpec::new`] validates and calibrates every noise from the arguments alone.
//! 2. [`SyntheticSpec::describe`] gives the receipt; [`SyntheticSpec::count_bytes`] the memory of the
//!    count tables. Both only read the arguments.
//! 3. The caller charges the budget, fills [`SyntheticSpec::counter`] with [`PairCounts::push`].
//! 4. [`SyntheticSpec::fit`] measures, selects and estimates: the [`Model`]; [`Model::sample`] draws
//!    rows (post-processing, as often as wanted).
//!
//! After the charge the only failures are [`ReleaseFailure::Interrupted`] and
//! [`ReleaseFailure::OutOfMemory`] (of the sample, a function of the requested row count).
pub mod columns;
mod counts;
mod model;

pub use counts::{pair_index, pairs, triple_cells, triple_index, triples, PairCounts};
pub use model::{Alias, Model};

use crate::accounting::charge::mechanism_epsilon;
use crate::error::{DpError, DpResult};
use crate::noise::sampling::{bernoulli_exp, discrete_gaussian, discrete_laplace, dyadic, laplace_scale};
use crate::params::{check_delta, check_epsilon, fmt_f64};
pub use crate::release::dprp::{zcdp_delta, zcdp_rho, Interrupted, ReleaseFailure};
use rand::Rng;
use serde::Serialize;

/// The largest number of count cells, Σ_j c_j + Σ_{i<j} c_i·c_j (8 bytes each: 1 GiB).
pub const MAX_CELLS: usize = 1 << 27;
/// The largest number of columns (the selection costs O(d³) score comparisons).
pub const MAX_COLUMNS: usize = 512;
/// The largest number of columns of [`Method::Tree2`] (every row updates C(d, 3) 3-way tables).
pub const MAX_TREE2_COLUMNS: usize = 64;
/// Default share of the budget (ε, or ρ under zCDP) spent on the 1-way tables.
pub const DEFAULT_ONE_WAY_SHARE: f64 = 0.1;
/// Default share of the budget spent on choosing the structure.
pub const DEFAULT_SELECTION_SHARE: f64 = 0.1;
/// Each share must be in [SHARE_MIN, SHARE_MAX] and their sum at most SHARE_MAX.
pub const SHARE_MIN: f64 = 0.01;
pub const SHARE_MAX: f64 = 0.98;
/// Sweeps of iterative proportional fitting of each pair table to its two margins.
pub const IPF_SWEEPS: usize = 20;
/// The neighbouring relation the guarantee is stated for.
pub const NEIGHBOURS: &str = "add or remove one row";
/// The relative margin by which every part runs below its nominal share, so that float rounding
/// of the split can never make the parts add up to more than the charged budget.
const PART_MARGIN: f64 = 1.0 - 1.0 / (1u64 << 40) as f64;
/// Scores are clamped to [−2^62, 2^62].
pub const SCORE_BOUND: i128 = 1 << 62;
/// The largest σ² the discrete Gaussian sampler accepts.
const MAX_SIGMA2: f64 = (1u64 << 60) as f64;

/// How the structure is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// A maximum spanning tree: d − 1 private rounds of Kruskal.
    Mst,
    /// A minimal degree-1 PrivBayes: the network grown greedily from a random root.
    PrivBayes,
    /// A 2-tree of 3-column cliques: the best pair, then d − 2 private choices of a new column
    /// and an edge already in the model; every 3-way table is counted in the same scan.
    Tree2,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Mst => "mst",
            Method::PrivBayes => "privbayes",
            Method::Tree2 => "tree2",
        }
    }
}

/// The arguments of a synthetic release.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticParams {
    /// The public number of codes of each column (each ≥ 1).
    pub cardinalities: Vec<usize>,
    pub epsilon: f64,
    /// 0: pure ε-DP (discrete Laplace); > 0: zCDP (discrete Gaussian) converted to (ε, δ).
    pub delta: f64,
    pub method: Method,
    /// Share of the budget on the 1-way tables (None: [`DEFAULT_ONE_WAY_SHARE`]).
    pub one_way_share: Option<f64>,
    /// Share of the budget on the structure (None: [`DEFAULT_SELECTION_SHARE`]).
    pub selection_share: Option<f64>,
}

impl SyntheticParams {
    /// Parameters with the default shares.
    pub fn new(cardinalities: Vec<usize>, epsilon: f64, delta: f64, method: Method) -> Self {
        SyntheticParams { cardinalities, epsilon, delta, method, one_way_share: None, selection_share: None }
    }
}

/// The noise added to every cell of the tables of one measured part (a vector of tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableNoise {
    /// Discrete Laplace with scale t/s: P(x) ∝ exp(−|x|·s/t).
    Laplace { t: u128, s: u128 },
    /// Discrete Gaussian with integer σ²: P(x) ∝ exp(−x²/(2σ²)).
    Gaussian { sigma2: u128 },
}

impl TableNoise {
    pub fn draw<R: Rng + ?Sized>(&self, rng: &mut R) -> i128 {
        match *self {
            TableNoise::Laplace { t, s } => discrete_laplace(rng, t, s),
            TableNoise::Gaussian { sigma2 } => discrete_gaussian(rng, sigma2),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            TableNoise::Laplace { .. } => "discrete_laplace",
            TableNoise::Gaussian { .. } => "discrete_gaussian",
        }
    }

    /// The scale: b = t/s of the discrete Laplace, σ of the discrete Gaussian.
    pub fn scale(&self) -> f64 {
        match *self {
            TableNoise::Laplace { t, s } => t as f64 / s as f64,
            TableNoise::Gaussian { sigma2 } => (sigma2 as f64).sqrt(),
        }
    }

    /// The variance of one cell's noise (2p/(1−p)² with p = e^(−1/b); σ² for the Gaussian, an upper
    /// bound of its exact variance).
    pub fn variance(&self) -> f64 {
        match *self {
            TableNoise::Laplace { .. } => {
                let b = self.scale();
                let p = (-1.0 / b).exp();
                let q = -(-1.0 / b).exp_m1();
                2.0 * p / (q * q)
            }
            TableNoise::Gaussian { sigma2 } => sigma2 as f64,
        }
    }

    /// E|X| of one cell's noise (2p/(1−p²) for the discrete Laplace; σ·√(2/π) for the Gaussian).
    pub fn mean_abs(&self) -> f64 {
        match *self {
            TableNoise::Laplace { .. } => {
                let p = (-1.0 / self.scale()).exp();
                2.0 * p / (1.0 - p * p)
            }
            TableNoise::Gaussian { .. } => self.scale() * (2.0 / std::f64::consts::PI).sqrt(),
        }
    }
}

/// The private choice of one selection round among candidates with integer scores of sensitivity 1:
/// candidate c is kept with probability exp(−α(q* − q_c)), α = ε_round/2 (an exact dyadic rational).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Selection {
    pub rounds: usize,
    /// ε of one round (ε-DP; under zCDP ε-bounded range, ε²/8-zCDP).
    pub epsilon_round: f64,
    /// Permute-and-flip (pure ε) or the exponential mechanism by rejection (zCDP).
    pub permute_and_flip: bool,
    /// α = alpha_num / alpha_den exactly.
    alpha_num: u128,
    alpha_den: u128,
}

impl Selection {
    fn new(rounds: usize, epsilon_round: f64, permute_and_flip: bool) -> DpResult<Self> {
        // α = ε/2 = m·2^-(k+1) exactly
        let (m, k) = dyadic(epsilon_round);
        let e = k + 1;
        let (alpha_num, alpha_den) = if e <= 0 {
            ((m as u128) << ((-e) as u32).min(64), 1)
        } else if e <= 120 {
            (m as u128, 1u128 << e)
        } else {
            return Err(DpError::invalid("epsilon", "large enough that each selection round has ε above 2^-60", fmt_f64(epsilon_round)));
        };
        Ok(Selection { rounds, epsilon_round, permute_and_flip, alpha_num, alpha_den })
    }

    pub fn name(&self) -> &'static str {
        if self.permute_and_flip {
            "permute_and_flip"
        } else {
            "exponential_mechanism"
        }
    }

    /// Bernoulli(exp(−α·gap)), exactly. With scores clamped to ±2^62 (gap < 2^63) and the
    /// numerator of α below 2^53, the product never overflows; the fallback is unreachable.
    fn coin<R: Rng + ?Sized>(&self, rng: &mut R, gap: u128) -> bool {
        match self.alpha_num.checked_mul(gap) {
            Some(n) => bernoulli_exp(rng, n, self.alpha_den),
            None => false,
        }
    }

    /// One private choice: the index of the chosen score.
    pub fn choose<R: Rng + ?Sized>(&self, rng: &mut R, scores: &[i128]) -> usize {
        assert!(!scores.is_empty(), "a choice among no candidates");
        let best = *scores.iter().max().unwrap_or(&0);
        let gap = |q: i128| best.abs_diff(q);
        if self.permute_and_flip {
            // candidates in a uniformly random order (Fisher–Yates drawn as it goes); the first
            // whose coin comes up is chosen; the best one's coin always does
            let mut order: Vec<usize> = (0..scores.len()).collect();
            for i in 0..order.len() {
                let j = rng.random_range(i..order.len());
                order.swap(i, j);
                let c = order[i];
                if self.coin(rng, gap(scores[c])) {
                    return c;
                }
            }
            unreachable_best(scores, best)
        } else {
            // rejection from the uniform proposal: P(c) ∝ exp(α·q_c), the exponential mechanism
            loop {
                let c = rng.random_range(0..scores.len());
                if self.coin(rng, gap(scores[c])) {
                    return c;
                }
            }
        }
    }
}

/// The best candidate's coin has probability exp(0) = 1, so the permutation never runs out; this
/// returns it anyway rather than panicking.
fn unreachable_best(scores: &[i128], best: i128) -> usize {
    scores.iter().position(|&q| q == best).unwrap_or(0)
}

/// Interrupt checks every 1024 units of work.
#[derive(Debug, Default)]
pub(crate) struct Ticker(usize);

impl Ticker {
    pub(crate) fn tick(&mut self, work: usize, check: &mut dyn FnMut() -> Result<(), Interrupted>) -> Result<(), Interrupted> {
        self.0 += work;
        if self.0 >= 1024 {
            self.0 = 0;
            check()?;
        }
        Ok(())
    }
}

/// One part of the budget in the receipt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReceiptPart {
    /// "one_way", "selection", "two_way" or (Tree2: the first pair and the 3-way tables) "cliques".
    pub name: &'static str,
    /// Pure accounting: this part's ε (the parts sum to the release's ε).
    pub epsilon: Option<f64>,
    /// zCDP accounting: this part's share of ρ (the parts sum to the release's ρ).
    pub rho: Option<f64>,
    /// zCDP accounting: the ρ this part actually spends (at most `rho`: σ² is rounded up).
    pub rho_spent: Option<f64>,
    /// "discrete_laplace", "discrete_gaussian", "permute_and_flip" or "exponential_mechanism".
    pub noise: &'static str,
    /// Per cell: b of the discrete Laplace or σ of the discrete Gaussian; for the selection the
    /// temperature 2/ε_round in score units (a candidate's weight is exp(q/scale)).
    pub scale: f64,
    /// Add/remove sensitivity of the part: L1 (pure) or L2 (zCDP) of its vector of tables; 1 for
    /// each round's scores.
    pub sensitivity: f64,
    /// Tables measured, or selection rounds.
    pub count: usize,
    /// The selection's ε per round.
    pub epsilon_round: Option<f64>,
}

/// Everything a release will spend and do, fixed by the arguments: the receipt's content.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SyntheticReceipt {
    pub method: &'static str,
    pub epsilon: f64,
    pub delta: f64,
    /// "pure" (δ = 0) or "zcdp".
    pub accounting: &'static str,
    /// zCDP: the ρ converted to (ε, δ) (CKS20, Corollary 13).
    pub rho: Option<f64>,
    pub neighbours: &'static str,
    pub cardinalities: Vec<usize>,
    pub one_way_share: f64,
    pub selection_share: f64,
    pub parts: Vec<ReceiptPart>,
}

/// A validated synthetic release: every noise calibrated from the arguments alone.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticSpec {
    cards: Vec<usize>,
    epsilon: f64,
    delta: f64,
    method: Method,
    one_way_share: f64,
    selection_share: f64,
    /// zCDP: the total ρ; None under pure ε.
    rho: Option<f64>,
    /// Nominal budget of the three parts (ε or ρ), in the order 1-way, selection, 2-way.
    budget: [f64; 3],
    /// ρ actually spent by each part (zCDP only).
    spent: [f64; 3],
    pub one_way_noise: TableNoise,
    /// None when d = 1 (no pairs).
    pub two_way_noise: Option<TableNoise>,
    pub selection: Option<Selection>,
}

fn check_share(arg: &'static str, share: Option<f64>, default: f64) -> DpResult<f64> {
    match share {
        None => Ok(default),
        Some(s) if s.is_finite() && (SHARE_MIN..=SHARE_MAX).contains(&s) => Ok(s),
        Some(s) => Err(DpError::invalid(arg, format!("NULL or a number between {SHARE_MIN} and {SHARE_MAX}"), fmt_f64(s))),
    }
}

/// Σ_j c_j + Σ_{i<j} c_i·c_j, saturating.
pub fn count_cells(cards: &[usize]) -> usize {
    let mut total: u128 = 0;
    let mut prefix: u128 = 0;
    for &c in cards {
        let c = c as u128;
        total = total.saturating_add(c).saturating_add(prefix.saturating_mul(c));
        prefix = prefix.saturating_add(c);
    }
    usize::try_from(total).unwrap_or(usize::MAX)
}

fn check_columns(cards: &[usize], method: Method) -> DpResult<()> {
    let d = cards.len();
    let most = if method == Method::Tree2 { MAX_TREE2_COLUMNS } else { MAX_COLUMNS };
    if d == 0 || d > most {
        let what = if method == Method::Tree2 { " (method tree2)" } else { "" };
        return Err(DpError::invalid("columns", format!("between 1 and {most} columns{what}"), format!("{d} columns")));
    }
    if let Some(j) = cards.iter().position(|&c| c == 0) {
        return Err(DpError::invalid("columns", "columns of at least 1 code each", format!("no code in column {}", j + 1)));
    }
    let cells = count_cells(cards);
    if cells > MAX_CELLS || cards.iter().any(|&c| c > u32::MAX as usize) {
        return Err(DpError::invalid(
            "columns",
            format!("columns whose 1-way and 2-way count tables have at most {MAX_CELLS} cells in all (Σ c_j + Σ_(i<j) c_i·c_j)"),
            format!("{cells} cells"),
        ));
    }
    if method == Method::Tree2 {
        let all = cells.saturating_add(triple_cells(cards));
        if all > MAX_CELLS {
            return Err(DpError::invalid(
                "columns",
                format!(
                    "columns whose 1-way, 2-way and 3-way count tables (method tree2) have at most {MAX_CELLS} cells in all \
                     (Σ c_j + Σ_(i<j) c_i·c_j + Σ_(i<j<k) c_i·c_j·c_k)"
                ),
                format!("{all} cells"),
            ));
        }
    }
    Ok(())
}

/// The integer σ² ≥ sens2/(2ρ) (rounded up) of a vector of tables with squared L2 sensitivity sens2.
/// Refused (naming `epsilon`) when σ² would exceed 2^60, the sampler's limit.
fn gaussian_part(sens2: f64, rho: f64, epsilon: f64) -> DpResult<(TableNoise, f64)> {
    let s2 = (sens2 / (2.0 * rho)).ceil().max(1.0);
    if s2.is_nan() || s2 > MAX_SIGMA2 {
        return Err(DpError::invalid(
            "epsilon",
            "large enough, at this delta and these columns, that every discrete Gaussian has σ² at most 2^60",
            fmt_f64(epsilon),
        ));
    }
    let sigma2 = s2 as u128;
    Ok((TableNoise::Gaussian { sigma2 }, sens2 / (2.0 * sigma2 as f64)))
}

impl SyntheticSpec {
    /// Validates the parameters (errors name the argument and its range) and calibrates every
    /// noise, from the arguments alone.
    pub fn new(p: &SyntheticParams) -> DpResult<Self> {
        check_columns(&p.cardinalities, p.method)?;
        let epsilon = check_epsilon("epsilon", p.epsilon)?;
        let delta = check_delta("delta", p.delta, true)?;
        let one_way_share = check_share("one_way_share", p.one_way_share, DEFAULT_ONE_WAY_SHARE)?;
        let selection_share = check_share("selection_share", p.selection_share, DEFAULT_SELECTION_SHARE)?;
        if one_way_share + selection_share > SHARE_MAX {
            return Err(DpError::invalid(
                "selection_share",
                format!("at most {} − one_way_share = {}", SHARE_MAX, fmt_f64(SHARE_MAX - one_way_share)),
                fmt_f64(selection_share),
            ));
        }
        let d = p.cardinalities.len();
        let pairs = d - 1; // tables measured and selection rounds
        // the nominal split; with d = 1 everything goes to the 1-way table
        let total = if delta == 0.0 { epsilon } else { 0.0 };
        let rho = (delta > 0.0).then(|| zcdp_rho(mechanism_epsilon(epsilon), mechanism_epsilon(delta) * (1.0 - 1e-9)));
        let whole = rho.unwrap_or(total);
        let budget = if d == 1 {
            [whole, 0.0, 0.0]
        } else {
            let (a, b) = (whole * one_way_share, whole * selection_share);
            [a, b, whole - a - b]
        };
        // what the mechanisms run at: just below each nominal part
        let run = budget.map(|x| x * PART_MARGIN);
        let (one_way_noise, two_way_noise, selection, spent) = match rho {
            None => {
                let (t, s) = laplace_scale(d as u128, run[0]);
                let one = TableNoise::Laplace { t, s };
                if d == 1 {
                    (one, None, None, [0.0; 3])
                } else {
                    let (t, s) = laplace_scale(pairs as u128, run[2]);
                    let sel = Selection::new(pairs, run[1] / pairs as f64, true)?;
                    (one, Some(TableNoise::Laplace { t, s }), Some(sel), [0.0; 3])
                }
            }
            Some(rho) => {
                if rho.is_nan() || rho <= 0.0 {
                    return Err(DpError::invalid("epsilon", "large enough (with delta) to give a positive zCDP budget", fmt_f64(epsilon)));
                }
                let (one, r1) = gaussian_part(d as f64, run[0], epsilon)?;
                if d == 1 {
                    (one, None, None, [r1, 0.0, 0.0])
                } else {
                    let (two, r2) = gaussian_part(pairs as f64, run[2], epsilon)?;
                    // ε-bounded range is ε²/8-zCDP: ε_round = √(8ρ_sel/rounds)
                    let eps_round = (8.0 * run[1] / pairs as f64).sqrt() * PART_MARGIN;
                    let sel = Selection::new(pairs, eps_round, false)?;
                    let rs = pairs as f64 * eps_round * eps_round / 8.0;
                    (one, Some(two), Some(sel), [r1, rs, r2])
                }
            }
        };
        if let Some(rho) = rho {
            let used: f64 = spent.iter().sum();
            if used.is_nan() || used > rho {
                return Err(DpError::invalid("epsilon", "a value whose calibration stays within its budget", fmt_f64(epsilon)));
            }
        }
        Ok(SyntheticSpec {
            cards: p.cardinalities.clone(),
            epsilon,
            delta,
            method: p.method,
            one_way_share,
            selection_share,
            rho,
            budget,
            spent,
            one_way_noise,
            two_way_noise,
            selection,
        })
    }

    pub fn cardinalities(&self) -> &[usize] {
        &self.cards
    }

    pub fn method(&self) -> Method {
        self.method
    }

    /// The receipt: fixed by the arguments, before any data is read.
    pub fn describe(&self) -> SyntheticReceipt {
        let d = self.cards.len();
        let zcdp = self.rho.is_some();
        let part = |i: usize, name: &'static str, noise: &'static str, scale: f64, sensitivity: f64, count: usize, epsilon_round: Option<f64>| ReceiptPart {
            name,
            epsilon: (!zcdp).then_some(self.budget[i]),
            rho: zcdp.then_some(self.budget[i]),
            rho_spent: zcdp.then_some(self.spent[i]),
            noise,
            scale,
            sensitivity,
            count,
            epsilon_round,
        };
        let sens = |k: usize| if zcdp { (k as f64).sqrt() } else { k as f64 };
        let mut parts = vec![part(0, "one_way", self.one_way_noise.name(), self.one_way_noise.scale(), sens(d), d, None)];
        if let (Some(sel), Some(two)) = (self.selection, self.two_way_noise) {
            parts.push(part(1, "selection", sel.name(), 2.0 / sel.epsilon_round, 1.0, sel.rounds, Some(sel.epsilon_round)));
            let name = if self.method == Method::Tree2 { "cliques" } else { "two_way" };
            parts.push(part(2, name, two.name(), two.scale(), sens(d - 1), d - 1, None));
        }
        SyntheticReceipt {
            method: self.method.name(),
            epsilon: self.epsilon,
            delta: self.delta,
            accounting: if zcdp { "zcdp" } else { "pure" },
            rho: self.rho,
            neighbours: NEIGHBOURS,
            cardinalities: self.cards.clone(),
            one_way_share: self.one_way_share,
            selection_share: self.selection_share,
            parts,
        }
    }

    /// Bytes of the count tables (8 per cell, plus one offset per table; public: a function of
    /// the cardinalities). Tree2 adds every 3-way table.
    pub fn count_bytes(&self) -> usize {
        let d = self.cards.len();
        let mut cells = count_cells(&self.cards);
        let mut tables = d + d * d.saturating_sub(1) / 2;
        if self.method == Method::Tree2 {
            cells = cells.saturating_add(triple_cells(&self.cards));
            tables += triples(d).count();
        }
        cells.saturating_mul(8).saturating_add(tables * std::mem::size_of::<usize>())
    }

    /// Zeroed exact count tables of the right shape (with every 3-way table for Tree2).
    pub fn counter(&self) -> PairCounts {
        if self.method == Method::Tree2 {
            PairCounts::zeroed_with_triples(&self.cards)
        } else {
            PairCounts::zeroed(&self.cards)
        }
    }

    /// The integer selection score of every pair (in [`pair_index`] order):
    /// Σ_cells |N_ij(a,b) − round(n̂·p_i(a)·p_j(b))| − round(cells·E|noise|). With n̂ and p public
    /// (released 1-way tables), adding or removing a row changes each score by at most 1.
    pub fn pair_scores(
        &self, counts: &PairCounts, n_hat: f64, probs: &[Vec<f64>], check: &mut dyn FnMut() -> Result<(), Interrupted>,
    ) -> Result<Vec<i128>, ReleaseFailure> {
        let d = self.cards.len();
        assert_eq!(counts.cardinalities(), &self.cards[..], "counts of another shape");
        let mean_abs = self.two_way_noise.map_or(0.0, |n| n.mean_abs());
        let n_hat = if n_hat.is_finite() { n_hat.clamp(0.0, 1e18) } else { 0.0 };
        let mut ticker = Ticker::default();
        let mut scores = Vec::with_capacity(d * d.saturating_sub(1) / 2);
        for (i, j) in pairs(d) {
            let (ci, cj) = (self.cards[i], self.cards[j]);
            let table = counts.two_way(i, j);
            let mut l1: i128 = 0;
            for a in 0..ci {
                let pa = n_hat * probs[i].get(a).copied().unwrap_or(0.0);
                for b in 0..cj {
                    let r = (pa * probs[j].get(b).copied().unwrap_or(0.0)).round() as i128;
                    l1 += (table[a * cj + b] as i128 - r).abs();
                }
                ticker.tick(cj, check)?;
            }
            let penalty = ((ci * cj) as f64 * mean_abs).round().min(1e30) as i128;
            // clamping is 1-Lipschitz (the sensitivity stays 1) and keeps every gap below 2^63, so
            // that α·gap never overflows in the selection's coins
            scores.push((l1 - penalty).clamp(-SCORE_BOUND, SCORE_BOUND));
        }
        Ok(scores)
    }

    /// The integer score of adding column c to the model by its edge (a, b):
    /// Σ_(x,y,z) |N_abc(x,y,z) − round(n̂·P_ab(x,y)·p_c(z))| − round(c_a·c_b·c_c·E|noise|), clamped
    /// to ±2^62. `pair_ab` (row-major c_a × c_b probabilities) and `prob_c` must be public (from
    /// released tables): then adding or removing a row changes the score by at most 1.
    pub fn triple_score(
        &self, counts: &PairCounts, n_hat: f64, (a, b, c): (usize, usize, usize), pair_ab: &[f64], prob_c: &[f64],
        check: &mut dyn FnMut() -> Result<(), Interrupted>,
    ) -> Result<i128, Interrupted> {
        self.triple_score_ticked(counts, n_hat, (a, b, c), pair_ab, prob_c, &mut Ticker::default(), check)
    }

    #[allow(clippy::too_many_arguments)]
    fn triple_score_ticked(
        &self, counts: &PairCounts, n_hat: f64, (a, b, c): (usize, usize, usize), pair_ab: &[f64], prob_c: &[f64], ticker: &mut Ticker,
        check: &mut dyn FnMut() -> Result<(), Interrupted>,
    ) -> Result<i128, Interrupted> {
        let (ca, cb, cc) = (self.cards[a], self.cards[b], self.cards[c]);
        let (table, [sa, sb, sc]) = counts.three_way_view([a, b, c]);
        let n_hat = if n_hat.is_finite() { n_hat.clamp(0.0, 1e18) } else { 0.0 };
        let mut l1: i128 = 0;
        for x in 0..ca {
            for y in 0..cb {
                let pxy = n_hat * pair_ab.get(x * cb + y).copied().unwrap_or(0.0);
                for z in 0..cc {
                    let r = (pxy * prob_c.get(z).copied().unwrap_or(0.0)).round() as i128;
                    l1 += (table[x * sa + y * sb + z * sc] as i128 - r).abs();
                }
                ticker.tick(cc, check)?;
            }
        }
        let mean_abs = self.two_way_noise.map_or(0.0, |n| n.mean_abs());
        let penalty = ((ca * cb * cc) as f64 * mean_abs).round().min(1e30) as i128;
        Ok((l1 - penalty).clamp(-SCORE_BOUND, SCORE_BOUND))
    }

    /// Tree2's structure and measurements, interleaved: round 1 chooses the first pair among all
    /// pairs ([`Self::pair_scores`]); each of the d − 2 later rounds chooses a new column c and an
    /// edge (a, b) of the model ([`Self::triple_score`], with P_ab the released table of the clique
    /// that made the edge, marginalised, clipped at 0 and normalised, and p_c from `probs`). After
    /// each choice `measure(rng, columns, check)` releases the chosen table (row-major in the
    /// given column order); later rounds read only released tables. Returns the cliques in order:
    /// [a, b] first, then [a, b, c] with a < b the edge, each with its released table.
    /// `n_hat` and `probs` must be public; `counts` must have its 3-way part when d ≥ 3.
    #[allow(clippy::type_complexity)]
    pub fn select_cliques<R: Rng + ?Sized>(
        &self, rng: &mut R, counts: &PairCounts, n_hat: f64, probs: &[Vec<f64>],
        measure: &mut dyn FnMut(&mut R, &[usize], &mut dyn FnMut() -> Result<(), Interrupted>) -> Result<Vec<i64>, ReleaseFailure>,
        check: &mut dyn FnMut() -> Result<(), Interrupted>,
    ) -> Result<Vec<(Vec<usize>, Vec<i64>)>, ReleaseFailure> {
        let d = self.cards.len();
        let Some(sel) = self.selection else { return Ok(Vec::new()) };
        assert!(counts.has_triples(), "Tree2 needs the counter of its own spec (with the 3-way tables)");
        let cards = &self.cards;
        let scores = self.pair_scores(counts, n_hat, probs, check)?;
        let all: Vec<(usize, usize)> = pairs(d).collect();
        let (a0, b0) = all[sel.choose(rng, &scores)];
        let t = measure(rng, &[a0, b0], check)?;
        // the public reference of every edge of the model (u < v): its released joint
        let mut edges: Vec<((usize, usize), Vec<f64>)> = vec![((a0, b0), model::clipped_probs(&t))];
        let mut out = vec![(vec![a0, b0], t)];
        let mut inside = vec![false; d];
        inside[a0] = true;
        inside[b0] = true;
        // scores are fixed once the edge is released: cache[e·d + c]
        let mut cache: Vec<Option<i128>> = Vec::new();
        let mut ticker = Ticker::default();
        let mut cand: Vec<(usize, usize)> = Vec::new();
        let mut q: Vec<i128> = Vec::new();
        for _ in 2..d {
            cache.resize(edges.len() * d, None);
            cand.clear();
            q.clear();
            for (e, ((a, b), ab)) in edges.iter().enumerate() {
                for c in (0..d).filter(|&c| !inside[c]) {
                    let score = match cache[e * d + c] {
                        Some(x) => x,
                        None => {
                            let x = self.triple_score_ticked(counts, n_hat, (*a, *b, c), ab, &probs[c], &mut ticker, check)?;
                            cache[e * d + c] = Some(x);
                            x
                        }
                    };
                    cand.push((e, c));
                    q.push(score);
                }
            }
            ticker.tick(cand.len(), check)?;
            let (e, c) = cand[sel.choose(rng, &q)];
            let (a, b) = edges[e].0;
            let t = measure(rng, &[a, b, c], check)?;
            let (ca, cb, cc) = (cards[a], cards[b], cards[c]);
            // the new edges' references: margins (a, c) and (b, c) of the released table
            let (mut ac, mut bc) = (vec![0i64; ca * cc], vec![0i64; cb * cc]);
            for x in 0..ca {
                for y in 0..cb {
                    for z in 0..cc {
                        let v = t[(x * cb + y) * cc + z];
                        ac[x * cc + z] = ac[x * cc + z].saturating_add(v);
                        bc[y * cc + z] = bc[y * cc + z].saturating_add(v);
                    }
                }
            }
            for (u, m) in [(a, ac), (b, bc)] {
                let m = if u < c { m } else { model::transpose(&m, cards[u], cc) };
                edges.push(((u.min(c), u.max(c)), model::clipped_probs(&m)));
            }
            inside[c] = true;
            out.push((vec![a, b, c], t));
        }
        Ok(out)
    }

    /// The private structure. Mst: d − 1 unordered pairs (i < j) in the order chosen; PrivBayes:
    /// d − 1 edges (parent, child) in the order added, the first parent the random root; Tree2:
    /// the first pair (a, b), then for each later clique its two edges (a, c), (b, c) — 2d − 3
    /// edges — measuring each clique as [`Self::fit`] does (its selection reads released tables).
    /// `n_hat` and `probs` must be public (from the released 1-way tables).
    pub fn select<R: Rng + ?Sized>(
        &self, rng: &mut R, counts: &PairCounts, n_hat: f64, probs: &[Vec<f64>], check: &mut dyn FnMut() -> Result<(), Interrupted>,
    ) -> Result<Vec<(usize, usize)>, ReleaseFailure> {
        let d = self.cards.len();
        let Some(sel) = self.selection else { return Ok(Vec::new()) };
        if self.method == Method::Tree2 {
            let noise = self.two_way_noise.unwrap_or(self.one_way_noise);
            let mut ticker = Ticker::default();
            let mut measure = |rng: &mut R, cols: &[usize], check: &mut dyn FnMut() -> Result<(), Interrupted>| {
                noisy(rng, &counts.table(cols), &noise, &mut ticker, check)
            };
            let cliques = self.select_cliques(rng, counts, n_hat, probs, &mut measure, check)?;
            return Ok(clique_edges(&cliques.into_iter().map(|(c, _)| c).collect::<Vec<_>>()));
        }
        let scores = self.pair_scores(counts, n_hat, probs, check)?;
        let mut ticker = Ticker::default();
        let mut edges = Vec::with_capacity(d - 1);
        let mut cand: Vec<(usize, usize)> = Vec::new();
        let mut q: Vec<i128> = Vec::new();
        match self.method {
            Method::Mst => {
                let mut comp: Vec<usize> = (0..d).collect();
                for _ in 1..d {
                    cand.clear();
                    q.clear();
                    for (k, (i, j)) in pairs(d).enumerate() {
                        if comp[i] != comp[j] {
                            cand.push((i, j));
                            q.push(scores[k]);
                        }
                    }
                    ticker.tick(d * d / 2, check)?;
                    let (i, j) = cand[sel.choose(rng, &q)];
                    let (from, to) = (comp[j], comp[i]);
                    for c in comp.iter_mut() {
                        if *c == from {
                            *c = to;
                        }
                    }
                    edges.push((i, j));
                }
            }
            Method::PrivBayes => {
                let mut inside = vec![false; d];
                inside[rng.random_range(0..d)] = true;
                for _ in 1..d {
                    cand.clear();
                    q.clear();
                    for (k, (i, j)) in pairs(d).enumerate() {
                        if inside[i] != inside[j] {
                            cand.push(if inside[i] { (i, j) } else { (j, i) });
                            q.push(scores[k]);
                        }
                    }
                    ticker.tick(d * d / 2, check)?;
                    let (p, c) = cand[sel.choose(rng, &q)];
                    inside[c] = true;
                    edges.push((p, c));
                }
            }
            Method::Tree2 => unreachable!("handled above"),
        }
        Ok(edges)
    }

    /// Measures, selects and estimates: the fitted model. `counts` must come from
    /// [`Self::counter`] of this spec.
    pub fn fit<R: Rng + ?Sized>(
        &self, rng: &mut R, counts: &PairCounts, check: &mut dyn FnMut() -> Result<(), Interrupted>,
    ) -> Result<Model, ReleaseFailure> {
        let d = self.cards.len();
        assert_eq!(counts.cardinalities(), &self.cards[..], "counts of another shape");
        let mut ticker = Ticker::default();
        // (1) the 1-way tables
        let mut raw_one = Vec::with_capacity(d);
        for j in 0..d {
            raw_one.push(noisy(rng, counts.one_way(j), &self.one_way_noise, &mut ticker, check)?);
        }
        // public reference for the scores: n̂ and the margins from the 1-way tables alone
        // (floored: at huge ε the variance underflows to 0 and the weights would be infinite)
        let one_var = self.one_way_noise.variance().max(1e-12);
        let (n_hat, probs) = model::reference(&self.cards, &raw_one);
        let two_noise = self.two_way_noise.unwrap_or(self.one_way_noise);
        if self.method == Method::Tree2 {
            // (2) and (3) interleaved: each clique is measured right after it is chosen
            let mut measure = |rng: &mut R, cols: &[usize], check: &mut dyn FnMut() -> Result<(), Interrupted>| {
                noisy(rng, &counts.table(cols), &two_noise, &mut ticker, check)
            };
            let mut cliques = self.select_cliques(rng, counts, n_hat, &probs, &mut measure, check)?;
            let (edges, raw_two) = if cliques.is_empty() {
                (Vec::new(), Vec::new())
            } else {
                let (pair, t) = cliques.remove(0);
                (vec![(pair[0], pair[1])], vec![t])
            };
            let three = cliques.into_iter().map(|(c, t)| ([c[0], c[1], c[2]], t)).collect();
            return model::Model::estimate(&self.cards, raw_one, one_var, edges, raw_two, three, two_noise.variance().max(1e-12), check);
        }
        // (2) the structure
        let chosen = self.select(rng, counts, n_hat, &probs, check)?;
        let oriented = match self.method {
            Method::Mst => model::orient(d, &chosen, 0),
            Method::PrivBayes | Method::Tree2 => chosen,
        };
        // (3) the chosen pair tables, measured as i < j and stored parent-major
        let mut raw_two = Vec::with_capacity(oriented.len());
        for &(p, c) in &oriented {
            let (i, j) = (p.min(c), p.max(c));
            let t = noisy(rng, counts.two_way(i, j), &two_noise, &mut ticker, check)?;
            raw_two.push(if p < c { t } else { model::transpose(&t, self.cards[i], self.cards[j]) });
        }
        // (4) and (5): estimation and the samplers, post-processing
        model::Model::estimate(&self.cards, raw_one, one_var, oriented, raw_two, Vec::new(), two_noise.variance().max(1e-12), check)
    }
}

/// The structure's edges of a list of cliques: (a, b) for the first pair, then (a, c), (b, c) for
/// each clique [a, b, c].
fn clique_edges(cliques: &[Vec<usize>]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for c in cliques {
        match c[..] {
            [a, b] => out.push((a, b)),
            [a, b, c] => {
                out.push((a, c));
                out.push((b, c));
            }
            _ => {}
        }
    }
    out
}

/// A table plus independent noise in every cell.
fn noisy<R: Rng + ?Sized>(
    rng: &mut R, table: &[u64], noise: &TableNoise, ticker: &mut Ticker, check: &mut dyn FnMut() -> Result<(), Interrupted>,
) -> Result<Vec<i64>, ReleaseFailure> {
    let mut out = crate::release::try_vec(table.len())?;
    for &n in table {
        let v = (n as i128).saturating_add(noise.draw(rng));
        out.push(v.clamp(i64::MIN as i128, i64::MAX as i128) as i64);
        ticker.tick(1, check)?;
    }
    Ok(out)
}
