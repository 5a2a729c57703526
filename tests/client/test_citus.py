#!/usr/bin/env python3
"""pg_dp on Citus: a coordinator and two workers on this machine, started by scripts/test.sh with
shared_preload_libraries = 'citus,pg_dp'. What this version promises there (docs/distributed.md):

- DP aggregates over a distributed table are computed exactly on the workers (Citus's partial
  aggregation) and released once on the coordinator: the same answers as on one server, noise of the
  stated scale added once, one charge on the coordinator, none on the workers;
- quantiles too: the workers count each value of each group, the coordinator runs the quantile's own
  mechanism on the merged values;
- automatic bounds too: the workers count each magnitude bin of each group (sums, means) or each value
  (quantiles), the coordinator chooses the bounds and releases;
- what does not run distributed (grouping sets) is refused before any charge, and pg_dp's internal
  merge aggregates cannot be called;
- protecting a distributed table protects its shards on every worker: a DP-only role that connects
  straight to a worker can neither read a shard nor release a DP value from it;
- the label follows the table to the workers when it is removed, and Citus's own queries keep working
  for roles that may read the table.

Run by scripts/test.sh:
    /usr/bin/python3 tests/client/test_citus.py --host /tmp --coordinator 25450 --workers 25451,25452 --spare 25453
Prints one line per check and "citus: N passed, M failed"; exits non-zero on any failure.
"""
import argparse
import re

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
            for r in (ROLE, "dp_citus_trusted", "dp_citus_poor"):
                c.execute(f"DROP ROLE IF EXISTS {r}")
    for port in [ARGS.coordinator] + ARGS.workers:
        with connect(port, db="postgres") as c:
            c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
            c.execute(f"CREATE DATABASE {DB}")
            for r in (ROLE, "dp_citus_trusted", "dp_citus_poor"):
                c.execute(f"DROP ROLE IF EXISTS {r}")
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
        # the same rows in one server, to compare with
        c.execute("CREATE TABLE t_local AS SELECT * FROM t")
        c.execute("SELECT dp.protect_table('t_local')")
        # a table with a privacy unit, distributed by it: each person has 10 rows in one group
        c.execute("CREATE TABLE u (uid int NOT NULL, g int NOT NULL, x float8)")
        c.execute("SELECT create_distributed_table('u', 'uid')")
        c.execute(f"INSERT INTO u SELECT i % 2000, i % 5, i % 100 FROM generate_series(1, {ROWS}) i")
        c.execute("CREATE TABLE u_local AS SELECT * FROM u")
        for tbl in ("u", "u_local"):
            c.execute("SELECT dp.protect_table(%s, 'uid', max_groups_contributed => 2, max_count_per_unit => 5)", (tbl,))
        for tbl in ("t_local", "u", "u_local"):
            c.execute(f"GRANT SELECT ON {tbl} TO {ROLE}")
        # NaN and NULL values: skipped by the sums (NaN like NULL), counted by dp_count(value) as PostgreSQL's count
        c.execute("CREATE TABLE n (id int, x float8, y numeric)")
        c.execute("SELECT create_distributed_table('n', 'id')")
        c.execute("INSERT INTO n SELECT i, i, i FROM generate_series(1, 100) i")
        c.execute("INSERT INTO n VALUES (101, 'NaN', 'NaN'), (102, NULL, NULL), (103, 'Infinity', 1e9)")
        c.execute("CREATE TABLE n_local AS SELECT * FROM n")
        for tbl in ("n", "n_local"):
            c.execute("SELECT dp.protect_table(%s)", (tbl,))
            c.execute(f"GRANT SELECT ON {tbl} TO {ROLE}")
        # u's groups are public: every declared value gets a row, 9 an empty one
        for tbl in ("u", "u_local"):
            c.execute("SELECT dp.set_domain(%s, 'g', ARRAY[0, 1, 2, 3, 4, 9])", (tbl,))
        c.execute("SELECT dp.set_budget(%s, 1000000, 0.5)", (ROLE,))


def receipts(c):
    return c.execute("SELECT count(*) FROM dp.release_log").fetchone()[0]


def a_shard(table="t"):
    """(worker port, shard table name, shard id) of the first shard of a distributed table."""
    with coordinator() as c:
        return c.execute(
            "SELECT s.nodeport, s.shard_name::text, s.shardid FROM citus_shards s WHERE s.table_name = %s::regclass "
            "ORDER BY s.shardid LIMIT 1", (table,)).fetchone()


def spent(c, role=ROLE):
    return c.execute("SELECT epsilon_spent FROM dp.budgets WHERE role = %s::regrole", (role,)).fetchone()[0]


def worker_receipts():
    ws = workers()
    try:
        return [receipts(w) for w in ws]
    finally:
        for w in ws:
            w.close()


# Each query runs over the distributed table and over its single-server copy (suffix _local); at
# ε = 1000 per aggregate the two agree within the noise, and both with the exact answer.
HUGE = 1000
SAME_QUERIES = [
    ("SELECT dp_count(true, {e}), dp_sum(x, 0, 100, {e}), dp_avg(x, 0, 100, {e}), dp_variance(x, 0, 100, {e}), "
     "dp_stddev(x, 0, 100, {e}) FROM {t}", []),
    ("SELECT g, dp_count(true, {e}), dp_sum(x, 0, 100, {e}), dp_avg(x, 0, 100, {e}) FROM {t} GROUP BY g ORDER BY g", []),
    ("SELECT dp_sum(id, 0, 10, {e}), dp_sum(g::int8, 0, 10, {e}), dp_sum(x::numeric, 0, 50, {e}), "
     "dp_count(x, {e}) FILTER (WHERE g = 2) FROM {t} WHERE x >= 10", []),
    ("SELECT CASE WHEN g > 2 THEN 'high' ELSE 'low' END AS k, dp_avg(x, 10, 90, {e}) FROM {t} WHERE id <= 10000 "
     "GROUP BY 1 HAVING dp_count(true, {e}) > 10 ORDER BY 1", []),
    ("SELECT dp_count(true, {e}), dp_sum(x, 0, 100, {e}) FROM {t} WHERE id = 7", []),
    ("SELECT dp_sum(x, %s, %s, {e}), dp_count(true, {e}) FROM {t} WHERE g = %s", [0.0, 60.0, 3]),
    ("SELECT g, dp_count(true, {e}), dp_sum(x, 0, 100, {e}) FROM {u} GROUP BY g ORDER BY g", []),
    ("SELECT dp_count(true, {e}), dp_avg(x, 0, 100, {e}) FROM {u}", []),
    # quantiles whose target rank lies inside one value's rows (at a rank between two values every
    # point between them is an exact answer)
    ("SELECT g, dp_median(id, 0, 20000, {e}), dp_percentile(x, 0.93, 0, 100, {e}, 1e-6), "
     "dp_percentile_em(x, 0.27, 0, 100, {e}), dp_count(true, {e}), dp_sum(x, 0, 100, {e}) FROM {t} GROUP BY g ORDER BY g", []),
    ("SELECT dp_median(id, 0, 20000, {e}), dp_median(g::int8, 0, 10, {e}), "
     "dp_percentile(x, 0.53, 0, 100, {e}) FILTER (WHERE g = 1), dp_median(id, 0, 20000) FROM {t} WHERE id > 100", []),
    ("SELECT dp_percentile_em(x, 0.531, 0, 100, {e}), dp_median(x, 0, 100, {e}, 1e-6) FROM {u}", []),
    ("SELECT dp_median(x, 0, 200, {e}), dp_percentile_em(x, 1, 0, 200, {e}), dp_sum(x, 0, 100, {e}) FROM {n}", []),
    ("SELECT dp_count(x, {e}), dp_sum(x, 0, 100, {e}), dp_avg(y, 0, 100, {e}), dp_sum(y, 0, 100, {e}), "
     "dp_variance(x, 0, 200, {e}) FROM {n}", []),
    # automatic bounds: a histogram of magnitudes (sums, means) or the values (quantiles) per group
    ("SELECT g, dp_sum(x, {e}), dp_avg(x, {e}), dp_sum(id, {e}), dp_median(id, {e}), dp_percentile(x, 0.93, {e}), "
     "dp_count(true, {e}) FROM {t} GROUP BY g ORDER BY g", []),
    ("SELECT dp_sum(g::int8, {e}), dp_sum(x::numeric, {e}), dp_avg(x::numeric, {e}) FILTER (WHERE g = 2) FROM {t}", []),
    ("SELECT dp_sum(x, {e}), dp_avg(y, {e}), dp_sum(y, {e}), dp_median(x, {e}) FROM {n} WHERE id <= 100", []),
    # numeric NaN and NULL have no magnitude bin (their row of the exact query is skipped), 1e9 has one
    ("SELECT dp_sum(y, {e}), dp_avg(y, {e}), dp_count(true, {e}) FROM {n} WHERE id > 50", []),
]


def close(a, b):
    if a is None or b is None or isinstance(a, str):
        return a == b
    a, b = float(a), float(b)
    return abs(a - b) <= max(3.0, 0.01 * abs(b))


def check_dp_queries_over_distributed_tables_match_one_server_at_huge_epsilon():
    with coordinator(ROLE) as a, coordinator() as su:
        su.execute("SET dp.group_selection_epsilon = 20")
        a.execute("SET dp.group_selection_epsilon = 20")
        for sql, args in SAME_QUERIES:
            dist = a.execute(sql.format(e=HUGE, t="t", u="u", n="n"), args or None).fetchall()
            local = a.execute(sql.format(e=HUGE, t="t_local", u="u_local", n="n_local"), args or None).fetchall()
            assert len(dist) == len(local) and dist, (sql, dist, local)
            for rd, rl in zip(dist, local):
                assert all(close(x, y) for x, y in zip(rd, rl)), (sql, rd, rl)
        # and the exact answers: x is i % 100, so the median lies in [49, 50], the 0.9 quantile at 89 or 90
        (med, p90, id_med), = a.execute(f"SELECT dp_median(x, 0, 100, {HUGE}), dp_percentile_em(x, 0.9, 0, 100, {HUGE}), "
                                        f"dp_median(id, 0, {ROWS}, {HUGE}) FROM t").fetchall()
        assert 48.9 <= med <= 50.1 and 88.9 <= p90 <= 90.1 and abs(id_med - ROWS / 2) <= 2 and id_med == round(id_med), (med, p90, id_med)
        # without bounds: the bounds chosen from the workers' magnitude bins (x < 2^7), shown in dp.last_releases
        (s_auto, avg_auto), = a.execute(f"SELECT dp_sum(x, {HUGE}), dp_avg(x, {HUGE}) FROM t").fetchall()
        assert abs(s_auto - 990000) <= 5 and abs(avg_auto - 49.5) < 0.01, (s_auto, avg_auto)
        shown = a.execute("SELECT aggregate, lower, upper FROM dp.last_releases() "
                          "WHERE released_at = (SELECT max(released_at) FROM dp.last_releases()) ORDER BY aggregate").fetchall()
        assert shown == [("dp_avg", 0, 128), ("dp_sum", 0, 128)], shown
        (n, s, avg, var, sd), = a.execute(SAME_QUERIES[0][0].format(e=HUGE, t="t")).fetchall()
        en, es, eavg, evar = su.execute("SELECT count(*), sum(x), avg(x), var_samp(x) FROM t").fetchone()
        assert abs(n - en) <= 1 and abs(s - es) <= 5 and abs(avg - eavg) < 0.05 and abs(var - evar) < 0.05 * evar, (n, s, avg, var, en, es, eavg, evar)
        groups = a.execute("SELECT g, dp_count(true, %s) FROM t GROUP BY g ORDER BY g" % HUGE).fetchall()
        assert [(g, round(c)) for g, c in groups] == [(g, ROWS // 5) for g in range(5)], groups
        # a unit counts at most 5 of its 10 rows; the declared value 9 has no rows and still a group
        groups = a.execute("SELECT g, dp_count(true, %s) FROM u GROUP BY g ORDER BY g" % HUGE).fetchall()
        assert [(g, round(c)) for g, c in groups] == [(g, 400 * 5) for g in range(5)] + [(9, 0)], groups
        # 101 rows with a value (NaN counts, NULL not); NaN skipped by the sums, Infinity clamped to 100
        (cnt, sx, ay, sy, _), = [[float(v) for v in r] for r in a.execute(next(q for q, _ in SAME_QUERIES if "dp_variance(x, 0, 200" in q).format(e=HUGE, n="n")).fetchall()]
        assert round(cnt) == 102 and abs(sx - 5150) <= 3 and abs(sy - 5150) <= 3 and abs(ay - 5150 / 101) < 0.05, (cnt, sx, ay, sy)


def check_attack_the_session_rounds_the_bounds_the_workers_get():
    """Citus writes the shard queries' constants with the session's settings: with extra_float_digits
    = -15 the bound 1.45 reached the workers as 1 (and 2.4999 as 2), so they clamped and put values on
    another grid than the coordinator's release: answers moved far beyond their sensitivity, and one
    row's presence showed (found by attacking this session's change). Citus's limit on intermediate
    results raised an error only when rows reached it, after the charge. Both are pinned while the
    exact query runs."""
    with coordinator() as su:
        su.execute("DROP TABLE IF EXISTS pub_codes")
        su.execute("CREATE TABLE pub_codes AS SELECT g AS k FROM generate_series(0, 9) g")
        su.execute("ALTER TABLE pub_codes ADD PRIMARY KEY (k)")
        su.execute(f"GRANT SELECT ON pub_codes TO {ROLE}")
    sql = ("SELECT dp_sum(x, 0, '1.45'::float8, {e}), dp_avg(x, '1.5'::float8, '2.4999'::float8, {e}), "
           "dp_variance(x, 0, '0.45'::float8, {e}) FROM {t} WHERE id > {i}")
    with coordinator(ROLE) as a:
        a.execute("SET extra_float_digits = -15")
        for i in range(3):
            dist = a.execute(sql.format(e=HUGE, t="t", i=i)).fetchone()
            local = a.execute(sql.format(e=HUGE, t="t_local", i=i)).fetchone()
            assert all(close(x, y) for x, y in zip(dist, local)), (dist, local)
        a.execute("SET citus.local_table_join_policy = 'prefer-distributed'")
        a.execute("SET citus.max_intermediate_result_size = 0")
        n, = a.execute(f"SELECT dp_count(true, {HUGE}) FROM t LEFT JOIN pub_codes p ON p.k = t.g WHERE x > -1").fetchone()
        assert abs(n - ROWS) <= 2, n


def check_one_charge_on_the_coordinator_and_none_on_the_workers():
    sql = "SELECT g, dp_count(true, 0.5), dp_sum(x, 0, 100, 0.25) FROM t WHERE id > 10 GROUP BY g"
    with coordinator(ROLE) as a, coordinator() as su:
        before, wbefore, s0 = receipts(su), worker_receipts(), spent(su)
        rows = a.execute(sql).fetchall()
        assert 0 < len(rows) <= 5, rows
        # dp_count, dp_sum and the selection of the groups: three receipts, each once
        assert receipts(su) == before + 3, (receipts(su), before)
        assert worker_receipts() == wbefore, (worker_receipts(), wbefore)
        log = su.execute("SELECT aggregate, epsilon, query_text, details->>'distributed' FROM dp.ledger "
                         "ORDER BY id DESC LIMIT 3").fetchall()
        assert sorted(r[0].split("(")[0] for r in log) == ["dp.keep_group", "dp_count", "dp_sum"], log
        assert all(r[2] == sql for r in log), log  # the caller's query, not a shard query
        assert all(r[3] and "Citus" in r[3] for r in log), log
        assert float(spent(su)) == float(s0) + 0.5 + 0.25 + 1.0, (spent(su), s0)
        # a quantile and a sum without bounds: one receipt each, on the coordinator only
        before, wbefore, s0 = receipts(su), worker_receipts(), spent(su)
        a.execute("SELECT dp_median(x, 0, 100, 0.5), dp_sum(x, 0.25) FROM t WHERE id > 11").fetchall()
        assert receipts(su) == before + 2 and worker_receipts() == wbefore, (receipts(su), before)
        assert float(spent(su)) == float(s0) + 0.75, (spent(su), s0)


def check_noise_is_added_once_with_the_stated_scale():
    """300 releases of a count at ε = 1: the mean is the exact count and the variance that of one
    discrete Laplace draw of the receipt's scale (noise per shard would multiply it by 32)."""
    import math
    n = 300
    with coordinator(ROLE) as a, coordinator() as su:
        exact = su.execute("SELECT count(*) FROM t WHERE g = 1").fetchone()[0]
        # a different condition each time (always true): a repeated query would be answered from the
        # release cache, one release
        vals = [a.execute(f"SELECT dp_count(true, 1.0) FROM t WHERE g = 1 AND id <> -{i}").fetchone()[0] for i in range(n)]
        scale = su.execute("SELECT noise_scale FROM dp.release_log ORDER BY id DESC LIMIT 1").fetchone()[0]
    p = math.exp(-1.0 / float(scale))
    var = 2 * p / (1 - p) ** 2
    mean = sum(vals) / n
    sample_var = sum((v - mean) ** 2 for v in vals) / (n - 1)
    z = 4.9  # two-sided alpha = 1e-6
    assert abs(mean - exact) <= z * math.sqrt(var / n), (mean, exact, var)
    # the sample variance of a Laplace-like law (kurtosis 6) has relative sd about sqrt(5/n)
    assert abs(sample_var / var - 1) <= z * math.sqrt(5 / n), (sample_var, var)
    assert len(set(vals)) > 3, vals


def worker_commands(c, sql):
    """The commands Citus sends to the workers for sql (citus.log_remote_commands, superuser)."""
    sent = []
    c.add_notice_handler(lambda d: sent.append(d.message_primary or ""))
    c.execute("SET citus.log_remote_commands = on")
    c.execute(sql).fetchall()
    c.execute("RESET citus.log_remote_commands")
    return [m for m in sent if "issuing" in m]


def check_the_workers_aggregate_and_bound_units_and_the_coordinator_adds_noise():
    with coordinator() as su:
        su.execute("SET dp.release_cache = off")
        cmds = worker_commands(su, "SELECT g, dp_sum(x, 0, 100, 0.5), dp_count(true, 0.5) FROM t GROUP BY g")
        shard_queries = [m for m in cmds if "FROM public.t_" in m]
        assert len(shard_queries) >= 32, cmds
        # partial aggregation of grid integers on the workers: exact sums and counts, no rows, no noise
        assert all("sum(dp.exact_grid(" in m and "count(" in m and "GROUP BY" in m for m in shard_queries), shard_queries[:2]
        assert not any("dp_sum" in m or "dp_count" in m or "merge_" in m for m in cmds), cmds
        # dp_sum and dp_avg with bounds that hold 0 share one grid value per row: the shard queries
        # write it one way (dp_sum's kind, epsilon 1), so each worker computes it once
        cmds = worker_commands(su, "SELECT dp_sum(x, 0, 100, 0.5), dp_avg(x, 0, 100, 0.25) FROM t")
        shard_queries = [m for m in cmds if "FROM public.t_" in m]
        calls = [re.findall(r"dp\.exact_grid\([^)]*\)", m) for m in shard_queries]
        assert shard_queries and all(len(c) == 2 and c[0] == c[1] and ", 2, " in c[0] for c in calls), calls[:2]
        # bounds far from 0 next to their width: dp_avg has a finer grid of its own
        cmds = worker_commands(su, "SELECT dp_sum(x, 90, 100, 0.5), dp_avg(x, 90, 100, 0.25) FROM t")
        calls = [re.findall(r"dp\.exact_grid\([^)]*\)", m) for m in cmds if "FROM public.t_" in m]
        assert calls and all(len(c) == 2 and c[0] != c[1] for c in calls), calls[:2]
        # a quantile's values stay on the workers, counted: one row per group and value
        cmds = worker_commands(su, "SELECT g, dp_median(x, 0, 100, 0.5) FROM t GROUP BY g")
        shard_queries = [m for m in cmds if "FROM public.t_" in m]
        assert shard_queries and all("count(" in m and "GROUP BY" in m for m in shard_queries), shard_queries[:2]
        assert not any("dp_median" in m or "merge_" in m for m in cmds), cmds
        # the table is distributed by its privacy unit: each unit's clamped sum is computed on its worker
        cmds = worker_commands(su, "SELECT dp_sum(x, 0, 100, 0.5) FROM u")
        shard_queries = [m for m in cmds if "FROM public.u_" in m]
        assert shard_queries and all("dp.unit_sum(" in m and "GROUP BY" in m and "uid" in m for m in shard_queries), cmds[:3]


def check_an_exhausted_budget_charges_nothing_anywhere():
    with coordinator() as su:
        su.execute("DROP ROLE IF EXISTS dp_citus_poor")
        su.execute("CREATE ROLE dp_citus_poor LOGIN")
        su.execute("GRANT SELECT ON t TO dp_citus_poor")
        su.execute("SELECT dp.set_budget('dp_citus_poor', 1)")
        before, wbefore = receipts(su), worker_receipts()
    with coordinator("dp_citus_poor") as p:
        e = refused(p, "SELECT g, dp_sum(x, 0, 100, 0.9) FROM t GROUP BY g", E.InsufficientResources)
        assert "budget exhausted" in str(e) and "nothing was charged" in str(e), str(e)
        assert p.execute("SELECT dp_count(true, 0.9) FROM t").fetchone()[0] > 0
        refused(p, "SELECT dp_count(true, 0.2) FROM t", E.InsufficientResources)
    with coordinator() as su:
        assert receipts(su) == before + 1, (receipts(su), before)
        assert worker_receipts() == wbefore
        assert float(spent(su, "dp_citus_poor")) == 0.9


def check_what_does_not_run_distributed_is_refused_before_any_charge():
    refusals = [
        ("SELECT dp.merge_auto_sum_float8(ARRAY[65, 1, 4503599627370496]::numeric[], 0.5)", "internal to pg_dp"),
        ("SELECT dp.exact_magnitude(x, false) FROM t", "permission denied"),
        ("SELECT dp.merge_median(ARRAY[5, 100]::float8[], 0, 100, 0.5)", "internal to pg_dp"),
        ("SELECT g, dp_count(true, 0.5) FROM t GROUP BY ROLLUP (g)", "GROUPING SETS"),
        ("SELECT dp.merge_count(ARRAY[1, 20000, 0]::numeric[], 0.5)", "internal to pg_dp"),
        ("SELECT dp.merge_sum(e, 0, 100, 0.5) FROM (VALUES (ARRAY[5, 1, 0]::numeric[])) v(e)", "internal to pg_dp"),
        ("SELECT * FROM dp.distributed_rows('{QUERY}') AS r(a numeric[])", "internal to pg_dp"),
        ("EXPLAIN SELECT dp_count(true, 0.5) FROM t", "EXPLAIN of a query on protected table"),
        ("EXPLAIN ANALYZE SELECT g, dp_count(true, 0.5) FROM t GROUP BY g", "EXPLAIN of a query on protected table"),
    ]
    with coordinator(ROLE) as a, coordinator() as su:
        before, wbefore, s0 = receipts(su), worker_receipts(), spent(su)
        for sql, why in refusals:
            e = refused(a, sql, psycopg.Error)
            assert why in str(e), (sql, str(e))
        # a function of the caller's own would run with the rights the exact query runs with
        a.execute("CREATE OR REPLACE FUNCTION pg_temp.mine(float8) RETURNS float8 LANGUAGE sql AS 'SELECT $1'")
        refused(a, "SELECT dp_sum(pg_temp.mine(x), 0, 100, 0.5) FROM t", E.InsufficientPrivilege)
        refused(a, "SELECT dp_count(true, 0.5) FROM t WHERE pg_temp.mine(x) > 1", E.InsufficientPrivilege)
        assert (receipts(su), worker_receipts(), spent(su)) == (before, wbefore, s0)
        assert not a.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]


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
