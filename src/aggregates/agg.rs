//! Plumbing shared by all pg_dp aggregates: the V1 calling convention, the aggregate memory
//! context, window refusal, the row-independence check of parameters, the combine/serial/deserial
//! functions, and reading the parameters of an aggregate that saw no rows.
use crate::pg::error::{raise, raise_with, OrRaise};
use pg_dp_core::mechanisms::accum::{Acc, Params, ACC_BYTES};
use pgrx::fcinfo::{pg_arg_is_null, pg_getarg_datum_raw, pg_return_null};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use crate::pg::fmgr::pg_v1;
use crate::pg::nodes::list_iter;
use crate::query::params::param_problem;
use crate::query::params::refuse_param;
use crate::pg::fmgr::nargs;
use crate::pg::fmgr::required;
use crate::catalog::functions::BOUNDED_NAMES;
use crate::pg::fmgr::numeric_datum_f64;
use crate::catalog::functions::Kind;
use crate::query::params::ParamValues;
use crate::query::params::Paid;
use crate::pg::nodes::list_len;

/// Defines the final function of a pg_dp aggregate: the same call written twice in one DP level (one
/// tag) releases one value per group, the first call's (charge.rs `twin_value`).
macro_rules! pg_v1_final {
    ($finfo:ident, $name:ident, |$fc:ident| $body:block) => {
        $crate::pg::fmgr::pg_v1!($finfo, $name, |$fc| {
            if let Some(d) = $crate::execution::tickets::twin_value($fc) {
                return d;
            }
            #[inline(always)]
            unsafe fn final_value($fc: ::pgrx::pg_sys::FunctionCallInfo) -> ::pgrx::pg_sys::Datum $body
            let d = final_value($fc);
            $crate::execution::tickets::remember_value($fc, d);
            d
        });
    };
}
pub(crate) use pg_v1_final;

/// Defines a transition function with a per-row fast path that runs without `pg_guard`.
///
/// `fast` gets the existing state, the value datum and its null flag, and returns true when it has
/// handled the row. It must be pure arithmetic that cannot panic nor call PostgreSQL. Everything
/// else (the first row, errors such as NaN, non-by-value types) goes to `slow`, which is guarded.
macro_rules! pg_v1_trans {
    ($finfo:ident, $name:ident, fast = |$acc:ident, $val:ident, $isnull:ident| $fast:block, slow = |$fc:ident| $slow:block) => {
        $crate::aggregates::agg::pg_v1_trans!($finfo, $name, state = ::pg_dp_core::mechanisms::accum::Acc, fast = |$acc, $val, $isnull| $fast, slow = |$fc| $slow);
    };
    ($finfo:ident, $name:ident, state = $st:ty, fast = |$acc:ident, $val:ident, $isnull:ident| $fast:block, slow = |$fc:ident| $slow:block) => {
        $crate::pg::fmgr::pg_finfo!($finfo);
        #[unsafe(no_mangle)]
        pub unsafe extern "C-unwind" fn $name(fcinfo: ::pgrx::pg_sys::FunctionCallInfo) -> ::pgrx::pg_sys::Datum {
            #[inline(always)]
            unsafe fn fast($acc: *mut $st, $val: ::pgrx::pg_sys::Datum, $isnull: bool) -> bool $fast
            #[::pgrx::pg_guard]
            unsafe extern "C-unwind" fn slow(fcinfo: ::pgrx::pg_sys::FunctionCallInfo) -> ::pgrx::pg_sys::Datum {
                #[inline(always)]
                unsafe fn inner($fc: ::pgrx::pg_sys::FunctionCallInfo) -> ::pgrx::pg_sys::Datum $slow
                inner(fcinfo)
            }
            if let Some((acc, val, isnull)) = $crate::aggregates::agg::fast_args::<$st>(fcinfo) {
                if fast(acc, val, isnull) {
                    return ::pgrx::pg_sys::Datum::from(acc);
                }
            }
            slow(fcinfo)
        }
    };
}
pub(crate) use pg_v1_trans;

/// The fast path's view of a transition call: (state, argument 1, its null flag) once the state
/// exists. Plain memory reads: no allocation, no panic, no call into PostgreSQL.
#[inline(always)]
pub unsafe fn fast_args<T>(fcinfo: pg_sys::FunctionCallInfo) -> Option<(*mut T, pg_sys::Datum, bool)> {
    let f = &*fcinfo;
    let n = f.nargs as usize;
    let args = f.args.as_slice(n);
    let state = args.first()?;
    if state.isnull {
        return None;
    }
    let (val, isnull) = match args.get(1) {
        Some(a) => (a.value, a.isnull),
        None => (pg_sys::Datum::from(0usize), false), // dp_count(*): every row counts
    };
    Some((state.value.cast_mut_ptr::<T>(), val, isnull))
}

/// The aggregate memory context; refuses plain calls and window use.
pub unsafe fn agg_context(fcinfo: pg_sys::FunctionCallInfo, func: &'static str) -> pg_sys::MemoryContext {
    let mut ctx: pg_sys::MemoryContext = std::ptr::null_mut();
    let kind = pg_sys::AggCheckCallContext(fcinfo, &mut ctx) as u32;
    if kind == 0 {
        raise_with(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("{func}: support function called outside an aggregate"),
            None,
        );
    }
    if kind == pg_sys::AGG_CONTEXT_WINDOW {
        raise_with(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("{func} cannot be used as a window function"),
            Some("each window frame would be a separate release; aggregate in a subquery instead"),
        );
    }
    ctx
}

/// The state pointer in argument 0 (null before the first row).
#[inline]
pub unsafe fn state_arg(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> *mut Acc {
    if pg_arg_is_null(fcinfo, i) {
        std::ptr::null_mut()
    } else {
        pg_getarg_datum_raw(fcinfo, i).cast_mut_ptr::<Acc>()
    }
}

/// Allocates `acc` in memory context `ctx`.
pub unsafe fn alloc_state(ctx: pg_sys::MemoryContext, acc: Acc) -> *mut Acc {
    let p = pg_sys::MemoryContextAlloc(ctx, std::mem::size_of::<Acc>()) as *mut Acc;
    p.write(acc);
    p
}

/// Refuses parameters (arguments 1.. of the aggregate) that [`param_problem`] does not accept.
/// Checked once per group, on the first row, from the query tree (the ExecutorStart hook checks the
/// same before the query runs); the error depends only on the query, never on the data.
pub unsafe fn check_params_row_independent(fcinfo: pg_sys::FunctionCallInfo, func: &'static str, names: &[&str]) {
    let aggref = pg_sys::AggGetAggref(fcinfo);
    if aggref.is_null() {
        return;
    }
    for (i, te) in list_iter::<pg_sys::TargetEntry>((*aggref).args).skip(1).enumerate() {
        if let Some(why) = param_problem((*te).expr as *mut pg_sys::Node) {
            refuse_param(func, names.get(i).copied().unwrap_or("parameter"), why);
        }
    }
}

/// Returns the state, creating it on the first row from `params` (validated by the core).
///
/// Parameters are read and validated on the first row only: [`check_params_row_independent`]
/// has then proven from the query tree that they cannot change between rows.
#[inline]
pub unsafe fn state_for_row(
    fcinfo: pg_sys::FunctionCallInfo,
    func: &'static str,
    names: &[&str],
    params: impl FnOnce() -> Params,
) -> *mut Acc {
    let acc = state_arg(fcinfo, 0);
    if !acc.is_null() {
        return acc;
    }
    let ctx = agg_context(fcinfo, func);
    check_params_row_independent(fcinfo, func, names);
    alloc_state(ctx, Acc::new(params()).or_raise(func))
}

/// ε from argument `i` if the call has it, else `dp.default_epsilon`.
#[inline]
pub unsafe fn epsilon_arg(fcinfo: pg_sys::FunctionCallInfo, i: usize, func: &'static str) -> f64 {
    if nargs(fcinfo) > i {
        required::<f64>(fcinfo, i, func, "epsilon")
    } else {
        crate::settings::guc::default_epsilon()
    }
}

/// Slow path of a float8 transition function (value, lower, upper [, epsilon]).
pub unsafe fn float8_trans(fcinfo: pg_sys::FunctionCallInfo, func: &'static str, make: fn(f64, f64, f64) -> Params) -> pg_sys::Datum {
    let acc = state_for_row(fcinfo, func, BOUNDED_NAMES, || {
        let lower = required::<f64>(fcinfo, 2, func, "lower");
        let upper = required::<f64>(fcinfo, 3, func, "upper");
        make(lower, upper, epsilon_arg(fcinfo, 4, func))
    });
    if let Some(v) = pgrx::fcinfo::pg_getarg::<f64>(fcinfo, 1) {
        (*acc).add_f64(v).or_raise(func);
    }
    pg_sys::Datum::from(acc)
}

/// numeric argument `i` as float8, or the NULL error naming it.
unsafe fn numeric_arg(fcinfo: pg_sys::FunctionCallInfo, i: usize, func: &'static str, arg: &str) -> f64 {
    if pg_arg_is_null(fcinfo, i) {
        raise_with(PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED, format!("{func}: {arg} must not be NULL"), None);
    }
    numeric_datum_f64(pg_getarg_datum_raw(fcinfo, i))
}

/// Transition function over numeric (value, lower, upper [, epsilon]). Values and bounds go through
/// float8: a per-row monotone map, so the sensitivity argument is unchanged (docs/privacy/sum.md).
pub unsafe fn numeric_trans(fcinfo: pg_sys::FunctionCallInfo, func: &'static str, make: fn(f64, f64, f64) -> Params) -> pg_sys::Datum {
    let acc = state_for_row(fcinfo, func, BOUNDED_NAMES, || {
        let lower = numeric_arg(fcinfo, 2, func, "lower");
        let upper = numeric_arg(fcinfo, 3, func, "upper");
        make(lower, upper, epsilon_arg(fcinfo, 4, func))
    });
    if !pg_arg_is_null(fcinfo, 1) {
        (*acc).add_f64(numeric_datum_f64(pg_getarg_datum_raw(fcinfo, 1))).or_raise(func);
    }
    pg_sys::Datum::from(acc)
}

/// The state at the final function (the accumulated one, or an empty one for an aggregate of this
/// kind that saw no row), once its release has been paid for (see charge.rs).
pub unsafe fn final_state(fcinfo: pg_sys::FunctionCallInfo, kind: Kind) -> Acc {
    let func = kind.func();
    agg_context(fcinfo, func);
    let acc = state_arg(fcinfo, 0);
    let acc = if !acc.is_null() {
        *acc
    } else {
        let p = ParamValues::read(fcinfo, func);
        Acc::new(p.params(kind)).or_raise(func)
    };
    crate::execution::tickets::check_ticket(fcinfo, func, &Paid::Sum(acc.params));
    acc
}

/// The public count of a `dp_avg(value, lower, upper, epsilon, public_count)` call, or None for the
/// other forms; read from the call's own (constant) argument.
pub unsafe fn public_count(fcinfo: pg_sys::FunctionCallInfo, func: &'static str) -> Option<i64> {
    let a = pg_sys::AggGetAggref(fcinfo);
    // the argument types, not the arguments: a finalizing Aggref of a parallel plan has one argument
    // (the partial aggregate's output) but keeps the call's five argument types
    if a.is_null() || list_len((*a).aggargtypes) != 5 {
        return None;
    }
    Some(ParamValues::read(fcinfo, func).i64_at(3, "public_count"))
}

/// The state at dp_avg's final function with a public count (see [`final_state`]).
pub unsafe fn final_state_public_count(fcinfo: pg_sys::FunctionCallInfo, count: i64) -> Acc {
    let func = Kind::Avg.func();
    agg_context(fcinfo, func);
    let acc = state_arg(fcinfo, 0);
    let acc = if !acc.is_null() {
        *acc
    } else {
        Acc::new(ParamValues::read(fcinfo, func).params(Kind::Avg)).or_raise(func)
    };
    crate::execution::tickets::check_ticket(fcinfo, func, &Paid::AvgPublicCount { params: acc.params, count });
    acc
}

// ----- combine / serialize / deserialize, shared by every pg_dp aggregate -----------------------

pg_v1!(pg_finfo_dp_combine, dp_combine, |fcinfo| {
    let ctx = agg_context(fcinfo, "pg_dp combine");
    let a = state_arg(fcinfo, 0);
    let b = state_arg(fcinfo, 1);
    match (a.is_null(), b.is_null()) {
        (_, true) if a.is_null() => pg_return_null(fcinfo),
        (_, true) => pg_sys::Datum::from(a),
        (true, false) => pg_sys::Datum::from(alloc_state(ctx, *b)),
        (false, false) => {
            (*a).merge(&*b).or_raise("pg_dp combine");
            pg_sys::Datum::from(a)
        }
    }
});

pg_v1!(pg_finfo_dp_serialize, dp_serialize, |fcinfo| {
    agg_context(fcinfo, "pg_dp serialize");
    let a = state_arg(fcinfo, 0);
    if a.is_null() {
        return pg_return_null(fcinfo);
    }
    let bytes = (*a).to_bytes();
    bytes.as_slice().into_datum().unwrap()
});

pg_v1!(pg_finfo_dp_deserialize, dp_deserialize, |fcinfo| {
    let ctx = agg_context(fcinfo, "pg_dp deserialize");
    if pg_arg_is_null(fcinfo, 0) {
        return pg_return_null(fcinfo);
    }
    let bytes: &[u8] = pgrx::fcinfo::pg_getarg(fcinfo, 0).unwrap();
    if bytes.len() != ACC_BYTES {
        raise("pg_dp deserialize", pg_dp_core::DpError::CorruptState(format!("{} bytes", bytes.len())));
    }
    let acc = Acc::from_bytes(bytes).or_raise("pg_dp deserialize");
    pg_sys::Datum::from(alloc_state(ctx, acc))
});
