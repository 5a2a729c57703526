//! Protected tables and trusted roles.
//!
//! A DBA protects a table with the security label `protected` of provider `pg_dp` (directly, with
//! `SECURITY LABEL FOR pg_dp ON TABLE t IS 'protected'`, or through `dp.protect_table`). From then
//! on the table, its partitions and its inheritance children can be read only by DP queries the
//! grammar admits (`grammar.rs`), except by the roles exempt from protection: superusers, the
//! table's owner, and roles labelled `trusted` (`dp.trust_role`), with their members.
//!
//! Labels are kept by PostgreSQL (`pg_seclabel`, `pg_shseclabel`), so they follow renames and are
//! dumped and restored with the objects. Each backend caches what it read; a label change sends a
//! relcache invalidation (of the table, or of everything for a role), which empties the cache.
use super::error::raise_with;
use pgrx::pg_sys::{self, Oid};
use pgrx::PgSqlErrorCode;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{c_char, CStr};

pub const PROVIDER: &CStr = c"pg_dp";
/// The label of a protected table.
pub const PROTECTED: &str = "protected";
/// The label of a role exempt from protection.
pub const TRUSTED: &str = "trusted";

const INHERITS_RELATION_ID: Oid = Oid::from_u32(2611);
const INHERITS_RELID_SEQNO_INDEX_ID: Oid = Oid::from_u32(2680);
const SHARED_SECLABEL_RELATION_ID: Oid = Oid::from_u32(3592);
const SECLABEL_RELATION_ID: Oid = Oid::from_u32(3596);
/// Inheritance is at most this deep in practice; deeper chains are treated as protected.
const MAX_DEPTH: usize = 64;

thread_local! {
    /// Bumped by every relcache invalidation; a cache built under another value is stale.
    static GENERATION: Cell<u64> = const { Cell::new(0) };
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
}

#[derive(Default)]
struct Cache {
    generation: u64,
    /// relation → protected itself or through an ancestor
    protected: HashMap<Oid, bool>,
    /// relation → some descendant (partition, inheritance child) is protected
    protected_below: HashMap<Oid, bool>,
    trusted_roles: Option<Vec<Oid>>,
    any_protected: Option<bool>,
}

pub fn init() {
    unsafe {
        pg_sys::register_label_provider(PROVIDER.as_ptr(), Some(check_relabel));
        pg_sys::CacheRegisterRelcacheCallback(Some(invalidate), pg_sys::Datum::from(0usize));
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn invalidate(_arg: pg_sys::Datum, _relid: Oid) {
    GENERATION.with(|g| g.set(g.get().wrapping_add(1)));
}

/// Looks `get` up in the cache, or computes it with `compute` and stores it with `put`. A result
/// computed while an invalidation arrived is returned but not kept. No borrow of the cache is held
/// while `compute` runs (it reads catalogs, which can deliver invalidations).
fn cached<T: Copy>(get: impl Fn(&Cache) -> Option<T>, compute: impl FnOnce() -> T, put: impl FnOnce(&mut Cache, T)) -> T {
    let now = GENERATION.with(|g| g.get());
    let hit = CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.generation != now {
            *c = Cache { generation: now, ..Cache::default() };
        }
        get(&c)
    });
    if let Some(v) = hit {
        return v;
    }
    let v = compute();
    if GENERATION.with(|g| g.get()) == now {
        CACHE.with(|c| put(&mut c.borrow_mut(), v));
    }
    v
}

/// The pg_dp label of a relation (whole table, not a column), if any.
unsafe fn relation_label(relid: Oid) -> Option<String> {
    let addr = pg_sys::ObjectAddress { classId: pg_sys::RelationRelationId, objectId: relid, objectSubId: 0 };
    let l = pg_sys::GetSecurityLabel(&addr, PROVIDER.as_ptr());
    (!l.is_null()).then(|| CStr::from_ptr(l).to_string_lossy().into_owned())
}

/// The direct inheritance parents of a relation (partitioned tables included), from pg_inherits.
unsafe fn parents(relid: Oid) -> Vec<Oid> {
    let rel = pg_sys::table_open(INHERITS_RELATION_ID, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    let mut key: pg_sys::ScanKeyData = std::mem::zeroed();
    pg_sys::ScanKeyInit(&mut key, 1, pg_sys::BTEqualStrategyNumber as u16, pg_sys::RegProcedure::from(pg_sys::F_OIDEQ), pg_sys::Datum::from(relid));
    let scan = pg_sys::systable_beginscan(rel, INHERITS_RELID_SEQNO_INDEX_ID, true, std::ptr::null_mut(), 1, &mut key);
    let mut out = Vec::new();
    loop {
        let tup = pg_sys::systable_getnext(scan);
        if tup.is_null() {
            break;
        }
        // FormData_pg_inherits: inhrelid oid, inhparent oid, ...
        let row = pg_sys::GETSTRUCT(tup) as *const Oid;
        out.push(*row.add(1));
    }
    pg_sys::systable_endscan(scan);
    pg_sys::table_close(rel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    out
}

/// True if the relation or one of its ancestors is labelled `protected`.
pub fn is_protected(relid: Oid) -> bool {
    cached(|c| c.protected.get(&relid).copied(), || unsafe { protected_here_or_above(relid, 0) }, |c, v| {
        c.protected.insert(relid, v);
    })
}

unsafe fn protected_here_or_above(relid: Oid, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return true;
    }
    if relation_label(relid).as_deref() == Some(PROTECTED) {
        return true;
    }
    parents(relid).into_iter().any(|p| protected_here_or_above(p, depth + 1))
}

/// True if reading `relid` (with its children when `inh`) reads rows of a protected table: the
/// relation is protected itself or through an ancestor, or one of its descendants is.
pub fn reads_protected(relid: Oid, inh: bool) -> bool {
    if is_protected(relid) {
        return true;
    }
    if !inh {
        return false;
    }
    cached(|c| c.protected_below.get(&relid).copied(), || unsafe { protected_below(relid) }, |c, v| {
        c.protected_below.insert(relid, v);
    })
}

unsafe fn protected_below(relid: Oid) -> bool {
    if !super::ffi::has_subclass(relid) {
        return false;
    }
    let all = super::ffi::find_all_inheritors(relid);
    super::agg::list_oids(all).into_iter().any(|r| r != relid && relation_label(r).as_deref() == Some(PROTECTED))
}

/// Every role labelled `trusted` (pg_shseclabel is shared by all databases).
fn trusted_roles() -> Vec<Oid> {
    let now = GENERATION.with(|g| g.get());
    if let Some(v) = CACHE.with(|c| {
        let c = c.borrow();
        (c.generation == now).then(|| c.trusted_roles.clone()).flatten()
    }) {
        return v;
    }
    let v = unsafe { labelled_objects(SHARED_SECLABEL_RELATION_ID, pg_sys::AuthIdRelationId, TRUSTED, false) };
    if GENERATION.with(|g| g.get()) == now {
        CACHE.with(|c| {
            let mut c = c.borrow_mut();
            if c.generation != now {
                *c = Cache { generation: now, ..Cache::default() };
            }
            c.trusted_roles = Some(v.clone());
        });
    }
    v
}

/// True if the database holds at least one protected table.
pub fn any_protected() -> bool {
    cached(
        |c| c.any_protected,
        || unsafe { !labelled_objects(SECLABEL_RELATION_ID, pg_sys::RelationRelationId, PROTECTED, true).is_empty() },
        |c, v| c.any_protected = Some(v),
    )
}

/// Objects of class `classoid` carrying pg_dp label `label`, read from a security-label catalog
/// (pg_seclabel: objoid, classoid, objsubid, provider, label; pg_shseclabel: the same without
/// objsubid). Both catalogs are small: a sequential scan suffices.
unsafe fn labelled_objects(catalog: Oid, classoid: Oid, label: &str, has_subid: bool) -> Vec<Oid> {
    let rel = pg_sys::table_open(catalog, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    let desc = (*rel).rd_att;
    let natts = (*desc).natts as usize;
    let scan = pg_sys::systable_beginscan(rel, pg_sys::InvalidOid, false, std::ptr::null_mut(), 0, std::ptr::null_mut());
    let mut values = vec![pg_sys::Datum::from(0usize); natts];
    let mut nulls = vec![false; natts];
    let (provider_at, label_at) = if has_subid { (3, 4) } else { (2, 3) };
    let mut out = Vec::new();
    loop {
        let tup = pg_sys::systable_getnext(scan);
        if tup.is_null() {
            break;
        }
        pg_sys::heap_deform_tuple(tup, desc, values.as_mut_ptr(), nulls.as_mut_ptr());
        if nulls[..=label_at].iter().any(|n| *n) || Oid::from(values[1].value() as u32) != classoid {
            continue;
        }
        if has_subid && values[2].value() as i32 != 0 {
            continue;
        }
        let text = |d: pg_sys::Datum| CStr::from_ptr(pg_sys::text_to_cstring(d.cast_mut_ptr())).to_string_lossy().into_owned();
        if text(values[provider_at]) == "pg_dp" && text(values[label_at]) == label {
            out.push(Oid::from(values[0].value() as u32));
        }
    }
    pg_sys::systable_endscan(scan);
    pg_sys::table_close(rel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    out
}

/// True if `role` is a superuser or has the privileges of a role labelled `trusted`.
pub fn is_trusted(role: Oid) -> bool {
    unsafe { pg_sys::superuser_arg(role) || trusted_roles().into_iter().any(|t| pg_sys::has_privs_of_role(role, t)) }
}

/// True if the current role may read `relid` directly although it is protected: a superuser, the
/// owner (or a member of the owning role), or a trusted role.
pub fn exempt(relid: Oid) -> bool {
    unsafe {
        let me = pg_sys::GetUserId();
        pg_sys::superuser() || pg_sys::pg_class_ownercheck(relid, me) || is_trusted(me)
    }
}

/// True if statistics about protected data must be hidden from the current role: the database
/// has a protected table and the role is neither a superuser nor trusted.
pub fn statistics_restricted() -> bool {
    unsafe { any_protected() && !is_trusted(pg_sys::GetUserId()) }
}

/// True if the current role is a superuser or a member of dp_admin.
unsafe fn is_dp_admin() -> bool {
    if pg_sys::superuser() {
        return true;
    }
    let admin = pg_sys::get_role_oid(c"dp_admin".as_ptr(), true);
    admin != pg_sys::InvalidOid && pg_sys::has_privs_of_role(pg_sys::GetUserId(), admin)
}

/// The label hook: runs when `SECURITY LABEL FOR pg_dp` is about to store a label. It checks who
/// may label, what and with which value, and invalidates the caches (and the plans) that depend on
/// the label.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn check_relabel(object: *const pg_sys::ObjectAddress, seclabel: *const c_char) {
    let label = (!seclabel.is_null()).then(|| CStr::from_ptr(seclabel).to_string_lossy().into_owned());
    if !is_dp_admin() {
        raise_with(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            "only superusers and members of dp_admin can set or remove pg_dp labels".into(),
            Some("use dp.protect_table, dp.unprotect_table, dp.trust_role or dp.distrust_role as a member of dp_admin"),
        );
    }
    let obj = &*object;
    if obj.classId == pg_sys::RelationRelationId {
        if obj.objectSubId != 0 {
            raise_with(PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED, "pg_dp labels whole tables, not columns".into(), None);
        }
        let kind = pg_sys::get_rel_relkind(obj.objectId) as u8;
        if label.is_some() && kind != pg_sys::RELKIND_RELATION && kind != pg_sys::RELKIND_PARTITIONED_TABLE {
            raise_with(
                PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
                "pg_dp can protect only tables and partitioned tables".into(),
                Some("protect the table a view or materialized view reads from"),
            );
        }
        if let Some(l) = label.as_deref().filter(|l| *l != PROTECTED) {
            raise_with(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("invalid pg_dp label for a table: \"{l}\" (the valid label is 'protected')"),
                None,
            );
        }
        // every backend's caches and plans: the table's, and those of statistics queries planned
        // while the database had no protected table
        pg_sys::CacheInvalidateRelcacheAll();
    } else if obj.classId == pg_sys::AuthIdRelationId {
        if let Some(l) = label.as_deref().filter(|l| *l != TRUSTED) {
            raise_with(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("invalid pg_dp label for a role: \"{l}\" (the valid label is 'trusted')"),
                None,
            );
        }
        // roles are shared by all databases: invalidate every backend's caches and plans
        pg_sys::CacheInvalidateRelcacheAll();
    } else {
        raise_with(PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED, "pg_dp labels only tables and roles".into(), None);
    }
}

/// Schema-qualified, quoted name of a relation, for messages and receipts.
pub unsafe fn relation_name(relid: Oid) -> String {
    let name = pg_sys::get_rel_name(relid);
    if name.is_null() {
        return format!("relation {}", relid.to_u32());
    }
    let nsp = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid));
    let q = pg_sys::quote_qualified_identifier(nsp, name);
    CStr::from_ptr(q).to_string_lossy().into_owned()
}

/// Unqualified name of a relation, for short messages.
pub unsafe fn relation_short_name(relid: Oid) -> String {
    let name = pg_sys::get_rel_name(relid);
    if name.is_null() {
        format!("relation {}", relid.to_u32())
    } else {
        CStr::from_ptr(name).to_string_lossy().into_owned()
    }
}

/// Name of the current role, for messages.
pub unsafe fn current_role_name() -> String {
    let n = pg_sys::GetUserNameFromId(pg_sys::GetUserId(), true);
    if n.is_null() {
        "?".into()
    } else {
        CStr::from_ptr(n).to_string_lossy().into_owned()
    }
}

/// The error for reading or writing a protected table outside an admitted DP query.
pub unsafe fn refuse_raw_access(relid: Oid, what: &str) -> ! {
    raise_with(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!(
            "permission denied for table {}: it is protected by pg_dp, and role \"{}\" may {what}",
            relation_short_name(relid),
            current_role_name()
        ),
        Some("read it through DP aggregates (dp_count, dp_sum, dp_avg, dp_median, ...); docs/security.md lists the queries pg_dp admits"),
    );
}
