//! dp_avg over float8 and numeric: noisy centred sum / noisy count (docs/privacy/avg.md).
use crate::pg::fmgr::datum_to_f64;
use crate::aggregates::agg::{final_state, final_state_public_count, float8_trans, numeric_trans, public_count};
use crate::catalog::functions::Kind;
use crate::pg::error::OrRaise;
use crate::settings::noise::with_rng;
use crate::execution::recent;
use crate::aggregates::sum::OrRaiseNumeric;
use crate::pg::fmgr::pg_v1;
use crate::aggregates::agg::pg_v1_final;
use crate::aggregates::agg::pg_v1_trans;
use pg_dp_core::mechanisms::accum::{Acc, Params, Spec};
use pgrx::{AnyNumeric, IntoDatum};

const F: &str = "dp_avg";

pg_v1_trans!(pg_finfo_dp_avg_float8_trans, dp_avg_float8_trans,
    fast = |acc, val, isnull| { isnull || (*acc).try_add_f64(datum_to_f64(val)) },
    slow = |fcinfo| { float8_trans(fcinfo, F, Params::avg) });

pg_v1!(pg_finfo_dp_avg_numeric_trans, dp_avg_numeric_trans, |fcinfo| { numeric_trans(fcinfo, F, Params::avg) });

/// The noisy mean (`AvgSpec::release`, step by step so that the interval of this release can be
/// computed from its own noisy statistics).
unsafe fn release(fcinfo: pgrx::pg_sys::FunctionCallInfo, acc: &Acc) -> f64 {
    let Spec::Avg(spec) = acc.spec else { unreachable!("dp_avg state") };
    let (value, interval) = if spec.sensitivity_steps() == 0 {
        (with_rng(|rng| spec.release(rng, acc.sum, acc.n)).value, 0.0)
    } else {
        let (s, n) = with_rng(|rng| spec.noisy_statistics(rng, acc.sum, acc.n));
        (spec.estimate(s, n), spec.mean_interval95(s, n))
    };
    recent::pending(fcinfo, F, value, &spec.describe(), Some(interval));
    value
}

/// The noisy mean with a public count: all of ε on the centred sum, divided by the count.
unsafe fn release_public_count(fcinfo: pgrx::pg_sys::FunctionCallInfo, count: i64) -> f64 {
    let acc = final_state_public_count(fcinfo, count);
    let Spec::Avg(spec) = acc.spec else { unreachable!("dp_avg state") };
    let spec = spec.with_public_count(count).or_raise(F);
    let r = with_rng(|rng| spec.release(rng, acc.sum, acc.n));
    recent::pending(fcinfo, F, r.value, &r.info, Some(spec.mean_interval95()));
    r.value
}

/// dp_avg's value: with the caller's public count, or from the noisy count.
unsafe fn value(fcinfo: pgrx::pg_sys::FunctionCallInfo) -> f64 {
    match public_count(fcinfo, F) {
        Some(count) => release_public_count(fcinfo, count),
        None => release(fcinfo, &final_state(fcinfo, Kind::Avg)),
    }
}

pg_v1_final!(pg_finfo_dp_avg_float8_final, dp_avg_float8_final, |fcinfo| { value(fcinfo).into_datum().unwrap() });

pg_v1_final!(pg_finfo_dp_avg_numeric_final, dp_avg_numeric_final, |fcinfo| {
    AnyNumeric::try_from(value(fcinfo)).or_raise_numeric(F).into_datum().unwrap()
});
