//! pg_dp_core: the PostgreSQL-free heart of pg_dp.
//!
//! Everything that decides what is released and with which guarantee lives here, so that it can be
//! tested with plain `cargo test`:
//! - [`rng`]: the ChaCha20 CSPRNG, seeded from the operating system;
//! - [`sampling`]: exact samplers (Bernoulli, Bernoulli(exp(-x)), discrete Laplace, discrete Gaussian)
//!   built only from uniform integers, after Canonne, Kamath & Steinke (2020);
//! - [`grid`]: clamping and quantization of real values to a power-of-two grid;
//! - [`params`]: validation of ε, δ and bounds, with errors that name the argument and its range;
//! - [`mechanisms`]: count, integer sum, real sum and average releases;
//! - [`intervals`]: 95% half-widths of the noise of every release, from public parameters only;
//! - [`gaussian`]: analytic calibration of the Gaussian mechanism (Balle & Wang 2018);
//! - [`sampling64`]: the same exact samplers on 64-bit integers, for releases with millions of draws;
//! - [`dprp`]: differentially private random projection release of a whole table (Gondara & Wang 2020);
//! - [`smooth`]: smooth sensitivity of quantiles (Nissim, Raskhodnikova & Smith 2007), O(n log n);
//! - [`quantile`]: median and percentile releases (smooth sensitivity, exponential mechanism);
//! - [`autobounds`]: DP power-of-two bounds from a histogram of magnitudes, for releases without bounds;
//! - [`description`]: the description of a DP query that the SQL layer's query grammar admits.
//! - [`partition`]: DP partition selection (which private GROUP BY keys a release may show).
//! - [`levels`]: named privacy levels and their ε per query.
pub mod accounting;
pub mod accum;
pub mod autobounds;
pub mod description;
pub mod dprp;
pub mod error;
pub mod gaussian;
pub mod grid;
pub mod intervals;
pub mod levels;
pub mod mechanisms;
pub mod params;
pub mod partition;
pub mod quantile;
pub mod rng;
pub mod sampling;
pub mod sampling64;
pub mod smooth;

pub use error::{DpError, DpResult};
