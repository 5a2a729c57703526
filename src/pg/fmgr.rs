//! The version-1 calling convention of C functions: the `pg_finfo` record and `pg_v1!` definitions,
//! and reading arguments and datums (a NULL where none is allowed is an error naming the argument).
use crate::pg::error::raise_with;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use std::ffi::CStr;

/// The `pg_finfo_` record that marks a C function as using the version-1 calling convention.
macro_rules! pg_finfo {
    ($finfo:ident) => {
        #[unsafe(no_mangle)]
        #[doc(hidden)]
        pub extern "C" fn $finfo() -> &'static ::pgrx::pg_sys::Pg_finfo_record {
            const V1: ::pgrx::pg_sys::Pg_finfo_record = ::pgrx::pg_sys::Pg_finfo_record { api_version: 1 };
            &V1
        }
    };
}
pub(crate) use pg_finfo;

/// Defines a PostgreSQL V1 C function `$name` (and its `pg_finfo_` record).
macro_rules! pg_v1 {
    ($finfo:ident, $name:ident, |$fc:ident| $body:block) => {
        $crate::pg::fmgr::pg_finfo!($finfo);
        #[unsafe(no_mangle)]
        #[::pgrx::pg_guard]
        pub unsafe extern "C-unwind" fn $name(fcinfo: ::pgrx::pg_sys::FunctionCallInfo) -> ::pgrx::pg_sys::Datum {
            #[inline(always)]
            unsafe fn inner($fc: ::pgrx::pg_sys::FunctionCallInfo) -> ::pgrx::pg_sys::Datum $body
            inner(fcinfo)
        }
    };
}
pub(crate) use pg_v1;

/// The `i`-th argument of the current call, or an error naming it if it is NULL.
#[inline]
pub unsafe fn required<T: FromDatum>(fcinfo: pg_sys::FunctionCallInfo, i: usize, func: &'static str, arg: &str) -> T {
    match pgrx::fcinfo::pg_getarg::<T>(fcinfo, i) {
        Some(v) => v,
        None => raise_with(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            format!("{func}: {arg} must not be NULL"),
            None,
        ),
    }
}

/// Number of SQL arguments of the current call.
#[inline]
pub unsafe fn nargs(fcinfo: pg_sys::FunctionCallInfo) -> usize {
    (*fcinfo).nargs as usize
}

/// float8 from a by-value datum (float8 is pass-by-value on 64-bit platforms).
#[inline(always)]
pub fn datum_to_f64(d: pg_sys::Datum) -> f64 {
    f64::from_bits(d.value() as u64)
}

/// Reads a parameter datum of a numeric-category type as f64.
pub unsafe fn datum_f64(d: pg_sys::Datum, typ: pg_sys::Oid, func: &'static str) -> f64 {
    match typ {
        pg_sys::FLOAT8OID => f64::from_datum(d, false).unwrap(),
        pg_sys::FLOAT4OID => f32::from_datum(d, false).unwrap() as f64,
        pg_sys::INT2OID => i16::from_datum(d, false).unwrap() as f64,
        pg_sys::INT4OID => i32::from_datum(d, false).unwrap() as f64,
        pg_sys::INT8OID => i64::from_datum(d, false).unwrap() as f64,
        pg_sys::NUMERICOID => numeric_datum_f64(d),
        _ => raise_with(PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH, format!("{func}: unexpected parameter type {typ:?}"), None),
    }
}

/// Reads an integer parameter datum as i64.
pub unsafe fn datum_i64(d: pg_sys::Datum, typ: pg_sys::Oid, func: &'static str) -> i64 {
    match typ {
        pg_sys::INT2OID => i16::from_datum(d, false).unwrap() as i64,
        pg_sys::INT4OID => i32::from_datum(d, false).unwrap() as i64,
        pg_sys::INT8OID => i64::from_datum(d, false).unwrap(),
        _ => raise_with(PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH, format!("{func}: unexpected parameter type {typ:?}"), None),
    }
}

/// numeric → float8 without ever raising: NaN stays NaN (and is refused by the caller), values
/// beyond the float8 range become ±Infinity (then clamped to the bounds), values too small become 0.
/// An out-of-range error here would depend on the data.
#[inline]
pub unsafe fn numeric_datum_f64(d: pg_sys::Datum) -> f64 {
    pgrx::direct_function_call::<f64>(pg_sys::numeric_float8_no_overflow, &[Some(d)]).unwrap()
}

/// A C string from PostgreSQL, or `default` for a null pointer.
pub unsafe fn cstr_or(p: *const std::ffi::c_char, default: &str) -> String {
    if p.is_null() {
        default.to_string()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// Returns SQL NULL from a version-1 function.
#[inline]
pub fn return_null(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is the call's own, valid for the call
    unsafe { (*fcinfo).isnull = true };
    pg_sys::Datum::from(0)
}
