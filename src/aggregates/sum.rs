//! dp_sum over int2/int4/int8 (exact integer result), float8 and numeric (grid result).
use crate::pg::fmgr::{datum_to_f64, required};
use crate::aggregates::agg::{epsilon_arg, final_state, float8_trans, numeric_trans, state_for_row};
use crate::catalog::functions::Kind;
use crate::pg::error::OrRaise;
use crate::settings::noise::with_rng;
use crate::pg::fmgr::pg_v1;
use crate::aggregates::agg::pg_v1_final;
use crate::aggregates::agg::pg_v1_trans;
use pg_dp_core::mechanisms::accum::{Acc, Params, Spec};
use pgrx::fcinfo::pg_getarg;
use pgrx::pg_sys::Datum;
use pgrx::{AnyNumeric, IntoDatum};

const F: &str = "dp_sum";
use crate::catalog::functions::BOUNDED_NAMES as NAMES;

macro_rules! int_sum_trans {
    ($finfo:ident, $name:ident, $t:ty) => {
        pg_v1_trans!($finfo, $name,
            fast = |acc, val, isnull| { isnull || (*acc).try_add_i64(val.value() as $t as i64) },
            slow = |fcinfo| {
                let acc = state_for_row(fcinfo, F, NAMES, || {
                    let lower = required::<$t>(fcinfo, 2, F, "lower") as i64;
                    let upper = required::<$t>(fcinfo, 3, F, "upper") as i64;
                    Params::int_sum(lower, upper, epsilon_arg(fcinfo, 4, F))
                });
                if let Some(v) = pg_getarg::<$t>(fcinfo, 1) {
                    (*acc).add_i64(v as i64).or_raise(F);
                }
                Datum::from(acc)
            });
    };
}

int_sum_trans!(pg_finfo_dp_sum_int2_trans, dp_sum_int2_trans, i16);
int_sum_trans!(pg_finfo_dp_sum_int4_trans, dp_sum_int4_trans, i32);
int_sum_trans!(pg_finfo_dp_sum_int8_trans, dp_sum_int8_trans, i64);

pg_v1_trans!(pg_finfo_dp_sum_float8_trans, dp_sum_float8_trans,
    fast = |acc, val, isnull| { isnull || (*acc).try_add_f64(datum_to_f64(val)) },
    slow = |fcinfo| { float8_trans(fcinfo, F, Params::float_sum) });

pg_v1!(pg_finfo_dp_sum_numeric_trans, dp_sum_numeric_trans, |fcinfo| { numeric_trans(fcinfo, F, Params::float_sum) });

/// The noisy integer sum of an integer accumulator.
unsafe fn release_int(fcinfo: pgrx::pg_sys::FunctionCallInfo, acc: &Acc) -> i128 {
    let Spec::IntSum(spec) = acc.spec else { unreachable!("integer dp_sum state") };
    let r = with_rng(|rng| spec.release(rng, acc.sum));
    crate::execution::recent::pending(fcinfo, F, r.value as f64, &r.info, r.info.interval95);
    r.value
}

/// The noisy real sum of a grid accumulator.
unsafe fn release_float(fcinfo: pgrx::pg_sys::FunctionCallInfo, acc: &Acc) -> f64 {
    let Spec::FloatSum(spec) = acc.spec else { unreachable!("real dp_sum state") };
    let r = with_rng(|rng| spec.release(rng, acc.sum));
    crate::execution::recent::pending(fcinfo, F, r.value, &r.info, r.info.interval95);
    r.value
}

// int2/int4 → int8 (saturating at the int8 range: post-processing of the noisy value)
pg_v1_final!(pg_finfo_dp_sum_int_final, dp_sum_int_final, |fcinfo| {
    let acc = final_state(fcinfo, Kind::IntSum);
    let v = release_int(fcinfo, &acc).clamp(i64::MIN as i128, i64::MAX as i128) as i64;
    v.into_datum().unwrap()
});

// int8 → numeric (the exact i128 result does not fit int8 in general)
pg_v1_final!(pg_finfo_dp_sum_int8_final, dp_sum_int8_final, |fcinfo| {
    let acc = final_state(fcinfo, Kind::IntSum);
    AnyNumeric::from(release_int(fcinfo, &acc)).into_datum().unwrap()
});

pg_v1_final!(pg_finfo_dp_sum_float8_final, dp_sum_float8_final, |fcinfo| {
    let acc = final_state(fcinfo, Kind::FloatSum);
    release_float(fcinfo, &acc).into_datum().unwrap()
});

pg_v1_final!(pg_finfo_dp_sum_numeric_final, dp_sum_numeric_final, |fcinfo| {
    let acc = final_state(fcinfo, Kind::FloatSum);
    AnyNumeric::try_from(release_float(fcinfo, &acc)).or_raise_numeric(F).into_datum().unwrap()
});

pub(crate) trait OrRaiseNumeric {
    fn or_raise_numeric(self, func: &'static str) -> AnyNumeric;
}

impl<E: std::fmt::Display> OrRaiseNumeric for Result<AnyNumeric, E> {
    fn or_raise_numeric(self, func: &'static str) -> AnyNumeric {
        self.unwrap_or_else(|e| {
            crate::pg::error::raise_with(
                pgrx::PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                format!("{func}: cannot convert result to numeric: {e}"),
                None,
            )
        })
    }
}
