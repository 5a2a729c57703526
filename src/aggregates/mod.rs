//! The pg_dp aggregates: state plumbing and each aggregate's transition, combine and final
//! functions. A final function asks `execution` for its ticket; nothing below imports this layer.
pub mod agg;
pub mod autobounds;
pub mod avg;
pub mod contribution;
pub mod count;
pub mod inspect;
pub mod merge;
pub mod quantile;
pub mod selection;
pub mod sum;
pub mod variance;
