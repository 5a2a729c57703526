//! What pg_dp knows about objects: labels of tables, columns and roles (protected, trusted,
//! privacy units, domains, bounds), role identities, Citus's tables and shards. Imports `pg` and
//! `settings`.
pub mod citus;
pub mod functions;
pub mod identity;
pub mod protect;
