//! Role identities: budgets and receipts belong to a role's pg_dp identity, not to its OID.
//!
//! A role's identity is a random uuid kept as its security label of provider `pg_dp_role`
//! (`SECURITY LABEL FOR pg_dp_role ON ROLE analyst IS '…'`), in pg_shseclabel, shared by every
//! database. PostgreSQL keeps it across `ALTER ROLE … RENAME`, removes it with `DROP ROLE`, and
//! `pg_dumpall --globals-only` dumps it with the role: a budget follows its role into another
//! cluster, and never passes to a new role that gets a dropped role's OID, in any database.
//! `dp.grant_budget` gives a role its identity, `dp.adopt_budget` a restored one (sql/ledger.sql);
//! `dp.role_identities` reads them.
//!
//! The hook below checks every label of the provider before PostgreSQL stores it.
use crate::pg::error::raise_with;
use crate::catalog::protect;
use pgrx::pg_sys::{self, Oid};
use pgrx::PgSqlErrorCode;
use std::ffi::{c_char, CStr};

pub const PROVIDER: &CStr = c"pg_dp_role";
const EXAMPLE: &str = "0b5f8a4e-3c2d-4e1f-9a7b-6c5d4e3f2a1b";

pub fn init() {
    unsafe { pg_sys::register_label_provider(PROVIDER.as_ptr(), Some(check_relabel)) }
}

/// A uuid in its standard form: 32 hexadecimal digits in groups of 8-4-4-4-12, either case.
fn is_uuid(s: &str) -> bool {
    s.len() == 36 && s.bytes().enumerate().all(|(i, b)| if matches!(i, 8 | 13 | 18 | 23) { b == b'-' } else { b.is_ascii_hexdigit() })
}

unsafe fn role_name(role: Oid) -> String {
    existing_role_name(role).unwrap_or_else(|| format!("role {}", role.to_u32()))
}

/// The label hook: only superusers and members of dp_admin label, only roles, only with a uuid that
/// no other role carries; a role's identity is removed (NULL) before it is replaced.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn check_relabel(object: *const pg_sys::ObjectAddress, seclabel: *const c_char) {
    if !protect::is_dp_admin() {
        raise_with(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            "only superusers and members of dp_admin can set or remove pg_dp_role labels".into(),
            Some("dp.grant_budget gives a role its pg_dp identity, dp.adopt_budget a restored one"),
        );
    }
    let obj = &*object;
    if obj.classId != pg_sys::AuthIdRelationId {
        raise_with(
            PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
            "pg_dp_role labels only roles: the label is a role's pg_dp identity".into(),
            None,
        );
    }
    if seclabel.is_null() {
        return;
    }
    let label = CStr::from_ptr(seclabel).to_string_lossy().into_owned();
    let name = role_name(obj.objectId);
    if !is_uuid(&label) {
        raise_with(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid pg_dp_role label for role \"{name}\": \"{label}\" (the label must be a uuid such as '{EXAMPLE}', or NULL to remove it)"),
            None,
        );
    }
    // one label of this provider at a time: the checks below read the committed labels, so a second
    // transaction giving another role the same uuid waits here until the first ends, then sees its
    // label (without the lock both could pass the checks, and two roles would spend one budget)
    lock_labels();
    let current = pg_sys::GetSecurityLabel(object, PROVIDER.as_ptr());
    if !current.is_null() {
        let current = CStr::from_ptr(current).to_string_lossy();
        if !current.eq_ignore_ascii_case(&label) {
            raise_with(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("role \"{name}\" already has pg_dp identity {current}: its pg_dp_role label cannot be changed to {label}"),
                Some("remove it first (SECURITY LABEL FOR pg_dp_role ON ROLE ... IS NULL); the budgets of that identity, in every database, then belong to no role"),
            );
        }
        return;
    }
    let holders = protect::labelled_objects(
        protect::SHARED_SECLABEL_RELATION_ID,
        pg_sys::AuthIdRelationId,
        "pg_dp_role",
        |l| l.eq_ignore_ascii_case(&label),
        false,
    );
    if let Some(other) = holders.into_iter().find(|r| *r != obj.objectId) {
        raise_with(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid pg_dp_role label for role \"{name}\": {label} is the pg_dp identity of role \"{}\"", role_name(other)),
            Some("an identity belongs to one role; dp.grant_budget gives a role a new one"),
        );
    }
}

/// Makes every change of a `pg_dp_role` label wait until this transaction ends (and waits for one
/// in progress): the labels read afterwards stay as they are until then.
pub unsafe fn lock_labels() {
    pg_sys::LockRelationOid(protect::SHARED_SECLABEL_RELATION_ID, pg_sys::ShareRowExclusiveLock as pg_sys::LOCKMODE);
}

/// A role's pg_dp identity (its `pg_dp_role` label, a uuid in lower case), if it has one.
pub unsafe fn identity_of(role: Oid) -> Option<String> {
    let obj = pg_sys::ObjectAddress { classId: pg_sys::AuthIdRelationId, objectId: role, objectSubId: 0 };
    let label = pg_sys::GetSecurityLabel(&obj, PROVIDER.as_ptr());
    (!label.is_null()).then(|| CStr::from_ptr(label).to_string_lossy().to_ascii_lowercase())
}

/// A role's name, if the role exists (as this transaction sees the catalog).
pub unsafe fn existing_role_name(role: Oid) -> Option<String> {
    let n = pg_sys::GetUserNameFromId(role, true);
    (!n.is_null()).then(|| CStr::from_ptr(n).to_string_lossy().into_owned())
}

/// A role's pg_dp identity for keys that must follow the role, not its OID; a role without one is
/// keyed by its OID (it has no budget, and no identity to follow).
pub unsafe fn key_of(role: Oid) -> String {
    identity_of(role).unwrap_or_else(|| format!("oid:{}", role.to_u32()))
}

/// The ε per query of the privacy level a DBA pinned to `role` in this database
/// (`dp.pin_privacy_level`), if any. Read when a statement is planned: an aggregate called without ε
/// gets at most this ε, so that a session opened before the pin keeps working at the pinned level.
/// Looked up once per statement and role.
pub unsafe fn pinned_epsilon(role: Oid) -> Option<f64> {
    thread_local! {
        static MEMO: std::cell::Cell<Option<(Oid, i64, Option<f64>)>> = const { std::cell::Cell::new(None) };
    }
    let at = pg_sys::GetCurrentStatementStartTimestamp();
    if let Some((r, t, e)) = MEMO.with(|m| m.get()) {
        if r == role && t == at {
            return e;
        }
    }
    // the schema of this version (an older one, before ALTER EXTENSION UPDATE, has no identities)
    if !budgets_by_identity() {
        return None;
    }
    let e = protect::as_bootstrap_superuser(|| {
        // a read-only SPI call: pgrx's get_one* helpers give the transaction an xid (they run as
        // if writing), and a transaction with an xid neither reuses nor stores cached releases
        pgrx::Spi::connect(|c| {
            c.select(
                "SELECT dp.privacy_level_epsilon(b.privacy_level) FROM dp.role_budget b \
                   JOIN dp.role_identities i ON i.role_uid = b.role_uid \
                  WHERE i.role = $1::pg_catalog.oid::pg_catalog.regrole AND b.privacy_level IS NOT NULL",
                Some(1),
                &[role.into()],
            )
            .and_then(|t| t.first().get_one::<f64>())
        })
        .ok()
        .flatten()
    });
    MEMO.with(|m| m.set(Some((role, at, e))));
    e
}

/// True if this database's pg_dp schema keeps budgets by role identity (0.2.0 on: `dp.role_budget`
/// has `role_uid`); a database still on 0.1.0's schema, before `ALTER EXTENSION pg_dp UPDATE`, keys
/// them by OID.
pub unsafe fn budgets_by_identity() -> bool {
    role_budget_relid().is_some_and(|r| pg_sys::get_attnum(r, c"role_uid".as_ptr()) != 0)
}

/// The OID of `dp.role_budget`, on which every plan with a DP level depends (planner.rs): pinning
/// a level invalidates those plans in every session (`dp.invalidate_plans`).
pub unsafe fn role_budget_relid() -> Option<Oid> {
    let ns = pg_sys::get_namespace_oid(c"dp".as_ptr(), true);
    if ns == pg_sys::InvalidOid {
        return None;
    }
    let r = pg_sys::get_relname_relid(c"role_budget".as_ptr(), ns);
    (r != pg_sys::InvalidOid).then_some(r)
}

// dp.invalidate_plans(): at commit, every session re-plans its cached statements with DP levels
// (they read the pinned level and the settings again). Run by dp.pin_privacy_level.
crate::pg::fmgr::pg_v1!(pg_finfo_dp_invalidate_plans, dp_invalidate_plans, |_fcinfo| {
    if let Some(r) = role_budget_relid() {
        pg_sys::CacheInvalidateRelcacheByRelid(r);
    }
    pg_sys::Datum::from(0)
});
