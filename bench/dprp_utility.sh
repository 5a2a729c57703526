#!/usr/bin/env bash
# Classification utility of DPRP releases with the protocol of Gondara & Wang (UAI 2020): random
# forests trained on the released training part, evaluated on the real hold-out (bench/dprp/utility.py,
# results in docs/dprp-utility.md). Run from anywhere:
#
#   bash bench/dprp_utility.sh [splits] [k2-splits]     (defaults 20 and 10)
#
# Needs cargo and a Python 3 with pip; installs numpy, scikit-learn and matplotlib with
# `pip install --user` if they are missing, else into a virtual environment under target/ (the sklearn
# data sets used ship inside the package: no download). Writes target/dprp_utility/results.csv and
# docs/img/dprp-utility.png and prints Markdown tables. Pure Rust core only: no PostgreSQL, no cargo pgrx.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SPLITS="${1:-20}"
K2_SPLITS="${2:-10}"
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
LIBS=(numpy scikit-learn matplotlib)

log() { printf '==> %s\n' "$*" >&2; }

has_libs() { "$1" -c 'import numpy, sklearn, matplotlib' >/dev/null 2>&1; }

# A Python with the libraries: $PYTHON if set, else Debian's /usr/bin/python3, else the python3 on
# PATH; if none has them, `pip install --user` into the first that accepts it. Debian 12's own
# Python refuses that (PEP 668, "externally managed"): the last resort is a virtual environment in
# target/dprp-utility-venv, which touches nothing outside the checkout.
pick_python() {
    local candidates=() py venv="$ROOT/target/dprp-utility-venv"
    [ -n "${PYTHON:-}" ] && candidates+=("$PYTHON")
    candidates+=(/usr/bin/python3 python3)
    for py in "${candidates[@]}" "$venv/bin/python"; do
        command -v "$py" >/dev/null 2>&1 && has_libs "$py" && { echo "$py"; return; }
    done
    for py in "${candidates[@]}"; do
        command -v "$py" >/dev/null 2>&1 && "$py" -m pip --version >/dev/null 2>&1 || continue
        log "installing ${LIBS[*]} for $py (pip install --user)"
        if "$py" -m pip install --user --quiet "${LIBS[@]}" >&2 && has_libs "$py"; then
            echo "$py"
            return
        fi
        log "pip install --user did not work for $py"
    done
    for py in "${candidates[@]}"; do
        command -v "$py" >/dev/null 2>&1 || continue
        log "installing ${LIBS[*]} into a virtual environment, $venv"
        if "$py" -m venv "$venv" >&2 && "$venv/bin/python" -m pip install --quiet "${LIBS[@]}" >&2 \
            && has_libs "$venv/bin/python"; then
            echo "$venv/bin/python"
            return
        fi
        rm -rf "$venv"
    done
    echo "no Python 3 could get ${LIBS[*]} (on Debian: apt-get install python3-venv, or" \
         "python3-numpy python3-sklearn python3-matplotlib); or set PYTHON=/path/to/python3 with them" >&2
    exit 1
}
PY="$(pick_python)"
log "using $PY"

log "building the release tool (release)"
(cd "$ROOT" && cargo build -q -p pg_dp_core --release --example dprp_release_csv)

cd "$ROOT"
"$PY" bench/dprp/utility.py --tool "$ROOT/target/release/examples/dprp_release_csv" \
    --splits "$SPLITS" --k2-splits "$K2_SPLITS" --out "$ROOT/target/dprp_utility" \
    --plot "$ROOT/docs/img/dprp-utility.png"
