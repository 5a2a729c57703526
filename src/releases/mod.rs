//! Whole-table releases (DPRP): checked from public information, charged once, then one scan.
//! Imports every layer but `aggregates`.
pub mod dprp;
