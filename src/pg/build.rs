//! Building query-tree nodes (casts, calls, operators, aggregates, CASE, lists, target entries,
//! subqueries) for pg_dp's rewrites of admitted queries.
use pgrx::pg_sys::{self, Node, NodeTag, Oid, Query, RangeTblEntry};
use std::ffi::c_void;
use std::ffi::CString;

/// A zeroed node of type `T` with tag `tag`, in the current memory context.
pub unsafe fn node<T>(tag: NodeTag) -> *mut T {
    let p = pg_sys::palloc0(std::mem::size_of::<T>()) as *mut Node;
    (*p).type_ = tag;
    p as *mut T
}

pub unsafe fn copy<T>(n: *mut T) -> *mut T {
    pg_sys::copyObjectImpl(n as *const c_void) as *mut T
}

pub unsafe fn name_list(schema: Option<&str>, name: &str) -> *mut pg_sys::List {
    let mut l = std::ptr::null_mut();
    if let Some(s) = schema {
        l = pg_sys::lappend(l, pg_sys::makeString(pg_sys::pstrdup(CString::new(s).expect("name").as_ptr())) as *mut c_void);
    }
    pg_sys::lappend(l, pg_sys::makeString(pg_sys::pstrdup(CString::new(name).expect("name").as_ptr())) as *mut c_void)
}

pub unsafe fn function(schema: Option<&str>, name: &str, args: &[Oid]) -> Oid {
    pg_sys::LookupFuncName(name_list(schema, name), args.len() as i32, args.as_ptr(), false)
}

/// The function `schema.name(args)`, or None if there is none (a database on an earlier version's
/// schema).
pub unsafe fn function_if_exists(schema: Option<&str>, name: &str, args: &[Oid]) -> Option<Oid> {
    let f = pg_sys::LookupFuncName(name_list(schema, name), args.len() as i32, args.as_ptr(), true);
    (f != pg_sys::InvalidOid).then_some(f)
}

pub unsafe fn oid_list(oids: &[Oid]) -> *mut pg_sys::List {
    oids.iter().fold(std::ptr::null_mut(), |l, o| pg_sys::lappend_oid(l, *o))
}

pub unsafe fn int_list(ints: impl Iterator<Item = i32>) -> *mut pg_sys::List {
    ints.fold(std::ptr::null_mut(), |l, i| pg_sys::lappend_int(l, i))
}

pub unsafe fn ptr_list<T>(items: &[*mut T]) -> *mut pg_sys::List {
    items.iter().fold(std::ptr::null_mut(), |l, i| pg_sys::lappend(l, *i as *mut c_void))
}

pub unsafe fn expr_type(e: *mut Node) -> Oid {
    pg_sys::exprType(e)
}

pub unsafe fn var_for(varno: i32, attno: i16, e: *mut Node) -> *mut Node {
    pg_sys::makeVar(varno, attno, pg_sys::exprType(e), pg_sys::exprTypmod(e), pg_sys::exprCollation(e), 0) as *mut Node
}

pub unsafe fn int_const(typ: Oid, v: i64) -> *mut Node {
    let (len, d) = match typ {
        pg_sys::INT4OID => (4, pg_sys::Datum::from(v as i32)),
        _ => (8, pg_sys::Datum::from(v)),
    };
    pg_sys::makeConst(typ, -1, pg_sys::InvalidOid, len, d, false, true) as *mut Node
}

pub unsafe fn float8_const(v: f64) -> *mut Node {
    pg_sys::makeConst(pg_sys::FLOAT8OID, -1, pg_sys::InvalidOid, 8, pg_sys::Datum::from(v.to_bits()), false, true) as *mut Node
}

/// An int2, int4 or int8 expression as float8 (the built-in implicit cast); any other unchanged.
pub unsafe fn int_to_float8(e: *mut Node) -> *mut Node {
    let cast = match pg_sys::exprType(e) {
        pg_sys::INT2OID => pg_sys::F_FLOAT8_INT2,
        pg_sys::INT4OID => pg_sys::F_FLOAT8_INT4,
        pg_sys::INT8OID => pg_sys::F_FLOAT8_INT8,
        _ => return e,
    };
    pg_sys::makeFuncExpr(
        Oid::from(cast),
        pg_sys::FLOAT8OID,
        ptr_list(&[e]),
        pg_sys::InvalidOid,
        pg_sys::InvalidOid,
        pg_sys::CoercionForm::COERCE_IMPLICIT_CAST,
    ) as *mut Node
}

/// `left op right` for a binary operator `op`.
pub unsafe fn op_expr(op: Oid, left: *mut Node, right: *mut Node, collation: Oid) -> *mut Node {
    let e = node::<pg_sys::OpExpr>(NodeTag::T_OpExpr);
    (*e).opno = op;
    (*e).opfuncid = pg_sys::get_opcode(op);
    (*e).opresulttype = pg_sys::BOOLOID;
    (*e).inputcollid = collation;
    (*e).args = ptr_list(&[left, right]);
    (*e).location = -1;
    e as *mut Node
}

pub unsafe fn operator(name: &str, left: Oid, right: Oid) -> Oid {
    pg_sys::OpernameGetOprid(name_list(Some("pg_catalog"), name), left, right)
}

pub unsafe fn and(a: *mut Node, b: *mut Node) -> *mut Node {
    pg_sys::make_and_qual(a, b)
}

/// An aggregate call over `args`.
pub unsafe fn aggref(fnoid: Oid, rettype: Oid, args: &[*mut Node], filter: *mut Node, star: bool) -> *mut pg_sys::Aggref {
    let a = node::<pg_sys::Aggref>(NodeTag::T_Aggref);
    (*a).aggfnoid = fnoid;
    (*a).aggtype = rettype;
    (*a).aggcollid = pg_sys::InvalidOid;
    (*a).inputcollid = args.first().map_or(pg_sys::InvalidOid, |e| pg_sys::exprCollation(*e));
    (*a).aggtranstype = pg_sys::InvalidOid;
    (*a).aggargtypes = oid_list(&args.iter().map(|e| expr_type(*e)).collect::<Vec<_>>());
    let tles: Vec<*mut pg_sys::TargetEntry> =
        args.iter().enumerate().map(|(i, e)| pg_sys::makeTargetEntry(*e as *mut pg_sys::Expr, (i + 1) as i16, std::ptr::null_mut(), false)).collect();
    (*a).args = ptr_list(&tles);
    (*a).aggfilter = filter as *mut pg_sys::Expr;
    (*a).aggstar = star;
    (*a).aggkind = b'n' as std::ffi::c_char; // AGGKIND_NORMAL
    (*a).aggsplit = pg_sys::AggSplit::AGGSPLIT_SIMPLE;
    (*a).aggno = -1;
    (*a).aggtransno = -1;
    (*a).location = -1;
    a
}

/// `CASE WHEN cond THEN value END`.
pub unsafe fn case_when(cond: *mut Node, value: *mut Node) -> *mut Node {
    let w = node::<pg_sys::CaseWhen>(NodeTag::T_CaseWhen);
    (*w).expr = cond as *mut pg_sys::Expr;
    (*w).result = value as *mut pg_sys::Expr;
    (*w).location = -1;
    let c = node::<pg_sys::CaseExpr>(NodeTag::T_CaseExpr);
    (*c).casetype = expr_type(value);
    (*c).casecollid = pg_sys::exprCollation(value);
    (*c).args = ptr_list(&[w]);
    (*c).defresult = pg_sys::makeNullConst(expr_type(value), pg_sys::exprTypmod(value), pg_sys::exprCollation(value)) as *mut pg_sys::Expr;
    (*c).location = -1;
    c as *mut Node
}

pub unsafe fn is_not_null(e: *mut Node) -> *mut Node {
    let t = node::<pg_sys::NullTest>(NodeTag::T_NullTest);
    (*t).arg = e as *mut pg_sys::Expr;
    (*t).nulltesttype = pg_sys::NullTestType::IS_NOT_NULL;
    (*t).argisrow = false;
    (*t).location = -1;
    t as *mut Node
}

/// A sort/group clause for a target entry of type `typ` with reference `sgref`.
pub unsafe fn group_clause(typ: Oid, sgref: u32) -> *mut pg_sys::SortGroupClause {
    let (mut lt, mut eq, mut hashable) = (pg_sys::InvalidOid, pg_sys::InvalidOid, false);
    pg_sys::get_sort_group_operators(typ, true, true, false, &mut lt, &mut eq, std::ptr::null_mut(), &mut hashable);
    let s = node::<pg_sys::SortGroupClause>(NodeTag::T_SortGroupClause);
    (*s).tleSortGroupRef = sgref;
    (*s).eqop = eq;
    (*s).sortop = lt;
    (*s).nulls_first = false;
    (*s).hashable = hashable;
    s
}

/// A subquery range-table entry for `sq`, with its column names.
pub unsafe fn subquery_rte(sq: *mut Query, alias: &str) -> *mut RangeTblEntry {
    let pstate = pg_sys::make_parsestate(std::ptr::null_mut());
    let a = pg_sys::makeAlias(pg_sys::pstrdup(CString::new(alias).expect("alias").as_ptr()), std::ptr::null_mut());
    let item = pg_sys::addRangeTableEntryForSubquery(pstate, sq, a, false, true);
    let rte = (*item).p_rte;
    // a level's own rows: nothing from an outer query moves into it unless leakproof
    (*rte).security_barrier = true;
    rte
}

/// A reference to range-table entry `rtindex`, for a FROM list or a set operation.
pub unsafe fn range_ref(rtindex: i32) -> *mut Node {
    let r = node::<pg_sys::RangeTblRef>(NodeTag::T_RangeTblRef);
    (*r).rtindex = rtindex;
    r as *mut Node
}

/// A new SELECT query reading `rtes` with `quals`, projecting `tles`.
pub unsafe fn select_query(rtes: &[*mut RangeTblEntry], quals: *mut Node, tles: Vec<*mut pg_sys::TargetEntry>) -> *mut Query {
    let q = node::<Query>(NodeTag::T_Query);
    (*q).commandType = pg_sys::CmdType::CMD_SELECT;
    (*q).querySource = pg_sys::QuerySource::QSRC_ORIGINAL;
    (*q).canSetTag = true;
    (*q).rtable = ptr_list(rtes);
    let refs: Vec<*mut Node> = (1..=rtes.len()).map(|i| range_ref(i as i32)).collect();
    (*q).jointree = pg_sys::makeFromExpr(ptr_list(&refs), quals);
    (*q).targetList = ptr_list(&tles);
    q
}

pub unsafe fn tle(e: *mut Node, resno: usize, name: &str, sgref: u32, junk: bool) -> *mut pg_sys::TargetEntry {
    let t = pg_sys::makeTargetEntry(e as *mut pg_sys::Expr, resno as i16, pg_sys::pstrdup(CString::new(name).expect("name").as_ptr()), junk);
    (*t).ressortgroupref = sgref;
    t
}
