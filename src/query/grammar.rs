//! The DP query grammar: an allowlist over the analysed query tree, checked before planning.
//!
//! Every statement is checked by the planner hook (`planner.rs`) on its analysed and rewritten query
//! tree (views expanded, row security applied), before the planner runs, so that nothing the planner
//! computes from statistics or data can change the outcome. A refusal depends only on the query
//! text, the bind parameters' presence, the catalog and the role. Messages never repeat a value
//! the caller did not type.
//!
//! Terms. A *DP level* is a query level (`SELECT … FROM …`, at any depth) whose select list or
//! HAVING holds a pg_dp aggregate. Its *input* is everything below those aggregates: FROM, WHERE,
//! GROUP BY, the aggregated values and FILTER clauses. Everything else (the select list and HAVING
//! around the aggregates, ORDER BY, LIMIT, DISTINCT, window functions over the results, outer
//! queries, unions and joins of DP results) only post-processes released values.
//!
//! ```text
//! statement    := any query, where
//!                 - every pg_dp aggregate belongs to a dp_level, and is not used as a window function;
//!                 - every read of a protected table is the source of a dp_level, unless the role is
//!                   exempt (superuser, owner, trusted); protected tables are never written to by
//!                   roles that are not exempt;
//!                 - roles that are not trusted do not read statistics of the data (statistics.rs)
//!                   in a database with protected tables.
//! dp_level     := SELECT <anything over group keys and pg_dp aggregates>
//!                 FROM from_clause [WHERE predicate] [GROUP BY value, … | GROUPING SETS …]
//!                 [HAVING …] [ORDER BY …] [LIMIT …]
//!                 with: no other aggregate over a protected source, no reference to an outer query
//!                 (not correlated, not LATERAL), no FOR UPDATE.
//! dp_aggregate := dp_*(value, param, …) [FILTER (WHERE predicate)]   (no DISTINCT, no ORDER BY)
//! from_clause  := source {[INNER | LEFT] JOIN public_table ON predicate | , public_table}
//!                 where the source is the one protected item if there is one, and every
//!                 public_table is matched many-to-one: the ON or WHERE conditions equate, for all
//!                 columns of a valid, immediate, non-partial unique index of public_table, its column
//!                 with a column of a table already joined (btree equality of the index's operator
//!                 family, deterministic collation). RIGHT JOIN mirrors LEFT; FULL JOIN is refused.
//!               | source {[INNER] JOIN protected_table ON unit_link | , protected_table} …
//!                 protected tables that all declare a privacy unit, each read directly and joined
//!                 by an inner join to one already joined through a top-level equality of their
//!                 units (`unit_link`): both unit columns naming the same column through their
//!                 foreign keys, or a unit column and the column its foreign key references. Every
//!                 joined row then belongs to one person, and the per-unit rewrite bounds that person
//!                 across all of their joined rows (docs/privacy/privacy-units.md, "Joins").
//! source       := table | ( row_source ) | view over a row_source
//! table        := a plain table (read with ONLY if it has inheritance children), a partitioned
//!                 table read as a whole, or a materialized view; no TABLESAMPLE
//! row_source   := SELECT value, … FROM from_clause [WHERE predicate] [ORDER BY …]
//!                 (no aggregate, GROUP BY, HAVING, window function, DISTINCT, LIMIT, OFFSET, set
//!                 operation, WITH, FOR UPDATE, set-returning function)
//! predicate    := predicate AND/OR predicate | NOT predicate | value cmp value
//!               | value [NOT] IN (value, …) | value cmp ANY (array) | value [NOT] BETWEEN …
//!               | value IS [NOT] [DISTINCT FROM value | NULL | TRUE | FALSE | UNKNOWN]
//!               | text [NOT] [I]LIKE 'literal pattern' | boolean value
//! value        := column | literal | $n | total cast (value) | value / k | value % k
//!               | CASE … END | COALESCE(…) | GREATEST(…) | LEAST(…) | NULLIF(…) | predicate
//! param        := literal | $n, possibly cast or negated (ε, δ, p and bounds)
//! ```
//! `cmp` and the casts are the total operators and casts of `total.rs`; `k` is an integer literal
//! (not 0, and not -1 for `/`). Columns are user columns (no system columns or whole-row
//! references) of the tables in the level's FROM, through views and joins. A constant expression
//! (no column, subquery or aggregate; immutable built-in functions only) is admitted anywhere in
//! the input: whatever error it could raise depends on the query text, not on the data.
//!
//! Why each rule: every input row must come from exactly one row of one table, so that adding or
//! removing one person adds or removes at most one input row (window functions, subqueries, LIMIT,
//! DISTINCT, set operations, set-returning functions, self-joins and joins that are not many-to-one
//! all break this; with privacy units the rule is per person rather than per row, so joins on the
//! unit keep it); and nothing in the input may raise an error for any stored value, since an
//! error is an answer that the budget does not pay for.
use crate::catalog::functions::{kind_of, Kind};
use crate::pg::nodes::list_iter;
use crate::catalog::protect;
use crate::protection::statistics;
use crate::query::total;
use pg_dp_core::description::{tag, DpAggregate, DpLevel, KeyRelease, ParamSource, PublicJoin, Relation};
use pgrx::pg_sys::{self, Node, NodeTag, Oid, Query, RangeTblEntry};
use std::collections::HashSet;
use std::ffi::{c_void, CStr};
use crate::pg::error::Refusal;
use crate::pg::error::Check;
use crate::query::tree::rt_fetch;
use crate::query::tree::resolve_var;
use crate::query::tree::split_and;
use crate::query::tree::has_level_aggregate;
use crate::query::tree::func_name;
use crate::query::tree::func_signature;
use crate::query::tree::attname;
use crate::query::tree::value_column;

/// A statement the grammar admitted, with the DP levels it holds.
pub struct Admitted {
    pub levels: Vec<DpLevel>,
    /// Protected tables read as the source of an admitted level: pg_dp admits these reads itself,
    /// so the role needs no SELECT privilege on them.
    pub waived: Vec<*mut RangeTblEntry>,
    /// The statement reads a protected table (admitted, or by an exempt role).
    pub reads_protected: bool,
    /// It reads a protected table for a role that may read it only through DP queries: planned
    /// without the data's statistics (execution/estimates.rs).
    pub restricted: bool,
    /// A DP level holds a constant read from the clock (clock.rs): the plan is valid in one
    /// transaction only.
    pub clock: bool,
    /// The query of each level, in the order of `levels` (after pg_dp's rewrites, before planning).
    pub queries: Vec<*mut Query>,
}

// ----- collecting what a statement contains -------------------------------------------------

struct AggAt {
    level: *mut Query,
    aggref: *mut pg_sys::Aggref,
    kind: Option<Kind>,
}

struct RelAt {
    query: *mut Query,
    rte: *mut RangeTblEntry,
}

struct Collect {
    stack: Vec<*mut Query>,
    aggs: Vec<AggAt>,
    rels: Vec<RelAt>,
    /// subquery → the range-table entry that holds it (subqueries in FROM, views, set operations)
    subquery_rtes: Vec<(*mut Query, *mut RangeTblEntry)>,
    /// WITH queries
    ctes: Vec<*mut pg_sys::CommonTableExpr>,
    refusal: Option<Refusal>,
    /// check the statistics rules (the role is restricted in this database)
    statistics: bool,
    /// collations of every expression of the statement, loaded if it holds a DP level
    collations: Vec<Oid>,
    /// an UPDATE, DELETE or MERGE, or a row lock, somewhere in the statement
    rechecks: Option<&'static str>,
}

impl Collect {
    fn refuse(&mut self, r: Refusal) -> bool {
        if self.refusal.is_none() {
            self.refusal = Some(r);
        }
        true
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn collect_walker(node: *mut Node, ctx: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    let c = &mut *(ctx as *mut Collect);
    if pg_sys::stack_is_too_deep() {
        return c.refuse(Refusal::too_deep());
    }
    note_collations(c, node);
    match (*node).type_ {
        NodeTag::T_Query => {
            let q = node as *mut Query;
            if c.rechecks.is_none() {
                c.rechecks = match (*q).commandType {
                    pg_sys::CmdType::CMD_UPDATE => Some("UPDATE"),
                    pg_sys::CmdType::CMD_DELETE => Some("DELETE"),
                    pg_sys::CmdType::CMD_MERGE => Some("MERGE"),
                    _ if !(*q).rowMarks.is_null() => Some("FOR UPDATE or FOR SHARE"),
                    _ => None,
                };
            }
            c.stack.push(q);
            // join alias lists name every column of the joined tables, used or not: columns are
            // checked where the query uses them
            let flags = (pg_sys::QTW_EXAMINE_RTES_BEFORE | pg_sys::QTW_IGNORE_JOINALIASES) as i32;
            let r = pg_sys::query_tree_walker(q, Some(collect_walker), ctx, flags);
            c.stack.pop();
            return r;
        }
        NodeTag::T_RangeTblEntry => {
            let rte = node as *mut RangeTblEntry;
            if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION {
                let query = *c.stack.last().expect("an RTE belongs to a query");
                if c.statistics {
                    if let Some(what) = statistics::denied_relation((*rte).relid) {
                        return c.refuse(statistics::refusal(what));
                    }
                }
                c.rels.push(RelAt { query, rte });
            } else if (*rte).rtekind == pg_sys::RTEKind::RTE_SUBQUERY {
                c.subquery_rtes.push(((*rte).subquery, rte));
            }
            return false; // the walker goes on into the RTE's contents
        }
        NodeTag::T_Aggref => {
            let a = node as *mut pg_sys::Aggref;
            if crate::query::distributed_level::is_internal((*a).aggfnoid) {
                return c.refuse(crate::query::distributed_level::internal_refusal((*a).aggfnoid));
            }
            let kind = kind_of((*a).aggfnoid, crate::catalog::functions::first_arg_type(a));
            let up = (*a).agglevelsup as usize;
            if up >= c.stack.len() {
                return c.refuse(Refusal::new("aggregate refers to a query level that does not exist"));
            }
            if let Some(k) = kind {
                if up > 0 {
                    return c.refuse(
                        Refusal::new(format!("{} inside a subquery aggregates columns of an outer query", k.func()))
                            .hint("call the DP aggregate at the level of the table it reads"),
                    );
                }
            }
            let level = c.stack[c.stack.len() - 1 - up];
            c.aggs.push(AggAt { level, aggref: a, kind });
        }
        NodeTag::T_WindowFunc => {
            let w = node as *mut pg_sys::WindowFunc;
            let first = list_iter::<Node>((*w).args).next().map_or(pg_sys::InvalidOid, |n| pg_sys::exprType(n));
            if let Some(k) = kind_of((*w).winfnoid, first) {
                return c.refuse(
                    Refusal::new(format!("{} cannot be used as a window function", k.func()))
                        .hint("each window frame would be a separate release; aggregate in a subquery instead"),
                );
            }
        }
        NodeTag::T_FuncExpr => {
            let f = (*(node as *mut pg_sys::FuncExpr)).funcid;
            if crate::query::distributed_level::is_internal(f) {
                return c.refuse(crate::query::distributed_level::internal_refusal(f));
            }
            if c.statistics {
                if let Some(masked) = crate::query::statistics_mask::masked_size_function(f) {
                    // a size: NULL for relations with protected data (statistics_mask.rs)
                    (*(node as *mut pg_sys::FuncExpr)).funcid = masked;
                } else if let Some(what) = statistics::denied_function(f) {
                    return c.refuse(statistics::refusal(&what));
                }
            }
        }
        NodeTag::T_CommonTableExpr => c.ctes.push(node as *mut pg_sys::CommonTableExpr),
        NodeTag::T_Var if c.statistics && (*(node as *mut pg_sys::Var)).location != crate::query::statistics_mask::MASKED => {
            let v = node as *mut pg_sys::Var;
            let up = (*v).varlevelsup as usize;
            if up < c.stack.len() && (*v).varno > 0 {
                let q = c.stack[c.stack.len() - 1 - up];
                if let Some((rte, att)) = base_column(q, (*v).varno, (*v).varattno) {
                    if let Some(what) = statistics::denied_column((*rte).relid, att) {
                        return c.refuse(statistics::refusal(what));
                    }
                }
            }
        }
        _ => {}
    }
    pg_sys::expression_tree_walker(node, Some(collect_walker), ctx)
}

/// The table and attribute a column of `q` reads, through join aliases: None for columns of
/// subqueries and functions.
unsafe fn base_column(q: *mut Query, varno: i32, attno: i16) -> Option<(*mut RangeTblEntry, i16)> {
    let rte = rt_fetch(q, varno);
    if rte.is_null() {
        return None;
    }
    match (*rte).rtekind {
        pg_sys::RTEKind::RTE_RELATION => Some((rte, attno)),
        pg_sys::RTEKind::RTE_JOIN if attno > 0 => {
            let alias = list_iter::<Node>((*rte).joinaliasvars).nth(attno as usize - 1)?;
            let (idx, att) = resolve_var(q, alias)?;
            base_column(q, idx, att)
        }
        // a whole-row reference to a join reads every column of its tables
        pg_sys::RTEKind::RTE_JOIN => list_iter::<RangeTblEntry>((*q).rtable)
            .find(|r| (**r).rtekind == pg_sys::RTEKind::RTE_RELATION && (**r).relid == pg_sys::RelationRelationId)
            .map(|r| (r, 0)),
        _ => None,
    }
}

// ----- the statement ----------------------------------------------------------------------------

/// Checks a whole statement. Ok(None): nothing for pg_dp to do (no DP aggregate, no protected
/// table). Ok(Some): the admitted levels, with their aggregate calls tagged. Err: the refusal.
pub unsafe fn check_statement(query: *mut Query) -> Check<Option<Admitted>> {
    // dates and times from the clock below a DP aggregate become constants first (clock.rs)
    let clock = crate::query::clock::fold(query);
    // statistics columns of pg_class are masked for protected relations (statistics_mask.rs)
    if protect::statistics_restricted() {
        crate::query::statistics_mask::mask(query);
    }
    let mut c = Collect {
        stack: Vec::new(),
        aggs: Vec::new(),
        rels: Vec::new(),
        subquery_rtes: Vec::new(),
        ctes: Vec::new(),
        refusal: None,
        statistics: protect::statistics_restricted(),
        collations: Vec::new(),
        rechecks: None,
    };
    collect_walker(query as *mut Node, &mut c as *mut Collect as *mut c_void);
    if let Some(r) = c.refusal {
        return Err(r);
    }
    let protected: Vec<bool> = c.rels.iter().map(|r| protect::reads_protected((*r.rte).relid, (*r.rte).inh)).collect();
    let mut dp_levels: Vec<*mut Query> = Vec::new();
    for a in c.aggs.iter().filter(|a| a.kind.is_some()) {
        if !dp_levels.contains(&a.level) {
            dp_levels.push(a.level);
        }
    }
    if dp_levels.is_empty() && !protected.iter().any(|p| *p) {
        return Ok(None);
    }
    if let (Some(what), false) = (c.rechecks, dp_levels.is_empty()) {
        // a concurrent update makes PostgreSQL re-run the plan's subqueries for the row it
        // rechecks (EvalPlanQual): a DP level there would release again for one payment
        return Err(Refusal::new(format!("a DP aggregate in a statement with {what}"))
            .hint("release the DP aggregates in a SELECT (or INSERT … SELECT) first, then use the result"));
    }
    // The planner may move a leakproof condition of an outer query into a level, where it runs on
    // every input row: every collation the statement uses is loaded now (load_collations).
    for coll in &c.collations {
        crate::pg::ffi::load_collation(*coll);
    }

    let mut levels = Vec::new();
    let mut distributed = Vec::new();
    let mut consumed: HashSet<*mut RangeTblEntry> = HashSet::new();
    let mut waived = Vec::new();
    let mut next_tag = 0usize;
    for &q in &dp_levels {
        let aggs: Vec<&AggAt> = c.aggs.iter().filter(|a| a.level == q).collect();
        let checked = check_level(q, &aggs, &mut next_tag)?;
        for (rte, prot) in &checked.reads {
            consumed.insert(*rte);
            if *prot {
                waived.push(*rte);
            }
        }
        levels.push(checked.level);
        distributed.push(checked.distributed);
    }
    // the admitted arithmetic and date forms call their total functions, in every copy of each
    // expression in the level (a GROUP BY key and its copy in the select list must stay equal, or
    // the planner would compute the copy above the aggregation from a raw row): arithmetic.rs
    for (q, d) in dp_levels.iter().zip(&distributed) {
        if !*d {
            crate::query::arithmetic::swap_level(*q);
        }
    }
    for (r, prot) in c.rels.iter().zip(&protected) {
        if !*prot || consumed.contains(&r.rte) {
            continue;
        }
        let relid = (*r.rte).relid;
        if protect::exempt(relid) {
            continue;
        }
        let q = r.query;
        let written = (*q).commandType != pg_sys::CmdType::CMD_SELECT && rt_fetch(q, (*q).resultRelation) == r.rte;
        return Err(raw_access_refusal(relid, q, written));
    }
    let reads_protected = protected.iter().any(|p| *p);
    let restricted_read = c.rels.iter().zip(&protected).any(|(r, p)| *p && !protect::exempt((*r.rte).relid));
    if restricted_read {
        if let Some(r) = leaky_setting(true) {
            return Err(r);
        }
    }
    // pg_dp admits the reads of protected sources itself (the planner gets a private copy of the
    // query, so this does not outlive this planning); then the levels over protected tables are
    // rewritten for privacy units and private GROUP BY keys (rewrite.rs), copying these entries
    for rte in &waived {
        (**rte).requiredPerms &= !(pg_sys::ACL_SELECT as pg_sys::AclMode);
    }
    for (q, level) in dp_levels.iter().zip(levels.iter_mut()) {
        // dp_interval_low/high around the level's calls, while they are still the calls written
        crate::query::intervals::rewrite(*q)?;
        crate::query::rewrite::rewrite_level(*q, level, &mut next_tag)?;
    }
    // levels over Citus tables: exact partial aggregation on the workers, noise on the coordinator
    for ((q, level), d) in dp_levels.iter().zip(levels.iter_mut()).zip(&distributed) {
        if *d {
            crate::query::distributed_level::rewrite(*q, level)?;
        }
    }
    // the rewrites copy conditions into new places (HAVING into the per-unit level's WHERE): the
    // total forms again, over the rewritten levels
    for (q, d) in dp_levels.iter().zip(&distributed) {
        if !*d {
            crate::query::arithmetic::swap_level(*q);
        }
    }
    // The planner may move a condition of an outer query into a DP level (a subquery in FROM, a
    // view, a branch of a UNION, an inlined WITH query), below its aggregates, where it would run on
    // every input row. A security barrier lets only leakproof conditions move; WITH queries that
    // are DP levels are computed once and never inlined.
    for (sq, rte) in &c.subquery_rtes {
        if dp_levels.contains(sq) {
            (**rte).security_barrier = true;
        }
    }
    for cte in &c.ctes {
        if dp_levels.contains(&((**cte).ctequery as *mut Query)) {
            (**cte).ctematerialized = pg_sys::CTEMaterialize::CTEMaterializeAlways;
        }
    }
    // The barrier is not enough: a condition on a UNION or INTERSECT of a DP level is pushed into its
    // branches by the flag of the set operation's own subquery, and a leakproof one (an inlined SQL
    // function over a collation the analyst made) still runs on every input row. PostgreSQL moves no
    // condition into a subquery with a LIMIT, so every DP level that is a subquery gets LIMIT ALL:
    // nothing of an outer query runs below its aggregates (it changes no result and no plan node).
    for q in &dp_levels {
        if *q != query && (**q).limitCount.is_null() && (**q).limitOffset.is_null() {
            (**q).limitCount = limit_all();
            (**q).limitOption = pg_sys::LimitOption::LIMIT_OPTION_COUNT;
        }
    }
    Ok(Some(Admitted { levels, waived, reads_protected, restricted: restricted_read, clock, queries: dp_levels }))
}

/// A setting that would print to the client what the planner or the executor computed from the
/// data: `debug_print_plan` (the plan and its estimates, when planning) and `trace_sort` (the sorts
/// run below the aggregates and the memory they used). Refused for a statement that reads a
/// protected table the role may not read directly.
pub unsafe fn leaky_setting(planning: bool) -> Option<Refusal> {
    let name = if planning && pg_sys::Debug_print_plan {
        "debug_print_plan"
    } else if pg_sys::trace_sort {
        "trace_sort"
    } else {
        return None;
    };
    Some(
        Refusal::new(format!("{name} would print what PostgreSQL computed from a protected table's data"))
            .hint(format!("SET {name} = off")),
    )
}

unsafe fn raw_access_refusal(relid: Oid, q: *mut Query, written: bool) -> Refusal {
    let table = protect::relation_short_name(relid);
    let role = protect::current_role_name();
    let what = if written {
        "not insert into, update or delete from it".to_string()
    } else if (*q).hasAggs {
        "read it only through pg_dp aggregates (dp_count, dp_sum, dp_avg, …), not through other aggregates".to_string()
    } else {
        "read it only through DP aggregates".to_string()
    };
    Refusal::new(format!("permission denied for table {table}: it is protected by pg_dp, and role \"{role}\" may {what}"))
        .hint("a DP aggregate reads one protected table (or several joined on their privacy unit), joined many-to-one with public tables on a unique key; SELECT * FROM dp.grammar lists what may appear below it")
}

// ----- one DP level -----------------------------------------------------------------------------

struct LevelChecked {
    level: DpLevel,
    /// the relations the level reads as source and joins, with their protection
    reads: Vec<(*mut RangeTblEntry, bool)>,
    /// it reads a Citus table: it runs as an exact query on the workers (distributed_level.rs)
    distributed: bool,
}

/// The context of an expression check: the query whose range table its columns refer to, and how
/// refusals name the aggregate and the table.
struct Cx {
    q: *mut Query,
    func: &'static str,
    table: String,
    /// The largest constant admitted here: [`total::MAX_CONSTANT_BYTES`], or less in the subject
    /// of a LIKE, where parameters are refused too.
    max_const: usize,
}

impl Cx {
    fn structural(&self, construct: &str) -> Refusal {
        Refusal::new(format!(
            "{construct} in the input of {}: each input row must come from one row of {}",
            self.func, self.table
        ))
        .hint("SELECT * FROM dp.grammar lists what pg_dp admits below a DP aggregate")
    }

    fn not_total(&self, construct: &str) -> Refusal {
        Refusal::new(format!(
            "{construct} in the input of {}: only expressions that cannot raise an error for any stored value are allowed there",
            self.func
        ))
        .hint("SELECT * FROM dp.grammar lists them: comparisons, IN, BETWEEN, LIKE with a literal pattern, IS NULL, CASE, COALESCE, widening casts, arithmetic, date_trunc and extract")
    }
}

unsafe fn check_level(q: *mut Query, aggs: &[&AggAt], next_tag: &mut usize) -> Check<LevelChecked> {
    let dp: Vec<&&AggAt> = aggs.iter().filter(|a| a.kind.is_some()).collect();
    let func = dp[0].kind.expect("a DP aggregate").func();
    let first_table = first_relation(q, 0).map_or_else(|| "a table".to_string(), |r| protect::relation_short_name(r));
    let mut cx = Cx { q, func, table: first_table, max_const: total::MAX_CONSTANT_BYTES };

    if (*q).commandType != pg_sys::CmdType::CMD_SELECT {
        return Err(Refusal::new(format!("{func} must be computed in a SELECT")));
    }
    // PostgreSQL admits a column that is not a GROUP BY key when the key is its table's primary key
    // (a functional dependency): it would pass one row's value of each group above the aggregates
    if !(*q).constraintDeps.is_null() {
        return Err(Refusal::new(format!(
            "a column that is not a GROUP BY key next to {func}, selected through its table's primary key"
        ))
        .hint("add the column to GROUP BY, or aggregate it"));
    }
    if !(*q).rowMarks.is_null() || (*q).hasForUpdate {
        return Err(cx.structural("FOR UPDATE"));
    }
    if let Some(r) = correlation(q, func) {
        return Err(r);
    }

    let source = check_from(&mut cx, q, 0)?;
    cx.table = protect::relation_short_name(source.relation.oid.into());
    let distributed = distributed_source(&cx, &source)?;
    let mut filters = source.filters;

    // Columns that are not GROUP BY keys may appear around the aggregates when they depend on a
    // grouped primary key: that would release them as they are, row by row.
    if !(*q).constraintDeps.is_null() {
        return Err(Refusal::new(format!(
            "a column that is not a GROUP BY key next to {func}: a level releases only its GROUP BY keys and its DP aggregates"
        ))
        .hint("add the column to GROUP BY, or leave it out"));
    }
    // The planner moves HAVING conditions without aggregates into WHERE, below the aggregates: they
    // must be predicates of the grammar.
    let mut having = Vec::new();
    split_and((*q).havingQual, &mut having);
    for h in having {
        if !has_level_aggregate(h)? {
            predicate_below(&cx, h)?;
            filters += 1;
        }
    }

    // non-DP aggregates over the rows of a protected table would release exact values
    if let Some(other) = aggs.iter().find(|a| a.kind.is_none()) {
        if source.relation.protected {
            let name = func_name((*other.aggref).aggfnoid);
            return Err(Refusal::new(format!(
                "{name} next to {func} over protected table {}: only pg_dp aggregates may aggregate its rows",
                cx.table
            ))
            .hint("use dp_count, dp_sum, dp_avg, dp_median or dp_percentile"));
        }
    }

    // GROUP BY keys are computed from each input row: the value grammar, of a built-in type (grouping
    // calls the type's equality and hash functions on every row)
    let mut group_keys = Vec::new();
    for (e, _) in crate::query::tree::group_keys(q) {
        value_below(&cx, e)?;
        let typ = pg_sys::getBaseType(pg_sys::exprType(e));
        if typ.to_u32() >= pg_sys::FirstNormalObjectId {
            return Err(cx.not_total(&format!("GROUP BY key of type {}", total::type_name(pg_sys::exprType(e)))));
        }
        key_collation_resolved(&cx, e, "GROUP BY key")?;
        group_keys.push(describe_value(q, e));
    }
    let grouping_sets = if (*q).groupingSets.is_null() {
        1
    } else {
        let sets = crate::pg::ffi::expand_grouping_sets((*q).groupingSets, (*q).groupDistinct);
        list_iter::<c_void>(sets).count().max(1) as u32
    };

    // a level that averages every row of one protected table uses the count a DBA declared for it
    // (dp.set_public_count): no condition, join, GROUP BY or privacy unit, so the rows averaged are
    // the table's (bounds.rs checks the value and FILTER)
    let public_count = if filters == 0
        && group_keys.is_empty()
        && (*q).groupingSets.is_null()
        && source.joins.is_empty()
        && source.reads.len() == 1
        && (*source.reads[0].0).securityQuals.is_null()
        && source.relation.protected
        && !distributed
    {
        let relid: Oid = source.relation.oid.into();
        protect::public_count(relid).filter(|_| protect::effective_privacy_unit(relid).is_none()).map(|n| (relid, n))
    } else {
        None
    };

    let mut aggregates = Vec::new();
    let mut tagged: Vec<(*mut pg_sys::Aggref, i32)> = Vec::new();
    for a in dp {
        let agg = a.aggref;
        let kind = a.kind.expect("a DP aggregate");
        let f = kind.func();
        let acx = Cx { q, func: f, table: cx.table.clone(), max_const: cx.max_const };
        if !(*agg).aggdistinct.is_null() {
            return Err(acx.structural(&format!("DISTINCT inside {f}")));
        }
        if !(*agg).aggorder.is_null() {
            return Err(acx.structural(&format!("ORDER BY inside {f}")));
        }
        // a call without bounds takes the bounds declared for its column (bounds.rs)
        let declared = crate::query::bounds::supply_declared_bounds(q, agg, kind);
        // and a call without ε the session's, fixed now (bounds.rs)
        let star = (*agg).aggstar;
        let default_eps = crate::query::bounds::supply_default_epsilon(agg, kind);
        // and a mean over a whole table with a declared row count that count (bounds.rs)
        let counted = public_count.and_then(|(relid, n)| crate::query::bounds::supply_public_count(q, agg, kind, relid, n));
        let args: Vec<*mut pg_sys::TargetEntry> = list_iter((*agg).args).collect();
        let mut value_desc = "*".to_string();
        let mut params = Vec::new();
        let names = kind.param_names();
        for (i, te) in args.iter().enumerate() {
            let e = (**te).expr as *mut Node;
            if i == 0 && star {
                // dp_count(*), counting rows through dp_count(true, ε)
            } else if i == 0 {
                value_below(&acx, e)?;
                value_desc = describe_value(q, e);
            } else if counted == Some(i) {
                params.push(ParamSource::PublicCount);
            } else if declared.contains(&i) {
                params.push(ParamSource::Declared);
            } else if default_eps == Some(i) {
                params.push(ParamSource::Default);
            } else {
                let name = names.get(i.saturating_sub(1)).copied().unwrap_or("parameter");
                params.push(param(e, f, name)?);
            }
        }
        if !(*agg).aggfilter.is_null() {
            predicate_below(&acx, (*agg).aggfilter as *mut Node)?;
            filters += 1;
        }
        // the same call written twice in one level (the select list and HAVING, say) is one release:
        // it shares the first call's tag, one receipt and one value per group (release.rs, dedup)
        if let Some(first) = tagged.iter().find(|(other, _)| same_call(*other, agg)) {
            (*agg).location = first.1;
            continue;
        }
        let t = tag(*next_tag);
        *next_tag += 1;
        (*agg).location = t;
        tagged.push((agg, t));
        aggregates.push(DpAggregate {
            tag: t,
            function: func_signature((*agg).aggfnoid),
            value: value_desc,
            filtered: !(*agg).aggfilter.is_null(),
            params,
        });
    }

    let level = DpLevel {
        role: pg_sys::GetUserId().to_u32(),
        source: source.relation,
        joins: source.joins,
        filters,
        group_keys,
        grouping_sets,
        aggregates,
        unit: None,
        keys: KeyRelease::AsStored,
        exact_query: None,
        reads: source.reads.iter().filter(|(_, p)| *p).map(|(r, _)| (**r).relid.to_u32()).collect(),
        key_columns: crate::query::tree::key_columns(q),
    };
    Ok(LevelChecked { level, reads: source.reads, distributed })
}


/// A GROUP BY or ORDER BY key of a collatable type is hashed or sorted under its collation: one
/// left undetermined by conflicting implicit collations raises an error on the rows that reach it.
unsafe fn key_collation_resolved(cx: &Cx, e: *mut Node, what: &str) -> Check<()> {
    if pg_sys::type_is_collatable(pg_sys::exprType(e)) && pg_sys::exprCollation(e) == pg_sys::InvalidOid {
        return Err(Refusal::new(format!(
            "{what} of text values whose collations conflict in the input of {}: PostgreSQL cannot tell which collation to group or sort them in",
            cx.func
        ))
        .hint("name the collation, e.g. GROUP BY (CASE … END) COLLATE \"C\""));
    }
    Ok(())
}

/// Whether two pg_dp aggregate calls of one level are the same call: equal but for their place in
/// the query text (the grammar's tag), which `equal` does not compare.
unsafe fn same_call(a: *mut pg_sys::Aggref, b: *mut pg_sys::Aggref) -> bool {
    pg_sys::equal(a as *const c_void, b as *const c_void)
}

/// Whether a level reads a Citus table (it then runs distributed, distributed_level.rs). On a
/// worker, a shard is a slice of a table whose releases belong to the coordinator: refused.
unsafe fn distributed_source(cx: &Cx, source: &Source) -> Check<bool> {
    let mut distributed = false;
    for (rte, _) in &source.reads {
        let relid = (**rte).relid;
        if crate::catalog::citus::is_citus_table(relid) {
            distributed = true;
        }
        if let Some(owner) = crate::catalog::citus::shard_owner(relid) {
            return Err(Refusal::new(format!(
                "{} over {}, a shard of Citus table {}: a Citus worker releases nothing, DP queries run on the coordinator",
                cx.func,
                protect::relation_short_name(relid),
                protect::relation_short_name(owner)
            )));
        }
    }
    Ok(distributed)
}

/// The table a level reads, for messages written before its FROM clause is checked: the first
/// protected table in its range tables (through subqueries), else the first table.
unsafe fn first_relation(q: *mut Query, depth: u32) -> Option<Oid> {
    let mut first = None;
    let mut stack = vec![(q, depth)];
    while let Some((q, d)) = stack.pop() {
        for rte in list_iter::<RangeTblEntry>((*q).rtable) {
            match (*rte).rtekind {
                pg_sys::RTEKind::RTE_RELATION => {
                    if protect::reads_protected((*rte).relid, (*rte).inh) {
                        return Some((*rte).relid);
                    }
                    first.get_or_insert((*rte).relid);
                }
                pg_sys::RTEKind::RTE_SUBQUERY if d < MAX_ROW_SOURCE_DEPTH => stack.push(((*rte).subquery, d + 1)),
                _ => {}
            }
        }
    }
    first
}

// ----- correlation --------------------------------------------------------------------------

struct Outer {
    depth: u32,
    found: bool,
    too_deep: bool,
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn outer_walker(node: *mut Node, ctx: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    let o = &mut *(ctx as *mut Outer);
    if pg_sys::stack_is_too_deep() {
        o.too_deep = true;
        return true;
    }
    let up = match (*node).type_ {
        NodeTag::T_Query => {
            o.depth += 1;
            let r = pg_sys::query_tree_walker(node as *mut Query, Some(outer_walker), ctx, pg_sys::QTW_EXAMINE_RTES_BEFORE as i32);
            o.depth -= 1;
            return r;
        }
        NodeTag::T_RangeTblEntry => {
            if (*(node as *mut RangeTblEntry)).lateral {
                o.found = true;
                return true;
            }
            return false;
        }
        NodeTag::T_Var => Some((*(node as *mut pg_sys::Var)).varlevelsup),
        NodeTag::T_Aggref => Some((*(node as *mut pg_sys::Aggref)).agglevelsup),
        NodeTag::T_GroupingFunc => Some((*(node as *mut pg_sys::GroupingFunc)).agglevelsup),
        NodeTag::T_PlaceHolderVar => Some((*(node as *mut pg_sys::PlaceHolderVar)).phlevelsup),
        _ => None,
    };
    if matches!(up, Some(u) if u > o.depth) {
        o.found = true;
        return true;
    }
    pg_sys::expression_tree_walker(node, Some(outer_walker), ctx)
}

/// A DP level that refers to an outer query (or holds a LATERAL item) is executed again for every
/// outer row: each execution would be a new release for one payment.
unsafe fn correlation(q: *mut Query, func: &str) -> Option<Refusal> {
    let mut o = Outer { depth: 0, found: false, too_deep: false };
    pg_sys::query_tree_walker(q, Some(outer_walker), &mut o as *mut Outer as *mut c_void, pg_sys::QTW_EXAMINE_RTES_BEFORE as i32);
    if o.too_deep {
        return Some(Refusal::too_deep());
    }
    o.found.then(|| {
        Refusal::new(format!(
            "{func} in a subquery that refers to an outer query or uses LATERAL: it would be computed again, with new noise, for every outer row"
        ))
        .hint("compute the DP aggregate in an uncorrelated subquery or a WITH query, then join its result")
    })
}

// ----- FROM: the source and its public joins ------------------------------------------------

/// What a FROM clause (of a DP level or a row source) reads.
struct Source {
    relation: Relation,
    joins: Vec<PublicJoin>,
    filters: usize,
    reads: Vec<(*mut RangeTblEntry, bool)>,
}

struct Item {
    rtindex: i32,
    rte: *mut RangeTblEntry,
    /// the nullable side of a LEFT JOIN: attached only by its own ON conditions
    outer_quals: Option<Vec<*mut Node>>,
    protected: bool,
    /// for a subquery item: what it reads
    inner: Option<Source>,
}

const MAX_ROW_SOURCE_DEPTH: u32 = 32;

/// Checks the FROM, WHERE and ON clauses of `q` (a DP level, or a row source below one) and returns
/// the source with its public joins.
unsafe fn check_from(cx: &mut Cx, q: *mut Query, depth: u32) -> Check<Source> {
    if pg_sys::stack_is_too_deep() {
        return Err(Refusal::too_deep());
    }
    if depth > MAX_ROW_SOURCE_DEPTH {
        return Err(cx.structural("nesting of subqueries deeper than 32"));
    }
    let mut items = Vec::new();
    let mut conjuncts = Vec::new();
    let jt = (*q).jointree;
    if jt.is_null() || (*jt).fromlist.is_null() {
        return Err(Refusal::new(format!("{} must aggregate the rows of a table: the query has no FROM", cx.func)));
    }
    flatten(cx, q, jt as *mut Node, &mut items, &mut conjuncts)?;
    let outer_quals: Vec<*mut Node> = items.iter().filter_map(|i| i.outer_quals.as_ref()).flatten().copied().collect();
    for i in items.iter_mut() {
        classify_item(cx, q, i, depth)?;
    }

    // the source: the protected item, or the first item from which all others attach
    let protected: Vec<usize> = (0..items.len()).filter(|&i| items[i].protected).collect();
    for &p in &protected {
        if items[p].outer_quals.is_some() {
            return Err(cx.structural(&format!("protected table {} on the nullable side of an outer join", item_name(&items[p]))));
        }
    }
    if protected.len() > 1 {
        unit_join_items(cx, &items, &protected)?;
    }
    // with several protected tables, any of them may be the one the others attach to many-to-one
    let candidates: Vec<usize> = match protected.first() {
        Some(_) => protected.clone(),
        None => (0..items.len()).filter(|&i| items[i].outer_quals.is_none()).collect(),
    };
    let mut first_failure = None;
    let mut chosen = None;
    for cand in candidates {
        match attach(cx, q, &items, cand, &conjuncts) {
            Ok(joins) => {
                chosen = Some((cand, joins));
                break;
            }
            Err(r) => {
                first_failure.get_or_insert(r);
            }
        }
    }
    let Some((src, joins)) = chosen else {
        return Err(first_failure.unwrap_or_else(|| cx.structural("FROM clause")));
    };
    cx.table = item_name(&items[src]);

    // every condition below the aggregate is a predicate of the grammar
    let qcx = Cx { q, func: cx.func, table: cx.table.clone(), max_const: cx.max_const };
    for c in conjuncts.iter().chain(outer_quals.iter()) {
        predicate_below(&qcx, *c)?;
    }

    let mut reads = Vec::new();
    let mut out_joins = Vec::new();
    let mut filters = conjuncts.len() + outer_quals.len();
    let mut relation = None;
    for (i, item) in items.iter_mut().enumerate() {
        match item.inner.take() {
            Some(inner) => {
                reads.extend(inner.reads);
                filters += inner.filters;
                out_joins.extend(inner.joins);
                if i == src {
                    relation = Some(inner.relation);
                }
            }
            None => {
                reads.push((item.rte, item.protected));
                if i == src {
                    relation = Some(relation_of(item.rte, item.protected));
                }
            }
        }
    }
    out_joins.extend(joins);
    let relation = relation.expect("the source is one of the items");
    if relation.protected && !protect::exempt(relation.oid.into()) {
        for j in &out_joins {
            controlled_table_refusal(cx, &relation, &j.relation)?;
        }
    }
    Ok(Source { relation, joins: out_joins, filters, reads })
}

/// A public table joined to a protected source must not be one the role controls (owns, or may
/// insert into, update, delete from or truncate). Its values and pages would be the analyst's own
/// instruments: values of any size make one joined row cost seconds or memory, and the pages the
/// join probes can be read back (pruned pages, where an update lands), so they would show which
/// protected rows passed the filters.
unsafe fn controlled_table_refusal(cx: &Cx, source: &Relation, public: &Relation) -> Check<()> {
    let relid: Oid = public.oid.into();
    let me = pg_sys::GetUserId();
    let write = (pg_sys::ACL_INSERT | pg_sys::ACL_UPDATE | pg_sys::ACL_DELETE | pg_sys::ACL_TRUNCATE) as pg_sys::AclMode;
    let controls = pg_sys::pg_class_ownercheck(relid, me) || pg_sys::pg_class_aclcheck(relid, me, write) == pg_sys::AclResult::ACLCHECK_OK;
    if controls {
        let name = protect::relation_short_name(relid);
        return Err(Refusal::new(format!(
            "join of {} with {name} in the input of {}: role \"{}\" owns or may write to {name}, and a table the role controls could time or trace which rows of {} reach the join",
            protect::relation_short_name(source.oid.into()),
            cx.func,
            protect::current_role_name(),
            protect::relation_short_name(source.oid.into())
        ))
        .hint("join a table the role may only read (a DBA publishes it with GRANT SELECT)"));
    }
    Ok(())
}

unsafe fn relation_of(rte: *mut RangeTblEntry, protected: bool) -> Relation {
    Relation { oid: (*rte).relid.to_u32(), name: protect::relation_name((*rte).relid), protected }
}

unsafe fn item_name(i: &Item) -> String {
    match &i.inner {
        Some(s) => protect::relation_short_name(s.relation.oid.into()),
        None if (*i.rte).rtekind == pg_sys::RTEKind::RTE_RELATION => protect::relation_short_name((*i.rte).relid),
        None => alias_name(i.rte),
    }
}

unsafe fn alias_name(rte: *mut RangeTblEntry) -> String {
    let eref = (*rte).eref;
    if eref.is_null() || (*eref).aliasname.is_null() {
        "a subquery".into()
    } else {
        CStr::from_ptr((*eref).aliasname).to_string_lossy().into_owned()
    }
}

/// Splits a jointree into base items and conjuncts. Inner joins and comma lists put their
/// conditions into `conjuncts`; a LEFT (or RIGHT) join's nullable side keeps its own ON conditions.
unsafe fn flatten(cx: &Cx, q: *mut Query, node: *mut Node, items: &mut Vec<Item>, conjuncts: &mut Vec<*mut Node>) -> Check<()> {
    if node.is_null() {
        return Ok(());
    }
    match (*node).type_ {
        NodeTag::T_RangeTblRef => {
            let idx = (*(node as *mut pg_sys::RangeTblRef)).rtindex;
            items.push(Item { rtindex: idx, rte: rt_fetch(q, idx), outer_quals: None, protected: false, inner: None });
        }
        NodeTag::T_FromExpr => {
            let f = node as *mut pg_sys::FromExpr;
            for n in list_iter::<Node>((*f).fromlist) {
                flatten(cx, q, n, items, conjuncts)?;
            }
            split_and((*f).quals, conjuncts);
        }
        NodeTag::T_JoinExpr => {
            let j = node as *mut pg_sys::JoinExpr;
            match (*j).jointype {
                pg_sys::JoinType::JOIN_INNER => {
                    flatten(cx, q, (*j).larg, items, conjuncts)?;
                    flatten(cx, q, (*j).rarg, items, conjuncts)?;
                    split_and((*j).quals, conjuncts);
                }
                pg_sys::JoinType::JOIN_LEFT | pg_sys::JoinType::JOIN_RIGHT => {
                    let (kept, nullable) = if (*j).jointype == pg_sys::JoinType::JOIN_LEFT {
                        ((*j).larg, (*j).rarg)
                    } else {
                        ((*j).rarg, (*j).larg)
                    };
                    flatten(cx, q, kept, items, conjuncts)?;
                    if (*nullable).type_ != NodeTag::T_RangeTblRef {
                        return Err(cx.structural("outer join whose nullable side is itself a join"));
                    }
                    let idx = (*(nullable as *mut pg_sys::RangeTblRef)).rtindex;
                    let mut quals = Vec::new();
                    split_and((*j).quals, &mut quals);
                    items.push(Item { rtindex: idx, rte: rt_fetch(q, idx), outer_quals: Some(quals), protected: false, inner: None });
                }
                pg_sys::JoinType::JOIN_FULL => return Err(cx.structural("FULL JOIN")),
                _ => return Err(cx.structural("join of this kind")),
            }
        }
        _ => return Err(cx.structural("FROM item of this kind")),
    }
    Ok(())
}

/// Checks one FROM item: a table of an admitted kind, or a subquery that is a row source.
unsafe fn classify_item(cx: &mut Cx, _q: *mut Query, item: &mut Item, depth: u32) -> Check<()> {
    let rte = item.rte;
    if rte.is_null() {
        return Err(cx.structural("FROM item"));
    }
    if (*rte).lateral {
        return Err(Refusal::new(format!(
            "LATERAL in the input of {}: a LATERAL item is computed again for every row, and each input row must come from one row of a table",
            cx.func
        )));
    }
    match (*rte).rtekind {
        pg_sys::RTEKind::RTE_RELATION => {
            let relid = (*rte).relid;
            let name = protect::relation_short_name(relid);
            if !(*rte).tablesample.is_null() {
                return Err(cx.structural(&format!("TABLESAMPLE of {name}")));
            }
            let kind = (*rte).relkind as u8;
            let ok_kind = kind == pg_sys::RELKIND_RELATION || kind == pg_sys::RELKIND_PARTITIONED_TABLE || kind == pg_sys::RELKIND_MATVIEW;
            if !ok_kind {
                return Err(cx.structural(&format!("{} {name}", relkind_name(kind))));
            }
            if kind == pg_sys::RELKIND_RELATION && (*rte).inh && crate::pg::ffi::has_subclass(relid) {
                return Err(Refusal::new(format!(
                    "table {name} has inheritance children, whose rows could repeat a person's row in the input of {}",
                    cx.func
                ))
                .hint(format!("read ONLY {name}, or use a partitioned table")));
            }
            item.protected = protect::reads_protected(relid, (*rte).inh);
            // pg_dp admits a protected table without SELECT on it: a partition or child read on its
            // own must not escape the row security of a parent (its own is applied already)
            if item.protected {
                if let Some(parent) = protect::ancestors(relid).into_iter().find(|r| {
                    pg_sys::check_enable_rls(*r, pg_sys::InvalidOid, false) == pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32
                }) {
                    return Err(Refusal::new(format!(
                        "{name} is a partition or child of {}, which has row security for role \"{}\": read it through {}",
                        protect::relation_short_name(parent),
                        protect::current_role_name(),
                        protect::relation_short_name(parent)
                    )));
                }
            }
        }
        pg_sys::RTEKind::RTE_SUBQUERY => {
            let sq = (*rte).subquery;
            let inner = check_row_source(cx, sq, depth + 1)?;
            item.protected = inner.relation.protected;
            item.inner = Some(inner);
        }
        pg_sys::RTEKind::RTE_FUNCTION => return Err(cx.structural("function in FROM")),
        pg_sys::RTEKind::RTE_VALUES => return Err(cx.structural("VALUES")),
        pg_sys::RTEKind::RTE_CTE => return Err(cx.structural("WITH query")),
        pg_sys::RTEKind::RTE_TABLEFUNC => return Err(cx.structural("table function")),
        _ => return Err(cx.structural("FROM item of this kind")),
    }
    Ok(())
}

fn relkind_name(kind: u8) -> &'static str {
    match kind {
        pg_sys::RELKIND_FOREIGN_TABLE => "foreign table",
        pg_sys::RELKIND_VIEW => "view",
        pg_sys::RELKIND_SEQUENCE => "sequence",
        _ => "relation",
    }
}

/// A subquery in FROM (or an expanded view) below a DP aggregate: it may only select, filter,
/// project and join many-to-one, so that its rows are rows of one table.
unsafe fn check_row_source(cx: &mut Cx, sq: *mut Query, depth: u32) -> Check<Source> {
    let construct = if !(*sq).setOperations.is_null() {
        Some("set operation (UNION, INTERSECT, EXCEPT)")
    } else if (*sq).hasAggs || !(*sq).groupClause.is_null() || !(*sq).groupingSets.is_null() || !(*sq).havingQual.is_null() {
        Some("aggregation (another aggregate or GROUP BY)")
    } else if (*sq).hasWindowFuncs {
        Some("window function")
    } else if (*sq).hasTargetSRFs {
        Some("set-returning function")
    } else if (*sq).hasDistinctOn {
        Some("DISTINCT ON")
    } else if !(*sq).distinctClause.is_null() {
        Some("DISTINCT")
    } else if !(*sq).limitCount.is_null() {
        Some("LIMIT")
    } else if !(*sq).limitOffset.is_null() {
        Some("OFFSET")
    } else if !(*sq).rowMarks.is_null() || (*sq).hasForUpdate {
        Some("FOR UPDATE")
    } else if !(*sq).cteList.is_null() {
        Some("WITH query")
    } else if (*sq).commandType != pg_sys::CmdType::CMD_SELECT {
        Some("data-modifying statement")
    } else {
        None
    };
    if let Some(c) = construct {
        return Err(cx.structural(c));
    }
    let saved = cx.table.clone();
    let src = check_from(cx, sq, depth)?;
    let scx = Cx { q: sq, func: cx.func, table: cx.table.clone(), max_const: cx.max_const };
    for te in list_iter::<pg_sys::TargetEntry>((*sq).targetList) {
        value_below(&scx, (*te).expr as *mut Node)?;
    }
    // ORDER BY sorts the rows below the aggregate with the type's comparison: only types whose
    // comparison is total, under a determined collation
    for sc in list_iter::<pg_sys::SortGroupClause>((*sq).sortClause) {
        let te = list_iter::<pg_sys::TargetEntry>((*sq).targetList).find(|t| (**t).ressortgroupref == (*sc).tleSortGroupRef);
        let Some(te) = te else { return Err(scx.structural("ORDER BY")) };
        let e = (*te).expr as *mut Node;
        let typ = pg_sys::getBaseType(pg_sys::exprType(e));
        if !total::is_comparable(typ) || (*sc).sortop.to_u32() >= pg_sys::FirstNormalObjectId {
            return Err(scx.not_total(&format!("ORDER BY a value of type {}", total::type_name(pg_sys::exprType(e)))));
        }
        key_collation_resolved(&scx, e, "ORDER BY key")?;
    }
    cx.table = saved;
    Ok(src)
}

/// Attaches every item but `src` to it through many-to-one joins; returns the public joins.
unsafe fn attach(cx: &Cx, q: *mut Query, items: &[Item], src: usize, conjuncts: &[*mut Node]) -> Check<Vec<PublicJoin>> {
    let mut attached: Vec<i32> = vec![items[src].rtindex];
    let mut pending: Vec<usize> = (0..items.len()).filter(|&i| i != src).collect();
    let mut joins = Vec::new();
    let src_name = item_name(&items[src]);
    loop {
        let before = pending.len();
        let mut still = Vec::new();
        for &j in &pending {
            let item = &items[j];
            if item.inner.is_some() || (*item.rte).rtekind != pg_sys::RTEKind::RTE_RELATION {
                still.push(j);
                continue;
            }
            if item.protected {
                // another protected table: joined by equality of the privacy unit only
                let units: Vec<(i32, Oid)> =
                    items.iter().filter(|i| i.protected && attached.contains(&i.rtindex)).map(|i| (i.rtindex, (*i.rte).relid)).collect();
                match unit_link(q, item, &units, conjuncts) {
                    Some(key) => {
                        attached.push(item.rtindex);
                        joins.push(PublicJoin { relation: relation_of(item.rte, true), key, outer: false });
                    }
                    None => still.push(j),
                }
                continue;
            }
            if !(*item.rte).securityQuals.is_null() {
                // a policy runs its conditions on exactly the rows the join fetches for protected rows
                return Err(Refusal::new(format!(
                    "join with {} in the input of {}: row security policies on it would run on the rows it joins to {src_name}",
                    item_name(item),
                    cx.func
                ))
                .hint("join a table without row security"));
            }
            let quals: &[*mut Node] = item.outer_quals.as_deref().unwrap_or(conjuncts);
            if let Some(key) = unique_key_matched(q, item, &attached, quals) {
                attached.push(item.rtindex);
                joins.push(PublicJoin { relation: relation_of(item.rte, false), key, outer: item.outer_quals.is_some() });
            } else {
                still.push(j);
            }
        }
        pending = still;
        if pending.is_empty() {
            return Ok(joins);
        }
        if pending.len() == before {
            let j = &items[pending[0]];
            let name = item_name(j);
            if let Some(p) = pending.iter().map(|&p| &items[p]).find(|i| i.protected) {
                return Err(Refusal::new(format!(
                    "join of {src_name} with protected table {} in the input of {}: two protected tables are joined only by equality of their privacy units (or of a unit's foreign key and the column it references), which keeps each person's rows with that person",
                    item_name(p),
                    cx.func
                ))
                .hint("join on the privacy unit, e.g. ON visits.patient_id = patients.id; dp.protected_tables lists each table's unit"));
            }
            let why = if j.inner.is_some() || (*j.rte).rtekind != pg_sys::RTEKind::RTE_RELATION {
                format!("join of {src_name} with subquery {name} in the input of {}: join tables, not subqueries or views, to the source", cx.func)
            } else {
                format!(
                    "join of {src_name} with {name} in the input of {}: each row of {src_name} must match at most one row of {name}, through equalities with all columns of a unique key of {name}",
                    cx.func
                )
            };
            return Err(Refusal::new(why).hint("a join that can match one row to several repeats a person's row, which multiplies what a query reveals about them"));
        }
    }
}

/// The columns of a unique key of `item` that the conditions equate with columns of tables already
/// attached, if a whole key is covered.
unsafe fn unique_key_matched(q: *mut Query, item: &Item, attached: &[i32], quals: &[*mut Node]) -> Option<Vec<String>> {
    let relid = (*item.rte).relid;
    let mut found = None;
    find_unique_index(relid, |irel, keys| {
        let mut cols = Vec::new();
        let all = keys.iter().enumerate().all(|(k, &attno)| {
            let opfamily = *(*irel).rd_opfamily.add(k);
            let ok = quals.iter().any(|c| is_key_equality(q, *c, item.rtindex, attno, opfamily, attached));
            if ok {
                cols.push(attname(relid, attno));
            }
            ok
        });
        if all && !keys.is_empty() {
            found = Some(cols);
        }
        found.is_some()
    });
    found
}

/// Calls `f` with each valid, immediate, non-partial unique index of `relid` on plain columns and its
/// key columns, until `f` returns true; returns whether it did.
unsafe fn find_unique_index(relid: Oid, mut f: impl FnMut(pg_sys::Relation, &[i16]) -> bool) -> bool {
    let rel = pg_sys::relation_open(relid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    let mut done = false;
    for idx in crate::pg::nodes::list_oids(pg_sys::RelationGetIndexList(rel)) {
        let irel = pg_sys::index_open(idx, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        let ind = (*irel).rd_index;
        let usable = (*ind).indisunique
            && (*ind).indimmediate
            && (*ind).indisvalid
            && pg_sys::RelationGetIndexPredicate(irel).is_null()
            && pg_sys::RelationGetIndexExpressions(irel).is_null();
        if usable {
            let nkeys = (*ind).indnkeyatts as usize;
            done = f(irel, (*ind).indkey.values.as_slice(nkeys));
        }
        pg_sys::index_close(irel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        if done {
            break;
        }
    }
    pg_sys::relation_close(rel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    done
}

// ----- joins of protected tables on their privacy unit ----------------------------------------

/// Two or more protected tables in one FROM clause: each must be a table read directly (not through
/// a subquery or view) that declares a privacy unit, on one server. Their join conditions are
/// checked when they are attached to the source (`unit_link`).
unsafe fn unit_join_items(cx: &Cx, items: &[Item], protected: &[usize]) -> Check<()> {
    let names: Vec<String> = protected.iter().map(|&i| item_name(&items[i])).collect();
    let all = names.join(" and ");
    // each protected table once: a copy joined on the unit adds nothing a query needs, and m copies
    // make n^m rows of a person with n rows (a timing channel that grows with the person's rows)
    let mut seen: Vec<Oid> = Vec::new();
    for &p in protected {
        let item = &items[p];
        if item.inner.is_none() && (*item.rte).rtekind == pg_sys::RTEKind::RTE_RELATION {
            let relid = (*item.rte).relid;
            let top = protect::ancestors(relid).into_iter().last().unwrap_or(relid);
            if seen.contains(&top) {
                return Err(Refusal::new(format!(
                    "join of protected tables {all} in the input of {}: {} is read twice (or with one of its partitions), and a person's rows would pair with each other",
                    cx.func,
                    protect::relation_short_name(top)
                ))
                .hint("read each protected table once"));
            }
            seen.push(top);
        }
    }
    for &p in protected {
        let item = &items[p];
        let name = item_name(item);
        if item.inner.is_some() || (*item.rte).rtekind != pg_sys::RTEKind::RTE_RELATION {
            return Err(Refusal::new(format!(
                "join of protected tables {all} in the input of {}: {name} is read through a subquery or view; protected tables are joined only when each is read directly",
                cx.func
            ))
            .hint("join the tables themselves and move the subquery's conditions into WHERE"));
        }
        let relid = (*item.rte).relid;
        if protect::effective_privacy_unit(relid).is_none() {
            return Err(Refusal::new(format!(
                "join of protected tables {all} in the input of {}: {name} has no privacy unit (each of its rows is one person), so a join could repeat a person's row",
                cx.func
            ))
            .hint("a DBA declares the column that identifies the person: dp.protect_table(table, privacy_unit => column)"));
        }
        if crate::catalog::citus::is_citus_table(relid) {
            return Err(Refusal::new(format!(
                "join of protected tables {all} in the input of {}: {name} is a Citus table, and distributed levels read one protected table",
                cx.func
            )));
        }
    }
    Ok(())
}

/// The column where the unit of a table ends: its unit column, then every foreign key that
/// `rewrite::unit_path` follows. Two tables joined on their units must end at the same column.
unsafe fn unit_root(relid: Oid) -> Option<(Oid, i16)> {
    let (mut rel, mut att) = (relid, protect::effective_privacy_unit(relid)?.0);
    let mut seen = vec![relid];
    loop {
        match crate::query::rewrite::foreign_key_to_unit(rel, att) {
            Some((hop, _)) if !hop.sound => return None,
            Some((hop, next_unit)) if !seen.contains(&hop.ref_relid) && seen.len() <= 8 => {
                seen.push(hop.ref_relid);
                rel = hop.ref_relid;
                att = next_unit;
            }
            Some(_) => return None,
            None => return Some((rel, att)),
        }
    }
}

/// The column the values of a unit column name: following foreign keys to protected tables while
/// the referenced column is that table's own unit, then the referenced column, or the column itself.
/// Two unit columns with the same answer hold the same units for equal values.
unsafe fn unit_namespace(relid: Oid, attnum: i16) -> Option<(Oid, i16)> {
    let (mut rel, mut att) = (relid, attnum);
    for _ in 0..8 {
        match crate::query::rewrite::foreign_key_to_unit(rel, att) {
            Some((hop, _)) if !hop.sound => return None,
            Some((hop, next_unit)) if hop.ref_attnum == next_unit => {
                rel = hop.ref_relid;
                att = hop.ref_attnum;
            }
            Some((hop, _)) => return Some((hop.ref_relid, hop.ref_attnum)),
            None => return Some((rel, att)),
        }
    }
    None
}

/// A condition that joins protected table `item` to one of the protected tables already attached
/// (`units`: range-table index and table) so that every joined pair of rows has one privacy unit: an
/// equality, with a built-in operator of a B-tree family under a deterministic collation, between
///
/// - the unit columns of both tables, when their values name the same column (`unit_namespace`):
///   `visits.patient_id = patients.id`, two tables whose units reference `patients.id`; or
/// - the unit column of one table and the column its foreign key references in the other:
///   `prescriptions.visit_id = visits.id` (the joined visit is the prescription's own, whose unit
///   is the prescription's).
///
/// Returns the condition as text, for the level's description.
unsafe fn unit_link(q: *mut Query, item: &Item, units: &[(i32, Oid)], conjuncts: &[*mut Node]) -> Option<Vec<String>> {
    let p_rel = (*item.rte).relid;
    let (p_unit, _) = protect::effective_privacy_unit(p_rel)?;
    let first_ref = |rel: Oid, att: i16| crate::query::rewrite::foreign_key_to_unit(rel, att).filter(|(h, _)| h.sound).map(|(h, _)| (h.ref_relid, h.ref_attnum));
    for &c in conjuncts {
        if (*c).type_ != NodeTag::T_OpExpr {
            continue;
        }
        let op = c as *mut pg_sys::OpExpr;
        let args: Vec<*mut Node> = list_iter((*op).args).collect();
        if args.len() != 2 || !unit_equality(op) {
            continue;
        }
        let (Some(x), Some(y)) = (resolve_var(q, args[0]), resolve_var(q, args[1])) else { continue };
        // the operator must be the equality of both columns' own types (their default B-tree
        // families): a cast to another type may compare with a looser equality (bpchar ignores
        // trailing spaces) than the one that tells units apart
        if !own_equality(args[0], (*op).opno) || !own_equality(args[1], (*op).opno) {
            continue;
        }
        for ((p_rt, p_att), (a_rt, a_att)) in [(x, y), (y, x)] {
            if p_rt != item.rtindex || p_att < 1 || a_att < 1 {
                continue;
            }
            let Some(&(_, a_rel)) = units.iter().find(|(rt, _)| *rt == a_rt) else { continue };
            let Some((a_unit, _)) = protect::effective_privacy_unit(a_rel) else { continue };
            let same_namespace = || {
                let ns = unit_namespace(a_rel, a_unit);
                ns.is_some() && ns == unit_namespace(p_rel, p_unit)
            };
            let linked = (a_att == a_unit && p_att == p_unit && same_namespace())
                || (a_att == a_unit && first_ref(a_rel, a_unit) == Some((p_rel, p_att)))
                || (p_att == p_unit && first_ref(p_rel, p_unit) == Some((a_rel, a_att)));
            // and both units end at the same column (the rewrite groups by the first table's)
            let linked = linked && {
                let root = unit_root(a_rel);
                root.is_some() && root == unit_root(p_rel)
            };
            // the table attached matches at most one row per row already joined (its column is
            // unique), as a public table does: a person's rows in two tables with many rows each
            // would pair up, n·m rows that make a query's time grow with them
            if linked && unique_column(p_rel, p_att) {
                return Some(vec![format!(
                    "{}.{} = {}.{}",
                    protect::relation_short_name(a_rel),
                    attname(a_rel, a_att),
                    protect::relation_short_name(p_rel),
                    attname(p_rel, p_att)
                )]);
            }
        }
    }
    None
}

/// Whether column `attnum` of `relid` alone is a unique key: a valid, immediate, non-partial unique
/// index on exactly that column.
unsafe fn unique_column(relid: Oid, attnum: i16) -> bool {
    find_unique_index(relid, |_, keys| keys == [attnum])
}

/// Whether `opno` is the equality of the default B-tree operator family of the type of column `e`
/// (the column itself, below binary-compatible relabelling).
unsafe fn own_equality(mut e: *mut Node, opno: Oid) -> bool {
    while !e.is_null() && (*e).type_ == NodeTag::T_RelabelType {
        e = (*(e as *mut pg_sys::RelabelType)).arg as *mut Node;
    }
    !e.is_null() && crate::query::tree::type_equality(pg_sys::exprType(e), opno)
}

/// An equality that holds only between equal values: a built-in operator that is the equality of a
/// built-in B-tree operator family, compared under a deterministic collation (a nondeterministic one
/// would pair 'a' with 'A', two different units).
unsafe fn unit_equality(op: *mut pg_sys::OpExpr) -> bool {
    let builtin = |o: Oid| o.to_u32() < pg_sys::FirstNormalObjectId;
    // an equality that reads a setting (timestamp = timestamptz reads TimeZone) pairs rows as the
    // analyst's session decides
    if !crate::query::tree::builtin_immutable_operator((*op).opno) || !builtin((*op).opfuncid) {
        return false;
    }
    let coll = (*op).inputcollid;
    if coll != pg_sys::InvalidOid && !pg_sys::get_collation_isdeterministic(coll) {
        return false;
    }
    crate::pg::nodes::list_oids(pg_sys::get_mergejoin_opfamilies((*op).opno))
        .into_iter()
        .any(|f| builtin(f) && pg_sys::get_op_opfamily_strategy((*op).opno, f) == pg_sys::BTEqualStrategyNumber as i32)
}

unsafe fn is_key_equality(q: *mut Query, c: *mut Node, rtindex: i32, attno: i16, opfamily: Oid, attached: &[i32]) -> bool {
    if (*c).type_ != NodeTag::T_OpExpr {
        return false;
    }
    let op = c as *mut pg_sys::OpExpr;
    let args: Vec<*mut Node> = list_iter((*op).args).collect();
    if args.len() != 2 {
        return false;
    }
    // built-in operators and operator families only: the join runs them on protected values
    let builtin = |o: Oid| o.to_u32() < pg_sys::FirstNormalObjectId;
    if !builtin((*op).opno) || !builtin((*op).opfuncid) || !builtin(opfamily) {
        return false;
    }
    if pg_sys::get_op_opfamily_strategy((*op).opno, opfamily) != pg_sys::BTEqualStrategyNumber as i32 {
        return false;
    }
    let coll = (*op).inputcollid;
    if coll != pg_sys::InvalidOid && !pg_sys::get_collation_isdeterministic(coll) {
        return false;
    }
    let (a, b) = (resolve_var(q, args[0]), resolve_var(q, args[1]));
    match (a, b) {
        (Some(a), Some(b)) => {
            (a == (rtindex, attno) && attached.contains(&b.0) && b.1 > 0) || (b == (rtindex, attno) && attached.contains(&a.0) && a.1 > 0)
        }
        _ => false,
    }
}

// ----- values and predicates ----------------------------------------------------------------

/// A value below a DP aggregate. Constructs that break "one input row from one row of one table"
/// (a subquery, a window function, …) are reported before expressions that are not total.
unsafe fn value_below(cx: &Cx, e: *mut Node) -> Check<()> {
    structure(cx, e)?;
    value(cx, e)
}

/// A condition below a DP aggregate (WHERE, ON, FILTER).
unsafe fn predicate_below(cx: &Cx, e: *mut Node) -> Check<()> {
    structure(cx, e)?;
    predicate(cx, e)
}

struct Found(Option<&'static str>);

const TOO_DEEP: &str = "too deep";

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn structure_walker(node: *mut Node, ctx: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    let found = &mut *(ctx as *mut Found);
    if pg_sys::stack_is_too_deep() {
        found.0 = Some(TOO_DEEP);
        return true;
    }
    found.0 = match (*node).type_ {
        NodeTag::T_SubLink | NodeTag::T_SubPlan | NodeTag::T_AlternativeSubPlan => Some("subquery"),
        NodeTag::T_WindowFunc => Some("window function"),
        NodeTag::T_Aggref | NodeTag::T_GroupingFunc => Some("aggregate"),
        NodeTag::T_FuncExpr if (*(node as *mut pg_sys::FuncExpr)).funcretset => Some("set-returning function"),
        NodeTag::T_OpExpr if (*(node as *mut pg_sys::OpExpr)).opretset => Some("set-returning function"),
        _ => None,
    };
    found.0.is_some() || pg_sys::expression_tree_walker(node, Some(structure_walker), ctx)
}

unsafe fn structure(cx: &Cx, e: *mut Node) -> Check<()> {
    let mut found = Found(None);
    structure_walker(e, &mut found as *mut Found as *mut c_void);
    match found.0 {
        Some(TOO_DEEP) => Err(Refusal::too_deep()),
        Some(what) => Err(cx.structural(what)),
        None => Ok(()),
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn data_walker(node: *mut Node, ctx: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    if pg_sys::stack_is_too_deep() {
        return true; // not known to be constant: the caller refuses
    }
    let user = |f: Oid| f.to_u32() >= pg_sys::FirstNormalObjectId;
    // Only nodes that the planner evaluates while planning when their inputs are constants: an
    // error they raise is raised at planning, whatever the data. A domain check, an XML
    // expression or a bind parameter (not folded in a generic plan) would be evaluated, and raise
    // its error, only on the rows whose CASE branch reaches it.
    let not_constant = match (*node).type_ {
        NodeTag::T_Const | NodeTag::T_List | NodeTag::T_BoolExpr | NodeTag::T_RelabelType | NodeTag::T_ArrayExpr
        | NodeTag::T_CaseExpr | NodeTag::T_CaseWhen | NodeTag::T_CoalesceExpr | NodeTag::T_NullTest
        | NodeTag::T_BooleanTest => false,
        NodeTag::T_FuncExpr => user((*(node as *mut pg_sys::FuncExpr)).funcid),
        NodeTag::T_OpExpr | NodeTag::T_DistinctExpr | NodeTag::T_NullIfExpr => user((*(node as *mut pg_sys::OpExpr)).opfuncid),
        NodeTag::T_ScalarArrayOpExpr => user((*(node as *mut pg_sys::ScalarArrayOpExpr)).opfuncid),
        NodeTag::T_CoerceViaIO => {
            let c = node as *mut pg_sys::CoerceViaIO;
            user((*c).resulttype) || user(pg_sys::exprType((*c).arg as *mut Node))
        }
        _ => true,
    };
    not_constant || pg_sys::expression_tree_walker(node, Some(data_walker), ctx)
}

/// True for an expression the planner computes while planning: literals combined by immutable
/// built-in functions, casts, CASE, COALESCE, AND/OR/NOT, IS NULL (e.g. `ARRAY[1.0, 2.0]::float8[]`).
/// Whatever error it could raise is raised at planning, from the query text alone.
unsafe fn is_constant(e: *mut Node) -> bool {
    !data_walker(e, std::ptr::null_mut()) && !pg_sys::contain_mutable_functions(e)
}

/// `refusal`, unless `e` is a constant expression (then its errors come while planning). Checked
/// only where a node would be refused, so that the check costs time linear in the expression.
unsafe fn unless_constant(cx: &Cx, e: *mut Node, refusal: Refusal) -> Check<()> {
    if is_constant(e) {
        constant_size(cx, e)
    } else {
        Err(refusal)
    }
}

/// A constant below a DP aggregate is at most [`total::MAX_CONSTANT_BYTES`]: an operation on it
/// runs on every row that reaches it, and a huge one (`repeat('x', 500000000) ILIKE …`) would
/// turn one row's presence into seconds of work or an out-of-memory error. A constant expression is
/// folded here, as the planner would fold it (its errors depend on the query text alone).
unsafe fn constant_size(cx: &Cx, e: *mut Node) -> Check<()> {
    let folded = if (*e).type_ == NodeTag::T_Const { e } else { pg_sys::eval_const_expressions(std::ptr::null_mut(), pg_sys::copyObjectImpl(e as *const c_void) as *mut Node) };
    if folded.is_null() || (*folded).type_ != NodeTag::T_Const {
        return Ok(());
    }
    let c = folded as *mut pg_sys::Const;
    let bytes = total::const_bytes(c);
    if bytes > cx.max_const {
        let place = if cx.max_const < total::MAX_CONSTANT_BYTES { "the subject of a LIKE in the input" } else { "the input" };
        return Err(Refusal::new(format!(
            "a constant of {bytes} bytes in {place} of {}: constants there are at most {} bytes",
            cx.func, cx.max_const
        ))
        .hint("filter with a smaller constant, or join a public table"));
    }
    Ok(())
}

/// `LIMIT ALL`: a NULL bigint constant.
unsafe fn limit_all() -> *mut Node {
    pg_sys::makeConst(pg_sys::INT8OID, -1, pg_sys::InvalidOid, 8, pg_sys::Datum::from(0usize), true, true) as *mut Node
}

/// Notes the collations an expression node of the statement runs under (node kinds whose
/// collation PostgreSQL can tell; others have none of their own).
unsafe fn note_collations(c: &mut Collect, n: *mut Node) {
    let mut add = |coll: Oid| {
        if coll != pg_sys::InvalidOid && coll != pg_sys::DEFAULT_COLLATION_OID && !c.collations.contains(&coll) {
            c.collations.push(coll);
        }
    };
    match (*n).type_ {
        NodeTag::T_Var | NodeTag::T_Const | NodeTag::T_Param | NodeTag::T_Aggref | NodeTag::T_WindowFunc
        | NodeTag::T_SubscriptingRef | NodeTag::T_FuncExpr | NodeTag::T_OpExpr | NodeTag::T_DistinctExpr
        | NodeTag::T_NullIfExpr | NodeTag::T_ScalarArrayOpExpr | NodeTag::T_FieldSelect | NodeTag::T_RelabelType
        | NodeTag::T_CoerceViaIO | NodeTag::T_ArrayCoerceExpr | NodeTag::T_CollateExpr | NodeTag::T_CaseExpr
        | NodeTag::T_ArrayExpr | NodeTag::T_CoalesceExpr | NodeTag::T_MinMaxExpr | NodeTag::T_CoerceToDomain => {
            add(pg_sys::exprCollation(n));
            add(pg_sys::exprInputCollation(n));
        }
        NodeTag::T_RowCompareExpr => {
            let ids = (*(n as *mut pg_sys::RowCompareExpr)).inputcollids;
            if !ids.is_null() {
                for i in 0..(*ids).length as usize {
                    add((*(*ids).elements.add(i)).oid_value);
                }
            }
        }
        _ => {}
    }
}

/// Loads the collations an expression node runs under, while checking: the first use of a
/// collation in a session can warn (a version mismatch) or fail (a locale missing), and below a DP
/// aggregate that would happen only when a row reached the node.
unsafe fn load_collations(e: *mut Node) {
    crate::pg::ffi::load_collation(pg_sys::exprCollation(e));
    crate::pg::ffi::load_collation(pg_sys::exprInputCollation(e));
}

/// A value below a DP aggregate: the grammar's `value`.
unsafe fn value(cx: &Cx, e: *mut Node) -> Check<()> {
    if pg_sys::stack_is_too_deep() {
        return Err(Refusal::too_deep());
    }
    if e.is_null() {
        return Ok(());
    }
    load_collations(e);
    match (*e).type_ {
        NodeTag::T_Var => column(cx, e as *mut pg_sys::Var),
        NodeTag::T_Const => constant_size(cx, e),
        NodeTag::T_Param => {
            if (*(e as *mut pg_sys::Param)).paramkind != pg_sys::ParamKind::PARAM_EXTERN {
                Err(cx.structural("value computed while the query runs"))
            } else if cx.max_const < total::MAX_CONSTANT_BYTES {
                // its size is known only when bound, and LIKE's work grows with it
                Err(Refusal::new(format!("a parameter in the subject of a LIKE in the input of {}", cx.func))
                    .hint("compare the parameter with = instead, or put the text in the pattern"))
            } else {
                Ok(())
            }
        }
        NodeTag::T_RelabelType => value(cx, (*(e as *mut pg_sys::RelabelType)).arg as *mut Node),
        NodeTag::T_CoerceViaIO => {
            let c = e as *mut pg_sys::CoerceViaIO;
            let arg = (*c).arg as *mut Node;
            let from = pg_sys::exprType(arg);
            let to = (*c).resulttype;
            if (to == pg_sys::TEXTOID || to == pg_sys::VARCHAROID) && total::text_output_ok(from) {
                value(cx, arg)
            } else {
                unless_constant(cx, e, cx.not_total(&format!("cast from {} to {}", total::type_name(from), total::type_name(to))))
            }
        }
        NodeTag::T_FuncExpr => {
            let f = e as *mut pg_sys::FuncExpr;
            if (*f).funcretset {
                return Err(cx.structural(&format!("set-returning {}", total::describe_function((*f).funcid))));
            }
            let datetime = if is_constant(e) { None } else { crate::query::datetime::function_form(f)? };
            if let Some(form) = datetime {
                // date_trunc, extract, date_part with a constant unit (datetime.rs)
                for a in list_iter::<Node>((*f).args) {
                    value(cx, a)?;
                }
                // (swapped for its total form with every copy in the level: swap_level)
                let _ = form;
                Ok(())
            } else if total::is_total_cast((*f).funcid) {
                for a in list_iter::<Node>((*f).args) {
                    value(cx, a)?;
                }
                Ok(())
            } else {
                let what = if matches!((*f).funcformat, pg_sys::CoercionForm::COERCE_IMPLICIT_CAST | pg_sys::CoercionForm::COERCE_EXPLICIT_CAST) {
                    let arg = list_iter::<Node>((*f).args).next();
                    let from = arg.map_or(pg_sys::InvalidOid, |a| pg_sys::exprType(a));
                    format!("cast from {} to {}", total::type_name(from), total::type_name((*f).funcresulttype))
                } else {
                    total::describe_function((*f).funcid)
                };
                unless_constant(cx, e, cx.not_total(&what))
            }
        }
        NodeTag::T_OpExpr => {
            let op = e as *mut pg_sys::OpExpr;
            let args: Vec<*mut Node> = list_iter((*op).args).collect();
            let literal_divisor = total::integer_division((*op).opfuncid)
                .is_some_and(|is_div| args.len() == 2 && args.get(1).and_then(|d| const_int(*d)).is_some_and(|k| total::divisor_ok(k, is_div)));
            if literal_divisor {
                value(cx, args[0])
            } else if let Some(form) = (!is_constant(e)).then(|| crate::query::arithmetic::total_form(op)).flatten() {
                // arithmetic that cannot fail: the node calls pg_dp's total function of its type
                // (saturating, ±Infinity, NULL for a division by 0) instead of its own (arithmetic.rs)
                for a in &args {
                    value(cx, *a)?;
                }
                // (swapped for its total form with every copy in the level: swap_level)
                let _ = form;
                Ok(())
            } else if (!is_constant(e)) && crate::query::datetime::operator_form(op).is_some() {
                // date ± integer, timestamp ± interval, differences: total forms (datetime.rs)
                for a in &args {
                    value(cx, *a)?;
                }
                Ok(())
            } else if let Some(is_div) = total::integer_division((*op).opfuncid) {
                match (args.len(), args.get(1).and_then(|d| const_int(*d))) {
                    (2, Some(k)) if total::divisor_ok(k, is_div) => value(cx, args[0]),
                    _ => unless_constant(cx, e, cx.not_total(&format!(
                        "{} with a divisor that is not a literal other than 0{}",
                        total::describe_operator((*op).opno),
                        if is_div { " and -1" } else { "" }
                    ))),
                }
            } else {
                predicate(cx, e)
            }
        }
        NodeTag::T_CaseExpr => {
            let c = e as *mut pg_sys::CaseExpr;
            value(cx, (*c).arg as *mut Node)?;
            for w in list_iter::<pg_sys::CaseWhen>((*c).args) {
                predicate(cx, (*w).expr as *mut Node)?;
                value(cx, (*w).result as *mut Node)?;
            }
            value(cx, (*c).defresult as *mut Node)
        }
        NodeTag::T_CaseTestExpr => Ok(()),
        NodeTag::T_CoalesceExpr => {
            for a in list_iter::<Node>((*(e as *mut pg_sys::CoalesceExpr)).args) {
                value(cx, a)?;
            }
            Ok(())
        }
        NodeTag::T_MinMaxExpr => {
            let m = e as *mut pg_sys::MinMaxExpr;
            if !total::is_comparable((*m).minmaxtype) {
                return unless_constant(cx, e, cx.not_total(&format!("GREATEST or LEAST of {}", total::type_name((*m).minmaxtype))));
            }
            let args: Vec<*mut Node> = list_iter((*m).args).collect();
            collation_resolved(cx, e, &args, "GREATEST or LEAST")?;
            for a in args {
                value(cx, a)?;
            }
            Ok(())
        }
        NodeTag::T_BoolExpr
        | NodeTag::T_NullTest
        | NodeTag::T_BooleanTest
        | NodeTag::T_ScalarArrayOpExpr
        | NodeTag::T_DistinctExpr
        | NodeTag::T_NullIfExpr => predicate(cx, e),
        NodeTag::T_SubLink | NodeTag::T_SubPlan => Err(cx.structural("subquery")),
        NodeTag::T_WindowFunc => Err(cx.structural("window function")),
        NodeTag::T_Aggref => Err(cx.structural("aggregate")),
        NodeTag::T_CoerceToDomain => unless_constant(cx, e, cx.not_total("cast to a domain")),
        NodeTag::T_ArrayExpr => {
            let a = e as *mut pg_sys::ArrayExpr;
            if is_constant(e) {
                return constant_size(cx, e);
            }
            // ARRAY[ARRAY[…], …] raises an error when its elements' dimensions differ, which depends
            // on the values (an array column, or a CASE that yields arrays of other shapes)
            if (*a).multidims {
                return unless_constant(cx, e, cx.not_total("ARRAY[…] of arrays (a multidimensional array constructor)"));
            }
            for el in list_iter::<Node>((*a).elements) {
                // an array of values of variable length fails when their total passes 1 GB
                if pg_sys::get_typlen(pg_sys::exprType(el)) < 0 && !is_constant(el) {
                    return unless_constant(cx, e, cx.not_total(&format!(
                        "ARRAY[…] of {} values computed from the data",
                        total::type_name(pg_sys::exprType(el))
                    )));
                }
                value(cx, el)?;
            }
            Ok(())
        }
        NodeTag::T_CollateExpr => value(cx, (*(e as *mut pg_sys::CollateExpr)).arg as *mut Node),
        t => unless_constant(cx, e, cx.not_total(&node_name(t))),
    }
}

/// The collation a comparison, LIKE or GREATEST of values of a collatable type (text, varchar,
/// char, name, arrays of them) runs under. When the two sides carry different implicit collations
/// (a column of the protected table and one of a public table, say), PostgreSQL leaves it
/// undetermined, and raises "could not determine which collation to use" only on the rows that
/// reach the comparison: refused before planning.
unsafe fn collation_resolved(cx: &Cx, e: *mut Node, args: &[*mut Node], what: &str) -> Check<()> {
    if !args.iter().any(|a| pg_sys::type_is_collatable(pg_sys::exprType(*a))) {
        return Ok(());
    }
    if pg_sys::exprInputCollation(e) != pg_sys::InvalidOid {
        return Ok(());
    }
    unless_constant(
        cx,
        e,
        Refusal::new(format!(
            "{what} of text values whose collations conflict in the input of {}: PostgreSQL cannot tell which collation to compare them in",
            cx.func
        ))
        .hint("name the collation of one side, e.g. a.name = b.name COLLATE \"C\""),
    )
}

/// A plain user column of a table (or subquery, or join) in the level's FROM.
unsafe fn column(cx: &Cx, v: *mut pg_sys::Var) -> Check<()> {
    if (*v).varlevelsup != 0 {
        return Err(Refusal::new(format!(
            "a column of an outer query in the input of {}: it would be computed again, with new noise, for every outer row",
            cx.func
        )));
    }
    let rte = rt_fetch(cx.q, (*v).varno);
    if rte.is_null() {
        return Err(cx.structural("column"));
    }
    let att = (*v).varattno;
    match (*rte).rtekind {
        pg_sys::RTEKind::RTE_RELATION if att > 0 => Ok(()),
        pg_sys::RTEKind::RTE_RELATION if att == 0 => Err(cx.structural("whole-row reference")),
        pg_sys::RTEKind::RTE_RELATION => Err(cx.structural("system column")),
        // the subquery's select list is checked with the subquery
        pg_sys::RTEKind::RTE_SUBQUERY if att > 0 => Ok(()),
        pg_sys::RTEKind::RTE_JOIN if att > 0 => match list_iter::<Node>((*rte).joinaliasvars).nth(att as usize - 1) {
            Some(alias) => value(cx, alias),
            None => Err(cx.structural("column")),
        },
        _ => Err(cx.structural("whole-row reference")),
    }
}

/// A condition below a DP aggregate: the grammar's `predicate`.
unsafe fn predicate(cx: &Cx, e: *mut Node) -> Check<()> {
    if pg_sys::stack_is_too_deep() {
        return Err(Refusal::too_deep());
    }
    if e.is_null() {
        return Ok(());
    }
    load_collations(e);
    match (*e).type_ {
        NodeTag::T_BoolExpr => {
            for a in list_iter::<Node>((*(e as *mut pg_sys::BoolExpr)).args) {
                predicate(cx, a)?;
            }
            Ok(())
        }
        NodeTag::T_NullTest => {
            let t = e as *mut pg_sys::NullTest;
            if (*t).argisrow {
                return unless_constant(cx, e, cx.not_total("row IS NULL"));
            }
            value(cx, (*t).arg as *mut Node)
        }
        NodeTag::T_BooleanTest => value(cx, (*(e as *mut pg_sys::BooleanTest)).arg as *mut Node),
        NodeTag::T_OpExpr | NodeTag::T_DistinctExpr | NodeTag::T_NullIfExpr => {
            let op = e as *mut pg_sys::OpExpr;
            let args: Vec<*mut Node> = list_iter((*op).args).collect();
            if args.len() == 2 && total::is_comparison((*op).opno) {
                collation_resolved(cx, e, &args, "comparison")?;
                value(cx, args[0])?;
                value(cx, args[1])
            } else if args.len() == 2 && total::is_like((*op).opno) {
                collation_resolved(cx, e, &args, "LIKE")?;
                like(cx, op, &args)
            } else if (*e).type_ == NodeTag::T_OpExpr && total::integer_division((*op).opfuncid).is_some() {
                value(cx, e)
            } else {
                unless_constant(cx, e, cx.not_total(&total::describe_operator((*op).opno)))
            }
        }
        NodeTag::T_ScalarArrayOpExpr => {
            let s = e as *mut pg_sys::ScalarArrayOpExpr;
            if !total::is_comparison((*s).opno) {
                return unless_constant(cx, e, cx.not_total(&total::describe_operator((*s).opno)));
            }
            let args: Vec<*mut Node> = list_iter((*s).args).collect();
            collation_resolved(cx, e, &args, "comparison")?;
            for a in args {
                value(cx, a)?;
            }
            Ok(())
        }
        NodeTag::T_Const => constant_size(cx, e),
        _ if pg_sys::exprType(e) == pg_sys::BOOLOID => value(cx, e),
        t => unless_constant(cx, e, cx.not_total(&node_name(t))),
    }
}

unsafe fn like(cx: &Cx, op: *mut pg_sys::OpExpr, args: &[*mut Node]) -> Check<()> {
    let coll = (*op).inputcollid;
    if coll != pg_sys::InvalidOid && !pg_sys::get_collation_isdeterministic(coll) {
        return Err(cx.not_total("LIKE under a nondeterministic collation"));
    }
    // matching takes up to subject × pattern steps: what the analyst puts in the subject is small
    let subject = Cx { q: cx.q, func: cx.func, table: cx.table.clone(), max_const: cx.max_const.min(total::MAX_LIKE_SUBJECT_CONSTANT_BYTES) };
    value(&subject, args[0])?;
    let mut p = args[1];
    while (*p).type_ == NodeTag::T_RelabelType {
        p = (*(p as *mut pg_sys::RelabelType)).arg as *mut Node;
    }
    if (*p).type_ != NodeTag::T_Const || (*(p as *mut pg_sys::Const)).constisnull {
        return Err(cx.not_total("LIKE with a pattern that is not a literal"));
    }
    let c = p as *mut pg_sys::Const;
    let s = pg_sys::text_to_cstring((*c).constvalue.cast_mut_ptr());
    if let Some(problem) = total::like_pattern_problem(CStr::from_ptr(s).to_bytes()) {
        return Err(Refusal::new(format!("the LIKE pattern in the input of {} {problem}", cx.func)));
    }
    Ok(())
}

/// An integer literal, possibly cast between integer types.
unsafe fn const_int(mut e: *mut Node) -> Option<i64> {
    for _ in 0..8 {
        match (*e).type_ {
            NodeTag::T_Const => {
                let c = e as *mut pg_sys::Const;
                if (*c).constisnull {
                    return None;
                }
                let d = (*c).constvalue.value();
                return match (*c).consttype {
                    pg_sys::INT2OID => Some(d as i16 as i64),
                    pg_sys::INT4OID => Some(d as i32 as i64),
                    pg_sys::INT8OID => Some(d as i64),
                    _ => None,
                };
            }
            NodeTag::T_RelabelType => e = (*(e as *mut pg_sys::RelabelType)).arg as *mut Node,
            NodeTag::T_FuncExpr => {
                let f = e as *mut pg_sys::FuncExpr;
                let id = (*f).funcid.to_u32();
                let range = match id {
                    pg_sys::F_INT4_INT2 | pg_sys::F_INT8_INT2 | pg_sys::F_INT8_INT4 => i64::MIN..=i64::MAX,
                    pg_sys::F_INT2_INT4 | pg_sys::F_INT2_INT8 => i16::MIN as i64..=i16::MAX as i64,
                    pg_sys::F_INT4_INT8 => i32::MIN as i64..=i32::MAX as i64,
                    _ => return None,
                };
                // a narrowing cast of a literal: its value if it fits (otherwise it fails while planning)
                let v = const_int(list_iter::<Node>((*f).args).next()?)?;
                return range.contains(&v).then_some(v);
            }
            _ => return None,
        }
    }
    None
}

// ----- parameters ---------------------------------------------------------------------------

/// A parameter (ε, δ, p, a bound): a literal or a bind parameter, possibly cast or negated.
unsafe fn param(e: *mut Node, func: &str, name: &str) -> Check<ParamSource> {
    let refuse = |what: &str| {
        Refusal::new(format!("{name} of {func} must be a literal or a bind parameter ($1), not {what}"))
            .hint("the parameters must not depend on the data, and pg_dp reads them before the query runs")
    };
    let mut e = e;
    for _ in 0..16 {
        match (*e).type_ {
            NodeTag::T_Const => return Ok(ParamSource::Literal),
            NodeTag::T_Param => {
                let p = e as *mut pg_sys::Param;
                if (*p).paramkind == pg_sys::ParamKind::PARAM_EXTERN {
                    return Ok(ParamSource::Bind((*p).paramid as u32));
                }
                return Err(refuse("a value computed while the query runs"));
            }
            NodeTag::T_RelabelType => e = (*(e as *mut pg_sys::RelabelType)).arg as *mut Node,
            NodeTag::T_CoerceViaIO => e = (*(e as *mut pg_sys::CoerceViaIO)).arg as *mut Node,
            NodeTag::T_FuncExpr => {
                let f = e as *mut pg_sys::FuncExpr;
                let cast = matches!((*f).funcformat, pg_sys::CoercionForm::COERCE_IMPLICIT_CAST | pg_sys::CoercionForm::COERCE_EXPLICIT_CAST);
                let args: Vec<*mut Node> = list_iter((*f).args).collect();
                let extra_consts = args.iter().skip(1).all(|a| (**a).type_ == NodeTag::T_Const);
                if !cast || (*f).funcid.to_u32() >= pg_sys::FirstNormalObjectId || args.is_empty() || !extra_consts {
                    return Err(refuse("a function call"));
                }
                e = args[0];
            }
            NodeTag::T_OpExpr => {
                let op = e as *mut pg_sys::OpExpr;
                let args: Vec<*mut Node> = list_iter((*op).args).collect();
                let name_ = CStr::from_ptr(pg_sys::get_opname((*op).opno)).to_string_lossy().into_owned();
                if args.len() == 1 && (*op).opno.to_u32() < pg_sys::FirstNormalObjectId && (name_ == "-" || name_ == "+") {
                    e = args[0];
                } else {
                    return Err(refuse("an expression"));
                }
            }
            NodeTag::T_Var => return Err(refuse("a column")),
            NodeTag::T_SubLink | NodeTag::T_SubPlan => return Err(refuse("a subquery")),
            NodeTag::T_Aggref => return Err(refuse("an aggregate")),
            _ => return Err(refuse("an expression")),
        }
    }
    Err(refuse("an expression"))
}

// ----- names ------------------------------------------------------------------------------------

/// `table.column` for a plain column (through joins and subqueries), else `expression`.
unsafe fn describe_value(q: *mut Query, e: *mut Node) -> String {
    match value_column(q, e) {
        Some((relid, att)) => format!("{}.{}", protect::relation_short_name(relid), attname(relid, att)),
        None => "expression".into(),
    }
}

fn node_name(tag: NodeTag) -> String {
    let raw = format!("{tag:?}");
    let t = raw.trim_start_matches("T_");
    let words = match t {
        "RowExpr" => "row constructor",
        "FieldSelect" => "field selection",
        "SubscriptingRef" => "subscript",
        "ArrayCoerceExpr" => "array cast",
        "ConvertRowtypeExpr" => "row type conversion",
        "CollateExpr" => "COLLATE",
        "RowCompareExpr" => "row comparison",
        "XmlExpr" => "XML expression",
        "SQLValueFunction" => "SQL value function (CURRENT_DATE, CURRENT_USER, …)",
        "NextValueExpr" => "nextval",
        _ => t,
    };
    words.to_string()
}
