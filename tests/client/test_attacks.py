#!/usr/bin/env python3
"""Attacks of an untrusted analyst that need real sessions: notices, isolation levels, the plan cache,
the release cache and tables the analyst owns. Each recovered one person's value (Bob, id 7, income
123456) for about 0 epsilon before its fix; each check is named after its attack and asserts what the
analyst sees now.

Run by scripts/test.sh:
    /usr/bin/python3 tests/client/test_attacks.py --host /tmp --port 25433
Prints one line per check and "attacks: N passed, M failed"; exits non-zero on any failure.
"""
import argparse
from decimal import Decimal

import psycopg
from psycopg import errors as E
from psycopg.types.string import TextLoader

from harness import refused, run_checks

ARGS = None
DB = "pg_dp_attacks"
ANALYST = "dp_a_mallory"


def connect(user="postgres", **kw):
    return psycopg.connect(host=ARGS.host, port=ARGS.port, dbname=DB, user=user, autocommit=True, **kw)


def setup():
    with psycopg.connect(host=ARGS.host, port=ARGS.port, dbname="postgres", user="postgres", autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {DB}")
        c.execute(f"DROP ROLE IF EXISTS {ANALYST}")
        c.execute(f"CREATE ROLE {ANALYST} LOGIN")
    with connect() as c:
        c.execute("CREATE EXTENSION pg_dp")
        c.execute("""CREATE TABLE patients AS
                     SELECT g AS id, CASE WHEN g = 7 THEN 'Bob' ELSE 'p' || g END AS name, g % 10 AS region,
                            CASE WHEN g = 7 THEN 123456 ELSE 30000 + (g * 37) % 50000 END::float8 AS income,
                            'n' || g AS note
                       FROM generate_series(1, 1000) g""")
        c.execute("ALTER TABLE patients ADD PRIMARY KEY (id)")
        # an ordinary index and statistics, as autovacuum would make them
        c.execute("CREATE INDEX ON patients (income)")
        c.execute("ANALYZE patients")
        c.execute("SELECT dp.protect_table('patients')")
        c.execute("CREATE TABLE regions AS SELECT g AS id, 'r' || g AS rname FROM generate_series(0, 9) g")
        c.execute("ALTER TABLE regions ADD PRIMARY KEY (id)")
        c.execute(f"GRANT SELECT ON regions TO {ANALYST}")
        c.execute("CREATE TABLE writable AS SELECT g AS id FROM generate_series(0, 9) g")
        c.execute("ALTER TABLE writable ADD PRIMARY KEY (id)")
        c.execute(f"GRANT SELECT, INSERT ON writable TO {ANALYST}")
        c.execute(f"CREATE SCHEMA an AUTHORIZATION {ANALYST}")
        c.execute("SELECT dp.grant_budget(%s, 100, 0.5)", (ANALYST,))
        for r, budget in (("dp_a_other", 100), ("dp_a_revoked", 1), ("dp_a_cursor", 5)):
            c.execute(f"DROP ROLE IF EXISTS {r}")
            c.execute(f"CREATE ROLE {r} LOGIN")
            c.execute("SELECT dp.grant_budget(%s, %s)", (r, budget))
        c.execute("DROP ROLE IF EXISTS dp_a_team")
        c.execute("CREATE ROLE dp_a_team NOLOGIN")
        c.execute("GRANT dp_a_team TO dp_a_cursor")
        c.execute("ALTER ROLE dp_a_cursor SET dp.fail_inside_level = '22012'")


def spent():
    with connect() as c:
        return c.execute("SELECT epsilon_spent FROM dp.budgets WHERE role = %s::regrole", (ANALYST,)).fetchone()[0]


def check_attack_out_of_memory_from_a_huge_constant():
    # a 537 MB constant lowercased by ILIKE only on Bob's row ran out of memory (53200) only when Bob's
    # income passed the test: a bit per query, and out of memory did not forfeit
    q = ("SELECT dp_count(id, 1e-9) FROM patients WHERE (CASE WHEN name = 'Bob' AND income > 123455 "
         "THEN repeat('x', 536870911) ELSE 'b' END) {} 'zz'")
    with connect(ANALYST) as c:
        e = refused(c, q.format("ILIKE"), E.InsufficientPrivilege)
        assert "a constant of 536870915 bytes in the subject of a LIKE in the input of dp_count" in str(e), e
        e = refused(c, q.format("<"), E.InsufficientPrivilege)
        assert "a constant of 536870915 bytes in the input of dp_count: constants there are at most 65536 bytes" in str(e), e
        # as a bind parameter of a prepared statement (a generic plan evaluates it per row)
        c.execute("PREPARE big(text) AS SELECT dp_count(id, 1e-9) FROM patients "
                  "WHERE (CASE WHEN name = 'Bob' AND income > 123455 THEN $1 ELSE 'b' END) < 'zz'")
        e = refused(c, "EXECUTE big(repeat('x', 300000))", E.ProgramLimitExceeded)
        assert "bind parameter $1 of a DP query on a protected table is 300004 bytes" in str(e), e
        # constants of ordinary size stay admitted
        c.execute("EXECUTE big(repeat('x', 1000))").fetchall()


def check_attack_join_probes_into_a_table_the_analyst_controls():
    # a nested-loop probe into the analyst's own table left traces of which keys were probed (pruned
    # pages, where an UPDATE lands), so Bob's income came back in two queries; huge values there made
    # one joined row cost seconds
    with connect(ANALYST) as c:
        c.execute("CREATE TABLE an.inc (v float8 PRIMARY KEY)")
        e = refused(c, "SELECT dp_count(p.id, 1e-9) FROM patients p JOIN an.inc i ON i.v = p.income WHERE p.name = 'Bob'",
                    E.InsufficientPrivilege)
        assert "owns or may write to inc" in str(e), e
        # a DBA's table the analyst may write to: refused too; one it may only read: admitted
        refused(c, "SELECT dp_count(p.id, 1e-9) FROM patients p JOIN writable w ON w.id = p.region", E.InsufficientPrivilege)
        c.execute("SELECT dp_count(p.id, 1e-9) FROM patients p JOIN regions r ON r.id = p.region").fetchall()


def check_attack_serializable_predicate_locks_show_the_rows_read():
    # SERIALIZABLE took predicate locks on exactly the rows a join probed (pg_locks): Bob's income in one
    # query at 1e-9 epsilon
    with connect(ANALYST) as c:
        with c.transaction():
            c.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
            e = refused(c, "SELECT dp_count(p.id, 1e-9) FROM patients p JOIN regions r ON r.id = p.region WHERE p.name = 'Bob'",
                        E.InsufficientPrivilege)
            assert "in a SERIALIZABLE transaction" in str(e), e
        with c.transaction():
            c.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            c.execute("SELECT dp_count(id, 1e-9) FROM patients").fetchall()


def check_attack_a_collation_warning_on_the_rows_that_reach_it():
    # an ICU collation with a wrong recorded version warns the first time a session uses it, which was
    # the first time a row reached a comparison under it: Bob's income in 20 queries
    with connect() as c:
        c.execute("DROP COLLATION IF EXISTS an.fake")
        c.execute("CREATE COLLATION an.fake (provider = icu, locale = 'en', version = '0-fake')")
    seen = []
    for threshold in (0, 10 ** 9):  # Bob's row reaches the comparison, then no row does
        c = connect(ANALYST)
        notices = []
        c.add_notice_handler(lambda d: notices.append(d.message_primary))
        with c:
            c.execute(f"SELECT dp_count(CASE WHEN name = 'Bob' AND income > {threshold} THEN (note COLLATE an.fake < 'zz') END, 1e-9) "
                      "FROM patients").fetchall()
        seen.append(sum("version mismatch" in n for n in notices))
    assert seen == [1, 1], f"the warning depends on the data: {seen}"


def check_attack_the_plan_cache_reveals_the_largest_value():
    # after five custom plans the plan cache picks the generic one if it is cheaper than their average,
    # and the custom plans' cost came from the largest income, read from the index while planning:
    # pg_prepared_statements.generic_plans told, for free (LIMIT 0), whether X was below it
    def generic_after(c, x):
        c.execute("DEALLOCATE ALL")
        c.execute("PREPARE q(float8) AS SELECT dp_count(id, 1e-9) FROM patients WHERE income > $1 LIMIT 0")
        for _ in range(6):
            c.execute(f"EXECUTE q({float(x)!r})").fetchall()
        return c.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'q'").fetchone()

    with connect(ANALYST, prepare_threshold=None) as c:
        for cost in (0.0025, 0.005, 0.01, 0.015, 0.02, 0.03):
            c.execute(f"SET cpu_operator_cost = {cost}")
            below, above = generic_after(c, 123000), generic_after(c, 123457)
            assert below == above, f"cpu_operator_cost {cost}: {below} below Bob's income, {above} above"


def check_attack_the_size_of_a_cached_release_counts_hidden_groups():
    # the cache stored the rows the selection of private keys then dropped: whether a release fit the
    # cache (a repeat is free) told whether Bob's one-person group existed
    tag = [0]

    def cached(c, pad, x):
        tag[0] += 1
        # the padding is in the level's select list, so in the key of its release (a constant outside
        # the level would not be)
        q = (f"SELECT k, n, pad FROM (SELECT CASE WHEN name = 'Bob' AND income > {x:09d} THEN 1 ELSE 0 END AS k, "
             f"dp_count(id, 1e-9) AS n, '{tag[0]:06d}{'x' * pad}' AS pad FROM patients GROUP BY 1) s")
        before = c.execute("SELECT epsilon_spent FROM dp.my_budget").fetchone()[0]
        c.execute(q).fetchall()
        middle = c.execute("SELECT epsilon_spent FROM dp.my_budget").fetchone()[0]
        c.execute(q).fetchall()
        return c.execute("SELECT epsilon_spent FROM dp.my_budget").fetchone()[0] == middle and middle > before

    with connect(ANALYST) as c:
        c.execute("SET dp.group_selection_epsilon = 0.001")
        c.execute("SET dp.group_selection_delta = 1e-12")
        # calibrate: the longest padding for which the release of one group (nobody passes) is cached
        lo, hi = 0, 4_000_000
        assert cached(c, lo, 999999999) and not cached(c, hi, 999999999)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if cached(c, mid, 999999999):
                lo = mid
            else:
                hi = mid
        # Bob's group exists at x = 0 and is hidden by the selection: the release is the same one group
        assert cached(c, lo, 0) == cached(c, lo, 999999999), "a hidden group counted towards the cached size"


def check_attack_stale_twin_values_after_a_failed_statement_skip_the_selection():
    # a statement that failed inside a PL/pgSQL exception block left its last group's values keyed by
    # the address of its aggregation state; the next statement at that address took them for its own
    # twins' values without running its final functions: every one-person group (id, income) came out,
    # past the selection of private keys
    with connect(ANALYST) as c:
        notices = []
        c.add_notice_handler(lambda d: notices.append(d.message_primary))
        c.execute("SET dp.group_selection_epsilon = 0.01")
        c.execute(r"""DO $$ DECLARE x text; r text; BEGIN
          x := pg_current_xact_id()::text;
          FOR k IN 1..16 LOOP FOR i IN 1..2 LOOP BEGIN
            EXECUTE 'SELECT string_agg(k || '':'' || m, '','' ORDER BY k) || CASE WHEN $1 THEN (1 / (count(*) - count(*)))::text ELSE '''' END
                     FROM (SELECT CASE WHEN $1 THEN 0 ELSE id END AS k, LEAST(income, $2) AS m, dp_count(id, 0.001) c
                           FROM patients WHERE id <= $3 GROUP BY 1, 2) s'
              INTO r USING (i = 1), CASE WHEN i = 1 THEN 0 ELSE 1000000000 END::float8, CASE WHEN i = 1 THEN 1000 ELSE 12 END;
            IF r IS NOT NULL THEN RAISE NOTICE 'attempt %: %', k, r; END IF;
          EXCEPTION WHEN division_by_zero THEN NULL; END; END LOOP; END LOOP; END $$""")
        leaked = [n for n in notices if "attempt" in n]
        assert not leaked, f"one-person groups released: {leaked[:2]}"


def check_attack_a_failed_statement_poisons_the_release_cache():
    # a cacheable statement that failed inside an exception block left "store when done" behind; the
    # next, uncacheable statement at the same addresses (over the analyst's own table of 42s) was
    # stored under the first one's key, and the first query then answered 42, for free
    with connect() as c:
        c.execute("DROP TABLE IF EXISTS an.fake_patients")
        c.execute("CREATE TABLE an.fake_patients AS SELECT g AS id, 42::float8 AS income FROM generate_series(1, 20000) g")
        c.execute(f"ALTER TABLE an.fake_patients OWNER TO {ANALYST}")
    with connect(ANALYST) as c:
        c.execute("""CREATE OR REPLACE FUNCTION an.poison(qf text, qs text, n int) RETURNS float8 LANGUAGE plpgsql AS $f$
            DECLARE x text; c refcursor; r record; res float8; q text;
            BEGIN
              FOR i IN 1..n LOOP
                x := CASE WHEN i = n THEN pg_current_xact_id()::text ELSE '' END;
                q := CASE WHEN i < n THEN qf ELSE qs END;
                BEGIN
                  OPEN c FOR EXECUTE q;
                  IF i < n THEN RAISE EXCEPTION 'drop the cursor'; END IF;
                  FETCH c INTO res; FETCH c INTO r; CLOSE c;
                EXCEPTION WHEN raise_exception THEN NULL;
                END;
              END LOOP;
              RETURN res;
            END $f$""")
        q = "SELECT dp_avg(income, 0, 200000, 0.5) FROM public.patients"
        c.execute("SELECT an.poison(%s, 'SELECT dp_avg(income, 0, 200000, 0.5) FROM an.fake_patients', 8)", (q,))
        v = c.execute(q).fetchone()[0]
        assert v > 1000, f"the release cache answered {v}, the mean of the analyst's own table"


def check_attack_a_cursor_fetched_after_set_role_forfeits_the_payer():
    # the forfeit went to the role that fetched the failing row, not the one that was charged: an
    # analyst escaped it with SET ROLE to a role without a budget (and could aim it at a victim)
    with connect("dp_a_cursor") as c:
        with c.transaction():
            c.execute("DECLARE cur CURSOR FOR SELECT dp_count(id, 0.01) FROM patients")
            c.execute("SET ROLE dp_a_team")
            refused(c, "FETCH ALL FROM cur", E.DivisionByZero)
    with connect() as c:
        payer = c.execute("SELECT epsilon_spent, epsilon_granted FROM dp.budgets WHERE role = 'dp_a_cursor'::regrole").fetchone()
        assert payer[0] == payer[1], f"the payer kept its budget: {payer}"
        team = c.execute("SELECT count(*) FROM dp.ledger WHERE role = 'dp_a_team'::regrole").fetchone()[0]
        assert team == 0, "the role that fetched was charged"


def check_attack_shared_releases_to_a_role_whose_budget_was_revoked():
    # with releases shared across roles, a role whose budget was revoked (nothing remains) still
    # received what another role paid for
    with connect() as c:
        c.execute(f"ALTER DATABASE {DB} SET dp.release_cache_sharing = 'database'")
        c.execute("SELECT dp.revoke_budget('dp_a_revoked')")
    try:
        q = "SELECT dp_avg(income, 0, 200000, 0.5) FROM patients WHERE region = 3"
        with connect("dp_a_other") as c:
            first = c.execute(q).fetchone()
        with connect("dp_a_revoked") as c:
            refused(c, q, E.InsufficientResources)
        with connect(ANALYST) as c:
            assert c.execute(q).fetchone() == first
    finally:
        with connect() as c:
            c.execute(f"ALTER DATABASE {DB} RESET dp.release_cache_sharing")


def check_attack_a_failed_cursor_leaves_a_cache_store_behind():
    # a cursor declared in the transaction registered "store this release" at DECLARE; its FETCH failed
    # inside a savepoint (an error in its post-processing: no forfeit), ROLLBACK TO SAVEPOINT kept the
    # action (it was not made in the savepoint) and CLOSE dropped the failed cursor without
    # ExecutorEnd; the next cursor at the same addresses stored its rows (the analyst's own table)
    # under the first query's key, and the first query then answered them, for free
    with connect() as c:
        c.execute("DROP TABLE IF EXISTS an.fake_regions")
        c.execute("CREATE TABLE an.fake_regions AS SELECT 'r' || (g % 10) AS rname, g AS v FROM generate_series(1, 77770) g")
        c.execute(f"ALTER TABLE an.fake_regions OWNER TO {ANALYST}")
        c.execute("DROP SEQUENCE IF EXISTS an.sq")
        c.execute("CREATE SEQUENCE an.sq")
        c.execute(f"ALTER SEQUENCE an.sq OWNER TO {ANALYST}")
    with connect(ANALYST) as c:
        c.execute("""CREATE OR REPLACE FUNCTION an.boom() RETURNS int LANGUAGE plpgsql AS
                     $$ BEGIN IF current_setting('my.boom', true) = '1' THEN RAISE EXCEPTION 'boom'; END IF; RETURN 0; END $$""")
        q1 = "SELECT r.rname, dp_count(p.id, 1) AS n, an.boom() AS b FROM patients p JOIN regions r ON r.id = p.region GROUP BY r.rname"
        q2 = "SELECT rname, dp_count(v, 1), an.boom() + (SELECT 0 FROM an.sq) FROM an.fake_regions GROUP BY rname"
        c.execute("SET my.boom = '0'")
        for _ in range(3):
            c.execute(f"SELECT count(*) FROM ({q2}) x").fetchall()
            with c.transaction():
                c.execute(f"DECLARE c1 CURSOR FOR {q1}")
                c.execute("SET my.boom = '1'")
                try:
                    with c.transaction():
                        c.execute("FETCH ALL c1").fetchall()
                except psycopg.errors.RaiseException:
                    pass
                c.execute("SET my.boom = '0'")
                c.execute("CLOSE c1")
                c.execute(f"DECLARE c2 CURSOR FOR {q2}")
                c.execute("MOVE ALL c2")
                c.execute("CLOSE c2")
        counts = [n for _, n, _ in c.execute(q1).fetchall()]
        assert len(counts) == 10 and max(counts) < 1000, f"the release cache answered another query's rows: {counts}"


def check_attack_a_long_like_pattern_over_a_long_subject_on_one_row():
    # matching takes up to subject x pattern steps: a 60 kB constant in the subject, reached only by
    # Bob's row when his income passed the test, against a 250 kB pattern cost seconds, and the
    # query's time told the bit
    def q(subject_bytes, pattern):
        return ("SELECT dp_count(id, 1e-9) FROM patients WHERE CASE WHEN name = 'Bob' AND income > 123455 "
                f"THEN repeat('a', {subject_bytes}) END LIKE '{pattern}'")
    with connect(ANALYST) as c:
        e = refused(c, q(60000, "%" + "a" * 100 + "b"), E.InsufficientPrivilege)
        assert "a constant of 60004 bytes in the subject of a LIKE in the input of dp_count" in str(e), e
        e = refused(c, q(10, "%" + "a" * 2000 + "b"), E.InsufficientPrivilege)
        assert "the LIKE pattern in the input of dp_count is 2002 bytes long: at most 1024 bytes are allowed" in str(e), e
        # a parameter's size is known only when bound
        c.execute("PREPARE lk(text) AS SELECT dp_count(id, 1e-9) FROM patients WHERE CASE WHEN name = 'Bob' THEN $1 END LIKE '%b%'")
        e = refused(c, "EXECUTE lk('x')", E.InsufficientPrivilege)
        assert "a parameter in the subject of a LIKE in the input of dp_count" in str(e), e
        # ordinary patterns and small constants stay admitted
        c.execute(q(200, "%" + "a" * 500 + "b")).fetchall()
        c.execute("SELECT dp_count(id, 1e-9) FROM patients WHERE COALESCE(name, 'x') ILIKE '%bo%'").fetchall()


def check_attack_a_like_pattern_that_overflows_the_stack():
    # PostgreSQL's matcher recurses once per %: 20,000 of them ran out of stack (54001) only on the
    # rows that reached the LIKE
    with connect(ANALYST) as c:
        e = refused(c, "SELECT dp_count(id, 1e-9) FROM patients WHERE CASE WHEN name = 'Bob' AND income > 123455 "
                       "THEN 'aaaa' END LIKE '" + "%a" * 65 + "'", E.InsufficientPrivilege)
        assert "has 65 %: at most 64 are allowed" in str(e), e
        c.execute("SELECT dp_count(id, 1e-9) FROM patients WHERE name LIKE '" + "%a" * 64 + "'").fetchall()


def check_attack_trace_sort_turned_on_after_planning():
    # trace_sort is refused when a statement is planned; turned on between DECLARE and FETCH (or by
    # set_config inside the statement) it printed the sorts of the level's rows, with their counts
    with connect(ANALYST) as c:
        notices = []
        c.add_notice_handler(lambda d: notices.append(d.message_primary))
        with c.transaction():
            c.execute("SET LOCAL enable_hashagg = off")
            c.execute("DECLARE cur CURSOR FOR SELECT region, dp_count(id, 0.01) FROM patients "
                      "WHERE income > 100000 GROUP BY region")
            c.execute("SET LOCAL client_min_messages = log")
            c.execute("SET LOCAL trace_sort = on")
            e = refused(c, "FETCH ALL FROM cur", E.InsufficientPrivilege)
            assert "trace_sort would print" in str(e), e
        assert not [n for n in notices if "sort" in n.lower()], notices


def check_attack_an_outer_condition_moved_into_a_level_loads_a_collation():
    # a leakproof condition of the outer query moves into the level (the security barrier lets it):
    # its collation was loaded, with its version warning, only when a row reached it
    with connect() as c:
        c.execute("DROP COLLATION IF EXISTS an.fake_outer")
        c.execute("CREATE COLLATION an.fake_outer (provider = icu, locale = 'en', version = '0-fake')")
    seen = []
    for threshold in (0, 10 ** 9):
        c = connect(ANALYST)
        notices = []
        c.add_notice_handler(lambda d: notices.append(d.message_primary))
        with c:
            c.execute("SET dp.group_selection_epsilon = 0.001")
            c.execute("SELECT * FROM (SELECT region, income, dp_count(id, 1e-9) AS n FROM patients WHERE name = 'Bob' "
                      "GROUP BY region, income) s "
                      f"WHERE CASE WHEN s.income > {threshold} THEN s.region::text < 'z' COLLATE an.fake_outer ELSE true END"
                      ).fetchall()
        seen.append(sum("version mismatch" in n for n in notices))
    assert seen == [1, 1], f"the warning depends on the data: {seen}"


def check_attack_an_update_rechecks_a_level_for_a_concurrent_row():
    # a concurrent update of the row an UPDATE was about to change makes PostgreSQL re-run the plan's
    # subqueries for it (EvalPlanQual): a DP level there released a second time for one payment
    with connect() as c:
        c.execute("DROP TABLE IF EXISTS an.t")
        c.execute("CREATE TABLE an.t AS SELECT g AS region, 0 AS v FROM generate_series(0, 9) g")
        c.execute(f"ALTER TABLE an.t OWNER TO {ANALYST}")
    before = spent()
    with connect(ANALYST) as c:
        for q in ("UPDATE an.t SET v = (SELECT dp_count(id, 0.5) FROM patients) WHERE region = 3",
                  "DELETE FROM an.t WHERE v < (SELECT dp_count(id, 0.5) FROM patients)",
                  "SELECT t.v, s.n FROM an.t, (SELECT dp_count(id, 0.5) AS n FROM patients) s FOR UPDATE OF t",
                  "WITH u AS (UPDATE an.t SET v = 1 RETURNING v) SELECT dp_count(id, 0.5) FROM patients"):
            e = refused(c, q, E.InsufficientPrivilege)
            assert "a DP aggregate in a statement with" in str(e), (q, e)
        # INSERT … SELECT stays admitted
        c.execute("INSERT INTO an.t SELECT 99, dp_count(id, 0.5)::int FROM patients")
    assert spent() == before + Decimal("0.5"), (before, spent())


def check_attack_copy_of_pg_class_reads_the_row_estimates():
    # COPY of a table runs no query, so the statistics rules never saw it: COPY pg_class TO STDOUT
    # printed reltuples and relpages of the protected table
    with connect(ANALYST) as c:
        with c.cursor() as cur:
            e = None
            try:
                with cur.copy("COPY pg_class TO STDOUT") as copy:
                    for _ in copy:
                        pass
            except E.InsufficientPrivilege as err:
                e = err
            assert e is not None and "pg_class.reltuples" in str(e), e
            try:
                with cur.copy("COPY pg_catalog.pg_class (relname, reltuples) TO STDOUT") as copy:
                    for _ in copy:
                        pass
                e = None
            except E.InsufficientPrivilege as err:
                e = err
            assert e is not None and "pg_class.reltuples" in str(e), e
            # columns without statistics, and COPY of a query (checked like the query), stay open
            with cur.copy("COPY pg_class (relname, relkind) TO STDOUT") as copy:
                assert sum(1 for _ in copy) > 0


def check_attack_the_wal_position_shows_pages_an_index_scan_pruned():
    # an index scan below a DP aggregate prunes (and writes WAL for) the pages it visits: the WAL
    # insert position before and after told which ones, for free
    with connect(ANALYST) as c:
        for f in ("pg_current_wal_lsn()", "pg_current_wal_insert_lsn()", "pg_logical_emit_message(false, 'x', 'y')"):
            refused(c, f"SELECT {f}", E.InsufficientPrivilege)
        # through a function the analyst writes, PostgreSQL's EXECUTE privilege refuses it too
        c.execute("CREATE OR REPLACE FUNCTION an.lsn() RETURNS text LANGUAGE sql AS 'SELECT pg_current_wal_insert_lsn()::text'")
        refused(c, "SELECT an.lsn()", E.InsufficientPrivilege)


def check_attack_explain_analyze_around_a_function_counts_the_buffers_a_dp_query_read():
    # EXPLAIN of a query on a protected table is refused, but EXPLAIN (ANALYZE, BUFFERS) of a statement
    # that reached the DP query through a function counted the buffers its index scan touched: 12 when
    # id 7 exists, 11 when it does not, for ~0 epsilon; a table release's extra scan gave the page count
    with connect(ANALYST) as c:
        c.execute("""CREATE OR REPLACE FUNCTION an.q(e float8, w text) RETURNS float8 LANGUAGE plpgsql AS $$
                     DECLARE r float8;
                     BEGIN EXECUTE format('SELECT dp_count(id, %s) FROM patients WHERE %s', e, w) INTO r; RETURN r; END $$""")
        c.execute("""CREATE OR REPLACE FUNCTION an.r() RETURNS bigint LANGUAGE sql AS 'SELECT count(*) FROM regions'""")
        before = spent()
        for w in ("id = 7", "id = 100000"):
            e = refused(c, f"EXPLAIN (ANALYZE, BUFFERS) SELECT an.q(1e-9, '{w}')", E.InsufficientPrivilege)
            assert "inside EXPLAIN" in str(e) and "patients" in str(e), e
        # a DP query fired by a trigger of an instrumented INSERT
        c.execute("CREATE TABLE IF NOT EXISTS an.log (x float8)")
        c.execute("""CREATE OR REPLACE FUNCTION an.t() RETURNS trigger LANGUAGE plpgsql AS $$
                     BEGIN PERFORM an.q(1e-9, 'id = 7'); RETURN NEW; END $$""")
        c.execute("CREATE OR REPLACE TRIGGER t BEFORE INSERT ON an.log FOR EACH ROW EXECUTE FUNCTION an.t()")
        e = refused(c, "EXPLAIN (ANALYZE, BUFFERS) INSERT INTO an.log VALUES (1)", E.InsufficientPrivilege)
        assert "inside EXPLAIN" in str(e), e
        # a table release, which reads the table itself
        e = refused(c, "EXPLAIN (ANALYZE, BUFFERS) SELECT dp.release_synthetic('patients', 'syn', ARRAY['region'], 1e-3)",
                    E.InsufficientPrivilege)
        assert "dp.release_synthetic: a synthetic release of protected table patients inside EXPLAIN" in str(e), e
        # an exception handler around the failed statement does not clear the refusal
        c.execute("""CREATE OR REPLACE FUNCTION an.swallow() RETURNS float8 LANGUAGE plpgsql AS $$
                     BEGIN BEGIN PERFORM an.q(1e-9, 'id = 7'); EXCEPTION WHEN others THEN NULL; END;
                           RETURN an.q(1e-9, 'id = 7'); END $$""")
        refused(c, "EXPLAIN (ANALYZE, BUFFERS) SELECT an.swallow()", E.InsufficientPrivilege)
        assert spent() == before, "charged although refused"
        # run by the planner: an IMMUTABLE function with constant arguments is evaluated while EXPLAIN
        # plans, and a STABLE one while it estimates a condition; EXPLAIN (BUFFERS) counted their reads
        # in "Planning: Buffers" (7 against 6), without ANALYZE
        c.execute("""CREATE OR REPLACE FUNCTION an.fi(k int) RETURNS float8 LANGUAGE plpgsql IMMUTABLE AS $$
                     DECLARE r float8; BEGIN SELECT dp_count(id, 1e-9) INTO r FROM patients WHERE id = k; RETURN r; END $$""")
        c.execute("""CREATE OR REPLACE FUNCTION an.fs(k int) RETURNS int LANGUAGE plpgsql STABLE AS $$
                     DECLARE r float8; BEGIN EXECUTE format('SELECT dp_count(id, 1e-9) FROM patients WHERE id = %s', k) INTO r;
                     RETURN 1; END $$""")
        for sql in ("EXPLAIN (BUFFERS, SUMMARY) SELECT an.fi(7)",
                    "EXPLAIN (BUFFERS, SUMMARY) SELECT * FROM regions WHERE id = an.fs(7)",
                    "EXPLAIN SELECT an.fi(7)"):
            e = refused(c, sql, E.InsufficientPrivilege)
            assert "inside EXPLAIN" in str(e), (sql, e)
        # a cursor started (and paid) before an EXPLAIN ANALYZE, fetched inside it by a function: each
        # run of the cursor is checked, so its rows are never read there
        c.execute("""CREATE OR REPLACE FUNCTION an.fetchit(cur refcursor) RETURNS float8 LANGUAGE plpgsql AS $$
                     DECLARE r float8; BEGIN FETCH cur INTO r; RETURN r; END $$""")
        with c.transaction():
            c.execute("DECLARE cc CURSOR FOR SELECT dp_count(id, 1e-9) FROM patients WHERE id = 7 AND region > -123457")
            try:
                with c.transaction():
                    c.execute("EXPLAIN (ANALYZE, BUFFERS) SELECT an.fetchit('cc')")
                raise AssertionError("not refused: a cursor fetched inside EXPLAIN ANALYZE")
            except E.InsufficientPrivilege as e:
                assert "inside EXPLAIN" in str(e), e
        # a cursor fetched outside EXPLAIN runs
        with c.transaction():
            c.execute("DECLARE cd CURSOR FOR SELECT dp_count(id, 1e-9) FROM patients WHERE id = 7 AND region > -123458")
            assert c.execute("FETCH cd").fetchone() is not None
        before = spent()
        # in-test controls: EXPLAIN ANALYZE around a function over a table the analyst may read runs,
        # and the DP function itself, outside EXPLAIN ANALYZE, runs and pays
        plan = "\n".join(r[0] for r in c.execute("EXPLAIN (ANALYZE, BUFFERS) SELECT an.r()").fetchall())
        assert "Buffers" in plan or "Execution Time" in plan, plan
        c.execute("SELECT an.q(0.01, 'id = 7')")
        assert spent() > before
        c.execute("DROP TABLE an.log")


def check_attack_vacuum_verbose_counts_the_buffers_a_brin_summary_read():
    # a BRIN index on an expression that runs a DP query: VACUUM summarizes the new ranges, running
    # the query, and VACUUM (VERBOSE) printed the buffer hits of the whole vacuum, the DP query's index
    # scan included: 60 when Bob's income was the probe, 58 otherwise, for 2 × 0.001 epsilon
    with connect(ANALYST) as c:
        c.execute("DROP TABLE IF EXISTS an.u, an.cfg")
        c.execute("CREATE TABLE an.cfg (th float8)")
        c.execute("""CREATE OR REPLACE FUNCTION an.probe(x int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
                     DECLARE r float8; t float8;
                     BEGIN SELECT th INTO t FROM an.cfg;
                           IF t IS NOT NULL THEN SELECT dp_count(id, 0.001) INTO r FROM patients WHERE income = t; END IF;
                           RETURN x; END $$""")
        c.execute("CREATE TABLE an.u (x int, pad text) WITH (fillfactor = 10)")
        c.execute("CREATE INDEX u_brin ON an.u USING brin ((an.probe(x))) WITH (pages_per_range = 1, autosummarize = off)")
        c.execute("INSERT INTO an.cfg VALUES (123456)")
        # one incompressible row per page (fillfactor 10): VACUUM summarizes the full ranges
        c.execute("""INSERT INTO an.u SELECT 1, (SELECT string_agg(md5(random()::text || g2), '') FROM generate_series(1, 40) g2)
                     FROM generate_series(1, 3)""")
        before = spent()
        e = refused(c, "VACUUM (VERBOSE) an.u", E.InsufficientPrivilege)
        assert "inside VACUUM or ANALYZE" in str(e) and "patients" in str(e), e
        e = refused(c, "CREATE INDEX ON an.u ((an.probe(x)))", E.InsufficientPrivilege)
        assert "inside CREATE INDEX" in str(e), e
        for sql in ("ANALYZE an.u", "REINDEX TABLE an.u", "CLUSTER an.u USING u_brin"):
            refused(c, sql, (E.InsufficientPrivilege, E.FeatureNotSupported))
        assert spent() == before, "charged although refused"
        # control: without the probe's DP query the same maintenance runs
        c.execute("DELETE FROM an.cfg")
        c.execute("VACUUM (VERBOSE) an.u")
        c.execute("DROP TABLE an.u, an.cfg")


def check_attack_a_parallel_safe_function_runs_a_dp_query_inside_a_worker():
    # a worker admitted every statement as its leader's: a DP query started by a PARALLEL SAFE
    # function in a worker was charged nowhere, and EXPLAIN ANALYZE of it printed the exact rows its
    # index scan matched ("actual rows=461"), for 0 epsilon
    with connect(ANALYST) as c:
        c.execute("""CREATE OR REPLACE FUNCTION an.xp(w text) RETURNS SETOF text LANGUAGE plpgsql PARALLEL SAFE AS $$
                     BEGIN RETURN QUERY EXECUTE format('EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, COSTS OFF)
                       SELECT region, dp_count(id, 1e-9) c FROM patients WHERE %s GROUP BY region', w); END $$""")
        c.execute("""CREATE OR REPLACE FUNCTION an.cnt(w text) RETURNS float8 LANGUAGE plpgsql PARALLEL SAFE AS $$
                     DECLARE r float8; BEGIN EXECUTE format('SELECT dp_count(id, 1e-9) FROM patients WHERE %s', w) INTO r;
                     RETURN r; END $$""")
        c.execute("SET force_parallel_mode = on")
        before = spent()
        for sql in ("SELECT * FROM an.xp('income > 50000 AND id < 0')", "SELECT an.cnt('id = 7')",
                    "SELECT an.cnt(w) FROM (VALUES ('id = 7'), ('id = 8')) v(w)"):
            e = refused(c, sql, E.InsufficientPrivilege)
            assert "inside a parallel worker" in str(e), (sql, e)
        assert spent() == before, "charged although refused"
        # control: in the leader, the same function runs its DP query and pays
        c.execute("RESET force_parallel_mode")
        assert c.execute("SELECT an.cnt('id = 7')").fetchone()[0] is not None
        assert spent() > before


def check_attack_the_blind_planner_reads_a_brin_range_map():
    # the planner's cost estimate of a BRIN index reads the index's range map (and GIN's of its
    # metapage): the plan chosen for a restricted role depended on the data
    with connect() as c:
        c.execute("CREATE INDEX IF NOT EXISTS patients_region_brin ON patients USING brin (region)")
        c.execute("SELECT pg_stat_reset()")
    with connect(ANALYST) as c:
        c.execute("SET enable_seqscan = off")
        c.execute("SELECT dp_count(id, 1e-9) FROM patients WHERE region = 3").fetchall()
    with connect() as c:
        c.execute("SELECT pg_stat_force_next_flush()") if c.execute(
            "SELECT to_regproc('pg_stat_force_next_flush') IS NOT NULL").fetchone()[0] else None
        scans = c.execute("SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'patients_region_brin'").fetchone()[0]
        c.execute("DROP INDEX patients_region_brin")
    assert scans == 0, f"a restricted plan used the BRIN index {scans} times"


def check_attack_a_union_pushes_the_analysts_function_into_a_level():
    # a condition on a UNION (or INTERSECT) of a DP level is pushed into its branches by the flag of
    # the set operation's own subquery, not the level's barrier: the analyst's function, on GROUP BY
    # keys only, moved into the level's WHERE and saw every row (the whole table for 0.001 epsilon)
    with connect(ANALYST) as c:
        c.execute("""CREATE OR REPLACE FUNCTION an.spy(n text, v float8) RETURNS bool LANGUAGE plpgsql IMMUTABLE COST 0.0001
                     AS $$ BEGIN RAISE NOTICE 'row: name=% income=%', n, v; RETURN true; END $$""")
        notices = []
        c.add_notice_handler(lambda d: notices.append(d.message_primary))
        c.execute("SET dp.group_selection_epsilon = 0.001")
        # (NULL branches take the level's column types, so PostgreSQL finds every column safe to push into)
        for op in ("UNION", "INTERSECT"):
            del notices[:]
            rows = c.execute(f"SELECT * FROM (SELECT name AS n, income AS k, dp_count(id, 1e-9) AS c FROM patients "
                             f"GROUP BY name, income {op} SELECT NULL, NULL, NULL) u WHERE an.spy(n, k)").fetchall()
            spied = [n for n in notices if n.startswith("row:")]
            # the function sees the released rows (and the constant branch), never the table's
            assert len(spied) < 50 and not any("income=123456" in n for n in spied), (op, len(spied), spied[:3])


def check_attack_an_inlined_function_loads_a_collation_inside_a_level():
    # the planner inlines the analyst's SQL function in an outer condition and moves its body, a
    # leakproof comparison under a collation the analyst made, into the level: the collation was
    # loaded (with its version warning) only when a row passed the level's own WHERE
    with connect() as c:
        c.execute("DROP COLLATION IF EXISTS an.fake_inline")
        c.execute("CREATE COLLATION an.fake_inline (provider = icu, locale = 'de', version = '0-fake')")
        c.execute(f"ALTER COLLATION an.fake_inline OWNER TO {ANALYST}")
    with connect(ANALYST) as c:
        c.execute("CREATE OR REPLACE FUNCTION an.f(t text) RETURNS bool LANGUAGE sql IMMUTABLE "
                  "AS $$ SELECT t COLLATE an.fake_inline < 'zzz' $$")
    seen = []
    for threshold in (0, 10 ** 9):
        c = connect(ANALYST)
        notices = []
        c.add_notice_handler(lambda d: notices.append(d.message_primary))
        with c:
            c.execute("SET dp.group_selection_epsilon = 0.001")
            c.execute("SELECT * FROM (SELECT name, dp_count(id, 1e-9) AS n FROM patients "
                      f"WHERE id = 7 AND income > {threshold} GROUP BY name) s WHERE an.f(s.name)").fetchall()
        seen.append(sum("version mismatch" in n for n in notices))
    assert seen[0] == seen[1], f"the warning depends on the data: {seen}"

# spellings the check feeds through every type's input function: equal values spelt differently
SPELLINGS = [
    "0", "-0", "0.0", "0.00", "00", "+0", "1", "1.0", "1.00", "01", "+1", " 1", "1e0", "10e-1",
    "NaN", "nan", "Infinity", "inf", "-Infinity", "a", "a ", "a  ", "A", "ab", "", "t", "true", "yes",
    "on", "f", "2020-01-01", "2020-1-1", "20200101", "2020-01-01 00:00", "2020-01-01 00:00:00+00",
    "2020-01-01 01:00:00+01", "epoch", "1970-01-01", "00:00", "00:00:00", "12:00+01", "11:00+00",
    "1 day", "24 hours", "1 mon", "30 days", "P1D", "1440 minutes",
    "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}",
    "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", '{"a":1}', '{"a":1.0}', '{"a": 1}', "[1]", "[1.0]",
    "{1}", "{1.0}", "{01}", "[0:0]={1}", "{a}", '{"a "}', "{NULL}", "[1,2)", "[1,1]", "(0,2)",
    "[1.0,2.0)", "[1,2.00)", "empty", "192.168.0.1", "192.168.0.1/32", "::ffff:192.168.0.1",
    "08:00:2b:01:02:03", "08-00-2b-01-02-03", "0800.2b01.0203", "101", "\\x01", "\\001", "$1.00", "1.00",
]


def check_attack_a_selected_key_prints_the_spelling_of_one_row():
    # a selected group printed its key as its first row spelt it: numeric 0.0 against 0.00, interval
    # '1 day' against '24 hours', character(n) 'a' against 'a  ', 'A' against 'a' under a
    # nondeterministic collation; a CASE in the key made the spelling tell one row's column. Tried
    # for every built-in type (and arrays of them) as a column: the grammar either refuses the key,
    # or prints the same spelling whichever row of a group comes first. The same queries without DP
    # print different spellings (for the types the pool can spell two ways), so the check can fail.
    speller = "dp_a_speller"
    with connect() as c:
        c.execute(f"DROP ROLE IF EXISTS {speller}")
        c.execute(f"CREATE ROLE {speller} LOGIN")
        c.execute("SELECT dp.grant_budget(%s, 100000, 0.5)", (speller,))
        c.execute("DROP COLLATION IF EXISTS nd")
        c.execute("CREATE COLLATION nd (provider = icu, locale = 'und-u-ks-level2', deterministic = false)")
        c.execute("CREATE DOMAIN dnum AS numeric")
        types = [r[0] for r in c.execute("""
            SELECT format_type(t.oid, NULL) FROM pg_type t
             WHERE t.typnamespace = 'pg_catalog'::regnamespace AND t.typisdefined AND t.typtype IN ('b', 'r', 'm')
               AND t.typname NOT IN ('unknown', 'pg_node_tree', 'pg_ndistinct', 'pg_dependencies', 'pg_mcv_list',
                                     'pg_ddl_command', 'pg_brin_bloom_summary', 'pg_brin_minmax_multi_summary')
               AND (t.typelem = 0 OR t.typcategory = 'A') ORDER BY 1""")]
        types += ["character(3)", "bpchar", "dnum", "text COLLATE nd", "text COLLATE \"C\"", "numeric[]"]
        cols = []
        for i, t in enumerate(types):
            try:
                c.execute(f"CREATE TEMP TABLE probe (v {t})")
                c.execute("DROP TABLE probe")
                cols.append((f"c{i}", t))
            except psycopg.Error:
                pass
        c.execute("CREATE TABLE spell (id int, " + ", ".join(f"{n} {t}" for n, t in cols) + ")")
        c.execute("INSERT INTO spell (id) SELECT g FROM generate_series(1, 10) g")
        c.execute("SELECT dp.protect_table('spell')")
    admitted = []
    with connect(speller) as c:
        c.execute("SET dp.group_selection_epsilon = 0.5")
        for n, t in cols:
            try:
                c.execute(f"SELECT {n}, dp_count(id, 1e-9) FROM spell GROUP BY {n}").fetchall()
                admitted.append((n, t))
            except E.InsufficientPrivilege:
                # a refusal, which names the key's type, not a value
                pass
            except E.UndefinedFunction:
                # a type without an equality (box) cannot be grouped
                pass
    names = [t for _, t in admitted]
    assert {"numeric", "character(3)", "bpchar", "dnum", "double precision"} <= set(names), names
    for refused_type in ("interval", "jsonb", "text COLLATE nd"):
        assert refused_type not in names, names
    spelt = []
    with connect() as c:
        for n, t in admitted:
            values = []
            for s in SPELLINGS:
                try:
                    c.execute(f"SELECT %s::{t}", (s,))
                    values.append(s)
                except psycopg.Error:
                    pass
            # classes of equal values, each spelling in turn
            classes = []
            for s in values:
                for cl in classes:
                    if c.execute(f"SELECT %s::{t} = %s::{t}", (cl[0], s)).fetchone()[0]:
                        cl.append(s)
                        break
                else:
                    classes.append([s])
            classes = [cl for cl in classes if len(cl) > 1]
            # each class's spellings by how PostgreSQL prints them: first the smallest, then the largest
            for cl in classes:
                cl.sort(key=lambda s: c.execute(f"SELECT %s::{t}::text", (s,)).fetchone()[0])
            if not classes:
                continue
            printed = []
            for order in (1, -1):
                c.execute(f"DROP TABLE IF EXISTS sp_{n}, plain_{n}")
                c.execute(f"CREATE TABLE sp_{n} (id int, v {t})")
                # rows in the order written: the first row of each group has its class's first spelling
                for s in [s for cl in classes for s in cl[::order]]:
                    c.execute(f"INSERT INTO sp_{n} SELECT g, %s::{t} FROM generate_series(1, 300) g", (s,))
                c.execute(f"CREATE TABLE plain_{n} AS SELECT * FROM sp_{n}")
                c.execute(f"SELECT dp.protect_table('sp_{n}')")
                c.execute(f"GRANT SELECT ON plain_{n} TO {speller}")
                with connect(speller) as a:
                    # the key as its type's output function prints it (v::text drops character's spaces)
                    for oid in c.execute("SELECT %s::regtype::oid, getbase FROM (SELECT %s::regtype::oid AS o) x, "
                                         "LATERAL (SELECT CASE WHEN typtype = 'd' THEN typbasetype ELSE oid END AS getbase "
                                         "FROM pg_type WHERE oid = x.o) y", (t.split(" COLLATE")[0],) * 2).fetchone():
                        a.adapters.register_loader(oid, TextLoader)
                    a.execute("SET dp.group_selection_epsilon = 0.5")
                    # the hash table keeps the first row of each group as it was read
                    a.execute("SET enable_sort = off")
                    dp = sorted(r[0] for r in a.execute(f"SELECT v FROM sp_{n} GROUP BY v HAVING dp_count(id, 1e-9) IS NOT NULL"))
                    native = sorted(r[0] for r in a.execute(f"SELECT v FROM plain_{n} GROUP BY v"))
                    a.execute("RESET enable_sort")
                    a.execute("SET enable_hashagg = off")
                    by_sort = sorted(r[0] for r in a.execute(f"SELECT v FROM sp_{n} GROUP BY v HAVING dp_count(id, 1e-9) IS NOT NULL"))
                assert len(dp) == len(classes) and dp == by_sort, (t, dp, by_sort, classes)
                printed.append((dp, native))
            assert printed[0][0] == printed[1][0], f"{t}: a group prints its first row's spelling: {printed}"
            if printed[0][1] != printed[1][1]:
                spelt.append(t)
    # the negative control: without pg_dp these types print their first row's spelling
    assert {"numeric", "bpchar", "dnum", "double precision"} <= set(spelt), spelt


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="/tmp")
    ap.add_argument("--port", type=int, default=25433)
    ARGS = ap.parse_args()
    setup()
    run_checks(globals(), "attacks")


if __name__ == "__main__":
    main()
