//! Named privacy levels: an ε per query for people who would rather not pick a number.
//!
//! `dp.privacy_level` (a session setting) chooses the ε of aggregates called without one, unless
//! `dp.default_epsilon` is set; a level pinned to a role by a DBA (`dp.pin_privacy_level`) also caps
//! the ε of each of that role's queries. From one level to the next, ε grows by a factor of about 3,
//! and so the noise of every aggregate shrinks by about 3. docs/choosing-epsilon.md says what each
//! level means.
use crate::error::{DpError, DpResult};

/// The levels from the most private to the least, with their ε per query.
pub const PRIVACY_LEVELS: [(&str, f64); 5] =
    [("very_high", 0.1), ("high", 0.3), ("medium", 1.0), ("low", 3.0), ("very_low", 10.0)];

/// The level used when none is chosen; its ε (1) is pg_dp's historic default.
pub const DEFAULT_LEVEL: &str = "medium";

/// The valid level names, comma-separated, for error messages.
pub fn level_names() -> String {
    PRIVACY_LEVELS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

/// The ε per query of a level. `arg` names the argument in the error, which lists the valid levels.
pub fn level_epsilon(arg: &'static str, name: &str) -> DpResult<f64> {
    PRIVACY_LEVELS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, e)| *e)
        .ok_or_else(|| DpError::invalid(arg, format!("one of {}", level_names()), format!("'{name}'")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_go_from_most_to_least_private_and_are_valid_epsilons() {
        let eps: Vec<f64> = PRIVACY_LEVELS.iter().map(|(_, e)| *e).collect();
        assert!(eps.windows(2).all(|w| w[0] < w[1]), "{eps:?}");
        for e in eps {
            assert!(crate::params::check_epsilon("epsilon", e).is_ok());
        }
        assert_eq!(level_epsilon("level", DEFAULT_LEVEL).unwrap(), 1.0);
    }

    #[test]
    fn an_unknown_level_names_the_argument_and_lists_the_valid_ones() {
        let e = level_epsilon("level", "extreme").unwrap_err().to_string();
        assert_eq!(e, "level must be one of very_high, high, medium, low, very_low, got 'extreme'");
        assert!(level_epsilon("level", "MEDIUM").is_err(), "names are exact");
    }
}
