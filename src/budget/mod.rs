//! Paying for releases: receipts, charge requests, the ledger worker that commits them, the
//! release cache and the preview. Imports `query` and the layers below it.
pub mod cache;
pub mod charge;
pub mod debit;
pub mod ledger;
pub mod preview;
pub mod receipts;
