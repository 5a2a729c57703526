#!/usr/bin/env bash
# The figures and tables of docs/choosing-epsilon.md, measured on pg_dp through SQL: relative error
# against ε of dp_count, dp_sum, dp_avg, dp_variance, dp_median and dp_percentile_em at 1,000, 10,000
# and 100,000 rows of the synthetic Adult-like table of bench/accuracy_peers.py; the error of a mean
# and a sum against the upper bound chosen; the receipts of one release of each aggregate.
#
#   bash bench/accuracy_plots.sh [reps]        (default 100 releases per point)
#
# Builds pg_dp in release mode and installs it into the system PostgreSQL 15 (scripts/common.sh),
# starts a private server on port 25440 (CHOOSING_PORT) and stops it on exit, gets numpy, matplotlib
# and psycopg through bench/python_env.sh (the virtual environment target/peer-accuracy-venv of
# bench/accuracy_peers.sh), writes target/choosing_epsilon/curves.csv, docs/img/choosing-epsilon.png
# and docs/img/choosing-bounds.png, and prints Markdown tables.
#
# ACCURACY_SKIP_BUILD=1 and ACCURACY_PGBIN as for bench/accuracy_peers.sh.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"

CE_DIR="${CHOOSING_DIR:-$STATE_DIR/choosing-epsilon}"
PSQL_PORT="${CHOOSING_PORT:-25440}"
REPS="${1:-100}"
PGBIN="${ACCURACY_PGBIN:-$PGBIN}"
VENV="$ROOT/target/peer-accuracy-venv"
LIBS=("psycopg[binary]==3.3.9" numpy==2.4.6 matplotlib==3.11.2)

if [ "${ACCURACY_SKIP_BUILD:-0}" != 1 ]; then
    install_deps
    as_root apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi
cluster_stop "$CE_DIR"
if [ "${ACCURACY_SKIP_BUILD:-0}" != 1 ]; then
    install_extension --release
fi
cluster_start "$CE_DIR" "$PSQL_PORT"
trap 'cluster_stop "$CE_DIR"' EXIT

source "$ROOT/bench/python_env.sh"
PY="$(PYTHON="$VENV/bin/python" PATH="/usr/bin:$PATH" pick_python "$VENV" "psycopg, numpy, matplotlib" "${LIBS[@]}")"
log "using $PY"

dpsql -d postgres -c "DROP DATABASE IF EXISTS choosing_epsilon" -c "CREATE DATABASE choosing_epsilon"
dpsql -d choosing_epsilon -c "CREATE EXTENSION pg_dp"
cd "$ROOT"
"$PY" bench/accuracy_plots.py --host "$SOCKET_DIR" --port "$PSQL_PORT" --dbname choosing_epsilon \
    --reps "$REPS" --out "$ROOT/target/choosing_epsilon" --img "$ROOT/docs/img"
