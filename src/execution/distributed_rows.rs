//! The execution side of a DP level over a Citus table (docs/distributed.md): `dp.distributed_rows`
//! runs the level's exact query, once, as the bootstrap superuser, after the DP Release node that
//! needs it has been paid for and has authorized it; Citus aggregates it partially on the workers.
use crate::pg::error::raise_with;
use pg_dp_core::description::DpLevel;
use pgrx::pg_sys::{self, NodeTag, Query};
use pgrx::PgSqlErrorCode;
use std::cell::RefCell;
use std::ffi::{CStr, CString};

const F: &str = "dp.distributed_rows";

thread_local! {
    /// The exact query the DP Release node being executed may run, once (see `authorize`).
    static AUTHORIZED: RefCell<Option<(String, pg_sys::SubTransactionId)>> = const { RefCell::new(None) };
}

/// Called by a DP Release node before it runs its aggregation (its charge already made): its exact
/// query may now run, once.
pub fn authorize(exact_query: String) {
    let sub = unsafe { pg_sys::GetCurrentSubTransactionId() };
    AUTHORIZED.with(|a| *a.borrow_mut() = Some((exact_query, sub)));
}

/// A subtransaction aborted: an authorization made in it goes.
pub fn abort_sub(sub: pg_sys::SubTransactionId) {
    AUTHORIZED.with(|a| {
        let mut a = a.borrow_mut();
        if a.as_ref().is_some_and(|(_, s)| *s >= sub) {
            *a = None;
        }
    });
}

/// Forgets an authorization (end of the query or the transaction).
pub fn forget() {
    AUTHORIZED.with(|a| *a.borrow_mut() = None);
}

/// Settings pinned while the exact query is planned and run. Citus writes the shard queries'
/// constants as text with the session's settings: with `extra_float_digits = -15` a bound of 1.5
/// reached the workers as 2, so they clamped and put values on another grid than the coordinator's
/// merge (a row then moved a release by far more than its sensitivity). Citus's limit on
/// intermediate results raised an error only when rows reached it (a data-dependent error after
/// the charge, which forfeits the budget).
const PINNED: [(&CStr, &CStr); 2] = [(c"extra_float_digits", c"1"), (c"citus.max_intermediate_result_size", c"-1")];

/// Runs `f` with [`PINNED`] set (those that exist), as a function's SET clause would, restored
/// after it; an error restores them with its (sub)transaction.
unsafe fn with_pinned_settings<R>(f: impl FnOnce() -> R) -> R {
    let level = pg_sys::NewGUCNestLevel();
    for (name, value) in PINNED {
        if pg_sys::GetConfigOption(name.as_ptr(), true, false).is_null() {
            continue;
        }
        pg_sys::set_config_option(
            name.as_ptr(),
            value.as_ptr(),
            pg_sys::GucContext::PGC_SUSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
    }
    let r = f();
    pg_sys::AtEOXact_GUC(true, level);
    r
}

/// Plans and runs the exact query (Citus distributes it), its rows into `store`.
unsafe fn run_exact(text: &CStr, params: pg_sys::ParamListInfo, store: *mut pg_sys::Tuplestorestate, cxt: pg_sys::MemoryContext) {
    let query = pg_sys::stringToNode(text.as_ptr()) as *mut Query;
    let stmt = crate::pg::planning::plan_with_next(query, text.as_ptr(), 0, params);
    let dest = pg_sys::CreateDestReceiver(pg_sys::CommandDest::DestTuplestore);
    crate::pg::ffi::set_tuplestore_dest(dest, store, cxt);
    let qd = pg_sys::CreateQueryDesc(stmt, text.as_ptr(), pg_sys::GetActiveSnapshot(), std::ptr::null_mut(), dest, params, std::ptr::null_mut(), 0);
    pg_sys::ExecutorStart(qd, 0);
    pg_sys::ExecutorRun(qd, pg_sys::ScanDirection::ForwardScanDirection, 0, true);
    pg_sys::ExecutorFinish(qd);
    pg_sys::ExecutorEnd(qd);
    pg_sys::FreeQueryDesc(qd);
    if let Some(destroy) = (*dest).rDestroy {
        destroy(dest);
    }
}

/// The exact query text of a DP Release node's level, if it runs distributed.
pub fn exact_query_of(level_json: &str) -> Option<String> {
    if !level_json.contains("\"exact_query\"") {
        return None;
    }
    DpLevel::from_json(level_json)?.exact_query
}

crate::pg::fmgr::pg_v1!(pg_finfo_dp_distributed_rows, dp_distributed_rows, |fcinfo| {
    let text = crate::pg::fmgr::required::<String>(fcinfo, 0, F, "exact_query");
    let ok = AUTHORIZED.with(|a| {
        let mut a = a.borrow_mut();
        if a.as_ref().is_some_and(|(q, _)| *q == text) {
            *a = None;
            true
        } else {
            false
        }
    });
    if !ok {
        raise_with(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("{F}: runs only the exact query of a DP level over a Citus table, once, for the release that paid for it"),
            None,
        );
    }
    let rsinfo = (*fcinfo).resultinfo as *mut pg_sys::ReturnSetInfo;
    if rsinfo.is_null() || (*rsinfo).type_ != NodeTag::T_ReturnSetInfo || (*rsinfo).allowedModes & pg_sys::SetFunctionReturnMode::SFRM_Materialize as i32 == 0 {
        raise_with(PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED, format!("{F}: called in a context that cannot take a set"), None);
    }
    let econtext = (*rsinfo).econtext;
    let per_query = (*econtext).ecxt_per_query_memory;
    let old = pg_sys::MemoryContextSwitchTo(per_query);
    let desc = pg_sys::CreateTupleDescCopy((*rsinfo).expectedDesc);
    let store = pg_sys::tuplestore_begin_heap(false, false, pg_sys::work_mem);
    pg_sys::MemoryContextSwitchTo(old);
    let params = (*econtext).ecxt_param_list_info;
    let ctext = CString::new(text).unwrap_or_default();
    crate::catalog::protect::as_bootstrap_superuser(|| with_pinned_settings(|| run_exact(&ctext, params, store, per_query)));
    (*rsinfo).returnMode = pg_sys::SetFunctionReturnMode::SFRM_Materialize;
    (*rsinfo).setResult = store;
    (*rsinfo).setDesc = desc;
    (*fcinfo).isnull = true;
    pg_sys::Datum::from(0)
});
