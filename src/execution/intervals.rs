//! The functions behind `dp_interval_low` and `dp_interval_high` (query/intervals.rs rewrites the
//! calls written around a pg_dp aggregate):
//! - the aggregate `dp.interval_half_width(tag)` runs in the level's aggregation: its final function
//!   runs after the group's final function of the call tagged `tag` and returns the half-width of
//!   the receipt of that release (recent.rs), or NULL; it reads no row and cannot raise an error;
//! - `dp.interval_bound(value, half_width, high)` runs above the level: value ∓ half-width, as
//!   float8;
//! - `dp_interval_low(x)` and `dp_interval_high(x)` themselves run only where the rewrite did not
//!   apply (outside a DP query): an error that says what they take.
use crate::pg::error::raise_with;
use crate::pg::fmgr::pg_v1;
use pgrx::pg_sys;
use pgrx::PgSqlErrorCode;

// The final function of the aggregate dp.interval_half_width(tag): the tag is its own call's
// constant argument; the release it reads must belong to the same aggregation.
pg_v1!(pg_finfo_dp_interval_half_width, dp_interval_half_width, |fcinfo| {
    let mut agg_ctx: pg_sys::MemoryContext = std::ptr::null_mut();
    let in_agg = pg_sys::AggCheckCallContext(fcinfo, &mut agg_ctx) == pg_sys::AGG_CONTEXT_AGGREGATE as i32;
    let me = if in_agg { pg_sys::AggGetAggref(fcinfo) } else { std::ptr::null_mut() };
    let tag = if me.is_null() { None } else { tag_of(me) };
    let state = if in_agg { (*(*fcinfo).context.cast::<pg_sys::Node>()).type_ } else { pg_sys::NodeTag::T_Invalid };
    let found = match (tag, state) {
        (Some(t), pg_sys::NodeTag::T_AggState) => {
            let agg = (*fcinfo).context as *mut pg_sys::AggState;
            crate::execution::recent::pending_interval_in(t, |a| list_holds((*agg).aggs, a)).flatten()
        }
        _ => None,
    };
    match found {
        Some(h) if h.is_finite() => pg_sys::Float8GetDatum(h),
        _ => crate::pg::fmgr::return_null(fcinfo),
    }
});

/// The tag written as the constant argument of a dp.interval_half_width call.
unsafe fn tag_of(a: *mut pg_sys::Aggref) -> Option<i32> {
    let te = crate::pg::nodes::list_iter::<pg_sys::TargetEntry>((*a).args).next()?;
    let c = (*te).expr as *mut pg_sys::Node;
    if (*c).type_ != pg_sys::NodeTag::T_Const || (*(c as *mut pg_sys::Const)).constisnull {
        return None;
    }
    Some((*(c as *mut pg_sys::Const)).constvalue.value() as i32)
}

unsafe fn list_holds(l: *mut pg_sys::List, p: usize) -> bool {
    crate::pg::nodes::list_iter::<pg_sys::Node>(l).any(|n| n as usize == p)
}

pg_v1!(pg_finfo_dp_interval_bound, dp_interval_bound, |fcinfo| {
    let args = (*fcinfo).args.as_slice(3);
    if args[0].isnull || args[1].isnull || args[2].isnull {
        return crate::pg::fmgr::return_null(fcinfo);
    }
    let ty = pg_sys::get_fn_expr_argtype((*fcinfo).flinfo, 0);
    let v = value_as_f64(args[0].value, ty);
    let h = pg_sys::DatumGetFloat8(args[1].value);
    let high = args[2].value.value() != 0;
    pg_sys::Float8GetDatum(if high { v + h } else { v - h })
});

/// A released value of one of the pg_dp aggregates' result types, as float8.
unsafe fn value_as_f64(d: pg_sys::Datum, ty: pg_sys::Oid) -> f64 {
    match ty {
        pg_sys::INT8OID => d.value() as i64 as f64,
        pg_sys::INT4OID => d.value() as i32 as f64,
        pg_sys::INT2OID => d.value() as i16 as f64,
        pg_sys::FLOAT4OID => pg_sys::DatumGetFloat4(d) as f64,
        pg_sys::NUMERICOID => {
            let f = pgrx::direct_function_call::<f64>(pg_sys::numeric_float8_no_overflow, &[Some(d)]);
            f.unwrap_or(f64::NAN)
        }
        _ => pg_sys::DatumGetFloat8(d),
    }
}

pg_v1!(pg_finfo_dp_interval_unbound, dp_interval_unbound, |fcinfo| {
    let name = pg_sys::get_func_name((*(*fcinfo).flinfo).fn_oid);
    let name = if name.is_null() { "dp_interval_low".into() } else { std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned() };
    raise_with(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("{name} takes a pg_dp aggregate call of a DP query as its argument"),
        Some(&format!("write {name}(dp_count(*)) in the select list next to the aggregate")),
    )
});
