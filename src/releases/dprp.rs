//! dp.release_projection and dp.release_projection_rows: a private copy of a table by random
//! projection (DPRP, docs/privacy/dprp.md). The core does the mechanism; this file checks the
//! arguments and the catalog, charges the ledger, reads the table and writes the result.
//!
//! Order, so that nothing the caller learns before paying depends on the data:
//! 1. every argument, the source (a plain or partitioned table, every leaf a table, no row security
//!    for the caller), the columns (user columns of numeric types), the caller's SELECT privilege
//!    (waived on protected tables, as for DP aggregates), the target name and the memory plan are
//!    checked from the arguments, the catalog and the role alone;
//! 2. the core draws the projection and the row-count noise and reserves all its memory;
//! 3. the release is charged in the ledger's own transaction;
//! 4. the rows are read by a direct scan of every leaf under the statement's snapshot (no query, no
//!    planner, no expression that could fail), values converted to float8 without errors: NULL and
//!    NaN become the midpoint of their bounds, ±∞ and out-of-range values are clamped;
//! 5. the core finishes the release. After the charge the only failures are an interrupt and the
//!    memory limit, which is a function of the released row count.
use super::source::{close_source, open_source, pending_interrupt, scan_rows, Conversion, Source, CHECK_ROWS};
use crate::pg::error::{raise_with, OrRaise};
use crate::settings::noise::with_rng;
use pg_dp_core::accounting::charge::{charged_decimal, ReleaseRecord};
use pg_dp_core::release::dprp::{Centring, DprpOutput, DprpParams, DprpReceipt, DprpSpec, MemoryPlan, ReleaseFailure, RowNorm};
use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;
use pgrx::spi::quote_identifier;
use pgrx::{IntoDatum, JsonB, PgSqlErrorCode};

const F: &str = "dp.release_projection";

fn required<T>(v: Option<T>, arg: &str) -> T {
    v.unwrap_or_else(|| raise_with(PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED, format!("{F}: {arg} must not be NULL"), None))
}

fn invalid(msg: String) -> ! {
    raise_with(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("{F}: {msg}"), None)
}

/// The caller's choices beyond source, target and columns.
struct Options<'a> {
    lower: Option<Vec<Option<f64>>>,
    upper: Option<Vec<Option<f64>>>,
    epsilon: Option<f64>,
    delta: Option<f64>,
    k1: Option<i32>,
    k2: Option<i32>,
    projection_share: Option<f64>,
    row_norm: Option<&'a str>,
    clip_norm: Option<f64>,
    centring: Option<&'a str>,
}

/// The caller's parameters, checked for NULLs and shapes (ranges are checked by the core).
fn params(d: usize, o: Options) -> DprpParams {
    let array = |v: Option<Vec<Option<f64>>>, arg: &str| -> Vec<f64> {
        let v = required(v, arg);
        if v.len() != d {
            invalid(format!("{arg} must have one entry per column ({d}), got {}", v.len()));
        }
        v.into_iter().map(|x| required(x, &format!("every element of {arg}"))).collect()
    };
    let mut p = DprpParams::new(array(o.lower, "lower"), array(o.upper, "upper"), required(o.epsilon, "epsilon"), required(o.delta, "delta"));
    let k = |v: Option<i32>, arg: &str| {
        v.map(|k| usize::try_from(k).unwrap_or_else(|_| invalid(format!("{arg} must be a positive integer or NULL, got {k}"))))
    };
    p.k1 = k(o.k1, "k1");
    p.k2 = k(o.k2, "k2");
    p.projection_share = required(o.projection_share, "projection_share");
    p.row_norm = match required(o.row_norm, "row_norm") {
        "clip" => RowNorm::Clip,
        "unit" => RowNorm::Unit,
        other => invalid(format!("row_norm must be 'clip' or 'unit', got '{other}'")),
    };
    p.clip_norm = o.clip_norm;
    p.centring = match required(o.centring, "centring") {
        "midpoint" => Centring::Midpoint,
        "mean" => Centring::Mean,
        other => invalid(format!("centring must be 'midpoint' or 'mean', got '{other}'")),
    };
    p
}

/// Reads every row as d float8 values (NaN for NULL).
unsafe fn scan_floats(src: &Source, conversions: &[Conversion], push: &mut dyn FnMut(&[f64]) -> Result<(), ReleaseFailure>) -> Result<(), ReleaseFailure> {
    let mut row = vec![f64::NAN; conversions.len()];
    scan_rows(src, &mut |values, nulls| {
        for (((v, &d), &null), conv) in row.iter_mut().zip(values).zip(nulls).zip(conversions) {
            *v = if null { f64::NAN } else { conv.convert(d) };
        }
        push(&row)
    })
}


/// Ends a release that failed after the charge: the pending interrupt, or one fixed error.
fn failed_after_charge(e: ReleaseFailure) -> ! {
    if e == ReleaseFailure::Interrupted {
        pg_sys::check_for_interrupts!();
    }
    match e {
        ReleaseFailure::MemoryLimit => raise_with(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("{F}: the released table does not fit in maintenance_work_mem; the release was charged"),
            Some("raise maintenance_work_mem for this session; the number of released rows is a noisy count, so the limit is only a function of what the release would have shown"),
        ),
        _ => raise_with(PgSqlErrorCode::ERRCODE_QUERY_CANCELED, format!("{F}: the release was interrupted; it was charged"), None),
    }
}

/// The memory plan from public settings: maintenance_work_mem, and threads from
/// max_parallel_maintenance_workers (plus the backend itself), at most the machine's cores.
fn memory_plan(spec: &DprpSpec) -> MemoryPlan {
    let limit = unsafe { pg_sys::maintenance_work_mem } as usize * 1024;
    let threads = super::release_threads();
    spec.plan_memory(limit, threads).unwrap_or_else(|e| {
        raise_with(
            crate::pg::error::sqlstate(&e),
            format!("{F}: {e}"),
            Some("raise maintenance_work_mem, or choose fewer columns or a smaller k1"),
        )
    })
}

/// Charges the release to the caller's budget, in the ledger's own transaction. The receipt
/// depends on the arguments and the catalog only.
fn charge(source: &str, receipt: &DprpReceipt) {
    let mut details = serde_json::to_value(receipt).unwrap_or_default();
    if let Some(o) = details.as_object_mut() {
        o.insert("source".into(), source.into());
    }
    let release = ReleaseRecord {
        aggregate: format!("{F}({source})"),
        mechanism: "dprp".into(),
        sensitivity: receipt.sensitivity_projection,
        noise_scale: receipt.sigma_projection,
        epsilon: charged_decimal(receipt.epsilon),
        delta: charged_decimal(receipt.delta),
        details: details.to_string(),
    };
    crate::budget::ledger::require_preloaded("charge privacy budgets");
    unsafe { crate::budget::charge::charge(vec![release], 0, crate::pg::fmgr::cstr_or(pg_sys::debug_query_string, "")) }
}

/// Validates, charges, reads and releases: (source name, columns, output). `before_charge` runs
/// after every check of the arguments, before anything is drawn or charged.
fn release(
    source: Option<Oid>, columns: Option<Vec<Option<String>>>, options: Options, before_charge: impl FnOnce(),
) -> (String, Vec<String>, DprpOutput) {
    let source = required(source, "source");
    let columns: Vec<String> = required(columns, "columns").into_iter().map(|c| required(c, "every column name")).collect();
    let p = params(columns.len(), options);
    let spec = DprpSpec::new(&p).or_raise(F);
    let mut conversions = Vec::with_capacity(columns.len());
    let src = unsafe {
        open_source(F, "a release by random projection", source, &columns, &mut |name, c, typid| match Conversion::of(pg_sys::getBaseType(typid)) {
            Some(conv) => conversions.push(conv),
            None => {
                let t = crate::pg::fmgr::cstr_or(pg_sys::format_type_be(typid), "?");
                raise_with(
                    PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                    format!("{F}: column \"{c}\" of {name} is {t}, not a number"),
                    Some("release only smallint, integer, bigint, real, double precision or numeric columns"),
                );
            }
        })
    };
    let plan = memory_plan(&spec);
    before_charge();
    let mut check = pending_interrupt;
    let output = with_rng(|rng| {
        let mut started = match spec.start(rng, &plan, &mut check) {
            Ok(r) => r,
            Err(ReleaseFailure::OutOfMemory) => raise_with(
                PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
                format!("{F}: out of memory reserving maintenance_work_mem ({} bytes) for the release; nothing was charged", plan.memory_limit),
                Some("lower maintenance_work_mem for this session"),
            ),
            Err(_) => {
                pg_sys::check_for_interrupts!();
                raise_with(PgSqlErrorCode::ERRCODE_QUERY_CANCELED, format!("{F}: the release was interrupted; nothing was charged"), None)
            }
        };
        charge(&src.name, &spec.describe());
        unsafe { scan_floats(&src, &conversions, &mut |row| started.push_row(row)) }.unwrap_or_else(|e| failed_after_charge(e));
        started.finish(rng, &mut check).unwrap_or_else(|e| failed_after_charge(e))
    });
    unsafe { close_source(&src) };
    (src.name, columns, output)
}

/// Appends the rows (row-major, d float8 columns) to the table just created: heap tuples formed and
/// inserted directly, as COPY does. The table is new (no index, trigger or constraint), so nothing
/// else needs maintaining.
unsafe fn insert_rows(relid: Oid, rows: &[f64], d: usize) {
    let rel = pg_sys::table_open(relid, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
    let desc = (*rel).rd_att;
    let nulls = vec![false; d];
    let mut values = vec![pg_sys::Datum::from(0usize); d];
    for (i, row) in rows.chunks_exact(d).enumerate() {
        if i % CHECK_ROWS == CHECK_ROWS - 1 {
            pg_sys::check_for_interrupts!();
        }
        for (v, x) in values.iter_mut().zip(row) {
            *v = pg_sys::Datum::from(x.to_bits() as usize); // float8 is pass-by-value
        }
        let tuple = pg_sys::heap_form_tuple(desc, values.as_mut_ptr(), nulls.as_ptr().cast_mut());
        pg_sys::simple_heap_insert(rel, tuple);
        pg_sys::heap_freetuple(tuple);
    }
    pg_sys::table_close(rel, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
    pg_sys::CommandCounterIncrement();
}

/// The release as a new table `target` (owned by the caller), with the receipt as jsonb.
#[pg_extern(sql = false, volatile)]
#[allow(clippy::too_many_arguments)]
fn release_projection(
    source: Option<Oid>, target: Option<&str>, columns: Option<Vec<Option<String>>>, lower: Option<Vec<Option<f64>>>,
    upper: Option<Vec<Option<f64>>>, epsilon: Option<f64>, delta: Option<f64>, k1: Option<i32>, k2: Option<i32>,
    projection_share: Option<f64>, row_norm: Option<&str>, clip_norm: Option<f64>, centring: Option<&str>,
) -> JsonB {
    let target = required(target, "target");
    let target_sql = quote_identifier(target);
    let options = Options { lower, upper, epsilon, delta, k1, k2, projection_share, row_norm, clip_norm, centring };
    let cols = columns.clone();
    // the target is created before the charge, so that creating it cannot fail after paying (a
    // refused charge rolls it back with the statement)
    let create_target = || {
        let exists: bool = Spi::get_one_with_args("SELECT pg_catalog.to_regclass($1) IS NOT NULL", &[target_sql.as_str().into()])
            .unwrap()
            .unwrap_or(false);
        if exists {
            raise_with(PgSqlErrorCode::ERRCODE_DUPLICATE_TABLE, format!("{F}: relation {target_sql} already exists"), Some("choose a new target name"));
        }
        let defs: Vec<String> = cols.iter().flatten().flatten().map(|c| format!("{} double precision", quote_identifier(c))).collect();
        Spi::run(&format!("CREATE TABLE {target_sql} ({})", defs.join(", "))).unwrap();
    };
    let (rel, columns, out) = release(source, columns, options, create_target);
    let relid: Oid = Spi::get_one_with_args("SELECT pg_catalog.to_regclass($1)::pg_catalog.oid", &[target_sql.as_str().into()]).unwrap().unwrap();
    unsafe { insert_rows(relid, &out.rows, columns.len()) };
    let mut v = serde_json::to_value(&out.receipt).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("source".into(), rel.into());
        o.insert("target".into(), target_sql.into());
        o.insert("columns".into(), columns.into());
        o.insert("rows_released".into(), out.rows_released.into());
        o.insert("noisy_row_count".into(), out.noisy_count.into());
    }
    JsonB(v)
}

// The release as rows (float8[] in column order), without creating a table. The rows go into a
// tuplestore (materialize mode, on disk past work_mem) and the release's own buffer is freed before
// the function returns, so open cursors and several calls in one query hold no release memory.
crate::pg::fmgr::pg_v1!(pg_finfo_dp_release_projection_rows, dp_release_projection_rows, |fcinfo| {
    use pgrx::fcinfo::pg_getarg;
    let options = Options {
        lower: pg_getarg(fcinfo, 2),
        upper: pg_getarg(fcinfo, 3),
        epsilon: pg_getarg(fcinfo, 4),
        delta: pg_getarg(fcinfo, 5),
        k1: pg_getarg(fcinfo, 6),
        k2: pg_getarg(fcinfo, 7),
        projection_share: pg_getarg(fcinfo, 8),
        row_norm: pg_getarg(fcinfo, 9),
        clip_norm: pg_getarg(fcinfo, 10),
        centring: pg_getarg(fcinfo, 11),
    };
    let (_, columns, out) = release(pg_getarg(fcinfo, 0), pg_getarg(fcinfo, 1), options, || {});
    let d = columns.len();
    pg_sys::InitMaterializedSRF(fcinfo, pg_sys::MAT_SRF_USE_EXPECTED_DESC as pg_sys::bits32);
    let rsinfo = (*fcinfo).resultinfo as *mut pg_sys::ReturnSetInfo;
    let (store, desc) = ((*rsinfo).setResult, (*rsinfo).setDesc);
    let row_context = pg_sys::AllocSetContextCreateExtended(
        pg_sys::CurrentMemoryContext,
        c"pg_dp DPRP output row".as_ptr(),
        pg_sys::ALLOCSET_SMALL_MINSIZE as usize,
        pg_sys::ALLOCSET_SMALL_INITSIZE as usize,
        pg_sys::ALLOCSET_SMALL_MAXSIZE as usize,
    );
    for (i, row) in out.rows.chunks_exact(d).enumerate() {
        if i % CHECK_ROWS == CHECK_ROWS - 1 {
            pg_sys::check_for_interrupts!();
        }
        let old = pg_sys::MemoryContextSwitchTo(row_context);
        let mut value = row.to_vec().into_datum().expect("a float8[] datum");
        let mut null = false;
        pg_sys::MemoryContextSwitchTo(old);
        pg_sys::tuplestore_putvalues(store, desc, &mut value, &mut null);
        pg_sys::MemoryContextReset(row_context);
    }
    drop(out);
    pg_sys::MemoryContextDelete(row_context);
    pg_sys::Datum::from(0usize)
});
