//! SQL glue. Each file is one SQL feature; every function here is a few lines around the core.
pub mod agg;
pub mod avg;
pub mod charge;
pub mod count;
pub mod dprp;
pub mod error;
pub mod guc;
pub mod inspect;
pub mod ledger;
pub mod noise;
pub mod quantile;
pub mod sum;
