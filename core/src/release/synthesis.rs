//! The synthetic release from counts to rows: the model alone, or the model inside the acceptance
//! criteria and the private selection loop. The SQL layer reads the table into [`PairCounts`] and
//! [`RealStatistics`] and writes what this returns; everything between is here, tested in
//! core/tests/synthesis.rs (the whole pipeline's privacy on neighbouring tables included).
//!
//! The loop (docs/privacy/synthetic-criteria.md): the hoisted criteria are released once; the
//! stopping point is drawn before the first try; all T tries run whatever happens (the number a
//! sequential loop would have needed is never an output, nor the time), each on its own random stream
//! and several at once on threads when they fit; the first passing try before the stopping point is
//! the release, or "no candidate passed". A try whose rows would not fit in the
//! memory left fails: a function of that try's own output, so part of the try's mechanism.
use crate::error::{DpError, DpResult};
use crate::params::{fmt_f64, EPSILON_MIN};
use crate::release::criteria::selection::{plan_epsilon, LoopSpec};
use crate::release::criteria::{Candidate, CriteriaSpec, Evaluation, HoistedStatistics, RealStatistics};
use crate::release::dprp::{Interrupted, ReleaseFailure};
use crate::release::try_vec;
use crate::release::synthetic::columns::{ColumnCode, Decoded};
use crate::release::synthetic::{Model, PairCounts, SyntheticSpec};
use rand::Rng;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// The acceptance criteria and the selection loop around the model.
#[derive(Debug, Clone)]
pub struct Acceptance {
    pub criteria: CriteriaSpec,
    pub selection: LoopSpec,
    /// A new model for every try (pure ε only) instead of one model sampled T times.
    pub refit: bool,
}

impl Acceptance {
    /// The model's ε: what remains of `total` once the criteria and the loop are paid for, nudged
    /// down until the plan's total is at most `total`. Refused (naming epsilon) when nothing remains.
    pub fn model_epsilon(&self, total: f64) -> DpResult<f64> {
        let (h, l, e0) = (self.criteria.hoisted_epsilon(), self.criteria.loop_epsilon(), self.selection.epsilon0);
        let fit_once = !self.refit;
        let mut m = if fit_once { total - h - 2.0 * l - e0 } else { (total - h - e0) / 2.0 - l };
        if !(m >= EPSILON_MIN) {
            let need = plan_epsilon(0.0, h, l, e0, fit_once);
            let rule = if fit_once {
                "the model + hoisted criteria + 2 × criteria per candidate + epsilon0"
            } else {
                "hoisted criteria + 2 × (the model + criteria per candidate) + epsilon0"
            };
            return Err(DpError::invalid(
                "epsilon",
                format!("more than {} to leave the model a share: the criteria and the selection loop cost {rule}", fmt_f64(need)),
                fmt_f64(total),
            ));
        }
        while plan_epsilon(m, h, l, e0, fit_once) > total {
            m = m.next_down();
        }
        Ok(m)
    }

    /// Indices of the numeric columns, in the criteria's order.
    pub fn numeric_columns(&self) -> Vec<usize> {
        self.criteria.numeric_column_indices()
    }
}

/// Rows drawn from a model: their codes and each cell decoded (a value uniform in its bin),
/// row-major. What is written if it is released.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub codes: Vec<u32>,
    pub cells: Vec<Decoded>,
}

impl Sample {
    /// Draws `m` rows from the model and decodes them with the columns' encodings.
    pub fn draw<R: Rng + ?Sized>(
        model: &Model, columns: &[ColumnCode], m: usize, rng: &mut R, check: &mut dyn FnMut() -> Result<(), Interrupted>,
    ) -> Result<Sample, ReleaseFailure> {
        let codes = model.sample(rng, m, check)?;
        let d = columns.len();
        let mut cells = try_vec(codes.len())?;
        cells.extend(codes.iter().enumerate().map(|(i, &c)| columns[i % d].decode(rng, c)));
        Ok(Sample { codes, cells })
    }

    /// Draws `m` rows that pass the caller's public constraints (`keep` marks the rows of a batch that
    /// pass), drawing again for the rows refused until `m` pass or [`MAX_DRAWS_PER_ROW`]·m + 1000 rows
    /// were drawn, then drops every row whose codes occur fewer than `min_count` times. Post-processing
    /// of the model: any rule that reads only the sample is free.
    pub fn draw_processed<R: Rng + ?Sized>(
        model: &Model, columns: &[ColumnCode], m: usize, post: &mut PostProcess, rng: &mut R,
        check: &mut dyn FnMut() -> Result<(), Interrupted>,
    ) -> Result<Sample, ReleaseFailure> {
        let d = columns.len().max(1);
        let mut out = Sample { codes: try_vec(m.saturating_mul(d))?, cells: try_vec(m.saturating_mul(d))? };
        let cap = m.saturating_mul(MAX_DRAWS_PER_ROW).saturating_add(1000);
        let mut drawn = 0usize;
        while out.rows(d) < m && drawn < cap {
            let want = (m - out.rows(d)).min(cap - drawn);
            let batch = Sample::draw(model, columns, want, rng, check)?;
            drawn += want;
            match post.keep.as_mut() {
                None => out.append(batch),
                Some(keep) => {
                    // a mask that is not one answer per row (a set-returning constraint) refuses the batch
                    let mut mask = keep(&batch)?;
                    if mask.len() != batch.rows(d) {
                        mask = vec![false; batch.rows(d)];
                    }
                    for (r, ok) in mask.into_iter().enumerate() {
                        if ok {
                            out.codes.extend_from_slice(&batch.codes[r * d..(r + 1) * d]);
                            out.cells.extend_from_slice(&batch.cells[r * d..(r + 1) * d]);
                        }
                    }
                }
            }
        }
        out.keep_common(d, post.min_count)?;
        Ok(out)
    }

    fn append(&mut self, other: Sample) {
        self.codes.extend(other.codes);
        self.cells.extend(other.cells);
    }

    /// Drops every row whose codes occur fewer than `min_count` times in the sample.
    pub fn keep_common(&mut self, d: usize, min_count: usize) -> Result<(), ReleaseFailure> {
        if min_count <= 1 {
            return Ok(());
        }
        let mut seen: std::collections::HashMap<&[u32], usize> = std::collections::HashMap::new();
        seen.try_reserve(self.rows(d)).map_err(|_| ReleaseFailure::OutOfMemory)?;
        for row in self.codes.chunks_exact(d) {
            *seen.entry(row).or_default() += 1;
        }
        let mut keep = try_vec(self.rows(d))?;
        keep.extend(self.codes.chunks_exact(d).map(|row| seen[row] >= min_count));
        let (mut codes, mut cells) = (try_vec(self.codes.len())?, try_vec(self.cells.len())?);
        for (r, ok) in keep.into_iter().enumerate() {
            if ok {
                codes.extend_from_slice(&self.codes[r * d..(r + 1) * d]);
                cells.extend_from_slice(&self.cells[r * d..(r + 1) * d]);
            }
        }
        self.codes = codes;
        self.cells = cells;
        Ok(())
    }

    /// Number of rows.
    pub fn rows(&self, d: usize) -> usize {
        self.codes.len() / d.max(1)
    }

    /// The values of the given columns, row-major, as the criteria read them (NaN for NULL).
    pub fn numeric_values(&self, numeric: &[usize], d: usize) -> Result<Vec<f64>, ReleaseFailure> {
        let m = self.rows(d);
        let mut out = try_vec(m.saturating_mul(numeric.len()))?;
        for r in 0..m {
            for &j in numeric {
                out.push(match self.cells[r * d + j] {
                    Decoded::Real(x) => x,
                    Decoded::Integer(x) => x as f64,
                    _ => f64::NAN,
                });
            }
        }
        Ok(out)
    }
}


/// Most rows drawn per requested row when constraints refuse rows (then fewer rows are released).
pub const MAX_DRAWS_PER_ROW: usize = 20;

/// Public post-processing of every sample: constraints on rows (`keep`: which rows of a batch pass,
/// or an interrupt) and a minimum number of occurrences of a row's codes.
pub struct PostProcess<'a> {
    pub keep: Option<&'a mut dyn FnMut(&Sample) -> Result<Vec<bool>, ReleaseFailure>>,
    pub min_count: usize,
    /// Most rows of a sample whose size is the model's noisy row count (cut to it).
    pub max_rows: usize,
}

impl PostProcess<'_> {
    /// Nothing removed.
    pub fn none() -> PostProcess<'static> {
        PostProcess { keep: None, min_count: 1, max_rows: usize::MAX }
    }
}

/// Bytes one sampled row may hold at the peak of [`Sample::draw_processed`]: its codes, decoded
/// cells and criteria values, up to three times over (the batch drawn, the sample it joins, the copy
/// `min_count` keeps), and a share of `min_count`'s table of code tuples.
pub fn candidate_row_bytes(d: usize) -> usize {
    3 * d * (std::mem::size_of::<u32>() + std::mem::size_of::<Decoded>() + std::mem::size_of::<f64>()) + 64
}

/// What the selection released: the accepted candidate with its model's structure and its
/// criteria, or None ("no candidate passed", itself the DP output).
#[derive(Debug, Clone)]
pub struct Selected {
    pub sample: Sample,
    pub structure: Vec<(usize, usize)>,
    pub evaluation: Evaluation,
}

/// Everything one try reads: shared, read-only, by every thread of the loop.
struct Tries<'a> {
    acceptance: &'a Acceptance,
    spec: &'a SyntheticSpec,
    counts: &'a PairCounts,
    real: &'a RealStatistics,
    columns: &'a [ColumnCode],
    hoisted: &'a HoistedStatistics,
    once: Option<&'a Model>,
    rows: Option<usize>,
    memory: usize,
    stop: usize,
    numeric: Vec<usize>,
}

impl Tries<'_> {
    /// Try `j` on its own random stream: a candidate (the model fitted once, or a new one), its
    /// post-processing and its criteria. Returns it when it passes before the stopping point.
    fn run<R: Rng + ?Sized>(
        &self, j: usize, rng: &mut R, post: &mut PostProcess, check: &mut dyn FnMut() -> Result<(), Interrupted>,
    ) -> Result<Option<Selected>, ReleaseFailure> {
        check()?;
        let d = self.columns.len();
        let fitted;
        let model = match self.once {
            Some(m) => m,
            None => {
                fitted = self.spec.fit(rng, self.counts, check)?;
                &fitted
            }
        };
        let m = self.rows.unwrap_or_else(|| model.noisy_rows().min(post.max_rows as u64) as usize);
        // the kept candidate stays while the others run: room for two, and for the criteria's work
        if !fits(self.acceptance, m, d, 1, self.memory) {
            return Ok(None);
        }
        // a try the system has no memory for fails, as one over the limit does
        let sample = match Sample::draw_processed(model, self.columns, m, post, rng, check) {
            Err(ReleaseFailure::OutOfMemory) => return Ok(None),
            other => other?,
        };
        let values = match sample.numeric_values(&self.numeric, d) {
            Ok(v) => v,
            Err(_) => return Ok(None),
        };
        let candidate = Candidate::new(&self.acceptance.criteria, &sample.codes, &values).expect("a sample of the spec's own columns");
        // the criteria's scratch is sized from public inputs: a refusal fails the try, as above
        let evaluation = match self.acceptance.criteria.evaluate(rng, self.real, self.hoisted, &candidate, check) {
            Err(ReleaseFailure::OutOfMemory) => return Ok(None),
            other => other?,
        };
        Ok((evaluation.passed && j < self.stop).then(|| Selected { sample, structure: model.structure(), evaluation }))
    }
}

/// Whether `threads` tries of `m` rows each, and the kept candidate, fit in `memory`: their rows and
/// the criteria's work on each.
fn fits(acceptance: &Acceptance, m: usize, d: usize, threads: usize, memory: usize) -> bool {
    m.checked_mul(candidate_row_bytes(d))
        .and_then(|b| b.checked_mul(threads + 1))
        .and_then(|b| usize::try_from(acceptance.criteria.candidate_bytes(m)).ok().and_then(|c| c.checked_mul(threads)).and_then(|c| b.checked_add(c)))
        .is_some_and(|b| b <= memory)
}

/// The selection loop (see the module's description). Each candidate has `rows` rows (None: its
/// model's noisy row count) after `post`. `memory` bounds the bytes of the kept and the current
/// candidates together.
///
/// Every try draws from its own stream (ChaCha20, seeded from `rng` before the first try), so the
/// result is the same for any number of threads. Up to `threads` tries run at once when every try's
/// row count is known before the loop (requested, or the model fitted once), no try refits (a
/// model's estimation has no public memory bound), as many as fit in `memory` (their rows and the
/// criteria's work), and `post` has no `keep` (the caller's code stays on this thread); this thread
/// then only calls `check`, every 5 ms, and stops the others when it fails. Threads the system
/// refuses leave their tries to the others (to this thread when none starts).
#[allow(clippy::too_many_arguments)]
pub fn select<R: Rng + ?Sized>(
    rng: &mut R, acceptance: &Acceptance, spec: &SyntheticSpec, counts: &PairCounts, real: &RealStatistics, columns: &[ColumnCode],
    rows: Option<usize>, post: &mut PostProcess, memory: usize, threads: usize, check: &mut dyn FnMut() -> Result<(), Interrupted>,
) -> Result<Option<Selected>, ReleaseFailure> {
    let hoisted: HoistedStatistics = acceptance.criteria.release_hoisted(rng, real);
    let stop = acceptance.selection.draw_stop(rng);
    let once = if acceptance.refit { None } else { Some(spec.fit(rng, counts, check)?) };
    let tries = acceptance.selection.tries();
    let mut seeds = Vec::with_capacity(tries);
    for _ in 0..tries {
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        seeds.push(seed);
    }
    let d = columns.len();
    let known_m = rows.or_else(|| once.as_ref().map(|m| m.noisy_rows().min(post.max_rows as u64) as usize));
    // a refit per try allocates a model's estimation, which no public bound here covers: one at a time
    let threads = match known_m {
        Some(m) if post.keep.is_none() && !acceptance.refit => (1..=threads.max(1)).rev().find(|&t| fits(acceptance, m, d, t, memory)).unwrap_or(1),
        _ => 1,
    };
    let ctx = Tries {
        acceptance,
        spec,
        counts,
        real,
        columns,
        hoisted: &hoisted,
        once: once.as_ref(),
        rows,
        memory,
        stop,
        numeric: acceptance.numeric_columns(),
    };
    let serial = |post: &mut PostProcess, check: &mut dyn FnMut() -> Result<(), Interrupted>| -> Result<Option<Selected>, ReleaseFailure> {
        let mut chosen: Option<Selected> = None;
        for (j, seed) in seeds.iter().enumerate() {
            let found = ctx.run(j, &mut ChaCha20Rng::from_seed(*seed), post, check)?;
            if chosen.is_none() {
                chosen = found;
            }
        }
        Ok(chosen)
    };
    if threads == 1 {
        return serial(post, check);
    }
    let next = AtomicUsize::new(0);
    let halt = AtomicBool::new(false);
    let running = AtomicUsize::new(threads);
    let best: Mutex<Option<(usize, Selected)>> = Mutex::new(None);
    let failure: Mutex<Option<ReleaseFailure>> = Mutex::new(None);
    let (min_count, max_rows) = (post.min_count, post.max_rows);
    /// Counts a thread out when it ends, by a panic too (the calling thread waits for the count).
    struct Leaving<'a>(&'a AtomicUsize);
    impl Drop for Leaving<'_> {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let started = std::thread::scope(|scope| {
        let mut started = 0;
        for _ in 0..threads {
            let spawned = std::thread::Builder::new().spawn_scoped(scope, || {
                let _leaving = Leaving(&running);
                crate::release::block_signals();
                let mut post = PostProcess { keep: None, min_count, max_rows };
                let mut stopped = || if halt.load(Ordering::Relaxed) { Err(Interrupted) } else { Ok(()) };
                loop {
                    let j = next.fetch_add(1, Ordering::SeqCst);
                    if j >= tries || halt.load(Ordering::Relaxed) {
                        break;
                    }
                    match ctx.run(j, &mut ChaCha20Rng::from_seed(seeds[j]), &mut post, &mut stopped) {
                        Ok(Some(s)) => {
                            let mut b = best.lock().unwrap_or_else(|e| e.into_inner());
                            if b.as_ref().is_none_or(|(k, _)| j < *k) {
                                *b = Some((j, s));
                            }
                        }
                        Ok(None) => {}
                        Err(e) => {
                            failure.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(e);
                            halt.store(true, Ordering::SeqCst);
                            break;
                        }
                    }
                }
            });
            match spawned {
                Ok(_) => started += 1,
                // the system refused a thread: the others take its tries
                Err(_) => {
                    running.fetch_sub(1, Ordering::SeqCst);
                }
            }
        }
        while started > 0 && running.load(Ordering::SeqCst) > 0 {
            if check().is_err() {
                failure.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(ReleaseFailure::Interrupted);
                halt.store(true, Ordering::SeqCst);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        started
    });
    if started == 0 {
        // no thread could start: every try on this one (none has run)
        return serial(post, check);
    }
    if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    Ok(best.into_inner().unwrap_or_else(|e| e.into_inner()).map(|(_, s)| s))
}
