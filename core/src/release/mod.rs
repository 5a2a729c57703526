//! Whole-table releases: DPRP (random projection, docs/privacy/dprp.md) and private synthetic
//! microdata ([`synthetic`]: a graphical model of 1-way and 2-way marginals; [`criteria`]: the
//! acceptance criteria computed with DP and the private selection loop around them).
pub mod criteria;
pub mod dprp;
pub mod synthetic;
