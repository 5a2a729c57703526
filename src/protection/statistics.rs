//! Statistics about the data that roles restricted by pg_dp may not read.
//!
//! PostgreSQL keeps statistics that are computed from the rows of a table and readable by ordinary
//! roles: the planner's histograms and most common values (`pg_stats`, `pg_stats_ext`), the row
//! and page estimates in `pg_class`, the cumulative counters of rows read, inserted and deleted
//! (`pg_stat_user_tables`, `pg_stat_database`, …), and relation sizes. Each answers a counting
//! question exactly and for free: a histogram bound can be one person's income, and the counter of
//! rows read moves by the exact number of rows a DP query scanned.
//!
//! In a database that holds a protected table, roles that are neither superusers nor trusted
//! cannot read them: a query that reads one of the relations, columns or functions below is
//! refused before planning. The functions are also not executable by PUBLIC in a database with
//! pg_dp (sql/protect.sql revokes them; members of pg_read_all_stats keep them): a function can be
//! reached without appearing in a query (through an operator, an aggregate, a domain check or a
//! column default), and PostgreSQL checks the EXECUTE privilege on every such call. `EXPLAIN` of a
//! query on a protected table, which prints the planner's estimates, is refused in the executor
//! hook (charge.rs), and `debug_print_plan` and `trace_sort` in the grammar and the executor hook.
use crate::pg::error::Refusal;
use pgrx::pg_sys::{self, Oid};
use std::ffi::CStr;

/// pg_statistic (behind pg_stats) and pg_statistic_ext_data (behind pg_stats_ext).
const STATISTIC: Oid = Oid::from_u32(2619);
const STATISTIC_EXT_DATA: Oid = Oid::from_u32(3429);

/// Functions that return cumulative statistics, sizes or the position of the write-ahead log, by
/// name. `pg_stat_get_*` counters (rows read, fetched, inserted, updated, deleted, live and dead;
/// blocks; scans) are refused except the session-level ones in [`ALLOWED_STAT_FUNCTIONS`].
const DENIED_FUNCTIONS: &[&str] = &[
    "pg_relation_size",
    "pg_table_size",
    "pg_total_relation_size",
    "pg_indexes_size",
    "pg_database_size",
    "pg_stat_statements",
    "pg_stat_statements_info",
    // the write-ahead log's position moves when a read prunes a page or sets hint bits
    "pg_current_wal_lsn",
    "pg_current_wal_insert_lsn",
    "pg_current_wal_flush_lsn",
    "pg_last_wal_receive_lsn",
    "pg_last_wal_replay_lsn",
    "pg_logical_emit_message",
    "pg_control_checkpoint",
    "pg_control_recovery",
];

/// `pg_stat_get_*` functions about sessions, not data (pg_stat_activity uses them).
fn allowed_stat_function(name: &str) -> bool {
    name == "pg_stat_get_activity" || name.starts_with("pg_stat_get_backend_")
}

/// Why reading a relation is refused, if it is one of the statistics catalogs.
pub fn denied_relation(relid: Oid) -> Option<&'static str> {
    if relid == STATISTIC {
        Some("pg_stats (pg_statistic)")
    } else if relid == STATISTIC_EXT_DATA {
        Some("pg_stats_ext (pg_statistic_ext_data)")
    } else {
        None
    }
}

/// Why reading a column is refused: pg_class's row and page estimates (or the whole row).
pub fn denied_column(relid: Oid, attno: i16) -> Option<&'static str> {
    if relid != pg_sys::RelationRelationId {
        return None;
    }
    match attno as u32 {
        0 => Some("pg_class.reltuples (the whole row)"),
        pg_sys::Anum_pg_class_relpages => Some("pg_class.relpages"),
        pg_sys::Anum_pg_class_reltuples => Some("pg_class.reltuples"),
        pg_sys::Anum_pg_class_relallvisible => Some("pg_class.relallvisible"),
        _ => None,
    }
}

/// Why calling a function is refused, if it returns statistics or sizes.
pub fn denied_function(funcid: Oid) -> Option<String> {
    let name = unsafe {
        let n = pg_sys::get_func_name(funcid);
        if n.is_null() {
            return None;
        }
        CStr::from_ptr(n).to_string_lossy().into_owned()
    };
    let denied = DENIED_FUNCTIONS.contains(&name.as_str())
        || (name.starts_with("pg_stat_get_") && !allowed_stat_function(&name))
        || name.starts_with("pgstattuple")
        || name == "pgstatindex";
    denied.then(|| format!("{name}()"))
}

pub fn refusal(what: &str) -> Refusal {
    Refusal {
        message: format!(
            "permission denied for {what}: this database holds tables protected by pg_dp, and statistics of their data are hidden from roles that are not trusted"
        ),
        hint: Some("sizes and pg_class's row and page counts of relations without protected data are readable; for the rest ask a DBA (members of pg_read_all_stats read every statistic)".into()),
    }
}

/// True if a relation holds data of a protected table: the table itself, a parent whose
/// partitions or children include one (its counts add theirs up), one of their indexes, or
/// their TOAST tables and TOAST indexes.
pub unsafe fn holds_protected_data(relid: Oid) -> bool {
    holds(relid, 0)
}

unsafe fn holds(relid: Oid, depth: u32) -> bool {
    if depth > 4 || crate::catalog::protect::reads_protected(relid, true) {
        return true;
    }
    match pg_sys::get_rel_relkind(relid) as u8 {
        pg_sys::RELKIND_INDEX | pg_sys::RELKIND_PARTITIONED_INDEX => {
            // an index of a table, of a partitioned table, or of a TOAST table
            let table = pg_sys::IndexGetRelation(relid, true);
            table != pg_sys::InvalidOid && holds(table, depth + 1)
        }
        pg_sys::RELKIND_TOASTVALUE => {
            // pg_toast.pg_toast_<table oid>
            let name = pg_sys::get_rel_name(relid);
            if name.is_null() {
                return true;
            }
            let n = CStr::from_ptr(name).to_string_lossy();
            n.strip_prefix("pg_toast_").and_then(|t| t.parse::<u32>().ok()).is_none_or(|t| holds(Oid::from(t), depth + 1))
        }
        _ => false,
    }
}

use crate::pg::fmgr::pg_v1;

use crate::pg::fmgr::return_null as null;

// dp.class_stat(oid, anyelement): pg_class.reltuples, relpages or relallvisible of a relation, or
// NULL when it holds protected data (query/statistics_mask.rs wraps the columns in it)
pg_v1!(pg_finfo_dp_class_stat, dp_class_stat, |fcinfo| {
    let args = (*fcinfo).args.as_slice(2);
    if args[0].isnull || args[1].isnull || holds_protected_data(Oid::from(args[0].value.value() as u32)) {
        return null(fcinfo);
    }
    args[1].value
});

// dp.masked_relation_size, _table_size, _total_relation_size, _indexes_size: PostgreSQL's function of
// the same name (same arguments), or NULL when the relation holds protected data
pg_v1!(pg_finfo_dp_masked_size, dp_masked_size, |fcinfo| {
    let nargs = (*fcinfo).nargs as usize;
    let args = (*fcinfo).args.as_slice(nargs);
    if args.iter().any(|a| a.isnull) || holds_protected_data(Oid::from(args[0].value.value() as u32)) {
        return null(fcinfo);
    }
    let name = pg_sys::get_func_name((*(*fcinfo).flinfo).fn_oid);
    let name = if name.is_null() { String::new() } else { CStr::from_ptr(name).to_string_lossy().into_owned() };
    let f = match name.as_str() {
        "masked_relation_size" if nargs == 2 => pg_sys::pg_relation_size,
        "masked_relation_size" => {
            // the main fork, as pg_relation_size(regclass) (a SQL function calling the two-argument one)
            let main = pgrx::IntoDatum::into_datum("main").unwrap();
            return pgrx::direct_function_call_as_datum(pg_sys::pg_relation_size, &[Some(args[0].value), Some(main)]).unwrap_or_else(|| null(fcinfo));
        }
        "masked_table_size" => pg_sys::pg_table_size,
        "masked_total_relation_size" => pg_sys::pg_total_relation_size,
        "masked_indexes_size" => pg_sys::pg_indexes_size,
        _ => return null(fcinfo),
    };
    let call: Vec<Option<pg_sys::Datum>> = args.iter().map(|a| Some(a.value)).collect();
    pgrx::direct_function_call_as_datum(f, &call).unwrap_or_else(|| null(fcinfo))
});

// dp.masked_database_size and dp.masked_tablespace_size: NULL for roles restricted by pg_dp (a
// database with protected tables counts their bytes)
pg_v1!(pg_finfo_dp_masked_null, dp_masked_null, |fcinfo| { null(fcinfo) });
