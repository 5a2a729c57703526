# The BI tools of the tests in tests/bi/: Apache Superset (test_superset.py) and Apache Spark's JDBC
# source (test_spark.py, with Debian's JDK and PostgreSQL JDBC driver). Sourced by scripts/test.sh
# after scripts/common.sh; do not run it.
#   bi_install:       a virtual environment under $STATE_DIR/bi with Superset 6.1, the packages its
#                     wheel needs but does not declare, and PySpark (about two minutes, once)
#   superset_start PORT: metadata in SQLite, an admin user, Superset's own caches off (so that every
#                     refresh reaches the database), the server on 127.0.0.1:PORT
#   superset_stop
SUPERSET_DIR="$STATE_DIR/bi/superset"
SUPERSET_VERSION="6.1.0"
PYSPARK_VERSION="4.3.0"
BI_VENV="$STATE_DIR/bi/venv"

bi_install() {
    as_root apt-get install -y -qq --no-install-recommends python3-venv curl default-jdk-headless \
        libpostgresql-jdbc-java >/dev/null
    local have
    have="$("$BI_VENV/bin/python" -c "import importlib.metadata as m; print(m.version('apache-superset'), m.version('pyspark'))" 2>/dev/null || true)"
    if [ "$have" != "$SUPERSET_VERSION $PYSPARK_VERSION" ]; then
        log "installing Apache Superset $SUPERSET_VERSION and PySpark $PYSPARK_VERSION in $BI_VENV (about two minutes, once)"
        rm -rf "$BI_VENV"
        /usr/bin/python3 -m venv "$BI_VENV"
        "$BI_VENV/bin/pip" install -q --upgrade pip
        # rich and cachetools are imported but not declared; Flask-Caching 2.3.1 and later pass an
        # argument Superset's metastore cache does not take
        "$BI_VENV/bin/pip" install -q "apache-superset==$SUPERSET_VERSION" psycopg2-binary rich cachetools \
            "flask-caching==2.3.0" "pyspark==$PYSPARK_VERSION"
    fi
}

superset_env() {
    export SUPERSET_CONFIG_PATH="$SUPERSET_DIR/superset_config.py" SUPERSET_HOME="$SUPERSET_DIR/home" FLASK_APP=superset
}

superset_start() {
    local port="$1"
    superset_stop
    rm -rf "$SUPERSET_DIR/home"
    mkdir -p "$SUPERSET_DIR/home"
    cat > "$SUPERSET_DIR/superset_config.py" <<CONFIG
SECRET_KEY = "pg-dp-tests-only-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
SQLALCHEMY_DATABASE_URI = "sqlite:///$SUPERSET_DIR/home/superset.db"
WTF_CSRF_ENABLED = False
CACHE_CONFIG = {"CACHE_TYPE": "NullCache"}
DATA_CACHE_CONFIG = {"CACHE_TYPE": "NullCache"}
CONFIG
    superset_env
    log "starting Superset on 127.0.0.1:$port"
    "$BI_VENV/bin/superset" db upgrade > "$SUPERSET_DIR/setup.log" 2>&1
    "$BI_VENV/bin/superset" fab create-admin --username admin --firstname pg --lastname dp \
        --email admin@example.invalid --password admin >> "$SUPERSET_DIR/setup.log" 2>&1
    "$BI_VENV/bin/superset" init >> "$SUPERSET_DIR/setup.log" 2>&1
    "$BI_VENV/bin/superset" run -h 127.0.0.1 -p "$port" --with-threads > "$SUPERSET_DIR/server.log" 2>&1 &
    echo $! > "$SUPERSET_DIR/server.pid"
    for _ in $(seq 1 120); do
        if curl -fs -o /dev/null "http://127.0.0.1:$port/health"; then
            return 0
        fi
        sleep 1
    done
    echo "Superset did not start; see $SUPERSET_DIR/server.log" >&2
    return 1
}

superset_stop() {
    if [ -s "$SUPERSET_DIR/server.pid" ]; then
        kill "$(cat "$SUPERSET_DIR/server.pid")" 2>/dev/null || true
        rm -f "$SUPERSET_DIR/server.pid"
    fi
}
