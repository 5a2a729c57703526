//! `dp_interval_low(<pg_dp aggregate call>)` and `dp_interval_high(…)`: the 95% interval of a
//! release, as columns a chart can plot.
//!
//! Written in a DP level's select list or HAVING around a pg_dp aggregate call, each is rewritten
//! before planning into `dp.interval_bound(call, dp.interval_half_width(tag), high)`, where
//! `dp.interval_half_width` is an aggregate of the same level that reads nothing: its final function
//! runs right after the call's (later in the same aggregation), and returns the half-width stated
//! by the receipt of the group's release of the call tagged `tag` (execution/intervals.rs), from
//! public parameters only (for dp_avg, dp_variance and dp_stddev from the release's own noisy
//! statistics). Being an aggregate call, it is a column of the released row that the DP Release node
//! stores: a cached, rescanned or scrolled row carries the interval it was released with.
//! `dp.interval_bound` runs above the level: value − half-width, or value + half-width.
//! A call around anything other than a pg_dp aggregate call is refused here.
use crate::catalog::functions::special_function;
use crate::pg::build::function;
use crate::pg::error::Refusal;
use pg_dp_core::description::is_tag;
use pgrx::pg_sys::{self, Node, NodeTag};

struct Cx {
    half_width: pg_sys::Oid,
    bound: pg_sys::Oid,
    refused: Option<&'static str>,
}

/// Rewrites the interval calls of one DP level (after its aggregate calls were tagged).
pub unsafe fn rewrite(q: *mut pg_sys::Query) -> Result<(), Refusal> {
    let mut found = Vec::new();
    crate::pg::nodes::collect_nodes((*q).targetList as *mut Node, &[NodeTag::T_FuncExpr], &mut found);
    crate::pg::nodes::collect_nodes((*q).havingQual, &[NodeTag::T_FuncExpr], &mut found);
    let any = found.iter().any(|f| {
        matches!(special_function((*(*f as *mut pg_sys::FuncExpr)).funcid), Some("dp_interval_low" | "dp_interval_high"))
    });
    if !any {
        return Ok(());
    }
    let mut cx = Cx {
        half_width: function(Some("dp"), "interval_half_width", &[pg_sys::INT4OID]),
        bound: function(Some("dp"), "interval_bound", &[pg_sys::ANYELEMENTOID, pg_sys::FLOAT8OID, pg_sys::BOOLOID]),
        refused: None,
    };
    let ctx = &mut cx as *mut Cx as *mut std::ffi::c_void;
    (*q).targetList = mutator((*q).targetList as *mut Node, ctx) as *mut pg_sys::List;
    (*q).havingQual = mutator((*q).havingQual, ctx);
    match cx.refused {
        Some(f) => Err(Refusal::new(format!("{f} takes a pg_dp aggregate call as its argument"))
            .hint(format!("write {f}(dp_count(*)) or {f}(dp_avg(x, 0, 100)) next to the aggregate"))),
        None => Ok(()),
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn mutator(n: *mut Node, ctx: *mut std::ffi::c_void) -> *mut Node {
    if n.is_null() {
        return n;
    }
    let cx = &mut *(ctx as *mut Cx);
    if (*n).type_ == NodeTag::T_FuncExpr {
        let f = n as *mut pg_sys::FuncExpr;
        if let Some(name @ ("dp_interval_low" | "dp_interval_high")) = special_function((*f).funcid) {
            let arg = crate::pg::nodes::list_iter::<Node>((*f).args).next().unwrap_or(std::ptr::null_mut());
            let tagged = !arg.is_null() && (*arg).type_ == NodeTag::T_Aggref && is_tag((*(arg as *mut pg_sys::Aggref)).location);
            if !tagged {
                cx.refused.get_or_insert(name);
                return n;
            }
            let tag = (*(arg as *mut pg_sys::Aggref)).location;
            let tag_const = pg_sys::makeConst(pg_sys::INT4OID, -1, pg_sys::InvalidOid, 4, pg_sys::Datum::from(tag), false, true);
            // an aggregate call after the one it reads (PostgreSQL finalizes calls in the order it
            // first meets them: the value argument of interval_bound comes first)
            let hw = crate::pg::build::aggref(cx.half_width, pg_sys::FLOAT8OID, &[tag_const as *mut Node], std::ptr::null_mut(), false);
            let high = pg_sys::makeBoolConst(name == "dp_interval_high", false);
            let bound = pg_sys::makeFuncExpr(
                cx.bound,
                pg_sys::FLOAT8OID,
                crate::pg::build::ptr_list(&[arg, hw as *mut Node, high]),
                pg_sys::InvalidOid,
                pg_sys::InvalidOid,
                pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
            );
            (*bound).location = (*f).location;
            return bound as *mut Node;
        }
    }
    let m: unsafe extern "C-unwind" fn() -> *mut Node =
        std::mem::transmute(mutator as unsafe extern "C-unwind" fn(*mut Node, *mut std::ffi::c_void) -> *mut Node);
    pg_sys::expression_tree_mutator(n, Some(m), ctx)
}

/// The tag written as the constant argument of a `dp.interval_half_width` call, if `a` is one.
pub unsafe fn tag_argument(a: *mut pg_sys::Aggref) -> Option<i32> {
    if special_function((*a).aggfnoid) != Some("interval_half_width") {
        return None;
    }
    let te = crate::pg::nodes::list_iter::<pg_sys::TargetEntry>((*a).args).next()?;
    let c = (*te).expr as *mut pg_sys::Const;
    ((*c).xpr.type_ == NodeTag::T_Const && !(*c).constisnull).then(|| (*c).constvalue.value() as i32)
}
