//! Charging: every pg_dp release is paid before the query reads any data.
//!
//! An ExecutorStart hook walks the plan and finds each pg_dp aggregate that will release values
//! (the Aggrefs whose final function runs). It evaluates their ε and bounds (constants or bind
//! parameters), builds one receipt per aggregate, and has the ledger worker debit the whole query
//! in the worker's own transaction. Only then does the executor start. Each paid aggregate gets a
//! ticket; its final function refuses to release without one.
//!
//! Composition: ε adds up across the aggregates of a query. One aggregate's GROUP BY groups are
//! disjoint sets of rows, so they cost its ε once (parallel composition, one row per person).
//! An aggregate that could be executed more than once per query (inside a correlated subquery, on
//! the inner side of a nested loop) would make several releases for one payment: such queries are
//! refused before anything is charged.
use super::agg::{eval_param_exprs, list_iter, partial_aggref_args_in_plan, Kind, Paid, ParamValues};
use super::error::{raise_with, OrRaise};
use super::ledger;
use pg_dp_core::accounting::{charged_decimal, ChargeOutcome, ChargeRequest, ReleaseRecord};
use pg_dp_core::accum::Acc;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting, PgSqlErrorCode};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_int as c_int_t, c_void, CStr};

/// Refuse roles without a budget (superusers excepted). Superuser-only; on by default.
pub static REQUIRE_BUDGET: GucSetting<bool> = GucSetting::<bool>::new(true);

static mut PREV_EXECUTOR_START: pg_sys::ExecutorStart_hook_type = None;
static mut PREV_EXECUTOR_END: pg_sys::ExecutorEnd_hook_type = None;

/// A paid release: which query paid it, at which ε, and whether it may release only once.
#[derive(Clone, Copy)]
struct Ticket {
    query: usize,
    /// the parameters paid for (ε, δ, p and bounds, bit for bit)
    params: Paid,
    /// plain aggregate (no GROUP BY): exactly one release per execution
    single: bool,
    releases: u32,
}

thread_local! {
    static TICKETS: RefCell<HashMap<usize, Ticket>> = RefCell::new(HashMap::new());
}

pub fn init() {
    GucRegistry::define_bool_guc(
        c"dp.require_budget",
        c"Refuse pg_dp queries from roles without a privacy budget (superusers are exempt).",
        c"When off, roles without a budget run pg_dp queries unlimited; every release is still recorded in the ledger.",
        &REQUIRE_BUDGET,
        GucContext::Suset,
        GucFlags::default(),
    );
    unsafe {
        PREV_EXECUTOR_START = pg_sys::ExecutorStart_hook;
        pg_sys::ExecutorStart_hook = Some(executor_start);
        PREV_EXECUTOR_END = pg_sys::ExecutorEnd_hook;
        pg_sys::ExecutorEnd_hook = Some(executor_end);
        pg_sys::RegisterXactCallback(Some(xact_end), std::ptr::null_mut());
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn executor_start(qd: *mut pg_sys::QueryDesc, eflags: c_int_t) {
    // Start first: it checks the caller's privileges on every table but reads no row (scans, parallel
    // workers and InitPlans all begin in ExecutorRun). A refused query is thus never charged, and a
    // charged query is paid before its first row is read.
    match PREV_EXECUTOR_START {
        Some(prev) => prev(qd, eflags),
        None => pg_sys::standard_ExecutorStart(qd, eflags),
    }
    let explain_only = eflags as u32 & pg_sys::EXEC_FLAG_EXPLAIN_ONLY != 0;
    if !explain_only && !in_parallel_worker() {
        let rewindable = eflags as u32 & (pg_sys::EXEC_FLAG_REWIND | pg_sys::EXEC_FLAG_BACKWARD) != 0;
        charge_query(qd, rewindable);
    }
}


#[pg_guard]
unsafe extern "C-unwind" fn executor_end(qd: *mut pg_sys::QueryDesc) {
    let q = qd as usize;
    TICKETS.with(|t| t.borrow_mut().retain(|_, v| v.query != q));
    match PREV_EXECUTOR_END {
        Some(prev) => prev(qd),
        None => pg_sys::standard_ExecutorEnd(qd),
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn xact_end(event: pg_sys::XactEvent::Type, _arg: *mut c_void) {
    if event == pg_sys::XactEvent::XACT_EVENT_COMMIT
        || event == pg_sys::XactEvent::XACT_EVENT_ABORT
        || event == pg_sys::XactEvent::XACT_EVENT_PARALLEL_COMMIT
        || event == pg_sys::XactEvent::XACT_EVENT_PARALLEL_ABORT
    {
        TICKETS.with(|t| t.borrow_mut().clear());
    }
}

fn in_parallel_worker() -> bool {
    unsafe { pg_sys::ParallelWorkerNumber >= 0 }
}

/// Called by every pg_dp final function before it returns a value.
pub unsafe fn check_ticket(fcinfo: pg_sys::FunctionCallInfo, func: &'static str, paid: &Paid) {
    if in_parallel_worker() {
        raise_with(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!("{func} cannot release a value inside a parallel worker"),
            Some("SET max_parallel_workers_per_gather = 0 for this query"),
        );
    }
    let aggref = pg_sys::AggGetAggref(fcinfo) as usize;
    let params = *paid;
    let ok = TICKETS.with(|t| {
        let mut t = t.borrow_mut();
        match t.get_mut(&aggref) {
            Some(tk) if tk.params == params && !(tk.single && tk.releases > 0) => {
                tk.releases += 1;
                Ok(())
            }
            Some(tk) if tk.params != params => Err("its parameters differ from the ones paid for"),
            Some(_) => Err("it was executed again after its one paid release"),
            None => Err("no charge was made for it"),
        }
    });
    if let Err(why) = ok {
        let hint = if ledger::preloaded() { None } else { Some(ledger::PRELOAD_HINT) };
        raise_with(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("{func}: refusing to release a value: {why}"),
            hint,
        );
    }
}

// ----- finding the releases of a plan ---------------------------------------------------------

struct Found {
    aggref: *mut pg_sys::Aggref,
    agg_plan: *mut pg_sys::Plan,
    kind: Kind,
    rescan: bool,
    in_worker: bool,
    single: bool,
    /// number of grouping sets: each row belongs to one group per set
    sets: usize,
    /// why the aggregate's input is not the rows of one table, if it is not
    input_problem: Option<String>,
}

struct Walk {
    stmt: *mut pg_sys::PlannedStmt,
    pg_dp_ext: pg_sys::Oid,
    kinds: HashMap<pg_sys::Oid, Option<Kind>>,
    walked_subplans: HashSet<i32>,
    found: Vec<Found>,
    /// pg_dp aggregates used as window functions
    windowed: Vec<Kind>,
}

impl Walk {
    unsafe fn kind_of(&mut self, aggfnoid: pg_sys::Oid, first_arg: pg_sys::Oid) -> Option<Kind> {
        let ext = self.pg_dp_ext;
        let name = *self.kinds.entry(aggfnoid).or_insert_with(|| {
            if pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, aggfnoid) != ext {
                return None;
            }
            let name = pg_sys::get_func_name(aggfnoid);
            if name.is_null() {
                return None;
            }
            match CStr::from_ptr(name).to_bytes() {
                b"dp_count" => Some(Kind::Count),
                b"dp_sum" => Some(Kind::FloatSum), // refined by argument type below
                b"dp_avg" => Some(Kind::Avg),
                b"dp_median" => Some(Kind::Median),
                b"dp_percentile" => Some(Kind::Percentile),
                b"dp_percentile_em" => Some(Kind::PercentileEm),
                _ => None,
            }
        });
        match name {
            Some(Kind::FloatSum) if [pg_sys::INT2OID, pg_sys::INT4OID, pg_sys::INT8OID].contains(&first_arg) => Some(Kind::IntSum),
            k => k,
        }
    }

    unsafe fn plan(&mut self, plan: *mut pg_sys::Plan, rescan: bool, in_worker: bool) {
        if plan.is_null() {
            return;
        }
        // InitPlans run once per execution of the node that owns them
        for sp in list_iter::<pg_sys::SubPlan>((*plan).initPlan) {
            self.subplan((*sp).plan_id, rescan, in_worker);
        }
        match (*plan).type_ {
            pg_sys::NodeTag::T_Agg => self.agg(plan, rescan, in_worker),
            pg_sys::NodeTag::T_WindowAgg => self.window_agg(plan),
            pg_sys::NodeTag::T_CteScan => {
                // a CTE is computed once, whatever rescans its scans see
                self.subplan((*(plan as *mut pg_sys::CteScan)).ctePlanId, rescan, in_worker);
            }
            _ => {}
        }
        match (*plan).type_ {
            pg_sys::NodeTag::T_NestLoop => {
                self.plan((*plan).lefttree, rescan, in_worker);
                self.plan((*plan).righttree, true, in_worker);
            }
            pg_sys::NodeTag::T_RecursiveUnion => {
                self.plan((*plan).lefttree, rescan, in_worker);
                self.plan((*plan).righttree, true, in_worker);
            }
            pg_sys::NodeTag::T_Gather | pg_sys::NodeTag::T_GatherMerge => {
                self.plan((*plan).lefttree, rescan, true);
            }
            pg_sys::NodeTag::T_Append | pg_sys::NodeTag::T_MergeAppend | pg_sys::NodeTag::T_BitmapAnd | pg_sys::NodeTag::T_BitmapOr => {
                for p in list_children(plan) {
                    self.plan(p, rescan, in_worker);
                }
            }
            pg_sys::NodeTag::T_SubqueryScan => {
                self.plan((*(plan as *mut pg_sys::SubqueryScan)).subplan, rescan, in_worker);
            }
            pg_sys::NodeTag::T_CustomScan => {
                for p in list_iter::<pg_sys::Plan>((*(plan as *mut pg_sys::CustomScan)).custom_plans) {
                    self.plan(p, true, in_worker);
                }
            }
            _ => {
                self.plan((*plan).lefttree, rescan, in_worker);
                self.plan((*plan).righttree, rescan, in_worker);
            }
        }
    }

    unsafe fn subplan(&mut self, plan_id: i32, rescan: bool, in_worker: bool) {
        if plan_id < 1 || !self.walked_subplans.insert(plan_id) {
            return;
        }
        let p = pg_sys::list_nth((*self.stmt).subplans, plan_id - 1) as *mut pg_sys::Plan;
        self.plan(p, rescan, in_worker);
    }

    unsafe fn agg(&mut self, plan: *mut pg_sys::Plan, rescan: bool, in_worker: bool) {
        let mut aggrefs: Vec<*mut pg_sys::Node> = Vec::new();
        collect_nodes((*plan).targetlist as *mut pg_sys::Node, &[pg_sys::NodeTag::T_Aggref], &mut aggrefs);
        collect_nodes((*plan).qual as *mut pg_sys::Node, &[pg_sys::NodeTag::T_Aggref], &mut aggrefs);
        let agg = plan as *mut pg_sys::Agg;
        let single = (*agg).aggstrategy == pg_sys::AggStrategy::AGG_PLAIN;
        // GROUPING SETS / ROLLUP / CUBE: every row is in one group of each set (the sets of a
        // chained Agg included), so each set is a separate release of the aggregate
        let mut sets = list_iter::<c_void>((*agg).groupingSets).count();
        for c in list_iter::<pg_sys::Agg>((*agg).chain) {
            sets += list_iter::<c_void>((*c).groupingSets).count();
        }
        let sets = sets.max(1);
        let mut input_problem = None;
        for a in aggrefs {
            let a = a as *mut pg_sys::Aggref;
            if (*a).aggsplit & pg_sys::AGGSPLITOP_SKIPFINAL != 0 {
                continue; // a partial aggregate releases nothing
            }
            let first_arg = first_arg_type(a);
            if let Some(kind) = self.kind_of((*a).aggfnoid, first_arg) {
                if input_problem.is_none() {
                    let mut relids = HashSet::new();
                    input_problem = Some(self.input_problem((*plan).lefttree, &mut relids));
                }
                let mut input_problem = input_problem.clone().flatten();
                // the aggregated value and FILTER are computed in this node, above the checked input
                // (the parameters after it are refused by their own check, with a message naming them)
                let value = list_iter::<pg_sys::TargetEntry>((*a).args).next();
                let value_expr = value.map_or(std::ptr::null_mut(), |te| (*te).expr as *mut pg_sys::Node);
                if input_problem.is_none() && (has_subquery(value_expr) || has_subquery((*a).aggfilter as *mut pg_sys::Node)) {
                    input_problem = Some("computes its value or FILTER with a subquery, which can read other rows".into());
                }
                self.found.push(Found { aggref: a, agg_plan: plan, kind, rescan, in_worker, single, sets, input_problem });
            }
        }
    }
}

impl Walk {
    unsafe fn window_agg(&mut self, plan: *mut pg_sys::Plan) {
        let mut funcs: Vec<*mut pg_sys::Node> = Vec::new();
        collect_nodes((*plan).targetlist as *mut pg_sys::Node, &[pg_sys::NodeTag::T_WindowFunc], &mut funcs);
        for f in funcs {
            let w = f as *mut pg_sys::WindowFunc;
            let first = if (*w).args.is_null() || (*(*w).args).length == 0 {
                pg_sys::InvalidOid
            } else {
                pg_sys::exprType(pg_sys::list_nth((*w).args, 0) as *const pg_sys::Node)
            };
            if let Some(kind) = self.kind_of((*w).winfnoid, first) {
                self.windowed.push(kind);
            }
        }
    }

    /// Why the rows reaching a DP aggregate are not the rows of one table, each at most once, selected
    /// by conditions that do not depend on other rows; None when they are. The sensitivity of every
    /// mechanism assumes that adding or removing one person adds or removes one input row.
    unsafe fn input_problem(&self, plan: *mut pg_sys::Plan, relids: &mut HashSet<pg_sys::Oid>) -> Option<String> {
        if plan.is_null() {
            return None; // a Result without input: one row of constants
        }
        if has_subquery((*plan).targetlist as *mut pg_sys::Node) || has_subquery((*plan).qual as *mut pg_sys::Node) {
            return Some("selects rows with a subquery, which can make one person change many rows".into());
        }
        let tag = (*plan).type_;
        use pg_sys::NodeTag::*;
        match tag {
            T_SeqScan | T_SampleScan | T_IndexScan | T_IndexOnlyScan | T_BitmapHeapScan | T_TidScan | T_TidRangeScan => {
                let rti = (*(plan as *mut pg_sys::Scan)).scanrelid;
                let rte = pg_sys::list_nth((*self.stmt).rtable, rti as i32 - 1) as *mut pg_sys::RangeTblEntry;
                if !relids.insert((*rte).relid) {
                    return Some("reads the same table more than once".into());
                }
                None
            }
            T_Sort | T_IncrementalSort | T_Material | T_Memoize | T_Limit | T_Unique | T_LockRows | T_Gather
            | T_GatherMerge | T_Result | T_WindowAgg => self.input_problem((*plan).lefttree, relids),
            T_Agg => {
                // the partial aggregate of a parallel plan is part of the same aggregation
                if (*(plan as *mut pg_sys::Agg)).aggsplit & pg_sys::AGGSPLITOP_SKIPFINAL != 0 {
                    self.input_problem((*plan).lefttree, relids)
                } else {
                    Some("aggregates the result of another aggregation".into())
                }
            }
            T_Append | T_MergeAppend => {
                for p in list_children(plan) {
                    if let Some(w) = self.input_problem(p, relids) {
                        return Some(w);
                    }
                }
                None
            }
            T_SubqueryScan => self.input_problem((*(plan as *mut pg_sys::SubqueryScan)).subplan, relids),
            T_CteScan => {
                let id = (*(plan as *mut pg_sys::CteScan)).ctePlanId;
                self.input_problem(pg_sys::list_nth((*self.stmt).subplans, id - 1) as *mut pg_sys::Plan, relids)
            }
            T_NestLoop | T_MergeJoin | T_HashJoin => Some("joins tables, which can repeat one person's row".into()),
            T_ProjectSet | T_FunctionScan | T_TableFuncScan => Some("uses a set-returning function, which can repeat rows".into()),
            _ => Some(format!("reads from a {} plan node, which pg_dp cannot bound", node_name(tag))),
        }
    }
}

/// True if the expression contains a subquery or a value computed while the query runs (a PARAM_EXEC
/// parameter, e.g. an InitPlan's result): either can depend on other rows than the current one.
unsafe fn has_subquery(e: *mut pg_sys::Node) -> bool {
    let mut found: Vec<*mut pg_sys::Node> = Vec::new();
    let tags = [pg_sys::NodeTag::T_SubPlan, pg_sys::NodeTag::T_AlternativeSubPlan, pg_sys::NodeTag::T_SubLink, pg_sys::NodeTag::T_Param];
    collect_nodes(e, &tags, &mut found);
    found.into_iter().any(|n| {
        (*n).type_ != pg_sys::NodeTag::T_Param || (*(n as *mut pg_sys::Param)).paramkind == pg_sys::ParamKind::PARAM_EXEC
    })
}

/// The children of a plan node that keeps them in a list (Append, MergeAppend, BitmapAnd, BitmapOr).
unsafe fn list_children(plan: *mut pg_sys::Plan) -> Vec<*mut pg_sys::Plan> {
    let list = match (*plan).type_ {
        pg_sys::NodeTag::T_Append => (*(plan as *mut pg_sys::Append)).appendplans,
        pg_sys::NodeTag::T_MergeAppend => (*(plan as *mut pg_sys::MergeAppend)).mergeplans,
        pg_sys::NodeTag::T_BitmapAnd => (*(plan as *mut pg_sys::BitmapAnd)).bitmapplans,
        pg_sys::NodeTag::T_BitmapOr => (*(plan as *mut pg_sys::BitmapOr)).bitmapplans,
        _ => std::ptr::null_mut(),
    };
    list_iter::<pg_sys::Plan>(list).collect()
}

fn node_name(tag: pg_sys::NodeTag) -> String {
    format!("{tag:?}").trim_start_matches("T_").to_string()
}

unsafe extern "C-unwind" fn collect_walker(node: *mut pg_sys::Node, ctx: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    let (tags, out) = &mut *(ctx as *mut (&[pg_sys::NodeTag], &mut Vec<*mut pg_sys::Node>));
    if tags.contains(&(*node).type_) {
        out.push(node);
    }
    pg_sys::expression_tree_walker(node, Some(collect_walker), ctx)
}

/// Every node of one of the types `tags` in an expression tree, in one walk.
unsafe fn collect_nodes(node: *mut pg_sys::Node, tags: &[pg_sys::NodeTag], out: &mut Vec<*mut pg_sys::Node>) {
    if node.is_null() {
        return;
    }
    let mut ctx = (tags, out);
    collect_walker(node, &mut ctx as *mut _ as *mut c_void);
}

unsafe fn first_arg_type(a: *mut pg_sys::Aggref) -> pg_sys::Oid {
    let l = (*a).aggargtypes;
    if l.is_null() || (*l).length == 0 {
        return pg_sys::InvalidOid;
    }
    (*(*l).elements).oid_value
}

/// The parameters of a release, evaluated before execution (constants and bind parameters).
unsafe fn params_of(found: &Found, qd: *mut pg_sys::QueryDesc) -> Paid {
    let func = found.kind.func();
    let mut args = (*found.aggref).args;
    if (*found.aggref).aggsplit & pg_sys::AGGSPLITOP_COMBINE != 0 {
        args = partial_aggref_args_in_plan(found.agg_plan, args).unwrap_or_else(|| {
            raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("{func}: cannot find the partial aggregate of a parallel plan"), None)
        });
    }
    let params = (*qd).params;
    let econtext = pg_sys::CreateStandaloneExprContext();
    (*econtext).ecxt_param_list_info = params;
    let names = found.kind.param_names();
    let vals = eval_param_exprs(args, econtext, func, |i| names.get(i).copied().unwrap_or("parameter"), |expr| {
        pg_sys::ExecInitExprWithParams(expr, params)
    });
    ParamValues::new(vals, func).paid(found.kind)
}

pub(crate) unsafe fn cstr_or(p: *const std::ffi::c_char, default: &str) -> String {
    if p.is_null() {
        default.to_string()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

unsafe fn charge_query(qd: *mut pg_sys::QueryDesc, rewindable: bool) {
    let stmt = (*qd).plannedstmt;
    if stmt.is_null() || (*stmt).planTree.is_null() {
        return;
    }
    let ext = pg_sys::get_extension_oid(c"pg_dp".as_ptr(), true);
    if ext == pg_sys::InvalidOid {
        return;
    }
    let mut w = Walk {
        stmt,
        pg_dp_ext: ext,
        kinds: HashMap::new(),
        walked_subplans: HashSet::new(),
        found: Vec::new(),
        windowed: Vec::new(),
    };
    w.plan((*stmt).planTree, false, false);
    // subplans that are neither InitPlans nor CTEs run once per outer row
    for id in 1..=list_iter::<c_void>((*stmt).subplans).count() as i32 {
        w.subplan(id, true, false);
    }
    if let Some(&k) = w.windowed.first() {
        raise_with(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!("{} cannot be used as a window function", k.func()),
            Some("each window frame would be a separate release; aggregate in a subquery instead"),
        );
    }
    if w.found.is_empty() {
        return;
    }
    let superuser = pg_sys::superuser();
    if (*qd).instrument_options != 0 && !superuser {
        raise_with(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            "pg_dp aggregates cannot run under EXPLAIN ANALYZE (or auto_explain.log_analyze) for non-superusers".into(),
            Some("the plan's row counts are exact; use EXPLAIN without ANALYZE"),
        );
    }
    if rewindable && (*(*stmt).planTree).type_ != pg_sys::NodeTag::T_Material {
        raise_with(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            "pg_dp aggregates cannot be used in a scrollable cursor".into(),
            Some("rewinding would release new values without paying; declare the cursor NO SCROLL"),
        );
    }
    for f in &w.found {
        let func = f.kind.func();
        if f.rescan {
            raise_with(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!("{func} cannot be used where it may be executed more than once per query"),
                Some("a DP aggregate in a correlated subquery, a lateral join or the inner side of a nested loop would release a new value at each execution; compute it once, e.g. in a WITH query"),
            );
        }
        if f.in_worker {
            raise_with(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!("{func} cannot be finalized inside a parallel worker"),
                Some("SET max_parallel_workers_per_gather = 0 for this query"),
            );
        }
        if let Some(why) = &f.input_problem {
            raise_with(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!("{func} must aggregate the rows of one table: its input {why}"),
                Some("aggregate one table (or a view over one table) filtered by simple conditions"),
            );
        }
    }
    ledger::require_preloaded("charge privacy budgets");
    let mut releases = Vec::with_capacity(w.found.len());
    let mut tickets = Vec::with_capacity(w.found.len());
    for f in &w.found {
        let func = f.kind.func();
        let params = params_of(f, qd);
        // validates every parameter before anything is charged
        let (info, details) = match params {
            Paid::Sum(p) => (Acc::new(p).or_raise(func).spec.describe(), String::from("{}")),
            Paid::Quantile(q) => {
                let spec = q.spec().or_raise(func);
                (spec.describe(), spec.details())
            }
        };
        let name = cstr_or(pg_sys::format_procedure((*f.aggref).aggfnoid), func);
        let delta = if info.delta > 0.0 { charged_decimal(info.delta) } else { "0".into() };
        for _ in 0..f.sets {
            releases.push(ReleaseRecord {
                aggregate: name.clone(),
                mechanism: info.mechanism.to_string(),
                sensitivity: info.sensitivity,
                noise_scale: info.scale,
                epsilon: charged_decimal(info.epsilon),
                delta: delta.clone(),
                details: details.clone(),
            });
        }
        tickets.push((f.aggref as usize, Ticket { query: qd as usize, params, single: f.single, releases: 0 }));
    }
    charge(releases, (*stmt).queryId as i64, cstr_or((*qd).sourceText, ""));
    TICKETS.with(|t| t.borrow_mut().extend(tickets));
}

/// Charges `releases` to the current role through the ledger worker (committed in its own
/// transaction) and returns once they are paid, or raises the refusal: no budget, the per-query cap,
/// exhaustion (nothing charged), or a failed debit.
/// Callers check `ledger::require_preloaded` first.
pub(crate) unsafe fn charge(releases: Vec<ReleaseRecord>, query_id: i64, query_text: String) {
    let role = pg_sys::GetUserId();
    let req = ChargeRequest {
        role: role.to_u32(),
        database_user: cstr_or(pg_sys::GetUserNameFromId(pg_sys::GetSessionUserId(), true), "?"),
        unlimited: pg_sys::superuser() || !REQUIRE_BUDGET.get(),
        query_id,
        query_text,
        releases,
    };
    match ledger::charge(&req) {
        ChargeOutcome::Granted { .. } => {}
        ChargeOutcome::Denied { reason, epsilon_remaining, delta_remaining } => refuse(&req, role, &reason, epsilon_remaining, delta_remaining),
        ChargeOutcome::Failed { message } => raise_with(
            PgSqlErrorCode::ERRCODE_SYSTEM_ERROR,
            format!("pg_dp: the ledger could not record the charge, nothing was charged: {message}"),
            None,
        ),
    }
}

unsafe fn refuse(req: &ChargeRequest, role: pg_sys::Oid, reason: &str, remaining: Option<String>, delta_remaining: Option<String>) -> ! {
    let name = cstr_or(pg_sys::GetUserNameFromId(role, true), "?");
    let need: Vec<&str> = req.releases.iter().map(|r| r.epsilon.as_str()).collect();
    let need = if need.len() == 1 { need[0].to_string() } else { need.join(" + ") };
    let remaining = remaining.unwrap_or_else(|| "0".into());
    if reason == "no budget" {
        raise_with(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("role \"{name}\" has no privacy budget"),
            Some(&format!("a superuser or a member of dp_admin can grant one: SELECT dp.grant_budget('{name}', 1.0)")),
        );
    }
    if let Some(cap) = reason.strip_prefix("cap:") {
        raise_with(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("query needs epsilon {need}, more than the per-query cap {cap} of role \"{name}\"; nothing was charged"),
            None,
        );
    }
    let deltas: Vec<&str> = req.releases.iter().map(|r| r.delta.as_str()).filter(|d| *d != "0").collect();
    let (need, remaining) = if deltas.is_empty() {
        (need, remaining)
    } else {
        let d = delta_remaining.unwrap_or_else(|| "0".into());
        (format!("{need} and delta {}", deltas.join(" + ")), format!("{remaining} (delta {d})"))
    };
    raise_with(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_RESOURCES,
        format!("privacy budget exhausted: query needs epsilon {need}, role \"{name}\" has {remaining} remaining; nothing was charged"),
        Some("dp.my_budget shows the remaining budget; a dp_admin member can grant more"),
    );
}

// dp.check_preloaded(): CREATE EXTENSION calls it, so that installing without preloading fails
// with a hint that says exactly what to add.
crate::pg_v1!(pg_finfo_dp_check_preloaded, dp_check_preloaded, |_fcinfo| {
    ledger::require_preloaded("install pg_dp");
    pgrx::fcinfo::pg_return_void()
});
