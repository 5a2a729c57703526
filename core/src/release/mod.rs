//! Whole-table releases: DPRP (random projection, docs/privacy/dprp.md).
pub mod dprp;
