//! dp_count(*), dp_count(value), dp_count(value, epsilon).
use crate::aggregates::agg::{epsilon_arg, final_state, state_for_row};
use crate::catalog::functions::Kind;
use crate::settings::guc::default_epsilon;
use crate::settings::noise::with_rng;
use crate::aggregates::agg::pg_v1_final;
use crate::aggregates::agg::pg_v1_trans;
use pg_dp_core::mechanisms::accum::{Params, Spec};
use pgrx::fcinfo::pg_arg_is_null;
use pgrx::pg_sys::Datum;
use pgrx::IntoDatum;

const F: &str = "dp_count";

pg_v1_trans!(pg_finfo_dp_count_star_trans, dp_count_star_trans,
    fast = |acc, _val, _isnull| {
        (*acc).add(0);
        true
    },
    slow = |fcinfo| {
        let acc = state_for_row(fcinfo, F, &[], || Params::count(default_epsilon()));
        (*acc).add(0);
        Datum::from(acc)
    });

pg_v1_trans!(pg_finfo_dp_count_trans, dp_count_trans,
    fast = |acc, _val, isnull| {
        if !isnull {
            (*acc).add(0);
        }
        true
    },
    slow = |fcinfo| {
        let acc = state_for_row(fcinfo, F, Kind::Count.param_names(), || Params::count(epsilon_arg(fcinfo, 2, F)));
        if !pg_arg_is_null(fcinfo, 1) {
            (*acc).add(0);
        }
        Datum::from(acc)
    });

pg_v1_final!(pg_finfo_dp_count_final, dp_count_final, |fcinfo| {
    let acc = final_state(fcinfo, Kind::Count);
    let Spec::Count(spec) = acc.spec else { unreachable!("dp_count state") };
    let r = with_rng(|rng| spec.release(rng, acc.n));
    crate::execution::recent::pending(fcinfo, "dp_count", r.value as f64, &r.info, r.info.interval95);
    r.value.into_datum().unwrap()
});
