#!/usr/bin/env python3
"""pg_dp on Citus benchmark driver (run through bench/citus.sh, which starts the servers).

One table of --rows rows distributed by id over two workers, the same rows in one table on the
coordinator, and a table with a privacy unit (10 rows per unit) distributed by its unit column. Each
DP query is paired with a native one; the two alternate (which goes first alternates too) and the
median of the per-pair ratios is printed next to the median times. The release cache is off, so
every DP query is a fresh release.
"""
import argparse
import os
import sys

import psycopg

sys.path.insert(0, os.path.dirname(__file__))
from bench import pair  # noqa: E402

DB = "pg_dp_citus_bench"


def connect(port, db=DB):
    return psycopg.connect(host=ARGS.host, port=port, dbname=db, user="postgres", autocommit=True, prepare_threshold=None)


def setup(rows):
    for port in [ARGS.coordinator] + ARGS.workers:
        with connect(port, "postgres") as c:
            c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
            c.execute(f"CREATE DATABASE {DB}")
        with connect(port) as c:
            c.execute("CREATE EXTENSION citus")
    with connect(ARGS.coordinator) as c:
        c.execute("SELECT citus_set_coordinator_host('localhost', %s)", (ARGS.coordinator,))
        for port in ARGS.workers:
            c.execute("SELECT citus_add_node('localhost', %s)", (port,))
        c.execute("CREATE EXTENSION pg_dp")
        c.execute("CREATE TABLE t_local (id bigint, g int, x float8)")
        c.execute(f"INSERT INTO t_local SELECT i, i % 10, (i::int8 * 7919) % 1000 / 10.0 FROM generate_series(1, {rows}) i")
        c.execute("CREATE TABLE t (LIKE t_local)")
        c.execute("SELECT create_distributed_table('t', 'id')")
        c.execute("INSERT INTO t SELECT * FROM t_local")
        c.execute("CREATE TABLE u (uid int NOT NULL, x float8)")
        c.execute("SELECT create_distributed_table('u', 'uid')")
        c.execute(f"INSERT INTO u SELECT i % {max(rows // 10, 1)}, (i::int8 * 7919) % 1000 / 10.0 FROM generate_series(1, {rows}) i")
        for tbl in ("t_local", "t", "u"):
            c.execute(f"VACUUM ANALYZE {tbl}")
        c.execute("SELECT dp.protect_table('t')")
        c.execute("SELECT dp.protect_table('t_local')")
        c.execute("SELECT dp.protect_table('u', 'uid')")


PAIRS = [
    # (name, native query, DP query)
    ("count", "SELECT count(*) FROM t", "SELECT dp_count(*) FROM t"),
    ("sum", "SELECT sum(x) FROM t", "SELECT dp_sum(x, 0, 100, 1.0) FROM t"),
    ("avg", "SELECT avg(x) FROM t", "SELECT dp_avg(x, 0, 100, 1.0) FROM t"),
    ("variance", "SELECT var_samp(x) FROM t", "SELECT dp_variance(x, 0, 100, 1.0) FROM t"),
    ("count, sum, avg", "SELECT count(*), sum(x), avg(x) FROM t",
     "SELECT dp_count(*), dp_sum(x, 0, 100, 1.0), dp_avg(x, 0, 100, 1.0) FROM t"),
    ("count, sum, avg, variance", "SELECT count(*), sum(x), avg(x), var_samp(x) FROM t",
     "SELECT dp_count(*), dp_sum(x, 0, 100, 1.0), dp_avg(x, 0, 100, 1.0), dp_variance(x, 0, 100, 1.0) FROM t"),
    ("GROUP BY g (10 groups): count, sum", "SELECT g, count(*), sum(x) FROM t GROUP BY g",
     "SELECT g, dp_count(*), dp_sum(x, 0, 100, 1.0) FROM t GROUP BY g"),
]


def main():
    setup(ARGS.rows)
    with connect(ARGS.coordinator) as c:
        cur = c.cursor()
        cur.execute("SET dp.release_cache = off")
        print(f"\n{ARGS.rows:,} rows, distributed by id over 2 workers (32 shards); medians of {ARGS.reps} alternating runs\n")
        print("| query | Citus native (ms) | pg_dp on Citus (ms) | ratio |")
        print("|---|---:|---:|---:|")
        for name, native, dp in PAIRS:
            n, d, r = pair(cur, native, dp, ARGS.reps)
            print(f"| {name} | {n:.1f} | {d:.1f} | {r:.2f}× |")
        print("\nAgainst single-server pg_dp on the same rows (one table on the coordinator, parallel plans allowed)\n")
        print("| query | pg_dp, one server (ms) | pg_dp on Citus (ms) | ratio |")
        print("|---|---:|---:|---:|")
        for name, _, dp in PAIRS:
            n, d, r = pair(cur, dp.replace("FROM t", "FROM t_local"), dp, ARGS.reps)
            print(f"| {name} | {n:.1f} | {d:.1f} | {r:.2f}× |")
        print("\nQuantiles and automatic bounds (the workers count values or magnitude bins per group)\n")
        print("| query | native reference | reference (ms) | pg_dp, one server (ms) | pg_dp on Citus (ms) | Citus / reference | Citus / one server |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for name, ref_name, ref, dp in [
            ("dp_median(x, 0, 100, 1.0)", "percentile_cont(0.5), one server", "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x) FROM t_local",
             "SELECT dp_median(x, 0, 100, 1.0) FROM t"),
            ("dp_sum(x, 1.0), no bounds", "sum(x) on Citus", "SELECT sum(x) FROM t", "SELECT dp_sum(x, 1.0) FROM t"),
            ("dp_avg(x, 1.0), no bounds", "avg(x) on Citus", "SELECT avg(x) FROM t", "SELECT dp_avg(x, 1.0) FROM t"),
        ]:
            rn, d, r = pair(cur, ref, dp, ARGS.reps)
            one, d2, r2 = pair(cur, dp.replace("FROM t", "FROM t_local"), dp, ARGS.reps)
            print(f"| {name} | {ref_name} | {rn:.1f} | {one:.1f} | {d:.1f} | {r:.2f}× | {r2:.2f}× |")
        units = ARGS.rows // 10
        print(f"\nPrivacy unit: {ARGS.rows:,} rows of {units:,} units, distributed by the unit column\n")
        print("| query | native two-level (ms) | pg_dp on Citus (ms) | ratio |")
        print("|---|---:|---:|---:|")
        native = "SELECT sum(least(greatest(s, 0), 100)) FROM (SELECT uid, sum(x) s FROM u GROUP BY uid) q"
        n, d, r = pair(cur, native, "SELECT dp_sum(x, 0, 100, 1.0) FROM u", ARGS.reps)
        print(f"| sum per unit clamped, summed | {n:.1f} | {d:.1f} | {r:.2f}× |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="/tmp")
    ap.add_argument("--coordinator", type=int, default=25460)
    ap.add_argument("--workers", default="25461,25462")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--reps", type=int, default=7)
    ARGS = ap.parse_args()
    ARGS.workers = [int(p) for p in ARGS.workers.split(",")]
    main()
