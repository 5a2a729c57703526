//! dp.release_synthetic: a private synthetic copy of a table (a graphical model of 1-way and 2-way
//! marginals, docs/privacy/synthetic.md) written to a new table, with a public report table. The core
//! does the encoding's arithmetic, the model and the sampling; this file resolves each column's public
//! encoding from the catalog and the arguments, charges the ledger, reads the table and writes the
//! result.
//!
//! Order, so that nothing the caller learns before paying depends on the data:
//! 1. every argument, the source (as for DPRP: a table, no privacy unit, no row security for the
//!    caller, SELECT unless protected), each column's public encoding (a declared domain, bin edges
//!    given in the call, or declared bounds with `bins` equal bins; booleans are their two values),
//!    and the memory of the count tables are checked from the arguments, the catalog and the role;
//! 2. the target and its report table are created (empty);
//! 3. the release is charged in the ledger's own transaction;
//! 4. one direct scan of every leaf turns each row into codes (NULL, NaN and values outside a domain
//!    have a code of their own; numbers outside the bins are clamped), never an error;
//! 5. the core fits the model and samples the noisy row count's worth of rows, written in batches.
//!    After the charge the only failure is an interrupt.
use super::source::{close_source, open_source, pending_interrupt, scan_rows, Conversion, Source};
use crate::catalog::protect::{self, Domain};
use crate::pg::error::{raise_with, OrRaise};
use crate::settings::noise::with_rng;
use pg_dp_core::accounting::charge::{charged_decimal, ReleaseRecord};
use pg_dp_core::release::dprp::ReleaseFailure;
use pg_dp_core::release::synthetic::columns::{ColumnCode, Decoded, PrivateEdges};
use pg_dp_core::release::criteria::selection::LoopSpec;
use pg_dp_core::noise::rng::DpRng;
use pg_dp_core::release::criteria::{
    CriteriaParams, CriteriaSpec, CriterionParams, Evaluation, NumericColumn, RealStatistics, NAME_MAX_MARGINAL, NAME_MEANS, NAME_ONE_WAY,
    NAME_FAITHFULNESS, NAME_REGRESSION, NAME_TSTR,
};
use pg_dp_core::release::synthesis::{candidate_row_bytes, select, Acceptance, PostProcess, Sample};
use pg_dp_core::release::synthetic::{Method, PairCounts, SyntheticParams, SyntheticSpec, NEIGHBOURS};
use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;
use pgrx::spi::{quote_identifier, quote_literal};
use pgrx::{JsonB, PgSqlErrorCode};
use std::collections::HashMap;
use std::ffi::CStr;

const F: &str = "dp.release_synthetic";
const P: &str = "dp.preview_synthetic";

thread_local! {
    /// Whether the pipeline runs for dp.preview_synthetic (uncharged) rather than the release.
    static PREVIEW: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The function the caller called, which every message of the pipeline names.
fn fname() -> &'static str {
    if PREVIEW.with(|p| p.get()) { P } else { F }
}

/// What a message about a failure after the charge adds: the release was paid; a preview was not.
fn charged() -> &'static str {
    if PREVIEW.with(|p| p.get()) { "; nothing was charged (a preview)" } else { "; the release was charged" }
}

/// The share of the caller's ε that private bin edges take, split evenly over their inner edges
/// (docs/privacy/synthetic.md, "Private bin edges").
const PRIVATE_EDGES_SHARE: f64 = 0.1;

/// Most columns one release may model (the written INSERT passes one array per column).
const MAX_COLUMNS: usize = 64;
/// Rows sampled and written per batch.
const BATCH_ROWS: usize = 10_000;
/// Most rows one release may write: a requested count above it is refused, a noisy count above it
/// is cut to it (post-processing; at a tiny epsilon the noisy count can be far above the table's).
const MAX_ROWS: usize = 100_000_000;
/// Most bytes of count tables, whatever maintenance_work_mem says (any role may raise that setting,
/// and the model's estimation needs a few times the tables' size).
const MAX_COUNT_BYTES: usize = 256 << 20;
/// Most bytes of sampled rows held at once (with criteria or min_count), whatever
/// maintenance_work_mem says: a reservation the system grants can still exhaust memory later, when
/// its pages are touched, and the out-of-memory killer then restarts the whole server.
const MAX_HELD_BYTES: usize = 512 << 20;

fn required<T>(v: Option<T>, arg: &str) -> T {
    v.unwrap_or_else(|| raise_with(PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED, format!("{}: {arg} must not be NULL", fname()), None))
}

fn invalid(msg: String) -> ! {
    raise_with(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("{}: {msg}", fname()), None)
}

/// How a column's stored values become codes, without any possible error.
enum Reader {
    /// By the text form of the value (the type's output function), looked up among the domain's.
    /// `max_raw`: a variable-length value larger than this (before decompression) matches no domain
    /// value and is not printed (the output of a huge value could fail its allocation: an error
    /// after the charge that depends on the data).
    Text { output: Box<pg_sys::FmgrInfo>, lookup: HashMap<Vec<u8>, u32>, max_raw: Option<usize> },
    /// Integers, exactly.
    Integer(Conversion),
    /// Other numbers, as float8 (NaN is NULL).
    Real(Conversion),
}

/// One column of the release: its name, the SQL type of the target's column, its public encoding,
/// the domain values (categorical columns) and how its values are read.
struct Column {
    name: String,
    sql_type: String,
    code: ColumnCode,
    values: Vec<String>,
    reader: Reader,
    /// How a number is written so that the target's type takes it as it is.
    format: NumberFormat,
    /// `bin_edges` "private": the fine grid between the declared bounds whose edges the private
    /// choice picks from (the encoding `code` is then replaced after the charge, same bin count).
    fine: Option<ColumnCode>,
}

/// How a released number is written: each form is valid input of its type for every value between
/// two edges that are (checked before the charge), so writing never fails.
#[derive(Clone, Copy)]
enum NumberFormat {
    /// float4: the nearest float4, subnormals as 0 (PostgreSQL refuses some of them).
    Float4,
    /// float8: subnormals as 0.
    Float8,
    /// numeric(p, s) with s ≥ 0: rounded to s decimals here, so PostgreSQL does not round it again.
    Scaled(usize),
    /// Integers and unconstrained numeric: as they are.
    Plain,
}

impl Column {
    /// The code of one stored value, and its number for a numeric column (NaN for NULL and for
    /// categorical columns).
    unsafe fn encode(&mut self, value: pg_sys::Datum, null: bool) -> (u32, f64) {
        if null {
            return (self.code.null_code(), f64::NAN);
        }
        match &mut self.reader {
            Reader::Text { output, lookup, max_raw } => {
                if max_raw.is_some_and(|m| pg_sys::toast_raw_datum_size(value) > m) {
                    return (self.code.null_code(), f64::NAN);
                }
                let text = pg_sys::OutputFunctionCall(&mut **output, value);
                (lookup.get(CStr::from_ptr(text).to_bytes()).copied().unwrap_or_else(|| self.code.null_code()), f64::NAN)
            }
            Reader::Integer(c) => {
                let x = c.convert_integer(value);
                (self.code.encode_integer(x), x as f64)
            }
            Reader::Real(c) => {
                let x = c.convert(value);
                (self.code.encode_real(x), x)
            }
        }
    }

    /// The public bounds of a numeric column (its first and last bin edges), or None.
    fn numeric_bounds(&self) -> Option<(f64, f64)> {
        match &self.code {
            ColumnCode::Categorical { .. } => None,
            ColumnCode::Real { edges } => Some((edges[0], *edges.last().unwrap())),
            ColumnCode::Integer { edges } => Some((edges[0] as f64, (*edges.last().unwrap() - 1) as f64)),
        }
    }

    /// The text of a decoded value (NULL as None), valid input for the target column's type.
    fn text(&self, d: Decoded) -> Option<String> {
        match d {
            Decoded::Null => None,
            Decoded::Category(k) => self.values.get(k as usize).cloned(),
            Decoded::Integer(x) => Some(x.to_string()),
            Decoded::Real(x) => Some(match self.format {
                NumberFormat::Float4 => {
                    let f = x as f32;
                    format!("{:?}", if f.is_subnormal() { 0.0 } else { f })
                }
                NumberFormat::Float8 => format!("{:?}", if x.is_subnormal() { 0.0 } else { x }),
                NumberFormat::Scaled(s) => format!("{x:.s$}"),
                NumberFormat::Plain => format!("{x:?}"),
            }),
        }
    }
}

/// The type of the target's column: the source column's base type and modifier (a domain type's
/// constraints could refuse a sampled value after the charge; its base type cannot).
unsafe fn target_type(typid: Oid, typmod: i32) -> (Oid, i32, String) {
    let mut m = typmod;
    let base = pg_sys::getBaseTypeAndTypmod(typid, &mut m);
    // qualified (pg_catalog.text, not text), so that a type of the caller's search path named like a
    // built-in one cannot stand in for it in the SQL written below
    let flags = (pg_sys::FORMAT_TYPE_TYPEMOD_GIVEN | pg_sys::FORMAT_TYPE_FORCE_QUALIFY) as pg_sys::bits16;
    (base, m, crate::pg::fmgr::cstr_or(pg_sys::format_type_extended(base, m, flags), "?"))
}

/// The distinct values of a declared domain as the column type's output text (what a stored value's
/// output function prints, so that they match: `t` for true, `c0  ` for char(4)), in the declared
/// order (a table domain in the type's order), read with the caller's privileges.
fn domain_values(domain: &Domain, sql_type: &str) -> Vec<String> {
    let sql = match domain {
        Domain::Values(values) => {
            let list: Vec<String> = values.iter().map(quote_literal).collect();
            format!(
                "SELECT pg_catalog.format('%s', v) FROM (SELECT v, pg_catalog.min(o) AS o FROM pg_catalog.unnest(ARRAY[{}]::{sql_type}[]) WITH ORDINALITY AS u(v, o) GROUP BY v) s ORDER BY o",
                list.join(", ")
            )
        }
        Domain::Table { table, column } => {
            let (relid, att) = unsafe { protect::domain_table_column(table, column) };
            let name = unsafe { protect::relation_name(relid) };
            if !unsafe { protect::public_table(relid) } {
                raise_with(
                    PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                    format!("{}: the domain of a column is {name}, which is not a public table: a domain must be a plain table that is not protected", fname()),
                    None,
                );
            }
            let col = unsafe { crate::query::tree::attname(relid, att) };
            format!(
                "SELECT pg_catalog.format('%s', v) FROM (SELECT DISTINCT {}::{sql_type} AS v FROM {name} WHERE {} IS NOT NULL) s ORDER BY v",
                quote_identifier(&col),
                quote_identifier(&col)
            )
        }
    };
    Spi::connect(|c| {
        let rows = c.select(&sql, None, &[]).unwrap_or_else(|e| invalid(format!("the domain could not be read: {e}")));
        rows.map(|r| r.get::<String>(1).ok().flatten().unwrap_or_default()).collect()
    })
}

/// Bin edges given in the call for one column.
enum CallEdges {
    /// The edges themselves, as numbers.
    List(Vec<f64>),
    /// "private": `bins` bins whose edges are chosen with differential privacy between the column's
    /// declared bounds (PrivateEdges).
    Private,
}

/// The `bin_edges` entry of one column: an array of numbers or the string "private".
fn call_edges(edges: &serde_json::Value, column: &str) -> Option<CallEdges> {
    let v = edges.get(column)?;
    if v.as_str() == Some("private") {
        return Some(CallEdges::Private);
    }
    let list = v.as_array().unwrap_or_else(|| invalid(format!("bin_edges.\"{column}\" must be an array of numbers or the string 'private'")));
    Some(CallEdges::List(
        list.iter()
            .map(|x| x.as_f64().unwrap_or_else(|| invalid(format!("bin_edges.\"{column}\" must be an array of numbers, got {x}"))))
            .collect(),
    ))
}

/// How the numbers of a binned column are written, after checking that every edge fits the target
/// column's type once written that way (a value between two edges that fit fits too, as rounding is
/// monotone), before anything is charged.
fn number_format(column: &str, base: Oid, typmod: i32, sql_type: &str, code: &ColumnCode) -> NumberFormat {
    let misfit = |edge: String| -> ! { invalid(format!("the bins of column \"{column}\" do not fit its type {sql_type}: edge {edge}")) };
    match code {
        ColumnCode::Integer { edges } => {
            let (lo, hi): (i128, i128) = match base {
                pg_sys::INT2OID => (i16::MIN as i128, i16::MAX as i128),
                pg_sys::INT4OID => (i32::MIN as i128, i32::MAX as i128),
                _ => (i64::MIN as i128, i64::MAX as i128),
            };
            let (first, last) = (edges[0], *edges.last().unwrap() - 1);
            for e in [first, last] {
                if e < lo || e > hi {
                    misfit(e.to_string());
                }
            }
            NumberFormat::Plain
        }
        ColumnCode::Real { edges } => match base {
            pg_sys::FLOAT4OID => NumberFormat::Float4,
            pg_sys::FLOAT8OID => NumberFormat::Float8,
            pg_sys::NUMERICOID if typmod >= 4 => {
                let precision = (((typmod - 4) >> 16) & 0xffff) as usize;
                let scale = (((typmod - 4) & 0x7ff) ^ 1024) - 1024;
                if scale < 0 {
                    invalid(format!("column \"{column}\" is {sql_type}, a numeric with a negative scale, which cannot be binned"));
                }
                let scale = scale as usize;
                for e in edges {
                    let text = format!("{e:.scale$}");
                    let whole = text.trim_start_matches('-').split('.').next().unwrap_or("").trim_start_matches('0');
                    if whole.len() + scale > precision {
                        misfit(text);
                    }
                }
                NumberFormat::Scaled(scale)
            }
            _ => NumberFormat::Plain,
        },
        ColumnCode::Categorical { .. } => NumberFormat::Plain,
    }
}

/// Each column's public encoding, from the call and the catalog only.
unsafe fn resolve_columns(source: Oid, src: &Source, columns: &[String], bins: usize, edges: &serde_json::Value) -> Vec<Column> {
    let mut out = Vec::with_capacity(columns.len());
    for (i, name) in columns.iter().enumerate() {
        let attnum = src.attnums[i];
        let (base, typmod, sql_type) = target_type(src.types[i], src.typmods[i]);
        let conversion = Conversion::of(base);
        let integer = matches!(base, pg_sys::INT2OID | pg_sys::INT4OID | pg_sys::INT8OID);
        let numeric_code = |lower: f64, upper: f64| -> ColumnCode {
            if integer {
                ColumnCode::integer_bins(lower.ceil() as i64, upper.floor() as i64, bins)
            } else {
                ColumnCode::real_bins(lower, upper, bins)
            }
            .unwrap_or_else(|e| invalid(format!("column \"{name}\": {e}")))
        };
        let parse_bounds = |b: &protect::DeclaredBounds| -> (f64, f64) {
            let parse = |s: &str| s.trim().parse::<f64>().unwrap_or_else(|_| invalid(format!("the declared bounds of column \"{name}\" are not numbers")));
            (parse(&b.lower), parse(&b.upper))
        };
        let mut fine = None;
        let (code, values, reader) = if let Some(CallEdges::Private) = call_edges(edges, name) {
            let (Some(conv), Some(b)) = (conversion, protect::effective_bounds(source, attnum)) else {
                invalid(format!(
                    "bin_edges.\"{name}\" is 'private', which needs a numeric column with declared bounds (dp.set_bounds): the private edges are chosen between them"
                ));
            };
            let (lower, upper) = parse_bounds(&b);
            let grid = if integer {
                ColumnCode::integer_bins(lower.ceil() as i64, upper.floor() as i64, PrivateEdges::GRID)
            } else {
                ColumnCode::real_bins(lower, upper, PrivateEdges::GRID)
            }
            .unwrap_or_else(|e| invalid(format!("column \"{name}\": {e}")));
            let code = numeric_code(lower, upper);
            // as many bins as fine bins (an integer column with few integers): every edge is forced,
            // the equal bins are those edges, and nothing is spent on them
            fine = (grid.cardinality() > code.cardinality()).then_some(grid);
            (code, vec![], number_reader(conv, integer))
        } else if let Some(CallEdges::List(e)) = call_edges(edges, name) {
            let Some(conv) = conversion else {
                invalid(format!("bin_edges names column \"{name}\", which is {sql_type}, not a number"));
            };
            let code = if integer {
                if let Some(x) = e.iter().find(|x| x.fract() != 0.0) {
                    invalid(format!("bin_edges.\"{name}\" must hold integers for an integer column, got {x}"));
                }
                ColumnCode::integer_edges(&e.iter().map(|&x| x as i64).collect::<Vec<_>>())
            } else {
                ColumnCode::real_edges(e.clone())
            }
            .unwrap_or_else(|err| invalid(format!("column \"{name}\": {err}")));
            (code, vec![], number_reader(conv, integer))
        } else if let Some(domain) = protect::effective_domain(source, attnum) {
            let values = domain_values(&domain, &sql_type);
            let code = ColumnCode::categorical(values.len()).unwrap_or_else(|e| invalid(format!("column \"{name}\": {e}")));
            let lookup = values.iter().enumerate().map(|(k, v)| (v.as_bytes().to_vec(), k as u32)).collect();
            (code, values, text_reader(base, lookup))
        } else if let (Some(conv), Some(b)) = (conversion, protect::effective_bounds(source, attnum)) {
            let (lower, upper) = parse_bounds(&b);
            (numeric_code(lower, upper), vec![], number_reader(conv, integer))
        } else if base == pg_sys::BOOLOID {
            let values = vec!["false".to_string(), "true".to_string()];
            let lookup = [(b"f".to_vec(), 0u32), (b"t".to_vec(), 1u32)].into_iter().collect();
            (ColumnCode::categorical(2).unwrap(), values, text_reader(base, lookup))
        } else {
            raise_with(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("{}: column \"{name}\" of {} has no public values: a synthetic copy needs each column's values or bins fixed before the data are read", fname(), src.name),
                Some("declare its values with dp.set_domain, or its bounds with dp.set_bounds (then bins equal bins), or pass its bin edges in bin_edges"),
            );
        };
        // private edges are some of the fine grid's: checking all of them checks every choice
        let format = number_format(name, base, typmod, &sql_type, fine.as_ref().unwrap_or(&code));
        out.push(Column { name: name.clone(), sql_type, code, values, reader, format, fine });
    }
    out
}

fn number_reader(conv: Conversion, integer: bool) -> Reader {
    if integer {
        Reader::Integer(conv)
    } else {
        Reader::Real(conv)
    }
}

unsafe fn text_reader(typid: Oid, lookup: HashMap<Vec<u8>, u32>) -> Reader {
    let mut foid = Oid::INVALID;
    let mut varlena = false;
    pg_sys::getTypeOutputInfo(typid, &mut foid, &mut varlena);
    let mut output: Box<pg_sys::FmgrInfo> = Box::new(std::mem::zeroed());
    pg_sys::fmgr_info(foid, &mut *output);
    // far above any domain value's size in any representation, far below the output's 1 GB limit
    let longest = lookup.keys().map(Vec::len).max().unwrap_or(0);
    let max_raw = (pg_sys::get_typlen(typid) == -1).then(|| (1usize << 20).max(64 * longest));
    Reader::Text { output, lookup, max_raw }
}


/// Ends a release that failed after the charge: the pending interrupt, or the one fixed error of a
/// released table too large for min_count's projection (a function of the model's noisy row count).
fn failed_after_charge(e: ReleaseFailure) -> ! {
    if e == ReleaseFailure::MemoryLimit || e == ReleaseFailure::OutOfMemory {
        raise_with(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("{}: the released table does not fit in maintenance_work_mem for min_count{}", fname(), charged()),
            Some("raise maintenance_work_mem for this session, or pass rows; the number of released rows is a noisy count, so the limit is only a function of what the release would have shown"),
        );
    }
    pg_sys::check_for_interrupts!();
    raise_with(PgSqlErrorCode::ERRCODE_QUERY_CANCELED, format!("{}: the release was interrupted{}", fname(), charged()), None)
}

/// Charges the release to the caller's budget, in the ledger's own transaction. The receipt depends
/// on the arguments and the catalog only.
fn charge(source: &str, receipt: &serde_json::Value, epsilon: f64, delta: f64) {
    let release = ReleaseRecord {
        aggregate: format!("{F}({source})"),
        mechanism: "synthetic".into(),
        sensitivity: 1.0,
        noise_scale: 0.0,
        epsilon: charged_decimal(epsilon),
        delta: charged_decimal(delta),
        details: receipt.to_string(),
    };
    crate::budget::ledger::require_preloaded("charge privacy budgets");
    unsafe { crate::budget::charge::charge(vec![release], 0, crate::pg::fmgr::cstr_or(pg_sys::debug_query_string, "")) }
}

/// A query whose rows are a batch of decoded rows: $1.. are one text array per column, cast to the
/// columns' types under their names, with `pg_dp_row` numbering the rows in order.
fn typed_rows(columns: &[Column]) -> String {
    let casts: Vec<String> = columns.iter().enumerate().map(|(i, c)| format!("u.c{i}::{} AS {}", c.sql_type, quote_identifier(&c.name))).collect();
    let params: Vec<String> = (1..=columns.len()).map(|i| format!("pg_catalog.unnest(${i}::pg_catalog.text[])")).collect();
    let aliases: Vec<String> = (0..columns.len()).map(|i| format!("c{i}")).collect();
    format!(
        "SELECT {}, u.pg_dp_row FROM ROWS FROM ({}) WITH ORDINALITY AS u({}, pg_dp_row)",
        casts.join(", "),
        params.join(", "),
        aliases.join(", ")
    )
}

/// The arguments of [`typed_rows`] for some rows: each column's values as text.
fn text_arrays(columns: &[Column], cells: &[Decoded]) -> Vec<pgrx::datum::DatumWithOid<'static>> {
    let d = columns.len().max(1);
    let mut arrays: Vec<Vec<Option<String>>> = vec![Vec::with_capacity(cells.len() / d); d];
    for row in cells.chunks_exact(d) {
        for ((a, col), &cell) in arrays.iter_mut().zip(columns).zip(row) {
            a.push(col.text(cell));
        }
    }
    arrays.into_iter().map(|a| a.into()).collect()
}

/// The query that evaluates the caller's constraint on a batch of rows: one boolean per row, in order
/// (NULL counts as refused). Checked now, before the charge, by preparing it: one expression over the
/// target's columns, of type boolean.
fn constraint_query(columns: &[Column], expr: &str) -> String {
    check_one_expression(expr);
    let sql = format!("SELECT COALESCE(({expr}), false) FROM ({}) AS t ORDER BY t.pg_dp_row", typed_rows(columns));
    let types: Vec<pgrx::PgOid> = vec![pgrx::PgOid::from(pg_sys::TEXTARRAYOID); columns.len()];
    // a bad expression raises PostgreSQL's own error here (a syntax error, an unknown column, a type
    // that is not boolean), before anything is charged
    Spi::connect(|c| c.prepare(&sql, &types).map(|_| ())).unwrap_or_else(|e| invalid(format!("constraints must be one boolean expression over the columns: {e}")));
    sql
}

/// Refuses a constraint that is not one expression: it is parsed alone as `SELECT (expr)`, which
/// must be one statement with one output and nothing else (no FROM, WHERE, set operation, …), so
/// that it cannot close the query it is put into, add statements, or comment out the rest.
fn check_one_expression(expr: &str) {
    let refuse = || -> ! { invalid("constraints must be one boolean expression over the columns".into()) };
    let sql = std::ffi::CString::new(format!("SELECT ({expr})")).unwrap_or_else(|_| refuse());
    unsafe {
        let list = pg_sys::raw_parser(sql.as_ptr(), pg_sys::RawParseMode::RAW_PARSE_DEFAULT);
        if list.is_null() || (*list).length != 1 {
            refuse();
        }
        let raw = pg_sys::list_nth(list, 0) as *mut pg_sys::RawStmt;
        let stmt = (*raw).stmt;
        if stmt.is_null() || (*stmt).type_ != pg_sys::NodeTag::T_SelectStmt {
            refuse();
        }
        let sel = stmt as *mut pg_sys::SelectStmt;
        let one_target = !(*sel).targetList.is_null() && (*(*sel).targetList).length == 1;
        let nothing_else = (*sel).fromClause.is_null()
            && (*sel).whereClause.is_null()
            && (*sel).groupClause.is_null()
            && (*sel).havingClause.is_null()
            && (*sel).windowClause.is_null()
            && (*sel).valuesLists.is_null()
            && (*sel).sortClause.is_null()
            && (*sel).limitOffset.is_null()
            && (*sel).limitCount.is_null()
            && (*sel).lockingClause.is_null()
            && (*sel).withClause.is_null()
            && (*sel).distinctClause.is_null()
            && (*sel).intoClause.is_null()
            && (*sel).op == pg_sys::SetOperation::SETOP_NONE;
        if !one_target || !nothing_else {
            refuse();
        }
    }
}

/// Which rows of a sample pass the constraint, evaluated batch by batch (the text of at most
/// BATCH_ROWS rows at a time).
fn constraint_mask(sql: &str, columns: &[Column], s: &Sample) -> Vec<bool> {
    let d = columns.len().max(1);
    let mut out = Vec::with_capacity(s.rows(d));
    for batch in s.cells.chunks(BATCH_ROWS * d) {
        let args = text_arrays(columns, batch);
        Spi::connect(|c| {
            let rows = c.select(sql, None, &args).unwrap_or_else(|e| raise_with(PgSqlErrorCode::ERRCODE_DATA_EXCEPTION, format!("{}: the constraint failed on a synthetic row: {e}", fname()), None));
            out.extend(rows.map(|r| r.get::<bool>(1).ok().flatten().unwrap_or(false)));
        });
        pg_sys::check_for_interrupts!();
    }
    out
}

/// Appends decoded rows to the target: one INSERT per batch, each column an array of text cast to
/// the column's type.
fn insert_rows(target_sql: &str, columns: &[Column], cells: &[Decoded]) {
    let d = columns.len().max(1);
    let names: Vec<String> = columns.iter().map(|c| quote_identifier(&c.name)).collect();
    let sql = format!("INSERT INTO {target_sql} ({0}) SELECT {0} FROM ({1}) AS t", names.join(", "), typed_rows(columns));
    for batch in cells.chunks(BATCH_ROWS * d) {
        let args = text_arrays(columns, batch);
        Spi::run_with_args(&sql, &args).unwrap_or_else(|e| raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("{}: writing the release failed: {e}", fname()), None));
        pg_sys::check_for_interrupts!();
    }
}

/// A column named by a criterion, as its index among `columns` (numeric ones must be numeric).
fn criterion_column(columns: &[Column], c: &serde_json::Value, key: &str, numeric: bool) -> usize {
    let name = c.get(key).and_then(|v| v.as_str()).unwrap_or_else(|| invalid(format!("criteria: {key} must name a column, in {c}")));
    let j = columns.iter().position(|col| col.name == name).unwrap_or_else(|| invalid(format!("criteria: {key} names \"{name}\", which is not among columns")));
    if numeric && columns[j].numeric_bounds().is_none() {
        invalid(format!("criteria: {key} names \"{name}\", which is not a numeric column (it has a domain, not bins)"));
    }
    j
}

/// The criteria argument: a JSON array of objects, each with "criterion", "threshold", "epsilon" and
/// the criterion's own keys.
fn parse_criteria(columns: &[Column], criteria: &serde_json::Value) -> CriteriaParams {
    let list = criteria.as_array().unwrap_or_else(|| invalid("criteria must be a JSON array of objects".into()));
    if list.is_empty() {
        invalid("criteria must hold at least one criterion (or be NULL)".into());
    }
    let number = |c: &serde_json::Value, key: &str| -> f64 {
        c.get(key).and_then(|v| v.as_f64()).unwrap_or_else(|| invalid(format!("criteria: {key} must be a number, in {c}")))
    };
    let features = |c: &serde_json::Value| -> Vec<usize> {
        let list = c.get("features").and_then(|v| v.as_array()).unwrap_or_else(|| invalid(format!("criteria: features must be an array of column names, in {c}")));
        list.iter().map(|f| criterion_column(columns, &serde_json::json!({ "feature": f }), "feature", true)).collect()
    };
    let mut out = Vec::with_capacity(list.len());
    for c in list {
        let (threshold, epsilon) = (number(c, "threshold"), number(c, "epsilon"));
        out.push(match c.get("criterion").and_then(|v| v.as_str()) {
            Some(NAME_MAX_MARGINAL) => {
                let k = number(c, "k");
                if k.fract() != 0.0 || !(1.0..=3.0).contains(&k) {
                    invalid(format!("criteria: k must be 1, 2 or 3, got {k}"));
                }
                CriterionParams::MaxMarginalError { k: k as usize, threshold, epsilon }
            }
            Some(NAME_ONE_WAY) => CriterionParams::OneWayRelativeError { threshold, epsilon },
            Some(NAME_MEANS) => CriterionParams::ConditionalMeans {
                group: criterion_column(columns, c, "group", false),
                value: criterion_column(columns, c, "value", true),
                threshold,
                epsilon,
            },
            Some(NAME_REGRESSION) => {
                CriterionParams::Regression { target: criterion_column(columns, c, "target", true), features: features(c), threshold, epsilon }
            }
            Some(NAME_TSTR) => CriterionParams::TrainSyntheticTestReal {
                target: criterion_column(columns, c, "target", true),
                features: features(c),
                threshold,
                epsilon,
            },
            Some(NAME_FAITHFULNESS) => CriterionParams::Faithfulness { threshold, epsilon },
            _ => invalid(format!(
                "criteria: criterion must be one of {NAME_MAX_MARGINAL}, {NAME_ONE_WAY}, {NAME_MEANS}, {NAME_REGRESSION}, {NAME_TSTR}, {NAME_FAITHFULNESS}, in {c}"
            )),
        });
    }
    let numeric = columns
        .iter()
        .enumerate()
        .filter_map(|(j, c)| c.numeric_bounds().map(|(lower, upper)| NumericColumn { column: j, lower, upper }))
        .collect();
    CriteriaParams { cardinalities: columns.iter().map(|c| c.code.cardinality() as u32).collect(), numeric, criteria: out }
}

/// The arguments shared by the release and its preview, as SQL passes them.
struct Args<'a> {
    source: Option<Oid>,
    columns: Option<Vec<Option<String>>>,
    epsilon: Option<f64>,
    delta: Option<f64>,
    bins: Option<i32>,
    bin_edges: Option<JsonB>,
    method: Option<&'a str>,
    criteria: Option<JsonB>,
    gamma: Option<f64>,
    epsilon0: Option<f64>,
    refit: Option<bool>,
    rows: Option<i64>,
    min_count: Option<i32>,
    constraints: Option<&'a str>,
}

/// Everything decided before the table is read: the source, the columns and their encodings, the
/// model, the criteria and the loop, the post-processing, the memory plan and the receipt.
struct Plan {
    src: Source,
    columns: Vec<String>,
    cols: Vec<Column>,
    codes_of: Vec<ColumnCode>,
    spec: SyntheticSpec,
    acceptance: Option<Acceptance>,
    requested: Option<usize>,
    min_count: usize,
    constraint_sql: Option<String>,
    limit: usize,
    fixed: usize,
    receipt: serde_json::Value,
    /// Columns whose bin edges are chosen privately after the charge, with their choice.
    private: Vec<(usize, PrivateEdges)>,
}

impl Plan {
    /// Bytes for sampled rows: maintenance_work_mem less the count tables, at most MAX_HELD_BYTES.
    fn sample_memory(&self) -> usize {
        self.limit.saturating_sub(self.fixed).min(MAX_HELD_BYTES)
    }

    /// Rows held at once: all of a candidate twice with criteria, all of the sample for min_count's
    /// projection, else one batch.
    fn held(&self, m: usize) -> usize {
        if self.acceptance.is_some() {
            m.saturating_mul(2)
        } else if self.min_count > 1 {
            m
        } else {
            m.min(BATCH_ROWS)
        }
    }

    /// Bytes held for `m` rows: the rows held at once, and the criteria's work on one candidate.
    fn held_bytes(&self, m: usize) -> usize {
        let work = self.acceptance.as_ref().map_or(0, |a| usize::try_from(a.criteria.candidate_bytes(m)).unwrap_or(usize::MAX));
        self.held(m).saturating_mul(candidate_row_bytes(self.cols.len())).saturating_add(work)
    }
}

/// Checks every argument and the catalog, and plans the release (nothing read, nothing charged).
fn plan(a: Args) -> Plan {
    let source = required(a.source, "source");
    let columns: Vec<String> = required(a.columns, "columns").into_iter().map(|c| required(c, "every column name")).collect();
    let epsilon = required(a.epsilon, "epsilon");
    let delta = required(a.delta, "delta");
    let bins = required(a.bins, "bins");
    let bins = usize::try_from(bins).ok().filter(|&b| (1..=4096).contains(&b)).unwrap_or_else(|| invalid(format!("bins must be between 1 and 4096, got {bins}")));
    let edges = a.bin_edges.map(|j| j.0).unwrap_or(serde_json::Value::Object(Default::default()));
    if !edges.is_object() {
        invalid("bin_edges must be a JSON object mapping column names to arrays of edges".into());
    }
    if let Some(k) = edges.as_object().unwrap().keys().find(|k| !columns.contains(k)) {
        invalid(format!("bin_edges names \"{k}\", which is not among columns"));
    }
    let method = match required(a.method, "method") {
        "mst" => Method::Mst,
        "privbayes" => Method::PrivBayes,
        "tree2" => Method::Tree2,
        other => invalid(format!("method must be 'mst', 'tree2' or 'privbayes', got '{other}'")),
    };
    let (gamma, epsilon0, refit) = (required(a.gamma, "gamma"), required(a.epsilon0, "epsilon0"), required(a.refit, "refit"));
    let requested = a.rows.map(|r| {
        usize::try_from(r).ok().filter(|&r| r <= MAX_ROWS).unwrap_or_else(|| invalid(format!("rows must be between 0 and {MAX_ROWS} or NULL (the noisy row count), got {r}")))
    });
    let min_count = required(a.min_count, "min_count");
    let min_count = usize::try_from(min_count).ok().filter(|&k| k >= 1).unwrap_or_else(|| invalid(format!("min_count must be at least 1, got {min_count}")));
    if columns.is_empty() || columns.len() > MAX_COLUMNS {
        invalid(format!("columns must name between 1 and {MAX_COLUMNS} columns, got {}", columns.len()));
    }
    pg_dp_core::params::check_epsilon("epsilon", epsilon).or_raise(fname());
    pg_dp_core::params::check_delta("delta", delta, true).or_raise(fname());
    let src = unsafe { open_source(fname(), "a synthetic release", source, &columns, &mut |_, _, _| {}) };
    let cols = unsafe { resolve_columns(source, &src, &columns, bins, &edges) };
    // private bin edges take PRIVATE_EDGES_SHARE of ε, split evenly over their inner edges; the rest
    // (basic composition with everything after them) is the release's as before
    let inner_edges: usize = cols.iter().filter(|c| c.fine.is_some()).map(|c| c.code.cardinality() - 2).sum();
    let total_epsilon = epsilon;
    let (epsilon_edges, epsilon) = if inner_edges > 0 {
        let share = PRIVATE_EDGES_SHARE * epsilon;
        (share, epsilon * (1.0 - PRIVATE_EDGES_SHARE) * (1.0 - 1.0 / (1u64 << 50) as f64))
    } else {
        (0.0, epsilon)
    };
    let per_edge = epsilon_edges / inner_edges.max(1) as f64 * (1.0 - 1.0 / (1u64 << 40) as f64);
    let private: Vec<(usize, PrivateEdges)> = cols
        .iter()
        .enumerate()
        .filter_map(|(j, c)| c.fine.clone().map(|f| (j, c.code.cardinality() - 1, f)))
        .filter(|(_, bins, _)| *bins > 1)
        .map(|(j, bins, fine)| {
            let pe = PrivateEdges::new(fine, bins, per_edge).unwrap_or_else(|_| {
                invalid(format!(
                    "epsilon is too small for private bin edges: {} of it over {inner_edges} inner edges leaves each below 1e-9 (use fewer bins or private columns, or a larger epsilon)",
                    PRIVATE_EDGES_SHARE
                ))
            });
            (j, pe)
        })
        .collect();
    let acceptance = a.criteria.map(|c| {
        let params = parse_criteria(&cols, &c.0);
        let spec = CriteriaSpec::new(params).or_raise(fname());
        let selection = LoopSpec::new(gamma, epsilon0).or_raise(fname());
        if refit && delta > 0.0 {
            invalid("refit must be false when delta > 0: the selection loop's guarantee is stated for pure epsilon tries; fit once and select among samples".into());
        }
        Acceptance { criteria: spec, selection, refit }
    });
    let model_eps = acceptance.as_ref().map_or(Ok(epsilon), |a| a.model_epsilon(epsilon)).or_raise(fname());
    let params = SyntheticParams::new(cols.iter().map(|c| c.code.cardinality()).collect(), model_eps, delta, method);
    let spec = SyntheticSpec::new(&params).or_raise(fname());
    if acceptance.is_some() && a.constraints.is_some() {
        invalid(
            "constraints cannot be combined with criteria: the expression is the caller's SQL and would see every candidate of the selection loop, which the loop's guarantee does not cover (use min_count, or constraints without criteria)".into(),
        );
    }
    let constraint_sql = a.constraints.map(|expr| constraint_query(&cols, expr));
    let limit = (unsafe { pg_sys::maintenance_work_mem } as usize).saturating_mul(1024);
    let fixed = spec.count_bytes().saturating_add(acceptance.as_ref().map_or(0, |a| usize::try_from(a.criteria.count_bytes()).unwrap_or(usize::MAX)));
    if fixed > MAX_COUNT_BYTES {
        raise_with(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("{}: the count tables of these columns need {fixed} bytes, more than the release's limit of {MAX_COUNT_BYTES} bytes", fname()),
            Some("use fewer bins or columns, or a smaller k"),
        );
    }
    if fixed > limit {
        raise_with(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("{}: the count tables of these columns need {fixed} bytes, more than maintenance_work_mem ({limit} bytes)", fname()),
            Some("raise maintenance_work_mem, or use fewer bins, columns or a smaller k"),
        );
    }
    let encodings: Vec<serde_json::Value> = cols
        .iter()
        .map(|c| {
            let mut j = match c.numeric_bounds().filter(|_| c.fine.is_some()) {
                // the edges are chosen after the charge: only the public frame is known now
                Some((lower, upper)) => serde_json::json!({
                    "kind": "private_bins", "bins": c.code.cardinality() - 1, "lower": lower, "upper": upper,
                    "fine_bins": c.fine.as_ref().map_or(0, |f| f.cardinality() - 1),
                }),
                None => c.code.to_json(),
            };
            if let Some(o) = j.as_object_mut() {
                o.insert("column".into(), c.name.clone().into());
                if !c.values.is_empty() {
                    o.insert("values".into(), c.values.clone().into());
                }
            }
            j
        })
        .collect();
    let mut receipt = serde_json::json!({
        "method": method.name(),
        "epsilon": total_epsilon,
        "delta": delta,
        "neighbours": NEIGHBOURS,
        "model": spec.describe(),
        "source": src.name,
        "columns": encodings,
        "post_processing": {
            "rows": requested,
            "min_count": min_count,
            "constraints": a.constraints,
        },
    });
    if !private.is_empty() {
        receipt["private_edges"] = serde_json::json!({
            "columns": private.iter().map(|(j, _)| cols[*j].name.clone()).collect::<Vec<_>>(),
            "epsilon": epsilon_edges,
            "epsilon_per_edge": per_edge,
            "inner_edges": inner_edges,
            "mechanism": "permute_and_flip",
            "utility": "-|bins*#{x below the edge} - j*n| for the j-th inner edge, sensitivity max(j, bins - j)",
            "epsilon_rest": epsilon,
        });
    }
    if let Some(a) = &acceptance {
        receipt["criteria"] = serde_json::to_value(a.criteria.receipt()).unwrap_or_default();
        receipt["selection"] = serde_json::json!({
            "rule": "first candidate that passes every criterion, Liu-Talwar private selection with a known threshold",
            "gamma": a.selection.gamma,
            "epsilon0": a.selection.epsilon0,
            "tries": a.selection.tries(),
            "refit": a.refit,
            "epsilon_model": model_eps,
            "accounting": if a.refit { "hoisted + 2 (model + per candidate) + epsilon0" } else { "model + hoisted + 2 per candidate + epsilon0" },
        });
    }
    let codes_of = cols.iter().map(|c| c.code.clone()).collect();
    let plan = Plan { src, columns, cols, codes_of, spec, acceptance, requested, min_count, constraint_sql, limit, fixed, receipt, private };
    // the rows that must be held at once: a requested count is public, so checked now; without one
    // the noisy count is checked when known (a function of the model, a DP output)
    if let Some(m) = requested {
        if plan.held_bytes(m) > plan.sample_memory() {
            raise_with(
                PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                format!("{}: {m} rows of these columns do not fit in the memory for samples ({} bytes: maintenance_work_mem less the count tables, at most {MAX_HELD_BYTES})", fname(),
                    plan.sample_memory()
                ),
                Some("raise maintenance_work_mem, or request fewer rows"),
            );
        }
    }
    plan
}

/// The private bin edges, after the charge: one scan counts each private column's rows per fine bin
/// (NULL and NaN not counted; values outside the bounds in the end bins, as the encoding clamps
/// them), and each column's encoding becomes the edges PrivateEdges chooses, with the bin count the
/// plan was made with. The chosen edges are added to the receipt the caller gets and to the report.
fn choose_private_edges(plan: &mut Plan, rng: &mut DpRng) {
    if plan.private.is_empty() {
        return;
    }
    let mut counts: Vec<Vec<u64>> = plan.private.iter().map(|(_, pe)| vec![0u64; pe.fine_bins()]).collect();
    let (cols, private) = (&plan.cols, &plan.private);
    unsafe {
        scan_rows(&plan.src, &mut |datums, nulls| -> Result<(), ReleaseFailure> {
            for ((j, pe), c) in private.iter().zip(counts.iter_mut()) {
                if nulls[*j] {
                    continue;
                }
                let code = match &cols[*j].reader {
                    Reader::Integer(conv) => pe.fine().encode_integer(conv.convert_integer(datums[*j])),
                    Reader::Real(conv) => pe.fine().encode_real(conv.convert(datums[*j])),
                    Reader::Text { .. } => continue,
                };
                if let Some(slot) = c.get_mut(code as usize) {
                    *slot += 1;
                }
            }
            Ok(())
        })
    }
    .unwrap_or_else(|e| failed_after_charge(e));
    let mut chosen = serde_json::Map::new();
    for ((j, pe), c) in plan.private.iter().zip(&counts) {
        let code = pe.choose(rng, c, &mut pending_interrupt).unwrap_or_else(|e| failed_after_charge(e.into()));
        chosen.insert(plan.cols[*j].name.clone(), code.to_json());
        plan.codes_of[*j] = code.clone();
        plan.cols[*j].code = code;
    }
    plan.receipt["private_edges"]["chosen"] = chosen.into();
}

/// The one scan: every row into the model's count tables and the criteria's statistics.
fn read(plan: &mut Plan) -> (PairCounts, Option<RealStatistics>) {
    let d = plan.cols.len();
    let mut counts = plan.spec.counter();
    let mut real = plan.acceptance.as_ref().map(|a| a.criteria.start());
    let numeric = plan.acceptance.as_ref().map(|a| a.numeric_columns()).unwrap_or_default();
    let mut numbers = Vec::with_capacity(numeric.len());
    let mut codes = vec![0u32; d];
    let mut values = Vec::with_capacity(d);
    let cols = &mut plan.cols;
    unsafe {
        scan_rows(&plan.src, &mut |datums, nulls| -> Result<(), ReleaseFailure> {
            values.clear();
            for (j, ((col, &v), &n)) in cols.iter_mut().zip(datums).zip(nulls).enumerate() {
                let (code, x) = col.encode(v, n);
                codes[j] = code;
                values.push(x);
            }
            counts.push(&codes);
            if let Some(real) = real.as_mut() {
                numbers.clear();
                numbers.extend(numeric.iter().map(|&j| values[j]));
                real.push(&codes, &numbers);
            }
            Ok(())
        })
    }
    .unwrap_or_else(|e| failed_after_charge(e));
    (counts, real)
}

/// The model (inside the criteria and the loop, if any), its rows post-processed and handed to
/// `sink` in batches.
fn produce(plan: &Plan, rng: &mut DpRng, counts: &PairCounts, real: Option<&RealStatistics>, sink: &mut dyn FnMut(&[u32], &[Decoded])) -> Outcome {
    let d = plan.cols.len();
    let mut check = pending_interrupt;
    let cols = &plan.cols;
    let mut keep = |s: &Sample| -> Result<Vec<bool>, ReleaseFailure> { Ok(constraint_mask(plan.constraint_sql.as_deref().unwrap_or_default(), cols, s)) };
    let mut post = PostProcess {
        keep: plan.constraint_sql.is_some().then_some(&mut keep as &mut dyn FnMut(&Sample) -> Result<Vec<bool>, ReleaseFailure>),
        min_count: plan.min_count,
        max_rows: MAX_ROWS,
    };
    match (plan.acceptance.as_ref(), real) {
        (None, _) => {
            let model = plan.spec.fit(rng, counts, &mut check).unwrap_or_else(|e| failed_after_charge(e));
            let m = plan.requested.unwrap_or(model.noisy_rows().min(MAX_ROWS as u64) as usize);
            let mut written = 0;
            if plan.min_count > 1 {
                // the projection needs the whole sample: it must fit (a function of the model)
                if plan.held_bytes(m) > plan.sample_memory() {
                    failed_after_charge(ReleaseFailure::MemoryLimit);
                }
                let sample = Sample::draw_processed(&model, &plan.codes_of, m, &mut post, rng, &mut check).unwrap_or_else(|e| failed_after_charge(e));
                sink(&sample.codes, &sample.cells);
                written = sample.rows(d);
            } else {
                let mut done = 0;
                while done < m {
                    let n = BATCH_ROWS.min(m - done);
                    let sample = Sample::draw_processed(&model, &plan.codes_of, n, &mut post, rng, &mut check).unwrap_or_else(|e| failed_after_charge(e));
                    sink(&sample.codes, &sample.cells);
                    written += sample.rows(d);
                    done += n;
                }
            }
            Outcome { structure: Some(model.structure()), rows: written, evaluation: None }
        }
        (Some(a), Some(real)) => match select(rng, a, &plan.spec, counts, real, &plan.codes_of, plan.requested, &mut post, plan.sample_memory(), super::release_threads(), &mut check) {
            Ok(Some(chosen)) => {
                sink(&chosen.sample.codes, &chosen.sample.cells);
                Outcome { structure: Some(chosen.structure), rows: chosen.sample.rows(d), evaluation: Some(chosen.evaluation) }
            }
            Ok(None) => Outcome { structure: None, rows: 0, evaluation: None },
            Err(e) => failed_after_charge(e),
        },
        (Some(_), None) => unreachable!("criteria statistics are started with the criteria"),
    }
}

/// The release: a new table `target` (owned by the caller) and `<target>_report`; returns the receipt.
#[pg_extern(sql = false, volatile)]
#[allow(clippy::too_many_arguments)]
fn release_synthetic(
    source: Option<Oid>, target: Option<&str>, columns: Option<Vec<Option<String>>>, epsilon: Option<f64>, delta: Option<f64>,
    bins: Option<i32>, bin_edges: Option<JsonB>, method: Option<&str>, criteria: Option<JsonB>, gamma: Option<f64>,
    epsilon0: Option<f64>, refit: Option<bool>, rows: Option<i64>, min_count: Option<i32>, constraints: Option<&str>,
) -> JsonB {
    PREVIEW.with(|p| p.set(false));
    let target = required(target, "target");
    if target.len() > 56 {
        invalid(format!("target must be at most 56 bytes long (its report is named target_report), got {}", target.len()));
    }
    let target_sql = quote_identifier(target);
    let report_sql = quote_identifier(&format!("{target}_report"));
    let args = Args { source, columns, epsilon, delta, bins, bin_edges, method, criteria, gamma, epsilon0, refit, rows, min_count, constraints };
    let mut plan = plan(args);
    plan.receipt["target"] = target_sql.clone().into();
    let (epsilon, delta) = (plan.receipt["epsilon"].as_f64().unwrap_or(0.0), plan.receipt["delta"].as_f64().unwrap_or(0.0));
    // the target and the report are created before the charge, so that creating them cannot fail
    // after paying (a refused charge rolls them back with the statement)
    for t in [&target_sql, &report_sql] {
        let exists: bool = Spi::get_one_with_args("SELECT pg_catalog.to_regclass($1) IS NOT NULL", &[t.as_str().into()]).unwrap().unwrap_or(false);
        if exists {
            raise_with(PgSqlErrorCode::ERRCODE_DUPLICATE_TABLE, format!("{}: relation {t} already exists", fname()), Some("choose a new target name"));
        }
    }
    let defs: Vec<String> = plan.cols.iter().map(|c| format!("{} {}", quote_identifier(&c.name), c.sql_type)).collect();
    Spi::run(&format!("CREATE TABLE {target_sql} ({})", defs.join(", "))).unwrap();
    Spi::run(&format!("CREATE TABLE {report_sql} (item pg_catalog.text NOT NULL, kind pg_catalog.text NOT NULL, detail pg_catalog.jsonb NOT NULL)")).unwrap();
    let outcome = with_rng(|rng| {
        charge(&plan.src.name, &plan.receipt, epsilon, delta);
        choose_private_edges(&mut plan, rng);
        let (counts, real) = read(&mut plan);
        let cols = &plan.cols;
        produce(&plan, rng, &counts, real.as_ref(), &mut |_, cells| insert_rows(&target_sql, cols, cells))
    });
    unsafe { close_source(&plan.src) };
    let Plan { src, columns, acceptance, mut receipt, .. } = plan;
    let method = receipt["method"].as_str().unwrap_or_default().to_string();
    let edges_named: Option<Vec<serde_json::Value>> = outcome
        .structure
        .as_ref()
        .map(|s| s.iter().map(|&(p, c)| serde_json::json!({ "parent": columns[p], "child": columns[c] })).collect());
    let mut report: Vec<(String, &str, serde_json::Value)> = vec![
        ("privacy".into(), "receipt", receipt.clone()),
        ("rows".into(), "released", serde_json::json!({ "rows": outcome.rows, "source": src.name, "accepted": outcome.structure.is_some() })),
    ];
    if let Some(e) = &edges_named {
        report.push(("structure".into(), "model", serde_json::json!({ "method": method, "edges": e })));
    }
    for e in receipt["columns"].as_array().into_iter().flatten() {
        report.push((e["column"].as_str().unwrap_or_default().to_string(), "column", e.clone()));
    }
    // the epsilon breakdown: each part of the model, and the criteria and the loop around it
    for part in receipt["model"]["parts"].as_array().into_iter().flatten() {
        report.push((part["name"].as_str().unwrap_or_default().to_string(), "model part", part.clone()));
    }
    let mut breakdown = serde_json::json!({ "total": epsilon, "delta": delta, "model": receipt["model"]["epsilon"].clone() });
    if receipt.get("private_edges").is_some() {
        breakdown["private_edges"] = receipt["private_edges"]["epsilon"].clone();
        for (name, edges) in receipt["private_edges"]["chosen"].as_object().into_iter().flatten() {
            report.push((name.clone(), "private edges", edges.clone()));
        }
    }
    if acceptance.is_some() {
        breakdown["criteria_released_once"] = receipt["criteria"]["epsilon_hoisted"].clone();
        breakdown["criteria_per_candidate"] = receipt["criteria"]["epsilon_per_candidate"].clone();
        breakdown["epsilon0"] = receipt["selection"]["epsilon0"].clone();
        breakdown["rule"] = receipt["selection"]["accounting"].clone();
    }
    report.push(("epsilon".into(), "breakdown", breakdown));
    if let Some(ev) = &outcome.evaluation {
        for r in &ev.results {
            report.push((r.name.to_string(), "criterion", serde_json::to_value(r).unwrap_or_default()));
        }
    }
    if acceptance.is_some() && outcome.structure.is_none() {
        report.push((
            "selection".into(),
            "no candidate passed",
            serde_json::json!({ "note": "no candidate passed every criterion before the loop stopped: nothing was released but this fact, which is itself differentially private and was charged" }),
        ));
    }
    for (item, kind, detail) in report {
        Spi::run_with_args(
            &format!("INSERT INTO {report_sql} (item, kind, detail) VALUES ($1, $2, $3)"),
            &[item.into(), kind.into(), JsonB(detail).into()],
        )
        .unwrap();
    }
    receipt["rows_released"] = outcome.rows.into();
    receipt["report"] = report_sql.into();
    receipt["structure"] = edges_named.map_or(serde_json::Value::Null, |e| e.into());
    if acceptance.is_some() {
        receipt["accepted"] = outcome.structure.is_some().into();
        receipt["evaluation"] = outcome.evaluation.map_or(serde_json::Value::Null, |e| serde_json::to_value(e.results).unwrap_or_default());
    }
    JsonB(receipt)
}

/// What a release produced: the model's structure, the rows written and the accepted candidate's
/// criteria (no structure when no candidate passed).
struct Outcome {
    structure: Option<Vec<(usize, usize)>>,
    rows: usize,
    evaluation: Option<Evaluation>,
}

/// The release's pipeline run `runs` times on a table the caller may read, uncharged and writing
/// nothing: how often a candidate is accepted, the rows, each criterion's values, and how far the
/// copies' 1-way and 2-way tables are from the table's. For choosing settings on public look-alike
/// data before paying for the release on the private table.
#[pg_extern(sql = false, volatile)]
#[allow(clippy::too_many_arguments)]
fn preview_synthetic(
    source: Option<Oid>, columns: Option<Vec<Option<String>>>, epsilon: Option<f64>, delta: Option<f64>, bins: Option<i32>,
    bin_edges: Option<JsonB>, method: Option<&str>, criteria: Option<JsonB>, gamma: Option<f64>, epsilon0: Option<f64>,
    refit: Option<bool>, rows: Option<i64>, min_count: Option<i32>, constraints: Option<&str>, runs: Option<i32>,
) -> JsonB {
    PREVIEW.with(|p| p.set(true));
    let runs = required(runs, "runs");
    let runs = usize::try_from(runs).ok().filter(|r| (1..=100).contains(r)).unwrap_or_else(|| invalid(format!("runs must be between 1 and 100, got {runs}")));
    if let Some(relid) = source {
        // uncharged: only where the caller may read the rows anyway
        if protect::reads_protected(relid, true) && !protect::exempt(relid) {
            raise_with(
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!("{P}: source {} is protected by pg_dp: a preview is not charged, so it runs only on tables the caller may read directly", unsafe { protect::relation_short_name(relid) }),
                Some("preview on public look-alike data, then release the protected table with dp.release_synthetic"),
            );
        }
    }
    let args = Args { source, columns, epsilon, delta, bins, bin_edges, method, criteria, gamma, epsilon0, refit, rows, min_count, constraints };
    let mut plan = plan(args);
    // private edges are drawn once per preview, as a release draws them once before its loop
    with_rng(|rng| choose_private_edges(&mut plan, rng));
    let (counts, real) = read(&mut plan);
    let d = plan.cols.len();
    let (mut accepted, mut rows_total, mut one, mut two) = (0usize, 0usize, 0.0, 0.0);
    let mut criteria_values: Vec<(String, f64, usize)> = Vec::new();
    for _ in 0..runs {
        let mut copy = plan.spec.counter();
        let outcome = with_rng(|rng| {
            produce(&plan, rng, &counts, real.as_ref(), &mut |codes, _| {
                for row in codes.chunks_exact(d) {
                    copy.push(row);
                }
            })
        });
        if outcome.structure.is_some() {
            accepted += 1;
            rows_total += outcome.rows;
            let (o, t) = counts.mean_tvd(&copy);
            one += o;
            two += t;
        }
        for r in outcome.evaluation.iter().flat_map(|e| &e.results) {
            match criteria_values.iter_mut().find(|(n, ..)| n == r.name) {
                Some(entry) => {
                    entry.1 += r.value;
                    entry.2 += 1;
                }
                None => criteria_values.push((r.name.to_string(), r.value, 1)),
            }
        }
    }
    unsafe { close_source(&plan.src) };
    let per = |x: f64| if accepted > 0 { serde_json::json!(x / accepted as f64) } else { serde_json::Value::Null };
    let criteria_json: Vec<serde_json::Value> =
        criteria_values.iter().map(|(n, v, k)| serde_json::json!({ "criterion": n, "mean_value_when_accepted": v / *k as f64 })).collect();
    JsonB(serde_json::json!({
        "runs": runs,
        "accepted": accepted,
        "acceptance_rate": accepted as f64 / runs as f64,
        "mean_rows": per(rows_total as f64),
        "mean_tvd_1way": per(one),
        "mean_tvd_2way": per(two),
        "criteria": criteria_json,
        "charged": false,
        "plan": plan.receipt,
    }))
}
