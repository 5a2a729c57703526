//! The whole synthetic release on neighbouring tables: the model alone and the model inside the
//! acceptance criteria and the selection loop, run many times on a tiny table D and on D plus one row
//! that D does not have. Every event of the output (here: whether the copy holds a row like the added
//! one, and whether no candidate passed) must have probabilities within e^ε of each other; the lower
//! confidence bound of each log ratio (α = 1e-6 over all events) must stay below the total ε charged.
//! The negative control asks the same of a much smaller ε, which the test must catch.
use pg_dp_core::noise::rng::seeded_rng;
use pg_dp_core::release::criteria::selection::LoopSpec;
use pg_dp_core::release::criteria::{CriteriaParams, CriteriaSpec, CriterionParams};
use pg_dp_core::release::synthesis::{select, Acceptance, PostProcess, Sample};
use pg_dp_core::release::synthetic::columns::ColumnCode;
use pg_dp_core::release::synthetic::{Method, SyntheticParams, SyntheticSpec};

const RUNS: usize = 20_000;
/// One-sided normal quantile for α = 1e-6 split over the events tested (at most 8).
const Z: f64 = 5.0;

fn no_interrupt() -> Result<(), pg_dp_core::release::dprp::Interrupted> {
    Ok(())
}

/// D: 24 rows over two columns with two values each (plus their NULL codes); the added row (1, 1)
/// is a combination D never has.
fn table(with_added: bool) -> Vec<[u32; 2]> {
    let mut rows = vec![[0, 0]; 12];
    rows.extend(vec![[1, 0]; 8]);
    rows.extend(vec![[0, 1]; 4]);
    if with_added {
        rows.push([1, 1]);
    }
    rows
}

fn columns() -> Vec<ColumnCode> {
    vec![ColumnCode::categorical(2).unwrap(), ColumnCode::categorical(2).unwrap()]
}

/// The events of one release: [holds a row (1, 1), no candidate passed, holds no row (1, 1)].
fn events(sample: Option<&Sample>) -> [bool; 3] {
    match sample {
        None => [false, true, false],
        Some(s) => {
            let has = s.codes.chunks_exact(2).any(|r| r == [1, 1]);
            [has, false, !has]
        }
    }
}

/// Frequencies of the events over RUNS releases of one table.
fn frequencies(with_added: bool, epsilon: f64, criteria: bool, seed: u64) -> [usize; 3] {
    let cols = columns();
    let cards: Vec<usize> = cols.iter().map(|c| c.cardinality()).collect();
    let acceptance = criteria.then(|| Acceptance {
        criteria: CriteriaSpec::new(CriteriaParams {
            cardinalities: cards.iter().map(|&c| c as u32).collect(),
            numeric: vec![],
            criteria: vec![CriterionParams::MaxMarginalError { k: 2, threshold: 0.15, epsilon: 0.25 }],
        })
        .unwrap(),
        selection: LoopSpec::new(0.5, 0.1).unwrap(),
        refit: false,
    });
    let model_eps = acceptance.as_ref().map_or(epsilon, |a| a.model_epsilon(epsilon).unwrap());
    let spec = SyntheticSpec::new(&SyntheticParams::new(cards.clone(), model_eps, 0.0, Method::Mst)).unwrap();
    let mut counts = spec.counter();
    let mut real = acceptance.as_ref().map(|a| a.criteria.start());
    for r in table(with_added) {
        counts.push(&r);
        if let Some(real) = real.as_mut() {
            real.push(&r, &[]);
        }
    }
    let mut rng = seeded_rng(seed);
    let mut out = [0usize; 3];
    for _ in 0..RUNS {
        let e = match (&acceptance, &real) {
            (Some(a), Some(real)) => {
                let chosen = select(&mut rng, a, &spec, &counts, real, &cols, None, &mut PostProcess::none(), usize::MAX, 1, &mut no_interrupt).unwrap();
                events(chosen.as_ref().map(|c| &c.sample))
            }
            _ => {
                let model = spec.fit(&mut rng, &counts, &mut no_interrupt).unwrap();
                let m = model.noisy_rows() as usize;
                events(Some(&Sample::draw(&model, &cols, m, &mut rng, &mut no_interrupt).unwrap()))
            }
        };
        for (o, hit) in out.iter_mut().zip(e) {
            *o += hit as usize;
        }
    }
    out
}

/// The largest lower confidence bound, over the events and both directions, of ln(p/q).
fn largest_log_ratio_bound(a: [usize; 3], b: [usize; 3]) -> f64 {
    let n = RUNS as f64;
    let bounds = |k: usize| {
        let p = k as f64 / n;
        let half = Z * (p * (1.0 - p) / n).sqrt() + Z * Z / (2.0 * n);
        ((p - half).max(0.0), (p + half).min(1.0))
    };
    let mut worst = f64::NEG_INFINITY;
    for (&x, &y) in a.iter().zip(&b) {
        if x < 200 && y < 200 {
            continue; // too rare to say anything
        }
        for (p, q) in [(bounds(x), bounds(y)), (bounds(y), bounds(x))] {
            if p.0 > 0.0 {
                worst = worst.max((p.0 / q.1).ln());
            }
        }
    }
    worst
}

#[test]
fn the_whole_synthetic_release_is_private_on_neighbouring_tables() {
    let epsilon = 2.0;
    let d = frequencies(false, epsilon, false, 1);
    let d2 = frequencies(true, epsilon, false, 2);
    let bound = largest_log_ratio_bound(d, d2);
    eprintln!("model alone at ε = {epsilon}: events {d:?} vs {d2:?}, largest lower bound of ln ratio {bound:.3}");
    assert!(bound <= epsilon, "ln ratio at least {bound} > ε = {epsilon}");
    // negative control: the same neighbours tell the two tables apart by more than ε/8
    assert!(bound > epsilon / 8.0, "the test cannot see a difference of ε/8: {bound}");
}

#[test]
fn the_whole_selection_loop_is_private_on_neighbouring_tables() {
    // model ε = 2 − 0.5 (twice the criterion) − 0.1 (ε₀) = 1.4; T = 6 tries, γ = 1/2
    let epsilon = 2.0;
    let d = frequencies(false, epsilon, true, 3);
    let d2 = frequencies(true, epsilon, true, 4);
    let bound = largest_log_ratio_bound(d, d2);
    eprintln!("selection loop at ε = {epsilon}: events {d:?} vs {d2:?}, largest lower bound of ln ratio {bound:.3}");
    assert!(d[1] > 200 && d[0] + d[2] > 200, "both accepted and refused outcomes occur: {d:?}");
    assert!(bound <= epsilon, "ln ratio at least {bound} > ε = {epsilon}");
    assert!(bound > epsilon / 8.0, "the test cannot see a difference of ε/8: {bound}");
}

#[test]
fn the_model_gets_what_the_criteria_and_the_loop_leave() {
    let a = Acceptance {
        criteria: CriteriaSpec::new(CriteriaParams {
            cardinalities: vec![3, 3],
            numeric: vec![],
            criteria: vec![
                CriterionParams::MaxMarginalError { k: 2, threshold: 0.1, epsilon: 0.3 },
                CriterionParams::OneWayRelativeError { threshold: 0.1, epsilon: 0.2 },
            ],
        })
        .unwrap(),
        selection: LoopSpec::new(0.1, 0.01).unwrap(),
        refit: false,
    };
    // fit once: ε − hoisted (0.2) − 2 × per candidate (0.3) − ε₀
    let m = a.model_epsilon(2.0).unwrap();
    assert!(m <= 2.0 - 0.2 - 0.6 - 0.01 && m > 2.0 - 0.2 - 0.6 - 0.01 - 1e-12, "{m}");
    let refit = Acceptance { refit: true, ..a.clone() };
    let m = refit.model_epsilon(2.0).unwrap();
    assert!(m <= (2.0 - 0.2 - 0.01) / 2.0 - 0.3 && m > (2.0 - 0.2 - 0.01) / 2.0 - 0.3 - 1e-12, "{m}");
    let e = a.model_epsilon(0.8).unwrap_err().to_string();
    assert!(e.starts_with("epsilon must be more than 0.81"), "{e}");
    // the plan never exceeds the total, for many totals
    for k in 1..2000 {
        let total = 0.81 + k as f64 * 0.0137;
        let m = a.model_epsilon(total).unwrap();
        assert!(pg_dp_core::release::criteria::selection::plan_epsilon(m, 0.2, 0.3, 0.01, true) <= total);
    }
}

#[test]
fn constraints_redraw_refused_rows_and_rare_rows_are_dropped() {
    let cols = columns();
    let cards: Vec<usize> = cols.iter().map(|c| c.cardinality()).collect();
    let spec = SyntheticSpec::new(&SyntheticParams::new(cards, 1e4, 0.0, Method::Mst)).unwrap();
    let mut counts = spec.counter();
    for r in table(true) {
        counts.push(&r);
    }
    let mut rng = seeded_rng(9);
    let model = spec.fit(&mut rng, &counts, &mut no_interrupt).unwrap();
    // a constraint that refuses every row with a = 1: 1000 rows, none of them with a = 1
    let mut refuse_a1 = |s: &Sample| Ok(s.codes.chunks_exact(2).map(|r| r[0] != 1).collect());
    let mut post = PostProcess { keep: Some(&mut refuse_a1), min_count: 1, max_rows: usize::MAX };
    let s = Sample::draw_processed(&model, &cols, 1000, &mut post, &mut rng, &mut no_interrupt).unwrap();
    assert_eq!(s.rows(2), 1000);
    assert!(s.codes.chunks_exact(2).all(|r| r[0] != 1));
    // a constraint nothing passes: at most the cap of draws, and no rows
    let mut refuse_all = |s: &Sample| Ok(vec![false; s.rows(2)]);
    let mut post = PostProcess { keep: Some(&mut refuse_all), min_count: 1, max_rows: usize::MAX };
    let s = Sample::draw_processed(&model, &cols, 50, &mut post, &mut rng, &mut no_interrupt).unwrap();
    assert_eq!(s.rows(2), 0);
    // min_count: the single (1, 1) row of 25 is rare in a sample of 25 (about 1 in 25), so a minimum
    // of 3 occurrences drops it in most samples, and never keeps a combination seen fewer than 3 times
    let mut post = PostProcess { keep: None, min_count: 3, max_rows: usize::MAX };
    for _ in 0..100 {
        let s = Sample::draw_processed(&model, &cols, 25, &mut post, &mut rng, &mut no_interrupt).unwrap();
        let mut seen = std::collections::HashMap::new();
        for r in s.codes.chunks_exact(2) {
            *seen.entry(r.to_vec()).or_insert(0) += 1;
        }
        assert!(seen.values().all(|&c| c >= 3), "{seen:?}");
    }
}

/// The loop on a table of 5,000 rows (three columns, a strong pair), with faithfulness and the max
/// marginal error, the threshold of the latter where some candidates pass and some fail.
fn threaded_setup(refit: bool) -> (Acceptance, SyntheticSpec, pg_dp_core::release::synthetic::PairCounts, pg_dp_core::release::criteria::RealStatistics, Vec<ColumnCode>) {
    let cols = vec![ColumnCode::categorical(3).unwrap(), ColumnCode::categorical(3).unwrap(), ColumnCode::categorical(2).unwrap()];
    let cards: Vec<u32> = cols.iter().map(|c| c.cardinality() as u32).collect();
    let acceptance = Acceptance {
        criteria: CriteriaSpec::new(CriteriaParams {
            cardinalities: cards.clone(),
            numeric: vec![],
            criteria: vec![
                CriterionParams::MaxMarginalError { k: 2, threshold: 0.007, epsilon: 0.5 },
                CriterionParams::Faithfulness { threshold: 0.5, epsilon: 0.5 },
            ],
        })
        .unwrap(),
        selection: LoopSpec::new(0.05, 0.01).unwrap(),
        refit,
    };
    let eps = acceptance.model_epsilon(6.0).unwrap();
    let spec = SyntheticSpec::new(&SyntheticParams::new(cards.iter().map(|&c| c as usize).collect(), eps, 0.0, Method::Mst)).unwrap();
    let mut counts = spec.counter();
    let mut real = acceptance.criteria.start();
    for i in 0..5000u32 {
        let r = [i % 3, (i % 3 + (i % 7 == 0) as u32) % 3, (i % 5 == 0) as u32];
        counts.push(&r);
        real.push(&r, &[]);
    }
    (acceptance, spec, counts, real, cols)
}

// The tries run on threads draw from their own streams, seeded before the first try: one, two and
// three threads release the same candidate (or none) for the same seed, and a different seed gives
// another.
#[test]
fn the_loop_releases_the_same_on_one_two_and_three_threads() {
    let (a, spec, counts, real, cols) = threaded_setup(false);
    let mut outcomes = Vec::new();
    let mut passed = 0;
    for seed in 0..6u64 {
        let run = |threads: usize| {
            let r = select(&mut seeded_rng(50_000 + seed), &a, &spec, &counts, &real, &cols, Some(5000), &mut PostProcess::none(), usize::MAX, threads, &mut no_interrupt).unwrap();
            r.map(|s| (s.sample.codes, s.evaluation.results.iter().map(|e| e.noisy_statistic).collect::<Vec<_>>()))
        };
        let one = run(1);
        assert_eq!(run(2), one, "seed {seed}");
        assert_eq!(run(3), one, "seed {seed}");
        passed += one.is_some() as usize;
        outcomes.push(one);
    }
    eprintln!("{passed} of 6 seeds released a candidate");
    // the seeds differ in what they release
    assert!(outcomes.windows(2).any(|w| w[0] != w[1]));
    // with a refit per try and the model's noisy row count the loop stays on one thread: the same
    let (a, spec, counts, real, cols) = threaded_setup(true);
    let run = |threads: usize| select(&mut seeded_rng(7), &a, &spec, &counts, &real, &cols, None, &mut PostProcess::none(), usize::MAX, threads, &mut no_interrupt).unwrap().map(|s| s.sample.codes);
    assert_eq!(run(2), run(1));
    // with a refit per try even known rows keep the loop on this thread (a model's estimation has no
    // public memory bound to multiply): the checks are the serial loop's own, one for one
    let checks = |threads: usize| {
        let mut n = 0;
        select(&mut seeded_rng(8), &a, &spec, &counts, &real, &cols, Some(5000), &mut PostProcess::none(), usize::MAX, threads, &mut || {
            n += 1;
            Ok(())
        })
        .unwrap();
        n
    };
    assert_eq!(checks(2), checks(1));
}

// On threads only the calling thread calls the interrupt check; when it fails, every thread stops
// and the loop returns the interruption.
#[test]
fn an_interrupt_stops_the_threaded_loop() {
    let (a, spec, counts, real, cols) = threaded_setup(false);
    // the first check fails: in the fit, before any thread starts
    let r = select(&mut seeded_rng(9), &a, &spec, &counts, &real, &cols, Some(5000), &mut PostProcess::none(), usize::MAX, 2, &mut || Err(pg_dp_core::release::dprp::Interrupted));
    assert!(matches!(r, Err(pg_dp_core::release::dprp::ReleaseFailure::Interrupted)));
    // a check that fails 30 ms in, while the threads run 106 tries of 20,000 rows
    let start = std::time::Instant::now();
    let mut calls = 0;
    let r = select(&mut seeded_rng(9), &a, &spec, &counts, &real, &cols, Some(20_000), &mut PostProcess::none(), usize::MAX, 2, &mut || {
        calls += 1;
        if start.elapsed() > std::time::Duration::from_millis(30) { Err(pg_dp_core::release::dprp::Interrupted) } else { Ok(()) }
    });
    assert!(matches!(r, Err(pg_dp_core::release::dprp::ReleaseFailure::Interrupted)));
    assert!(calls >= 2, "{calls} checks");
    // and memory for only one try at a time runs them on one thread, with the same result
    let one = select(&mut seeded_rng(11), &a, &spec, &counts, &real, &cols, Some(5000), &mut PostProcess::none(), usize::MAX, 1, &mut no_interrupt).unwrap();
    let tight = 2 * 5000 * pg_dp_core::release::synthesis::candidate_row_bytes(3) + a.criteria.candidate_bytes(5000) as usize;
    let two = select(&mut seeded_rng(11), &a, &spec, &counts, &real, &cols, Some(5000), &mut PostProcess::none(), tight, 2, &mut no_interrupt).unwrap();
    assert_eq!(one.map(|s| s.sample.codes), two.map(|s| s.sample.codes));
}

// A release's helper threads block every signal, so that PostgreSQL's handlers run on the backend's
// thread; and the fallible allocations refuse what the system cannot give instead of aborting.
#[test]
fn helper_threads_block_signals_and_refused_allocations_are_errors() {
    let blocked = std::thread::spawn(|| {
        pg_dp_core::release::block_signals();
        unsafe {
            let mut now: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now);
            [libc::SIGINT, libc::SIGTERM, libc::SIGALRM, libc::SIGUSR1].iter().all(|&s| libc::sigismember(&now, s) == 1)
        }
    })
    .join()
    .unwrap();
    assert!(blocked);
    // the calling thread's own mask is untouched
    let here = unsafe {
        let mut now: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now);
        libc::sigismember(&now, libc::SIGINT)
    };
    assert_eq!(here, 0);
    use pg_dp_core::release::dprp::ReleaseFailure;
    assert_eq!(pg_dp_core::release::try_vec::<u64>(usize::MAX / 4).err(), Some(ReleaseFailure::OutOfMemory));
    assert_eq!(pg_dp_core::release::try_filled_in(3, 7u8, 10).unwrap(), vec![7, 7, 7]);
}
