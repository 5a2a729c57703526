//! pg_dp: differential privacy inside PostgreSQL.
//!
//! The mechanisms live in the `pg_dp_core` crate (no PostgreSQL dependency). This crate is the thin
//! SQL layer: aggregate support functions, GUCs and the mapping of core errors to SQLSTATEs.
//! The SQL objects themselves (aggregates, grants, comments) are hand-written in `sql/pg_dp.sql`.
use pgrx::prelude::*;

::pgrx::pg_module_magic!(name, version);

// The SQL layer, in layers: each folder imports only the folders above it in this list
// (scripts/check_layers.py checks it).
pub mod pg;
pub mod settings;
pub mod catalog;
pub mod protection;
pub mod query;
pub mod budget;
pub mod execution;
pub mod aggregates;
pub mod releases;

extension_sql_file!("../sql/pg_dp.sql", name = "pg_dp_objects");
extension_sql_file!("../sql/ledger.sql", name = "pg_dp_ledger", requires = ["pg_dp_objects"]);
extension_sql_file!("../sql/inspect.sql", name = "pg_dp_inspect", requires = ["pg_dp_ledger"]);
extension_sql_file!("../sql/quantile.sql", name = "pg_dp_quantile", requires = ["pg_dp_inspect"]);
extension_sql_file!("../sql/dprp.sql", name = "pg_dp_dprp", requires = ["pg_dp_quantile"]);
extension_sql_file!("../sql/protect.sql", name = "pg_dp_protect", requires = ["pg_dp_dprp"]);
extension_sql_file!("../sql/units.sql", name = "pg_dp_units", requires = ["pg_dp_protect"]);
extension_sql_file!("../sql/variance.sql", name = "pg_dp_variance", requires = ["pg_dp_units"]);
extension_sql_file!("../sql/bounds.sql", name = "pg_dp_bounds", requires = ["pg_dp_variance"]);
extension_sql_file!("../sql/cache.sql", name = "pg_dp_cache", requires = ["pg_dp_bounds"]);
extension_sql_file!("../sql/expressions.sql", name = "pg_dp_expressions", requires = ["pg_dp_cache"]);
extension_sql_file!("../sql/distributed.sql", name = "pg_dp_distributed", requires = ["pg_dp_cache"]);
extension_sql_file!("../sql/synthetic.sql", name = "pg_dp_synthetic", requires = ["pg_dp_bounds"]);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    settings::guc::register();
    budget::ledger::init();
    catalog::protect::init();
    catalog::identity::init();
    execution::release::init();
    execution::planner::init();
    execution::estimates::init();
    budget::charge::init();
    execution::admission::init();
    execution::fail_closed::init();
    protection::citus_labels::init();
    execution::lifecycle::init();
    // receipts carry a stable fingerprint of the query (its query id), as pg_stat_statements does
    unsafe { pgrx::pg_sys::EnableQueryId() };
}

#[cfg(any(test, feature = "pg_test"))]
#[path = "../pgrx-tests/mod.rs"]
mod tests;

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec!["shared_preload_libraries = 'pg_dp'"]
    }
}
