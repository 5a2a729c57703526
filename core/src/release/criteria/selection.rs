//! Private selection with a known threshold (Liu & Talwar, "Private Selection from Private
//! Candidates", STOC 2019, Section 3): repeat an ε₁-DP try (a candidate and its DP criteria) and
//! keep the first that passes; after each failure stop with probability γ; give up after T tries.
//! With T ≥ max((1/γ)·ln(2/ε₀), 1 + 1/(eγ)) the loop is (2ε₁ + ε₀)-DP
//! (docs/privacy/synthetic-criteria.md, "The selection loop").
//!
//! The number of tries is not an output: the stopping point is drawn before the first try, all T
//! tries run, and [`LoopSpec::choose`] picks the first passing try among those before the stopping
//! point. The result is the same distribution as the sequential loop, and the running time is that
//! of T tries whatever the data.
use crate::error::{DpError, DpResult};
use crate::noise::sampling::{bernoulli_frac, dyadic};
use crate::params::{fmt_f64, EPSILON_MIN};
use rand::Rng;

/// Smallest accepted stopping probability γ.
pub const GAMMA_MIN: f64 = 1e-4;
/// Largest accepted ε₀ (the derivation's bound 1/(1 − ε₀/2) ≤ e^ε₀ holds up to here).
pub const EPSILON0_MAX: f64 = 1.0;
/// Largest number of tries T.
pub const MAX_TRIES: usize = 100_000;

/// The loop's public parameters: γ, ε₀ and the number of tries T they imply.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoopSpec {
    pub gamma: f64,
    pub epsilon0: f64,
    tries: usize,
    /// γ = gamma_num / gamma_den exactly (γ is a binary float, hence a dyadic rational).
    gamma_num: u128,
    gamma_den: u128,
}

/// The real-valued bound max((1/γ)·ln(2/ε₀), 1 + 1/(eγ)) on the number of tries.
pub fn tries_bound(gamma: f64, epsilon0: f64) -> f64 {
    ((2.0 / epsilon0).ln() / gamma).max(1.0 + 1.0 / (std::f64::consts::E * gamma))
}

impl LoopSpec {
    pub fn new(gamma: f64, epsilon0: f64) -> DpResult<LoopSpec> {
        if !(gamma.is_finite() && (GAMMA_MIN..=1.0).contains(&gamma)) {
            return Err(DpError::invalid("gamma", format!("a number between {GAMMA_MIN} and 1"), fmt_f64(gamma)));
        }
        if !(epsilon0.is_finite() && (EPSILON_MIN..=EPSILON0_MAX).contains(&epsilon0)) {
            return Err(DpError::invalid("epsilon0", format!("a number between {EPSILON_MIN} and {EPSILON0_MAX}"), fmt_f64(epsilon0)));
        }
        // rounded up, with a relative margin so that the float evaluation never gives less
        let t = (tries_bound(gamma, epsilon0) * (1.0 + 1e-12)).ceil();
        if t > MAX_TRIES as f64 {
            return Err(DpError::invalid(
                "gamma",
                format!("large enough that max((1/gamma)·ln(2/epsilon0), 1 + 1/(e·gamma)) is at most {MAX_TRIES} tries (epsilon0 = {})", fmt_f64(epsilon0)),
                fmt_f64(gamma),
            ));
        }
        let (m, k) = dyadic(gamma);
        // γ ≥ 1e-4 needs k ≤ 14 + 52 bits
        let (gamma_num, gamma_den) = if k <= 0 { (1, 1) } else { (m as u128, 1u128 << k) };
        Ok(LoopSpec { gamma, epsilon0, tries: t as usize, gamma_num, gamma_den })
    }

    /// T: the number of tries, all of which are run.
    pub fn tries(&self) -> usize {
        self.tries
    }

    /// γ as the exact fraction the coins use.
    pub fn gamma_fraction(&self) -> (u128, u128) {
        (self.gamma_num, self.gamma_den)
    }

    /// The stopping point S ∈ 1..=T: the try after which the loop stops if no try before it passed.
    /// S = j < T with probability γ(1 − γ)^(j−1), S = T with probability (1 − γ)^(T−1): T − 1 exact
    /// Bernoulli(γ) coins, always all drawn, the first success deciding.
    pub fn draw_stop<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        let mut stop = self.tries;
        for j in 1..self.tries {
            let coin = bernoulli_frac(rng, self.gamma_num, self.gamma_den);
            if coin && stop == self.tries {
                stop = j;
            }
        }
        stop
    }

    /// The first passing try among the first `stop` (0-based index), or None: "no candidate passed",
    /// itself a DP output. `passed` holds the outcome of every try run.
    pub fn choose(&self, stop: usize, passed: &[bool]) -> Option<usize> {
        passed.iter().take(stop.min(self.tries)).position(|&p| p)
    }

    /// Draws the stopping point, runs all T tries (`run(rng, j)` returns whether try j passed) and
    /// chooses. Returns the chosen try's index, which the caller must not publish (a try's content
    /// must not reveal its index either: every try is the same randomized mechanism).
    pub fn select<R: Rng + ?Sized>(&self, rng: &mut R, mut run: impl FnMut(&mut R, usize) -> bool) -> Option<usize> {
        let stop = self.draw_stop(rng);
        let passed: Vec<bool> = (0..self.tries).map(|j| run(rng, j)).collect();
        self.choose(stop, &passed)
    }

    /// ε of the whole loop when every try is ε₁-DP: 2ε₁ + ε₀.
    pub fn epsilon(&self, epsilon_try: f64) -> f64 {
        2.0 * epsilon_try + self.epsilon0
    }
}

/// Total ε of a release plan: a model (ε_model), hoisted criteria released once (ε_hoisted),
/// criteria noised per candidate (ε_loop) and the loop's ε₀.
///
/// - `fit_once = false`: every try fits the model again, so one try is ε_model + ε_loop and the
///   release is ε_hoisted + 2(ε_model + ε_loop) + ε₀.
/// - `fit_once = true`: the model is fitted once before the loop and each try only samples from it
///   (post-processing) and evaluates the criteria: ε_model + ε_hoisted + 2ε_loop + ε₀.
///
/// (With ε₀ = 0 these are the uncapped loop's figures.)
pub fn plan_epsilon(model_eps: f64, hoisted_eps: f64, loop_criteria_eps: f64, epsilon0: f64, fit_once: bool) -> f64 {
    if fit_once {
        model_eps + hoisted_eps + 2.0 * loop_criteria_eps + epsilon0
    } else {
        hoisted_eps + 2.0 * (model_eps + loop_criteria_eps) + epsilon0
    }
}
