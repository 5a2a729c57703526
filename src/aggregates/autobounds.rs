//! Automatic bounds in SQL: `dp_sum(value [, ε])`, `dp_avg(value [, ε])` (this file) and
//! `dp_median(value [, ε])`, `dp_percentile(value, p [, ε])` (quantile.rs) over a value without
//! declared bounds. A documented share of ε (`pg_dp_core::mechanisms::autobounds::AUTO_BOUNDS_SHARE`) chooses
//! power-of-two bounds from a noisy histogram of binary magnitudes, the rest releases the statistic
//! at those bounds (docs/privacy/automatic-bounds.md). The receipt charges the caller's whole ε
//! before the query runs; the bounds are chosen while it runs, so the receipt says "automatic" and
//! `dp.last_releases` shows the release's own scale and the bounds. Too little data for the
//! histogram to show bounds falls back to bounds from the same noisy counts, so a call without bounds
//! never fails after its charge (docs/privacy/automatic-bounds.md).
//!
//! State of the sums and means: the fixed-size, mergeable `MagnitudeHistogram` (exact counts and
//! sums per binary magnitude), in the aggregate's memory context; parallel aggregation serialises it,
//! and over Citus tables the workers count its bins (`dp.exact_magnitude`, `dp.merge_auto_*`).
use crate::aggregates::agg::{agg_context, check_params_row_independent};
use crate::pg::fmgr::{datum_to_f64, numeric_datum_f64};
use crate::catalog::functions::{kind_of, Kind};
use crate::query::params::{Paid, ParamValues};
use crate::execution::tickets::check_ticket;
use crate::catalog::functions::first_arg_type;
use crate::pg::error::{raise, raise_with, OrRaise};
use crate::settings::noise::with_rng;
use crate::aggregates::sum::OrRaiseNumeric;
use crate::pg::fmgr::pg_v1;
use crate::aggregates::agg::pg_v1_final;
use pg_dp_core::mechanisms::autobounds::{AutoBoundsSpec, MagnitudeHistogram};
use pg_dp_core::{DpError, DpResult};
use pgrx::fcinfo::{pg_arg_is_null, pg_getarg, pg_return_null};
use pgrx::pg_sys;
use pgrx::{AnyNumeric, IntoDatum, PgSqlErrorCode};

/// The state of dp_sum and dp_avg without bounds.
#[repr(C)]
struct AutoState {
    kind: Kind,
    epsilon: u64,
    /// type of the aggregated value
    value_type: pg_sys::Oid,
    hist: MagnitudeHistogram,
}

const HEADER: usize = 1 + 8 + 4;

fn kind_code(k: Kind) -> u8 {
    match k {
        Kind::IntSum => 1,
        Kind::FloatSum => 2,
        _ => 3,
    }
}

fn code_kind(c: u8) -> DpResult<Kind> {
    match c {
        1 => Ok(Kind::IntSum),
        2 => Ok(Kind::FloatSum),
        3 => Ok(Kind::Avg),
        c => Err(DpError::CorruptState(format!("automatic-bounds kind {c}"))),
    }
}

/// A state in `ctx`, aligned for its i128 sums (PostgreSQL's allocations are 8-byte aligned; the
/// context frees the whole block when it is reset).
unsafe fn alloc(ctx: pg_sys::MemoryContext, s: AutoState) -> *mut AutoState {
    let align = std::mem::align_of::<AutoState>();
    let raw = pg_sys::MemoryContextAlloc(ctx, std::mem::size_of::<AutoState>() + align) as usize;
    let p = ((raw + align - 1) & !(align - 1)) as *mut AutoState;
    p.write(s);
    p
}

unsafe fn state(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> *mut AutoState {
    if pg_arg_is_null(fcinfo, i) {
        std::ptr::null_mut()
    } else {
        pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, i).cast_mut_ptr()
    }
}

/// The kind of the call being computed (dp_sum over an integer type is an integer sum).
unsafe fn call_kind(fcinfo: pg_sys::FunctionCallInfo, func: &'static str) -> Kind {
    let a = pg_sys::AggGetAggref(fcinfo);
    if a.is_null() {
        raise_with(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, format!("{func}: support function called outside an aggregate"), None);
    }
    kind_of((*a).aggfnoid, first_arg_type(a)).unwrap_or_else(|| raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("{func}: not a pg_dp aggregate"), None))
}

/// A value of one of the boundless aggregates' input types as float8 (NaN for numeric NaN).
pub(crate) unsafe fn value_f64(typ: pg_sys::Oid, d: pg_sys::Datum) -> f64 {
    match typ {
        pg_sys::INT2OID => d.value() as i16 as f64,
        pg_sys::INT4OID => d.value() as i32 as f64,
        pg_sys::INT8OID => d.value() as i64 as f64,
        pg_sys::NUMERICOID => numeric_datum_f64(d),
        _ => datum_to_f64(d),
    }
}

/// The transition state, or on the first row a new one with the call's ε (value, [ε] arguments).
unsafe fn state_or_first(fcinfo: pg_sys::FunctionCallInfo, f: &'static str, value_type: pg_sys::Oid) -> *mut AutoState {
    let st = state(fcinfo, 0);
    if !st.is_null() {
        return st;
    }
    let ctx = agg_context(fcinfo, f);
    let kind = call_kind(fcinfo, f);
    check_params_row_independent(fcinfo, kind.func(), &["epsilon"]);
    let epsilon = crate::aggregates::agg::epsilon_arg(fcinfo, 2, kind.func());
    alloc(ctx, AutoState { kind, epsilon: epsilon.to_bits(), value_type, hist: MagnitudeHistogram::new() })
}

pg_v1!(pg_finfo_dp_auto_trans, dp_auto_trans, |fcinfo| {
    const F: &str = "pg_dp automatic bounds";
    let st = state_or_first(fcinfo, F, pg_sys::get_fn_expr_argtype((*fcinfo).flinfo, 1));
    if !pg_arg_is_null(fcinfo, 1) {
        let x = value_f64((*st).value_type, pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 1));
        if !x.is_nan() {
            (*st).hist.add(x);
        }
    }
    pg_sys::Datum::from(st)
});

pg_v1!(pg_finfo_dp_exact_magnitude, dp_exact_magnitude, |fcinfo| {
    // dp.exact_magnitude(value, significand): the row's magnitude bin as dp_sum and dp_avg without
    // bounds count it (MagnitudeHistogram::bin_of), or what it adds to the bin's significand sum;
    // NULL for NaN (STRICT: NULL for NULL). Written only into the exact query of a DP level over a
    // Citus table (distributed_level.rs), which groups by the bin and sums the significands.
    const F: &str = "dp.exact_magnitude";
    // the value's type, checked on the first call and kept for the others
    let flinfo = (*fcinfo).flinfo;
    let typ = if (*flinfo).fn_extra.is_null() {
        let typ = pg_sys::get_fn_expr_argtype(flinfo, 0);
        if ![pg_sys::INT2OID, pg_sys::INT4OID, pg_sys::INT8OID, pg_sys::FLOAT8OID, pg_sys::NUMERICOID].contains(&typ) {
            raise_with(PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH, format!("{F}: value must be smallint, integer, bigint, double precision or numeric"), None);
        }
        let kept = pg_sys::MemoryContextAlloc((*flinfo).fn_mcxt, std::mem::size_of::<pg_sys::Oid>()) as *mut pg_sys::Oid;
        kept.write(typ);
        (*flinfo).fn_extra = kept.cast();
        typ
    } else {
        *((*flinfo).fn_extra as *const pg_sys::Oid)
    };
    let x = value_f64(typ, pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 0));
    let significand = pg_getarg::<bool>(fcinfo, 1).unwrap_or(false);
    match MagnitudeHistogram::bin_of(x) {
        None => pg_return_null(fcinfo),
        Some((code, m)) => pg_sys::Datum::from(if significand { m } else { code as i64 }),
    }
});

pg_v1!(pg_finfo_dp_merge_auto_trans, dp_merge_auto_trans, |fcinfo| {
    // dp.merge_auto_sum_* and dp.merge_auto_avg_* (distributed_level.rs): the transition of dp_sum
    // and dp_avg without bounds, over one group's magnitude bins counted on the Citus workers
    // (ARRAY[bin, rows, Σ significands] per bin) instead of its rows
    const F: &str = "pg_dp automatic bounds merge";
    let st = state_or_first(fcinfo, F, pg_sys::FLOAT8OID);
    // a row whose bin is NULL holds the group's NULL and NaN values, which no bin counts
    if !pg_arg_is_null(fcinfo, 1) && !crate::aggregates::merge::first_is_null(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 1)) {
        let (code, count, sum) = crate::aggregates::merge::exact_sums(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 1), F);
        let code = i32::try_from(code).unwrap_or(i32::MAX);
        (*st).hist.add_bin(code, count, sum).or_raise(F);
    }
    pg_sys::Datum::from(st)
});

pg_v1!(pg_finfo_dp_auto_combine, dp_auto_combine, |fcinfo| {
    let ctx = agg_context(fcinfo, "pg_dp combine");
    let (a, b) = (state(fcinfo, 0), state(fcinfo, 1));
    match (a.is_null(), b.is_null()) {
        (true, true) => pg_return_null(fcinfo),
        (false, true) => pg_sys::Datum::from(a),
        (true, false) => pg_sys::Datum::from(alloc(ctx, std::ptr::read(b))),
        (false, false) => {
            if (*a).kind != (*b).kind || (*a).epsilon != (*b).epsilon {
                raise("pg_dp combine", DpError::CorruptState("partial states of different calls".into()));
            }
            (*a).hist.merge(&(*b).hist);
            pg_sys::Datum::from(a)
        }
    }
});

pg_v1!(pg_finfo_dp_auto_serialize, dp_auto_serialize, |fcinfo| {
    agg_context(fcinfo, "pg_dp serialize");
    let a = state(fcinfo, 0);
    if a.is_null() {
        return pg_return_null(fcinfo);
    }
    let mut bytes = Vec::with_capacity(HEADER + pg_dp_core::mechanisms::autobounds::MAX_SERIALIZED_BYTES);
    bytes.push(kind_code((*a).kind));
    bytes.extend_from_slice(&(*a).epsilon.to_le_bytes());
    bytes.extend_from_slice(&(*a).value_type.to_u32().to_le_bytes());
    bytes.extend_from_slice(&(*a).hist.to_bytes());
    bytes.as_slice().into_datum().unwrap()
});

pg_v1!(pg_finfo_dp_auto_deserialize, dp_auto_deserialize, |fcinfo| {
    const F: &str = "pg_dp deserialize";
    let ctx = agg_context(fcinfo, F);
    if pg_arg_is_null(fcinfo, 0) {
        return pg_return_null(fcinfo);
    }
    let bytes: &[u8] = pg_getarg(fcinfo, 0).unwrap();
    if bytes.len() < HEADER {
        raise(F, DpError::CorruptState(format!("{} bytes", bytes.len())));
    }
    let kind = code_kind(bytes[0]).or_raise(F);
    let epsilon = u64::from_le_bytes(bytes[1..9].try_into().unwrap());
    let value_type = pg_sys::Oid::from(u32::from_le_bytes(bytes[9..13].try_into().unwrap()));
    let hist = MagnitudeHistogram::from_bytes(&bytes[HEADER..]).or_raise(F);
    pg_sys::Datum::from(alloc(ctx, AutoState { kind, epsilon, value_type, hist }))
});

/// The release of dp_sum or dp_avg without bounds: pays-for check, bounds, value.
unsafe fn release(fcinfo: pg_sys::FunctionCallInfo) -> (Kind, f64) {
    let kind = call_kind(fcinfo, "pg_dp automatic bounds");
    let func = kind.func();
    agg_context(fcinfo, func);
    let st = state(fcinfo, 0);
    let (epsilon, empty);
    let hist: &MagnitudeHistogram = if st.is_null() {
        // no row reached the aggregate: the parameters from the call itself, an empty histogram
        let Paid::Auto { epsilon: e, .. } = ParamValues::read(fcinfo, func).paid(kind) else {
            raise(func, DpError::CorruptState("parameters of a call without bounds".into()))
        };
        epsilon = e;
        empty = MagnitudeHistogram::new();
        &empty
    } else {
        epsilon = (*st).epsilon;
        &(*st).hist
    };
    check_ticket(fcinfo, func, &Paid::Auto { kind, p: 0.5f64.to_bits(), epsilon });
    let spec = AutoBoundsSpec::new(f64::from_bits(epsilon)).or_raise(func);
    match with_rng(|rng| if kind == Kind::Avg { spec.release_avg(rng, hist) } else { spec.release_sum(rng, hist) }) {
        Ok(r) => {
            let bounds = Some((r.bounds.lower(), r.bounds.upper()));
            crate::execution::recent::pending_with_bounds(fcinfo, func, r.value, &r.info, r.info.interval95, bounds);
            (kind, r.value)
        }
        Err(e) => {
            // too little data for bounds: raised only if this group's row is returned (recent.rs),
            // so that a group the key selection drops is not told apart by an error
            crate::execution::recent::defer_error(fcinfo, func, e);
            (kind, 0.0)
        }
    }
}

pg_v1_final!(pg_finfo_dp_auto_final_float8, dp_auto_final_float8, |fcinfo| { release(fcinfo).1.into_datum().unwrap() });

pg_v1_final!(pg_finfo_dp_auto_final_numeric, dp_auto_final_numeric, |fcinfo| {
    let (kind, v) = release(fcinfo);
    // an integer sum stays an integer (rounding the noisy value is post-processing)
    let v = if kind == Kind::IntSum { v.round() } else { v };
    AnyNumeric::try_from(v).or_raise_numeric(kind.func()).into_datum().unwrap()
});

pg_v1_final!(pg_finfo_dp_auto_final_int8, dp_auto_final_int8, |fcinfo| {
    let (_, v) = release(fcinfo);
    (v.round().clamp(i64::MIN as f64, i64::MAX as f64) as i64).into_datum().unwrap()
});

