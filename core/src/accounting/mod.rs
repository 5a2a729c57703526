//! Accounting: the exact decimal a release is charged, the request the ledger debits, the ledger's
//! decision on a role's requests, and the named privacy levels.
pub mod charge;
pub mod debit;
pub mod levels;
