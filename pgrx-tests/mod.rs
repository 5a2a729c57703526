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
include!("review.rs");
include!("inspect.rs");
include!("quantile.rs");
include!("dprp.rs");

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
}
