//! What the accuracy examples share: their command line and the reading of a one-column CSV file.

/// The command line FILE.csv LOWER UPPER LABEL [--reps R] [--seed S] of an accuracy example.
pub struct Args {
    pub path: String,
    pub lower: f64,
    pub upper: f64,
    pub label: String,
    pub reps: usize,
    pub seed: u64,
}

/// Parses the command line (reps and seed default to the given values); prints the usage of `name`
/// and exits on anything else.
pub fn parse_args(name: &str, reps: usize, seed: u64) -> Args {
    let usage = || -> ! {
        eprintln!("usage: {name} FILE.csv LOWER UPPER LABEL [--reps R] [--seed S]");
        std::process::exit(2);
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut pos, mut reps, mut seed) = (Vec::new(), reps, seed);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--reps" => reps = it.next().and_then(|s| s.parse().ok()).unwrap_or_else(|| usage()),
            "--seed" => seed = it.next().and_then(|s| s.parse().ok()).unwrap_or_else(|| usage()),
            _ => pos.push(a.clone()),
        }
    }
    if pos.len() != 4 || reps == 0 {
        usage();
    }
    let lower: f64 = pos[1].parse().unwrap_or_else(|_| usage());
    let upper: f64 = pos[2].parse().unwrap_or_else(|_| usage());
    Args { path: pos[0].clone(), lower, upper, label: pos[3].clone(), reps, seed }
}

/// The numbers of the first column of a CSV file (a non-numeric first line is a header; NaN skipped).
pub fn read_column(path: &str) -> Vec<f64> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let field = line.split(',').next().unwrap_or("").trim();
        if field.is_empty() {
            continue;
        }
        match field.parse::<f64>() {
            Ok(v) if !v.is_nan() => out.push(v),
            _ if i == 0 => {} // header
            _ => panic!("{path}:{}: not a number: {field:?}", i + 1),
        }
    }
    out
}
