#!/usr/bin/env bash
# pg_dp benchmark: bash bench/run.sh [rows [bench.py options]]   (default 10,000,000 rows)
# e.g. bash bench/run.sh 10000000 --sections quantiles   (sections: timing,quantiles,dprp,charge,cache,accuracy,grammar,units,selection)
# Builds pg_dp in release mode, starts a private server, loads the rows and prints time ratios of
# pg_dp aggregates against PostgreSQL's own, serial and parallel, measured side by side in one run,
# dp_median/dp_percentile against percentile_cont on 1,000,000 rows, plus RMSE of dp_sum/dp_avg
# against the Laplace optimum, and the planning time the query grammar adds (against a second server
# without pg_dp). Results are kept in docs/benchmarks.md.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"

BENCH_DIR="${BENCH_DIR:-$STATE_DIR/bench}"
PSQL_PORT="${BENCH_PORT:-25434}"
PLAIN_DIR="${BENCH_PLAIN_DIR:-$STATE_DIR/bench-plain}"
PLAIN_PORT="${BENCH_PLAIN_PORT:-25436}"
ROWS="${1:-10000000}"
shift || true

install_deps
cluster_stop "$BENCH_DIR"
cluster_stop "$PLAIN_DIR"
install_extension --release
cluster_start "$BENCH_DIR" "$PSQL_PORT"
# the same PostgreSQL without pg_dp loaded: the reference for the grammar's planning time
cluster_start "$PLAIN_DIR" "$PLAIN_PORT" ""
trap 'cluster_stop "$BENCH_DIR"; cluster_stop "$PLAIN_DIR"' EXIT
# memory settings for a table that fits in RAM; JIT off so that both sides run the same executor
dpsql -d postgres -c "ALTER SYSTEM SET shared_buffers = '2GB'" -c "ALTER SYSTEM SET work_mem = '256MB'" \
      -c "ALTER SYSTEM SET jit = off" -c "ALTER SYSTEM SET max_parallel_workers_per_gather = 2"
as_postgres "$PGBIN/pg_ctl" -D "$BENCH_DIR" -l "$BENCH_DIR/server.log" -w restart >/dev/null
"$PYTHON" "$ROOT/bench/bench.py" --host "$SOCKET_DIR" --port "$PSQL_PORT" --plain-port "$PLAIN_PORT" --rows "$ROWS" "$@"
