//! The rewrite of admitted DP levels over protected tables: privacy units and private GROUP BY keys
//! (docs/privacy/privacy-units.md, docs/privacy/partition-selection.md).
//!
//! The grammar (`grammar.rs`) admits a level; this module then rewrites it on its analysed query
//! tree, before planning, so that memory stays with PostgreSQL's own hash and sort aggregation and
//! parallel plans keep working:
//!
//! ```text
//! level:   SELECT <keys, dp_agg(value, params)…> FROM <from> WHERE <w> GROUP BY <keys> HAVING <h>
//!
//! inner:   SELECT <keys>, unit, <per-unit value per aggregate>          -- one row per unit and group
//!          FROM <from> WHERE <w> AND <h without aggregates> AND unit IS NOT NULL
//!          GROUP BY <keys>, unit
//! bounded: SELECT inner.*, row_number() OVER (PARTITION BY unit ORDER BY dp.random_order()) AS rank
//!          FROM inner                                                    -- when a unit may be in
//!                                                                        -- more groups than allowed
//! level':  SELECT <keys', dp_agg(per-unit value, params)…>
//!          FROM bounded [WHERE rank <= max_groups_contributed]          -- private keys
//!            or (<bounded rows of the domain's cells>                    -- public domain
//!                UNION ALL <one row per cell: its keys, NULL values>)
//!          GROUP BY <keys'> HAVING <h> [AND dp.keep_group(unit, ε, δ)]
//! ```
//!
//! - Without a privacy unit (one row is one person) there is no per-unit level: private keys only add
//!   `dp.keep_group` to HAVING, and public domains read the rows themselves.
//! - The rows of a domain's cells: a domain of declared values whose equality is identity filters
//!   the rows by `key = ANY(values)` (in HAVING, once per group, without a unit; before the ranking
//!   with one); any other domain joins the rows to its values, which then name the groups.
//! - Per-unit values: dp_sum takes the unit's sum clamped to the bounds, dp_count the unit's count
//!   clamped to `max_count_per_unit` (then summed with noise of that scale), dp_avg and the quantiles
//!   the mean of the unit's clamped values (`contribution.rs`).
//! - GROUP BY keys are *public* when each is a column of a public table joined to the source, or a
//!   column of the source with a declared domain (`dp.set_domain`): every combination of their values
//!   gets a row, empty ones included. Otherwise the keys are *private*: a group appears only if DP
//!   partition selection keeps it (`selection.rs`), at `dp.group_selection_epsilon` and `_delta`.
//! - The selection and every aggregate are charged once per grouping set and per group a unit may
//!   contribute to (`DpLevel::releases_per_aggregate`).
//!
//! GROUPING SETS, ROLLUP and CUBE select their groups (each set's groups by the selection in HAVING)
//! and are refused over a table with a privacy unit; dp.keep_group written in a query over a
//! protected table is refused too (with the reason, before anything is charged).
use crate::pg::nodes::{collect_nodes, list_iter};
use crate::catalog::functions::{kind_of, Kind};
use crate::query::tree::{attname, func_signature, has_level_aggregate, rt_fetch, split_and};
use crate::pg::error::{Check, Refusal};
use crate::catalog::protect::{self, Domain};
use pg_dp_core::description::{tag, DpAggregate, DpLevel, KeyRelease, ParamSource, PrivacyUnit};
use pgrx::pg_sys::{self, Node, NodeTag, Oid, Query, RangeTblEntry};
use std::ffi::{c_void, CStr, CString};
use crate::pg::build::var_for;
use crate::pg::build::tle;
use crate::pg::build::ptr_list;
use crate::pg::build::node;
use crate::pg::build::and;
use crate::pg::build::op_expr;
use crate::pg::build::expr_type;
use crate::pg::build::copy;
use crate::pg::build::int_const;
use crate::pg::build::aggref;
use crate::pg::build::function;
use crate::pg::build::function_if_exists;
use crate::pg::build::case_when;
use crate::query::tree::flatten_join_aliases;
use crate::query::tree::{builtin_immutable_operator, column_type_collation, type_equality};
use crate::query::tree::group_keys;
use crate::pg::build::is_not_null;
use crate::query::tree::keys_as_first_columns;
use crate::pg::build::group_clause;
use crate::query::tree::only_rows_and_aggregation;
use crate::pg::build::subquery_rte;
use crate::pg::build::select_query;
use crate::pg::build::range_ref;
use crate::pg::build::operator;
use crate::pg::build::float8_const;

/// Longest chain of foreign keys followed to reach a privacy unit.
const MAX_HOPS: usize = 8;

/// How one GROUP BY key is released.
enum KeyKind {
    /// A column of a public table joined to the source: its values are the table's.
    PublicColumn(Oid, i16),
    /// A column of the source with a declared domain.
    Declared(Domain, Oid, i16),
    /// Anything else.
    Private,
}

/// One foreign key followed from a table to the table it references.
pub(crate) struct Hop {
    fk_attnum: i16,
    pub(crate) ref_relid: Oid,
    pub(crate) ref_attnum: i16,
    /// the constraint's PK = FK operator (arguments: the referenced type, then the referencing one)
    pfeqop: Oid,
    /// The key tells persons apart as the columns do: its operator is immutable and the equality of
    /// both columns' own types, under one deterministic collation (`sound_key`). Otherwise the rows
    /// the key joins to one person would be several units here, or a setting would decide.
    pub(crate) sound: bool,
}

/// The privacy unit of a source: where it is and the bounds the source declares.
struct UnitPath {
    source: Oid,
    attnum: i16,
    hops: Vec<Hop>,
    /// the table and column holding the unit at the end of the hops
    final_relid: Oid,
    final_attnum: i16,
    bounds: protect::UnitBounds,
}

unsafe fn rel_name(relid: Oid) -> String {
    protect::relation_short_name(relid)
}

/// The privacy unit of `source`, following foreign keys from its unit column to protected tables
/// that declare a unit.
unsafe fn unit_path(source: Oid) -> Check<Option<UnitPath>> {
    if let Some(child) = protect::descendant_with_unit(source) {
        return Err(Refusal::new(format!(
            "{} declares its own privacy unit but is read through {}: declare the unit on {}",
            rel_name(child),
            rel_name(source),
            rel_name(source)
        )));
    }
    let Some((attnum, bounds)) = protect::effective_privacy_unit(source) else { return Ok(None) };
    let mut hops = Vec::new();
    let (mut rel, mut att) = (source, attnum);
    let mut seen = vec![source];
    loop {
        let Some((hop, next_unit)) = foreign_key_to_unit(rel, att) else { break };
        if !hop.sound {
            return Err(Refusal::new(format!(
                "the privacy unit of {} follows the foreign key {}.{} → {}.{}, whose equality does not tell persons apart as the columns do (another type, a collation that is not deterministic or not the same on both columns, or an operator that reads a setting such as TimeZone)",
                rel_name(source),
                rel_name(rel),
                attname(rel, att),
                rel_name(hop.ref_relid),
                attname(hop.ref_relid, hop.ref_attnum)
            ))
            .hint("a DBA gives both columns one type and one deterministic collation"));
        }
        if next_unit == hop.ref_attnum && foreign_key_to_unit(hop.ref_relid, next_unit).is_none() {
            // the referenced column is the unit itself, and it ends there: the foreign key's value
            // is the unit. (If that unit leads further, to a person through another foreign key,
            // the path goes on: stopping here would make each of its values a unit of its own.)
            break;
        }
        if seen.contains(&hop.ref_relid) || hops.len() >= MAX_HOPS {
            return Err(Refusal::new(format!(
                "the privacy unit of {} is not reached in at most {MAX_HOPS} foreign keys without a cycle",
                rel_name(source)
            ))
            .hint("declare the privacy unit on a column that identifies the person (dp.protect_table)"));
        }
        seen.push(hop.ref_relid);
        rel = hop.ref_relid;
        att = next_unit;
        hops.push(hop);
    }
    Ok(Some(UnitPath { source, attnum, hops, final_relid: rel, final_attnum: att, bounds }))
}

/// A single-column foreign key on (`relid`, `attnum`) to a protected table that declares a privacy
/// unit: the hop, and the unit column of the referenced table.
pub(crate) unsafe fn foreign_key_to_unit(relid: Oid, attnum: i16) -> Option<(Hop, i16)> {
    if let Some(found) = own_foreign_key_to_unit(relid, attnum) {
        return Some(found);
    }
    // an inheritance child has no copy of its parent's foreign keys (partitions do): its unit column
    // is the parent's, and so is the path from it (a child row whose key matches no row has no unit)
    let name = CString::new(attname(relid, attnum)).ok()?;
    for a in protect::ancestors(relid) {
        let att = pg_sys::get_attnum(a, name.as_ptr());
        if att > 0 {
            if let Some((mut hop, unit)) = own_foreign_key_to_unit(a, att) {
                hop.fk_attnum = attnum;
                hop.sound = hop.sound && column_type_collation(relid, attnum) == column_type_collation(a, att);
                return Some((hop, unit));
            }
        }
    }
    None
}

/// Whether a foreign key from (`relid`, `attnum`) to (`ref_relid`, `ref_attnum`) with PK = FK
/// operator `pfeqop` joins rows exactly when the two columns hold equal values as each column's own
/// type tells them apart: a built-in immutable operator that is the equality of the default B-tree
/// family of both columns' types, and both columns under the same deterministic collation (or none).
unsafe fn sound_key(relid: Oid, attnum: i16, ref_relid: Oid, ref_attnum: i16, pfeqop: Oid) -> bool {
    if !builtin_immutable_operator(pfeqop) {
        return false;
    }
    let ((t1, c1), (t2, c2)) = (column_type_collation(relid, attnum), column_type_collation(ref_relid, ref_attnum));
    if c1 != c2 || (c1 != pg_sys::InvalidOid && !pg_sys::get_collation_isdeterministic(c1)) {
        return false;
    }
    type_equality(t1, pfeqop) && type_equality(t2, pfeqop)
}

/// [`foreign_key_to_unit`] among the relation's own foreign keys.
unsafe fn own_foreign_key_to_unit(relid: Oid, attnum: i16) -> Option<(Hop, i16)> {
    let rel = pg_sys::RelationIdGetRelation(relid);
    if rel.is_null() {
        return None;
    }
    let mut found = None;
    for fk in list_iter::<pg_sys::ForeignKeyCacheInfo>(pg_sys::RelationGetFKeyList(rel)) {
        if (*fk).nkeys != 1 || (*fk).conkey[0] != attnum || !protect::is_protected((*fk).confrelid) {
            continue;
        }
        if let Some((unit_att, _)) = protect::effective_privacy_unit((*fk).confrelid) {
            let sound = sound_key(relid, attnum, (*fk).confrelid, (*fk).confkey[0], (*fk).conpfeqop[0]);
            found = Some((
                Hop { fk_attnum: attnum, ref_relid: (*fk).confrelid, ref_attnum: (*fk).confkey[0], pfeqop: (*fk).conpfeqop[0], sound },
                unit_att,
            ));
            break;
        }
    }
    pg_sys::RelationClose(rel);
    found
}

impl UnitPath {
    unsafe fn describe(&self) -> PrivacyUnit {
        let column = format!("{}.{}", rel_name(self.final_relid), attname(self.final_relid, self.final_attnum));
        let mut through = Vec::new();
        let (mut rel, mut att) = (self.source, self.attnum);
        for (i, h) in self.hops.iter().enumerate() {
            through.push(format!("{}.{} → {}.{}", rel_name(rel), attname(rel, att), rel_name(h.ref_relid), attname(h.ref_relid, h.ref_attnum)));
            rel = h.ref_relid;
            att = self.hops.get(i + 1).map_or(self.final_attnum, |next| next.fk_attnum);
        }
        PrivacyUnit {
            column,
            through,
            max_groups_contributed: self.bounds.max_groups_contributed,
            max_count_per_unit: self.bounds.max_count_per_unit,
        }
    }
}

// ----- node construction --------------------------------------------------------------------

// ----- exposing the unit --------------------------------------------------------------------

/// Makes the privacy unit of `path` visible in `q` (a copy of the level): adds the foreign-key joins
/// next to the source table and projects the unit through every subquery on the way. Returns the
/// unit expression in `q`'s scope.
unsafe fn expose_unit(q: *mut Query, path: &UnitPath, depth: u32) -> Option<*mut Node> {
    if depth > 32 {
        return None;
    }
    let n = list_iter::<RangeTblEntry>((*q).rtable).count();
    for i in 1..=n {
        let rte = rt_fetch(q, i as i32);
        match (*rte).rtekind {
            pg_sys::RTEKind::RTE_RELATION if (*rte).relid == path.source => {
                return Some(add_hops(q, i as i32, path));
            }
            pg_sys::RTEKind::RTE_SUBQUERY => {
                let sq = (*rte).subquery;
                if let Some(e) = expose_unit(sq, path, depth + 1) {
                    let attno = project(sq, rte, e, "dp_unit");
                    return Some(var_for(i as i32, attno, e));
                }
            }
            _ => {}
        }
    }
    None
}

/// Adds `e` as a visible output column of subquery `sq` (before its junk columns), names it in
/// the range-table entry that holds it, and returns its attribute number.
unsafe fn project(sq: *mut Query, rte: *mut RangeTblEntry, e: *mut Node, name: &str) -> i16 {
    let tles: Vec<*mut pg_sys::TargetEntry> = list_iter((*sq).targetList).collect();
    let visible = tles.iter().filter(|t| !(***t).resjunk).count();
    let attno = (visible + 1) as i16;
    let mut out = Vec::with_capacity(tles.len() + 1);
    for t in &tles[..visible] {
        out.push(*t);
    }
    out.push(tle(e, attno as usize, name, 0, false));
    for t in &tles[visible..] {
        (**t).resno += 1;
        out.push(*t);
    }
    (*sq).targetList = ptr_list(&out);
    let eref = (*rte).eref;
    (*eref).colnames = pg_sys::lappend((*eref).colnames, pg_sys::makeString(pg_sys::pstrdup(CString::new(name).expect("name").as_ptr())) as *mut c_void);
    attno
}

/// A Var for column `attnum` of table `relid` at range-table index `varno`.
unsafe fn column_var(varno: i32, relid: Oid, attnum: i16) -> *mut Node {
    let (mut typ, mut typmod, mut coll) = (pg_sys::InvalidOid, -1, pg_sys::InvalidOid);
    pg_sys::get_atttypetypmodcoll(relid, attnum, &mut typ, &mut typmod, &mut coll);
    pg_sys::makeVar(varno, attnum, typ, typmod, coll, 0) as *mut Node
}

/// Joins the referenced tables of the unit's foreign keys to the source `rtindex` of `q`; returns
/// the unit column at the end.
unsafe fn add_hops(q: *mut Query, rtindex: i32, path: &UnitPath) -> *mut Node {
    let src = rt_fetch(q, rtindex);
    let mut current = column_var(rtindex, (*src).relid, path.attnum);
    for (h, hop) in path.hops.iter().enumerate() {
        let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
        let rel = pg_sys::table_open(hop.ref_relid, lock);
        let pstate = pg_sys::make_parsestate(std::ptr::null_mut());
        let inh = (*(*rel).rd_rel).relkind as u8 == pg_sys::RELKIND_PARTITIONED_TABLE;
        let alias = pg_sys::makeAlias(pg_sys::pstrdup(CString::new(format!("dp_unit_hop{h}")).expect("alias").as_ptr()), std::ptr::null_mut());
        let item = pg_sys::addRangeTableEntryForRelation(pstate, rel, lock, alias, inh, true);
        pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        let rte = (*item).p_rte;
        // read by pg_dp itself to find each row's unit: nothing of it is released
        (*rte).requiredPerms = 0;
        (*q).rtable = pg_sys::lappend((*q).rtable, rte as *mut c_void);
        let idx = list_iter::<RangeTblEntry>((*q).rtable).count() as i32;
        let jt = (*q).jointree;
        (*jt).fromlist = pg_sys::lappend((*jt).fromlist, range_ref(idx) as *mut c_void);
        let referenced = column_var(idx, hop.ref_relid, hop.ref_attnum);
        let _ = hop.fk_attnum;
        (*jt).quals = and((*jt).quals, op_expr(hop.pfeqop, referenced, current, pg_sys::exprCollation(current)));
        let unit_att = if h + 1 < path.hops.len() { path.hops[h + 1].fk_attnum } else { path.final_attnum };
        current = column_var(idx, hop.ref_relid, unit_att);
    }
    current
}

// ----- keys -----------------------------------------------------------------------------------

unsafe fn classify_key(q: *mut Query, e: *mut Node, source: Oid, joined: &[Oid]) -> KeyKind {
    let Some((relid, att)) = crate::query::tree::value_column(q, e) else { return KeyKind::Private };
    if relid == source || joined.contains(&relid) {
        return match protect::effective_domain(relid, att) {
            Some(d) => KeyKind::Declared(d, relid, att),
            None => KeyKind::Private,
        };
    }
    if protect::public_table(relid) {
        KeyKind::PublicColumn(relid, att)
    } else {
        KeyKind::Private
    }
}

fn quote_literal(s: &str) -> String {
    let mut out = String::from("'");
    for c in s.chars() {
        if c == '\'' {
            out.push('\'');
        }
        out.push(c);
    }
    out.push('\'');
    if s.contains('\\') {
        format!("E{}", out.replace('\\', "\\\\"))
    } else {
        out
    }
}

unsafe fn quote_ident(s: &str) -> String {
    let c = CString::new(s).expect("identifier");
    CStr::from_ptr(pg_sys::quote_identifier(c.as_ptr())).to_string_lossy().into_owned()
}

/// The name of `typ` to cast a value to, without a type modifier: `bpchar` for character, whose
/// plain name (`character`) means character(1) and would cut every declared value to one letter.
unsafe fn cast_type_name(typ: Oid) -> String {
    CStr::from_ptr(pg_sys::format_type_extended(typ, -1, pg_sys::FORMAT_TYPE_TYPEMOD_GIVEN as u16)).to_string_lossy().into_owned()
}

/// The SQL text of one key's public values, as column `v` without duplicates under the key's own
/// equality and collation (a duplicate would join the same rows twice), and a description for
/// receipts.
unsafe fn domain_sql(k: &KeyKind, key: *mut Node) -> Check<(String, String)> {
    let key_type = expr_type(key);
    let typ = cast_type_name(key_type);
    let coll = pg_sys::exprCollation(key);
    let collate = if coll == pg_sys::InvalidOid {
        String::new()
    } else {
        let name = pg_sys::get_collation_name(coll);
        let ns = pg_sys::get_namespace_name((*collation_form(coll)).collnamespace);
        format!(" COLLATE {}", CStr::from_ptr(pg_sys::quote_qualified_identifier(ns, name)).to_string_lossy())
    };
    let distinct = |inner: String| format!("SELECT DISTINCT v::{typ}{collate} AS v FROM ({inner}) s");
    let table_sql = |relid: Oid, att: i16| -> Check<(String, String)> {
        if !protect::public_table(relid) {
            return Err(Refusal::new(format!(
                "the domain of a GROUP BY key is {}, which is not a public table: a domain must be a plain table that is not protected",
                protect::relation_name(relid)
            )));
        }
        let name = protect::relation_name(relid);
        let col = attname(relid, att);
        Ok((distinct(format!("SELECT {} AS v FROM {name}", quote_ident(&col))), format!("{name}.{col}")))
    };
    match k {
        KeyKind::PublicColumn(relid, att) => table_sql(*relid, *att),
        KeyKind::Declared(Domain::Table { table, column }, ..) => {
            let (relid, att) = protect::domain_table_column(table, column);
            table_sql(relid, att)
        }
        KeyKind::Declared(Domain::Values(values), relid, att) => {
            let list: Vec<String> = values.iter().map(|v| quote_literal(v)).collect();
            Ok((
                // unnest in FROM (a function scan) rather than in the select list (a ProjectSet node)
                distinct(format!("SELECT v FROM pg_catalog.unnest(ARRAY[{}]::{typ}[]) AS v", list.join(", "))),
                format!("{}.{}: {} values", rel_name(*relid), attname(*relid, *att), values.len()),
            ))
        }
        KeyKind::Private => unreachable!("a private key has no domain"),
    }
}

/// The pg_collation row of a collation.
unsafe fn collation_form(coll: Oid) -> *mut pg_sys::FormData_pg_collation {
    let tup = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::COLLOID as i32, pg_sys::Datum::from(coll));
    if tup.is_null() {
        pgrx::error!("pg_dp: collation {} not found", coll.to_u32());
    }
    let form = pg_sys::GETSTRUCT(tup) as *mut pg_sys::FormData_pg_collation;
    let copy = pg_sys::palloc(std::mem::size_of::<pg_sys::FormData_pg_collation>()) as *mut pg_sys::FormData_pg_collation;
    std::ptr::copy_nonoverlapping(form, copy, 1);
    pg_sys::ReleaseSysCache(tup);
    copy
}

/// Parses and analyses `sql` (written by pg_dp from catalog names and declared values).
unsafe fn analyse(sql: &str) -> *mut Query {
    let c = CString::new(sql).expect("SQL without zero bytes");
    let raw = pg_sys::pg_parse_query(c.as_ptr());
    let stmt = pg_sys::list_nth(raw, 0) as *mut pg_sys::RawStmt;
    let queries = pg_sys::pg_analyze_and_rewrite_fixedparams(stmt, pg_sys::pstrdup(c.as_ptr()), std::ptr::null_mut(), 0, std::ptr::null_mut());
    pg_sys::list_nth(queries, 0) as *mut Query
}

// ----- the rewrite ------------------------------------------------------------------------------

/// A DP aggregate of the level, with where its per-unit (or per-row) value will be.
struct DpCall {
    aggref: *mut pg_sys::Aggref,
    kind: Kind,
}

struct Mutate {
    keys: Vec<*mut Node>,
    key_vars: Vec<*mut Node>,
    /// subquery depth of the node being mutated (a subquery in the select list can read the keys)
    depth: u32,
    /// the keys as they appear `depth` levels down (Vars with varlevelsup + depth)
    keys_below: Vec<Vec<*mut Node>>,
    /// tag → (value column Var, new function and arguments for a count over units)
    values: Vec<(i32, *mut Node)>,
    unit_count: Option<UnitCount>,
}

/// How dp_count over units becomes a sum of per-unit counts: dp_sum(int4, int4, int4 [, float8]).
struct UnitCount {
    cap: i64,
    sum3: Oid,
    sum4: Oid,
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn mutator(n: *mut Node, ctx: *mut c_void) -> *mut Node {
    if n.is_null() {
        return n;
    }
    let m = &mut *(ctx as *mut Mutate);
    if (*n).type_ == NodeTag::T_Query {
        m.depth += 1;
        let d = m.depth as usize;
        while m.keys_below.len() <= d {
            let level = m.keys_below.len() as i32;
            let shifted = m
                .keys
                .iter()
                .map(|k| {
                    let c = copy(*k);
                    pg_sys::IncrementVarSublevelsUp(c, level, 0);
                    c
                })
                .collect();
            m.keys_below.push(shifted);
        }
        let f: unsafe extern "C-unwind" fn() -> *mut Node =
            std::mem::transmute(mutator as unsafe extern "C-unwind" fn(*mut Node, *mut c_void) -> *mut Node);
        let r = pg_sys::query_tree_mutator(n as *mut Query, Some(f), ctx, 0) as *mut Node;
        m.depth -= 1;
        return r;
    }
    let depth = m.depth as usize;
    let keys = if depth == 0 { &m.keys } else { &m.keys_below[depth] };
    for (k, v) in keys.iter().zip(&m.key_vars) {
        if pg_sys::equal(n as *const c_void, *k as *const c_void) {
            let r = copy(*v);
            if depth > 0 {
                pg_sys::IncrementVarSublevelsUp(r, depth as i32, 0);
            }
            return r;
        }
    }
    if depth == 0 && (*n).type_ == NodeTag::T_Aggref {
        let a = n as *mut pg_sys::Aggref;
        if let Some((_, var)) = m.values.iter().find(|(t, _)| *t == (*a).location) {
            return dp_call_over_values(a, *var, m.unit_count.as_ref()) as *mut Node;
        }
        return n;
    }
    // PostgreSQL declares the mutator without its parameters
    let f: unsafe extern "C-unwind" fn() -> *mut Node =
        std::mem::transmute(mutator as unsafe extern "C-unwind" fn(*mut Node, *mut c_void) -> *mut Node);
    pg_sys::expression_tree_mutator(n, Some(f), ctx)
}

/// The DP aggregate `a`, now reading the value column `var` of the rewritten FROM clause.
unsafe fn dp_call_over_values(a: *mut pg_sys::Aggref, var: *mut Node, unit_count: Option<&UnitCount>) -> *mut pg_sys::Aggref {
    let kind = kind_of((*a).aggfnoid, crate::catalog::functions::first_arg_type(a)).expect("a tagged pg_dp aggregate");
    let params: Vec<*mut Node> = list_iter::<pg_sys::TargetEntry>((*a).args).skip(if (*a).aggstar { 0 } else { 1 }).map(|t| (*t).expr as *mut Node).collect();
    let new = match (kind, unit_count) {
        (Kind::Count, Some(uc)) => {
            // Σ min(count, cap) + noise of scale cap/ε: dp_sum over the per-unit counts in [0, cap]
            let mut args = vec![var, int_const(pg_sys::INT4OID, 0), int_const(pg_sys::INT4OID, uc.cap)];
            args.extend(params.iter().copied());
            let f = if params.is_empty() { uc.sum3 } else { uc.sum4 };
            aggref(f, pg_sys::INT8OID, &args, std::ptr::null_mut(), false)
        }
        (Kind::Count, None) if (*a).aggstar => {
            let f = function(Some(&namespace_of((*a).aggfnoid)), "dp_count", &[pg_sys::ANYOID]);
            aggref(f, pg_sys::INT8OID, &[var], std::ptr::null_mut(), false)
        }
        _ => {
            let mut args = vec![var];
            args.extend(params.iter().copied());
            let mut f = (*a).aggfnoid;
            if kind.is_quantile() && expr_type(var) != crate::catalog::functions::first_arg_type(a) {
                // an integer quantile over per-unit means (float8): its float8 overload, bounds as float8
                args = args.into_iter().map(|e| crate::pg::build::int_to_float8(e)).collect();
                f = function(Some(&namespace_of(f)), kind.func(), &vec![pg_sys::FLOAT8OID; args.len()]);
            }
            aggref(f, (*a).aggtype, &args, std::ptr::null_mut(), false)
        }
    };
    (*new).aggcollid = (*a).aggcollid;
    (*new).location = (*a).location;
    new
}

pub(crate) unsafe fn namespace_of(fnoid: Oid) -> String {
    let ns = pg_sys::get_func_namespace(fnoid);
    CStr::from_ptr(pg_sys::get_namespace_name(ns)).to_string_lossy().into_owned()
}

/// The per-unit aggregate that gives `call` one value per unit (unit mode).
unsafe fn per_unit_value(call: &DpCall, cap: i64) -> *mut Node {
    let a = call.aggref;
    let args: Vec<*mut Node> = list_iter::<pg_sys::TargetEntry>((*a).args).map(|t| copy((*t).expr as *mut Node)).collect();
    let filter = if (*a).aggfilter.is_null() { std::ptr::null_mut() } else { copy((*a).aggfilter as *mut Node) };
    let bounds_at = |lo: usize| (args[lo], args[lo + 1]);
    let (name, value, lower, upper) = match call.kind {
        // a unit's group exists only if it has a row: counting it once needs no aggregate
        Kind::Count if counts_rows(a) && filter.is_null() && cap == 1 => {
            return int_const(pg_sys::INT4OID, 1);
        }
        Kind::Count if counts_rows(a) => {
            let f = function(Some("dp"), "unit_count", &[]);
            return aggref(f, pg_sys::INT4OID, &[], filter, true) as *mut Node;
        }
        Kind::Count => {
            let f = function(Some("dp"), "unit_count", &[pg_sys::ANYOID]);
            return aggref(f, pg_sys::INT4OID, &[args[0]], filter, false) as *mut Node;
        }
        Kind::IntSum | Kind::FloatSum => {
            let (l, u) = bounds_at(1);
            ("unit_sum", args[0], l, u)
        }
        Kind::Avg | Kind::Variance | Kind::Stddev | Kind::Median => {
            let (l, u) = bounds_at(1);
            ("unit_mean", args[0], l, u)
        }
        Kind::Percentile | Kind::PercentileEm => {
            let (l, u) = bounds_at(2);
            ("unit_mean", args[0], l, u)
        }
        Kind::KeepGroup => unreachable!("refused before"),
    };
    // the per-unit mean of an integer quantile's values is a float8 (its call becomes the float8 form)
    let (value, lower, upper) = if call.kind.is_quantile() {
        let f8 = |e| crate::pg::build::int_to_float8(e);
        (f8(value), f8(lower), f8(upper))
    } else {
        (value, lower, upper)
    };
    let t = expr_type(value);
    let f = function(Some("dp"), name, &[t, t, t]);
    aggref(f, t, &[value, lower, upper], filter, false) as *mut Node
}

/// Whether a count counts rows: `dp_count(*)`, which the grammar writes `dp_count(true, ε)`, or a
/// count of a non-NULL constant.
unsafe fn counts_rows(a: *mut pg_sys::Aggref) -> bool {
    if (*a).aggstar {
        return true;
    }
    let Some(first) = list_iter::<pg_sys::TargetEntry>((*a).args).next() else { return true };
    let e = (*first).expr as *mut Node;
    (*e).type_ == NodeTag::T_Const && !(*(e as *mut pg_sys::Const)).constisnull
}

/// The per-row value that gives `call` one value per row (no unit, public domain).
unsafe fn per_row_value(call: &DpCall) -> *mut Node {
    let a = call.aggref;
    let value = if (*a).aggstar {
        int_const(pg_sys::INT4OID, 1)
    } else {
        copy((*list_iter::<pg_sys::TargetEntry>((*a).args).next().expect("a value")).expr as *mut Node)
    };
    if (*a).aggfilter.is_null() {
        value
    } else {
        case_when(copy((*a).aggfilter as *mut Node), value)
    }
}

/// Rewrites an admitted level over a protected source (see the module comment); fills in
/// `level.unit` and `level.keys`, and adds the partition selection to `level.aggregates`.
pub unsafe fn rewrite_level(q: *mut Query, level: &mut DpLevel, next_tag: &mut usize) -> Check<()> {
    if !level.source.protected {
        return Ok(());
    }
    let source: Oid = level.source.oid.into();
    let table = rel_name(source);
    flatten_join_aliases(q);
    let mut found: Vec<*mut Node> = Vec::new();
    collect_nodes((*q).targetList as *mut Node, &[NodeTag::T_Aggref], &mut found);
    collect_nodes((*q).havingQual, &[NodeTag::T_Aggref], &mut found);
    let calls: Vec<DpCall> = found
        .into_iter()
        .map(|n| n as *mut pg_sys::Aggref)
        .filter(|a| (**a).agglevelsup == 0 && pg_dp_core::description::is_tag((**a).location))
        .filter_map(|a| kind_of((*a).aggfnoid, crate::catalog::functions::first_arg_type(a)).map(|kind| DpCall { aggref: a, kind }))
        .collect();
    if calls.iter().any(|c| c.kind == Kind::KeepGroup) {
        return Err(Refusal::new(format!("dp.keep_group over protected table {table}: pg_dp adds the selection of groups itself"))
            .hint("leave dp.keep_group out; dp.group_selection_epsilon and dp.group_selection_delta set its parameters"));
    }
    let mut unit = unit_path(source)?;
    // protected tables joined on the unit (grammar.rs, unit_link): a person's rows of all of them
    // are one unit's rows, bounded by the smallest of the tables' declared bounds
    let joined: Vec<Oid> = level.joins.iter().filter(|j| j.relation.protected).map(|j| j.relation.oid.into()).collect();
    if let Some(u) = unit.as_mut() {
        for &j in &joined {
            if let Some((_, b)) = protect::effective_privacy_unit(j) {
                u.bounds.max_groups_contributed = u.bounds.max_groups_contributed.min(b.max_groups_contributed);
                u.bounds.max_count_per_unit = u.bounds.max_count_per_unit.min(b.max_count_per_unit);
            }
        }
    } else if !joined.is_empty() {
        return Err(Refusal::new(format!("join of protected tables over {table}, which has no privacy unit")));
    }
    let keys = group_keys(q);
    let kinds: Vec<KeyKind> = keys.iter().map(|(e, _)| classify_key(q, *e, source, &joined)).collect();
    let private_keys = kinds.iter().any(|k| matches!(k, KeyKind::Private));
    if unit.is_none() && keys.is_empty() {
        return Ok(());
    }
    let grouping_sets = !(*q).groupingSets.is_null();
    if grouping_sets && unit.is_some() {
        return Err(Refusal::new(format!(
            "GROUPING SETS, ROLLUP or CUBE over protected table {table}, which has a privacy unit: pg_dp does not yet bound units per grouping set"
        ))
        .hint("run one query per grouping set"));
    }
    // grouping sets choose their groups by selection (HAVING runs per group of every set)
    let private_keys = private_keys || grouping_sets;
    // a selected group's key is printed as its first row has it: keys whose equal values can be spelt
    // differently are grouped and printed in one spelling
    let keys = if private_keys {
        let keys = canonical_keys(q, keys, &table)?;
        // a key now grouped in its one spelling (trim_scale(n)) is no longer a plain column: the
        // release refuses the raw column above the aggregation (a subquery in the select list still
        // reads it, as one row of the group has it)
        level.key_columns = crate::query::tree::key_columns(q);
        keys
    } else {
        keys
    };
    let domains = if keys.is_empty() || private_keys {
        None
    } else {
        Some(kinds.iter().zip(&keys).map(|(k, (e, _))| domain_sql(k, *e)).collect::<Check<Vec<_>>>()?)
    };
    let selection = (!keys.is_empty() && private_keys).then(|| (crate::settings::guc::GROUP_SELECTION_EPSILON.get(), crate::settings::guc::GROUP_SELECTION_DELTA.get()));

    // keys with a declared list of values also restrict the rows when groups are selected
    // and a public domain of declared values whose equality is identity (two equal values are the
    // same value: integers, text under a deterministic collation) restricts the rows by that filter,
    // so that the rows are grouped on their own keys, with no join: a group's key is then the declared
    // value itself. Other domains (a public table, numeric's 1.0 = 1.00, a nondeterministic collation)
    // join the rows to the domain, whose value names the group.
    let by_filter = domains.is_some()
        && kinds.iter().zip(&keys).all(|(k, (e, sgc))| {
            matches!(k, KeyKind::Declared(Domain::Values(_), ..)) && equality_is_identity(expr_type(*e), (**sgc).eqop, pg_sys::exprCollation(*e))
        });
    let mut domain_filters = Vec::new();
    if private_keys || by_filter {
        for (k, (e, sgc)) in kinds.iter().zip(&keys) {
            if let KeyKind::Declared(Domain::Values(values), ..) = k {
                domain_filters.push(in_values(*e, values, (**sgc).eqop));
            }
        }
    }

    if unit.is_none() && domains.is_none() {
        // one row per person and private keys: select the groups in place
        for f in &domain_filters {
            let jt = (*q).jointree;
            (*jt).quals = and((*jt).quals, *f);
        }
        let (eps, delta) = selection.expect("private keys");
        add_selection(q, level, next_tag, eps, delta, int_const(pg_sys::INT4OID, 1))?;
        level.keys = KeyRelease::Selected { epsilon: eps, delta };
        return Ok(());
    }

    // ---- the inner level: one row per unit and group (or per row without a unit)
    let inner = copy(q);
    let mut having = Vec::new();
    split_and((*q).havingQual, &mut having);
    let ijt = (*inner).jointree;
    for h in &having {
        if !has_level_aggregate(*h)? {
            (*ijt).quals = and((*ijt).quals, copy(*h));
        }
    }
    // a domain's filter without privacy units runs once per group, above the aggregation (see
    // `per_group` below): a filter on every row cost more than the aggregation it saves
    let per_group = if by_filter && unit.is_none() { function_if_exists(Some("dp"), "per_group", &[pg_sys::BOOLOID]) } else { None };
    if per_group.is_none() {
        for f in &domain_filters {
            (*ijt).quals = and((*ijt).quals, copy(*f));
        }
    }
    let unit_expr = match &unit {
        Some(path) => {
            let e = expose_unit(inner, path, 0).ok_or_else(|| Refusal::new(format!("pg_dp could not find the privacy unit of {table} in the query")))?;
            (*ijt).quals = and((*ijt).quals, is_not_null(copy(e)));
            Some(e)
        }
        None => None,
    };
    let (mut itles, mut igroup) = keys_as_first_columns(&keys);
    let nkeys = keys.len();
    let unit_col = unit_expr.map(|e| {
        let sgref = (nkeys + 1) as u32;
        itles.push(tle(e, nkeys + 1, "dp_unit", sgref, false));
        igroup.push(group_clause(expr_type(e), sgref));
        nkeys + 1
    });
    let cap = unit.as_ref().map_or(1, |u| u.bounds.max_count_per_unit as i64);
    if unit.is_some() {
        if let Some(c) = calls.iter().find(|c| crate::query::bounds::without_bounds(c.kind, crate::pg::nodes::list_len((*c.aggref).args))) {
            return Err(Refusal::new(format!("{} without bounds over a table with a privacy unit", c.kind.func()))
                .hint("each person's contribution is clamped to the bounds: declare the column's bounds with dp.set_bounds, or pass lower and upper"));
        }
    }
    let first_value = itles.len() + 1;
    for (j, c) in calls.iter().enumerate() {
        let v = if unit.is_some() { per_unit_value(c, cap) } else { per_row_value(c) };
        itles.push(tle(v, first_value + j, &format!("dp_value{}", j + 1), 0, false));
    }
    (*inner).targetList = ptr_list(&itles);
    (*inner).groupClause = if unit.is_some() { ptr_list(&igroup) } else { std::ptr::null_mut() };
    let mut inner_aggs: Vec<*mut Node> = Vec::new();
    collect_nodes((*inner).targetList as *mut Node, &[NodeTag::T_Aggref], &mut inner_aggs);
    (*inner).hasAggs = !inner_aggs.is_empty();
    (*inner).havingQual = std::ptr::null_mut();
    only_rows_and_aggregation(inner);
    let inner_cols: Vec<*mut Node> = itles.iter().map(|t| (**t).expr as *mut Node).collect();

    // ---- bounding: a unit keeps at most max_groups_contributed of its groups, at random
    let max_groups = unit.as_ref().map_or(1, |u| u.bounds.max_groups_contributed as i64);
    let bound = unit_col.is_some() && nkeys > 0;
    let (b_query, rank_col) = if bound {
        let irte = subquery_rte(inner, "dp_units");
        let mut wtles = Vec::new();
        for (i, e) in inner_cols.iter().enumerate() {
            let sgref = if Some(i + 1) == unit_col { 1 } else { 0 };
            wtles.push(tle(var_for(1, (i + 1) as i16, *e), i + 1, &format!("c{}", i + 1), sgref, false));
        }
        let rn = node::<pg_sys::WindowFunc>(NodeTag::T_WindowFunc);
        (*rn).winfnoid = pg_sys::Oid::from(pg_sys::F_ROW_NUMBER);
        (*rn).wintype = pg_sys::INT8OID;
        (*rn).winref = 1;
        (*rn).location = -1;
        let rank_col = inner_cols.len() + 1;
        wtles.push(tle(rn as *mut Node, rank_col, "dp_rank", 0, false));
        let random = node::<pg_sys::FuncExpr>(NodeTag::T_FuncExpr);
        (*random).funcid = function(Some("dp"), "random_order", &[]);
        (*random).funcresulttype = pg_sys::FLOAT8OID;
        (*random).funcformat = pg_sys::CoercionForm::COERCE_EXPLICIT_CALL;
        (*random).location = -1;
        wtles.push(tle(random as *mut Node, rank_col + 1, "dp_order", 2, true));
        let w = select_query(&[irte], std::ptr::null_mut(), wtles);
        let unit_type = expr_type(inner_cols[unit_col.expect("unit") - 1]);
        let wc = node::<pg_sys::WindowClause>(NodeTag::T_WindowClause);
        (*wc).partitionClause = ptr_list(&[group_clause(unit_type, 1)]);
        (*wc).orderClause = ptr_list(&[group_clause(pg_sys::FLOAT8OID, 2)]);
        (*wc).frameOptions = pg_sys::FRAMEOPTION_DEFAULTS as i32;
        (*wc).winref = 1;
        (*w).windowClause = ptr_list(&[wc]);
        (*w).hasWindowFuncs = true;
        (w, Some(rank_col))
    } else {
        (inner, None)
    };

    // ---- the level itself, over the per-unit rows: one subquery, range-table entry 1
    const B_IDX: i32 = 1;
    let rank_filter = |b_idx: i32| -> *mut Node {
        rank_col.map_or(std::ptr::null_mut(), |c| {
            let rank = pg_sys::makeVar(b_idx, c as i16, pg_sys::INT8OID, -1, pg_sys::InvalidOid, 0) as *mut Node;
            op_expr(operator("<=", pg_sys::INT8OID, pg_sys::INT8OID), rank, int_const(pg_sys::INT8OID, max_groups), pg_sys::InvalidOid)
        })
    };
    let mut domain_desc = Vec::new();
    let (units, key_vars, where_quals): (*mut Query, Vec<*mut Node>, *mut Node) = if let Some(ds) = &domains {
        // every combination of the keys' public values: the rows of each cell, then one row of NULLs
        // per cell (which every DP aggregate skips), so that an empty cell is a group too. Unlike a
        // LEFT JOIN of the domain to the rows, this keeps the scan and the aggregation parallel.
        let mut sql = String::from("SELECT ");
        sql.push_str(&(1..=ds.len()).map(|i| format!("d{i}.v")).collect::<Vec<_>>().join(", "));
        sql.push_str(" FROM ");
        sql.push_str(&ds.iter().enumerate().map(|(i, (s, _))| format!("({s}) d{}", i + 1)).collect::<Vec<_>>().join(" CROSS JOIN "));
        domain_desc = ds.iter().map(|(_, d)| d.clone()).collect();
        let d_query = analyse(&sql);
        let b_exprs = output_exprs(b_query);
        let d_exprs = output_exprs(d_query);
        let rows = if by_filter && rank_col.is_none() {
            // the rows, restricted to the domain by `domain_filters` here or in the level's HAVING
            b_query
        } else if by_filter {
            // the same, of at most max_groups_contributed groups per unit
            let tles: Vec<_> = b_exprs.iter().enumerate().map(|(i, e)| tle(var_for(1, (i + 1) as i16, *e), i + 1, &format!("c{}", i + 1), 0, false)).collect();
            select_query(&[subquery_rte(b_query, "dp_units")], rank_filter(1), tles)
        } else {
            // the rows of the domain's cells: SELECT d.keys, b.rest FROM domain d, rows b WHERE b.keys = d.keys
            let mut cell_quals: *mut Node = std::ptr::null_mut();
            for (i, (e, sgc)) in keys.iter().enumerate() {
                let dv = var_for(1, (i + 1) as i16, d_exprs[i]);
                let bv = var_for(2, (i + 1) as i16, b_exprs[i]);
                cell_quals = and(cell_quals, op_expr((**sgc).eqop, bv, dv, pg_sys::exprCollation(*e)));
            }
            cell_quals = and(cell_quals, rank_filter(2));
            let column = |i: usize| if i < nkeys { var_for(1, (i + 1) as i16, d_exprs[i]) } else { var_for(2, (i + 1) as i16, b_exprs[i]) };
            let tles: Vec<_> = (0..b_exprs.len()).map(|i| tle(column(i), i + 1, &format!("c{}", i + 1), 0, false)).collect();
            select_query(&[subquery_rte(copy(d_query), "dp_domain"), subquery_rte(b_query, "dp_units")], cell_quals, tles)
        };
        // one row per cell: its keys, NULL for everything else
        let empty_tles: Vec<_> = b_exprs
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let e = if i < nkeys {
                    var_for(1, (i + 1) as i16, d_exprs[i])
                } else {
                    pg_sys::makeNullConst(pg_sys::exprType(*b), pg_sys::exprTypmod(*b), pg_sys::exprCollation(*b)) as *mut Node
                };
                tle(e, i + 1, &format!("c{}", i + 1), 0, false)
            })
            .collect();
        let empty = select_query(&[subquery_rte(d_query, "dp_domain")], std::ptr::null_mut(), empty_tles);
        let all = union_all(rows, empty);
        let keys_out = output_exprs(all).iter().take(nkeys).enumerate().map(|(i, c)| var_for(B_IDX, (i + 1) as i16, *c)).collect();
        (all, keys_out, std::ptr::null_mut())
    } else {
        let keys_out = keys.iter().enumerate().map(|(i, (e, _))| var_for(B_IDX, (i + 1) as i16, *e)).collect();
        (b_query, keys_out, rank_filter(B_IDX))
    };
    // the values each DP aggregate now reads
    let mut values = Vec::new();
    for (j, c) in calls.iter().enumerate() {
        let col = first_value + j;
        values.push(((*c.aggref).location, var_for(B_IDX, col as i16, inner_cols[col - 1])));
    }
    let ns = namespace_of((*calls[0].aggref).aggfnoid);
    let unit_count = unit.as_ref().map(|u| UnitCount {
        cap: u.bounds.max_count_per_unit as i64,
        sum3: function(Some(&ns), "dp_sum", &[pg_sys::INT4OID; 3]),
        sum4: function(Some(&ns), "dp_sum", &[pg_sys::INT4OID, pg_sys::INT4OID, pg_sys::INT4OID, pg_sys::FLOAT8OID]),
    });
    let key_exprs: Vec<*mut Node> = keys.iter().map(|(e, _)| *e).collect();
    let mut m = Mutate { keys: key_exprs.clone(), key_vars, depth: 0, keys_below: vec![key_exprs], values, unit_count };
    let ctx = &mut m as *mut Mutate as *mut c_void;
    // conditions on the keys alone also filter a public domain's rows
    let mut key_filters: *mut Node = std::ptr::null_mut();
    if domains.is_some() {
        let mut conds = Vec::new();
        split_and((*(*q).jointree).quals, &mut conds);
        conds.extend(having.iter().copied().filter(|h| !has_level_aggregate(*h).unwrap_or(true)));
        for c in conds {
            if reads_only_keys(c, &m.keys) {
                key_filters = and(key_filters, mutator(copy(c), ctx));
            }
        }
    }
    (*q).targetList = mutator((*q).targetList as *mut Node, ctx) as *mut pg_sys::List;
    let mut new_having = std::ptr::null_mut();
    for h in having {
        if has_level_aggregate(h)? {
            new_having = and(new_having, mutator(h, ctx));
        }
    }
    (*q).havingQual = and(new_having, key_filters);
    if let Some(f) = per_group {
        // the groups of keys outside the domain are computed, then dropped here, unreleased, before
        // any other condition of HAVING sees their keys (which may raise an error for a key, as
        // `1 / (region = 'x')::int` does): the level's HAVING becomes
        // CASE WHEN dp.per_group(keys = ANY(domain)) THEN <HAVING> END. dp.per_group, a volatile
        // identity, keeps the planner from moving the test below the aggregation, as it does with any
        // HAVING condition on keys alone
        // the domain's filters, built above for the rows, over the level's keys
        let mut in_domain: *mut Node = std::ptr::null_mut();
        for f in &domain_filters {
            in_domain = and(in_domain, mutator(copy(*f), ctx));
        }
        let gate = pg_sys::makeFuncExpr(f, pg_sys::BOOLOID, ptr_list(&[in_domain]), pg_sys::InvalidOid, pg_sys::InvalidOid, pg_sys::CoercionForm::COERCE_EXPLICIT_CALL) as *mut Node;
        (*q).havingQual = if (*q).havingQual.is_null() { gate } else { case_when(gate, (*q).havingQual) };
    }
    // every column the level reads now is a key, a per-unit value or the unit: anything else would
    // read a column of the rewritten FROM clause under its old meaning
    let mut allowed: Vec<(i32, i16)> = m.key_vars.iter().chain(m.values.iter().map(|(_, v)| v)).map(|v| {
        let v = *v as *mut pg_sys::Var;
        ((*v).varno, (*v).varattno)
    }).collect();
    if let Some(c) = unit_col {
        allowed.push((B_IDX, c as i16));
    }
    if stray_column((*q).targetList as *mut Node, &allowed) || stray_column((*q).havingQual, &allowed) {
        return Err(Refusal::new(format!(
            "a column of {table} next to a DP aggregate that is neither a GROUP BY key nor inside the aggregate"
        ))
        .hint("group by the expression itself, or compute it in an outer query"));
    }
    (*q).rtable = ptr_list(&[subquery_rte(units, "dp_units")]);
    (*q).jointree = pg_sys::makeFromExpr(ptr_list(&[range_ref(B_IDX)]), where_quals);
    (*q).rowMarks = std::ptr::null_mut();
    (*q).constraintDeps = std::ptr::null_mut();

    if let Some(u) = &unit {
        level.unit = Some(u.describe());
        // the unit's foreign-key path joins protected tables into the level's input
        for h in &u.hops {
            if !level.reads.contains(&h.ref_relid.to_u32()) {
                level.reads.push(h.ref_relid.to_u32());
            }
        }
    }
    if let Some((eps, delta)) = selection {
        let unit_var = match unit_col {
            Some(c) => var_for(B_IDX, c as i16, inner_cols[c - 1]),
            None => int_const(pg_sys::INT4OID, 1),
        };
        add_selection(q, level, next_tag, eps, delta, unit_var)?;
        level.keys = KeyRelease::Selected { epsilon: eps, delta };
    } else if domains.is_some() {
        level.keys = KeyRelease::PublicDomain(domain_desc);
    }
    Ok(())
}

/// True if `e` reads a column of its level (at any subquery depth) that is not one of `allowed`
/// (range-table index, attribute number).
unsafe fn stray_column(e: *mut Node, allowed: &[(i32, i16)]) -> bool {
    struct Walk<'a> {
        allowed: &'a [(i32, i16)],
        depth: u32,
        stray: bool,
    }
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walker(n: *mut Node, ctx: *mut c_void) -> bool {
        if n.is_null() {
            return false;
        }
        let w = &mut *(ctx as *mut Walk);
        match (*n).type_ {
            NodeTag::T_Query => {
                w.depth += 1;
                let r = pg_sys::query_tree_walker(n as *mut Query, Some(walker), ctx, 0);
                w.depth -= 1;
                return r;
            }
            NodeTag::T_Var => {
                let v = n as *mut pg_sys::Var;
                if (*v).varlevelsup == w.depth && !w.allowed.contains(&((*v).varno, (*v).varattno)) {
                    w.stray = true;
                    return true;
                }
            }
            _ => {}
        }
        pg_sys::expression_tree_walker(n, Some(walker), ctx)
    }
    let mut w = Walk { allowed, depth: 0, stray: false };
    walker(e, &mut w as *mut Walk as *mut c_void);
    w.stray
}

/// True if `e` reads columns only inside GROUP BY key expressions (and no aggregate, subquery or
/// parameter): a condition on the keys alone.
unsafe fn reads_only_keys(e: *mut Node, keys: &[*mut Node]) -> bool {
    struct Walk<'a> {
        keys: &'a [*mut Node],
        other: bool,
    }
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walker(n: *mut Node, ctx: *mut c_void) -> bool {
        if n.is_null() {
            return false;
        }
        let w = &mut *(ctx as *mut Walk);
        if w.keys.iter().any(|k| pg_sys::equal(n as *const c_void, *k as *const c_void)) {
            return false;
        }
        if matches!((*n).type_, NodeTag::T_Var | NodeTag::T_Aggref | NodeTag::T_SubLink | NodeTag::T_Param) {
            w.other = true;
            return true;
        }
        pg_sys::expression_tree_walker(n, Some(walker), ctx)
    }
    let mut w = Walk { keys, other: false };
    walker(e, &mut w as *mut Walk as *mut c_void);
    !w.other
}

/// `e = ANY(ARRAY[values])` with the key's equality operator.
unsafe fn in_values(e: *mut Node, values: &[String], eqop: Oid) -> *mut Node {
    let typ = expr_type(e);
    let typname = cast_type_name(typ);
    let list: Vec<String> = values.iter().map(|v| quote_literal(v)).collect();
    let q = analyse(&format!("SELECT ARRAY[{}]::{typname}[]", list.join(", ")));
    let array = (*list_iter::<pg_sys::TargetEntry>((*q).targetList).next().expect("one column")).expr as *mut Node;
    let s = node::<pg_sys::ScalarArrayOpExpr>(NodeTag::T_ScalarArrayOpExpr);
    (*s).opno = eqop;
    (*s).opfuncid = pg_sys::get_opcode(eqop);
    (*s).useOr = true;
    (*s).inputcollid = pg_sys::exprCollation(e);
    (*s).args = ptr_list(&[copy(e), array]);
    (*s).location = -1;
    s as *mut Node
}

/// The level's GROUP BY keys when its groups are selected, each in one spelling of its value: a
/// selected group prints its key as its first row has it, and a CASE in the key could make a
/// spelling tell one of that row's columns (1.0 against 1.00, for ε = 1e-9). So wherever the select
/// list and HAVING compute a key outside the DP aggregates it is replaced by:
/// - numeric: `trim_scale(k)` (1.0 and 1.00 are equal and print alike); numeric(p, s) as it is (every
///   value has scale s);
/// - the floating-point types: `k + 0` (−0 and 0 are equal, and −0 + 0 is 0);
/// - character(n): `k::text::character(n)` (trailing spaces are not compared; the cast drops them
///   and pads again to n);
/// each relabelled as the key's own type when that is a domain (no constraint is checked again).
/// The raw key then is no longer a GROUP BY key: the caller drops it from the level's key columns,
/// so that the release refuses it above the aggregation (a scalar subquery in the select list,
/// `(SELECT salary)`, which this replacement does not enter, would read one row's value).
/// Equal values stay one group, and different ones different groups. A key of any other type whose
/// equal values can differ (interval's `1 day` = `24 hours`, jsonb, arrays of such types, ranges and
/// records, text under a nondeterministic collation) is refused: the refusal depends on the key's type and
/// collation alone. `equality_is_identity` says which types need nothing.
unsafe fn canonical_keys(
    q: *mut Query,
    keys: Vec<(*mut Node, *mut pg_sys::SortGroupClause)>,
    table: &str,
) -> Check<Vec<(*mut Node, *mut pg_sys::SortGroupClause)>> {
    struct Swap {
        from: Vec<*mut Node>,
        to: Vec<*mut Node>,
    }
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn swap(n: *mut Node, ctx: *mut c_void) -> *mut Node {
        if n.is_null() {
            return n;
        }
        let s = &*(ctx as *const Swap);
        for (f, t) in s.from.iter().zip(&s.to) {
            if pg_sys::equal(n as *const c_void, *f as *const c_void) {
                return copy(*t);
            }
        }
        // the values the DP aggregates read, and subqueries, are left as they are
        if matches!((*n).type_, NodeTag::T_Aggref | NodeTag::T_Query | NodeTag::T_SubLink) {
            return n;
        }
        let f: unsafe extern "C-unwind" fn() -> *mut Node =
            std::mem::transmute(swap as unsafe extern "C-unwind" fn(*mut Node, *mut c_void) -> *mut Node);
        pg_sys::expression_tree_mutator(n, Some(f), ctx)
    }
    let mut sw = Swap { from: Vec::new(), to: Vec::new() };
    for (e, sgc) in &keys {
        let typ = expr_type(*e);
        let typmod = pg_sys::exprTypmod(*e);
        let coll = pg_sys::exprCollation(*e);
        let mut base_typmod = typmod;
        let base = pg_sys::getBaseTypeAndTypmod(typ, &mut base_typmod);
        let deterministic = coll == pg_sys::InvalidOid || pg_sys::get_collation_isdeterministic(coll);
        let canon = match base {
            _ if equality_is_identity(typ, (**sgc).eqop, coll) => continue,
            // numeric(p, s): every value has scale s, so equal values are spelt alike
            pg_sys::NUMERICOID if typmod >= 0 || base_typmod >= 0 => continue,
            pg_sys::NUMERICOID => {
                let f = function(Some("pg_catalog"), "trim_scale", &[pg_sys::NUMERICOID]);
                pg_sys::makeFuncExpr(f, pg_sys::NUMERICOID, ptr_list(&[copy(*e)]), pg_sys::InvalidOid, pg_sys::InvalidOid, pg_sys::CoercionForm::COERCE_EXPLICIT_CALL) as *mut Node
            }
            pg_sys::FLOAT8OID | pg_sys::FLOAT4OID => {
                let zero = if base == pg_sys::FLOAT8OID {
                    crate::pg::build::float8_const(0.0)
                } else {
                    pg_sys::makeConst(pg_sys::FLOAT4OID, -1, pg_sys::InvalidOid, 4, pg_sys::Datum::from((0.0f32).to_bits() as usize), false, true) as *mut Node
                };
                let plus = op_expr(operator("+", base, base), copy(*e), zero, pg_sys::InvalidOid) as *mut pg_sys::OpExpr;
                (*plus).opresulttype = base;
                plus as *mut Node
            }
            pg_sys::BPCHAROID if deterministic && type_equality(base, (**sgc).eqop) => {
                let explicit = |e: *mut Node, from: Oid, to: Oid, m: i32| {
                    pg_sys::coerce_to_target_type(
                        std::ptr::null_mut(),
                        e,
                        from,
                        to,
                        m,
                        pg_sys::CoercionContext::COERCION_EXPLICIT,
                        pg_sys::CoercionForm::COERCE_EXPLICIT_CAST,
                        -1,
                    )
                };
                let text = explicit(copy(*e), typ, pg_sys::TEXTOID, -1);
                let padded = if text.is_null() { text } else { explicit(text, pg_sys::TEXTOID, base, base_typmod) };
                if padded.is_null() {
                    return Err(spelt_differently(*e, table));
                }
                pg_sys::exprSetCollation(padded, coll);
                padded
            }
            _ => return Err(spelt_differently(*e, table)),
        };
        let canon = if base == typ {
            canon
        } else {
            pg_sys::makeRelabelType(canon as *mut pg_sys::Expr, typ, typmod, coll, pg_sys::CoercionForm::COERCE_IMPLICIT_CAST) as *mut Node
        };
        sw.from.push(copy(*e));
        sw.to.push(canon);
    }
    if sw.from.is_empty() {
        return Ok(keys);
    }
    let ctx = &mut sw as *mut Swap as *mut c_void;
    (*q).targetList = swap((*q).targetList as *mut Node, ctx) as *mut pg_sys::List;
    (*q).havingQual = swap((*q).havingQual, ctx);
    Ok(crate::query::tree::group_keys(q))
}

/// The refusal of a selected key whose equal values can be spelt differently.
unsafe fn spelt_differently(e: *mut Node, table: &str) -> Refusal {
    let coll = pg_sys::exprCollation(e);
    let collated = if coll != pg_sys::InvalidOid && !pg_sys::get_collation_isdeterministic(coll) { " under a nondeterministic collation" } else { "" };
    Refusal::new(format!(
        "GROUP BY key of type {}{collated} over protected table {table}: its equal values can be spelt differently, and a selected group would print one row's spelling",
        crate::query::total::type_name(expr_type(e))
    ))
    .hint("group by the key cast to text (or under a deterministic collation), or declare its values with dp.set_domain")
}

/// True if `eqop` is the equality of `typ`'s default btree operator class and, under collation
/// `coll`, two values it finds equal are the same value, printed alike. That is the class's
/// "equalimage" support function's own claim, which B-tree deduplication and index-only scans rely
/// on: the built-in one that always says so (integers, boolean, the date and time types, uuid, enums,
/// inet, bytea, bit strings, …), or, for text, varchar and name, the one that says so under a
/// deterministic collation. Not character(n), whose class claims it too although its equality
/// ignores trailing spaces ('a' = 'a  ' for values of no declared length), and not numeric
/// (1.0 = 1.00), the floating-point types (0 = −0), interval, jsonb, ranges or records, whose
/// classes have no such function. An array is when its elements are. Only built-in classes count.
unsafe fn equality_is_identity(typ: Oid, eqop: Oid, coll: Oid) -> bool {
    /// A type's default B-tree class: the class, its family, its input type and its equality.
    unsafe fn default_btree(typ: Oid) -> Option<(Oid, Oid, Oid, Oid)> {
        let opclass = pg_sys::GetDefaultOpClass(typ, pg_sys::BTREE_AM_OID);
        if opclass == pg_sys::InvalidOid {
            return None;
        }
        let family = pg_sys::get_opclass_family(opclass);
        let input = pg_sys::get_opclass_input_type(opclass);
        Some((opclass, family, input, pg_sys::get_opfamily_member(family, input, input, pg_sys::BTEqualStrategyNumber as i16)))
    }
    let base = pg_sys::getBaseType(typ);
    // an array equals another of the same dimensions, lower bounds and equal elements
    let element = pg_sys::get_element_type(base);
    if element != pg_sys::InvalidOid {
        return eqop.to_u32() == pg_sys::ARRAY_EQ_OP
            && default_btree(element).is_some_and(|(_, _, _, element_eq)| element_eq != pg_sys::InvalidOid && equality_is_identity(element, element_eq, coll));
    }
    let Some((opclass, family, input, equality)) = default_btree(base) else { return false };
    if opclass.to_u32() >= pg_sys::FirstNormalObjectId || equality != eqop {
        return false;
    }
    // BTEQUALIMAGE_PROC (access/nbtree.h)
    let equalimage = pg_sys::get_opfamily_proc(family, input, input, 4);
    match equalimage.to_u32() {
        pg_sys::F_BTEQUALIMAGE => true,
        pg_sys::F_BTVARSTREQUALIMAGE if matches!(base, pg_sys::TEXTOID | pg_sys::VARCHAROID | pg_sys::NAMEOID) => {
            pg_sys::OidFunctionCall1Coll(equalimage, coll, pg_sys::Datum::from(input)).value() != 0
        }
        _ => false,
    }
}

/// The expressions of a query's output columns (its target list without junk entries).
unsafe fn output_exprs(q: *mut Query) -> Vec<*mut Node> {
    list_iter::<pg_sys::TargetEntry>((*q).targetList).filter(|t| !(**t).resjunk).map(|t| (*t).expr as *mut Node).collect()
}

/// `left UNION ALL right`, two queries whose columns have the same types and collations (a column
/// whose typmods differ has none in the result).
unsafe fn union_all(left: *mut Query, right: *mut Query) -> *mut Query {
    let cols = output_exprs(left);
    let op = node::<pg_sys::SetOperationStmt>(NodeTag::T_SetOperationStmt);
    (*op).op = pg_sys::SetOperation::SETOP_UNION;
    (*op).all = true;
    (*op).larg = range_ref(1);
    (*op).rarg = range_ref(2);
    let right_cols = output_exprs(right);
    // a column's typmod when both sides have the same, else none (varchar(10) beside a cast value)
    let typmods: Vec<i32> = cols
        .iter()
        .zip(&right_cols)
        .map(|(l, r)| if pg_sys::exprTypmod(*l) == pg_sys::exprTypmod(*r) { pg_sys::exprTypmod(*l) } else { -1 })
        .collect();
    (*op).colTypes = cols.iter().fold(std::ptr::null_mut(), |l, c| pg_sys::lappend_oid(l, pg_sys::exprType(*c)));
    (*op).colTypmods = typmods.iter().fold(std::ptr::null_mut(), |l, t| pg_sys::lappend_int(l, *t));
    (*op).colCollations = cols.iter().fold(std::ptr::null_mut(), |l, c| pg_sys::lappend_oid(l, pg_sys::exprCollation(*c)));
    let (l, r) = (subquery_rte(left, "dp_rows"), subquery_rte(right, "dp_empty"));
    (*l).inFromCl = false;
    (*r).inFromCl = false;
    // the set operation's output columns are Vars of its leftmost branch
    let tles: Vec<_> = cols
        .iter()
        .zip(&typmods)
        .enumerate()
        .map(|(i, (c, t))| {
            let v = pg_sys::makeVar(1, (i + 1) as i16, pg_sys::exprType(*c), *t, pg_sys::exprCollation(*c), 0) as *mut Node;
            tle(v, i + 1, &format!("c{}", i + 1), 0, false)
        })
        .collect();
    let q = select_query(&[l, r], std::ptr::null_mut(), tles);
    (*(*q).jointree).fromlist = std::ptr::null_mut();
    (*q).setOperations = op as *mut Node;
    q
}

/// Adds `dp.keep_group(value, ε, δ)` to the level's HAVING and to its description.
unsafe fn add_selection(q: *mut Query, level: &mut DpLevel, next_tag: &mut usize, eps: f64, delta: f64, value: *mut Node) -> Check<()> {
    let f = function(Some("dp"), "keep_group", &[pg_sys::ANYOID, pg_sys::FLOAT8OID, pg_sys::FLOAT8OID]);
    let a = aggref(f, pg_sys::BOOLOID, &[value, float8_const(eps), float8_const(delta)], std::ptr::null_mut(), false);
    let t = tag(*next_tag);
    *next_tag += 1;
    (*a).location = t;
    // the selection decides first: the rest of HAVING (whatever it computes, and any error it could
    // raise) runs only for groups the selection keeps. One expression, so the planner neither
    // reorders its parts nor moves any of them into WHERE.
    (*q).havingQual = if (*q).havingQual.is_null() {
        a as *mut Node
    } else {
        let w = node::<pg_sys::CaseWhen>(NodeTag::T_CaseWhen);
        (*w).expr = a as *mut pg_sys::Expr;
        (*w).result = (*q).havingQual as *mut pg_sys::Expr;
        (*w).location = -1;
        let c = node::<pg_sys::CaseExpr>(NodeTag::T_CaseExpr);
        (*c).casetype = pg_sys::BOOLOID;
        (*c).args = ptr_list(&[w]);
        (*c).defresult = pg_sys::makeBoolConst(false, false) as *mut pg_sys::Expr;
        (*c).location = -1;
        c as *mut Node
    };
    (*q).hasAggs = true;
    level.aggregates.push(DpAggregate {
        tag: t,
        function: func_signature(f),
        value: "privacy units".into(),
        filtered: false,
        params: vec![ParamSource::Literal, ParamSource::Literal],
    });
    Ok(())
}
