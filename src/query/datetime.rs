//! Dates and times on columns below a DP aggregate, in total forms (BI tools' time grains and
//! ranges): `date_trunc('month', ts)`, `extract(year FROM d)`, `date_part('dow', ts)`, `d + 7`,
//! `d - 7`, `d1 - d2`, `ts + interval '1 day'`, `ts - interval '1 hour'`, `ts1 - ts2`,
//! `d + interval '1 month'`.
//!
//! PostgreSQL's own forms raise an error near the ends of the date and timestamp ranges ("date out
//! of range", "timestamp out of range", "cannot subtract infinite dates"): a query could ask whether
//! a row holds such a value. Below a DP aggregate:
//! - `date_trunc(unit, timestamp[tz])` with a constant unit calls `dp.total_date_trunc_ts/_tstz`:
//!   infinities stay infinite, values within 1,001 years of the start of the timestamp range or 2
//!   days of its end give NULL (skipped), the rest PostgreSQL's own result;
//! - `extract(field FROM …)` and `date_part(field, …)` of timestamps, timestamps with time zone and
//!   dates (extract only) are PostgreSQL's own, with a constant field that was tried, while
//!   checking, on an ordinary value and on both infinities (an unknown field is an error from the
//!   text);
//! - the operators above call `dp.total_datetime`: a date ± integer saturates at ±infinity, the
//!   difference of two dates or timestamps is NULL when one is infinite, a timestamp ± interval (or
//!   date ± interval) is NULL when the result could leave the range by the interval's size (months
//!   counted as 31 days, 8 days more for time zones), the rest PostgreSQL's own result.
use crate::pg::error::{raise_with, Refusal};
use crate::pg::fmgr::pg_v1;
use pgrx::pg_sys::{self, Node, NodeTag, Oid};
use pgrx::{IntoDatum, PgSqlErrorCode};

/// Microseconds from 2000-01-01 of the first valid timestamp (4714-11-24 BC) and of the end of
/// the range (294277-01-01), as PostgreSQL defines them (MIN_TIMESTAMP, END_TIMESTAMP).
const MIN_TIMESTAMP: i64 = -211_813_488_000_000_000;
const END_TIMESTAMP: i64 = 9_223_371_331_200_000_000;
/// Days from 2000-01-01 of the first valid date and of the end of the date range.
const MIN_DATE: i64 = -2_451_545;
const END_DATE: i64 = 2_147_483_494 - 2_451_545;
const DAY_US: i128 = 86_400_000_000;
const YEAR_US: i128 = 366 * DAY_US;
/// What a time zone can move a value by: PostgreSQL accepts offsets of up to 167 hours
/// (`SET TimeZone = '<-167>+167'`), so 8 days.
const TZ_MARGIN_US: i128 = 8 * DAY_US;

/// How a function call below a DP aggregate is made total, if it is a date or time function pg_dp
/// admits: `Some(Some(f))`: it calls `f` instead; `Some(None)`: its own, now that its constant
/// first argument was tried; None: not such a function. An unknown unit or field raises its error
/// now, from the query text.
pub unsafe fn function_form(f: *mut pg_sys::FuncExpr) -> Result<Option<Option<Oid>>, Refusal> {
    let id = (*f).funcid.to_u32();
    if let Some(total) = total_cast(f) {
        return Ok(Some(Some(total)));
    }
    let (trunc, extract) = match id {
        pg_sys::F_DATE_TRUNC_TEXT_TIMESTAMP | pg_sys::F_DATE_TRUNC_TEXT_TIMESTAMPTZ => (true, false),
        pg_sys::F_EXTRACT_TEXT_TIMESTAMP
        | pg_sys::F_EXTRACT_TEXT_TIMESTAMPTZ
        | pg_sys::F_EXTRACT_TEXT_DATE
        | pg_sys::F_DATE_PART_TEXT_TIMESTAMP
        | pg_sys::F_DATE_PART_TEXT_TIMESTAMPTZ => (false, true),
        _ => return Ok(None),
    };
    let args: Vec<*mut Node> = crate::pg::nodes::list_iter((*f).args).collect();
    let what = if trunc { "the unit of date_trunc" } else { "the field of extract and date_part" };
    let unit = args.first().copied().filter(|a| (**a).type_ == NodeTag::T_Const && !(*(*a as *mut pg_sys::Const)).constisnull);
    let Some(unit) = unit else {
        return Err(Refusal::new(format!("{what} must be a literal below a DP aggregate")).hint("write it as a literal: date_trunc('month', visit_date)"));
    };
    if args.len() != 2 {
        return Ok(None);
    }
    let typ = pg_sys::exprType(args[1]);
    // try the constant on an ordinary value and on both infinities: an error comes from the text
    for sample in ["2000-01-01", "infinity", "-infinity"] {
        let v = input(typ, sample);
        let (mut len, mut byval) = (0i16, false);
        pg_sys::get_typlenbyval(typ, &mut len, &mut byval);
        let c = pg_sys::makeConst(typ, -1, pg_sys::InvalidOid, len as i32, v, false, byval);
        let call = pg_sys::copyObjectImpl(f as *const std::ffi::c_void) as *mut pg_sys::FuncExpr;
        (*call).args = crate::pg::build::ptr_list(&[unit, c as *mut Node]);
        crate::query::clock::evaluate(call as *mut Node);
    }
    if extract {
        return Ok(Some(None));
    }
    Ok(total_trunc(f).map(Some))
}

/// The total form of a cast between date and timestamp or timestamptz (implicit in `date_trunc('month',
/// visit_date)`): dates past the end of the timestamp range become infinity, and timestamps within
/// 8 days of the ends of the range (where a time zone could carry them out) the infinity of their
/// side, instead of an error.
pub unsafe fn total_cast(f: *mut pg_sys::FuncExpr) -> Option<Oid> {
    let (name, from) = match (*f).funcid.to_u32() {
        pg_sys::F_TIMESTAMP_DATE => ("total_date_to_timestamp", pg_sys::DATEOID),
        pg_sys::F_TIMESTAMPTZ_DATE => ("total_date_to_timestamptz", pg_sys::DATEOID),
        pg_sys::F_DATE_TIMESTAMP => ("total_timestamp_to_date", pg_sys::TIMESTAMPOID),
        pg_sys::F_DATE_TIMESTAMPTZ => ("total_timestamptz_to_date", pg_sys::TIMESTAMPTZOID),
        _ => return None,
    };
    crate::pg::build::function_if_exists(Some("dp"), name, &[from])
}

/// The total form of a `date_trunc(unit, timestamp[tz])` call, if it is one.
pub unsafe fn total_trunc(f: *mut pg_sys::FuncExpr) -> Option<Oid> {
    let (name, typ) = match (*f).funcid.to_u32() {
        pg_sys::F_DATE_TRUNC_TEXT_TIMESTAMP => ("total_date_trunc_ts", pg_sys::TIMESTAMPOID),
        pg_sys::F_DATE_TRUNC_TEXT_TIMESTAMPTZ => ("total_date_trunc_tstz", pg_sys::TIMESTAMPTZOID),
        _ => return None,
    };
    crate::pg::build::function_if_exists(Some("dp"), name, &[pg_sys::TEXTOID, typ])
}

unsafe fn input(typ: Oid, text: &str) -> pg_sys::Datum {
    let (mut func, mut ioparam) = (pg_sys::InvalidOid, pg_sys::InvalidOid);
    pg_sys::getTypeInputInfo(typ, &mut func, &mut ioparam);
    let c = std::ffi::CString::new(text).unwrap();
    pg_sys::OidInputFunctionCall(func, c.as_ptr() as *mut _, ioparam, -1)
}

/// The operators on dates and times pg_dp makes total: (operator, left type, right type).
unsafe fn datetime_operator(opno: Oid, nargs: usize) -> Option<(char, Oid, Oid)> {
    if nargs != 2 {
        return None;
    }
    let (name, l, r) = crate::query::total::operator(opno)?;
    let op = match name.as_str() {
        "+" => '+',
        "-" => '-',
        _ => return None,
    };
    use pg_sys::{DATEOID as D, INT4OID as I, INTERVALOID as V, TIMESTAMPOID as T, TIMESTAMPTZOID as Z};
    let ok = matches!(
        (op, l, r),
        ('+' | '-', D, I) | ('+', I, D) | ('-', D, D) | ('+' | '-', T | Z | D, V) | ('+', V, T | Z | D) | ('-', T, T) | ('-', Z, Z)
    );
    ok.then_some((op, l, r))
}

/// The total function a date or time operator node below a DP aggregate calls instead of its own.
pub unsafe fn operator_form(op: *mut pg_sys::OpExpr) -> Option<Oid> {
    datetime_operator((*op).opno, crate::pg::nodes::list_len((*op).args))?;
    let name = match (*op).opresulttype {
        pg_sys::DATEOID => "total_date",
        pg_sys::INT4OID => "total_date_diff",
        pg_sys::TIMESTAMPOID => "total_timestamp",
        pg_sys::TIMESTAMPTZOID => "total_timestamptz",
        pg_sys::INTERVALOID => "total_interval",
        _ => return None,
    };
    crate::pg::build::function_if_exists(Some("dp"), name, &[pg_sys::ANYOID, pg_sys::ANYOID])
}

use crate::pg::fmgr::return_null as null;

/// A bound on how far an interval moves a timestamp, in microseconds (months as 31 days, plus 2
/// days for time zones).
unsafe fn reach(iv: pg_sys::Datum) -> i128 {
    let i = iv.cast_mut_ptr::<pg_sys::Interval>();
    ((*i).month as i128).abs() * 31 * DAY_US + ((*i).day as i128).abs() * DAY_US + ((*i).time as i128).abs() + TZ_MARGIN_US
}

fn ts_finite(t: i64) -> bool {
    t != i64::MIN && t != i64::MAX
}

fn date_finite(d: i32) -> bool {
    d != i32::MIN && d != i32::MAX
}

/// A timestamp that the interval cannot move out of the range.
fn ts_safe(t: i64, reach: i128) -> bool {
    (t as i128) - reach > MIN_TIMESTAMP as i128 && (t as i128) + reach < END_TIMESTAMP as i128
}

// dp.total_date_trunc_ts(text, timestamp) and dp.total_date_trunc_tstz(text, timestamptz)
pg_v1!(pg_finfo_dp_total_date_trunc, dp_total_date_trunc, |fcinfo| {
    let args = (*fcinfo).args.as_slice(2);
    if args[0].isnull || args[1].isnull {
        return null(fcinfo);
    }
    let t = args[1].value.value() as i64;
    if !ts_finite(t) {
        return args[1].value;
    }
    // truncation moves a value back by at most a millennium (and a time zone's offset)
    if (t as i128) < MIN_TIMESTAMP as i128 + 1001 * YEAR_US || (t as i128) > END_TIMESTAMP as i128 - TZ_MARGIN_US {
        return null(fcinfo);
    }
    let ty = pg_sys::get_fn_expr_argtype((*fcinfo).flinfo, 1);
    let f = if ty == pg_sys::TIMESTAMPTZOID { pg_sys::timestamptz_trunc } else { pg_sys::timestamp_trunc };
    pgrx::direct_function_call_as_datum(f, &[Some(args[0].value), Some(args[1].value)]).unwrap_or_else(|| null(fcinfo))
});

// dp.total_date/_date_diff/_timestamp/_timestamptz/_interval("any", "any"): the operator and types
// are read from the node.
pg_v1!(pg_finfo_dp_total_datetime, dp_total_datetime, |fcinfo| {
    let expr = (*(*fcinfo).flinfo).fn_expr;
    let site = if !expr.is_null() && (*expr).type_ == NodeTag::T_OpExpr { datetime_operator((*(expr as *mut pg_sys::OpExpr)).opno, 2) } else { None };
    let Some((op, l, r)) = site else {
        raise_with(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            "dp.total_* functions are called by pg_dp in place of date and time operators, not directly".into(),
            None,
        )
    };
    let args = (*fcinfo).args.as_slice(2);
    if args[0].isnull || args[1].isnull {
        return null(fcinfo);
    }
    let (a, b) = (args[0].value, args[1].value);
    use pg_sys::{DATEOID as D, INT4OID as I, INTERVALOID as V, TIMESTAMPOID as T, TIMESTAMPTZOID as Z};
    match (op, l, r) {
        // date ± integer: saturates at ±infinity
        ('+' | '-', D, I) | ('+', I, D) => {
            let (d, n) = if l == D { (a.value() as i32, b.value() as i32 as i64) } else { (b.value() as i32, a.value() as i32 as i64) };
            if !date_finite(d) {
                return (d).into_datum().unwrap();
            }
            let res = d as i64 + if op == '-' { -n } else { n };
            let out = if res < MIN_DATE { i32::MIN } else if res >= END_DATE { i32::MAX } else { res as i32 };
            pg_sys::Datum::from(out as i64 as usize)
        }
        // date − date: NULL when one is infinite
        ('-', D, D) => {
            let (x, y) = (a.value() as i32, b.value() as i32);
            if !date_finite(x) || !date_finite(y) {
                return null(fcinfo);
            }
            ((x as i64 - y as i64) as i32).into_datum().unwrap()
        }
        // timestamp − timestamp: NULL when one is infinite
        ('-', T, T) | ('-', Z, Z) => {
            if !ts_finite(a.value() as i64) || !ts_finite(b.value() as i64) {
                return null(fcinfo);
            }
            pgrx::direct_function_call_as_datum(pg_sys::timestamp_mi, &[Some(a), Some(b)]).unwrap_or_else(|| null(fcinfo))
        }
        // timestamp (or date) ± interval
        _ => {
            let (t, iv, tt) = if l == V { (b, a, r) } else { (a, b, l) };
            let finite = if tt == D { date_finite(t.value() as i32) } else { ts_finite(t.value() as i64) };
            let safe = if !finite {
                true
            } else if tt == D {
                let days = t.value() as i32 as i128;
                ts_safe((days * DAY_US).clamp(i64::MIN as i128 + 1, i64::MAX as i128 - 1) as i64, reach(iv))
                    && days < 106_751_983
                    && days >= MIN_DATE as i128
            } else {
                ts_safe(t.value() as i64, reach(iv))
            };
            if !safe {
                return null(fcinfo);
            }
            let f = match (tt, op) {
                (D, '+') => pg_sys::date_pl_interval,
                (D, _) => pg_sys::date_mi_interval,
                (Z, '+') => pg_sys::timestamptz_pl_interval,
                (Z, _) => pg_sys::timestamptz_mi_interval,
                (_, '+') => pg_sys::timestamp_pl_interval,
                _ => pg_sys::timestamp_mi_interval,
            };
            pgrx::direct_function_call_as_datum(f, &[Some(t), Some(iv)]).unwrap_or_else(|| null(fcinfo))
        }
    }
});

/// Days from 2000-01-01 of the end of the timestamp range (294277-01-01).
const END_TIMESTAMP_DAYS: i64 = 109_203_528 - 2_451_545;

// dp.total_date_to_timestamp(date) and dp.total_date_to_timestamptz(date): infinity past the ends
// of the timestamp range (within 8 days of them, for time zones), else PostgreSQL's own cast
pg_v1!(pg_finfo_dp_total_date_to_timestamp, dp_total_date_to_timestamp, |fcinfo| {
    let args = (*fcinfo).args.as_slice(1);
    if args[0].isnull {
        return null(fcinfo);
    }
    let d = args[0].value.value() as i32;
    if d == i32::MIN || (d as i64) < MIN_DATE + 8 {
        return pg_sys::Datum::from(i64::MIN as usize);
    }
    if d == i32::MAX || (d as i64) > END_TIMESTAMP_DAYS - 8 {
        return pg_sys::Datum::from(i64::MAX as usize);
    }
    let tz = pg_sys::get_func_rettype((*(*fcinfo).flinfo).fn_oid) == pg_sys::TIMESTAMPTZOID;
    let f = if tz { pg_sys::date_timestamptz } else { pg_sys::date_timestamp };
    pgrx::direct_function_call_as_datum(f, &[Some(args[0].value)]).unwrap_or_else(|| null(fcinfo))
});

// dp.total_timestamp_to_date(timestamp) and dp.total_timestamptz_to_date(timestamptz)
pg_v1!(pg_finfo_dp_total_timestamp_to_date, dp_total_timestamp_to_date, |fcinfo| {
    let args = (*fcinfo).args.as_slice(1);
    if args[0].isnull {
        return null(fcinfo);
    }
    let t = args[0].value.value() as i64;
    if t == i64::MIN || (t as i128) < MIN_TIMESTAMP as i128 + TZ_MARGIN_US {
        return pg_sys::Datum::from(i32::MIN as i64 as usize);
    }
    if t == i64::MAX || (t as i128) > END_TIMESTAMP as i128 - TZ_MARGIN_US {
        return pg_sys::Datum::from(i32::MAX as i64 as usize);
    }
    let tz = pg_sys::get_fn_expr_argtype((*fcinfo).flinfo, 0) == pg_sys::TIMESTAMPTZOID;
    let f = if tz { pg_sys::timestamptz_date } else { pg_sys::timestamp_date };
    pgrx::direct_function_call_as_datum(f, &[Some(args[0].value)]).unwrap_or_else(|| null(fcinfo))
});
