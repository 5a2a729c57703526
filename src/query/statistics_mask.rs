//! Statistics of protected relations, masked rather than refused: catalog queries of tools (psql's
//! `\dt+` and `\di+`, JDBC's `getIndexInfo`, `pg_dump`) read `pg_class.reltuples`, `relpages` and
//! `relallvisible` and the size functions for every relation they list. For roles restricted by
//! pg_dp (protection/statistics.rs), before the grammar checks a statement:
//! - each such column of `pg_class` read directly becomes `dp.class_stat(oid, column)`: the value
//!   for relations without protected data, NULL for a protected table, its partitions, indexes and
//!   TOAST table (a join alias or a whole row of `pg_class` is still refused);
//! - `pg_relation_size`, `pg_table_size`, `pg_total_relation_size` and `pg_indexes_size` become
//!   `dp.masked_*`, NULL for relations with protected data; `pg_database_size` and
//!   `pg_tablespace_size` are NULL (a database holding protected tables counts their bytes).
//! Other statistics (pg_stats, the cumulative counters) stay refused.
use pgrx::pg_sys::{self, Node, NodeTag, Query};
use std::ffi::c_void;

/// Marks a `pg_class` column that `mask` wrapped in `dp.class_stat`: the grammar admits it.
pub const MASKED: i32 = i32::MIN + 7;

struct Cx {
    stack: Vec<*mut Query>,
    class_stat: pg_sys::Oid,
}

/// Wraps the statistics columns of `pg_class` in every query of the statement.
pub unsafe fn mask(query: *mut Query) {
    if mark(query) == 0 {
        return; // no pg_class: nothing to mask, and no copy of the statement's expressions
    }
    let Some(f) = crate::pg::build::function_if_exists(Some("dp"), "class_stat", &[pg_sys::OIDOID, pg_sys::ANYELEMENTOID]) else {
        // an earlier version's schema: the grammar refuses the statistics columns instead
        return;
    };
    let mut cx = Cx { stack: Vec::new(), class_stat: f };
    mutator(query as *mut Node, &mut cx as *mut Cx as *mut c_void);
}

/// Marks every `pg_class` entry of the statement's range tables as one the mask covered
/// (`self_reference`, a field PostgreSQL reads only for WITH queries, carried into the plan's range
/// table): after planning, an unmarked one came from a SQL function the planner inlined.
unsafe fn mark(query: *mut Query) -> usize {
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walker(node: *mut Node, ctx: *mut c_void) -> bool {
        if node.is_null() || pg_sys::stack_is_too_deep() {
            return false;
        }
        match (*node).type_ {
            NodeTag::T_Query => {
                return pg_sys::query_tree_walker(node as *mut Query, Some(walker), ctx, pg_sys::QTW_EXAMINE_RTES_BEFORE as i32)
            }
            NodeTag::T_RangeTblEntry => {
                let rte = node as *mut pg_sys::RangeTblEntry;
                if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION && (*rte).relid == pg_sys::RelationRelationId {
                    (*rte).self_reference = true;
                    *(ctx as *mut usize) += 1;
                }
                return false;
            }
            _ => {}
        }
        pg_sys::expression_tree_walker(node, Some(walker), ctx)
    }
    let mut n = 0usize;
    walker(query as *mut Node, &mut n as *mut usize as *mut c_void);
    n
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn mutator(node: *mut Node, ctx: *mut c_void) -> *mut Node {
    if node.is_null() || pg_sys::stack_is_too_deep() {
        return node;
    }
    let cx = &mut *(ctx as *mut Cx);
    let m: unsafe extern "C-unwind" fn() -> *mut Node =
        std::mem::transmute(mutator as unsafe extern "C-unwind" fn(*mut Node, *mut c_void) -> *mut Node);
    if (*node).type_ == NodeTag::T_Query {
        cx.stack.push(node as *mut Query);
        // join alias lists too: a merged column of a FULL JOIN … USING is COALESCE(c.reltuples, …)
        let flags = pg_sys::QTW_DONT_COPY_QUERY as i32;
        pg_sys::query_tree_mutator(node as *mut Query, Some(m), ctx, flags);
        cx.stack.pop();
        return node;
    }
    if (*node).type_ == NodeTag::T_Var {
        let v = node as *mut pg_sys::Var;
        let up = (*v).varlevelsup as usize;
        if (*v).location != MASKED && up < cx.stack.len() && (*v).varno > 0 {
            let q = cx.stack[cx.stack.len() - 1 - up];
            let rte = crate::query::tree::rt_fetch(q, (*v).varno);
            let stat = [pg_sys::Anum_pg_class_relpages, pg_sys::Anum_pg_class_reltuples, pg_sys::Anum_pg_class_relallvisible];
            if !rte.is_null()
                && (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION
                && (*rte).relid == pg_sys::RelationRelationId
                && stat.contains(&((*v).varattno as u32))
            {
                let oid = pg_sys::makeVar((*v).varno, pg_sys::Anum_pg_class_oid as i16, pg_sys::OIDOID, -1, pg_sys::InvalidOid, (*v).varlevelsup);
                let value = pg_sys::copyObjectImpl(v as *const c_void) as *mut pg_sys::Var;
                (*value).location = MASKED;
                let f = pg_sys::makeFuncExpr(
                    cx.class_stat,
                    (*v).vartype,
                    crate::pg::build::ptr_list(&[oid as *mut Node, value as *mut Node]),
                    pg_sys::InvalidOid,
                    pg_sys::InvalidOid,
                    pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
                );
                return f as *mut Node;
            }
        }
        return node;
    }
    pg_sys::expression_tree_mutator(node, Some(m), ctx)
}

/// The masked form of a size function, if `funcid` is one (same arguments).
pub unsafe fn masked_size_function(funcid: pg_sys::Oid) -> Option<pg_sys::Oid> {
    let name = pg_sys::get_func_name(funcid);
    if name.is_null() || funcid.to_u32() >= pg_sys::FirstNormalObjectId {
        return None;
    }
    let masked = match std::ffi::CStr::from_ptr(name).to_bytes() {
        b"pg_relation_size" => "masked_relation_size",
        b"pg_table_size" => "masked_table_size",
        b"pg_total_relation_size" => "masked_total_relation_size",
        b"pg_indexes_size" => "masked_indexes_size",
        b"pg_database_size" => "masked_database_size",
        b"pg_tablespace_size" => "masked_tablespace_size",
        _ => return None,
    };
    let mut types: *mut pg_sys::Oid = std::ptr::null_mut();
    let mut n = 0i32;
    pg_sys::get_func_signature(funcid, &mut types, &mut n);
    let types: Vec<pg_sys::Oid> = (0..n as usize).map(|i| *types.add(i)).collect();
    crate::pg::build::function_if_exists(Some("dp"), masked, &types)
}

/// The catalog relations whose statistics the mask covers, as a statement names them: the number of
/// `pg_class` entries in its range tables (all levels), and whether it names pg_statistic or
/// pg_statistic_ext_data.
pub unsafe fn catalog_entries(query: *mut Query) -> usize {
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walker(node: *mut Node, ctx: *mut c_void) -> bool {
        if node.is_null() || pg_sys::stack_is_too_deep() {
            return false;
        }
        match (*node).type_ {
            NodeTag::T_Query => {
                return pg_sys::query_tree_walker(node as *mut Query, Some(walker), ctx, pg_sys::QTW_EXAMINE_RTES_BEFORE as i32)
            }
            NodeTag::T_RangeTblEntry => {
                let rte = node as *mut pg_sys::RangeTblEntry;
                if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION && (*rte).relid == pg_sys::RelationRelationId {
                    *(ctx as *mut usize) += 1;
                }
                return false;
            }
            _ => {}
        }
        pg_sys::expression_tree_walker(node, Some(walker), ctx)
    }
    let mut n = 0usize;
    walker(query as *mut Node, &mut n as *mut usize as *mut c_void);
    n
}

/// After planning, for a role whose statistics are restricted: the planner inlines SQL functions
/// (`CREATE FUNCTION pg_temp.f() RETURNS SETOF pg_class LANGUAGE sql AS 'SELECT * FROM pg_class'`),
/// whose bodies the mask never saw. A plan that reads a `pg_class` entry the mask did not mark, or
/// reads pg_statistic or pg_statistic_ext_data at all, is refused.
pub unsafe fn refusal_after_planning(stmt: *mut pg_sys::PlannedStmt) -> Option<crate::pg::error::Refusal> {
    for rte in crate::pg::nodes::list_iter::<pg_sys::RangeTblEntry>((*stmt).rtable) {
        if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION {
            continue;
        }
        if (*rte).relid == pg_sys::RelationRelationId {
            if !(*rte).self_reference {
                return Some(crate::protection::statistics::refusal(
                    "pg_class read through a SQL function: the statistics of its rows would not be masked",
                ));
            }
        } else if let Some(what) = crate::protection::statistics::denied_relation((*rte).relid) {
            return Some(crate::protection::statistics::refusal(what));
        }
    }
    None
}
