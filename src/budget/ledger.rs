//! The ledger transport: a charge is committed by a background worker in a transaction of its own,
//! so nothing the caller does afterwards can undo it.
//!
//! One long-lived worker per database serves a request queue in shared memory. A backend puts its
//! request in a free slot, wakes the worker (starting it if needed) and sleeps on its latch. The
//! worker takes every waiting request of its database, debits them all together (debit.rs: five
//! statements kept prepared for the worker's life) in one transaction, commits durably (one WAL
//! flush for the batch), and only then answers. Should the debit fail, each request is tried again
//! alone, in its own subtransaction, so that one request's error fails no other.
//! A worker idle for [`IDLE_EXIT_SECS`] exits, so that it does not hold a database open for long.
//!
//! The workers are registered at server start (`dp.ledger_workers`, static background workers):
//! their slots are reserved, so parallel query, which any role can make take every dynamic slot,
//! cannot starve the ledger. A static worker waits unconnected until a backend assigns it a
//! database, serves it, and when idle exits with code 1, which has the postmaster start it again at
//! once, unconnected. Only when every static worker serves another database is a dynamic one
//! started. A backend waits at most `dp.ledger_timeout` for a worker to take its request; then the
//! request is withdrawn and the query fails (SQLSTATE 53400), charged nothing.
use pg_dp_core::accounting::charge::{ChargeOutcome, ChargeRequest, RequestKind};
use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder};
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PGRXSharedMemory, PgLwLock, PgSqlErrorCode};
use std::ffi::c_int;

use crate::budget::debit;
use crate::pg::error::raise_with;

const NSLOTS: usize = 64;
const NWORKERS: usize = 32;
/// Largest serialized request (the query text is shortened to fit).
/// Request bytes of an ordinary slot (a handful of aggregates and the query text); the last
/// `NLARGE` slots take up to `LARGE_REQ_BYTES`, for statements with many DP aggregates (a dashboard's
/// hundred `dp_sum`s): a request goes to the first free slot large enough.
pub const REQ_BYTES: usize = 6144;
pub const LARGE_REQ_BYTES: usize = 128 * 1024;
const NLARGE: usize = 8;
const REQ_ARENA: usize = (NSLOTS - NLARGE) * REQ_BYTES + NLARGE * LARGE_REQ_BYTES;
const RESP_BYTES: usize = 512;
/// An idle worker exits after this long (DROP DATABASE waits up to 5 s for other sessions).
pub const IDLE_EXIT_SECS: i64 = 4;
/// How long a backend waits for a free slot or for a worker to start.
const START_TIMEOUT_SECS: i64 = 30;
/// Most static workers (`dp.ledger_workers`).
pub const MAX_STATIC: usize = 16;

/// Static ledger workers registered at server start (postmaster setting).
pub static LEDGER_WORKERS: pgrx::GucSetting<i32> = pgrx::GucSetting::<i32>::new(2);
/// Seconds a query waits for a ledger worker to take its charge before it fails (superuser only).
pub static LEDGER_TIMEOUT: pgrx::GucSetting<i32> = pgrx::GucSetting::<i32>::new(10);

const FREE: u32 = 0;
const NEW: u32 = 1;
const BUSY: u32 = 2;
const DONE: u32 = 3;
/// The worker stopped while the request was BUSY: it may or may not have committed.
const UNKNOWN: u32 = 4;

#[derive(Clone, Copy)]
#[repr(C)]
struct Slot {
    state: u32,
    abandoned: bool,
    dboid: pg_sys::Oid,
    requester_procno: i32,
    req_len: u32,
    resp_len: u32,
    resp: [u8; RESP_BYTES],
}

const EMPTY_SLOT: Slot = Slot {
    state: FREE,
    abandoned: false,
    dboid: pg_sys::InvalidOid,
    requester_procno: -1,
    req_len: 0,
    resp_len: 0,
    resp: [0; RESP_BYTES],
};

#[derive(Clone, Copy)]
#[repr(C)]
struct WorkerEntry {
    dboid: pg_sys::Oid,
    /// -1 while starting
    procno: i32,
    pid: i32,
    /// when a backend asked for it to start (GetCurrentTimestamp, µs)
    requested_at: i64,
}

const NO_WORKER: WorkerEntry = WorkerEntry { dboid: pg_sys::InvalidOid, procno: -1, pid: 0, requested_at: 0 };

/// A static worker: running (procno >= 0) and waiting for a database (dboid invalid), or assigned one.
#[derive(Clone, Copy)]
#[repr(C)]
struct StaticEntry {
    procno: i32,
    dboid: pg_sys::Oid,
}

const NO_STATIC: StaticEntry = StaticEntry { procno: -1, dboid: pg_sys::InvalidOid };

#[derive(Clone, Copy)]
#[repr(C)]
pub struct LedgerShmem {
    workers: [WorkerEntry; NWORKERS],
    statics: [StaticEntry; MAX_STATIC],
    slots: [Slot; NSLOTS],
    /// the request bytes of every slot (`slot_area`)
    reqs: [u8; REQ_ARENA],
}

/// Where slot `i`'s request bytes lie in `LedgerShmem::reqs`: (offset, capacity).
const fn slot_area(i: usize) -> (usize, usize) {
    let small = NSLOTS - NLARGE;
    if i < small {
        (i * REQ_BYTES, REQ_BYTES)
    } else {
        (small * REQ_BYTES + (i - small) * LARGE_REQ_BYTES, LARGE_REQ_BYTES)
    }
}

impl Default for LedgerShmem {
    fn default() -> Self {
        LedgerShmem { workers: [NO_WORKER; NWORKERS], statics: [NO_STATIC; MAX_STATIC], slots: [EMPTY_SLOT; NSLOTS], reqs: [0; REQ_ARENA] }
    }
}

unsafe impl PGRXSharedMemory for LedgerShmem {}

static LEDGER: PgLwLock<LedgerShmem> = unsafe { PgLwLock::new(c"pg_dp_ledger") };
static mut PRELOADED: bool = false;

/// Called from _PG_init: shared memory exists only when loaded by shared_preload_libraries.
pub fn init() {
    unsafe {
        if !pg_sys::process_shared_preload_libraries_in_progress {
            return;
        }
        PRELOADED = true;
        pg_shmem_init!(LEDGER);
    }
    crate::budget::cache::init();
    pgrx::GucRegistry::define_int_guc(
        c"dp.ledger_workers",
        c"Ledger workers pg_dp starts with the server (each serves one database at a time).",
        c"Their background-worker slots are reserved at server start, so that parallel query cannot take them. A database finds no free one only when more databases than this charge at once; then a worker is started on demand. Valid range 1 to 16; counts towards max_worker_processes.",
        &LEDGER_WORKERS,
        1,
        MAX_STATIC as i32,
        pgrx::GucContext::Postmaster,
        pgrx::GucFlags::default(),
    );
    pgrx::GucRegistry::define_int_guc(
        c"dp.ledger_timeout",
        c"Seconds a pg_dp query waits for a ledger worker to take its charge; then it fails, charged nothing.",
        c"Valid range 1 to 3600 (superuser only).",
        &LEDGER_TIMEOUT,
        1,
        3600,
        pgrx::GucContext::Suset,
        pgrx::GucFlags::UNIT_S,
    );
    for i in 0..LEDGER_WORKERS.get().clamp(1, MAX_STATIC as i32) {
        BackgroundWorkerBuilder::new("pg_dp ledger")
            .set_type("pg_dp ledger")
            .set_library("pg_dp")
            .set_function("pg_dp_ledger_static_main")
            .enable_spi_access()
            .set_start_time(pgrx::bgworkers::BgWorkerStartTime::RecoveryFinished)
            // an idle worker leaves its database by exiting with code 1: start it again at once
            .set_restart_time(Some(std::time::Duration::from_secs(0)))
            .set_argument(Some(pg_sys::Datum::from(i as usize)))
            .load();
    }
}

pub fn preloaded() -> bool {
    unsafe { PRELOADED }
}

pub const PRELOAD_HINT: &str =
    "add pg_dp to shared_preload_libraries in postgresql.conf (shared_preload_libraries = 'pg_dp') and restart the server";

/// Refuses to go on without shared memory (CREATE EXTENSION calls this through dp.check_preloaded()).
pub fn require_preloaded(what: &str) {
    if !preloaded() {
        raise_with(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("pg_dp must be loaded at server start to {what}"),
            Some(PRELOAD_HINT),
        );
    }
}

fn now_us() -> i64 {
    unsafe { pg_sys::GetCurrentTimestamp() }
}

unsafe fn set_proc_latch(procno: i32) {
    if procno >= 0 {
        let proc_ = (*pg_sys::ProcGlobal).allProcs.add(procno as usize);
        pg_sys::SetLatch(&raw mut (*proc_).procLatch);
    }
}

unsafe fn wait_my_latch(timeout_ms: i64) {
    pg_sys::WaitLatch(
        pg_sys::MyLatch,
        (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
        timeout_ms,
        pg_sys::PG_WAIT_EXTENSION,
    );
    pg_sys::ResetLatch(pg_sys::MyLatch);
    pg_sys::check_for_interrupts!();
}

/// What a backend must do about the worker of its database.
enum WorkerNeed {
    /// a worker serves it, or a static worker was just assigned to it: wake that process
    Running(i32),
    Starting,
    /// start a dynamic worker
    Start,
}

/// Hands the database to a static worker waiting for one (wake it), or else asks for a dynamic one.
fn assign_or_start(l: &mut LedgerShmem, dboid: pg_sys::Oid) -> WorkerNeed {
    match l.statics.iter_mut().find(|s| s.procno >= 0 && s.dboid == pg_sys::InvalidOid) {
        Some(st) => {
            st.dboid = dboid;
            WorkerNeed::Running(st.procno)
        }
        None => WorkerNeed::Start,
    }
}

fn worker_need(l: &mut LedgerShmem, dboid: pg_sys::Oid) -> Option<WorkerNeed> {
    if let Some(w) = l.workers.iter_mut().find(|w| w.dboid == dboid) {
        if w.procno >= 0 {
            return Some(WorkerNeed::Running(w.procno));
        }
        if now_us() - w.requested_at < START_TIMEOUT_SECS * 1_000_000 / 3 {
            return Some(WorkerNeed::Starting);
        }
        // the start was asked for long ago and never happened: ask again
        w.requested_at = now_us();
        return Some(assign_or_start(l, dboid));
    }
    let free = l.workers.iter_mut().find(|w| w.dboid == pg_sys::InvalidOid)?;
    *free = WorkerEntry { dboid, procno: -1, pid: 0, requested_at: now_us() };
    Some(assign_or_start(l, dboid))
}

fn start_worker(dboid: pg_sys::Oid) -> bool {
    let r = BackgroundWorkerBuilder::new("pg_dp ledger on demand")
        .set_type("pg_dp ledger on demand")
        .set_library("pg_dp")
        .set_function("pg_dp_ledger_worker_main")
        .enable_spi_access()
        .set_restart_time(None)
        .set_argument(Some(pg_sys::Datum::from(dboid.to_u32() as usize)))
        .load_dynamic();
    if r.is_err() {
        // all background-worker slots are taken (they are shared with parallel query): retry later
        let mut l = LEDGER.exclusive();
        if let Some(w) = l.workers.iter_mut().find(|w| w.dboid == dboid && w.procno < 0) {
            w.requested_at = 0;
        }
    }
    r.is_ok()
}

/// Commits `req` in the ledger worker's own transaction and returns its outcome. Blocks until the
/// worker has committed (or refused); a cancel while waiting leaves the request to the worker, so a
/// cancelled query may still be charged (the safe direction).
pub fn charge(req: &ChargeRequest) -> ChargeOutcome {
    require_preloaded("charge privacy budgets");
    if unsafe { pg_sys::RecoveryInProgress() } {
        raise_with(
            PgSqlErrorCode::ERRCODE_READ_ONLY_SQL_TRANSACTION,
            "pg_dp cannot charge a privacy budget on a standby".into(),
            Some("run DP queries on the primary"),
        );
    }
    let bytes = req.to_bytes_within(LARGE_REQ_BYTES).unwrap_or_else(|| {
        raise_with(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("pg_dp: too many DP aggregates in one query ({})", req.releases.len()),
            Some("split the query"),
        )
    });
    let dboid = unsafe { pg_sys::MyDatabaseId };
    let my_procno = unsafe { (*pg_sys::MyProc).pgprocno };
    // a forfeit is never withdrawn: once queued, a worker records it even if this backend stops
    // waiting (the caller holds interrupts while it waits, so a pending cancel cannot end it)
    let binding = matches!(req.kind, RequestKind::Forfeit { .. });
    let timeout_us = LEDGER_TIMEOUT.get() as i64 * 1_000_000;
    let deadline = now_us() + timeout_us;

    // 1. take a slot, make sure a worker serves this database, wake it
    let idx = loop {
        let (slot, need) = {
            let mut l = LEDGER.exclusive();
            let need = worker_need(&mut l, dboid);
            let slot = (0..NSLOTS).find(|i| l.slots[*i].state == FREE && slot_area(*i).1 >= bytes.len());
            if let Some(i) = slot {
                let s = &mut l.slots[i];
                s.state = NEW;
                s.abandoned = false;
                s.dboid = dboid;
                s.requester_procno = my_procno;
                s.req_len = bytes.len() as u32;
                s.resp_len = 0;
                let (at, _) = slot_area(i);
                l.reqs[at..at + bytes.len()].copy_from_slice(&bytes);
            }
            (slot, need)
        };
        match need {
            Some(WorkerNeed::Running(p)) => unsafe { set_proc_latch(p) },
            Some(WorkerNeed::Start) => {
                start_worker(dboid);
            }
            Some(WorkerNeed::Starting) | None => {}
        }
        if let Some(i) = slot {
            break i;
        }
        if now_us() > deadline {
            raise_with(
                PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
                "pg_dp: the ledger queue stayed full; nothing was charged".into(),
                Some("retry; many sessions are charging at once"),
            );
        }
        unsafe { wait_my_latch(5) };
    };

    // 2. wait for the answer
    PgTryBuilder::new(|| loop {
        let need = {
            let mut l = LEDGER.exclusive();
            let state = l.slots[idx].state;
            match state {
                DONE => {
                    let s = &mut l.slots[idx];
                    let out = ChargeOutcome::from_bytes(&s.resp[..s.resp_len as usize]);
                    s.state = FREE;
                    return out.unwrap_or(ChargeOutcome::Failed { message: "unreadable answer".into() });
                }
                UNKNOWN => {
                    l.slots[idx].state = FREE;
                    drop(l);
                    raise_with(
                        PgSqlErrorCode::ERRCODE_SYSTEM_ERROR,
                        "pg_dp: the ledger worker stopped while charging; the charge may have been recorded".into(),
                        Some("check dp.ledger before retrying"),
                    );
                }
                NEW if now_us() > deadline && binding => {
                    // left queued: the worker that takes it frees the slot
                    l.slots[idx].abandoned = true;
                    return ChargeOutcome::Failed { message: "queued; not yet recorded".into() };
                }
                NEW if now_us() > deadline => {
                    // no worker took it in time: withdraw it, nothing is charged
                    l.slots[idx].state = FREE;
                    drop(l);
                    raise_with(
                        PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
                        format!("pg_dp: no ledger worker took the charge within dp.ledger_timeout ({} s); nothing was charged", timeout_us / 1_000_000),
                        Some("the server may be out of background-worker slots: raise dp.ledger_workers or max_worker_processes (server restart)"),
                    );
                }
                NEW => worker_need(&mut l, dboid),
                _ => None,
            }
        };
        match need {
            Some(WorkerNeed::Start) => {
                start_worker(dboid);
            }
            Some(WorkerNeed::Running(p)) => unsafe { set_proc_latch(p) },
            _ => {}
        }
        unsafe { wait_my_latch(1000) };
    })
    .catch_others(|e| {
        {
            let mut l = LEDGER.exclusive();
            let s = &mut l.slots[idx];
            match s.state {
                // not picked up yet: withdraw it, nothing is charged (a forfeit stays queued)
                NEW if binding => s.abandoned = true,
                NEW => s.state = FREE,
                DONE | UNKNOWN => s.state = FREE,
                // being committed: the worker frees the slot when done
                _ => s.abandoned = true,
            }
        }
        e.rethrow()
    })
    .execute()
}

// ----- the worker ----------------------------------------------------------------------------

unsafe extern "C-unwind" {
    #[link_name = "die"]
    fn pg_die(sig: c_int);
}

/// On any exit of a worker: leave the table, and fail the requests it was committing.
unsafe extern "C-unwind" fn worker_exit(_code: c_int, arg: pg_sys::Datum) {
    let dboid = pg_sys::Oid::from(arg.value() as u32);
    let mut l = LEDGER.exclusive();
    let me = pg_sys::MyProcPid;
    for w in l.workers.iter_mut().filter(|w| w.dboid == dboid && w.pid == me) {
        *w = NO_WORKER;
    }
    for s in l.slots.iter_mut().filter(|s| s.dboid == dboid && s.state == BUSY) {
        if s.abandoned {
            s.state = FREE;
        } else {
            s.state = UNKNOWN;
            set_proc_latch(s.requester_procno);
        }
    }
}

/// On any exit of a static worker: it no longer waits for a database.
unsafe extern "C-unwind" fn static_exit(_code: c_int, arg: pg_sys::Datum) {
    let mut l = LEDGER.exclusive();
    l.statics[arg.value() % MAX_STATIC] = NO_STATIC;
}

/// A static worker (registered at server start): waits, unconnected, until a backend assigns it a
/// database, serves that database until idle, and exits with code 1 to be started again at once.
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn pg_dp_ledger_static_main(arg: pg_sys::Datum) {
    unsafe {
        pg_sys::pqsignal(pg_sys::SIGTERM as c_int, Some(pg_die));
        pg_sys::BackgroundWorkerUnblockSignals();
        let i = arg.value() % MAX_STATIC;
        LEDGER.exclusive().statics[i] = StaticEntry { procno: (*pg_sys::MyProc).pgprocno, dboid: pg_sys::InvalidOid };
        pg_sys::on_shmem_exit(Some(static_exit), arg);
        let dboid = loop {
            let d = LEDGER.share().statics[i].dboid;
            if d != pg_sys::InvalidOid {
                break d;
            }
            wait_my_latch(10_000);
        };
        serve(dboid);
        pg_sys::proc_exit(1);
    }
}

/// A worker started on demand for one database (when no static worker was free).
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn pg_dp_ledger_worker_main(arg: pg_sys::Datum) {
    unsafe {
        pg_sys::pqsignal(pg_sys::SIGTERM as c_int, Some(pg_die));
        pg_sys::BackgroundWorkerUnblockSignals();
        serve(pg_sys::Oid::from(arg.value() as u32));
    }
}

/// Serves the charges of one database until idle for [`IDLE_EXIT_SECS`].
unsafe fn serve(dboid: pg_sys::Oid) {
    unsafe {
        let arg = pg_sys::Datum::from(dboid.to_u32() as usize);
        crate::budget::cache::this_process_is_the_ledger();
        {
            let mut l = LEDGER.exclusive();
            match l.workers.iter_mut().find(|w| w.dboid == dboid) {
                Some(w) if w.procno >= 0 => return, // another worker already serves this database
                Some(w) => {
                    w.procno = (*pg_sys::MyProc).pgprocno;
                    w.pid = pg_sys::MyProcPid;
                }
                None => match l.workers.iter_mut().find(|w| w.dboid == pg_sys::InvalidOid) {
                    Some(w) => {
                        *w = WorkerEntry { dboid, procno: (*pg_sys::MyProc).pgprocno, pid: pg_sys::MyProcPid, requested_at: 0 }
                    }
                    None => return,
                },
            }
        }
        pg_sys::on_shmem_exit(Some(worker_exit), arg);
        // the bootstrap superuser; the role to charge travels in each request
        BackgroundWorker::connect_worker_to_spi_by_oid(Some(dboid), None);
        // for the worker's whole session, above any database or role default: a debit waits at most
        // 10 s for a budget row a DBA holds, commits durably, resolves names in pg_catalog only, and
        // runs its kept statements on generic plans (a custom plan per batch, which the arrays'
        // estimates can favour, would plan each statement again every time)
        for (name, value) in [
            (c"lock_timeout", c"10s"),
            (c"synchronous_commit", c"on"),
            (c"search_path", c"pg_catalog, pg_temp"),
            (c"plan_cache_mode", c"force_generic_plan"),
        ] {
            pg_sys::SetConfigOption(name.as_ptr(), value.as_ptr(), pg_sys::GucContext::PGC_SUSET, pg_sys::GucSource::PGC_S_SESSION);
        }
        let mut idle_since = now_us();
        loop {
            let mut batch: Vec<(usize, Vec<u8>)> = Vec::new();
            {
                let mut l = LEDGER.exclusive();
                for i in 0..NSLOTS {
                    let s = &mut l.slots[i];
                    if s.state == NEW && s.dboid == dboid {
                        s.state = BUSY;
                        let (at, len) = (slot_area(i).0, s.req_len as usize);
                        batch.push((i, l.reqs[at..at + len].to_vec()));
                    }
                }
                if batch.is_empty() && now_us() - idle_since > IDLE_EXIT_SECS * 1_000_000 {
                    // leave while holding the lock: a backend that queues after this starts a new worker
                    let me = pg_sys::MyProcPid;
                    for w in l.workers.iter_mut().filter(|w| w.dboid == dboid && w.pid == me) {
                        *w = NO_WORKER;
                    }
                    return;
                }
            }
            if batch.is_empty() {
                wait_my_latch(500);
                continue;
            }
            let outcomes = run_batch(&batch);
            {
                let mut l = LEDGER.exclusive();
                for ((i, _), out) in batch.iter().zip(outcomes) {
                    let s = &mut l.slots[*i];
                    let b = out.to_bytes_within(RESP_BYTES);
                    let n = b.len().min(RESP_BYTES);
                    s.resp[..n].copy_from_slice(&b[..n]);
                    s.resp_len = n as u32;
                    if s.abandoned {
                        s.state = FREE;
                    } else {
                        s.state = DONE;
                        set_proc_latch(s.requester_procno);
                    }
                }
            }
            idle_since = now_us();
        }
    }
}

fn caught_message(e: &pg_sys::panic::CaughtError) -> String {
    use pg_sys::panic::CaughtError::*;
    match e {
        PostgresError(r) | ErrorReport(r) | RustPanic { ereport: r, .. } => r.message().to_string(),
    }
}

/// Every request of the batch in one transaction (one WAL flush). Plain charges (the common case)
/// are debited together (`debit::debit_batch`); forfeits and requests that reuse cached releases,
/// each in its own subtransaction. When the common debit fails, its requests are tried again one by
/// one, each in its own subtransaction.
fn run_batch(batch: &[(usize, Vec<u8>)]) -> Vec<ChargeOutcome> {
    let r = PgTryBuilder::new(|| unsafe {
        pg_sys::SetCurrentStatementStartTimestamp();
        pg_sys::StartTransactionCommand();
        pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
        pg_sys::pgstat_report_activity(pg_sys::BackendState::STATE_RUNNING, c"pg_dp ledger: debit".as_ptr());
        let reqs: Vec<Option<ChargeRequest>> = batch.iter().map(|(_, b)| ChargeRequest::from_bytes(b)).collect();
        let mut out: Vec<Option<ChargeOutcome>> = vec![None; batch.len()];
        // `debit::debit_batch` reads and writes budgets by identity; a database still on 0.1.0's
        // schema has its own dp.debit: one request at a time
        let batched = crate::catalog::identity::budgets_by_identity();
        let plain: Vec<usize> = (0..reqs.len()).filter(|&i| batched && reqs[i].as_ref().is_some_and(is_plain)).collect();
        if !plain.is_empty() {
            let together: Vec<&ChargeRequest> = plain.iter().filter_map(|&i| reqs[i].as_ref()).collect();
            match in_subxact(|| debit::debit_batch(&together)) {
                Ok(v) => {
                    for (&i, o) in plain.iter().zip(v) {
                        out[i] = Some(o);
                    }
                }
                Err(message) => {
                    debit::forget_plans();
                    log!("pg_dp ledger: a batch of {} charges failed ({message}); charging each alone", plain.len());
                    for &i in &plain {
                        let req = reqs[i].as_ref().expect("a plain request");
                        out[i] = Some(in_subxact(|| debit::debit_batch(&[req]).remove(0)).unwrap_or_else(|message| {
                            debit::forget_plans();
                            ChargeOutcome::Failed { message }
                        }));
                    }
                }
            }
        }
        for (i, req) in reqs.iter().enumerate() {
            if out[i].is_none() {
                out[i] = Some(match req {
                    Some(req) => in_subxact(|| debit(req, batched)).unwrap_or_else(|message| ChargeOutcome::Failed { message }),
                    None => ChargeOutcome::Failed { message: "unreadable request".into() },
                });
            }
        }
        pg_sys::PopActiveSnapshot();
        pg_sys::CommitTransactionCommand();
        pg_sys::pgstat_report_activity(pg_sys::BackendState::STATE_IDLE, std::ptr::null());
        out.into_iter().map(|o| o.expect("every request answered")).collect::<Vec<_>>()
    })
    .catch_others(|e| {
        let message = caught_message(&e);
        unsafe { pg_sys::AbortCurrentTransaction() };
        debit::forget_plans();
        log!("pg_dp ledger: batch rolled back, nothing charged: {message}");
        batch.iter().map(|_| ChargeOutcome::Failed { message: message.clone() }).collect()
    })
    .execute();
    r
}

/// A charge that `debit::debit_batch` takes: releases to pay, none reused from the cache, not a forfeit.
fn is_plain(req: &ChargeRequest) -> bool {
    matches!(req.kind, RequestKind::Charge) && req.reused.is_empty() && !req.releases.is_empty()
}

/// A request's outcome from a row of 0.1.0's `dp.debit`: granted, reason, ε and δ left.
fn outcome(row: &pgrx::spi::SpiHeapTupleData<'_>) -> Result<ChargeOutcome, pgrx::spi::Error> {
    let eps_rem = row.get::<String>(3)?;
    Ok(if row.get::<bool>(1)?.unwrap_or(false) {
        ChargeOutcome::Granted { epsilon_remaining: eps_rem }
    } else {
        ChargeOutcome::Denied { reason: row.get::<String>(2)?.unwrap_or_default(), epsilon_remaining: eps_rem, delta_remaining: row.get::<String>(4)? }
    })
}

unsafe fn in_subxact<R>(f: impl FnOnce() -> R + std::panic::UnwindSafe) -> Result<R, String> {
    let oldcxt = pg_sys::CurrentMemoryContext;
    let oldowner = pg_sys::CurrentResourceOwner;
    pg_sys::BeginInternalSubTransaction(std::ptr::null());
    pg_sys::MemoryContextSwitchTo(oldcxt);
    let r = PgTryBuilder::new(|| Ok(f()))
        .catch_others(|e| {
            let msg = caught_message(&e);
            pg_sys::MemoryContextSwitchTo(oldcxt);
            pg_sys::RollbackAndReleaseCurrentSubTransaction();
            pg_sys::MemoryContextSwitchTo(oldcxt);
            pg_sys::CurrentResourceOwner = oldowner;
            Err(msg)
        })
        .execute();
    if r.is_ok() {
        pg_sys::ReleaseCurrentSubTransaction();
        pg_sys::MemoryContextSwitchTo(oldcxt);
        pg_sys::CurrentResourceOwner = oldowner;
    }
    r
}

/// One request that the batch does not take (a forfeit, a charge with releases reused from the
/// cache, any charge of a database still on 0.1.0's schema): `dp.forfeit`, or `dp.reuse_refusal` then
/// the debit of its releases (`debit::debit_batch` of one, or 0.1.0's `dp.debit`), which checks the
/// budget and writes the receipts under the budget row's lock, then the count of its reuses;
/// `batched`: the database's schema is the one `debit::debit_batch` writes. (The session settings of
/// `serve` hold: lock timeout, durable commit, search path.)
fn debit(req: &ChargeRequest, batched: bool) -> ChargeOutcome {
    let refused = Spi::connect_mut(|c| -> Result<Option<ChargeOutcome>, pgrx::spi::Error> {
        if let RequestKind::Forfeit { sqlstate } = &req.kind {
            let args = [
                pg_sys::Oid::from(req.role).into(),
                req.database_user.clone().into(),
                req.query_id.into(),
                req.query_text.clone().into(),
                sqlstate.clone().into(),
            ];
            let t = c.update(
                "SELECT pg_catalog.trim_scale(epsilon_forfeited)::text FROM dp.forfeit($1, $2::name, $3, $4, $5)",
                None,
                &args,
            )?;
            return Ok(Some(ChargeOutcome::Granted { epsilon_remaining: t.first().get::<String>(1)? }));
        }
        // releases from the cache: served only to a role that could have bought them
        if !req.reused.is_empty() {
            let args = [
                pg_sys::Oid::from(req.role).into(),
                req.unlimited.into(),
                req.reused.iter().flat_map(|r| r.epsilons.iter().cloned()).collect::<Vec<_>>().into(),
                req.reused.iter().flat_map(|r| r.deltas.iter().cloned()).collect::<Vec<_>>().into(),
            ];
            let t = c.update("SELECT dp.reuse_refusal($1, $2, $3::numeric[], $4::numeric[])", None, &args)?;
            if let Some(reason) = t.first().get::<String>(1)? {
                let rem = c.update(
                    "SELECT pg_catalog.trim_scale(epsilon_remaining)::text, pg_catalog.trim_scale(delta_remaining)::text \
                       FROM dp.budgets WHERE role_uid = dp.role_uid($1)",
                    None,
                    &[pg_sys::Oid::from(req.role).into()],
                )?;
                let (eps, del) = if rem.is_empty() {
                    (None, None)
                } else {
                    let row = rem.first();
                    (row.get::<String>(1)?, row.get::<String>(2)?)
                };
                return Ok(Some(ChargeOutcome::Denied { reason, epsilon_remaining: eps, delta_remaining: del }));
            }
        }
        Ok(None)
    })
    .unwrap_or_else(|e| error!("pg_dp ledger: {e}"));
    if let Some(out) = refused {
        return out;
    }
    let out = if req.releases.is_empty() {
        ChargeOutcome::Granted { epsilon_remaining: None }
    } else if batched {
        debit::debit_batch(&[req]).remove(0)
    } else {
        debit_0_1(req)
    };
    if matches!(out, ChargeOutcome::Granted { .. }) && !req.reused.is_empty() {
        Spi::connect_mut(|c| record_reuse(c, req)).unwrap_or_else(|e| error!("pg_dp ledger: {e}"));
    }
    out
}

/// A charge in a database still on 0.1.0's schema: its own `dp.debit`.
fn debit_0_1(req: &ChargeRequest) -> ChargeOutcome {
    let r = Spi::connect_mut(|c| -> Result<ChargeOutcome, pgrx::spi::Error> {
        let rel = &req.releases;
        let args = [
            pg_sys::Oid::from(req.role).into(),
            req.database_user.clone().into(),
            req.unlimited.into(),
            req.query_id.into(),
            req.query_text.clone().into(),
            rel.iter().map(|r| r.aggregate.clone()).collect::<Vec<_>>().into(),
            rel.iter().map(|r| r.mechanism.clone()).collect::<Vec<_>>().into(),
            rel.iter().map(|r| r.sensitivity).collect::<Vec<_>>().into(),
            rel.iter().map(|r| r.noise_scale).collect::<Vec<_>>().into(),
            rel.iter().map(|r| r.epsilon.clone()).collect::<Vec<_>>().into(),
            rel.iter().map(|r| r.delta.clone()).collect::<Vec<_>>().into(),
            rel.iter().map(|r| r.details.clone()).collect::<Vec<_>>().into(),
        ];
        let t = c.update(
            "SELECT granted, reason, pg_catalog.trim_scale(epsilon_remaining)::text, pg_catalog.trim_scale(delta_remaining)::text \
               FROM dp.debit($1, $2::name, $3, $4, $5, $6, $7, $8, $9, $10::numeric[], $11::numeric[], $12::jsonb[])",
            None,
            &args,
        )?;
        Ok(match t.into_iter().next() {
            Some(row) => outcome(&row)?,
            None => ChargeOutcome::Failed { message: "dp.debit answered nothing".into() },
        })
    });
    r.unwrap_or_else(|e| error!("pg_dp ledger: {e}"))
}

/// Counts the request's reuses of cached releases: one row per role and execution.
fn record_reuse(c: &mut pgrx::spi::SpiClient<'_>, req: &ChargeRequest) -> Result<(), pgrx::spi::Error> {
    if req.reused.is_empty() {
        return Ok(());
    }
    let executions: Vec<String> = req.reused.iter().map(|r| r.execution.clone()).collect();
    c.update("SELECT dp.record_reuse($1, $2)", None, &[pg_sys::Oid::from(req.role).into(), executions.into()])?;
    Ok(())
}
