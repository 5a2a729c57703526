//! Whole-table releases (DPRP, synthetic data): checked from public information, charged once, then one scan.
//! Imports every layer but `aggregates`.
pub mod dprp;
pub mod source;
pub mod synthetic;

/// Threads a release may compute on: the backend and max_parallel_maintenance_workers, at most the
/// machine's cores (public settings only).
pub(crate) fn release_threads() -> usize {
    let workers = unsafe { pgrx::pg_sys::max_parallel_maintenance_workers }.max(0) as usize;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (1 + workers).min(cores)
}
