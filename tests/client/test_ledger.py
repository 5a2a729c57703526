#!/usr/bin/env python3
"""Attacks on the privacy-budget ledger, through real connections to a real server.

Run by scripts/test.sh:
    /usr/bin/python3 tests/client/test_ledger.py --host /tmp --port 25433 --datadir DIR --pgbin BIN
Each check is a function named check_*; the crash checks restart the server and run last.
Prints one line per check and "ledger: N passed, M failed"; exits non-zero on any failure.
"""
import argparse
import os
import signal
import subprocess
import threading
import time
from decimal import Decimal

import psycopg
from psycopg import errors as E

from harness import refused, run_checks

ARGS = None
DB = "pg_dp_ledger"


def connect(user="postgres", dbname=DB, autocommit=True):
    return psycopg.connect(host=ARGS.host, port=ARGS.port, dbname=dbname, user=user, autocommit=autocommit)


def setup():
    with connect(dbname="postgres") as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {DB}")
        # these checks count the charges of repeated queries: no release cache
        c.execute(f"ALTER DATABASE {DB} SET dp.release_cache = off")
    with connect() as c:
        c.execute("CREATE EXTENSION pg_dp")
        c.execute("CREATE TABLE t AS SELECT g AS i, g::float8 AS x FROM generate_series(1, 1000) g")


def new_analyst(name, epsilon=None, cap=None):
    """A fresh login role with SELECT on t and, optionally, a budget (committed)."""
    with connect() as c:
        c.execute(f"DROP ROLE IF EXISTS {name}")
        c.execute(f"CREATE ROLE {name} LOGIN")
        c.execute(f"GRANT SELECT ON t TO {name}")
        if epsilon is not None:
            c.execute("SELECT dp.set_budget(%s, %s, 0, %s)", (name, epsilon, cap))
    return name


def spent(name):
    with connect() as c:
        r = c.execute("SELECT epsilon_spent FROM dp.budgets WHERE role = %s::regrole", (name,)).fetchone()
        return r[0] if r else None


def receipts(name):
    with connect() as c:
        return c.execute("SELECT count(*) FROM dp.ledger WHERE role = %s::regrole", (name,)).fetchone()[0]


def outcome_into(results, name, conn, sql):
    """Runs sql on conn and records "ok" or the error's class name under name."""
    try:
        conn.execute(sql).fetchall()
        results[name] = "ok"
    except psycopg.Error as e:
        results[name] = type(e).__name__


def worker_held():
    """A connection holding dp.role_budget locked: the ledger worker waits at its next debit."""
    locker = connect()
    locker.autocommit = False
    locker.execute("LOCK TABLE dp.role_budget IN EXCLUSIVE MODE")
    return locker


def check_grant_query_and_my_budget_show_the_exact_spend():
    a = new_analyst("dp_l_alice", 1.0)
    with connect(a) as c:
        c.execute("SELECT dp_sum(x, 0, 1000, 0.1) FROM t")
        c.execute("SELECT dp_count(x, 0.2), dp_avg(x, 0, 1000, 0.3) FROM t")
        row = c.execute("SELECT epsilon_spent, epsilon_remaining FROM dp.my_budget").fetchone()
        assert row == (Decimal("0.6"), Decimal("0.4")), row
        mine = c.execute("SELECT aggregate, mechanism, sensitivity, noise_scale, epsilon FROM dp.my_ledger ORDER BY id").fetchall()
    assert len(mine) == 3, mine
    assert mine[0][1] == "discrete_laplace" and mine[0][2] == 1000.0 and abs(mine[0][3] - 10000.0) < 1e-6, mine[0]
    assert mine[0][4] == Decimal("0.1") and mine[2][4] == Decimal("0.3"), mine


def check_ten_charges_of_a_tenth_spend_exactly_one():
    a = new_analyst("dp_l_tenths", 1.0)
    with connect(a) as c:
        for _ in range(10):
            c.execute("SELECT dp_count(x, 0.1) FROM t")
        try:
            c.execute("SELECT dp_count(x, 1e-9) FROM t")
            raise AssertionError("the 11th query was not refused")
        except E.InsufficientResources:
            pass
    assert spent(a) == Decimal("1.0"), spent(a)


def check_rollback_does_not_refund():
    a = new_analyst("dp_l_rollback", 1.0)
    with connect(a, autocommit=False) as c:
        c.execute("SELECT dp_count(x, 0.25) FROM t").fetchone()
        c.rollback()
    assert spent(a) == Decimal("0.25"), spent(a)


def check_rollback_to_savepoint_does_not_refund():
    a = new_analyst("dp_l_savepoint", 1.0)
    with connect(a, autocommit=False) as c:
        c.execute("SELECT 1")
        c.execute("SAVEPOINT s")
        c.execute("SELECT dp_sum(x, 0, 1, 0.25) FROM t").fetchone()
        c.execute("ROLLBACK TO SAVEPOINT s")
        c.commit()
    assert spent(a) == Decimal("0.25"), spent(a)


def check_error_after_the_result_does_not_refund():
    a = new_analyst("dp_l_error", 1.0)
    with connect(a) as c:
        # an error raised while planning (1/0 is folded to a constant) refuses the query up front
        try:
            c.execute("SELECT dp_count(x, 0.25)::int FROM t UNION ALL SELECT 1/0")
            raise AssertionError("no division by zero")
        except E.DivisionByZero:
            pass
        assert spent(a) == Decimal("0"), spent(a)
        # an error raised while executing, after the release: charged
        try:
            c.execute("SELECT dp_count(x, 0.25)::int FROM t UNION ALL SELECT 1 / (i - i) FROM t")
            c.fetchall()
            raise AssertionError("no division by zero")
        except E.DivisionByZero:
            pass
        # an error inside the same transaction after the release
        try:
            with c.transaction():
                c.execute("SELECT dp_count(x, 0.25) FROM t").fetchone()
                c.execute("SELECT 1/0")
        except E.DivisionByZero:
            pass
    assert spent(a) == Decimal("0.5"), spent(a)


def check_cancel_does_not_refund():
    a = new_analyst("dp_l_cancel", 1.0)
    with connect(a) as c:
        c.execute("SET statement_timeout = '200ms'")
        try:
            # the sleep is above the DP aggregate (the grammar admits no function below one): the
            # query is cancelled after it was paid for
            c.execute("SELECT n, pg_sleep(10) FROM (SELECT dp_count(x, 0.25) AS n FROM t) s")
            raise AssertionError("not cancelled")
        except E.QueryCanceled:
            pass
    assert spent(a) == Decimal("0.25"), spent(a)


def check_exhaustion_refuses_before_reading_and_charges_nothing():
    a = new_analyst("dp_l_exhaust", 0.5)
    with connect(a) as c:
        c.execute("SELECT dp_count(x, 0.3) FROM t")
        try:
            c.execute("SELECT dp_count(x, 0.3), x / 0 FROM t GROUP BY x")
            raise AssertionError("not refused")
        except E.InsufficientResources as e:
            # refused before any row was read: the division by zero never ran
            assert "0.2" in str(e) and "0.3" in str(e), str(e)
        c.execute("SELECT dp_count(x, 0.2) FROM t")  # exactly the rest passes
    assert spent(a) == Decimal("0.5"), spent(a)
    assert receipts(a) == 2


def check_delta_is_debited_and_exhausts_like_epsilon():
    a = new_analyst("dp_l_delta", 10)
    with connect() as c:
        c.execute("SELECT dp.set_budget(%s, 10, 2e-6)", (a,))
    with connect(a) as c:
        c.execute("SELECT dp_median(x, 0, 2000, 0.5, 1e-6) FROM t")
        c.execute("SELECT dp_percentile(x, 0.9, 0, 2000, 0.5, 1e-6) FROM t")
        try:
            c.execute("SELECT dp_median(x, 0, 2000, 0.5, 1e-6), x / 0 FROM t GROUP BY x")
            raise AssertionError("delta overspent")
        except E.InsufficientResources as e:
            assert "delta 0.000001" in str(e) and "(delta 0)" in str(e), str(e)
        c.execute("SELECT dp_median(x, 0, 2000, 0.5) FROM t")  # delta = 0: the pure variant still runs
    with connect() as c:
        r = c.execute("SELECT epsilon_spent, delta_spent FROM dp.budgets WHERE role = %s::regrole", (a,)).fetchone()
    assert r == (Decimal("1.5"), Decimal("0.000002")), r
    assert receipts(a) == 3


def check_no_budget_and_per_query_cap():
    a = new_analyst("dp_l_nobudget")
    with connect(a) as c:
        try:
            c.execute("SELECT dp_count(*) FROM t")
            raise AssertionError("not refused")
        except E.InsufficientPrivilege as e:
            assert "no privacy budget" in str(e)
    b = new_analyst("dp_l_cap", 10, cap=0.5)
    with connect(b) as c:
        c.execute("SELECT dp_count(x, 0.25), dp_count(i, 0.25) FROM t")
        try:
            c.execute("SELECT dp_count(x, 0.25), dp_count(x, 0.3) FROM t")
            raise AssertionError("cap not enforced")
        except E.ProgramLimitExceeded as e:
            assert "cap 0.5" in str(e), str(e)
    assert spent(b) == Decimal("0.5"), spent(b)


def check_a_pinned_privacy_level_caps_each_query_and_sets_the_default():
    a = new_analyst("dp_l_pinned", 10)
    with connect() as c:
        c.execute("SELECT dp.pin_privacy_level(%s, 'high')", (a,))
        # the role's sessions in this database start at the level
        r = c.execute("""SELECT setconfig FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase
                          WHERE s.setrole = %s::regrole AND d.datname = current_database()""", (a,)).fetchone()
        assert r and "dp.privacy_level=high" in r[0], r
    with connect(a) as c:
        assert c.execute("SHOW dp.privacy_level").fetchone()[0] == "high"
        # no epsilon: the level's 0.3
        c.execute("SELECT dp_count(*) FROM t")
        assert spent(a) == Decimal("0.3"), spent(a)
        # the role may choose a more private level, or a smaller epsilon, but not more than 0.3 per query
        c.execute("SET dp.privacy_level = 'very_high'")
        c.execute("SELECT dp_count(*) FROM t")
        assert spent(a) == Decimal("0.4"), spent(a)
        # a less private default is capped at the pinned level: a query without epsilon spends 0.3
        for sql in ["SET dp.privacy_level = 'low'", "SET dp.default_epsilon = 1"]:
            c.execute(sql)
            c.execute("SELECT dp_count(*) FROM t")
            c.execute("RESET dp.privacy_level")
            c.execute("RESET dp.default_epsilon")
        assert spent(a) == Decimal("1.0"), spent(a)
        # an explicit epsilon above it is refused, and says what to do
        e = refused(c, "SELECT dp_count(x, 1) FROM t", E.ProgramLimitExceeded)
        assert 'privacy level "high"' in str(e) and "nothing was charged" in str(e), str(e)
        assert e.diag.message_hint and "dp.privacy_level = 'high'" in e.diag.message_hint
        refused(c, "SELECT dp_count(x, 0.2), dp_count(i, 0.2) FROM t", E.ProgramLimitExceeded)
        assert spent(a) == Decimal("1.0"), spent(a)
        # the analyst cannot unpin itself
        refused(c, "SELECT dp.pin_privacy_level(%s, NULL)", E.InsufficientPrivilege, (a,))
    with connect() as c:
        e = refused(c, "SELECT dp.pin_privacy_level(%s, 'extreme')", E.InvalidParameterValue, (a,))
        assert "very_high, high, medium, low, very_low" in str(e), str(e)
        c.execute("SELECT dp.pin_privacy_level(%s, NULL)", (a,))
        assert c.execute("SELECT pinned_privacy_level FROM dp.budgets WHERE role = %s::regrole", (a,)).fetchone()[0] is None
    with connect(a) as c:
        assert c.execute("SHOW dp.privacy_level").fetchone()[0] == "medium"
        c.execute("SELECT dp_count(x, 0.5) FROM t")
    assert spent(a) == Decimal("1.5"), spent(a)


def last_epsilons(name, n):
    with connect() as c:
        return [r[0] for r in c.execute(
            "SELECT epsilon FROM dp.ledger WHERE role = %s::regrole ORDER BY id DESC LIMIT %s", (name, n))][::-1]


def check_session_settings_reach_prepared_plans():
    # psycopg prepares a statement on the server after five runs (its automatic preparation); the
    # user never writes PREPARE. A setting changed afterwards must reach the prepared plan.
    a = new_analyst("dp_l_replan", 100)
    q = "SELECT dp_count(*) FROM t WHERE i > 0"  # no parameters: a generic plan from the start
    with connect(a) as c:
        for _ in range(7):
            c.execute(q).fetchone()
        assert c.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%dp_count%'").fetchone()[0] == 1
        c.execute("SET dp.privacy_level = 'very_high'")
        c.execute(q).fetchone()
        c.execute("SET dp.default_epsilon = 0.25")
        c.execute(q).fetchone()
        c.execute("RESET dp.default_epsilon")
        c.execute(q).fetchone()
        # an explicit PREPARE, and a SET LOCAL that ends with its transaction
        c.execute("PREPARE p AS SELECT dp_count(*) FROM t")
        c.execute("EXECUTE p")
        with c.transaction():
            c.execute("SET LOCAL dp.privacy_level = 'high'")
            c.execute("EXECUTE p")
        c.execute("EXECUTE p")
    assert last_epsilons(a, 7) == [Decimal(x) for x in ("1", "0.1", "0.25", "0.1", "0.1", "0.3", "0.1")], last_epsilons(a, 7)


def check_pinning_a_level_reaches_open_sessions_and_their_prepared_plans():
    # a pool's sessions were opened before the DBA pinned a level: they spend the pinned level's
    # epsilon from the next query on, prepared or not, instead of failing until they reconnect
    a = new_analyst("dp_l_pin_open", 100)
    q = "SELECT dp_count(*) FROM t WHERE i > 0"  # no parameters: a generic plan from the start
    with connect(a) as c, connect(a) as d:
        for _ in range(7):
            c.execute(q).fetchone()
        d.execute("SELECT dp_count(*) FROM t")
        with connect() as admin:
            admin.execute("SELECT dp.pin_privacy_level(%s, 'high')", (a,))
        c.execute(q).fetchone()
        d.execute("SELECT dp_count(*) FROM t")
        with connect() as admin:
            admin.execute("SELECT dp.pin_privacy_level(%s, NULL)", (a,))
        # unpinned: the session's own level again
        c.execute(q).fetchone()
    assert last_epsilons(a, 4) == [Decimal(x) for x in ("1", "0.3", "0.3", "1")], last_epsilons(a, 4)
    assert spent(a) == Decimal("9.6"), spent(a)


def check_drop_extension_is_refused_while_the_ledger_holds_budgets_or_receipts():
    db = "pg_dp_drop_guard"
    with connect(dbname="postgres") as c:
        c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {db}")
    with connect(dbname=db) as c:
        c.execute("CREATE EXTENSION pg_dp")
        # an empty ledger: dropping is fine
        c.execute("DROP EXTENSION pg_dp")
        c.execute("CREATE EXTENSION pg_dp")
        c.execute("SELECT dp.grant_budget('postgres', 1)")
        for sql in ["DROP EXTENSION pg_dp", "DROP EXTENSION IF EXISTS pg_dp CASCADE", "DROP SCHEMA dp CASCADE"]:
            e = refused(c, sql, E.ObjectInUse)
            assert "1 budgets and 0 receipts" in str(e), str(e)
            assert e.diag.message_hint and "dp.confirm_drop" in e.diag.message_hint
        assert c.execute("SELECT count(*) FROM dp.budgets").fetchone()[0] == 1
        # the confirmation is superuser-only
        c.execute("CREATE ROLE dp_l_dropper LOGIN")
    with connect(user="dp_l_dropper", dbname=db) as c:
        refused(c, "SET dp.confirm_drop = on", E.InsufficientPrivilege)
    with connect(dbname=db, autocommit=False) as c:
        c.execute("SET LOCAL dp.confirm_drop = on")
        c.execute("DROP EXTENSION pg_dp")
        c.commit()
    with connect(dbname="postgres") as c:
        c.execute(f"DROP DATABASE {db} WITH (FORCE)")
        c.execute("DROP ROLE dp_l_dropper")


def check_revoke_then_grant_keeps_the_spending():
    a = new_analyst("dp_l_revoked", 1)
    with connect(a) as c:
        c.execute("SELECT dp_count(x, 0.25) FROM t")
    with connect() as c:
        c.execute("SELECT dp.revoke_budget(%s)", (a,))
        r = c.execute("SELECT epsilon_granted, epsilon_spent, epsilon_remaining FROM dp.budgets WHERE role = %s::regrole", (a,)).fetchone()
        assert r == (Decimal("0.25"), Decimal("0.25"), Decimal("0")), r
    with connect(a) as c:
        refused(c, "SELECT dp_count(x, 0.25) FROM t", E.InsufficientResources)
    with connect() as c:
        c.execute("SELECT dp.grant_budget(%s, 1)", (a,))
        r = c.execute("SELECT epsilon_granted, epsilon_spent, epsilon_remaining FROM dp.budgets WHERE role = %s::regrole", (a,)).fetchone()
        assert r == (Decimal("1.25"), Decimal("0.25"), Decimal("1")), r


def check_a_budget_period_renews_the_grant_and_keeps_lifetime_totals():
    a = new_analyst("dp_l_monthly", 1)
    with connect() as c:
        c.execute("SELECT dp.set_budget_period(%s, '1 month')", (a,))
    with connect(a) as c:
        c.execute("SELECT dp_count(x, 0.5) FROM t")
        c.execute("SELECT dp_count(x, 0.5) FROM t")
        refused(c, "SELECT dp_count(x, 0.5) FROM t", E.InsufficientResources)
        r = c.execute("SELECT epsilon_remaining, lifetime_epsilon_spent, period FROM dp.my_budget").fetchone()
        assert r[0] == Decimal("0") and r[1] == Decimal("1"), r
    with connect() as c:
        # a month later (the period's start moved back instead of waiting)
        c.execute("UPDATE dp.role_budget SET period_start = period_start - interval '1 month 1 day' WHERE role_uid = dp.role_uid(%s)", (a,))
        r = c.execute("SELECT epsilon_spent, epsilon_remaining, lifetime_epsilon_spent FROM dp.budgets WHERE role = %s::regrole", (a,)).fetchone()
        assert r == (Decimal("0"), Decimal("1"), Decimal("1")), r
    with connect(a) as c:
        c.execute("SELECT dp_count(x, 0.25) FROM t")
    with connect() as c:
        r = c.execute("SELECT epsilon_spent, epsilon_remaining, lifetime_epsilon_spent, period_ends > now() FROM dp.budgets WHERE role = %s::regrole", (a,)).fetchone()
        assert r == (Decimal("0.25"), Decimal("0.75"), Decimal("1.25"), True), r
        e = refused(c, "SELECT dp.set_budget_period(%s, '1 minute')", E.InvalidParameterValue, (a,))
        assert "at least 1 hour" in str(e)
    with connect(a) as c:
        refused(c, "SELECT dp.set_budget_period(%s, NULL)", E.InsufficientPrivilege, (a,))


def check_a_budget_period_keeps_what_was_spent():
    # setting a period (or turning it off and on again) started a new period at 0 spent: a refill
    a = new_analyst("dp_l_period_keeps", 1)
    with connect(a) as c:
        c.execute("SELECT dp_count(x, 0.75) FROM t")
    with connect() as c:
        for period in ("1 month", None, "1 day"):
            c.execute("SELECT dp.set_budget_period(%s, %s)", (a, period))
            r = c.execute("SELECT epsilon_spent, epsilon_remaining, period FROM dp.budgets WHERE role = %s::regrole", (a,)).fetchone()
            assert r[:2] == (Decimal("0.75"), Decimal("0.25")), (period, r)
    with connect(a) as c:
        refused(c, "SELECT dp_count(x, 0.5) FROM t", E.InsufficientResources)


def check_admin_functions_name_a_null_argument():
    protected_table()
    a = new_analyst("dp_l_nulls", 1)
    with connect() as c:
        for sql, arg in [
            ("SELECT dp.grant_budget(NULL, 1)", "dp.grant_budget: role"),
            (f"SELECT dp.grant_budget('{a}', NULL)", "epsilon"),
            (f"SELECT dp.set_budget('{a}', 1, NULL)", "delta"),
            ("SELECT dp.revoke_budget(NULL)", "dp.revoke_budget: role"),
            ("SELECT dp.set_budget_period(NULL, '1 day')", "dp.set_budget_period: role"),
            ("SELECT dp.pin_privacy_level(NULL, 'high')", "dp.pin_privacy_level: role"),
            (f"SELECT dp.adopt_budget('{a}', NULL)", "dp.adopt_budget: role_uid"),
            ("SELECT dp.purge_receipts(NULL)", "dp.purge_receipts: older_than"),
            ("SELECT dp.protect_table(NULL)", "dp.protect_table: tbl"),
            ("SELECT dp.unprotect_table(NULL)", "dp.unprotect_table: tbl"),
            ("SELECT dp.trust_role(NULL)", "dp.trust_role: role"),
            ("SELECT dp.set_domain('pt', NULL, ARRAY[1])", "dp.set_domain: col"),
            ("SELECT dp.set_domain('pt', 'i', ARRAY[1, NULL])", "dp.set_domain: vals must not hold NULL"),
            ("SELECT dp.drop_domain(NULL, 'i')", "dp.drop_domain: tbl"),
            ("SELECT dp.set_bounds('pt', NULL, 0, 1)", "dp.set_bounds: col"),
            ("SELECT dp.set_release_cache('pt', NULL)", "dp.set_release_cache: enabled"),
        ]:
            e = refused(c, sql, E.NullValueNotAllowed)
            assert arg in str(e) and "SECURITY LABEL" not in str(e), (sql, e)
        e = refused(c, "SELECT dp.set_domain('pt', 'i', ARRAY[]::int[])", E.InvalidParameterValue)
        assert "vals must hold at least one value" in str(e), e
        # NULL bounds of the export are unbounded
        assert c.execute("SELECT count(*) FROM dp.export_ledger(NULL, NULL)").fetchone()[0] == \
            c.execute("SELECT count(*) FROM dp.ledger").fetchone()[0]
    with connect(a) as c:
        # readable by the analyst, who has no copy of the docs
        c.execute("SELECT count(*) FROM dp.uncached_tables").fetchone()
        assert c.execute("SELECT count(*) FROM dp.grammar WHERE construct LIKE '%LIKE%'").fetchone()[0] == 1
        e = refused(c, "SELECT dp_count(i, 0.1) FROM pt WHERE i::text ~ '1'", E.InsufficientPrivilege)
        assert "dp.grammar" in (e.diag.message_hint or "") and "docs/" not in (e.diag.message_hint or ""), e.diag.message_hint


def check_drop_role_archives_its_budget():
    a = new_analyst("dp_l_leaving", 1)
    with connect(a) as c:
        c.execute("SELECT dp_count(x, 0.25) FROM t")
    with connect() as c:
        c.execute("DROP ROLE IF EXISTS dp_l_creator")
        c.execute("CREATE ROLE dp_l_creator LOGIN CREATEROLE")
    with connect("dp_l_creator") as c:
        # a DROP that fails (the role still holds a privilege) keeps the budget
        refused(c, f"DROP ROLE {a}", E.DependentObjectsStillExist)
    assert spent(a) == Decimal("0.25")
    with connect() as c:
        c.execute(f"REVOKE SELECT ON t FROM {a}")
    with connect("dp_l_creator") as c:
        c.execute(f"DROP ROLE {a}")
    with connect() as c:
        r = c.execute("SELECT role_name, epsilon_granted, epsilon_spent FROM dp.dropped_role_budget WHERE role_name = %s", (a,)).fetchone()
        assert r == (a, Decimal("1"), Decimal("0.25")), r
        assert c.execute("SELECT count(*) FROM dp.budgets WHERE role IS NULL").fetchone()[0] == 0, "a budget without a role"
        c.execute("DROP ROLE dp_l_creator")


def check_prepared_statement_with_epsilon_parameter_is_charged_exactly():
    a = new_analyst("dp_l_prepared", 2.0)
    with connect(a) as c:
        for eps in (0.125, 0.25, 0.125, 0.5, 0.125, 0.125, 0.25):  # past the custom-plan phase
            c.execute("SELECT dp_sum(x, 0, 1000, %s) FROM t", (eps,), prepare=True).fetchone()
    assert spent(a) == Decimal("1.5"), spent(a)
    with connect() as c:
        eps = [r[0] for r in c.execute("SELECT epsilon FROM dp.ledger WHERE role = %s::regrole ORDER BY id", (a,))]
    assert eps == [Decimal(x) for x in ("0.125", "0.25", "0.125", "0.5", "0.125", "0.125", "0.25")], eps


def check_sixteen_sessions_race_for_one_budget():
    a = new_analyst("dp_l_race", 5.0)
    ok = []
    refused = []
    errors = []
    lock = threading.Lock()

    def client():
        try:
            with connect(a) as c:
                for _ in range(12):
                    try:
                        c.execute("SELECT dp_count(x, 0.1) FROM t").fetchone()
                        with lock:
                            ok.append(1)
                    except E.InsufficientResources:
                        with lock:
                            refused.append(1)
        except Exception as e:  # noqa: BLE001
            with lock:
                errors.append(repr(e))

    threads = [threading.Thread(target=client) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(ok) == 50, (len(ok), len(refused))
    assert len(refused) == 16 * 12 - 50
    assert spent(a) == Decimal("5.0"), spent(a)
    assert receipts(a) == 50


def check_one_batch_of_several_roles_debits_each_its_own_budget():
    # the worker debits every waiting charge in one transaction: held on a lock, it finds the charges
    # of four roles waiting (two of one role, one over its budget, one over its cap) and decides them
    # together; each role pays for its own, in order, and each receipt names its role
    first = new_analyst("dp_l_batch_first", 5)
    many = new_analyst("dp_l_batch_many", 1.0)
    small = new_analyst("dp_l_batch_small", 0.3)
    capped = new_analyst("dp_l_batch_capped", 5, cap=0.2)
    results = {}

    def run(name, user, eps):
        with connect(user) as c:
            outcome_into(results, name, c, f"SELECT dp_count(x, {eps}) FROM t")

    locker = worker_held()
    held = threading.Thread(target=run, args=("first", first, 0.5))
    held.start()
    time.sleep(1.0)  # the worker holds the first charge and waits for the lock
    waiting = [("many 1", many, 0.5), ("many 2", many, 0.5), ("many 3", many, 0.5), ("small", small, 0.5),
               ("capped", capped, 0.5), ("capped ok", capped, 0.125)]
    threads = []
    for name, user, eps in waiting:
        threads.append(threading.Thread(target=run, args=(name, user, eps)))
        threads[-1].start()
        time.sleep(0.2)  # queued in this order
    time.sleep(0.5)
    locker.rollback()
    locker.close()
    for t in [held] + threads:
        t.join(30)
    assert results == {"first": "ok", "many 1": "ok", "many 2": "ok", "many 3": "InsufficientResources",
                       "small": "InsufficientResources", "capped": "ProgramLimitExceeded", "capped ok": "ok"}, results
    assert (spent(first), spent(many), spent(small), spent(capped)) == (Decimal("0.5"), Decimal("1.0"), 0, Decimal("0.125"))
    with connect() as c:
        rows = c.execute("""SELECT l.role_name, count(*), count(DISTINCT l.xmin::text), min(l.xmin::text)
                              FROM dp.release_log l WHERE l.role_name IN (%s, %s, %s, %s)
                               AND l.role_uid = dp.role_uid(l.role_name::regrole) GROUP BY l.role_name ORDER BY 1""",
                         (first, many, small, capped)).fetchall()
    assert [(r[0], r[1]) for r in rows] == [(capped, 1), (first, 1), (many, 2)], rows
    # the charges that waited were one batch: one transaction, after the first charge's own
    assert rows[0][3] == rows[2][3] and rows[2][2] == 1 and rows[1][3] != rows[2][3], rows


def check_a_budget_granted_while_an_unlimited_charge_waits_is_the_one_it_pays_from():
    # a role with dp.require_budget off and no identity is charged without a budget; its receipts get
    # an identity when it pays. The worker read the role's identity (none), waited on another role's
    # budget row, and meanwhile a DBA granted the role its first budget: the charge was decided as
    # unlimited, debited nothing, and its receipt went under the new identity (0.8 of receipts on a
    # spent 0.4). Now the batch fails and each charge is decided again, against the new budget.
    ahead = new_analyst("dp_l_ahead", 10)
    holder = new_analyst("dp_l_holder", 10)
    who = new_analyst("dp_l_who")
    with connect() as c:
        c.execute(f"ALTER ROLE {who} SET dp.require_budget = off")
    results = {}

    def run(name, user):
        with connect(user) as c:
            outcome_into(results, name, c, "SELECT dp_count(x, 0.4) FROM t")

    t1 = connect()
    t1.autocommit = False
    t1.execute("SELECT FROM dp.role_budget WHERE role_uid = dp.role_uid(%s) FOR UPDATE", (ahead,))
    t2 = connect()
    t2.autocommit = False
    t2.execute("SELECT FROM dp.role_budget WHERE role_uid = dp.role_uid(%s) FOR UPDATE", (holder,))
    threads = [threading.Thread(target=run, args=(n, n)) for n in (ahead, holder, who)]
    threads[0].start()
    time.sleep(0.5)  # the worker waits on the first role's row
    threads[1].start()
    threads[2].start()
    time.sleep(0.5)  # queued together: the next batch
    t2.execute("SELECT dp.grant_budget(%s, 0.5)", (who,))
    t1.commit()
    time.sleep(0.5)  # the next batch read its roles and waits on the holder's row
    t2.commit()
    for t in threads:
        t.join(30)
    t1.close()
    t2.close()
    assert results == {ahead: "ok", holder: "ok", who: "ok"}, results
    assert spent(who) == Decimal("0.4"), spent(who)
    with connect(who) as c:
        assert refused(c, "SELECT dp_count(x, 0.4) FROM t", E.InsufficientResources)
    with connect() as c:
        paid = c.execute("SELECT count(*), sum(epsilon) FROM dp.release_log WHERE role_uid = dp.role_uid(%s)", (who,)).fetchone()
    assert paid == (1, Decimal("0.4")), paid


def check_a_refusal_with_amounts_of_hundreds_of_digits_is_still_a_refusal():
    # the worker's answer holds what the role has left, exactly; a budget of 5e-324 leaves hundreds of
    # digits, the answer overflowed its slot and the refusal became "unreadable answer" (58000)
    tiny = new_analyst("dp_l_tiny")
    with connect() as c:
        c.execute("SELECT dp.set_budget(%s, 5e-324, 5e-324)", (tiny,))
    with connect(tiny) as c:
        assert refused(c, "SELECT dp_count(x, 0.1) FROM t", E.InsufficientResources)
    assert receipts(tiny) == 0


def check_require_budget_off_is_superuser_only_and_still_recorded():
    a = new_analyst("dp_l_unlimited")
    with connect(a) as c:
        try:
            c.execute("SET dp.require_budget = off")
            raise AssertionError("an analyst turned dp.require_budget off")
        except E.InsufficientPrivilege:
            pass
    with connect() as c:
        c.execute(f"ALTER ROLE {a} SET dp.require_budget = off")
    with connect(a) as c:
        c.execute("SELECT dp_count(*) FROM t")
    assert receipts(a) == 1


class ParallelHog:
    """Sessions that, as any role may, raise max_parallel_workers and hold every free background-worker
    slot with parallel scans that sleep on each row."""

    def __init__(self, sessions=1, seconds=12):
        self.threads = []
        self.errors = []
        with connect() as c:
            c.execute("DROP TABLE IF EXISTS hog")
            c.execute("CREATE TABLE hog WITH (parallel_workers = 64, fillfactor = 10) AS SELECT g FROM generate_series(1, 40000) g")
            c.execute("ANALYZE hog")
        per_row = seconds * 16 / 40000.0
        for _ in range(sessions):
            t = threading.Thread(target=self._run, args=(per_row,), daemon=True)
            self.threads.append(t)

    def _run(self, per_row):
        try:
            with connect() as c:
                for s in ("SET max_parallel_workers = 1024", "SET max_parallel_workers_per_gather = 64",
                          "SET parallel_setup_cost = 0", "SET parallel_tuple_cost = 0", "SET min_parallel_table_scan_size = 0"):
                    c.execute(s)
                c.execute("SELECT count(*) FROM hog WHERE pg_sleep(%s) IS NOT NULL", (per_row,))
        except Exception as e:  # reported by the check
            self.errors.append(e)

    def __enter__(self):
        for t in self.threads:
            t.start()
        # wait until no slot is left: the parallel workers hold every one the static ledger workers do not
        with connect(dbname="postgres") as c:
            total = int(c.execute("SHOW max_worker_processes").fetchone()[0])
            # the static ledger workers hold their slots whether connected (listed) or not
            statics = int(c.execute("SHOW dp.ledger_workers").fetchone()[0])
            deadline = time.time() + 20
            while time.time() < deadline:
                busy = c.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type IN "
                                 "('parallel worker', 'pg_dp ledger on demand', 'logical replication launcher')").fetchone()[0]
                if busy + statics >= total:
                    return self
                time.sleep(0.1)
        raise AssertionError(f"the parallel scans did not take every background-worker slot ({busy} of {total})")

    def __exit__(self, *exc):
        for t in self.threads:
            t.join()



# ----- fail closed: an error inside an admitted DP level forfeits the role's remaining budget --------

FORFEIT_WARNING = "pg_dp: an error inside an admitted DP level"


def protected_table():
    """pt: a protected table the fail-closed checks read through DP queries (no SELECT granted)."""
    with connect() as c:
        if c.execute("SELECT to_regclass('pt')").fetchone()[0] is None:
            c.execute("CREATE TABLE pt AS SELECT g AS i, g::float8 AS x FROM generate_series(1, 1000) g")
            c.execute("SELECT dp.protect_table('pt')")


def faulty_analyst(name, epsilon, sqlstate):
    """A DP-only role with a budget, whose sessions raise `sqlstate` inside every admitted level (the
    superuser-only fault injection of the fail-closed rule)."""
    protected_table()
    new_analyst(name, epsilon)
    with connect() as c:
        c.execute(f"ALTER ROLE {name} SET dp.fail_inside_level = '{sqlstate}'")
    return name


def with_notices(user):
    c = connect(user)
    notices = []
    c.add_notice_handler(lambda d: notices.append((d.severity_nonlocalized, d.message_primary, d.message_detail)))
    return c, notices


def forfeits(name):
    with connect() as c:
        return c.execute("SELECT epsilon, details->'forfeit'->>'sqlstate', query_text FROM dp.ledger "
                         "WHERE role = %s::regrole AND mechanism = 'forfeit' ORDER BY id", (name,)).fetchall()


def check_fail_closed_an_error_inside_a_level_forfeits_the_remaining_budget():
    a = faulty_analyst("dp_l_fault", 5, "22012")
    q = "SELECT dp_count(i, 0.5) FROM pt"
    c, notices = with_notices(a)
    with c:
        refused(c, q, E.DivisionByZero)
        warnings = [n for n in notices if n[0] == "WARNING" and FORFEIT_WARNING in n[1]]
        assert len(warnings) == 1, notices
        assert 'role "dp_l_fault" forfeits its remaining privacy budget (epsilon 4.5)' in warnings[0][1], warnings
        assert "SQLSTATE 22012" in warnings[0][1] and q in (warnings[0][2] or ""), warnings
        # nothing left: the next query is refused before it runs
        refused(c, "SELECT dp_count(i, 0.001) FROM pt", E.InsufficientResources)
    assert spent(a) == Decimal("5"), spent(a)
    assert forfeits(a) == [(Decimal("4.5"), "22012", q)], forfeits(a)
    # the WARNING is in the server log too, for the DBA
    with open(os.path.join(ARGS.datadir, "server.log"), errors="replace") as f:
        assert any(FORFEIT_WARNING in line and "dp_l_fault" in line for line in f), "no WARNING in the server log"


def check_fail_closed_a_cancel_or_a_timeout_forfeits_nothing():
    a = faulty_analyst("dp_l_cancelled", 5, "57014")
    c, notices = with_notices(a)
    with c:
        refused(c, "SELECT dp_count(i, 0.5) FROM pt", E.QueryCanceled)
    assert not [n for n in notices if FORFEIT_WARNING in n[1]], notices
    assert spent(a) == Decimal("0.5"), spent(a)
    assert forfeits(a) == [], forfeits(a)


def check_fail_closed_out_of_memory_forfeits():
    # an expression can be made to allocate in proportion to a value on the rows that reach it: out of
    # memory inside a level is not a condition of the server alone
    a = faulty_analyst("dp_l_oom", 2, "53200")
    c, notices = with_notices(a)
    with c:
        refused(c, "SELECT dp_count(i, 0.5) FROM pt", E.OutOfMemory)
    assert [n for n in notices if FORFEIT_WARNING in n[1]], notices
    assert spent(a) == Decimal("2"), spent(a)


def check_fail_closed_a_configured_limit_forfeits():
    # temp_file_limit (53400) is reached by a sort that spills a data-dependent amount of rows: a
    # configured limit inside a level is not a condition of the server alone
    a = faulty_analyst("dp_l_templimit", 2, "53400")
    c, notices = with_notices(a)
    with c:
        refused(c, "SELECT dp_count(i, 0.5) FROM pt", E.ConfigurationLimitExceeded)
    assert [n for n in notices if FORFEIT_WARNING in n[1]], notices
    assert spent(a) == Decimal("2"), spent(a)


def check_fail_closed_a_pending_cancel_does_not_withdraw_the_forfeit():
    # the forfeit waited for the ledger worker with interrupts enabled: a cancel (or statement_timeout)
    # that arrived while the worker was busy withdrew the queued forfeit, and the error still told its
    # bit. Here the worker is held on a lock while the analyst's level fails and is cancelled.
    a = faulty_analyst("dp_l_dodge", 4, "22012")
    busy = new_analyst("dp_l_busy", 10)
    analyst = connect(a)
    analyst.autocommit = False
    pid = analyst.execute("SELECT pg_backend_pid()").fetchone()[0]
    analyst.execute("DECLARE cur CURSOR FOR SELECT dp_count(i, 0.5) FROM pt")  # charged here
    results = {}

    def run(name, conn, sql):
        outcome_into(results, name, conn, sql)

    locker = worker_held()
    other = connect(busy)
    t1 = threading.Thread(target=run, args=("busy", other, "SELECT dp_count(i, 0.5) FROM pt"))
    t1.start()
    time.sleep(1.0)  # the worker now waits for the lock, with the busy role's charge
    t2 = threading.Thread(target=run, args=("analyst", analyst, "FETCH ALL FROM cur"))
    t2.start()
    time.sleep(1.0)  # the level failed; its forfeit is queued behind the busy charge
    with connect() as c:
        c.execute("SELECT pg_cancel_backend(%s)", (pid,))
    time.sleep(1.0)
    still_waiting = t2.is_alive()
    locker.rollback()
    t1.join(30)
    t2.join(30)
    for conn in (locker, other, analyst):
        conn.close()
    assert results.get("analyst") == "DivisionByZero", results
    assert still_waiting, "the cancel ended the forfeit's wait"
    assert spent(a) == Decimal("4"), spent(a)
    assert len(forfeits(a)) == 1, forfeits(a)


def check_fail_closed_even_when_a_plpgsql_handler_catches_the_error():
    # the error never reaches the client: the forfeit is charged before any handler sees it
    a = faulty_analyst("dp_l_caught", 3, "22012")
    with connect(a) as c:
        c.execute("DO $$ BEGIN PERFORM dp_count(i, 0.5) FROM pt; "
                  "EXCEPTION WHEN division_by_zero THEN RAISE NOTICE 'caught'; END $$")
    assert spent(a) == Decimal("3"), spent(a)
    assert len(forfeits(a)) == 1, forfeits(a)


def check_fail_closed_errors_above_the_level_forfeit_nothing():
    # the select list around the aggregates post-processes released values, above the level: the
    # same call written twice is one release (one value, charged once), so the difference is 0
    protected_table()
    a = new_analyst("dp_l_post", 1000)
    c, notices = with_notices(a)
    with c:
        refused(c, "SELECT 1 / (dp_count(i, 100) - dp_count(i, 100)) FROM pt", E.DivisionByZero)
        refused(c, "SELECT n FROM (SELECT dp_count(i, 100) AS n FROM pt) s WHERE 1 / (n - n) > 0", E.DivisionByZero)
    assert not [n for n in notices if FORFEIT_WARNING in n[1]], notices
    assert spent(a) == Decimal("200"), spent(a)
    assert forfeits(a) == [], forfeits(a)


def check_fail_closed_fault_injection_is_superuser_only():
    a = new_analyst("dp_l_nofault", 1)
    with connect(a) as c:
        refused(c, "SET dp.fail_inside_level = '22012'", E.InsufficientPrivilege)


def check_limit_0_over_a_data_modifying_with_query_is_charged():
    # LIMIT 0 releases nothing only when no level can run: a data-modifying WITH query runs to the
    # end whatever the LIMIT, so its DP level is charged (and refused to a role without a budget)
    protected_table()
    poor = new_analyst("dp_l_poor")
    rich = new_analyst("dp_l_limit0", 2)
    with connect() as c:
        c.execute("CREATE TABLE IF NOT EXISTS sink (v float8)")
        c.execute(f"GRANT INSERT, SELECT ON sink TO {poor}, {rich}")
    q = "WITH w AS (INSERT INTO sink SELECT dp_count(i, 0.5) FROM pt WHERE i = 7 RETURNING v) SELECT 1 LIMIT 0"
    with connect(poor) as c:
        refused(c, q, E.InsufficientPrivilege)
    with connect(rich) as c:
        c.execute(q)
        c.execute("SELECT dp_count(i, 0.5) FROM pt LIMIT 0")
    assert spent(rich) == Decimal("0.5"), spent(rich)
    with connect() as c:
        assert c.execute("SELECT count(*) FROM sink").fetchone()[0] == 1


def fresh_database(name):
    with connect(dbname="postgres") as c:
        c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {name}")
    with connect(dbname=name) as c:
        c.execute("CREATE EXTENSION pg_dp")
        c.execute("CREATE TABLE t AS SELECT g::float8 AS x FROM generate_series(1, 100) g")


def check_ledger_workers_started_with_the_server_cannot_be_starved():
    fresh_database("pg_dp_starved")
    with connect(dbname="postgres") as c:
        statics = int(c.execute("SHOW dp.ledger_workers").fetchone()[0])
    assert statics >= 1
    with ParallelHog():
        # a database no worker serves yet: a static worker takes it, although no slot is free
        t0 = time.time()
        with connect(dbname="pg_dp_starved") as c:
            c.execute("SELECT dp_count(x, 0.5) FROM t")
            n = c.execute("SELECT count(*) FROM dp.ledger").fetchone()[0]
        assert n == 1, n
        assert time.time() - t0 < 8, time.time() - t0


def check_without_a_ledger_worker_a_query_fails_fast_and_is_not_charged():
    fresh_database("pg_dp_starved")
    with connect(dbname="postgres") as c:
        statics = int(c.execute("SHOW dp.ledger_workers").fetchone()[0])
    # keep every static worker busy serving another database
    others = [f"pg_dp_busy{i}" for i in range(statics)]
    for d in others:
        fresh_database(d)
    stop = threading.Event()

    def keep_busy(d):
        with connect(dbname=d) as c:
            while not stop.is_set():
                c.execute("SELECT dp_count(x, 0.001) FROM t")
                time.sleep(0.3)

    busy = [threading.Thread(target=keep_busy, args=(d,), daemon=True) for d in others]
    for t in busy:
        t.start()
    try:
        time.sleep(1)
        with ParallelHog():
            with connect(dbname="pg_dp_starved") as c:
                c.execute("SET dp.ledger_timeout = 2")
                t0 = time.time()
                e = refused(c, "SELECT dp_count(x, 0.5) FROM t", E.ConfigurationLimitExceeded)
                waited = time.time() - t0
                assert "nothing was charged" in str(e) and "dp.ledger_timeout" in str(e), e
                assert e.diag.message_hint and "max_worker_processes" in e.diag.message_hint, e.diag.message_hint
                assert 1.5 < waited < 6, waited
    finally:
        stop.set()
        for t in busy:
            t.join()
    # once slots are free again, the same query is charged once
    with connect(dbname="pg_dp_starved") as c:
        assert c.execute("SELECT count(*) FROM dp.ledger").fetchone()[0] == 0
        c.execute("SELECT dp_count(x, 0.5) FROM t")
        assert c.execute("SELECT count(*) FROM dp.ledger").fetchone()[0] == 1


def check_the_ledger_timeout_is_superuser_only():
    a = new_analyst("dp_l_timeout", 1.0)
    with connect(a) as c:
        refused(c, "SET dp.ledger_timeout = 1", E.InsufficientPrivilege)


def wait_for_server(timeout=60):
    deadline = time.time() + timeout
    while True:
        try:
            with connect() as c:
                c.execute("SELECT 1")
                return
        except psycopg.OperationalError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def check_zz_charge_survives_kill_9_of_the_backend():
    a = new_analyst("dp_l_kill", 1.0)
    c = connect(a)
    pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
    c.execute("SELECT dp_count(x, 0.25) FROM t").fetchone()
    os.kill(pid, signal.SIGKILL)  # the postmaster then resets every backend (crash recovery)
    try:
        c.close()
    except Exception:  # noqa: BLE001
        pass
    time.sleep(1)
    wait_for_server()
    assert spent(a) == Decimal("0.25"), spent(a)


def check_zz_charge_survives_immediate_shutdown():
    a = new_analyst("dp_l_crash", 1.0)
    with connect(a) as c:
        c.execute("SELECT dp_count(x, 0.25) FROM t").fetchone()
        pg_ctl("stop", "-m", "immediate")
    pg_ctl("start")
    wait_for_server()
    assert spent(a) == Decimal("0.25"), spent(a)
    assert receipts(a) == 1


def pg_ctl(*args):
    subprocess.run(["sudo", "-u", "postgres", f"{ARGS.pgbin}/pg_ctl", "-D", ARGS.datadir, "-l",
                    f"{ARGS.datadir}/server.log", "-w", *args], check=True, stdout=subprocess.DEVNULL)


def check_zzz_create_extension_without_preload_says_what_to_add():
    # the same server, started with pg_dp removed from shared_preload_libraries
    pg_ctl("stop", "-m", "fast")
    pg_ctl("start", "-o", "-c shared_preload_libraries=")
    try:
        wait_for_server()
        with connect(dbname="postgres") as c:
            assert c.execute("SHOW shared_preload_libraries").fetchone()[0] == ""
            c.execute("DROP DATABASE IF EXISTS pg_dp_nopreload")
            c.execute("CREATE DATABASE pg_dp_nopreload")
        with connect(dbname="pg_dp_nopreload") as c:
            try:
                c.execute("CREATE EXTENSION pg_dp")
                raise AssertionError("CREATE EXTENSION succeeded without shared_preload_libraries")
            except E.ObjectNotInPrerequisiteState as e:
                assert e.diag.message_hint and "shared_preload_libraries = 'pg_dp'" in e.diag.message_hint, e.diag.message_hint
        # an existing installation refuses to release anything rather than release unpaid
        with connect() as c:
            try:
                c.execute("SELECT dp_count(*) FROM t")
                raise AssertionError("released without the ledger")
            except E.ObjectNotInPrerequisiteState:
                pass
    finally:
        pg_ctl("stop", "-m", "fast")
        pg_ctl("start")  # start, unlike restart, does not reuse the previous command line
        wait_for_server()


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="/tmp")
    ap.add_argument("--port", type=int, default=25433)
    ap.add_argument("--datadir", required=True)
    ap.add_argument("--pgbin", default="/usr/lib/postgresql/15/bin")
    ARGS = ap.parse_args()
    setup()
    run_checks(globals(), "ledger")

if __name__ == "__main__":
    main()
