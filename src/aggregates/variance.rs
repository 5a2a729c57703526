//! dp_variance and dp_stddev over float8 and numeric: noisy count, centred sum and shifted sum of
//! squares with a joint per-row privacy loss (docs/privacy/variance.md).
use crate::pg::fmgr::datum_to_f64;
use crate::aggregates::agg::{final_state, float8_trans, numeric_trans};
use crate::catalog::functions::Kind;
use crate::settings::noise::with_rng;
use crate::aggregates::sum::OrRaiseNumeric;
use crate::pg::fmgr::pg_v1;
use crate::aggregates::agg::pg_v1_final;
use crate::aggregates::agg::pg_v1_trans;
use pg_dp_core::mechanisms::accum::{Acc, Params, Spec};
use pgrx::{AnyNumeric, IntoDatum};

/// The noisy variance or standard deviation (`VarianceSpec::release`, step by step so that the
/// interval of this release can be computed from its own noisy statistics).
unsafe fn release(fcinfo: pgrx::pg_sys::FunctionCallInfo, acc: &Acc) -> f64 {
    let Spec::Variance(spec) = acc.spec else { unreachable!("dp_variance state") };
    let (value, interval) = if spec.half == 0 {
        (with_rng(|rng| spec.release(rng, acc.sum, acc.sum_sq, acc.n)).value, 0.0)
    } else {
        let (n, s, q) = with_rng(|rng| spec.noisy_statistics(rng, acc.sum, acc.sum_sq, acc.n));
        let var = spec.estimate(n, s, q);
        (if spec.stddev { var.sqrt() } else { var }, spec.estimate_interval95(n, s, q))
    };
    let name = if spec.stddev { "dp_stddev" } else { "dp_variance" };
    crate::execution::recent::pending(fcinfo, name, value, &spec.describe(), Some(interval));
    value
}

pg_v1_trans!(pg_finfo_dp_variance_float8_trans, dp_variance_float8_trans,
    fast = |acc, val, isnull| { isnull || (*acc).try_add_f64(datum_to_f64(val)) },
    slow = |fcinfo| { float8_trans(fcinfo, "dp_variance", Params::variance) });
pg_v1!(pg_finfo_dp_variance_numeric_trans, dp_variance_numeric_trans, |fcinfo| { numeric_trans(fcinfo, "dp_variance", Params::variance) });
pg_v1_trans!(pg_finfo_dp_stddev_float8_trans, dp_stddev_float8_trans,
    fast = |acc, val, isnull| { isnull || (*acc).try_add_f64(datum_to_f64(val)) },
    slow = |fcinfo| { float8_trans(fcinfo, "dp_stddev", Params::stddev) });
pg_v1!(pg_finfo_dp_stddev_numeric_trans, dp_stddev_numeric_trans, |fcinfo| { numeric_trans(fcinfo, "dp_stddev", Params::stddev) });

pg_v1_final!(pg_finfo_dp_variance_float8_final, dp_variance_float8_final, |fcinfo| {
    release(fcinfo, &final_state(fcinfo, Kind::Variance)).into_datum().unwrap()
});
pg_v1_final!(pg_finfo_dp_variance_numeric_final, dp_variance_numeric_final, |fcinfo| {
    AnyNumeric::try_from(release(fcinfo, &final_state(fcinfo, Kind::Variance))).or_raise_numeric("dp_variance").into_datum().unwrap()
});
pg_v1_final!(pg_finfo_dp_stddev_float8_final, dp_stddev_float8_final, |fcinfo| {
    release(fcinfo, &final_state(fcinfo, Kind::Stddev)).into_datum().unwrap()
});
pg_v1_final!(pg_finfo_dp_stddev_numeric_final, dp_stddev_numeric_final, |fcinfo| {
    AnyNumeric::try_from(release(fcinfo, &final_state(fcinfo, Kind::Stddev))).or_raise_numeric("dp_stddev").into_datum().unwrap()
});
