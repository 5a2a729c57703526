//! In-database tests (`cargo pgrx test`), included from src/lib.rs.
