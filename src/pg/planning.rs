//! The planner below pg_dp's own planner hook: what pg_dp plans for itself (the exact query of a
//! Citus level, its probes) and the statements its hook admitted are planned by the hook installed
//! before pg_dp's, or by PostgreSQL's standard planner.
use pgrx::pg_sys;
use std::ffi::{c_char, c_int};

static mut PREV_PLANNER: pg_sys::planner_hook_type = None;

/// Records the planner hook installed before pg_dp's (at load time).
pub unsafe fn set_next(prev: pg_sys::planner_hook_type) {
    PREV_PLANNER = prev;
}

/// Plans with the planner below pg_dp's hook.
pub unsafe fn plan_with_next(
    parse: *mut pg_sys::Query,
    query_string: *const c_char,
    cursor_options: c_int,
    bound: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    match PREV_PLANNER {
        Some(prev) => pg_sys::ffi::pg_guard_ffi_boundary(|| prev(parse, query_string, cursor_options, bound)),
        None => pg_sys::standard_planner(parse, query_string, cursor_options, bound),
    }
}
