//! The one error type of the core. The SQL layer maps each variant to a SQLSTATE.
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum DpError {
    /// A privacy parameter or bound is outside its valid range (SQLSTATE 22023).
    #[error("{arg} must be {range}, got {got}")]
    InvalidParameter { arg: &'static str, range: String, got: String },
    /// A parameter that must be fixed for one aggregate call changed between rows (SQLSTATE 22023).
    #[error("{arg} must be the same for every row of one aggregate call")]
    ParameterChanged { arg: &'static str },
    /// An input value that cannot be clamped, such as NaN (SQLSTATE 22023).
    #[error("{arg} must not be NaN")]
    NanInput { arg: &'static str },
    /// A serialized aggregate state could not be read (SQLSTATE XX001, data corrupted).
    #[error("corrupt pg_dp aggregate state: {0}")]
    CorruptState(String),
}

pub type DpResult<T> = Result<T, DpError>;

impl DpError {
    pub fn invalid(arg: &'static str, range: impl Into<String>, got: impl std::fmt::Display) -> Self {
        DpError::InvalidParameter { arg, range: range.into(), got: got.to_string() }
    }
}
