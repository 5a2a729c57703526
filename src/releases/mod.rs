//! Whole-table releases (DPRP, synthetic data): checked from public information, charged once, then one scan.
//! Imports every layer but `aggregates`.
pub mod dprp;
pub mod source;
pub mod synthetic;
