//! Faithfulness of a synthetic table: the size of a maximum one-to-one matching between the rows of
//! the real table D and those of a candidate S, where a real row and a synthetic row may be matched
//! when their code tuples differ in at most one column (cost ≤ 1). Derivation and sensitivity in
//! docs/privacy/synthetic-criteria.md, "Faithfulness".
//!
//! D is kept as counts per **key**: a public function of one row's codes alone. When the product of
//! the cardinalities is at most [`MAX_KEYS`] the key is the row's exact index in the domain; above
//! it, a tabulation hash of the codes into [`MAX_KEYS`] keys (distinct types that share a key are
//! one node of the flow, which can only add compatible pairs). Either way, adding or removing one
//! row of D moves one key's count by one, and the matching is a maximum flow that is 1-Lipschitz in
//! each capacity: sensitivity 1.
//!
//! The flow: source → each distinct synthetic type (capacity: its rows in S) → each key holding a
//! type within one column of it (unbounded) → sink (capacity: the rows of D under that key).
//! Computed with Dinic's algorithm over arrays sized from the candidate (a public input).
use crate::release::dprp::{Interrupted, ReleaseFailure};
use crate::release::{try_filled_in, try_vec};
use rand::RngCore;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// Most keys of D's counts (4 bytes each: 32 MiB).
pub const MAX_KEYS: u64 = 1 << 23;
/// Bytes of the flow per compatible (synthetic type, key) pair (forward list, its sorted copy, flow,
/// reverse list: each allocated at the public bound), per key node (capacity, flows, level, pointers,
/// reverse starts, its places in the queue, the path and the bottlenecks) and per synthetic row (its
/// type's node and bookkeeping), at most.
const BYTES_PER_PAIR: u128 = 24;
const BYTES_PER_KEY: u128 = 80;
const BYTES_PER_ROW: u128 = 128;
/// Most synthetic rows one evaluation matches: a larger candidate is matched through a uniformly
/// random subset of this many of its rows (drawn from the CSPRNG; the candidate is public), which
/// bounds the flow's memory whatever the number of rows.
pub const MAX_ROWS: usize = 10_000;

/// How a row's codes become its key: exact (mixed radix) or hashed.
#[derive(Debug, Clone, PartialEq)]
pub struct Keys {
    /// Per column, per code: the column's contribution (added when exact, XORed when hashed).
    table: Vec<Vec<u64>>,
    hashed: bool,
    keys: u64,
}

impl Keys {
    /// From the public cardinalities only.
    pub fn new(cardinalities: &[u32]) -> Keys {
        match Self::exact_size(cardinalities) {
            Some(keys) => {
                let mut table = Vec::with_capacity(cardinalities.len());
                let mut stride = 1u64;
                for &c in cardinalities.iter().rev() {
                    table.push((0..c as u64).map(|v| v * stride).collect());
                    stride *= c as u64;
                }
                table.reverse();
                Keys { table, hashed: false, keys }
            }
            None => {
                // simple tabulation hashing from a fixed public seed (not secret: any public function
                // of one row keeps the sensitivity; the seed only spreads the types over the keys)
                let mut rng = ChaCha20Rng::seed_from_u64(0x6661_6974_6866_756c);
                let table = cardinalities.iter().map(|&c| (0..c).map(|_| rng.next_u64()).collect()).collect();
                Keys { table, hashed: true, keys: MAX_KEYS }
            }
        }
    }

    /// The number of types of the domain when at most [`MAX_KEYS`] (the keys are then exact).
    fn exact_size(cardinalities: &[u32]) -> Option<u64> {
        cardinalities.iter().try_fold(1u64, |p, &c| p.checked_mul(c as u64).filter(|&p| p <= MAX_KEYS))
    }

    /// Number of keys [`Keys::new`] gives, without building the tables.
    pub fn new_size(cardinalities: &[u32]) -> u128 {
        Self::exact_size(cardinalities).unwrap_or(MAX_KEYS) as u128
    }

    /// Whether [`Keys::new`] hashes (the domain has more than [`MAX_KEYS`] types).
    pub fn hashes(cardinalities: &[u32]) -> bool {
        Self::exact_size(cardinalities).is_none()
    }

    /// Number of keys (the length of D's counts).
    pub fn keys(&self) -> usize {
        self.keys as usize
    }

    pub fn hashed(&self) -> bool {
        self.hashed
    }

    /// Bytes of the public hash tables (besides the counts).
    pub fn table_bytes(cardinalities: &[u32]) -> u128 {
        cardinalities.iter().map(|&c| c as u128 * 8).sum()
    }

    #[inline]
    fn combine(&self, a: u64, b: u64) -> u64 {
        if self.hashed {
            a ^ b
        } else {
            a.wrapping_add(b)
        }
    }

    #[inline]
    fn remove(&self, a: u64, b: u64) -> u64 {
        if self.hashed {
            a ^ b
        } else {
            a.wrapping_sub(b)
        }
    }

    #[inline]
    fn finish(&self, h: u64) -> u32 {
        if self.hashed {
            // the high bits of a multiplicative mix
            (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - MAX_KEYS.trailing_zeros())) as u32
        } else {
            h as u32
        }
    }

    fn raw(&self, row: &[u32]) -> u64 {
        row.iter().zip(&self.table).fold(0, |h, (&c, t)| self.combine(h, t[c as usize]))
    }

    /// The key of one row (codes already within their cardinalities).
    #[inline]
    pub fn key(&self, row: &[u32]) -> u32 {
        self.finish(self.raw(row))
    }

    /// Calls `f` with the key of every type within one column of `row` (the row itself first, then
    /// each other code of each column), computed incrementally.
    fn ball(&self, row: &[u32], mut f: impl FnMut(u32)) {
        let h = self.raw(row);
        f(self.finish(h));
        for (j, t) in self.table.iter().enumerate() {
            let base = self.remove(h, t[row[j] as usize]);
            for (v, &x) in t.iter().enumerate() {
                if v != row[j] as usize {
                    f(self.finish(self.combine(base, x)));
                }
            }
        }
    }

    /// Size of the ball of one type under these keys' cardinalities.
    fn ball_len(&self) -> usize {
        1 + self.table.iter().map(|t| t.len() - 1).sum::<usize>()
    }

    /// Size of the ball of one type: 1 + Σ (c_j − 1).
    pub fn ball_size(cardinalities: &[u32]) -> u128 {
        1 + cardinalities.iter().map(|&c| c as u128 - 1).sum::<u128>()
    }
}

/// Bytes of D's counts and the key tables, from the cardinalities only.
pub fn count_bytes(cardinalities: &[u32]) -> u128 {
    Keys::table_bytes(cardinalities) + 4 * Keys::new_size(cardinalities)
}

/// Bytes the evaluation of a candidate of `m` rows may allocate, at most, from public inputs only:
/// the subset's indices and codes, and the flow of its (at most [`MAX_ROWS`]) rows, whose distinct
/// types are at most min(rows, |domain|), each with at most one pair per type of its ball.
pub fn flow_bytes(cardinalities: &[u32], m: usize) -> u128 {
    let domain = cardinalities.iter().fold(1u128, |p, &c| p.saturating_mul(c as u128));
    let rows = m.min(MAX_ROWS) as u128;
    let subset = if m > MAX_ROWS { 4 * m as u128 + 4 * rows * cardinalities.len() as u128 } else { 0 };
    let types = rows.min(domain);
    let pairs = types.saturating_mul(Keys::ball_size(cardinalities));
    let keys = pairs.min(Keys::new_size(cardinalities));
    (rows * BYTES_PER_ROW + subset).saturating_add(pairs.saturating_mul(BYTES_PER_PAIR)).saturating_add(keys.saturating_mul(BYTES_PER_KEY))
}

/// The rows an evaluation matches: all of them up to [`MAX_ROWS`], else a uniformly random subset
/// of [`MAX_ROWS`] rows (a partial Fisher–Yates shuffle of the row indices).
pub fn rows_to_match<'a, R: rand::Rng + ?Sized>(rng: &mut R, codes: &'a [u32], d: usize) -> Result<std::borrow::Cow<'a, [u32]>, ReleaseFailure> {
    let m = codes.len() / d.max(1);
    if m <= MAX_ROWS {
        return Ok(std::borrow::Cow::Borrowed(codes));
    }
    let mut idx: Vec<u32> = try_vec(m)?;
    idx.extend(0..m as u32);
    let mut out = try_vec(MAX_ROWS * d)?;
    for i in 0..MAX_ROWS {
        let j = rng.random_range(i..m);
        idx.swap(i, j);
        let r = idx[i] as usize;
        out.extend_from_slice(&codes[r * d..(r + 1) * d]);
    }
    Ok(std::borrow::Cow::Owned(out))
}

/// The size of a maximum matching between D (its counts per key) and the candidate's rows
/// (`codes`, row-major, `d` codes a row, within their cardinalities). Exact.
///
/// Every allocation is fallible and sized from public inputs (the candidate, the cardinalities):
/// the pairs at most (distinct synthetic types) × (ball size), the key nodes at most that or the
/// number of keys, whatever D holds. A refusal is [`ReleaseFailure::OutOfMemory`].
pub fn matching(keys: &Keys, counts: &[u32], codes: &[u32], d: usize, check: &mut dyn FnMut() -> Result<(), Interrupted>) -> Result<u64, ReleaseFailure> {
    // distinct synthetic types and their multiplicities
    let m = codes.len() / d.max(1);
    let mut rows: Vec<&[u32]> = try_vec(m)?;
    rows.extend(codes.chunks_exact(d));
    rows.sort_unstable();
    let mut types: Vec<(&[u32], u64)> = try_vec(m)?;
    for r in rows {
        match types.last_mut() {
            Some((t, n)) if *t == r => *n += 1,
            _ => types.push((r, 1)),
        }
    }
    check()?;
    // the public bounds of the pairs and the key nodes
    let ball = keys.ball_len();
    let pair_bound = types.len().saturating_mul(ball);
    let key_bound = pair_bound.min(keys.keys());
    // forward lists: each type's distinct keys holding rows of D (keys first, then key nodes)
    let mut start = try_vec(types.len() + 1)?;
    let mut adj: Vec<u32> = try_vec(pair_bound)?;
    let mut local: Vec<u32> = try_vec(ball)?;
    for (i, (t, _)) in types.iter().enumerate() {
        if i % 1024 == 0 {
            check()?;
        }
        start.push(adj.len());
        local.clear();
        keys.ball(t, |k| {
            if counts[k as usize] > 0 {
                local.push(k);
            }
        });
        local.sort_unstable();
        local.dedup();
        adj.extend_from_slice(&local);
    }
    start.push(adj.len());
    check()?;
    let mut distinct: Vec<u32> = try_vec(pair_bound)?;
    distinct.extend_from_slice(&adj);
    distinct.sort_unstable();
    check()?;
    distinct.dedup();
    for (i, a) in adj.iter_mut().enumerate() {
        if i % (1 << 20) == 0 {
            check()?;
        }
        *a = distinct.binary_search(a).expect("a key of the lists") as u32;
    }
    let mut cap_key: Vec<u64> = try_vec(key_bound)?;
    cap_key.extend(distinct.iter().map(|&k| counts[k as usize] as u64));
    drop(distinct);
    let mut cap_type = try_vec(types.len())?;
    cap_type.extend(types.iter().map(|t| t.1));
    let flow = Flow::new(cap_type, cap_key, start, adj, pair_bound, key_bound)?;
    flow.max_flow(key_bound, check)
}

/// A bipartite flow: source → type (capacity cap_type) → key (unbounded) → sink (capacity cap_key).
struct Flow {
    cap_type: Vec<u64>,
    cap_key: Vec<u64>,
    /// Forward lists of the types (CSR) and the flow on each pair.
    start: Vec<usize>,
    adj: Vec<u32>,
    flow: Vec<u64>,
    /// Reverse lists of the keys: the pair indices entering each key (CSR).
    rstart: Vec<usize>,
    radj: Vec<u32>,
}

/// A node of the residual graph: a type or a key.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Node {
    Type(u32),
    Key(u32),
}

impl Flow {
    fn new(cap_type: Vec<u64>, cap_key: Vec<u64>, start: Vec<usize>, adj: Vec<u32>, pair_bound: usize, key_bound: usize) -> Result<Flow, ReleaseFailure> {
        let k = cap_key.len();
        let mut rstart = try_filled_in(k + 1, 0usize, key_bound + 1)?;
        for &a in &adj {
            rstart[a as usize + 1] += 1;
        }
        for i in 0..k {
            rstart[i + 1] += rstart[i];
        }
        let mut fill = try_vec(key_bound + 1)?;
        fill.extend_from_slice(&rstart);
        let mut radj = try_filled_in(adj.len(), 0u32, pair_bound)?;
        for (e, &a) in adj.iter().enumerate() {
            radj[fill[a as usize]] = e as u32;
            fill[a as usize] += 1;
        }
        let flow = try_filled_in(adj.len(), 0, pair_bound)?;
        Ok(Flow { cap_type, cap_key, start, adj, flow, rstart, radj })
    }

    /// Dinic's algorithm. Levels: source 0, types and keys alternate; a type's residual arcs go to
    /// every adjacent key, a key's to the types that send it flow (and to the sink while it has
    /// capacity left).
    fn max_flow(mut self, key_bound: usize, check: &mut dyn FnMut() -> Result<(), Interrupted>) -> Result<u64, ReleaseFailure> {
        let (nt, nk) = (self.cap_type.len(), self.cap_key.len());
        let mut out_type = try_filled_in(nt, 0u64, nt)?; // flow from the source into each type
        let mut into_key = try_filled_in(nk, 0u64, key_bound)?; // flow from each key to the sink
        let mut total = 0u64;
        // a greedy start: each type to its keys in order
        for t in 0..nt {
            if t % 1024 == 0 {
                check()?;
            }
            for e in self.start[t]..self.start[t + 1] {
                let k = self.adj[e] as usize;
                let f = (self.cap_type[t] - out_type[t]).min(self.cap_key[k] - into_key[k]);
                if f > 0 {
                    self.flow[e] += f;
                    out_type[t] += f;
                    into_key[k] += f;
                    total += f;
                }
            }
        }
        const UNSEEN: u32 = u32::MAX;
        let mut lt = try_filled_in(nt, UNSEEN, nt)?;
        let mut lk = try_filled_in(nk, UNSEEN, key_bound)?;
        let mut it_t = try_filled_in(nt, 0usize, nt)?;
        let mut it_k = try_filled_in(nk, 0usize, key_bound)?;
        // every node at most once in the queue, on a path, in the bottlenecks
        let nodes = nt + key_bound + 1;
        let mut queue: Vec<Node> = try_vec(nodes)?;
        let mut path: Vec<(usize, bool)> = try_vec(nodes)?;
        let mut bottleneck: Vec<u64> = try_vec(nodes)?;
        loop {
            check()?;
            // BFS from the types with source capacity left
            lt.fill(UNSEEN);
            lk.fill(UNSEEN);
            queue.clear();
            for t in 0..nt {
                if out_type[t] < self.cap_type[t] {
                    lt[t] = 1;
                    queue.push(Node::Type(t as u32));
                }
            }
            let mut head = 0;
            let mut sink_level = UNSEEN;
            while head < queue.len() {
                let n = queue[head];
                head += 1;
                match n {
                    Node::Type(t) => {
                        let l = lt[t as usize];
                        if l >= sink_level {
                            continue;
                        }
                        for e in self.start[t as usize]..self.start[t as usize + 1] {
                            let k = self.adj[e] as usize;
                            if lk[k] == UNSEEN {
                                lk[k] = l + 1;
                                if into_key[k] < self.cap_key[k] {
                                    sink_level = sink_level.min(l + 2);
                                }
                                queue.push(Node::Key(k as u32));
                            }
                        }
                    }
                    Node::Key(k) => {
                        let l = lk[k as usize];
                        if l + 1 >= sink_level {
                            continue;
                        }
                        for r in self.rstart[k as usize]..self.rstart[k as usize + 1] {
                            let e = self.radj[r] as usize;
                            if self.flow[e] > 0 {
                                let t = self.type_of(e);
                                if lt[t] == UNSEEN {
                                    lt[t] = l + 1;
                                    queue.push(Node::Type(t as u32));
                                }
                            }
                        }
                    }
                }
            }
            if sink_level == UNSEEN {
                return Ok(total);
            }
            // blocking flow by depth-first search from every type with source capacity left
            for t in 0..nt {
                it_t[t] = self.start[t];
            }
            for k in 0..nk {
                it_k[k] = self.rstart[k];
            }
            let mut pushed_any = false;
            for s in 0..nt {
                while out_type[s] < self.cap_type[s] && lt[s] == 1 {
                    match self.augment(s, sink_level, &lt, &lk, &mut it_t, &mut it_k, &into_key, self.cap_type[s] - out_type[s], &mut path, &mut bottleneck) {
                        Some(f) => {
                            // apply: path is a list of (pair, +1 forward | −1 backward) ending at a key
                            for &(e, fwd) in &path {
                                if fwd {
                                    self.flow[e] += f;
                                } else {
                                    self.flow[e] -= f;
                                }
                            }
                            let last = self.adj[path.last().expect("a path has a pair").0] as usize;
                            into_key[last] += f;
                            out_type[s] += f;
                            total += f;
                            pushed_any = true;
                        }
                        None => break,
                    }
                }
                if s % 1024 == 0 {
                    check()?;
                }
            }
            if !pushed_any {
                return Ok(total);
            }
        }
    }

    fn type_of(&self, e: usize) -> usize {
        // the type whose forward range holds pair e
        self.start.partition_point(|&s| s <= e) - 1
    }

    /// One augmenting path in the level graph from type `s` (iterative DFS with current-arc
    /// pointers), with its bottleneck (at most `limit`). Returns the pairs crossed, forward (type →
    /// key) or backward (key → type, cancelling flow).
    #[allow(clippy::too_many_arguments)]
    fn augment(
        &self, s: usize, sink_level: u32, lt: &[u32], lk: &[u32], it_t: &mut [usize], it_k: &mut [usize], into_key: &[u64], limit: u64,
        path: &mut Vec<(usize, bool)>, bottleneck: &mut Vec<u64>,
    ) -> Option<u64> {
        path.clear();
        bottleneck.clear();
        bottleneck.push(limit);
        let mut at = Node::Type(s as u32);
        loop {
            match at {
                Node::Type(t) => {
                    let t = t as usize;
                    let mut moved = false;
                    while it_t[t] < self.start[t + 1] {
                        let e = it_t[t];
                        let k = self.adj[e] as usize;
                        if lk[k] == lt[t] + 1 && lk[k] < sink_level {
                            path.push((e, true));
                            bottleneck.push(*bottleneck.last().unwrap_or(&limit));
                            at = Node::Key(k as u32);
                            moved = true;
                            break;
                        }
                        it_t[t] += 1;
                    }
                    if !moved {
                        // dead end: retreat
                        let (e, _) = path.pop()?;
                        bottleneck.pop();
                        let prev_key = self.adj[e] as usize;
                        // the arc into this type was a backward arc from prev_key: advance its pointer
                        it_k[prev_key] += 1;
                        at = Node::Key(prev_key as u32);
                    }
                }
                Node::Key(k) => {
                    let k = k as usize;
                    let room = self.cap_key[k] - into_key[k];
                    if room > 0 && lk[k] + 1 == sink_level {
                        return Some((*bottleneck.last().unwrap_or(&limit)).min(room));
                    }
                    let mut moved = false;
                    while it_k[k] < self.rstart[k + 1] {
                        let e = self.radj[it_k[k]] as usize;
                        if self.flow[e] > 0 {
                            let t = self.type_of(e);
                            if lt[t] == lk[k] + 1 {
                                path.push((e, false));
                                let b = (*bottleneck.last().unwrap_or(&limit)).min(self.flow[e]);
                                bottleneck.push(b);
                                at = Node::Type(t as u32);
                                moved = true;
                                break;
                            }
                        }
                        it_k[k] += 1;
                    }
                    if !moved {
                        let (e, fwd) = path.pop()?;
                        bottleneck.pop();
                        debug_assert!(fwd);
                        let t = self.type_of(e);
                        it_t[t] += 1;
                        at = Node::Type(t as u32);
                    }
                }
            }
        }
    }
}
