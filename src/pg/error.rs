//! The one place where core errors become PostgreSQL errors with a SQLSTATE.
use pg_dp_core::DpError;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};

/// SQLSTATE of each core error.
pub fn sqlstate(e: &DpError) -> PgSqlErrorCode {
    match e {
        DpError::InvalidParameter { .. } | DpError::ParameterChanged { .. } | DpError::NanInput { .. } => {
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE
        }
        DpError::CorruptState(_) => PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
    }
}

/// Raises `e` as an ERROR in the name of SQL function `func`.
pub fn raise(func: &'static str, e: DpError) -> ! {
    let mut report = ErrorReport::new(sqlstate(&e), format!("{func}: {e}"), func);
    if let DpError::ParameterChanged { .. } = e {
        report = report.set_hint("pass constants or query parameters for the bounds and epsilon");
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}

/// Raises an error with an explicit SQLSTATE, message and optional hint.
pub fn raise_with(code: PgSqlErrorCode, msg: String, hint: Option<&str>) -> ! {
    let mut report = ErrorReport::new(code, msg, "pg_dp");
    if let Some(h) = hint {
        report = report.set_hint(h);
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}

/// `result.or_raise("dp_sum")`: the value, or the error raised in PostgreSQL.
pub trait OrRaise<T> {
    fn or_raise(self, func: &'static str) -> T;
}

impl<T> OrRaise<T> for Result<T, DpError> {
    #[inline]
    fn or_raise(self, func: &'static str) -> T {
        match self {
            Ok(v) => v,
            Err(e) => raise(func, e),
        }
    }
}
