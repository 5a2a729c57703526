#!/usr/bin/env python3
"""pg_dp benchmark driver (run through bench/run.sh, which sets up the server).

Timing: every pg_dp query is paired with the native query computing the same statistic on the same
table; the two alternate (which one goes first alternates too), and the median of the per-pair ratios
is printed next to the median times. Serial runs set
max_parallel_workers_per_gather = 0; parallel runs force a parallel plan with 2 workers.

Quantiles: dp_median / dp_percentile / dp_percentile_em against percentile_cont on a 1,000,000-row
table, paired the same way; neither has a parallel plan.

Accuracy: many independent releases of dp_sum/dp_avg on one fixed table (one query each) give the
RMSE against the exact answer, printed next to the RMSE of the continuous Laplace mechanism at the
same sensitivity and epsilon.

Units: dp_sum over a protected table with a privacy unit (10,000,000 rows by default, 1,000,000 units),
paired with the native two-level query SELECT sum(least(s, upper)) FROM (SELECT uid, sum(x) s ... GROUP BY
uid) u, serial and parallel; and the same with GROUP BY over 10 public-domain keys.

Selection: how often DP partition selection keeps a group, against its number of units, at epsilon 1,
delta 1e-6 (many releases of one query with groups of 1..40 units), beside the exact keep probability and
the probability of Laplace thresholding at the same (epsilon, delta).

Grammar: the planning time (EXPLAIN's "Planning Time") of admitted DP queries on a protected table,
against the same queries with PostgreSQL's aggregates on a server without pg_dp (--plain-port), and
the same native queries on the pg_dp server (what the check costs a query that is not a DP query).
"""
import argparse
import math
import os
import re
import statistics
import subprocess
import tempfile
import time

import psycopg

PAIRS = [
    ("count(*)", "count(*)", "dp_count(*)"),
    ("count(x)", "count(x)", "dp_count(x, 1.0)"),
    ("sum(int4)", "sum(i)", "dp_sum(i, 0, 10000000, 1.0)"),
    ("sum(float8)", "sum(x)", "dp_sum(x, 0, 1000, 1.0)"),
    ("avg(float8)", "avg(x)", "dp_avg(x, 0, 1000, 1.0)"),
]


def timed(cur, sql):
    t = time.perf_counter()
    cur.execute(sql)
    if cur.description is not None:
        cur.fetchall()
    return time.perf_counter() - t


def plan_has_partial(cur, sql):
    # Partial Aggregate, Partial HashAggregate, Partial GroupAggregate
    return any(re.search(r"Partial \w*Aggregate", r[0]) for r in cur.execute("EXPLAIN " + sql))


def pair(cur, qn, qd, reps):
    """Median native time, median pg_dp time, median of the per-pair ratios (alternating order)."""
    timed(cur, qn), timed(cur, qd)  # warm-up
    tn, td, ratios = [], [], []
    for k in range(reps):
        # alternate which side runs first, and pair each run with its neighbour
        if k % 2:
            d, n = timed(cur, qd), timed(cur, qn)
        else:
            n, d = timed(cur, qn), timed(cur, qd)
        tn.append(n)
        td.append(d)
        ratios.append(d / n)
    ratio = statistics.median(ratios)
    if ratio < 0.1:
        # a fresh release reads every row, as the native query does: a tenth of its time means the
        # release cache answered, and the figure would not measure pg_dp
        raise RuntimeError(f"pg_dp took {ratio:.3f}x the native time for {qd!r}: not a fresh release "
                           "(is the release cache on for this section?)")
    return statistics.median(tn) * 1000, statistics.median(td) * 1000, ratio


def set_mode(cur, mode):
    if mode == "serial":
        cur.execute("SET max_parallel_workers_per_gather = 0")
    else:
        for s in ("max_parallel_workers_per_gather = 2", "parallel_setup_cost = 0",
                  "parallel_tuple_cost = 0", "min_parallel_table_scan_size = 0"):
            cur.execute("SET " + s)


def timing(conn, reps):
    cur = conn.cursor()
    rows = []
    for mode in ("serial", "parallel"):
        set_mode(cur, mode)
        for name, native, dp in PAIRS:
            qn = f"SELECT {native} FROM bench"
            qd = f"SELECT {dp} FROM bench"
            assert plan_has_partial(cur, qd) == (mode == "parallel"), (mode, qd)
            assert plan_has_partial(cur, qn) == (mode == "parallel"), (mode, qn)
            rows.append((mode, name) + pair(cur, qn, qd, reps))
    return rows


QUANTILE_PAIRS = [
    ("median, δ > 0", "percentile_cont(0.5) WITHIN GROUP (ORDER BY x)", "dp_median(x, 0, 1000, 1.0, 1e-6)"),
    ("median, δ = 0", "percentile_cont(0.5) WITHIN GROUP (ORDER BY x)", "dp_median(x, 0, 1000, 1.0)"),
    ("90th percentile, δ > 0", "percentile_cont(0.9) WITHIN GROUP (ORDER BY x)", "dp_percentile(x, 0.9, 0, 1000, 1.0, 1e-6)"),
    ("median, exponential mechanism", "percentile_cont(0.5) WITHIN GROUP (ORDER BY x)", "dp_percentile_em(x, 0.5, 0, 1000, 1.0)"),
]


def quantile_timing(conn, reps, rows):
    cur = conn.cursor()
    have = cur.execute("SELECT count(*) FROM pg_class WHERE relname = 'bench_q'").fetchone()[0]
    if not have or cur.execute("SELECT count(*) FROM bench_q").fetchone()[0] != rows:
        cur.execute("DROP TABLE IF EXISTS bench_q")
        cur.execute(f"CREATE TABLE bench_q AS SELECT x FROM bench WHERE i <= {rows}")
        cur.execute("VACUUM ANALYZE bench_q")
    set_mode(cur, "serial")  # the quantile aggregates have no partial (parallel) aggregation
    out = []
    for name, native, dp in QUANTILE_PAIRS:
        qn = f"SELECT {native} FROM bench_q"
        qd = f"SELECT {dp} FROM bench_q"
        assert not plan_has_partial(cur, qn) and not plan_has_partial(cur, qd), (qn, qd)
        out.append(("serial", name) + pair(cur, qn, qd, reps))
    return out


def accuracy(conn, releases):
    cur = conn.cursor()
    cur.execute("DROP TABLE IF EXISTS acc")
    cur.execute("CREATE TABLE acc AS SELECT (g % 1000)::float8 / 10 AS v FROM generate_series(1, 10000) g")
    exact_sum, exact_avg, n = cur.execute("SELECT sum(v), avg(v), count(*) FROM acc").fetchone()
    lo, hi = 0.0, 100.0
    out = []
    for eps in (0.1, 1.0):
        for agg, exact, optimum, label in (
            (f"dp_sum(v, {lo}, {hi}, {eps})", exact_sum, math.sqrt(2) * max(abs(lo), abs(hi)) / eps,
             "Laplace, sensitivity max(|l|,|u|)"),
            (f"dp_avg(v, {lo}, {hi}, {eps})", exact_avg, math.sqrt(2) * (hi - lo) / 2 / (eps * n),
             "Laplace on the centred sum with n known"),
        ):
            vals = [cur.execute(f"SELECT {agg} FROM acc").fetchone()[0] for _ in range(releases)]
            rmse = math.sqrt(sum((float(v) - float(exact)) ** 2 for v in vals) / len(vals))
            out.append((agg.split("(")[0], eps, rmse, optimum, rmse / optimum, label))
    return out, n


def charge_latency(conn, host, port, runs):
    """Median latency of a tiny DP query next to the same query without pg_dp, as a budgeted role."""
    conn.execute("DROP TABLE IF EXISTS tiny")
    conn.execute("CREATE TABLE tiny AS SELECT g AS i FROM generate_series(1, 10) g")
    conn.execute("DROP ROLE IF EXISTS dp_bench_analyst")
    conn.execute("CREATE ROLE dp_bench_analyst LOGIN")
    conn.execute("GRANT SELECT ON tiny TO dp_bench_analyst")
    conn.execute("SELECT dp.set_budget('dp_bench_analyst', 1e6)")
    # every run is a fresh, charged release (the cache would answer repeats for free)
    conn.execute("ALTER ROLE dp_bench_analyst SET dp.release_cache = off")
    out = {}
    with psycopg.connect(host=host, port=port, dbname="postgres", user="dp_bench_analyst", autocommit=True, prepare_threshold=None) as c:
        cur = c.cursor()
        for q in ("SELECT count(*) FROM tiny", "SELECT dp_count(i, 0.001) FROM tiny"):
            for _ in range(50):
                timed(cur, q)
        tn, td = [], []
        for _ in range(runs):
            tn.append(timed(cur, "SELECT count(*) FROM tiny"))
            td.append(timed(cur, "SELECT dp_count(i, 0.001) FROM tiny"))
        out["native_ms"] = statistics.median(tn) * 1000
        out["dp_ms"] = statistics.median(td) * 1000
    return out


DOMAIN_QUERY = "SELECT region, dp_sum(income, 0, 100000, 0.2), dp_count(id, 0.2) FROM cd GROUP BY region"
DOMAIN_NATIVE = "SELECT region, sum(income), count(id) FROM cd GROUP BY region"


def domain_section(conn, a):
    """A fresh release over a declared domain of 10 regions (release cache off), against PostgreSQL's own
    GROUP BY on the same table, serial and parallel, paired and alternating as the timing section."""
    rows = a.cache_rows
    cur = conn.cursor()
    for sql in ("DROP TABLE IF EXISTS cd",
                f"CREATE TABLE cd AS SELECT g AS id, g % 10 AS region, (g * 37 % 100000)::float8 AS income FROM generate_series(1, {rows}) g",
                "VACUUM ANALYZE cd", "SELECT dp.protect_table('cd')",
                "SELECT dp.set_domain('cd', 'region', ARRAY[0, 1, 2, 3, 4, 5, 6, 7, 8, 9])",
                "SET dp.release_cache = off"):
        cur.execute(sql)
    out = []
    for mode in ("serial", "parallel"):
        # the planner's own costs (the parallel plan is its choice for both queries at 1,000,000 rows):
        # forcing parallel plans with zero costs slowed PostgreSQL's own query here
        for sql in ("RESET parallel_setup_cost", "RESET parallel_tuple_cost", "RESET min_parallel_table_scan_size"):
            cur.execute(sql)
        cur.execute("SET max_parallel_workers_per_gather = " + ("0" if mode == "serial" else "2"))
        assert plan_has_partial(cur, DOMAIN_NATIVE) == (mode == "parallel"), (mode, DOMAIN_NATIVE)
        # the DP level's plan may stay serial (the domain's LEFT JOIN): say which it was
        dp_partial = plan_has_partial(cur, DOMAIN_QUERY)
        out.append((mode, "partial" if dp_partial else "serial") + pair(cur, DOMAIN_NATIVE, DOMAIN_QUERY, a.reps))
    cur.execute("RESET dp.release_cache")
    print(f"\nDeclared domain: 10 regions on {rows:,} rows, a fresh release (cache off), median of {a.reps} alternating pairs\n")
    print("| mode | pg_dp's aggregation | PostgreSQL ms | pg_dp ms | ratio |")
    print("|---|---|---:|---:|---:|")
    for mode, plan, n, d, r in out:
        print(f"| {mode} | {plan} | {n:.1f} | {d:.1f} | {r:.2f} |")
    return out


CACHE_QUERY = "SELECT region, dp_sum(income, 0, 100000, 0.2), dp_count(id, 0.2) FROM cb GROUP BY region"
CACHE_NATIVE = "SELECT region, sum(income), count(id) FROM cb GROUP BY region"


def cache_section(c, a):
    """A dashboard tile repeated: PostgreSQL's own query, the DP query released afresh each time (cache
    off for its role), and the DP query answered from the release cache."""
    rows = a.cache_rows
    for sql in ("DROP TABLE IF EXISTS cb",
                f"CREATE TABLE cb AS SELECT g AS id, g % 10 AS region, (g * 37 % 100000)::float8 AS income FROM generate_series(1, {rows}) g",
                "ANALYZE cb", "SELECT dp.protect_table('cb')",
                "SELECT dp.set_domain('cb', 'region', ARRAY[0, 1, 2, 3, 4, 5, 6, 7, 8, 9])"):
        c.execute(sql)
    for role, cache in (("dp_bench_cache", "on"), ("dp_bench_nocache", "off")):
        c.execute(f"DROP ROLE IF EXISTS {role}")
        c.execute(f"CREATE ROLE {role} LOGIN")
        c.execute(f"GRANT SELECT ON cb TO {role}")
        c.execute(f"ALTER ROLE {role} SET dp.release_cache = {cache}")
        c.execute("SELECT dp.set_budget(%s, 1e6)", (role,))
    med = {}
    conns = {r: psycopg.connect(host=a.host, port=a.port, dbname="postgres", user=r, autocommit=True, prepare_threshold=None)
             for r in ("postgres", "dp_bench_cache", "dp_bench_nocache")}
    runs = {"native": ("postgres", CACHE_NATIVE), "miss": ("dp_bench_nocache", CACHE_QUERY), "hit": ("dp_bench_cache", CACHE_QUERY)}
    try:
        for _, (r, q) in runs.items():
            for _ in range(5):
                timed(conns[r].cursor(), q)
        times = {k: [] for k in runs}
        for _ in range(a.cache_runs):
            for k, (r, q) in runs.items():
                times[k].append(timed(conns[r].cursor(), q))
        med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    finally:
        for x in conns.values():
            x.close()
    print(f"\nRelease cache: a 10-group dashboard query on {rows:,} rows, median of {a.cache_runs} alternating runs\n")
    print("| query | median ms | ratio to PostgreSQL |")
    print("|---|---:|---:|")
    print(f"| {CACHE_NATIVE} | {med['native']:.3f} | 1.00 |")
    print(f"| the DP query, released afresh (cache off) | {med['miss']:.3f} | {med['miss'] / med['native']:.2f} |")
    print(f"| the DP query, reused from the cache | {med['hit']:.3f} | {med['hit'] / med['native']:.3f} |")
    tps = {}
    for k, (r, q) in runs.items():
        tps[k], failed = pgbench_tps(a.host, a.port, q + ";", 8, a.pgbench_seconds, user=r)
        assert failed == 0, (k, failed)
    spent = c.execute("SELECT epsilon_spent FROM dp.budgets WHERE role = 'dp_bench_cache'::regrole").fetchone()[0]
    print(f"\nThroughput of the same queries: pgbench, 8 clients, {a.pgbench_seconds} s each\n")
    print("| query | queries/s | ratio to PostgreSQL |")
    print("|---|---:|---:|")
    print(f"| {CACHE_NATIVE} | {tps['native']:.0f} | 1.00 |")
    print(f"| the DP query, released afresh (cache off) | {tps['miss']:.0f} | {tps['miss'] / tps['native']:.2f} |")
    print(f"| the DP query, reused from the cache | {tps['hit']:.0f} | {tps['hit'] / tps['native']:.1f} |")
    print(f"\n(epsilon spent by the cached role over all its runs: {spent}, one release)")


def pgbench_tps(host, port, sql, clients, seconds, user="dp_bench_analyst", mode="simple"):
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(sql + "\n")
        path = f.name
    os.chmod(path, 0o644)
    try:
        r = subprocess.run(["pgbench", "-n", "-h", host, "-p", str(port), "-U", user, "-c", str(clients),
                            "-j", "2", "-T", str(seconds), "-M", mode, "-f", path, "postgres"],
                           capture_output=True, text=True, check=True)
    finally:
        os.unlink(path)
    m = re.search(r"tps = ([0-9.]+)", r.stdout)
    failed = re.search(r"number of failed transactions: ([0-9]+)", r.stdout)
    return float(m.group(1)), int(failed.group(1)) if failed else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="/tmp")
    ap.add_argument("--port", type=int, default=25434)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--releases", type=int, default=2000)
    ap.add_argument("--latency-runs", type=int, default=2000)
    ap.add_argument("--pgbench-seconds", type=int, default=15)
    ap.add_argument("--quantile-rows", type=int, default=1_000_000)
    ap.add_argument("--dprp-reps", type=int, default=5)
    ap.add_argument("--plain-port", type=int, default=25436, help="a server of the same PostgreSQL without pg_dp")
    ap.add_argument("--plan-runs", type=int, default=400)
    ap.add_argument("--unit-rows", type=int, default=10_000_000)
    ap.add_argument("--selection-releases", type=int, default=400)
    ap.add_argument("--cache-rows", type=int, default=1_000_000)
    ap.add_argument("--cache-runs", type=int, default=100)
    ap.add_argument("--sections", default="timing,quantiles,dprp,charge,domains,cache,accuracy,grammar,units,selection",
                    help="comma-separated subset of timing,quantiles,dprp,charge,cache,accuracy,grammar,units,selection")
    a = ap.parse_args()
    sections = set(a.sections.split(","))
    # no connection prepares its statements (prepare_threshold=None): psycopg would after five runs,
    # and a plan prepared in the serial mode would then run again, serial, in the parallel one
    with psycopg.connect(host=a.host, port=a.port, dbname="postgres", user="postgres", autocommit=True, prepare_threshold=None) as c:
        # always the objects of this build; the bench server's ledger is disposable
        c.execute("SET dp.confirm_drop = on")
        c.execute("DROP EXTENSION IF EXISTS pg_dp CASCADE")
        c.execute("RESET dp.confirm_drop")
        c.execute("CREATE EXTENSION pg_dp")
        # every section but the cache's times or counts fresh releases: a repeated query must not be
        # answered from the release cache (the cache section turns it on for its own roles)
        c.execute("SET dp.release_cache = off")
        have = c.execute("SELECT count(*) FROM pg_class WHERE relname = 'bench'").fetchone()[0]
        if not have or c.execute("SELECT count(*) FROM bench").fetchone()[0] != a.rows:
            print(f"loading {a.rows:,} rows ...", flush=True)
            c.execute("DROP TABLE IF EXISTS bench")
            c.execute(f"""CREATE TABLE bench AS
                          SELECT g AS i, (abs(hashint4(g)) % 100000)::float8 / 100 AS x
                            FROM generate_series(1, {a.rows}) g""")
            c.execute("VACUUM ANALYZE bench")
        version = c.execute("SHOW server_version").fetchone()[0]
        print(f"\nPostgreSQL {version}; {a.rows:,} rows; {a.reps} alternating pairs of runs; "
              f"times are medians, the ratio is the median of the pairs' ratios\n")
        if "timing" in sections:
            print("| plan | statistic | native ms | pg_dp ms | ratio |")
            print("|---|---|---:|---:|---:|")
            for mode, name, mn, md, r in timing(c, a.reps):
                print(f"| {mode} | {name} | {mn:.0f} | {md:.0f} | {r:.3f} |")
        if "quantiles" in sections:
            print(f"\nQuantiles on {a.quantile_rows:,} rows against percentile_cont (always serial: it has no parallel plan)\n")
            print("| pg_dp plan | statistic | percentile_cont ms | pg_dp ms | ratio |")
            print("|---|---|---:|---:|---:|")
            for mode, name, mn, md, r in quantile_timing(c, a.reps, a.quantile_rows):
                print(f"| {mode} | {name} | {mn:.0f} | {md:.0f} | {r:.3f} |")
        if "dprp" in sections:
            dprp_section(c, a)
        if "charge" in sections:
            charge_section(c, a)
        if "domains" in sections:
            domain_section(c, a)
        if "cache" in sections:
            cache_section(c, a)
        if "accuracy" in sections:
            accuracy_section(c, a)
        if "grammar" in sections:
            grammar_section(c, a)
        if "units" in sections:
            units_section(c, a)
        if "selection" in sections:
            selection_section(c, a)


def units_section(c, a):
    """dp_sum with a privacy unit against the native two-level query, serial and parallel."""
    n = a.unit_rows
    units = max(1, n // 10)
    cur = c.cursor()
    have = cur.execute("SELECT count(*) FROM pg_class WHERE relname = 'bench_units'").fetchone()[0]
    if not have or cur.execute("SELECT count(*) FROM bench_units").fetchone()[0] != n:
        print(f"\nloading {n:,} rows of {units:,} units ...", flush=True)
        cur.execute("DROP TABLE IF EXISTS bench_units")
        cur.execute(f"""CREATE TABLE bench_units AS
                        SELECT (abs(hashint4(g)) % {units}) AS uid, g % 10 AS k, (abs(hashint4(g + 1)) % 1000)::float8 / 10 AS x
                          FROM generate_series(1, {n}) g""")
        cur.execute("VACUUM ANALYZE bench_units")
    cur.execute("SELECT dp.protect_table('bench_units', privacy_unit => 'uid', max_groups_contributed => 3)")
    cur.execute("SELECT dp.set_domain('bench_units', 'k', ARRAY[0, 1, 2, 3, 4, 5, 6, 7, 8, 9])")
    cases = [
        ("dp_sum, no GROUP BY",
         "SELECT sum(least(s, 1000)) FROM (SELECT uid, sum(x) s FROM bench_units GROUP BY uid) u",
         "SELECT dp_sum(x, 0, 1000, 1.0) FROM bench_units"),
        ("dp_count, no GROUP BY",
         "SELECT count(*) FROM (SELECT uid FROM bench_units GROUP BY uid) u",
         "SELECT dp_count(*) FROM bench_units"),
        ("dp_sum, GROUP BY 10 keys (3 per unit)",
         "SELECT k, sum(least(s, 1000)) FROM (SELECT k, uid, sum(x) s, row_number() OVER (PARTITION BY uid ORDER BY random()) r "
         "FROM bench_units GROUP BY k, uid) u WHERE r <= 3 GROUP BY k",
         "SELECT k, dp_sum(x, 0, 1000, 1.0) FROM bench_units GROUP BY k"),
    ]
    reps = max(3, a.reps // 3)
    print(f"\nPrivacy units: {n:,} rows, {units:,} units, against the native query computing the same per-unit "
          f"aggregation ({reps} alternating pairs, medians)\n")
    print("| plan | query | native ms | pg_dp ms | ratio |")
    print("|---|---|---:|---:|---:|")
    for mode in ("serial", "parallel"):
        set_mode(cur, mode)
        for name, qn, qd in cases:
            mn, md, r = pair(cur, qn, qd, reps)
            print(f"| {mode} | {name} | {mn:.0f} | {md:.0f} | {r:.3f} |")
    cur.execute("RESET max_parallel_workers_per_gather")


def selection_section(c, a):
    """Fraction of groups kept by partition selection against their size, at ε = 1, δ = 1e-6."""
    cur = c.cursor()
    sizes = list(range(1, 41))
    cur.execute("DROP TABLE IF EXISTS bench_sel")
    cur.execute("CREATE TABLE bench_sel AS SELECT s AS grp, s * 1000 + j AS uid FROM generate_series(1, 40) s, generate_series(1, s) j")
    cur.execute("SELECT dp.protect_table('bench_sel', privacy_unit => 'uid')")
    cur.execute("SET dp.group_selection_epsilon = 1")
    cur.execute("SET dp.group_selection_delta = 1e-6")
    cur.execute("""CREATE OR REPLACE FUNCTION bench_sel_runs(n int) RETURNS SETOF int LANGUAGE plpgsql AS $$
                   BEGIN FOR i IN 1..n LOOP RETURN QUERY SELECT grp FROM bench_sel GROUP BY grp HAVING dp_count(*) > -1e9; END LOOP; END $$""")
    n = a.selection_releases
    kept = dict(cur.execute(f"SELECT r, count(*) FROM bench_sel_runs({n}) r GROUP BY r").fetchall())
    # the exact keep probability (the recursion of docs/privacy/partition-selection.md) and Laplace thresholding
    eps, delta = 1.0, 1e-6
    pi, p = [0.0], 0.0
    for _ in sizes:
        p = max(p, min(math.exp(eps) * p + delta, 1 - math.exp(-eps) * (1 - p - delta), 1.0))
        pi.append(p)
    tau = 1 + math.log(1 / (2 * delta)) / eps
    lap = lambda m: 1 - 0.5 * math.exp(-eps * (m - tau)) if m >= tau else 0.5 * math.exp(eps * (m - tau))
    print(f"\nPartition selection at ε = 1, δ = 1e-6: fraction of {n} releases in which a group of m units appears\n")
    print("| units m | measured | exact π(m) | Laplace thresholding |")
    print("|---:|---:|---:|---:|")
    for m in sizes:
        if m <= 30 or m % 5 == 0:
            print(f"| {m} | {kept.get(m, 0) / n:.3f} | {pi[m]:.3g} | {lap(m):.3g} |")


def dprp_section(c, a):
    """dp.release_projection on 100,000 × 32, end to end in SQL, next to copying the same columns."""
    d, n = 32, 100_000
    cols = [f"c{j}" for j in range(1, d + 1)]
    have = c.execute("SELECT count(*) FROM pg_class WHERE relname = 'bench_dprp'").fetchone()[0]
    if not have:
        # a rank-4 table plus a little noise, from a deterministic hash (sample data, not noise)
        exprs = ", ".join(
            f"least(1, greatest(0, 0.5 + 0.1 * (abs(hashint4(g)) % 100 / 100.0 - 0.5) * {1 + j % 4}"
            f" + 0.05 * (abs(hashint4(g + {j})) % 100 / 100.0 - 0.5)))::float8 AS c{j}" for j in range(1, d + 1))
        c.execute(f"CREATE TABLE bench_dprp AS SELECT {exprs} FROM generate_series(1, {n}) g")
        c.execute("VACUUM ANALYZE bench_dprp")
    arr = "ARRAY[" + ", ".join(f"'{x}'" for x in cols) + "]"
    lo, hi = f"array_fill(0::float8, ARRAY[{d}])", f"array_fill(1::float8, ARRAY[{d}])"
    cur = c.cursor()
    runs = {"copy": [], "rows": [], "table": []}
    for k in range(a.dprp_reps):
        cur.execute("DROP TABLE IF EXISTS bench_dprp_copy, bench_dprp_out")
        runs["copy"].append(timed(cur, f"CREATE TABLE bench_dprp_copy AS SELECT {', '.join(cols)} FROM bench_dprp"))
        runs["rows"].append(timed(cur, f"SELECT count(*) FROM dp.release_projection_rows('bench_dprp', {arr}, {lo}, {hi}, 1, 1e-5)"))
        runs["table"].append(timed(cur, f"SELECT dp.release_projection('bench_dprp', 'bench_dprp_out', {arr}, {lo}, {hi}, 1, 1e-5)"))
    cur.execute("DROP TABLE IF EXISTS bench_dprp_copy, bench_dprp_out")
    med = {k: statistics.median(v) * 1000 for k, v in runs.items()}
    print(f"\nDPRP on {n:,} rows × {d} columns, median of {a.dprp_reps} runs (the core alone, against numpy: bench/dprp_speed.sh)\n")
    print("| query | median ms |")
    print("|---|---:|")
    print(f"| CREATE TABLE AS SELECT the 32 columns (PostgreSQL's own copy) | {med['copy']:.0f} |")
    print(f"| SELECT count(*) FROM dp.release_projection_rows(...) | {med['rows']:.0f} |")
    print(f"| SELECT dp.release_projection(...) (creates the table) | {med['table']:.0f} |")


def charge_section(c, a):
    lat = charge_latency(c, a.host, a.port, a.latency_runs)
    print(f"\nBudget charge: median of {a.latency_runs} alternating runs of a 10-row query, as a role with a budget\n")
    print("| query | median ms |")
    print("|---|---:|")
    print(f"| SELECT count(*) FROM tiny | {lat['native_ms']:.3f} |")
    print(f"| SELECT dp_count(i, 0.001) FROM tiny | {lat['dp_ms']:.3f} |")
    print(f"| added by the charge | {lat['dp_ms'] - lat['native_ms']:.3f} |")
    # simple: each query sent as text and planned (psql, psycopg, most BI tools); prepared: parsed and
    # planned once per connection, then executed (pgjdbc after five runs, pgbench -M prepared). Every
    # execution of the DP query is charged, in both modes
    tps = {}
    failed = 0
    for mode in ("simple", "prepared"):
        tps[mode, "native"], _ = pgbench_tps(a.host, a.port, "SELECT count(*) FROM tiny;", 8, a.pgbench_seconds, mode=mode)
        tps[mode, "dp"], f = pgbench_tps(a.host, a.port, "SELECT dp_count(i, 0.001) FROM tiny;", 8, a.pgbench_seconds, mode=mode)
        failed += f
    spent = c.execute("SELECT epsilon_spent, (SELECT count(*) FROM dp.ledger WHERE role = 'dp_bench_analyst'::regrole) FROM dp.budgets WHERE role = 'dp_bench_analyst'::regrole").fetchone()
    print(f"\nThroughput: pgbench, 8 clients, {a.pgbench_seconds} s each\n")
    print("| query | protocol | queries/s |")
    print("|---|---|---:|")
    for mode in ("simple", "prepared"):
        print(f"| SELECT count(*) FROM tiny | {mode} | {tps[mode, 'native']:.0f} |")
        print(f"| SELECT dp_count(i, 0.001) FROM tiny (each charged) | {mode} | {tps[mode, 'dp']:.0f} |")
    print(f"\n(pgbench failures: {failed}; epsilon spent {spent[0]} over {spent[1]:,} receipts, the ledger's count of paid queries)")


# (name, DP query on the protected table gp, the same with PostgreSQL's aggregates)
GRAMMAR_QUERIES = [
    ("one count", "SELECT dp_count(id, 1.0) FROM gp", "SELECT count(id) FROM gp"),
    ("GROUP BY and WHERE", "SELECT region, dp_sum(income, 0, 100000, 1.0) FROM gp WHERE age BETWEEN 30 AND 60 AND smoker GROUP BY region",
     "SELECT region, sum(income) FROM gp WHERE age BETWEEN 30 AND 60 AND smoker GROUP BY region"),
    ("join with a public table", "SELECT r.climate, dp_avg(p.income, 0, 100000, 1.0) FROM gp p JOIN gr r ON r.id = p.region GROUP BY r.climate",
     "SELECT r.climate, avg(p.income) FROM gp p JOIN gr r ON r.id = p.region GROUP BY r.climate"),
    ("ten predicates, FILTER, three aggregates",
     "SELECT dp_count(id, 0.5) FILTER (WHERE smoker), dp_avg(income, 0, 100000, 0.5), dp_sum(age, 0, 100, 0.5) FROM gp "
     "WHERE age > 20 AND age < 80 AND region IN (1, 2, 3) AND income IS NOT NULL AND name LIKE 'p%' "
     "AND (smoker OR age > 50) AND income BETWEEN 0 AND 90000 AND id % 10 <> 3 AND COALESCE(region, 0) > 0 AND NOT smoker IS NULL",
     "SELECT count(id) FILTER (WHERE smoker), avg(income), sum(age) FROM gp "
     "WHERE age > 20 AND age < 80 AND region IN (1, 2, 3) AND income IS NOT NULL AND name LIKE 'p%' "
     "AND (smoker OR age > 50) AND income BETWEEN 0 AND 90000 AND id % 10 <> 3 AND COALESCE(region, 0) > 0 AND NOT smoker IS NULL"),
]

GRAMMAR_SETUP = [
    "DROP TABLE IF EXISTS gp, gr",
    "CREATE TABLE gp AS SELECT g AS id, 'p' || g AS name, g % 5 AS region, 18 + g % 70 AS age, "
    "(g * 37 % 90000)::float8 AS income, g % 3 = 0 AS smoker FROM generate_series(1, 10000) g",
    "CREATE TABLE gr AS SELECT r AS id, (ARRAY['cold', 'mild', 'warm'])[1 + r % 3] AS climate FROM generate_series(0, 4) r",
    "ALTER TABLE gr ADD PRIMARY KEY (id)",
    "ANALYZE gp",
    "ANALYZE gr",
]


def planning_ms(cur, sql):
    for (line,) in cur.execute("EXPLAIN (COSTS OFF, SUMMARY ON) " + sql):
        if line.startswith("Planning Time:"):
            return float(line.split()[2])
    raise AssertionError("no planning time for " + sql)


def grammar_section(c, a):
    for s in GRAMMAR_SETUP:
        c.execute(s)
    c.execute("SELECT dp.protect_table('gp')")
    with psycopg.connect(host=a.host, port=a.plain_port, dbname="postgres", user="postgres", autocommit=True, prepare_threshold=None) as plain:
        for s in GRAMMAR_SETUP:
            plain.execute(s)
        pc, dc = plain.cursor(), c.cursor()
        rows = []
        for name, dp, native in GRAMMAR_QUERIES:
            for _ in range(20):  # warm the caches of both servers
                planning_ms(pc, native), planning_ms(dc, native), planning_ms(dc, dp)
            base, other, checked = [], [], []
            for k in range(a.plan_runs):
                order = [(pc, native, base), (dc, native, other), (dc, dp, checked)]
                for cur, sql, out in (order if k % 2 else order[::-1]):
                    out.append(planning_ms(cur, sql))
            m = statistics.median
            rows.append((name, m(base), m(other), m(checked)))
    print(f"\nPlanning time, median of {a.plan_runs} runs each: without pg_dp (a second server), the same native query on the pg_dp"
          " server, and the DP query on a protected table (grammar, tagging and the DP Release node)\n")
    print("| query | without pg_dp ms | native, pg_dp loaded ms | DP query ms | added by pg_dp ms | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, base, other, checked in rows:
        print(f"| {name} | {base:.3f} | {other:.3f} | {checked:.3f} | {checked - base:.3f} | {checked / base:.2f} |")


def accuracy_section(c, a):
    acc, n = accuracy(c, a.releases)
    print(f"\nRMSE over {a.releases} releases on {n:,} rows in [0, 100]\n")
    print("| aggregate | ε | RMSE | optimum | ratio | optimum is |")
    print("|---|---:|---:|---:|---:|---|")
    for name, eps, rmse, opt, r, label in acc:
        print(f"| {name} | {eps} | {rmse:.4g} | {opt:.4g} | {r:.3f} | {label} |")


if __name__ == "__main__":
    main()
