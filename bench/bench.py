#!/usr/bin/env python3
"""pg_dp benchmark driver (run through bench/run.sh, which sets up the server).

Timing: every pg_dp query is paired with the native query computing the same statistic on the same
table; the two alternate, each pair is repeated, and the ratio of medians is printed. Serial runs set
max_parallel_workers_per_gather = 0; parallel runs force a parallel plan with 2 workers.

Accuracy: many independent releases of dp_sum/dp_avg on one fixed table (one release per group of a
CROSS JOIN, each group seeing the same rows) give the RMSE against the exact answer, printed next to
the RMSE of the continuous Laplace mechanism at the same sensitivity and epsilon.
"""
import argparse
import math
import statistics
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
    cur.fetchall()
    return time.perf_counter() - t


def plan_has_partial(cur, sql):
    return any("Partial Aggregate" in r[0] for r in cur.execute("EXPLAIN " + sql))


def timing(conn, reps):
    cur = conn.cursor()
    rows = []
    for mode in ("serial", "parallel"):
        if mode == "serial":
            cur.execute("SET max_parallel_workers_per_gather = 0")
        else:
            for s in ("max_parallel_workers_per_gather = 2", "parallel_setup_cost = 0",
                      "parallel_tuple_cost = 0", "min_parallel_table_scan_size = 0"):
                cur.execute("SET " + s)
        for name, native, dp in PAIRS:
            qn = f"SELECT {native} FROM bench"
            qd = f"SELECT {dp} FROM bench"
            assert plan_has_partial(cur, qd) == (mode == "parallel"), (mode, qd)
            assert plan_has_partial(cur, qn) == (mode == "parallel"), (mode, qn)
            timed(cur, qn), timed(cur, qd)  # warm-up
            tn, td = [], []
            for _ in range(reps):
                tn.append(timed(cur, qn))
                td.append(timed(cur, qd))
            mn, md = statistics.median(tn), statistics.median(td)
            rows.append((mode, name, mn * 1000, md * 1000, md / mn))
    return rows


def accuracy(conn, releases):
    cur = conn.cursor()
    cur.execute("CREATE TEMP TABLE acc AS SELECT (g % 1000)::float8 / 10 AS v FROM generate_series(1, 10000) g")
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
            vals = [r[0] for r in cur.execute(
                f"SELECT {agg} FROM acc CROSS JOIN generate_series(1, {releases}) r GROUP BY r")]
            rmse = math.sqrt(sum((float(v) - float(exact)) ** 2 for v in vals) / len(vals))
            out.append((agg.split("(")[0], eps, rmse, optimum, rmse / optimum, label))
    return out, n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="/tmp")
    ap.add_argument("--port", type=int, default=54331)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--releases", type=int, default=2000)
    a = ap.parse_args()
    with psycopg.connect(host=a.host, port=a.port, dbname="postgres", user="postgres", autocommit=True) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS pg_dp")
        have = c.execute("SELECT count(*) FROM pg_class WHERE relname = 'bench'").fetchone()[0]
        if not have or c.execute("SELECT count(*) FROM bench").fetchone()[0] != a.rows:
            print(f"loading {a.rows:,} rows ...", flush=True)
            c.execute("DROP TABLE IF EXISTS bench")
            c.execute(f"""CREATE TABLE bench AS
                          SELECT g AS i, (abs(hashint4(g)) % 100000)::float8 / 100 AS x
                            FROM generate_series(1, {a.rows}) g""")
            c.execute("VACUUM ANALYZE bench")
        version = c.execute("SHOW server_version").fetchone()[0]
        print(f"\nPostgreSQL {version}; {a.rows:,} rows; median of {a.reps} alternating runs each\n")
        print("| plan | statistic | native ms | pg_dp ms | ratio |")
        print("|---|---|---:|---:|---:|")
        for mode, name, mn, md, r in timing(c, a.reps):
            print(f"| {mode} | {name} | {mn:.0f} | {md:.0f} | {r:.3f} |")
        acc, n = accuracy(c, a.releases)
        print(f"\nRMSE over {a.releases} releases on {n:,} rows in [0, 100]\n")
        print("| aggregate | ε | RMSE | optimum | ratio | optimum is |")
        print("|---|---:|---:|---:|---:|---|")
        for name, eps, rmse, opt, r, label in acc:
            print(f"| {name} | {eps} | {rmse:.4g} | {opt:.4g} | {r:.3f} | {label} |")


if __name__ == "__main__":
    main()
