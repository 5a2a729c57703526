//! Bounds without guesswork: declared bounds (`dp.set_bounds`, `dp.learn_bounds` in
//! sql/bounds.sql, checked by the label hook in protect.rs).
//!
//! `dp_sum(income)` (and `dp_avg`, `dp_variance`, `dp_stddev`, `dp_median`, `dp_percentile`,
//! `dp_percentile_em` without bounds) over a column with declared bounds is rewritten by the query
//! grammar, before planning, into the bounded call `dp_sum(income, lower, upper)`: the same
//! release, with the same receipt (its bounds marked as declared). The value must be the column
//! itself, through views, subqueries and joins, or a widening implicit cast of it. Without a
//! declaration, `dp_sum`, `dp_avg`, `dp_median` and `dp_percentile` choose DP bounds themselves
//! (autobounds.rs); the others are refused with SQLSTATE 22023. All of this depends on the query and
//! the catalog only. A quantile of an integer column becomes the integer form (the grid of the
//! integers: the declared bounds of an integer column are integers).
use crate::pg::nodes::list_iter;
use crate::catalog::functions::Kind;
use crate::pg::error::raise_with;
use crate::catalog::protect;
use crate::pg::build::{function, oid_list, ptr_list};
use crate::pg::fmgr::pg_v1;
use pgrx::pg_sys::{self, Node, NodeTag, Oid, Query};
use pgrx::{IntoDatum, PgSqlErrorCode};
use std::ffi::{CStr, CString};

/// Where the bounds go in the argument list (0 is the value), for the aggregates that take them.
fn bounds_position(kind: Kind) -> Option<usize> {
    match kind {
        Kind::IntSum | Kind::FloatSum | Kind::Avg | Kind::Variance | Kind::Stddev | Kind::Median => Some(1),
        Kind::Percentile | Kind::PercentileEm => Some(2),
        Kind::Count | Kind::KeepGroup => None,
    }
}

/// Whether a call of `kind` with `nargs` arguments (the value included) is written without bounds:
/// (value [, ε]), or (value, p [, ε]) for the percentiles. The grammar supplies declared bounds to
/// such calls; those left without (automatic bounds, autobounds.rs) keep this shape to the executor.
pub fn without_bounds(kind: Kind, nargs: usize) -> bool {
    bounds_position(kind).is_some_and(|pos| nargs <= pos + 1)
}

/// The value expression without the implicit casts PostgreSQL added to reach the aggregate's
/// argument type (smallint → bigint, real → double precision, integer → numeric): each keeps the
/// value exactly, so bounds declared in the column's units still hold.
unsafe fn strip_implicit_casts(mut e: *mut Node) -> *mut Node {
    for _ in 0..8 {
        match (*e).type_ {
            NodeTag::T_RelabelType => e = (*(e as *mut pg_sys::RelabelType)).arg as *mut Node,
            NodeTag::T_FuncExpr => {
                let f = e as *mut pg_sys::FuncExpr;
                let args: Vec<*mut Node> = list_iter((*f).args).collect();
                if (*f).funcformat != pg_sys::CoercionForm::COERCE_IMPLICIT_CAST
                    || (*f).funcid.to_u32() >= pg_sys::FirstNormalObjectId
                    || args.len() != 1
                {
                    return e;
                }
                e = args[0];
            }
            _ => return e,
        }
    }
    e
}

/// A constant of type `typ` from a declared bound's decimal text (checked when it was declared).
unsafe fn bound_const(typ: Oid, text: &str) -> *mut Node {
    let mut infunc = pg_sys::InvalidOid;
    let mut ioparam = pg_sys::InvalidOid;
    pg_sys::getTypeInputInfo(typ, &mut infunc, &mut ioparam);
    let c = CString::new(text).expect("a declared bound has no zero byte");
    let d = pg_sys::OidInputFunctionCall(infunc, c.as_ptr() as *mut std::ffi::c_char, ioparam, -1);
    let mut len = 0i16;
    let mut byval = false;
    pg_sys::get_typlenbyval(typ, &mut len, &mut byval);
    pg_sys::makeConst(typ, -1, pg_sys::InvalidOid, len as i32, d, false, byval) as *mut Node
}

/// Gives a call written without bounds the bounds declared for its column, in place: the call
/// becomes the bounded aggregate of the same name. Returns the argument positions of the supplied
/// bounds (empty when the call has its own, or takes none).
pub unsafe fn supply_declared_bounds(q: *mut Query, agg: *mut pg_sys::Aggref, kind: Kind) -> Vec<usize> {
    let args: Vec<*mut pg_sys::TargetEntry> = list_iter((*agg).args).collect();
    let Some(pos) = bounds_position(kind).filter(|_| without_bounds(kind, args.len())) else {
        return Vec::new(); // no bounds to take, or (value, [p,] lower, upper, …): bounds given
    };
    let f = kind.func();
    let hint = "pass lower and upper, or a DBA declares the column's bounds with dp.set_bounds (or dp.learn_bounds from a public table)";
    let value = strip_implicit_casts((*args[0]).expr as *mut Node);
    let column = crate::query::tree::value_column(q, value);
    let declared = column.and_then(|(relid, att)| protect::effective_bounds(relid, att));
    if declared.is_none() && crate::catalog::functions::has_automatic_bounds(kind) {
        // no declaration: the call chooses DP bounds itself (autobounds.rs)
        return Vec::new();
    }
    let Some((relid, att)) = column else {
        raise_with(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("{f} without bounds aggregates a column with declared bounds, not an expression"),
            Some(hint),
        )
    };
    let Some(b) = declared else {
        raise_with(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!(
                "{f} without bounds: column {}.{} has no declared bounds",
                protect::relation_short_name(relid),
                crate::query::tree::attname(relid, att)
            ),
            Some(hint),
        )
    };
    // the bounded aggregate of the same name: the bounds have the value's type
    let mut types = arg_types(agg);
    let mut exprs: Vec<*mut Node> = args.iter().map(|t| (**t).expr as *mut Node).collect();
    if kind.is_quantile() {
        // a quantile of an integer column (declared bounds are integers there): its integer form
        // (the grid of the integers), over the column itself rather than its implicit cast to float8
        let int = match pg_sys::exprType(value) {
            pg_sys::INT2OID => Some((pg_sys::INT4OID, pg_sys::makeFuncExpr(
                Oid::from(pg_sys::F_INT4_INT2), pg_sys::INT4OID, ptr_list(&[value]), pg_sys::InvalidOid, pg_sys::InvalidOid,
                pg_sys::CoercionForm::COERCE_IMPLICIT_CAST) as *mut Node)),
            t @ (pg_sys::INT4OID | pg_sys::INT8OID) => Some((t, value)),
            _ => None,
        };
        if let Some((t, v)) = int {
            (types[0], exprs[0]) = (t, v);
        }
    }
    let vtype = types[0];
    types.insert(pos, vtype);
    types.insert(pos, vtype);
    exprs.insert(pos, bound_const(vtype, &b.upper));
    exprs.insert(pos, bound_const(vtype, &b.lower));
    recall(agg, kind, &exprs, &types, &types);
    vec![pos, pos + 1]
}

/// The actual argument types of a call.
unsafe fn arg_types(agg: *mut pg_sys::Aggref) -> Vec<Oid> {
    (0..crate::pg::nodes::list_len((*agg).aggargtypes) as i32).map(|i| pg_sys::list_nth_oid((*agg).aggargtypes, i)).collect()
}

/// Makes `agg` a call, over `exprs`, of the aggregate of the same name and schema whose declared
/// argument types are `declared` (`actual`: the types of `exprs`).
unsafe fn recall(agg: *mut pg_sys::Aggref, kind: Kind, exprs: &[*mut Node], declared: &[Oid], actual: &[Oid]) {
    let tles: Vec<*mut pg_sys::TargetEntry> = exprs
        .iter()
        .enumerate()
        .map(|(i, e)| pg_sys::makeTargetEntry(*e as *mut pg_sys::Expr, (i + 1) as i16, std::ptr::null_mut(), false))
        .collect();
    let schema = CStr::from_ptr(pg_sys::get_namespace_name(pg_sys::get_func_namespace((*agg).aggfnoid))).to_string_lossy().into_owned();
    (*agg).aggfnoid = function(Some(&schema), kind.func(), declared);
    (*agg).aggargtypes = oid_list(actual);
    (*agg).args = ptr_list(&tles);
}

/// Gives a call written without ε the session's default (`dp.default_epsilon` or `dp.privacy_level`)
/// as a constant argument, in place: the call becomes the aggregate of the same name with an ε.
/// Nothing in the executor then reads the settings, so changing them while the query runs (with
/// `set_config` in the query, or between a cursor's fetches) changes nothing. `dp_count(*)` becomes
/// `dp_count(true, ε)`, which counts the same rows. Returns the argument position of the ε supplied.
pub unsafe fn supply_default_epsilon(agg: *mut pg_sys::Aggref, kind: Kind) -> Option<usize> {
    let n = crate::pg::nodes::list_len((*agg).args);
    let without = match kind {
        Kind::Count => n <= 1,
        Kind::IntSum | Kind::FloatSum | Kind::Avg | Kind::Variance | Kind::Stddev | Kind::Median => n == 1 || n == 3,
        Kind::Percentile | Kind::PercentileEm => n == 2 || n == 4,
        Kind::KeepGroup => false,
    };
    if !without {
        return None;
    }
    // a level pinned to the role caps the default (a session opened before the pin, or one that
    // raised dp.default_epsilon, still spends at most the pinned level's ε per release)
    let eps = match crate::catalog::identity::pinned_epsilon(pg_sys::GetUserId()) {
        Some(pinned) => crate::settings::guc::default_epsilon().min(pinned),
        None => crate::settings::guc::default_epsilon(),
    };
    let eps_const = pg_sys::makeConst(pg_sys::FLOAT8OID, -1, pg_sys::InvalidOid, 8, pg_sys::Datum::from(eps.to_bits()), false, true) as *mut Node;
    let mut declared: Vec<Oid> = {
        let mut types: *mut Oid = std::ptr::null_mut();
        let mut nargs: i32 = 0;
        pg_sys::get_func_signature((*agg).aggfnoid, &mut types, &mut nargs);
        (0..nargs as usize).map(|i| *types.add(i)).collect()
    };
    let mut exprs: Vec<*mut Node> = list_iter::<pg_sys::TargetEntry>((*agg).args).map(|t| (*t).expr as *mut Node).collect();
    let mut actual = arg_types(agg);
    if (*agg).aggstar {
        exprs.push(pg_sys::makeBoolConst(true, false) as *mut Node);
        declared = vec![pg_sys::ANYOID];
        actual = vec![pg_sys::BOOLOID];
        (*agg).aggstar = false;
    }
    declared.push(pg_sys::FLOAT8OID);
    actual.push(pg_sys::FLOAT8OID);
    exprs.push(eps_const);
    recall(agg, kind, &exprs, &declared, &actual);
    Some(exprs.len() - 1)
}

/// Gives a `dp_avg(value, lower, upper, ε)` call the row count a DBA declared for its table
/// (`dp.set_public_count`), in place: the call becomes `dp_avg(value, lower, upper, ε, count)`, which
/// spends all of ε on the centred sum (docs/privacy/avg.md, "dp_avg with a public count"). The caller
/// (the grammar) passes `count` only for a level that aggregates every row of that one table (no
/// condition, join, GROUP BY or FILTER, no privacy unit); this adds it only when the value is a NOT
/// NULL column of the table, so that the declared count is the number of values averaged. Returns
/// the argument position of the count.
pub unsafe fn supply_public_count(q: *mut Query, agg: *mut pg_sys::Aggref, kind: Kind, relid: Oid, count: i64) -> Option<usize> {
    if kind != Kind::Avg || !(*agg).aggfilter.is_null() || crate::pg::nodes::list_len((*agg).args) != 4 {
        return None;
    }
    let args: Vec<*mut pg_sys::TargetEntry> = list_iter((*agg).args).collect();
    let value = strip_implicit_casts((*args[0]).expr as *mut Node);
    let (rel, att) = crate::query::tree::value_column(q, value)?;
    if rel != relid || !not_null_column(rel, att) {
        return None;
    }
    let mut declared: Vec<Oid> = arg_types(agg);
    declared.truncate(1);
    let vtype = declared[0];
    declared.extend([vtype, vtype, pg_sys::FLOAT8OID, pg_sys::INT8OID]);
    let mut actual = arg_types(agg);
    actual.push(pg_sys::INT8OID);
    let mut exprs: Vec<*mut Node> = args.iter().map(|t| (**t).expr as *mut Node).collect();
    exprs.push(pg_sys::makeConst(pg_sys::INT8OID, -1, pg_sys::InvalidOid, 8, pg_sys::Datum::from(count), false, true) as *mut Node);
    recall(agg, kind, &exprs, &declared, &actual);
    Some(4)
}

/// Whether column `attnum` of `relid` is declared NOT NULL.
unsafe fn not_null_column(relid: Oid, attnum: i16) -> bool {
    let tup = pg_sys::SearchSysCache2(
        pg_sys::SysCacheIdentifier::ATTNUM as i32,
        pg_sys::Datum::from(relid),
        pg_sys::Datum::from(attnum as i32),
    );
    if tup.is_null() {
        return false;
    }
    let form = pgrx::pg_sys::GETSTRUCT(tup) as *mut pg_sys::FormData_pg_attribute;
    let not_null = (*form).attnotnull && !(*form).attisdropped;
    pg_sys::ReleaseSysCache(tup);
    not_null
}

// The aggregates without bounds never reach the executor: the grammar replaces them.
pg_v1!(pg_finfo_dp_unbounded_trans, dp_unbounded_trans, |_fcinfo| { unreached() });
pg_v1!(pg_finfo_dp_unbounded_final, dp_unbounded_final, |_fcinfo| { unreached() });

fn unreached() -> ! {
    raise_with(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        "pg_dp: an aggregate without bounds in a plan that did not pass the DP query check".into(),
        Some("pg_dp must be in shared_preload_libraries"),
    )
}

pg_v1!(pg_finfo_dp_is_protected, dp_is_protected, |fcinfo| {
    let relid = crate::pg::fmgr::required::<Oid>(fcinfo, 0, "dp.is_protected", "tbl");
    if pg_sys::get_rel_relkind(relid) == 0 {
        return pg_sys::Datum::from(0usize); // no such relation: not protected
    }
    protect::reads_protected(relid, true).into_datum().unwrap()
});
