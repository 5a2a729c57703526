//! dp.keep_group(value, epsilon, delta): DP partition selection of one group. It counts the group's
//! non-NULL values (one per privacy unit, in the query pg_dp writes for private GROUP BY keys) and
//! returns whether the group may appear, drawn with the optimal keep probability of
//! `pg_dp_core::mechanisms::partition` (docs/privacy/partition-selection.md). A release like the aggregates:
//! charged before the query runs, refused without its ticket.
use crate::aggregates::agg::agg_context;
use crate::catalog::functions::Kind;
use crate::query::params::{Paid, ParamValues};
use crate::pg::error::OrRaise;
use crate::settings::noise::with_rng;
use crate::pg::fmgr::pg_v1;
use crate::aggregates::agg::pg_v1_final;
use pg_dp_core::mechanisms::partition::Selection;
use pgrx::fcinfo::{pg_arg_is_null, pg_getarg_datum_raw};
use pgrx::pg_sys::Datum;

const F: &str = "dp.keep_group";

pg_v1!(pg_finfo_dp_keep_group_trans, dp_keep_group_trans, |fcinfo| {
    let n = if pg_arg_is_null(fcinfo, 0) { 0 } else { pg_getarg_datum_raw(fcinfo, 0).value() as i64 };
    let add = !pg_arg_is_null(fcinfo, 1) as i64;
    Datum::from(n.saturating_add(add))
});

pg_v1_final!(pg_finfo_dp_keep_group_final, dp_keep_group_final, |fcinfo| {
    agg_context(fcinfo, F);
    let n = if pg_arg_is_null(fcinfo, 0) { 0 } else { pg_getarg_datum_raw(fcinfo, 0).value() as i64 };
    let p = ParamValues::read(fcinfo, F);
    let paid = p.paid(Kind::KeepGroup);
    let Paid::Selection { epsilon, delta } = paid else { unreachable!("selection parameters") };
    let selection = Selection::new(f64::from_bits(epsilon), f64::from_bits(delta)).or_raise(F);
    crate::execution::tickets::check_ticket(fcinfo, F, &paid);
    Datum::from(with_rng(|rng| selection.keep(rng, n.max(0) as u64)))
});
