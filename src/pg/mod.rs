//! Thin helpers over PostgreSQL's C API: functions pgrx does not bind, and the one place where
//! errors become PostgreSQL errors with a SQLSTATE. Imports nothing of pg_dp's SQL layer.
pub mod build;
pub mod error;
pub mod ffi;
pub mod fmgr;
pub mod nodes;
pub mod planning;
