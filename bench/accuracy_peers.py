#!/usr/bin/env python3
"""Accuracy of pg_dp next to IBM diffprivlib, OpenDP and Google's PyDP (python-dp), one run.

The same two columns, the same bounds, the same ε and the same number of releases for every library:

  age     synthetic, shaped like the age column of UCI Adult (see adult_like), bounds [0, 100]
  income  synthetic lognormal, median 40,000, σ = 1 (heavy tail), bounds [0, 500,000]

For count, sum, mean, variance and median and ε in {0.01, 0.03, 0.1, 0.3, 1}, each library makes R
independent releases (R = 200 by default) and the script reports the RMSE against that library's own
estimand (population or sample variance; see ESTIMAND). pg_dp is queried through SQL over psycopg, one
aggregate per query. Writes a CSV, prints Markdown tables and draws the RMSE against ε.

Run it through bench/accuracy_peers.sh (which builds pg_dp, starts a private server and gets the
pinned Python packages); by hand:

  python3 bench/accuracy_peers.py --host /tmp --port 25438 --dbname peer_accuracy \
      --out target/peer_accuracy --plot docs/img/peer-accuracy.png
"""
import argparse
import csv
import json
import math
import os
import sys
import threading
import time
from importlib import metadata

import numpy as np

EPSILONS = [0.01, 0.03, 0.1, 0.3, 1.0]
AGGREGATES = ["count", "sum", "mean", "variance", "median"]
COLUMNS = {  # name -> (lower, upper)
    "age": (0, 100),
    "income": (0, 500_000),
}
ADULT_N = 32_561  # rows of UCI Adult's training file (adult.data)
SEED = 20240611
# pg_dp's own ε split of dp_avg (avg.md); used for OpenDP's count-then-resize mean and variance too,
# so that no library gets a split tuned for these data
OPENDP_COUNT_SHARE = 0.3
# OpenDP's private quantile scores a fixed list of candidates: every integer age, incomes to 100
OPENDP_CANDIDATE_STEP = {"age": 1, "income": 100}

LIBRARIES = ["pg_dp", "pg_dp EM", "diffprivlib", "OpenDP", "PyDP"]
DISTRIBUTIONS = {"diffprivlib": "diffprivlib", "OpenDP": "opendp", "PyDP": "python-dp",
                 "psycopg": "psycopg", "numpy": "numpy", "scikit-learn": "scikit-learn",
                 "matplotlib": "matplotlib"}

# What each release estimates: the variance is the sample variance (n - 1) for pg_dp (as
# PostgreSQL's variance()) and OpenDP (ddof = 1), the population variance (n) for diffprivlib
# (np.var) and PyDP (Google's BoundedVariance). Each library is scored against its own estimand.
ESTIMAND = {
    ("variance", "pg_dp"): "sample", ("variance", "OpenDP"): "sample",
    ("variance", "diffprivlib"): "population", ("variance", "PyDP"): "population",
}

# The guarantee of each call (see docs/peer-accuracy.md). "add/remove": ε-DP when one row is added
# or removed, n private. "replace-one, n public": ε-DP when one row is replaced, the row count taken
# as public (diffprivlib's mean and var divide by the exact n and calibrate the noise to it).
GUARANTEE = {
    # count_nonzero is a sum of 0/1 values truncated to [0, array size]: counting rows, the true count
    ("count", "diffprivlib"): "replace-one, n public (truncated at the true count)",
    ("mean", "diffprivlib"): "replace-one, n public",
    ("variance", "diffprivlib"): "replace-one, n public",
}
# pg_dp's dp_avg at ε is 1.4ε-DP for replace-one (the count does not move, the centred sum moves by
# twice its add/remove sensitivity: 2·0.7ε). dp_variance: replacing a row at deviation a·H by one at
# b·H leaves the count and moves the centred sum by |a − b|·H and the shifted squares by |a² − b²|·H²,
# a loss of e1·|a − b| + e2·|a² − b²| with e1 = 0.36ε/0.988, e2 = 0.76ε/0.988 (variance.md's weights);
# its largest value over a, b in [−1, 1] is at a = 1, b = −e1/(2·e2): e1 + e2 + e1²/(4·e2), 1.177ε.
# Running pg_dp at ε/1.4 (ε/1.177) gives the replace-one guarantee diffprivlib's call gives at ε,
# without making n public.
REPLACE_ONE_FACTOR = {"mean": 1.4, "variance": (0.36 + 0.76 + 0.36 ** 2 / (4 * 0.76)) / 0.988}


def log(*args):
    print("==>", *args, file=sys.stderr, flush=True)


def adult_like(n, seed=SEED):
    """Synthetic columns, reproducible from the seed.

    age: 17 + floor(74·Beta(1.54, 3.62)), integers in [17, 90]. The Beta parameters were fitted so
    that the published summary of UCI Adult's age column (mean 38.58, standard deviation 13.64,
    quartiles 28 / 37 / 48, range 17-90) is matched; it is not the real column.
    income: lognormal with median 40,000 and σ = 1 (mean about 66,000; about 0.6% above 500,000).
    """
    rng = np.random.default_rng(seed)
    age = (17 + np.floor(74 * rng.beta(1.54, 3.62, n))).astype(np.int64)
    income = rng.lognormal(math.log(40_000), 1.0, n)
    return {"age": age, "income": income}


def truth(agg, values, lower, upper, estimand="sample"):
    x = np.clip(values.astype(float), lower, upper)
    if agg == "count":
        return float(len(x))
    if agg == "sum":
        return float(np.sum(x))
    if agg == "mean":
        return float(np.mean(x))
    if agg == "variance":
        return float(np.var(x, ddof=1 if estimand == "sample" else 0))
    if agg == "median":
        # n is odd here: every library's rank convention gives the middle order statistic
        return float(np.median(x))
    raise ValueError(agg)


def cells():
    """(aggregate, column) pairs: count is of rows, the same for both columns."""
    out = [("count", "rows")]
    for agg in AGGREGATES[1:]:
        for col in COLUMNS:
            out.append((agg, col))
    return out


# --------------------------------------------------------------------------------------- pg_dp

PG_SQL = {
    "count": "SELECT dp_count(age, %s) FROM peer_adult",
    "sum": "SELECT dp_sum({col}, {lo}, {hi}, %s) FROM peer_adult",
    "mean": "SELECT dp_avg({col}, {lo}, {hi}, %s) FROM peer_adult",
    "variance": "SELECT dp_variance({col}, {lo}, {hi}, %s) FROM peer_adult",
    # the column as it is: the int4 age with integer bounds takes the integer forms (every integer age
    # a candidate, as OpenDP's), the float8 income the float8 ones
    "median": "SELECT dp_median({col}, {lo}, {hi}, %s) FROM peer_adult",  # δ = 0
    "median EM": "SELECT dp_percentile_em({col}, 0.5, {lo}, {hi}, %s) FROM peer_adult",
}


def pg_connect(args):
    import psycopg
    conn = psycopg.connect(host=args.host, port=args.port, dbname=args.dbname, user=args.user,
                           autocommit=True)
    conn.execute("SET dp.require_budget = off")  # superuser only: thousands of releases
    # every repeat must be a fresh release: with the release cache on, the same query and ε would
    # return one release again and again, and the RMSE would be that of a single release
    conn.execute("SET dp.release_cache = off")
    return conn


def pg_load(args, data):
    conn = pg_connect(args)
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_dp")
    conn.execute("DROP TABLE IF EXISTS peer_adult")
    conn.execute("CREATE TABLE peer_adult (age int4 NOT NULL, income float8 NOT NULL)")
    with conn.cursor() as cur:
        with cur.copy("COPY peer_adult (age, income) FROM STDIN") as cp:
            for a, i in zip(data["age"].tolist(), data["income"].tolist()):
                cp.write_row((a, i))
    conn.execute("ANALYZE peer_adult")
    # the table must hold exactly the numbers the other libraries see
    n, s_age, s_inc = conn.execute(
        "SELECT count(*), sum(age), sum(LEAST(GREATEST(income, 0), 500000)) FROM peer_adult").fetchone()
    assert n == len(data["age"]) and int(s_age) == int(data["age"].sum()), (n, s_age)
    assert abs(s_inc - np.clip(data["income"], 0, 500_000).sum()) < 1e-6 * s_inc, s_inc
    version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_dp'").fetchone()
    server = conn.execute("SHOW server_version").fetchone()[0]
    conn.close()
    return f"pg_dp {version[0] if version else '?'} on PostgreSQL {server}"


def pg_receipt(conn):
    """Mechanism and noise scale of the last release, from dp.ledger."""
    row = conn.execute("SELECT mechanism, sensitivity, noise_scale, details FROM dp.ledger "
                       "ORDER BY id DESC LIMIT 1").fetchone()
    return row


def pg_run(args, jobs, results, errors, receipts):
    """jobs: list of (key, sql, eps, reps); fills results[key] with the releases."""
    conn = pg_connect(args)
    for key, sql, eps, reps in jobs:
        out = np.empty(reps)
        try:
            with conn.cursor() as cur:
                for r in range(reps):
                    cur.execute(sql, (eps,), prepare=True)
                    out[r] = float(cur.fetchone()[0])
            results[key] = out
            if key[3] == 1.0 and key[2] in ("pg_dp", "pg_dp EM"):
                receipts[key] = pg_receipt(conn)
        except Exception as e:  # an aggregate missing from this build, for instance
            errors[key] = f"{type(e).__name__}: {str(e).strip().splitlines()[0]}"
            conn.close()
            conn = pg_connect(args)
    conn.close()


def pg_jobs(reps, replace_one):
    jobs = []
    for agg, col in cells():
        lo, hi = COLUMNS.get(col, (0, 0))
        variants = [("pg_dp", agg)] + ([("pg_dp EM", "median EM")] if agg == "median" else [])
        for lib, q in variants:
            sql = PG_SQL[q].format(col=col, lo=lo, hi=hi)
            for eps in EPSILONS:
                jobs.append(((agg, col, lib, eps), sql, eps, reps))
        if replace_one and agg in REPLACE_ONE_FACTOR:
            sql = PG_SQL[agg].format(col=col, lo=lo, hi=hi)
            for eps in EPSILONS:
                jobs.append(((agg, col, "pg_dp replace-one", eps), sql,
                             eps / REPLACE_ONE_FACTOR[agg], reps))
    return jobs


# ----------------------------------------------------------------------------------- the peers

def diffprivlib_release(agg, col, eps, data):
    """One release with diffprivlib's documented tools (diffprivlib.tools)."""
    import diffprivlib.tools as dpt
    from diffprivlib.accountant import BudgetAccountant
    acc = BudgetAccountant()  # a fresh, unlimited accountant per release: no bookkeeping cost
    if agg == "count geometric":
        # the mechanism under count_nonzero, without its truncation at the array's size: the
        # add/remove count diffprivlib's tools do not offer
        from diffprivlib.mechanisms import Geometric
        return Geometric(epsilon=eps, sensitivity=1).randomise(int(len(data["age"])))
    if agg == "count":
        return dpt.count_nonzero(np.ones_like(data["age"]), epsilon=eps, accountant=acc)
    x = data[col]
    bounds = COLUMNS[col]
    f = {"sum": dpt.sum, "mean": dpt.mean, "variance": dpt.var, "median": dpt.median}[agg]
    return f(x, epsilon=eps, bounds=bounds, accountant=acc)


class OpenDPRunner:
    """OpenDP measurements built from its constructors, each calibrated to exactly ε for one row
    added or removed (symmetric distance, d_in = 1), checked with measurement.map(1) <= ε."""

    def __init__(self):
        import opendp.prelude as dp
        dp.enable_features("contrib")  # every constructor used here needs "contrib" only
        self.dp = dp
        self.cache = {}

    def space(self, col):
        dp = self.dp
        if col == "age_int":
            return dp.vector_domain(dp.atom_domain(T=dp.i32)), dp.symmetric_distance()
        return dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.symmetric_distance()

    def calibrated(self, make, eps):
        dp = self.dp
        scale = dp.binary_search_param(make, d_in=1, d_out=eps)
        meas = make(scale)
        assert meas.map(1) <= eps * (1 + 1e-12), (meas.map(1), eps)
        return meas

    def laplace_on(self, trans, eps):
        """trans >> Laplace with the smallest scale whose ε at d_in = 1 is at most eps."""
        dp = self.dp
        scale = trans.map(1) / eps
        while True:
            meas = trans >> dp.m.then_laplace(scale=scale)
            if meas.map(1) <= eps:
                return meas
            scale *= 1 + 1e-9

    def measurement(self, agg, col, eps):
        key = (agg, col, eps)
        if key in self.cache:
            return self.cache[key]
        dp = self.dp
        if agg == "count":
            sp = self.space("age_int")
            meas = self.calibrated(lambda s: sp >> dp.t.then_count() >> dp.m.then_laplace(scale=s), eps)
        elif agg == "sum":
            lo, hi = COLUMNS[col]
            if col == "age":  # integer data: exact integer sum, discrete Laplace noise
                sp, b = self.space("age_int"), (int(lo), int(hi))
            else:  # float sum: OpenDP adds its floating-point error bound to the sensitivity
                sp, b = self.space(col), (float(lo), float(hi))
            meas = self.calibrated(
                lambda s: sp >> dp.t.then_clamp(b) >> dp.t.then_sum() >> dp.m.then_laplace(scale=s), eps)
        elif agg == "median":
            lo, hi = COLUMNS[col]
            step = OPENDP_CANDIDATE_STEP[col]
            cands = [float(c) for c in range(int(lo), int(hi) + 1, step)]
            sp = self.space(col)
            meas = self.calibrated(lambda s: dp.m.make_private_quantile(
                sp[0], sp[1], dp.max_divergence(), candidates=cands, alpha=0.5, scale=s), eps)
        elif agg in ("mean", "variance"):
            # OpenDP's documented route for an unknown size: a DP count (30% of ε), then resize
            # the clamped data to that size (padding with the midpoint or dropping random rows)
            # and the sized mean/variance with Laplace noise (70%): basic composition, ε in all.
            sp = self.space("age_int")
            meas = self.calibrated(lambda s: sp >> dp.t.then_count() >> dp.m.then_laplace(scale=s),
                                   OPENDP_COUNT_SHARE * eps)
        self.cache[key] = meas
        return meas

    def release(self, agg, col, eps, data, arrays):
        dp = self.dp
        if agg == "count":
            return self.measurement(agg, col, eps)(arrays["age_int"])
        if agg in ("sum", "median"):
            arr = arrays["age_int"] if (agg == "sum" and col == "age") else arrays[col]
            return self.measurement(agg, col, eps)(arr)
        count = self.measurement(agg, col, eps)(arrays["age_int"])
        size = max(int(count), 2)
        lo, hi = (float(b) for b in COLUMNS[col])
        t = (self.space(col) >> dp.t.then_clamp((lo, hi))
             >> dp.t.then_resize(size=size, constant=(lo + hi) / 2))
        t = t >> (dp.t.then_mean() if agg == "mean" else dp.t.then_variance(ddof=1))
        return self.laplace_on(t, (1 - OPENDP_COUNT_SHARE) * eps)(arrays[col])


def pydp_release(agg, col, eps, data, lists):
    """One release with PyDP's Laplace algorithms (delta = 0, one contribution per row)."""
    from pydp.algorithms import laplacian as L
    if agg == "count":
        return L.Count(epsilon=eps, dtype="int").quick_result(lists["age"])
    lo, hi = COLUMNS[col]
    dtype = "int" if col == "age" else "float"
    kw = dict(epsilon=eps, lower_bound=lo if dtype == "int" else float(lo),
              upper_bound=hi if dtype == "int" else float(hi), dtype=dtype)
    cls = {"sum": L.BoundedSum, "mean": L.BoundedMean, "variance": L.BoundedVariance,
           "median": L.Median}[agg]
    return cls(**kw).quick_result(lists[col])


# --------------------------------------------------------------------------------- the report

def rmse_stats(releases, true):
    e = np.asarray(releases, dtype=float) - true
    sq = e * e
    mse = sq.mean()
    rmse = math.sqrt(mse)
    se = float(sq.std(ddof=1)) / math.sqrt(len(sq)) / (2 * rmse) if rmse > 0 else 0.0
    return float(rmse), float(se), float(e.mean())


def fmt(x):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if x == 0:
        return "0"
    a = abs(x)
    if a >= 1e6 or a < 1e-3:
        return f"{x:.3g}"
    digits = max(0, 2 - int(math.floor(math.log10(a))))
    return f"{x:,.{digits}f}"


def markdown_table(rows, libs, title):
    """rows: dicts keyed by (agg, col, eps) with per-library (rmse, se) entries."""
    out = [title, "", "| aggregate | column | ε | true value | " + " | ".join(libs) + " |",
           "|---|---|---:|---:|" + "---:|" * len(libs)]
    for r in rows:
        vals = {lib: r["libs"].get(lib) for lib in libs}
        present = {k: v for k, v in vals.items() if v is not None and not isinstance(v, str)}
        best = min(present, key=lambda k: present[k][0]) if present else None
        cellsout = []
        for lib in libs:
            v = vals[lib]
            if v is None:
                cellsout.append("–")
            elif isinstance(v, str):
                cellsout.append(v)
            else:
                s = fmt(v[0])
                if lib == best:
                    s = f"**{s}**"
                elif math.hypot(v[1], present[best][1]) * 2 > v[0] - present[best][0]:
                    s += " ≈"  # within two standard errors of the best: not distinguishable
                if GUARANTEE.get((r["agg"], lib)):
                    s += " ‡"  # a weaker guarantee than the others' (see GUARANTEE)
                cellsout.append(s)
        out.append(f"| {r['agg']} | {r['col']} | {r['eps']:g} | {fmt(r['true'])} | " + " | ".join(cellsout) + " |")
    return "\n".join(out)


def plot(rows_by_cell, libs, path, reps, n):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys = cells()
    ncol = 3
    nrow = math.ceil(len(keys) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.3 * nrow))
    styles = {"pg_dp": ("C3", "o", "-"), "pg_dp EM": ("C3", "s", "--"), "diffprivlib": ("C0", "^", "-"),
              "OpenDP": ("C2", "v", "-"), "PyDP": ("C1", "D", "-")}
    zeros = False
    for ax, (agg, col) in zip(axes.flat, keys):
        series = {}
        for lib in libs:
            pts = [(eps, rows_by_cell[(agg, col, eps)]["libs"].get(lib)) for eps in EPSILONS]
            pts = [(e, v[0]) for e, v in pts if v is not None and not isinstance(v, str)]
            if pts:
                series[lib] = pts
        top = max((v for pts in series.values() for _, v in pts), default=1.0)
        floor = top * 1e-5  # an RMSE of 0 (every release exact) is drawn at this floor
        for lib, pts in series.items():
            c, m, ls = styles[lib]
            label = lib + (" ‡" if GUARANTEE.get((agg, lib)) else "")
            ys = [max(v, floor) for _, v in pts]
            zeros |= any(v < floor for _, v in pts)
            ax.plot([p[0] for p in pts], ys, color=c, marker=m, ls=ls, ms=4, lw=1.2, label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{agg} of {col}" if col != "rows" else "count of rows", fontsize=10)
        ax.set_xlabel("ε")
        ax.set_ylabel("RMSE")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    fig.suptitle(f"RMSE of {reps} releases against ε, n = {n:,} (synthetic Adult-like age in [0, 100], "
                 f"lognormal income in [0, 500,000])\n‡ replace-one with n public, all others add/remove"
                 + ("; an RMSE below 1e-5 of the panel's largest (0: every release exact) is drawn at "
                    "that floor" if zeros else ""), fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    log(f"wrote {path}")


def versions():
    out = {}
    for name, dist in DISTRIBUTIONS.items():
        try:
            out[name] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def rows_from_csv(path):
    """The table rows and plot cells of a results.csv written by an earlier run."""
    rows_by_cell = {}
    with open(path, newline="") as f:
        for rec in csv.DictReader(f):
            key = (rec["aggregate"], rec["column"], float(rec["epsilon"]))
            row = rows_by_cell.setdefault(key, {"agg": key[0], "col": key[1], "eps": key[2],
                                                "libs": {}, "true": None})
            row["libs"][rec["library"]] = (float(rec["rmse"]), float(rec["rmse_se"]))
            if rec["library"] == "pg_dp":
                row["true"] = float(rec["true_value"])
            elif row["true"] is None:
                row["true"] = float(rec["true_value"])
    table_rows = [rows_by_cell[(a, c, e)] for a, c in cells() for e in EPSILONS
                  if (a, c, e) in rows_by_cell]
    return rows_by_cell, table_rows


def ratio_table(rows, libs=("pg_dp", "pg_dp EM"), peer="OpenDP"):
    """pg_dp's RMSE divided by the peer's, at every ε of every cell both have (below 1: pg_dp is
    more accurate)."""
    out = [f"### pg_dp against {peer}: RMSE ratio (pg_dp / {peer}; below 1, pg_dp is more accurate)", "",
           "| aggregate | column | ε | " + " | ".join(f"{lib} / {peer}" for lib in libs) + " |",
           "|---|---|---:|" + "---:|" * len(libs)]
    for r in rows:
        ref = r["libs"].get(peer)
        if ref is None or isinstance(ref, str):
            continue
        cellsout = []
        for lib in libs:
            v = r["libs"].get(lib)
            if v is None or isinstance(v, str):
                cellsout.append("–")
            elif ref[0] == 0:
                cellsout.append("n/a" if v[0] > 0 else "1 (both exact)")
            else:
                cellsout.append(f"{v[0] / ref[0]:.2f}")
        out.append(f"| {r['agg']} | {r['col']} | {r['eps']:g} | " + " | ".join(cellsout) + " |")
    return "\n".join(out)


def report(table_rows, info, replace_one=True):
    print(f"## RMSE of {info['reps']} releases per cell (n = {info['n']:,}; age in [0, 100], income in "
          f"[0, 500,000])")
    print()
    print("Versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items() if v)
          + f"; {info['server']}")
    print()
    print(markdown_table(table_rows, LIBRARIES,
                         "Best (lowest RMSE) in **bold**; ≈ within two standard errors of the best; "
                         "pg_dp EM is `dp_percentile_em`; ‡ replace-one with n public (diffprivlib's "
                         "count, mean and variance), every other call add/remove (see the doc)."))
    print()
    print(ratio_table(table_rows))
    print()
    print("### Same guarantee as pg_dp: counts of rows for one row added or removed")
    print()
    print(markdown_table([r for r in table_rows if r["agg"] == "count"],
                         ["pg_dp", "diffprivlib Geometric", "OpenDP", "PyDP"],
                         "diffprivlib's `mechanisms.Geometric(ε, sensitivity=1)` on the row count: the "
                         "mechanism under `count_nonzero`, without its truncation at the true count."))
    print()
    if replace_one:
        sub = [r for r in table_rows if r["agg"] in REPLACE_ONE_FACTOR]
        print(markdown_table(
            sub, ["diffprivlib", "pg_dp replace-one"],
            "### Same replace-one guarantee: diffprivlib at ε against pg_dp at ε/1.4 (dp_avg) and "
            f"ε/{REPLACE_ONE_FACTOR['variance']:.3f} (dp_variance)"))
        print()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="/tmp")
    ap.add_argument("--port", type=int, default=25438)
    ap.add_argument("--dbname", default="peer_accuracy")
    ap.add_argument("--user", default="postgres")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--n", type=int, default=ADULT_N)
    ap.add_argument("--out", default="target/peer_accuracy")
    ap.add_argument("--plot", default="docs/img/peer-accuracy.png")
    ap.add_argument("--pins", default="", help="the pinned versions, 'name==version ...', to check against")
    ap.add_argument("--no-replace-one", action="store_true",
                    help="skip the extra pg_dp runs at diffprivlib's replace-one guarantee")
    ap.add_argument("--replot", action="store_true",
                    help="no releases: print the tables and draw the plot again from OUT/results.csv")
    args = ap.parse_args()
    t_start = time.time()
    csv_path = os.path.join(args.out, "results.csv")
    info_path = os.path.join(args.out, "run.json")
    if args.replot:
        with open(info_path) as f:
            info = json.load(f)
        rows_by_cell, table_rows = rows_from_csv(csv_path)
        report(table_rows, info, replace_one=any("pg_dp replace-one" in r["libs"] for r in table_rows))
        if args.plot:
            plot(rows_by_cell, LIBRARIES, args.plot, info["reps"], info["n"])
        return

    vers = versions()
    for pin in args.pins.split():
        name, _, want = pin.partition("==")
        name = name.split("[")[0]
        have = None
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
        if have != want:
            log(f"warning: {name} is {have}, the script pins {want}: figures may differ from the doc")

    data = adult_like(args.n)
    server = pg_load(args, data)
    log(f"loaded {args.n} rows into {args.dbname}: {server}")

    # the libraries that import; a library that cannot be installed or imported is reported, not faked
    unavailable = {}
    opendp_runner = None
    try:
        import diffprivlib  # noqa: F401
    except Exception as e:
        unavailable["diffprivlib"] = f"not available: {type(e).__name__}: {e}"
    try:
        opendp_runner = OpenDPRunner()
    except Exception as e:
        unavailable["OpenDP"] = f"not available: {type(e).__name__}: {e}"
    try:
        from pydp.algorithms import laplacian  # noqa: F401
    except Exception as e:
        unavailable["PyDP"] = f"not available: {type(e).__name__}: {e}"
    for lib, why in unavailable.items():
        log(f"{lib}: {why}")

    # pg_dp in a thread (the server works on the other core) while the peers run here
    pg_results, pg_errors, receipts = {}, {}, {}
    jobs = pg_jobs(args.reps, not args.no_replace_one)
    log(f"pg_dp: {len(jobs)} cells × {args.reps} queries, in the background")
    pg_thread = threading.Thread(target=pg_run, args=(args, jobs, pg_results, pg_errors, receipts))
    t_pg = time.time()
    pg_thread.start()

    arrays = {"age_int": data["age"].astype(np.int32), "age": data["age"].astype(float),
              "income": data["income"]}
    lists = {"age": data["age"].tolist(), "income": data["income"].tolist()}
    peer_results, peer_errors, peer_time = {}, {}, {}
    for lib in ["diffprivlib", "OpenDP", "PyDP"]:
        if lib in unavailable:
            continue
        t0 = time.time()
        extra = [("count", "rows", "diffprivlib Geometric")] if lib == "diffprivlib" else []
        for agg, col, name in [(a, c, lib) for a, c in cells()] + extra:
            for eps in EPSILONS:
                key = (agg, col, name, eps)
                try:
                    out = np.empty(args.reps)
                    for r in range(args.reps):
                        if name == "diffprivlib Geometric":
                            out[r] = float(diffprivlib_release("count geometric", col, eps, data))
                        elif lib == "diffprivlib":
                            out[r] = float(diffprivlib_release(agg, col, eps, data))
                        elif lib == "OpenDP":
                            out[r] = float(opendp_runner.release(agg, col, eps, data, arrays))
                        else:
                            out[r] = float(pydp_release(agg, col, eps, data, lists))
                    peer_results[key] = out
                except Exception as e:
                    peer_errors[key] = f"{type(e).__name__}: {e}"
                    log(f"{lib} {agg} {col} ε={eps}: {peer_errors[key]}")
        peer_time[lib] = time.time() - t0
        log(f"{lib}: {peer_time[lib]:.0f} s")
    pg_thread.join()
    peer_time["pg_dp"] = time.time() - t_pg
    log(f"pg_dp: done after {peer_time['pg_dp']:.0f} s")

    results = {**pg_results, **peer_results}
    errors = {**pg_errors, **peer_errors}

    # statistics
    os.makedirs(args.out, exist_ok=True)
    rows_by_cell = {}
    table_rows = []
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["aggregate", "column", "epsilon", "library", "epsilon_used", "estimand", "true_value",
                    "reps", "rmse", "rmse_se", "relative_rmse", "mean_error", "guarantee"])
        for agg, col in cells():
            for eps in EPSILONS:
                lo, hi = COLUMNS.get(col, (0, 0))
                vals = data["age"] if col == "rows" else data[col]
                row = {"agg": agg, "col": col, "eps": eps, "libs": {},
                       "true": truth(agg, vals, lo, hi, "sample")}
                for lib in LIBRARIES + ["pg_dp replace-one", "diffprivlib Geometric"]:
                    if lib == "pg_dp EM" and agg != "median":
                        continue
                    if lib == "pg_dp replace-one" and agg not in REPLACE_ONE_FACTOR:
                        continue
                    if lib == "diffprivlib Geometric" and agg != "count":
                        continue
                    key = (agg, col, lib, eps)
                    base = "pg_dp" if lib.startswith("pg_dp") else lib.split()[0]
                    if base in unavailable:
                        row["libs"][lib] = "not installed"
                        continue
                    if key in errors:
                        row["libs"][lib] = "error"
                        continue
                    if key not in results:
                        continue
                    est = ESTIMAND.get((agg, base), "sample")
                    true = truth(agg, vals, lo, hi, est)
                    rmse, se, bias = rmse_stats(results[key], true)
                    row["libs"][lib] = (rmse, se)
                    eps_used = eps / REPLACE_ONE_FACTOR[agg] if lib == "pg_dp replace-one" else eps
                    guarantee = GUARANTEE.get((agg, lib), "add/remove")
                    if lib == "pg_dp replace-one":
                        guarantee = "add/remove at ε_used; replace-one at ε"
                    w.writerow([agg, col, eps, lib, f"{eps_used:.6g}", est if agg == "variance" else "",
                                repr(true), len(results[key]), repr(rmse), repr(se),
                                repr(rmse / abs(true)) if true else "", repr(bias), guarantee])
                rows_by_cell[(agg, col, eps)] = row
                table_rows.append(row)
    log(f"wrote {csv_path}")

    info = {"reps": args.reps, "n": args.n, "versions": vers, "server": server,
            "wall_seconds": {k: round(v) for k, v in peer_time.items()}}
    with open(info_path, "w") as f:
        json.dump(info, f, indent=1)
    report(table_rows, info, replace_one=not args.no_replace_one)
    if errors:
        print("Errors:")
        for k, v in sorted(errors.items(), key=str):
            print(f"- {k}: {v}")
        print()
    if receipts:
        print("pg_dp receipts at ε = 1 (dp.ledger: mechanism, sensitivity, noise scale):")
        print()
        for k, v in sorted(receipts.items(), key=str):
            print(f"- {k[2]} {k[0]} of {k[1]}: {v[0]}, sensitivity {fmt(v[1])}, scale {fmt(v[2])}")
        print()
    print("Wall time per library (s): " + ", ".join(f"{k} {v:.0f}" for k, v in peer_time.items())
          + f"; total {time.time() - t_start:.0f}")
    if args.plot:
        plot(rows_by_cell, LIBRARIES, args.plot, args.reps, args.n)


if __name__ == "__main__":
    main()
