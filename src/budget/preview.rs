//! `dp.preview(query text)`: the receipts a DP query would write, without running it or charging.
//!
//! The query is parsed, analysed and rewritten like any statement, then checked by the query
//! grammar (grammar.rs) exactly as the planner hook checks it: a query the grammar refuses is
//! refused here with the same error. It is never planned, so nothing the planner computes from
//! statistics can change the answer, and no row is read. Each admitted pg_dp aggregate call gives
//! the receipts the charge would write (charge.rs `receipts_of`): the same ε, δ, mechanism, scale
//! and details. Parameters must be literals here (a bind parameter has no value yet).
use crate::query::params::{eval_param_exprs, ParamValues};
use crate::catalog::functions::kind_of;
use crate::pg::nodes::list_iter;
use crate::catalog::functions::first_arg_type;
use crate::budget::receipts::receipts_of;
use crate::pg::error::raise_with;
use crate::query::grammar;
use crate::pg::fmgr::pg_v1;
use pg_dp_core::accounting::charge::ReleaseRecord;
use pg_dp_core::description::is_tag;
use pgrx::pg_sys::{self, Node, NodeTag};
use pgrx::{IntoDatum, JsonB, PgSqlErrorCode};
use std::ffi::{c_void, CString};

const F: &str = "dp.preview";

/// Every tagged (admitted) pg_dp aggregate call of a statement, once per tag.
unsafe fn tagged_aggrefs(query: *mut pg_sys::Query) -> Vec<*mut pg_sys::Aggref> {
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walker(node: *mut Node, ctx: *mut c_void) -> bool {
        if node.is_null() {
            return false;
        }
        if pg_sys::stack_is_too_deep() {
            return true;
        }
        let out = &mut *(ctx as *mut Vec<*mut pg_sys::Aggref>);
        match (*node).type_ {
            NodeTag::T_Query => {
                return pg_sys::query_tree_walker(node as *mut pg_sys::Query, Some(walker), ctx, pg_sys::QTW_IGNORE_JOINALIASES as i32)
            }
            NodeTag::T_Aggref => {
                let a = node as *mut pg_sys::Aggref;
                if is_tag((*a).location) && !out.iter().any(|b| (**b).location == (*a).location) {
                    out.push(a);
                }
            }
            _ => {}
        }
        pg_sys::expression_tree_walker(node, Some(walker), ctx)
    }
    let mut out = Vec::new();
    if walker(query as *mut Node, &mut out as *mut _ as *mut c_void) {
        raise_with(PgSqlErrorCode::ERRCODE_STATEMENT_TOO_COMPLEX, format!("{F}: query nested too deeply"), None);
    }
    out
}

/// The receipts of `sql`, in the order of its aggregate calls.
unsafe fn preview(sql: &str) -> Vec<ReleaseRecord> {
    let c = CString::new(sql).unwrap_or_else(|_| raise_with(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("{F}: query must not contain a zero byte"), None));
    let raw: Vec<*mut pg_sys::RawStmt> = list_iter(pg_sys::pg_parse_query(c.as_ptr())).collect();
    if raw.len() != 1 {
        raise_with(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("{F}: query must be one statement, got {}", raw.len()), None);
    }
    // bind parameters are admitted by the analysis (their types inferred) and refused below with a
    // message that says why
    let mut types: *mut pg_sys::Oid = std::ptr::null_mut();
    let mut ntypes: std::ffi::c_int = 0;
    let queries: Vec<*mut pg_sys::Query> =
        list_iter(pg_sys::pg_analyze_and_rewrite_varparams(raw[0], c.as_ptr(), &mut types, &mut ntypes, std::ptr::null_mut())).collect();
    let mut out = Vec::new();
    for q in queries {
        if (*q).commandType != pg_sys::CmdType::CMD_SELECT || !(*q).utilityStmt.is_null() {
            raise_with(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("{F}: query must be a SELECT"), None);
        }
        let admitted = match grammar::check_statement(q) {
            Ok(Some(a)) => a,
            Ok(None) => continue,
            Err(r) => raise_with(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, r.message, r.hint.as_deref()),
        };
        let econtext = pg_sys::CreateStandaloneExprContext();
        for a in tagged_aggrefs(q) {
            let Some((level, described)) = admitted.levels.iter().find_map(|l| l.aggregate((*a).location).map(|d| (l, d))) else { continue };
            let Some(kind) = kind_of((*a).aggfnoid, first_arg_type(a)) else { continue };
            let func = kind.func();
            let names = kind.param_names();
            for te in list_iter::<pg_sys::TargetEntry>((*a).args).skip(1) {
                let mut params: Vec<*mut Node> = Vec::new();
                crate::pg::nodes::collect_nodes((*te).expr as *mut Node, &[NodeTag::T_Param], &mut params);
                if !params.is_empty() {
                    raise_with(
                        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                        format!("{F}: parameters of {func} must be literals here: a bind parameter ($1) has no value until the query is executed"),
                        None,
                    );
                }
            }
            let vals = eval_param_exprs((*a).args, econtext, func, |i| names.get(i).copied().unwrap_or("parameter"), |expr| {
                pg_sys::ExecInitExpr(expr, std::ptr::null_mut())
            });
            out.extend(receipts_of(level, described, kind, ParamValues::new(vals, func).paid(kind)));
        }
        pg_sys::FreeExprContext(econtext, true);
    }
    out
}

pg_v1!(pg_finfo_dp_preview, dp_preview, |fcinfo| {
    let sql = crate::pg::fmgr::required::<String>(fcinfo, 0, F, "query");
    let receipts = preview(&sql);
    pg_sys::InitMaterializedSRF(fcinfo, pg_sys::MAT_SRF_USE_EXPECTED_DESC as pg_sys::bits32);
    let rsinfo = (*fcinfo).resultinfo as *mut pg_sys::ReturnSetInfo;
    let (store, desc) = ((*rsinfo).setResult, (*rsinfo).setDesc);
    for r in receipts {
        let numeric = |s: &str| pgrx::AnyNumeric::try_from(s).expect("a decimal").into_datum().expect("numeric");
        let details: serde_json::Value = serde_json::from_str(&r.details).unwrap_or_default();
        let mut values = [
            r.aggregate.into_datum().unwrap(),
            r.mechanism.into_datum().unwrap(),
            numeric(&r.epsilon),
            numeric(&r.delta),
            r.sensitivity.into_datum().unwrap(),
            r.noise_scale.into_datum().unwrap(),
            JsonB(details).into_datum().unwrap(),
        ];
        let mut nulls = [false; 7];
        pg_sys::tuplestore_putvalues(store, desc, values.as_mut_ptr(), nulls.as_mut_ptr());
    }
    pg_sys::Datum::from(0usize)
});
