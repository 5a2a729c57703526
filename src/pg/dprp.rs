//! dp.release_projection and dp.release_projection_rows: a private copy of a table by random
//! projection (DPRP, docs/privacy/dprp.md). The core does the mechanism; this file reads the
//! columns (with the caller's privileges), charges the ledger, and writes the result.
use super::charge::cstr_or;
use super::error::{raise_with, OrRaise};
use super::noise::with_rng;
use pg_dp_core::accounting::{charged_decimal, ReleaseRecord};
use pg_dp_core::dprp::{DprpParams, DprpReceipt, DprpSpec, RowNorm};
use pgrx::prelude::*;
use pgrx::spi::quote_identifier;
use pgrx::{JsonB, PgSqlErrorCode};

const F: &str = "dp.release_projection";

/// Column types a release accepts: they all convert to float8.
const NUMERIC_TYPES: &[&str] = &["smallint", "integer", "bigint", "real", "double precision", "numeric"];

fn required<T>(v: Option<T>, arg: &str) -> T {
    v.unwrap_or_else(|| raise_with(PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED, format!("{F}: {arg} must not be NULL"), None))
}

fn invalid(msg: String) -> ! {
    raise_with(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("{F}: {msg}"), None)
}

/// The caller's parameters, checked for NULLs and shapes (ranges are checked by the core).
#[allow(clippy::too_many_arguments)]
fn params(
    columns: &[String], lower: Option<Vec<Option<f64>>>, upper: Option<Vec<Option<f64>>>, epsilon: Option<f64>,
    delta: Option<f64>, k1: Option<i32>, k2: Option<i32>, share: Option<f64>, row_norm: Option<&str>,
) -> DprpParams {
    let array = |v: Option<Vec<Option<f64>>>, arg: &str| -> Vec<f64> {
        let v = required(v, arg);
        if v.len() != columns.len() {
            invalid(format!("{arg} must have one entry per column ({}), got {}", columns.len(), v.len()));
        }
        v.into_iter().map(|x| required(x, &format!("every element of {arg}"))).collect()
    };
    let mut p = DprpParams::new(array(lower, "lower"), array(upper, "upper"), required(epsilon, "epsilon"), required(delta, "delta"));
    let k = |v: Option<i32>, arg: &str| {
        v.map(|k| usize::try_from(k).unwrap_or_else(|_| invalid(format!("{arg} must be a positive integer or NULL, got {k}"))))
    };
    p.k1 = k(k1, "k1");
    p.k2 = k(k2, "k2");
    p.projection_share = required(share, "projection_share");
    p.row_norm = match required(row_norm, "row_norm") {
        "clip" => RowNorm::Clip,
        "unit" => RowNorm::Unit,
        other => invalid(format!("row_norm must be 'clip' or 'unit', got '{other}'")),
    };
    p
}

/// Reads the columns of `source` as float8, row-major, skipping rows with a NULL in any of them.
/// The SELECT runs with the caller's privileges. Refuses unknown and non-numeric columns.
fn read_columns(source: pg_sys::Oid, columns: &[String]) -> (String, Vec<f64>, usize) {
    if columns.is_empty() {
        invalid("columns must name at least one column".into());
    }
    let rel: String = Spi::get_one_with_args("SELECT $1::regclass::text", &[source.into()]).unwrap().unwrap();
    for c in columns {
        // no row (no such column) is an empty result, not NULL
        let typ: Option<String> = Spi::get_one_with_args(
            "SELECT format_type(atttypid, NULL) FROM pg_catalog.pg_attribute
              WHERE attrelid = $1 AND attname = $2 AND attnum > 0 AND NOT attisdropped",
            &[source.into(), c.as_str().into()],
        )
        .unwrap_or(None);
        match typ {
            None => raise_with(PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN, format!("{F}: column \"{c}\" of {rel} does not exist"), None),
            Some(t) if !NUMERIC_TYPES.contains(&t.as_str()) => raise_with(
                PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                format!("{F}: column \"{c}\" of {rel} is {t}, not a number"),
                Some("release only smallint, integer, bigint, real, double precision or numeric columns"),
            ),
            Some(_) => {}
        }
    }
    let list: Vec<String> = columns.iter().map(|c| format!("{}::float8", quote_identifier(c))).collect();
    let not_null: Vec<String> = columns.iter().map(|c| format!("{} IS NOT NULL", quote_identifier(c))).collect();
    let sql = format!("SELECT {} FROM {rel} WHERE {}", list.join(", "), not_null.join(" AND "));
    let d = columns.len();
    let data = Spi::connect(|client| {
        let table = client.select(&sql, None, &[]).unwrap();
        let mut out = Vec::with_capacity(table.len() * d);
        for row in table {
            for i in 1..=d {
                out.push(row.get::<f64>(i).unwrap().unwrap_or(f64::NAN));
            }
        }
        out
    });
    let n = data.len() / d;
    (rel, data, n)
}

/// Charges the release to the caller's budget, in the ledger's own transaction, before anything is
/// written: a failure afterwards does not refund it.
fn charge(rel: &str, receipt: &DprpReceipt) {
    let release = ReleaseRecord {
        aggregate: format!("{F}({rel})"),
        mechanism: "dprp".into(),
        sensitivity: receipt.sensitivity_projection,
        noise_scale: receipt.sigma_projection,
        epsilon: charged_decimal(receipt.epsilon),
        delta: charged_decimal(receipt.delta),
        details: serde_json::to_string(receipt).unwrap_or_else(|_| "{}".into()),
    };
    super::ledger::require_preloaded("charge privacy budgets");
    unsafe { super::charge::charge(vec![release], 0, cstr_or(pg_sys::debug_query_string, "")) }
}

/// Validates, reads, charges and releases: (source name, rows row-major, receipt).
#[allow(clippy::too_many_arguments)]
fn release(
    source: Option<pg_sys::Oid>, columns: Option<Vec<Option<String>>>, lower: Option<Vec<Option<f64>>>,
    upper: Option<Vec<Option<f64>>>, epsilon: Option<f64>, delta: Option<f64>, k1: Option<i32>, k2: Option<i32>,
    share: Option<f64>, row_norm: Option<&str>, before_read: impl FnOnce(),
) -> (String, Vec<String>, Vec<f64>, DprpReceipt) {
    let source = required(source, "source");
    let columns: Vec<String> = required(columns, "columns").into_iter().map(|c| required(c, "every column name")).collect();
    let p = params(&columns, lower, upper, epsilon, delta, k1, k2, share, row_norm);
    // everything that does not need the row count is checked before reading
    DprpSpec::new(1, &p).or_raise(F);
    before_read();
    let (rel, data, n) = read_columns(source, &columns);
    let spec = DprpSpec::new(n, &p).or_raise(F);
    if data.iter().any(|x| x.is_nan()) {
        raise_with(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("{F}: the columns must not contain NaN"), None);
    }
    charge(&rel, &spec.describe());
    let (rows, receipt) = with_rng(|rng| {
        let (rows, receipt) = spec.release(rng, &data)?;
        Ok((shuffled_rows(rng, rows, columns.len()), receipt))
    })
    .or_raise(F);
    (rel, columns, rows, receipt)
}

/// Appends the rows (row-major, d float8 columns) to the table just created: heap tuples formed and
/// inserted directly, as COPY does. The table is new (no index, trigger or constraint), so nothing
/// else needs maintaining.
unsafe fn insert_rows(relid: pg_sys::Oid, rows: &[f64], d: usize) {
    let rel = pg_sys::table_open(relid, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
    let desc = (*rel).rd_att;
    let nulls = vec![false; d];
    let mut values = vec![pg_sys::Datum::from(0usize); d];
    for row in rows.chunks_exact(d) {
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

/// The rows in a uniformly random order (post-processing: output row i no longer sits where input
/// row i was read).
fn shuffled_rows<R: rand::Rng + ?Sized>(rng: &mut R, rows: Vec<f64>, d: usize) -> Vec<f64> {
    let n = rows.len() / d;
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    order.iter().flat_map(|&i| rows[i * d..(i + 1) * d].iter().copied()).collect()
}

/// The release as a new table `target` (owned by the caller), with the receipt as jsonb.
#[pg_extern(sql = false, volatile)]
#[allow(clippy::too_many_arguments)]
fn release_projection(
    source: Option<pg_sys::Oid>, target: Option<&str>, columns: Option<Vec<Option<String>>>,
    lower: Option<Vec<Option<f64>>>, upper: Option<Vec<Option<f64>>>, epsilon: Option<f64>, delta: Option<f64>,
    k1: Option<i32>, k2: Option<i32>, projection_share: Option<f64>, row_norm: Option<&str>,
) -> JsonB {
    let target = required(target, "target");
    let target_sql = quote_identifier(target);
    let check_target = || {
        let exists: bool = Spi::get_one_with_args("SELECT pg_catalog.to_regclass($1) IS NOT NULL", &[target_sql.as_str().into()])
            .unwrap()
            .unwrap_or(false);
        if exists {
            raise_with(PgSqlErrorCode::ERRCODE_DUPLICATE_TABLE, format!("{F}: relation {target_sql} already exists"), Some("choose a new target name"));
        }
    };
    let (rel, columns, rows, receipt) =
        release(source, columns, lower, upper, epsilon, delta, k1, k2, projection_share, row_norm, check_target);
    let d = columns.len();
    let defs: Vec<String> = columns.iter().map(|c| format!("{} float8", quote_identifier(c))).collect();
    Spi::run(&format!("CREATE TABLE {target_sql} ({})", defs.join(", "))).unwrap();
    let relid: pg_sys::Oid =
        Spi::get_one_with_args("SELECT pg_catalog.to_regclass($1)::oid", &[target_sql.as_str().into()]).unwrap().unwrap();
    unsafe { insert_rows(relid, &rows, d) };
    let mut v = serde_json::to_value(&receipt).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("source".into(), rel.into());
        o.insert("target".into(), target_sql.into());
        o.insert("columns".into(), columns.into());
    }
    JsonB(v)
}

/// The release as rows (float8[] in column order), without creating a table.
#[pg_extern(sql = false, volatile)]
#[allow(clippy::too_many_arguments)]
fn release_projection_rows(
    source: Option<pg_sys::Oid>, columns: Option<Vec<Option<String>>>, lower: Option<Vec<Option<f64>>>,
    upper: Option<Vec<Option<f64>>>, epsilon: Option<f64>, delta: Option<f64>, k1: Option<i32>, k2: Option<i32>,
    projection_share: Option<f64>, row_norm: Option<&str>,
) -> SetOfIterator<'static, Vec<f64>> {
    let (_, columns, rows, _) = release(source, columns, lower, upper, epsilon, delta, k1, k2, projection_share, row_norm, || {});
    let d = columns.len();
    let out: Vec<Vec<f64>> = rows.chunks(d).map(|r| r.to_vec()).collect();
    SetOfIterator::new(out)
}
