//! Whole-table releases: DPRP (random projection, docs/privacy/dprp.md) and private synthetic
//! microdata ([`synthetic`]: a graphical model of 1-way and 2-way marginals; [`criteria`]: the
//! acceptance criteria computed with DP and the private selection loop around them; [`synthesis`]:
//! the release from counts to rows, the loop included).
pub mod criteria;
pub mod dprp;
pub mod synthesis;
pub mod synthetic;

/// An empty vector with room for `capacity` items, or [`dprp::ReleaseFailure::OutOfMemory`]: a plain
/// allocation the system refuses would abort the whole server. Callers size it from public inputs, so
/// that whether it fails says nothing about the data.
pub fn try_vec<T>(capacity: usize) -> Result<Vec<T>, dprp::ReleaseFailure> {
    let mut v = Vec::new();
    v.try_reserve_exact(capacity).map_err(|_| dprp::ReleaseFailure::OutOfMemory)?;
    Ok(v)
}

/// `n` copies of `value`, fallibly.
pub fn try_filled<T: Clone>(n: usize, value: T) -> Result<Vec<T>, dprp::ReleaseFailure> {
    try_filled_in(n, value, n)
}

/// `n` copies of `value` in a vector with room for `capacity` (at least n) items, fallibly.
pub fn try_filled_in<T: Clone>(n: usize, value: T, capacity: usize) -> Result<Vec<T>, dprp::ReleaseFailure> {
    let mut v = try_vec(capacity.max(n))?;
    v.resize(n, value);
    Ok(v)
}

/// Blocks every signal on the calling thread: PostgreSQL's handlers must run on the backend's own
/// thread (which polls for interrupts), never on a helper thread of a release.
pub fn block_signals() {
    // SAFETY: sigfillset and pthread_sigmask only write the set and this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}
