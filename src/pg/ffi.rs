//! PostgreSQL functions that pgrx does not bind, declared here and called through pgrx's error
//! boundary (a PostgreSQL error inside becomes a Rust panic, then an ERROR).
use pgrx::pg_sys::{self, Oid};

mod raw {
    use pgrx::pg_sys::{self, Oid};
    unsafe extern "C-unwind" {
        pub fn find_all_inheritors(parent: Oid, lockmode: pg_sys::LOCKMODE, numparents: *mut *mut pg_sys::List) -> *mut pg_sys::List;
        pub fn has_subclass(relid: Oid) -> bool;
        pub fn expand_grouping_sets(grouping_sets: *mut pg_sys::List, group_distinct: bool, limit: i32) -> *mut pg_sys::List;
        pub fn numeric_float8_no_overflow(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum;
        pub fn float8_numeric(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum;
        pub fn pg_newlocale_from_collation(collid: Oid) -> *mut std::ffi::c_void;
        pub fn lc_collate_is_c(collation: Oid) -> bool;
        pub fn SetTuplestoreDestReceiverParams(
            dest: *mut pg_sys::DestReceiver,
            store: *mut pg_sys::Tuplestorestate,
            cxt: pg_sys::MemoryContext,
            detoast: bool,
            target_tupdesc: pg_sys::TupleDesc,
            map_failure_msg: *const std::ffi::c_char,
        );
    }
}

/// Points a tuplestore DestReceiver (tcop/dest) at `store`, its tuples kept in `cxt`.
pub unsafe fn set_tuplestore_dest(dest: *mut pg_sys::DestReceiver, store: *mut pg_sys::Tuplestorestate, cxt: pg_sys::MemoryContext) {
    pg_sys::ffi::pg_guard_ffi_boundary(|| raw::SetTuplestoreDestReceiverParams(dest, store, cxt, false, std::ptr::null_mut(), std::ptr::null()))
}

/// Every relation that inherits from `parent`, `parent` included (partitions and inheritance
/// children, at any depth). Takes no lock.
pub unsafe fn find_all_inheritors(parent: Oid) -> *mut pg_sys::List {
    pg_sys::ffi::pg_guard_ffi_boundary(|| raw::find_all_inheritors(parent, pg_sys::NoLock as pg_sys::LOCKMODE, std::ptr::null_mut()))
}

/// True if the relation may have inheritance children or partitions.
pub unsafe fn has_subclass(relid: Oid) -> bool {
    pg_sys::ffi::pg_guard_ffi_boundary(|| raw::has_subclass(relid))
}

/// The grouping sets of GROUPING SETS, ROLLUP and CUBE clauses, expanded into a list of sets.
pub unsafe fn expand_grouping_sets(grouping_sets: *mut pg_sys::List, group_distinct: bool) -> *mut pg_sys::List {
    pg_sys::ffi::pg_guard_ffi_boundary(|| raw::expand_grouping_sets(grouping_sets, group_distinct, -1))
}

/// A numeric Datum as float8 without any error: ±∞ past the float8 range, NaN for NaN.
pub unsafe fn numeric_to_f64(d: pg_sys::Datum) -> f64 {
    let r = pg_sys::DirectFunctionCall1Coll(Some(raw::numeric_float8_no_overflow), pg_sys::InvalidOid, d);
    f64::from_bits(r.value() as u64)
}

/// A finite float8 as numeric (never an error for a finite value).
pub unsafe fn f64_to_numeric(x: f64) -> pg_sys::Datum {
    pg_sys::DirectFunctionCall1Coll(Some(raw::float8_numeric), pg_sys::InvalidOid, pg_sys::Datum::from(x.to_bits()))
}

/// Loads a collation's locale into the backend (the first use in a session does it, and warns when
/// the collation's recorded version differs from the library's). C, POSIX and the database default
/// need nothing.
pub unsafe fn load_collation(collid: Oid) {
    if collid == pg_sys::InvalidOid || collid == pg_sys::DEFAULT_COLLATION_OID {
        return;
    }
    pg_sys::ffi::pg_guard_ffi_boundary(|| {
        if !raw::lc_collate_is_c(collid) {
            raw::pg_newlocale_from_collation(collid);
        }
    })
}
