//! The aggregates of a DP level over a Citus table (docs/distributed.md): `dp.exact_grid` puts each
//! row's value on its aggregate's grid, as the DP aggregate would, for the exact query the workers
//! sum; the merge aggregates on the coordinator rebuild each group's exact state from those sums
//! and release it with the DP aggregate's own final function.
use crate::catalog::functions::{kind_of, Kind};
use pg_dp_core::mechanisms::accum::Acc;
use crate::pg::error::raise_with;
use pgrx::pg_sys::{self, Oid};
use pgrx::PgSqlErrorCode;
use std::ffi::CStr;

/// What `dp.exact_grid` keeps between rows: the empty state of the aggregate it mirrors, the
/// value's type, and whether it returns the squared deviation.
#[derive(Clone, Copy)]
struct Grid {
    empty: Acc,
    value_type: Oid,
    squared: bool,
}

/// The three exact sums of a group from its numeric[] (Σ q, count, Σ (q − c)²).
pub(crate) unsafe fn exact_sums(d: pg_sys::Datum, func: &'static str) -> (i128, i64, i128) {
    let arr = pg_sys::pg_detoast_datum(d.cast_mut_ptr()) as *mut pg_sys::ArrayType;
    let mut elems: *mut pg_sys::Datum = std::ptr::null_mut();
    let mut nulls: *mut bool = std::ptr::null_mut();
    let mut n: i32 = 0;
    pg_sys::deconstruct_array(arr, pg_sys::NUMERICOID, -1, false, pg_sys::TYPALIGN_INT as std::ffi::c_char, &mut elems, &mut nulls, &mut n);
    if n != 3 {
        raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("{func}: malformed exact sums"), None);
    }
    let at = |i: usize| -> i128 {
        if *nulls.add(i) {
            return 0;
        }
        let s = pg_sys::OidOutputFunctionCall(Oid::from(pg_sys::F_NUMERIC_OUT), *elems.add(i));
        let s = CStr::from_ptr(s).to_string_lossy();
        s.parse::<i128>().unwrap_or_else(|_| raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("{func}: malformed exact sums"), None))
    };
    (at(0), at(1) as i64, at(2))
}

/// True if the first element of a numeric[] is NULL.
pub(crate) unsafe fn first_is_null(d: pg_sys::Datum) -> bool {
    let arr = pg_sys::pg_detoast_datum(d.cast_mut_ptr()) as *mut pg_sys::ArrayType;
    let mut isnull = false;
    let idx = [1i32];
    pg_sys::array_ref(arr, 1, idx.as_ptr().cast_mut(), -1, -1, false, pg_sys::TYPALIGN_INT as std::ffi::c_char, &mut isnull);
    isnull
}

crate::pg::fmgr::pg_finfo!(pg_finfo_dp_exact_grid);

/// dp.exact_grid(value, kind, lower, upper, epsilon, squared): per row, once the first call has built
/// the grid, plain reads and `Acc::row_f64`/`row_i64` (arithmetic that cannot panic nor call
/// PostgreSQL) without `pg_guard`; the first call and numeric values take the guarded path.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn dp_exact_grid(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    let extra = (*(*fcinfo).flinfo).fn_extra as *const Grid;
    if !extra.is_null() {
        let g = &*extra;
        if let Some(arg) = (*fcinfo).args.as_slice(1).first() {
            if let Some(v) = by_value_row(g, arg.value) {
                return grid_datum(fcinfo, v);
            }
        }
    }
    exact_grid_guarded(fcinfo)
}

/// A by-value value's grid integer (`Acc::row_*`), or None for a type passed by reference (numeric).
#[inline(always)]
fn by_value_row(g: &Grid, d: pg_sys::Datum) -> Option<Option<i64>> {
    Some(match g.value_type {
        pg_sys::FLOAT8OID => g.empty.row_f64(f64::from_bits(d.value() as u64), g.squared),
        pg_sys::INT4OID => g.empty.row_i64(d.value() as i32 as i64, g.squared),
        pg_sys::INT8OID => g.empty.row_i64(d.value() as i64, g.squared),
        pg_sys::INT2OID => g.empty.row_i64(d.value() as i16 as i64, g.squared),
        _ => return None,
    })
}

/// A grid value as the function's result; NULL for a row the aggregate skips.
#[inline(always)]
unsafe fn grid_datum(fcinfo: pg_sys::FunctionCallInfo, v: Option<i64>) -> pg_sys::Datum {
    match v {
        Some(v) => pg_sys::Datum::from(v),
        None => {
            (*fcinfo).isnull = true;
            pg_sys::Datum::from(0)
        }
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn exact_grid_guarded(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    const G: &str = "dp.exact_grid";
    let flinfo = (*fcinfo).flinfo;
    if (*flinfo).fn_extra.is_null() {
        let code = crate::pg::fmgr::required::<i32>(fcinfo, 1, G, "kind");
        let kind = match code {
            1 => Kind::IntSum,
            2 => Kind::FloatSum,
            3 => Kind::Avg,
            4 => Kind::Variance,
            5 => Kind::Stddev,
            _ => raise_with(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("{G}: kind must be 1 to 5"), None),
        };
        let arg = |i: usize| {
            let a = *(*fcinfo).args.as_slice(6).get(i).expect("six arguments");
            (a.value, a.isnull, pg_sys::get_fn_expr_argtype(flinfo, i as i32))
        };
        let params = crate::query::params::ParamValues::new(vec![arg(2), arg(3), arg(4)], kind.func()).params(kind);
        let empty = Acc::new(params).unwrap_or_else(|e| crate::pg::error::raise(kind.func(), e));
        let squared = crate::pg::fmgr::required::<bool>(fcinfo, 5, G, "squared");
        let g = pg_sys::MemoryContextAlloc((*flinfo).fn_mcxt, std::mem::size_of::<Grid>()) as *mut Grid;
        g.write(Grid { empty, value_type: pg_sys::get_fn_expr_argtype(flinfo, 0), squared });
        (*flinfo).fn_extra = g.cast();
    }
    let g = &*((*flinfo).fn_extra as *const Grid);
    let d = (*(*fcinfo).args.as_slice(1).first().expect("a value")).value;
    let v = match (by_value_row(g, d), g.value_type) {
        (Some(v), _) => v,
        (None, pg_sys::NUMERICOID) => g.empty.row_f64(crate::pg::fmgr::numeric_datum_f64(d), g.squared),
        _ => raise_with(PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH, format!("{G}: unsupported value type"), None),
    };
    grid_datum(fcinfo, v)
}

crate::pg::fmgr::pg_v1!(pg_finfo_dp_merge_trans, dp_merge_trans, |fcinfo| {
    const M: &str = "pg_dp merge";
    let ctx = crate::aggregates::agg::agg_context(fcinfo, M);
    let a = pg_sys::AggGetAggref(fcinfo);
    let kind = kind_of((*a).aggfnoid, crate::catalog::functions::first_arg_type(a))
        .unwrap_or_else(|| raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("{M}: not a merge aggregate"), None));
    let mut acc = crate::aggregates::agg::state_arg(fcinfo, 0);
    if acc.is_null() {
        let params = crate::query::params::ParamValues::read(fcinfo, kind.func()).params(kind);
        let fresh = Acc::new(params).unwrap_or_else(|e| crate::pg::error::raise(kind.func(), e));
        acc = crate::aggregates::agg::alloc_state(ctx, fresh);
    }
    if !pgrx::fcinfo::pg_arg_is_null(fcinfo, 1) {
        let (sum, n, sum_sq) = exact_sums(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 1), kind.func());
        let mut s = *acc;
        s.sum += sum;
        s.n += n;
        s.sum_sq += sum_sq;
        acc.write(s);
    }
    pg_sys::Datum::from(acc)
});

crate::pg::fmgr::pg_v1!(pg_finfo_dp_merge_keep_group_trans, dp_merge_keep_group_trans, |fcinfo| {
    crate::aggregates::agg::agg_context(fcinfo, "dp.keep_group");
    let mut state = if pgrx::fcinfo::pg_arg_is_null(fcinfo, 0) { 0 } else { pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 0).value() as i64 };
    if !pgrx::fcinfo::pg_arg_is_null(fcinfo, 1) {
        let (_, n, _) = exact_sums(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 1), "dp.keep_group");
        state += n;
    }
    pg_sys::Datum::from(state)
});
