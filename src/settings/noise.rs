//! The backend's noise generator: ChaCha20 from OS entropy, or from `dp.seed` when a superuser set it.
use pg_dp_core::noise::rng::{os_rng, seeded_rng, DpRng};
use std::cell::RefCell;

thread_local! {
    /// (seed the generator was made from, generator); seed -1 means OS entropy.
    static RNG: RefCell<Option<(i32, DpRng)>> = const { RefCell::new(None) };
}

/// Runs `f` with the backend's generator, rebuilt after every assignment of `dp.seed`.
///
/// The seed applies only to releases made by a superuser: a seed set for a database or a role (by a
/// superuser) must not make other roles' noise predictable.
pub fn with_rng<T>(f: impl FnOnce(&mut DpRng) -> T) -> T {
    let seed = if unsafe { pgrx::pg_sys::superuser() } { crate::settings::guc::SEED.get() } else { -1 };
    RNG.with(|cell| {
        // a release that runs SQL of the caller's (a synthetic release's constraint) holds the
        // generator: a DP query inside that SQL draws from a fresh generator from OS entropy
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return f(&mut os_rng());
        };
        let stale = crate::settings::guc::take_reseed() || !matches!(&*slot, Some((s, _)) if *s == seed);
        if stale {
            let rng = if seed >= 0 { seeded_rng(seed as u64) } else { os_rng() };
            *slot = Some((seed, rng));
        }
        f(&mut slot.as_mut().expect("rng initialised").1)
    })
}
