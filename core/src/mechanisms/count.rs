//! dp_count: the number of rows (or non-NULL values), sensitivity 1 (docs/privacy/count.md).
use crate::accounting::charge::mechanism_epsilon;
use crate::error::DpResult;
use crate::params::check_epsilon;
use rand::Rng;
use crate::mechanisms::laplace::*;

/// dp_count: n + DLap(1/ε).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CountSpec {
    pub epsilon: f64,
}

impl CountSpec {
    pub fn new(epsilon: f64) -> DpResult<Self> {
        Ok(CountSpec { epsilon: check_epsilon("epsilon", epsilon)? })
    }

    /// The receipt of a release, known before any data is read.
    pub fn describe(&self) -> ReleaseInfo {
        let eps = mechanism_epsilon(self.epsilon);
        info(self.epsilon, 1.0, laplace_scale_f64(1, eps), laplace_halfwidth_steps(1, eps) as f64)
    }

    pub fn release<R: Rng + ?Sized>(&self, rng: &mut R, n: i64) -> Noisy<i64> {
        let (z, _) = laplace_noise(rng, 1, mechanism_epsilon(self.epsilon));
        Noisy { value: saturate_i64(n as i128 + z), info: self.describe() }
    }
}
