//! Plumbing shared by all pg_dp aggregates: the V1 calling convention, the aggregate memory
//! context, window refusal, the row-independence check of parameters, the combine/serial/deserial
//! functions, and reading the parameters of an aggregate that saw no rows.
use crate::pg::error::{raise, raise_with, OrRaise};
use pg_dp_core::accum::{Acc, Params, ACC_BYTES};
use pg_dp_core::quantile::QuantileParams;
use pgrx::fcinfo::{pg_arg_is_null, pg_getarg_datum_raw, pg_return_null};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

/// The `pg_finfo_` record that marks a C function as using the version-1 calling convention.
#[macro_export]
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

/// Defines a PostgreSQL V1 C function `$name` (and its `pg_finfo_` record).
#[macro_export]
macro_rules! pg_v1 {
    ($finfo:ident, $name:ident, |$fc:ident| $body:block) => {
        $crate::pg_finfo!($finfo);
        #[unsafe(no_mangle)]
        #[::pgrx::pg_guard]
        pub unsafe extern "C-unwind" fn $name(fcinfo: ::pgrx::pg_sys::FunctionCallInfo) -> ::pgrx::pg_sys::Datum {
            #[inline(always)]
            unsafe fn inner($fc: ::pgrx::pg_sys::FunctionCallInfo) -> ::pgrx::pg_sys::Datum $body
            inner(fcinfo)
        }
    };
}

/// Defines the final function of a pg_dp aggregate: the same call written twice in one DP level (one
/// tag) releases one value per group, the first call's (charge.rs `twin_value`).
#[macro_export]
macro_rules! pg_v1_final {
    ($finfo:ident, $name:ident, |$fc:ident| $body:block) => {
        $crate::pg_v1!($finfo, $name, |$fc| {
            if let Some(d) = $crate::budget::charge::twin_value($fc) {
                return d;
            }
            #[inline(always)]
            unsafe fn final_value($fc: ::pgrx::pg_sys::FunctionCallInfo) -> ::pgrx::pg_sys::Datum $body
            let d = final_value($fc);
            $crate::budget::charge::remember_value($fc, d);
            d
        });
    };
}

/// Defines a transition function with a per-row fast path that runs without `pg_guard`.
///
/// `fast` gets the existing state, the value datum and its null flag, and returns true when it has
/// handled the row. It must be pure arithmetic that cannot panic nor call PostgreSQL. Everything
/// else (the first row, errors such as NaN, non-by-value types) goes to `slow`, which is guarded.
#[macro_export]
macro_rules! pg_v1_trans {
    ($finfo:ident, $name:ident, fast = |$acc:ident, $val:ident, $isnull:ident| $fast:block, slow = |$fc:ident| $slow:block) => {
        $crate::pg_v1_trans!($finfo, $name, state = ::pg_dp_core::accum::Acc, fast = |$acc, $val, $isnull| $fast, slow = |$fc| $slow);
    };
    ($finfo:ident, $name:ident, state = $st:ty, fast = |$acc:ident, $val:ident, $isnull:ident| $fast:block, slow = |$fc:ident| $slow:block) => {
        $crate::pg_finfo!($finfo);
        #[unsafe(no_mangle)]
        pub unsafe extern "C-unwind" fn $name(fcinfo: ::pgrx::pg_sys::FunctionCallInfo) -> ::pgrx::pg_sys::Datum {
            #[inline(always)]
            unsafe fn fast($acc: *mut $st, $val: ::pgrx::pg_sys::Datum, $isnull: bool) -> bool $fast
            #[::pgrx::pg_guard]
            unsafe extern "C-unwind" fn slow(fcinfo: ::pgrx::pg_sys::FunctionCallInfo) -> ::pgrx::pg_sys::Datum {
                #[inline(always)]
                unsafe fn inner($fc: ::pgrx::pg_sys::FunctionCallInfo) -> ::pgrx::pg_sys::Datum $slow
                inner(fcinfo)
            }
            if let Some((acc, val, isnull)) = $crate::aggregates::agg::fast_args::<$st>(fcinfo) {
                if fast(acc, val, isnull) {
                    return ::pgrx::pg_sys::Datum::from(acc);
                }
            }
            slow(fcinfo)
        }
    };
}

/// The fast path's view of a transition call: (state, argument 1, its null flag) once the state
/// exists. Plain memory reads: no allocation, no panic, no call into PostgreSQL.
#[inline(always)]
pub unsafe fn fast_args<T>(fcinfo: pg_sys::FunctionCallInfo) -> Option<(*mut T, pg_sys::Datum, bool)> {
    let f = &*fcinfo;
    let n = f.nargs as usize;
    let args = f.args.as_slice(n);
    let state = args.first()?;
    if state.isnull {
        return None;
    }
    let (val, isnull) = match args.get(1) {
        Some(a) => (a.value, a.isnull),
        None => (pg_sys::Datum::from(0usize), false), // dp_count(*): every row counts
    };
    Some((state.value.cast_mut_ptr::<T>(), val, isnull))
}

/// float8 from a by-value datum (float8 is pass-by-value on 64-bit platforms).
#[inline(always)]
pub fn datum_to_f64(d: pg_sys::Datum) -> f64 {
    f64::from_bits(d.value() as u64)
}

/// The aggregate memory context; refuses plain calls and window use.
pub unsafe fn agg_context(fcinfo: pg_sys::FunctionCallInfo, func: &'static str) -> pg_sys::MemoryContext {
    let mut ctx: pg_sys::MemoryContext = std::ptr::null_mut();
    let kind = pg_sys::AggCheckCallContext(fcinfo, &mut ctx) as u32;
    if kind == 0 {
        raise_with(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("{func}: support function called outside an aggregate"),
            None,
        );
    }
    if kind == pg_sys::AGG_CONTEXT_WINDOW {
        raise_with(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("{func} cannot be used as a window function"),
            Some("each window frame would be a separate release; aggregate in a subquery instead"),
        );
    }
    ctx
}

/// The state pointer in argument 0 (null before the first row).
#[inline]
pub unsafe fn state_arg(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> *mut Acc {
    if pg_arg_is_null(fcinfo, i) {
        std::ptr::null_mut()
    } else {
        pg_getarg_datum_raw(fcinfo, i).cast_mut_ptr::<Acc>()
    }
}

/// Allocates `acc` in memory context `ctx`.
pub unsafe fn alloc_state(ctx: pg_sys::MemoryContext, acc: Acc) -> *mut Acc {
    let p = pg_sys::MemoryContextAlloc(ctx, std::mem::size_of::<Acc>()) as *mut Acc;
    p.write(acc);
    p
}

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

unsafe fn list_nth_ptr<T>(list: *mut pg_sys::List, n: usize) -> *mut T {
    pg_sys::list_nth(list, n as i32) as *mut T
}

pub unsafe fn list_len(list: *mut pg_sys::List) -> usize {
    if list.is_null() {
        0
    } else {
        (*list).length as usize
    }
}

/// The elements of a PostgreSQL pointer list (a NULL list is empty).
pub unsafe fn list_iter<T>(list: *mut pg_sys::List) -> impl Iterator<Item = *mut T> {
    (0..list_len(list)).map(move |i| list_nth_ptr::<T>(list, i))
}

/// The OIDs of a PostgreSQL OID list (a NULL list is empty).
pub unsafe fn list_oids(list: *mut pg_sys::List) -> Vec<pg_sys::Oid> {
    (0..list_len(list)).map(|i| (*(*list).elements.add(i)).oid_value).collect()
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn collect_walker(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> bool {
    if node.is_null() {
        return false;
    }
    let (tags, out, too_deep) = &mut *(ctx as *mut (&[pg_sys::NodeTag], &mut Vec<*mut pg_sys::Node>, bool));
    if pg_sys::stack_is_too_deep() {
        *too_deep = true;
        return true;
    }
    if tags.contains(&(*node).type_) {
        out.push(node);
    }
    pg_sys::expression_tree_walker(node, Some(collect_walker), ctx)
}

/// Every node of one of the types `tags` in an expression tree, in one walk. An expression too
/// deep to walk is one error, raised here rather than deep in the walk.
pub unsafe fn collect_nodes(node: *mut pg_sys::Node, tags: &[pg_sys::NodeTag], out: &mut Vec<*mut pg_sys::Node>) {
    if node.is_null() {
        return;
    }
    let mut ctx = (tags, out, false);
    collect_walker(node, &mut ctx as *mut _ as *mut std::ffi::c_void);
    if ctx.2 {
        raise_with(PgSqlErrorCode::ERRCODE_STATEMENT_TOO_COMPLEX, "expression nested too deeply for pg_dp".into(), None);
    }
}

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
        _ => None,
    }
}

/// Why a parameter expression (ε or a bound) is not acceptable, if it is not: it must be computable
/// before the query runs from constants and query parameters with immutable built-in functions only.
/// A column would change between rows; a subquery, an execution-time parameter or a function that
/// is not an immutable part of PostgreSQL could compute it from the data, and then both the release
/// and any error about the value would depend on the data.
pub unsafe fn param_problem(expr: *mut pg_sys::Node) -> Option<&'static str> {
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walker(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> bool {
        if node.is_null() {
            return false;
        }
        let why = ctx as *mut Option<&'static str>;
        let found = |w: &'static str| {
            *why = Some(w);
            true
        };
        if pg_sys::stack_is_too_deep() {
            return found("an expression nested too deeply");
        }
        let builtin = |f: pg_sys::Oid| f == pg_sys::InvalidOid || pg_sys::get_func_namespace(f) == pg_sys::Oid::from(pg_sys::PG_CATALOG_NAMESPACE);
        match (*node).type_ {
            pg_sys::NodeTag::T_Var => return found("a column"),
            pg_sys::NodeTag::T_SubPlan | pg_sys::NodeTag::T_AlternativeSubPlan | pg_sys::NodeTag::T_SubLink => return found("a subquery"),
            pg_sys::NodeTag::T_Param if (*(node as *mut pg_sys::Param)).paramkind != pg_sys::ParamKind::PARAM_EXTERN => {
                return found("a value computed while the query runs")
            }
            pg_sys::NodeTag::T_FuncExpr if !builtin((*(node as *mut pg_sys::FuncExpr)).funcid) => return found("a user-defined function"),
            pg_sys::NodeTag::T_OpExpr | pg_sys::NodeTag::T_DistinctExpr | pg_sys::NodeTag::T_NullIfExpr
                if !builtin((*(node as *mut pg_sys::OpExpr)).opfuncid) =>
            {
                return found("a user-defined operator")
            }
            _ => {}
        }
        pg_sys::expression_tree_walker(node, Some(walker), ctx)
    }
    let mut why: Option<&'static str> = None;
    walker(expr, &mut why as *mut _ as *mut std::ffi::c_void);
    if why.is_none() && pg_sys::contain_mutable_functions(expr) {
        why = Some("a function that is not immutable");
    }
    why
}

/// Raises the error for a parameter that [`param_problem`] refuses. The message names the argument
/// and the kind of expression, never its value.
pub fn refuse_param(func: &'static str, name: &str, why: &str) -> ! {
    raise_with(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("{func}: {name} must be the same for every row of one aggregate call"),
        Some(&format!(
            "pass a constant or a query parameter ({name} uses {why}); bounds and epsilon must not depend on the data"
        )),
    );
}

/// Refuses parameters (arguments 1.. of the aggregate) that [`param_problem`] does not accept.
/// Checked once per group, on the first row, from the query tree (the ExecutorStart hook checks the
/// same before the query runs); the error depends only on the query, never on the data.
pub unsafe fn check_params_row_independent(fcinfo: pg_sys::FunctionCallInfo, func: &'static str, names: &[&str]) {
    let aggref = pg_sys::AggGetAggref(fcinfo);
    if aggref.is_null() {
        return;
    }
    for (i, te) in list_iter::<pg_sys::TargetEntry>((*aggref).args).skip(1).enumerate() {
        if let Some(why) = param_problem((*te).expr as *mut pg_sys::Node) {
            refuse_param(func, names.get(i).copied().unwrap_or("parameter"), why);
        }
    }
}

/// Returns the state, creating it on the first row from `params` (validated by the core).
///
/// Parameters are read and validated on the first row only: [`check_params_row_independent`]
/// has then proven from the query tree that they cannot change between rows.
#[inline]
pub unsafe fn state_for_row(
    fcinfo: pg_sys::FunctionCallInfo,
    func: &'static str,
    names: &[&str],
    params: impl FnOnce() -> Params,
) -> *mut Acc {
    let acc = state_arg(fcinfo, 0);
    if !acc.is_null() {
        return acc;
    }
    let ctx = agg_context(fcinfo, func);
    check_params_row_independent(fcinfo, func, names);
    alloc_state(ctx, Acc::new(params()).or_raise(func))
}

/// ε from argument `i` if the call has it, else `dp.default_epsilon`.
#[inline]
pub unsafe fn epsilon_arg(fcinfo: pg_sys::FunctionCallInfo, i: usize, func: &'static str) -> f64 {
    if nargs(fcinfo) > i {
        required::<f64>(fcinfo, i, func, "epsilon")
    } else {
        crate::settings::guc::default_epsilon()
    }
}

/// The aggregate's parameter arguments (1..) evaluated without any row, for a final function that
/// received no state because no row reached it. Each entry is (datum, is_null, type oid).
///
/// In a plain plan the Aggref carries the argument expressions. In a parallel plan the finalizing
/// Aggref's only argument is a reference to the partial aggregate's output; the reference is
/// followed down the plan to the partial Aggref, whose arguments are the original ones.
pub unsafe fn empty_input_params(fcinfo: pg_sys::FunctionCallInfo, func: &'static str) -> Vec<(pg_sys::Datum, bool, pg_sys::Oid)> {
    let aggref = pg_sys::AggGetAggref(fcinfo);
    let aggstate = (*fcinfo).context as *mut pg_sys::AggState;
    if aggref.is_null() || aggstate.is_null() {
        raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("{func}: no aggregate context"), None);
    }
    let mut args = (*aggref).args;
    if (*aggref).aggsplit & pg_sys::AGGSPLITOP_COMBINE != 0 {
        args = partial_aggref_args_in_plan((*aggstate).ss.ps.plan, args)
            .unwrap_or_else(|| raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("{func}: cannot find the partial aggregate of a parallel plan"), None));
    }
    let parent = &mut (*aggstate).ss.ps as *mut pg_sys::PlanState;
    eval_param_exprs(args, (*aggstate).ss.ps.ps_ExprContext, func, |_| "bounds and epsilon", |expr| pg_sys::ExecInitExpr(expr, parent))
}

/// Evaluates the parameter arguments (1..) of an aggregate call without any row, after
/// [`param_problem`] has accepted each of them: (datum, is_null, type) in argument order. `init`
/// compiles an expression; the values are computed in the econtext's per-query memory.
pub unsafe fn eval_param_exprs<'a>(
    args: *mut pg_sys::List,
    econtext: *mut pg_sys::ExprContext,
    func: &'static str,
    name_of: impl Fn(usize) -> &'a str,
    init: impl Fn(*mut pg_sys::Expr) -> *mut pg_sys::ExprState,
) -> Vec<(pg_sys::Datum, bool, pg_sys::Oid)> {
    let mut out = Vec::new();
    for (i, te) in list_iter::<pg_sys::TargetEntry>(args).skip(1).enumerate() {
        let expr = (*te).expr;
        if let Some(why) = param_problem(expr as *mut pg_sys::Node) {
            refuse_param(func, name_of(i), why);
        }
        let state = init(expr);
        let mut isnull = false;
        let eval = (*state).evalfunc.expect("compiled expression");
        let old = pg_sys::MemoryContextSwitchTo((*econtext).ecxt_per_query_memory);
        let d = eval(state, econtext, &mut isnull);
        pg_sys::MemoryContextSwitchTo(old);
        out.push((d, isnull, pg_sys::exprType(expr as *const pg_sys::Node)));
    }
    out
}

/// Follows the finalizing Aggref's argument (an OUTER_VAR reference) from its Agg plan node down
/// to the partial Aggref and returns the partial Aggref's argument list (the original arguments).
pub unsafe fn partial_aggref_args_in_plan(agg_plan: *mut pg_sys::Plan, args: *mut pg_sys::List) -> Option<*mut pg_sys::List> {
    if list_len(args) != 1 || agg_plan.is_null() {
        return None;
    }
    let mut expr = (*list_nth_ptr::<pg_sys::TargetEntry>(args, 0)).expr as *mut pg_sys::Node;
    let mut plan = (*agg_plan).lefttree;
    for _ in 0..32 {
        if expr.is_null() || plan.is_null() {
            return None;
        }
        match (*expr).type_ {
            pg_sys::NodeTag::T_Aggref => return Some((*(expr as *mut pg_sys::Aggref)).args),
            pg_sys::NodeTag::T_Var => {
                let attno = (*(expr as *mut pg_sys::Var)).varattno as usize;
                let tlist = (*plan).targetlist;
                if attno == 0 || attno > list_len(tlist) {
                    return None;
                }
                expr = (*list_nth_ptr::<pg_sys::TargetEntry>(tlist, attno - 1)).expr as *mut pg_sys::Node;
                if (*expr).type_ == pg_sys::NodeTag::T_Var {
                    plan = child_plan(plan)?;
                }
            }
            _ => return None,
        }
    }
    None
}

/// The plan a non-projecting node (Gather, Sort, Append, ...) reads its columns from.
unsafe fn child_plan(plan: *mut pg_sys::Plan) -> Option<*mut pg_sys::Plan> {
    match (*plan).type_ {
        pg_sys::NodeTag::T_Append => {
            let l = (*(plan as *mut pg_sys::Append)).appendplans;
            (list_len(l) > 0).then(|| list_nth_ptr::<pg_sys::Plan>(l, 0))
        }
        pg_sys::NodeTag::T_MergeAppend => {
            let l = (*(plan as *mut pg_sys::MergeAppend)).mergeplans;
            (list_len(l) > 0).then(|| list_nth_ptr::<pg_sys::Plan>(l, 0))
        }
        _ => {
            let p = (*plan).lefttree;
            (!p.is_null()).then_some(p)
        }
    }
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

/// Parameter values of an aggregate read without any row (empty input, or before execution):
/// required ones by position, epsilon defaulting to the GUC.
pub struct ParamValues {
    vals: Vec<(pg_sys::Datum, bool, pg_sys::Oid)>,
    func: &'static str,
}

impl ParamValues {
    pub fn new(vals: Vec<(pg_sys::Datum, bool, pg_sys::Oid)>, func: &'static str) -> Self {
        ParamValues { vals, func }
    }

    pub unsafe fn read(fcinfo: pg_sys::FunctionCallInfo, func: &'static str) -> Self {
        ParamValues { vals: empty_input_params(fcinfo, func), func }
    }
    fn get(&self, i: usize, name: &str) -> Option<(pg_sys::Datum, pg_sys::Oid)> {
        let (d, isnull, t) = *self.vals.get(i)?;
        if isnull {
            raise_with(PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED, format!("{}: {name} must not be NULL", self.func), None);
        }
        Some((d, t))
    }
    pub unsafe fn f64_at(&self, i: usize, name: &str) -> f64 {
        let (d, t) = self.get(i, name).unwrap_or_else(|| raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("{}: missing {name}", self.func), None));
        datum_f64(d, t, self.func)
    }
    pub unsafe fn i64_at(&self, i: usize, name: &str) -> i64 {
        let (d, t) = self.get(i, name).unwrap_or_else(|| raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("{}: missing {name}", self.func), None));
        datum_i64(d, t, self.func)
    }
    /// The parameters of an aggregate of this kind.
    pub unsafe fn params(&self, kind: Kind) -> Params {
        match kind {
            Kind::Count => Params::count(self.epsilon_at(0)),
            Kind::IntSum => Params::int_sum(self.i64_at(0, "lower"), self.i64_at(1, "upper"), self.epsilon_at(2)),
            Kind::FloatSum => Params::float_sum(self.f64_at(0, "lower"), self.f64_at(1, "upper"), self.epsilon_at(2)),
            Kind::Avg => Params::avg(self.f64_at(0, "lower"), self.f64_at(1, "upper"), self.epsilon_at(2)),
            Kind::Variance => Params::variance(self.f64_at(0, "lower"), self.f64_at(1, "upper"), self.epsilon_at(2)),
            Kind::Stddev => Params::stddev(self.f64_at(0, "lower"), self.f64_at(1, "upper"), self.epsilon_at(2)),
            _ => unreachable!("{kind:?} has quantile parameters"),
        }
    }

    /// The parameters of a quantile aggregate; δ defaults to 0.
    pub unsafe fn quantile_params(&self, kind: Kind) -> QuantileParams {
        let p0 = match kind {
            Kind::Median => None,
            _ => Some(self.f64_at(0, "p")),
        };
        let o = p0.is_some() as usize;
        let (lower, upper, eps) = (self.f64_at(o, "lower"), self.f64_at(o + 1, "upper"), self.epsilon_at(o + 2));
        match kind {
            Kind::PercentileEm => QuantileParams::exponential(p0.unwrap_or(0.5), lower, upper, eps),
            // without a δ argument, dp_median and dp_percentile are the exponential mechanism: the
            // most accurate pure-ε quantile on every dataset measured (docs/quantile-accuracy.md,
            // docs/peer-accuracy.md); the form with δ (even 0) is smooth sensitivity
            _ if self.vals.len() < o + 4 => QuantileParams::exponential(p0.unwrap_or(0.5), lower, upper, eps),
            _ => QuantileParams::smooth(p0.unwrap_or(0.5), lower, upper, eps, self.delta_at(o + 3)),
        }
    }

    /// The parameters an aggregate of this kind was paid with (see charge.rs).
    pub unsafe fn paid(&self, kind: Kind) -> Paid {
        // a call without bounds (the grammar supplied none: automatic bounds) has fewer parameters
        if crate::aggregates::autobounds::has_automatic_bounds(kind) && crate::query::bounds::without_bounds(kind, self.vals.len() + 1) {
            let o = (kind == Kind::Percentile) as usize;
            let p = if o == 1 { self.f64_at(0, "p") } else { 0.5 };
            return Paid::Auto { kind, p: p.to_bits(), epsilon: self.epsilon_at(o).to_bits() };
        }
        if kind == Kind::Avg && self.vals.len() == 4 {
            return Paid::AvgPublicCount { params: self.params(kind), count: self.i64_at(3, "public_count") };
        }
        if kind == Kind::KeepGroup {
            Paid::Selection { epsilon: self.f64_at(0, "epsilon").to_bits(), delta: self.f64_at(1, "delta").to_bits() }
        } else if kind.is_quantile() {
            Paid::Quantile(self.quantile_params(kind))
        } else {
            Paid::Sum(self.params(kind))
        }
    }

    /// δ at position `i`, or 0 if the call has no such argument.
    pub unsafe fn delta_at(&self, i: usize) -> f64 {
        match self.get(i, "delta") {
            Some((d, t)) => datum_f64(d, t, self.func),
            None => 0.0,
        }
    }

    /// ε at position `i`, or `dp.default_epsilon` if the call has no such argument.
    pub unsafe fn epsilon_at(&self, i: usize) -> f64 {
        match self.get(i, "epsilon") {
            Some((d, t)) => datum_f64(d, t, self.func),
            None => crate::settings::guc::default_epsilon(),
        }
    }
}

/// Names of the parameters of dp_sum and dp_avg, in argument order after the value.
pub const BOUNDED_NAMES: &[&str] = &["lower", "upper", "epsilon"];

/// Slow path of a float8 transition function (value, lower, upper [, epsilon]).
pub unsafe fn float8_trans(fcinfo: pg_sys::FunctionCallInfo, func: &'static str, make: fn(f64, f64, f64) -> Params) -> pg_sys::Datum {
    let acc = state_for_row(fcinfo, func, BOUNDED_NAMES, || {
        let lower = required::<f64>(fcinfo, 2, func, "lower");
        let upper = required::<f64>(fcinfo, 3, func, "upper");
        make(lower, upper, epsilon_arg(fcinfo, 4, func))
    });
    if let Some(v) = pgrx::fcinfo::pg_getarg::<f64>(fcinfo, 1) {
        (*acc).add_f64(v).or_raise(func);
    }
    pg_sys::Datum::from(acc)
}

/// numeric argument `i` as float8, or the NULL error naming it.
unsafe fn numeric_arg(fcinfo: pg_sys::FunctionCallInfo, i: usize, func: &'static str, arg: &str) -> f64 {
    if pg_arg_is_null(fcinfo, i) {
        raise_with(PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED, format!("{func}: {arg} must not be NULL"), None);
    }
    numeric_datum_f64(pg_getarg_datum_raw(fcinfo, i))
}

/// Transition function over numeric (value, lower, upper [, epsilon]). Values and bounds go through
/// float8: a per-row monotone map, so the sensitivity argument is unchanged (docs/privacy/sum.md).
pub unsafe fn numeric_trans(fcinfo: pg_sys::FunctionCallInfo, func: &'static str, make: fn(f64, f64, f64) -> Params) -> pg_sys::Datum {
    let acc = state_for_row(fcinfo, func, BOUNDED_NAMES, || {
        let lower = numeric_arg(fcinfo, 2, func, "lower");
        let upper = numeric_arg(fcinfo, 3, func, "upper");
        make(lower, upper, epsilon_arg(fcinfo, 4, func))
    });
    if !pg_arg_is_null(fcinfo, 1) {
        (*acc).add_f64(numeric_datum_f64(pg_getarg_datum_raw(fcinfo, 1))).or_raise(func);
    }
    pg_sys::Datum::from(acc)
}

/// The state at the final function (the accumulated one, or an empty one for an aggregate of this
/// kind that saw no row), once its release has been paid for (see charge.rs).
pub unsafe fn final_state(fcinfo: pg_sys::FunctionCallInfo, kind: Kind) -> Acc {
    let func = kind.func();
    agg_context(fcinfo, func);
    let acc = state_arg(fcinfo, 0);
    let acc = if !acc.is_null() {
        *acc
    } else {
        let p = ParamValues::read(fcinfo, func);
        Acc::new(p.params(kind)).or_raise(func)
    };
    crate::budget::charge::check_ticket(fcinfo, func, &Paid::Sum(acc.params));
    acc
}

/// The public count of a `dp_avg(value, lower, upper, epsilon, public_count)` call, or None for the
/// other forms; read from the call's own (constant) argument.
pub unsafe fn public_count(fcinfo: pg_sys::FunctionCallInfo, func: &'static str) -> Option<i64> {
    let a = pg_sys::AggGetAggref(fcinfo);
    // the argument types, not the arguments: a finalizing Aggref of a parallel plan has one argument
    // (the partial aggregate's output) but keeps the call's five argument types
    if a.is_null() || list_len((*a).aggargtypes) != 5 {
        return None;
    }
    Some(ParamValues::read(fcinfo, func).i64_at(3, "public_count"))
}

/// The state at dp_avg's final function with a public count (see [`final_state`]).
pub unsafe fn final_state_public_count(fcinfo: pg_sys::FunctionCallInfo, count: i64) -> Acc {
    let func = Kind::Avg.func();
    agg_context(fcinfo, func);
    let acc = state_arg(fcinfo, 0);
    let acc = if !acc.is_null() {
        *acc
    } else {
        Acc::new(ParamValues::read(fcinfo, func).params(Kind::Avg)).or_raise(func)
    };
    crate::budget::charge::check_ticket(fcinfo, func, &Paid::AvgPublicCount { params: acc.params, count });
    acc
}

/// The parameters of a release, bit for bit, as paid for and as checked by the final function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paid {
    Sum(Params),
    Quantile(QuantileParams),
    /// ε and δ of a partition selection, as float bits.
    Selection { epsilon: u64, delta: u64 },
    /// A call without bounds whose column has none declared: automatic DP bounds (autobounds.rs),
    /// with p (0.5 but for dp_percentile) and ε as float bits.
    Auto { kind: Kind, p: u64, epsilon: u64 },
    /// dp_avg with a public count given by the caller (avg.rs): all of ε on the centred sum.
    AvgPublicCount { params: Params, count: i64 },
}

// ----- combine / serialize / deserialize, shared by every pg_dp aggregate -----------------------

pg_v1!(pg_finfo_dp_combine, dp_combine, |fcinfo| {
    let ctx = agg_context(fcinfo, "pg_dp combine");
    let a = state_arg(fcinfo, 0);
    let b = state_arg(fcinfo, 1);
    match (a.is_null(), b.is_null()) {
        (_, true) if a.is_null() => pg_return_null(fcinfo),
        (_, true) => pg_sys::Datum::from(a),
        (true, false) => pg_sys::Datum::from(alloc_state(ctx, *b)),
        (false, false) => {
            (*a).merge(&*b).or_raise("pg_dp combine");
            pg_sys::Datum::from(a)
        }
    }
});

pg_v1!(pg_finfo_dp_serialize, dp_serialize, |fcinfo| {
    agg_context(fcinfo, "pg_dp serialize");
    let a = state_arg(fcinfo, 0);
    if a.is_null() {
        return pg_return_null(fcinfo);
    }
    let bytes = (*a).to_bytes();
    bytes.as_slice().into_datum().unwrap()
});

pg_v1!(pg_finfo_dp_deserialize, dp_deserialize, |fcinfo| {
    let ctx = agg_context(fcinfo, "pg_dp deserialize");
    if pg_arg_is_null(fcinfo, 0) {
        return pg_return_null(fcinfo);
    }
    let bytes: &[u8] = pgrx::fcinfo::pg_getarg(fcinfo, 0).unwrap();
    if bytes.len() != ACC_BYTES {
        raise("pg_dp deserialize", pg_dp_core::DpError::CorruptState(format!("{} bytes", bytes.len())));
    }
    let acc = Acc::from_bytes(bytes).or_raise("pg_dp deserialize");
    pg_sys::Datum::from(alloc_state(ctx, acc))
});
