# Shared by scripts/demo.sh, scripts/test.sh and bench/run.sh. Source it; do not run it.
# Works on a fresh Debian 12 machine as root, or as a user with sudo.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG_MAJOR="${PG_MAJOR:-15}"
PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/$PG_MAJOR/bin/pg_config}"
PGBIN="/usr/lib/postgresql/$PG_MAJOR/bin"
PGRX_VERSION="0.18.1"
SOCKET_DIR="${SOCKET_DIR:-/tmp}"
# Private clusters live outside the checkout: the postgres user must be able to reach them, and a
# checkout in a private home directory (mode 700) would not let it.
STATE_DIR="${STATE_DIR:-/var/tmp/pg_dp}"
# Debian's python3, which has python3-psycopg (a pyenv python3 earlier in PATH would not)
PYTHON="${PYTHON:-/usr/bin/python3}"

log() { printf '\n\033[1m==> %s\033[0m\n' "$*" >&2; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Runs a command as the postgres OS user (PostgreSQL refuses to run as root).
as_postgres() { as_root sudo -u postgres "$@"; }

install_deps() {
    log "installing Debian packages"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -qq
    as_root apt-get install -y -qq --no-install-recommends \
        "postgresql-$PG_MAJOR" "postgresql-server-dev-$PG_MAJOR" libclang-dev sudo \
        python3-psycopg build-essential pkg-config ca-certificates >/dev/null
    if ! command -v cargo >/dev/null; then
        echo "cargo not found: install Rust (https://rustup.rs) and re-run" >&2
        exit 1
    fi
    if [ "$(cargo pgrx --version 2>/dev/null || true)" != "cargo-pgrx $PGRX_VERSION" ]; then
        log "installing cargo-pgrx $PGRX_VERSION (about 5 minutes, once)"
        cargo install cargo-pgrx --version "=$PGRX_VERSION" --locked
    fi
    # point pgrx at the system PostgreSQL only when needed: re-running init forces a rebuild
    local cfg="${PGRX_HOME:-$HOME/.pgrx}/config.toml"
    if ! grep -qxF "pg$PG_MAJOR = \"$PG_CONFIG\"" "$cfg" 2>/dev/null; then
        cargo pgrx init --pg"$PG_MAJOR" "$PG_CONFIG"
    fi
}

# install_extension [--release]: builds pg_dp and installs it into the system PostgreSQL.
install_extension() {
    log "building and installing pg_dp $*"
    local sudo_flag=()
    [ "$(id -u)" = 0 ] || sudo_flag=(--sudo)
    (cd "$ROOT" && cargo pgrx install --pg-config "$PG_CONFIG" "${sudo_flag[@]}" "$@")
    # earlier versions' install scripts and the upgrade scripts (ALTER EXTENSION pg_dp UPDATE)
    as_root install -m 644 "$ROOT"/sql/versions/*.sql "$("$PG_CONFIG" --sharedir)/extension/"
}

# cluster_start DIR PORT [PRELOAD]: a private cluster owned by postgres, with pg_dp preloaded (or
# the libraries PRELOAD names; '' for none). Ports are below Linux's ephemeral range (32768-60999),
# where any outgoing connection could be holding them.
cluster_start() {
    local dir="$1" port="$2" preload="${3-pg_dp}"
    if ! as_root test -s "$dir/PG_VERSION"; then
        as_root install -d -m 755 "$(dirname "$dir")"
        as_root install -d -o postgres -g postgres -m 700 "$dir"
        as_postgres "$PGBIN/initdb" -D "$dir" -A trust -U postgres --locale=C.UTF-8 >/dev/null
    fi
    # written at every start, and included last, so that an existing cluster follows these settings
    cat <<CONF | as_postgres tee "$dir/pg_dp.conf" >/dev/null
# pg_dp private cluster (rewritten by scripts/common.sh at every start)
port = $port
listen_addresses = 'localhost'
unix_socket_directories = '$SOCKET_DIR'
shared_preload_libraries = '$preload'
max_worker_processes = 16
max_parallel_workers = 8
CONF
    if ! as_root grep -qxF "include_if_exists = 'pg_dp.conf'" "$dir/postgresql.conf"; then
        echo "include_if_exists = 'pg_dp.conf'" | as_postgres tee -a "$dir/postgresql.conf" >/dev/null
    fi
    if ! as_postgres "$PGBIN/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
        as_postgres "$PGBIN/pg_ctl" -D "$dir" -l "$dir/server.log" -w start >/dev/null
    fi
}

# Citus 12.1 from the workplace's source snapshot, built into the system PostgreSQL (about 2 minutes
# the first time, nothing after): the distributed tests and benchmark need it.
citus_install() {
    local script
    for script in "${CITUS_BUILD:-}" "$ROOT/../shared/citus/build.sh" /work/shared/citus/build.sh; do
        if [ -n "$script" ] && [ -f "$script" ]; then
            bash "$script"
            return
        fi
    done
    echo "Citus build script not found: set CITUS_BUILD to the path of shared/citus/build.sh" >&2
    return 1
}

cluster_stop() {
    local dir="$1"
    if as_root test -s "$dir/PG_VERSION" && as_postgres "$PGBIN/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
        as_postgres "$PGBIN/pg_ctl" -D "$dir" -w stop -m fast >/dev/null
    fi
}

# psql against a private cluster: PSQL_PORT must be set.
dpsql() { psql -X -q -v ON_ERROR_STOP=1 -h "$SOCKET_DIR" -p "$PSQL_PORT" -U postgres "$@"; }
