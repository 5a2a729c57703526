//! The session's pg_dp settings: privacy levels, the default ε, the seed, and the noise generator
//! they drive. Imports only `pg`.
pub mod guc;
pub mod levels;
pub mod noise;
