//! The DP Release plan node: one above each aggregation that computes an admitted DP level.
//!
//! After the planner has planned an admitted statement, `insert` wraps every finalizing Agg node
//! that computes tagged pg_dp aggregates in a custom scan node, "DP Release". The node
//! - carries the level's description (`pg_dp_core::description::DpLevel`, as JSON): the executor
//!   hook charges from it, and only the planner hook can create the node, so its presence is the
//!   proof that the grammar admitted the level;
//! - runs its Agg at most once per execution and keeps every row it released in a tuplestore. A
//!   rescan, a cursor moving backwards or rewinding, a nested loop reading it again: all replay the
//!   stored rows, never recompute them. Whatever plan the planner chose, a level is released once
//!   per execution and paid once;
//! - runs it to the end at the first fetch and returns its rows sorted by their values (keys, then
//!   released values): a hashed aggregation's order depends on every group its table held, those
//!   HAVING dropped included, so that order is never seen.
//!
//! The node supports backward scans, so cursors over DP queries can scroll.
use pg_dp_core::description::{is_tag, DpLevel};
use pgrx::pg_sys::{self, Node, NodeTag};
use pgrx::PgSqlErrorCode;
use std::ffi::{c_int, CStr};

use crate::pg::nodes::list_iter;
use crate::query::release_key::LevelKey;
use crate::pg::error::raise_with;

const NAME: &CStr = c"DP Release";

struct Methods<T>(T);
unsafe impl<T> Sync for Methods<T> {}

static SCAN_METHODS: Methods<pg_sys::CustomScanMethods> =
    Methods(pg_sys::CustomScanMethods { CustomName: NAME.as_ptr(), CreateCustomScanState: Some(create_state) });

static EXEC_METHODS: Methods<pg_sys::CustomExecMethods> = Methods(pg_sys::CustomExecMethods {
    CustomName: NAME.as_ptr(),
    BeginCustomScan: Some(begin),
    ExecCustomScan: Some(exec),
    EndCustomScan: Some(end),
    ReScanCustomScan: Some(rescan),
    MarkPosCustomScan: None,
    RestrPosCustomScan: None,
    EstimateDSMCustomScan: None,
    InitializeDSMCustomScan: None,
    ReInitializeDSMCustomScan: None,
    InitializeWorkerCustomScan: None,
    ShutdownCustomScan: None,
    ExplainCustomScan: Some(explain),
});

pub fn init() {
    unsafe { pg_sys::RegisterCustomScanMethods(&SCAN_METHODS.0) };
}

/// True for a DP Release plan node.
pub unsafe fn is_release(plan: *mut pg_sys::Plan) -> bool {
    !plan.is_null()
        && (*plan).type_ == NodeTag::T_CustomScan
        && std::ptr::eq((*(plan as *mut pg_sys::CustomScan)).methods, &SCAN_METHODS.0)
}

/// The `i`-th string of a release node's private list: 0 the level's description (JSON), 1 the
/// release cache's key of the level (empty when not cached), 2 the names and types of the columns
/// it releases, 3 the relations the level reads (OIDs, comma-separated).
unsafe fn private_str<'a>(plan: *mut pg_sys::Plan, i: usize) -> Option<&'a CStr> {
    let cs = plan as *mut pg_sys::CustomScan;
    let n = list_iter::<Node>((*cs).custom_private).nth(i)?;
    if (*n).type_ != NodeTag::T_String {
        return None;
    }
    Some(CStr::from_ptr((*(n as *mut pg_sys::String)).sval))
}

/// The release cache's key of the level a release node computes (query/release_key.rs and its
/// normalized description), or None when its releases are not cached (row security applied, or a
/// column it releases has no canonical name).
pub unsafe fn cache_key_of(plan: *mut pg_sys::Plan) -> Option<String> {
    let s = private_str(plan, 1)?.to_string_lossy();
    (!s.is_empty()).then(|| s.into_owned())
}

/// The canonical names and types of the columns a release node's rows hold, in order (the layout
/// a cached release is stored and replayed in).
pub unsafe fn columns_of(plan: *mut pg_sys::Plan) -> String {
    private_str(plan, 2).map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The relations the level of a release node reads.
pub unsafe fn relations_of(plan: *mut pg_sys::Plan) -> Vec<pg_sys::Oid> {
    let Some(s) = private_str(plan, 3) else { return Vec::new() };
    s.to_string_lossy().split(',').filter_map(|x| x.parse::<u32>().ok()).map(pg_sys::Oid::from).collect()
}

/// The description a release node carries, or None if it cannot be read (never for nodes made here).
pub unsafe fn level_of(plan: *mut pg_sys::Plan) -> Option<DpLevel> {
    DpLevel::from_json(&private_str(plan, 0)?.to_string_lossy())
}

// ----- planning -------------------------------------------------------------------------------

/// Tagged aggregate calls in an Agg node's target list and HAVING qual.
pub unsafe fn tagged_aggrefs(agg: *mut pg_sys::Plan) -> Vec<*mut pg_sys::Aggref> {
    let mut found: Vec<*mut Node> = Vec::new();
    crate::pg::nodes::collect_nodes((*agg).targetlist as *mut Node, &[NodeTag::T_Aggref], &mut found);
    crate::pg::nodes::collect_nodes((*agg).qual as *mut Node, &[NodeTag::T_Aggref], &mut found);
    found.into_iter().map(|n| n as *mut pg_sys::Aggref).filter(|a| is_tag((**a).location)).collect()
}

fn finalizing(plan: *mut pg_sys::Plan) -> bool {
    unsafe {
        (*plan).type_ == NodeTag::T_Agg && (*(plan as *mut pg_sys::Agg)).aggsplit & pg_sys::AGGSPLITOP_SKIPFINAL == 0
    }
}

struct Inserter<'a> {
    levels: &'a [DpLevel],
    /// each level's release cache key, if its releases may be cached
    keys: &'a [Option<LevelKey>],
    next_id: c_int,
    inserted: usize,
    /// the statement's final range table (what a Var's syntactic referent indexes)
    rtable: *mut pg_sys::List,
}

/// Wraps every finalizing Agg that computes tagged aggregates in a DP Release node. Returns the
/// number of nodes inserted.
pub unsafe fn insert(stmt: *mut pg_sys::PlannedStmt, levels: &[DpLevel], keys: &[Option<LevelKey>]) -> usize {
    let mut max_id = 0;
    for_each_plan(stmt, &mut |p| max_id = max_id.max((*p).plan_node_id));
    let mut ins = Inserter { levels, keys, next_id: max_id + 1, inserted: 0, rtable: (*stmt).rtable };
    ins.visit(&mut (*stmt).planTree);
    let subplans = (*stmt).subplans;
    if !subplans.is_null() {
        for i in 0..(*subplans).length as usize {
            let cell = (*subplans).elements.add(i);
            let mut p = (*cell).ptr_value as *mut pg_sys::Plan;
            ins.visit(&mut p);
            (*cell).ptr_value = p.cast();
        }
    }
    ins.inserted
}

impl Inserter<'_> {
    unsafe fn visit(&mut self, slot: &mut *mut pg_sys::Plan) {
        let p = *slot;
        if p.is_null() {
            return;
        }
        for child in child_slots(p) {
            let mut c = *child;
            self.visit(&mut c);
            *child = c;
        }
        if finalizing(p) {
            let tags: Vec<i32> = tagged_aggrefs(p).iter().map(|a| (**a).location).collect();
            if let Some(first) = tags.first() {
                let index = self.levels.iter().position(|l| l.aggregate(*first).is_some());
                let Some(level) = index.map(|i| &self.levels[i]) else {
                    raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, "pg_dp: a DP aggregate lost its description while planning".into(), None)
                };
                if tags.iter().any(|t| level.aggregate(*t).is_none()) {
                    raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, "pg_dp: one aggregation computes two DP levels".into(), None);
                }
                let key = index.and_then(|i| self.keys.get(i)).and_then(|k| k.as_ref());
                *slot = make_release(p, level, self.next_id, key, self.rtable);
                self.next_id += 1;
                self.inserted += 1;
            }
        }
    }
}

/// Pointers to the child plan slots of a node.
unsafe fn child_slots(p: *mut pg_sys::Plan) -> Vec<*mut *mut pg_sys::Plan> {
    let mut out: Vec<*mut *mut pg_sys::Plan> = vec![&mut (*p).lefttree, &mut (*p).righttree];
    let list = match (*p).type_ {
        NodeTag::T_Append => (*(p as *mut pg_sys::Append)).appendplans,
        NodeTag::T_MergeAppend => (*(p as *mut pg_sys::MergeAppend)).mergeplans,
        NodeTag::T_BitmapAnd => (*(p as *mut pg_sys::BitmapAnd)).bitmapplans,
        NodeTag::T_BitmapOr => (*(p as *mut pg_sys::BitmapOr)).bitmapplans,
        NodeTag::T_CustomScan => (*(p as *mut pg_sys::CustomScan)).custom_plans,
        NodeTag::T_SubqueryScan => {
            out.push(&mut (*(p as *mut pg_sys::SubqueryScan)).subplan);
            std::ptr::null_mut()
        }
        _ => std::ptr::null_mut(),
    };
    if !list.is_null() {
        for i in 0..(*list).length as usize {
            // the list cell holds the child pointer
            let cell = (*list).elements.add(i);
            out.push(&mut (*cell).ptr_value as *mut *mut std::ffi::c_void as *mut *mut pg_sys::Plan);
        }
    }
    out
}

/// The child plans of a node.
pub unsafe fn child_plans(p: *mut pg_sys::Plan) -> Vec<*mut pg_sys::Plan> {
    child_slots(p).into_iter().map(|c| *c).filter(|c| !c.is_null()).collect()
}

/// Calls `f` on every plan node of a statement (main tree and subplans).
pub unsafe fn for_each_plan(stmt: *mut pg_sys::PlannedStmt, f: &mut dyn FnMut(*mut pg_sys::Plan)) {
    unsafe fn walk(p: *mut pg_sys::Plan, f: &mut dyn FnMut(*mut pg_sys::Plan)) {
        if p.is_null() {
            return;
        }
        f(p);
        for c in child_slots(p) {
            walk(*c, f);
        }
    }
    walk((*stmt).planTree, f);
    for p in list_iter::<pg_sys::Plan>((*stmt).subplans) {
        walk(p, f);
    }
}

unsafe fn make_var(varno: i32, attno: i16, expr: *mut Node) -> *mut pg_sys::Var {
    pg_sys::makeVar(varno, attno, pg_sys::exprType(expr), pg_sys::exprTypmod(expr), pg_sys::exprCollation(expr), 0)
}

/// The values an aggregation computes and the DP Release node projects: every aggregate call,
/// GROUPING() and input column that its target list and HAVING use.
struct Atoms {
    nodes: Vec<*mut Node>,
}

/// Replaces every aggregate call, GROUPING() and column of an Agg node's expression by a reference
/// to the release node's scan tuple (INDEX_VAR), collecting the replaced nodes in order.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn atom_mutator(n: *mut Node, ctx: *mut std::ffi::c_void) -> *mut Node {
    if n.is_null() {
        return n;
    }
    let atoms = &mut *(ctx as *mut Atoms);
    if matches!((*n).type_, NodeTag::T_Aggref | NodeTag::T_GroupingFunc | NodeTag::T_Var) {
        // every aggregate call stays a node of its own, even one equal to another: the Agg node
        // keeps one state per call (each has its number), and a call written twice is released
        // once through its twin (charge.rs)
        atoms.nodes.push(n);
        return make_var(pg_sys::INDEX_VAR, atoms.nodes.len() as i16, n).cast();
    }
    let f: unsafe extern "C-unwind" fn() -> *mut Node =
        std::mem::transmute(atom_mutator as unsafe extern "C-unwind" fn(*mut Node, *mut std::ffi::c_void) -> *mut Node);
    pg_sys::expression_tree_mutator(n, Some(f), ctx)
}

/// The positions, in an Agg's input, of its grouping columns (of every grouping set it computes,
/// its chained aggregations' too).
unsafe fn grouping_columns(agg: *mut pg_sys::Plan) -> std::collections::HashSet<i16> {
    let mut out = std::collections::HashSet::new();
    let mut nodes = vec![agg as *mut pg_sys::Agg];
    for c in list_iter::<pg_sys::Agg>((*(agg as *mut pg_sys::Agg)).chain) {
        nodes.push(c);
    }
    for a in nodes {
        for i in 0..(*a).numCols as usize {
            out.insert(*(*a).grpColIdx.add(i));
        }
    }
    out
}

/// Wraps a finalizing Agg in a DP Release node. The Agg is left computing only what the level
/// releases: its GROUP BY keys' columns and its aggregate calls. Everything it computed from
/// them (the select list's expressions around the aggregates, HAVING) moves up into the release
/// node's own projection and filter, outside the level. An error raised below the release node
/// therefore comes from the level's input or its aggregates, which the grammar holds total: the
/// node treats it as an attack (fail_closed.rs). An error in the post-processing of released
/// values (`1 / dp_count(*)` when the noisy count is 0) is raised above it, and is no leak.
unsafe fn make_release(
    agg: *mut pg_sys::Plan,
    level: &DpLevel,
    id: c_int,
    key: Option<&LevelKey>,
    rtable: *mut pg_sys::List,
) -> *mut pg_sys::Plan {
    let cs = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomScan>()) as *mut pg_sys::CustomScan;
    let plan = &mut (*cs).scan.plan;
    plan.type_ = NodeTag::T_CustomScan;
    plan.startup_cost = (*agg).startup_cost;
    plan.total_cost = (*agg).total_cost;
    plan.plan_rows = (*agg).plan_rows;
    plan.plan_width = (*agg).plan_width;
    plan.parallel_aware = false;
    plan.parallel_safe = false;
    plan.async_capable = false;
    plan.plan_node_id = id;
    plan.extParam = pg_sys::bms_copy((*agg).extParam);
    plan.allParam = pg_sys::bms_copy((*agg).allParam);
    plan.lefttree = agg;

    let mut atoms = Atoms { nodes: Vec::new() };
    let ctx = &mut atoms as *mut Atoms as *mut std::ffi::c_void;
    let mut tlist: *mut pg_sys::List = std::ptr::null_mut();
    for te in list_iter::<pg_sys::TargetEntry>((*agg).targetlist) {
        let e = atom_mutator((*te).expr as *mut Node, ctx);
        let out = pg_sys::makeTargetEntry(e.cast(), (*te).resno, (*te).resname, (*te).resjunk);
        (*out).ressortgroupref = (*te).ressortgroupref;
        tlist = pg_sys::lappend(tlist, out.cast());
    }
    plan.qual = atom_mutator((*agg).qual as *mut Node, ctx) as *mut pg_sys::List;
    plan.targetlist = tlist;
    // what the aggregation passes up is its GROUP BY keys and its aggregate calls: a column that
    // is not a key would be one raw row's value of each group (the planner computes an expression
    // above the aggregation from raw columns when it no longer matches a key)
    let keys = grouping_columns(agg);
    for n in &atoms.nodes {
        if (**n).type_ != NodeTag::T_Var {
            continue;
        }
        let v = *n as *mut pg_sys::Var;
        // a GROUP BY column the planner dropped from the grouping because its table's primary key is
        // grouped too: functionally dependent on the group, it is the group's own key value
        let dropped_key = (*v).varnosyn > 0 && {
            let rte = crate::query::tree::rt_fetch_list(rtable, (*v).varnosyn as i32);
            !rte.is_null()
                && (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION
                && level.key_columns.contains(&((*rte).relid.to_u32(), (*v).varattnosyn))
        };
        if !keys.contains(&(*v).varattno) && !dropped_key {
            raise_with(
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!("a DP query on {} passes a column that is not a GROUP BY key above its aggregates", level.source.name),
                Some("select the GROUP BY keys as written in GROUP BY, and other columns only inside pg_dp aggregates"),
            );
        }
    }

    let mut agg_tlist: *mut pg_sys::List = std::ptr::null_mut();
    let mut scan_tlist: *mut pg_sys::List = std::ptr::null_mut();
    for (i, n) in atoms.nodes.iter().enumerate() {
        let attno = (i + 1) as i16;
        let te = pg_sys::makeTargetEntry((*n).cast(), attno, std::ptr::null_mut(), false);
        agg_tlist = pg_sys::lappend(agg_tlist, te.cast());
        let scan = pg_sys::makeTargetEntry(make_var(pg_sys::OUTER_VAR, attno, *n).cast(), attno, std::ptr::null_mut(), false);
        scan_tlist = pg_sys::lappend(scan_tlist, scan.cast());
    }
    (*agg).targetlist = agg_tlist;
    (*agg).qual = std::ptr::null_mut();
    (*cs).custom_scan_tlist = scan_tlist;
    (*cs).scan.scanrelid = 0;
    (*cs).flags = pg_sys::CUSTOMPATH_SUPPORT_BACKWARD_SCAN;
    (*cs).methods = &SCAN_METHODS.0;
    let (cache_key, columns, relations) = match key.and_then(|k| cache_entry(agg, level, &atoms.nodes, k, rtable)) {
        Some(e) => e,
        None => Default::default(),
    };
    let order = release_order(level, &atoms.nodes);
    for text in [level.to_json(), cache_key, columns, relations, order] {
        let c = std::ffi::CString::new(text).unwrap_or_default();
        let s = pg_sys::makeString(pg_sys::pstrdup(c.as_ptr()));
        (*cs).custom_private = pg_sys::lappend((*cs).custom_private, s.cast());
    }
    cs as *mut pg_sys::Plan
}

/// The order a level's rows are released in, as "attno:operator:collation" per column: every column
/// the node passes up (the GROUP BY keys, then the released values), ascending by its type's default
/// ordering. The order the aggregation produced them in is a hash table's, which depends on every
/// group the table held, those HAVING then dropped included (keys outside a declared domain, groups
/// the selection of private keys hid). A column whose type has no ordering is refused.
unsafe fn release_order(level: &DpLevel, atoms: &[*mut Node]) -> String {
    let mut out = Vec::new();
    for (i, n) in atoms.iter().enumerate() {
        let typ = pg_sys::exprType(*n);
        let tc = pg_sys::lookup_type_cache(typ, pg_sys::TYPECACHE_LT_OPR as c_int);
        if (*tc).lt_opr == pg_sys::InvalidOid {
            let name = std::ffi::CStr::from_ptr(pg_sys::format_type_be(typ)).to_string_lossy().into_owned();
            raise_with(
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!("a DP query on {} releases a column of type {name}, which has no ordering: pg_dp releases a level's rows in the order of their values", level.source.name),
                Some("group by an expression of an ordered type, such as the key cast to text"),
            );
        }
        out.push(format!("{}:{}:{}", i + 1, (*tc).lt_opr.to_u32(), pg_sys::exprCollation(*n).to_u32()));
    }
    out.join(",")
}

/// What the release cache keys and stores a level's releases by: its key (the level's normalized
/// text and description), the canonical names and types of the columns the node releases, and the
/// relations it reads. None when a column has no canonical name: such a level is not cached.
unsafe fn cache_entry(
    agg: *mut pg_sys::Plan,
    level: &DpLevel,
    atoms: &[*mut Node],
    key: &LevelKey,
    rtable: *mut pg_sys::List,
) -> Option<(String, String, String)> {
    let mut columns = Vec::with_capacity(atoms.len());
    for n in atoms {
        let name = match (**n).type_ {
            NodeTag::T_Aggref => {
                let a = *n as *mut pg_sys::Aggref;
                match key.tags.get(&(*a).location) {
                    Some(t) => format!("a{t}"),
                    // dp.interval_half_width(tag), named by the call it reads (query/intervals.rs)
                    None => format!("i{}", key.tags.get(&crate::query::intervals::tag_argument(a)?)?),
                }
            }
            NodeTag::T_GroupingFunc => {
                let refs = crate::pg::nodes::list_ints((*(*n as *mut pg_sys::GroupingFunc)).refs);
                let refs: Vec<String> = refs.iter().map(|r| key.refs.get(&(*r as u32)).map(|k| k.to_string())).collect::<Option<_>>()?;
                format!("g{}", refs.join("."))
            }
            NodeTag::T_Var => {
                let v = *n as *mut pg_sys::Var;
                let input = crate::pg::nodes::list_iter::<pg_sys::TargetEntry>((*(*agg).lefttree).targetlist).nth((*v).varattno as usize - 1)?;
                match key.refs.get(&(*input).ressortgroupref) {
                    Some(k) if (*input).ressortgroupref != 0 => format!("k{k}"),
                    _ => {
                        // a key column the planner dropped from the grouping (make_release)
                        let rte = crate::query::tree::rt_fetch_list(rtable, (*v).varnosyn as i32);
                        if (*v).varnosyn <= 0 || rte.is_null() {
                            return None;
                        }
                        format!("c{}.{}", (*rte).relid.to_u32(), (*v).varattnosyn)
                    }
                }
            }
            _ => return None,
        };
        columns.push(format!("{name}:{}", pg_sys::exprType(*n).to_u32()));
    }
    let mut described = level.clone();
    described.role = 0;
    for a in described.aggregates.iter_mut() {
        a.tag = key.tags.get(&a.tag).map_or(a.tag, |n| *n as i32);
    }
    described.aggregates.sort_by_key(|a| a.tag);
    let text = format!("{}\n{}", key.text, described.to_json());
    let relations: Vec<String> = key.relids.iter().map(|r| r.to_u32().to_string()).collect();
    Some((text, columns.join(","), relations.join(",")))
}

// ----- execution ----------------------------------------------------------------------------

#[repr(C)]
struct ReleaseState {
    css: pg_sys::CustomScanState,
    store: *mut pg_sys::Tuplestorestate,
    /// the slot this node returns rows in: stored rows come back as minimal tuples
    slot: *mut pg_sys::TupleTableSlot,
    /// the aggregate calls of the level (palloc'd array of Aggref addresses), for recent.rs
    aggrefs: *mut usize,
    naggrefs: usize,
    /// an error inside the level forfeits the budget of `role` (fail_closed.rs)
    forfeiting: bool,
    /// the role the level is run and charged for (the current role when the executor starts): not
    /// the role that happens to fetch a row later (a cursor fetched after SET ROLE, say)
    role: pg_sys::Oid,
}

unsafe fn aggrefs_of(st: *mut ReleaseState) -> &'static [usize] {
    if (*st).aggrefs.is_null() {
        return &[];
    }
    std::slice::from_raw_parts((*st).aggrefs, (*st).naggrefs)
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn create_state(_cscan: *mut pg_sys::CustomScan) -> *mut Node {
    let st = pg_sys::palloc0(std::mem::size_of::<ReleaseState>()) as *mut ReleaseState;
    (*st).css.ss.ps.type_ = NodeTag::T_CustomScanState;
    (*st).css.methods = &EXEC_METHODS.0;
    st as *mut Node
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn begin(node: *mut pg_sys::CustomScanState, estate: *mut pg_sys::EState, eflags: c_int) {
    let plan = (*node).ss.ps.plan;
    // the child never needs to rewind, run backwards or mark: this node replays its own rows
    let child_flags = eflags & !((pg_sys::EXEC_FLAG_REWIND | pg_sys::EXEC_FLAG_BACKWARD | pg_sys::EXEC_FLAG_MARK) as c_int);
    (*node).ss.ps.lefttree = pg_sys::ExecInitNode((*plan).lefttree, estate, child_flags);
    let st = node as *mut ReleaseState;
    let aggrefs = tagged_aggrefs((*plan).lefttree);
    (*st).naggrefs = aggrefs.len();
    (*st).aggrefs = pg_sys::palloc(std::mem::size_of::<usize>() * aggrefs.len().max(1)) as *mut usize;
    for (i, a) in aggrefs.iter().enumerate() {
        *(*st).aggrefs.add(i) = *a as usize;
    }
    (*st).forfeiting = level_of(plan).is_some_and(|l| crate::execution::fail_closed::forfeits(&l));
    (*st).role = pg_sys::GetUserId();
    let desc = (*(*node).ss.ss_ScanTupleSlot).tts_tupleDescriptor;
    (*(node as *mut ReleaseState)).slot = pg_sys::ExecInitExtraTupleSlot(estate, desc, &pg_sys::TTSOpsMinimalTuple);
    let ps = &mut (*node).ss.ps;
    if ps.ps_ProjInfo.is_null() {
        // rows are returned as they are stored (else the projection's own slot is returned)
        ps.resultops = &pg_sys::TTSOpsMinimalTuple;
        ps.resultopsfixed = true;
        ps.resultopsset = true;
    }
}

/// Returns the next row: the level's released row (stored, or computed now), projected through
/// the level's select list, which runs here, above the level.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn exec(node: *mut pg_sys::CustomScanState) -> *mut pg_sys::TupleTableSlot {
    let Some(slot) = next_released(node) else { return std::ptr::null_mut() };
    let ps = &mut (*node).ss.ps;
    if ps.ps_ProjInfo.is_null() {
        return slot;
    }
    let econtext = ps.ps_ExprContext;
    pg_sys::MemoryContextReset((*econtext).ecxt_per_tuple_memory);
    // the expressions were compiled for the scan slot's kind: copy the stored row into it
    let scan = (*node).ss.ss_ScanTupleSlot;
    pg_sys::ExecCopySlot(scan, slot);
    (*econtext).ecxt_scantuple = scan;
    pg_sys::ExecProject(ps.ps_ProjInfo)
}

/// Whether a row the aggregation just computed passes the level's HAVING (with the selection of
/// private GROUP BY keys), evaluated here, above the level.
unsafe fn passes_having(node: *mut pg_sys::CustomScanState, row: *mut pg_sys::TupleTableSlot) -> bool {
    let ps = &mut (*node).ss.ps;
    if ps.qual.is_null() {
        return true;
    }
    let econtext = ps.ps_ExprContext;
    pg_sys::MemoryContextReset((*econtext).ecxt_per_tuple_memory);
    let scan = (*node).ss.ss_ScanTupleSlot;
    pg_sys::ExecCopySlot(scan, row);
    (*econtext).ecxt_scantuple = scan;
    pg_sys::ExecQual(ps.qual, econtext)
}

/// The next released row in the scan direction, from the rows stored. At the first fetch of an
/// execution the level is run to its end (`run_in_order`), or its rows come from the release cache.
/// A row HAVING drops (a group the selection of private keys hides, say) is never stored, cached or
/// counted: only the rows the level releases are kept. None at the end.
unsafe fn next_released(node: *mut pg_sys::CustomScanState) -> Option<*mut pg_sys::TupleTableSlot> {
    let st = node as *mut ReleaseState;
    let estate = (*node).ss.ps.state;
    let forward = (*estate).es_direction != pg_sys::ScanDirection::BackwardScanDirection;
    let slot = (*st).slot;
    let key = (estate as usize, (*node).ss.ps.plan as usize);
    if (*st).store.is_null() {
        let store = pg_sys::tuplestore_begin_heap(true, false, pg_sys::work_mem);
        pg_sys::tuplestore_set_eflags(store, (pg_sys::EXEC_FLAG_REWIND | pg_sys::EXEC_FLAG_BACKWARD) as c_int);
        (*st).store = store;
        if let Some(rows) = crate::budget::cache::take_replay(key.0, key.1) {
            // a reused release: its rows, in the order they were stored, never its aggregation
            crate::budget::cache::restore_rows(&rows, &columns_of((*node).ss.ps.plan), store, slot);
        } else {
            // a level over a Citus table: its exact query may run now, once (distributed_level.rs)
            if let Some(json) = private_str((*node).ss.ps.plan, 0) {
                if let Some(exact) = crate::execution::distributed_rows::exact_query_of(&json.to_string_lossy()) {
                    crate::execution::distributed_rows::authorize(exact);
                }
            }
            run_in_order(node, crate::budget::cache::storing(key.0, key.1));
        }
    }
    if pg_sys::tuplestore_gettupleslot((*st).store, forward, false, slot) {
        return Some(slot);
    }
    pg_sys::ExecClearTuple(slot);
    None
}

/// Runs the level to its end and stores the rows it releases sorted by their values
/// (`release_order`), so that the order the aggregation produced them in is never seen; collects
/// them, in that order, for the release cache (`storing`).
unsafe fn run_in_order(node: *mut pg_sys::CustomScanState, storing: bool) {
    let st = node as *mut ReleaseState;
    let plan = (*node).ss.ps.plan;
    let key = ((*node).ss.ps.state as usize, plan as usize);
    let mut attnums: Vec<i16> = Vec::new();
    let mut ops: Vec<pg_sys::Oid> = Vec::new();
    let mut colls: Vec<pg_sys::Oid> = Vec::new();
    for col in private_str(plan, 4).map(|s| s.to_string_lossy().into_owned()).unwrap_or_default().split(',').filter(|c| !c.is_empty()) {
        let parts: Vec<u32> = col.split(':').filter_map(|x| x.parse().ok()).collect();
        if parts.len() != 3 {
            raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, "pg_dp: a DP release lost the order of its rows".into(), None);
        }
        attnums.push(parts[0] as i16);
        ops.push(pg_sys::Oid::from(parts[1]));
        colls.push(pg_sys::Oid::from(parts[2]));
    }
    let mut nulls_first = vec![false; attnums.len()];
    let slot = (*st).slot;
    // this node's own sort would be printed too (trace_sort): refused before it begins
    refuse_leaky_settings(st);
    let sort = (!attnums.is_empty()).then(|| {
        pg_sys::tuplesort_begin_heap(
            (*slot).tts_tupleDescriptor,
            attnums.len() as c_int,
            attnums.as_mut_ptr(),
            ops.as_mut_ptr(),
            colls.as_mut_ptr(),
            nulls_first.as_mut_ptr(),
            pg_sys::work_mem,
            std::ptr::null_mut(),
            0,
        )
    });
    while let Some(row) = pull(node) {
        match sort {
            Some(s) => pg_sys::tuplesort_puttupleslot(s, row),
            // no column to order by
            None => keep(st, storing, key, row),
        }
    }
    if let Some(s) = sort {
        pg_sys::tuplesort_performsort(s);
        while pg_sys::tuplesort_gettupleslot(s, true, false, slot, std::ptr::null_mut()) {
            keep(st, storing, key, slot);
        }
        pg_sys::tuplesort_end(s);
    }
    // the session's list of releases, in an order of their values, not the aggregation's
    crate::execution::recent::publish(aggrefs_of(st));
    if storing {
        crate::budget::cache::finished(key.0, key.1);
    }
}

/// A setting turned on after planning (set_config in the same statement, SET between DECLARE and
/// FETCH) that would print the sorts of the level's rows is refused, for a level over a protected table.
unsafe fn refuse_leaky_settings(st: *mut ReleaseState) {
    if (*st).forfeiting {
        if let Some(r) = crate::query::grammar::leaky_setting(false) {
            raise_with(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, r.message, r.hint.as_deref());
        }
    }
}

/// Stores a released row in the node's store, and in the release cache's collection (`storing`).
unsafe fn keep(st: *mut ReleaseState, storing: bool, key: (usize, usize), row: *mut pg_sys::TupleTableSlot) {
    if storing {
        crate::budget::cache::collect(key.0, key.1, row);
    }
    pg_sys::tuplestore_puttupleslot((*st).store, row);
}

/// The next row the level releases, computed now: run through HAVING and counted in the session's
/// releases. None at the end of the aggregation.
unsafe fn pull(node: *mut pg_sys::CustomScanState) -> Option<*mut pg_sys::TupleTableSlot> {
    let st = node as *mut ReleaseState;
    let child = (*node).ss.ps.lefttree;
    loop {
        refuse_leaky_settings(st);
        // the level runs here: an error inside it fails closed
        let row = crate::execution::fail_closed::run_level((*st).forfeiting, (*st).role, || pg_sys::ExecProcNode(child));
        if row.is_null() || (*row).tts_flags & pg_sys::TTS_FLAG_EMPTY as u16 != 0 {
            crate::execution::recent::finished(aggrefs_of(st));
            return None;
        }
        if !passes_having(node, row) {
            crate::execution::recent::dropped(aggrefs_of(st));
            let ps = &mut (*node).ss.ps;
            if !ps.instrument.is_null() {
                (*ps.instrument).nfiltered1 += 1.0;
            }
            continue;
        }
        crate::execution::recent::returned(aggrefs_of(st));
        return Some(row);
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn end(node: *mut pg_sys::CustomScanState) {
    let st = node as *mut ReleaseState;
    if !(*st).store.is_null() {
        pg_sys::tuplestore_end((*st).store);
        (*st).store = std::ptr::null_mut();
    }
    pg_sys::ExecEndNode((*node).ss.ps.lefttree);
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn rescan(node: *mut pg_sys::CustomScanState) {
    let st = node as *mut ReleaseState;
    let child = (*node).ss.ps.lefttree;
    if !(*child).chgParam.is_null() {
        // the grammar refuses levels that depend on an outer row, so this cannot happen
        raise_with(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            "pg_dp: a DP release would be computed again with new parameters".into(),
            None,
        );
    }
    pg_sys::ExecClearTuple((*st).slot);
    if !(*st).store.is_null() {
        pg_sys::tuplestore_rescan((*st).store);
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn explain(node: *mut pg_sys::CustomScanState, _ancestors: *mut pg_sys::List, es: *mut pg_sys::ExplainState) {
    let Some(level) = level_of((*node).ss.ps.plan) else { return };
    let source = std::ffi::CString::new(level.source.name.clone()).unwrap_or_default();
    pg_sys::ExplainPropertyText(c"Source".as_ptr(), source.as_ptr(), es);
    let aggs: Vec<String> = level.aggregates.iter().map(|a| a.function.clone()).collect();
    let aggs = std::ffi::CString::new(aggs.join(", ")).unwrap_or_default();
    pg_sys::ExplainPropertyText(c"Releases".as_ptr(), aggs.as_ptr(), es);
    if level.exact_query.is_some() {
        pg_sys::ExplainPropertyText(c"Exact part".as_ptr(), c"Citus: partial aggregation on the workers, noise here".as_ptr(), es);
    }
}
