//! Protected tables and trusted roles.
//!
//! A DBA protects a table with the security label `protected` of provider `pg_dp` (directly, with
//! `SECURITY LABEL FOR pg_dp ON TABLE t IS 'protected'`, or through `dp.protect_table`). From then
//! on the table, its partitions and its inheritance children can be read only by DP queries the
//! grammar admits (`grammar.rs`), except by the roles exempt from protection: superusers, the
//! table's owner, and roles labelled `trusted` (`dp.trust_role`), with their members.
//!
//! Columns of a protected table carry the table's privacy declarations, as JSON labels of the same
//! provider: the privacy unit (`{"privacy_unit": {"max_groups_contributed": 1, "max_count_per_unit":
//! 1}}`, on the column that identifies a person, or on a foreign key to a protected table that has
//! one) and public domains of GROUP BY keys (`{"domain": ["north", "south"]}`, or `{"domain":
//! {"table": "public.regions", "column": "name"}}`); see `rewrite.rs` for their use.
//!
//! Labels are kept by PostgreSQL (`pg_seclabel`, `pg_shseclabel`), so they follow renames and are
//! dumped and restored with the objects. Each backend caches what it read; a label change sends a
//! relcache invalidation (of the table, or of everything for a role), which empties the cache.
use crate::pg::error::raise_with;
use pgrx::pg_sys::{self, Oid};
use pgrx::PgSqlErrorCode;
use serde::Deserialize;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{c_char, CStr};

pub const PROVIDER: &CStr = c"pg_dp";
/// The label of a protected table.
pub const PROTECTED: &str = "protected";
/// The word of a table's label that turns the release cache off for it (`dp.set_release_cache`).
pub const NO_RELEASE_CACHE: &str = "no_release_cache";

/// The words of a table's label (`protected`, `no_release_cache`, separated by commas).
fn label_words(label: &str) -> impl Iterator<Item = &str> {
    label.split(',').map(str::trim).filter(|w| !w.is_empty())
}

/// The word of a table's label that declares its public row count (`dp.set_public_count`):
/// `public_count=<n>`, 1 ≤ n ≤ 2^53.
pub const PUBLIC_COUNT: &str = "public_count=";

/// The largest public count: integers up to 2^53 are exact in float8, where dp_avg divides by it.
pub const MAX_PUBLIC_COUNT: i64 = 1 << 53;

/// The count in a `public_count=<n>` word, if it is one and n is in range.
fn public_count_word(w: &str) -> Option<i64> {
    let digits = w.strip_prefix(PUBLIC_COUNT)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 16 {
        return None;
    }
    digits.parse::<i64>().ok().filter(|n| (1..=MAX_PUBLIC_COUNT).contains(n))
}

/// The row count a DBA declared public for the relation itself (`dp.set_public_count`), if any.
pub fn public_count(relid: Oid) -> Option<i64> {
    unsafe { relation_label(relid).as_deref().and_then(|l| label_words(l).find_map(public_count_word)) }
}

fn label_has(label: Option<&str>, word: &str) -> bool {
    label.is_some_and(|l| label_words(l).any(|w| w == word))
}
/// The label of a role exempt from protection.
pub const TRUSTED: &str = "trusted";

const INHERITS_RELATION_ID: Oid = Oid::from_u32(2611);
const INHERITS_RELID_SEQNO_INDEX_ID: Oid = Oid::from_u32(2680);
pub(super) const SHARED_SECLABEL_RELATION_ID: Oid = Oid::from_u32(3592);
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
    /// relation → its column labels (attnum, label)
    columns: HashMap<Oid, std::rc::Rc<Vec<(i16, ColumnLabel)>>>,
}

/// A pg_dp label on a column.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ColumnLabel {
    /// The column identifies the person a row belongs to.
    PrivacyUnit(UnitBounds),
    /// The column's public values, for GROUP BY keys.
    Domain(Domain),
    /// Public bounds of a numeric column (`dp.set_bounds`), as decimal text.
    Bounds(DeclaredBounds),
}

impl ColumnLabel {
    fn kind(&self) -> &'static str {
        match self {
            ColumnLabel::PrivacyUnit(_) => "privacy unit",
            ColumnLabel::Domain(_) => "domain",
            ColumnLabel::Bounds(_) => "bounds",
        }
    }
}

/// Declared bounds of a column: decimal text, lower ≤ upper, valid for the column's type.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredBounds {
    pub lower: String,
    pub upper: String,
}

/// Contribution bounds of a privacy unit.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnitBounds {
    #[serde(default = "one")]
    pub max_groups_contributed: u32,
    #[serde(default = "one")]
    pub max_count_per_unit: u32,
}

fn one() -> u32 {
    1
}

/// Where a column's public values come from.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged, deny_unknown_fields)]
pub enum Domain {
    /// The listed values (text input of the column's type).
    Values(Vec<String>),
    /// The distinct values of a column of a public table.
    Table { table: String, column: String },
}

/// Largest number of groups a unit may contribute to, and of rows it may count in one group.
pub const MAX_UNIT_BOUND: u32 = 1_000_000;
/// Most values a domain label may list.
pub const MAX_DOMAIN_VALUES: usize = 100_000;

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

/// Every pg_dp label on a column of `relid`: (attnum, label text), from pg_seclabel.
unsafe fn column_label_texts(relid: Oid) -> Vec<(i16, String)> {
    let rel = pg_sys::table_open(SECLABEL_RELATION_ID, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    let desc = (*rel).rd_att;
    let natts = (*desc).natts as usize;
    let scan = pg_sys::systable_beginscan(rel, pg_sys::InvalidOid, false, std::ptr::null_mut(), 0, std::ptr::null_mut());
    let mut values = vec![pg_sys::Datum::from(0usize); natts];
    let mut nulls = vec![false; natts];
    let mut out = Vec::new();
    loop {
        let tup = pg_sys::systable_getnext(scan);
        if tup.is_null() {
            break;
        }
        // pg_seclabel: objoid, classoid, objsubid, provider, label
        pg_sys::heap_deform_tuple(tup, desc, values.as_mut_ptr(), nulls.as_mut_ptr());
        if nulls[..5].iter().any(|n| *n)
            || Oid::from(values[0].value() as u32) != relid
            || Oid::from(values[1].value() as u32) != pg_sys::RelationRelationId
            || values[2].value() as i32 <= 0
        {
            continue;
        }
        let text = |d: pg_sys::Datum| CStr::from_ptr(pg_sys::text_to_cstring(d.cast_mut_ptr())).to_string_lossy().into_owned();
        if text(values[3]) == "pg_dp" {
            out.push((values[2].value() as i32 as i16, text(values[4])));
        }
    }
    pg_sys::systable_endscan(scan);
    pg_sys::table_close(rel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    out
}

/// The column labels of a relation, parsed (labels that do not parse were refused when set).
pub fn column_labels(relid: Oid) -> std::rc::Rc<Vec<(i16, ColumnLabel)>> {
    let now = GENERATION.with(|g| g.get());
    let hit = CACHE.with(|c| {
        let c = c.borrow();
        (c.generation == now).then(|| c.columns.get(&relid).cloned()).flatten()
    });
    if let Some(v) = hit {
        return v;
    }
    let parsed: Vec<(i16, ColumnLabel)> = unsafe { column_label_texts(relid) }
        .into_iter()
        .filter_map(|(a, t)| serde_json::from_str(&t).ok().map(|l| (a, l)))
        .collect();
    let v = std::rc::Rc::new(parsed);
    if GENERATION.with(|g| g.get()) == now {
        CACHE.with(|c| {
            let mut c = c.borrow_mut();
            if c.generation != now {
                *c = Cache { generation: now, ..Cache::default() };
            }
            c.columns.insert(relid, v.clone());
        });
    }
    v
}

/// The privacy unit that applies to a relation: its own label, or the nearest ancestor's (a
/// partition or inheritance child read on its own keeps its parent's unit), as (attnum in `relid`,
/// bounds).
pub fn effective_privacy_unit(relid: Oid) -> Option<(i16, UnitBounds)> {
    if let Some(u) = privacy_unit(relid) {
        return Some(u);
    }
    unsafe {
        for a in ancestors(relid) {
            if let Some((att, b)) = privacy_unit(a) {
                return Some((same_column(a, att, relid)?, b));
            }
        }
    }
    None
}

/// The public domain that applies to column `attnum` of a relation: its own, or the nearest
/// ancestor's for the column of the same name.
pub fn effective_domain(relid: Oid, attnum: i16) -> Option<Domain> {
    inherited(relid, attnum, domain_of)
}

/// A column declaration that applies to column `attnum` of a relation: its own (`own`), or the
/// nearest ancestor's for the column of the same name (a partition or child keeps its parent's).
fn inherited<T>(relid: Oid, attnum: i16, own: impl Fn(Oid, i16) -> Option<T>) -> Option<T> {
    if let Some(v) = own(relid, attnum) {
        return Some(v);
    }
    unsafe { ancestors(relid).into_iter().find_map(|a| same_column(relid, attnum, a).and_then(|att| own(a, att))) }
}

/// The attnum in `to` of the column named like column `attnum` of `from`.
unsafe fn same_column(from: Oid, attnum: i16, to: Oid) -> Option<i16> {
    let name = pg_sys::get_attname(from, attnum, true);
    if name.is_null() {
        return None;
    }
    let a = pg_sys::get_attnum(to, name);
    (a > 0).then_some(a)
}

/// A partition or inheritance child of `relid` (not itself) that declares its own privacy unit.
pub unsafe fn descendant_with_unit(relid: Oid) -> Option<Oid> {
    if !crate::pg::ffi::has_subclass(relid) {
        return None;
    }
    crate::pg::nodes::list_oids(crate::pg::ffi::find_all_inheritors(relid)).into_iter().find(|r| *r != relid && privacy_unit(*r).is_some())
}

/// The privacy unit column of a relation and its bounds, if one is declared on it.
pub fn privacy_unit(relid: Oid) -> Option<(i16, UnitBounds)> {
    column_labels(relid).iter().find_map(|(a, l)| match l {
        ColumnLabel::PrivacyUnit(b) => Some((*a, *b)),
        _ => None,
    })
}

/// The bounds declared for column `attnum` of a relation: its own, or the nearest ancestor's for the
/// column of the same name.
pub fn effective_bounds(relid: Oid, attnum: i16) -> Option<DeclaredBounds> {
    inherited(relid, attnum, |r, a| {
        column_labels(r).iter().find_map(|(x, l)| match l {
            ColumnLabel::Bounds(b) if *x == a => Some(b.clone()),
            _ => None,
        })
    })
}

/// True for a table whose rows are public values: a plain or partitioned table created by a user,
/// protected neither itself nor through a partition or child.
pub unsafe fn public_table(relid: Oid) -> bool {
    let kind = pg_sys::get_rel_relkind(relid) as u8;
    (kind == pg_sys::RELKIND_RELATION || kind == pg_sys::RELKIND_PARTITIONED_TABLE)
        && relid.to_u32() >= pg_sys::FirstNormalObjectId
        && !reads_protected(relid, true)
}

/// The public domain declared for a column, if any.
pub fn domain_of(relid: Oid, attnum: i16) -> Option<Domain> {
    column_labels(relid).iter().find_map(|(a, l)| match l {
        ColumnLabel::Domain(d) if *a == attnum => Some(d.clone()),
        _ => None,
    })
}

/// Every ancestor of a relation (partitioned tables and inheritance parents, at any depth).
pub unsafe fn ancestors(relid: Oid) -> Vec<Oid> {
    let mut out: Vec<Oid> = Vec::new();
    let mut todo = parents(relid);
    while let Some(p) = todo.pop() {
        if out.contains(&p) || out.len() > MAX_DEPTH {
            continue;
        }
        out.push(p);
        todo.extend(parents(p));
    }
    out
}

/// The first of `relid` and its ancestors with row security that applies to the current role.
pub unsafe fn row_security_above(relid: Oid) -> Option<Oid> {
    std::iter::once(relid)
        .chain(ancestors(relid))
        .find(|r| pg_sys::check_enable_rls(*r, pg_sys::InvalidOid, false) == pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32)
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

/// Runs `f` as the bootstrap superuser (a local user change, restored when `f` returns or raises):
/// for the work pg_dp does on a caller's behalf that the caller may not do itself.
pub unsafe fn as_bootstrap_superuser<R>(f: impl FnOnce() -> R) -> R {
    let (mut user, mut sec) = (pg_sys::InvalidOid, 0);
    pg_sys::GetUserIdAndSecContext(&mut user, &mut sec);
    pg_sys::SetUserIdAndSecContext(Oid::from(pg_sys::BOOTSTRAP_SUPERUSERID), sec | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32);
    let f = std::panic::AssertUnwindSafe(f);
    pgrx::PgTryBuilder::new(move || {
        let f = f;
        (f.0)()
    })
    .finally(|| pg_sys::SetUserIdAndSecContext(user, sec))
    .execute()
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
    if label_has(relation_label(relid).as_deref(), PROTECTED) {
        return true;
    }
    // a Citus shard (on a worker) is protected with its table
    if crate::catalog::citus::shard_owner(relid).is_some_and(|t| protected_here_or_above(t, depth + 1)) {
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
    if !crate::pg::ffi::has_subclass(relid) {
        return false;
    }
    let all = crate::pg::ffi::find_all_inheritors(relid);
    crate::pg::nodes::list_oids(all).into_iter().any(|r| r != relid && label_has(relation_label(r).as_deref(), PROTECTED))
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
    let v = unsafe { labelled_objects(SHARED_SECLABEL_RELATION_ID, pg_sys::AuthIdRelationId, "pg_dp", |l| l == TRUSTED, false) };
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

/// True if a DBA turned the release cache off for the relation itself (callers check its ancestors).
pub fn release_cache_off_here(relid: Oid) -> bool {
    unsafe { label_has(relation_label(relid).as_deref(), NO_RELEASE_CACHE) }
}

/// True if the database holds at least one protected table.
pub fn any_protected() -> bool {
    cached(
        |c| c.any_protected,
        || unsafe { !labelled_objects(SECLABEL_RELATION_ID, pg_sys::RelationRelationId, "pg_dp", |l| label_has(Some(l), PROTECTED), true).is_empty() },
        |c, v| c.any_protected = Some(v),
    )
}

/// Objects of class `classoid` carrying a label of `provider` that `wanted` accepts, read from a
/// security-label catalog (pg_seclabel: objoid, classoid, objsubid, provider, label; pg_shseclabel:
/// the same without objsubid). Both catalogs are small: a sequential scan suffices.
pub(super) unsafe fn labelled_objects(catalog: Oid, classoid: Oid, provider: &str, wanted: impl Fn(&str) -> bool, has_subid: bool) -> Vec<Oid> {
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
        if text(values[provider_at]) == provider && wanted(&text(values[label_at])) {
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
    unsafe { any_protected() && !is_trusted(pg_sys::GetUserId()) && !reads_all_stats() }
}

/// True if the current role has the privileges of pg_read_all_stats (pg_monitor is a member):
/// PostgreSQL's role for reading every statistic, which pg_dp trusts with the statistics of
/// protected tables too (not with their rows).
unsafe fn reads_all_stats() -> bool {
    let r = pg_sys::get_role_oid(c"pg_read_all_stats".as_ptr(), true);
    r != pg_sys::InvalidOid && pg_sys::has_privs_of_role(pg_sys::GetUserId(), r)
}

/// True if the current role is a superuser or a member of dp_admin.
pub(super) unsafe fn is_dp_admin() -> bool {
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
            check_column_label(obj.objectId, obj.objectSubId as i16, label.as_deref());
            pg_sys::CacheInvalidateRelcacheAll();
            return;
        }
        let kind = pg_sys::get_rel_relkind(obj.objectId) as u8;
        if let Some(l) = label.as_deref() {
            let words: Vec<&str> = label_words(l).collect();
            // only these characters: the SQL functions that read labels split on commas and spaces
            let plain = l.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '=' | ',' | ' '));
            let valid = plain
                && !words.is_empty()
                && words.iter().all(|w| *w == PROTECTED || *w == NO_RELEASE_CACHE || public_count_word(w).is_some())
                && words.iter().collect::<std::collections::HashSet<_>>().len() == words.len()
                && words.iter().filter(|w| w.starts_with(PUBLIC_COUNT)).count() <= 1;
            if !valid {
                raise_with(
                    PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                    format!("invalid pg_dp label for a table: \"{l}\" (valid: 'protected', 'no_release_cache' and 'public_count=<n>' with n from 1 to 2^53, separated by commas)"),
                    None,
                );
            }
            if words.iter().any(|w| w.starts_with(PUBLIC_COUNT)) && !(kind == pg_sys::RELKIND_RELATION || kind == pg_sys::RELKIND_PARTITIONED_TABLE) {
                raise_with(
                    PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
                    "a public row count can be declared only for tables and partitioned tables".into(),
                    None,
                );
            }
            let table = kind == pg_sys::RELKIND_RELATION || kind == pg_sys::RELKIND_PARTITIONED_TABLE;
            if words.contains(&PROTECTED) && !table {
                raise_with(
                    PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
                    "pg_dp can protect only tables and partitioned tables".into(),
                    Some("protect the table a view or materialized view reads from"),
                );
            }
            if !table && kind != pg_sys::RELKIND_MATVIEW {
                raise_with(
                    PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
                    "the release cache can be turned off only for tables, partitioned tables and materialized views".into(),
                    None,
                );
            }
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
        raise_with(PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE, "pg_dp labels only tables and roles".into(), None);
    }
}

/// Declared bounds: finite decimals with |bound| ≤ 1e30, lower ≤ upper, on a column of a numeric
/// type, integers within the type's range for an integer column.
unsafe fn check_declared_bounds(column: &str, typ: Oid, b: &DeclaredBounds) {
    let base = pg_sys::getBaseType(typ);
    let int_range: Option<(f64, f64)> = match base {
        pg_sys::INT2OID => Some((i16::MIN as f64, i16::MAX as f64)),
        pg_sys::INT4OID => Some((i32::MIN as f64, i32::MAX as f64)),
        pg_sys::INT8OID => Some((-9.2e18, 9.2e18)),
        pg_sys::FLOAT4OID | pg_sys::FLOAT8OID | pg_sys::NUMERICOID => None,
        _ => raise_with(
            PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
            format!("bounds can be declared only for columns of a numeric type (smallint, integer, bigint, real, double precision, numeric); column \"{column}\" is not"),
            None,
        ),
    };
    let parse = |arg: &str, t: &str| -> f64 {
        match t.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v.abs() <= pg_dp_core::params::BOUND_MAX => v,
            _ => raise_with(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("{arg} must be a finite number between -1e30 and 1e30, got {t}"),
                None,
            ),
        }
    };
    let (lo, hi) = (parse("lower", &b.lower), parse("upper", &b.upper));
    if lo > hi {
        raise_with(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("lower must be less than or equal to upper ({}), got {}", b.upper, b.lower),
            None,
        );
    }
    if let Some((min, max)) = int_range {
        for (arg, t, v) in [("lower", &b.lower, lo), ("upper", &b.upper, hi)] {
            if v.fract() != 0.0 || !(min..=max).contains(&v) || t.contains(['.', 'e', 'E']) {
                raise_with(
                    PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                    format!("{arg} of integer column \"{column}\" must be an integer of its type, got {t}"),
                    None,
                );
            }
        }
    }
}

fn invalid_label(msg: String) -> ! {
    raise_with(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        msg,
        Some(r#"valid column labels: {"privacy_unit": {"max_groups_contributed": 1, "max_count_per_unit": 1}}, {"domain": ["value", ...]}, {"domain": {"table": "schema.table", "column": "name"}}, {"bounds": {"lower": "0", "upper": "100"}}; dp.protect_table, dp.set_domain and dp.set_bounds write them"#),
    )
}

/// Checks a column label before PostgreSQL stores it: a table's column, a valid JSON label, one
/// privacy unit per table on a column whose type can be grouped, domain values that are valid input
/// for the column's type, domain tables that exist, are not protected and have the column's type.
unsafe fn check_column_label(relid: Oid, attnum: i16, label: Option<&str>) {
    let kind = pg_sys::get_rel_relkind(relid) as u8;
    if kind != pg_sys::RELKIND_RELATION && kind != pg_sys::RELKIND_PARTITIONED_TABLE {
        raise_with(PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE, "pg_dp labels columns of tables and partitioned tables only".into(), None);
    }
    let Some(text) = label else { return };
    let column = CStr::from_ptr(pg_sys::get_attname(relid, attnum, false)).to_string_lossy().into_owned();
    let parsed: ColumnLabel = serde_json::from_str(text)
        .unwrap_or_else(|e| invalid_label(format!("invalid pg_dp label for column \"{column}\": {e}")));
    let typ = pg_sys::get_atttype(relid, attnum);
    // one declaration per column: replacing a label of another kind would silently drop it
    let existing = column_label_texts(relid)
        .into_iter()
        .find(|(a, _)| *a == attnum)
        .and_then(|(_, t)| serde_json::from_str::<ColumnLabel>(&t).ok());
    if let Some(old) = existing.filter(|o| o.kind() != parsed.kind()) {
        raise_with(
            PgSqlErrorCode::ERRCODE_OBJECT_IN_USE,
            format!("column \"{column}\" already has a {} declaration", old.kind()),
            Some("a column holds one pg_dp declaration: remove the other one first"),
        );
    }
    match parsed {
        ColumnLabel::Bounds(b) => check_declared_bounds(&column, typ, &b),
        ColumnLabel::PrivacyUnit(_) if !parents(relid).is_empty() => {
            raise_with(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("table {} is a partition or inheritance child: declare the privacy unit on its parent", relation_short_name(relid)),
                Some("partitions and children use the privacy unit of their parent"),
            );
        }
        ColumnLabel::PrivacyUnit(b) => {
            for (arg, v) in [("max_groups_contributed", b.max_groups_contributed), ("max_count_per_unit", b.max_count_per_unit)] {
                if !(1..=MAX_UNIT_BOUND).contains(&v) {
                    raise_with(
                        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                        format!("{arg} must be an integer between 1 and {MAX_UNIT_BOUND}, got {v}"),
                        None,
                    );
                }
            }
            let others: Vec<i16> = column_label_texts(relid)
                .into_iter()
                .filter(|(a, t)| *a != attnum && matches!(serde_json::from_str::<ColumnLabel>(t), Ok(ColumnLabel::PrivacyUnit(_))))
                .map(|(a, _)| a)
                .collect();
            if let Some(&other) = others.first() {
                let name = CStr::from_ptr(pg_sys::get_attname(relid, other, false)).to_string_lossy().into_owned();
                raise_with(
                    PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                    format!("table {} already has privacy unit column \"{name}\"", relation_short_name(relid)),
                    Some("a table has one privacy unit; remove the other label first"),
                );
            }
            let tc = pg_sys::lookup_type_cache(typ, (pg_sys::TYPECACHE_EQ_OPR | pg_sys::TYPECACHE_LT_OPR | pg_sys::TYPECACHE_HASH_PROC) as i32);
            if (*tc).eq_opr == pg_sys::InvalidOid || (*tc).lt_opr == pg_sys::InvalidOid {
                raise_with(
                    PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                    format!("privacy unit column \"{column}\" has a type without equality and ordering"),
                    Some("a privacy unit is grouped and sorted: use a column of a type with a btree operator class"),
                );
            }
        }
        ColumnLabel::Domain(Domain::Values(values)) => {
            if values.is_empty() || values.len() > MAX_DOMAIN_VALUES {
                invalid_label(format!("a domain must list between 1 and {MAX_DOMAIN_VALUES} values, got {}", values.len()));
            }
            let mut infunc = pg_sys::InvalidOid;
            let mut ioparam = pg_sys::InvalidOid;
            pg_sys::getTypeInputInfo(typ, &mut infunc, &mut ioparam);
            for v in &values {
                let c = std::ffi::CString::new(v.as_str()).unwrap_or_else(|_| invalid_label("a domain value must not contain a zero byte".into()));
                // raises PostgreSQL's own error for a value that is not valid input of the type
                pg_sys::OidInputFunctionCall(infunc, c.as_ptr() as *mut c_char, ioparam, -1);
            }
        }
        ColumnLabel::Domain(Domain::Table { table, column: col }) => {
            let (table_oid, col_attnum) = domain_table_column(&table, &col);
            let kind = pg_sys::get_rel_relkind(table_oid) as u8;
            if kind != pg_sys::RELKIND_RELATION && kind != pg_sys::RELKIND_PARTITIONED_TABLE || table_oid.to_u32() < pg_sys::FirstNormalObjectId {
                invalid_label(format!("domain table {table} is not a plain table: a domain's values come from a table"));
            }
            if reads_protected(table_oid, true) {
                invalid_label(format!("domain table {table} is protected: the values of a domain must be public"));
            }
            if pg_sys::get_atttype(table_oid, col_attnum) != typ {
                invalid_label(format!("column {col} of domain table {table} has another type than column \"{column}\""));
            }
        }
    }
}

/// The table and column of a domain label, resolved (errors name the missing one).
pub unsafe fn domain_table_column(table: &str, column: &str) -> (Oid, i16) {
    let t = std::ffi::CString::new(table).unwrap_or_else(|_| invalid_label("a table name must not contain a zero byte".into()));
    let names = pg_sys::stringToQualifiedNameList(t.as_ptr());
    let relid = pg_sys::RangeVarGetRelidExtended(pg_sys::makeRangeVarFromNameList(names), pg_sys::NoLock as pg_sys::LOCKMODE, pg_sys::RVROption::RVR_MISSING_OK, None, std::ptr::null_mut());
    if relid == pg_sys::InvalidOid {
        raise_with(PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE, format!("domain table {table} does not exist"), None);
    }
    let c = std::ffi::CString::new(column).unwrap_or_else(|_| invalid_label("a column name must not contain a zero byte".into()));
    let attnum = pg_sys::get_attnum(relid, c.as_ptr());
    if attnum <= 0 {
        raise_with(PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN, format!("column {column} of domain table {table} does not exist"), None);
    }
    (relid, attnum)
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
        Some("read it through DP aggregates (dp_count, dp_sum, dp_avg, dp_median, ...); SELECT * FROM dp.grammar lists what pg_dp admits below them"),
    );
}
