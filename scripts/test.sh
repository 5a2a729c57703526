#!/usr/bin/env bash
# Runs every pg_dp test on a fresh Debian 12 machine (installs what is missing first):
#   0. the layers of the source tree (scripts/check_layers.py)
#   1. core tests (plain cargo test, no PostgreSQL): samplers, mechanisms, empirical privacy
#   2. in-database tests (cargo pgrx test, a throwaway cluster)
#   3. a real server: SQL regression script with expected output, a psycopg client (extended
#      protocol, epsilon as a bind parameter, SQLSTATEs, a non-superuser role), the generator of
#      admitted queries over every type and collation, sqlsmith as a DP-only role, the attacks that
#      need real sessions (again with pg_stat_statements preloaded before pg_dp), the budget
#      ledger attacks (ROLLBACK, savepoints, errors, cancel, 16 racing sessions, kill -9, crash), the
#      release cache, role identities across renames, DROP ROLE, several databases and pg_dumpall +
#      pg_dump/pg_restore into other clusters, the update from the last release (ALTER EXTENSION
#      pg_dp UPDATE), and a JDBC client (Debian's driver: a prepared statement with epsilon as a
#      parameter, fetch size with autocommit off, SQLSTATEs), Apache Superset through its REST API (charts,
#      pagination, a dashboard, SQL Lab) and Apache Spark's JDBC source
#   4. Citus (built from the workplace's snapshot): a coordinator and two workers on this machine, and
#      a third worker added later
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

TEST_DIR="${TEST_DIR:-$STATE_DIR/test}"
PSQL_PORT="${TEST_PORT:-25433}"
LOGS="$ROOT/target/test-logs"

install_deps
# the JDBC client test: Debian's JDK and PostgreSQL JDBC driver; sqlsmith, the second generator of
# queries an untrusted analyst could send
as_root apt-get install -y -qq --no-install-recommends default-jdk-headless libpostgresql-jdbc-java sqlsmith >/dev/null
mkdir -p "$LOGS"
as_root install -d -m 755 "$TEST_DIR"
as_root install -d -o postgres -g postgres "$TEST_DIR/pgrx"

log "0/3 the source tree in layers: no upward imports, no circles"
"$PYTHON" "$ROOT/scripts/check_layers.py" 2>&1 | tee "$LOGS/layers.log" || true

log "1/3 core tests"
(cd "$ROOT" && cargo test -p pg_dp_core --release 2>&1) | tee "$LOGS/core.log"

log "2/3 in-database tests"
cluster_stop "$TEST_DIR/server"
# one test at a time: the tests share one database and one ledger, and count receipts in it
(cd "$ROOT" && RUST_TEST_THREADS=1 cargo pgrx test "pg$PG_MAJOR" --runas postgres --pgdata "$TEST_DIR/pgrx" 2>&1) | tee "$LOGS/pgrx.log"

log "3/3 real server: regression script and psycopg client"
install_extension
cluster_start "$TEST_DIR/server" "$PSQL_PORT"
trap 'cluster_stop "$TEST_DIR/server"' EXIT
regress_passed=0
regress_failed=0
for sql in "$ROOT"/pgrx-tests/sql/*.sql; do
    name="$(basename "$sql" .sql)"
    dpsql -d postgres -c "DROP DATABASE IF EXISTS regress_$name" -c "CREATE DATABASE regress_$name"
    # run from the script's directory so that psql's error prefixes do not depend on the checkout path
    (cd "$ROOT/pgrx-tests/sql" && dpsql -d "regress_$name" -a -v ON_ERROR_STOP=0 -f "$name.sql" > "$LOGS/$name.out" 2>&1) || true
    if diff -u "$ROOT/pgrx-tests/expected/$name.out" "$LOGS/$name.out" > "$LOGS/$name.diff"; then
        echo "regress $name ... ok"
        regress_passed=$((regress_passed + 1))
    else
        echo "regress $name ... FAILED (see $LOGS/$name.diff)"
        cat "$LOGS/$name.diff"
        regress_failed=$((regress_failed + 1))
    fi
done
"$PYTHON" "$ROOT/tests/client/test_client.py" --host "$SOCKET_DIR" --port "$PSQL_PORT" 2>&1 | tee "$LOGS/client.log"
# the grammar's totality, tried: generated DP queries over every type and collation, each run on two
# tables that differ in one adversarial row (3,000 queries, fixed seed; --seed N for another)
"$PYTHON" "$ROOT/tests/client/test_totality.py" --host "$SOCKET_DIR" --port "$PSQL_PORT" 2>&1 | tee "$LOGS/totality.log"
# sqlsmith as a DP-only role: no crash, no error after admission
"$PYTHON" "$ROOT/tests/client/test_sqlsmith.py" --host "$SOCKET_DIR" --port "$PSQL_PORT" --datadir "$TEST_DIR/server" \
    2>&1 | tee "$LOGS/sqlsmith.log"
# attacks that need real sessions: notices, isolation levels, the plan cache, the release cache
"$PYTHON" "$ROOT/tests/client/test_attacks.py" --host "$SOCKET_DIR" --port "$PSQL_PORT" 2>&1 | tee "$LOGS/attacks.log"
# budget attacks: ROLLBACK, savepoints, errors, cancel, 16-session race, kill -9, immediate shutdown
"$PYTHON" "$ROOT/tests/client/test_ledger.py" --host "$SOCKET_DIR" --port "$PSQL_PORT" \
    --datadir "$TEST_DIR/server" --pgbin "$PGBIN" 2>&1 | tee "$LOGS/ledger.log"
# the release cache: reuse, staleness after writes, snapshots, per-table switch
"$PYTHON" "$ROOT/tests/client/test_cache.py" --host "$SOCKET_DIR" --port "$PSQL_PORT" 2>&1 | tee "$LOGS/cache.log"
# the attacks again with another library's hooks installed before pg_dp's (pg_stat_statements): each
# of pg_dp's hooks calls the previous one through the FFI guard, and the refusals must hold the same
cluster_stop "$TEST_DIR/server"
cluster_start "$TEST_DIR/server" "$PSQL_PORT" "pg_stat_statements,pg_dp"
if dpsql -d postgres -Atc "SHOW shared_preload_libraries" | grep -qx "pg_stat_statements,pg_dp"; then
    PG_DP_LABEL=attacks_pgss "$PYTHON" "$ROOT/tests/client/test_attacks.py" --host "$SOCKET_DIR" --port "$PSQL_PORT" 2>&1 \
        | tee "$LOGS/attacks_pgss.log"
fi
cluster_stop "$TEST_DIR/server"
cluster_start "$TEST_DIR/server" "$PSQL_PORT"
# BI tools as a DP-only analyst: Apache Superset through its REST API (charts, pages, a dashboard,
# SQL Lab) and Apache Spark's JDBC source (schema probe, reads, a pushed-down filter)
source "$ROOT/tests/bi/tools.sh"
trap 'superset_stop; cluster_stop "$TEST_DIR/server"' EXIT
bi_install
if superset_start 25488; then
    "$BI_VENV/bin/python" "$ROOT/tests/bi/test_superset.py" --host "$SOCKET_DIR" --port "$PSQL_PORT" \
        --superset http://127.0.0.1:25488 2>&1 | tee "$LOGS/superset.log"
fi
superset_stop
"$BI_VENV/bin/python" "$ROOT/tests/bi/test_spark.py" --host "$SOCKET_DIR" --port "$PSQL_PORT" 2>&1 | tee "$LOGS/spark.log"
# role identities: a rename and DROP ROLE across two databases, and pg_dumpall + pg_dump/pg_restore
# into fresh clusters of its own (ports 25440-25442), with a stranger that gets the analyst's OID
cluster_start "$TEST_DIR/server" "$PSQL_PORT"
"$PYTHON" "$ROOT/tests/client/test_roles.py" --host "$SOCKET_DIR" --port "$PSQL_PORT" \
    --datadir "$TEST_DIR/server" --pgbin "$PGBIN" 2>&1 | tee "$LOGS/roles.log"
# the ledger tests restart the server (crashes); JDBC connects over TCP to localhost
cluster_start "$TEST_DIR/server" "$PSQL_PORT"
# ALTER EXTENSION pg_dp UPDATE from the last release: the data stays, the schema equals a fresh install
"$PYTHON" "$ROOT/tests/client/test_upgrade.py" --host "$SOCKET_DIR" --port "$PSQL_PORT" 2>&1 | tee "$LOGS/upgrade.log"
# Citus: a coordinator and two workers on this machine, each with pg_dp preloaded after Citus
citus_install
CITUS_DIRS=("$TEST_DIR/citus-coordinator" "$TEST_DIR/citus-worker1" "$TEST_DIR/citus-worker2" "$TEST_DIR/citus-worker3")
CITUS_PORTS=(25450 25451 25452 25453)
for i in 0 1 2 3; do cluster_start "${CITUS_DIRS[$i]}" "${CITUS_PORTS[$i]}" "citus,pg_dp"; done
trap 'cluster_stop "$TEST_DIR/server"; for d in "${CITUS_DIRS[@]}"; do cluster_stop "$d"; done' EXIT
# (the fourth server joins as a worker in the last checks: a node added later)
"$PYTHON" "$ROOT/tests/client/test_citus.py" --host "$SOCKET_DIR" --coordinator 25450 --workers 25451,25452 --spare 25453 \
    2>&1 | tee "$LOGS/citus.log"
for d in "${CITUS_DIRS[@]}"; do cluster_stop "$d"; done
mkdir -p "$ROOT/target/jdbc"
(javac -d "$ROOT/target/jdbc" -cp /usr/share/java/postgresql.jar "$ROOT/tests/jdbc/JdbcClient.java" \
    && java -cp "/usr/share/java/postgresql.jar:$ROOT/target/jdbc" JdbcClient "$PSQL_PORT") 2>&1 | tee "$LOGS/jdbc.log"

# one closing line for all layers
sum_results() { grep -hoE "test result: ok\. [0-9]+ passed" "$@" | awk '{s += $4} END {print s + 0}'; }
core=$(sum_results "$LOGS/core.log")
pgrx=$(sum_results "$LOGS/pgrx.log")
total=$((core + pgrx + regress_passed))
failed=$regress_failed
layers_ok=$(grep -c "^layers: ok" "$LOGS/layers.log" || true)
[ "$layers_ok" = 1 ] || failed=$((failed + 1))
summary="layers $([ "$layers_ok" = 1 ] && echo ok || echo FAILED), core $core, in-database $pgrx, regression $regress_passed"
# each client layer prints "<layer>: N passed, M failed"; a layer without that line counts as failed
for layer in client totality sqlsmith attacks attacks_pgss ledger cache superset spark roles upgrade citus jdbc; do
    line=$(grep -oE "^$layer: [0-9]+ passed, [0-9]+ failed" "$LOGS/$layer.log" 2>/dev/null | tail -1)
    n=$(echo "$line" | awk '{print $2}')
    f=$(echo "$line" | awk '{print $4}')
    total=$((total + ${n:-0}))
    failed=$((failed + ${f:-1}))
    summary="$summary, $layer ${n:-0}"
done
echo
echo "$summary"
echo "all: $total passed, $failed failed"
[ "$failed" = 0 ]
