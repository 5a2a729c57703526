//! The parameters of an admitted aggregate call (ε, δ, p, bounds, a public count): which expressions
//! may give them (constants and bind parameters only), their values before the query runs or in a
//! final function that saw no row, and [`Paid`], the parameters as charged and as checked again by
//! the final function.
use crate::catalog::functions::Kind;
use crate::pg::error::raise_with;
use crate::pg::fmgr::{datum_f64, datum_i64};
use crate::pg::nodes::{list_iter, list_len, list_nth_ptr};
use pg_dp_core::mechanisms::accum::Params;
use pg_dp_core::mechanisms::quantile::QuantileParams;
use pgrx::pg_sys;
use pgrx::PgSqlErrorCode;

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

    /// The parameters of a quantile aggregate; δ defaults to 0. Integer bounds are those of an
    /// integer overload (int4 or int8 value and bounds; the float8 overloads' bounds are float8): its
    /// grid is the integers, a choice made by the query alone.
    pub unsafe fn quantile_params(&self, kind: Kind) -> QuantileParams {
        let p0 = match kind {
            Kind::Median => None,
            _ => Some(self.f64_at(0, "p")),
        };
        let o = p0.is_some() as usize;
        let integer = [o, o + 1].iter().all(|&i| {
            matches!(self.vals.get(i).map(|v| v.2), Some(pg_sys::INT2OID | pg_sys::INT4OID | pg_sys::INT8OID))
        });
        let (lower, upper, eps) = (self.f64_at(o, "lower"), self.f64_at(o + 1, "upper"), self.epsilon_at(o + 2));
        let params = match kind {
            Kind::PercentileEm => QuantileParams::exponential(p0.unwrap_or(0.5), lower, upper, eps),
            // without a δ argument, dp_median and dp_percentile are the exponential mechanism: the
            // most accurate pure-ε quantile on every dataset measured (docs/quantile-accuracy.md,
            // docs/peer-accuracy.md); the form with δ (even 0) is smooth sensitivity
            _ if self.vals.len() < o + 4 => QuantileParams::exponential(p0.unwrap_or(0.5), lower, upper, eps),
            _ => QuantileParams::smooth(p0.unwrap_or(0.5), lower, upper, eps, self.delta_at(o + 3)),
        };
        if integer {
            params.on_integers()
        } else {
            params
        }
    }

    /// The parameters an aggregate of this kind was paid with (see charge.rs).
    pub unsafe fn paid(&self, kind: Kind) -> Paid {
        // a call without bounds (the grammar supplied none: automatic bounds) has fewer parameters
        if crate::catalog::functions::has_automatic_bounds(kind) && crate::query::bounds::without_bounds(kind, self.vals.len() + 1) {
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

/// The first bind parameter of a statement whose value is larger than
/// [`crate::query::total::MAX_CONSTANT_BYTES`], as (its number, its size): below a DP aggregate a
/// parameter is a constant like any other, and the same bound applies.
pub unsafe fn oversized_bind_param(p: pg_sys::ParamListInfo) -> Option<(usize, usize)> {
    if p.is_null() {
        return None;
    }
    let n = (*p).numParams as usize;
    for i in 0..n {
        let mut workspace: pg_sys::ParamExternData = std::mem::zeroed();
        let prm: *mut pg_sys::ParamExternData = match (*p).paramFetch {
            // dynamic parameters (PL/pgSQL variables) are fetched as the executor would
            Some(fetch) => fetch(p, (i + 1) as i32, false, &mut workspace),
            None => (*p).params.as_mut_ptr().add(i),
        };
        if prm.is_null() || (*prm).isnull || (*prm).ptype == pg_sys::InvalidOid {
            continue;
        }
        let mut len: i16 = 0;
        let mut byval = false;
        pg_sys::get_typlenbyval((*prm).ptype, &mut len, &mut byval);
        let bytes = if byval { 0 } else { crate::query::total::datum_bytes((*prm).value, len) };
        if bytes > crate::query::total::MAX_CONSTANT_BYTES {
            return Some((i + 1, bytes));
        }
    }
    None
}
