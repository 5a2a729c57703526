//! Total expressions: the functions and operators that cannot raise an error for any stored value.
//!
//! Below a DP aggregate (in WHERE, ON, FILTER, GROUP BY, and the aggregated value) the grammar
//! admits only these. An error raised there would depend on the data (for example
//! `1/(CASE WHEN name = 'Bob' AND income > 50000 THEN 0 ELSE 1 END)` answers a yes/no question about
//! one person, whatever ε the query pays), so anything that can fail for some stored value is left
//! out. Where it was unclear whether a function can fail, it was left out.
//!
//! The list (docs/security.md has the same list for users):
//! - comparisons `=`, `<>`, `<`, `<=`, `>`, `>=` (also in `IN (...)`, `= ANY(...)`, `BETWEEN`,
//!   `IS [NOT] DISTINCT FROM`, `NULLIF`, `GREATEST`, `LEAST`, simple `CASE`) between two values of
//!   the comparable types [`COMPARABLE_TYPES`], built-in operators only;
//! - `LIKE`, `NOT LIKE`, `ILIKE`, `NOT ILIKE` on text, with a literal pattern that does not end in
//!   an escape character, under a deterministic collation;
//! - integer `/` by a literal other than 0 and -1, and integer `%` by a literal other than 0
//!   (`int2`, `int4`, `int8`, mixed widths too): for grouping values into buckets;
//! - every other `+ - * / %` on integers, floats and numeric, made total (arithmetic.rs): saturated,
//!   ±Infinity, NULL for a division by 0;
//! - the casts in [`TOTAL_CASTS`] (widening numeric casts, bool ↔ int4, char/name → text), casts
//!   that only relabel a type (varchar → text), and output casts to text from the comparable types;
//! - `CASE`, `COALESCE`, `AND`, `OR`, `NOT`, `IS [NOT] NULL`, `IS [NOT] TRUE/FALSE/UNKNOWN`.
//!
//! PostgreSQL's own arithmetic is not admitted: `+`, `-` and `*` can overflow for integers and
//! numerics, float division underflows (`5e-324 / 3.0` raises an error), and `numeric` → `float8`
//! fails above 1.8e308; below a DP aggregate the operators call pg_dp's total functions instead. The in-database test `every_total_expression_survives_extreme_values`
//! runs every admitted cast and operator on ±max, ±Infinity, NaN, NULL and empty values.
use pgrx::pg_sys::{self, Oid};
use std::ffi::CStr;

/// One row of the totality table: a node kind the grammar admits below a DP aggregate, every way
/// it could fail at run time, and why none of them can happen for a stored value (or the guard
/// that refuses the forms where one could). docs/security.md prints the same table, and the
/// in-database test `the_failure_mode_table_is_in_the_docs` keeps the two equal; the generator
/// (tests/client/test_totality.py) and sqlsmith try it with every value of every type.
pub struct FailureModes {
    pub node: &'static str,
    pub could_fail_by: &'static str,
    pub why_it_cannot: &'static str,
}

pub const FAILURE_MODES: &[FailureModes] = &[
    FailureModes {
        node: "column of a table in FROM (Var)",
        could_fail_by: "detoasting, a dropped column, a system column, a whole-row value",
        why_it_cannot: "a stored value is read as stored; system columns and whole-row references are refused; stored text is valid in the database encoding",
    },
    FailureModes {
        node: "literal, bind parameter $n",
        could_fail_by: "input syntax, out of range; a value so large that an operation on it runs out of memory or time on the rows that reach it",
        why_it_cannot: "a literal is converted while parsing and a parameter when bound: the error depends on the query text; both are at most 64 kB (MAX_CONSTANT_BYTES, checked while checking and when the parameters are bound)",
    },
    FailureModes {
        node: "constant expression",
        could_fail_by: "anything its functions raise (1/0, a narrowing cast); a huge result (repeat('x', 500000000))",
        why_it_cannot: "only immutable built-in functions over literals, folded while checking as the planner folds them: the error depends on the query text; the result is at most 64 kB",
    },
    FailureModes {
        node: "binary-compatible cast (RelabelType), COLLATE",
        could_fail_by: "nothing runs",
        why_it_cannot: "it only relabels the type or names the collation",
    },
    FailureModes {
        node: "widening cast (TOTAL_CASTS)",
        could_fail_by: "overflow, typmod, invalid input",
        why_it_cannot: "every value of the source type has an image: integer to wider integer, numeric or float (rounding, never an error), real to double precision, floats to numeric (NaN and ±Infinity exist in numeric), integer and boolean, character and name to text",
    },
    FailureModes {
        node: "cast to text (CoerceViaIO)",
        could_fail_by: "the output function, the session's time zone, DateStyle or extra_float_digits",
        why_it_cannot: "only from the comparable types, whose output functions are total for every stored value (NaN, ±Infinity, infinite dates); settings change the text, never raise",
    },
    FailureModes {
        node: "arithmetic + - * / % on integers, floats and numeric (made total)",
        could_fail_by: "integer overflow (including the smallest integer divided by -1 and negated), float overflow and underflow, numeric overflow, division by zero",
        why_it_cannot: "the operator node calls pg_dp's total function of its type instead of its own (dp.total_int2 … dp.total_numeric): integers saturate at their type's range, floats follow IEEE (overflow gives ±Infinity, clamped by the aggregate like any value), numeric overflow gives ±Infinity, division or remainder by 0 gives NULL (skipped); not over Citus tables, whose workers run PostgreSQL's own operators",
    },
    FailureModes {
        node: "clock expression: current_date, now(), to_date('…', '…'), date_trunc('month', now()) (column-free, stable)",
        could_fail_by: "anything its functions raise (an invalid format); a value that changes with time",
        why_it_cannot: "evaluated once, before the level is checked, into a constant: its errors come from the text and the clock, never from the rows that reach it; the plan holds for one transaction (it depends on dp.clock, whose invalidation each execution queues)",
    },
    FailureModes {
        node: "date_trunc with a literal unit (made total)",
        could_fail_by: "an unknown unit; a result before the start of the timestamp range (4714 BC truncated to its millennium); time zone conversion at the ends of the range",
        why_it_cannot: "the unit is a literal, tried while checking on an ordinary value and both infinities; the node calls dp.total_date_trunc_ts/_tstz: infinities stay, values within 1,001 years of the start of the range or 8 days of its end give NULL (skipped)",
    },
    FailureModes {
        node: "extract, date_part with a literal field (timestamp, timestamptz; extract of date)",
        could_fail_by: "a field the type does not support; a field not defined for infinite values",
        why_it_cannot: "the field is a literal, tried while checking on an ordinary value and on both infinities; for finite values every supported field has a value; date_part of a date (an inlined cast to timestamp that fails past 294276 AD) is refused",
    },
    FailureModes {
        node: "date ± integer, date − date, timestamp ± interval, date ± interval, timestamp − timestamp, casts between date and timestamp[tz] (made total)",
        could_fail_by: "date out of range, timestamp out of range, subtraction of infinite values",
        why_it_cannot: "the node calls dp.total_date, dp.total_date_diff, dp.total_timestamp(tz) or dp.total_interval: a date ± integer saturates at ±infinity, a difference with an infinite value is NULL, a timestamp ± interval that could leave the range by the interval's size (months as 31 days, 8 days more for time zones) is NULL; a cast between date and timestamp[tz] gives ±infinity past the ends of the timestamp range (8 days of margin for time zones: PostgreSQL accepts offsets of up to 167 hours); the rest is PostgreSQL's own result",
    },
    FailureModes {
        node: "integer / and % by a literal k",
        could_fail_by: "division by zero, the smallest integer divided by -1",
        why_it_cannot: "k is a literal other than 0, and other than -1 for /",
    },
    FailureModes {
        node: "comparison = <> < <= > >= (also in BETWEEN, simple CASE)",
        could_fail_by: "an undetermined collation (two implicit collations in conflict), overflow converting date, timestamp and timestamptz to one another, NaN, time zones",
        why_it_cannot: "built-in operators of the comparable types only; a comparison of collatable values must have a resolved collation (else refused, COLLATE resolves it); cross-type date and time comparisons order out-of-range values without an error; NaN is ordered above every number; time zone conversions cannot fail",
    },
    FailureModes {
        node: "IN (…), = ANY(array) (ScalarArrayOpExpr)",
        could_fail_by: "an undetermined collation, an array of any dimensions or NULL elements",
        why_it_cannot: "a comparison operator as above with a resolved collation; ANY reads every element whatever the dimensions, NULL gives NULL",
    },
    FailureModes {
        node: "IS [NOT] DISTINCT FROM, NULLIF",
        could_fail_by: "an undetermined collation",
        why_it_cannot: "as comparisons",
    },
    FailureModes {
        node: "GREATEST, LEAST (MinMaxExpr)",
        could_fail_by: "an undetermined collation, the type's comparison",
        why_it_cannot: "comparable types only, with a resolved collation",
    },
    FailureModes {
        node: "[NOT] [I]LIKE 'literal'",
        could_fail_by: "a pattern ending in the escape character; stack depth (the matcher recurses once per %); a nondeterministic or undetermined collation; ILIKE on a stored value over 256 MB (lowercasing needs up to 4 bytes a character, past PostgreSQL's 1 GB allocation limit); time (matching takes up to subject × pattern steps)",
        why_it_cannot: "the pattern is a literal of at most 1 kB with at most 64 %, checked before planning; constants in the subject are at most 256 bytes and parameters are refused there, so what the analyst brings adds at most 256 × 1,024 steps a row; the collation must be resolved and deterministic; the one failure left depends on a stored value of over 256 MB, not on anything the analyst brings, and fails closed (the role's budget is forfeited)",
    },
    FailureModes {
        node: "CASE, COALESCE, AND, OR, NOT, IS [NOT] NULL, IS [NOT] TRUE/FALSE/UNKNOWN",
        could_fail_by: "row IS NULL on a composite value",
        why_it_cannot: "they only choose among values already computed; row IS NULL is refused",
    },
    FailureModes {
        node: "ARRAY[…] constructor (ArrayExpr)",
        could_fail_by: "elements of mismatched dimensions (ARRAY[ARRAY[…], …]), a result over 1 GB",
        why_it_cannot: "only one-dimensional constructors; elements of variable length only if constant, so the size depends on the query text",
    },
    FailureModes {
        node: "GROUP BY key",
        could_fail_by: "the key type's hash and equality functions, an undetermined collation",
        why_it_cannot: "built-in types only (their hash and equality functions are total); a collatable key must have a resolved collation",
    },
    FailureModes {
        node: "ORDER BY in a row source (subquery or view in FROM)",
        could_fail_by: "the sort's comparison, an undetermined collation",
        why_it_cannot: "comparable types with built-in sort operators, with a resolved collation",
    },
    FailureModes {
        node: "many-to-one join with a public table",
        could_fail_by: "the join's equality and hash functions, row security policies of the public table, values of any size in a table the analyst controls",
        why_it_cannot: "built-in btree equality of the unique index's built-in operator family, under a deterministic, resolved collation; a public table with row security, or one the role owns or may write to, is refused",
    },
    FailureModes {
        node: "collation of any node (a column's, COLLATE, an operator's input collation)",
        could_fail_by: "the first use of a collation in a session: a WARNING when its recorded version differs from the library's, an error when its locale is missing",
        why_it_cannot: "every collation the input uses is loaded while checking, before any row is read",
    },
    FailureModes {
        node: "pg_dp's own aggregates (transition, combine, final functions)",
        could_fail_by: "overflow of huge values, NaN, ±Infinity, numeric beyond the float range",
        why_it_cannot: "values are clamped to the bounds, put on a grid and summed in 128-bit integers; NaN is skipped like NULL; ±Infinity and numeric past the float range are clamped; parameters are checked before the charge",
    },
];



/// The largest constant admitted below a DP aggregate, in bytes (a literal, a folded constant
/// expression, or a bind parameter's value): an operation on a constant runs on every row that
/// reaches it, so its size bounds the work one row can cause.
pub const MAX_CONSTANT_BYTES: usize = 64 * 1024;

/// The longest LIKE pattern admitted below a DP aggregate, in bytes. Matching takes up to
/// (subject length × pattern length) steps, so a long pattern over a long subject turns one row
/// into seconds of work.
pub const MAX_LIKE_PATTERN_BYTES: usize = 1024;

/// The most `%` in a LIKE pattern: PostgreSQL's matcher recurses once for each, and a pattern of
/// tens of thousands runs out of stack (54001) on the rows that reach it.
pub const MAX_LIKE_PERCENTS: usize = 64;

/// The largest constant in the subject of a LIKE below a DP aggregate (`CASE WHEN … THEN
/// repeat('a', 60000) END LIKE …` would make one row's presence cost pattern × 60,000 steps).
pub const MAX_LIKE_SUBJECT_CONSTANT_BYTES: usize = 256;

/// The size of a constant's value in bytes (0 for NULL).
pub unsafe fn const_bytes(c: *mut pg_sys::Const) -> usize {
    if (*c).constisnull {
        return 0;
    }
    datum_bytes((*c).constvalue, (*c).constlen as i16)
}

/// The size of a datum of a type of length `typlen` (-1 varlena, -2 C string).
pub unsafe fn datum_bytes(d: pg_sys::Datum, typlen: i16) -> usize {
    match typlen {
        -1 => pgrx::varsize_any(d.cast_mut_ptr()),
        -2 => CStr::from_ptr(d.cast_mut_ptr()).to_bytes().len(),
        n => n.max(0) as usize,
    }
}

/// Casts that cannot fail for any input value: (function, what it converts).
pub const TOTAL_CASTS: &[(u32, &str)] = &[
    (pg_sys::F_INT4_INT2, "smallint to integer"),
    (pg_sys::F_INT8_INT2, "smallint to bigint"),
    (pg_sys::F_INT8_INT4, "integer to bigint"),
    (pg_sys::F_NUMERIC_INT2, "smallint to numeric"),
    (pg_sys::F_NUMERIC_INT4, "integer to numeric"),
    (pg_sys::F_NUMERIC_INT8, "bigint to numeric"),
    (pg_sys::F_FLOAT8_INT2, "smallint to double precision"),
    (pg_sys::F_FLOAT8_INT4, "integer to double precision"),
    (pg_sys::F_FLOAT8_INT8, "bigint to double precision"),
    (pg_sys::F_FLOAT4_INT2, "smallint to real"),
    (pg_sys::F_FLOAT4_INT4, "integer to real"),
    (pg_sys::F_FLOAT4_INT8, "bigint to real"),
    (pg_sys::F_FLOAT8_FLOAT4, "real to double precision"),
    (pg_sys::F_NUMERIC_FLOAT4, "real to numeric"),
    (pg_sys::F_NUMERIC_FLOAT8, "double precision to numeric"),
    (pg_sys::F_BOOL_INT4, "integer to boolean"),
    (pg_sys::F_INT4_BOOL, "boolean to integer"),
    (pg_sys::F_TEXT_BPCHAR, "character to text"),
    (pg_sys::F_TEXT_NAME, "name to text"),
];

/// Types whose built-in comparison operators are total orders that never raise an error.
pub const COMPARABLE_TYPES: &[Oid] = &[
    pg_sys::BOOLOID,
    pg_sys::INT2OID,
    pg_sys::INT4OID,
    pg_sys::INT8OID,
    pg_sys::FLOAT4OID,
    pg_sys::FLOAT8OID,
    pg_sys::NUMERICOID,
    pg_sys::TEXTOID,
    pg_sys::BPCHAROID,
    pg_sys::VARCHAROID,
    pg_sys::NAMEOID,
    pg_sys::DATEOID,
    pg_sys::TIMESTAMPOID,
    pg_sys::TIMESTAMPTZOID,
    pg_sys::TIMEOID,
    pg_sys::INTERVALOID,
    pg_sys::UUIDOID,
];

const COMPARISONS: &[&str] = &["=", "<>", "<", "<=", ">", ">="];
const LIKES: &[&str] = &["~~", "!~~", "~~*", "!~~*"];
const LIKE_TYPES: &[Oid] = &[pg_sys::TEXTOID, pg_sys::BPCHAROID, pg_sys::NAMEOID];

/// True for a function in [`TOTAL_CASTS`].
pub fn is_total_cast(funcid: Oid) -> bool {
    TOTAL_CASTS.iter().any(|(f, _)| *f == funcid.to_u32())
}

/// True for a comparable type.
pub fn is_comparable(typ: Oid) -> bool {
    COMPARABLE_TYPES.contains(&typ)
}

fn builtin(oid: Oid) -> bool {
    oid.to_u32() < pg_sys::FirstNormalObjectId
}

/// (name, left type, right type) of a built-in operator (left type InvalidOid for a prefix one).
pub(crate) unsafe fn operator(opno: Oid) -> Option<(String, Oid, Oid)> {
    if !builtin(opno) {
        return None;
    }
    let name = pg_sys::get_opname(opno);
    if name.is_null() {
        return None;
    }
    let (mut l, mut r) = (pg_sys::InvalidOid, pg_sys::InvalidOid);
    pg_sys::op_input_types(opno, &mut l, &mut r);
    Some((CStr::from_ptr(name).to_string_lossy().into_owned(), l, r))
}

/// True for a built-in comparison operator between two comparable types.
pub unsafe fn is_comparison(opno: Oid) -> bool {
    matches!(operator(opno), Some((n, l, r)) if COMPARISONS.contains(&n.as_str()) && is_comparable(l) && is_comparable(r))
}

/// True for a built-in LIKE/ILIKE operator on text.
pub unsafe fn is_like(opno: Oid) -> bool {
    matches!(operator(opno), Some((n, l, r)) if LIKES.contains(&n.as_str()) && LIKE_TYPES.contains(&l) && LIKE_TYPES.contains(&r))
}

/// Integer division or remainder: Some(true) for `/`, Some(false) for `%`.
pub fn integer_division(funcid: Oid) -> Option<bool> {
    match funcid.to_u32() {
        pg_sys::F_INT2DIV
        | pg_sys::F_INT4DIV
        | pg_sys::F_INT8DIV
        | pg_sys::F_INT24DIV
        | pg_sys::F_INT42DIV
        | pg_sys::F_INT28DIV
        | pg_sys::F_INT82DIV
        | pg_sys::F_INT48DIV
        | pg_sys::F_INT84DIV => Some(true),
        pg_sys::F_INT2MOD | pg_sys::F_INT4MOD | pg_sys::F_INT8MOD => Some(false),
        _ => None,
    }
}

/// True if a divisor keeps integer `/` (or `%`) total: not 0, and for `/` not -1 (the smallest
/// integer divided by -1 overflows).
pub fn divisor_ok(divisor: i64, is_div: bool) -> bool {
    divisor != 0 && !(is_div && divisor == -1)
}

/// True for a type whose output function (a cast to text through I/O) cannot fail.
pub fn text_output_ok(typ: Oid) -> bool {
    is_comparable(typ)
}

/// Why a LIKE pattern is refused below a DP aggregate, if it is: it ends in an unescaped backslash
/// (an error on every row that reaches it), it is longer than [`MAX_LIKE_PATTERN_BYTES`], or it has
/// more than [`MAX_LIKE_PERCENTS`] `%`.
pub fn like_pattern_problem(pattern: &[u8]) -> Option<String> {
    let trailing = pattern.iter().rev().take_while(|b| **b == b'\\').count();
    if trailing % 2 != 0 {
        return Some("must not end with the escape character".into());
    }
    if pattern.len() > MAX_LIKE_PATTERN_BYTES {
        return Some(format!("is {} bytes long: at most {MAX_LIKE_PATTERN_BYTES} bytes are allowed", pattern.len()));
    }
    let percents = pattern.iter().filter(|b| **b == b'%').count();
    if percents > MAX_LIKE_PERCENTS {
        return Some(format!("has {percents} %: at most {MAX_LIKE_PERCENTS} are allowed"));
    }
    None
}

/// A short description of a built-in function or operator for refusal messages, e.g.
/// `operator / (double precision, double precision)` or `function lower(text)`.
pub unsafe fn describe_function(funcid: Oid) -> String {
    let p = pg_sys::format_procedure(funcid);
    if p.is_null() {
        "a function".into()
    } else {
        format!("function {}", CStr::from_ptr(p).to_string_lossy())
    }
}

pub unsafe fn describe_operator(opno: Oid) -> String {
    match operator(opno) {
        Some((n, l, r)) => format!("operator {n} ({}, {})", type_name(l), type_name(r)),
        None => {
            let p = pg_sys::format_operator(opno);
            if p.is_null() {
                "an operator".into()
            } else {
                format!("operator {}", CStr::from_ptr(p).to_string_lossy())
            }
        }
    }
}

pub unsafe fn type_name(typ: Oid) -> String {
    if typ == pg_sys::InvalidOid {
        return "none".into();
    }
    CStr::from_ptr(pg_sys::format_type_be(typ)).to_string_lossy().into_owned()
}

// dp.grammar(): the table above, for analysts in psql (refusal hints point to it).
crate::pg::fmgr::pg_v1!(pg_finfo_dp_grammar, dp_grammar, |fcinfo| {
    use pgrx::IntoDatum;
    pg_sys::InitMaterializedSRF(fcinfo, pg_sys::MAT_SRF_USE_EXPECTED_DESC as pg_sys::bits32);
    let rsinfo = (*fcinfo).resultinfo as *mut pg_sys::ReturnSetInfo;
    let (store, desc) = ((*rsinfo).setResult, (*rsinfo).setDesc);
    for m in FAILURE_MODES {
        let mut values = [
            m.node.into_datum().unwrap(),
            m.could_fail_by.into_datum().unwrap(),
            m.why_it_cannot.into_datum().unwrap(),
        ];
        let mut nulls = [false; 3];
        pg_sys::tuplestore_putvalues(store, desc, values.as_mut_ptr(), nulls.as_mut_ptr());
    }
    pg_sys::Datum::from(0usize)
});
