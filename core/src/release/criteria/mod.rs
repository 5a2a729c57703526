//! Acceptance criteria of a synthetic release, computed with DP, and private selection.
