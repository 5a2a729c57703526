//! The planner hooks: the grammar runs on every statement before it is planned, and admitted DP
//! levels get their release nodes after.
//!
//! 1. `planner` checks the analysed, rewritten statement with the grammar (grammar.rs). A refusal
//!    is raised before the planner runs (SQLSTATE 42501). An admitted statement has its pg_dp
//!    aggregate calls tagged, and pg_dp itself admits the protected tables its DP levels read (their
//!    SELECT privilege is not required).
//! 2. While an admitted statement is planned, `upper_paths` marks the final paths of every DP level
//!    parallel-unsafe: a level's values are finalized in the leader, never in a parallel worker
//!    (parallel aggregation below the level is unaffected). Partitionwise aggregation is off for
//!    such statements, so each level has one finalizing aggregation.
//!    Its grouped paths are marked as unordered, since a cached release may be replayed in another
//!    order than this plan's aggregation would produce.
//! 3. After planning, release.rs wraps each DP level's aggregation in a DP Release node that carries
//!    the level's description. A plan that reads a protected table depends on the role.
use crate::pg::error::raise_with;
use crate::query::grammar;
use crate::execution::release;
use pgrx::pg_sys;
use pgrx::PgSqlErrorCode;
use std::ffi::{c_char, c_int, c_void};
use crate::pg::planning::plan_with_next;

static mut PREV_UPPER_PATHS: pg_sys::create_upper_paths_hook_type = None;

pub fn init() {
    unsafe {
        crate::pg::planning::set_next(pg_sys::planner_hook);
        pg_sys::planner_hook = Some(planner);
        PREV_UPPER_PATHS = pg_sys::create_upper_paths_hook;
        pg_sys::create_upper_paths_hook = Some(upper_paths);
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn planner(
    parse: *mut pg_sys::Query,
    query_string: *const c_char,
    cursor_options: c_int,
    bound: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    // statistics of protected relations: what the statement names is masked by the grammar; what
    // the planner adds by inlining SQL functions is checked after planning
    let stats_restricted = crate::catalog::protect::statistics_restricted();
    let any_protected = stats_restricted || crate::catalog::protect::any_protected();
    let named = if any_protected { crate::query::statistics_mask::catalog_entries(parse) } else { 0 };
    let checked = |stmt: *mut pg_sys::PlannedStmt| {
        if stats_restricted {
            if let Some(r) = crate::query::statistics_mask::refusal_after_planning(stmt) {
                raise_with(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, r.message, r.hint.as_deref());
            }
        }
        if named > 0 {
            // masked for one role, not for another: a cached plan is planned again for another role
            (*stmt).dependsOnRole = true;
        }
        stmt
    };
    let admitted = match grammar::check_statement(parse) {
        Ok(Some(a)) => a,
        Ok(None) => return checked(plan_with_next(parse, query_string, cursor_options, bound)),
        Err(r) => raise_with(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, r.message, r.hint.as_deref()),
    };
    let plan = |parse, query_string, cursor_options, bound| {
        if admitted.restricted {
            // from public facts only: no plan choice may depend on the data (estimates.rs)
            crate::execution::estimates::blind(|| plan_with_next(parse, query_string, cursor_options, bound))
        } else {
            plan_with_next(parse, query_string, cursor_options, bound)
        }
    };
    let stmt = if admitted.levels.is_empty() {
        plan(parse, query_string, cursor_options, bound)
    } else {
        // the release cache's key of each level, from the levels as admitted (before the planner
        // changes them): none under row security, which depends on the role
        let keys = crate::query::release_key::level_keys(parse, &admitted.queries);
        let saved = pg_sys::enable_partitionwise_aggregate;
        pg_sys::enable_partitionwise_aggregate = false;
        let stmt = pgrx::PgTryBuilder::new(|| plan(parse, query_string, cursor_options, bound))
            .finally(|| pg_sys::enable_partitionwise_aggregate = saved)
            .execute();
        release::insert(stmt, &admitted.levels, &keys);
        // the default ε baked in depends on the role's pinned level: pinning one re-plans
        // (dp.invalidate_plans); the session settings re-plan through their assign hooks (guc.rs)
        if let Some(r) = crate::catalog::identity::role_budget_relid() {
            (*stmt).relationOids = pg_sys::lappend_oid((*stmt).relationOids, r);
        }
        // a constant read from the clock holds for this transaction only (query/clock.rs)
        if admitted.clock {
            if let Some(r) = crate::query::clock::clock_relid() {
                (*stmt).relationOids = pg_sys::lappend_oid((*stmt).relationOids, r);
            }
        }
        stmt
    };
    if admitted.reads_protected {
        // who may read a protected table, and how, depends on the role: plan again for another
        (*stmt).dependsOnRole = true;
    }
    checked(stmt)
}

/// True if a query level computes tagged (admitted) pg_dp aggregates.
unsafe fn is_dp_level(q: *mut pg_sys::Query) -> bool {
    if q.is_null() || !(*q).hasAggs {
        return false;
    }
    let mut found: Vec<*mut pg_sys::Node> = Vec::new();
    crate::pg::nodes::collect_nodes((*q).targetList as *mut pg_sys::Node, &[pg_sys::NodeTag::T_Aggref], &mut found);
    crate::pg::nodes::collect_nodes((*q).havingQual, &[pg_sys::NodeTag::T_Aggref], &mut found);
    found.iter().any(|a| pg_dp_core::description::is_tag((*(*a as *mut pg_sys::Aggref)).location))
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn upper_paths(
    root: *mut pg_sys::PlannerInfo,
    stage: pg_sys::UpperRelationKind::Type,
    input_rel: *mut pg_sys::RelOptInfo,
    output_rel: *mut pg_sys::RelOptInfo,
    extra: *mut c_void,
) {
    if let Some(prev) = PREV_UPPER_PATHS {
        pg_sys::ffi::pg_guard_ffi_boundary(|| prev(root, stage, input_rel, output_rel, extra));
    }
    if !is_dp_level((*root).parse) {
        return;
    }
    if stage == pg_sys::UpperRelationKind::UPPERREL_GROUP_AGG {
        // a level's rows come in no order: a release the cache replays (query/release_key.rs) may
        // come from a plan that grouped another way, so every ORDER BY, merge or DISTINCT above a
        // level sorts for itself
        for p in crate::pg::nodes::list_iter::<pg_sys::Path>((*output_rel).pathlist) {
            (*p).pathkeys = std::ptr::null_mut();
        }
        return;
    }
    if stage != pg_sys::UpperRelationKind::UPPERREL_FINAL {
        return;
    }
    (*output_rel).consider_parallel = false;
    (*output_rel).partial_pathlist = std::ptr::null_mut();
    for p in crate::pg::nodes::list_iter::<pg_sys::Path>((*output_rel).pathlist) {
        (*p).parallel_safe = false;
    }
}
