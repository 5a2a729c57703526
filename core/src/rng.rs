//! The only source of randomness in pg_dp: ChaCha20, seeded from the operating system.
use rand::SeedableRng;
pub use rand_chacha::ChaCha20Rng as DpRng;

/// A fresh generator seeded from the OS entropy source (`getrandom`).
pub fn os_rng() -> DpRng {
    DpRng::from_os_rng()
}

/// A deterministic generator, for reproducible demonstrations only: anyone who knows the seed can
/// subtract the noise, so a seeded release has no privacy at all.
pub fn seeded_rng(seed: u64) -> DpRng {
    DpRng::seed_from_u64(seed)
}
