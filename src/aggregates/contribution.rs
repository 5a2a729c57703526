//! Per-unit aggregates: the first level of a DP query over a table with a privacy unit
//! (`rewrite.rs`). Each computes one value per privacy unit and group, from that unit's rows only,
//! which the DP aggregate of the second level then treats as one row:
//! - `dp.unit_sum(value, lower, upper)`: the unit's sum of values clamped to [lower, upper], in the
//!   value's type (saturated for int2 and int4); the DP level clamps it to [lower, upper] (dp_sum);
//! - `dp.unit_mean(value, lower, upper)`: the mean of the unit's clamped values (dp_avg, dp_median,
//!   dp_percentile), NULL for a unit without values;
//! - `dp.unit_count()`, `dp.unit_count(value)`: the unit's rows (non-NULL values) as int4, which the
//!   DP level clamps to `max_count_per_unit` (dp_count).
//!
//! NULL and NaN values are skipped. Nothing here can raise an error for a stored value: sums are
//! exact in i128 for integers, finite in f64 for clamped reals (|bound| ≤ 1e30), and the results are
//! clamped into the bounds before they are converted back. These aggregates release nothing: they
//! are ordinary aggregates, and the query grammar refuses them over protected tables except in the
//! query pg_dp itself writes. `dp.random_order()` gives the window of the rewrite a uniformly random
//! order from the CSPRNG, and `dp.per_group(condition)` keeps a condition of the rewritten HAVING
//! above the aggregation.
use crate::aggregates::agg::agg_context;
use crate::pg::fmgr::numeric_datum_f64;
use crate::pg::error::raise_with;
use crate::pg::fmgr::pg_v1;
use pgrx::fcinfo::{pg_arg_is_null, pg_getarg_datum_raw, pg_return_null};
use pgrx::pg_sys::{self, Datum};
use pgrx::{IntoDatum, PgSqlErrorCode};

/// The state of a per-unit aggregate.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
struct UnitAcc {
    /// the exact integer sum, as two words (palloc aligns to 8 bytes, an i128 needs 16)
    int_sum: [u64; 2],
    float_sum: f64,
    n: i64,
    int_lower: i64,
    int_upper: i64,
    lower: f64,
    upper: f64,
    /// the bounds were read (a state with no row has none)
    bounded: bool,
}

const UNIT_ACC_BYTES: usize = 16 + 8 * 6 + 1;

impl UnitAcc {
    fn to_bytes(self) -> [u8; UNIT_ACC_BYTES] {
        let mut b = [0u8; UNIT_ACC_BYTES];
        b[..16].copy_from_slice(&self.int_sum().to_le_bytes());
        for (i, v) in [self.float_sum.to_bits(), self.n as u64, self.int_lower as u64, self.int_upper as u64, self.lower.to_bits(), self.upper.to_bits()]
            .into_iter()
            .enumerate()
        {
            b[16 + 8 * i..24 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        b[UNIT_ACC_BYTES - 1] = self.bounded as u8;
        b
    }

    fn from_bytes(b: &[u8]) -> Option<Self> {
        if b.len() != UNIT_ACC_BYTES {
            return None;
        }
        let word = |i: usize| u64::from_le_bytes(b[16 + 8 * i..24 + 8 * i].try_into().expect("8 bytes"));
        Some(UnitAcc {
            int_sum: split(i128::from_le_bytes(b[..16].try_into().expect("16 bytes"))),
            float_sum: f64::from_bits(word(0)),
            n: word(1) as i64,
            int_lower: word(2) as i64,
            int_upper: word(3) as i64,
            lower: f64::from_bits(word(4)),
            upper: f64::from_bits(word(5)),
            bounded: b[UNIT_ACC_BYTES - 1] != 0,
        })
    }

    fn int_sum(&self) -> i128 {
        ((self.int_sum[1] as u128) << 64 | self.int_sum[0] as u128) as i128
    }

    fn add_int(&mut self, v: i128) {
        self.int_sum = split(self.int_sum() + v);
    }

    fn merge(&mut self, o: &UnitAcc) {
        self.add_int(o.int_sum());
        self.float_sum += o.float_sum;
        self.n += o.n;
        if !self.bounded && o.bounded {
            (self.int_lower, self.int_upper, self.lower, self.upper, self.bounded) = (o.int_lower, o.int_upper, o.lower, o.upper, true);
        }
    }

    fn clamped_float_sum(&self) -> f64 {
        clamp_f64(self.float_sum, self.lower, self.upper)
    }

    fn clamped_mean(&self) -> f64 {
        clamp_f64(self.float_sum / self.n as f64, self.lower, self.upper)
    }
}

fn split(v: i128) -> [u64; 2] {
    [v as u128 as u64, ((v as u128) >> 64) as u64]
}

/// `x` clamped to [lower, upper]; NaN (never produced from clamped finite values) to lower.
fn clamp_f64(x: f64, lower: f64, upper: f64) -> f64 {
    if x.is_nan() {
        lower
    } else {
        x.max(lower).min(upper)
    }
}

const F: &str = "pg_dp per-unit aggregate";

unsafe fn state(fcinfo: pg_sys::FunctionCallInfo) -> *mut UnitAcc {
    let ctx = agg_context(fcinfo, F);
    if !pg_arg_is_null(fcinfo, 0) {
        return pg_getarg_datum_raw(fcinfo, 0).cast_mut_ptr::<UnitAcc>();
    }
    let p = pg_sys::MemoryContextAlloc(ctx, std::mem::size_of::<UnitAcc>()) as *mut UnitAcc;
    p.write(UnitAcc::default());
    p
}

unsafe fn existing(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> Option<UnitAcc> {
    (!pg_arg_is_null(fcinfo, i)).then(|| *pg_getarg_datum_raw(fcinfo, i).cast_mut_ptr::<UnitAcc>())
}

/// Argument `i` as a raw datum; the bounds come from the DP aggregate's parameters, which the
/// charge has checked to be non-NULL.
unsafe fn bound(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> Datum {
    if pg_arg_is_null(fcinfo, i) {
        raise_with(PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED, format!("{F}: a bound must not be NULL"), None);
    }
    pg_getarg_datum_raw(fcinfo, i)
}

/// Real transition: `decode` reads the value and bound datums of the SQL type as float8.
unsafe fn float_trans(fcinfo: pg_sys::FunctionCallInfo, decode: unsafe fn(Datum) -> f64) -> Datum {
    let acc = state(fcinfo);
    if !(*acc).bounded {
        (*acc).lower = decode(bound(fcinfo, 2));
        (*acc).upper = decode(bound(fcinfo, 3));
        (*acc).bounded = true;
    }
    if !pg_arg_is_null(fcinfo, 1) {
        let v = decode(pg_getarg_datum_raw(fcinfo, 1));
        if !v.is_nan() {
            (*acc).float_sum += clamp_f64(v, (*acc).lower, (*acc).upper);
            (*acc).n += 1;
        }
    }
    Datum::from(acc)
}

unsafe fn f64_of_float8(d: Datum) -> f64 {
    f64::from_bits(d.value() as u64)
}

/// A V1 function that is plain arithmetic on by-value datums: no allocation, no panic, no call into
/// PostgreSQL, so it needs no pg_guard (the per-row transitions of the per-unit sums).
macro_rules! pg_v1_pure {
    ($finfo:ident, $name:ident, |$fc:ident| $body:block) => {
        crate::pg::fmgr::pg_finfo!($finfo);
        #[unsafe(no_mangle)]
        pub unsafe extern "C-unwind" fn $name($fc: pg_sys::FunctionCallInfo) -> Datum $body
    };
}

/// Argument `i` of a call: (datum, is NULL). Plain memory reads.
#[inline(always)]
unsafe fn arg(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> (Datum, bool) {
    let a = (*fcinfo).args.as_slice((*fcinfo).nargs as usize)[i];
    (a.value, a.isnull)
}

/// Per-unit sum of integers (state int8, NULL before the first value): the value clamped to the
/// bounds (arguments 2 and 3), added with saturation. `decode` reads the SQL type.
#[inline(always)]
unsafe fn int_sum_step(fcinfo: pg_sys::FunctionCallInfo, decode: fn(Datum) -> i64) -> Datum {
    let (state, state_null) = arg(fcinfo, 0);
    let (v, v_null) = arg(fcinfo, 1);
    let (lo, lo_null) = arg(fcinfo, 2);
    let (hi, hi_null) = arg(fcinfo, 3);
    let total = if state_null { 0 } else { state.value() as i64 };
    if v_null || lo_null || hi_null {
        (*fcinfo).isnull = state_null;
        return Datum::from(total);
    }
    let (v, lo, hi) = (decode(v), decode(lo), decode(hi));
    let c = if v < lo { lo } else if v > hi { hi } else { v };
    (*fcinfo).isnull = false;
    Datum::from(total.saturating_add(c))
}

/// Per-unit sum of float8 (state float8, NULL before the first value): NaN skipped, the value
/// clamped to the bounds (|bound| ≤ 1e30, so the sum stays finite).
#[inline(always)]
unsafe fn float_sum_step(fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    let (state, state_null) = arg(fcinfo, 0);
    let (v, v_null) = arg(fcinfo, 1);
    let (lo, lo_null) = arg(fcinfo, 2);
    let (hi, hi_null) = arg(fcinfo, 3);
    let total = if state_null { 0.0 } else { f64::from_bits(state.value() as u64) };
    let v = f64::from_bits(v.value() as u64);
    if v_null || lo_null || hi_null || v.is_nan() {
        (*fcinfo).isnull = state_null;
        return Datum::from(total.to_bits());
    }
    (*fcinfo).isnull = false;
    Datum::from((total + clamp_f64(v, f64::from_bits(lo.value() as u64), f64::from_bits(hi.value() as u64))).to_bits())
}

pg_v1_pure!(pg_finfo_dp_unit_sum_int2_step, dp_unit_sum_int2_step, |fcinfo| { int_sum_step(fcinfo, |d| d.value() as i16 as i64) });
pg_v1_pure!(pg_finfo_dp_unit_sum_int4_step, dp_unit_sum_int4_step, |fcinfo| { int_sum_step(fcinfo, |d| d.value() as i32 as i64) });
pg_v1_pure!(pg_finfo_dp_unit_sum_int8_step, dp_unit_sum_int8_step, |fcinfo| { int_sum_step(fcinfo, |d| d.value() as i64) });
pg_v1_pure!(pg_finfo_dp_unit_sum_float8_step, dp_unit_sum_float8_step, |fcinfo| { float_sum_step(fcinfo) });

// Combines two partial per-unit sums (either may be NULL).
pg_v1_pure!(pg_finfo_dp_unit_int_combine, dp_unit_int_combine, |fcinfo| {
    let (a, an) = arg(fcinfo, 0);
    let (b, bn) = arg(fcinfo, 1);
    (*fcinfo).isnull = an && bn;
    Datum::from((if an { 0 } else { a.value() as i64 }).saturating_add(if bn { 0 } else { b.value() as i64 }))
});
pg_v1_pure!(pg_finfo_dp_unit_float_combine, dp_unit_float_combine, |fcinfo| {
    let (a, an) = arg(fcinfo, 0);
    let (b, bn) = arg(fcinfo, 1);
    (*fcinfo).isnull = an && bn;
    let f = |d: Datum, null: bool| if null { 0.0 } else { f64::from_bits(d.value() as u64) };
    Datum::from((f(a, an) + f(b, bn)).to_bits())
});

// The int8 per-unit sum as int2 or int4, saturated (the DP level clamps it to its bounds, which
// are of that type).
pg_v1_pure!(pg_finfo_dp_unit_sum_to_int2, dp_unit_sum_to_int2, |fcinfo| {
    let (a, _) = arg(fcinfo, 0);
    Datum::from((a.value() as i64).clamp(i16::MIN as i64, i16::MAX as i64) as i16)
});
pg_v1_pure!(pg_finfo_dp_unit_sum_to_int4, dp_unit_sum_to_int4, |fcinfo| {
    let (a, _) = arg(fcinfo, 0);
    Datum::from((a.value() as i64).clamp(i32::MIN as i64, i32::MAX as i64) as i32)
});

#[inline(always)]
unsafe fn add_float(acc: *mut UnitAcc, v: f64, isnull: bool) -> bool {
    if !isnull && (*acc).bounded && !v.is_nan() {
        (*acc).float_sum += clamp_f64(v, (*acc).lower, (*acc).upper);
        (*acc).n += 1;
    }
    (*acc).bounded
}

// the mean's state is internal (sum and count); its transition has a fast path for a row once the
// state exists
crate::aggregates::agg::pg_v1_trans!(pg_finfo_dp_unit_float8_trans, dp_unit_float8_trans, state = UnitAcc,
    fast = |acc, val, isnull| { add_float(acc, f64::from_bits(val.value() as u64), isnull) },
    slow = |fcinfo| { float_trans(fcinfo, f64_of_float8) });
pg_v1!(pg_finfo_dp_unit_numeric_trans, dp_unit_numeric_trans, |fcinfo| { float_trans(fcinfo, numeric_datum_f64) });

/// The final value of a unit with at least one value, or NULL.
unsafe fn final_of(fcinfo: pg_sys::FunctionCallInfo, make: impl FnOnce(&UnitAcc) -> Datum) -> Datum {
    agg_context(fcinfo, F);
    match existing(fcinfo, 0) {
        Some(acc) if acc.n > 0 => make(&acc),
        _ => pg_return_null(fcinfo),
    }
}

/// float8 → numeric (the results here are clamped, so finite, which the conversion never refuses).
unsafe fn numeric_of(x: f64) -> Datum {
    crate::pg::ffi::f64_to_numeric(x)
}

pg_v1!(pg_finfo_dp_unit_sum_numeric_final, dp_unit_sum_numeric_final, |fcinfo| { final_of(fcinfo, |a| numeric_of(a.clamped_float_sum())) });
pg_v1!(pg_finfo_dp_unit_mean_float8_final, dp_unit_mean_float8_final, |fcinfo| {
    final_of(fcinfo, |a| Datum::from(a.clamped_mean().to_bits()))
});
pg_v1!(pg_finfo_dp_unit_mean_numeric_final, dp_unit_mean_numeric_final, |fcinfo| { final_of(fcinfo, |a| numeric_of(a.clamped_mean())) });

// dp.unit_count(*) and dp.unit_count(value) run on PostgreSQL's own count transitions (int8inc,
// int8inc_any); the final value is the count as int4, saturated (the DP level clamps it to
// max_count_per_unit).
pg_v1!(pg_finfo_dp_unit_count_final, dp_unit_count_final, |fcinfo| {
    let n = if pg_arg_is_null(fcinfo, 0) { 0 } else { pg_getarg_datum_raw(fcinfo, 0).value() as i64 };
    Datum::from(n.clamp(0, i32::MAX as i64) as i32)
});

pg_v1!(pg_finfo_dp_unit_combine, dp_unit_combine, |fcinfo| {
    let ctx = agg_context(fcinfo, F);
    match (existing(fcinfo, 0), existing(fcinfo, 1)) {
        (None, None) => pg_return_null(fcinfo),
        (Some(_), None) => pg_getarg_datum_raw(fcinfo, 0),
        (a, Some(b)) => {
            let mut merged = a.unwrap_or_default();
            merged.merge(&b);
            let p = if pg_arg_is_null(fcinfo, 0) {
                pg_sys::MemoryContextAlloc(ctx, std::mem::size_of::<UnitAcc>()) as *mut UnitAcc
            } else {
                pg_getarg_datum_raw(fcinfo, 0).cast_mut_ptr::<UnitAcc>()
            };
            p.write(merged);
            Datum::from(p)
        }
    }
});

pg_v1!(pg_finfo_dp_unit_serialize, dp_unit_serialize, |fcinfo| {
    agg_context(fcinfo, F);
    match existing(fcinfo, 0) {
        None => pg_return_null(fcinfo),
        Some(a) => a.to_bytes().as_slice().into_datum().expect("bytea datum"),
    }
});

pg_v1!(pg_finfo_dp_unit_deserialize, dp_unit_deserialize, |fcinfo| {
    let ctx = agg_context(fcinfo, F);
    if pg_arg_is_null(fcinfo, 0) {
        return pg_return_null(fcinfo);
    }
    let bytes: &[u8] = pgrx::fcinfo::pg_getarg(fcinfo, 0).expect("bytea");
    let acc = UnitAcc::from_bytes(bytes)
        .unwrap_or_else(|| raise_with(PgSqlErrorCode::ERRCODE_DATA_CORRUPTED, format!("{F}: malformed partial state"), None));
    let p = pg_sys::MemoryContextAlloc(ctx, std::mem::size_of::<UnitAcc>()) as *mut UnitAcc;
    p.write(acc);
    Datum::from(p)
});

// dp.per_group(condition): the condition itself (strict). Volatile, so that the planner keeps a
// condition of a DP level's HAVING that pg_dp wraps in it above the aggregation, where it runs once
// per group (a declared domain's `key = ANY(values)`, rewrite.rs)
pg_v1!(pg_finfo_dp_per_group, dp_per_group, |fcinfo| { pg_getarg_datum_raw(fcinfo, 0) });

// dp.random_order(): a uniform float8 in [0, 1) from the CSPRNG (53 random bits)
pg_v1!(pg_finfo_dp_random_order, dp_random_order, |_fcinfo| {
    let x: f64 = crate::settings::noise::with_rng(|rng| pg_dp_core::noise::rng::uniform01(rng));
    Datum::from(x.to_bits())
});
