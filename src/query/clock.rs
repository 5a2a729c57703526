//! Dates and times from the clock below a DP aggregate: `current_date - 30`, `now() - interval '30
//! days'`, `to_date('2023-01-01', 'YYYY-MM-DD')`, `date_trunc('month', timestamp '…')`.
//!
//! A column-free expression of built-in stable functions (the clock, the session's time zone and
//! date style) is evaluated once, before the grammar checks the level, and becomes a constant, as ε
//! does: whatever error it raises comes from the query text and the clock, never from the data (left
//! in the query, it would run only on the rows that reach it). `statement_timestamp()` and volatile
//! functions (`clock_timestamp()`, `random()`) are left alone (and refused where they are not
//! total). A plan with such a constant is valid in one transaction only: it depends on the relation
//! `dp.clock`, whose invalidation every execution queues for its commit (admission.rs), so a
//! prepared statement is planned again, with the clock read again, in the next transaction.
use crate::catalog::functions::kind_of;
use crate::pg::nodes::collect_nodes;
use pgrx::pg_sys::{self, Node, NodeTag, Query};
use std::ffi::c_void;

/// Folds the clock expressions of every DP level of a statement (before the grammar checks it).
/// Returns true if one was folded.
pub unsafe fn fold(query: *mut Query) -> bool {
    let mut walk = Walk { found: false, depth: 0 };
    find_levels(query as *mut Node, &mut walk as *mut Walk as *mut c_void);
    walk.found
}

/// The state of a walk that looks for (or folds) clock expressions: whether one was found (or
/// folded), and how deep in the expression the walk is. Expressions are looked at down to
/// [`MAX_DEPTH`] levels only: the checks of each candidate walk it again, and near the end of the
/// stack they would fail (a clock expression is a handful of nodes near the top of a condition).
struct Walk {
    found: bool,
    depth: u32,
}

/// Deepest level of an expression at which a clock expression is looked for.
const MAX_DEPTH: u32 = 64;

/// True if a query level computes pg_dp aggregates.
unsafe fn is_dp_level(q: *mut Query) -> bool {
    if !(*q).hasAggs {
        return false;
    }
    let mut found = Vec::new();
    collect_nodes((*q).targetList as *mut Node, &[NodeTag::T_Aggref], &mut found);
    collect_nodes((*q).havingQual, &[NodeTag::T_Aggref], &mut found);
    found.iter().any(|a| {
        let a = *a as *mut pg_sys::Aggref;
        (*a).agglevelsup == 0 && kind_of((*a).aggfnoid, crate::catalog::functions::first_arg_type(a)).is_some()
    })
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn find_levels(node: *mut Node, ctx: *mut c_void) -> bool {
    let w = &mut *(ctx as *mut Walk);
    if node.is_null() || w.depth > MAX_DEPTH {
        return false;
    }
    if pg_sys::stack_is_too_deep() {
        return true; // the grammar refuses it as too deep
    }
    if (*node).type_ == NodeTag::T_Query {
        let q = node as *mut Query;
        let saved = std::mem::replace(&mut w.depth, 0);
        if is_dp_level(q) && has_foldable(q) {
            let m: unsafe extern "C-unwind" fn() -> *mut Node =
                std::mem::transmute(fold_mutator as unsafe extern "C-unwind" fn(*mut Node, *mut c_void) -> *mut Node);
            pg_sys::query_tree_mutator(q, Some(m), ctx, pg_sys::QTW_DONT_COPY_QUERY as i32);
        }
        let r = pg_sys::query_tree_walker(q, Some(find_levels), ctx, 0);
        w.depth = saved;
        return r;
    }
    w.depth += 1;
    let r = pg_sys::expression_tree_walker(node, Some(find_levels), ctx);
    w.depth -= 1;
    r
}

/// Whether a level (or a row source below it) holds a clock expression: only then is it rewritten.
unsafe fn has_foldable(q: *mut Query) -> bool {
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walker(node: *mut Node, ctx: *mut c_void) -> bool {
        let w = &mut *(ctx as *mut Walk);
        if node.is_null() || w.depth > MAX_DEPTH || pg_sys::stack_is_too_deep() {
            return false;
        }
        if (*node).type_ == NodeTag::T_Query {
            let saved = std::mem::replace(&mut w.depth, 0);
            let r = pg_sys::query_tree_walker(node as *mut Query, Some(walker), ctx, 0);
            w.depth = saved;
            return r;
        }
        if foldable(node) {
            w.found = true;
            return true;
        }
        w.depth += 1;
        let r = pg_sys::expression_tree_walker(node, Some(walker), ctx);
        w.depth -= 1;
        r
    }
    let mut walk = Walk { found: false, depth: 0 };
    pg_sys::query_tree_walker(q, Some(walker), &mut walk as *mut Walk as *mut c_void, 0);
    walk.found
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn fold_mutator(node: *mut Node, ctx: *mut c_void) -> *mut Node {
    let w = &mut *(ctx as *mut Walk);
    if node.is_null() || w.depth > MAX_DEPTH {
        return node;
    }
    let m: unsafe extern "C-unwind" fn() -> *mut Node =
        std::mem::transmute(fold_mutator as unsafe extern "C-unwind" fn(*mut Node, *mut c_void) -> *mut Node);
    if (*node).type_ == NodeTag::T_Query {
        let saved = std::mem::replace(&mut w.depth, 0);
        pg_sys::query_tree_mutator(node as *mut Query, Some(m), ctx, pg_sys::QTW_DONT_COPY_QUERY as i32);
        w.depth = saved;
        return node;
    }
    if !pg_sys::stack_is_too_deep() && foldable(node) {
        w.found = true;
        return evaluate(node);
    }
    w.depth += 1;
    let out = pg_sys::expression_tree_mutator(node, Some(m), ctx);
    w.depth -= 1;
    out
}

/// A column-free expression of built-in functions, at least one of them stable, none volatile,
/// evaluable on its own (no CASE placeholder, parameter, aggregate or subquery).
///
/// Only expressions of at most [`MAX_FOLDABLE_NODES`] nodes are looked at: the checks walk the whole
/// expression (a clock expression is a handful of nodes).
unsafe fn foldable(node: *mut Node) -> bool {
    use NodeTag::*;
    let expression = matches!(
        (*node).type_,
        T_FuncExpr | T_OpExpr | T_SQLValueFunction | T_CoerceViaIO | T_CaseExpr | T_CoalesceExpr | T_MinMaxExpr
            | T_RelabelType | T_DistinctExpr | T_NullIfExpr | T_BoolExpr | T_NullTest | T_BooleanTest | T_ScalarArrayOpExpr
            | T_ArrayCoerceExpr | T_ArrayExpr
    );
    // (the size first: the checks below walk the whole expression)
    if !expression || !within(node, MAX_FOLDABLE_NODES) || !pg_sys::contain_mutable_functions(node) || pg_sys::contain_volatile_functions(node) {
        return false;
    }
    !not_standalone(node, std::ptr::null_mut())
}

/// Largest expression, in nodes, that may be folded into a constant.
const MAX_FOLDABLE_NODES: usize = 64;

/// Whether an expression has at most `limit` nodes (the walk stops at the first one more).
unsafe fn within(node: *mut Node, limit: usize) -> bool {
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn count(node: *mut Node, ctx: *mut c_void) -> bool {
        if node.is_null() {
            return false;
        }
        let left = &mut *(ctx as *mut usize);
        // near the stack's end the expression is not looked at (a deeper walk would fail there)
        if *left == 0 || (*node).type_ == NodeTag::T_Query || pg_sys::stack_is_too_deep() {
            *left = 0;
            return true;
        }
        *left -= 1;
        pg_sys::expression_tree_walker(node, Some(count), ctx)
    }
    let mut left = limit;
    !count(node, &mut left as *mut usize as *mut c_void)
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn not_standalone(node: *mut Node, ctx: *mut c_void) -> bool {
    use NodeTag::*;
    if node.is_null() {
        return false;
    }
    if pg_sys::stack_is_too_deep() {
        return true;
    }
    let user = |f: pg_sys::Oid| f.to_u32() >= pg_sys::FirstNormalObjectId;
    let bad = match (*node).type_ {
        T_Var | T_Param | T_Aggref | T_GroupingFunc | T_WindowFunc | T_SubLink | T_SubPlan | T_AlternativeSubPlan
        | T_CaseTestExpr | T_CoerceToDomain | T_CoerceToDomainValue | T_NextValueExpr | T_CurrentOfExpr | T_SetToDefault
        | T_PlaceHolderVar | T_XmlExpr | T_Query => true,
        T_FuncExpr => {
            let f = node as *mut pg_sys::FuncExpr;
            user((*f).funcid) || (*f).funcretset || (*f).funcid.to_u32() == pg_sys::F_STATEMENT_TIMESTAMP
        }
        T_OpExpr | T_DistinctExpr | T_NullIfExpr => {
            let o = node as *mut pg_sys::OpExpr;
            pg_sys::set_opfuncid(o);
            user((*o).opfuncid) || (*o).opretset
        }
        T_ScalarArrayOpExpr => {
            let o = node as *mut pg_sys::ScalarArrayOpExpr;
            pg_sys::set_sa_opfuncid(o);
            user((*o).opfuncid)
        }
        T_CoerceViaIO => {
            let c = node as *mut pg_sys::CoerceViaIO;
            user((*c).resulttype) || user(pg_sys::exprType((*c).arg as *mut Node))
        }
        _ => false,
    };
    bad || pg_sys::expression_tree_walker(node, Some(not_standalone), ctx)
}

/// The value of a standalone expression, as a constant (errors come from the text and the clock).
pub unsafe fn evaluate(node: *mut Node) -> *mut Node {
    let typ = pg_sys::exprType(node);
    let typmod = pg_sys::exprTypmod(node);
    let coll = pg_sys::exprCollation(node);
    let (mut len, mut byval) = (0i16, false);
    pg_sys::get_typlenbyval(typ, &mut len, &mut byval);
    let expr = pg_sys::copyObjectImpl(node as *const c_void) as *mut Node;
    pg_sys::fix_opfuncids(expr);
    let state = pg_sys::ExecInitExpr(expr as *mut pg_sys::Expr, std::ptr::null_mut());
    let econtext = pg_sys::CreateStandaloneExprContext();
    let mut isnull = false;
    let eval = (*state).evalfunc.expect("compiled expression");
    // the value is allocated in the current (planning) context, which outlives the query tree's use
    let value = eval(state, econtext, &mut isnull);
    pg_sys::makeConst(typ, typmod, coll, len as i32, if isnull { pg_sys::Datum::from(0) } else { value }, isnull, byval) as *mut Node
}

/// Whether any of a list of plan relation OIDs is `dp.clock`.
pub unsafe fn depends_on_clock(relation_oids: *mut pg_sys::List) -> bool {
    match clock_relid() {
        Some(c) => pg_sys::list_member_oid(relation_oids, c),
        None => false,
    }
}

/// The OID of the view `dp.clock`, if this database's schema has it.
pub unsafe fn clock_relid() -> Option<pg_sys::Oid> {
    let ns = pg_sys::get_namespace_oid(c"dp".as_ptr(), true);
    if ns == pg_sys::InvalidOid {
        return None;
    }
    let r = pg_sys::get_relname_relid(c"clock".as_ptr(), ns);
    (r != pg_sys::InvalidOid).then_some(r)
}
