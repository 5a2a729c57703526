//! The source of a whole-table release (DPRP, synthetic data): checked from the catalog and the
//! caller's role alone, opened, and read by a direct scan of every leaf under the statement's
//! snapshot (no query, no planner, no expression that could fail), with error-free conversions of
//! numbers to float8.
use crate::catalog::protect;
use crate::pg::error::raise_with;
use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use std::ffi::CString;

/// Rows read between two interrupt checks of a scan.
pub const CHECK_ROWS: usize = 1024;

/// How a column's stored values become float8, without any possible error.
#[derive(Clone, Copy)]
pub enum Conversion {
    Int2,
    Int4,
    Int8,
    Float4,
    Float8,
    Numeric,
}

impl Conversion {
    pub fn of(base_type: Oid) -> Option<Self> {
        Some(match base_type {
            pg_sys::INT2OID => Conversion::Int2,
            pg_sys::INT4OID => Conversion::Int4,
            pg_sys::INT8OID => Conversion::Int8,
            pg_sys::FLOAT4OID => Conversion::Float4,
            pg_sys::FLOAT8OID => Conversion::Float8,
            pg_sys::NUMERICOID => Conversion::Numeric,
            _ => return None,
        })
    }

    /// An integer column's value, exactly (other kinds rounded toward zero, saturating).
    pub unsafe fn convert_integer(self, d: pg_sys::Datum) -> i64 {
        match self {
            Conversion::Int2 => d.value() as i16 as i64,
            Conversion::Int4 => d.value() as i32 as i64,
            Conversion::Int8 => d.value() as i64,
            _ => {
                let x = self.convert(d);
                if x.is_nan() { 0 } else { x as i64 }
            }
        }
    }

    /// The value as float8: integers exactly or to the nearest float8, numeric by
    /// numeric_float8_no_overflow (±∞ past the float8 range, NaN for NaN), never an error.
    pub unsafe fn convert(self, d: pg_sys::Datum) -> f64 {
        match self {
            Conversion::Int2 => d.value() as i16 as f64,
            Conversion::Int4 => d.value() as i32 as f64,
            Conversion::Int8 => d.value() as i64 as f64,
            Conversion::Float4 => f32::from_bits(d.value() as u32) as f64,
            Conversion::Float8 => f64::from_bits(d.value() as u64),
            Conversion::Numeric => crate::pg::ffi::numeric_to_f64(d),
        }
    }
}

/// One table to scan: a leaf of the source, opened and locked, with the attribute numbers of the
/// chosen columns in it (they can differ between partitions).
struct Leaf {
    rel: pg_sys::Relation,
    attnums: Vec<i16>,
}

/// The source, checked: name for receipts, each column's attribute number, type and type modifier
/// in the source itself, and the leaves to scan.
pub struct Source {
    pub name: String,
    pub attnums: Vec<i16>,
    pub types: Vec<Oid>,
    pub typmods: Vec<i32>,
    leaves: Vec<Leaf>,
}

fn column_cstr(f: &str, c: &str) -> CString {
    CString::new(c).unwrap_or_else(|_| invalid(f, "a column name must not contain a zero byte"))
}

fn invalid(f: &str, msg: &str) -> ! {
    raise_with(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("{f}: {msg}"), None)
}

/// Checks the source and the columns from the catalog and the caller's role only, and opens every
/// leaf with AccessShareLock. Refuses views, materialized views, foreign tables (also as
/// partitions), other relations, a privacy unit (`release` names what protects one row, for the
/// message), row security that applies to the caller, unknown, duplicate and system columns (their
/// number is checked by the core), and a caller without SELECT on an unprotected source.
/// `column_type(source, column, type)` is called for every column and raises on a type the release cannot use.
/// `f` is the SQL function's name, the prefix of every message.
pub unsafe fn open_source(f: &str, release: &str, source: Oid, columns: &[String], column_type: &mut dyn FnMut(&str, &str, Oid)) -> Source {
    for (i, c) in columns.iter().enumerate() {
        if columns[..i].contains(c) {
            invalid(f, &format!("columns must not repeat a column, \"{c}\" appears twice"));
        }
    }
    let relkind = pg_sys::get_rel_relkind(source) as u8;
    if relkind == 0 {
        raise_with(PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE, format!("{f}: source relation {} does not exist", source.to_u32()), None);
    }
    let name: String = Spi::get_one_with_args("SELECT $1::pg_catalog.regclass::pg_catalog.text", &[source.into()]).unwrap().unwrap();
    // a source named by its OID skips the name lookup and with it the schema's USAGE check
    let namespace = pg_sys::get_rel_namespace(source);
    if pg_sys::pg_namespace_aclcheck(namespace, pg_sys::GetUserId(), pg_sys::ACL_USAGE as pg_sys::AclMode) != pg_sys::AclResult::ACLCHECK_OK {
        let schema = crate::pg::fmgr::cstr_or(pg_sys::get_namespace_name(namespace), "?");
        raise_with(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, format!("{f}: permission denied for schema {schema}"), None);
    }
    // system catalogs describe every table (pg_class holds row counts): not a source
    if source.to_u32() < pg_sys::FirstNormalObjectId {
        raise_with(
            PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
            format!("{f}: source {name} is a system catalog, not a table"),
            None,
        );
    }
    if relkind != pg_sys::RELKIND_RELATION && relkind != pg_sys::RELKIND_PARTITIONED_TABLE {
        raise_with(
            PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
            format!("{f}: source {name} is {}, not a table", relkind_name(relkind)),
            Some("release a table or a partitioned table; a view's rows need not be one per person, and its filter would make the row count an exact count"),
        );
    }
    if protect::is_protected(source) && !protect::exempt(source) {
        crate::execution::admission::refuse_under_instrumentation(&format!("{f}: {release} of protected table"), source);
        if crate::execution::tickets::in_parallel_worker() {
            // started by a parallel-safe function in a worker: no leader checks or pays for it
            raise_with(
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!("{f}: {release} of protected table {} inside a parallel worker", protect::relation_short_name(source)),
                Some("call it directly, not from a PARALLEL SAFE function"),
            );
        }
    }
    let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
    let root = pg_sys::table_open(source, lock);
    // privileges: a protected table is read through DP releases without a grant, as by DP
    // aggregates; any other source needs SELECT on the table or on every chosen column
    let me = pg_sys::GetUserId();
    let mut attnums = Vec::with_capacity(columns.len());
    let mut types = Vec::with_capacity(columns.len());
    let mut typmods = Vec::with_capacity(columns.len());
    let desc = (*root).rd_att;
    for c in columns {
        let attnum = pg_sys::get_attnum(source, column_cstr(f, c).as_ptr());
        if attnum <= 0 {
            raise_with(PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN, format!("{f}: column \"{c}\" of {name} does not exist"), None);
        }
        let att = &*(*desc).attrs.as_ptr().add(attnum as usize - 1);
        column_type(&name, c, att.atttypid);
        types.push(att.atttypid);
        typmods.push(att.atttypmod);
        attnums.push(attnum);
    }
    if !protect::is_protected(source) {
        let select = pg_sys::ACL_SELECT as pg_sys::AclMode;
        let ok = pg_sys::pg_class_aclcheck(source, me, select) == pg_sys::AclResult::ACLCHECK_OK
            || attnums.iter().all(|&a| pg_sys::pg_attribute_aclcheck(source, a, me, select) == pg_sys::AclResult::ACLCHECK_OK);
        if !ok {
            raise_with(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, format!("{f}: permission denied for table {name}"), None);
        }
    }
    // a table with a privacy unit holds many rows per person: DPRP is DP for adding or removing one
    // row, so it would release a person's every row at the ε of one (refused, whoever calls it)
    let unit = protect::effective_privacy_unit(source).map(|(att, _)| (source, att)).or_else(|| {
        protect::descendant_with_unit(source).and_then(|child| protect::privacy_unit(child).map(|(att, _)| (child, att)))
    });
    if let Some((rel, att)) = unit {
        let column = format!("{}.{}", protect::relation_short_name(rel), crate::query::tree::attname(rel, att));
        raise_with(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("{f}: source {name} declares the privacy unit {column}: a person may have many rows, and {release} protects one row, not one person"),
            Some("release a table with one row per person (for example a per-person summary its owner builds), or use DP aggregates, which bound each person's contribution"),
        );
    }
    // row security of the source, or of a parent whose policies a partition or child read on its
    // own would escape
    if let Some(r) = protect::row_security_above(source) {
        let which = if r == source { format!("source {name}") } else { format!("{}, a parent of source {name},", protect::relation_name(r)) };
        raise_with(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("{f}: {which} has row security that applies to role \"{}\"", protect::current_role_name()),
            Some("release a table without row security policies for this role, or have its owner release it"),
        );
    }
    if is_other_temp(root) {
        raise_with(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, format!("{f}: source {name} is a temporary table of another session"), None);
    }
    // on an error below, the transaction's resource owner closes what is open
    let mut leaves = Vec::new();
    for relid in crate::pg::nodes::list_oids(crate::pg::ffi::find_all_inheritors(source)) {
        let kind = pg_sys::get_rel_relkind(relid) as u8;
        if kind == pg_sys::RELKIND_PARTITIONED_TABLE {
            continue;
        }
        if kind != pg_sys::RELKIND_RELATION {
            raise_with(
                PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
                format!("{f}: source {name} has a partition or child that is {}, not a table", relkind_name(kind)),
                Some("release a table whose partitions are all tables"),
            );
        }
        let rel = if relid == source { root } else { pg_sys::table_open(relid, lock) };
        if is_other_temp(rel) {
            // as the planner does: another session's temporary child is not readable here
            pg_sys::table_close(rel, lock);
            continue;
        }
        let leaf_attnums = columns
            .iter()
            .map(|c| {
                let a = pg_sys::get_attnum(relid, column_cstr(f, c).as_ptr());
                if a <= 0 {
                    raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("{f}: a partition of {name} lacks column \"{c}\""), None);
                }
                a
            })
            .collect();
        leaves.push(Leaf { rel, attnums: leaf_attnums });
    }
    if relkind == pg_sys::RELKIND_PARTITIONED_TABLE {
        pg_sys::table_close(root, pg_sys::NoLock as pg_sys::LOCKMODE);
    }
    Source { name, attnums, types, typmods, leaves }
}

/// True for a temporary table of another session (its pages live in that session's buffers).
unsafe fn is_other_temp(rel: pg_sys::Relation) -> bool {
    (*(*rel).rd_rel).relpersistence as u8 == pg_sys::RELPERSISTENCE_TEMP && !(*rel).rd_islocaltemp
}

fn relkind_name(kind: u8) -> &'static str {
    match kind {
        pg_sys::RELKIND_VIEW => "a view",
        pg_sys::RELKIND_MATVIEW => "a materialized view",
        pg_sys::RELKIND_FOREIGN_TABLE => "a foreign table",
        pg_sys::RELKIND_SEQUENCE => "a sequence",
        pg_sys::RELKIND_INDEX | pg_sys::RELKIND_PARTITIONED_INDEX => "an index",
        pg_sys::RELKIND_TOASTVALUE => "a TOAST table",
        pg_sys::RELKIND_COMPOSITE_TYPE => "a composite type",
        _ => "not a table",
    }
}

/// Closes every leaf (the locks stay until the end of the transaction).
pub unsafe fn close_source(src: &Source) {
    for leaf in &src.leaves {
        pg_sys::table_close(leaf.rel, pg_sys::NoLock as pg_sys::LOCKMODE);
    }
}

/// Reads every row of every leaf under the active snapshot and hands `push` the chosen columns'
/// values and NULL flags, in column order. Checks for interrupts every [`CHECK_ROWS`] rows. `push`
/// runs in a per-row memory context that is reset after each row.
pub unsafe fn scan_rows<E>(src: &Source, push: &mut dyn FnMut(&[pg_sys::Datum], &[bool]) -> Result<(), E>) -> Result<(), E> {
    let d = src.types.len();
    let mut values = vec![pg_sys::Datum::from(0usize); d];
    let mut nulls = vec![true; d];
    let context = pg_sys::AllocSetContextCreateExtended(
        pg_sys::CurrentMemoryContext,
        c"pg_dp release row".as_ptr(),
        pg_sys::ALLOCSET_SMALL_MINSIZE as usize,
        pg_sys::ALLOCSET_SMALL_INITSIZE as usize,
        pg_sys::ALLOCSET_SMALL_MAXSIZE as usize,
    );
    let snapshot = pg_sys::GetActiveSnapshot();
    let mut since_check = 0usize;
    let mut result = Ok(());
    'leaves: for leaf in &src.leaves {
        let max_att = leaf.attnums.iter().copied().max().unwrap_or(1) as i32;
        let slot = pg_sys::table_slot_create(leaf.rel, std::ptr::null_mut());
        let scan = pg_sys::table_beginscan(leaf.rel, snapshot, 0, std::ptr::null_mut());
        while pg_sys::table_scan_getnextslot(scan, pg_sys::ScanDirection::ForwardScanDirection, slot) {
            since_check += 1;
            if since_check == CHECK_ROWS {
                since_check = 0;
                pg_sys::check_for_interrupts!();
            }
            pg_sys::slot_getsomeattrs(slot, max_att);
            for ((v, n), &a) in values.iter_mut().zip(nulls.iter_mut()).zip(&leaf.attnums) {
                let i = a as usize - 1;
                *n = *(*slot).tts_isnull.add(i);
                *v = *(*slot).tts_values.add(i);
            }
            let old = pg_sys::MemoryContextSwitchTo(context);
            let r = push(&values, &nulls);
            pg_sys::MemoryContextSwitchTo(old);
            pg_sys::MemoryContextReset(context);
            if let Err(e) = r {
                result = Err(e);
                pg_sys::table_endscan(scan);
                pg_sys::ExecDropSingleTupleTableSlot(slot);
                break 'leaves;
            }
        }
        if result.is_ok() {
            pg_sys::table_endscan(scan);
            pg_sys::ExecDropSingleTupleTableSlot(slot);
        }
    }
    pg_sys::MemoryContextDelete(context);
    result
}

/// The core's interrupt check for a release: a pending cancel or termination stops it, and the
/// release then raises the pending interrupt.
pub fn pending_interrupt() -> Result<(), pg_dp_core::release::dprp::Interrupted> {
    if unsafe { pg_sys::QueryCancelPending != 0 || pg_sys::ProcDiePending != 0 } {
        Err(pg_dp_core::release::dprp::Interrupted)
    } else {
        Ok(())
    }
}
