//! What a restricted role may not read besides the tables themselves: statistics computed from
//! protected data. Imports `pg`, `settings` and `catalog`.
pub mod citus_labels;
pub mod statistics;
