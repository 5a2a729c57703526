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

/// A uniform float in [0, 1): 53 random bits, every multiple of 2^-53 equally likely.
pub fn uniform01<R: rand::Rng + ?Sized>(rng: &mut R) -> f64 {
    (rng.random::<u64>() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}
