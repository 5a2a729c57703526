//! Fail closed: an error raised inside an admitted DP level is treated as an attack.
//!
//! The grammar admits below a DP aggregate only what cannot raise an error for any stored value
//! (grammar.rs, total.rs, docs/security.md). If something it admits fails all the same, the
//! error is an answer about the data that no ε paid for, and an attacker who found the hole can
//! ask one yes/no question per query. So the DP Release node (release.rs) runs its level's
//! aggregation through [`run_level`]: when an error comes out of it, before the error goes on to
//! the client (or to a PL/pgSQL exception handler), the role's whole remaining budget is charged
//! in the ledger worker's own transaction, with a receipt that says why, and a WARNING names the
//! role and the statement. A hole then costs an attacker its budget per bit.
//!
//! What the level covers: the scans of its input, its joins and filters, the aggregated values and
//! the aggregates' transition and final functions. The expressions around the aggregates (the
//! select list and HAVING) run in the release node, above the level: they post-process released
//! values, and their errors are no leak.
//!
//! Conditions of the server rather than of the data do not forfeit: a cancel or a timeout (class
//! 57 and lock timeouts), a lost connection (class 08, Citus workers), serialization failures and
//! deadlocks, a full disk, too many connections and I/O errors. Out of memory and configured
//! limits (`temp_file_limit`) do (see [`benign`]). Only roles that read the level's source through
//! DP queries alone forfeit; an exempt role (superuser, owner, trusted) reads the table anyway.
use crate::pg::error::{code_of_text, raise_with, sqlstate_text, warn_with};
use crate::budget::ledger;
use crate::catalog::protect;
use pg_dp_core::accounting::charge::{ChargeOutcome, ChargeRequest, RequestKind};
use pg_dp_core::description::DpLevel;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting, PgSqlErrorCode};

/// Raise an error with this SQLSTATE inside every admitted DP level (superuser only): the fault
/// injection of the fail-closed tests. Empty: off.
pub static FAIL_INSIDE_LEVEL: GucSetting<Option<std::ffi::CString>> = GucSetting::<Option<std::ffi::CString>>::new(None);

pub fn init() {
    GucRegistry::define_string_guc(
        c"dp.fail_inside_level",
        c"For tests: raise an error with this SQLSTATE inside every admitted DP level (superuser only).",
        c"Shows the fail-closed rule at work: the role forfeits its remaining budget. Empty turns it off.",
        &FAIL_INSIDE_LEVEL,
        GucContext::Suset,
        GucFlags::NO_SHOW_ALL,
    );
}

/// Whether an error inside a level of `level` forfeits the current role's budget: the source is
/// protected, and the role may not read it directly.
pub unsafe fn forfeits(level: &DpLevel) -> bool {
    level.source.protected && !protect::exempt(level.source.oid.into())
}

/// SQLSTATEs of conditions of the server, not of the data: no forfeit. Out of memory (53200) is not
/// among them: an expression can be made to allocate in proportion to a value, on the rows that
/// reach it; nor is a configured limit (53400: `temp_file_limit`, which a sort spilling
/// data-dependent amounts of rows can reach).
fn benign(sqlstate: &str) -> bool {
    let class = &sqlstate[..2];
    matches!(class, "57" | "08") || matches!(sqlstate, "53100" | "53300" | "58030" | "55P03" | "40001" | "40P01" | "25P03")
}

/// Runs one step of an admitted level's aggregation. For a level that [`forfeits`], an error
/// raised inside it charges `role` (the role the level was charged to) its remaining budget before
/// the error propagates.
pub unsafe fn run_level<T>(forfeiting: bool, role: pg_sys::Oid, f: impl FnOnce() -> T) -> T {
    if !forfeiting {
        return f();
    }
    let f = std::panic::AssertUnwindSafe(f);
    PgTryBuilder::new(move || {
        let f = f;
        if let Some(code) = injected() {
            raise_with(code, "pg_dp: a fault injected inside an admitted DP level (dp.fail_inside_level)".into(), None);
        }
        (f.0)()
    })
    .catch_others(|e| {
        let code = match &e {
            CaughtError::PostgresError(r) | CaughtError::ErrorReport(r) | CaughtError::RustPanic { ereport: r, .. } => r.sql_error_code(),
        };
        let sqlstate = sqlstate_text(code);
        if !benign(&sqlstate) {
            // a cancel or a timeout already pending (or arriving while the ledger records it) must
            // neither end the wait nor replace the error (the WARNING would process it): interrupts
            // are held meanwhile, as PostgreSQL holds them during its own cleanup. The rethrow
            // below jumps straight to the next handler, checking none.
            let held = pg_sys::InterruptHoldoffCount;
            pg_sys::InterruptHoldoffCount = held + 1;
            forfeit(role, &sqlstate);
            pg_sys::InterruptHoldoffCount = held;
        }
        e.rethrow()
    })
    .execute()
}

fn injected() -> Option<PgSqlErrorCode> {
    let v = FAIL_INSIDE_LEVEL.get()?;
    code_of_text(v.to_str().ok()?.trim())
}

/// Charges `role` its whole remaining ε and δ (the ledger worker's own transaction) and logs the
/// WARNING.
unsafe fn forfeit(role: pg_sys::Oid, sqlstate: &str) {
    let name = crate::pg::fmgr::cstr_or(pg_sys::GetUserNameFromId(role, true), "?");
    let statement = crate::pg::fmgr::cstr_or(pg_sys::debug_query_string, "");
    let query_id = pg_sys::pgstat_get_my_query_id() as i64;
    let req = ChargeRequest {
        role: role.to_u32(),
        database_user: crate::pg::fmgr::cstr_or(pg_sys::GetUserNameFromId(pg_sys::GetSessionUserId(), true), "?"),
        unlimited: false,
        query_id,
        query_text: statement.clone(),
        releases: Vec::new(),
        kind: RequestKind::Forfeit { sqlstate: sqlstate.to_string() },
        reused: Vec::new(),
    };
    let outcome = if ledger::preloaded() { Some(ledger::charge(&req)) } else { None };
    let what = match outcome {
        Some(ChargeOutcome::Granted { epsilon_remaining }) => {
            format!("forfeits its remaining privacy budget (epsilon {})", epsilon_remaining.unwrap_or_else(|| "0".into()))
        }
        Some(ChargeOutcome::Failed { message }) if message.starts_with("queued") => {
            "forfeits its remaining privacy budget (queued in the ledger; recorded when a worker takes it)".into()
        }
        _ => "should forfeit its remaining privacy budget, but the ledger could not record it".into(),
    };
    warn_with(
        format!("pg_dp: an error inside an admitted DP level (SQLSTATE {sqlstate}): role \"{name}\" {what}"),
        format!("pg_dp admits below a DP aggregate only what cannot fail for any stored value, so such an error is treated as an attack (the README, section \"Security\"); statement: {}", short(&statement)),
    );
}

/// The statement for the WARNING: at most 1,000 characters.
fn short(s: &str) -> String {
    match s.char_indices().nth(1000) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}
