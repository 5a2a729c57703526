#!/usr/bin/env bash
# Accuracy of the quantile releases (smooth sensitivity with δ > 0 and δ = 0, exponential mechanism,
# naive global-sensitivity Laplace) on real and synthetic data. Run from anywhere:
#
#   bash bench/quantile_accuracy.sh [reps]      (default 1000 releases per cell)
#
# Needs cargo and a Python 3 with pip; installs numpy and scikit-learn with `pip install --user` if
# they are missing (the sklearn data sets used here ship inside the package: no download). Writes the
# data as CSV under target/accuracy/ and prints Markdown tables (kept in docs/quantile-accuracy.md).
# Pure Rust core only: no PostgreSQL, no cargo pgrx.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPS="${1:-1000}"
OUT="$ROOT/target/accuracy"
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"

log() { printf '==> %s\n' "$*" >&2; }

source "$ROOT/bench/python_env.sh"
PY="$(pick_python "$ROOT/target/accuracy-venv" "numpy, sklearn" numpy scikit-learn)"
log "using $PY"

mkdir -p "$OUT"
# One CSV per data set: a header line, then one number per line.
"$PY" - "$OUT" <<'EOF'
import sys, numpy as np
from sklearn.datasets import load_diabetes, load_wine

out = sys.argv[1]
def write(name, values):
    values = np.asarray(values, dtype=float)
    np.savetxt(f"{out}/{name}.csv", values, fmt="%.17g", header=name, comments="")

def column(bunch, name):  # no pandas needed
    return bunch.data[:, list(bunch.feature_names).index(name)]

diabetes = load_diabetes(scaled=False)
write("diabetes_target", diabetes.target)
write("diabetes_bmi", column(diabetes, "bmi"))
wine = load_wine()
write("wine_proline", column(wine, "proline"))
write("wine_alcohol", column(wine, "alcohol"))
# synthetic, fixed seeds: right-skewed "incomes" (median about 45,000) and a heavy-tailed small sample
write("lognormal_incomes", np.random.default_rng(20240601).lognormal(np.log(45000), 0.8, 10_000))
write("pareto_small", 20000 * (1 + np.random.default_rng(20240602).pareto(1.5, 200)))
EOF

log "building the example (release)"
(cd "$ROOT" && cargo build -q -p pg_dp_core --release --example quantile_accuracy)

# Bounds are public, round numbers fixed before looking at the data (never the sample min/max, which
# would themselves leak): what an analyst knows about each variable's scale.
#   diabetes target: the disease-progression score of the data set's documentation, reported on a
#                    scale of a few hundred: [0, 400]
#   bmi (kg/m²):     adult body-mass index outside [10, 60] is physiologically extreme
#   proline (mg/L):  amino-acid content of wine, up to about two thousand mg/L: [0, 2000]
#   alcohol (% vol): table wines lie well inside [0, 20]
#   incomes:         annual incomes, [0, 1,000,000] (the top is clamped: a rich tail is expected)
#   pareto_small:    same income-like scale, [0, 1,000,000]
run() { (cd "$ROOT" && cargo run -q -p pg_dp_core --release --example quantile_accuracy -- "$@" --reps "$REPS"); }
echo "## Absolute error of quantile releases: median / 90th percentile (R = $REPS per cell)"
echo
run "$OUT/diabetes_target.csv" 0 400 "sklearn diabetes: target (disease progression)"
run "$OUT/diabetes_bmi.csv" 10 60 "sklearn diabetes: bmi (raw, kg/m²)"
run "$OUT/wine_proline.csv" 0 2000 "sklearn wine: proline"
run "$OUT/wine_alcohol.csv" 0 20 "sklearn wine: alcohol"
run "$OUT/lognormal_incomes.csv" 0 1000000 "synthetic lognormal incomes (seed 20240601)"
run "$OUT/pareto_small.csv" 0 1000000 "synthetic heavy-tailed small sample: 20000·(1 + Lomax(1.5)), seed 20240602"
