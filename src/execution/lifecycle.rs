//! The ledger outlives careless DDL: `DROP EXTENSION pg_dp` (and `DROP SCHEMA dp CASCADE`, which
//! drops the extension with it) is refused while the database holds budgets or receipts, unless a
//! superuser confirms with `SET dp.confirm_drop = on` (superuser-only, for the transaction or
//! session). `DROP ROLE` moves the role's budget in this database to `dp.dropped_role_budget`.
//! Budgets are per database: both read and write this database's ledger only. In other databases
//! the budget stays, belonging to no role: it is the role's pg_dp identity's (identity.rs), which
//! PostgreSQL removes with the role, so a new role that gets the same OID inherits nothing.
use crate::pg::error::raise_with;
use pgrx::pg_sys::{self, Node, NodeTag};
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting, PgSqlErrorCode, Spi};
use std::ffi::{c_char, CStr};

static CONFIRM_DROP: GucSetting<bool> = GucSetting::<bool>::new(false);
static mut PREV_UTILITY: pg_sys::ProcessUtility_hook_type = None;

pub fn init() {
    GucRegistry::define_bool_guc(
        c"dp.confirm_drop",
        c"Allow DROP EXTENSION pg_dp (or DROP SCHEMA dp CASCADE) in a database whose ledger holds budgets or receipts (superuser only).",
        c"Dropping the extension destroys every budget and receipt of the database; dump dp.role_budget and dp.release_log first.",
        &CONFIRM_DROP,
        GucContext::Suset,
        GucFlags::default(),
    );
    unsafe {
        PREV_UTILITY = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(utility);
    }
}

/// Whether a DROP statement would drop pg_dp's ledger: the extension itself, or its schema with
/// CASCADE.
unsafe fn drops_ledger(stmt: *mut Node) -> bool {
    if stmt.is_null() || (*stmt).type_ != NodeTag::T_DropStmt {
        return false;
    }
    let d = stmt as *mut pg_sys::DropStmt;
    let target = match (*d).removeType {
        pg_sys::ObjectType::OBJECT_EXTENSION => "pg_dp",
        pg_sys::ObjectType::OBJECT_SCHEMA if (*d).behavior == pg_sys::DropBehavior::DROP_CASCADE => "dp",
        _ => return false,
    };
    crate::pg::nodes::list_iter::<Node>((*d).objects).any(|o| {
        (*o).type_ == NodeTag::T_String && CStr::from_ptr((*(o as *mut pg_sys::String)).sval).to_bytes() == target.as_bytes()
    })
}

/// (budgets, receipts) in this database's ledger, or None when pg_dp is not installed here.
fn ledger_rows() -> Option<(i64, i64)> {
    let r = Spi::connect(|c| {
        let t = c.select(
            "SELECT (SELECT count(*) FROM dp.role_budget), (SELECT count(*) FROM dp.release_log)
              WHERE pg_catalog.to_regclass('dp.release_log') IS NOT NULL AND pg_catalog.to_regclass('dp.role_budget') IS NOT NULL",
            None,
            &[],
        )?;
        if t.is_empty() {
            return Ok::<_, pgrx::spi::Error>(None);
        }
        let row = t.first();
        Ok(Some((row.get::<i64>(1)?.unwrap_or(0), row.get::<i64>(2)?.unwrap_or(0))))
    });
    r.ok().flatten()
}

/// Archives the budgets of the roles a DROP ROLE names (in this database, if pg_dp is installed). It
/// runs in the DROP's transaction: if the DROP fails, the budgets stay.
unsafe fn archive_budgets(d: *mut pg_sys::DropRoleStmt) {
    let installed = Spi::get_one::<bool>("SELECT pg_catalog.to_regclass('dp.role_budget') IS NOT NULL").ok().flatten().unwrap_or(false);
    if !installed {
        return;
    }
    for spec in crate::pg::nodes::list_iter::<pg_sys::RoleSpec>((*d).roles) {
        if (*spec).roletype != pg_sys::RoleSpecType::ROLESPEC_CSTRING || (*spec).rolename.is_null() {
            continue;
        }
        let oid = pg_sys::get_role_oid((*spec).rolename, true);
        if oid == pg_sys::InvalidOid {
            continue;
        }
        // as the bootstrap superuser: whoever may drop the role (CREATEROLE) archives its budget
        let r = crate::catalog::protect::as_bootstrap_superuser(|| Spi::run_with_args("SELECT dp.archive_role_budget($1)", &[oid.into()]));
        r.unwrap_or_else(|e| {
            raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("pg_dp: could not archive the budget of a dropped role: {e}"), None)
        });
    }
}

#[pgrx::pg_guard]
#[allow(clippy::too_many_arguments)]
unsafe extern "C-unwind" fn utility(
    pstmt: *mut pg_sys::PlannedStmt,
    query: *const c_char,
    read_only: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    qc: *mut pg_sys::QueryCompletion,
) {
    let stmt = (*pstmt).utilityStmt;
    // data or definitions it may change make cached releases stale
    crate::budget::cache::note_utility(stmt);
    if !stmt.is_null() && (*stmt).type_ == NodeTag::T_DropRoleStmt {
        archive_budgets(stmt as *mut pg_sys::DropRoleStmt);
    }
    if !stmt.is_null() && (*stmt).type_ == NodeTag::T_CopyStmt {
        refuse_copy_of_statistics(stmt as *mut pg_sys::CopyStmt);
    }
    if drops_ledger(stmt) && !CONFIRM_DROP.get() {
        if let Some((budgets, receipts)) = ledger_rows().filter(|(b, r)| *b > 0 || *r > 0) {
            raise_with(
                PgSqlErrorCode::ERRCODE_OBJECT_IN_USE,
                format!("dropping pg_dp would destroy this database's {budgets} budgets and {receipts} receipts"),
                Some("dump dp.role_budget and dp.release_log first (pg_dump keeps them); a superuser can then SET LOCAL dp.confirm_drop = on and drop"),
            );
        }
    }
    // an EXPLAIN is instrumented from its planning on, and a maintenance command reports the buffers
    // of the index expressions it evaluates: reads of protected tables are refused inside them,
    // however reached (admission.rs, refuse_under_instrumentation)
    let counted = instrumented_kind(stmt);
    let run = || match PREV_UTILITY {
        Some(prev) => pg_sys::ffi::pg_guard_ffi_boundary(|| prev(pstmt, query, read_only, context, params, env, dest, qc)),
        None => pg_sys::standard_ProcessUtility(pstmt, query, read_only, context, params, env, dest, qc),
    };
    match counted {
        // the mark lasts for the whole statement, across the transactions VACUUM commits inside
        // it, and goes when it ends, by an error too
        Some(kind) => {
            crate::execution::admission::begin_utility_mark(pstmt as usize, kind);
            pgrx::PgTryBuilder::new(run).finally(|| crate::execution::admission::end_utility_mark(pstmt as usize)).execute()
        }
        None => run(),
    }
}

/// The statements whose output counts what the functions they run read: EXPLAIN (its buffers, rows
/// and times, planning included), and the maintenance commands that evaluate index expressions and
/// predicates (VACUUM VERBOSE prints the buffers its BRIN summaries read; the others rebuild or
/// build indexes).
unsafe fn instrumented_kind(stmt: *mut Node) -> Option<&'static str> {
    if stmt.is_null() {
        return None;
    }
    Some(match (*stmt).type_ {
        NodeTag::T_ExplainStmt => "EXPLAIN",
        NodeTag::T_VacuumStmt => "VACUUM or ANALYZE",
        NodeTag::T_ClusterStmt => "CLUSTER",
        NodeTag::T_ReindexStmt => "REINDEX",
        NodeTag::T_IndexStmt => "CREATE INDEX",
        _ => return None,
    })
}

/// `COPY table TO` reads a table without a query, so the grammar never sees it: COPY of a catalog
/// whose columns hold statistics of the data (`COPY pg_class TO STDOUT`, which has reltuples and
/// relpages) is refused to the roles the statistics are hidden from (statistics.rs). `COPY (SELECT
/// …) TO` is a query, checked like any other.
unsafe fn refuse_copy_of_statistics(copy: *mut pg_sys::CopyStmt) {
    if (*copy).is_from || (*copy).relation.is_null() || !crate::catalog::protect::statistics_restricted() {
        return;
    }
    let relid = pg_sys::RangeVarGetRelidExtended((*copy).relation, pg_sys::NoLock as i32, pg_sys::RVROption::RVR_MISSING_OK, None, std::ptr::null_mut());
    if relid == pg_sys::InvalidOid {
        return;
    }
    use crate::protection::statistics::{denied_column, denied_relation, refusal};
    let mut denied = denied_relation(relid);
    if (*copy).attlist.is_null() {
        denied = denied.or_else(|| denied_column(relid, 0));
    }
    for name in crate::pg::nodes::list_iter::<pg_sys::String>((*copy).attlist) {
        if denied.is_none() {
            denied = denied_column(relid, pg_sys::get_attnum(relid, (*name).sval));
        }
    }
    if let Some(what) = denied {
        let r = refusal(what);
        raise_with(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, r.message, r.hint.as_deref());
    }
}
