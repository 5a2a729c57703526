//! Reading analysed query trees: range-table entries, plain columns through join aliases and
//! subqueries, names, conjuncts, GROUP BY keys, and whether an expression aggregates at its level;
//! and what the catalog says of a column's type and of an equality operator. Shared by the grammar
//! and every rewrite of an admitted level.
use crate::pg::error::{Check, Refusal};
use crate::pg::nodes::list_iter;
use pgrx::pg_sys::{self, Node, NodeTag, Oid, Query, RangeTblEntry};
use std::ffi::{c_void, CStr};
use crate::pg::build::tle;
use crate::pg::build::copy;

pub unsafe fn attname(relid: Oid, attno: i16) -> String {
    let n = pg_sys::get_attname(relid, attno, true);
    if n.is_null() {
        format!("column {attno}")
    } else {
        CStr::from_ptr(n).to_string_lossy().into_owned()
    }
}

/// The type and collation of column `attnum` of `relid`.
pub unsafe fn column_type_collation(relid: Oid, attnum: i16) -> (Oid, Oid) {
    let (mut typ, mut typmod, mut coll) = (pg_sys::InvalidOid, -1, pg_sys::InvalidOid);
    pg_sys::get_atttypetypmodcoll(relid, attnum, &mut typ, &mut typmod, &mut coll);
    (typ, coll)
}

/// Whether operator `opno` and its function are built in and the function is immutable (an operator
/// that reads a setting, as timestamp = timestamptz reads TimeZone, is not).
pub unsafe fn builtin_immutable_operator(opno: Oid) -> bool {
    let builtin = |o: Oid| o.to_u32() < pg_sys::FirstNormalObjectId;
    let func = pg_sys::get_opcode(opno);
    builtin(opno) && builtin(func) && pg_sys::func_volatile(func) == pg_sys::PROVOLATILE_IMMUTABLE as std::ffi::c_char
}

/// Whether `opno` is the equality of the default B-tree operator family of type `typ`, a built-in
/// family: the equality that tells the type's values apart.
pub unsafe fn type_equality(typ: Oid, opno: Oid) -> bool {
    let opclass = pg_sys::GetDefaultOpClass(typ, pg_sys::BTREE_AM_OID);
    if opclass == pg_sys::InvalidOid {
        return false;
    }
    let family = pg_sys::get_opclass_family(opclass);
    family.to_u32() < pg_sys::FirstNormalObjectId && pg_sys::get_op_opfamily_strategy(opno, family) == pg_sys::BTEqualStrategyNumber as i32
}

pub unsafe fn func_signature(funcid: Oid) -> String {
    let p = pg_sys::format_procedure(funcid);
    if p.is_null() {
        func_name(funcid)
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

pub unsafe fn func_name(funcid: Oid) -> String {
    let n = pg_sys::get_func_name(funcid);
    if n.is_null() {
        "an aggregate".into()
    } else {
        CStr::from_ptr(n).to_string_lossy().into_owned()
    }
}

/// Whether a condition holds an aggregate (or GROUPING) of its own query level.
pub unsafe fn has_level_aggregate(e: *mut Node) -> Check<bool> {
    struct Walk {
        depth: u32,
        too_deep: bool,
    }
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walker(node: *mut Node, ctx: *mut c_void) -> bool {
        if node.is_null() {
            return false;
        }
        let w = &mut *(ctx as *mut Walk);
        if pg_sys::stack_is_too_deep() {
            w.too_deep = true;
            return true;
        }
        let depth = &mut w.depth;
        match (*node).type_ {
            NodeTag::T_Query => {
                *depth += 1;
                let r = pg_sys::query_tree_walker(node as *mut Query, Some(walker), ctx, 0);
                *depth -= 1;
                return r;
            }
            NodeTag::T_Aggref if (*(node as *mut pg_sys::Aggref)).agglevelsup == *depth => return true,
            NodeTag::T_GroupingFunc if (*(node as *mut pg_sys::GroupingFunc)).agglevelsup == *depth => return true,
            _ => {}
        }
        pg_sys::expression_tree_walker(node, Some(walker), ctx)
    }
    let mut w = Walk { depth: 0, too_deep: false };
    let found = walker(e, &mut w as *mut Walk as *mut c_void);
    if w.too_deep {
        return Err(Refusal::too_deep());
    }
    Ok(found)
}

/// The range-table entry `index` (1-based) of a query, or null.
pub unsafe fn rt_fetch(q: *mut Query, index: i32) -> *mut RangeTblEntry {
    rt_fetch_list((*q).rtable, index)
}

/// The range-table entry `index` (1-based) of a range table, or null.
pub unsafe fn rt_fetch_list(rt: *mut pg_sys::List, index: i32) -> *mut RangeTblEntry {
    if index < 1 || rt.is_null() || index > (*rt).length {
        return std::ptr::null_mut();
    }
    pg_sys::list_nth(rt, index - 1) as *mut RangeTblEntry
}

pub unsafe fn split_and(n: *mut Node, out: &mut Vec<*mut Node>) {
    if n.is_null() {
        return;
    }
    if (*n).type_ == NodeTag::T_BoolExpr && (*(n as *mut pg_sys::BoolExpr)).boolop == pg_sys::BoolExprType::AND_EXPR {
        for a in list_iter::<Node>((*(n as *mut pg_sys::BoolExpr)).args) {
            split_and(a, out);
        }
    } else if (*n).type_ == NodeTag::T_List {
        for a in list_iter::<Node>(n as *mut pg_sys::List) {
            split_and(a, out);
        }
    } else {
        out.push(n);
    }
}

/// The table column an aggregated value is, unchanged: through join aliases, subqueries in FROM and
/// views (binary-compatible relabelling only). None for any other expression.
pub unsafe fn value_column(q: *mut Query, e: *mut Node) -> Option<(Oid, i16)> {
    let mut q = q;
    let mut e = e;
    for _ in 0..32 {
        let (idx, att) = resolve_var(q, e)?;
        let rte = rt_fetch(q, idx);
        match (*rte).rtekind {
            pg_sys::RTEKind::RTE_RELATION if att > 0 => return Some(((*rte).relid, att)),
            pg_sys::RTEKind::RTE_SUBQUERY if att > 0 => {
                let sq = (*rte).subquery;
                let te = list_iter::<pg_sys::TargetEntry>((*sq).targetList).nth(att as usize - 1)?;
                q = sq;
                e = (*te).expr as *mut Node;
            }
            _ => return None,
        }
    }
    None
}

/// (range-table index, attribute) of a plain column of `q`, through relabelling casts and join
/// aliases.
pub unsafe fn resolve_var(q: *mut Query, mut e: *mut Node) -> Option<(i32, i16)> {
    for _ in 0..64 {
        match (*e).type_ {
            NodeTag::T_RelabelType => e = (*(e as *mut pg_sys::RelabelType)).arg as *mut Node,
            NodeTag::T_Var => {
                let v = e as *mut pg_sys::Var;
                if (*v).varlevelsup != 0 {
                    return None;
                }
                let rte = rt_fetch(q, (*v).varno);
                if rte.is_null() {
                    return None;
                }
                if (*rte).rtekind == pg_sys::RTEKind::RTE_JOIN {
                    let att = (*v).varattno;
                    if att < 1 {
                        return None;
                    }
                    e = list_iter::<Node>((*rte).joinaliasvars).nth(att as usize - 1)?;
                    continue;
                }
                return Some(((*v).varno, (*v).varattno));
            }
            _ => return None,
        }
    }
    None
}

/// PostgreSQL matched the select list and HAVING against the GROUP BY keys with join aliases
/// flattened; so do the rewrites of a level (a column of a join would otherwise keep its old meaning).
pub unsafe fn flatten_join_aliases(q: *mut Query) {
    if list_iter::<RangeTblEntry>((*q).rtable).any(|r| (*r).rtekind == pg_sys::RTEKind::RTE_JOIN) {
        (*q).targetList = pg_sys::flatten_join_alias_vars(q, (*q).targetList as *mut Node) as *mut pg_sys::List;
        (*q).havingQual = pg_sys::flatten_join_alias_vars(q, (*q).havingQual);
    }
}

/// The GROUP BY keys of a level: each key's expression (its select-list entry) and its clause.
pub unsafe fn group_keys(q: *mut Query) -> Vec<(*mut Node, *mut pg_sys::SortGroupClause)> {
    list_iter::<pg_sys::SortGroupClause>((*q).groupClause)
        .filter_map(|sgc| {
            list_iter::<pg_sys::TargetEntry>((*q).targetList)
                .find(|t| (**t).ressortgroupref == (*sgc).tleSortGroupRef)
                .map(|t| ((*t).expr as *mut Node, sgc))
        })
        .collect()
}

/// The GROUP BY keys of a level as the first columns of a query that groups by them: their target
/// entries (`dp_key1`, …) and sort/group clauses, numbered from 1.
pub unsafe fn keys_as_first_columns(
    keys: &[(*mut Node, *mut pg_sys::SortGroupClause)],
) -> (Vec<*mut pg_sys::TargetEntry>, Vec<*mut pg_sys::SortGroupClause>) {
    let mut tles = Vec::new();
    let mut group = Vec::new();
    for (i, (e, sgc)) in keys.iter().enumerate() {
        tles.push(tle(copy(*e), i + 1, &format!("dp_key{}", i + 1), (i + 1) as u32, false));
        let g = copy(*sgc);
        (*g).tleSortGroupRef = (i + 1) as u32;
        group.push(g);
    }
    (tles, group)
}

/// Leaves only FROM, WHERE, GROUP BY and the select list of a copy of a level: what the level does
/// with its aggregates (ORDER BY, DISTINCT, LIMIT, window functions, set-returning functions, grouping
/// sets) stays with the level, and so do its WITH queries (a data-modifying one must run once).
pub unsafe fn only_rows_and_aggregation(q: *mut Query) {
    (*q).sortClause = std::ptr::null_mut();
    (*q).distinctClause = std::ptr::null_mut();
    (*q).hasDistinctOn = false;
    (*q).limitCount = std::ptr::null_mut();
    (*q).limitOffset = std::ptr::null_mut();
    (*q).windowClause = std::ptr::null_mut();
    (*q).hasWindowFuncs = false;
    (*q).hasTargetSRFs = false;
    (*q).groupingSets = std::ptr::null_mut();
    (*q).constraintDeps = std::ptr::null_mut();
    (*q).rowMarks = std::ptr::null_mut();
    (*q).cteList = std::ptr::null_mut();
    (*q).hasModifyingCTE = false;
    (*q).hasRecursive = false;
}

/// The GROUP BY keys of a level that are plain columns of a table (through nested row sources).
pub unsafe fn key_columns(q: *mut Query) -> Vec<(u32, i16)> {
    let mut out = Vec::new();
    for (e, _) in crate::query::tree::group_keys(q) {
        // as the planner will see it: constant conditions folded (CASE WHEN 'a' ILIKE 'b' THEN x
        // ELSE x END is x), relabelling casts removed
        let mut e = pg_sys::eval_const_expressions(std::ptr::null_mut(), pg_sys::copyObjectImpl(e as *const c_void) as *mut Node);
        while !e.is_null() && (*e).type_ == NodeTag::T_RelabelType {
            e = (*(e as *mut pg_sys::RelabelType)).arg as *mut Node;
        }
        let mut query = q;
        for _ in 0..8 {
            if e.is_null() || (*e).type_ != NodeTag::T_Var || (*(e as *mut pg_sys::Var)).varlevelsup != 0 {
                break;
            }
            let v = e as *mut pg_sys::Var;
            let rte = rt_fetch(query, (*v).varno);
            if rte.is_null() {
                break;
            }
            if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION {
                out.push(((*rte).relid.to_u32(), (*v).varattno));
                break;
            }
            if (*rte).rtekind != pg_sys::RTEKind::RTE_SUBQUERY || (*rte).subquery.is_null() {
                break;
            }
            query = (*rte).subquery;
            let tle = list_iter::<pg_sys::TargetEntry>((*query).targetList).find(|t| (**t).resno == (*v).varattno);
            e = tle.map_or(std::ptr::null_mut(), |t| (*t).expr as *mut Node);
        }
    }
    out
}
