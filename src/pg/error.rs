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

/// The five-character SQLSTATE of an error code, e.g. "22012".
pub fn sqlstate_text(code: PgSqlErrorCode) -> String {
    let mut v = code as isize as u32;
    let mut s = String::with_capacity(5);
    for _ in 0..5 {
        s.push(char::from(((v & 0x3F) as u8) + b'0'));
        v >>= 6;
    }
    s
}

/// The error code of a five-character SQLSTATE (digits and upper-case letters), if it is one.
pub fn code_of_text(text: &str) -> Option<PgSqlErrorCode> {
    let b = text.as_bytes();
    if b.len() != 5 || !b.iter().all(|c| c.is_ascii_digit() || c.is_ascii_uppercase()) {
        return None;
    }
    let packed = b.iter().enumerate().fold(0i32, |acc, (i, c)| acc | ((((*c - b'0') & 0x3F) as i32) << (6 * i)));
    Some(PgSqlErrorCode::from(packed))
}

/// Logs a WARNING (to the client and the server log) with a detail line.
pub fn warn_with(msg: String, detail: String) {
    ErrorReport::new(PgSqlErrorCode::ERRCODE_WARNING, msg, "pg_dp").set_detail(detail).report(PgLogLevel::WARNING);
}

/// Why a statement is refused: the message and an optional hint. Raised with SQLSTATE 42501.
#[derive(Debug)]
pub struct Refusal {
    pub message: String,
    pub hint: Option<String>,
}

impl Refusal {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Refusal { message: message.into(), hint: None }
    }

    /// The refusal of a query nested deeper than pg_dp's checks can follow with the stack that
    /// `max_stack_depth` leaves them. Checked before the stack runs out, so that no error is ever
    /// raised deep inside the walk (one would be raised again at every level on its way out).
    pub fn too_deep() -> Self {
        Refusal::new("query nested too deeply for pg_dp's query check")
            .hint("write the condition or expression with fewer nested levels")
    }
    pub(crate) fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

pub type Check<T> = Result<T, Refusal>;
