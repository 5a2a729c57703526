//! The release cache: the same DP query, with the same parameters, on unchanged data, returns the
//! rows it released before, at no new cost, to any role that may run it.
//!
//! What is cached. The rows a DP Release node returned (release.rs), once its aggregation ran to the
//! end (at the end of the statement if its reader stopped early), under a key made of the DP level
//! (query/release_key.rs: the level's normalized query tree, with the default ε already a constant,
//! and its description, not the statement around it), who may reuse it, the receipts the release
//! was paid with (ε, δ, bounds, p, mechanism) and the values of the bind parameters. Any difference
//! gives another key, hence a fresh release, paid for. The rows carry the canonical names of their
//! columns, and are replayed by name into the plan that reuses them.
//!
//! When it is unchanged ("exact"). Every relation gets a version counter in shared memory (hashed
//! by database and relation; a collision only invalidates more). A transaction that wrote a
//! relation (an INSERT, UPDATE, DELETE or MERGE target, seen by the ExecutorStart hook) or ran a
//! utility statement that can change data or definitions (anything but a short read-only list: COPY
//! FROM, TRUNCATE, ALTER, CREATE, DROP, REFRESH, SECURITY LABEL, ... bump the database's version)
//! marks those versions *pending* before it commits (`XACT_EVENT_PRE_COMMIT`, while its writes are
//! still invisible), and after the commit (visible to every new snapshot) increments them and
//! records its transaction id. A release is stored or reused only when, for every relation the
//! level reads (and their ancestors and inheritance children, and the database):
//! - no commit is pending, and
//! - the statement's snapshot sees every commit counted in the version: the last [`RING`] writers'
//!   transaction ids are checked against the snapshot, and older ones must precede its xmin.
//! so a stored release was computed on exactly the data its versions name, and a reused one is
//! served only to a snapshot that sees that same data. A transaction that has written anything
//! itself neither stores nor reuses. Transactions that write without passing the hooks (logical
//! replication apply, other background workers) bump the database's version. A prepared
//! transaction (two-phase commit) leaves its relations pending until the server restarts. Shared
//! memory starts empty at every server start.
//!
//! Not cached: statements with row security, a `dp.seed`, functions reading parameters
//! dynamically (PL/pgSQL variables), relations other than tables, partitioned tables, materialized
//! views and views, tables a DBA turned the cache off for (`dp.set_release_cache`), and rows with
//! out-of-line TOAST values. Entries live in a ring buffer of `dp.release_cache_size` megabytes;
//! the oldest are overwritten.
use pgrx::pg_sys::{self, Oid};
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap};

/// Reuse released answers (superuser only; on by default).
pub static RELEASE_CACHE: GucSetting<bool> = GucSetting::<bool>::new(true);
/// Megabytes of shared memory for cached releases (server start; 0 turns the cache off).
pub static CACHE_SIZE_MB: GucSetting<i32> = GucSetting::<i32>::new(16);

/// Who may reuse a cached release (superuser only): `role`, the role that paid for it (the
/// default), or `database`, any role of the database that could have bought it.
#[derive(Clone, Copy, PartialEq, Eq, Debug, pgrx::PostgresGucEnum)]
pub enum Sharing {
    #[name = c"role"]
    Role,
    #[name = c"database"]
    Database,
}
pub static SHARING: GucSetting<Sharing> = GucSetting::<Sharing>::new(Sharing::Role);

/// True when releases are shared across the roles of the database (`dp.release_cache_sharing`).
pub fn shared_across_roles() -> bool {
    SHARING.get() == Sharing::Database
}

const NVERSIONS: usize = 4096;
const NENTRIES: usize = 2048;
/// Most version counters one statement depends on.
const MAX_SLOTS: usize = 32;
/// Writers remembered per version counter.
const RING: usize = 4;
const EXEC_ID: usize = 64;
/// Largest cached release (key and rows): also bounds the backend memory a store or a reuse takes.
const MAX_ENTRY: usize = 64 * 1024 * 1024;

/// Largest entry this cache keeps: an eighth of its arena, at most [`MAX_ENTRY`].
unsafe fn max_entry() -> usize {
    ((*SHARED).arena_size as usize / 8).min(MAX_ENTRY)
}

#[repr(C)]
struct Version {
    version: u64,
    pending: u32,
    ring_n: u32,
    ring: [pg_sys::TransactionId; RING],
    /// the newest transaction id pushed out of the ring (valid when `evicted` is 1)
    evicted_max: pg_sys::TransactionId,
    evicted: u32,
}

#[repr(C)]
struct Entry {
    used: u32,
    dboid: u32,
    hash: u64,
    /// position of its bytes in the arena (a running count; the arena is a ring)
    start: u64,
    key_len: u32,
    rows_len: u32,
    nslots: u32,
    slots: [u32; MAX_SLOTS],
    versions: [u64; MAX_SLOTS],
    exec_len: u32,
    exec: [u8; EXEC_ID],
    charged_at: i64,
}

#[repr(C)]
struct Shared {
    arena_size: u64,
    write_pos: u64,
    next_entry: u32,
    versions: [Version; NVERSIONS],
    entries: [Entry; NENTRIES],
    // the arena follows
}

static mut SHARED: *mut Shared = std::ptr::null_mut();
static mut LOCK: *mut pg_sys::LWLock = std::ptr::null_mut();
static mut PREV_REQUEST: pg_sys::shmem_request_hook_type = None;
static mut PREV_STARTUP: pg_sys::shmem_startup_hook_type = None;
const TRANCHE: &std::ffi::CStr = c"pg_dp_release_cache";

fn arena_bytes() -> usize {
    CACHE_SIZE_MB.get().max(0) as usize * 1024 * 1024
}

/// Called from _PG_init while preloading.
pub fn init() {
    GucRegistry::define_bool_guc(
        c"dp.release_cache",
        c"Answer a repeated DP query on unchanged data with the rows it released before, at no cost (superuser only).",
        c"Any write to a table the query reads, and any DDL in the database, makes its releases stale.",
        &RELEASE_CACHE,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_enum_guc(
        c"dp.release_cache_sharing",
        c"Who may reuse a cached release: role (only the role that paid for it) or database (any role of the database that could have bought it) (superuser only).",
        c"A reuse is free: with database, every role with a budget whose per-query cap and pinned level allow the release's epsilon receives what another role paid for. Set it per database with ALTER DATABASE ... SET.",
        &SHARING,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"dp.release_cache_size",
        c"Shared memory for pg_dp's release cache, in megabytes (server start; 0 turns it off).",
        c"The oldest releases are overwritten when it is full. Valid range 0 to 4096.",
        &CACHE_SIZE_MB,
        0,
        4096,
        GucContext::Postmaster,
        GucFlags::UNIT_MB,
    );
    unsafe {
        PREV_REQUEST = pg_sys::shmem_request_hook;
        pg_sys::shmem_request_hook = Some(shmem_request);
        PREV_STARTUP = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(shmem_startup);
        pg_sys::RegisterXactCallback(Some(xact_event), std::ptr::null_mut());
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn shmem_request() {
    if let Some(prev) = PREV_REQUEST {
        pg_sys::ffi::pg_guard_ffi_boundary(|| prev());
    }
    pg_sys::RequestAddinShmemSpace(std::mem::size_of::<Shared>() + arena_bytes());
    pg_sys::RequestNamedLWLockTranche(TRANCHE.as_ptr(), 1);
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn shmem_startup() {
    if let Some(prev) = PREV_STARTUP {
        pg_sys::ffi::pg_guard_ffi_boundary(|| prev());
    }
    // AddinShmemInitLock (lwlocknames.txt: 21)
    let init_lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock;
    pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
    let mut found = false;
    let p = pg_sys::ShmemInitStruct(c"pg_dp release cache".as_ptr(), std::mem::size_of::<Shared>() + arena_bytes(), &mut found) as *mut Shared;
    if !found {
        std::ptr::write_bytes(p as *mut u8, 0, std::mem::size_of::<Shared>());
        (*p).arena_size = arena_bytes() as u64;
    }
    SHARED = p;
    LOCK = &raw mut (*pg_sys::GetNamedLWLockTranche(TRANCHE.as_ptr())).lock;
    pg_sys::LWLockRelease(init_lock);
}

/// The cache's lock, held until dropped.
struct Locked;
impl Locked {
    unsafe fn new(exclusive: bool) -> Locked {
        let mode = if exclusive { pg_sys::LWLockMode::LW_EXCLUSIVE } else { pg_sys::LWLockMode::LW_SHARED };
        pg_sys::LWLockAcquire(LOCK, mode);
        Locked
    }
}
impl Drop for Locked {
    fn drop(&mut self) {
        unsafe { pg_sys::LWLockRelease(LOCK) };
    }
}

fn available() -> bool {
    unsafe { !SHARED.is_null() && !LOCK.is_null() }
}

/// The version counter of a relation of a database (relation 0: the database itself).
fn slot_of(db: Oid, rel: Oid) -> u32 {
    // splitmix64 of the pair
    let mut z = ((db.to_u32() as u64) << 32 | rel.to_u32() as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((z ^ (z >> 31)) % NVERSIONS as u64) as u32
}

fn database_slot() -> u32 {
    slot_of(unsafe { pg_sys::MyDatabaseId }, pg_sys::InvalidOid)
}

// ----- writers ------------------------------------------------------------------------------------

thread_local! {
    /// Version counters this transaction's writes make stale.
    static WRITTEN: RefCell<BTreeSet<u32>> = const { RefCell::new(BTreeSet::new()) };
    /// A statement of this transaction passed pg_dp's hooks.
    static SEEN: Cell<bool> = const { Cell::new(false) };
    /// Counters marked pending at pre-commit, and the committing transaction id.
    static COMMITTING: RefCell<(Vec<u32>, pg_sys::TransactionId)> = const { RefCell::new((Vec::new(), pg_sys::InvalidTransactionId)) };
    /// This process is a ledger worker: it writes only pg_dp's own tables.
    static LEDGER_PROCESS: Cell<bool> = const { Cell::new(false) };
}

pub fn this_process_is_the_ledger() {
    LEDGER_PROCESS.with(|l| l.set(true));
}

/// Every statement the executor starts: its written relations make their releases stale.
pub unsafe fn note_statement(stmt: *mut pg_sys::PlannedStmt) {
    SEEN.with(|s| s.set(true));
    let write = (pg_sys::ACL_INSERT | pg_sys::ACL_UPDATE | pg_sys::ACL_DELETE) as pg_sys::AclMode;
    for rte in crate::pg::nodes::list_iter::<pg_sys::RangeTblEntry>((*stmt).rtable) {
        if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION && (*rte).requiredPerms & write != 0 {
            let s = slot_of(pg_sys::MyDatabaseId, (*rte).relid);
            WRITTEN.with(|w| w.borrow_mut().insert(s));
        }
    }
}

/// Every utility statement: all but a few read-only ones can change data or definitions.
pub unsafe fn note_utility(stmt: *mut pg_sys::Node) {
    use pg_sys::NodeTag::*;
    SEEN.with(|s| s.set(true));
    if stmt.is_null() {
        return;
    }
    let read_only = match (*stmt).type_ {
        T_TransactionStmt | T_VariableSetStmt | T_VariableShowStmt | T_DeclareCursorStmt | T_FetchStmt | T_ClosePortalStmt
        | T_PrepareStmt | T_ExecuteStmt | T_DeallocateStmt | T_ExplainStmt | T_ListenStmt | T_NotifyStmt | T_UnlistenStmt
        | T_LockStmt | T_CheckPointStmt | T_DiscardStmt | T_VacuumStmt | T_CallStmt | T_DoStmt | T_LoadStmt
        | T_ConstraintsSetStmt => true,
        T_CopyStmt => !(*(stmt as *mut pg_sys::CopyStmt)).is_from,
        _ => false,
    };
    if !read_only {
        let s = database_slot();
        WRITTEN.with(|w| w.borrow_mut().insert(s));
    }
}

/// True if this transaction has written or may write before the statement runs: such a statement
/// sees its own changes, so it neither reuses nor stores releases.
fn transaction_wrote() -> bool {
    let xid = unsafe { pg_sys::GetTopTransactionIdIfAny() };
    xid != pg_sys::InvalidTransactionId || WRITTEN.with(|w| !w.borrow().is_empty())
}

fn reset_transaction() {
    WRITTEN.with(|w| w.borrow_mut().clear());
    SEEN.with(|s| s.set(false));
    COMMITTING.with(|c| *c.borrow_mut() = (Vec::new(), pg_sys::InvalidTransactionId));
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn xact_event(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    use pg_sys::XactEvent::*;
    if !available() {
        return;
    }
    match event {
        XACT_EVENT_PRE_COMMIT | XACT_EVENT_PRE_PREPARE => {
            let xid = pg_sys::GetTopTransactionIdIfAny();
            if xid == pg_sys::InvalidTransactionId || LEDGER_PROCESS.with(|l| l.get()) {
                return;
            }
            let mut slots: Vec<u32> = WRITTEN.with(|w| w.borrow().iter().copied().collect());
            let autovacuum = pg_sys::MyBackendType == pg_sys::BackendType::B_AUTOVAC_WORKER;
            if slots.is_empty() && !SEEN.with(|s| s.get()) && !autovacuum {
                // written without passing the hooks (logical replication apply, a background worker)
                slots.push(database_slot());
            }
            if slots.is_empty() {
                return;
            }
            let _l = Locked::new(true);
            for s in &slots {
                let v = &mut (*SHARED).versions[*s as usize];
                v.pending += 1;
                if event == XACT_EVENT_PRE_PREPARE {
                    // committed later, maybe by another session: stale until the server restarts
                    v.version += 1;
                }
            }
            if event == XACT_EVENT_PRE_COMMIT {
                COMMITTING.with(|c| *c.borrow_mut() = (slots, xid));
            }
        }
        XACT_EVENT_COMMIT | XACT_EVENT_ABORT => {
            let (slots, xid) = COMMITTING.with(|c| std::mem::take(&mut *c.borrow_mut()));
            if !slots.is_empty() {
                let _l = Locked::new(true);
                for s in slots {
                    let v = &mut (*SHARED).versions[s as usize];
                    v.version += 1;
                    v.pending = v.pending.saturating_sub(1);
                    if event == XACT_EVENT_COMMIT {
                        if v.ring_n as usize == RING {
                            let old = v.ring[0];
                            if v.evicted == 0 || pg_sys::TransactionIdPrecedes(v.evicted_max, old) {
                                v.evicted_max = old;
                            }
                            v.evicted = 1;
                            v.ring.copy_within(1.., 0);
                            v.ring_n -= 1;
                        }
                        v.ring[v.ring_n as usize] = xid;
                        v.ring_n += 1;
                    }
                }
            }
            reset_transaction();
            forget_all();
        }
        XACT_EVENT_PREPARE => {
            reset_transaction();
            forget_all();
        }
        _ => {}
    }
}

// ----- readers ------------------------------------------------------------------------------------

/// The version counters a statement depends on, as read before it ran.
#[derive(Clone, PartialEq, Eq)]
pub struct Versions(Vec<(u32, u64)>);

/// The versions of the relations a statement reads (`relids`, ancestors included) and of the database, if
/// the statement may use the cache: no commit pending on any, and `snap` sees every committed one.
unsafe fn versions_for(relids: &[Oid], snap: pg_sys::Snapshot) -> Option<Versions> {
    let db = pg_sys::MyDatabaseId;
    let mut slots: BTreeSet<u32> = BTreeSet::new();
    slots.insert(database_slot());
    for r in relids {
        slots.insert(slot_of(db, *r));
    }
    if slots.len() > MAX_SLOTS {
        return None;
    }
    let mut out = Vec::with_capacity(slots.len());
    let mut writers: Vec<pg_sys::TransactionId> = Vec::new();
    let mut older: Vec<pg_sys::TransactionId> = Vec::new();
    {
        let _l = Locked::new(false);
        for s in slots {
            let v = &(*SHARED).versions[s as usize];
            if v.pending > 0 {
                return None;
            }
            out.push((s, v.version));
            writers.extend_from_slice(&v.ring[..v.ring_n as usize]);
            if v.evicted != 0 {
                older.push(v.evicted_max);
            }
        }
    }
    // every writer counted must be visible to the snapshot
    if writers.iter().any(|x| pg_sys::XidInMVCCSnapshot(*x, snap)) {
        return None;
    }
    if older.iter().any(|x| !pg_sys::TransactionIdPrecedes(*x, (*snap).xmin)) {
        return None;
    }
    Some(Versions(out))
}

/// A statement that may use the cache: its snapshot and the values its releases depend on beside
/// their levels (bind parameters, session settings).
pub struct Statement {
    snap: pg_sys::Snapshot,
    params: Vec<u8>,
}

/// Whether this statement may reuse and store releases.
pub unsafe fn statement(qd: *mut pg_sys::QueryDesc) -> Option<Statement> {
    if !available() || !RELEASE_CACHE.get() || (*SHARED).arena_size == 0 || transaction_wrote() || crate::settings::guc::seeded() {
        return None;
    }
    if !schema_has_cache() {
        // a database still on an earlier version's schema (before ALTER EXTENSION pg_dp UPDATE) has
        // no receipts for reused releases
        return None;
    }
    let snap = (*qd).snapshot;
    if snap.is_null() || (*snap).snapshot_type != pg_sys::SnapshotType::SNAPSHOT_MVCC {
        return None;
    }
    let mut params = param_image((*qd).params)?;
    params.extend_from_slice(session_settings().as_bytes());
    Some(Statement { snap, params })
}

impl Statement {
    /// The versions a level's releases depend on, read before it runs: of the relations it reads
    /// (`relids`), their ancestors (a partition is written through its parent) and their
    /// inheritance children (a table read with its partitions), and of the database. None when the
    /// level may not use the cache now (a relation that is not a table, materialized view or view,
    /// the cache turned off for one, a pending or unseen commit).
    pub unsafe fn versions(&self, relids: &[Oid]) -> Option<Versions> {
        let mut all: Vec<Oid> = Vec::new();
        for r in relids {
            let k = pg_sys::get_rel_relkind(*r) as u8;
            if ![pg_sys::RELKIND_RELATION, pg_sys::RELKIND_PARTITIONED_TABLE, pg_sys::RELKIND_MATVIEW, pg_sys::RELKIND_VIEW].contains(&k) {
                return None;
            }
            let below = crate::pg::nodes::list_oids(crate::pg::ffi::find_all_inheritors(*r));
            for x in std::iter::once(*r).chain(below).chain(crate::catalog::protect::ancestors(*r)) {
                if crate::catalog::protect::release_cache_off_here(x) {
                    return None;
                }
                all.push(x);
            }
        }
        versions_for(&all, self.snap)
    }
}

/// True if this database's pg_dp schema is of a version with the release cache.
unsafe fn schema_has_cache() -> bool {
    let ns = pg_sys::get_namespace_oid(c"dp".as_ptr(), true);
    ns != pg_sys::InvalidOid && pg_sys::get_relname_relid(c"uncached_tables".as_ptr(), ns) != pg_sys::InvalidOid
}

/// The bind parameters' values, byte for byte (None when they are fetched dynamically).
unsafe fn param_image(p: pg_sys::ParamListInfo) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    if p.is_null() {
        return Some(out);
    }
    if (*p).paramFetch.is_some() {
        return None;
    }
    let params = (*p).params.as_slice((*p).numParams as usize);
    for x in params {
        out.extend_from_slice(&x.ptype.to_u32().to_le_bytes());
        out.push(x.isnull as u8);
        if x.isnull || x.ptype == pg_sys::InvalidOid {
            continue;
        }
        let mut len: i16 = 0;
        let mut byval = false;
        pg_sys::get_typlenbyval(x.ptype, &mut len, &mut byval);
        let bytes: Vec<u8> = if byval {
            x.value.value().to_le_bytes().to_vec()
        } else if len > 0 {
            std::slice::from_raw_parts(x.value.cast_mut_ptr::<u8>(), len as usize).to_vec()
        } else if len == -1 {
            let v = pg_sys::pg_detoast_datum_packed(x.value.cast_mut_ptr());
            std::slice::from_raw_parts(pgrx::vardata_any(v as _) as *const u8, pgrx::varsize_any_exhdr(v as _)).to_vec()
        } else {
            std::ffi::CStr::from_ptr(x.value.cast_mut_ptr()).to_bytes().to_vec()
        };
        out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(&bytes);
    }
    Some(out)
}

impl Statement {
    /// The key of one release: its level's key (query/release_key.rs), who may reuse it, its
    /// receipts, the parameters.
    pub fn key(&self, level: &str, reuser: &str, receipts: &str) -> Vec<u8> {
        let mut k = Vec::with_capacity(level.len() + reuser.len() + receipts.len() + self.params.len() + 3);
        for part in [level.as_bytes(), reuser.as_bytes(), receipts.as_bytes()] {
            k.extend_from_slice(part);
            k.push(0);
        }
        k.extend_from_slice(&self.params);
        k
    }
}

fn hash_of(key: &[u8]) -> u64 {
    // FNV-1a: entries compare the whole key; the hash only skips the others
    key.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ *b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

/// The session settings that immutable-looking casts and comparisons of the admitted grammar
/// depend on (text output of dates and floats, time zone conversions).
pub fn session_settings() -> String {
    ["TimeZone", "DateStyle", "IntervalStyle", "extra_float_digits"]
        .iter()
        .map(|g| unsafe {
            let c = std::ffi::CString::new(*g).unwrap();
            let v = pg_sys::GetConfigOption(c.as_ptr(), true, false);
            if v.is_null() { String::new() } else { std::ffi::CStr::from_ptr(v).to_string_lossy().into_owned() }
        })
        .collect::<Vec<_>>()
        .join("|")
}

/// A release found in the cache.
pub struct Hit {
    pub rows: Vec<u8>,
    pub execution: String,
    pub charged_at: i64,
}

unsafe fn arena() -> *mut u8 {
    (SHARED as *mut u8).add(std::mem::size_of::<Shared>())
}

unsafe fn live(e: &Entry) -> bool {
    e.used != 0 && (*SHARED).write_pos - e.start <= (*SHARED).arena_size
}

/// The release stored under `key` at these versions, if any.
pub unsafe fn lookup(versions: &Versions, key: &[u8]) -> Option<Hit> {
    let h = hash_of(key);
    let db = pg_sys::MyDatabaseId.to_u32();
    let _l = Locked::new(false);
    let size = (*SHARED).arena_size as usize;
    for e in (*SHARED).entries.iter() {
        if e.hash != h || e.dboid != db || e.key_len as usize != key.len() || !live(e) {
            continue;
        }
        let n = e.nslots as usize;
        if n != versions.0.len() || versions.0.iter().enumerate().any(|(i, (s, v))| e.slots[i] != *s || e.versions[i] != *v) {
            continue;
        }
        let at = arena().add(e.start as usize % size);
        if std::slice::from_raw_parts(at, key.len()) != key {
            continue;
        }
        let rows = std::slice::from_raw_parts(at.add(key.len()), e.rows_len as usize).to_vec();
        let execution = String::from_utf8_lossy(&e.exec[..e.exec_len as usize]).into_owned();
        return Some(Hit { rows, execution, charged_at: e.charged_at });
    }
    None
}

/// Stores a release (rows as concatenated minimal tuples) under `key`, at the versions read
/// before it ran. Entries larger than [`max_entry`] are not kept.
unsafe fn store(versions: &Versions, key: &[u8], rows: &[u8], execution: &str) {
    let size = (*SHARED).arena_size as usize;
    let len = key.len() + rows.len();
    if len == 0 || len > max_entry() {
        return;
    }
    let h = hash_of(key);
    let db = pg_sys::MyDatabaseId.to_u32();
    let now = pg_sys::GetCurrentTimestamp();
    let _l = Locked::new(true);
    let sh = &mut *SHARED;
    // one entry per key
    for i in 0..NENTRIES {
        let same = {
            let e = &sh.entries[i];
            e.used != 0 && e.hash == h && e.dboid == db && e.key_len as usize == key.len()
        };
        if same {
            sh.entries[i].used = 0;
        }
    }
    let mut pos = sh.write_pos;
    let off = pos as usize % size;
    if off + len > size {
        pos += (size - off) as u64;
    }
    sh.write_pos = pos + len as u64;
    let at = arena().add(pos as usize % size);
    std::ptr::copy_nonoverlapping(key.as_ptr(), at, key.len());
    std::ptr::copy_nonoverlapping(rows.as_ptr(), at.add(key.len()), rows.len());
    let idx = sh.next_entry as usize % NENTRIES;
    sh.next_entry = ((idx + 1) % NENTRIES) as u32;
    let e = &mut sh.entries[idx];
    e.used = 1;
    e.dboid = db;
    e.hash = h;
    e.start = pos;
    e.key_len = key.len() as u32;
    e.rows_len = rows.len() as u32;
    e.nslots = versions.0.len() as u32;
    for (i, (s, v)) in versions.0.iter().enumerate() {
        e.slots[i] = *s;
        e.versions[i] = *v;
    }
    let x = execution.as_bytes();
    let n = x.len().min(EXEC_ID);
    e.exec[..n].copy_from_slice(&x[..n]);
    e.exec_len = n as u32;
    e.charged_at = now;
}

// ----- what each DP Release node of a running statement does ----------------------------------------

enum Action {
    /// return these rows (a reused release) instead of running the aggregation
    Replay(Vec<u8>),
    /// collect the rows and store them under this key when the aggregation has run to the end
    Store { key: Vec<u8>, versions: Versions, execution: String, rows: Vec<u8>, ok: bool, columns: String },
}

thread_local! {
    /// (executor state, DP Release plan node) → what to do
    /// What each release node of a running statement does with the cache, keyed by (EState, plan
    /// node) addresses, with the subtransaction that registered it: a statement that fails inside a
    /// subtransaction never reaches ExecutorEnd, and its addresses are reused by the next one.
    static ACTIONS: RefCell<HashMap<(usize, usize), (pg_sys::SubTransactionId, Action)>> = RefCell::new(HashMap::new());
}

pub unsafe fn replay(estate: *mut pg_sys::EState, node: *mut pg_sys::Plan, rows: Vec<u8>) {
    let sub = pg_sys::GetCurrentSubTransactionId();
    ACTIONS.with(|a| a.borrow_mut().insert((estate as usize, node as usize), (sub, Action::Replay(rows))));
}

pub unsafe fn store_when_done(estate: *mut pg_sys::EState, node: *mut pg_sys::Plan, versions: Versions, key: Vec<u8>, columns: String, execution: &str) {
    let act = Action::Store { key, versions, execution: execution.to_string(), rows: Vec::new(), ok: true, columns };
    let sub = pg_sys::GetCurrentSubTransactionId();
    ACTIONS.with(|a| a.borrow_mut().insert((estate as usize, node as usize), (sub, act)));
}

/// The rows to replay for this node, if its release was reused.
pub fn take_replay(estate: usize, node: usize) -> Option<Vec<u8>> {
    ACTIONS.with(|a| {
        let mut a = a.borrow_mut();
        if matches!(a.get(&(estate, node)), Some((_, Action::Replay(_)))) {
            if let Some((_, Action::Replay(rows))) = a.remove(&(estate, node)) {
                return Some(rows);
            }
        }
        None
    })
}

/// True if this node's rows are to be stored.
pub fn storing(estate: usize, node: usize) -> bool {
    ACTIONS.with(|a| matches!(a.borrow().get(&(estate, node)), Some((_, Action::Store { .. }))))
}

/// One more row released by a storing node.
pub unsafe fn collect(estate: usize, node: usize, slot: *mut pg_sys::TupleTableSlot) {
    ACTIONS.with(|a| {
        let mut a = a.borrow_mut();
        let Some((_, Action::Store { rows, ok, .. })) = a.get_mut(&(estate, node)) else { return };
        if !*ok {
            return;
        }
        let mut should_free = false;
        let mt = pg_sys::ExecFetchSlotMinimalTuple(slot, &mut should_free);
        let len = (*mt).t_len as usize;
        let external = (*mt).t_infomask as u32 & pg_sys::HEAP_HASEXTERNAL != 0;
        if external || rows.len() + len > max_entry() {
            // out-of-line values point into a table; too large rows would evict the rest
            *ok = false;
            rows.clear();
        } else {
            rows.extend_from_slice(std::slice::from_raw_parts(mt as *const u8, len));
        }
        if should_free {
            pg_sys::pfree(mt.cast());
        }
    });
}

/// The node's aggregation ran to the end: store what it released.
pub unsafe fn finished(estate: usize, node: usize) {
    let act = ACTIONS.with(|a| a.borrow_mut().remove(&(estate, node)));
    if let Some((_, Action::Store { key, versions, execution, rows, ok: true, columns })) = act {
        // the rows carry the names and types of their columns, matched when they are replayed
        let mut blob = Vec::with_capacity(4 + columns.len() + rows.len());
        blob.extend_from_slice(&(columns.len() as u32).to_ne_bytes());
        blob.extend_from_slice(columns.as_bytes());
        blob.extend_from_slice(&rows);
        store(&versions, &key, &blob, &execution);
    }
}

/// The columns a stored release holds (names and types, release.rs `columns_of`) and its rows.
fn split_blob(blob: &[u8]) -> Option<(&str, &[u8])> {
    let n = u32::from_ne_bytes(blob.get(..4)?.try_into().ok()?) as usize;
    let columns = std::str::from_utf8(blob.get(4..4 + n)?).ok()?;
    Some((columns, &blob[4 + n..]))
}

/// For each column a release node releases (`columns`), the stored release's column with the same
/// name and type; None if one is missing (the node's plan computes something the stored release
/// did not keep).
fn column_map(stored: &str, columns: &str) -> Option<Vec<usize>> {
    if columns.is_empty() {
        return None;
    }
    let stored: Vec<&str> = stored.split(',').collect();
    columns.split(',').map(|c| stored.iter().position(|s| *s == c)).collect()
}

/// True if a stored release holds every column the node releases.
pub fn fits(blob: &[u8], columns: &str) -> bool {
    split_blob(blob).is_some_and(|(stored, _)| column_map(stored, columns).is_some())
}

/// Puts stored rows back into a tuplestore, through `slot`, each column taken from the stored
/// column of the same name (`columns`, the node's own), after checking that they hold no pointer
/// out of the row: a release that does not fit the query it is replayed for is refused, never read
/// (it is never charged either: the query fails).
pub unsafe fn restore_rows(blob: &[u8], columns: &str, store: *mut pg_sys::Tuplestorestate, slot: *mut pg_sys::TupleTableSlot) {
    let refuse = || -> ! {
        crate::pg::error::raise_with(
            pgrx::PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
            "pg_dp: a cached release does not fit the query it was found for; nothing was returned".into(),
            Some("SET dp.release_cache = off (superuser) and report it"),
        )
    };
    let desc = (*slot).tts_tupleDescriptor;
    let natts = (*desc).natts as usize;
    let Some((stored, rows)) = split_blob(blob) else { refuse() };
    let Some(map) = column_map(stored, columns) else { refuse() };
    let stored_types: Vec<u32> = stored.split(',').map(|c| c.rsplit(':').next().and_then(|t| t.parse().ok()).unwrap_or(0)).collect();
    let mine: Vec<u32> = (*desc).attrs.as_slice(natts).iter().map(|a| a.atttypid.to_u32()).collect();
    if map.len() != natts || map.iter().zip(&mine).any(|(j, t)| stored_types[*j] != *t) {
        refuse();
    }
    // the stored rows' own layout, to read them
    let sdesc = pg_sys::CreateTemplateTupleDesc(stored_types.len() as i32);
    for (i, t) in stored_types.iter().enumerate() {
        pg_sys::TupleDescInitEntry(sdesc, (i + 1) as i16, c"".as_ptr(), pg_sys::Oid::from(*t), -1, 0);
    }
    let src = pg_sys::MakeSingleTupleTableSlot(sdesc, &pg_sys::TTSOpsMinimalTuple);
    let dst = pg_sys::MakeSingleTupleTableSlot(desc, &pg_sys::TTSOpsVirtual);
    let mut at = 0usize;
    while at + 4 <= rows.len() {
        let len = u32::from_ne_bytes(rows[at..at + 4].try_into().unwrap()) as usize;
        if len < 4 || at + len > rows.len() {
            break;
        }
        let mt = pg_sys::palloc(len) as *mut u8;
        std::ptr::copy_nonoverlapping(rows.as_ptr().add(at), mt, len);
        pg_sys::ExecStoreMinimalTuple(mt.cast(), src, true);
        pg_sys::slot_getallattrs(src);
        for (i, a) in (*sdesc).attrs.as_slice(stored_types.len()).iter().enumerate() {
            let isnull = *(*src).tts_isnull.add(i);
            // a varlena whose first byte is 0x01 is a pointer (to TOAST, or to memory)
            if a.attlen == -1 && !isnull && *((*(*src).tts_values.add(i)).cast_mut_ptr::<u8>()) == 0x01 {
                refuse();
            }
        }
        pg_sys::ExecClearTuple(dst);
        for (i, j) in map.iter().enumerate() {
            *(*dst).tts_values.add(i) = *(*src).tts_values.add(*j);
            *(*dst).tts_isnull.add(i) = *(*src).tts_isnull.add(*j);
        }
        pg_sys::ExecStoreVirtualTuple(dst);
        pg_sys::tuplestore_puttupleslot(store, dst);
        at += len;
    }
    pg_sys::ExecDropSingleTupleTableSlot(dst);
    pg_sys::ExecDropSingleTupleTableSlot(src);
    pg_sys::ExecClearTuple(slot);
}

/// The statement ended, or one starts with this EState address: the nodes' actions keyed by it are
/// dropped (rows not collected to the end are not kept). A live statement's EState address is its
/// own, so at the start of a statement anything keyed by its address was left by a dead one (a
/// cursor that failed and was closed without ExecutorEnd).
pub fn forget(estate: usize) {
    ACTIONS.with(|a| a.borrow_mut().retain(|k, _| k.0 != estate));
}

/// A subtransaction aborted: what its statements (and its children's) registered goes with them.
pub fn abort_sub(sub: pg_sys::SubTransactionId) {
    ACTIONS.with(|a| a.borrow_mut().retain(|_, v| v.0 < sub));
}

fn forget_all() {
    ACTIONS.with(|a| a.borrow_mut().clear());
}
