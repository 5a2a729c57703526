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
                let chosen = select(&mut rng, a, &spec, &counts, real, &cols, None, &mut PostProcess::none(), usize::MAX, &mut no_interrupt).unwrap();
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
