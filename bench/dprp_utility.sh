#!/usr/bin/env bash
# Classification utility of DPRP releases with the protocol of Gondara & Wang (UAI 2020): random
# forests trained on the released training part, evaluated on the real hold-out (bench/dprp/utility.py,
# results in docs/dprp-utility.md). Run from anywhere:
#
#   bash bench/dprp_utility.sh [splits] [sweep-splits]     (defaults 20 and 5)
#
# Needs cargo and a Python 3 with pip; installs numpy, scikit-learn and matplotlib with
# `pip install --user` if they are missing, else into a virtual environment under target/ (the sklearn
# data sets used ship inside the package: no download). Writes target/dprp_utility/results.csv and
# docs/img/dprp-utility.png and prints Markdown tables. Pure Rust core only: no PostgreSQL, no cargo pgrx.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SPLITS="${1:-20}"
SWEEP_SPLITS="${2:-5}"
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
LIBS=(numpy scikit-learn matplotlib)

log() { printf '==> %s\n' "$*" >&2; }

source "$ROOT/bench/python_env.sh"
PY="$(pick_python "$ROOT/target/dprp-utility-venv" "numpy, sklearn, matplotlib" "${LIBS[@]}")"
log "using $PY"

log "building the release tool (release)"
(cd "$ROOT" && cargo build -q -p pg_dp_core --release --example dprp_release_csv)

cd "$ROOT"
nice -n 10 "$PY" bench/dprp/utility.py --tool "$ROOT/target/release/examples/dprp_release_csv" \
    --splits "$SPLITS" --sweep-splits "$SWEEP_SPLITS" --out "$ROOT/target/dprp_utility" \
    --plot "$ROOT/docs/img/dprp-utility.png"
