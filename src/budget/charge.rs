//! Charging and admission: every pg_dp release is paid before the query reads any data, and only
//! admitted statements read protected tables.
//!
//! The ExecutorStart hook finds the DP Release nodes of the plan (release.rs). Only the planner hook
//! creates them, after the grammar admitted the level, and each carries the level's description.
//! The hook
//! 1. refuses EXPLAIN (and EXPLAIN ANALYZE) of a plan that reads a protected table, for roles that
//!    may not read the table directly: the plan shows estimates computed from its data;
//! 2. lets the executor's permission check admit the protected tables of an admitted statement
//!    (`check_perms`, an ExecutorCheckPerms hook): every other read of a protected table (a raw
//!    SELECT that slipped past planning, COPY, a plan from elsewhere) is refused there;
//! 3. starts the executor, which checks privileges but reads no row;
//! 4. evaluates the parameters of every release (constants and bind parameters), builds one receipt
//!    per release, and has the ledger worker debit the whole query in the worker's own transaction.
//!    Only then can the query read data. Each paid aggregate gets a ticket; its final function
//!    refuses to release without one.
//!
//! Composition: ε adds up across the aggregates of a query. One aggregate's GROUP BY groups are
//! disjoint sets of rows, so they cost its ε once (parallel composition, one row per person); each
//! grouping set is a separate release. A DP Release node runs its aggregation once per execution,
//! whatever the plan, so one payment covers every read of its rows.
use crate::pg::error::raise_with;
use crate::budget::ledger;
use pg_dp_core::accounting::charge::{ChargeOutcome, ChargeRequest, ReleaseRecord, RequestKind, Reuse};
use pgrx::pg_sys;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting, PgSqlErrorCode};
use std::cell::Cell;
use crate::pg::fmgr::cstr_or;
use crate::budget::receipts::with_value;

/// Refuse roles without a budget (superusers excepted). Superuser-only; on by default.
pub static REQUIRE_BUDGET: GucSetting<bool> = GucSetting::<bool>::new(true);


pub fn init() {
    GucRegistry::define_bool_guc(
        c"dp.require_budget",
        c"Refuse pg_dp queries from roles without a privacy budget (superusers are exempt).",
        c"When off, roles without a budget run pg_dp queries unlimited; every release is still recorded in the ledger.",
        &REQUIRE_BUDGET,
        GucContext::Suset,
        GucFlags::default(),
    );
}

// ----- one value for a call written twice --------------------------------------------------------

// ----- finding the releases of a plan ---------------------------------------------------------

/// The execution a charge belongs to: an id unique in the cluster's run (backend start time,
/// process id, a counter), the application name and the client's address.
pub unsafe fn execution_audit() -> serde_json::Value {
    let n = EXECUTIONS.with(|c| {
        c.set(c.get() + 1);
        c.get()
    });
    let (start, pid) = (std::ptr::addr_of!(pg_sys::MyStartTime).read(), std::ptr::addr_of!(pg_sys::MyProcPid).read());
    let id = format!("{start}-{pid}-{n}");
    let app = if pg_sys::application_name.is_null() { String::new() } else { cstr_or(pg_sys::application_name, "") };
    // inet_client_addr(): NULL over a Unix socket
    let client = pgrx::direct_function_call::<pgrx::Inet>(pg_sys::inet_client_addr, &[]).map_or_else(|| "local".to_string(), |i| i.0);
    serde_json::json!({ "id": id, "application_name": app, "client": client })
}

/// Charges `releases` to the current role through the ledger worker (committed in its own
/// transaction) and returns once they are paid, or raises the refusal: no budget, the per-query cap,
/// exhaustion (nothing charged), or a failed debit.
/// Callers check `ledger::require_preloaded` first.
pub(crate) unsafe fn charge(releases: Vec<ReleaseRecord>, query_id: i64, query_text: String) {
    // for auditors: which execution, from which application and client
    charge_execution(releases, Vec::new(), query_id, query_text, execution_audit())
}

/// [`charge`] for a given execution, with the releases it reuses from the cache: those are not
/// charged, but served only to a role that could have bought them (the ledger checks).
pub unsafe fn charge_execution(mut releases: Vec<ReleaseRecord>, reused: Vec<Reuse>, query_id: i64, query_text: String, execution: serde_json::Value) {
    let role = pg_sys::GetUserId();
    for r in &mut releases {
        r.details = with_value(&r.details, "execution", execution.clone());
    }
    let req = ChargeRequest {
        role: role.to_u32(),
        database_user: cstr_or(pg_sys::GetUserNameFromId(pg_sys::GetSessionUserId(), true), "?"),
        unlimited: pg_sys::superuser() || !REQUIRE_BUDGET.get(),
        query_id,
        query_text,
        releases,
        kind: RequestKind::Charge,
        reused,
    };
    match ledger::charge(&req) {
        ChargeOutcome::Granted { .. } => {}
        ChargeOutcome::Denied { reason, epsilon_remaining, delta_remaining } => refuse(&req, role, &reason, epsilon_remaining, delta_remaining),
        ChargeOutcome::Failed { message } => raise_with(
            PgSqlErrorCode::ERRCODE_SYSTEM_ERROR,
            format!("pg_dp: the ledger could not record the charge, nothing was charged: {message}"),
            None,
        ),
    }
}

unsafe fn refuse(req: &ChargeRequest, role: pg_sys::Oid, reason: &str, remaining: Option<String>, delta_remaining: Option<String>) -> ! {
    let name = cstr_or(pg_sys::GetUserNameFromId(role, true), "?");
    // a query served from the cache needs what its releases cost (it could have bought them)
    let need: Vec<&str> = req.releases.iter().map(|r| r.epsilon.as_str()).chain(req.reused.iter().flat_map(|r| r.epsilons.iter().map(|e| e.as_str()))).collect();
    let need = if need.len() == 1 { need[0].to_string() } else { need.join(" + ") };
    let remaining = remaining.unwrap_or_else(|| "0".into());
    if reason == "no budget" {
        raise_with(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("role \"{name}\" has no privacy budget"),
            Some(&format!(
                "a superuser or a member of dp_admin can grant one: SELECT dp.grant_budget('{name}', 1.0); a role restored without its pg_dp identity takes its budget back with dp.adopt_budget('{name}', role_uid)"
            )),
        );
    }
    if let Some(cap) = reason.strip_prefix("cap:") {
        raise_with(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("query needs epsilon {need}, more than the per-query cap {cap} of role \"{name}\"; nothing was charged"),
            Some("use a smaller epsilon per aggregate, or fewer aggregates per query; dp.my_budget shows the cap"),
        );
    }
    if let Some((level, eps)) = reason.strip_prefix("level:").and_then(|r| r.split_once(':')) {
        raise_with(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("query needs epsilon {need}, more than the {eps} per query of privacy level \"{level}\", which is pinned to role \"{name}\"; nothing was charged"),
            Some(&format!("SET dp.privacy_level = '{level}' and leave epsilon out, or use a smaller epsilon")),
        );
    }
    let deltas: Vec<&str> = req.releases.iter().map(|r| r.delta.as_str()).filter(|d| *d != "0").collect();
    let (need, remaining) = if deltas.is_empty() {
        (need, remaining)
    } else {
        let d = delta_remaining.unwrap_or_else(|| "0".into());
        (format!("{need} and delta {}", deltas.join(" + ")), format!("{remaining} (delta {d})"))
    };
    raise_with(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_RESOURCES,
        format!("privacy budget exhausted: query needs epsilon {need}, role \"{name}\" has {remaining} remaining; nothing was charged"),
        Some("dp.my_budget shows the remaining budget; a dp_admin member can grant more"),
    );
}

// dp.check_preloaded(): CREATE EXTENSION calls it, so that installing without preloading fails
// with a hint that says exactly what to add.
crate::pg::fmgr::pg_v1!(pg_finfo_dp_check_preloaded, dp_check_preloaded, |_fcinfo| {
    ledger::require_preloaded("install pg_dp");
    pgrx::fcinfo::pg_return_void()
});

thread_local! {
    static EXECUTIONS: Cell<u64> = const { Cell::new(0) };
}
