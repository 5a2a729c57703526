//! Aggregate transition states: the mechanism spec plus an exact integer accumulator.
//!
//! The SQL layer keeps one [`Acc`] per group, feeds it rows, merges partial states from parallel
//! workers ([`Acc::merge`]), ships them as bytes ([`Acc::to_bytes`] / [`Acc::from_bytes`]) and
//! finally releases the noisy value. Nothing here ever returns the exact sum or count to SQL.
//! dp_variance and dp_stddev also accumulate the exact sum of squared deviations from the centre
//! ([`Acc::sum_sq`]).
use crate::error::{DpError, DpResult};
use crate::mechanisms::{AvgSpec, CountSpec, FloatSumSpec, IntSumSpec, ReleaseInfo, VarianceSpec};

/// The mechanism an accumulator feeds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Spec {
    Count(CountSpec),
    IntSum(IntSumSpec),
    FloatSum(FloatSumSpec),
    Avg(AvgSpec),
    /// dp_variance and dp_stddev (`stddev` tells them apart).
    Variance(VarianceSpec),
}

impl Spec {
    /// The receipt of a release by this mechanism, known before any data is read.
    pub fn describe(&self) -> ReleaseInfo {
        match self {
            Spec::Count(s) => s.describe(),
            Spec::IntSum(s) => s.describe(),
            Spec::FloatSum(s) => s.describe(),
            Spec::Avg(s) => s.describe(),
            Spec::Variance(s) => s.describe(),
        }
    }

    /// Mechanism details for the receipt (JSON): the three statistics of dp_variance/dp_stddev,
    /// nothing beyond [`Spec::describe`] for the others.
    pub fn details(&self) -> String {
        match self {
            Spec::Variance(s) => s.details(),
            _ => String::from("{}"),
        }
    }

    /// The ε of the release.
    pub fn epsilon(&self) -> f64 {
        match self {
            Spec::Count(s) => s.epsilon,
            Spec::IntSum(s) => s.epsilon,
            Spec::FloatSum(s) => s.epsilon,
            Spec::Avg(s) => s.epsilon,
            Spec::Variance(s) => s.epsilon,
        }
    }
}

/// The raw parameters of one aggregate call, compared bit for bit between rows and partial states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    pub kind: u8,
    pub lower: u64,
    pub upper: u64,
    pub epsilon: u64,
}

impl Params {
    pub fn count(epsilon: f64) -> Self {
        Params { kind: 0, lower: 0, upper: 0, epsilon: epsilon.to_bits() }
    }
    pub fn int_sum(lower: i64, upper: i64, epsilon: f64) -> Self {
        Params { kind: 1, lower: lower as u64, upper: upper as u64, epsilon: epsilon.to_bits() }
    }
    pub fn float_sum(lower: f64, upper: f64, epsilon: f64) -> Self {
        Params { kind: 2, lower: lower.to_bits(), upper: upper.to_bits(), epsilon: epsilon.to_bits() }
    }
    pub fn avg(lower: f64, upper: f64, epsilon: f64) -> Self {
        Params { kind: 3, lower: lower.to_bits(), upper: upper.to_bits(), epsilon: epsilon.to_bits() }
    }
    pub fn variance(lower: f64, upper: f64, epsilon: f64) -> Self {
        Params { kind: 4, lower: lower.to_bits(), upper: upper.to_bits(), epsilon: epsilon.to_bits() }
    }
    pub fn stddev(lower: f64, upper: f64, epsilon: f64) -> Self {
        Params { kind: 5, lower: lower.to_bits(), upper: upper.to_bits(), epsilon: epsilon.to_bits() }
    }

    /// Validates the parameters and builds the mechanism.
    pub fn spec(&self) -> DpResult<Spec> {
        let eps = f64::from_bits(self.epsilon);
        let (lf, uf) = (f64::from_bits(self.lower), f64::from_bits(self.upper));
        Ok(match self.kind {
            0 => Spec::Count(CountSpec::new(eps)?),
            1 => Spec::IntSum(IntSumSpec::new(self.lower as i64, self.upper as i64, eps)?),
            2 => Spec::FloatSum(FloatSumSpec::new(lf, uf, eps)?),
            3 => Spec::Avg(AvgSpec::new(lf, uf, eps)?),
            4 => Spec::Variance(VarianceSpec::new(lf, uf, eps, false)?),
            5 => Spec::Variance(VarianceSpec::new(lf, uf, eps, true)?),
            k => return Err(DpError::CorruptState(format!("unknown kind {k}"))),
        })
    }
}

/// One group's state: parameters, mechanism, exact sum (in integers or grid steps), exact sum of
/// squared deviations from the centre (dp_variance and dp_stddev only; 0 otherwise) and row count.
///
/// `packed(8)`: PostgreSQL allocates states with 8-byte alignment, less than an i128 needs.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C, packed(8))]
pub struct Acc {
    pub params: Params,
    pub spec: Spec,
    pub sum: i128,
    /// Σ (q(x) − c)² in grid steps² for dp_variance/dp_stddev: below 2^125 for any i64 row count.
    pub sum_sq: i128,
    pub n: i64,
}

/// Size of a serialized [`Acc`].
pub const ACC_BYTES: usize = 1 + 8 * 3 + 16 + 16 + 8;

impl Acc {
    pub fn new(params: Params) -> DpResult<Acc> {
        Ok(Acc { spec: params.spec()?, params, sum: 0, sum_sq: 0, n: 0 })
    }

    /// Checks that a row's parameters equal the ones the state was created with.
    #[inline]
    pub fn check(&self, p: &Params) -> DpResult<()> {
        let mine = self.params;
        if mine == *p {
            return Ok(());
        }
        let arg = if mine.kind != p.kind {
            "aggregate"
        } else if mine.epsilon != p.epsilon {
            "epsilon"
        } else if mine.lower != p.lower {
            "lower"
        } else {
            "upper"
        };
        Err(DpError::ParameterChanged { arg })
    }

    /// Adds one row whose value is already an integer on the accumulator's scale.
    #[inline]
    pub fn add(&mut self, q: i64) {
        self.sum += q as i128;
        self.n += 1;
    }

    /// Adds one row of dp_variance/dp_stddev: its grid integer and its squared deviation from the centre.
    #[inline]
    fn add_sq(&mut self, q: i64, center: i64) {
        let y = (q - center) as i128; // |y| ≤ 2^31 + 1
        self.sum_sq += y * y;
        self.add(q);
    }

    /// Adds one real value (float sum, average, variance): clamp, quantize, accumulate. NaN is skipped
    /// like NULL (an error would tell the caller that a selected row holds a NaN); ±Infinity is
    /// clamped to the bounds.
    #[inline]
    pub fn add_f64(&mut self, x: f64) -> DpResult<()> {
        if x.is_nan() {
            return Ok(());
        }
        let q = match &self.spec {
            Spec::FloatSum(s) => s.quantize(x)?,
            Spec::Avg(s) => s.quantize(x)?,
            Spec::IntSum(s) => s.clamp(x.clamp(i64::MIN as f64, i64::MAX as f64) as i64),
            Spec::Count(_) => 0,
            Spec::Variance(s) => {
                let (q, c) = (s.quantize(x)?, s.center);
                self.add_sq(q, c);
                return Ok(());
            }
        };
        self.add(q);
        Ok(())
    }

    /// The per-row fast path for real values: adds x and returns true, or returns false without
    /// touching the state when x is NaN or the state is not a real-valued one (the caller then takes
    /// the slow path, which skips the NaN). Never panics.
    #[inline(always)]
    pub fn try_add_f64(&mut self, x: f64) -> bool {
        if x.is_nan() {
            return false;
        }
        let q = match &self.spec {
            Spec::FloatSum(s) => s.grid.quantize_finite(x),
            Spec::Avg(s) => s.grid.quantize_finite(x),
            Spec::Variance(s) => {
                let (q, c) = (s.grid.quantize_finite(x), s.center);
                self.add_sq(q, c);
                return true;
            }
            _ => return false,
        };
        self.add(q);
        true
    }

    /// The per-row fast path for integer sums; false if the state is not an integer sum.
    #[inline(always)]
    pub fn try_add_i64(&mut self, v: i64) -> bool {
        let q = match &self.spec {
            Spec::IntSum(s) => s.clamp(v),
            _ => return false,
        };
        self.add(q);
        true
    }

    /// What one real value adds to this state's `sum` (or, `squared`, to its `sum_sq`), without a
    /// state: the grid integer the exact query of a distributed level sums (`dp.exact_grid`). Equal
    /// to the change `add_f64` makes; None for NaN, which adds nothing.
    #[inline]
    pub fn row_f64(&self, x: f64, squared: bool) -> Option<i64> {
        if x.is_nan() {
            return None;
        }
        let q = match &self.spec {
            Spec::FloatSum(s) => s.grid.quantize_finite(x),
            Spec::Avg(s) => s.grid.quantize_finite(x),
            Spec::IntSum(s) => s.clamp(x.clamp(i64::MIN as f64, i64::MAX as f64) as i64),
            Spec::Count(_) => 0,
            Spec::Variance(s) => {
                let (q, c) = (s.grid.quantize_finite(x), s.center);
                // |q − c| ≤ 2^31 + 1: the square fits in an i64
                return Some(if squared { (q - c) * (q - c) } else { q });
            }
        };
        Some(if squared { 0 } else { q })
    }

    /// [`Acc::row_f64`] for an integer value.
    #[inline]
    pub fn row_i64(&self, v: i64, squared: bool) -> Option<i64> {
        match &self.spec {
            Spec::IntSum(s) => Some(if squared { 0 } else { s.clamp(v) }),
            _ => self.row_f64(v as f64, squared),
        }
    }

    /// Adds one integer value (integer sum): clamp and accumulate.
    #[inline]
    pub fn add_i64(&mut self, v: i64) -> DpResult<()> {
        match &self.spec {
            Spec::IntSum(s) => {
                let q = s.clamp(v);
                self.add(q);
                Ok(())
            }
            _ => self.add_f64(v as f64),
        }
    }

    /// Merges a partial state (parallel workers). Parameters must agree.
    pub fn merge(&mut self, other: &Acc) -> DpResult<()> {
        let p = other.params;
        self.check(&p)?;
        self.sum += other.sum;
        self.sum_sq += other.sum_sq;
        self.n += other.n;
        Ok(())
    }

    pub fn to_bytes(&self) -> [u8; ACC_BYTES] {
        let mut b = [0u8; ACC_BYTES];
        let (p, sum, sum_sq, n) = (self.params, self.sum, self.sum_sq, self.n);
        b[0] = p.kind;
        b[1..9].copy_from_slice(&p.lower.to_le_bytes());
        b[9..17].copy_from_slice(&p.upper.to_le_bytes());
        b[17..25].copy_from_slice(&p.epsilon.to_le_bytes());
        b[25..41].copy_from_slice(&sum.to_le_bytes());
        b[41..57].copy_from_slice(&sum_sq.to_le_bytes());
        b[57..65].copy_from_slice(&n.to_le_bytes());
        b
    }

    pub fn from_bytes(b: &[u8]) -> DpResult<Acc> {
        if b.len() != ACC_BYTES {
            return Err(DpError::CorruptState(format!("expected {ACC_BYTES} bytes, got {}", b.len())));
        }
        let u = |r: std::ops::Range<usize>| u64::from_le_bytes(b[r].try_into().unwrap());
        let params = Params { kind: b[0], lower: u(1..9), upper: u(9..17), epsilon: u(17..25) };
        let mut acc = Acc::new(params)?;
        acc.sum = i128::from_le_bytes(b[25..41].try_into().unwrap());
        acc.sum_sq = i128::from_le_bytes(b[41..57].try_into().unwrap());
        acc.n = i64::from_le_bytes(b[57..65].try_into().unwrap());
        if acc.n < 0 {
            return Err(DpError::CorruptState("negative row count".into()));
        }
        if acc.sum_sq < 0 || (acc.sum_sq != 0 && !matches!(acc.spec, Spec::Variance(_))) {
            return Err(DpError::CorruptState("invalid sum of squares".into()));
        }
        Ok(acc)
    }
}
