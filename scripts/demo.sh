#!/usr/bin/env bash
# pg_dp demo on a fresh Debian 12 machine:
#   bash scripts/demo.sh        installs what is missing, builds pg_dp, starts a private PostgreSQL 15
#                               with pg_dp and a sample table, runs DP queries next to exact ones
#   bash scripts/demo.sh stop   stops the demo server
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

DEMO_DIR="${DEMO_DIR:-$STATE_DIR/demo}"
PSQL_PORT="${DEMO_PORT:-25432}"

if [ "${1:-}" = "stop" ]; then
    cluster_stop "$DEMO_DIR"
    echo "demo server stopped (data kept in $DEMO_DIR; delete it to start afresh)"
    exit 0
fi

install_deps
cluster_stop "$DEMO_DIR"          # never replace pg_dp.so under a running server
install_extension --release
log "starting the demo server on port $PSQL_PORT"
cluster_start "$DEMO_DIR" "$PSQL_PORT"
dpsql -d postgres -c "DROP DATABASE IF EXISTS demo" -c "CREATE DATABASE demo"
log "loading sample data and running DP queries"
dpsql -d demo -f "$ROOT/scripts/demo.sql"

cat <<MSG

pg_dp demo is running.
  connect:  psql -h $SOCKET_DIR -p $PSQL_PORT -U postgres demo
  try:      SELECT region, dp_count(*), dp_avg(bmi, 15, 50, 0.5) FROM patients GROUP BY region;
            SELECT dp_median(bmi, 15, 50, 0.5, 1e-6) FROM patients;
            SELECT * FROM dp.budgets;  SELECT * FROM dp.ledger ORDER BY id DESC LIMIT 5;
            SELECT * FROM patients_private LIMIT 5;   -- the steward's private copy (DPRP)
            SELECT * FROM patients_synthetic LIMIT 5; -- and the synthetic copy, with patients_synthetic_report
  analyst:  psql -h $SOCKET_DIR -p $PSQL_PORT -U analyst demo   (DP-only on the protected patients
            table; 0.5 of its 1.5 epsilon left; SELECT * FROM patients is refused)
  stop:     bash scripts/demo.sh stop
MSG
