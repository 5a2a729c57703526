//! The release cache's key of an admitted DP level (budget/cache.rs stores and finds releases by it).
//!
//! A release is what a level's aggregation returns: its GROUP BY keys and aggregate calls, for the
//! groups its HAVING keeps. That depends on the level's own query (FROM, WHERE, GROUP BY, HAVING,
//! the aggregate calls, after pg_dp's rewrites) and on nothing around it: a DP level that is a
//! subquery gets `LIMIT ALL` and a security barrier (grammar.rs), so no condition of an outer query
//! moves into it, and it is never run with an outer row's parameters. So the key is the level's
//! analysed text *without* what only post-processes the released rows:
//! - its own ORDER BY, LIMIT/OFFSET, FETCH … WITH TIES and DISTINCT (they run above the release),
//! - output names and table aliases, whether a query sets the command tag, query ids,
//! - ORDER BY expressions that release nothing (a resjunk entry with no aggregate call),
//! - the numbering of sort/group references (the parser numbers ORDER BY items first; GROUPING SETS,
//!   ROLLUP, CUBE and GROUPING() name keys by it), and the sort direction a GROUP BY borrows from a
//!   matching ORDER BY item (its equality is what groups),
//! - the statement-wide numbers of pg_dp's tags (renumbered within the level).
//!
//! The same release under another ORDER BY, LIMIT, alias, outer aggregate, join or BI tool wrapper
//! has the same key. The planner is told that a level's rows come in no order (planner.rs), so a
//! replayed release in another order than the aggregation produced is read correctly.
//!
//! Also from here: a canonical name for each aggregate call (by tag) and GROUP BY key (by
//! sort/group reference), which name the columns of a stored release (release.rs), and the
//! relations the level reads, whose version counters it is stored at.
//!
//! A level that reads a WITH query of an enclosing statement is keyed with the whole statement's
//! text (its WITH query is not part of the level's own).
use crate::pg::build::copy;
use crate::pg::nodes::list_iter;
use pg_dp_core::description::is_tag;
use pgrx::pg_sys::{self, Node, NodeTag, Oid, Query, RangeTblEntry};
use std::collections::HashMap;
use std::ffi::c_void;

/// What the release cache needs to know of one admitted level.
pub struct LevelKey {
    /// the level's text form, normalized as above
    pub text: String,
    /// tag of an aggregate call → its canonical number within the level
    pub tags: HashMap<i32, usize>,
    /// sort/group reference of a GROUP BY key → its canonical number (its place in GROUP BY)
    pub refs: HashMap<u32, usize>,
    /// the relations the level reads (its own range tables and those of its subqueries)
    pub relids: Vec<Oid>,
}

/// The keys of a statement's DP levels, in order; None for a level whose releases may not be cached
/// (row security applies somewhere in the statement, or the level's HAVING calls a function whose
/// value may change while the relations it reads do not).
pub unsafe fn level_keys(statement: *mut Query, levels: &[*mut Query]) -> Vec<Option<LevelKey>> {
    let mut stmt_walk = Walk::default();
    walk_query(statement, &mut stmt_walk);
    if stmt_walk.row_security {
        return levels.iter().map(|_| None).collect();
    }
    levels.iter().map(|l| level_key(statement, &stmt_walk, *l)).collect()
}

/// The key of `level`, a DP level of `statement` (walked as `stmt_walk`).
unsafe fn level_key(statement: *mut Query, stmt_walk: &Walk, level: *mut Query) -> Option<LevelKey> {
    if !having_is_pure((*level).havingQual) {
        return None;
    }
    let q = copy(level);
    let mut w = Walk::default();
    walk_query(q, &mut w);
    let aggrefs = select_and_having(q, NodeTag::T_Aggref);
    let tags = canonical_tags(&aggrefs);
    let refs = group_refs(q);
    normalize(q, &refs);
    renumber_interval_tags(&aggrefs, &tags);
    let mut text = text_without_locations(q.cast());
    let mut relids = w.relids;
    if w.outer_cte {
        // the level reads a WITH query of an enclosing statement: keyed with the whole statement
        text.push('\n');
        text.push_str(&text_without_locations(statement.cast()));
        relids = stmt_walk.relids.clone();
    }
    relids.sort_unstable_by_key(|r| r.to_u32());
    relids.dedup();
    Some(LevelKey { text, tags, refs, relids })
}

#[derive(Default)]
struct Walk {
    depth: u32,
    relids: Vec<Oid>,
    row_security: bool,
    /// a WITH query of a query outside the walked one is read
    outer_cte: bool,
}

unsafe fn walk_query(q: *mut Query, w: &mut Walk) {
    walker(q.cast(), w as *mut Walk as *mut c_void);
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn walker(node: *mut Node, ctx: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    let w = &mut *(ctx as *mut Walk);
    match (*node).type_ {
        NodeTag::T_Query => {
            let q = node as *mut Query;
            w.row_security |= (*q).hasRowSecurity;
            w.depth += 1;
            let flags = (pg_sys::QTW_EXAMINE_RTES_BEFORE | pg_sys::QTW_IGNORE_JOINALIASES) as i32;
            let r = pg_sys::query_tree_walker(q, Some(walker), ctx, flags);
            w.depth -= 1;
            return r;
        }
        NodeTag::T_RangeTblEntry => {
            let rte = node as *mut RangeTblEntry;
            match (*rte).rtekind {
                pg_sys::RTEKind::RTE_RELATION => w.relids.push((*rte).relid),
                // depth counts the walked query itself: a reference that leaves it is outer
                pg_sys::RTEKind::RTE_CTE if (*rte).ctelevelsup as u32 + 1 > w.depth => w.outer_cte = true,
                _ => {}
            }
            return false;
        }
        _ => {}
    }
    pg_sys::expression_tree_walker(node, Some(walker), ctx)
}

/// Whether a level's HAVING, which decides which groups are released (and stored) before anything
/// above the level runs, depends on nothing but the released values and the relations it reads
/// itself: every function it calls above the aggregates (in its subqueries too) is a built-in
/// immutable one or pg_dp's own. A user-defined or a stable function may read tables the key does
/// not know of, or the role or the clock (`HAVING allowed(k)`, where `allowed` reads
/// `current_user`): such a level is never cached.
unsafe fn having_is_pure(having: *mut Node) -> bool {
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn impure(oid: Oid, _ctx: *mut c_void) -> bool {
        let builtin = oid.to_u32() < pg_sys::FirstNormalObjectId && pg_sys::func_volatile(oid) == pg_sys::PROVOLATILE_IMMUTABLE as std::ffi::c_char;
        !builtin && !crate::catalog::functions::of_pg_dp(oid)
    }
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walker(node: *mut Node, ctx: *mut c_void) -> bool {
        if node.is_null() {
            return false;
        }
        if pg_sys::stack_is_too_deep() {
            return true;
        }
        match (*node).type_ {
            NodeTag::T_Query => return pg_sys::query_tree_walker(node as *mut Query, Some(walker), ctx, 0),
            NodeTag::T_SQLValueFunction | NodeTag::T_NextValueExpr | NodeTag::T_CurrentOfExpr => return true,
            // an aggregate's input is below the level, held to the grammar's total functions
            NodeTag::T_Aggref => return impure((*(node as *mut pg_sys::Aggref)).aggfnoid, ctx),
            _ => {}
        }
        if pg_sys::check_functions_in_node(node, Some(impure), ctx) {
            return true;
        }
        pg_sys::expression_tree_walker(node, Some(walker), ctx)
    }
    !walker(having, std::ptr::null_mut())
}

/// The tags of the level's aggregate calls in order of first appearance (select list, then HAVING).
unsafe fn canonical_tags(aggrefs: &[*mut Node]) -> HashMap<i32, usize> {
    let mut tags = HashMap::new();
    for a in aggrefs {
        let t = (*(*a as *mut pg_sys::Aggref)).location;
        if is_tag(t) && !tags.contains_key(&t) {
            tags.insert(t, tags.len());
        }
    }
    tags
}

/// The nodes of one kind in a level's select list, then its HAVING (not in its subqueries).
unsafe fn select_and_having(q: *mut Query, tag: NodeTag) -> Vec<*mut Node> {
    let mut found = Vec::new();
    for te in list_iter::<pg_sys::TargetEntry>((*q).targetList) {
        level_nodes((*te).expr.cast(), tag, &mut found);
    }
    level_nodes((*q).havingQual, tag, &mut found);
    found
}

/// The nodes of one kind in an expression's own level (not in its subqueries).
unsafe fn level_nodes(e: *mut Node, tag: NodeTag, out: &mut Vec<*mut Node>) {
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn w(node: *mut Node, ctx: *mut c_void) -> bool {
        if node.is_null() || (*node).type_ == NodeTag::T_Query {
            return false;
        }
        let (tag, out) = &mut *(ctx as *mut (NodeTag, &mut Vec<*mut Node>));
        if (*node).type_ == *tag {
            out.push(node);
        }
        pg_sys::expression_tree_walker(node, Some(w), ctx)
    }
    let mut ctx = (tag, out);
    w(e, &mut ctx as *mut (NodeTag, &mut Vec<*mut Node>) as *mut c_void);
}

/// GROUP BY keys' references, numbered in GROUP BY order (for GROUPING SETS, ROLLUP and CUBE, the
/// order of the distinct columns they group by).
unsafe fn group_refs(q: *mut Query) -> HashMap<u32, usize> {
    let mut refs = HashMap::new();
    for sgc in list_iter::<pg_sys::SortGroupClause>((*q).groupClause) {
        let r = (*sgc).tleSortGroupRef;
        if !refs.contains_key(&r) {
            refs.insert(r, refs.len() + 1);
        }
    }
    refs
}

/// An integer list of sort/group references, renumbered (a reference that is not a GROUP BY key's
/// becomes 0, which none is).
unsafe fn renumber_ints(list: *mut pg_sys::List, refs: &HashMap<u32, usize>) {
    for i in 0..crate::pg::nodes::list_len(list) {
        let cell = (*list).elements.add(i);
        (*cell).int_value = refs.get(&((*cell).int_value as u32)).map_or(0, |n| *n as i32);
    }
}

/// The references in GROUPING SETS, ROLLUP and CUBE (nested sets of integer lists), renumbered.
unsafe fn renumber_sets(list: *mut pg_sys::List, refs: &HashMap<u32, usize>) {
    if list.is_null() {
        return;
    }
    if (*list).type_ == NodeTag::T_IntList {
        renumber_ints(list, refs);
        return;
    }
    for n in list_iter::<Node>(list) {
        if !n.is_null() && (*n).type_ == NodeTag::T_GroupingSet {
            renumber_sets((*(n as *mut pg_sys::GroupingSet)).content, refs);
        }
    }
}

/// Removes from a copy of a level what only post-processes its released rows (see the top).
unsafe fn normalize(q: *mut Query, refs: &HashMap<u32, usize>) {
    (*q).sortClause = std::ptr::null_mut();
    (*q).limitCount = std::ptr::null_mut();
    (*q).limitOffset = std::ptr::null_mut();
    (*q).limitOption = pg_sys::LimitOption::LIMIT_OPTION_COUNT;
    (*q).distinctClause = std::ptr::null_mut();
    (*q).hasDistinctOn = false;
    let mut tlist: *mut pg_sys::List = std::ptr::null_mut();
    let mut resno = 0;
    for te in list_iter::<pg_sys::TargetEntry>((*q).targetList) {
        let grouped = refs.contains_key(&(*te).ressortgroupref);
        if (*te).resjunk && !grouped {
            let mut aggs = Vec::new();
            level_nodes((*te).expr.cast(), NodeTag::T_Aggref, &mut aggs);
            if aggs.is_empty() {
                continue;
            }
        }
        resno += 1;
        (*te).resno = resno;
        (*te).resname = std::ptr::null_mut();
        (*te).ressortgroupref = refs.get(&(*te).ressortgroupref).map_or(0, |n| *n as u32);
        tlist = pg_sys::lappend(tlist, te.cast());
    }
    (*q).targetList = tlist;
    for sgc in list_iter::<pg_sys::SortGroupClause>((*q).groupClause) {
        (*sgc).tleSortGroupRef = refs.get(&(*sgc).tleSortGroupRef).map_or(0, |n| *n as u32);
        (*sgc).sortop = pg_sys::InvalidOid;
        (*sgc).nulls_first = false;
    }
    renumber_sets((*q).groupingSets, refs);
    for g in select_and_having(q, NodeTag::T_GroupingFunc) {
        renumber_ints((*(g as *mut pg_sys::GroupingFunc)).refs, refs);
        (*(g as *mut pg_sys::GroupingFunc)).cols = std::ptr::null_mut();
    }
    // aliases name things; they change nothing that is computed
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn unalias(node: *mut Node, ctx: *mut c_void) -> bool {
        if node.is_null() {
            return false;
        }
        match (*node).type_ {
            NodeTag::T_Query => {
                // whether a query sets the command tag, and its id, depend on where it is written
                let q = node as *mut Query;
                (*q).canSetTag = true;
                (*q).queryId = 0;
                let flags = (pg_sys::QTW_EXAMINE_RTES_BEFORE | pg_sys::QTW_IGNORE_JOINALIASES) as i32;
                return pg_sys::query_tree_walker(q, Some(unalias), ctx, flags);
            }
            NodeTag::T_RangeTblEntry => {
                let rte = node as *mut RangeTblEntry;
                (*rte).alias = std::ptr::null_mut();
                (*rte).eref = std::ptr::null_mut();
                return false;
            }
            _ => {}
        }
        pg_sys::expression_tree_walker(node, Some(unalias), ctx)
    }
    unalias(q.cast(), std::ptr::null_mut());
}

/// `dp.interval_half_width(tag)` names its call by the statement-wide tag: renumbered as the tags.
unsafe fn renumber_interval_tags(aggrefs: &[*mut Node], tags: &HashMap<i32, usize>) {
    for a in aggrefs {
        let a = *a as *mut pg_sys::Aggref;
        let Some(n) = crate::query::intervals::tag_argument(a).and_then(|t| tags.get(&t)) else { continue };
        let te = list_iter::<pg_sys::TargetEntry>((*a).args).next().expect("a tag argument");
        (*((*te).expr as *mut pg_sys::Const)).constvalue = pg_sys::Datum::from(*n as i32);
    }
}

/// A node's text form without the positions of its tokens in the query string (so that layout, or
/// a `DECLARE … CURSOR FOR` around it, does not matter) and without pg_dp's tags (kept in the
/// positions of aggregate calls).
pub unsafe fn text_without_locations(node: *mut Node) -> String {
    let text = pg_sys::nodeToString(node.cast());
    let s = std::ffi::CStr::from_ptr(text).to_string_lossy();
    let mut out = String::with_capacity(s.len());
    let mut rest: &str = &s;
    while let Some(i) = rest.find(" :") {
        out.push_str(&rest[..i]);
        let field = &rest[i + 2..];
        let name_end = field.find(' ').unwrap_or(field.len());
        let name = &field[..name_end];
        if matches!(name, "location" | "stmt_location" | "stmt_len") {
            let value = field[name_end..].trim_start();
            let skip = value.find(|c: char| !(c == '-' || c.is_ascii_digit())).unwrap_or(value.len());
            rest = &value[skip..];
        } else {
            out.push_str(" :");
            rest = field;
        }
    }
    out.push_str(rest);
    pg_sys::pfree(text.cast());
    out
}
