#!/usr/bin/env python3
"""Plots and tables for docs/choosing-epsilon.md, measured on pg_dp through SQL.

1. Relative error against ε (0.01 to 10, the named privacy levels marked) of dp_count, dp_sum,
   dp_avg, dp_variance and dp_median / dp_percentile_em at n = 1,000, 10,000 and 100,000 rows of the
   synthetic Adult-like table of bench/accuracy_peers.py (ages in [0, 100], incomes in [0, 500,000]):
   docs/img/choosing-epsilon.png.
2. The error of dp_avg and dp_sum of incomes against the upper bound chosen (50,000 to 5,000,000),
   measured against the true, unclamped mean and sum, at n = 10,000 and ε = 0.1 and 1; and the
   two-step alternative: a DP 99th percentile (dp_percentile_em, 10% of ε, range [0, 10,000,000])
   used as the upper bound of the mean or sum (90%): docs/img/choosing-bounds.png.
3. The receipts (dp.ledger) of one release of each aggregate: mechanism, sensitivity, noise scale.

Each figure is the root mean square error over R releases (R = 100 by default), relative to the true
value. Run it through bench/accuracy_plots.sh (private server, pinned packages); by hand:

  python3 bench/accuracy_plots.py --host /tmp --port 25440 --dbname choosing_epsilon
"""
import argparse
import csv
import json
import math
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from accuracy_peers import adult_like, fmt  # noqa: E402  (the same synthetic data)

EPSILONS = [0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0]
LEVELS = [("very_high", 0.1), ("high", 0.3), ("medium", 1.0), ("low", 3.0), ("very_low", 10.0)]
SIZES = [1_000, 10_000, 100_000]
BOUNDS = {"age": (0, 100), "income": (0, 500_000)}
UPPERS = [50_000, 100_000, 200_000, 500_000, 1_000_000, 2_000_000, 5_000_000]
BOUNDS_N = 10_000
BOUNDS_EPS = [0.1, 1.0]
TWO_STEP_SHARE = 0.1        # of ε, spent on the 99th percentile that becomes the upper bound
TWO_STEP_RANGE = 10_000_000  # the generous range the percentile is searched in

PANELS = [("count", "rows"), ("sum", "age"), ("sum", "income"), ("avg", "age"), ("avg", "income"),
          ("variance", "age"), ("variance", "income"), ("median", "age"), ("median", "income")]
SQL = {
    "count": "SELECT dp_count(age, %s) FROM {t}",
    "sum": "SELECT dp_sum({c}, {lo}, {hi}, %s) FROM {t}",
    "avg": "SELECT dp_avg({c}, {lo}, {hi}, %s) FROM {t}",
    "variance": "SELECT dp_variance({c}, {lo}, {hi}, %s) FROM {t}",
    "median": "SELECT dp_median({c}::float8, {lo}, {hi}, %s) FROM {t}",
    "median_em": "SELECT dp_percentile_em({c}::float8, 0.5, {lo}, {hi}, %s) FROM {t}",
}


def log(*args):
    print("==>", *args, file=sys.stderr, flush=True)


def connect(args):
    import psycopg
    conn = psycopg.connect(host=args.host, port=args.port, dbname=args.dbname, user=args.user,
                           autocommit=True)
    conn.execute("SET dp.require_budget = off")
    return conn


def load(args):
    conn = connect(args)
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_dp")
    data = {}
    for n in SIZES:
        d = adult_like(n)
        data[n] = d
        t = f"adult_{n}"
        conn.execute(f"DROP TABLE IF EXISTS {t}")
        conn.execute(f"CREATE TABLE {t} (age int4 NOT NULL, income float8 NOT NULL)")
        with conn.cursor() as cur:
            with cur.copy(f"COPY {t} (age, income) FROM STDIN") as cp:
                for a, i in zip(d["age"].tolist(), d["income"].tolist()):
                    cp.write_row((a, i))
        conn.execute(f"ANALYZE {t}")
        assert conn.execute(f"SELECT count(*), sum(age) FROM {t}").fetchone() == (n, int(d["age"].sum()))
    conn.close()
    return data


def truth(agg, values, lo, hi):
    x = np.clip(values.astype(float), lo, hi)
    return {"count": len(x), "sum": x.sum(), "avg": x.mean(), "variance": x.var(ddof=1),
            "median": np.median(x), "median_em": np.median(x)}[agg]


def worker(args, jobs, results, errors):
    """jobs: (key, kind, sql, params, reps); kind 'one' runs sql; 'two_step' runs the bound first."""
    conn = connect(args)
    for key, kind, sql, params, reps in jobs:
        out = np.empty(reps)
        try:
            with conn.cursor() as cur:
                for r in range(reps):
                    if kind == "one":
                        cur.execute(sql, params, prepare=True)
                    else:  # two-step: a DP upper bound, then the aggregate with it as a bind parameter
                        q_sql, a_sql, eps_q, eps_a = sql[0], sql[1], params[0], params[1]
                        cur.execute(q_sql, (eps_q,), prepare=True)
                        upper = max(float(cur.fetchone()[0]), 1.0)
                        cur.execute(a_sql, (upper, eps_a), prepare=True)
                    out[r] = float(cur.fetchone()[0])
            results[key] = out
        except Exception as e:
            errors[key] = f"{type(e).__name__}: {str(e).strip().splitlines()[0]}"
            conn.close()
            conn = connect(args)
    conn.close()


def run_jobs(args, jobs):
    results, errors = {}, {}
    # longest first, dealt round-robin: the two connections finish together
    jobs = sorted(jobs, key=lambda j: -j[4] * j[0][3])
    parts = [jobs[i::args.connections] for i in range(args.connections)]
    threads = [threading.Thread(target=worker, args=(args, p, results, errors)) for p in parts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, v in errors.items():
        log(f"error {k}: {v}")
    return results, errors


def rel_rmse(releases, true):
    e = (np.asarray(releases) - true) / abs(true)
    return float(np.sqrt(np.mean(e * e)))


def receipts(args):
    """One release of each aggregate at ε = 1 on the 10,000-row table, and its receipt."""
    conn = connect(args)
    out = []
    t = f"adult_{BOUNDS_N}"
    for agg, col in PANELS + [("median_em", "age"), ("median_em", "income")]:
        lo, hi = BOUNDS.get(col, (0, 0))
        sql = SQL[agg].format(t=t, c=col, lo=lo, hi=hi)
        conn.execute(sql, (1.0,)).fetchone()
        row = conn.execute("SELECT aggregate, mechanism, sensitivity, noise_scale, epsilon, delta, details "
                           "FROM dp.ledger ORDER BY id DESC LIMIT 1").fetchone()
        out.append((agg, col, row))
    conn.close()
    return out


def plot_epsilon(curves, path, reps):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(3, 3, figsize=(13, 10))
    colors = {1_000: "C0", 10_000: "C1", 100_000: "C2"}
    for ax, (agg, col) in zip(axes.flat, PANELS):
        methods = [("median", "-"), ("median_em", "--")] if agg == "median" else [(agg, "-")]
        for method, ls in methods:
            for n in SIZES:
                ys = [curves.get((method, col, n, e)) for e in EPSILONS]
                pts = [(e, max(y, 1e-7)) for e, y in zip(EPSILONS, ys) if y is not None]
                label = f"n = {n:,}" + (" EM" if method == "median_em" else "")
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colors[n], ls=ls, marker="o",
                        ms=3, lw=1.2, label=label)
        for name, e in LEVELS:
            ax.axvline(e, color="grey", lw=0.6, ls=":")
        for y in (0.01, 0.1, 1.0):
            ax.axhline(y, color="black", lw=0.5, alpha=0.35)
        ax.set_xscale("log")
        ax.set_yscale("log")
        lo, hi = BOUNDS.get(col, (None, None))
        if agg == "count":
            title = "dp_count(*)"
        elif agg == "median":
            title = f"median of {col} in [{lo:,}, {hi:,}]:\ndp_median (solid), dp_percentile_em (dashed)"
        else:
            title = f"dp_{agg} of {col} in [{lo:,}, {hi:,}]"
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("ε per query")
        ax.set_ylabel("relative RMSE")
        ax.grid(True, which="major", alpha=0.25)
        ax.legend(fontsize=7, ncol=2 if agg == "median" else 1)
    fig.suptitle(f"pg_dp: relative RMSE of {reps} releases against ε, synthetic Adult-like table. Dotted: the "
                 "named privacy levels very_high 0.1, high 0.3, medium 1, low 3, very_low 10;\nlines at 1%, 10%, "
                 "100%; an RMSE of 0 (every release exact) is drawn at 1e-7", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path, dpi=110)
    log(f"wrote {path}")


def plot_bounds(bcurves, two_step, true_vals, path, reps):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, agg in zip(axes, ["avg", "sum"]):
        for eps, c in zip(BOUNDS_EPS, ["C0", "C3"]):
            ys = [bcurves.get((agg, u, eps)) for u in UPPERS]
            ax.plot(UPPERS, ys, color=c, marker="o", ms=4, label=f"fixed upper bound, ε = {eps:g}")
            if (agg, eps) in two_step:
                ax.axhline(two_step[(agg, eps)], color=c, ls="--", lw=1,
                           label=f"two-step (DP p99 as bound), ε = {eps:g} in all")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("upper bound (lower bound 0)")
        ax.set_ylabel("relative RMSE against the unclamped value")
        ax.set_title(f"dp_{agg}(income, 0, upper, ε), n = {BOUNDS_N:,}", fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Choosing bounds: clamping bias (bound too low) against noise (bound too high), "
                 f"{reps} releases per point; true mean {true_vals['avg']:,.0f}, max "
                 f"{true_vals['max']:,.0f}", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    fig.savefig(path, dpi=110)
    log(f"wrote {path}")


def tables(curves, bcurves, two_step, true_unclamped, clamped, reps):
    print(f"## Relative RMSE of pg_dp releases ({reps} per cell), synthetic Adult-like table")
    print()
    print("| aggregate | column | n | " + " | ".join(f"ε = {e:g}" for e in EPSILONS) + " |")
    print("|---|---|---:|" + "---:|" * len(EPSILONS))
    for agg, col in PANELS:
        for method in (["median", "median_em"] if agg == "median" else [agg]):
            for n in SIZES:
                cellsout = []
                for e in EPSILONS:
                    v = curves.get((method, col, n, e))
                    cellsout.append("n/a" if v is None else f"{100 * v:.3g}%")
                name = {"median_em": "median (EM)"}.get(method, method)
                print(f"| {name} | {col} | {n:,} | " + " | ".join(cellsout) + " |")
    print()
    print("Smallest ε of the grid with a relative RMSE at most 10% / 1%:")
    print()
    print("| aggregate | column | " + " | ".join(f"n = {n:,}" for n in SIZES) + " |")
    print("|---|---|" + "---:|" * len(SIZES))
    for agg, col in PANELS:
        for method in (["median", "median_em"] if agg == "median" else [agg]):
            cellsout = []
            for n in SIZES:
                marks = []
                for target in (0.10, 0.01):
                    ok = [e for e in EPSILONS if curves.get((method, col, n, e), 9e9) <= target]
                    marks.append(f"{ok[0]:g}" if ok else f"> {EPSILONS[-1]:g}")
                cellsout.append(" / ".join(marks))
            name = {"median_em": "median (EM)"}.get(method, method)
            print(f"| {name} | {col} | " + " | ".join(cellsout) + " |")
    print()
    print(f"## Upper bound of incomes, n = {BOUNDS_N:,}: relative RMSE against the unclamped value "
          f"(mean {true_unclamped['avg']:,.0f}, max {true_unclamped['max']:,.0f})")
    print()
    print("| aggregate | ε | " + " | ".join(f"{u:,}" for u in UPPERS) + " | two-step |")
    print("|---|---:|" + "---:|" * (len(UPPERS) + 1))
    for agg in ("avg", "sum"):
        for eps in BOUNDS_EPS:
            cellsout = [f"{100 * bcurves[(agg, u, eps)]:.3g}%" if (agg, u, eps) in bcurves else "n/a"
                        for u in UPPERS]
            ts = two_step.get((agg, eps))
            print(f"| {agg} | {eps:g} | " + " | ".join(cellsout) + f" | {'n/a' if ts is None else f'{100 * ts:.3g}%'} |")
    print()
    print("Rows above each upper bound: " + ", ".join(f"{u:,}: {c}" for u, c in clamped.items()))
    print()


def read_back(out):
    """The figures' data from an earlier run's CSV files (for --replot)."""
    curves, bcurves, two_step = {}, {}, {}
    with open(os.path.join(out, "curves.csv"), newline="") as f:
        for r in csv.DictReader(f):
            curves[(r["aggregate"], r["column"], int(r["n"]), float(r["epsilon"]))] = float(r["relative_rmse"])
    reps = None
    with open(os.path.join(out, "curves.csv"), newline="") as f:
        reps = max(int(r["reps"]) for r in csv.DictReader(f))
    if not os.path.exists(os.path.join(out, "bounds.csv")):  # written since the first version
        return curves, None, None, None, None, reps
    with open(os.path.join(out, "bounds.csv"), newline="") as f:
        for r in csv.DictReader(f):
            if r["upper"] == "two-step":
                two_step[(r["aggregate"], float(r["epsilon"]))] = float(r["relative_rmse"])
            else:
                bcurves[(r["aggregate"], int(r["upper"]), float(r["epsilon"]))] = float(r["relative_rmse"])
    with open(os.path.join(out, "run.json")) as f:
        info = json.load(f)
    clamped = {int(u): c for u, c in info["rows_above"].items()}
    return curves, bcurves, two_step, info["true_unclamped"], clamped, info["reps"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="/tmp")
    ap.add_argument("--port", type=int, default=25440)
    ap.add_argument("--dbname", default="choosing_epsilon")
    ap.add_argument("--user", default="postgres")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--connections", type=int, default=2)
    ap.add_argument("--out", default="target/choosing_epsilon")
    ap.add_argument("--img", default="docs/img")
    ap.add_argument("--replot", action="store_true",
                    help="no releases: print the tables and draw the figures again from OUT's CSV files")
    args = ap.parse_args()
    t0 = time.time()
    if args.replot:
        curves, bcurves, two_step, true_unclamped, clamped, reps = read_back(args.out)
        plot_epsilon(curves, os.path.join(args.img, "choosing-epsilon.png"), reps)
        if bcurves is not None:
            tables(curves, bcurves, two_step, true_unclamped, clamped, reps)
            plot_bounds(bcurves, two_step, true_unclamped, os.path.join(args.img, "choosing-bounds.png"), reps)
        return

    data = load(args)
    log(f"loaded tables of {', '.join(f'{n:,}' for n in SIZES)} rows")

    jobs = []
    for n in SIZES:
        t = f"adult_{n}"
        for agg, col in PANELS:
            lo, hi = BOUNDS.get(col, (0, 0))
            for method in (["median", "median_em"] if agg == "median" else [agg]):
                sql = SQL[method].format(t=t, c=col, lo=lo, hi=hi)
                for eps in EPSILONS:
                    jobs.append((("curve", method, col, n, eps), "one", sql, (eps,), args.reps))
    tb = f"adult_{BOUNDS_N}"
    for agg in ("avg", "sum"):
        for u in UPPERS:
            sql = SQL[agg].format(t=tb, c="income", lo=0, hi=u)
            for eps in BOUNDS_EPS:
                jobs.append((("bound", agg, u, BOUNDS_N, eps), "one", sql, (eps,), args.reps))
        q_sql = f"SELECT dp_percentile_em(income, 0.99, 0, {TWO_STEP_RANGE}, %s) FROM {tb}"
        a_sql = f"SELECT dp_{agg}(income, 0, %s, %s) FROM {tb}"
        for eps in BOUNDS_EPS:
            jobs.append((("two_step", agg, 0, BOUNDS_N, eps), "two_step", (q_sql, a_sql),
                         (TWO_STEP_SHARE * eps, (1 - TWO_STEP_SHARE) * eps), args.reps))
    log(f"{len(jobs)} cells × {args.reps} releases on {args.connections} connections")
    results, errors = run_jobs(args, jobs)

    # relative RMSE of the curves
    curves = {}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "curves.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["aggregate", "column", "n", "epsilon", "true_value", "reps", "relative_rmse",
                    "relative_mean_error"])
        for (kind, method, col, n, eps), rel in sorted(results.items(), key=str):
            if kind != "curve":
                continue
            vals = data[n]["age" if col == "rows" else col]
            lo, hi = BOUNDS.get(col, (0, 0))
            tv = truth(method, vals, lo, hi)
            curves[(method, col, n, eps)] = rel_rmse(rel, tv)
            w.writerow([method, col, n, eps, repr(float(tv)), len(rel), repr(curves[(method, col, n, eps)]),
                        repr(float(np.mean(rel - tv) / abs(tv)))])
    # bounds: against the unclamped truth, which is what the analyst wants
    inc = data[BOUNDS_N]["income"]
    true_unclamped = {"avg": float(inc.mean()), "sum": float(inc.sum()), "max": float(inc.max())}
    bcurves, two_step = {}, {}
    for (kind, agg, u, n, eps), rel in results.items():
        if kind == "bound":
            bcurves[(agg, u, eps)] = rel_rmse(rel, true_unclamped[agg])
        elif kind == "two_step":
            two_step[(agg, eps)] = rel_rmse(rel, true_unclamped[agg])
    with open(os.path.join(args.out, "bounds.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["aggregate", "upper", "epsilon", "relative_rmse"])
        for (agg, u, eps), v in sorted(bcurves.items()):
            w.writerow([agg, u, eps, repr(v)])
        for (agg, eps), v in sorted(two_step.items()):
            w.writerow([agg, "two-step", eps, repr(v)])
    clamped = {u: int((inc > u).sum()) for u in UPPERS}
    with open(os.path.join(args.out, "run.json"), "w") as f:
        json.dump({"reps": args.reps, "true_unclamped": true_unclamped,
                   "rows_above": {str(u): c for u, c in clamped.items()}}, f, indent=1)
    tables(curves, bcurves, two_step, true_unclamped, clamped, args.reps)

    print(f"## Receipts of one release each at ε = 1 on {BOUNDS_N:,} rows (dp.ledger)")
    print()
    print("| call | mechanism | sensitivity | noise_scale | details |")
    print("|---|---|---:|---:|---|")
    for agg, col, row in receipts(args):
        aggregate, mech, sens, scale, eps, delta, details = row
        det = json.dumps({k: v for k, v in (details or {}).items() if k not in ("source",)},
                         ensure_ascii=False)
        lo, hi = BOUNDS.get(col, (0, 0))
        call = {"count": "dp_count(age, 1)", "median_em": f"dp_percentile_em({col}, 0.5, {lo}, {hi}, 1)"}.get(
            agg, f"dp_{agg}({col}, {lo}, {hi}, 1)")
        print(f"| `{call}` | {mech} | {fmt(sens)} | {fmt(scale)} | `{det}` |")
    print()
    os.makedirs(args.img, exist_ok=True)
    plot_epsilon(curves, os.path.join(args.img, "choosing-epsilon.png"), args.reps)
    plot_bounds(bcurves, two_step, true_unclamped, os.path.join(args.img, "choosing-bounds.png"), args.reps)
    print(f"Wall time {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
