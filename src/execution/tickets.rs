//! Tickets: the one narrow interface between a final function and the charge. The executor hook
//! hands each paid aggregate call a ticket (admission.rs); a final function releases a value only
//! with its ticket, for the parameters paid, as often as paid, and a call written twice in one level
//! releases its twin's value.
use crate::pg::error::raise_with;
use crate::query::params::Paid;
use pgrx::pg_sys;
use pgrx::PgSqlErrorCode;
use std::cell::RefCell;
use std::collections::HashMap;
use crate::budget::ledger;

/// A paid release: which query paid it, at which ε, and whether it may release only once.
#[derive(Clone, Copy)]
pub struct Ticket {
    pub query: usize,
    /// the parameters paid for (ε, δ, p and bounds, bit for bit)
    pub params: Paid,
    /// plain aggregate (no GROUP BY): exactly one release per execution
    pub single: bool,
    pub releases: u32,
    /// the same call as an earlier one of its level (same tag): it never releases a value of its own,
    /// only its twin's (see `twin_value`)
    pub twin: bool,
    /// the subtransaction that was paid in (set by [`grant`]): its abort takes the ticket away
    pub sub: pg_sys::SubTransactionId,
}

thread_local! {
    /// Tickets by (EState, Aggref) addresses: a plan can run nested in itself (a recursive function
    /// executing the same cached plan), with the same aggregate calls in two executions.
    static TICKETS: RefCell<HashMap<(usize, usize), Ticket>> = RefCell::new(HashMap::new());
}

thread_local! {
    /// The values the final functions released for the group being finalized: (aggregation state,
    /// tag, call, value, subtransaction). A group's final functions run one after another in one
    /// aggregation step.
    static GROUP_VALUES: RefCell<Vec<(usize, i32, usize, pg_sys::Datum, pg_sys::SubTransactionId)>> = const { RefCell::new(Vec::new()) };
}

pub fn in_parallel_worker() -> bool {
    unsafe { pg_sys::ParallelWorkerNumber >= 0 }
}

/// The EState of the aggregation calling a support function (0 outside an aggregation).
unsafe fn estate_of(fcinfo: pg_sys::FunctionCallInfo) -> usize {
    let ctx = (*fcinfo).context;
    if ctx.is_null() || (*ctx).type_ != pg_sys::NodeTag::T_AggState {
        return 0;
    }
    (*(ctx as *mut pg_sys::AggState)).ss.ps.state as usize
}

/// Called by every pg_dp final function before it returns a value.
pub unsafe fn check_ticket(fcinfo: pg_sys::FunctionCallInfo, func: &'static str, paid: &Paid) {
    if in_parallel_worker() {
        // the planner hook keeps every DP level's finalization in the leader
        raise_with(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("{func}: refusing to release a value inside a parallel worker"),
            None,
        );
    }
    let key = (estate_of(fcinfo), pg_sys::AggGetAggref(fcinfo) as usize);
    let params = *paid;
    let ok = TICKETS.with(|t| {
        let mut t = t.borrow_mut();
        match t.get_mut(&key) {
            Some(tk) if tk.twin => Err("it repeats another call of its query, whose value it must take"),
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

/// The value already released for this group by the other call with the same tag (the same call
/// written twice in one level, grammar.rs), if any. A call that meets its own entry starts a new
/// group.
pub unsafe fn twin_value(fcinfo: pg_sys::FunctionCallInfo) -> Option<pg_sys::Datum> {
    let a = pg_sys::AggGetAggref(fcinfo);
    if a.is_null() {
        return None;
    }
    let (state, tag, me) = ((*fcinfo).context as usize, (*a).location, a as usize);
    // only a call paid for as a twin takes another call's value; any other releases its own (and
    // is checked by its final function), whatever an earlier statement left behind
    let is_twin = TICKETS.with(|t| t.borrow().get(&(estate_of(fcinfo), me)).is_some_and(|tk| tk.twin));
    GROUP_VALUES.with(|g| {
        let mut g = g.borrow_mut();
        if g.iter().any(|e| e.0 == state && e.2 == me) {
            g.retain(|e| e.0 != state);
            return None;
        }
        if !is_twin {
            return None;
        }
        g.iter().find(|e| e.0 == state && e.1 == tag).map(|e| e.3)
    })
}

/// Records the value a final function released, for its twin (see [`twin_value`]).
pub unsafe fn remember_value(fcinfo: pg_sys::FunctionCallInfo, d: pg_sys::Datum) {
    let a = pg_sys::AggGetAggref(fcinfo);
    if a.is_null() {
        return;
    }
    let e = ((*fcinfo).context as usize, (*a).location, a as usize, d, pg_sys::GetCurrentSubTransactionId());
    GROUP_VALUES.with(|g| {
        let mut g = g.borrow_mut();
        if g.len() >= 1024 {
            g.clear();
        }
        g.push(e)
    });
}

/// Hands out the tickets of a statement's paid releases (admission.rs, once they are paid).
pub fn grant(tickets: Vec<((usize, usize), Ticket)>) {
    let sub = unsafe { pg_sys::GetCurrentSubTransactionId() };
    TICKETS.with(|t| t.borrow_mut().extend(tickets.into_iter().map(|(a, tk)| (a, Ticket { sub, ..tk }))));
}

/// A subtransaction aborted: the statements that failed in it (or in its children) never reach
/// ExecutorEnd, and the addresses their tickets and values are keyed by will be reused. They go.
pub fn abort_sub(sub: pg_sys::SubTransactionId) {
    TICKETS.with(|t| t.borrow_mut().retain(|_, v| v.sub < sub));
    GROUP_VALUES.with(|g| g.borrow_mut().retain(|e| e.4 < sub));
}

/// Tickets of this EState and twin values of these aggregation states and calls, left by a statement
/// that ended without ExecutorEnd, go (admission.rs, at the start of the statement that now has
/// those addresses).
pub fn forget(estate: usize, states: &[usize]) {
    TICKETS.with(|t| t.borrow_mut().retain(|k, _| k.0 != estate));
    GROUP_VALUES.with(|g| g.borrow_mut().retain(|e| !states.contains(&e.0)));
}

/// The statement `query` (a QueryDesc) ended: its tickets go, and the values kept for twins.
pub fn end_query(query: usize) {
    TICKETS.with(|t| t.borrow_mut().retain(|_, v| v.query != query));
    GROUP_VALUES.with(|g| g.borrow_mut().clear());
}

/// The transaction ended: no ticket outlives it.
pub fn end_transaction() {
    TICKETS.with(|t| t.borrow_mut().clear());
    GROUP_VALUES.with(|g| g.borrow_mut().clear());
}
