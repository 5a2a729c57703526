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
use super::agg::{partial_aggref_args_in_plan, ParamValues};
use super::error::{raise_with, OrRaise};
use super::ledger;
use pg_dp_core::accounting::{charged_decimal, ChargeOutcome, ChargeRequest, ReleaseRecord};
use pg_dp_core::accum::{Acc, Params};
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
    epsilon_bits: u64,
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
    let explain_only = eflags as u32 & pg_sys::EXEC_FLAG_EXPLAIN_ONLY != 0;
    if !explain_only && !in_parallel_worker() {
        charge_query(qd);
    }
    match PREV_EXECUTOR_START {
        Some(prev) => prev(qd, eflags),
        None => pg_sys::standard_ExecutorStart(qd, eflags),
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
pub unsafe fn check_ticket(fcinfo: pg_sys::FunctionCallInfo, func: &'static str, acc: &Acc) {
    if in_parallel_worker() {
        raise_with(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!("{func} cannot release a value inside a parallel worker"),
            Some("SET max_parallel_workers_per_gather = 0 for this query"),
        );
    }
    let aggref = pg_sys::AggGetAggref(fcinfo) as usize;
    let eps = acc.spec.epsilon().to_bits();
    let ok = TICKETS.with(|t| {
        let mut t = t.borrow_mut();
        match t.get_mut(&aggref) {
            Some(tk) if tk.epsilon_bits == eps && !(tk.single && tk.releases > 0) => {
                tk.releases += 1;
                Ok(())
            }
            Some(tk) if tk.epsilon_bits != eps => Err("its epsilon differs from the one paid for"),
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

/// A pg_dp aggregate, identified from its OID.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Count,
    IntSum,
    FloatSum,
    Avg,
}

struct Found {
    aggref: *mut pg_sys::Aggref,
    agg_plan: *mut pg_sys::Plan,
    kind: Kind,
    rescan: bool,
    in_worker: bool,
    single: bool,
    /// number of grouping sets: each row belongs to one group per set
    sets: usize,
}

struct Walk {
    stmt: *mut pg_sys::PlannedStmt,
    pg_dp_ext: pg_sys::Oid,
    kinds: HashMap<pg_sys::Oid, Option<Kind>>,
    walked_subplans: HashSet<i32>,
    found: Vec<Found>,
}

unsafe fn list_iter<T>(list: *mut pg_sys::List) -> impl Iterator<Item = *mut T> {
    let n = if list.is_null() { 0 } else { (*list).length };
    (0..n).map(move |i| pg_sys::list_nth(list, i) as *mut T)
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
            pg_sys::NodeTag::T_Append => {
                for p in list_iter::<pg_sys::Plan>((*(plan as *mut pg_sys::Append)).appendplans) {
                    self.plan(p, rescan, in_worker);
                }
            }
            pg_sys::NodeTag::T_MergeAppend => {
                for p in list_iter::<pg_sys::Plan>((*(plan as *mut pg_sys::MergeAppend)).mergeplans) {
                    self.plan(p, rescan, in_worker);
                }
            }
            pg_sys::NodeTag::T_BitmapAnd => {
                for p in list_iter::<pg_sys::Plan>((*(plan as *mut pg_sys::BitmapAnd)).bitmapplans) {
                    self.plan(p, rescan, in_worker);
                }
            }
            pg_sys::NodeTag::T_BitmapOr => {
                for p in list_iter::<pg_sys::Plan>((*(plan as *mut pg_sys::BitmapOr)).bitmapplans) {
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
        let mut aggrefs: Vec<*mut pg_sys::Aggref> = Vec::new();
        collect_aggrefs((*plan).targetlist as *mut pg_sys::Node, &mut aggrefs);
        collect_aggrefs((*plan).qual as *mut pg_sys::Node, &mut aggrefs);
        let agg = plan as *mut pg_sys::Agg;
        let single = (*agg).aggstrategy == pg_sys::AggStrategy::AGG_PLAIN;
        // GROUPING SETS / ROLLUP / CUBE: every row is in one group of each set (the sets of a
        // chained Agg included), so each set is a separate release of the aggregate
        let mut sets = list_iter::<c_void>((*agg).groupingSets).count();
        for c in list_iter::<pg_sys::Agg>((*agg).chain) {
            sets += list_iter::<c_void>((*c).groupingSets).count();
        }
        let sets = sets.max(1);
        for a in aggrefs {
            if (*a).aggsplit & pg_sys::AGGSPLITOP_SKIPFINAL != 0 {
                continue; // a partial aggregate releases nothing
            }
            let first_arg = first_arg_type(a);
            if let Some(kind) = self.kind_of((*a).aggfnoid, first_arg) {
                self.found.push(Found { aggref: a, agg_plan: plan, kind, rescan, in_worker, single, sets });
            }
        }
    }
}

unsafe fn first_arg_type(a: *mut pg_sys::Aggref) -> pg_sys::Oid {
    let l = (*a).aggargtypes;
    if l.is_null() || (*l).length == 0 {
        return pg_sys::InvalidOid;
    }
    (*(*l).elements).oid_value
}

unsafe extern "C-unwind" fn aggref_walker(node: *mut pg_sys::Node, ctx: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    if (*node).type_ == pg_sys::NodeTag::T_Aggref {
        (*(ctx as *mut Vec<*mut pg_sys::Aggref>)).push(node as *mut pg_sys::Aggref);
        return false; // arguments of an aggregate hold no releases of this node
    }
    pg_sys::expression_tree_walker(node, Some(aggref_walker), ctx)
}

unsafe fn collect_aggrefs(node: *mut pg_sys::Node, out: &mut Vec<*mut pg_sys::Aggref>) {
    if !node.is_null() {
        aggref_walker(node, out as *mut _ as *mut c_void);
    }
}

/// True if the expression needs row data or execution-time values (Var, PARAM_EXEC, SubPlan).
unsafe extern "C-unwind" fn needs_execution_walker(node: *mut pg_sys::Node, _ctx: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    match (*node).type_ {
        pg_sys::NodeTag::T_Var | pg_sys::NodeTag::T_SubPlan | pg_sys::NodeTag::T_AlternativeSubPlan => true,
        pg_sys::NodeTag::T_Param => (*(node as *mut pg_sys::Param)).paramkind != pg_sys::ParamKind::PARAM_EXTERN,
        _ => pg_sys::expression_tree_walker(node, Some(needs_execution_walker), _ctx),
    }
}

/// Evaluates the parameter arguments (1..) of an aggregate before execution.
unsafe fn eval_params(args: *mut pg_sys::List, params: pg_sys::ParamListInfo, func: &'static str, names: &[&str]) -> Vec<(pg_sys::Datum, bool, pg_sys::Oid)> {
    let econtext = pg_sys::CreateStandaloneExprContext();
    (*econtext).ecxt_param_list_info = params;
    let mut out = Vec::new();
    for (i, te) in list_iter::<pg_sys::TargetEntry>(args).skip(1).enumerate() {
        let expr = (*te).expr;
        if needs_execution_walker(expr as *mut pg_sys::Node, std::ptr::null_mut()) || pg_sys::contain_volatile_functions(expr as *mut pg_sys::Node) {
            let name = names.get(i).copied().unwrap_or("parameter");
            raise_with(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("{func}: {name} must be the same for every row of one aggregate call"),
                Some("pass a constant or a query parameter, not a column, a subquery or a volatile expression"),
            );
        }
        let state = pg_sys::ExecInitExprWithParams(expr, params);
        let mut isnull = false;
        let eval = (*state).evalfunc.expect("compiled expression");
        let old = pg_sys::MemoryContextSwitchTo((*econtext).ecxt_per_query_memory);
        let d = eval(state, econtext, &mut isnull);
        pg_sys::MemoryContextSwitchTo(old);
        out.push((d, isnull, pg_sys::exprType(expr as *const pg_sys::Node)));
    }
    // the values stay valid: they live in the per-query memory of the caller's context
    out
}

fn func_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Count => "dp_count",
        Kind::IntSum | Kind::FloatSum => "dp_sum",
        Kind::Avg => "dp_avg",
    }
}

unsafe fn params_of(found: &Found, qd: *mut pg_sys::QueryDesc) -> Params {
    let func = func_name(found.kind);
    let mut args = (*found.aggref).args;
    if (*found.aggref).aggsplit & pg_sys::AGGSPLITOP_COMBINE != 0 {
        args = partial_aggref_args_in_plan(found.agg_plan, args).unwrap_or_else(|| {
            raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("{func}: cannot find the partial aggregate of a parallel plan"), None)
        });
    }
    let names: &[&str] = if found.kind == Kind::Count { &["epsilon"] } else { &["lower", "upper", "epsilon"] };
    let p = ParamValues::new(eval_params(args, (*qd).params, func, names), func);
    match found.kind {
        Kind::Count => Params::count(p.epsilon_at(0)),
        Kind::IntSum => Params::int_sum(p.i64_at(0, "lower"), p.i64_at(1, "upper"), p.epsilon_at(2)),
        Kind::FloatSum => Params::float_sum(p.f64_at(0, "lower"), p.f64_at(1, "upper"), p.epsilon_at(2)),
        Kind::Avg => Params::avg(p.f64_at(0, "lower"), p.f64_at(1, "upper"), p.epsilon_at(2)),
    }
}

unsafe fn cstr_or(p: *const std::ffi::c_char, default: &str) -> String {
    if p.is_null() {
        default.to_string()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

unsafe fn charge_query(qd: *mut pg_sys::QueryDesc) {
    let stmt = (*qd).plannedstmt;
    if stmt.is_null() || (*stmt).planTree.is_null() {
        return;
    }
    let ext = pg_sys::get_extension_oid(c"pg_dp".as_ptr(), true);
    if ext == pg_sys::InvalidOid {
        return;
    }
    let mut w = Walk { stmt, pg_dp_ext: ext, kinds: HashMap::new(), walked_subplans: HashSet::new(), found: Vec::new() };
    w.plan((*stmt).planTree, false, false);
    // subplans that are neither InitPlans nor CTEs run once per outer row
    for id in 1..=list_iter::<c_void>((*stmt).subplans).count() as i32 {
        w.subplan(id, true, false);
    }
    if w.found.is_empty() {
        return;
    }
    for f in &w.found {
        let func = func_name(f.kind);
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
    }
    ledger::require_preloaded("charge privacy budgets");
    let mut releases = Vec::with_capacity(w.found.len());
    let mut tickets = Vec::with_capacity(w.found.len());
    for f in &w.found {
        let func = func_name(f.kind);
        let params = params_of(f, qd);
        let acc = Acc::new(params).or_raise(func); // validates ε and bounds before anything is charged
        let info = acc.spec.describe();
        let name = cstr_or(pg_sys::format_procedure((*f.aggref).aggfnoid), func);
        for _ in 0..f.sets {
            releases.push(ReleaseRecord {
                aggregate: name.clone(),
                mechanism: info.mechanism.to_string(),
                sensitivity: info.sensitivity,
                noise_scale: info.scale,
                epsilon: charged_decimal(info.epsilon),
                delta: "0".into(),
            });
        }
        tickets.push((f.aggref as usize, Ticket { query: qd as usize, epsilon_bits: info.epsilon.to_bits(), single: f.single, releases: 0 }));
    }
    let role = pg_sys::GetUserId();
    let req = ChargeRequest {
        role: role.to_u32(),
        database_user: cstr_or(pg_sys::GetUserNameFromId(pg_sys::GetSessionUserId(), true), "?"),
        unlimited: pg_sys::superuser() || !REQUIRE_BUDGET.get(),
        query_id: (*stmt).queryId as i64,
        query_text: cstr_or((*qd).sourceText, ""),
        releases,
    };
    match ledger::charge(&req) {
        ChargeOutcome::Granted { .. } => {
            TICKETS.with(|t| t.borrow_mut().extend(tickets));
        }
        ChargeOutcome::Denied { reason, epsilon_remaining, .. } => refuse(&req, role, &reason, epsilon_remaining),
        ChargeOutcome::Failed { message } => raise_with(
            PgSqlErrorCode::ERRCODE_SYSTEM_ERROR,
            format!("pg_dp: the ledger could not record the charge, nothing was charged: {message}"),
            None,
        ),
    }
}

unsafe fn refuse(req: &ChargeRequest, role: pg_sys::Oid, reason: &str, remaining: Option<String>) -> ! {
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
