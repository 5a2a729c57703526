#!/usr/bin/env python3
"""pg_dp through a real client: psycopg 3 (extended protocol: every parameter is a bind parameter).

Run by scripts/test.sh against a private server with pg_dp installed:
    /usr/bin/python3 tests/client/test_client.py --host /tmp --port 25433
Each check is a function named check_*; the script prints one line per check and a closing
"client: N passed, M failed" line, and exits non-zero on any failure.
"""
import argparse
import os
import subprocess
import math
import threading
import time

import psycopg
from psycopg import errors as E

from harness import run_checks

ARGS = None


def connect(dbname="pg_dp_client", user="postgres", autocommit=True):
    return psycopg.connect(host=ARGS.host, port=ARGS.port, dbname=dbname, user=user, autocommit=autocommit)


def setup():
    with connect("postgres") as c:
        c.execute("DROP DATABASE IF EXISTS pg_dp_client")
        c.execute("CREATE DATABASE pg_dp_client")
        # these checks compare repeated releases of one query: no release cache
        c.execute("ALTER DATABASE pg_dp_client SET dp.release_cache = off")
    with connect() as c:
        c.execute("CREATE EXTENSION pg_dp")
        c.execute("CREATE TABLE t AS SELECT g AS i, g::float8 AS x, g::numeric AS n FROM generate_series(1, 1000) g")
        c.execute("DROP ROLE IF EXISTS dp_client_analyst")
        c.execute("CREATE ROLE dp_client_analyst LOGIN")
        c.execute("GRANT SELECT ON t TO dp_client_analyst")
        c.execute("SELECT dp.grant_budget('dp_client_analyst', 1e6)")
        c.execute("SELECT dp.grant_budget('dp_client_analyst', 1e6)")
        # visits over the last 400 days, protected: the time-series checks
        c.execute("""CREATE TABLE visits AS SELECT g AS id, current_date - (g % 400) AS visit_date,
                            now() - (g % 400) * interval '1 day' - interval '1 minute' AS visit_ts,
                            (g % 50)::numeric(8, 2) AS price, g % 5 AS quantity
                       FROM generate_series(1, 4000) g""")
        c.execute("SELECT dp.protect_table('visits')")
        c.execute("CREATE INDEX ON t (i)")
        c.execute("CREATE INDEX ON visits (visit_date)")
        c.execute("ANALYZE t")
        c.execute("ANALYZE visits")
        c.execute("DROP ROLE IF EXISTS dp_client_backup")
        c.execute("CREATE ROLE dp_client_backup LOGIN IN ROLE pg_read_all_data, dp_admin")
        c.execute("DROP ROLE IF EXISTS dp_client_monitor")
        c.execute("CREATE ROLE dp_client_monitor LOGIN IN ROLE pg_monitor")


def expect_error(conn, sql, params, sqlstate_cls, *fragments):
    try:
        conn.execute(sql, params)
    except sqlstate_cls as e:
        msg = str(e)
        for f in fragments:
            assert f in msg, f"{f!r} not in {msg!r}"
        return e
    raise AssertionError(f"no {sqlstate_cls.__name__} from {sql} {params}")


def check_time_series_filters_read_the_clock_once_and_again_in_each_transaction():
    # what BI tools send for a time range and analysts write: evaluated once from the clock before
    # the query runs (whatever the data), exact at a large epsilon
    with connect(user="dp_client_analyst") as c:
        for where, exact in [("visit_date > current_date - 30", 30 * 10),
                             ("visit_ts > now() - interval '30 days'", 30 * 10),
                             ("visit_date >= TO_DATE('2000-01-01', 'YYYY-MM-DD')", 4000),
                             ("visit_date < date_trunc('day', now())::date - 389", 10 * 10)]:
            n = c.execute(f"SELECT dp_count(true, 1e4) FROM visits WHERE {where}").fetchone()[0]
            assert n == exact, (where, n, exact)
        # an error of a clock expression depends on the text alone: raised even if no row reaches it
        expect_error(c, "SELECT dp_count(*) FROM visits WHERE CASE WHEN id = -1 THEN visit_date > to_date('x', 'YYYY') END",
                     None, E.InvalidDatetimeFormat, "YYYY")
    # a prepared statement reads the clock again in the next transaction (the plan shows the value)
    with connect() as c:
        c.execute("PREPARE p AS SELECT dp_count(true, 1e6) FROM visits WHERE visit_ts > now() - interval '1 hour'")
        plans = []
        for _ in range(3):
            with c.transaction():
                plans.append("\n".join(r[0] for r in c.execute("EXPLAIN (COSTS OFF) EXECUTE p")))
                c.execute("EXECUTE p")
        assert len(set(plans)) == 3, plans


def pg_tool(name):
    path = f"/usr/lib/postgresql/15/bin/{name}"
    return path if os.path.exists(path) else name


def run_tool(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def check_tools_read_the_statistics_of_relations_without_protected_data():
    # psql's \dt+, \di+ and \l+ list sizes and counts of every relation: those of relations that hold
    # protected data are NULL (empty), the others are PostgreSQL's
    base = [pg_tool("psql"), "-X", "-A", "-t", "-h", ARGS.host, "-p", str(ARGS.port), "-d", "pg_dp_client"]
    for meta in ["\\dt+", "\\di+", "\\l+"]:
        r = run_tool(base + ["-U", "dp_client_analyst", "-c", meta])
        assert r.returncode == 0, (meta, r.stderr)
    rows = {l.split("|")[1]: l.split("|") for l in run_tool(base + ["-U", "dp_client_analyst", "-c", "\\dt+"]).stdout.splitlines()}
    assert rows["t"][6].strip() != "" and rows["visits"][6].strip() == "", rows
    with connect(user="dp_client_analyst") as c:
        got = dict(c.execute("SELECT relname, reltuples FROM pg_class WHERE relname IN ('t', 'visits', 'visits_visit_date_idx')").fetchall())
        assert got == {"t": 1000.0, "visits": None, "visits_visit_date_idx": None}, got
        sizes = c.execute("SELECT pg_total_relation_size('t') > 0, pg_total_relation_size('visits'), pg_relation_size('visits_visit_date_idx'), "
                          "pg_database_size(current_database())").fetchone()
        assert sizes == (True, None, None, None), sizes
        # the planner's statistics of a protected table stay refused, with a hint that does not
        # suggest exempting the analyst
        e = None
        try:
            c.execute("SELECT * FROM pg_stats WHERE tablename = 'visits'")
        except E.InsufficientPrivilege as x:
            e = x
        assert e is not None and "trust_role" not in (e.diag.message_hint or ""), e
    # members of pg_read_all_stats (pg_monitor) read statistics as PostgreSQL intends
    with connect(user="dp_client_monitor") as c:
        assert c.execute("SELECT reltuples FROM pg_class WHERE relname = 'visits'").fetchone()[0] == 4000.0
        assert c.execute("SELECT n_live_tup FROM pg_stat_user_tables WHERE relname = 'visits'").fetchone()[0] is not None
    # pg_dump of a public table by a backup role that is not a superuser
    r = run_tool([pg_tool("pg_dump"), "-h", ARGS.host, "-p", str(ARGS.port), "-U", "dp_client_backup", "-t", "t", "pg_dp_client"])
    assert r.returncode == 0 and "CREATE TABLE public.t" in r.stdout, r.stderr


def check_epsilon_as_bind_parameter():
    with connect() as c:
        # server-side binding: the query text carries $1, the value travels separately
        cur = c.execute("SELECT dp_count(x, %s) FROM t", (1e6,), prepare=True)
        assert cur.fetchone()[0] == 1000
        # the same prepared statement at another epsilon is noisy but close
        vals = [c.execute("SELECT dp_count(x, %s) FROM t", (0.5,), prepare=True).fetchone()[0] for _ in range(20)]
        assert all(abs(v - 1000) < 100 for v in vals), vals
        assert len(set(vals)) > 1, vals


def check_bounds_and_epsilon_as_bind_parameters():
    with connect() as c:
        for _ in range(6):  # past the custom-plan phase into the generic plan
            s = c.execute("SELECT dp_sum(i, %s::int, %s::int, %s) FROM t", (0, 100, 1e6), prepare=True).fetchone()[0]
            assert s == 95050, s
        a = c.execute("SELECT dp_avg(x, %s, %s, %s) FROM t", (0.0, 1000.0, 1e6), prepare=True).fetchone()[0]
        assert abs(a - 500.5) < 0.01, a
        e = c.execute("SELECT dp_sum(x, %s, %s, %s) FROM t WHERE false", (0.0, 10.0, 0.5), prepare=True).fetchone()[0]
        assert e is not None and math.isfinite(e)


def check_result_types():
    with connect() as c:
        row = c.execute("SELECT dp_count(*), dp_sum(i, 0, 10, 1), dp_sum(x, 0, 10, 1), dp_sum(n, 0, 10, 1), dp_avg(x, 0, 10, 1) FROM t").fetchone()
        assert isinstance(row[0], int) and isinstance(row[1], int), row
        assert isinstance(row[2], float) and isinstance(row[4], float), row
        assert type(row[3]).__name__ == "Decimal", row


def check_sqlstates_of_bad_parameters():
    with connect() as c:
        expect_error(c, "SELECT dp_sum(x, %s, %s, 1) FROM t", (10.0, 0.0), E.InvalidParameterValue, "lower", "less than or equal to upper")
        expect_error(c, "SELECT dp_sum(x, 0, 1, %s) FROM t", (0.0,), E.InvalidParameterValue, "epsilon", "between 1e-9 and 1e6")
        expect_error(c, "SELECT dp_count(x, %s) FROM t", (-1.0,), E.InvalidParameterValue, "epsilon")
        expect_error(c, "SELECT dp_avg(x, 0, 1, %s) FROM t", (float("nan"),), E.InvalidParameterValue, "epsilon", "NaN")
        expect_error(c, "SELECT dp_avg(x, 0, 1, %s) FROM t", (float("inf"),), E.InvalidParameterValue, "epsilon", "Infinity")
        expect_error(c, "SELECT dp_sum(x, 0, %s, 1) FROM t", (float("inf"),), E.InvalidParameterValue, "upper", "finite")
        # a NaN stored in the data is skipped like NULL, never an error
        c.execute("CREATE TABLE IF NOT EXISTS nan_t AS SELECT v FROM unnest(%s::float8[]) v", ([1.0, float("nan")],))
        assert abs(c.execute("SELECT dp_sum(v, 0, 10, 1e6) FROM nan_t").fetchone()[0] - 1.0) < 1e-3
        # refusals of the query grammar are ordinary query errors (42501), never 0A000, which
        # connection pools such as HikariCP treat as a dead connection
        expect_error(c, "SELECT dp_sum(v, 0, 1, 1) FROM unnest(%s::float8[]) v", ([1.0],), E.InsufficientPrivilege,
                     "function in FROM in the input of dp_sum")
        expect_error(c, "SELECT dp_sum(x, 0, x, 1) FROM t", None, E.InsufficientPrivilege, "upper of dp_sum", "not a column")
        expect_error(c, "SELECT dp_sum(x, 0, 1, %s) FROM t", (None,), E.NullValueNotAllowed, "epsilon must not be NULL")
        expect_error(c, "SELECT dp_sum(x, 0, 1, 1) OVER () FROM t", None, E.InsufficientPrivilege, "window function")
        assert c.execute("SELECT 1").fetchone()[0] == 1, "the connection survives refusals"


def check_non_superuser():
    with connect(user="dp_client_analyst") as c:
        assert c.execute("SELECT dp_count(x, %s) FROM t", (1e6,)).fetchone()[0] == 1000
        expect_error(c, "SET dp.seed = 1", None, E.InsufficientPrivilege, "dp.seed")
        expect_error(c, "SELECT set_config('dp.seed', %s, false)", ("1",), E.InsufficientPrivilege, "dp.seed")
        expect_error(c, "SHOW dp.seed", None, E.InsufficientPrivilege, "dp.seed")
        n = c.execute("""SELECT count(*) FROM pg_proc p JOIN pg_namespace s ON s.oid = p.pronamespace
                          WHERE s.nspname = 'dp' AND has_function_privilege(p.oid, 'EXECUTE')
                            AND p.proname NOT IN ('release_projection', 'release_projection_rows', 'release_synthetic',
                                                  'preview_synthetic', 'keep_group', 'random_order', 'per_group', 'privacy_level_epsilon', 'privacy_level_names', 'is_protected', 'preview', 'last_releases', 'grammar',
                                  'current_period_start', 'role_uid', 'distributed_rows', 'interval_bound',
                                  'interval_half_width_final', 'total_int2', 'total_int4', 'total_int8', 'total_float4',
                                  'total_float8', 'total_numeric', 'total_date_trunc_ts', 'total_date_trunc_tstz',
                                  'total_date', 'total_date_diff', 'total_timestamp', 'total_timestamptz', 'total_interval',
                                  'total_date_to_timestamp', 'total_date_to_timestamptz', 'total_timestamp_to_date',
                                  'total_timestamptz_to_date', 'class_stat', 'masked_relation_size', 'masked_table_size',
                                  'masked_total_relation_size', 'masked_indexes_size', 'masked_database_size', 'masked_tablespace_size')
                            AND NOT (p.prokind = 'a' AND (p.proname IN ('interval_half_width', 'unit_sum', 'unit_mean', 'unit_count') OR p.proname LIKE 'merge\\_%'))""").fetchone()[0]
        # only the table releases and dp.keep_group (charged like the aggregates), the synthetic preview
        # (uncharged, on tables the caller may read directly), the per-unit aggregates
        # (refused over protected tables outside the queries pg_dp writes), dp.random_order, dp.per_group, functions
        # of the catalog alone (privacy levels, whether a table is protected, a role's pg_dp identity,
        # what the grammar admits), those that the plans of DP queries call as the caller (the interval
        # of a release of the same aggregation, the total arithmetic below the aggregates, which refuses
        # to run outside the operator nodes pg_dp gives it to),
        # and dp.distributed_rows and the merge aggregates of DP queries over Citus tables (the executor
        # checks them for the caller; the query check refuses them in any query)
        assert n == 0, n


def check_dp_only_role_on_a_protected_table():
    """A role without SELECT on a protected table: DP queries with bind parameters and COPY of a DP
    query work; raw reads, COPY of the table and EXPLAIN are refused with SQLSTATE 42501."""
    with connect() as c:
        c.execute("DROP TABLE IF EXISTS patients")
        c.execute("CREATE TABLE patients AS SELECT g AS id, g % 4 AS region, (g * 37 % 1000)::float8 AS income "
                  "FROM generate_series(1, 1000) g")
        c.execute("SELECT dp.protect_table('patients')")
        c.execute("SELECT dp.set_domain('patients', 'region', ARRAY[0, 1, 2, 3])")
        c.execute("DROP ROLE IF EXISTS dp_client_dp_only")
        c.execute("CREATE ROLE dp_client_dp_only LOGIN")
        c.execute("SELECT dp.grant_budget('dp_client_dp_only', 1e6)")
        # whatever its grants, the role reads the table only through DP queries
        c.execute("GRANT SELECT ON patients TO dp_client_dp_only")
    with connect(user="dp_client_dp_only") as c:
        n = c.execute("SELECT dp_count(id, %s) FROM patients WHERE region = %s", (1e5, 1), prepare=True).fetchone()[0]
        assert n == 250, n
        rows = c.execute("SELECT region, dp_sum(income, 0, 1000, %s) FROM patients GROUP BY region ORDER BY region",
                         (1.0,)).fetchall()
        assert [r[0] for r in rows] == [0, 1, 2, 3], rows
        # a key without a public domain needs partition selection, which spends δ: this role has none
        expect_error(c, "SELECT id % 2, dp_count(id, 1.0) FROM patients GROUP BY 1", None, E.InsufficientResources,
                     "delta 0.000001")
        with c.cursor().copy("COPY (SELECT dp_count(id, 1e5) FROM patients) TO STDOUT") as cp:
            assert b"".join(bytes(b) for b in cp).strip() == b"1000"
        for sql in ("SELECT * FROM patients", "SELECT count(*) FROM patients"):
            expect_error(c, sql, None, E.InsufficientPrivilege, "protected by pg_dp")
        try:
            with c.cursor().copy("COPY patients TO STDOUT") as cp:
                list(cp)
            raise AssertionError("COPY of a protected table was not refused")
        except E.InsufficientPrivilege as e:
            assert "permission denied for table patients" in str(e), e
        expect_error(c, "EXPLAIN SELECT dp_count(id, 0.1) FROM patients", None, E.InsufficientPrivilege,
                     "EXPLAIN of a query on protected table patients")
        expect_error(c, "SELECT * FROM pg_stats WHERE tablename = %s", ("patients",), E.InsufficientPrivilege,
                     "statistics of their data are hidden")
    with connect() as c:
        # the copy of a protected table by a role that may read it directly (the superuser)
        with c.cursor().copy("COPY patients TO STDOUT") as cp:
            assert sum(1 for _ in cp.rows()) == 1000


def check_parallel_plan_through_the_client():
    with connect() as c:
        c.execute("CREATE TABLE IF NOT EXISTS big AS SELECT g::float8 AS x FROM generate_series(1, 300000) g")
        c.execute("ANALYZE big")
        for s in ("max_parallel_workers_per_gather = 2", "parallel_setup_cost = 0", "parallel_tuple_cost = 0",
                  "min_parallel_table_scan_size = 0"):
            c.execute("SET " + s)
        plan = "\n".join(r[0] for r in c.execute("EXPLAIN SELECT dp_sum(x, 0, 300000, %s) FROM big", (1.0,)))
        assert "Partial Aggregate" in plan, plan
        v = c.execute("SELECT dp_sum(x, 0, 300000, %s) FROM big", (1.0,)).fetchone()[0]
        assert abs(v - 45000150000.0) < 300000 * 40, v   # |Laplace(300000)| > 40 scales: p = e^-40


# A release that would run for a minute: 20,000 rows, 8 columns, a projection 4,096 wide.
LONG_RELEASE = ("SELECT count(*) FROM dp.release_projection_rows('wide', %s, %s, %s, 1, 1e-5, k1 => 4096)",
                ([f"c{i}" for i in range(8)], [0.0] * 8, [1.0] * 8))


def long_release_setup(c):
    cols = ", ".join(f"random() AS c{i}" for i in range(8))
    c.execute(f"CREATE TABLE IF NOT EXISTS wide AS SELECT {cols} FROM generate_series(1, 20000)")


def dprp_receipts(c):
    return c.execute("SELECT count(*) FROM dp.ledger WHERE mechanism = 'dprp'").fetchone()[0]


def check_statement_timeout_stops_a_long_table_release():
    """statement_timeout ends a release within a second of the timeout; the release was charged."""
    with connect() as c:
        long_release_setup(c)
        before = dprp_receipts(c)
        c.execute("SET statement_timeout = '300ms'")
        t0 = time.monotonic()
        expect_error(c, *LONG_RELEASE, E.QueryCanceled, "statement timeout")
        elapsed = time.monotonic() - t0
        assert elapsed < 1.3, f"stopped {elapsed:.2f} s after the start, {elapsed - 0.3:.2f} s after the timeout"
        c.execute("RESET statement_timeout")
        assert dprp_receipts(c) == before + 1
        assert c.execute("SELECT 1").fetchone()[0] == 1


def check_pg_cancel_backend_stops_a_long_table_release():
    """pg_cancel_backend from another session ends a release within a second."""
    with connect() as c, connect() as other:
        long_release_setup(c)
        pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
        sent = {}

        def cancel():
            time.sleep(0.5)
            sent["at"] = time.monotonic()
            other.execute("SELECT pg_cancel_backend(%s)", (pid,))

        t = threading.Thread(target=cancel)
        t.start()
        expect_error(c, *LONG_RELEASE, E.QueryCanceled, "canceling statement due to user request")
        stopped = time.monotonic() - sent["at"]
        t.join()
        assert stopped < 1.0, f"stopped {stopped:.2f} s after the cancel"
        assert c.execute("SELECT 1").fetchone()[0] == 1


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="/tmp")
    ap.add_argument("--port", type=int, default=25433)
    ARGS = ap.parse_args()
    setup()
    run_checks(globals(), "client")

if __name__ == "__main__":
    main()
