//! GUCs. `dp.seed` is superuser-only: a known seed removes all privacy.
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting, PostgresGucEnum};
use std::sync::atomic::{AtomicBool, Ordering};

/// ε used by a DP aggregate called without an explicit epsilon; 0 (the default) means the ε of
/// `dp.privacy_level`.
pub static DEFAULT_EPSILON: GucSetting<f64> = GucSetting::<f64>::new(0.0);

/// The named privacy levels of `pg_dp_core::accounting::levels`, in the same order.
#[derive(PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum PrivacyLevel {
    #[name = c"very_high"]
    VeryHigh,
    #[name = c"high"]
    High,
    #[name = c"medium"]
    Medium,
    #[name = c"low"]
    Low,
    #[name = c"very_low"]
    VeryLow,
}

/// The named privacy level whose ε aggregates use when called without one (and `dp.default_epsilon`
/// is 0).
pub static PRIVACY_LEVEL: GucSetting<PrivacyLevel> = GucSetting::<PrivacyLevel>::new(PrivacyLevel::Medium);
/// (ε, δ) of the DP partition selection of private GROUP BY keys, per group.
pub static GROUP_SELECTION_EPSILON: GucSetting<f64> = GucSetting::<f64>::new(1.0);
pub static GROUP_SELECTION_DELTA: GucSetting<f64> = GucSetting::<f64>::new(1e-6);
/// Seed for reproducible demonstrations; -1 (the default) means OS entropy.
pub static SEED: GucSetting<i32> = GucSetting::<i32>::new(-1);

pub fn register() {
    GucRegistry::define_float_guc_with_hooks(
        c"dp.default_epsilon",
        c"Privacy parameter epsilon used by pg_dp aggregates called without one.",
        c"Each release at this epsilon is epsilon-differentially private. Valid range 1e-9 to 1e6; 0 (the default) uses the epsilon of dp.privacy_level.",
        &DEFAULT_EPSILON,
        0.0,
        pg_dp_core::params::EPSILON_MAX,
        GucContext::Userset,
        GucFlags::default(),
        None,
        Some(replan_on_real),
        None,
    );
    // SAFETY: the assign hooks below only mark cached plans invalid; they cannot panic
    unsafe { GucRegistry::define_enum_guc_with_hooks(
        c"dp.privacy_level",
        c"Named privacy level of pg_dp aggregates called without an epsilon: very_high (0.1), high (0.3), medium (1), low (3) or very_low (10).",
        c"The epsilon per release of each level; dp.default_epsilon, when not 0, takes precedence. A level a DBA pins to a role with dp.pin_privacy_level also caps the epsilon of each of its queries.",
        &PRIVACY_LEVEL,
        GucContext::Userset,
        GucFlags::default(),
        None,
        Some(replan_on_enum),
        None,
    ) };
    GucRegistry::define_float_guc_with_hooks(
        c"dp.group_selection_epsilon",
        c"Epsilon of the DP partition selection that chooses which groups of a GROUP BY over a protected table appear.",
        c"Each group is kept with the optimal probability for (epsilon, delta)-DP given its number of privacy units; a unit in k groups costs k times. Read when a query is planned. Valid range 0.001 to 20.",
        &GROUP_SELECTION_EPSILON,
        pg_dp_core::mechanisms::partition::EPSILON_MIN,
        pg_dp_core::mechanisms::partition::EPSILON_MAX,
        GucContext::Userset,
        GucFlags::default(),
        None,
        Some(replan_on_real),
        None,
    );
    GucRegistry::define_float_guc_with_hooks(
        c"dp.group_selection_delta",
        c"Delta of the DP partition selection of groups (see dp.group_selection_epsilon).",
        c"A group of one privacy unit appears with probability at most delta. Valid range 1e-15 to 0.5.",
        &GROUP_SELECTION_DELTA,
        pg_dp_core::mechanisms::partition::DELTA_MIN,
        0.5,
        GucContext::Userset,
        GucFlags::default(),
        None,
        Some(replan_on_real),
        None,
    );
    // SAFETY: the assign hook only stores to an atomic flag; it cannot panic.
    unsafe {
        GucRegistry::define_int_guc_with_hooks(
            c"dp.seed",
            c"Seed of pg_dp's noise generator for reproducible demonstrations (superuser only); -1 uses OS entropy.",
            c"A release made with a known seed has no privacy: anyone who knows the seed can remove the noise. Setting it restarts the noise stream.",
            &SEED,
            -1,
            i32::MAX,
            GucContext::Suset,
            // hidden from non-superusers: knowing the seed is knowing the noise
            GucFlags::SUPERUSER_ONLY | GucFlags::NO_SHOW_ALL,
            None,
            Some(seed_assigned),
            None,
        );
    }
}

/// The settings read when a statement is planned (the default ε, the privacy level, the group
/// selection's ε and δ) are baked into its plan: every assignment of one marks the session's cached
/// plans invalid, so that a prepared statement (PREPARE, a driver's automatic preparation, PL/pgSQL)
/// is planned again with the new value at its next execution. The hook only sets flags.
unsafe extern "C-unwind" fn replan_on_real(_newval: f64, _extra: *mut std::ffi::c_void) {
    pgrx::pg_sys::ResetPlanCache();
}

unsafe extern "C-unwind" fn replan_on_enum(_newval: std::ffi::c_int, _extra: *mut std::ffi::c_void) {
    pgrx::pg_sys::ResetPlanCache();
}

/// Every assignment of `dp.seed` (SET, RESET, end of a SET LOCAL) restarts the noise stream.
unsafe extern "C-unwind" fn seed_assigned(_newval: std::ffi::c_int, _extra: *mut std::ffi::c_void) {
    RESEED.store(true, Ordering::Relaxed);
}

/// ε of an aggregate called without one: `dp.default_epsilon` if it is not 0, else the ε of
/// `dp.privacy_level`.
pub fn default_epsilon() -> f64 {
    let e = DEFAULT_EPSILON.get();
    if e != 0.0 {
        return e;
    }
    pg_dp_core::accounting::levels::PRIVACY_LEVELS[PRIVACY_LEVEL.get() as usize].1
}

/// True while `dp.seed` makes the noise reproducible (such releases are not cached).
pub fn seeded() -> bool {
    SEED.get() >= 0
}

/// Set when `dp.seed` is assigned: the next release builds a new generator (noise.rs).
static RESEED: AtomicBool = AtomicBool::new(false);

/// Whether `dp.seed` was assigned since the generator was last built; clears the request.
pub fn take_reseed() -> bool {
    RESEED.swap(false, Ordering::Relaxed)
}
