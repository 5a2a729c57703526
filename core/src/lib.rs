//! pg_dp_core: the PostgreSQL-free heart of pg_dp.
//!
//! Everything that decides what is released and with which guarantee lives here, so that it can be
//! tested with plain `cargo test`. Folders by kind, each importing only the ones before it:
//! - [`noise`]: the ChaCha20 CSPRNG seeded from the operating system; exact samplers built only from
//!   uniform integers (Bernoulli, Bernoulli(exp(-x)), discrete Laplace, discrete Gaussian, after
//!   Canonne, Kamath & Steinke 2020), on 32 and 64 bits; the power-of-two grid; the analytic
//!   calibration of the Gaussian mechanism (Balle & Wang 2018);
//! - [`accounting`]: the exact decimal each release is charged, the requests the ledger debits, the
//!   named privacy levels;
//! - [`mechanisms`]: one file per mechanism: count, sum, average, variance (with their shared discrete
//!   Laplace receipt), the exact accumulator behind them, quantiles by smooth sensitivity (Nissim,
//!   Raskhodnikova & Smith 2007) and the exponential mechanism, automatic bounds, DP partition
//!   selection, and the 95% intervals of every release;
//! - [`release`]: whole-table releases: DPRP, differentially private random projection (Gondara &
//!   Wang 2020), and private synthetic microdata (a tree of 2-way marginals, acceptance criteria
//!   computed with DP, private selection among candidates).
//!
//! At the root, below them all: [`total_arith`] (the arithmetic admitted below a DP aggregate,
//! defined for every value), [`params`] (validation of ε, δ and bounds, with errors that name the
//! argument and its range), [`error`], and [`description`], the description of a DP query that the
//! SQL layer's query grammar admits.
pub mod accounting;
pub mod description;
pub mod error;
pub mod mechanisms;
pub mod noise;
pub mod params;
pub mod release;
pub mod total_arith;

pub use error::{DpError, DpResult};
