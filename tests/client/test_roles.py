#!/usr/bin/env python3
"""Budgets and receipts follow a role's pg_dp identity (its pg_dp_role security label), not its OID:
across pg_dumpall + pg_dump/pg_restore into another cluster, ALTER ROLE ... RENAME, DROP ROLE in one
database of several, and a new role that gets a dropped role's OID.

Run by scripts/test.sh:
    /usr/bin/python3 tests/client/test_roles.py --host /tmp --port 25433 --pgbin BIN
The rename and several-database checks use the server at --host/--port (pg_dp preloaded). The
restore checks create fresh clusters of their own with BIN's initdb (as the postgres OS user, in a
temporary directory under /var/tmp, on --port-a, --port-b and --port-c), and stop and remove them
at the end, even on failure.
Prints one line per check and "roles: N passed, M failed"; exits non-zero on any failure.
"""
import argparse
import atexit
import getpass
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from decimal import Decimal

import psycopg
from psycopg import errors as E

from harness import refused, run_checks

ARGS = None
DB_A, DB_B = "pg_dp_roles_a", "pg_dp_roles_b"


def connect(dbname, user="postgres", port=None):
    return psycopg.connect(host=ARGS.host, port=port or ARGS.port, dbname=dbname, user=user, autocommit=True)


def one(c, sql, args=None):
    return c.execute(sql, args).fetchone()


# ----- the server given on the command line: two databases -------------------------------------

def two_databases():
    with connect("postgres") as c:
        for db in (DB_A, DB_B):
            c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            c.execute(f"CREATE DATABASE {db}")
            # these checks count the charges of repeated queries: no release cache
            c.execute(f"ALTER DATABASE {db} SET dp.release_cache = off")
    for db in (DB_A, DB_B):
        with connect(db) as c:
            c.execute("CREATE EXTENSION pg_dp")
            c.execute("CREATE TABLE t AS SELECT g AS i, g::float8 AS x FROM generate_series(1, 1000) g")


def new_role(name, budgets):
    """A fresh login role with SELECT on t and a budget in each database of `budgets` (committed)."""
    with connect(DB_A) as c:
        c.execute(f"DROP ROLE IF EXISTS {name}")
        c.execute(f"CREATE ROLE {name} LOGIN")
    for db, epsilon in budgets.items():
        with connect(db) as c:
            c.execute(f"GRANT SELECT ON t TO {name}")
            c.execute("SELECT dp.grant_budget(%s, %s)", (name, epsilon))


def check_rename_keeps_the_budgets_of_every_database():
    new_role("dp_roles_analyst", {DB_A: 1, DB_B: 2})
    for db in (DB_A, DB_B):
        with connect(db, "dp_roles_analyst") as c:
            c.execute("SELECT dp_count(x, 0.25) FROM t")
    with connect(DB_A) as c:
        c.execute("DROP ROLE IF EXISTS dp_roles_analyst2")
        c.execute("ALTER ROLE dp_roles_analyst RENAME TO dp_roles_analyst2")
    for db, remaining in ((DB_A, Decimal("0.50")), (DB_B, Decimal("1.50"))):
        with connect(db, "dp_roles_analyst2") as c:
            c.execute("SELECT dp_count(x, 0.25) FROM t")
            r = one(c, "SELECT role::text, epsilon_spent, epsilon_remaining FROM dp.my_budget")
            assert r == ("dp_roles_analyst2", Decimal("0.50"), remaining), (db, r)
            assert one(c, "SELECT count(*) FROM dp.my_ledger")[0] == 2, db
        with connect(db) as c:
            names = [r[0] for r in c.execute(
                "SELECT role_name FROM dp.ledger WHERE role = 'dp_roles_analyst2'::regrole ORDER BY id")]
            assert names == ["dp_roles_analyst", "dp_roles_analyst2"], (db, names)


def check_two_racing_labels_cannot_give_two_roles_one_identity():
    # the label hook refuses an identity another role carries; two transactions labelling two roles
    # with one uuid at once each saw no holder and both passed, and the two roles then spent one budget.
    # Labels of pg_dp_role are now set one transaction at a time: the second waits, then sees the first.
    for name in ("dp_r_race_a", "dp_r_race_b"):
        new_role(name, {})
    u = str(uuid.uuid4())
    first = psycopg.connect(host=ARGS.host, port=ARGS.port, dbname=DB_A, user="postgres")
    first.execute(f"SECURITY LABEL FOR pg_dp_role ON ROLE dp_r_race_a IS '{u}'")  # not committed yet
    outcome = {}

    def second():
        try:
            with connect(DB_A) as c:
                c.execute(f"SECURITY LABEL FOR pg_dp_role ON ROLE dp_r_race_b IS '{u}'")
            outcome["b"] = "labelled"
        except psycopg.Error as e:
            outcome["b"] = str(e)

    t = threading.Thread(target=second)
    t.start()
    time.sleep(1.0)
    waited = t.is_alive()
    first.commit()
    first.close()
    t.join(30)
    assert waited, "the second label did not wait for the first transaction"
    assert "is the pg_dp identity of role \"dp_r_race_a\"" in outcome.get("b", ""), outcome
    with connect(DB_A) as c:
        assert one(c, "SELECT dp.role_uid('dp_r_race_a')::text")[0] == u
        assert one(c, "SELECT dp.role_uid('dp_r_race_b')")[0] is None


def check_drop_role_in_one_database_leaves_no_budget_to_inherit_in_another():
    new_role("dp_roles_leaver", {DB_A: 1, DB_B: 2})
    for db in (DB_A, DB_B):
        with connect(db, "dp_roles_leaver") as c:
            c.execute("SELECT dp_count(x, 0.25) FROM t")
    with connect(DB_A) as c:
        uid = one(c, "SELECT dp.role_uid('dp_roles_leaver')")[0]
        oid = one(c, "SELECT 'dp_roles_leaver'::regrole::oid")[0]
    assert uid is not None
    for db in (DB_A, DB_B):
        with connect(db) as c:
            c.execute("REVOKE SELECT ON t FROM dp_roles_leaver")
    with connect(DB_A) as c:
        c.execute("DROP ROLE dp_roles_leaver")
        # archived in the database where DROP ROLE ran
        r = one(c, "SELECT role, epsilon_granted, epsilon_spent FROM dp.dropped_role_budget WHERE role_uid = %s", (uid,))
        assert r == (oid, Decimal("1"), Decimal("0.25")), r
        assert one(c, "SELECT count(*) FROM dp.role_budget WHERE role_uid = %s", (uid,))[0] == 0
        # a new role with the old name, and another one, perhaps with the old OID
        c.execute("DROP ROLE IF EXISTS dp_roles_newcomer")
        for name in ("dp_roles_leaver", "dp_roles_newcomer"):
            c.execute(f"CREATE ROLE {name} LOGIN")
            c.execute(f"GRANT SELECT ON t TO {name}")
    with connect(DB_B) as c:
        # the other database keeps the budget, belonging to no role
        r = one(c, "SELECT role, role_name, epsilon_granted, epsilon_spent FROM dp.budgets WHERE role_uid = %s", (uid,))
        assert r == (None, "dp_roles_leaver", Decimal("2"), Decimal("0.25")), r
        assert one(c, "SELECT count(*) FROM dp.ledger WHERE role_uid = %s AND role IS NULL", (uid,))[0] == 1
        for name in ("dp_roles_leaver", "dp_roles_newcomer"):
            c.execute(f"GRANT SELECT ON t TO {name}")
            assert one(c, "SELECT count(*) FROM dp.budgets WHERE role = %s::regrole", (name,))[0] == 0, name
    for name in ("dp_roles_leaver", "dp_roles_newcomer"):
        with connect(DB_B, name) as c:
            e = refused(c, "SELECT dp_count(x, 0.25) FROM t", E.InsufficientPrivilege)
            assert "has no privacy budget" in str(e), e
            assert one(c, "SELECT count(*) FROM dp.my_budget")[0] == 0, name
            assert one(c, "SELECT count(*) FROM dp.my_ledger")[0] == 0, name
    with connect(DB_B) as c:
        r = one(c, "SELECT epsilon_spent FROM dp.budgets WHERE role_uid = %s", (uid,))
        assert r == (Decimal("0.25"),), r
    for db in (DB_A, DB_B):
        with connect(db) as c:
            for name in ("dp_roles_leaver", "dp_roles_newcomer"):
                c.execute(f"REVOKE SELECT ON t FROM {name}")
    with connect(DB_A) as c:
        c.execute("DROP ROLE dp_roles_leaver")
        c.execute("DROP ROLE dp_roles_newcomer")


# ----- fresh clusters: pg_dumpall + pg_dump/pg_restore into another cluster -----------------------

class Cluster:
    """A throwaway cluster owned by the postgres OS user, with pg_dp preloaded."""

    def __init__(self, name, port):
        self.dir = os.path.join(WORKDIR, name)
        self.port = port
        as_postgres(f"{ARGS.pgbin}/initdb", "-D", self.dir, "-A", "trust", "-U", "postgres", "--locale=C.UTF-8")
        conf = (f"port = {port}\nlisten_addresses = ''\nunix_socket_directories = '{ARGS.host}'\n"
                "shared_preload_libraries = 'pg_dp'\nfsync = off\n")
        as_postgres("sh", "-c", f"cat >> '{self.dir}/postgresql.conf'", input=conf)
        CLUSTERS.append(self)
        as_postgres(f"{ARGS.pgbin}/pg_ctl", "-D", self.dir, "-l", f"{self.dir}/server.log", "-w", "start")

    def connect(self, dbname="postgres", user="postgres"):
        return connect(dbname, user, self.port)

    def tool(self, name, *args, **kw):
        """Runs a client program of --pgbin against this cluster."""
        r = subprocess.run([f"{ARGS.pgbin}/{name}", "-h", ARGS.host, "-p", str(self.port), "-U", "postgres", *args],
                           capture_output=True, **kw)
        assert r.returncode == 0, f"{name} {' '.join(args)} failed: {r.stderr.decode(errors='replace')}"
        return r

    def stop(self):
        as_postgres(f"{ARGS.pgbin}/pg_ctl", "-D", self.dir, "-w", "stop", "-m", "immediate", check=False)


WORKDIR = None
CLUSTERS = []


def as_postgres(*cmd, input=None, check=True):
    """Runs cmd as the postgres OS user (PostgreSQL refuses to run as root)."""
    prefix = [] if getpass.getuser() == "postgres" else ["sudo", "-u", "postgres"]
    return subprocess.run(prefix + list(cmd), input=input, text=True, check=check, capture_output=True)


def cleanup():
    for c in CLUSTERS:
        c.stop()
    if WORKDIR and os.path.isdir(WORKDIR):
        if os.geteuid() == 0:
            shutil.rmtree(WORKDIR, ignore_errors=True)
        else:
            subprocess.run(["sudo", "rm", "-rf", WORKDIR], check=False)


def make_workdir():
    global WORKDIR
    WORKDIR = tempfile.mkdtemp(prefix="pg_dp_roles.", dir="/var/tmp")
    atexit.register(cleanup)
    if getpass.getuser() != "postgres":
        subprocess.run(["sudo", "chown", "postgres:postgres", WORKDIR] if os.geteuid() else
                       ["chown", "postgres:postgres", WORKDIR], check=True)


SOURCE = {}


def source_cluster():
    """Cluster A: analyst is its first role (so its OID is predictable), with a budget of 2 in
    database shop, three receipts (0.75 spent) on a protected table; dumped with pg_dumpall
    --globals-only (with and without security labels) and pg_dump -Fc."""
    if SOURCE:
        return SOURCE
    a = Cluster("a", ARGS.port_a)
    with a.connect() as c:
        c.execute("CREATE ROLE analyst LOGIN")
        SOURCE["oid"] = one(c, "SELECT 'analyst'::regrole::oid")[0]
        c.execute("CREATE DATABASE shop")
    with a.connect("shop") as c:
        c.execute("CREATE EXTENSION pg_dp")
        c.execute("CREATE TABLE sales AS SELECT g AS id, (g * 37 % 1000)::float8 AS amount FROM generate_series(1, 1000) g")
        c.execute("SELECT dp.protect_table('sales')")
        c.execute("GRANT SELECT ON sales TO analyst")
        c.execute("SELECT dp.grant_budget('analyst', 2)")
        SOURCE["uid"] = one(c, "SELECT dp.role_uid('analyst')")[0]
    with a.connect("shop", "analyst") as c:
        c.execute("SELECT dp_count(id, 0.25) FROM sales")
        c.execute("SELECT dp_sum(amount, 0, 1000, 0.25) FROM sales")
        c.execute("SELECT dp_avg(amount, 0, 1000, 0.25) FROM sales")
        r = one(c, "SELECT epsilon_spent, epsilon_remaining FROM dp.my_budget")
        assert r == (Decimal("0.75"), Decimal("1.25")), r
        e = refused(c, "SELECT * FROM sales", E.InsufficientPrivilege)
        assert "protected by pg_dp" in str(e), e
    SOURCE["globals"] = os.path.join(WORKDIR, "globals.sql")
    SOURCE["globals_nolabels"] = os.path.join(WORKDIR, "globals_nolabels.sql")
    SOURCE["shop"] = os.path.join(WORKDIR, "shop.dump")
    with open(SOURCE["globals"], "wb") as f:
        f.write(a.tool("pg_dumpall", "--globals-only").stdout)
    with open(SOURCE["globals_nolabels"], "wb") as f:
        f.write(a.tool("pg_dumpall", "--globals-only", "--no-security-labels").stdout)
    a.tool("pg_dump", "-Fc", "-f", SOURCE["shop"], "shop")
    text = open(SOURCE["globals"]).read()
    assert f"SECURITY LABEL FOR pg_dp_role ON ROLE analyst IS '{SOURCE['uid']}'" in text, "pg_dumpall did not dump the identity"
    assert "pg_dp_role" not in open(SOURCE["globals_nolabels"]).read()
    return SOURCE


def restore(cluster, globals_file):
    """The DBA's restore: the roles (psql; 'role "postgres" already exists' is expected), then the
    database with pg_restore."""
    cluster.tool("psql", "-X", "-q", "-d", "postgres", "-f", globals_file)
    with cluster.connect() as c:
        c.execute("CREATE DATABASE shop")
    cluster.tool("pg_restore", "--exit-on-error", "-d", "shop", SOURCE["shop"])


def check_restore_into_another_cluster_keeps_budgets_and_receipts_from_a_role_with_the_old_oid():
    src = source_cluster()
    b = Cluster("b", ARGS.port_b)
    with b.connect() as c:
        # first thing in a fresh cluster: a stranger gets the OID analyst had in cluster A
        c.execute("CREATE ROLE intruder LOGIN")
        assert one(c, "SELECT 'intruder'::regrole::oid")[0] == src["oid"], "precondition: the intruder has analyst's old OID"
    restore(b, src["globals"])
    with b.connect("shop") as c:
        assert one(c, "SELECT 'analyst'::regrole::oid")[0] != src["oid"]
        assert one(c, "SELECT dp.role_uid('analyst')")[0] == src["uid"]
        assert one(c, "SELECT dp.role_uid('intruder')")[0] is None
        # the receipts' OID column names the intruder now; their identity names analyst
        assert one(c, "SELECT count(*) FROM dp.release_log WHERE role = 'intruder'::regrole")[0] == 3
        assert one(c, "SELECT count(*) FROM dp.ledger WHERE role = 'intruder'::regrole")[0] == 0
        assert one(c, "SELECT count(*) FROM dp.ledger WHERE role = 'analyst'::regrole")[0] == 3
        r = one(c, "SELECT role::text, epsilon_granted, epsilon_spent FROM dp.budgets")
        assert r == ("analyst", Decimal("2"), Decimal("0.75")), r
        c.execute("GRANT SELECT ON sales TO intruder")
    with b.connect("shop", "intruder") as c:
        assert one(c, "SELECT count(*) FROM dp.my_budget")[0] == 0
        assert one(c, "SELECT count(*) FROM dp.my_ledger")[0] == 0
        e = refused(c, "SELECT dp_count(id, 0.25) FROM sales", E.InsufficientPrivilege)
        assert "has no privacy budget" in str(e), e
    with b.connect("shop", "analyst") as c:
        r = one(c, "SELECT epsilon_spent, epsilon_remaining FROM dp.my_budget")
        assert r == (Decimal("0.75"), Decimal("1.25")), r
        assert one(c, "SELECT count(*) FROM dp.my_ledger")[0] == 3
        # charged in the new cluster, to the same budget
        c.execute("SELECT dp_count(id, 0.5) FROM sales")
        r = one(c, "SELECT epsilon_spent, epsilon_remaining FROM dp.my_budget")
        assert r == (Decimal("1.25"), Decimal("0.75")), r
        assert one(c, "SELECT count(*) FROM dp.my_ledger")[0] == 4
        e = refused(c, "SELECT * FROM sales", E.InsufficientPrivilege)
        assert "protected by pg_dp" in str(e), e
    b.stop()


def check_restore_without_security_labels_needs_adopt_budget():
    src = source_cluster()
    c3 = Cluster("c", ARGS.port_c)
    restore(c3, src["globals_nolabels"])
    with c3.connect("shop") as c:
        assert one(c, "SELECT dp.role_uid('analyst')")[0] is None
        # the budget is there, belonging to no role until one adopts it
        r = one(c, "SELECT role, role_name, role_uid, epsilon_spent FROM dp.budgets")
        assert r == (None, "analyst", src["uid"], Decimal("0.75")), r
    with c3.connect("shop", "analyst") as c:
        e = refused(c, "SELECT dp_count(id, 0.25) FROM sales", E.InsufficientPrivilege)
        assert "dp.adopt_budget" in (e.diag.message_hint or ""), e.diag.message_hint
        assert one(c, "SELECT count(*) FROM dp.my_ledger")[0] == 0
        refused(c, "SELECT dp.adopt_budget('analyst', %s)", E.InsufficientPrivilege, (src["uid"],))
    with c3.connect("shop") as c:
        r = one(c, "SELECT role::text, epsilon_remaining FROM dp.adopt_budget('analyst', %s)", (src["uid"],))
        assert r == ("analyst", Decimal("1.25")), r
    with c3.connect("shop", "analyst") as c:
        assert one(c, "SELECT count(*) FROM dp.my_ledger")[0] == 3
        c.execute("SELECT dp_count(id, 0.25) FROM sales")
        assert one(c, "SELECT epsilon_remaining FROM dp.my_budget")[0] == Decimal("1.00")
    c3.stop()


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="/tmp")
    ap.add_argument("--port", type=int, default=25433)
    ap.add_argument("--datadir", help="the data directory of the server at --port (unused: accepted like test_ledger.py)")
    ap.add_argument("--pgbin", default="/usr/lib/postgresql/15/bin")
    ap.add_argument("--port-a", type=int, default=25440, help="port of the source cluster the test creates")
    ap.add_argument("--port-b", type=int, default=25441, help="port of the restored cluster the test creates")
    ap.add_argument("--port-c", type=int, default=25442, help="port of the cluster restored without labels")
    ARGS = ap.parse_args()
    make_workdir()
    two_databases()
    try:
        run_checks(globals(), "roles")
    finally:
        cleanup()


if __name__ == "__main__":
    main()
