//! DP levels over Citus tables: exact partial aggregation on the workers, one charge and the noise
//! on the coordinator (docs/distributed.md, docs/privacy/distributed.md).
//!
//! After the grammar has admitted a level that reads a Citus table (and rewrite.rs has added its
//! privacy units and group selection), `rewrite` splits it in two:
//!
//! ```text
//! level:  SELECT <around keys and dp_agg(value, params)…> FROM <from> WHERE <w> GROUP BY <keys> HAVING <h>
//!
//! exact:  SELECT <keys>, ARRAY[Σ q, count(q), Σ (q − c)²]…              -- one array per DP aggregate
//!         FROM <from> WHERE <w> GROUP BY <keys> HAVING <h without aggregates>
//!         where q = dp.exact_grid(value, kind, lower, upper, ε): the row's value as the DP
//!         aggregate accumulates it (clamped, on its grid), and count(value) for dp_count; one
//!         call per row serves every aggregate on dp_sum's grid (dp_sum, dp_avg with bounds that
//!         hold 0), since PostgreSQL computes identical aggregate calls once
//! level': SELECT <around keys' and dp.merge_agg(exact array, params)…>
//!         FROM dp.distributed_rows('<exact as text>') AS dp_exact(keys', arrays…)
//!         GROUP BY <keys'> HAVING <h with merge aggregates>
//! ```
//!
//! - Citus plans the exact query like any other: built-in `sum` and `count` are aggregated partially
//!   on the workers and combined on the coordinator. Its rows never reach the caller: only the
//!   merge aggregates read them, and they rebuild each group's exact state and release it with the
//!   DP aggregate's own final function, its own tag, ticket and receipt. The level is charged once,
//!   on the coordinator, before the exact query runs (charge.rs, release.rs).
//! - The exact query runs as the bootstrap superuser, so that Citus opens its worker connections
//!   as a role the workers trust; a DP-only role connecting to a worker gets nothing from a shard
//!   (grammar.rs, protect.rs). Privileges on the tables are still checked for the caller (every
//!   relation of the exact query is checked as the caller), and nothing in it may run code with
//!   the superuser's rights: every function must be built in (and executable by the caller) or
//!   pg_dp's own (`engine_refusal`). `dp.distributed_rows` runs only the exact query of the DP
//!   Release node being executed, once.
//! - A quantile's state is its group's values: the exact query also groups by each quantile's value
//!   and writes ARRAY[value, count(value)] for it; `dp.merge_median` (…) pushes each value count
//!   times into the quantile's own state (quantile.rs). The other merge aggregates add up a group's
//!   rows, one per value.
//! - dp_sum and dp_avg without bounds keep a histogram of magnitude bins: the exact query groups by
//!   each row's bin too (`dp.exact_magnitude`) and writes ARRAY[bin, rows, Σ significands];
//!   `dp.merge_auto_*` add the bins into the histogram (autobounds.rs). Quantiles without bounds are
//!   merged like those with bounds.
//! - GROUPING SETS and subqueries around the aggregates are refused over Citus tables, before
//!   anything is charged.
use crate::pg::nodes::{collect_nodes, list_iter};
use crate::catalog::functions::{kind_of, Kind};
use crate::query::tree::split_and;
use crate::pg::error::{Check, Refusal};
use crate::pg::build::{aggref, copy, expr_type, float8_const, function, int_const, node, ptr_list, tle, var_for};
use pg_dp_core::description::{is_tag, DpLevel};
use pgrx::pg_sys::{self, Node, NodeTag, Oid, Query, RangeTblEntry};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_void, CStr};

thread_local! {
    static INTERNAL: RefCell<HashMap<Oid, bool>> = RefCell::new(HashMap::new());
}

/// True for pg_dp's functions that only its rewrite writes: the merge aggregates and
/// `dp.distributed_rows`. The grammar refuses them in queries.
pub fn is_internal(f: Oid) -> bool {
    if f.to_u32() < pg_sys::FirstNormalObjectId {
        return false;
    }
    if let Some(b) = INTERNAL.with(|m| m.borrow().get(&f).copied()) {
        return b;
    }
    let b = unsafe {
        let ext = pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, f);
        let name = pg_sys::get_func_name(f);
        ext != pg_sys::InvalidOid
            && !name.is_null()
            && CStr::from_ptr(pg_sys::get_extension_name(ext)).to_bytes() == b"pg_dp"
            && {
                let n = CStr::from_ptr(name).to_bytes();
                n == b"distributed_rows" || n.starts_with(b"merge_")
            }
    };
    INTERNAL.with(|m| m.borrow_mut().insert(f, b));
    b
}

pub unsafe fn internal_refusal(f: Oid) -> Refusal {
    Refusal::new(format!(
        "{} is internal to pg_dp's distributed execution: only pg_dp writes it",
        crate::query::tree::func_signature(f)
    ))
    .hint("call the DP aggregates (dp_count, dp_sum, dp_median, …) over the Citus table")
}

// ----- the rewrite --------------------------------------------------------------------------------

/// The value a DP aggregate call reads (its first argument).
unsafe fn value_of(a: *mut pg_sys::Aggref) -> *mut Node {
    (*list_iter::<pg_sys::TargetEntry>((*a).args).next().expect("a value")).expr as *mut Node
}

/// True if the call has bounds ([`Kind::has_bounds`]).
unsafe fn has_bounds(a: *mut pg_sys::Aggref, kind: Kind) -> bool {
    kind.has_bounds(crate::pg::nodes::list_len((*a).args))
}

/// A copy of the call's FILTER condition, or NULL.
unsafe fn filter_of(a: *mut pg_sys::Aggref) -> *mut Node {
    if (*a).aggfilter.is_null() { std::ptr::null_mut() } else { copy((*a).aggfilter as *mut Node) }
}

/// `ARRAY[elements]` of element type `elem`.
unsafe fn array_expr(elem: Oid, elements: &[*mut Node]) -> *mut Node {
    let arr = node::<pg_sys::ArrayExpr>(NodeTag::T_ArrayExpr);
    (*arr).array_typeid = pg_sys::get_array_type(elem);
    (*arr).array_collid = pg_sys::InvalidOid;
    (*arr).element_typeid = elem;
    (*arr).elements = ptr_list(elements);
    (*arr).multidims = false;
    (*arr).location = -1;
    arr as *mut Node
}

/// True for dp_sum and dp_avg without bounds, whose state is a histogram of binary magnitudes.
unsafe fn is_auto_sum(a: *mut pg_sys::Aggref, kind: Kind) -> bool {
    matches!(kind, Kind::IntSum | Kind::FloatSum | Kind::Avg) && !has_bounds(a, kind)
}

/// `dp.exact_magnitude(value, significand)`: the row's magnitude bin, or its significand.
unsafe fn magnitude(value: *mut Node, significand: bool) -> *mut Node {
    let f = function(Some("dp"), "exact_magnitude", &[pg_sys::ANYOID, pg_sys::BOOLOID]);
    func_call(f, pg_sys::INT8OID, &[copy(value), pg_sys::makeBoolConst(significand, false) as *mut Node])
}

/// What the exact query groups by besides the level's keys for this call, if anything: a
/// quantile's value (its state is the values), the magnitude bin of a sum or mean without bounds
/// (its state is a histogram of bins).
unsafe fn value_key(a: *mut pg_sys::Aggref, kind: Kind) -> Option<*mut Node> {
    if kind.is_quantile() {
        Some(copy(value_of(a)))
    } else if is_auto_sum(a, kind) {
        Some(magnitude(value_of(a), false))
    } else {
        None
    }
}

/// The name of the merge aggregate of a DP aggregate call.
unsafe fn merge_name(a: *mut pg_sys::Aggref, kind: Kind) -> String {
    if is_auto_sum(a, kind) {
        let t = match expr_type(value_of(a)) {
            pg_sys::INT2OID => "int2",
            pg_sys::INT4OID => "int4",
            pg_sys::INT8OID => "int8",
            pg_sys::NUMERICOID => "numeric",
            _ => "float8",
        };
        return format!("merge_auto_{}_{t}", if kind == Kind::Avg { "avg" } else { "sum" });
    }
    merge_name_of(kind).into()
}

fn merge_name_of(kind: Kind) -> &'static str {
    match kind {
        Kind::Count => "merge_count",
        Kind::IntSum | Kind::FloatSum => "merge_sum",
        Kind::Avg => "merge_avg",
        Kind::Variance => "merge_variance",
        Kind::Stddev => "merge_stddev",
        Kind::KeepGroup => "merge_keep_group",
        Kind::Median => "merge_median",
        Kind::Percentile => "merge_percentile",
        Kind::PercentileEm => "merge_percentile_em",
    }
}

/// The kind code of `dp.exact_grid` (the parameters' kind byte, pg_dp_core::mechanisms::accum::Params).
fn grid_code(kind: Kind) -> i64 {
    match kind {
        Kind::IntSum => 1,
        Kind::FloatSum => 2,
        Kind::Avg => 3,
        Kind::Variance => 4,
        Kind::Stddev => 5,
        _ => 0,
    }
}

/// Whether dp_avg with these bounds puts values on dp_sum's grid: only known for constant bounds.
unsafe fn avg_on_sum_grid(lower: *mut Node, upper: *mut Node) -> bool {
    let value = |e: *mut Node| -> Option<f64> {
        // `0` is an int4 constant cast to float8 until the planner folds it
        let e = pg_sys::eval_const_expressions(std::ptr::null_mut(), copy(e));
        if (*e).type_ != NodeTag::T_Const || (*(e as *mut pg_sys::Const)).constisnull {
            return None;
        }
        let c = e as *mut pg_sys::Const;
        match (*c).consttype {
            pg_sys::FLOAT8OID => Some(f64::from_bits((*c).constvalue.value() as u64)),
            pg_sys::NUMERICOID => Some(crate::pg::fmgr::numeric_datum_f64((*c).constvalue)),
            _ => None,
        }
    };
    let (Some(l), Some(u)) = (value(lower), value(upper)) else { return false };
    let Ok((l, u)) = pg_dp_core::params::check_float_bounds(l, u) else { return false };
    let (a, s) = (pg_dp_core::mechanisms::avg_grid(l, u), pg_dp_core::mechanisms::sum_grid(l, u));
    (a.exp, a.q_lower, a.q_upper) == (s.exp, s.q_lower, s.q_upper)
}

unsafe fn numeric_zero() -> *mut Node {
    let d = pg_sys::Datum::from(pg_sys::int64_to_numeric(0));
    pg_sys::makeConst(pg_sys::NUMERICOID, -1, pg_sys::InvalidOid, -1, d, false, false) as *mut Node
}

unsafe fn func_call(f: Oid, rettype: Oid, args: &[*mut Node]) -> *mut Node {
    pg_sys::makeFuncExpr(f, rettype, ptr_list(args), pg_sys::InvalidOid, pg_sys::InvalidOid, pg_sys::CoercionForm::COERCE_EXPLICIT_CALL) as *mut Node
}

/// `coalesce(e, 0)` for a numeric `e`.
unsafe fn or_zero(e: *mut Node) -> *mut Node {
    let c = node::<pg_sys::CoalesceExpr>(NodeTag::T_CoalesceExpr);
    (*c).coalescetype = pg_sys::NUMERICOID;
    (*c).coalescecollid = pg_sys::InvalidOid;
    (*c).args = ptr_list(&[e, numeric_zero()]);
    (*c).location = -1;
    c as *mut Node
}

/// The exact array of one DP aggregate: ARRAY[Σ q, count, Σ (q − c)²] as numeric[].
unsafe fn exact_array(a: *mut pg_sys::Aggref, kind: Kind) -> *mut Node {
    let args: Vec<*mut Node> = list_iter::<pg_sys::TargetEntry>((*a).args).map(|t| (*t).expr as *mut Node).collect();
    if kind.is_quantile() {
        return quantile_array(a, args[0]);
    }
    if is_auto_sum(a, kind) {
        return magnitude_array(a, args[0]);
    }
    let count_any = function(Some("pg_catalog"), "count", &[pg_sys::ANYOID]);
    let to_numeric = function(Some("pg_catalog"), "numeric", &[pg_sys::INT8OID]);
    let sum_int8 = function(Some("pg_catalog"), "sum", &[pg_sys::INT8OID]);
    let count_with = |v: *mut Node, f: *mut Node| func_call(to_numeric, pg_sys::NUMERICOID, &[aggref(count_any, pg_sys::INT8OID, &[v], f, false) as *mut Node]);
    let counted = |v: *mut Node| count_with(v, filter_of(a));
    let elements = match kind {
        Kind::Count | Kind::KeepGroup => vec![numeric_zero(), counted(copy(args[0])), numeric_zero()],
        _ => {
            let grid = function(Some("dp"), "exact_grid", &[pg_sys::ANYOID, pg_sys::INT4OID, pg_sys::ANYOID, pg_sys::ANYOID, pg_sys::FLOAT8OID, pg_sys::BOOLOID]);
            // dp_sum's grid value of a real value, written one way (dp_sum's kind, ε = 1, which the
            // grid does not depend on), so that PostgreSQL computes it once per row for every
            // aggregate of the level that sums it: dp_sum, and dp_avg with the same bounds where
            // its grid is dp_sum's
            let shared = match kind {
                Kind::FloatSum => true,
                Kind::Avg => avg_on_sum_grid(args[1], args[2]),
                _ => false,
            };
            let q = |squared: bool| {
                let (code, eps) = if shared && !squared { (grid_code(Kind::FloatSum), float8_const(1.0)) } else { (grid_code(kind), copy(args[3])) };
                func_call(grid, pg_sys::INT8OID, &[
                    copy(args[0]),
                    int_const(pg_sys::INT4OID, code),
                    copy(args[1]),
                    copy(args[2]),
                    eps,
                    pg_sys::makeBoolConst(squared, false) as *mut Node,
                ])
            };
            let sum = |e: *mut Node| or_zero(aggref(sum_int8, pg_sys::NUMERICOID, &[e], filter_of(a), false) as *mut Node);
            let sq = if matches!(kind, Kind::Variance | Kind::Stddev) { sum(q(true)) } else { numeric_zero() };
            // the rows the aggregate adds: its non-NULL values, but NaN (skipped like NULL); counted
            // without a second call of dp.exact_grid (identical counts are computed once)
            let v = args[0];
            let n = match expr_type(v) {
                // dp_sum releases the sum alone: its count is not computed
                _ if matches!(kind, Kind::IntSum | Kind::FloatSum) => numeric_zero(),
                t @ (pg_sys::FLOAT8OID | pg_sys::NUMERICOID) => {
                    let nan = pg_sys::OidInputFunctionCall(if t == pg_sys::FLOAT8OID { Oid::from(pg_sys::F_FLOAT8IN) } else { Oid::from(pg_sys::F_NUMERIC_IN) }, c"NaN".as_ptr().cast_mut(), pg_sys::InvalidOid, -1);
                    let len = if t == pg_sys::FLOAT8OID { 8 } else { -1 };
                    let nan = pg_sys::makeConst(t, -1, pg_sys::InvalidOid, len, nan, false, t == pg_sys::FLOAT8OID) as *mut Node;
                    let not_nan = crate::pg::build::op_expr(crate::pg::build::operator("<>", t, t), copy(v), nan, pg_sys::InvalidOid);
                    count_with(copy(v), pg_sys::make_and_qual(filter_of(a), not_nan))
                }
                _ => counted(copy(v)),
            };
            vec![sum(q(false)), n, sq]
        }
    };
    array_expr(pg_sys::NUMERICOID, &elements)
}

/// The exact array of a quantile over `value`, which the exact query also groups by: ARRAY[value,
/// count(value)] of the group's rows with that value (float8[] for a float8 value, int8[] for an
/// integer one). NaN and NULL are counted or not as they come; the merge skips both, as the quantile
/// does.
unsafe fn quantile_array(a: *mut pg_sys::Aggref, value: *mut Node) -> *mut Node {
    let count_any = function(Some("pg_catalog"), "count", &[pg_sys::ANYOID]);
    let count = aggref(count_any, pg_sys::INT8OID, &[copy(value)], filter_of(a), false) as *mut Node;
    // the value as an aggregate of its rows (all equal): Citus splits a grouped expression written
    // outside an aggregate into the columns it reads, which are not grouped
    let t = expr_type(value);
    let min = aggref(function(Some("pg_catalog"), "min", &[t]), t, &[copy(value)], std::ptr::null_mut(), false) as *mut Node;
    let (elem, elements) = match t {
        pg_sys::FLOAT8OID => {
            let to_float8 = function(Some("pg_catalog"), "float8", &[pg_sys::INT8OID]);
            (pg_sys::FLOAT8OID, vec![min, func_call(to_float8, pg_sys::FLOAT8OID, &[count])])
        }
        pg_sys::INT8OID => (pg_sys::INT8OID, vec![min, count]),
        t => {
            let to_int8 = function(Some("pg_catalog"), "int8", &[t]);
            (pg_sys::INT8OID, vec![func_call(to_int8, pg_sys::INT8OID, &[min]), count])
        }
    };
    array_expr(elem, &elements)
}

/// The exact array of dp_sum or dp_avg without bounds over `value`, whose magnitude bin the exact
/// query also groups by: ARRAY[bin, rows, Σ significands] of the group's rows in that bin (NaN and
/// NULL have no bin: their row's bin is NULL, and the merge skips it).
unsafe fn magnitude_array(a: *mut pg_sys::Aggref, value: *mut Node) -> *mut Node {
    let sum_int8 = function(Some("pg_catalog"), "sum", &[pg_sys::INT8OID]);
    let to_numeric = function(Some("pg_catalog"), "numeric", &[pg_sys::INT8OID]);
    // the bin as an aggregate of its rows (all alike): Citus splits a grouped expression written
    // outside an aggregate into the columns it reads, which are not grouped
    let min_int8 = function(Some("pg_catalog"), "min", &[pg_sys::INT8OID]);
    let bin = func_call(to_numeric, pg_sys::NUMERICOID, &[aggref(min_int8, pg_sys::INT8OID, &[magnitude(value, false)], std::ptr::null_mut(), false) as *mut Node]);
    // count(*): the row of the NULL bin (NULL and NaN values) is skipped by the merge
    let count_star = function(Some("pg_catalog"), "count", &[]);
    let rows = func_call(to_numeric, pg_sys::NUMERICOID, &[aggref(count_star, pg_sys::INT8OID, &[], filter_of(a), true) as *mut Node]);
    let significands = or_zero(aggref(sum_int8, pg_sys::NUMERICOID, &[magnitude(value, true)], filter_of(a), false) as *mut Node);
    array_expr(pg_sys::NUMERICOID, &[bin, rows, significands])
}

struct Swap {
    keys: Vec<*mut Node>,
    key_vars: Vec<*mut Node>,
    /// tag → merge aggregate call
    merges: Vec<(i32, *mut pg_sys::Aggref)>,
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn swap_mutator(n: *mut Node, ctx: *mut c_void) -> *mut Node {
    if n.is_null() {
        return n;
    }
    let m = &mut *(ctx as *mut Swap);
    for (k, v) in m.keys.iter().zip(&m.key_vars) {
        if pg_sys::equal(n as *const c_void, *k as *const c_void) {
            return copy(*v);
        }
    }
    if (*n).type_ == NodeTag::T_Aggref {
        let a = n as *mut pg_sys::Aggref;
        if let Some((_, merge)) = m.merges.iter().find(|(t, _)| *t == (*a).location) {
            return copy(*merge) as *mut Node;
        }
    }
    let f: unsafe extern "C-unwind" fn() -> *mut Node =
        std::mem::transmute(swap_mutator as unsafe extern "C-unwind" fn(*mut Node, *mut c_void) -> *mut Node);
    pg_sys::expression_tree_mutator(n, Some(f), ctx)
}

/// True if `e` reads a column of its own level (varlevelsup 0) other than one of range table entry 1.
unsafe fn reads_old_columns(e: *mut Node) -> bool {
    let mut vars: Vec<*mut Node> = Vec::new();
    collect_nodes(e, &[NodeTag::T_Var], &mut vars);
    vars.iter().any(|v| {
        let v = *v as *mut pg_sys::Var;
        (*v).varlevelsup == 0 && (*v).varno != 1
    })
}

/// Splits an admitted level over a Citus table into its exact query and the level that releases
/// it (see the module comment). Refusals depend only on the query.
pub unsafe fn rewrite(q: *mut Query, level: &mut DpLevel) -> Check<()> {
    let table = level.source.name.clone();
    crate::query::tree::flatten_join_aliases(q);
    let mut found: Vec<*mut Node> = Vec::new();
    collect_nodes((*q).targetList as *mut Node, &[NodeTag::T_Aggref], &mut found);
    collect_nodes((*q).havingQual, &[NodeTag::T_Aggref], &mut found);
    let mut calls: Vec<(*mut pg_sys::Aggref, Kind)> = Vec::new();
    for n in found {
        let a = n as *mut pg_sys::Aggref;
        if (*a).agglevelsup != 0 || !is_tag((*a).location) {
            continue;
        }
        let Some(kind) = kind_of((*a).aggfnoid, crate::catalog::functions::first_arg_type(a)) else { continue };
        if !matches!(kind, Kind::Count | Kind::KeepGroup) && !has_bounds(a, kind) && !crate::catalog::functions::has_automatic_bounds(kind) {
            return Err(Refusal::new(format!("{} without bounds over Citus table {table}: automatic bounds are not computed over distributed tables", kind.func()))
                .hint("pass lower and upper, or declare the column's bounds with dp.set_bounds"));
        }
        if !calls.iter().any(|(c, _)| (**c).location == (*a).location) {
            calls.push((a, kind));
        }
    }
    if !(*q).groupingSets.is_null() {
        return Err(Refusal::new(format!("GROUPING SETS, ROLLUP or CUBE over Citus table {table}: not computed over distributed tables"))
            .hint("run one query per grouping set"));
    }
    if (*q).hasSubLinks {
        return Err(Refusal::new(format!("a subquery next to DP aggregates over Citus table {table}"))
            .hint("compute it in an outer query"));
    }
    // the exact part runs on the workers as SQL text, with PostgreSQL's own operators: arithmetic
    // made total below the aggregates (arithmetic.rs) would raise its errors there again
    let below_keys: Vec<*mut Node> = crate::query::tree::group_keys(q).iter().map(|(e, _)| *e).collect();
    let below_aggs = calls.iter().any(|(a, _)| {
        crate::query::arithmetic::has_total_form((**a).args as *mut Node) || crate::query::arithmetic::has_total_form((**a).aggfilter as *mut Node)
    });
    if below_aggs
        || crate::query::arithmetic::has_total_form((*q).jointree as *mut Node)
        || below_keys.iter().any(|k| crate::query::arithmetic::has_total_form(*k))
    {
        return Err(Refusal::new(format!("arithmetic below a DP aggregate over Citus table {table}: not yet computed over distributed tables"))
            .hint("aggregate the columns themselves, and combine the released values in the select list"));
    }
    let keys = crate::query::tree::group_keys(q);

    // ---- the exact query
    let exact = copy(q);
    let (mut etles, egroup) = crate::query::tree::keys_as_first_columns(&keys);
    let nkeys = keys.len();
    for (j, (a, kind)) in calls.iter().enumerate() {
        etles.push(tle(exact_array(*a, *kind), nkeys + j + 1, &format!("dp_exact{}", j + 1), 0, false));
    }
    // a quantile needs the group's values, a sum without bounds its magnitude bins: the exact query
    // groups by them too (one row per group and value or bin), and every merge aggregate adds up its
    // group's rows
    let mut egroup = egroup;
    let mut values: Vec<*mut Node> = Vec::new();
    for (a, kind) in &calls {
        if let Some(v) = value_key(*a, *kind) {
            if !values.iter().any(|w| pg_sys::equal(*w as *const c_void, v as *const c_void)) {
                values.push(v);
            }
        }
    }
    for (i, v) in values.iter().enumerate() {
        let sgref = (nkeys + calls.len() + i + 1) as u32;
        etles.push(tle(copy(*v), etles.len() + 1, &format!("dp_value{}", i + 1), sgref, false));
        egroup.push(crate::pg::build::group_clause(expr_type(*v), sgref));
    }
    let mut having = Vec::new();
    split_and((*q).havingQual, &mut having);
    let mut exact_having: *mut Node = std::ptr::null_mut();
    let mut outer_having: Vec<*mut Node> = Vec::new();
    for h in having {
        if crate::query::tree::has_level_aggregate(h)? {
            outer_having.push(h);
        } else {
            exact_having = pg_sys::make_and_qual(exact_having, copy(h));
        }
    }
    (*exact).targetList = ptr_list(&etles);
    (*exact).groupClause = ptr_list(&egroup);
    (*exact).havingQual = exact_having;
    (*exact).hasAggs = true;
    crate::query::tree::only_rows_and_aggregation(exact);
    (*exact).utilityStmt = std::ptr::null_mut();
    (*exact).canSetTag = true;
    // privileges are checked for the caller, though the exact query runs as the superuser
    check_as(exact, pg_sys::GetUserId());
    if let Some(why) = engine_refusal(exact) {
        return Err(Refusal::new(format!("{why} in a DP query over Citus table {table}: the coordinator runs its exact part with pg_dp's own rights"))
            .hint("docs/distributed.md lists what runs over Citus tables"));
    }
    let text_ptr = pg_sys::nodeToString(exact as *const c_void);
    let text = CStr::from_ptr(text_ptr).to_string_lossy().into_owned();
    // Citus plans it now, so that a shape it cannot run is an error before anything is charged
    crate::catalog::protect::as_bootstrap_superuser(|| {
        let probe = pg_sys::stringToNode(text_ptr) as *mut Query;
        crate::pg::planning::plan_with_next(probe, text_ptr, 0, std::ptr::null_mut());
    });

    // ---- the level, over the exact rows
    let mut colnames = Vec::new();
    let mut coltypes = Vec::new();
    let mut coltypmods = Vec::new();
    let mut colcolls = Vec::new();
    for t in &etles {
        let e = (**t).expr as *mut Node;
        colnames.push(pg_sys::makeString((**t).resname) as *mut Node);
        coltypes.push(pg_sys::exprType(e));
        coltypmods.push(pg_sys::exprTypmod(e));
        colcolls.push(pg_sys::exprCollation(e));
    }
    let text_const = pg_sys::makeConst(
        pg_sys::TEXTOID,
        -1,
        pg_sys::DEFAULT_COLLATION_OID.into(),
        -1,
        pg_sys::Datum::from(pg_sys::cstring_to_text(text_ptr)),
        false,
        false,
    ) as *mut Node;
    let rows_fn = function(Some("dp"), "distributed_rows", &[pg_sys::TEXTOID]);
    let call = pg_sys::makeFuncExpr(rows_fn, pg_sys::RECORDOID, ptr_list(&[text_const]), pg_sys::InvalidOid, pg_sys::InvalidOid, pg_sys::CoercionForm::COERCE_EXPLICIT_CALL);
    (*call).funcretset = true;
    let rtf = node::<pg_sys::RangeTblFunction>(NodeTag::T_RangeTblFunction);
    (*rtf).funcexpr = call as *mut Node;
    (*rtf).funccolcount = etles.len() as i32;
    (*rtf).funccolnames = ptr_list(&colnames);
    (*rtf).funccoltypes = crate::pg::build::oid_list(&coltypes);
    (*rtf).funccoltypmods = coltypmods.iter().fold(std::ptr::null_mut(), |l, m| pg_sys::lappend_int(l, *m));
    (*rtf).funccolcollations = crate::pg::build::oid_list(&colcolls);
    let rte = node::<RangeTblEntry>(NodeTag::T_RangeTblEntry);
    (*rte).rtekind = pg_sys::RTEKind::RTE_FUNCTION;
    (*rte).functions = ptr_list(&[rtf]);
    (*rte).eref = pg_sys::makeAlias(c"dp_exact".as_ptr(), ptr_list(&colnames));
    (*rte).inFromCl = true;
    (*rte).inh = false;

    let key_vars: Vec<*mut Node> = keys.iter().enumerate().map(|(i, (e, _))| var_for(1, (i + 1) as i16, *e)).collect();
    let mut merges = Vec::new();
    for (j, (a, kind)) in calls.iter().enumerate() {
        let exact_type = pg_sys::exprType((*etles[nkeys + j]).expr as *mut Node);
        let exact_var = pg_sys::makeVar(1, (nkeys + j + 1) as i16, exact_type, -1, pg_sys::InvalidOid, 0) as *mut Node;
        let params: Vec<*mut Node> = list_iter::<pg_sys::TargetEntry>((**a).args).skip(1).map(|t| copy((*t).expr as *mut Node)).collect();
        let mut declared = vec![exact_type];
        {
            let mut types: *mut Oid = std::ptr::null_mut();
            let mut n: i32 = 0;
            pg_sys::get_func_signature((**a).aggfnoid, &mut types, &mut n);
            declared.extend((1..n as usize).map(|i| *types.add(i)));
        }
        let merge_fn = function(Some("dp"), &merge_name(*a, *kind), &declared);
        let mut args = vec![exact_var];
        args.extend(params);
        let m = aggref(merge_fn, (**a).aggtype, &args, std::ptr::null_mut(), false);
        (*m).location = (**a).location;
        merges.push(((**a).location, m));
    }
    let mut swap = Swap { keys: keys.iter().map(|(e, _)| *e).collect(), key_vars, merges };
    let ctx = &mut swap as *mut Swap as *mut c_void;
    (*q).targetList = swap_mutator((*q).targetList as *mut Node, ctx) as *mut pg_sys::List;
    let mut new_having: *mut Node = std::ptr::null_mut();
    for h in outer_having {
        new_having = pg_sys::make_and_qual(new_having, swap_mutator(h, ctx));
    }
    (*q).havingQual = new_having;
    if reads_old_columns((*q).targetList as *mut Node) || reads_old_columns((*q).havingQual) {
        return Err(Refusal::new(format!(
            "a column of {table} next to a DP aggregate that is neither a GROUP BY key nor inside the aggregate"
        ))
        .hint("group by the expression itself, or compute it in an outer query"));
    }
    (*q).rtable = ptr_list(&[rte]);
    (*q).jointree = pg_sys::makeFromExpr(ptr_list(&[crate::pg::build::range_ref(1)]), std::ptr::null_mut());
    (*q).rowMarks = std::ptr::null_mut();
    (*q).constraintDeps = std::ptr::null_mut();
    level.exact_query = Some(text);
    Ok(())
}

/// Sets every relation of `q` (at any depth) to be checked for `user`, unless a view already set
/// its owner.
unsafe fn check_as(q: *mut Query, user: Oid) {
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walker(n: *mut Node, ctx: *mut c_void) -> bool {
        if n.is_null() {
            return false;
        }
        if (*n).type_ == NodeTag::T_Query {
            let q = n as *mut Query;
            let user = Oid::from(ctx as usize as u32);
            for rte in list_iter::<RangeTblEntry>((*q).rtable) {
                if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION && (*rte).checkAsUser == pg_sys::InvalidOid {
                    (*rte).checkAsUser = user;
                }
            }
            return pg_sys::query_tree_walker(q, Some(walker), ctx, 0);
        }
        pg_sys::expression_tree_walker(n, Some(walker), ctx)
    }
    walker(q as *mut Node, user.to_u32() as usize as *mut c_void);
}

/// What in the exact query could run code with the superuser's rights, if anything: a function
/// (or operator, aggregate, window function) that is neither built in and executable by the caller
/// nor pg_dp's own, a user-defined domain (its constraints run functions), or a relation that is
/// not a table or materialized view (a foreign table would connect with the superuser's mapping).
unsafe fn engine_refusal(q: *mut Query) -> Option<String> {
    struct Walk {
        user: Oid,
        why: Option<String>,
    }
    unsafe fn function_ok(w: &Walk, f: Oid) -> bool {
        if f == pg_sys::InvalidOid {
            return true;
        }
        if f.to_u32() >= pg_sys::FirstNormalObjectId {
            let ext = pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, f);
            return ext != pg_sys::InvalidOid && CStr::from_ptr(pg_sys::get_extension_name(ext)).to_bytes() == b"pg_dp";
        }
        pg_sys::pg_proc_aclcheck(f, w.user, pg_sys::ACL_EXECUTE as pg_sys::AclMode) == pg_sys::AclResult::ACLCHECK_OK
    }
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walker(n: *mut Node, ctx: *mut c_void) -> bool {
        if n.is_null() {
            return false;
        }
        let w = &mut *(ctx as *mut Walk);
        if pg_sys::stack_is_too_deep() {
            w.why = Some("an expression nested too deeply".into());
            return true;
        }
        let refuse = |w: &mut Walk, why: String| {
            w.why = Some(why);
            true
        };
        match (*n).type_ {
            NodeTag::T_Query => {
                let q = n as *mut Query;
                for rte in list_iter::<RangeTblEntry>((*q).rtable) {
                    if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION
                        && ![pg_sys::RELKIND_RELATION, pg_sys::RELKIND_PARTITIONED_TABLE, pg_sys::RELKIND_MATVIEW].contains(&((*rte).relkind as u8))
                    {
                        return refuse(w, format!("relation {}", crate::catalog::protect::relation_short_name((*rte).relid)));
                    }
                }
                return pg_sys::query_tree_walker(q, Some(walker), ctx, 0);
            }
            NodeTag::T_FuncExpr => {
                let f = (*(n as *mut pg_sys::FuncExpr)).funcid;
                if !function_ok(w, f) {
                    return refuse(w, format!("function {}", crate::query::tree::func_signature(f)));
                }
            }
            NodeTag::T_OpExpr | NodeTag::T_DistinctExpr | NodeTag::T_NullIfExpr => {
                let o = n as *mut pg_sys::OpExpr;
                pg_sys::set_opfuncid(o);
                if !function_ok(w, (*o).opfuncid) {
                    return refuse(w, format!("operator {}", crate::query::tree::func_signature((*o).opfuncid)));
                }
            }
            NodeTag::T_ScalarArrayOpExpr => {
                let o = n as *mut pg_sys::ScalarArrayOpExpr;
                pg_sys::set_sa_opfuncid(o);
                if !function_ok(w, (*o).opfuncid) {
                    return refuse(w, format!("operator {}", crate::query::tree::func_signature((*o).opfuncid)));
                }
            }
            NodeTag::T_RowCompareExpr => {
                for op in crate::pg::nodes::list_oids((*(n as *mut pg_sys::RowCompareExpr)).opnos) {
                    if !function_ok(w, pg_sys::get_opcode(op)) {
                        return refuse(w, "a row comparison".into());
                    }
                }
            }
            NodeTag::T_Aggref => {
                let f = (*(n as *mut pg_sys::Aggref)).aggfnoid;
                if !function_ok(w, f) {
                    return refuse(w, format!("aggregate {}", crate::query::tree::func_signature(f)));
                }
            }
            NodeTag::T_WindowFunc => {
                let f = (*(n as *mut pg_sys::WindowFunc)).winfnoid;
                if !function_ok(w, f) {
                    return refuse(w, format!("window function {}", crate::query::tree::func_signature(f)));
                }
            }
            NodeTag::T_CoerceToDomain => {
                if (*(n as *mut pg_sys::CoerceToDomain)).resulttype.to_u32() >= pg_sys::FirstNormalObjectId {
                    return refuse(w, "a user-defined domain".into());
                }
            }
            NodeTag::T_SQLValueFunction => return refuse(w, "a session value (CURRENT_USER and the like)".into()),
            _ => {}
        }
        pg_sys::expression_tree_walker(n, Some(walker), ctx)
    }
    let mut w = Walk { user: pg_sys::GetUserId(), why: None };
    walker(q as *mut Node, &mut w as *mut Walk as *mut c_void);
    w.why
}
