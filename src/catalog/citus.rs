//! Citus: which relations are distributed (on the coordinator) and which are shards of them (on a
//! worker), read from Citus's own catalogs when Citus is installed (docs/distributed.md).
//!
//! - A *Citus table* (distributed, reference or managed local) is a row of `pg_dist_partition`.
//! - A *shard* is a table named `<table>_<shardid>`, in its table's schema, whose shard id is a row of
//!   `pg_dist_shard` for that table. On a worker a shard is protected when its table is: a role that
//!   connects to a worker directly reads a shard of a protected table as it would read the table.
//!
//! Without Citus both catalogs are absent and every lookup answers "no" after one syscache miss.
use pgrx::pg_sys::{self, Oid};
use std::ffi::CStr;

/// Citus's catalog of distributed tables, if Citus is installed in this database.
unsafe fn catalog(name: &CStr) -> Option<Oid> {
    let oid = pg_sys::get_relname_relid(name.as_ptr(), Oid::from(pg_sys::PG_CATALOG_NAMESPACE));
    (oid != pg_sys::InvalidOid).then_some(oid)
}

/// Scans a Citus catalog for rows whose column `attno` equals `value` (compared with `eq`, an
/// equality function's OID) and returns column `want` of the first one.
unsafe fn lookup(catalog_oid: Oid, attno: i16, eq: u32, value: pg_sys::Datum, want: i32) -> Option<pg_sys::Datum> {
    let rel = pg_sys::table_open(catalog_oid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    let mut key: pg_sys::ScanKeyData = std::mem::zeroed();
    pg_sys::ScanKeyInit(&mut key, attno, pg_sys::BTEqualStrategyNumber as u16, pg_sys::RegProcedure::from(eq), value);
    let scan = pg_sys::systable_beginscan(rel, pg_sys::InvalidOid, false, std::ptr::null_mut(), 1, &mut key);
    let tup = pg_sys::systable_getnext(scan);
    let out = if tup.is_null() {
        None
    } else {
        let mut isnull = false;
        let d = pg_sys::heap_getattr(tup, want, (*rel).rd_att, &mut isnull);
        (!isnull).then_some(d)
    };
    pg_sys::systable_endscan(scan);
    pg_sys::table_close(rel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    out
}

/// True if `relid` is a Citus table (distributed, reference, or a local table in Citus's metadata).
pub fn is_citus_table(relid: Oid) -> bool {
    unsafe {
        let Some(cat) = catalog(c"pg_dist_partition") else { return false };
        // pg_dist_partition: logicalrelid oid, partmethod, partkey, ...
        lookup(cat, 1, pg_sys::F_OIDEQ, pg_sys::Datum::from(relid), 1).is_some()
    }
}

/// The Citus table whose shard `relid` is, if it is one (on a worker, or on a coordinator that holds
/// shards).
pub fn shard_owner(relid: Oid) -> Option<Oid> {
    unsafe {
        let cat = catalog(c"pg_dist_shard")?;
        let name_ptr = pg_sys::get_rel_name(relid);
        if name_ptr.is_null() {
            return None;
        }
        let name = CStr::from_ptr(name_ptr).to_str().ok()?;
        let (table, id) = name.rsplit_once('_')?;
        if table.is_empty() || id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let shardid: i64 = id.parse().ok()?;
        // pg_dist_shard: logicalrelid oid, shardid int8, ...
        let owner = Oid::from(lookup(cat, 2, pg_sys::F_INT8EQ, pg_sys::Datum::from(shardid), 1)?.value() as u32);
        let owner_name = pg_sys::get_rel_name(owner);
        let same = !owner_name.is_null()
            && CStr::from_ptr(owner_name).to_bytes() == table.as_bytes()
            && pg_sys::get_rel_namespace(owner) == pg_sys::get_rel_namespace(relid);
        same.then_some(owner)
    }
}

// ----- labels follow tables that become Citus tables -------------------------------------------------


