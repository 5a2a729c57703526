//! dp_median, dp_percentile (smooth sensitivity) and dp_percentile_em (exponential mechanism).
//!
//! The state keeps every non-NULL value as a float8 in one buffer in the aggregate's memory context:
//! 8 bytes per row, grown by doubling (so up to 16 bytes per row while rows arrive), plus a
//! constant. The final function sorts the buffer in place and releases through the core. There is
//! no partial aggregation (sql/quantile.sql says why).
//!
//! The integer overloads (int4 or int8 values and bounds) have transition functions of their own,
//! which store each value as a float8 too (exact below 2^53; above, the nearest float8, itself an
//! integer: a monotone map, like the grid's), and share the final functions: their parameters say
//! that the grid is the integers (their bounds are integers: [`ParamValues::quantile_params`]).
use crate::aggregates::agg::{agg_context, check_params_row_independent, state_arg};
use crate::pg::fmgr::datum_to_f64;
use crate::catalog::functions::{kind_of, Kind};
use crate::query::params::{Paid, ParamValues};
use crate::pg::error::OrRaise;
use crate::settings::noise::with_rng;
use crate::aggregates::agg::pg_v1_final;
use crate::aggregates::agg::pg_v1_trans;
use pg_dp_core::mechanisms::quantile::{QuantileParams, QuantileSpec};
use pgrx::fcinfo::{pg_arg_is_null, pg_getarg};
use pgrx::pg_sys;
use pgrx::IntoDatum;

/// A quantile aggregate's state: its parameters and the values seen so far.
#[repr(C)]
pub struct QState {
    params: QuantileParams,
    spec: QuantileSpec,
    buf: *mut f64,
    len: usize,
    cap: usize,
}

/// Initial capacity: small, so that many groups (hash aggregation) cost little until they grow.
const FIRST_CAP: usize = 8;

impl QState {
    /// The fast path: stores a non-NaN value if there is room. Plain memory writes only.
    #[inline(always)]
    unsafe fn try_push(&mut self, x: f64) -> bool {
        if x.is_nan() || self.len == self.cap {
            return false;
        }
        self.buf.add(self.len).write(x);
        self.len += 1;
        true
    }

    /// The slow path: NaN is skipped like NULL; a full buffer doubles (repalloc keeps its memory
    /// context).
    unsafe fn push(&mut self, x: f64) {
        if x.is_nan() {
            return;
        }
        if self.len == self.cap {
            self.reserve(self.cap.max(FIRST_CAP / 2) * 2);
        }
        let pushed = self.try_push(x);
        debug_assert!(pushed);
    }

    unsafe fn reserve(&mut self, cap: usize) {
        if cap <= self.cap {
            return;
        }
        let bytes = cap * std::mem::size_of::<f64>();
        self.buf = pg_sys::repalloc_huge(self.buf.cast(), bytes).cast();
        self.cap = cap;
    }

    fn values(&mut self) -> &mut [f64] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: buf holds len initialised values
        unsafe { std::slice::from_raw_parts_mut(self.buf, self.len) }
    }
}

/// A new, empty state in memory context `ctx`.
unsafe fn alloc_qstate(ctx: pg_sys::MemoryContext, params: QuantileParams, spec: QuantileSpec, cap: usize) -> *mut QState {
    let st = pg_sys::MemoryContextAlloc(ctx, std::mem::size_of::<QState>()) as *mut QState;
    let cap = cap.max(1);
    let buf = pg_sys::MemoryContextAllocHuge(ctx, cap * std::mem::size_of::<f64>()) as *mut f64;
    st.write(QState { params, spec, buf, len: 0, cap });
    st
}

/// The type of a transition function's value and bounds: float8, or an integer overload's int4 or
/// int8 (p, ε and δ are float8 in every overload).
#[derive(Clone, Copy)]
enum ValueType {
    Float8,
    Int4,
    Int8,
}

impl ValueType {
    fn oid(self) -> pg_sys::Oid {
        match self {
            ValueType::Float8 => pg_sys::FLOAT8OID,
            ValueType::Int4 => pg_sys::INT4OID,
            ValueType::Int8 => pg_sys::INT8OID,
        }
    }

    /// A non-NULL value datum of this type as f64 (an int8 above 2^53 to the nearest float8).
    #[inline(always)]
    fn to_f64(self, d: pg_sys::Datum) -> f64 {
        match self {
            ValueType::Float8 => datum_to_f64(d),
            ValueType::Int4 => d.value() as i32 as f64,
            ValueType::Int8 => d.value() as i64 as f64,
        }
    }
}

/// Reads the parameters of the first row: (value, [p,] lower, upper [, epsilon [, delta]]), the
/// bounds of type `vt`, the others float8.
unsafe fn first_row_params(fcinfo: pg_sys::FunctionCallInfo, kind: Kind, vt: ValueType) -> QuantileParams {
    let func = kind.func();
    let n = crate::pg::fmgr::nargs(fcinfo);
    let o = 2 + (kind != Kind::Median) as usize; // the first bound's argument number
    let vals: Vec<(pg_sys::Datum, bool, pg_sys::Oid)> = (2..n)
        .map(|i| {
            let t = if i == o || i == o + 1 { vt.oid() } else { pg_sys::FLOAT8OID };
            (pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, i), pg_arg_is_null(fcinfo, i), t)
        })
        .collect();
    ParamValues::new(vals, func).quantile_params(kind)
}

unsafe fn trans_of(fcinfo: pg_sys::FunctionCallInfo, kind: Kind, vt: ValueType) -> pg_sys::Datum {
    let func = kind.func();
    let mut st = state_arg(fcinfo, 0) as *mut QState;
    if st.is_null() {
        let ctx = agg_context(fcinfo, func);
        check_params_row_independent(fcinfo, func, kind.param_names());
        let params = first_row_params(fcinfo, kind, vt);
        st = alloc_qstate(ctx, params, params.spec().or_raise(func), FIRST_CAP);
    }
    if !pg_arg_is_null(fcinfo, 1) {
        (*st).push(vt.to_f64(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 1)));
    }
    pg_sys::Datum::from(st)
}

unsafe fn trans(fcinfo: pg_sys::FunctionCallInfo, kind: Kind) -> pg_sys::Datum {
    trans_of(fcinfo, kind, ValueType::Float8)
}

unsafe fn int4_trans(fcinfo: pg_sys::FunctionCallInfo, kind: Kind) -> pg_sys::Datum {
    trans_of(fcinfo, kind, ValueType::Int4)
}

unsafe fn int8_trans(fcinfo: pg_sys::FunctionCallInfo, kind: Kind) -> pg_sys::Datum {
    trans_of(fcinfo, kind, ValueType::Int8)
}

macro_rules! quantile_trans {
    ($finfo:ident, $name:ident, $kind:expr) => {
        quantile_trans!($finfo, $name, $kind, trans, ValueType::Float8);
    };
    ($finfo:ident, $name:ident, $kind:expr, $slow:ident) => {
        quantile_trans!($finfo, $name, $kind, $slow, ValueType::Float8);
    };
    ($finfo:ident, $name:ident, $kind:expr, $slow:ident, $vt:expr) => {
        pg_v1_trans!($finfo, $name, state = QState,
            fast = |st, val, isnull| { isnull || (*st).try_push($vt.to_f64(val)) },
            slow = |fcinfo| { $slow(fcinfo, $kind) });
    };
}

/// dp_median(value [, ε]) and dp_percentile(value, p [, ε]) without declared bounds (autobounds.rs):
/// the values are kept as for the bounded calls; the state's parameters hold p and ε (its bounds
/// are placeholders until the final function chooses them).
unsafe fn auto_trans(fcinfo: pg_sys::FunctionCallInfo, kind: Kind) -> pg_sys::Datum {
    let func = kind.func();
    let mut st = state_arg(fcinfo, 0) as *mut QState;
    if st.is_null() {
        let ctx = agg_context(fcinfo, func);
        check_params_row_independent(fcinfo, func, if kind == Kind::Percentile { &["p", "epsilon"] } else { &["epsilon"] });
        let params = auto_params(ParamValues::read(fcinfo, func).paid(kind), func);
        st = alloc_qstate(ctx, params, params.spec().or_raise(func), FIRST_CAP);
    }
    if let Some(v) = pg_getarg::<f64>(fcinfo, 1) {
        (*st).push(v);
    }
    pg_sys::Datum::from(st)
}

/// Placeholder quantile parameters carrying p and ε of a call with automatic bounds.
unsafe fn auto_params(paid: Paid, func: &'static str) -> QuantileParams {
    let Paid::Auto { p, epsilon, .. } = paid else {
        crate::pg::error::raise(func, pg_dp_core::DpError::CorruptState("parameters of a call without bounds".into()))
    };
    QuantileParams::smooth(f64::from_bits(p), 0.0, 1.0, f64::from_bits(epsilon), 0.0)
}

quantile_trans!(pg_finfo_dp_median_auto_trans, dp_median_auto_trans, Kind::Median, auto_trans);
quantile_trans!(pg_finfo_dp_percentile_auto_trans, dp_percentile_auto_trans, Kind::Percentile, auto_trans);

/// The final function of a quantile without bounds: pays-for check, DP bounds from the values with
/// the bounds' share of ε, then the exponential mechanism with the rest (the most accurate of pg_dp's
/// pure-ε quantiles on every dataset measured: docs/quantile-accuracy.md, docs/peer-accuracy.md).
unsafe fn auto_finish(fcinfo: pg_sys::FunctionCallInfo, kind: Kind) -> pg_sys::Datum {
    let func = kind.func();
    let ctx = agg_context(fcinfo, func);
    let mut st = state_arg(fcinfo, 0) as *mut QState;
    if st.is_null() {
        let params = auto_params(ParamValues::read(fcinfo, func).paid(kind), func);
        st = alloc_qstate(ctx, params, params.spec().or_raise(func), 1);
    }
    let (p, epsilon) = ((*st).params.p, (*st).params.epsilon);
    crate::execution::tickets::check_ticket(fcinfo, func, &Paid::Auto { kind, p, epsilon });
    let auto = pg_dp_core::mechanisms::autobounds::AutoBoundsSpec::new(f64::from_bits(epsilon)).or_raise(func);
    let (bounds, e_release) = match with_rng(|rng| auto.quantile_bounds(rng, (*st).values())) {
        Ok(b) => b,
        Err(e) => {
            // raised only if this group's row is returned (recent.rs)
            crate::execution::recent::defer_error(fcinfo, func, e);
            return 0.0f64.into_datum().unwrap();
        }
    };
    let spec = QuantileSpec::exponential(f64::from_bits(p), bounds.lower(), bounds.upper(), e_release).or_raise(func);
    let value = with_rng(|rng| spec.release(rng, (*st).values()));
    let mut info = spec.describe();
    info.mechanism = pg_dp_core::mechanisms::autobounds::AUTO_BOUNDS_MECHANISM;
    info.epsilon = auto.epsilon;
    let chosen = Some((bounds.lower(), bounds.upper()));
    crate::execution::recent::pending_with_bounds(fcinfo, func, value, &info, info.interval95, chosen);
    value.into_datum().unwrap()
}

pg_v1_final!(pg_finfo_dp_median_auto_final, dp_median_auto_final, |fcinfo| { auto_finish(fcinfo, Kind::Median) });
pg_v1_final!(pg_finfo_dp_percentile_auto_final, dp_percentile_auto_final, |fcinfo| { auto_finish(fcinfo, Kind::Percentile) });

quantile_trans!(pg_finfo_dp_median_trans, dp_median_trans, Kind::Median);
quantile_trans!(pg_finfo_dp_percentile_trans, dp_percentile_trans, Kind::Percentile);
quantile_trans!(pg_finfo_dp_percentile_em_trans, dp_percentile_em_trans, Kind::PercentileEm);
quantile_trans!(pg_finfo_dp_median_int4_trans, dp_median_int4_trans, Kind::Median, int4_trans, ValueType::Int4);
quantile_trans!(pg_finfo_dp_percentile_int4_trans, dp_percentile_int4_trans, Kind::Percentile, int4_trans, ValueType::Int4);
quantile_trans!(pg_finfo_dp_percentile_em_int4_trans, dp_percentile_em_int4_trans, Kind::PercentileEm, int4_trans, ValueType::Int4);
quantile_trans!(pg_finfo_dp_median_int8_trans, dp_median_int8_trans, Kind::Median, int8_trans, ValueType::Int8);
quantile_trans!(pg_finfo_dp_percentile_int8_trans, dp_percentile_int8_trans, Kind::Percentile, int8_trans, ValueType::Int8);
quantile_trans!(pg_finfo_dp_percentile_em_int8_trans, dp_percentile_em_int8_trans, Kind::PercentileEm, int8_trans, ValueType::Int8);

/// Pushes `x` `count` times (a value and its count from a Citus worker), checking for interrupts
/// between runs of pushes.
unsafe fn push_counted(st: *mut QState, x: f64, count: i64) {
    if x.is_nan() || count <= 0 {
        return;
    }
    let count = count as usize;
    (*st).reserve((*st).len.saturating_add(count));
    for i in 0..count {
        if i % (1 << 16) == 0 {
            pg_sys::check_for_interrupts!();
        }
        let pushed = (*st).try_push(x);
        debug_assert!(pushed);
    }
}

crate::pg::fmgr::pg_v1!(pg_finfo_dp_merge_quantile_trans, dp_merge_quantile_trans, |fcinfo| {
    // dp.merge_median, dp.merge_percentile, dp.merge_percentile_em (distributed_level.rs): the
    // arguments are the quantile's own, but the first is ARRAY[value, count] of one group's rows
    // that share a value (float8[] for the float8 forms, int8[] for the integer ones)
    const M: &str = "pg_dp quantile merge";
    let mut st = state_arg(fcinfo, 0) as *mut QState;
    if st.is_null() {
        let a = pg_sys::AggGetAggref(fcinfo);
        let kind = kind_of((*a).aggfnoid, crate::catalog::functions::first_arg_type(a))
            .filter(|k| k.is_quantile())
            .unwrap_or_else(|| crate::pg::error::raise_with(pgrx::PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("{M}: not a quantile merge aggregate"), None));
        let ctx = agg_context(fcinfo, kind.func());
        // the calls with bounds (the bounds' type says which grid); the others choose their bounds
        // themselves (dp.merge_median(values [, ε]), dp.merge_percentile(values, p [, ε]))
        let params = if kind.has_bounds(crate::pg::nodes::list_len((*a).args)) {
            let vt = match pg_sys::get_fn_expr_argtype((*fcinfo).flinfo, 2 + (kind != Kind::Median) as i32) {
                pg_sys::INT4OID => ValueType::Int4,
                pg_sys::INT8OID => ValueType::Int8,
                _ => ValueType::Float8,
            };
            check_params_row_independent(fcinfo, kind.func(), kind.param_names());
            first_row_params(fcinfo, kind, vt)
        } else {
            check_params_row_independent(fcinfo, kind.func(), if kind == Kind::Percentile { &["p", "epsilon"] } else { &["epsilon"] });
            auto_params(ParamValues::read(fcinfo, kind.func()).paid(kind), kind.func())
        };
        st = alloc_qstate(ctx, params, params.spec().or_raise(kind.func()), FIRST_CAP);
    }
    if !pg_arg_is_null(fcinfo, 1) {
        let arr = pg_sys::pg_detoast_datum(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 1).cast_mut_ptr()) as *mut pg_sys::ArrayType;
        let elem = (*arr).elemtype;
        let mut elems: *mut pg_sys::Datum = std::ptr::null_mut();
        let mut nulls: *mut bool = std::ptr::null_mut();
        let mut n: i32 = 0;
        pg_sys::deconstruct_array(arr, elem, 8, true, pg_sys::TYPALIGN_DOUBLE as std::ffi::c_char, &mut elems, &mut nulls, &mut n);
        if n != 2 || !matches!(elem, pg_sys::FLOAT8OID | pg_sys::INT8OID) {
            crate::pg::error::raise_with(pgrx::PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("{M}: malformed values"), None);
        }
        if !*nulls && !*nulls.add(1) {
            let (v, c) = (*elems, *elems.add(1));
            let (x, count) = if elem == pg_sys::FLOAT8OID {
                (datum_to_f64(v), datum_to_f64(c) as i64)
            } else {
                (v.value() as i64 as f64, c.value() as i64)
            };
            push_counted(st, x, count);
        }
    }
    pg_sys::Datum::from(st)
});

/// The final function: pays-for check, then the release (a noisy value also for no rows).
unsafe fn finish(fcinfo: pg_sys::FunctionCallInfo, kind: Kind) -> pg_sys::Datum {
    let func = kind.func();
    let ctx = agg_context(fcinfo, func);
    let mut st = state_arg(fcinfo, 0) as *mut QState;
    if st.is_null() {
        let params = ParamValues::read(fcinfo, func).quantile_params(kind);
        st = alloc_qstate(ctx, params, params.spec().or_raise(func), 1);
    }
    crate::execution::tickets::check_ticket(fcinfo, func, &Paid::Quantile((*st).params));
    let spec = (*st).spec;
    // the release sorts and overwrites the buffer: a final function runs once per group
    let value = with_rng(|rng| spec.release(rng, (*st).values()));
    // the receipt's scale and interval are the largest possible ones: the actual scale depends on
    // the data and is never shown
    let info = spec.describe();
    crate::execution::recent::pending(fcinfo, func, value, &info, info.interval95);
    value.into_datum().unwrap()
}

pg_v1_final!(pg_finfo_dp_median_final, dp_median_final, |fcinfo| { finish(fcinfo, Kind::Median) });
pg_v1_final!(pg_finfo_dp_percentile_final, dp_percentile_final, |fcinfo| { finish(fcinfo, Kind::Percentile) });
pg_v1_final!(pg_finfo_dp_percentile_em_final, dp_percentile_em_final, |fcinfo| { finish(fcinfo, Kind::PercentileEm) });
