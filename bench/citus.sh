#!/usr/bin/env bash
# pg_dp on Citus benchmark: bash bench/citus.sh [rows]   (default 10,000,000 rows)
# Builds pg_dp in release mode and Citus (../shared/citus/build.sh), starts a coordinator and two
# workers on this machine with shared_preload_libraries = 'citus,pg_dp', loads the rows, and prints
# time ratios of DP aggregates over the distributed table against Citus's own aggregates, against
# single-server pg_dp on the same rows, and with a privacy unit against the native two-level query,
# all measured side by side in one run. Results are kept in docs/benchmarks.md.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"

ROWS="${1:-10000000}"
shift || true
DIRS=("$STATE_DIR/bench-citus-coordinator" "$STATE_DIR/bench-citus-worker1" "$STATE_DIR/bench-citus-worker2")
PORTS=(25460 25461 25462)

install_deps
citus_install
for d in "${DIRS[@]}"; do cluster_stop "$d"; done
install_extension --release
trap 'for d in "${DIRS[@]}"; do cluster_stop "$d"; done' EXIT
for i in 0 1 2; do
    cluster_start "${DIRS[$i]}" "${PORTS[$i]}" "citus,pg_dp"
    PSQL_PORT="${PORTS[$i]}" dpsql -d postgres -c "ALTER SYSTEM SET shared_buffers = '1GB'" \
        -c "ALTER SYSTEM SET work_mem = '256MB'" -c "ALTER SYSTEM SET jit = off"
    as_postgres "$PGBIN/pg_ctl" -D "${DIRS[$i]}" -l "${DIRS[$i]}/server.log" -w restart >/dev/null
done
"$PYTHON" "$ROOT/bench/citus_bench.py" --host "$SOCKET_DIR" --coordinator "${PORTS[0]}" \
    --workers "${PORTS[1]},${PORTS[2]}" --rows "$ROWS" "$@"
