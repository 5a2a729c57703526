//! Acceptance criteria of a synthetic release, computed with DP, and private selection
//! ([`selection`]). The derivations are in docs/privacy/synthetic-criteria.md.
//!
//! **Neighbouring relation: add or remove one row** of the real table D.
//!
//! Columns are codes: column j takes the codes 0..c_j with a public cardinality c_j. Some columns are
//! also numeric: each declared [`NumericColumn`] has public bounds, and rows carry one value per
//! numeric column (in declaration order) next to their codes. A candidate synthetic table S is
//! public (a post-processing of earlier DP outputs): its m rows of codes and values are given as a
//! [`Candidate`].
//!
//! # Calling order (pay before reading)
//!
//! 1. [`CriteriaSpec::new`] validates the public arguments; [`CriteriaSpec::count_bytes`] and
//!    [`CriteriaSpec::receipt`] read nothing else.
//! 2. [`CriteriaSpec::start`] allocates a [`RealStatistics`] (the exact k-way tables and sufficient
//!    statistics), fed with [`RealStatistics::push`] during the one scan of D (and
//!    [`RealStatistics::merge`] for parallel scans). No error can depend on the data: NaN values
//!    are the midpoint, codes are clamped to their cardinality.
//! 3. [`CriteriaSpec::release_hoisted`] releases, once, the noisy statistics of the criteria whose
//!    private side does not depend on the candidate (1-way relative error, conditional means,
//!    regression coefficients).
//! 4. In the selection loop, [`CriteriaSpec::evaluate`] scores each candidate: the hoisted criteria
//!    are post-processing of [`HoistedStatistics`] (no budget, no randomness); the max marginal
//!    error and train-on-synthetic-test-on-real draw fresh noise for every candidate.
//!
//! Faithfulness ([`faithfulness`]) keeps D's rows as counts per key, a public function of one row
//! (its exact index in the domain, or a hash of it above 2^23 types), and matches the candidate's
//! rows to them by a maximum flow, with fresh noise for every candidate.
pub mod faithfulness;
pub mod linear;
pub mod selection;

use crate::accounting::charge::mechanism_epsilon;
use crate::error::{DpError, DpResult};
use crate::mechanisms::laplace::{laplace_noise, laplace_scale_f64, DISCRETE_LAPLACE};
use crate::params::{check_epsilon, check_float_bounds, fmt_f64};
use linear::{GridModel, LinearStats, Scaling, ONE};
use crate::release::dprp::{Interrupted, ReleaseFailure};
use crate::release::{try_filled_in, try_vec};
use rand::Rng;
use serde::Serialize;

/// Largest k of the max-marginal-error criterion.
pub const MAX_K: usize = 3;
/// Largest number of cells of all the k-way count tables of D together (8 bytes each): 2^25 cells,
/// 256 MiB.
pub const MAX_COUNT_CELLS: u128 = 1 << 25;
/// Bytes per count cell (u64).
pub const CELL_BYTES: u128 = 8;
/// Largest cardinality of one column.
pub const MAX_CARDINALITY: u32 = 1 << 24;
/// Share of a conditional-means criterion's ε spent on the group sums (the rest on the counts).
pub const MEANS_SUM_SHARE: f64 = 0.7;

/// One numeric column: its index among the columns and its public bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NumericColumn {
    pub column: usize,
    pub lower: f64,
    pub upper: f64,
}

/// One criterion as the caller asks for it. Column arguments are column indices; numeric ones must
/// be declared in [`CriteriaParams::numeric`].
#[derive(Debug, Clone, PartialEq)]
pub enum CriterionParams {
    /// max over every set of at most k columns and every cell of |N_D(c) − N_S(c)|; passes when the
    /// noisy value is at most threshold·m (threshold a fraction of the m rows).
    MaxMarginalError { k: usize, threshold: f64, epsilon: f64 },
    /// max over columns and values of |N_S(v) − Ñ_D(v)| / (max(Ñ_D(v), 0) + 1), with Ñ_D the noisy
    /// 1-way counts of D released once; passes when at most threshold.
    OneWayRelativeError { threshold: f64, epsilon: f64 },
    /// max over the groups (codes of column `group`) of |mean_S − mean_D̃| of column `value` as a
    /// fraction of its span; mean_D̃ from noisy clamped sums and counts released once.
    ConditionalMeans { group: usize, value: usize, threshold: f64, epsilon: f64 },
    /// max over the coefficients (intercept and features, scaled units) of |β̃_D − β_S|, with β̃_D
    /// solved from noisy ZᵀZ and Zᵀy released once.
    Regression { target: usize, features: Vec<usize>, threshold: f64, epsilon: f64 },
    /// Mean squared error on D (scaled units, values clamped) of the least-squares model fitted on S:
    /// the noisy sum of squared residuals divided by m; passes when at most threshold.
    TrainSyntheticTestReal { target: usize, features: Vec<usize>, threshold: f64, epsilon: f64 },
    /// The size of a maximum one-to-one matching between the rows of D and of S, a pair allowed when
    /// their codes differ in at most one column, as a fraction of the rows of S matched (all of them
    /// up to [`faithfulness::MAX_ROWS`], else that many drawn at random); passes when the noisy value
    /// is at least threshold (between 0 and 1).
    Faithfulness { threshold: f64, epsilon: f64 },
}

/// The public arguments of the criteria.
#[derive(Debug, Clone, PartialEq)]
pub struct CriteriaParams {
    pub cardinalities: Vec<u32>,
    pub numeric: Vec<NumericColumn>,
    pub criteria: Vec<CriterionParams>,
}

/// A validated criterion: column arguments resolved to numeric indices.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    MaxMarginal { k: usize },
    OneWay,
    Means { group: usize, value: usize },
    Regression { target: usize, features: Vec<usize> },
    Tstr { target: usize, features: Vec<usize> },
    Faithfulness,
}

#[derive(Debug, Clone, PartialEq)]
struct Criterion {
    kind: Kind,
    threshold: f64,
    epsilon: f64,
}

/// A set of columns whose joint count table is kept, with the strides of its cell index.
#[derive(Debug, Clone, PartialEq)]
struct Subset {
    columns: Vec<usize>,
    strides: Vec<usize>,
    cells: usize,
}

/// The validated criteria: everything here is public.
#[derive(Debug, Clone, PartialEq)]
pub struct CriteriaSpec {
    pub cardinalities: Vec<u32>,
    numeric: Vec<NumericColumn>,
    scaling: Vec<Scaling>,
    criteria: Vec<Criterion>,
    /// Every set of 1..=k_tables columns, by size then lexicographically (the first d are the
    /// single columns).
    subsets: Vec<Subset>,
    k_tables: usize,
}

pub const NAME_MAX_MARGINAL: &str = "max_marginal_error";
pub const NAME_ONE_WAY: &str = "one_way_relative_error";
pub const NAME_MEANS: &str = "conditional_means";
pub const NAME_REGRESSION: &str = "regression_coefficients";
pub const NAME_TSTR: &str = "train_synthetic_test_real";
pub const NAME_FAITHFULNESS: &str = "faithfulness";

/// One row of the receipt: what a criterion spends and how it is noised.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CriterionReceipt {
    pub name: &'static str,
    pub threshold: f64,
    pub epsilon: f64,
    pub mechanism: &'static str,
    /// Released once before the loop (true) or with fresh noise for every candidate (false).
    pub hoisted: bool,
    /// Add/remove L1 sensitivity of each noised statistic, in its output units (for the train on
    /// synthetic, test on real criterion it depends on the candidate: see `rule`).
    pub sensitivity: Vec<f64>,
    /// Laplace scale b of the noise on each statistic, in the same units.
    pub noise_scale: Vec<f64>,
    /// The noised statistics, the units of the sensitivities and the pass rule.
    pub rule: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CriteriaReceipt {
    pub neighbours: &'static str,
    pub criteria: Vec<CriterionReceipt>,
    /// Σ ε of the hoisted criteria, spent once.
    pub epsilon_hoisted: f64,
    /// Σ ε of the criteria evaluated with fresh noise on every candidate (ε₁ of one try, without
    /// the model).
    pub epsilon_per_candidate: f64,
    pub count_bytes: u128,
}

/// An exact private statistic that receives noise, with its L1 sensitivity in the same integer
/// units. **Not private**: exposed for tests and audits of the sensitivities only.
#[derive(Debug, Clone, PartialEq)]
pub struct PrivateStatistic {
    pub name: &'static str,
    /// Index of the criterion in [`CriteriaParams::criteria`].
    pub criterion: usize,
    pub values: Vec<i128>,
    pub sensitivity: u128,
}

/// The noisy statistics of the hoisted criteria, released once (per criterion, per part).
#[derive(Debug, Clone, PartialEq)]
pub struct HoistedStatistics {
    parts: Vec<Vec<Vec<i128>>>,
}

impl HoistedStatistics {
    /// The released (noisy) parts of criterion `criterion`, in the order of
    /// [`CriteriaSpec::hoisted_statistics`]; empty for a criterion noised per candidate. DP outputs.
    pub fn parts(&self, criterion: usize) -> &[Vec<i128>] {
        &self.parts[criterion]
    }
}

/// A candidate synthetic table: m rows of codes (row-major) and, for each declared numeric column,
/// m decoded values (row-major, one per numeric column in declaration order). Public.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate<'a> {
    codes: &'a [u32],
    values: &'a [f64],
    m: usize,
}

impl<'a> Candidate<'a> {
    /// Checks the shapes and the codes against the spec (a candidate is public: errors are fine).
    pub fn new(spec: &CriteriaSpec, codes: &'a [u32], values: &'a [f64]) -> DpResult<Candidate<'a>> {
        let d = spec.cardinalities.len();
        if !codes.len().is_multiple_of(d) {
            return Err(DpError::invalid("candidate", format!("whole rows of {d} codes"), format!("{} codes", codes.len())));
        }
        let m = codes.len() / d;
        let nn = spec.numeric.len();
        if values.len() != m * nn {
            return Err(DpError::invalid("candidate", format!("{} values ({m} rows × {nn} numeric columns)", m * nn), values.len()));
        }
        for (i, &c) in codes.iter().enumerate() {
            if c >= spec.cardinalities[i % d] {
                return Err(DpError::invalid("candidate", format!("codes of column {} below {}", i % d, spec.cardinalities[i % d]), c));
            }
        }
        Ok(Candidate { codes, values, m })
    }

    pub fn rows(&self) -> usize {
        self.m
    }
}

/// The result of one criterion on one candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CriterionResult {
    pub name: &'static str,
    /// The DP value compared with the threshold, in the criterion's units (see the receipt's rule).
    pub value: f64,
    pub threshold: f64,
    pub passed: bool,
    pub hoisted: bool,
    pub epsilon: f64,
    /// The sensitivity and noise scale used for this candidate's noise (for hoisted criteria those
    /// of their released statistics), in the receipt's units.
    pub sensitivity: Vec<f64>,
    pub noise_scale: Vec<f64>,
    /// For the criteria noised per candidate: the noisy integer statistic (exact statistic plus
    /// discrete Laplace noise, in the statistic's integer units).
    #[serde(skip)]
    pub noisy_statistic: Option<i128>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evaluation {
    pub results: Vec<CriterionResult>,
    /// Every criterion passed.
    pub passed: bool,
}

fn check_threshold(t: f64) -> DpResult<f64> {
    if t.is_finite() && t >= 0.0 {
        Ok(t)
    } else {
        Err(DpError::invalid("threshold", "a finite number at least 0", fmt_f64(t)))
    }
}

fn combinations(d: usize, size: usize, out: &mut Vec<Vec<usize>>) {
    fn rec(start: usize, d: usize, left: usize, cur: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if left == 0 {
            out.push(cur.clone());
            return;
        }
        for j in start..=d - left {
            cur.push(j);
            rec(j + 1, d, left - 1, cur, out);
            cur.pop();
        }
    }
    if size <= d {
        rec(0, d, size, &mut Vec::new(), out);
    }
}

/// Number of cells of all the tables of 1..=k columns (saturating), from the cardinalities only.
pub fn table_cells(cardinalities: &[u32], k: usize) -> u128 {
    // elementary symmetric sums e_1..e_k of the cardinalities
    let mut e = vec![0u128; k + 1];
    e[0] = 1;
    for &c in cardinalities {
        for s in (1..=k).rev() {
            e[s] = e[s].saturating_add(e[s - 1].saturating_mul(c as u128));
        }
    }
    e[1..].iter().fold(0u128, |a, &b| a.saturating_add(b))
}

/// ε split of a conditional-means criterion: (sums, counts), adding up to ε exactly.
fn means_split(eps: f64) -> (f64, f64) {
    let es = eps * MEANS_SUM_SHARE;
    (es, eps - es)
}

impl CriteriaSpec {
    pub fn new(p: CriteriaParams) -> DpResult<CriteriaSpec> {
        let d = p.cardinalities.len();
        if d == 0 {
            return Err(DpError::invalid("cardinalities", "at least one column", 0));
        }
        for &c in &p.cardinalities {
            if c == 0 || c > MAX_CARDINALITY {
                return Err(DpError::invalid("cardinalities", format!("each between 1 and {MAX_CARDINALITY}"), c));
            }
        }
        let mut scaling = Vec::with_capacity(p.numeric.len());
        for (i, nc) in p.numeric.iter().enumerate() {
            if nc.column >= d {
                return Err(DpError::invalid("numeric", format!("column indices below {d}"), nc.column));
            }
            if p.numeric[..i].iter().any(|o| o.column == nc.column) {
                return Err(DpError::invalid("numeric", "distinct columns", nc.column));
            }
            let (lo, hi) = check_float_bounds(nc.lower, nc.upper)?;
            scaling.push(Scaling::new(lo, hi));
        }
        let numeric_index = |arg: &'static str, col: usize| -> DpResult<usize> {
            p.numeric.iter().position(|n| n.column == col).ok_or_else(|| DpError::invalid(arg, "a column declared numeric", col))
        };
        if p.criteria.is_empty() {
            return Err(DpError::invalid("criteria", "at least one criterion", 0));
        }
        let mut criteria = Vec::with_capacity(p.criteria.len());
        let mut k_tables = 0usize;
        for c in &p.criteria {
            let (kind, threshold, epsilon) = match c {
                CriterionParams::MaxMarginalError { k, threshold, epsilon } => {
                    if *k < 1 || *k > MAX_K.min(d) {
                        return Err(DpError::invalid("k", format!("between 1 and {}", MAX_K.min(d)), k));
                    }
                    k_tables = k_tables.max(*k);
                    (Kind::MaxMarginal { k: *k }, threshold, epsilon)
                }
                CriterionParams::OneWayRelativeError { threshold, epsilon } => {
                    k_tables = k_tables.max(1);
                    (Kind::OneWay, threshold, epsilon)
                }
                CriterionParams::ConditionalMeans { group, value, threshold, epsilon } => {
                    if *group >= d {
                        return Err(DpError::invalid("group", format!("a column index below {d}"), group));
                    }
                    (Kind::Means { group: *group, value: numeric_index("value", *value)? }, threshold, epsilon)
                }
                CriterionParams::Regression { target, features, threshold, epsilon }
                | CriterionParams::TrainSyntheticTestReal { target, features, threshold, epsilon } => {
                    let t = numeric_index("target", *target)?;
                    let mut f = Vec::with_capacity(features.len());
                    for &col in features {
                        let i = numeric_index("features", col)?;
                        if i == t || f.contains(&i) {
                            return Err(DpError::invalid("features", "distinct numeric columns other than the target", col));
                        }
                        f.push(i);
                    }
                    let kind = if matches!(c, CriterionParams::Regression { .. }) {
                        Kind::Regression { target: t, features: f }
                    } else {
                        Kind::Tstr { target: t, features: f }
                    };
                    (kind, threshold, epsilon)
                }
                CriterionParams::Faithfulness { threshold, epsilon } => {
                    if !(*threshold <= 1.0) {
                        return Err(DpError::invalid("threshold", "a fraction between 0 and 1 for faithfulness", fmt_f64(*threshold)));
                    }
                    (Kind::Faithfulness, threshold, epsilon)
                }
            };
            criteria.push(Criterion { kind, threshold: check_threshold(*threshold)?, epsilon: check_epsilon("epsilon", *epsilon)? });
        }
        let cells = table_cells(&p.cardinalities, k_tables);
        if cells > MAX_COUNT_CELLS {
            let arg = if k_tables > 1 { "k" } else { "cardinalities" };
            return Err(DpError::invalid(
                arg,
                format!("small enough that the count tables of at most k columns hold at most {MAX_COUNT_CELLS} cells ({} MiB)", (MAX_COUNT_CELLS * CELL_BYTES) >> 20),
                format!("{k_tables} with {cells} cells"),
            ));
        }
        let mut subsets = Vec::new();
        for size in 1..=k_tables {
            let mut combos = Vec::new();
            combinations(d, size, &mut combos);
            for columns in combos {
                let mut strides = vec![0; size];
                let mut cells = 1usize;
                for (i, &j) in columns.iter().enumerate().rev() {
                    strides[i] = cells;
                    cells *= p.cardinalities[j] as usize;
                }
                subsets.push(Subset { columns, strides, cells });
            }
        }
        Ok(CriteriaSpec { cardinalities: p.cardinalities, numeric: p.numeric, scaling, criteria, subsets, k_tables })
    }

    pub fn columns(&self) -> usize {
        self.cardinalities.len()
    }

    /// The column index of each numeric column, in declaration order (the order of a row's values).
    pub fn numeric_column_indices(&self) -> Vec<usize> {
        self.numeric.iter().map(|n| n.column).collect()
    }

    pub fn numeric_columns(&self) -> usize {
        self.numeric.len()
    }

    /// Memory of a [`RealStatistics`], from the public arguments: 8 bytes per cell of every count
    /// table of at most k columns, 24 per group of a conditional mean, 16 per linear statistic.
    pub fn count_bytes(&self) -> u128 {
        let cells = table_cells(&self.cardinalities, self.k_tables);
        let mut b = cells * CELL_BYTES;
        for c in &self.criteria {
            b += match &c.kind {
                Kind::Means { group, .. } => 24 * self.cardinalities[*group] as u128,
                Kind::Regression { features, .. } | Kind::Tstr { features, .. } => {
                    let q = features.len() + 1;
                    16 * (linear::triangle_len(q) + q + 1) as u128
                }
                Kind::Faithfulness => faithfulness::count_bytes(&self.cardinalities),
                _ => 0,
            };
        }
        b
    }

    /// Bytes the evaluation of one candidate of `m` rows may allocate besides the candidate itself,
    /// from public inputs only: the faithfulness criterion's flow, and each criterion's scratch (the
    /// largest count table of a max marginal error, a column's counts for the 1-way error, the groups
    /// of a conditional mean, the candidate's linear statistics). Criteria run one after the other.
    pub fn candidate_bytes(&self, m: usize) -> u128 {
        self.criteria
            .iter()
            .map(|c| match &c.kind {
                Kind::Faithfulness => faithfulness::flow_bytes(&self.cardinalities, m),
                Kind::MaxMarginal { k } => 8 * self.subsets.iter().filter(|s| s.columns.len() <= *k).map(|s| s.cells as u128).max().unwrap_or(0),
                Kind::OneWay => 8 * self.cardinalities.iter().map(|&c| c as u128).max().unwrap_or(0),
                Kind::Means { group, .. } => 24 * self.cardinalities[*group] as u128,
                Kind::Regression { features, .. } | Kind::Tstr { features, .. } => {
                    let q = features.len() + 1;
                    // the candidate's statistics and the solve's working copies
                    3 * 16 * (linear::triangle_len(q) + q + 1) as u128 + 32 * (q * q) as u128
                }
            })
            .max()
            .unwrap_or(0)
    }

    fn is_hoisted(kind: &Kind) -> bool {
        matches!(kind, Kind::OneWay | Kind::Means { .. } | Kind::Regression { .. })
    }

    /// Sensitivities (integer units) and the ε of each noised part of a hoisted criterion.
    fn hoisted_parts(&self, c: &Criterion) -> Vec<(u128, f64)> {
        match &c.kind {
            Kind::OneWay => vec![(self.columns() as u128, c.epsilon)],
            Kind::Means { .. } => {
                let (es, ec) = means_split(c.epsilon);
                vec![(ONE as u128, es), (1, ec)]
            }
            Kind::Regression { features, .. } => vec![(LinearStats::released_sensitivity(features.len() + 1), c.epsilon)],
            _ => vec![],
        }
    }

    /// Output units of one integer unit of each hoisted part (for the receipt).
    fn hoisted_units(&self, c: &Criterion) -> Vec<f64> {
        let one = ONE as f64;
        match &c.kind {
            Kind::OneWay => vec![1.0],
            Kind::Means { .. } => vec![1.0 / one, 1.0],
            Kind::Regression { .. } => vec![1.0 / (one * one)],
            _ => vec![],
        }
    }

    pub fn receipt(&self) -> CriteriaReceipt {
        let mut rows = Vec::new();
        let (mut eh, mut el) = (0.0, 0.0);
        for c in &self.criteria {
            let hoisted = Self::is_hoisted(&c.kind);
            if hoisted {
                eh += c.epsilon;
            } else {
                el += c.epsilon;
            }
            let (name, sens, scale, rule): (_, Vec<f64>, Vec<f64>, String) = match &c.kind {
                Kind::MaxMarginal { k } => (
                    NAME_MAX_MARGINAL,
                    vec![1.0],
                    vec![laplace_scale_f64(1, mechanism_epsilon(c.epsilon))],
                    format!("max over the tables of at most {k} columns and their cells of |N_D − N_S| (rows), plus noise; passes when at most threshold·m"),
                ),
                Kind::Tstr { .. } => (
                    NAME_TSTR,
                    vec![],
                    vec![],
                    "Σ over D of the squared residual (scaled units) of the model fitted on S, plus noise, divided by m; the sensitivity is the candidate's per-row loss bound (1 + Σ|β_a|)² on the grid, the scale that bound over ε; passes when at most threshold".into(),
                ),
                Kind::Faithfulness => (
                    NAME_FAITHFULNESS,
                    vec![1.0],
                    vec![laplace_scale_f64(1, mechanism_epsilon(c.epsilon))],
                    format!(
                        "size of a maximum one-to-one matching between the rows of D and S, a pair allowed when their codes differ in at most one column{}, plus noise, divided by the rows matched (all of S up to 10,000 rows, else 10,000 drawn at random); passes when at least threshold",
                        if faithfulness::Keys::hashes(&self.cardinalities) {
                            format!(" (D's rows counted under a public hash of their codes into {} keys: types sharing a key may also be paired)", faithfulness::MAX_KEYS)
                        } else {
                            String::new()
                        },
                    ),
                ),
                _ => {
                    let units = self.hoisted_units(c);
                    let parts = self.hoisted_parts(c);
                    let sens = parts.iter().zip(&units).map(|((s, _), u)| *s as f64 * u).collect();
                    let scale = parts.iter().zip(&units).map(|((s, e), u)| laplace_scale_f64(*s, mechanism_epsilon(*e)) * u).collect();
                    let (name, rule) = match &c.kind {
                        Kind::OneWay => (NAME_ONE_WAY, "noisy 1-way counts of every column (rows, L1 over all columns), released once; passes when max |N_S − max(Ñ_D, 0)|/(max(Ñ_D, 0) + 1) is at most threshold"),
                        Kind::Means { .. } => (NAME_MEANS, "noisy sums of the scaled clamped values (units of the half-span) and noisy counts per group, released once; passes when max over the groups whose noisy count is at least 5 count-noise scales of |mean_S − mean_D̃| / span is at most threshold"),
                        _ => (NAME_REGRESSION, "noisy ZᵀZ (upper triangle) and Zᵀy of the scaled clamped values with an intercept, released once; passes when max |β̃_D − β_S| (scaled units) is at most threshold"),
                    };
                    (name, sens, scale, rule.into())
                }
            };
            rows.push(CriterionReceipt { name, threshold: c.threshold, epsilon: c.epsilon, mechanism: DISCRETE_LAPLACE, hoisted, sensitivity: sens, noise_scale: scale, rule });
        }
        CriteriaReceipt { neighbours: "add or remove one row", criteria: rows, epsilon_hoisted: eh, epsilon_per_candidate: el, count_bytes: self.count_bytes() }
    }

    /// The smallest noisy group count a conditional-means criterion compares: 5 noise scales of the
    /// counts' discrete Laplace noise (an empty group reaches it with probability below e^-5/2).
    fn means_count_floor(&self, epsilon: f64) -> f64 {
        let (_, ec) = means_split(epsilon);
        (5.0 * laplace_scale_f64(1, mechanism_epsilon(ec))).max(1.0)
    }

    /// Σ ε of the hoisted criteria (spent once).
    pub fn hoisted_epsilon(&self) -> f64 {
        self.criteria.iter().filter(|c| Self::is_hoisted(&c.kind)).map(|c| c.epsilon).sum()
    }

    /// Σ ε of the criteria noised for every candidate: one try's ε, without the model.
    pub fn loop_epsilon(&self) -> f64 {
        self.criteria.iter().filter(|c| !Self::is_hoisted(&c.kind)).map(|c| c.epsilon).sum()
    }

    /// An empty accumulator for the scan of D (allocates [`count_bytes`](Self::count_bytes)).
    pub fn start(&self) -> RealStatistics {
        let tables = self.subsets.iter().map(|s| vec![0u64; s.cells]).collect();
        let acc = self
            .criteria
            .iter()
            .map(|c| match &c.kind {
                Kind::Means { group, .. } => Accum::Means { sums: vec![0; self.cardinalities[*group] as usize], counts: vec![0; self.cardinalities[*group] as usize] },
                Kind::Regression { features, .. } | Kind::Tstr { features, .. } => Accum::Linear(LinearStats::new(features.len())),
                Kind::Faithfulness => {
                    let keys = faithfulness::Keys::new(&self.cardinalities);
                    let counts = vec![0u32; keys.keys()];
                    Accum::Faith { keys, counts }
                }
                _ => Accum::None,
            })
            .collect();
        RealStatistics { spec: self.clone(), tables, acc, z: Vec::new() }
    }

    /// The exact statistics the hoisted criteria noise. **Not private** (tests and audits only).
    pub fn hoisted_statistics(&self, real: &RealStatistics) -> Vec<PrivateStatistic> {
        let mut out = Vec::new();
        for (i, c) in self.criteria.iter().enumerate() {
            let parts = self.hoisted_parts(c);
            let values: Vec<Vec<i128>> = match (&c.kind, &real.acc[i]) {
                (Kind::OneWay, _) => vec![real.tables[..self.columns()].iter().flatten().map(|&v| v as i128).collect()],
                (Kind::Means { .. }, Accum::Means { sums, counts }) => vec![sums.clone(), counts.iter().map(|&v| v as i128).collect()],
                (Kind::Regression { .. }, Accum::Linear(s)) => vec![s.released_vector()],
                _ => continue,
            };
            for (v, (sens, _)) in values.into_iter().zip(parts) {
                out.push(PrivateStatistic { name: self.name(i), criterion: i, values: v, sensitivity: sens });
            }
        }
        out
    }

    fn name(&self, i: usize) -> &'static str {
        match self.criteria[i].kind {
            Kind::MaxMarginal { .. } => NAME_MAX_MARGINAL,
            Kind::OneWay => NAME_ONE_WAY,
            Kind::Means { .. } => NAME_MEANS,
            Kind::Regression { .. } => NAME_REGRESSION,
            Kind::Tstr { .. } => NAME_TSTR,
            Kind::Faithfulness => NAME_FAITHFULNESS,
        }
    }

    /// Releases the hoisted criteria's statistics, once: every entry plus discrete Laplace noise of
    /// scale sensitivity/ε. Draws nothing for the other criteria.
    pub fn release_hoisted<R: Rng + ?Sized>(&self, rng: &mut R, real: &RealStatistics) -> HoistedStatistics {
        let mut parts: Vec<Vec<Vec<i128>>> = vec![Vec::new(); self.criteria.len()];
        let exact = self.hoisted_statistics(real);
        let mut next = vec![0usize; self.criteria.len()];
        for st in exact {
            let i = st.criterion;
            let eps = self.hoisted_parts(&self.criteria[i])[next[i]].1;
            next[i] += 1;
            let me = mechanism_epsilon(eps);
            let noisy = st.values.iter().map(|&v| v.saturating_add(laplace_noise(rng, st.sensitivity, me).0)).collect();
            parts[i].push(noisy);
        }
        HoistedStatistics { parts }
    }

    /// The exact statistics the per-candidate criteria noise, for one candidate. **Not private**
    /// (tests and audits only).
    pub fn loop_statistics(&self, real: &RealStatistics, cand: &Candidate) -> Vec<PrivateStatistic> {
        let mut out = Vec::new();
        for (i, c) in self.criteria.iter().enumerate() {
            match (&c.kind, &real.acc[i]) {
                (Kind::MaxMarginal { k }, _) => {
                    out.push(PrivateStatistic { name: NAME_MAX_MARGINAL, criterion: i, values: vec![self.max_marginal_error(real, cand, *k, &mut || Ok(())).unwrap_or(0) as i128], sensitivity: 1 })
                }
                (Kind::Tstr { target, features }, Accum::Linear(s)) => {
                    let model = self.candidate_model(cand, *target, features);
                    let bound = model.bound * model.bound;
                    out.push(PrivateStatistic { name: NAME_TSTR, criterion: i, values: vec![model.sum_squared_residuals(s)], sensitivity: bound });
                }
                (Kind::Faithfulness, Accum::Faith { keys, counts }) => {
                    // the first MAX_ROWS rows (an evaluation draws a random subset above it)
                    let rows = &cand.codes[..cand.m.min(faithfulness::MAX_ROWS) * self.columns()];
                    let size = faithfulness::matching(keys, counts, rows, self.columns(), &mut || Ok(())).unwrap_or(0);
                    out.push(PrivateStatistic { name: NAME_FAITHFULNESS, criterion: i, values: vec![size as i128], sensitivity: 1 });
                }
                _ => {}
            }
        }
        out
    }

    /// max over tables of at most k columns and their cells of |N_D(c) − N_S(c)|.
    fn max_marginal_error(&self, real: &RealStatistics, cand: &Candidate, k: usize, check: &mut dyn FnMut() -> Result<(), Interrupted>) -> Result<u64, ReleaseFailure> {
        let d = self.columns();
        let mut worst = 0u64;
        // room for the largest table of at most k columns (public), allocated once, fallibly
        let largest = self.subsets.iter().filter(|s| s.columns.len() <= k).map(|s| s.cells).max().unwrap_or(0);
        let mut counts: Vec<u64> = try_vec(largest)?;
        for (s, sub) in self.subsets.iter().enumerate() {
            if sub.columns.len() > k {
                continue;
            }
            // one pass over the candidate's rows per subset: up to C(d, 3) passes
            check()?;
            counts.clear();
            counts.resize(sub.cells, 0);
            for row in cand.codes.chunks_exact(d) {
                counts[sub.index(row)] += 1;
            }
            for (a, b) in real.tables[s].iter().zip(&counts) {
                worst = worst.max(a.abs_diff(*b));
            }
        }
        Ok(worst)
    }

    /// The candidate's exact sufficient statistics for a linear model.
    fn candidate_stats(&self, cand: &Candidate, target: usize, features: &[usize]) -> LinearStats {
        let nn = self.numeric.len();
        let mut s = LinearStats::new(features.len());
        let mut z = vec![ONE; features.len() + 1];
        for row in cand.values.chunks_exact(nn.max(1)).take(cand.m) {
            for (zi, &f) in z[1..].iter_mut().zip(features) {
                *zi = self.scaling[f].quantize(row[f]);
            }
            s.push(&z, self.scaling[target].quantize(row[target]));
        }
        s
    }

    fn candidate_model(&self, cand: &Candidate, target: usize, features: &[usize]) -> GridModel {
        let s = self.candidate_stats(cand, target, features);
        GridModel::new(&linear::solve(s.q, &s.zz, &s.zy))
    }

    /// Scores one candidate: the hoisted criteria from `hoisted` (post-processing, no draw), the
    /// others with fresh discrete Laplace noise.
    ///
    /// Every scratch allocation is fallible and sized from public inputs only
    /// ([`candidate_bytes`](Self::candidate_bytes) bounds them): a refusal is
    /// [`ReleaseFailure::OutOfMemory`], which says nothing about the data.
    pub fn evaluate<R: Rng + ?Sized>(
        &self, rng: &mut R, real: &RealStatistics, hoisted: &HoistedStatistics, cand: &Candidate, check: &mut dyn FnMut() -> Result<(), Interrupted>,
    ) -> Result<Evaluation, ReleaseFailure> {
        let d = self.columns();
        let m = cand.m;
        let mut results = Vec::with_capacity(self.criteria.len());
        for (i, c) in self.criteria.iter().enumerate() {
            check()?;
            let me = mechanism_epsilon(c.epsilon);
            let mut sensitivity = Vec::new();
            let mut noise_scale = Vec::new();
            let mut noisy_statistic = None;
            if Self::is_hoisted(&c.kind) {
                let units = self.hoisted_units(c);
                for ((s, e), u) in self.hoisted_parts(c).into_iter().zip(units) {
                    sensitivity.push(s as f64 * u);
                    noise_scale.push(laplace_scale_f64(s, mechanism_epsilon(e)) * u);
                }
            }
            let (value, passed) = match &c.kind {
                Kind::MaxMarginal { k } => {
                    let exact = self.max_marginal_error(real, cand, *k, check)? as i128;
                    let (z, scale) = laplace_noise(rng, 1, me);
                    let noisy = exact.saturating_add(z);
                    noisy_statistic = Some(noisy);
                    sensitivity.push(1.0);
                    noise_scale.push(scale);
                    let v = noisy as f64 / (m.max(1) as f64);
                    (v, (noisy as f64) <= c.threshold * m as f64)
                }
                Kind::Tstr { target, features } => {
                    let Accum::Linear(s) = &real.acc[i] else { unreachable!() };
                    let model = self.candidate_model(cand, *target, features);
                    let bound = model.bound * model.bound;
                    let (z, scale) = laplace_noise(rng, bound, me);
                    let noisy = model.sum_squared_residuals(s).saturating_add(z);
                    noisy_statistic = Some(noisy);
                    let unit = ((ONE as f64) * (model.k() as f64)).powi(2);
                    sensitivity.push(bound as f64 / unit);
                    noise_scale.push(scale / unit);
                    let v = noisy as f64 / unit / (m.max(1) as f64);
                    (v, v <= c.threshold)
                }
                Kind::Faithfulness => {
                    let Accum::Faith { keys, counts } = &real.acc[i] else { unreachable!() };
                    let rows = faithfulness::rows_to_match(rng, cand.codes, d)?;
                    let matched = (rows.len() / d).max(1) as f64;
                    let exact = faithfulness::matching(keys, counts, &rows, d, check)? as i128;
                    let (z, scale) = laplace_noise(rng, 1, me);
                    let noisy = exact.saturating_add(z);
                    noisy_statistic = Some(noisy);
                    sensitivity.push(1.0);
                    noise_scale.push(scale);
                    (noisy as f64 / matched, (noisy as f64) >= c.threshold * matched)
                }
                Kind::OneWay => {
                    let noisy = &hoisted.parts[i][0];
                    let mut worst = 0.0f64;
                    let mut off = 0usize;
                    let widest = self.cardinalities.iter().map(|&c| c as usize).max().unwrap_or(0);
                    let mut counts: Vec<u64> = try_vec(widest)?;
                    for j in 0..d {
                        let cj = self.cardinalities[j] as usize;
                        counts.clear();
                        counts.resize(cj, 0);
                        for row in cand.codes.chunks_exact(d) {
                            counts[row[j] as usize] += 1;
                        }
                        for (v, &ns) in counts.iter().enumerate() {
                            // a noisy count below 0 is an empty cell: clipped on both sides
                            let nd = noisy[off + v].max(0) as f64;
                            let err = (ns as f64 - nd).abs() / (nd + 1.0);
                            worst = worst.max(err);
                        }
                        off += cj;
                    }
                    (worst, worst <= c.threshold)
                }
                Kind::Means { group, value } => {
                    let (sums, counts) = (&hoisted.parts[i][0], &hoisted.parts[i][1]);
                    let g = self.cardinalities[*group] as usize;
                    let nn = self.numeric.len();
                    let (mut ssum, mut scnt) = (try_filled_in(g, 0i128, g)?, try_filled_in(g, 0u64, g)?);
                    for r in 0..m {
                        let code = cand.codes[r * d + group] as usize;
                        ssum[code] += self.scaling[*value].quantize(cand.values[r * nn + value]) as i128;
                        scnt[code] += 1;
                    }
                    let one = ONE as f64;
                    // groups whose noisy count is within the noise of empty are not compared: their
                    // noisy mean is noise (a public rule on a DP output)
                    let floor = self.means_count_floor(c.epsilon);
                    let mut worst = 0.0f64;
                    for k in 0..g {
                        if (counts[k] as f64) < floor {
                            continue;
                        }
                        let ud = (sums[k] as f64 / one / (counts[k].max(1) as f64)).clamp(-1.0, 1.0);
                        let us = if scnt[k] > 0 { ssum[k] as f64 / one / scnt[k] as f64 } else { 0.0 };
                        worst = worst.max((ud - us).abs() / 2.0);
                    }
                    (worst, worst <= c.threshold)
                }
                Kind::Regression { target, features } => {
                    let q = features.len() + 1;
                    let v = &hoisted.parts[i][0];
                    let tl = linear::triangle_len(q);
                    let bd = linear::solve(q, &v[..tl], &v[tl..]);
                    let s = self.candidate_stats(cand, *target, features);
                    let bs = linear::solve(q, &s.zz, &s.zy);
                    let worst = bd.iter().zip(&bs).fold(0.0f64, |w, (a, b)| w.max((a - b).abs()));
                    (worst, worst <= c.threshold)
                }
            };
            results.push(CriterionResult {
                name: self.name(i),
                value,
                threshold: c.threshold,
                passed,
                hoisted: Self::is_hoisted(&c.kind),
                epsilon: c.epsilon,
                sensitivity,
                noise_scale,
                noisy_statistic,
            });
        }
        let passed = results.iter().all(|r| r.passed);
        Ok(Evaluation { results, passed })
    }
}

impl Subset {
    #[inline]
    fn index(&self, row: &[u32]) -> usize {
        self.columns.iter().zip(&self.strides).map(|(&j, &s)| row[j] as usize * s).sum()
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Accum {
    None,
    Means { sums: Vec<i128>, counts: Vec<u64> },
    Linear(LinearStats),
    /// D's rows counted per key (saturating: a capacity that stops growing is still 1-Lipschitz).
    Faith { keys: faithfulness::Keys, counts: Vec<u32> },
}

/// The exact statistics of D that the criteria need, accumulated in one scan. Private: only
/// [`CriteriaSpec::release_hoisted`] and [`CriteriaSpec::evaluate`] turn them into DP outputs.
#[derive(Debug, Clone)]
pub struct RealStatistics {
    spec: CriteriaSpec,
    tables: Vec<Vec<u64>>,
    acc: Vec<Accum>,
    /// Scratch space for one row's design vector (not part of the statistics).
    z: Vec<i64>,
}

impl PartialEq for RealStatistics {
    fn eq(&self, o: &Self) -> bool {
        self.spec == o.spec && self.tables == o.tables && self.acc == o.acc
    }
}

impl RealStatistics {
    /// Adds one row of D: `codes` has one code per column (a code at or above its cardinality is
    /// clamped to the last code), `values` one value per numeric column (NaN is the midpoint).
    /// Panics only on wrong lengths, a caller's error independent of the data.
    pub fn push(&mut self, codes: &[u32], values: &[f64]) {
        let spec = &self.spec;
        assert_eq!(codes.len(), spec.cardinalities.len(), "one code per column");
        assert_eq!(values.len(), spec.numeric.len(), "one value per numeric column");
        let mut row = [0u32; 64];
        let d = codes.len();
        let clamped: &[u32] = if d <= 64 {
            for (j, (&c, &card)) in codes.iter().zip(&spec.cardinalities).enumerate() {
                row[j] = c.min(card - 1);
            }
            &row[..d]
        } else {
            // rare: more than 64 columns (allocation per row)
            &codes.iter().zip(&spec.cardinalities).map(|(&c, &card)| c.min(card - 1)).collect::<Vec<_>>()
        };
        for (t, sub) in self.tables.iter_mut().zip(&spec.subsets) {
            t[sub.index(clamped)] += 1;
        }
        for (c, acc) in spec.criteria.iter().zip(self.acc.iter_mut()) {
            match (&c.kind, acc) {
                (Kind::Means { group, value }, Accum::Means { sums, counts }) => {
                    let g = clamped[*group] as usize;
                    sums[g] += spec.scaling[*value].quantize(values[*value]) as i128;
                    counts[g] += 1;
                }
                (Kind::Regression { target, features } | Kind::Tstr { target, features }, Accum::Linear(s)) => {
                    self.z.clear();
                    self.z.push(ONE);
                    self.z.extend(features.iter().map(|&f| spec.scaling[f].quantize(values[f])));
                    s.push(&self.z, spec.scaling[*target].quantize(values[*target]));
                }
                (Kind::Faithfulness, Accum::Faith { keys, counts }) => {
                    let k = keys.key(clamped) as usize;
                    counts[k] = counts[k].saturating_add(1);
                }
                _ => {}
            }
        }
    }

    /// Adds the statistics of another scan of the same spec (parallel scans).
    pub fn merge(&mut self, o: &RealStatistics) {
        assert!(self.spec == o.spec, "merge of statistics of different criteria");
        for (a, b) in self.tables.iter_mut().zip(&o.tables) {
            for (x, y) in a.iter_mut().zip(b) {
                *x += *y;
            }
        }
        for (a, b) in self.acc.iter_mut().zip(&o.acc) {
            match (a, b) {
                (Accum::Means { sums, counts }, Accum::Means { sums: s2, counts: c2 }) => {
                    sums.iter_mut().zip(s2).for_each(|(x, y)| *x += *y);
                    counts.iter_mut().zip(c2).for_each(|(x, y)| *x += *y);
                }
                (Accum::Linear(s), Accum::Linear(s2)) => s.merge(s2),
                (Accum::Faith { counts, .. }, Accum::Faith { counts: c2, .. }) => {
                    counts.iter_mut().zip(c2).for_each(|(x, y)| *x = x.saturating_add(*y));
                }
                _ => {}
            }
        }
    }
}
