//! The public encoding of a column into codes 0..k and back, for the synthetic release.
//!
//! Every encoding is fixed from public information before the table is read (a declared domain, the
//! bin edges or the bounds and bin count given by the caller or declared by the DBA), so the codes
//! reveal nothing: a value is only ever counted, with noise, never used to choose the encoding.
//!
//! - **Categorical**: codes 0..v are the v domain values in their declared order; code v means "NULL
//!   or a value outside the domain" (a value in the data never causes an error; it is released as
//!   NULL).
//! - **Real bins** on edges e₀ < e₁ < … < e_b: code k is [e_k, e_{k+1}) (the last bin is closed);
//!   values below e₀ or above e_b are clamped into the end bins; code b is NULL or NaN. A released
//!   value is uniform in its bin.
//! - **Integer bins** on integer edges: code k holds the integers e_k ≤ x < e_{k+1}; a released value
//!   is a uniform integer among them. Equal-width integer bins never hold fewer than one integer.
use crate::error::{DpError, DpResult};
use crate::noise::rng::uniform01;
use crate::mechanisms::quantile::PF_RATE_BITS;
use crate::noise::sampling::{dyadic_at_most, AcceptedUniform};
use crate::noise::sampling64::uniform_below;
use crate::params::{check_float_bounds, fmt_f64};
use crate::release::dprp::Interrupted;
use rand::Rng;

/// Most bins or domain values one column may have (the count tables grow with their products).
pub const MAX_CODES: usize = 100_001;

/// How one column is encoded.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnCode {
    /// `values` domain values, plus one code for NULL or a value outside the domain.
    Categorical { values: usize },
    /// Real bins on strictly increasing finite edges, plus one code for NULL or NaN.
    Real { edges: Vec<f64> },
    /// Integer bins: bin k holds the integers in [edges[k], edges[k+1]), plus one code for NULL.
    Integer { edges: Vec<i128> },
}

/// A value decoded from a code.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decoded {
    Null,
    /// The index of a domain value.
    Category(u32),
    Real(f64),
    Integer(i64),
}

fn too_many(arg: &'static str, got: usize) -> DpError {
    DpError::invalid(arg, format!("between 1 and {} values", MAX_CODES - 1), got)
}

impl ColumnCode {
    /// A categorical column with `values` public values.
    pub fn categorical(values: usize) -> DpResult<Self> {
        if values == 0 || values >= MAX_CODES {
            return Err(too_many("domain", values));
        }
        Ok(ColumnCode::Categorical { values })
    }

    /// Real bins on the caller's edges: at least two, finite, |e| ≤ 1e30, strictly increasing.
    pub fn real_edges(edges: Vec<f64>) -> DpResult<Self> {
        if edges.len() < 2 || edges.len() > MAX_CODES {
            return Err(DpError::invalid("bin_edges", format!("between 2 and {MAX_CODES} edges per column"), edges.len()));
        }
        for w in edges.windows(2) {
            check_float_bounds(w[0], w[1]).map_err(|_| {
                DpError::invalid("bin_edges", "finite numbers between -1e30 and 1e30, strictly increasing", format!("{} then {}", fmt_f64(w[0]), fmt_f64(w[1])))
            })?;
            if w[0] >= w[1] {
                return Err(DpError::invalid("bin_edges", "strictly increasing", format!("{} then {}", fmt_f64(w[0]), fmt_f64(w[1]))));
            }
        }
        Ok(ColumnCode::Real { edges })
    }

    /// `bins` equal-width real bins between public bounds (lower < upper).
    pub fn real_bins(lower: f64, upper: f64, bins: usize) -> DpResult<Self> {
        check_bins(bins)?;
        let (lower, upper) = check_float_bounds(lower, upper)?;
        if lower == upper {
            return Err(DpError::invalid("lower", format!("less than upper ({}) to make bins", fmt_f64(upper)), fmt_f64(lower)));
        }
        let width = (upper - lower) / bins as f64;
        let mut edges: Vec<f64> = (0..bins).map(|k| lower + width * k as f64).collect();
        edges.push(upper);
        edges.dedup();
        Self::real_edges(edges)
    }

    /// Integer bins on the caller's edges: strictly increasing integers; the last edge is the
    /// largest value (inclusive), so edges [0, 10, 20] are the bins 0–9 and 10–20.
    pub fn integer_edges(edges: &[i64]) -> DpResult<Self> {
        if edges.len() < 2 || edges.len() > MAX_CODES {
            return Err(DpError::invalid("bin_edges", format!("between 2 and {MAX_CODES} edges per column"), edges.len()));
        }
        if let Some(w) = edges.windows(2).find(|w| w[0] >= w[1]) {
            return Err(DpError::invalid("bin_edges", "strictly increasing", format!("{} then {}", w[0], w[1])));
        }
        let mut e: Vec<i128> = edges.iter().map(|&x| x as i128).collect();
        *e.last_mut().unwrap() += 1;
        Ok(ColumnCode::Integer { edges: e })
    }

    /// At most `bins` equal-width bins of the integers lower..=upper (fewer when there are fewer
    /// integers: each bin holds at least one).
    pub fn integer_bins(lower: i64, upper: i64, bins: usize) -> DpResult<Self> {
        check_bins(bins)?;
        if lower > upper {
            return Err(DpError::invalid("lower", format!("at most upper ({upper})"), lower));
        }
        let count = upper as i128 - lower as i128 + 1;
        let b = (bins as i128).min(count);
        let edges: Vec<i128> = (0..=b).map(|k| lower as i128 + k * count / b).collect();
        Ok(ColumnCode::Integer { edges })
    }

    /// Number of codes, the NULL code included.
    pub fn cardinality(&self) -> usize {
        self.null_code() as usize + 1
    }

    /// The code of NULL (and of a value outside a domain, and of NaN).
    pub fn null_code(&self) -> u32 {
        (match self {
            ColumnCode::Categorical { values } => *values,
            ColumnCode::Real { edges } => edges.len() - 1,
            ColumnCode::Integer { edges } => edges.len() - 1,
        }) as u32
    }

    /// The code of a number: its bin, clamped into the end bins; NaN is NULL. A categorical column
    /// has no numbers: its values are coded by their index in the domain.
    pub fn encode_real(&self, x: f64) -> u32 {
        if x.is_nan() {
            return self.null_code();
        }
        match self {
            ColumnCode::Categorical { values } => *values as u32,
            ColumnCode::Real { edges } => (edges.partition_point(|&e| e <= x).clamp(1, edges.len() - 1) - 1) as u32,
            ColumnCode::Integer { edges } => {
                // a real value between two integers belongs to the bin of its floor
                let f = x.floor();
                let v = if f >= 1.7e38 { i128::MAX } else if f <= -1.7e38 { i128::MIN } else { f as i128 };
                (edges.partition_point(|&e| e <= v).clamp(1, edges.len() - 1) - 1) as u32
            }
        }
    }

    /// The code of an integer (exact for every i64).
    pub fn encode_integer(&self, x: i64) -> u32 {
        match self {
            ColumnCode::Integer { edges } => (edges.partition_point(|&e| e <= x as i128).clamp(1, edges.len() - 1) - 1) as u32,
            _ => self.encode_real(x as f64),
        }
    }

    /// A value for a code: the domain index, a uniform value in a real bin, a uniform integer in an
    /// integer bin, or NULL. Codes past the NULL code are NULL.
    pub fn decode<R: Rng + ?Sized>(&self, rng: &mut R, code: u32) -> Decoded {
        if code >= self.null_code() {
            return Decoded::Null;
        }
        let k = code as usize;
        match self {
            ColumnCode::Categorical { .. } => Decoded::Category(code),
            ColumnCode::Real { edges } => {
                let (a, b) = (edges[k], edges[k + 1]);
                let x = a + (b - a) * uniform01(rng);
                Decoded::Real(if x < b || k + 2 == edges.len() { x.min(b) } else { a })
            }
            ColumnCode::Integer { edges } => {
                let (a, b) = (edges[k], edges[k + 1]);
                let span = (b - a) as u128;
                let off = if span > u64::MAX as u128 { rng.random::<u64>() as i128 } else { uniform_below(rng, span as u64) as i128 };
                Decoded::Integer((a + off).clamp(i64::MIN as i128, i64::MAX as i128) as i64)
            }
        }
    }

    /// The public description of the bins for the report: the edges, or the number of values.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            ColumnCode::Categorical { values } => serde_json::json!({ "kind": "categorical", "values": values }),
            ColumnCode::Real { edges } => serde_json::json!({ "kind": "real_bins", "edges": edges }),
            ColumnCode::Integer { edges } => {
                let mut e: Vec<String> = edges.iter().map(|x| x.to_string()).collect();
                if let Some(last) = edges.last() {
                    *e.last_mut().unwrap() = (last - 1).to_string();
                }
                serde_json::json!({ "kind": "integer_bins", "edges": e, "last_edge": "inclusive" })
            }
        }
    }
}

/// Bin edges chosen with differential privacy (`bin_edges => '{"x": "private"}'`): `bins` bins whose
/// edges are a subset of the edges of a fine public grid (`fine`: [`PrivateEdges::GRID`] equal bins
/// between the column's declared bounds, or the integers between them when there are fewer), chosen
/// after one scan that counts the rows of each fine bin. The j-th inner edge (j = 1 … bins − 1) is
/// the fine edge nearest the j/bins quantile by permute-and-flip, one after the other, each among the
/// edges above the previous one that leave room for the rest, so the bins are exactly `bins`, in
/// order. Each choice is `epsilon` (per edge)-DP for one row added or removed; bins − 1 of them
/// compose to (bins − 1)·`epsilon`. Derivation: docs/privacy/synthetic.md, "Private bin edges".
#[derive(Debug, Clone, PartialEq)]
pub struct PrivateEdges {
    fine: ColumnCode,
    bins: usize,
    epsilon: f64,
}

impl PrivateEdges {
    /// Fine bins between the bounds (fewer for integer columns with fewer integers).
    pub const GRID: usize = 4096;

    /// `bins` private bins on the fine grid `fine` (real or integer bins from
    /// [`ColumnCode::real_bins`] or [`ColumnCode::integer_bins`]), `epsilon` per inner edge.
    pub fn new(fine: ColumnCode, bins: usize, epsilon: f64) -> DpResult<Self> {
        check_bins(bins)?;
        let fine_bins = match &fine {
            ColumnCode::Categorical { .. } => return Err(DpError::invalid("bin_edges", "private only for numeric columns", "a categorical column")),
            ColumnCode::Real { edges } => edges.len() - 1,
            ColumnCode::Integer { edges } => edges.len() - 1,
        };
        if fine_bins < bins {
            return Err(DpError::invalid("bins", format!("at most {fine_bins} for private edges between these bounds (one value per bin at least)"), bins));
        }
        crate::params::check_epsilon("epsilon", epsilon)?;
        Ok(PrivateEdges { fine, bins, epsilon })
    }

    /// The fine grid: its codes are what the scan counts.
    pub fn fine(&self) -> &ColumnCode {
        &self.fine
    }

    /// The number of fine bins (the length of the counts [`PrivateEdges::choose`] takes).
    pub fn fine_bins(&self) -> usize {
        self.fine.null_code() as usize
    }

    /// The chosen encoding, from the exact row count of each fine bin (NULL and NaN not counted).
    /// Edge j is fine edge i with probability given by permute-and-flip on the utility
    /// −|bins·L(i) − j·n| (L(i) the rows in fine bins below i), of sensitivity max(j, bins − j),
    /// at rate ε/(2·max(j, bins − j)) rounded down to 24 significant bits; every coin is exact.
    /// `check` runs before each edge (at most 4,096 coins apart).
    pub fn choose<R: Rng + ?Sized>(&self, rng: &mut R, counts: &[u64], check: &mut dyn FnMut() -> Result<(), Interrupted>) -> Result<ColumnCode, Interrupted> {
        let m = self.fine_bins();
        assert_eq!(counts.len(), m, "one count per fine bin");
        let b = self.bins as u128;
        let mut below = Vec::with_capacity(m + 1); // L(i), i = 0..=m
        below.push(0u128);
        for &c in counts {
            below.push(below.last().unwrap() + c as u128);
        }
        let n = below[m];
        // ε per edge = em·2^-ek, em below 2^24 (rounded down, so never above ε)
        let (em, ek) = dyadic_at_most(self.epsilon * (1.0 - crate::noise::grid::pow2(-40)), PF_RATE_BITS);
        let mut chosen = vec![0usize];
        for j in 1..self.bins {
            check()?;
            let (lo, hi) = (chosen[j - 1] + 1, m - (self.bins - j));
            let dist = |i: usize| (b * below[i]).abs_diff(j as u128 * n);
            let best = (lo..=hi).map(dist).min().expect("a candidate range is never empty");
            let sens = (j as u128).max(b - j as u128);
            // x = ε·(d − best)/(2·sens): d < 2^12·2^64, em < 2^24; ek in [−40, 110] for the ε pg_dp takes
            let (scale, den) = if ek >= 0 { (0, (2 * sens) << ek.min(100)) } else { ((-ek).min(40) as u32, 2 * sens) };
            let mut pick = AcceptedUniform::default();
            for i in lo..=hi {
                let num = (em as u128).saturating_mul(dist(i) - best).saturating_mul(1u128 << scale);
                pick.offer(rng, num, den, i);
            }
            chosen.push(pick.kept().expect("the best edge always accepts"));
        }
        chosen.push(m);
        Ok(match &self.fine {
            ColumnCode::Real { edges } => ColumnCode::Real { edges: chosen.iter().map(|&i| edges[i]).collect() },
            ColumnCode::Integer { edges } => ColumnCode::Integer { edges: chosen.iter().map(|&i| edges[i]).collect() },
            ColumnCode::Categorical { .. } => unreachable!("checked in new"),
        })
    }
}

fn check_bins(bins: usize) -> DpResult<()> {
    if bins == 0 || bins >= MAX_CODES {
        return Err(DpError::invalid("bins", format!("between 1 and {}", MAX_CODES - 1), bins));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::rng::seeded_rng;

    #[test]
    fn real_bins_clamp_and_null() {
        let c = ColumnCode::real_bins(0.0, 10.0, 5).unwrap();
        assert_eq!(c.cardinality(), 6);
        assert_eq!(c.encode_real(-3.0), 0);
        assert_eq!(c.encode_real(0.0), 0);
        assert_eq!(c.encode_real(1.999), 0);
        assert_eq!(c.encode_real(2.0), 1);
        assert_eq!(c.encode_real(10.0), 4);
        assert_eq!(c.encode_real(f64::INFINITY), 4);
        assert_eq!(c.encode_real(f64::NEG_INFINITY), 0);
        assert_eq!(c.encode_real(f64::NAN), 5);
        let mut rng = seeded_rng(1);
        for code in 0..5u32 {
            for _ in 0..1000 {
                match c.decode(&mut rng, code) {
                    Decoded::Real(x) => assert_eq!(c.encode_real(x), code, "{x}"),
                    other => panic!("{other:?}"),
                }
            }
        }
        assert_eq!(c.decode(&mut rng, 5), Decoded::Null);
    }

    #[test]
    fn integer_bins_cover_every_integer_once() {
        let c = ColumnCode::integer_bins(17, 90, 8).unwrap();
        assert_eq!(c.cardinality(), 9);
        let mut seen = vec![0usize; 8];
        for x in 17..=90 {
            seen[c.encode_integer(x) as usize] += 1;
        }
        assert_eq!(seen.iter().sum::<usize>(), 74);
        assert!(seen.iter().all(|&s| s == 9 || s == 10), "{seen:?}");
        assert_eq!(c.encode_integer(i64::MIN), 0);
        assert_eq!(c.encode_integer(i64::MAX), 7);
        let mut rng = seeded_rng(2);
        let mut hit = std::collections::BTreeSet::new();
        for code in 0..8u32 {
            for _ in 0..200 {
                match c.decode(&mut rng, code) {
                    Decoded::Integer(x) => {
                        assert_eq!(c.encode_integer(x), code);
                        hit.insert(x);
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
        assert_eq!(hit.len(), 74, "every integer is reachable");
        // fewer integers than bins: one integer per bin
        let small = ColumnCode::integer_bins(0, 2, 16).unwrap();
        assert_eq!(small.cardinality(), 4);
        // the full i64 range does not overflow
        let wide = ColumnCode::integer_bins(i64::MIN, i64::MAX, 4).unwrap();
        assert_eq!(wide.encode_integer(-1), 1);
        assert_eq!(wide.encode_integer(0), 2);
        assert!(matches!(wide.decode(&mut rng, 3), Decoded::Integer(x) if x >= 0));
    }

    #[test]
    fn integer_edges_include_the_last_edge() {
        let c = ColumnCode::integer_edges(&[0, 10, 20]).unwrap();
        assert_eq!(c.encode_integer(9), 0);
        assert_eq!(c.encode_integer(10), 1);
        assert_eq!(c.encode_integer(20), 1);
        assert_eq!(c.encode_real(20.5), 1);
        assert!(ColumnCode::integer_edges(&[3, 3]).is_err());
    }

    #[test]
    fn bad_arguments_name_themselves() {
        let e = ColumnCode::real_edges(vec![1.0, 1.0]).unwrap_err().to_string();
        assert!(e.starts_with("bin_edges must be"), "{e}");
        let e = ColumnCode::real_bins(0.0, 1.0, 0).unwrap_err().to_string();
        assert!(e.starts_with("bins must be"), "{e}");
        let e = ColumnCode::real_bins(f64::NAN, 1.0, 4).unwrap_err().to_string();
        assert!(e.starts_with("lower must be"), "{e}");
        let e = ColumnCode::categorical(0).unwrap_err().to_string();
        assert!(e.starts_with("domain must"), "{e}");
    }
}
