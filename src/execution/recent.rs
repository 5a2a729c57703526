//! `dp.last_releases()`: the releases this session received, with their receipts' ε, δ, scale and
//! a 95% interval half-width.
//!
//! A final function runs for every group of an aggregation, including groups that HAVING (or the
//! DP selection of private GROUP BY keys) then drops: their values must not appear here, or the
//! list would count hidden groups. So a final function only leaves its release *pending*; the DP
//! Release node (release.rs) takes, for each row it receives from its aggregation, the newest
//! pending release of each of its aggregate calls, and forgets the rest. Nor may the list show the
//! order the aggregation produced its rows in (a hashed aggregation's order depends on the groups
//! it dropped): a level's releases are *staged* while it runs and listed when it ends, ordered by
//! aggregate and value, all with the time the level ended. Rows replayed by a rescan or a scrolling
//! cursor are not counted again. Everything is backend memory: at most [`KEEP`] releases, forgotten
//! when the session ends.
use pg_dp_core::mechanisms::ReleaseInfo;
use pgrx::pg_sys;
use pgrx::{IntoDatum, PgSqlErrorCode};
use std::cell::RefCell;
use std::collections::VecDeque;

/// Releases kept per session, newest first.
pub const KEEP: usize = 100;

#[derive(Clone)]
struct Entry {
    /// the subtransaction the release was made in
    sub: pg_sys::SubTransactionId,
    /// the role that received the release: a session's list shows only its current role's
    role: pg_sys::Oid,
    /// an error a final function met (automatic bounds on too little data), raised only if the
    /// group's row is returned: a dropped group must not be told apart by an error
    error: Option<pg_dp_core::DpError>,
    aggref: usize,
    at: pg_sys::TimestampTz,
    aggregate: &'static str,
    value: f64,
    epsilon: f64,
    delta: f64,
    mechanism: &'static str,
    noise_scale: f64,
    interval95: Option<f64>,
    /// the bounds a call without bounds chose (automatic bounds), as (lower, upper)
    bounds: Option<(f64, f64)>,
}

thread_local! {
    static PENDING: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
    /// releases of rows a level returned, listed when the level ends (`publish`)
    static STAGED: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
    static KEPT: RefCell<VecDeque<Entry>> = const { RefCell::new(VecDeque::new()) };
}

/// Called by a final function with the value it returns and its receipt; `interval95` is the
/// half-width of this release (for a mean or a variance, computed from its own noisy statistics).
pub unsafe fn pending(fcinfo: pg_sys::FunctionCallInfo, aggregate: &'static str, value: f64, info: &ReleaseInfo, interval95: Option<f64>) {
    pending_with_bounds(fcinfo, aggregate, value, info, interval95, None)
}

/// [`pending`] for a release whose bounds were chosen (automatic bounds): they are listed with it.
pub unsafe fn pending_with_bounds(
    fcinfo: pg_sys::FunctionCallInfo,
    aggregate: &'static str,
    value: f64,
    info: &ReleaseInfo,
    interval95: Option<f64>,
    bounds: Option<(f64, f64)>,
) {
    let e = Entry {
        sub: pg_sys::GetCurrentSubTransactionId(),
        role: pg_sys::GetUserId(),
        error: None,
        aggref: pg_sys::AggGetAggref(fcinfo) as usize,
        at: pg_sys::GetCurrentTimestamp(),
        aggregate,
        value,
        epsilon: info.epsilon,
        delta: info.delta,
        mechanism: info.mechanism,
        noise_scale: info.scale,
        interval95,
        bounds,
    };
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        // bounded: a group's entries are taken or dropped at the next row its aggregation returns
        if p.len() >= 4096 {
            p.clear();
        }
        p.push(e)
    });
}

/// Called by a final function that met an error which depends on the data (a function of noisy
/// statistics, hence DP): the error waits, like a release, for the group's row. The function then
/// returns a placeholder that never reaches the caller.
pub unsafe fn defer_error(fcinfo: pg_sys::FunctionCallInfo, aggregate: &'static str, error: pg_dp_core::DpError) {
    let e = Entry {
        sub: pg_sys::GetCurrentSubTransactionId(),
        role: pg_sys::GetUserId(),
        error: Some(error),
        aggref: pg_sys::AggGetAggref(fcinfo) as usize,
        at: 0,
        aggregate,
        value: f64::NAN,
        epsilon: 0.0,
        delta: 0.0,
        mechanism: "",
        noise_scale: 0.0,
        interval95: None,
        bounds: None,
    };
    PENDING.with(|p| p.borrow_mut().push(e));
}

/// A row of the aggregation computing `aggrefs` was returned: keep the newest pending release of
/// each, drop the others (groups HAVING dropped); raise the group's deferred error, if any.
pub fn returned(aggrefs: &[usize]) {
    let failed = PENDING.with(|p| {
        let mut p = p.borrow_mut();
        let mut taken: Vec<Entry> = Vec::new();
        for a in aggrefs {
            if let Some(e) = p.iter().rev().find(|e| e.aggref == *a) {
                taken.push(e.clone());
            }
        }
        p.retain(|e| !aggrefs.contains(&e.aggref));
        if let Some(i) = taken.iter().position(|e| e.error.is_some()) {
            let e = taken.swap_remove(i);
            return Some((e.aggregate, e.error.expect("an error")));
        }
        STAGED.with(|st| {
            let mut st = st.borrow_mut();
            st.extend(taken);
            // bounded: of a long release only the KEEP listed last can stay listed, and which those
            // are depends on the values alone, never on the order they came in
            if st.len() > 4 * KEEP {
                st.sort_by(listing_order);
                let cut = st.len() - KEEP;
                st.drain(..cut);
            }
        });
        None
    });
    if let Some((aggregate, e)) = failed {
        crate::pg::error::raise(aggregate, e);
    }
}

/// The order a level's releases are listed in (the last one listed is the newest): by aggregate, then
/// by value, descending.
fn listing_order(a: &Entry, b: &Entry) -> std::cmp::Ordering {
    a.aggregate.cmp(b.aggregate).then(b.value.total_cmp(&a.value))
}

/// The level computing `aggrefs` has returned its last row: its staged releases are listed, ordered by
/// aggregate and value (a function of what the level released alone), with one time, now.
pub fn publish(aggrefs: &[usize]) {
    let mut mine: Vec<Entry> = STAGED.with(|st| {
        let mut st = st.borrow_mut();
        let (mine, rest): (Vec<Entry>, Vec<Entry>) = st.drain(..).partition(|e| aggrefs.contains(&e.aggref));
        *st = rest;
        mine
    });
    let at = unsafe { pg_sys::GetCurrentTimestamp() };
    mine.sort_by(listing_order);
    KEPT.with(|k| {
        let mut k = k.borrow_mut();
        for mut e in mine {
            e.at = at;
            if k.len() == KEEP {
                k.pop_back();
            }
            k.push_front(e);
        }
    });
}

/// A row of the aggregation computing `aggrefs` was dropped by the level's HAVING: its pending
/// releases were never returned.
pub fn dropped(aggrefs: &[usize]) {
    PENDING.with(|p| p.borrow_mut().retain(|e| !aggrefs.contains(&e.aggref)));
}

/// The aggregation of `aggrefs` is done: its pending releases were never returned.
pub fn finished(aggrefs: &[usize]) {
    PENDING.with(|p| p.borrow_mut().retain(|e| !aggrefs.contains(&e.aggref)));
}

/// Releases left pending by these aggregate calls in a statement that ended without ExecutorEnd go.
pub fn forget(calls: &[usize]) {
    PENDING.with(|p| p.borrow_mut().retain(|e| !calls.contains(&e.aggref)));
    STAGED.with(|p| p.borrow_mut().retain(|e| !calls.contains(&e.aggref)));
}

/// A subtransaction aborted: the releases its statements left pending were never returned.
pub fn abort_sub(sub: pg_sys::SubTransactionId) {
    PENDING.with(|p| p.borrow_mut().retain(|e| e.sub < sub));
    STAGED.with(|p| p.borrow_mut().retain(|e| e.sub < sub));
}

/// At the end of every transaction: nothing stays pending or staged.
pub fn clear_pending() {
    PENDING.with(|p| p.borrow_mut().clear());
    STAGED.with(|p| p.borrow_mut().clear());
}

// dp.last_releases(n): the session's n newest releases, newest first.
crate::pg::fmgr::pg_v1!(pg_finfo_dp_last_releases, dp_last_releases, |fcinfo| {
    let n = crate::pg::fmgr::required::<i32>(fcinfo, 0, "dp.last_releases", "n");
    if !(0..=KEEP as i32).contains(&n) {
        crate::pg::error::raise_with(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("dp.last_releases: n must be between 0 and {KEEP}, got {n}"),
            None,
        );
    }
    let me = pg_sys::GetUserId();
    let rows: Vec<Entry> = KEPT.with(|k| k.borrow().iter().filter(|e| e.role == me).take(n as usize).cloned().collect());
    pg_sys::InitMaterializedSRF(fcinfo, pg_sys::MAT_SRF_USE_EXPECTED_DESC as pg_sys::bits32);
    let rsinfo = (*fcinfo).resultinfo as *mut pg_sys::ReturnSetInfo;
    let (store, desc) = ((*rsinfo).setResult, (*rsinfo).setDesc);
    for e in rows {
        let mut values = [
            pg_sys::Datum::from(e.at),
            e.aggregate.into_datum().unwrap(),
            e.value.into_datum().unwrap(),
            e.epsilon.into_datum().unwrap(),
            e.delta.into_datum().unwrap(),
            e.mechanism.into_datum().unwrap(),
            e.noise_scale.into_datum().unwrap(),
            e.interval95.unwrap_or(0.0).into_datum().unwrap(),
            e.bounds.map_or(0.0, |b| b.0).into_datum().unwrap(),
            e.bounds.map_or(0.0, |b| b.1).into_datum().unwrap(),
        ];
        let nb = e.bounds.is_none();
        let mut nulls = [false, false, false, false, false, false, false, e.interval95.is_none(), nb, nb];
        pg_sys::tuplestore_putvalues(store, desc, values.as_mut_ptr(), nulls.as_mut_ptr());
    }
    pg_sys::Datum::from(0usize)
});

/// The 95% half-width of the newest pending release of the aggregate call tagged `tag` whose
/// Aggref `mine` accepts (the group whose row that aggregation is computing now): `Some(None)` for
/// a release without one (the exponential mechanism), None if there is no such release.
pub fn pending_interval_in(tag: i32, mine: impl Fn(usize) -> bool) -> Option<Option<f64>> {
    PENDING.with(|p| {
        p.borrow()
            .iter()
            .rev()
            .find(|e| e.error.is_none() && mine(e.aggref) && unsafe { (*(e.aggref as *mut pg_sys::Aggref)).location } == tag)
            .map(|e| e.interval95)
    })
}
