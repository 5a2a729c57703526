//! Admission and charging of planned statements: every pg_dp release is paid before the query reads
//! any data, and only the DP levels' own scans read protected tables.
//!
//! The ExecutorStart hook finds the DP Release nodes of the plan (release.rs). Only the planner hook
//! creates them, after the grammar admitted the level, and each carries the level's description.
//! The hook
//! 1. checks every scan of a protected table against the levels that read it (per-scan admission);
//! 2. refuses EXPLAIN (and EXPLAIN ANALYZE) of a plan that reads a protected table, for roles that
//!    may not read the table directly: the plan shows estimates computed from its data;
//! 3. lets the executor's permission check admit the protected tables of an admitted statement
//!    (`check_perms`, an ExecutorCheckPerms hook): every other read of a protected table (a raw
//!    SELECT that slipped past planning, COPY, a plan from elsewhere) is refused there;
//! 4. starts the executor, which checks privileges but reads no row;
//! 5. evaluates the parameters of every release (constants and bind parameters), builds one receipt
//!    per release, and has the ledger worker debit the whole query in the worker's own transaction
//!    (budget/charge.rs), reusing what the release cache holds. Only then can the query read data.
//!    Each paid aggregate gets a ticket (tickets.rs); its final function refuses to release without one.
//!
//! Composition: ε adds up across the aggregates of a query. One aggregate's GROUP BY groups are
//! disjoint sets of rows, so they cost its ε once (parallel composition, one row per person); each
//! grouping set is a separate release. A DP Release node runs its aggregation once per execution,
//! whatever the plan, so one payment covers every read of its rows.
use crate::execution::tickets::Ticket;
use crate::execution::release;
use crate::budget::charge::{charge_execution, execution_audit};
use crate::budget::receipts::receipts_of;
use crate::budget::ledger;
use crate::catalog::functions::{first_arg_type, kind_of};
use crate::catalog::protect;
use crate::pg::error::raise_with;
use crate::pg::fmgr::cstr_or;
use crate::pg::nodes::list_iter;
use crate::query::params::{eval_param_exprs, partial_aggref_args_in_plan, Paid, ParamValues};
use crate::catalog::functions::Kind;
use pg_dp_core::accounting::charge::Reuse;
use pg_dp_core::description::DpLevel;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use std::cell::Cell;
use std::collections::HashSet;
use std::ffi::{c_int as c_int_t, c_void};
use crate::execution::tickets::in_parallel_worker;

static mut PREV_EXECUTOR_START: pg_sys::ExecutorStart_hook_type = None;
static mut PREV_EXECUTOR_END: pg_sys::ExecutorEnd_hook_type = None;
static mut PREV_EXECUTOR_RUN: pg_sys::ExecutorRun_hook_type = None;
static mut PREV_CHECK_PERMS: pg_sys::ExecutorCheckPerms_hook_type = None;

thread_local! {
    /// The range table of the admitted statement being started: its protected tables pass the
    /// permission check.
    static ADMITTED: Cell<usize> = const { Cell::new(0) };
}

#[pg_guard]
unsafe extern "C-unwind" fn executor_start(qd: *mut pg_sys::QueryDesc, eflags: c_int_t) {
    let stmt = (*qd).plannedstmt;
    if in_parallel_worker() {
        // a worker runs part of a plan its leader admitted and paid for: the one whose rows go back
        // to the leader through the tuple queue. Any other statement started in the worker (by a
        // parallel-safe function, or an index expression of a parallel index build) was planned
        // there, charged nowhere and checked by no leader (EXPLAIN, instrumentation): a read of a
        // protected table by it is refused
        let leaders = !(*qd).dest.is_null() && (*(*qd).dest).mydest == pg_sys::CommandDest::DestTupleQueue;
        // for another statement, the releases name the sources a level over a Citus table reads
        // through dp.distributed_rows, which the plan's range table does not hold
        let restricted = restricted_protected_read(stmt, &if leaders { Vec::new() } else { find_releases(stmt) });
        if let (false, Some(relid)) = (leaders, restricted) {
            raise_with(
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!(
                    "a query on protected table {} inside a parallel worker: it would run unpaid and unchecked",
                    protect::relation_short_name(relid)
                ),
                Some("mark the function that runs it PARALLEL UNSAFE, or run the query directly"),
            );
        }
        if restricted.is_some() {
            // a worker sends its notices to the leader, and a warning raised in a worker's part of a
            // DP level (the first use of a collation in that process, say) would depend on the rows
            // the worker met: workers of such a plan send none (errors still go, and fail closed)
            // (the GUC machinery refuses changes in a parallel worker; the worker ends with its query)
            pg_sys::client_min_messages = pgrx::PgLogLevel::ERROR as i32;
        }
        with_admitted((*stmt).rtable, || start_next(qd, eflags));
        return;
    }
    let flags = eflags as u32;
    let explain_only = flags & pg_sys::EXEC_FLAG_EXPLAIN_ONLY != 0;
    if !explain_only {
        // the relations it writes make their cached releases stale
        crate::budget::cache::note_statement(stmt);
        // a plan with a constant read from the clock is planned again in the next transaction:
        // the invalidation of dp.clock, queued now, reaches every plan cache at commit
        if crate::query::clock::depends_on_clock((*stmt).relationOids) {
            if let Some(r) = crate::query::clock::clock_relid() {
                pg_sys::CacheInvalidateRelcacheByRelid(r);
            }
        }
    }
    let releases = find_releases(stmt);
    if let Some(relid) = restricted_protected_read(stmt, &releases) {
        refuse_leaks_of_protected(relid, explain_only || (*qd).instrument_options != 0);
        refuse_under_instrumentation("a query on protected table", relid);
        if !explain_only {
            // checked again each time it runs: a cursor started before an EXPLAIN ANALYZE can be
            // fetched inside it
            RESTRICTED.with(|v| v.borrow_mut().push((qd as usize, relid.to_u32())));
        }
    }
    if !releases.is_empty() {
        // the statement's range table passes the permission check as a whole (check_perms), so
        // each scan of a protected table is checked here: it must be a DP level's own input
        if let Some(relid) = unadmitted_scan(stmt) {
            protect::refuse_raw_access(relid, "read it only through DP aggregates, and this statement also reads it outside a DP query's input");
        }
    }
    let me = pg_sys::GetUserId().to_u32();
    if releases.iter().any(|r| crate::execution::fail_closed::forfeits(&r.level)) {
        if let Some((n, bytes)) = crate::query::params::oversized_bind_param((*qd).params) {
            raise_with(
                PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                format!(
                    "bind parameter ${n} of a DP query on a protected table is {bytes} bytes: parameters there are at most {} bytes",
                    crate::query::total::MAX_CONSTANT_BYTES
                ),
                None,
            );
        }
    }
    if pg_sys::XactIsoLevel == pg_sys::XACT_SERIALIZABLE as i32 {
        if let Some(r) = releases.iter().find(|r| crate::execution::fail_closed::forfeits(&r.level)) {
            // serializable snapshot isolation records what a scan read (predicate locks, visible in
            // pg_locks, and the serialization failures they cause): an index scan or a join probe of
            // a level would show which rows passed its filters
            raise_with(
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!(
                    "DP query on protected table {} in a SERIALIZABLE transaction: its predicate locks would show which rows the query read",
                    protect::relation_short_name(r.level.source.oid.into())
                ),
                Some("run it in a READ COMMITTED or REPEATABLE READ transaction"),
            );
        }
    }
    if releases.iter().any(|r| r.level.source.protected && r.level.role != me) {
        raise_with(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            "pg_dp: this plan was checked for another role; prepare the statement again".into(),
            None,
        );
    }
    // Start first: it checks the caller's privileges on every table but reads no row (scans, parallel
    // workers and InitPlans all begin in ExecutorRun). A refused query is thus never charged, and a
    // charged query is paid before its first row is read.
    let admitted = if !releases.is_empty() || probe_reads_nothing(stmt) { (*stmt).rtable } else { std::ptr::null_mut() };
    with_admitted(admitted, || start_next(qd, eflags));
    if !explain_only && (*qd).instrument_options != 0 {
        INSTRUMENTED.with(|v| v.borrow_mut().push(qd as usize));
    }
    if !releases.is_empty() {
        forget_stale(qd, &releases);
    }
    let no_data = flags & pg_sys::EXEC_FLAG_WITH_NO_DATA != 0;
    if !explain_only && !no_data && !releases.is_empty() {
        let dead = releases_that_never_run(stmt);
        let live: Vec<Release> = releases.into_iter().filter(|r| !dead.contains(&(r.node as usize))).collect();
        if !live.is_empty() {
            charge_releases(qd, &live);
        }
    }
}

/// A schema probe whose DP levels the planner removed: a constant-false condition over them (Spark's
/// `SELECT * FROM (<query>) SPARK_GEN_SUBQ_0 WHERE 1=0`) makes their relations dummy, and the plan
/// keeps only their columns. It is admitted, free, if it is a SELECT without data-modifying WITH
/// queries, every protected table of its range table was admitted by the grammar (pg_dp waived its
/// SELECT privilege, and nothing writes it), and no node of the plan scans a protected table: it
/// reads no protected row and runs no level.
unsafe fn probe_reads_nothing(stmt: *mut pg_sys::PlannedStmt) -> bool {
    if (*stmt).commandType != pg_sys::CmdType::CMD_SELECT || (*stmt).hasModifyingCTE {
        return false;
    }
    let perms = (pg_sys::ACL_SELECT | pg_sys::ACL_INSERT | pg_sys::ACL_UPDATE | pg_sys::ACL_DELETE) as pg_sys::AclMode;
    let mut any = false;
    for rte in list_iter::<pg_sys::RangeTblEntry>((*stmt).rtable) {
        if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION {
            continue;
        }
        let relid = (*rte).relid;
        if protect::is_protected(relid) && !protect::exempt(relid) {
            if (*rte).requiredPerms & perms != 0 {
                return false;
            }
            any = true;
        }
    }
    any && unadmitted_scan(stmt).is_none()
}

/// The DP Release nodes that cannot run: those below a `LIMIT 0` (a literal count, a literal or no
/// OFFSET, no subplan attached to the Limit node), in the main plan or in a subplan's own tree. A
/// Limit node with count 0 returns before it asks its input for a row, at every execution and
/// rescan, so nothing below it runs: the column probes of BI tools and drivers (`LIMIT 0` at the top
/// or around a subquery) are charged nothing. A release reached through a subplan (a WITH query, an
/// InitPlan) is not below the Limit in this sense and is charged. With a data-modifying WITH query,
/// which PostgreSQL runs to completion whatever the LIMIT, every release is charged. If a release
/// ran anyway, its final function would find no ticket and refuse (check_ticket), and the error
/// inside an admitted level would forfeit the role's budget (fail_closed.rs).
unsafe fn releases_that_never_run(stmt: *mut pg_sys::PlannedStmt) -> HashSet<usize> {
    unsafe fn limit_zero(p: *mut pg_sys::Plan) -> bool {
        if (*p).type_ != pg_sys::NodeTag::T_Limit || !(*p).initPlan.is_null() {
            return false;
        }
        let limit = p as *mut pg_sys::Limit;
        let offset = (*limit).limitOffset as *mut pg_sys::Node;
        if !offset.is_null() && (*offset).type_ != pg_sys::NodeTag::T_Const {
            return false;
        }
        let count = (*limit).limitCount as *mut pg_sys::Node;
        if count.is_null() || (*count).type_ != pg_sys::NodeTag::T_Const {
            return false;
        }
        let c = count as *mut pg_sys::Const;
        !(*c).constisnull && (*c).consttype == pg_sys::INT8OID && (*c).constvalue.value() as i64 == 0
    }
    unsafe fn walk(p: *mut pg_sys::Plan, below_zero: bool, out: &mut HashSet<usize>) {
        if p.is_null() {
            return;
        }
        let below_zero = below_zero || limit_zero(p);
        if below_zero && release::is_release(p) {
            out.insert(p as usize);
        }
        for c in release::child_plans(p) {
            walk(c, below_zero, out);
        }
    }
    let mut out = HashSet::new();
    if (*stmt).hasModifyingCTE {
        return out;
    }
    walk((*stmt).planTree, false, &mut out);
    for sub in list_iter::<pg_sys::Plan>((*stmt).subplans) {
        walk(sub, false, &mut out);
    }
    out
}

/// A statement that starts owns its executor state's addresses: whatever pg_dp still keeps under
/// them (its EState, its aggregate calls, its aggregations' states) was left by a statement that
/// ended without ExecutorEnd (a cursor that failed and was closed, a portal dropped at the end of
/// a subtransaction) and goes now, before this statement can take it for its own.
unsafe fn forget_stale(qd: *mut pg_sys::QueryDesc, releases: &[Release]) {
    crate::budget::cache::forget((*qd).estate as usize);
    let calls: Vec<usize> = releases.iter().flat_map(|r| release::tagged_aggrefs(r.agg)).map(|a| a as usize).collect();
    let mut states: Vec<usize> = Vec::new();
    #[pg_guard]
    unsafe extern "C-unwind" fn collect_aggstates(ps: *mut pg_sys::PlanState, ctx: *mut c_void) -> bool {
        if ps.is_null() {
            return false;
        }
        if (*ps).type_ == pg_sys::NodeTag::T_AggState {
            (*(ctx as *mut Vec<usize>)).push(ps as usize);
        }
        pg_sys::planstate_tree_walker(ps, Some(collect_aggstates), ctx)
    }
    collect_aggstates((*qd).planstate, &mut states as *mut Vec<usize> as *mut c_void);
    crate::execution::tickets::forget((*qd).estate as usize, &states);
    crate::execution::recent::forget(&calls);
    crate::execution::distributed_rows::forget();
}

/// Admission per scan. The planner can add scans the grammar never saw: a SQL function inlined in
/// the post-processing of a DP query, a second reference to a protected table in another part of
/// the statement. Every scan of a protected table that the role may not read directly must lie in
/// the input of a DP Release node whose level reads that table (or a table it is a partition or
/// child of). Subplans are walked on their own: the grammar admits no subquery in a level's input,
/// so a protected scan in a subplan is admitted only under a release node of that subplan.
/// Returns the first protected table read outside, if any.
unsafe fn unadmitted_scan(stmt: *mut pg_sys::PlannedStmt) -> Option<pg_sys::Oid> {
    unsafe fn scanned(p: *mut pg_sys::Plan) -> Vec<pg_sys::Index> {
        use pg_sys::NodeTag::*;
        let relids_of = |b: *mut pg_sys::Bitmapset| {
            let mut out = Vec::new();
            let mut i = -1;
            loop {
                i = pg_sys::bms_next_member(b, i);
                if i < 0 {
                    break out;
                }
                out.push(i as pg_sys::Index);
            }
        };
        match (*p).type_ {
            T_SeqScan | T_SampleScan | T_IndexScan | T_IndexOnlyScan | T_BitmapIndexScan | T_BitmapHeapScan | T_TidScan
            | T_TidRangeScan => vec![(*(p as *mut pg_sys::Scan)).scanrelid],
            T_ForeignScan => {
                let f = p as *mut pg_sys::ForeignScan;
                let mut v = relids_of((*f).fs_relids);
                v.push((*f).scan.scanrelid);
                v
            }
            T_CustomScan => {
                let c = p as *mut pg_sys::CustomScan;
                let mut v = relids_of((*c).custom_relids);
                v.push((*c).scan.scanrelid);
                v
            }
            _ => Vec::new(),
        }
    }
    unsafe fn walk(stmt: *mut pg_sys::PlannedStmt, p: *mut pg_sys::Plan, sources: &mut Vec<pg_sys::Oid>) -> Option<pg_sys::Oid> {
        if p.is_null() {
            return None;
        }
        let before = sources.len();
        if release::is_release(p) {
            // a level over a Citus table reads through dp.distributed_rows: no source scan below
            if let Some(level) = release::level_of(p).filter(|l| l.exact_query.is_none()) {
                sources.extend(level.reads.iter().map(|r| pg_sys::Oid::from(*r)));
            }
        }
        let mut found = None;
        for idx in scanned(p) {
            let rte = crate::query::tree::rt_fetch_list((*stmt).rtable, idx as i32);
            if rte.is_null() || (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION {
                continue;
            }
            let relid = (*rte).relid;
            if !protect::is_protected(relid) || protect::exempt(relid) {
                continue;
            }
            let admitted = sources.contains(&relid) || protect::ancestors(relid).iter().any(|a| sources.contains(a));
            if !admitted {
                found = Some(relid);
                break;
            }
        }
        if found.is_none() {
            for c in release::child_plans(p) {
                found = walk(stmt, c, sources);
                if found.is_some() {
                    break;
                }
            }
        }
        sources.truncate(before);
        found
    }
    let mut sources = Vec::new();
    if let Some(r) = walk(stmt, (*stmt).planTree, &mut sources) {
        return Some(r);
    }
    for sub in list_iter::<pg_sys::Plan>((*stmt).subplans) {
        if let Some(r) = walk(stmt, sub, &mut sources) {
            return Some(r);
        }
    }
    None
}

unsafe fn start_next(qd: *mut pg_sys::QueryDesc, eflags: c_int_t) {
    match PREV_EXECUTOR_START {
        Some(prev) => pg_sys::ffi::pg_guard_ffi_boundary(|| prev(qd, eflags)),
        None => pg_sys::standard_ExecutorStart(qd, eflags),
    }
}

/// Runs `f` with `rtable` as the admitted range table, restoring the previous one afterwards.
unsafe fn with_admitted(rtable: *mut pg_sys::List, f: impl FnOnce()) {
    let before = ADMITTED.with(|a| a.replace(rtable as usize));
    let f = std::panic::AssertUnwindSafe(f);
    PgTryBuilder::new(move || {
        let f = f;
        (f.0)()
    })
    .finally(|| ADMITTED.with(|a| a.set(before)))
    .execute();
}

/// The permission hook: a protected table may be read only by an admitted statement, or by a role
/// exempt from protection. Runs for every query, COPY and other permission check.
#[pg_guard]
unsafe extern "C-unwind" fn check_perms(rtable: *mut pg_sys::List, ereport: bool) -> bool {
    let admitted = ADMITTED.with(|a| a.get()) == rtable as usize && !rtable.is_null();
    if !admitted {
        for rte in list_iter::<pg_sys::RangeTblEntry>(rtable) {
            if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION {
                continue;
            }
            let relid = (*rte).relid;
            if protect::is_protected(relid) && !protect::exempt(relid) {
                if !ereport {
                    return false;
                }
                let writes = (*rte).requiredPerms & ((pg_sys::ACL_INSERT | pg_sys::ACL_UPDATE | pg_sys::ACL_DELETE) as pg_sys::AclMode) != 0;
                let what = if writes { "not insert into, update or delete from it" } else { "read it only through DP aggregates" };
                protect::refuse_raw_access(relid, what);
            }
        }
    }
    match PREV_CHECK_PERMS {
        Some(prev) => pg_sys::ffi::pg_guard_ffi_boundary(|| prev(rtable, ereport)),
        None => true,
    }
}

/// A protected table the plan reads that the current role may not read directly, if any. A level
/// over a Citus table reads its source through dp.distributed_rows, not the plan's range table (its
/// plan would show the exact query's rows and groups under EXPLAIN ANALYZE).
unsafe fn restricted_protected_read(stmt: *mut pg_sys::PlannedStmt, releases: &[Release]) -> Option<pg_sys::Oid> {
    let distributed_sources = releases.iter().filter(|r| r.level.exact_query.is_some()).map(|r| r.level.source.oid.into());
    list_iter::<pg_sys::RangeTblEntry>((*stmt).rtable)
        .filter(|rte| (**rte).rtekind == pg_sys::RTEKind::RTE_RELATION)
        .map(|rte| (*rte).relid)
        .chain(distributed_sources)
        .find(|relid| protect::is_protected(*relid) && !protect::exempt(*relid))
}

thread_local! {
    /// The statements of this backend executed with instrumentation (EXPLAIN ANALYZE), by the
    /// address of their QueryDesc, from ExecutorStart to ExecutorEnd. One that failed inside a
    /// subtransaction stays until the transaction ends:
    /// later reads of protected tables in that transaction are refused (fail closed), never admitted.
    static INSTRUMENTED: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
    /// The EXPLAIN and maintenance statements running (lifecycle.rs), by the address of their
    /// PlannedStmt and their kind, from the start of the utility call to its end (an error
    /// included). Not cleared at transaction end: VACUUM commits transactions inside itself.
    static UTILITY_MARKS: std::cell::RefCell<Vec<(usize, &'static str)>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Started statements that read a protected table the role may not read directly (QueryDesc
    /// address, table), until their ExecutorEnd.
    static RESTRICTED: std::cell::RefCell<Vec<(usize, u32)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Marks an EXPLAIN or maintenance statement running (see UTILITY_MARKS).
pub fn begin_utility_mark(key: usize, kind: &'static str) {
    UTILITY_MARKS.with(|v| v.borrow_mut().push((key, kind)));
}

/// Ends the mark of [`begin_utility_mark`].
pub fn end_utility_mark(key: usize) {
    UTILITY_MARKS.with(|v| remove_last(&mut v.borrow_mut(), |&(x, _)| x == key));
}

/// Removes the last entry of `v` that `is` picks (the newest of the same key: an address freed
/// and reused by a nested statement), if any.
fn remove_last<T>(v: &mut Vec<T>, is: impl Fn(&T) -> bool) {
    if let Some(i) = v.iter().rposition(is) {
        v.remove(i);
    }
}

/// Each run of a started statement that reads a protected table is refused while instrumentation
/// runs (a cursor declared before an EXPLAIN ANALYZE, fetched inside it by a function), before its
/// rows are read. The statement was paid when it started; the refusal depends only on the
/// statements, not on the data.
#[pg_guard]
unsafe extern "C-unwind" fn executor_run(qd: *mut pg_sys::QueryDesc, direction: pg_sys::ScanDirection::Type, count: u64, execute_once: bool) {
    let q = qd as usize;
    if let Some(relid) = RESTRICTED.with(|v| v.borrow().iter().rev().find(|&&(x, _)| x == q).map(|&(_, r)| r)) {
        refuse_under_instrumentation("a query on protected table", pg_sys::Oid::from(relid));
    }
    match PREV_EXECUTOR_RUN {
        Some(prev) => pg_sys::ffi::pg_guard_ffi_boundary(|| prev(qd, direction, count, execute_once)),
        None => pg_sys::standard_ExecutorRun(qd, direction, count, execute_once),
    }
}

/// Refuses a read of protected table `relid` (a DP query, or a table release: `what` says which)
/// while a statement of this backend runs under EXPLAIN (planned or executed) or a maintenance
/// command that evaluates index expressions (VACUUM, ANALYZE, CLUSTER, REINDEX, CREATE INDEX),
/// whatever reaches it (a function, a trigger, an index expression, an OID argument): the outer
/// statement's buffer counts (EXPLAIN's BUFFERS, VACUUM VERBOSE's buffer usage), rows and times
/// include the inner reads, and the buffers touched by an index scan or a filter are exact,
/// noise-free counts of the rows that match. Depends only on the statements, before anything is
/// charged.
pub unsafe fn refuse_under_instrumentation(what: &str, relid: pg_sys::Oid) {
    let outer = UTILITY_MARKS.with(|v| v.borrow().first().map(|&(_, k)| k));
    if let Some(kind) = outer.or_else(|| INSTRUMENTED.with(|v| (!v.borrow().is_empty()).then_some("EXPLAIN ANALYZE"))) {
        raise_with(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!(
                "{what} {} inside {kind}: the statement's buffer, row and time counts would describe its data",
                protect::relation_short_name(relid)
            ),
            Some("run it on its own, outside EXPLAIN and maintenance commands"),
        );
    }
}

/// EXPLAIN prints the planner's estimates, computed from the statistics of every table the plan
/// reads, and `trace_sort` prints the sorts the executor runs: both are refused on a protected
/// table to roles that may not read it directly.
unsafe fn refuse_leaks_of_protected(relid: pg_sys::Oid, explain: bool) {
    if explain {
        raise_with(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!(
                "EXPLAIN of a query on protected table {}: the plan shows estimates computed from its data",
                protect::relation_short_name(relid)
            ),
            Some("run the query itself; a superuser, the owner or a trusted role can EXPLAIN it"),
        );
    }
    if let Some(r) = crate::query::grammar::leaky_setting(false) {
        raise_with(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, r.message, r.hint.as_deref());
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn executor_end(qd: *mut pg_sys::QueryDesc) {
    let q = qd as usize;
    INSTRUMENTED.with(|v| remove_last(&mut v.borrow_mut(), |&x| x == q));
    RESTRICTED.with(|v| remove_last(&mut v.borrow_mut(), |&(x, _)| x == q));
    crate::execution::tickets::end_query(q);
    if !(*qd).estate.is_null() {
        crate::budget::cache::forget((*qd).estate as usize);
    }
    match PREV_EXECUTOR_END {
        Some(prev) => pg_sys::ffi::pg_guard_ffi_boundary(|| prev(qd)),
        None => pg_sys::standard_ExecutorEnd(qd),
    }
}

/// A subtransaction aborted (ROLLBACK TO SAVEPOINT, a PL/pgSQL exception handler): the statements
/// that failed in it never reached ExecutorEnd, and whatever they left keyed by the addresses of
/// their executor state (tickets, twin values, cache actions, pending releases, an authorized exact
/// query) goes with them before a later statement can reuse those addresses.
#[pg_guard]
unsafe extern "C-unwind" fn subxact_end(
    event: pg_sys::SubXactEvent::Type,
    sub: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut c_void,
) {
    if event == pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB {
        crate::execution::tickets::abort_sub(sub);
        crate::budget::cache::abort_sub(sub);
        crate::execution::recent::abort_sub(sub);
        crate::execution::distributed_rows::abort_sub(sub);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn xact_end(event: pg_sys::XactEvent::Type, _arg: *mut c_void) {
    if event == pg_sys::XactEvent::XACT_EVENT_COMMIT
        || event == pg_sys::XactEvent::XACT_EVENT_ABORT
        || event == pg_sys::XactEvent::XACT_EVENT_PARALLEL_COMMIT
        || event == pg_sys::XactEvent::XACT_EVENT_PARALLEL_ABORT
    {
        crate::execution::tickets::end_transaction();
        INSTRUMENTED.with(|v| v.borrow_mut().clear());
        RESTRICTED.with(|v| v.borrow_mut().clear());
        crate::execution::recent::clear_pending();
        crate::execution::distributed_rows::forget();
    }
}

/// A DP Release node of the plan: the level it releases and its aggregation.
struct Release {
    level: DpLevel,
    /// the DP Release node
    node: *mut pg_sys::Plan,
    agg: *mut pg_sys::Plan,
}

/// Every DP Release node of a statement. A finalizing aggregation of pg_dp aggregates outside a
/// release node never passed the grammar: the query is refused (this cannot happen for plans made
/// by the planner hook).
unsafe fn find_releases(stmt: *mut pg_sys::PlannedStmt) -> Vec<Release> {
    let mut out = Vec::new();
    let mut covered: HashSet<usize> = HashSet::new();
    let mut aggs: Vec<*mut pg_sys::Plan> = Vec::new();
    release::for_each_plan(stmt, &mut |p| {
        if release::is_release(p) {
            let level = release::level_of(p).unwrap_or_else(|| {
                raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, "pg_dp: unreadable description in a DP Release node".into(), None)
            });
            covered.insert((*p).lefttree as usize);
            out.push(Release { level, node: p, agg: (*p).lefttree });
        } else if (*p).type_ == pg_sys::NodeTag::T_Agg && (*(p as *mut pg_sys::Agg)).aggsplit & pg_sys::AGGSPLITOP_SKIPFINAL == 0 {
            aggs.push(p);
        }
    });
    for a in aggs {
        if covered.contains(&(a as usize)) {
            continue;
        }
        let mut found: Vec<*mut pg_sys::Node> = Vec::new();
        crate::pg::nodes::collect_nodes((*a).targetlist as *mut pg_sys::Node, &[pg_sys::NodeTag::T_Aggref], &mut found);
        crate::pg::nodes::collect_nodes((*a).qual as *mut pg_sys::Node, &[pg_sys::NodeTag::T_Aggref], &mut found);
        for n in found {
            let aggref = n as *mut pg_sys::Aggref;
            if let Some(k) = kind_of((*aggref).aggfnoid, first_arg_type(aggref)) {
                raise_with(
                    PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                    format!("pg_dp: {} in a plan that did not pass the DP query check", k.func()),
                    Some("pg_dp must be in shared_preload_libraries"),
                );
            }
        }
    }
    out
}

/// The parameters of a release, evaluated before execution (constants and bind parameters).
unsafe fn params_of(kind: Kind, aggref: *mut pg_sys::Aggref, agg_plan: *mut pg_sys::Plan, qd: *mut pg_sys::QueryDesc) -> Paid {
    let func = kind.func();
    let mut args = (*aggref).args;
    if (*aggref).aggsplit & pg_sys::AGGSPLITOP_COMBINE != 0 {
        args = partial_aggref_args_in_plan(agg_plan, args).unwrap_or_else(|| {
            raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("{func}: cannot find the partial aggregate of a parallel plan"), None)
        });
    }
    let params = (*qd).params;
    let econtext = pg_sys::CreateStandaloneExprContext();
    (*econtext).ecxt_param_list_info = params;
    let names = kind.param_names();
    let vals = eval_param_exprs(args, econtext, func, |i| names.get(i).copied().unwrap_or("parameter"), |expr| {
        pg_sys::ExecInitExprWithParams(expr, params)
    });
    ParamValues::new(vals, func).paid(kind)
}

/// Builds the receipts of every release of the plan, charges them in one request, and hands out
/// the tickets. A release found in the release cache (cache.rs) is not charged: its node replays the
/// cached rows, and the request records a receipt of the reuse at ε = 0.
unsafe fn charge_releases(qd: *mut pg_sys::QueryDesc, releases: &[Release]) {
    ledger::require_preloaded("charge privacy budgets");
    let cache = crate::budget::cache::statement(qd);
    let execution = execution_audit();
    let exec_id = execution["id"].as_str().unwrap_or_default().to_string();
    let estate = (*qd).estate;
    let mut records = Vec::new();
    let mut reused = Vec::new();
    let mut tickets = Vec::new();
    // what the release nodes do with the cache is registered only once the ledger has granted the
    // request: a refused charge leaves no replay or store behind for a later statement
    let mut replays: Vec<(*mut pg_sys::Plan, Vec<u8>)> = Vec::new();
    let mut stores: Vec<(*mut pg_sys::Plan, Vec<u8>, crate::budget::cache::Versions, String)> = Vec::new();
    for r in releases {
        let single = (*(r.agg as *mut pg_sys::Agg)).aggstrategy == pg_sys::AggStrategy::AGG_PLAIN;
        let mut charged_tags: HashSet<i32> = HashSet::new();
        let mut level_records = Vec::new();
        let mut level_tickets = Vec::new();
        for aggref in release::tagged_aggrefs(r.agg) {
            let Some(described) = r.level.aggregate((*aggref).location) else {
                raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, "pg_dp: a released aggregate is missing from its description".into(), None);
            };
            let kind = kind_of((*aggref).aggfnoid, first_arg_type(aggref))
                .unwrap_or_else(|| raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, "pg_dp: a tagged aggregate is not a pg_dp aggregate".into(), None));
            let params = params_of(kind, aggref, r.agg, qd);
            // a call written twice (one tag, grammar.rs) is one release: one receipt, one value
            let twin = !charged_tags.insert((*aggref).location);
            if !twin {
                level_records.extend(receipts_of(&r.level, described, kind, params));
            }
            level_tickets.push((((*qd).estate as usize, aggref as usize), Ticket { query: qd as usize, params, single, releases: 0, twin, sub: 0 }));
        }
        // the key: the level's own (whatever the statement does with its rows), who may reuse it,
        // its receipts in a canonical order, the parameters; at the versions of what it reads (none
        // of it is computed when the cache is off)
        let cached = cache.as_ref().and_then(|c| {
            let level = release::cache_key_of(r.node)?;
            let versions = c.versions(&release::relations_of(r.node))?;
            let mut receipts: Vec<String> = level_records.iter().map(|x| serde_json::to_string(x).unwrap_or_default()).collect();
            receipts.sort();
            Some((c.key(&level, &reuser(), &receipts.join("\n")), versions))
        });
        if let Some((key, versions)) = cached {
            let columns = release::columns_of(r.node);
            match crate::budget::cache::lookup(&versions, &key).filter(|hit| crate::budget::cache::fits(&hit.rows, &columns)) {
                Some(hit) => {
                    reused.push(Reuse {
                        execution: hit.execution.clone(),
                        epsilons: level_records.iter().map(|r| r.epsilon.clone()).collect(),
                        deltas: level_records.iter().map(|r| r.delta.clone()).collect(),
                    });
                    replays.push((r.node, hit.rows));
                    continue;
                }
                None => stores.push((r.node, key, versions, columns)),
            }
        }
        records.extend(level_records);
        tickets.extend(level_tickets);
    }
    let stmt = (*qd).plannedstmt;
    // a statement served wholly from the cache sends no query text: nothing new is recorded of it
    let text = if records.is_empty() { String::new() } else { cstr_or((*qd).sourceText, "") };
    charge_execution(records, reused, (*stmt).queryId as i64, text, execution);
    for (node, rows) in replays {
        crate::budget::cache::replay(estate, node, rows);
    }
    for (node, key, versions, columns) in stores {
        crate::budget::cache::store_when_done(estate, node, versions, key, columns, &exec_id);
    }
    crate::execution::tickets::grant(tickets);
}

/// Who may reuse a release: anyone of the database who could have bought it when the DBA shares
/// releases across roles (`dp.release_cache_sharing`), else only the role that paid for it.
unsafe fn reuser() -> String {
    if crate::budget::cache::shared_across_roles() {
        String::new()
    } else {
        format!("role:{}", crate::catalog::identity::key_of(pg_sys::GetUserId()))
    }
}

pub fn init() {
    unsafe {
        PREV_EXECUTOR_START = pg_sys::ExecutorStart_hook;
        pg_sys::ExecutorStart_hook = Some(executor_start);
        PREV_EXECUTOR_END = pg_sys::ExecutorEnd_hook;
        pg_sys::ExecutorEnd_hook = Some(executor_end);
        PREV_EXECUTOR_RUN = pg_sys::ExecutorRun_hook;
        pg_sys::ExecutorRun_hook = Some(executor_run);
        PREV_CHECK_PERMS = pg_sys::ExecutorCheckPerms_hook;
        pg_sys::ExecutorCheckPerms_hook = Some(check_perms);
        pg_sys::RegisterXactCallback(Some(xact_end), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(subxact_end), std::ptr::null_mut());
    }
}
