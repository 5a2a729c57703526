//! Before planning: the DP query grammar and its table of total expressions, which produce the
//! description of each DP level, and the rewrites of that description (privacy units, GROUP BY
//! keys, declared bounds, Citus). Imports the layers below: `pg`, `settings`, `catalog`,
//! `protection`.
pub mod arithmetic;
pub mod bounds;
pub mod clock;
pub mod datetime;
pub mod distributed_level;
pub mod grammar;
pub mod intervals;
pub mod params;
pub mod release_key;
pub mod rewrite;
pub mod statistics_mask;
pub mod total;
pub mod tree;
