//! Plans that do not depend on the data: a statement that reads a protected table for a role that
//! may read it only through DP queries is planned from public facts alone.
//!
//! The planner estimates from the data: a table's size (its file), row count and visibility map
//! (pg_class), per-column statistics (pg_statistic, extended statistics), the height of an index,
//! and for a range beyond the histogram the actual smallest or largest value, read from an index at
//! planning time. Every choice it makes follows from those estimates, and an analyst can see the
//! choices without EXPLAIN: whether the plan cache switches to a generic plan
//! (`pg_prepared_statements`), whether JIT compiles the query (`jit_above_cost`, seen in its time),
//! whether parallel workers start (`pg_stat_activity`). With `LIMIT 0` nothing even runs. So while
//! such a statement is planned, the hooks below give the planner fixed figures for every protected
//! relation and its indexes (`dp.planning_rows` rows, 10,000 by default, 100 to a page, no statistics, average column
//! widths of 32 bytes): estimates, costs and choices then depend only on the query, the catalog and
//! the settings. Indexes whose cost estimate reads the index itself (GIN, BRIN) are left out of
//! such plans. Public tables keep their statistics.
use crate::catalog::protect;
use pgrx::pg_sys;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};
use std::cell::Cell;

/// Rows assumed for every protected relation while planning for a restricted role (superuser only).
/// The default, 10,000 rows in 100 pages, is below PostgreSQL's threshold for a parallel scan: a
/// parallel plan starts its workers for every query, which costs more than it saves on the small
/// tables most DP queries read (a 1,000-row table ran 212 queries a second with parallel plans
/// against 1,819 without). A DBA with large protected tables raises it for their database or roles.
pub static PLANNING_ROWS: GucSetting<i32> = GucSetting::<i32>::new(10_000);

const ROWS_PER_PAGE: f64 = 100.0;
const INDEX_ROWS_PER_PAGE: f64 = 300.0;
const COLUMN_WIDTH: i32 = 32;

static mut PREV_RELATION_INFO: pg_sys::get_relation_info_hook_type = None;
static mut PREV_RELATION_STATS: pg_sys::get_relation_stats_hook_type = None;
static mut PREV_INDEX_STATS: pg_sys::get_index_stats_hook_type = None;
static mut PREV_WIDTH: pg_sys::get_attavgwidth_hook_type = None;

thread_local! {
    /// Depth of plannings of statements that read a protected table for a restricted role.
    static BLIND: Cell<u32> = const { Cell::new(0) };
}

pub fn init() {
    GucRegistry::define_int_guc(
        c"dp.planning_rows",
        c"Rows the planner assumes in every protected table when it plans a DP query of a role that reads it only through DP queries (superuser only).",
        c"The planner's estimates of such a query come from public facts only, so that no plan choice depends on the data. At 102,400 rows or more (1,024 pages, min_parallel_table_scan_size) plans may run in parallel. Valid range 1 to 2000000000.",
        &PLANNING_ROWS,
        1,
        2_000_000_000,
        GucContext::Suset,
        GucFlags::default(),
    );
    unsafe {
        PREV_RELATION_INFO = pg_sys::get_relation_info_hook;
        pg_sys::get_relation_info_hook = Some(relation_info);
        PREV_RELATION_STATS = pg_sys::get_relation_stats_hook;
        pg_sys::get_relation_stats_hook = Some(relation_stats);
        PREV_INDEX_STATS = pg_sys::get_index_stats_hook;
        pg_sys::get_index_stats_hook = Some(index_stats);
        PREV_WIDTH = pg_sys::get_attavgwidth_hook;
        pg_sys::get_attavgwidth_hook = Some(attavgwidth);
    }
}

/// Runs `plan` with the protected relations' estimates replaced by the fixed figures.
pub fn blind<T>(plan: impl FnOnce() -> T) -> T {
    BLIND.with(|b| b.set(b.get() + 1));
    let plan = std::panic::AssertUnwindSafe(plan);
    pgrx::PgTryBuilder::new(move || {
        let plan = plan;
        (plan.0)()
    })
    .finally(|| BLIND.with(|b| b.set(b.get().saturating_sub(1))))
    .execute()
}

fn blinded(relid: pg_sys::Oid) -> bool {
    BLIND.with(|b| b.get() > 0) && protect::is_protected(relid)
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn relation_info(root: *mut pg_sys::PlannerInfo, relid: pg_sys::Oid, inhparent: bool, rel: *mut pg_sys::RelOptInfo) {
    if let Some(prev) = PREV_RELATION_INFO {
        pg_sys::ffi::pg_guard_ffi_boundary(|| prev(root, relid, inhparent, rel));
    }
    if !blinded(relid) {
        return;
    }
    let rows = PLANNING_ROWS.get().max(1) as f64;
    (*rel).tuples = rows;
    (*rel).pages = (rows / ROWS_PER_PAGE).ceil().max(1.0) as pg_sys::BlockNumber;
    (*rel).allvisfrac = 0.0;
    // extended statistics are data too
    (*rel).statlist = std::ptr::null_mut();
    // the cost estimates of GIN and BRIN indexes (and of other access methods) read the index
    // itself (GIN's metapage, BRIN's range map): only those that estimate from the figures below
    // stay
    let mut kept: *mut pg_sys::List = std::ptr::null_mut();
    for info in crate::pg::nodes::list_iter::<pg_sys::IndexOptInfo>((*rel).indexlist) {
        if !ESTIMATED_FROM_FIGURES.contains(&(*info).relam) {
            continue;
        }
        (*info).tuples = rows;
        (*info).pages = (rows / INDEX_ROWS_PER_PAGE).ceil().max(1.0) as pg_sys::BlockNumber;
        (*info).tree_height = 2;
        kept = pg_sys::lappend(kept, info as *mut std::ffi::c_void);
    }
    (*rel).indexlist = kept;
}

/// Index access methods whose cost estimate uses only the planner's figures and statistics (which
/// the hooks here replace): B-tree, hash, GiST and SP-GiST.
const ESTIMATED_FROM_FIGURES: [pg_sys::Oid; 4] = [pg_sys::BTREE_AM_OID, pg_sys::HASH_AM_OID, pg_sys::GIST_AM_OID, pg_sys::SPGIST_AM_OID];

/// No statistics for the columns of a protected relation (the planner then uses its defaults).
unsafe fn no_stats(vardata: *mut pg_sys::VariableStatData) -> bool {
    (*vardata).statsTuple = std::ptr::null_mut();
    (*vardata).freefunc = None;
    true
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn relation_stats(
    root: *mut pg_sys::PlannerInfo,
    rte: *mut pg_sys::RangeTblEntry,
    attnum: pg_sys::AttrNumber,
    vardata: *mut pg_sys::VariableStatData,
) -> bool {
    if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION && blinded((*rte).relid) {
        return no_stats(vardata);
    }
    match PREV_RELATION_STATS {
        Some(prev) => pg_sys::ffi::pg_guard_ffi_boundary(|| prev(root, rte, attnum, vardata)),
        None => false,
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn index_stats(
    root: *mut pg_sys::PlannerInfo,
    index: pg_sys::Oid,
    attnum: pg_sys::AttrNumber,
    vardata: *mut pg_sys::VariableStatData,
) -> bool {
    if BLIND.with(|b| b.get() > 0) && blinded(pg_sys::IndexGetRelation(index, false)) {
        return no_stats(vardata);
    }
    match PREV_INDEX_STATS {
        Some(prev) => pg_sys::ffi::pg_guard_ffi_boundary(|| prev(root, index, attnum, vardata)),
        None => false,
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn attavgwidth(relid: pg_sys::Oid, attnum: pg_sys::AttrNumber) -> i32 {
    if blinded(relid) {
        return COLUMN_WIDTH;
    }
    match PREV_WIDTH {
        Some(prev) => pg_sys::ffi::pg_guard_ffi_boundary(|| prev(relid, attnum)),
        None => 0,
    }
}
