//! Named privacy levels in SQL: `dp.privacy_level_epsilon(level)` and `dp.privacy_level_names()`,
//! from the one mapping in `pg_dp_core::accounting::levels`. The session setting is `dp.privacy_level`
//! (guc.rs); the per-role pin is checked by the debit (budget/debit.rs).
use crate::pg::error::OrRaise;
use crate::pg::fmgr::pg_v1;
use pg_dp_core::accounting::levels::{level_epsilon, PRIVACY_LEVELS};
use pgrx::IntoDatum;

pg_v1!(pg_finfo_dp_privacy_level_epsilon, dp_privacy_level_epsilon, |fcinfo| {
    let name = crate::pg::fmgr::required::<String>(fcinfo, 0, "dp.privacy_level_epsilon", "level");
    level_epsilon("level", &name).or_raise("dp.privacy_level_epsilon").into_datum().unwrap()
});

pg_v1!(pg_finfo_dp_privacy_level_names, dp_privacy_level_names, |_fcinfo| {
    PRIVACY_LEVELS.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>().into_datum().unwrap()
});
