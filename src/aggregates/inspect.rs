//! Inspection functions for DBAs and teaching: the local and smooth sensitivity of a percentile of
//! an array. They return exact, data-dependent values, so they are not granted to PUBLIC.
use crate::pg::error::{raise_with, OrRaise};
use crate::pg::fmgr::pg_v1;
use pg_dp_core::mechanisms::smooth::{check_beta, check_p, local_sensitivity, ls_table, prepare_sorted, smooth_sensitivity};
use pgrx::fcinfo::pg_getarg;
use pgrx::pg_sys;
use pgrx::{IntoDatum, PgSqlErrorCode};

const F: &str = "pg_dp sensitivity inspection";

/// (sorted clamped values, p, lower, upper) from arguments 0..=3; NULL array elements are skipped.
unsafe fn args(fcinfo: pg_sys::FunctionCallInfo) -> (Vec<f64>, f64, f64, f64) {
    let values: Vec<Option<f64>> = pg_getarg(fcinfo, 0).unwrap_or_default();
    let p = crate::pg::fmgr::required::<f64>(fcinfo, 1, F, "p");
    let lower = crate::pg::fmgr::required::<f64>(fcinfo, 2, F, "lower");
    let upper = crate::pg::fmgr::required::<f64>(fcinfo, 3, F, "upper");
    let p = check_p(p).or_raise(F);
    let sorted = prepare_sorted(values.into_iter().flatten(), lower, upper).or_raise(F);
    (sorted, p, lower, upper)
}

pg_v1!(pg_finfo_dp_local_sensitivity_percentile, dp_local_sensitivity_percentile, |fcinfo| {
    let (v, p, l, u) = args(fcinfo);
    local_sensitivity(&v, p, l, u).into_datum().unwrap()
});

pg_v1!(pg_finfo_dp_smooth_sensitivity_percentile, dp_smooth_sensitivity_percentile, |fcinfo| {
    let (v, p, l, u) = args(fcinfo);
    let beta = check_beta(crate::pg::fmgr::required::<f64>(fcinfo, 4, F, "beta")).or_raise(F);
    smooth_sensitivity(&v, p, l, u, beta).into_datum().unwrap()
});

pg_v1!(pg_finfo_dp_local_sensitivity_array, dp_local_sensitivity_array, |fcinfo| {
    let (v, p, l, u) = args(fcinfo);
    let kmax = crate::pg::fmgr::required::<i32>(fcinfo, 4, F, "kmax");
    if !(0..=100_000).contains(&kmax) {
        raise_with(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("{F}: kmax must be between 0 and 100000, got {kmax}"),
            None,
        );
    }
    ls_table(&v, p, l, u, kmax as usize).into_datum().unwrap()
});
