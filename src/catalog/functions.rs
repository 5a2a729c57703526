//! Which functions are pg_dp's aggregates, and what kind each is (looked up once per backend): the
//! grammar, the charge and the final functions all tell the aggregates apart through [`kind_of`].
use pgrx::pg_sys;

thread_local! {
    /// aggregate function → its pg_dp kind (None for every other aggregate)
    static KINDS: std::cell::RefCell<std::collections::HashMap<pg_sys::Oid, Option<Kind>>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// The pg_dp aggregate an aggregate function is, if any: a function of extension pg_dp with one of
/// the aggregates' names. `dp_sum` over an integer type (`first_arg`) is an integer sum.
pub fn kind_of(aggfnoid: pg_sys::Oid, first_arg: pg_sys::Oid) -> Option<Kind> {
    let cached = KINDS.with(|k| k.borrow().get(&aggfnoid).copied());
    let base = match cached {
        Some(b) => b,
        None => {
            let b = unsafe { lookup_kind(aggfnoid) };
            KINDS.with(|k| k.borrow_mut().insert(aggfnoid, b));
            b
        }
    };
    match base {
        Some(Kind::FloatSum) if [pg_sys::INT2OID, pg_sys::INT4OID, pg_sys::INT8OID].contains(&first_arg) => Some(Kind::IntSum),
        k => k,
    }
}

unsafe fn lookup_kind(aggfnoid: pg_sys::Oid) -> Option<Kind> {
    let ext = pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, aggfnoid);
    if ext == pg_sys::InvalidOid {
        return None;
    }
    let ext_name = pg_sys::get_extension_name(ext);
    if ext_name.is_null() || std::ffi::CStr::from_ptr(ext_name).to_bytes() != b"pg_dp" {
        return None;
    }
    let name = pg_sys::get_func_name(aggfnoid);
    if name.is_null() {
        return None;
    }
    match std::ffi::CStr::from_ptr(name).to_bytes() {
        b"dp_count" => Some(Kind::Count),
        b"dp_sum" => Some(Kind::FloatSum),
        b"dp_avg" => Some(Kind::Avg),
        b"dp_variance" => Some(Kind::Variance),
        b"dp_stddev" => Some(Kind::Stddev),
        b"dp_median" => Some(Kind::Median),
        b"dp_percentile" => Some(Kind::Percentile),
        b"dp_percentile_em" => Some(Kind::PercentileEm),
        b"keep_group" | b"merge_keep_group" => Some(Kind::KeepGroup),
        // the merge aggregates of a level over a Citus table (distributed_level.rs)
        b"merge_count" => Some(Kind::Count),
        b"merge_sum" => {
            let mut types: *mut pg_sys::Oid = std::ptr::null_mut();
            let mut n: i32 = 0;
            pg_sys::get_func_signature(aggfnoid, &mut types, &mut n);
            let int = n > 1 && [pg_sys::INT2OID, pg_sys::INT4OID, pg_sys::INT8OID].contains(&*types.add(1));
            Some(if int { Kind::IntSum } else { Kind::FloatSum })
        }
        b"merge_avg" => Some(Kind::Avg),
        b"merge_variance" => Some(Kind::Variance),
        b"merge_stddev" => Some(Kind::Stddev),
        b"merge_auto_sum_int2" | b"merge_auto_sum_int4" | b"merge_auto_sum_int8" => Some(Kind::IntSum),
        b"merge_auto_sum_float8" | b"merge_auto_sum_numeric" => Some(Kind::FloatSum),
        b"merge_auto_avg_float8" | b"merge_auto_avg_numeric" => Some(Kind::Avg),
        b"merge_median" => Some(Kind::Median),
        b"merge_percentile" => Some(Kind::Percentile),
        b"merge_percentile_em" => Some(Kind::PercentileEm),
        _ => None,
    }
}

/// The pg_dp aggregates, as the charging hook and the final functions tell them apart.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Count,
    IntSum,
    FloatSum,
    Avg,
    Variance,
    Stddev,
    Median,
    Percentile,
    PercentileEm,
    /// dp.keep_group: DP partition selection of one group (selection.rs).
    KeepGroup,
}

impl Kind {
    /// The SQL name, used in messages.
    pub fn func(self) -> &'static str {
        match self {
            Kind::Count => "dp_count",
            Kind::IntSum | Kind::FloatSum => "dp_sum",
            Kind::Avg => "dp_avg",
            Kind::Variance => "dp_variance",
            Kind::Stddev => "dp_stddev",
            Kind::Median => "dp_median",
            Kind::Percentile => "dp_percentile",
            Kind::PercentileEm => "dp_percentile_em",
            Kind::KeepGroup => "dp.keep_group",
        }
    }

    /// True if a call of this kind with `nargs` arguments has bounds: the value, p for percentiles,
    /// then the two bounds (a call with fewer chooses its bounds itself, or has none: dp_count).
    pub fn has_bounds(self, nargs: usize) -> bool {
        nargs >= 3 + matches!(self, Kind::Percentile | Kind::PercentileEm) as usize
    }

    /// True for the quantile aggregates (state: the values; parameters: [`QuantileParams`]).
    pub fn is_quantile(self) -> bool {
        matches!(self, Kind::Median | Kind::Percentile | Kind::PercentileEm)
    }

    /// Names of the parameter arguments, in order after the value.
    pub fn param_names(self) -> &'static [&'static str] {
        match self {
            Kind::Count => &["epsilon"],
            Kind::Median => &["lower", "upper", "epsilon", "delta"],
            Kind::Percentile => &["p", "lower", "upper", "epsilon", "delta"],
            Kind::PercentileEm => &["p", "lower", "upper", "epsilon"],
            Kind::KeepGroup => &["epsilon", "delta"],
            Kind::Avg => &["lower", "upper", "epsilon", "public_count"],
            _ => BOUNDED_NAMES,
        }
    }
}

/// Whether calls of this kind can choose their bounds themselves.
pub fn has_automatic_bounds(kind: Kind) -> bool {
    matches!(kind, Kind::IntSum | Kind::FloatSum | Kind::Avg | Kind::Median | Kind::Percentile)
}

/// Names of the parameters of dp_sum and dp_avg, in argument order after the value.
pub const BOUNDED_NAMES: &[&str] = &["lower", "upper", "epsilon"];

/// The type of an aggregate call's first argument (None of a dp_count(*)).
pub unsafe fn first_arg_type(a: *mut pg_sys::Aggref) -> pg_sys::Oid {
    let l = (*a).aggargtypes;
    if l.is_null() || (*l).length == 0 {
        return pg_sys::InvalidOid;
    }
    (*(*l).elements).oid_value
}


/// The pg_dp functions that the planner rewrites or the DP Release node treats specially, by the
/// name pg_dp gave them: `dp_interval_low`, `dp_interval_high`, `interval_half_width`. None for any
/// other function (looked up once per backend and function).
pub fn special_function(oid: pg_sys::Oid) -> Option<&'static str> {
    thread_local! {
        static SPECIAL: std::cell::RefCell<std::collections::HashMap<pg_sys::Oid, Option<&'static str>>> =
            std::cell::RefCell::new(std::collections::HashMap::new());
    }
    if let Some(c) = SPECIAL.with(|s| s.borrow().get(&oid).copied()) {
        return c;
    }
    let found = unsafe {
        let ours = of_pg_dp(oid);
        let name = if ours { pg_sys::get_func_name(oid) } else { std::ptr::null_mut() };
        if name.is_null() {
            None
        } else {
            match std::ffi::CStr::from_ptr(name).to_bytes() {
                b"dp_interval_low" => Some("dp_interval_low"),
                b"dp_interval_high" => Some("dp_interval_high"),
                b"interval_half_width" => Some("interval_half_width"),
                _ => None,
            }
        }
    };
    SPECIAL.with(|s| s.borrow_mut().insert(oid, found));
    found
}

/// True for a function of extension pg_dp (looked up once per backend and function).
pub fn of_pg_dp(oid: pg_sys::Oid) -> bool {
    thread_local! {
        static OURS: std::cell::RefCell<std::collections::HashMap<pg_sys::Oid, bool>> =
            std::cell::RefCell::new(std::collections::HashMap::new());
    }
    if let Some(c) = OURS.with(|s| s.borrow().get(&oid).copied()) {
        return c;
    }
    let ours = unsafe {
        let ext = pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, oid);
        ext != pg_sys::InvalidOid && {
            let n = pg_sys::get_extension_name(ext);
            !n.is_null() && std::ffi::CStr::from_ptr(n).to_bytes() == b"pg_dp"
        }
    };
    OURS.with(|s| s.borrow_mut().insert(oid, ours));
    ours
}
