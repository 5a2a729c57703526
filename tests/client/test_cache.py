#!/usr/bin/env python3
"""The release cache, through real connections: the same DP query on unchanged data is answered with
the rows released before, at no cost, and any change to what it reads makes it release afresh.

Run by scripts/test.sh:
    /usr/bin/python3 tests/client/test_cache.py --host /tmp --port 25433
Prints one line per check and "cache: N passed, M failed"; exits non-zero on any failure.
"""
import argparse
import threading
from decimal import Decimal

import psycopg
from psycopg import errors as E

from harness import refused, run_checks

ARGS = None
DB = "pg_dp_cache"
Q = "SELECT k, dp_sum(x, 0, 1000, 0.5) AS s, dp_count(x, 0.25) AS n FROM t GROUP BY k ORDER BY k"
COUNT = "SELECT dp_count(x, 0.5) FROM t"


def connect(user="postgres", autocommit=True):
    return psycopg.connect(host=ARGS.host, port=ARGS.port, dbname=DB, user=user, autocommit=autocommit)


def setup():
    with psycopg.connect(host=ARGS.host, port=ARGS.port, dbname="postgres", user="postgres", autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {DB}")
        for r in ("dp_c_alice", "dp_c_bob", "dp_c_nobudget"):
            c.execute(f"DROP ROLE IF EXISTS {r}")
            c.execute(f"CREATE ROLE {r} LOGIN")
    with connect() as c:
        c.execute("CREATE EXTENSION pg_dp")
        c.execute("CREATE TABLE t (id int PRIMARY KEY, k int NOT NULL, x float8)")
        c.execute("INSERT INTO t SELECT g, g % 4, g FROM generate_series(1, 1000) g")
        c.execute("SELECT dp.protect_table('t')")
        c.execute("SELECT dp.set_domain('t', 'k', ARRAY['0', '1', '2', '3'])")
        for r in ("dp_c_alice", "dp_c_bob", "dp_c_nobudget"):
            c.execute(f"GRANT SELECT ON t TO {r}")
        for r in ("dp_c_alice", "dp_c_bob"):
            c.execute("SELECT dp.set_budget(%s, 1000, 0)", (r,))


def spent(role):
    with connect() as c:
        return c.execute("SELECT epsilon_spent FROM dp.budgets WHERE role = %s::regrole", (role,)).fetchone()[0]


def fresh_release_state():
    """A write, so that no earlier release of the checks' queries is current."""
    with connect() as c:
        c.execute("UPDATE t SET x = x WHERE id = 1")


def run(sql, role="dp_c_alice", params=None):
    with connect(role) as c:
        return c.execute(sql, params).fetchall()


def check_a_repeated_query_is_answered_again_for_free_and_identically():
    fresh_release_state()
    before = spent("dp_c_alice")
    first = run(Q)
    after_first = spent("dp_c_alice")
    second = run(Q)
    assert after_first - before == Decimal("0.75"), (before, after_first)
    assert spent("dp_c_alice") == after_first, "the repeat was charged"
    assert first == second, (first, second)
    with connect() as c:
        # a reuse writes no receipt: it is counted once per role and paid execution
        last = c.execute("SELECT epsilon, details->'execution'->>'id' FROM dp.ledger WHERE role = 'dp_c_alice'::regrole "
                         "ORDER BY id DESC LIMIT 1").fetchone()
        assert last[0] == Decimal("0.25"), last
        reuses = c.execute("SELECT reuses FROM dp.reuses WHERE role = 'dp_c_alice'::regrole AND execution = %s",
                           (last[1],)).fetchall()
        assert reuses == [(1,)], reuses


def check_by_default_a_release_is_reused_only_by_the_role_that_paid_for_it():
    fresh_release_state()
    first = run(Q, "dp_c_alice")
    bob_before = spent("dp_c_bob")
    run(Q, "dp_c_bob")
    assert spent("dp_c_bob") - bob_before == Decimal("0.75"), "another role got alice's release for free"
    with connect("dp_c_nobudget") as c:
        refused(c, Q, E.InsufficientPrivilege)
    assert run(Q, "dp_c_alice") == first


def sharing(value):
    with connect() as c:
        c.execute(f"ALTER DATABASE {DB} SET dp.release_cache_sharing = '{value}'")


def check_shared_releases_go_only_to_roles_that_could_have_bought_them():
    sharing("database")
    try:
        fresh_release_state()
        first = run(Q, "dp_c_alice")
        bob_before = spent("dp_c_bob")
        assert run(Q, "dp_c_bob") == first
        assert spent("dp_c_bob") == bob_before
        # no budget: it could not have bought it, so it gets nothing
        with connect("dp_c_nobudget") as c:
            refused(c, Q, E.InsufficientPrivilege)
        # a per-query cap below the release's epsilon: refused, as a fresh release would be
        with connect() as c:
            c.execute("SELECT dp.set_budget('dp_c_bob', 1000, 0, 0.5)")
        try:
            with connect("dp_c_bob") as c:
                refused(c, Q, E.ProgramLimitExceeded)
        finally:
            with connect() as c:
                c.execute("SELECT dp.set_budget('dp_c_bob', 1000, 0)")
        # the analyst may not share releases itself
        with connect("dp_c_bob") as c:
            refused(c, "SET dp.release_cache_sharing = 'database'", E.InsufficientPrivilege)
    finally:
        sharing("role")


def check_reuses_are_counted_without_receipts_so_storage_stays_bounded():
    fresh_release_state()
    run(COUNT)
    with connect() as c:
        size = "SELECT pg_total_relation_size('dp.release_log') + pg_total_relation_size('dp.release_reuse') + pg_total_relation_size('dp.query_text')"
        rows = "SELECT (SELECT count(*) FROM dp.release_log), (SELECT count(*) FROM dp.release_reuse)"
        before_rows = c.execute(rows).fetchone()
        before = c.execute(size).fetchone()[0]
    n = 300
    with connect("dp_c_alice") as c:
        for _ in range(n):
            c.execute(COUNT).fetchall()
    with connect() as c:
        after_rows = c.execute(rows).fetchone()
        after = c.execute(size).fetchone()[0]
        counted = c.execute("SELECT max(reuses) FROM dp.reuses WHERE role = 'dp_c_alice'::regrole").fetchone()[0]
    assert after_rows[0] == before_rows[0], f"reuses wrote receipts: {before_rows} -> {after_rows}"
    assert after_rows[1] - before_rows[1] <= 1, (before_rows, after_rows)
    assert counted >= n, counted
    # one counter row, updated in place: a few pages of dead tuples at most, not a receipt per reuse
    print(f"    ledger growth over {n} reuses: {after - before} bytes ({(after - before) / n:.1f} bytes per reuse)")
    assert after - before < 64 * 1024, (before, after)


def check_a_query_without_epsilon_is_reused():
    # the session's default epsilon is looked up while planning (a pinned level caps it): the
    # lookup must not make the transaction look like a writer, which would bypass the cache
    fresh_release_state()
    q = "SELECT dp_count(*), dp_interval_low(dp_count(*)), dp_interval_high(dp_count(*)) FROM t"
    first = run(q)
    before = spent("dp_c_alice")
    assert run(q) == first
    assert spent("dp_c_alice") == before, "the repeat was charged"
    lo, hi = first[0][1], first[0][2]
    assert lo < first[0][0] < hi, first


def check_a_query_with_many_dp_aggregates_is_paid_once_and_reused():
    # a dashboard's statement: 120 distinct DP aggregates in one SELECT, by group
    fresh_release_state()
    calls = [f"dp_sum(x, 0, {1000 + i}, 0.01)" for i in range(60)] + \
            [f"dp_avg(x, 0, {1000 + i}, 0.01)" for i in range(40)] + \
            [f"dp_count(CASE WHEN id > {i} THEN x END, 0.01)" for i in range(20)]
    many = "SELECT k, " + ", ".join(calls) + " FROM t GROUP BY k ORDER BY k"
    before = spent("dp_c_alice")
    first = run(many)
    assert len(first) == 4 and len(first[0]) == 121, (len(first), len(first[0]))
    assert spent("dp_c_alice") - before == Decimal("1.20"), spent("dp_c_alice") - before
    with connect() as c:
        n = c.execute("SELECT count(*) FROM dp.ledger WHERE role = 'dp_c_alice'::regrole AND query_text = %s",
                      (many,)).fetchone()[0]
        assert n == 120, n
    before = spent("dp_c_alice")
    assert run(many) == first
    assert spent("dp_c_alice") == before


def assert_released_afresh_after(write):
    """A release, then `write`, then the same query: it must be paid again (ε 0.5)."""
    fresh_release_state()
    run(COUNT)
    before = spent("dp_c_alice")
    with connect() as c:
        c.execute(write)
    run(COUNT)
    assert spent("dp_c_alice") - before == Decimal("0.5"), f"not released afresh after: {write}"


def check_a_committed_write_makes_the_release_stale():
    for write in ("INSERT INTO t VALUES (5001, 1, 7)", "UPDATE t SET x = x + 1 WHERE id = 2",
                  "DELETE FROM t WHERE id = 5001", "TRUNCATE tmp_other", "ALTER TABLE t ADD COLUMN IF NOT EXISTS note text",
                  "COPY t (id, k, x) FROM PROGRAM 'echo 5002,1,3' WITH (FORMAT csv)"):
        with connect() as c:
            c.execute("CREATE TABLE IF NOT EXISTS tmp_other (a int)")
        assert_released_afresh_after(write)


def check_a_write_through_a_function_or_a_cte_makes_the_release_stale():
    with connect() as c:
        c.execute("CREATE OR REPLACE FUNCTION bump() RETURNS void LANGUAGE sql AS 'UPDATE t SET x = x WHERE id = 3'")
    for write in ("SELECT bump()", "WITH d AS (UPDATE t SET x = x WHERE id = 4 RETURNING 1) SELECT count(*) FROM d"):
        assert_released_afresh_after(write)


def check_a_rolled_back_write_leaves_the_release_current():
    fresh_release_state()
    first = run(COUNT)
    before = spent("dp_c_alice")
    with connect(autocommit=False) as c:
        c.execute("INSERT INTO t VALUES (6001, 1, 7)")
        c.rollback()
    assert run(COUNT) == first
    assert spent("dp_c_alice") == before


def check_a_transaction_that_wrote_sees_its_own_data_not_the_cache():
    fresh_release_state()
    run(COUNT)
    with connect() as c:
        c.execute("GRANT INSERT ON t TO dp_c_alice")
        c.execute("SELECT dp.trust_role('dp_c_alice')")
    try:
        with connect("dp_c_alice", autocommit=False) as c:
            before = spent("dp_c_alice")
            c.execute("INSERT INTO t VALUES (7001, 1, 7)")
            c.execute(COUNT)
            c.rollback()
        assert spent("dp_c_alice") - before == Decimal("0.5"), "a writing transaction reused the cache"
    finally:
        with connect() as c:
            c.execute("SELECT dp.distrust_role('dp_c_alice')")
            c.execute("REVOKE INSERT ON t FROM dp_c_alice")


def check_other_parameters_and_other_text_release_afresh():
    fresh_release_state()
    run("SELECT dp_count(x, %s::float8) FROM t", params=(0.5,))
    before = spent("dp_c_alice")
    run("SELECT dp_count(x, %s::float8) FROM t", params=(0.5,))
    assert spent("dp_c_alice") == before, "same bind parameters were charged again"
    run("SELECT dp_count(x, %s::float8) FROM t", params=(0.25,))
    assert spent("dp_c_alice") - before == Decimal("0.25")
    run("SELECT dp_count(x, 0.5) FROM t WHERE k = %s", params=(1,))
    run("SELECT dp_count(x, 0.5) FROM t WHERE k = %s", params=(2,))
    assert spent("dp_c_alice") - before == Decimal("1.25"), "a WHERE parameter was not part of the key"


def check_the_cache_can_be_turned_off_per_table_and_by_a_superuser():
    with connect() as c:
        c.execute("SELECT dp.set_release_cache('t', false)")
        assert c.execute("SELECT count(*) FROM dp.uncached_tables WHERE table_name = 't'::regclass").fetchone()[0] == 1
        assert c.execute("SELECT count(*) FROM dp.protected_tables WHERE table_name = 't'::regclass").fetchone()[0] == 1
    try:
        run(COUNT)
        before = spent("dp_c_alice")
        run(COUNT)
        assert spent("dp_c_alice") - before == Decimal("0.5"), "reused although off for the table"
    finally:
        with connect() as c:
            c.execute("SELECT dp.set_release_cache('t', true)")
            assert c.execute("SELECT count(*) FROM dp.uncached_tables").fetchone()[0] == 0
            assert c.execute("SELECT count(*) FROM dp.protected_tables WHERE table_name = 't'::regclass").fetchone()[0] == 1
    run(COUNT)
    before = spent("dp_c_alice")
    run(COUNT)
    assert spent("dp_c_alice") == before, "not reused once back on"
    with connect() as c:
        c.execute("CREATE MATERIALIZED VIEW IF NOT EXISTS mv AS SELECT k, x FROM t")
        c.execute("SELECT dp.set_release_cache('mv', false)")
        assert c.execute("SELECT count(*) FROM dp.uncached_tables WHERE table_name = 'mv'::regclass").fetchone()[0] == 1
        c.execute("SELECT dp.set_release_cache('mv', true)")
        c.execute("ALTER ROLE dp_c_bob SET dp.release_cache = off")
    try:
        with connect("dp_c_bob") as c:
            assert c.execute("SHOW dp.release_cache").fetchone()[0] == "off"
            b = spent("dp_c_bob")
            c.execute(COUNT)
            assert spent("dp_c_bob") - b == Decimal("0.5")
            refused(c, "SET dp.release_cache = on", E.InsufficientPrivilege)
    finally:
        with connect() as c:
            c.execute("ALTER ROLE dp_c_bob RESET dp.release_cache")


def check_a_cursor_read_halfway_stores_the_whole_release_and_a_full_one_is_replayed():
    fresh_release_state()
    unsorted = Q.replace(" ORDER BY k", "")  # rows leave the release one by one (a sort would take them all)
    before = spent("dp_c_alice")
    with connect("dp_c_alice", autocommit=False) as c:
        cur = c.cursor(name="half")
        cur.execute(unsorted)
        half = cur.fetchmany(1)
        c.commit()
    assert spent("dp_c_alice") - before == Decimal("0.75")
    # the release was paid whole: closing the cursor ran it to its end and stored it
    whole = run(unsorted)
    assert spent("dp_c_alice") - before == Decimal("0.75"), "a release read halfway was paid again"
    assert half[0] in whole and len(whole) == 4, (half, whole)
    first = run(Q)
    with connect("dp_c_alice", autocommit=False) as c:
        cur = c.cursor(name="full", scrollable=True)
        cur.execute(Q)
        rows = cur.fetchall()
        cur.scroll(0, mode="absolute")
        again = cur.fetchall()
        c.commit()
    assert rows == first == again
    assert sorted(whole) == first


LEVEL = "SELECT k, dp_sum(x, 0, 1000, 0.5) AS s, dp_count(x, 0.25) AS n FROM t GROUP BY k"


def check_the_same_level_under_any_post_processing_is_one_release():
    """The key is the DP level, not the statement: another ORDER BY, LIMIT, alias, outer query,
    join or BI tool wrapper around the same level reuses its release, free, with the same values."""
    fresh_release_state()
    with connect() as c:
        c.execute("CREATE TABLE IF NOT EXISTS region_names (k int PRIMARY KEY, name text NOT NULL)")
        c.execute("INSERT INTO region_names SELECT g, 'r' || g FROM generate_series(0, 3) g ON CONFLICT DO NOTHING")
        c.execute("GRANT SELECT ON region_names TO dp_c_alice")
    before = spent("dp_c_alice")
    released = {r[0]: (r[1], r[2]) for r in run(LEVEL)}
    assert spent("dp_c_alice") - before == Decimal("0.75")
    variants = {
        "ORDER BY a key": (LEVEL + " ORDER BY k DESC", lambda r: [(k, s, n) for k, s, n in r]),
        "ORDER BY a release, LIMIT": (LEVEL + " ORDER BY n DESC, k LIMIT 2", lambda r: r),
        "aliases": ("SELECT k AS key, dp_sum(x, 0, 1000, 0.5) AS total, dp_count(x, 0.25) FROM t AS rows GROUP BY k",
                    lambda r: r),
        "Superset's wrapper": (f"SELECT k AS k, s AS s, n AS n FROM ({LEVEL}) AS virtual_table ORDER BY s DESC LIMIT 10000",
                               lambda r: r),
        "an outer filter": (f"SELECT * FROM ({LEVEL}) q WHERE k = 1", lambda r: r),
        "an outer aggregate": (f"SELECT count(*), 0, 0 FROM ({LEVEL}) q", None),
        "a join with a public table": (f"SELECT q.k, q.s, q.n, r.name FROM ({LEVEL}) q JOIN region_names r USING (k)",
                                       lambda r: [x[:3] for x in r]),
        "a WITH query": (f"WITH q AS ({LEVEL}) SELECT * FROM q ORDER BY s", lambda r: r),
        "two copies joined": (f"SELECT a.k, a.s, b.n FROM ({LEVEL}) a JOIN ({LEVEL}) b USING (k)", lambda r: r),
    }
    for name, (sql, rows_of) in variants.items():
        b = spent("dp_c_alice")
        rows = run(sql)
        assert spent("dp_c_alice") == b, f"{name}: the same level was paid again"
        if rows_of is None:
            assert rows == [(4, 0, 0)], (name, rows)
            continue
        for k, s, n in rows_of(rows):
            assert released[k] == (s, n), (name, k, s, n, released)
    with connect("dp_c_alice", autocommit=False) as c:
        cur = c.cursor(name="wrapped")
        b = spent("dp_c_alice")
        cur.execute(f"SELECT * FROM ({LEVEL}) q ORDER BY k")
        assert {k: (s, n) for k, s, n in cur.fetchall()} == released
        c.commit()
    assert spent("dp_c_alice") == b


def check_a_limit_pays_once_and_the_next_page_is_free():
    fresh_release_state()
    before = spent("dp_c_alice")
    page1 = run(LEVEL + " ORDER BY k LIMIT 2")
    assert spent("dp_c_alice") - before == Decimal("0.75")
    page2 = run(LEVEL + " ORDER BY k LIMIT 2 OFFSET 2")
    assert spent("dp_c_alice") - before == Decimal("0.75"), "the next page was paid"
    assert [r[0] for r in page1 + page2] == [0, 1, 2, 3]
    assert run(LEVEL + " ORDER BY k") == page1 + page2
    # a LIMIT that stops a release early (rows leave one by one, unsorted) stores it whole too
    fresh_release_state()
    before = spent("dp_c_alice")
    one = run(LEVEL + " LIMIT 1")
    allrows = run(LEVEL)
    assert spent("dp_c_alice") - before == Decimal("0.75"), "LIMIT 1 left the release unstored"
    assert one[0] in allrows and len(allrows) == 4
    # Superset's probe of a virtual dataset's columns
    b = spent("dp_c_alice")
    run(f"SELECT * FROM ({LEVEL}) AS virtual_table LIMIT 1")
    assert spent("dp_c_alice") == b


def check_a_limit_over_a_parallel_level_ends_cleanly():
    """A statement's run shuts its plan down once its top node is done (a LIMIT's included): parallel
    workers and their shared memory are gone. A level runs to its end at its first fetch, so a
    release read partly through a parallel plan was computed whole, while its workers ran, and stored:
    the next query is free."""
    fresh_release_state()
    with connect("dp_c_alice") as c:
        for s in ("max_parallel_workers_per_gather = 2", "parallel_setup_cost = 0", "parallel_tuple_cost = 0",
                  "min_parallel_table_scan_size = 0", "enable_hashagg = off", "parallel_leader_participation = on"):
            c.execute("SET " + s)
        b = spent("dp_c_alice")
        first = c.execute(LEVEL + " LIMIT 1").fetchall()
        assert len(first) == 1 and spent("dp_c_alice") - b == Decimal("0.75")
        rows = c.execute(LEVEL + " ORDER BY k").fetchall()
        assert [r[0] for r in rows] == [0, 1, 2, 3], rows
        assert spent("dp_c_alice") - b == Decimal("0.75"), spent("dp_c_alice") - b
        print(f"    parallel LIMIT 1, then the whole release: {spent('dp_c_alice') - b} spent")


def check_a_having_that_calls_a_user_function_is_never_cached():
    """HAVING decides which groups a level releases, before they are stored: a function there that
    reads a table (or the role, or the clock) would make a stored release stale, or hand one role's
    filtered release to another. Such a level is released afresh each time; a HAVING of built-in
    immutable functions is cached as any level."""
    with connect() as c:
        c.execute("DROP TABLE IF EXISTS mine CASCADE")
        c.execute("CREATE TABLE mine (k int PRIMARY KEY, ok bool NOT NULL)")
        c.execute("INSERT INTO mine VALUES (0, true), (1, false), (2, false), (3, false)")
        c.execute("CREATE FUNCTION okk(int) RETURNS bool STABLE LANGUAGE sql AS 'SELECT ok FROM mine WHERE k = $1'")
        c.execute("GRANT SELECT ON mine TO dp_c_alice")
    q = "SELECT k, dp_count(x, 0.5) FROM t GROUP BY k HAVING okk(k) OR dp_count(x, 0.5) < -1000000"
    b = spent("dp_c_alice")
    assert [r[0] for r in run(q)] == [0]
    with connect() as c:
        c.execute("UPDATE mine SET ok = NOT ok")
    assert sorted(r[0] for r in run(q)) == [1, 2, 3], "a stale HAVING was replayed"
    assert spent("dp_c_alice") - b == Decimal("1.0")
    pure = "SELECT k, dp_count(x, 0.5) FROM t GROUP BY k HAVING abs(dp_count(x, 0.5)) > 0"
    first = run(pure)
    b = spent("dp_c_alice")
    assert run(pure) == first and spent("dp_c_alice") == b, "a HAVING of built-in functions was not cached"


def check_rows_replayed_from_another_plan_still_follow_order_by():
    """A release stored by a hashed aggregation (rows in no order) and replayed under ORDER BY of its
    keys, where the planner would otherwise have relied on a sorted aggregation's order."""
    fresh_release_state()
    with connect("dp_c_alice") as c:
        c.execute("SET enable_sort = off")  # a hashed aggregation stores the release
        stored = c.execute(LEVEL).fetchall()
        b = spent("dp_c_alice")
        c.execute("RESET enable_sort")
        c.execute("SET enable_hashagg = off")  # a sorted aggregation would give the order by itself
        for direction in ("", " DESC"):
            rows = c.execute(LEVEL + f" ORDER BY k{direction}").fetchall()
            keys = [r[0] for r in rows]
            assert keys == sorted(keys, reverse=bool(direction)), (direction, rows)
            assert sorted(rows) == sorted(stored)
        rows = c.execute(f"SELECT DISTINCT ON (n > 0) k, n FROM ({LEVEL}) q ORDER BY n > 0, k").fetchall()
        assert rows == [min((r[0], r[2]) for r in stored)] or len(rows) <= 2, rows
    assert spent("dp_c_alice") == b, "a replay under another plan was paid"


def check_grouping_sets_under_another_order_by_are_the_same_release():
    """ROLLUP, GROUPING SETS and GROUPING() name the keys by the parser's sort/group numbers, which
    ORDER BY items take first: renumbered in the key, so another ORDER BY reuses the release."""
    fresh_release_state()
    rollup = "SELECT k, x > 500 AS big, GROUPING(k) AS g, dp_count(x, 0.5) AS n FROM t GROUP BY ROLLUP (k, 2)"

    def receipts(c):
        return c.execute("SELECT count(*) FROM dp.ledger WHERE role_name = 'postgres'").fetchone()[0]

    with connect() as c:  # a superuser: keys by partition selection need a delta this role's budget has
        c.execute("SET dp.require_budget = off")
        before = receipts(c)
        first = c.execute(rollup + " ORDER BY 1, 2").fetchall()
        paid = receipts(c) - before
        assert paid > 0, paid
        for order in (" ORDER BY n DESC", " ORDER BY g, k DESC", ""):
            rows = c.execute(rollup + order).fetchall()
            assert sorted(rows, key=repr) == sorted(first, key=repr), order
        assert receipts(c) - before == paid, "the same ROLLUP level under another ORDER BY was paid again"


def check_another_level_is_another_release():
    fresh_release_state()
    run(LEVEL)
    for other, cost in (
        (LEVEL.replace("FROM t", "FROM t WHERE k > 0"), "0.75"),
        (LEVEL.replace(", dp_count(x, 0.25) AS n", ""), "0.5"),
        (LEVEL.replace("0, 1000, 0.5", "0, 999, 0.5"), "0.75"),
        (LEVEL + " HAVING dp_count(x, 0.25) > 0", "0.75"),
        (LEVEL.replace("dp_count(x, 0.25)", "dp_count(x, 0.3)"), "0.8"),
    ):
        b = spent("dp_c_alice")
        run(other)
        assert spent("dp_c_alice") - b == Decimal(cost), other
    # a level that reads a WITH query of its statement (here in HAVING, which decides which rows
    # it releases) is keyed with the statement
    for k, rows in ((1, 4), (1000, 0)):
        q = (f"WITH w AS (SELECT {k} AS v) SELECT * FROM (SELECT k, dp_count(x, 0.5) AS n FROM t GROUP BY k "
             "HAVING dp_count(x, 0.5) > (SELECT v FROM w)) s")
        b = spent("dp_c_alice")
        first = run(q)
        assert spent("dp_c_alice") - b == Decimal("0.5") and len(first) == rows, (q, first)
        assert run(q) == first and spent("dp_c_alice") - b == Decimal("0.5"), q


def check_a_snapshot_older_than_a_write_neither_reuses_nor_stores():
    fresh_release_state()
    old = connect("dp_c_alice", autocommit=False)
    try:
        old.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        old.execute("SELECT 1")  # the snapshot is taken here
        with connect() as c:
            c.execute("INSERT INTO t VALUES (8001, 1, 999)")
        new = run(COUNT)  # released and stored on the new data
        before = spent("dp_c_alice")
        stale = old.execute(COUNT).fetchall()  # computed on the old data: no reuse of the new release
        assert spent("dp_c_alice") - before == Decimal("0.5"), "an older snapshot reused a newer release"
        old.commit()
        before = spent("dp_c_alice")
        assert run(COUNT) == new, "the release of the old snapshot replaced the current one"
        assert spent("dp_c_alice") == before
        del stale
    finally:
        old.close()
        with connect() as c:
            c.execute("DELETE FROM t WHERE id = 8001")


def check_reading_a_partition_sees_writes_through_its_parent():
    with connect() as c:
        c.execute("DROP TABLE IF EXISTS p")
        c.execute("CREATE TABLE p (id int, k int NOT NULL, x float8) PARTITION BY LIST (k)")
        c.execute("CREATE TABLE p1 PARTITION OF p FOR VALUES IN (1)")
        c.execute("CREATE TABLE p2 PARTITION OF p FOR VALUES IN (2)")
        c.execute("INSERT INTO p SELECT g, 1 + g % 2, g FROM generate_series(1, 100) g")
        c.execute("GRANT SELECT ON p, p1, p2 TO dp_c_alice")
    run("SELECT dp_count(x, 0.5) FROM p1")
    run("SELECT dp_count(x, 0.5) FROM p")
    before = spent("dp_c_alice")
    with connect() as c:
        c.execute("INSERT INTO p VALUES (101, 1, 1)")  # routed into p1 through p
    run("SELECT dp_count(x, 0.5) FROM p1")
    assert spent("dp_c_alice") - before == Decimal("0.5"), "a write through the parent left the partition's release current"
    with connect() as c:
        c.execute("INSERT INTO p2 VALUES (102, 2, 1)")  # straight into a partition
    run("SELECT dp_count(x, 0.5) FROM p")
    assert spent("dp_c_alice") - before == Decimal("1.0"), "a write to a partition left the parent's release current"


def check_a_write_to_a_joined_public_table_makes_the_release_stale():
    with connect() as c:
        c.execute("DROP TABLE IF EXISTS region")
        c.execute("CREATE TABLE region (k int PRIMARY KEY, name text NOT NULL)")
        c.execute("INSERT INTO region SELECT g, 'r' || g FROM generate_series(0, 3) g")
        c.execute("GRANT SELECT ON region TO dp_c_alice")
    q = "SELECT dp_count(t.x, 0.5) FROM t JOIN region r ON r.k = t.k WHERE r.name = 'r1'"
    run(q)
    before = spent("dp_c_alice")
    run(q)
    assert spent("dp_c_alice") == before
    with connect() as c:
        c.execute("UPDATE region SET name = 'r1' WHERE k = 2")
    run(q)
    assert spent("dp_c_alice") - before == Decimal("0.5"), "a write to the joined table left the release current"


def check_concurrent_writers_never_leave_a_stale_release():
    """Writers commit while the same query runs again and again: every answer that cost nothing must
    equal a release made after the last committed write."""
    fresh_release_state()
    stop = threading.Event()
    errors = []

    def writer():
        try:
            with connect() as c:
                i = 0
                while not stop.is_set():
                    i += 1
                    c.execute("UPDATE t SET x = %s WHERE id = 10", (float(i % 1000),))
        except Exception as e:  # reported below
            errors.append(e)

    w = threading.Thread(target=writer, daemon=True)
    w.start()
    try:
        with connect("dp_c_alice") as c:
            reused = fresh = 0
            for _ in range(200):
                before = c.execute("SELECT epsilon_spent FROM dp.my_budget").fetchone()[0]
                c.execute(COUNT)
                if c.execute("SELECT epsilon_spent FROM dp.my_budget").fetchone()[0] == before:
                    reused += 1
                else:
                    fresh += 1
    finally:
        stop.set()
        w.join()
    assert not errors, errors
    assert fresh > 0, "a write stream never made the release stale"
    # once the writes stop, the release is reused again
    run(COUNT)
    before = spent("dp_c_alice")
    run(COUNT)
    assert spent("dp_c_alice") == before


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="/tmp")
    ap.add_argument("--port", type=int, default=25433)
    ARGS = ap.parse_args()
    setup()
    run_checks(globals(), "cache")


if __name__ == "__main__":
    main()
