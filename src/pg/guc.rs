//! GUCs. `dp.seed` is superuser-only: a known seed removes all privacy.
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

/// ε used by a DP aggregate called without an explicit epsilon.
pub static DEFAULT_EPSILON: GucSetting<f64> = GucSetting::<f64>::new(1.0);
/// Seed for reproducible demonstrations; -1 (the default) means OS entropy.
pub static SEED: GucSetting<i32> = GucSetting::<i32>::new(-1);

pub fn register() {
    GucRegistry::define_float_guc(
        c"dp.default_epsilon",
        c"Privacy parameter epsilon used by pg_dp aggregates called without one.",
        c"Each release at this epsilon is epsilon-differentially private. Valid range 1e-9 to 1e6.",
        &DEFAULT_EPSILON,
        pg_dp_core::params::EPSILON_MIN,
        pg_dp_core::params::EPSILON_MAX,
        GucContext::Userset,
        GucFlags::default(),
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

/// Every assignment of `dp.seed` (SET, RESET, end of a SET LOCAL) restarts the noise stream.
unsafe extern "C-unwind" fn seed_assigned(_newval: std::ffi::c_int, _extra: *mut std::ffi::c_void) {
    super::noise::request_reseed();
}

pub fn default_epsilon() -> f64 {
    DEFAULT_EPSILON.get()
}
