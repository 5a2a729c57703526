//! dp_avg over float8 and numeric: noisy centred sum / noisy count (docs/privacy/avg.md).
use super::agg::{datum_to_f64, epsilon_arg, final_state, numeric_datum_f64, required, state_for_row, EmptyParams};
use super::error::OrRaise;
use super::noise::with_rng;
use super::sum::{numeric_arg, OrRaiseNumeric};
use crate::{pg_v1, pg_v1_trans};
use pg_dp_core::accum::{Acc, Params, Spec};
use pgrx::fcinfo::{pg_arg_is_null, pg_getarg, pg_getarg_datum_raw};
use pgrx::pg_sys::Datum;
use pgrx::{AnyNumeric, IntoDatum};

const F: &str = "dp_avg";
const NAMES: &[&str] = &["lower", "upper", "epsilon"];

pg_v1_trans!(pg_finfo_dp_avg_float8_trans, dp_avg_float8_trans,
    fast = |acc, val, isnull| { isnull || (*acc).try_add_f64(datum_to_f64(val)) },
    slow = |fcinfo| {
        let acc = state_for_row(fcinfo, F, NAMES, || {
            let lower = required::<f64>(fcinfo, 2, F, "lower");
            let upper = required::<f64>(fcinfo, 3, F, "upper");
            Params::avg(lower, upper, epsilon_arg(fcinfo, 4, F))
        });
        if let Some(v) = pg_getarg::<f64>(fcinfo, 1) {
            (*acc).add_f64(v).or_raise(F);
        }
        Datum::from(acc)
    });

pg_v1!(pg_finfo_dp_avg_numeric_trans, dp_avg_numeric_trans, |fcinfo| {
    let acc = state_for_row(fcinfo, F, NAMES, || {
        let lower = numeric_arg(fcinfo, 2, "lower");
        let upper = numeric_arg(fcinfo, 3, "upper");
        Params::avg(lower, upper, epsilon_arg(fcinfo, 4, F))
    });
    if !pg_arg_is_null(fcinfo, 1) {
        (*acc).add_f64(numeric_datum_f64(pg_getarg_datum_raw(fcinfo, 1))).or_raise(F);
    }
    Datum::from(acc)
});

fn avg_empty(p: &EmptyParams) -> Params {
    unsafe { Params::avg(p.f64_at(0, "lower"), p.f64_at(1, "upper"), p.epsilon_at(2)) }
}

fn release(acc: &Acc) -> f64 {
    let Spec::Avg(spec) = acc.spec else { unreachable!("dp_avg state") };
    with_rng(|rng| spec.release(rng, acc.sum, acc.n)).value
}

pg_v1!(pg_finfo_dp_avg_float8_final, dp_avg_float8_final, |fcinfo| {
    let acc = final_state(fcinfo, F, avg_empty);
    release(&acc).into_datum().unwrap()
});

pg_v1!(pg_finfo_dp_avg_numeric_final, dp_avg_numeric_final, |fcinfo| {
    let acc = final_state(fcinfo, F, avg_empty);
    AnyNumeric::try_from(release(&acc)).or_raise_numeric(F).into_datum().unwrap()
});
