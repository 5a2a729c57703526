//! The mechanisms: one file each for count, sum, average and variance (with the discrete Laplace
//! noise and receipt they share), the exact accumulator behind them, quantiles by smooth
//! sensitivity and the exponential mechanism, automatic bounds, partition selection and the 95%
//! intervals of every release.
//!
//! Neighbouring relation everywhere: add or remove one row (each row belongs to one person).
//! Every mechanism adds discrete Laplace noise to an exact integer statistic, so it is ε-DP with
//! exactly the stated sensitivity; derivations are in docs/privacy/.
pub mod accum;
pub mod autobounds;
pub mod avg;
pub mod count;
pub mod intervals;
pub mod laplace;
pub mod partition;
pub mod quantile;
pub mod smooth;
pub mod sum;
pub mod variance;

// the releases of the aggregates, by their former paths
pub use avg::*;
pub use count::*;
pub use laplace::*;
pub use sum::*;
pub use variance::*;
