//! Citus: a protected Citus table's label travels to every worker, so that a DP-only role that
//! connects to a worker directly reads nothing raw from the table's shards (docs/distributed.md).
//! After Citus's table- and node-placing functions return (an fmgr hook), pg_dp sends every
//! protected Citus table's label to the workers again (`dp.sync_citus_labels`, run as the bootstrap
//! superuser), failing closed where a worker cannot take it.
use pgrx::pg_sys::{self, Oid};
use std::ffi::CStr;

static mut PREV_NEEDS_FMGR: pg_sys::needs_fmgr_hook_type = None;
static mut PREV_FMGR: pg_sys::fmgr_hook_type = None;

/// Citus functions after which a labelled table may have shards, or a worker may have shell tables,
/// without pg_dp's label: the labels are sent to the workers again when one of them returns. After
/// the table functions a worker that cannot take a label fails the command (its new shards would be
/// unprotected); a node being added cannot see its own shell tables from another connection before
/// the transaction commits, so after the node functions a failure is a warning (and shard moves, which
/// put shards on it, sync again first).
const STRICT_SYNC: &[&[u8]] = &[
    b"create_distributed_table",
    b"create_reference_table",
    b"citus_add_local_table_to_metadata",
    b"alter_distributed_table",
    b"citus_rebalance_start",
    b"rebalance_table_shards",
    b"citus_move_shard_placement",
    b"master_move_shard_placement",
    b"citus_copy_shard_placement",
];

const LENIENT_SYNC: &[&[u8]] = &[b"citus_add_node", b"master_add_node", b"citus_activate_node", b"master_activate_node"];

#[derive(Clone, Copy, PartialEq)]
enum Sync {
    None,
    Strict,
    Lenient,
}

thread_local! {
    static PLACING: std::cell::RefCell<std::collections::HashMap<Oid, Sync>> = std::cell::RefCell::new(std::collections::HashMap::new());
}

pub fn init() {
    unsafe {
        PREV_NEEDS_FMGR = pg_sys::needs_fmgr_hook;
        pg_sys::needs_fmgr_hook = Some(needs_fmgr);
        PREV_FMGR = pg_sys::fmgr_hook;
        pg_sys::fmgr_hook = Some(fmgr);
    }
}

/// The sync after a Citus function of [`STRICT_SYNC`] or [`LENIENT_SYNC`] (in pg_catalog, where only
/// superusers create functions). Asked for every non-built-in function PostgreSQL looks up, so the
/// answer is cached.
fn sync_after(fn_oid: Oid) -> Sync {
    if let Some(b) = PLACING.with(|p| p.borrow().get(&fn_oid).copied()) {
        return b;
    }
    let b = unsafe {
        let name = pg_sys::get_func_name(fn_oid);
        if name.is_null() || pg_sys::get_func_namespace(fn_oid) != Oid::from(pg_sys::PG_CATALOG_NAMESPACE) {
            Sync::None
        } else {
            let name = CStr::from_ptr(name).to_bytes();
            if STRICT_SYNC.contains(&name) {
                Sync::Strict
            } else if LENIENT_SYNC.contains(&name) {
                Sync::Lenient
            } else {
                Sync::None
            }
        }
    };
    PLACING.with(|p| p.borrow_mut().insert(fn_oid, b));
    b
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn needs_fmgr(fn_oid: Oid) -> bool {
    if let Some(prev) = PREV_NEEDS_FMGR {
        if pg_sys::ffi::pg_guard_ffi_boundary(|| prev(fn_oid)) {
            return true;
        }
    }
    sync_after(fn_oid) != Sync::None
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn fmgr(event: pg_sys::FmgrHookEventType::Type, flinfo: *mut pg_sys::FmgrInfo, arg: *mut pg_sys::Datum) {
    if let Some(prev) = PREV_FMGR {
        pg_sys::ffi::pg_guard_ffi_boundary(|| prev(event, flinfo, arg));
    }
    let sync = if event == pg_sys::FmgrHookEventType::FHET_END { sync_after((*flinfo).fn_oid) } else { Sync::None };
    if sync != Sync::None {
        let pg_dp_here = pg_sys::get_extension_oid(c"pg_dp".as_ptr(), true) != pg_sys::InvalidOid;
        if pg_dp_here {
            // as the bootstrap superuser: the caller (a table owner) need not be allowed to run it
            let done = crate::catalog::protect::as_bootstrap_superuser(|| {
                pgrx::Spi::run(if sync == Sync::Strict { "SELECT dp.sync_citus_labels()" } else { "SELECT dp.sync_citus_labels(false)" })
            });
            done.unwrap_or_else(|e| {
                crate::pg::error::raise_with(pgrx::PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("pg_dp: {e}"), None)
            });
        }
    }
}
