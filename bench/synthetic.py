"""Accuracy of dp.release_synthetic on UCI Adult (run by bench/synthetic.sh).

Loads Adult into a fresh database, declares public values and bins, releases synthetic copies and
prints the mean total-variation distance (TVD) over all 2-way and 3-way marginals of the binned
columns, against independent margins and DPRP measured in the same run, plus release times.

bench/synthetic_peers.py imports the loading, the public domains and bins, the release and the metrics
from here (setup, release, cardinalities, encode, mean_tvd, max_cell_error, tstr_accuracy).
"""
import argparse
import itertools
import json
import re
import time

import numpy as np
import psycopg

COLUMNS = [
    ("age", "int"), ("workclass", "text"), ("education", "text"), ("education_num", "int"),
    ("marital_status", "text"), ("occupation", "text"), ("relationship", "text"), ("race", "text"),
    ("sex", "text"), ("capital_gain", "int"), ("capital_loss", "int"), ("hours_per_week", "int"),
    ("native_country", "text"), ("income", "text"),
]
# raw file order: age, workclass, fnlwgt, education, education-num, marital-status, occupation,
# relationship, race, sex, capital-gain, capital-loss, hours-per-week, native-country, income
RAW = [0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
BOUNDS = {"age": (17, 90), "education_num": (1, 16), "hours_per_week": (1, 99)}
EDGES = {"capital_gain": [0, 1, 3000, 7000, 15000, 99999], "capital_loss": [0, 1, 1500, 2000, 2500, 4356]}
NUMERIC = ["age", "education_num", "capital_gain", "capital_loss", "hours_per_week"]
NUMERIC_RANGE = {"age": (17, 90), "education_num": (1, 16), "capital_gain": (0, 99999), "capital_loss": (0, 4356), "hours_per_week": (1, 99)}


def load_rows(path):
    rows = []
    for name in ("adult.data", "adult.test"):
        with open(f"{path}/{name}") as f:
            for line in f:
                parts = [p.strip() for p in line.strip().split(",")]
                if len(parts) != 15:
                    continue
                vals = [None if parts[i] == "?" else parts[i].rstrip(".") for i in RAW]
                rows.append(vals)
    return rows


def public_domains(path):
    """The categories of each text column, from the data set's description (adult.names)."""
    names = {"workclass": "workclass", "education": "education", "marital_status": "marital-status",
             "occupation": "occupation", "relationship": "relationship", "race": "race", "sex": "sex",
             "native_country": "native-country"}
    text = open(f"{path}/adult.names").read()
    out = {}
    for col, key in names.items():
        m = re.search(rf"^{re.escape(key)}: (.*?)\.\s*$", text, re.M | re.S)
        out[col] = [v.strip() for v in m.group(1).split(",") if v.strip()]
    out["income"] = ["<=50K", ">50K"]
    return out


def encode(values, enc):
    """Codes of one column under a report's encoding (the same rule as the release's)."""
    kind = enc["kind"]
    if kind == "categorical":
        index = {v: i for i, v in enumerate(enc["values"])}
        null = len(enc["values"])
        return np.array([index.get(v, null) if v is not None else null for v in values])
    if kind == "integer_bins":
        edges = np.array([int(e) for e in enc["edges"]], dtype=np.float64)
        edges[-1] += 1
    else:
        edges = np.array(enc["edges"], dtype=np.float64)
    b = len(edges) - 1
    x = np.array([np.nan if v is None else float(v) for v in values])
    codes = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, b - 1)
    codes[np.isnan(x)] = b
    return codes


def marginals(real, synth, cards, size, cols=None):
    """Yields the cell proportions (real, synthetic) of every marginal of `size` columns."""
    cols = list(range(len(cards))) if cols is None else cols
    for sub in itertools.combinations(cols, size):
        radix = 1
        a = np.zeros(len(real[0]), dtype=np.int64)
        s = np.zeros(len(synth[0]), dtype=np.int64)
        for j in sub:  # int64 first: codes held in a narrower type would wrap when multiplied
            a += np.asarray(real[j], dtype=np.int64) * radix
            s += np.asarray(synth[j], dtype=np.int64) * radix
            radix *= cards[j]
        pa = np.bincount(a, minlength=radix) / max(len(a), 1)
        ps = np.bincount(s, minlength=radix) / max(len(s), 1)
        yield pa, ps


def mean_tvd(real, synth, cards, size, cols=None):
    """Mean total-variation distance over all marginals of `size` columns (codes per column)."""
    return float(np.mean([0.5 * np.abs(pa - ps).sum() for pa, ps in marginals(real, synth, cards, size, cols)]))


def max_cell_error(real, synth, cards, size=2):
    """Largest absolute difference of a cell's proportion over all marginals of `size` columns."""
    return float(max(np.abs(pa - ps).max() for pa, ps in marginals(real, synth, cards, size)))


def tstr_accuracy(real, synth, cards, target, positive):
    """Train on synthetic, test on real: a logistic regression on the one-hot codes of every column but
    `target` (index), trained on the synthetic rows to predict code `positive` of the target, scored by
    its accuracy on all the real rows. Synthetic rows whose target is NULL are left out of training.
    Needs scikit-learn (imported here, so that the default benchmark does not)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import OneHotEncoder

    features = [j for j in range(len(cards)) if j != target]
    enc = OneHotEncoder(categories=[np.arange(cards[j]) for j in features], handle_unknown="ignore")
    xs = np.column_stack([synth[j] for j in features])
    xr = np.column_stack([real[j] for j in features])
    null = cards[target] - 1
    keep = np.asarray(synth[target]) != null
    ys = np.asarray(synth[target])[keep] == positive
    yr = np.asarray(real[target]) == positive
    if ys.all() or not ys.any():  # one class only: the model predicts it
        return float(np.mean(yr == ys[0])) if len(ys) else float("nan")
    model = LogisticRegression(max_iter=2000)
    model.fit(enc.fit_transform(xs[keep]), ys)
    return float(np.mean(model.predict(enc.transform(xr)) == yr))


def cardinalities(encs, names):
    """Codes per column under a report's encodings: the values or bins, plus one for NULL."""
    return [len(encs[n]["values"]) + 1 if encs[n]["kind"] == "categorical" else len(encs[n]["edges"]) for n in names]


def setup(host, port, data, dbname="bench_synthetic"):
    """A fresh database with pg_dp and Adult loaded, its public domains and bounds declared.
    Returns the connection and the raw rows (column order of COLUMNS)."""
    with psycopg.connect(host=host, port=port, user="postgres", dbname="postgres", autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {dbname}")
        c.execute(f"CREATE DATABASE {dbname}")
    conn = psycopg.connect(host=host, port=port, user="postgres", dbname=dbname, autocommit=True)
    conn.execute("CREATE EXTENSION pg_dp")
    conn.execute("SET dp.release_cache = off")
    rows = load_rows(data)
    conn.execute("CREATE TABLE adult (" + ", ".join(f"{n} {t}" for n, t in COLUMNS) + ")")
    with conn.cursor().copy("COPY adult FROM STDIN") as cp:
        for r in rows:
            cp.write_row([None if v is None else (int(v) if t == "int" else v) for v, (_, t) in zip(r, COLUMNS)])
    conn.execute("ANALYZE adult")
    for col, values in public_domains(data).items():
        conn.execute("SELECT dp.set_domain('adult', %s, %s::text[])", (col, values))
    for col, (lo, hi) in BOUNDS.items():
        conn.execute("SELECT dp.set_bounds('adult', %s, %s, %s)", (col, lo, hi))
    return conn, rows


def release(conn, t, eps, delta, method, criteria=None):
    """One dp.release_synthetic of all columns into table t (16 bins for the bounded numbers, EDGES for
    capital gain and loss), with acceptance criteria if given. Returns the encodings of its report by
    column, the synthetic columns and the seconds the call took (read, fit, sample, write)."""
    names = [n for n, _ in COLUMNS]
    conn.execute(f"DROP TABLE IF EXISTS {t}, {t}_report")
    t0 = time.perf_counter()
    r = conn.execute(
        "SELECT dp.release_synthetic('adult', %s, %s, %s, %s, bins => 16, bin_edges => %s::jsonb, method => %s, criteria => %s::jsonb)",
        (t, names, eps, delta, json.dumps(EDGES), method, None if criteria is None else json.dumps(criteria)),
    ).fetchone()[0]
    secs = time.perf_counter() - t0
    encs = {e["column"]: e for e in r["columns"]}
    synth = conn.execute(f"SELECT {', '.join(names)} FROM {t}").fetchall()
    return encs, [[row[i] for row in synth] for i in range(len(names))], secs


def criteria_section(conn, runs):
    """The release with acceptance criteria at epsilon 3, delta 0 (53 tries, the model fitted once):
    its time against the release without criteria, and each criterion's DP value in the report."""
    conn.execute("SET maintenance_work_mem = '1GB'")
    sets = {
        "none": None,
        "faithfulness": [{"criterion": "faithfulness", "threshold": 0.5, "epsilon": 0.1}],
        "max_marginal_error k=3": [{"criterion": "max_marginal_error", "k": 3, "threshold": 0.05, "epsilon": 0.1}],
        "both": [{"criterion": "faithfulness", "threshold": 0.5, "epsilon": 0.1},
                 {"criterion": "max_marginal_error", "k": 3, "threshold": 0.05, "epsilon": 0.1}],
    }
    print(f"Acceptance criteria on Adult at epsilon 3, delta 0, mst, 53 tries ({runs} runs each):")
    print()
    print("| criteria | median release time (ms) | accepted | DP values in the report |")
    print("|---|---:|---:|---|")
    for label, crit in sets.items():
        times, accepted, values = [], 0, {}
        for _ in range(runs):
            _, _, secs = release(conn, "syn", 3.0, 0.0, "mst", crit)
            times.append(secs)
            rep = conn.execute("SELECT item, detail FROM syn_report WHERE kind = 'criterion'").fetchall()
            if crit is not None and rep and all(d.get("passed") for _, d in rep):
                accepted += 1
            for item, d in rep:
                values.setdefault(item, []).append(d.get("value"))
        vals = ", ".join(f"{k} {np.mean([v for v in vs if v is not None]):.4f}" for k, vs in sorted(values.items()) if any(v is not None for v in vs))
        print(f"| {label} | {np.median(times) * 1000:.0f} | {accepted if crit else '-'} / {runs if crit else '-'} | {vals or '-'} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="/tmp")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--criteria", action="store_true", help="only the acceptance-criteria section")
    a = ap.parse_args()
    conn, rows = setup(a.host, a.port, a.data)
    names = [n for n, _ in COLUMNS]
    real_raw = {n: [r[i] for r in rows] for i, n in enumerate(names)}
    print(f"Adult: {len(rows)} rows, {len(names)} columns")
    if a.criteria:
        criteria_section(conn, a.runs)
        return

    # native: one GROUP BY over all columns, the work of reading and counting the table
    cols_sql = ", ".join(names)
    t0 = time.perf_counter()
    for _ in range(5):
        conn.execute(f"SELECT count(*) FROM (SELECT {cols_sql}, count(*) FROM adult GROUP BY {cols_sql}) s").fetchone()
    native = (time.perf_counter() - t0) / 5

    results = []
    times = []
    for eps in (0.3, 1.0, 3.0, 10.0):
        for delta in (0.0, 1e-9):
            row = {"eps": eps, "delta": delta}
            for method in ("mst", "tree2", "privbayes"):
                two, three, ind2, ind3 = [], [], [], []
                for run in range(a.runs):
                    encs, synth, secs = release(conn, "syn", eps, delta, method)
                    times.append(secs)
                    cards = cardinalities(encs, names)
                    real = [encode(real_raw[n], encs[n]) for n in names]
                    syn = [encode(synth[i], encs[n]) for i, n in enumerate(names)]
                    two.append(mean_tvd(real, syn, cards, 2))
                    three.append(mean_tvd(real, syn, cards, 3))
                    if method == "mst":
                        rng = np.random.default_rng(run)
                        indep = [rng.permutation(c) for c in syn]
                        ind2.append(mean_tvd(real, indep, cards, 2))
                        ind3.append(mean_tvd(real, indep, cards, 3))
                        # the synthetic copy on the numeric columns only, for the DPRP comparison
                        num = [names.index(n) for n in NUMERIC]
                        row.setdefault("mst_num2", []).append(mean_tvd(real, syn, cards, 2, num))
                        if delta > 0:
                            conn.execute("DROP TABLE IF EXISTS dprp")
                            lo = [NUMERIC_RANGE[n][0] for n in NUMERIC]
                            hi = [NUMERIC_RANGE[n][1] for n in NUMERIC]
                            conn.execute("SELECT dp.release_projection('adult', 'dprp', %s, %s::float8[], %s::float8[], %s, %s)", (NUMERIC, lo, hi, eps, delta))
                            d = conn.execute(f"SELECT {', '.join(NUMERIC)} FROM dprp").fetchall()
                            dcols = [[r[i] for r in d] for i in range(len(NUMERIC))]
                            dsyn = [None] * len(names)
                            for k, n in enumerate(NUMERIC):
                                dsyn[names.index(n)] = encode(dcols[k], encs[n])
                            for j in range(len(names)):
                                if dsyn[j] is None:
                                    dsyn[j] = np.zeros(len(d), dtype=np.int64)
                            row.setdefault("dprp_num2", []).append(mean_tvd(real, dsyn, cards, 2, num))
                row[method] = (np.mean(two), np.mean(three))
                if method == "mst":
                    row["independent"] = (np.mean(ind2), np.mean(ind3))
            results.append(row)
            print(f"  epsilon {eps:<4} delta {delta:<6}: mst {row['mst'][0]:.4f}/{row['mst'][1]:.4f}  tree2 {row['tree2'][0]:.4f}/{row['tree2'][1]:.4f}  "
                  f"privbayes {row['privbayes'][0]:.4f}/{row['privbayes'][1]:.4f}  independent {row['independent'][0]:.4f}/{row['independent'][1]:.4f}", flush=True)

    print()
    print(f"Mean TVD over all 2-way / 3-way marginals of the 14 binned columns ({a.runs} runs each):")
    print()
    print("| epsilon | delta | mst | tree2 | privbayes | independent margins |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['eps']:g} | {r['delta']:g} | {r['mst'][0]:.3f} / {r['mst'][1]:.3f} | {r['tree2'][0]:.3f} / {r['tree2'][1]:.3f} | {r['privbayes'][0]:.3f} / {r['privbayes'][1]:.3f} "
              f"| {r['independent'][0]:.3f} / {r['independent'][1]:.3f} |")
    print()
    print("Mean TVD over the 2-way marginals of the five numeric columns, same bins, same (epsilon, delta = 1e-9):")
    print()
    print("| epsilon | synthetic (mst) | DPRP |")
    print("|---|---|---|")
    for r in results:
        if r["delta"] > 0:
            print(f"| {r['eps']:g} | {np.mean(r['mst_num2']):.3f} | {np.mean(r['dprp_num2']):.3f} |")
    print()
    print(f"Release time (fit, sample, write 48,842 rows): median {np.median(times) * 1000:.0f} ms; "
          f"PostgreSQL's GROUP BY over the 14 columns: {native * 1000:.0f} ms (ratio {np.median(times) / native:.2f})")


if __name__ == "__main__":
    main()
