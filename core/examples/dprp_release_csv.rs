//! Releases a numeric CSV table with DPRP (`pg_dp_core::release::dprp`), for bench/dprp/utility.py and for
//! trying the mechanism on one's own data without PostgreSQL:
//!
//!     cargo run -p pg_dp_core --release --example dprp_release_csv -- \
//!         --input DATA.csv (--bounds BOUNDS.csv | --lower L1,L2,.. --upper U1,U2,..) \
//!         --epsilon E --delta D [--row-norm clip|unit] [--clip-norm Z] [--k1 K] [--k2 K] \
//!         [--projection-share S] [--projection orthonormal|gaussian] [--centring mean|midpoint] \
//!         [--threads T] [--memory-limit BYTES] [--seed SEED] [--output OUT.csv] [--receipt RECEIPT.json]
//!
//! DATA.csv: a header line of column names, then one row of numbers per line (comma-separated, no
//! quoting; an empty cell, `NULL` or `nan` is a NULL, released as if it were the midpoint of its
//! bounds). BOUNDS.csv: the same header (checked), then a line of lower bounds and a line of upper
//! bounds; the bounds must be public, i.e. chosen without looking at the data. The released table
//! (same header, the rows of the input plus padding rows, in a random order) goes to OUT.csv or
//! stdout; the receipt (JSON, with the released row count) goes to RECEIPT.json or stderr.
//!
//! Everything goes through the calls the SQL layer makes: `DprpSpec::new(&params)`, `describe()`,
//! `plan_memory(limit, threads)`, `start`, `push_row` per row, `finish`. Without `--seed` the
//! noise comes from the operating system's entropy (`rng::os_rng`). With `--seed` it is
//! reproducible, for benchmarks only: anyone who knows the seed can subtract the noise, so a seeded
//! release has no privacy at all.
use pg_dp_core::release::dprp::{Centring, DprpParams, DprpSpec, Projection, RowNorm};
use pg_dp_core::noise::rng::{os_rng, seeded_rng};
use std::io::Write;

fn usage(msg: &str) -> ! {
    eprintln!("dprp_release_csv: {msg}");
    eprintln!(
        "usage: dprp_release_csv --input DATA.csv (--bounds BOUNDS.csv | --lower L,.. --upper U,..) \
         --epsilon E --delta D [--row-norm clip|unit] [--clip-norm Z] [--k1 K] [--k2 K] \
         [--projection-share S] [--projection orthonormal|gaussian] [--centring mean|midpoint] \
         [--threads T] [--memory-limit BYTES] [--seed SEED] [--output OUT.csv] [--receipt RECEIPT.json]"
    );
    std::process::exit(2);
}

fn parse<T: std::str::FromStr>(what: &str, s: &str) -> T {
    s.trim().parse().unwrap_or_else(|_| usage(&format!("{what}: cannot parse {s:?}")))
}

fn numbers(what: &str, line: &str) -> Vec<f64> {
    line.split(',').map(|v| parse::<f64>(what, v)).collect()
}

/// A data line: empty cells and `NULL` are NULLs (NaN, which the release maps to the midpoint).
fn cells(what: &str, line: &str) -> Vec<f64> {
    line.split(',')
        .map(|v| match v.trim() {
            "" | "NULL" | "null" => f64::NAN,
            t => parse::<f64>(what, t),
        })
        .collect()
}

fn header(line: &str) -> Vec<String> {
    line.split(',').map(|h| h.trim().trim_matches('"').to_string()).collect()
}

/// (header, row-major values, n, d)
fn read_table(path: &str) -> (Vec<String>, Vec<f64>, usize, usize) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| usage(&format!("{path}: {e}")));
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let head = header(lines.next().unwrap_or_else(|| usage(&format!("{path}: empty file"))));
    let d = head.len();
    let mut data = Vec::new();
    let mut n = 0;
    for (i, line) in lines.enumerate() {
        let row = cells(path, line);
        if row.len() != d {
            usage(&format!("{path}: data line {} has {} values, the header has {d}", i + 1, row.len()));
        }
        data.extend(row);
        n += 1;
    }
    (head, data, n, d)
}

fn read_bounds(path: &str, head: &[String]) -> (Vec<f64>, Vec<f64>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| usage(&format!("{path}: {e}")));
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() != 3 {
        usage(&format!("{path}: expected a header, a line of lower and a line of upper bounds"));
    }
    if header(lines[0]) != head {
        usage(&format!("{path}: header differs from the data's header"));
    }
    (numbers(path, lines[1]), numbers(path, lines[2]))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opt = std::collections::HashMap::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let key = a.strip_prefix("--").unwrap_or_else(|| usage(&format!("unexpected argument {a:?}")));
        let val = it.next().unwrap_or_else(|| usage(&format!("--{key} needs a value")));
        opt.insert(key.to_string(), val.clone());
    }
    let get = |k: &str| opt.get(k).map(String::as_str);
    let known = [
        "input", "bounds", "lower", "upper", "epsilon", "delta", "row-norm", "clip-norm", "k1", "k2",
        "projection-share", "projection", "centring", "threads", "memory-limit", "seed", "output", "receipt",
    ];
    if let Some(k) = opt.keys().find(|k| !known.contains(&k.as_str())) {
        usage(&format!("unknown option --{k}"));
    }

    let input = get("input").unwrap_or_else(|| usage("--input is required"));
    let (head, data, n, d) = read_table(input);
    let (lower, upper) = match (get("bounds"), get("lower"), get("upper")) {
        (Some(b), None, None) => read_bounds(b, &head),
        (None, Some(l), Some(u)) => (numbers("--lower", l), numbers("--upper", u)),
        _ => usage("give either --bounds FILE or both --lower and --upper"),
    };
    if lower.len() != d || upper.len() != d {
        usage(&format!("{d} columns but {} lower and {} upper bounds", lower.len(), upper.len()));
    }
    let epsilon: f64 = parse("--epsilon", get("epsilon").unwrap_or_else(|| usage("--epsilon is required")));
    let delta: f64 = parse("--delta", get("delta").unwrap_or_else(|| usage("--delta is required")));

    let mut params = DprpParams::new(lower, upper, epsilon, delta);
    params.row_norm = match get("row-norm").unwrap_or("clip") {
        "clip" => RowNorm::Clip,
        "unit" => RowNorm::Unit,
        other => usage(&format!("--row-norm: clip or unit, not {other:?}")),
    };
    params.projection = match get("projection").unwrap_or("orthonormal") {
        "orthonormal" => Projection::Orthonormal,
        "gaussian" => Projection::Gaussian,
        other => usage(&format!("--projection: orthonormal or gaussian, not {other:?}")),
    };
    params.centring = match get("centring").unwrap_or("mean") {
        "mean" => Centring::Mean,
        "midpoint" => Centring::Midpoint,
        other => usage(&format!("--centring: mean or midpoint, not {other:?}")),
    };
    params.clip_norm = get("clip-norm").map(|v| parse("--clip-norm", v));
    params.k1 = get("k1").map(|v| parse("--k1", v));
    params.k2 = get("k2").map(|v| parse("--k2", v));
    if let Some(s) = get("projection-share") {
        params.projection_share = parse("--projection-share", s);
    }

    let fail = |e: &dyn std::fmt::Display| -> ! {
        eprintln!("dprp_release_csv: {e}");
        std::process::exit(1);
    };
    let threads: usize = get("threads").map_or(1, |v| parse("--threads", v));
    let limit: usize = get("memory-limit").map_or(1 << 30, |v| parse("--memory-limit", v));
    // validate → receipt → memory plan, all before reading a row (the SQL layer charges here)
    let spec = DprpSpec::new(&params).unwrap_or_else(|e| fail(&e));
    let plan = spec.plan_memory(limit, threads).unwrap_or_else(|e| fail(&e));
    let mut rng = match get("seed") {
        Some(s) => seeded_rng(parse("--seed", s)),
        None => os_rng(),
    };
    let mut no_interrupt = || Ok(());
    let mut release = spec.start(&mut rng, &plan, &mut no_interrupt).unwrap_or_else(|e| fail(&e));
    for row in data.chunks_exact(d) {
        release.push_row(row).unwrap_or_else(|e| fail(&e));
    }
    let out = release.finish(&mut rng, &mut no_interrupt).unwrap_or_else(|e| fail(&e));
    let rows = out.rows;
    let _ = n;

    let mut text = String::with_capacity(rows.len() * 12 + 64);
    text.push_str(&head.join(","));
    text.push('\n');
    for row in rows.chunks_exact(d) {
        let cells: Vec<String> = row.iter().map(|v| format!("{v}")).collect();
        text.push_str(&cells.join(","));
        text.push('\n');
    }
    match get("output") {
        Some(p) => std::fs::write(p, text).unwrap_or_else(|e| usage(&format!("{p}: {e}"))),
        None => std::io::stdout().write_all(text.as_bytes()).expect("write stdout"),
    }
    let mut json = serde_json::to_value(&out.receipt).expect("receipt as JSON");
    json["rows_released"] = out.rows_released.into();
    let json = serde_json::to_string_pretty(&json).expect("receipt as JSON");
    match get("receipt") {
        Some(p) => std::fs::write(p, json + "\n").unwrap_or_else(|e| usage(&format!("{p}: {e}"))),
        None => eprintln!("{json}"),
    }
}
