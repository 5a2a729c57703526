//! Accounting: the exact decimal a release is charged, the request the ledger debits, and the
//! named privacy levels.
pub mod charge;
pub mod levels;
