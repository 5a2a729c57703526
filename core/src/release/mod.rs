//! Whole-table releases: DPRP (random projection, docs/privacy/dprp.md) and private synthetic
//! microdata ([`synthetic`]: a graphical model of 1-way and 2-way marginals; [`criteria`]: the
//! acceptance criteria computed with DP and the private selection loop around them; [`synthesis`]:
//! the release from counts to rows, the loop included).
pub mod criteria;
pub mod dprp;
pub mod synthesis;
pub mod synthetic;
