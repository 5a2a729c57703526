#!/usr/bin/env python3
"""pg_dp on Citus: a coordinator and two workers on this machine, started by scripts/test.sh with
shared_preload_libraries = 'citus,pg_dp'. What this version promises there (docs/distributed.md):

- a DP query over a distributed table is refused on the coordinator, before anything is read or
  charged, and no worker charges or releases anything for it;
- protecting a distributed table protects its shards on every worker: a DP-only role that connects
  straight to a worker can neither read a shard nor release a DP value from it;
- the label follows the table to the workers when it is removed, and Citus's own queries keep working
  for roles that may read the table.

Run by scripts/test.sh:
    /usr/bin/python3 tests/client/test_citus.py --host /tmp --coordinator 25450 --workers 25451,25452 --spare 25453
Prints one line per check and "citus: N passed, M failed"; exits non-zero on any failure.
"""
import argparse

import psycopg
from psycopg import errors as E

from harness import refused, run_checks

ARGS = None
DB = "pg_dp_citus"
ROLE = "dp_citus_analyst"
ROWS = 20000


def connect(port, user="postgres", db=DB):
    return psycopg.connect(host=ARGS.host, port=port, dbname=db, user=user, autocommit=True)


def coordinator(user="postgres"):
    return connect(ARGS.coordinator, user)


def workers(user="postgres"):
    return [connect(p, user) for p in ARGS.workers]


def setup():
    if ARGS.spare:
        # a node joins with no role of its own: Citus brings them (a role left with another pg_dp
        # identity would make the node's join fail, as it should)
        with connect(ARGS.spare, db="postgres") as c:
            c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
            for r in (ROLE, "dp_citus_trusted"):
                c.execute(f"DROP ROLE IF EXISTS {r}")
    for port in [ARGS.coordinator] + ARGS.workers:
        with connect(port, db="postgres") as c:
            c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
            c.execute(f"CREATE DATABASE {DB}")
            c.execute(f"DROP ROLE IF EXISTS {ROLE}")
        with connect(port) as c:
            c.execute("CREATE EXTENSION citus")
    with coordinator() as c:
        c.execute("SELECT citus_set_coordinator_host('localhost', %s)", (ARGS.coordinator,))
        for port in ARGS.workers:
            c.execute("SELECT citus_add_node('localhost', %s)", (port,))
        # Citus creates pg_dp and the role on the workers as well
        c.execute("CREATE EXTENSION pg_dp")
        c.execute(f"CREATE ROLE {ROLE} LOGIN")
        c.execute("CREATE TABLE t (id int PRIMARY KEY, g int NOT NULL, x float8)")
        c.execute("SELECT create_distributed_table('t', 'id')")
        c.execute(f"INSERT INTO t SELECT i, i % 5, i % 100 FROM generate_series(1, {ROWS}) i")
        c.execute("SELECT dp.protect_table('t')")
        # granted on purpose: Citus grants it on every shard, and protection must hold anyway
        c.execute(f"GRANT SELECT ON t TO {ROLE}")
        c.execute("SELECT dp.set_budget(%s, 100)", (ROLE,))


def receipts(c):
    return c.execute("SELECT count(*) FROM dp.release_log").fetchone()[0]


def a_shard(table="t"):
    """(worker port, shard table name, shard id) of the first shard of a distributed table."""
    with coordinator() as c:
        return c.execute(
            "SELECT s.nodeport, s.shard_name::text, s.shardid FROM citus_shards s WHERE s.table_name = %s::regclass "
            "ORDER BY s.shardid LIMIT 1", (table,)).fetchone()


DP_QUERIES = [
    "SELECT dp_count(true, 0.5) FROM t",
    "SELECT dp_sum(x, 0, 100, 0.5), dp_avg(x, 0, 100, 0.5) FROM t",
    "SELECT g, dp_count(true, 0.5) FROM t GROUP BY g",
    "SELECT id, dp_count(true, 0.5) FROM t GROUP BY id",
    "SELECT dp_count(true, 0.5) FROM t WHERE id = 7",
]


def check_dp_queries_over_a_distributed_table_are_refused_before_any_charge():
    with coordinator(ROLE) as a, coordinator() as su:
        ws = workers()
        before = [receipts(su)] + [receipts(w) for w in ws]
        for q in DP_QUERIES:
            e = refused(a, q, E.InsufficientPrivilege)
            assert "Citus table t" in str(e) and "does not yet compute" in str(e), (q, str(e))
        after = [receipts(su)] + [receipts(w) for w in ws]
        assert before == after, (before, after)
        spent = su.execute("SELECT epsilon_spent FROM dp.budgets WHERE role = %s::regrole", (ROLE,)).fetchone()[0]
        assert spent == 0, spent
        for w in ws:
            w.close()


def check_the_protection_label_reaches_every_worker():
    for w in workers():
        with w:
            label = w.execute("SELECT label FROM pg_seclabels WHERE provider = 'pg_dp' AND objoid = 't'::regclass "
                              "AND objsubid = 0").fetchone()
            assert label == ("protected",), label


def check_a_dp_only_role_reads_nothing_from_a_shard_on_a_worker():
    port, shard, _ = a_shard()
    with connect(port, ROLE) as a:
        # the grant reached the shard, so only pg_dp stands in the way
        assert a.execute("SELECT has_table_privilege(%s, 'SELECT')", (shard,)).fetchone()[0]
        for sql in (f"SELECT * FROM {shard}", f"SELECT count(*) FROM {shard}", f"SELECT sum(x) FROM {shard} WHERE g = 1"):
            e = refused(a, sql, E.InsufficientPrivilege)
            assert "protected by pg_dp" in str(e), str(e)
        e = refused(a, f"SELECT dp_count(true, 0.5) FROM {shard}", E.InsufficientPrivilege)
        assert "a Citus worker releases nothing" in str(e), str(e)
        # the shell table the worker keeps for Citus is protected too
        refused(a, "SELECT count(*) FROM t", E.InsufficientPrivilege)
    with connect(port) as su:
        assert receipts(su) == 0


def check_citus_helpers_do_not_read_protected_shards_for_a_dp_only_role():
    """Citus runs these commands on the workers as the caller: each would read the shards raw."""
    attacks = [
        "SELECT result FROM run_command_on_shards('t', 'SELECT sum(x) FROM %s')",
        "SELECT result FROM run_command_on_workers($$SELECT sum(x) FROM public.t$$)",
        "SELECT result FROM run_command_on_placements('t', 'SELECT count(*) FROM %s WHERE x > 50')",
    ]
    with coordinator(ROLE) as a:
        for sql in attacks:
            try:
                rows = a.execute(sql).fetchall()
            except psycopg.Error as e:  # refused outright is fine too
                assert "protected by pg_dp" in str(e) or "permission denied" in str(e), (sql, str(e))
                continue
            # each node answers with its own error: no number comes back
            for (result,) in rows:
                assert "protected by pg_dp" in result, (sql, result)
        for sql in ("SELECT count(*) FROM t", "SELECT sum(x) FROM t WHERE g = 1", "EXPLAIN SELECT count(*) FROM t",
                    "SELECT * FROM t LIMIT 1"):
            refused(a, sql, E.InsufficientPrivilege)


def check_roles_that_may_read_the_table_keep_using_citus():
    with coordinator() as su:
        n, s = su.execute("SELECT count(*), sum(x) FROM t").fetchone()
        assert n == ROWS, n
        assert s == sum(i % 100 for i in range(1, ROWS + 1)), s
        # a trusted role reads it through Citus, on every worker, with its own grants
        su.execute("DROP ROLE IF EXISTS dp_citus_trusted")
        su.execute("CREATE ROLE dp_citus_trusted LOGIN")
        su.execute("GRANT SELECT ON t TO dp_citus_trusted")
        su.execute("SELECT dp.trust_role('dp_citus_trusted')")
    with coordinator("dp_citus_trusted") as t:
        assert t.execute("SELECT count(*) FROM t WHERE g = 1").fetchone()[0] == ROWS // 5


def check_distributing_a_protected_table_fails_closed():
    """Citus creates the shards inside the caller's transaction, where the workers cannot label them
    yet: the distribution is refused, and the table stays whole and protected on the coordinator."""
    with coordinator() as su:
        su.execute("DROP TABLE IF EXISTS early")
        su.execute("CREATE TABLE early (id int, x float8)")
        su.execute("INSERT INTO early SELECT i, i FROM generate_series(1, 1000) i")
        su.execute("SELECT dp.protect_table('early')")
        e = refused(su, "SELECT create_distributed_table('early', 'id')", E.ObjectNotInPrerequisiteState)
        assert "could not be set on every Citus worker" in str(e) and "distribute it" in (e.diag.message_hint or ""), str(e)
        assert su.execute("SELECT count(*) FROM pg_dist_partition WHERE logicalrelid = 'early'::regclass").fetchone()[0] == 0
        assert su.execute("SELECT dp.is_protected('early')").fetchone()[0]
        # the documented order: distribute, commit, protect
        su.execute("SELECT dp.unprotect_table('early')")
        su.execute("SELECT create_distributed_table('early', 'id')")
        su.execute("SELECT dp.protect_table('early')")
        su.execute(f"GRANT SELECT ON early TO {ROLE}")
    port, shard, _ = a_shard("early")
    with connect(port, ROLE) as a:
        assert a.execute("SELECT has_table_privilege(%s, 'SELECT')", (shard,)).fetchone()[0]
        e = refused(a, f"SELECT sum(x) FROM {shard}", E.InsufficientPrivilege)
        assert "protected by pg_dp" in str(e), str(e)


def check_a_node_added_later_protects_the_shards_moved_to_it():
    """Adds a third worker (--spare) and moves a shard of t there."""
    if not ARGS.spare:
        return
    with connect(ARGS.spare, db="postgres") as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {DB}")
    with connect(ARGS.spare) as c:
        c.execute("CREATE EXTENSION citus")
    with coordinator() as su:
        notices = []
        su.add_notice_handler(lambda d: notices.append(d.message_primary))
        # the new node cannot see its shell tables from another connection yet: a warning, not a failure
        su.execute("SELECT citus_add_node('localhost', %s)", (ARGS.spare,))
        assert any("is not yet on every Citus worker" in n for n in notices), notices
        su.execute("SELECT dp.sync_citus_labels()")
        label = su.execute("SELECT result FROM run_command_on_workers($$SELECT label FROM pg_seclabels "
                           "WHERE objoid = 'public.t'::regclass AND provider = 'pg_dp'$$) WHERE nodeport = %s",
                           (ARGS.spare,)).fetchone()[0]
        assert label == "protected", label
        port, shard, shardid = a_shard()
        su.execute("SELECT citus_move_shard_placement(%s, 'localhost', %s, 'localhost', %s, shard_transfer_mode => 'block_writes')",
                   (shardid, port, ARGS.spare))
    with connect(ARGS.spare, ROLE) as a:
        assert a.execute("SELECT has_table_privilege(%s, 'SELECT')", (shard,)).fetchone()[0]
        e = refused(a, f"SELECT sum(x) FROM {shard}", E.InsufficientPrivilege)
        assert "protected by pg_dp" in str(e), str(e)


def check_unprotecting_reaches_the_workers_and_protecting_again_too():
    port, shard, _ = a_shard()
    with coordinator() as su:
        su.execute("SELECT dp.unprotect_table('t')")
    try:
        with connect(port, ROLE) as a:
            assert a.execute(f"SELECT count(*) FROM {shard}").fetchone()[0] > 0
    finally:
        with coordinator() as su:
            su.execute("SELECT dp.protect_table('t')")
    with connect(port, ROLE) as a:
        refused(a, f"SELECT count(*) FROM {shard}", E.InsufficientPrivilege)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="/tmp")
    ap.add_argument("--coordinator", type=int, default=25450)
    ap.add_argument("--workers", default="25451,25452")
    ap.add_argument("--spare", type=int, default=0, help="a fourth server, added as a worker by the last check")
    ARGS = ap.parse_args()
    ARGS.workers = [int(p) for p in ARGS.workers.split(",")]
    setup()
    run_checks(globals(), "citus")
