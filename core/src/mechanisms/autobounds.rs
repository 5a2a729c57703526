//! Automatic DP bounds for dp_sum, dp_avg and dp_median called without bounds
//! (docs/privacy/automatic-bounds.md).
//!
//! A share [`AUTO_BOUNDS_SHARE`] of the caller's ε chooses power-of-two bounds from a noisy
//! histogram of binary magnitudes (the largest bin of each sign whose noisy count reaches a
//! threshold); the rest releases the statistic with the existing exact mechanisms at those bounds.
//! Neighbouring relation: add or remove one row.
//!
//! [`MagnitudeHistogram`] is the mergeable streaming state: one bin per (sign, binary exponent) of a
//! finite f64 in [2^-64, 2^99), an overflow bin per sign for larger magnitudes and ±Infinity, and a
//! zero bin for |x| < 2^-64 (those values are treated as 0). Each bin holds its exact row count and
//! the exact sum of its values' 53-bit significands (a double in [2^e, 2^(e+1)) is exactly m·2^(e−52)),
//! so the sum of the values clamped to any bounds that are bin edges (0 or ±2^a) is computed exactly
//! from the bins, without the rows. Its size is fixed: [`HISTOGRAM_BYTES`] in memory, at most
//! [`MAX_SERIALIZED_BYTES`] serialised.
use crate::accounting::charge::mechanism_epsilon;
use crate::error::{DpError, DpResult};
use crate::noise::grid::{floor_log2, pow2};
use crate::mechanisms::{AvgSpec, FloatSumSpec, ReleaseInfo};
use crate::params::{check_epsilon, fmt_f64};
use crate::noise::sampling::{discrete_laplace, laplace_scale};
use rand::Rng;

/// Share of the caller's ε spent on choosing the bounds; the rest goes to the release
/// (docs/privacy/automatic-bounds.md, "The share").
pub const AUTO_BOUNDS_SHARE: f64 = 0.2;
/// Smallest binary exponent with a bin of its own: |x| < 2^MAG_EXP_MIN counts as 0.
pub const MAG_EXP_MIN: i32 = -64;
/// Largest binary exponent with a bin of its own: [2^98, 2^99); larger magnitudes (and ±Infinity)
/// go to the overflow bin. 2^99 ≈ 6.3e29 is the largest power of two within pg_dp's bound limit 1e30.
pub const MAG_EXP_MAX: i32 = 98;
/// Ordinary bins per sign.
pub const EXPONENTS: usize = (MAG_EXP_MAX - MAG_EXP_MIN + 1) as usize;
/// The probability β, at most, that the noisy count of some empty bin reaches the threshold (which
/// would give a bound far from the data); it fixes the threshold [`threshold`] = ⌈ln(BINS/β)/ε⌉ rows.
pub const AUTO_BOUNDS_MISS: f64 = 1e-6;
/// Name of the mechanism in the receipts of releases with automatic bounds.
pub const AUTO_BOUNDS_MECHANISM: &str = "discrete_laplace_with_dp_bounds";
/// Memory of one histogram.
pub const HISTOGRAM_BYTES: usize = std::mem::size_of::<MagnitudeHistogram>();
/// Largest serialised histogram: a header and every bin.
pub const MAX_SERIALIZED_BYTES: usize = HEADER_BYTES + 2 * (EXPONENTS + 1) * ENTRY_BYTES;

const FORMAT_VERSION: u8 = 1;
const HEADER_BYTES: usize = 1 + 8 + 2;
const ENTRY_BYTES: usize = 2 + 8 + 16;
const SIGNIFICAND_MIN: i128 = 1 << 52;
const SIGNIFICAND_MAX: i128 = (1 << 53) - 1;

/// The histogram of binary magnitudes (module documentation).
#[derive(Clone, PartialEq, Eq)]
pub struct MagnitudeHistogram {
    /// Rows per sign (0: positive, 1: negative) and exponent, index e − MAG_EXP_MIN; the last entry
    /// is the overflow bin.
    counts: [[i64; EXPONENTS + 1]; 2],
    /// Σ of the significands m ∈ [2^52, 2^53) of each ordinary bin's rows: below 2^116 for any i64
    /// row count.
    sums: [[i128; EXPONENTS]; 2],
    /// Rows with |x| < 2^MAG_EXP_MIN (±0 included).
    zeros: i64,
}

impl std::fmt::Debug for MagnitudeHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MagnitudeHistogram {{ rows: {}, nonempty bins: {} }}", self.count(), self.nonempty_bins())
    }
}

impl Default for MagnitudeHistogram {
    fn default() -> Self {
        Self::new()
    }
}

/// Side index of a value's sign.
const POS: usize = 0;
const NEG: usize = 1;

impl MagnitudeHistogram {
    pub fn new() -> Self {
        MagnitudeHistogram { counts: [[0; EXPONENTS + 1]; 2], sums: [[0; EXPONENTS]; 2], zeros: 0 }
    }

    /// Adds one value. NaN is skipped (like NULL); ±Infinity goes to the overflow bin of its sign.
    /// Never fails.
    #[inline]
    pub fn add(&mut self, x: f64) {
        if x.is_nan() {
            return;
        }
        let side = if x.is_sign_negative() { NEG } else { POS };
        let a = x.abs();
        if a < pow2(MAG_EXP_MIN) {
            self.zeros += 1;
        } else if a >= pow2(MAG_EXP_MAX + 1) {
            self.counts[side][EXPONENTS] += 1;
        } else {
            let e = floor_log2(a); // a normal number: MAG_EXP_MIN ≥ −1022
            let m = (a.to_bits() & ((1u64 << 52) - 1)) | (1u64 << 52);
            let i = (e - MAG_EXP_MIN) as usize;
            self.counts[side][i] += 1;
            self.sums[side][i] += m as i128;
        }
    }

    /// The bin [`add`](Self::add) puts `x` in and what it adds to that bin's significand sum, for a
    /// histogram computed elsewhere (Citus workers count and sum each bin's rows, and
    /// [`add_bin`](Self::add_bin) adds them here): 0 for the zero bin, ±(i + 1) for the positive or
    /// negative bin of exponent index i (the overflow bin is i = [`EXPONENTS`]); None for NaN.
    #[inline]
    pub fn bin_of(x: f64) -> Option<(i32, i64)> {
        if x.is_nan() {
            return None;
        }
        let a = x.abs();
        let (i, m) = if a < pow2(MAG_EXP_MIN) {
            return Some((0, 0));
        } else if a >= pow2(MAG_EXP_MAX + 1) {
            (EXPONENTS, 0)
        } else {
            let e = floor_log2(a);
            ((e - MAG_EXP_MIN) as usize, ((a.to_bits() & ((1u64 << 52) - 1)) | (1u64 << 52)) as i64)
        };
        let code = i as i32 + 1;
        Some((if x.is_sign_negative() { -code } else { code }, m))
    }

    /// Adds `count` rows of bin `code` ([`bin_of`](Self::bin_of)) whose significands sum to `sum`,
    /// refusing what no set of rows could give (an unknown bin, a negative count, a sum outside
    /// [count·2^52, count·(2^53 − 1)] for an ordinary bin, a sum for the zero or overflow bins).
    pub fn add_bin(&mut self, code: i32, count: i64, sum: i128) -> DpResult<()> {
        let bad = |why: &str| DpError::CorruptState(format!("magnitude bin: {why}"));
        if count < 0 {
            return Err(bad("negative count"));
        }
        if code == 0 {
            if sum != 0 {
                return Err(bad("zero bin with a sum"));
            }
            self.zeros += count;
            return Ok(());
        }
        let i = (code.unsigned_abs() - 1) as usize;
        if i > EXPONENTS {
            return Err(bad("unknown bin"));
        }
        let side = if code < 0 { NEG } else { POS };
        if i == EXPONENTS {
            if sum != 0 {
                return Err(bad("overflow bin with a sum"));
            }
        } else {
            let c = count as i128;
            if sum < c * SIGNIFICAND_MIN || sum > c * SIGNIFICAND_MAX {
                return Err(bad("significand sum out of range"));
            }
            self.sums[side][i] += sum;
        }
        self.counts[side][i] += count;
        Ok(())
    }

    /// Merges a partial histogram (parallel workers): bin-wise sums, so the result does not depend on
    /// how rows were partitioned or in which order states are merged.
    pub fn merge(&mut self, other: &MagnitudeHistogram) {
        for s in 0..2 {
            for i in 0..=EXPONENTS {
                self.counts[s][i] += other.counts[s][i];
            }
            for i in 0..EXPONENTS {
                self.sums[s][i] += other.sums[s][i];
            }
        }
        self.zeros += other.zeros;
    }

    /// Number of rows added (NaN excluded).
    pub fn count(&self) -> i64 {
        self.zeros + self.counts.iter().flatten().sum::<i64>()
    }

    fn nonempty_bins(&self) -> usize {
        self.counts.iter().flatten().filter(|&&c| c != 0).count()
    }

    /// Serialises the histogram: a version byte, the zero-bin count, the number of non-empty bins,
    /// then each non-empty bin as (index, count, significand sum), little-endian. At most
    /// [`MAX_SERIALIZED_BYTES`].
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(HEADER_BYTES + self.nonempty_bins() * ENTRY_BYTES);
        b.push(FORMAT_VERSION);
        b.extend_from_slice(&self.zeros.to_le_bytes());
        b.extend_from_slice(&(self.nonempty_bins() as u16).to_le_bytes());
        for s in 0..2 {
            for i in 0..=EXPONENTS {
                let c = self.counts[s][i];
                if c == 0 {
                    continue;
                }
                let sum = if i < EXPONENTS { self.sums[s][i] } else { 0 };
                b.extend_from_slice(&((s * (EXPONENTS + 1) + i) as u16).to_le_bytes());
                b.extend_from_slice(&c.to_le_bytes());
                b.extend_from_slice(&sum.to_le_bytes());
            }
        }
        b
    }

    /// Reads a serialised histogram, refusing anything [`MagnitudeHistogram::to_bytes`] cannot have
    /// written (wrong version or length, bins out of order, negative counts, significand sums outside
    /// [count·2^52, count·(2^53 − 1)]).
    pub fn from_bytes(b: &[u8]) -> DpResult<MagnitudeHistogram> {
        let bad = |why: &str| DpError::CorruptState(format!("magnitude histogram: {why}"));
        if b.len() < HEADER_BYTES || b[0] != FORMAT_VERSION {
            return Err(bad("unknown format"));
        }
        let zeros = i64::from_le_bytes(b[1..9].try_into().unwrap());
        let bins = u16::from_le_bytes(b[9..11].try_into().unwrap()) as usize;
        if zeros < 0 || b.len() != HEADER_BYTES + bins * ENTRY_BYTES {
            return Err(bad("wrong length"));
        }
        let mut h = MagnitudeHistogram::new();
        h.zeros = zeros;
        let mut prev: Option<usize> = None;
        for k in 0..bins {
            let e = &b[HEADER_BYTES + k * ENTRY_BYTES..HEADER_BYTES + (k + 1) * ENTRY_BYTES];
            let idx = u16::from_le_bytes(e[0..2].try_into().unwrap()) as usize;
            let count = i64::from_le_bytes(e[2..10].try_into().unwrap());
            let sum = i128::from_le_bytes(e[10..26].try_into().unwrap());
            if idx >= 2 * (EXPONENTS + 1) || prev.is_some_and(|p| idx <= p) || count <= 0 {
                return Err(bad("bins out of order or empty"));
            }
            prev = Some(idx);
            let (s, i) = (idx / (EXPONENTS + 1), idx % (EXPONENTS + 1));
            h.counts[s][i] = count;
            if i < EXPONENTS {
                let c = count as i128;
                if sum < c * SIGNIFICAND_MIN || sum > c * SIGNIFICAND_MAX {
                    return Err(bad("significand sum out of range"));
                }
                h.sums[s][i] = sum;
            } else if sum != 0 {
                return Err(bad("overflow bin with a sum"));
            }
        }
        Ok(h)
    }

    /// Chooses bounds from the histogram with noise at `epsilon` (the ε share the choice may spend,
    /// as the mechanism runs it; docs/privacy/automatic-bounds.md): every bin count (zero bin,
    /// 2 × 163 exponents, 2 overflow bins) gets independent discrete Laplace noise of scale 1/ε,
    /// and only those noisy counts are used. The upper bound is 2^(e+1) for the largest positive
    /// exponent e whose noisy count reaches the threshold τ = [`threshold`](epsilon) (2^99 for the
    /// overflow bin), or 0 if none does; the lower bound likewise from the negative bins. ε-DP for
    /// add/remove neighbours: a row changes one bin count by 1, so the noisy histogram is ε-DP and
    /// the rest is post-processing.
    ///
    /// When no bin reaches the threshold (too few rows for the noise at this ε), the bounds come from
    /// the same noisy counts, so at no further cost: the bin with the largest noisy count among the
    /// zero bin and the bins of the public default range [2^[`DEFAULT_MIN_EXP`], 2^([`DEFAULT_MAX_EXP`]+1))
    /// of each sign gives the bound of its sign (the other is 0; the zero bin gives [0, 0]). The
    /// choice never fails: a call without bounds always releases a value at its charged ε, and
    /// `fallback` says that the bounds are this rule's.
    pub fn choose_bounds<R: Rng + ?Sized>(&self, rng: &mut R, epsilon: f64) -> DpResult<ChosenBounds> {
        let epsilon = check_epsilon("epsilon", epsilon)?;
        let (t, s) = laplace_scale(1, epsilon);
        let tau = threshold(epsilon);
        let mut noisy = |c: i64| c as i128 + discrete_laplace(rng, t, s);
        // every bin is noised, in a fixed order, whatever the data
        let zero_count = noisy(self.zeros);
        let zero_passes = zero_count >= tau as i128;
        let tau_ext = extension_threshold(epsilon) as i128;
        // the window thresholds (WINDOWS), once per choice and whatever the data: at β for a sign's
        // first bound, at β_ext for its tail
        let tau_w: Vec<(usize, i128, i128)> = WINDOWS
            .iter()
            .map(|&k| (k, window_threshold(epsilon, k, AUTO_BOUNDS_MISS) as i128, window_threshold(epsilon, k, AUTO_BOUNDS_EXTEND_MISS) as i128))
            .collect();
        let mut top = [None, None];
        let mut counts: [Vec<i128>; 2] = [Vec::new(), Vec::new()];
        for side in [POS, NEG] {
            counts[side] = (0..=EXPONENTS).map(|i| noisy(self.counts[side][i])).collect();
            let c = &counts[side];
            // the largest bin reaching τ, then up through the bins above it that reach τ_ext
            // no bin reaches τ: the rows of this sign may be spread over a few orders of magnitude
            // (a sparse or skewed column), so try windows of 2, 4 and 8 adjacent bins, whose
            // noisy sums reach τ_k only by noise with probability at most β in all
            // (within the highest such window, the bound is its highest bin that reaches τ_ext: an
            // empty bin at the top of a window that passes through the bins below it is not data)
            let found = (0..=EXPONENTS).rev().find(|&i| c[i] >= tau as i128).or_else(|| {
                tau_w.iter().find_map(|&(k, tau_k, _)| {
                    let j = (0..=EXPONENTS + 1 - k).rev().find(|&j| c[j..j + k].iter().sum::<i128>() >= tau_k)?;
                    Some((j..j + k).rev().find(|&i| c[i] >= tau_ext).unwrap_or(j + k - 1))
                })
            });
            if let Some(mut i) = found {
                // a tail: up while the next bin reaches τ_ext, or the next few bins together reach
                // their window threshold at the same miss probability (a tail too thin for any one
                // bin), to the highest bin of that window that reaches τ_ext, else its top
                loop {
                    if i < EXPONENTS && c[i + 1] >= tau_ext {
                        i += 1;
                        continue;
                    }
                    let next = tau_w.iter().find_map(|&(k, _, t)| {
                        if i + k > EXPONENTS {
                            return None;
                        }
                        (c[i + 1..=i + k].iter().sum::<i128>() >= t).then(|| (i + 1..=i + k).rev().find(|&m| c[m] >= tau_ext).unwrap_or(i + k))
                    });
                    match next {
                        Some(m) => i = m,
                        None => break,
                    }
                }
                top[side] = Some(i);
            }
        }
        let fallback = top[POS].is_none() && top[NEG].is_none() && !zero_passes;
        if fallback {
            // Either the largest noisy count of one bin of the default range (or the zero bin), or
            // the window of FALLBACK_WINDOW adjacent bins there with the largest noisy sum, whichever
            // stands further out of its noise (a sum of k counts has √k times the noise of one): a
            // small table's rows in one bin stand out alone, rows spread over a few bins together.
            // In the window, the bound is its highest bin reaching τ_ext, else its largest count.
            let (lo, hi) = ((DEFAULT_MIN_EXP - MAG_EXP_MIN) as usize, (DEFAULT_MAX_EXP - MAG_EXP_MIN) as usize);
            let (mut single, mut single_at) = (zero_count, None);
            let (mut window, mut window_at) = (i128::MIN, None);
            for side in [POS, NEG] {
                let c = &counts[side];
                for i in lo..=hi {
                    if c[i] > single {
                        (single, single_at) = (c[i], Some((side, i)));
                    }
                }
                for j in lo..=hi + 1 - FALLBACK_WINDOW {
                    let sum: i128 = c[j..j + FALLBACK_WINDOW].iter().sum();
                    if sum > window {
                        (window, window_at) = (sum, Some((side, j)));
                    }
                }
            }
            top = [None, None];
            if window as f64 > single as f64 * (FALLBACK_WINDOW as f64).sqrt() {
                let (side, j) = window_at.expect("a window");
                let c = &counts[side];
                let w = j..j + FALLBACK_WINDOW;
                top[side] = Some(w.clone().rev().find(|&i| c[i] >= tau_ext).unwrap_or_else(|| w.rev().max_by_key(|&i| c[i]).expect("a window")));
            } else if let Some((side, i)) = single_at {
                top[side] = Some(i);
            }
        }
        let exp = |i: Option<usize>| i.map(|i| (MAG_EXP_MIN + i as i32 + 1).min(MAG_EXP_MAX + 1));
        Ok(ChosenBounds { lower_exp: exp(top[NEG]), upper_exp: exp(top[POS]), epsilon, threshold: tau, fallback })
    }

    /// The exact bin counts, for tests (not private: never release them).
    pub fn bin_counts_for_tests(&self, negative: bool) -> [i64; EXPONENTS + 1] {
        self.counts[if negative { NEG } else { POS }]
    }

    /// The exact sum of the values clamped to [`bounds`](ChosenBounds) (zero-bin values as 0), in
    /// steps of 2^g, rounded half up: ⌊S/2^g + 1/2⌋. Adding or removing one row moves S by at most
    /// max(|lower|, |upper|) (and by a value in [lower − c, upper − c] after centring on a grid point
    /// c), so this integer moves by at most ⌈that/2^g⌉ (docs/privacy/automatic-bounds.md).
    /// Requires 2^g ≥ 2^-115 unless both bounds are 0, which every grid of these bounds satisfies.
    pub fn clamped_sum_steps(&self, bounds: &ChosenBounds, g: i32) -> i128 {
        const UNIT: i32 = MAG_EXP_MIN - 52; // the accumulator counts units of 2^-116
        if bounds.lower_exp.is_none() && bounds.upper_exp.is_none() {
            return 0; // [0, 0]: every row contributes 0 (and the grid may be arbitrarily fine)
        }
        assert!(g > UNIT, "grid too fine for the histogram");
        let mut w = Wide::ZERO;
        for (side, exp, negative) in [(POS, bounds.upper_exp, false), (NEG, bounds.lower_exp, true)] {
            let Some(a) = exp else { continue }; // bound 0: every row of the side contributes 0
            // bins below the bound contribute their exact values m·2^(e−52) = m·2^(e − MAG_EXP_MIN)·unit
            let inside = ((a - MAG_EXP_MIN).max(0) as usize).min(EXPONENTS);
            for i in 0..inside {
                w.add_shifted(self.sums[side][i] as u128, i as u32, negative);
            }
            // bins at or above it (overflow included) contribute the bound 2^a = 2^(a − UNIT)·unit each
            let clipped: i64 = self.counts[side][inside..].iter().sum();
            w.add_shifted(clipped as u128, (a - UNIT) as u32, negative);
        }
        // ⌊(W + 2^(s−1)) / 2^s⌋ with s = g − UNIT
        let s = (g - UNIT) as u32;
        w.add_shifted(1, s - 1, false);
        w.shr_to_i128(s)
    }

    /// Number of rows (all of them: clamping keeps every row).
    pub fn clamped_count(&self) -> i64 {
        self.count()
    }
}

/// Number of noisy bins: the zero bin and, per sign, 163 exponents and the overflow bin.
pub const BINS: usize = 1 + 2 * (EXPONENTS + 1);

/// Bins per window of the fallback of [`MagnitudeHistogram::choose_bounds`].
pub const FALLBACK_WINDOW: usize = 4;

/// Sizes of the windows of adjacent bins tried, in order, for a sign on which no single bin reaches τ.
pub const WINDOWS: [usize; 3] = [2, 4, 8];

/// The threshold τ_k of a window of k adjacent bins: the noisy sum of k empty bins (k independent
/// discrete Laplace variables of scale b) reaches it with probability at most
/// β / (2 signs × 3 window sizes × 165 windows), by the Chernoff bound
/// P(S ≥ t) ≤ M(λ)^k·e^(−λt), M(λ) = (1 − p)² / ((1 − p·e^λ)(1 − p·e^(−λ))), p = e^(−1/b), minimised over
/// λ ∈ (0, 1/b) on a grid. So all windows of all sizes together pass by noise alone with probability
/// at most β = `miss`. (Any λ gives a valid bound; the grid only makes it tight.)
pub fn window_threshold(epsilon: f64, k: usize, miss: f64) -> i64 {
    let (t, s) = laplace_scale(1, epsilon);
    let b = t as f64 / s as f64;
    let windows = (2 * WINDOWS.len() * (EXPONENTS + 1)) as f64;
    let ln_target = (miss / windows).ln();
    let one_minus = |x: f64| -(x.exp_m1()); // 1 − e^x, accurate for small x
    let mut best = f64::INFINITY;
    for i in 1..1000 {
        let lambda = i as f64 / 1000.0 / b;
        let ln_m = 2.0 * one_minus(-1.0 / b).ln() - one_minus(lambda - 1.0 / b).ln() - one_minus(-lambda - 1.0 / b).ln();
        best = best.min((k as f64 * ln_m - ln_target) / lambda);
    }
    best.ceil().min(i64::MAX as f64 / 4.0) as i64
}

/// The probability, at most, that the bound is raised by one bin above the data by noise alone
/// (per sign): it fixes the extension threshold [`extension_threshold`].
pub const AUTO_BOUNDS_EXTEND_MISS: f64 = 0.01;

/// The extension threshold τ_ext = ⌈b·ln(1/β_ext)⌉ rows, β_ext = [`AUTO_BOUNDS_EXTEND_MISS`]: above
/// the largest bin reaching τ, the bound moves up one bin at a time while the next bin's noisy count
/// reaches τ_ext (a sparse tail of the data; an empty bin does so with probability at most β_ext).
pub fn extension_threshold(epsilon: f64) -> i64 {
    let (t, s) = laplace_scale(1, epsilon);
    let b = t as f64 / s as f64;
    (b * (1.0 / AUTO_BOUNDS_EXTEND_MISS).ln()).ceil().min(i64::MAX as f64 / 4.0) as i64
}

/// The threshold τ = ⌈b·ln(BINS/β)⌉ rows, b the exact noise scale at ε (at least 1/ε) and
/// β = [`AUTO_BOUNDS_MISS`]: an empty bin's noisy count reaches τ with probability
/// p^τ/(1 + p) ≤ e^(−τ/b) (p = e^(−1/b)), so all of them together with probability at most β.
pub fn threshold(epsilon: f64) -> i64 {
    let (t, s) = laplace_scale(1, epsilon);
    let b = t as f64 / s as f64;
    (b * (BINS as f64 / AUTO_BOUNDS_MISS).ln()).ceil().min(i64::MAX as f64 / 4.0) as i64
}

/// Smallest binary exponent of the public default range the fallback of
/// [`MagnitudeHistogram::choose_bounds`] chooses from: 2^-16 ≈ 1.5e-5.
pub const DEFAULT_MIN_EXP: i32 = -16;
/// Largest binary exponent of that range: its bins end at 2^32 ≈ 4.3e9.
pub const DEFAULT_MAX_EXP: i32 = 31;

/// Bounds chosen by [`MagnitudeHistogram::choose_bounds`]: each 0 or a power of two. Releasing them
/// is fine: they are the output of an ε-DP mechanism.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChosenBounds {
    /// a with lower = −2^a, or None for lower = 0.
    pub lower_exp: Option<i32>,
    /// a with upper = 2^a, or None for upper = 0.
    pub upper_exp: Option<i32>,
    /// The ε the choice spent.
    pub epsilon: f64,
    /// The threshold τ, in rows, a noisy bin count had to reach.
    pub threshold: i64,
    /// No bin reached it: the bounds are those of the largest noisy count in the default range.
    pub fallback: bool,
}

impl ChosenBounds {
    pub fn lower(&self) -> f64 {
        self.lower_exp.map_or(0.0, |a| -pow2(a))
    }
    pub fn upper(&self) -> f64 {
        self.upper_exp.map_or(0.0, pow2)
    }

    /// The same bounds with the smaller magnitude raised, if needed, to at least 2^-32 of the larger:
    /// then both are multiples of the grid of an average over them (docs/privacy/automatic-bounds.md).
    pub fn aligned_for_average(&self) -> ChosenBounds {
        let mut b = *self;
        if let (Some(l), Some(u)) = (b.lower_exp, b.upper_exp) {
            let top = l.max(u);
            b.lower_exp = Some(l.max(top - 32));
            b.upper_exp = Some(u.max(top - 32));
        }
        b
    }

    /// The choice as JSON, for a receipt's details.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "lower": self.lower(), "upper": self.upper(), "epsilon": self.epsilon,
            "threshold_rows": self.threshold,
            "method": if self.fallback {
                "noisy histogram of binary magnitudes (discrete Laplace): no bin reached the threshold, the bin with the largest noisy count in the default range"
            } else {
                "noisy histogram of binary magnitudes (discrete Laplace), largest bin of each sign at or above the threshold"
            },
        })
    }
}

/// The ε split of a release with automatic bounds: `share` of the mechanism's ε to the bounds, the
/// rest (shaved by 2^-50 so that rounding cannot push the sum above it) to the release.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AutoBoundsSpec {
    /// The caller's ε: what the receipt charges.
    pub epsilon: f64,
    pub share: f64,
}

impl AutoBoundsSpec {
    /// The split with [`AUTO_BOUNDS_SHARE`].
    pub fn new(epsilon: f64) -> DpResult<Self> {
        Self::with_share(epsilon, AUTO_BOUNDS_SHARE)
    }

    /// Another share, strictly between 0 and 1 (for measurements; SQL uses [`AutoBoundsSpec::new`]).
    pub fn with_share(epsilon: f64, share: f64) -> DpResult<Self> {
        let epsilon = check_epsilon("epsilon", epsilon)?;
        if !(share > 0.0 && share < 1.0) {
            return Err(DpError::invalid("share", "a number strictly between 0 and 1", fmt_f64(share)));
        }
        Ok(AutoBoundsSpec { epsilon, share })
    }

    /// (ε for the bounds, ε for the release), as the mechanisms run them: their sum is below the
    /// mechanism's ε, itself below the charged ε.
    pub fn split(&self) -> (f64, f64) {
        let eps = mechanism_epsilon(self.epsilon);
        let e_bounds = eps * self.share;
        let e_release = (eps - e_bounds) * (1.0 - 4.0 * f64::EPSILON);
        (e_bounds, e_release)
    }

    /// dp_sum without bounds: chooses bounds with the first share, then releases the exact clamped
    /// sum at those bounds with [`FloatSumSpec`]'s noise (grid 2^(a − 32), sensitivity 2^32 steps).
    pub fn release_sum<R: Rng + ?Sized>(&self, rng: &mut R, h: &MagnitudeHistogram) -> DpResult<AutoRelease> {
        let (e_bounds, e_release) = self.split();
        let bounds = h.choose_bounds(rng, e_bounds)?;
        let spec = FloatSumSpec::new(bounds.lower(), bounds.upper(), e_release)?;
        let sum_q = h.clamped_sum_steps(&bounds, spec.grid.exp);
        let value = spec.release(rng, sum_q).value;
        Ok(self.finish(value, bounds, spec.describe(), e_release))
    }

    /// dp_avg without bounds: chooses bounds with the first share (aligned to the average's grid),
    /// then releases with [`AvgSpec`] from the exact clamped sum and the row count.
    pub fn release_avg<R: Rng + ?Sized>(&self, rng: &mut R, h: &MagnitudeHistogram) -> DpResult<AutoRelease> {
        let (e_bounds, e_release) = self.split();
        let bounds = h.choose_bounds(rng, e_bounds)?.aligned_for_average();
        let spec = AvgSpec::new(bounds.lower(), bounds.upper(), e_release)?;
        debug_assert!(spec.grid.q_lower as f64 * spec.grid.step() == bounds.lower());
        debug_assert!(spec.grid.q_upper as f64 * spec.grid.step() == bounds.upper());
        let sum_q = h.clamped_sum_steps(&bounds, spec.grid.exp);
        let value = spec.release(rng, sum_q, h.clamped_count()).value;
        Ok(self.finish(value, bounds, spec.describe(), e_release))
    }

    /// dp_median/dp_percentile without bounds: chooses bounds from the stored values with the first
    /// share; the caller then runs the quantile release over [lower, upper] with the returned ε
    /// (the second share). Uses a fixed-size histogram besides the values.
    pub fn quantile_bounds<R: Rng + ?Sized>(&self, rng: &mut R, values: &[f64]) -> DpResult<(ChosenBounds, f64)> {
        let (e_bounds, e_release) = self.split();
        let mut h = MagnitudeHistogram::new();
        for &x in values {
            h.add(x);
        }
        Ok((h.choose_bounds(rng, e_bounds)?, e_release))
    }

    fn finish(&self, value: f64, bounds: ChosenBounds, mut info: ReleaseInfo, e_release: f64) -> AutoRelease {
        info.mechanism = AUTO_BOUNDS_MECHANISM;
        info.epsilon = self.epsilon;
        let mut details = serde_json::json!({
            "bounds": bounds.to_json(),
            "bounds_share": self.share,
            "release_epsilon": e_release,
        });
        if let (Some(o), serde_json::Value::Object(add)) = (details.as_object_mut(), info.intervals_json()) {
            o.extend(add);
        }
        AutoRelease { value, bounds, info, details: details.to_string() }
    }
}

/// A release with automatic bounds: the value, the bounds it used, and the receipt (ε is the
/// caller's total; sensitivity, scale and interval95 are those of the release at the chosen bounds).
#[derive(Debug, Clone, PartialEq)]
pub struct AutoRelease {
    pub value: f64,
    pub bounds: ChosenBounds,
    pub info: ReleaseInfo,
    /// Receipt details (JSON): the chosen bounds, the share, the release's ε and half-widths.
    pub details: String,
}

/// A signed 384-bit integer (two's complement, little-endian limbs): the exact clamped sum in units
/// of 2^-116, below 2^288 in magnitude.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Wide([u64; 6]);

impl Wide {
    const ZERO: Wide = Wide([0; 6]);

    /// self ± v·2^shift, for v < 2^128 and shift + 128 ≤ 384.
    fn add_shifted(&mut self, v: u128, shift: u32, negative: bool) {
        let mut limbs = [0u64; 6];
        let (li, off) = ((shift / 64) as usize, shift % 64);
        let parts = [v as u64, (v >> 64) as u64];
        for (k, &p) in parts.iter().enumerate() {
            let i = li + k;
            if i < 6 {
                limbs[i] |= p << off;
            }
            if off > 0 && i + 1 < 6 {
                limbs[i + 1] |= p >> (64 - off);
            }
        }
        if negative {
            let mut borrow = 0u64;
            for i in 0..6 {
                let (d1, b1) = self.0[i].overflowing_sub(limbs[i]);
                let (d2, b2) = d1.overflowing_sub(borrow);
                self.0[i] = d2;
                borrow = (b1 || b2) as u64;
            }
        } else {
            let mut carry = 0u64;
            for i in 0..6 {
                let (s1, c1) = self.0[i].overflowing_add(limbs[i]);
                let (s2, c2) = s1.overflowing_add(carry);
                self.0[i] = s2;
                carry = (c1 || c2) as u64;
            }
        }
    }

    /// ⌊self / 2^s⌋ (arithmetic shift) as an i128; the caller knows it fits.
    fn shr_to_i128(&self, s: u32) -> i128 {
        let fill = if (self.0[5] as i64) < 0 { u64::MAX } else { 0 };
        let limb = |i: usize| if i < 6 { self.0[i] } else { fill };
        let (li, off) = ((s / 64) as usize, s % 64);
        let word = |k: usize| -> u64 {
            let lo = limb(li + k) >> off;
            if off == 0 { lo } else { lo | (limb(li + k + 1) << (64 - off)) }
        };
        ((word(1) as u128) << 64 | word(0) as u128) as i128
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_arithmetic() {
        let mut w = Wide::ZERO;
        w.add_shifted(5, 200, false);
        w.add_shifted(3, 200, true);
        assert_eq!(w.shr_to_i128(200), 2);
        w.add_shifted(1, 0, true); // 2·2^200 − 1
        assert_eq!(w.shr_to_i128(200), 1);
        let mut n = Wide::ZERO;
        n.add_shifted(7, 10, true);
        assert_eq!(n.shr_to_i128(10), -7);
        assert_eq!(n.shr_to_i128(11), -4); // floor(−3.5)
        n.add_shifted(1 << 100, 250, false); // 2^350 − 7·2^10
        assert_eq!(n.shr_to_i128(250), (1i128 << 100) - 1);
        assert_eq!(n.shr_to_i128(10), -7); // the low 128 bits of 2^340 − 7
        let mut m = Wide::ZERO;
        m.add_shifted(3, 300, true);
        assert_eq!(m.shr_to_i128(299), -6);
    }
}
