//! Arithmetic below a DP aggregate that cannot fail (`pg_dp_core::total_arith`).
//!
//! The grammar admits a built-in `+ - * / %` (and integer unary `-`) on integers, floats or numeric
//! below a DP aggregate; then `swap_level` makes every such operator node below the level's
//! aggregates (and in every copy of a GROUP BY key in its select list and HAVING) call the total
//! function of its result type, `dp.total_<type>`, instead of its own, and likewise the date and
//! time forms (datetime.rs). A GROUP BY key and its copies stay equal, so the planner still computes
//! a copy from the group's key, never from a raw row (release.rs also refuses any column that is not
//! a key above the aggregation). The node keeps its operator, so EXPLAIN and
//! the query's text still read `price * quantity`; it is the function that saturates (integers),
//! overflows to ±Infinity (floats, numeric) and gives NULL for a division by 0 instead of raising an
//! error. `dp_total_arith` below is that function for every type: it reads the operator and the
//! operand types from its own node once per query (flinfo's cache).
use crate::pg::fmgr::pg_v1;
use pg_dp_core::total_arith::{self, Op};
use pgrx::pg_sys::{self, Oid};
use pgrx::IntoDatum;

/// The largest numeric operand of total arithmetic, in bytes of digits (base 10,000, two bytes each:
/// about 1,000 decimal digits).
pub const MAX_NUMERIC_OPERAND_BYTES: usize = 520;

const INTS: &[Oid] = &[pg_sys::INT2OID, pg_sys::INT4OID, pg_sys::INT8OID];
const FLOATS: &[Oid] = &[pg_sys::FLOAT4OID, pg_sys::FLOAT8OID];

/// The operator and the operand kinds of a built-in arithmetic operator that pg_dp makes total.
unsafe fn arithmetic(opno: Oid, nargs: usize) -> Option<(Op, Oid, Oid)> {
    let (name, l, r) = crate::query::total::operator(opno)?;
    let op = Op::from_name(&name, nargs == 1)?;
    let l = if nargs == 1 { r } else { l };
    let kinds_ok = (INTS.contains(&l) && INTS.contains(&r))
        || (FLOATS.contains(&l) && FLOATS.contains(&r) && op != Op::Mod)
        || (l == pg_sys::NUMERICOID && r == pg_sys::NUMERICOID);
    kinds_ok.then_some((op, l, r))
}

/// How an arithmetic operator node below a DP aggregate is made total, if it is one pg_dp admits:
/// `Some(Some(f))`: it calls the total function `f` of its type instead of its own; `Some(None)`: its
/// own cannot fail (unary minus of floats and numeric, unary plus); None: not such an operator.
pub unsafe fn total_form(op: *mut pg_sys::OpExpr) -> Option<Option<Oid>> {
    let nargs = crate::pg::nodes::list_len((*op).args);
    if nargs == 1 && unary_plus((*op).opno) {
        return Some(None);
    }
    let (o, l, _) = arithmetic((*op).opno, nargs)?;
    if o == Op::Neg && !INTS.contains(&l) {
        return Some(None);
    }
    let name = match (*op).opresulttype {
        pg_sys::INT2OID => "total_int2",
        pg_sys::INT4OID => "total_int4",
        pg_sys::INT8OID => "total_int8",
        pg_sys::FLOAT4OID => "total_float4",
        pg_sys::FLOAT8OID => "total_float8",
        pg_sys::NUMERICOID => "total_numeric",
        _ => return None,
    };
    // a database on an earlier version's schema has no total functions (refused)
    crate::pg::build::function_if_exists(Some("dp"), name, &vec![pg_sys::ANYOID; nargs]).map(Some)
}

/// A built-in unary `+` of a numeric type (the identity).
unsafe fn unary_plus(opno: Oid) -> bool {
    matches!(crate::query::total::operator(opno), Some((name, l, r))
        if name == "+" && l == pg_sys::InvalidOid && (INTS.contains(&r) || FLOATS.contains(&r) || r == pg_sys::NUMERICOID))
}

/// What one call site computes: the operator, the operand types, the result type.
#[derive(Clone, Copy)]
struct Site {
    op: Op,
    left: Oid,
    right: Oid,
    result: Oid,
}

unsafe fn site(fcinfo: pg_sys::FunctionCallInfo) -> Site {
    let flinfo = (*fcinfo).flinfo;
    if !(*flinfo).fn_extra.is_null() {
        return *((*flinfo).fn_extra as *const Site);
    }
    let expr = (*flinfo).fn_expr;
    let nargs = (*fcinfo).nargs as usize;
    let found = if !expr.is_null() && (*expr).type_ == pg_sys::NodeTag::T_OpExpr {
        arithmetic((*(expr as *mut pg_sys::OpExpr)).opno, nargs)
    } else {
        None
    };
    let Some((op, _, _)) = found else {
        crate::pg::error::raise_with(
            pgrx::PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            "dp.total_* functions are called by pg_dp in place of arithmetic operators, not directly".into(),
            None,
        )
    };
    let left = pg_sys::get_fn_expr_argtype(flinfo, 0);
    let right = if nargs > 1 { pg_sys::get_fn_expr_argtype(flinfo, 1) } else { left };
    let s = Site { op, left, right, result: pg_sys::exprType(expr) };
    let p = pg_sys::MemoryContextAlloc((*flinfo).fn_mcxt, std::mem::size_of::<Site>()) as *mut Site;
    p.write(s);
    (*flinfo).fn_extra = p.cast();
    s
}

unsafe fn int_of(d: pg_sys::Datum, t: Oid) -> i64 {
    match t {
        pg_sys::INT2OID => d.value() as i16 as i64,
        pg_sys::INT4OID => d.value() as i32 as i64,
        _ => d.value() as i64,
    }
}

unsafe fn float_of(d: pg_sys::Datum, t: Oid) -> f64 {
    if t == pg_sys::FLOAT4OID {
        pg_sys::DatumGetFloat4(d) as f64
    } else {
        pg_sys::DatumGetFloat8(d)
    }
}

use crate::pg::fmgr::return_null as null;

unsafe fn numeric_sign(n: pg_sys::Datum) -> i32 {
    let zero = pg_sys::Datum::from(pg_sys::int64_to_numeric(0));
    let c = pgrx::direct_function_call::<i32>(pg_sys::numeric_cmp, &[Some(n), Some(zero)]).unwrap_or(0);
    c.signum()
}

unsafe fn numeric(s: Site, a: pg_sys::Datum, b: pg_sys::Datum, fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    let na = pg_sys::pg_detoast_datum(a.cast_mut_ptr()) as pg_sys::Numeric;
    let nb = pg_sys::pg_detoast_datum(b.cast_mut_ptr()) as pg_sys::Numeric;
    // PostgreSQL's numeric multiplication and division take time quadratic in the digits and check
    // for no interrupt: an operand of more than about 1,000 decimal digits gives NULL (skipped), so
    // that one row cannot cost seconds
    if pgrx::varlena::varsize_any_exhdr(na.cast()) > MAX_NUMERIC_OPERAND_BYTES
        || pgrx::varlena::varsize_any_exhdr(nb.cast()) > MAX_NUMERIC_OPERAND_BYTES
    {
        return null(fcinfo);
    }
    if matches!(s.op, Op::Div | Op::Mod) && numeric_sign(pg_sys::Datum::from(nb)) == 0 && !pg_sys::numeric_is_nan(nb) {
        return null(fcinfo);
    }
    let mut err = false;
    let r = match s.op {
        Op::Add => pg_sys::numeric_add_opt_error(na, nb, &mut err),
        Op::Sub => pg_sys::numeric_sub_opt_error(na, nb, &mut err),
        Op::Mul => pg_sys::numeric_mul_opt_error(na, nb, &mut err),
        Op::Div => pg_sys::numeric_div_opt_error(na, nb, &mut err),
        Op::Mod => pg_sys::numeric_mod_opt_error(na, nb, &mut err),
        Op::Neg => return null(fcinfo), // not swapped: numeric negation cannot fail
    };
    if err || r.is_null() {
        let sign = total_arith::overflow_sign(s.op, numeric_sign(pg_sys::Datum::from(na)), numeric_sign(pg_sys::Datum::from(nb)));
        if sign == 0 {
            return null(fcinfo);
        }
        let inf = if sign > 0 { f64::INFINITY } else { f64::NEG_INFINITY };
        return pgrx::direct_function_call_as_datum(pg_sys::float8_numeric, &[inf.into_datum()]).unwrap_or_else(|| null(fcinfo));
    }
    pg_sys::Datum::from(r)
}

// dp.total_int2/int4/int8/float4/float8/numeric("any" [, "any"]): the total arithmetic of one
// operator node (its operator and types are read from the node). STRICT: NULL in, NULL out.
pg_v1!(pg_finfo_dp_total_arith, dp_total_arith, |fcinfo| {
    let s = site(fcinfo);
    let args = (*fcinfo).args.as_slice((*fcinfo).nargs as usize);
    let a = args[0].value;
    let b = if args.len() > 1 { args[1].value } else { a };
    match s.result {
        pg_sys::INT2OID | pg_sys::INT4OID | pg_sys::INT8OID => {
            let (lo, hi) = match s.result {
                pg_sys::INT2OID => (i16::MIN as i64, i16::MAX as i64),
                pg_sys::INT4OID => (i32::MIN as i64, i32::MAX as i64),
                _ => (i64::MIN, i64::MAX),
            };
            match total_arith::int(s.op, int_of(a, s.left), int_of(b, s.right), lo, hi) {
                None => null(fcinfo),
                Some(v) => match s.result {
                    pg_sys::INT2OID => (v as i16).into_datum().unwrap(),
                    pg_sys::INT4OID => (v as i32).into_datum().unwrap(),
                    _ => v.into_datum().unwrap(),
                },
            }
        }
        pg_sys::FLOAT4OID => match total_arith::float4(s.op, pg_sys::DatumGetFloat4(a), pg_sys::DatumGetFloat4(b)) {
            None => null(fcinfo),
            Some(v) => v.into_datum().unwrap(),
        },
        pg_sys::FLOAT8OID => match total_arith::float(s.op, float_of(a, s.left), float_of(b, s.right)) {
            None => null(fcinfo),
            Some(v) => v.into_datum().unwrap(),
        },
        _ => numeric(s, a, b, fcinfo),
    }
});

/// Makes the admitted arithmetic and date or time nodes of a DP level call their total forms: every
/// node below its aggregates (conditions, row sources, aggregated values, FILTER, GROUP BY keys) and
/// every copy of a GROUP BY key in its select list and HAVING, so that the copies stay equal to the
/// key. The post-processing of released values keeps PostgreSQL's own arithmetic (`1 / (dp_count(*)
/// - 10)` may divide by zero, above the level). Runs after the grammar admitted the level.
pub unsafe fn swap_level(q: *mut pg_sys::Query) {
    let keys: Vec<*mut pg_sys::Node> = crate::query::tree::group_keys(q)
        .iter()
        .map(|(e, _)| pg_sys::copyObjectImpl(*e as *const std::ffi::c_void) as *mut pg_sys::Node)
        .collect();
    swap_all((*q).jointree as *mut pg_sys::Node, std::ptr::null_mut());
    for rte in crate::pg::nodes::list_iter::<pg_sys::RangeTblEntry>((*q).rtable) {
        if (*rte).rtekind == pg_sys::RTEKind::RTE_SUBQUERY && !(*rte).subquery.is_null() {
            pg_sys::query_tree_walker((*rte).subquery, Some(swap_all), std::ptr::null_mut(), 0);
        }
    }
    let ctx = &keys as *const Vec<*mut pg_sys::Node> as *mut std::ffi::c_void;
    search((*q).targetList as *mut pg_sys::Node, ctx);
    // a HAVING condition without an aggregate is moved below the aggregation (by the planner, or
    // by rewrite.rs into the level's WHERE): it runs on every row, so it is made total whole
    let mut having = Vec::new();
    crate::query::tree::split_and((*q).havingQual, &mut having);
    for h in having {
        if pg_sys::contain_agg_clause(h) {
            search(h, ctx);
        } else {
            swap_all(h, std::ptr::null_mut());
        }
    }
}

/// Above the aggregates: swaps inside aggregate calls and inside copies of GROUP BY keys only.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn search(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> bool {
    if node.is_null() {
        return false;
    }
    let keys = &*(ctx as *const Vec<*mut pg_sys::Node>);
    if (*node).type_ == pg_sys::NodeTag::T_Aggref && (*(node as *mut pg_sys::Aggref)).agglevelsup == 0 {
        return swap_all(node, std::ptr::null_mut());
    }
    if keys.iter().any(|k| pg_sys::equal(node as *const std::ffi::c_void, *k as *const std::ffi::c_void)) {
        return swap_all(node, std::ptr::null_mut());
    }
    pg_sys::expression_tree_walker(node, Some(search), ctx)
}

/// Swaps every admitted node of an expression (and of the queries in it) for its total form.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn swap_all(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> bool {
    if node.is_null() {
        return false;
    }
    match (*node).type_ {
        pg_sys::NodeTag::T_Query => return pg_sys::query_tree_walker(node as *mut pg_sys::Query, Some(swap_all), ctx, 0),
        pg_sys::NodeTag::T_OpExpr => {
            let op = node as *mut pg_sys::OpExpr;
            if let Some(Some(f)) = total_form(op) {
                (*op).opfuncid = f;
            } else if let Some(f) = crate::query::datetime::operator_form(op) {
                (*op).opfuncid = f;
            }
        }
        pg_sys::NodeTag::T_FuncExpr => {
            let f = node as *mut pg_sys::FuncExpr;
            if let Some(total) = crate::query::datetime::total_trunc(f).or_else(|| crate::query::datetime::total_cast(f)) {
                (*f).funcid = total;
            }
        }
        _ => {}
    }
    pg_sys::expression_tree_walker(node, Some(swap_all), ctx)
}

/// True if an expression holds an arithmetic or date and time node that the level admits in a
/// total form (over Citus tables, whose workers run PostgreSQL's own operators, it is refused).
pub unsafe fn has_total_form(e: *mut pg_sys::Node) -> bool {
    let mut ops = Vec::new();
    crate::pg::nodes::collect_nodes(e, &[pg_sys::NodeTag::T_OpExpr, pg_sys::NodeTag::T_FuncExpr], &mut ops);
    ops.iter().any(|n| {
        if (**n).type_ == pg_sys::NodeTag::T_OpExpr {
            let op = *n as *mut pg_sys::OpExpr;
            matches!(total_form(op), Some(Some(_))) || crate::query::datetime::operator_form(op).is_some()
        } else {
            let f = *n as *mut pg_sys::FuncExpr;
            crate::query::datetime::total_trunc(f).is_some() || crate::query::datetime::total_cast(f).is_some()
        }
    })
}
