//! In-database tests (`cargo pgrx test`), included from src/lib.rs with #[path].
//!
//! Noisy outputs are checked either at ε = 1e6 (the largest accepted ε: integer noise is then zero
//! with probability 1 − 2e^(−1e6)/(1+e^(−1e6)), i.e. always, so counts and integer sums are exact) or
//! against bounds that a correct mechanism violates with probability below 1e-12.
// The test runner calls every test as "tests".<name>(), so all tests live in one #[pg_schema]
// module named `tests`; the files below are its parts.
#[pgrx::pg_schema]
mod tests {
use pgrx::prelude::*;

include!("aggregates.rs");
include!("errors.rs");
include!("parallel.rs");
include!("security.rs");
include!("ledger.rs");
include!("inspect.rs");
include!("quantile.rs");
include!("dprp.rs");
include!("protection.rs");
include!("grammar.rs");
include!("attacks.rs");
include!("total_expressions.rs");
include!("units.rs");
include!("variance.rs");
include!("levels.rs");
include!("bounds.rs");
include!("preview.rs");
include!("recent.rs");
include!("autobounds.rs");
include!("roles.rs");
include!("synthetic.rs");

/// Runs a query and returns the first column of every row as text.
pub fn column(sql: &str) -> Vec<Option<String>> {
    Spi::connect(|client| {
        let mut out = Vec::new();
        for row in client.select(sql, None, &[]).unwrap() {
            out.push(row.get::<String>(1).unwrap());
        }
        out
    })
}

/// The number of rows a statement returns (of any column types).
pub fn row_count(sql: &str) -> usize {
    Spi::connect(|c| c.select(sql, None, &[]).unwrap().len())
}

pub fn one_f64(sql: &str) -> f64 {
    Spi::get_one::<f64>(sql).unwrap().expect("non-NULL result")
}

pub fn one_i64(sql: &str) -> i64 {
    Spi::get_one::<i64>(sql).unwrap().expect("non-NULL result")
}

pub fn one_text(sql: &str) -> String {
    Spi::get_one::<String>(sql).unwrap().expect("non-NULL result")
}

/// A 1000-row table: i = 1..1000, x = i as float8, n = i as numeric, s = i as int2 (i ≤ 1000),
/// b = i as int8, t = text, and every fourth row has NULLs in `xn` (x with NULLs).
pub fn sample_table() {
    Spi::run(
        "CREATE TABLE s AS SELECT g AS i, g::float8 AS x, g::numeric AS n, g::int2 AS sm, g::int8 AS b,
                g::float4 AS r, 'v' || g AS t, CASE WHEN g % 4 = 0 THEN NULL ELSE g::float8 END AS xn
           FROM generate_series(1, 1000) g",
    )
    .unwrap();
}

/// Runs `sql` in a subtransaction and returns the message and hint it failed with, or None if it
/// succeeded. The subtransaction keeps the test's transaction usable after the error.
pub fn error_of(sql: &str) -> Option<String> {
    unsafe {
        let oldcxt = pg_sys::CurrentMemoryContext;
        let oldowner = pg_sys::CurrentResourceOwner;
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        pg_sys::MemoryContextSwitchTo(oldcxt);
        let sql = sql.to_string();
        let r = PgTryBuilder::new(|| {
            Spi::run(&sql).unwrap();
            None
        })
        .catch_others(|e| match e {
            pg_sys::panic::CaughtError::PostgresError(r)
            | pg_sys::panic::CaughtError::ErrorReport(r)
            | pg_sys::panic::CaughtError::RustPanic { ereport: r, .. } => {
                Some(format!("{} (hint: {})", r.message(), r.hint().unwrap_or("")))
            }
        })
        .execute();
        pg_sys::MemoryContextSwitchTo(oldcxt);
        if r.is_some() {
            pg_sys::RollbackAndReleaseCurrentSubTransaction();
        } else {
            pg_sys::ReleaseCurrentSubTransaction();
        }
        pg_sys::MemoryContextSwitchTo(oldcxt);
        pg_sys::CurrentResourceOwner = oldowner;
        r
    }
}

/// The query fails with `expect` in its message or hint; returns the message.
pub fn refused(sql: &str, expect: &str) -> String {
    let msg = error_of(sql).unwrap_or_else(|| panic!("not refused: {sql}"));
    assert!(msg.contains(expect), "{sql}\n  got: {msg}\n  expected: {expect}");
    msg
}

/// Receipts of one query text. Tests run side by side and share the ledger, so a test counts the
/// receipts of its own query texts only.
pub fn receipts_of(sql: &str) -> i64 {
    Spi::get_one_with_args::<i64>("SELECT count(*) FROM dp.ledger WHERE query_text = $1", &[sql.into()]).unwrap().unwrap()
}

/// Refused with `expect`, and nothing charged for it.
pub fn refused_without_charge(sql: &str, expect: &str) -> String {
    let before = receipts_of(sql);
    let msg = refused(sql, expect);
    assert_eq!(receipts_of(sql), before, "charged although refused: {sql}");
    msg
}

/// The DP-only role of the protection tests: no SELECT on `patients`, SELECT on the public
/// `regions`. Roles created in a test's transaction are invisible to the ledger worker, so budgets
/// are not required (every release is still recorded in the ledger).
pub const ANALYST: &str = "dp_only_t";

/// A protected table `patients` (1000 rows; Bob is id 7 with income 123456), a public dimension
/// table `regions` (unique id), and the DP-only role [`ANALYST`].
pub fn protected_setup() {
    Spi::run(
        "CREATE TABLE patients AS
           SELECT g AS id, CASE WHEN g = 7 THEN 'Bob' ELSE 'p' || g END AS name, g % 5 AS region,
                  CASE WHEN g = 7 THEN 123456 ELSE (g * 37 % 90000) END::float8 AS income,
                  (15 + g % 30)::float8 AS bmi, g % 3 = 0 AS smoker, g::int8 AS big, g::numeric AS n,
                  date '2000-01-01' + g AS born
             FROM generate_series(1, 1000) g",
    )
    .unwrap();
    Spi::run("ALTER TABLE patients ADD PRIMARY KEY (id)").unwrap();
    Spi::run("CREATE TABLE regions AS SELECT r AS id, 'region ' || r AS rname, r * 10 AS code FROM generate_series(0, 4) r").unwrap();
    Spi::run("ALTER TABLE regions ADD PRIMARY KEY (id)").unwrap();
    Spi::run("SELECT dp.protect_table('patients')").unwrap();
    Spi::run(&format!("CREATE ROLE {ANALYST}")).unwrap();
    Spi::run(&format!("GRANT SELECT ON regions TO {ANALYST}")).unwrap();
    Spi::run("SET dp.require_budget = off").unwrap();
}

/// Runs `f` as the DP-only role.
pub fn as_analyst<T>(f: impl FnOnce() -> T) -> T {
    Spi::run(&format!("SET ROLE {ANALYST}")).unwrap();
    let r = f();
    Spi::run("RESET ROLE").unwrap();
    r
}

/// As the DP-only role: refused with `expect`, nothing charged (checked as superuser). Returns the
/// message.
pub fn refused_as_analyst(sql: &str, expect: &str) -> String {
    let before = receipts_of(sql);
    let msg = as_analyst(|| refused(sql, expect));
    assert_eq!(receipts_of(sql), before, "charged although refused: {sql}");
    msg
}

/// As the DP-only role: refused with `expect`, nothing charged, and the same message after the
/// data changed (other values, rows deleted, NaN and NULL stored): the refusal depends on the
/// query alone. Leaves the data changed.
pub fn refused_whatever_the_data(sql: &str, expect: &str) {
    let first = refused_as_analyst(sql, expect);
    Spi::run(
        "UPDATE patients SET income = CASE WHEN id % 2 = 1 THEN income * 2 + 1 ELSE 'NaN' END,
                             name = name || '_', bmi = NULL WHERE id % 4 <> 0",
    )
    .unwrap();
    Spi::run("DELETE FROM patients WHERE id % 3 = 0").unwrap();
    let second = refused_as_analyst(sql, expect);
    assert_eq!(first, second, "the refusal of {sql} changed with the data");
}
}
