//! Noise and its raw material: the ChaCha20 generator seeded from the operating system, exact
//! samplers built from uniform integers (Bernoulli, discrete Laplace, discrete Gaussian, on 32 and 64
//! bits), the power-of-two grid values are put on, and the analytic calibration of Gaussian noise.
pub mod gaussian;
pub mod grid;
pub mod rng;
pub mod sampling;
pub mod sampling64;
