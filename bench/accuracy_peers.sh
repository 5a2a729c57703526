#!/usr/bin/env bash
# Accuracy of pg_dp next to IBM diffprivlib, OpenDP and Google's PyDP (python-dp): count, sum, mean,
# variance and median of two columns (synthetic Adult-like ages in [0, 100], lognormal incomes in
# [0, 500,000]) at ε = 0.01, 0.03, 0.1, 0.3, 1, the same bounds and ε for every library, RMSE over R
# releases per cell. pg_dp is queried through SQL on a private server. Results: docs/peer-accuracy.md.
#
#   bash bench/accuracy_peers.sh [reps]        (default 200 releases per cell; about 5 minutes on
#                                               2 cores once pg_dp is built)
#
# Builds pg_dp in release mode and installs it into the system PostgreSQL 15 (scripts/common.sh),
# starts a private server on port 25438 (ACCURACY_PORT) and stops it on exit, gets the pinned Python
# packages below through bench/python_env.sh (a virtual environment in target/peer-accuracy-venv),
# writes target/peer_accuracy/results.csv and docs/img/peer-accuracy.png, and prints Markdown tables.
#
# ACCURACY_SKIP_BUILD=1 skips the Debian packages and the build (pg_dp already installed), and
# ACCURACY_PGBIN=/path/to/bin uses another PostgreSQL 15's binaries (with pg_dp installed in it).
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"

ACC_DIR="${ACCURACY_DIR:-$STATE_DIR/accuracy}"
PSQL_PORT="${ACCURACY_PORT:-25438}"
REPS="${1:-200}"
PGBIN="${ACCURACY_PGBIN:-$PGBIN}"
VENV="$ROOT/target/peer-accuracy-venv"
# Pinned: the versions docs/peer-accuracy.md was measured with. scikit-learn stays below 1.7, whose
# sklearn.tree._tree no longer exports what diffprivlib 0.6.6 imports.
LIBS=(diffprivlib==0.6.6 opendp==0.16.0 python-dp==1.1.5 "psycopg[binary]==3.3.9" numpy==2.4.6
      scikit-learn==1.6.1 scipy==1.17.1 matplotlib==3.11.2)
MODULES="psycopg, numpy, matplotlib, diffprivlib, opendp, pydp"

if [ "${ACCURACY_SKIP_BUILD:-0}" != 1 ]; then
    install_deps
    # pick_python's last resort, a virtual environment, needs Debian's venv module
    as_root apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi
cluster_stop "$ACC_DIR"
if [ "${ACCURACY_SKIP_BUILD:-0}" != 1 ]; then
    install_extension --release
fi
cluster_start "$ACC_DIR" "$PSQL_PORT"
trap 'cluster_stop "$ACC_DIR"' EXIT

source "$ROOT/bench/python_env.sh"
# Debian's own Python first (PATH), so that the packages land in the checkout's virtual environment
# and not in a user site of another Python; a Python that already has them all is used as it is
# (the script warns when its versions differ from the pins).
PY="$(PYTHON="$VENV/bin/python" PATH="/usr/bin:$PATH" pick_python "$VENV" "$MODULES" "${LIBS[@]}")"
log "using $PY"

dpsql -d postgres -c "DROP DATABASE IF EXISTS peer_accuracy" -c "CREATE DATABASE peer_accuracy"
dpsql -d peer_accuracy -c "CREATE EXTENSION pg_dp"
cd "$ROOT"
"$PY" bench/accuracy_peers.py --host "$SOCKET_DIR" --port "$PSQL_PORT" --dbname peer_accuracy \
    --reps "$REPS" --out "$ROOT/target/peer_accuracy" --plot "$ROOT/docs/img/peer-accuracy.png" \
    --pins "${LIBS[*]}"
