"""pg_dp's synthetic copies of UCI Adult next to two reference implementations (run by
`bash bench/synthetic.sh [runs] --peers`; results: docs/synthetic-peers.md).

The same 14 binned columns for everyone: bench/synthetic.py loads Adult into a fresh database and
declares its public domains and bins; the codes are those of dp.release_synthetic's report (a function
of the declared domains, bounds and edges only, one code per value or bin plus one for NULL). Then, for
epsilon 0.3, 1 and 3:

  pg_dp mst, tree2, privbayes  dp.release_synthetic, delta 0 and 1e-9
  reference MST                MSTSynthesizer of the smartnoise-synth package (on the mbi package,
                               Private-PGM), (epsilon, delta)-DP only: delta 1e-9; its sample()
  reference MST iid            the same fitted model, drawn with mbi's synthetic_data(method="sample")
                               instead of the default "round" that sample() uses (see below)
  reference PrivBayes          DataSynthesizer's correlated attribute mode, pure epsilon: delta 0,
                               k = 1 parent per column (the degree of pg_dp's privbayes)
  reference PrivBayes eps/2    the same called with epsilon / 2 (see below)

and each synthetic table is scored against the real one by the mean total-variation distance over all
1-, 2- and 3-way marginals of the codes, the largest cell error over all 2-way marginals, the accuracy
on the real rows of a logistic regression on one-hot codes trained on the synthetic rows to predict
income > 50K (train on synthetic, test on real), and the time it took.

The references get the codes and the public number of codes per column:
  - reference MST: through its fit() with a TableTransformer of BinTransformer(bins=c, lower=0, upper=c)
    per column, so the cardinalities come from the declared bounds and not from the data; the package
    takes the exact row count as known (it samples that many rows and gives it to mbi's estimation).
    With mbi 1.1.0 (smartnoise-synth 1.0.8 requires mbi < 2), the default "round" draw assigns each
    column's values within a group of equal parent values in row order, which couples columns that
    share an ancestor beyond what the model says; method "sample" draws each row independently.
  - reference PrivBayes: categorical_attribute_domain_file lists every code of every column; the API
    has no way to declare the domain of its noisy conditional tables, which span the codes up to the
    largest one seen in the data, nor whether a column is binary, which it reads off the data. Its
    correlated attribute mode first runs the independent attribute mode at the same epsilon (noisy
    1-way distributions, kept in the description and used by the generator), then spends epsilon / 2
    on the network and epsilon / 2 on the conditionals: 2 epsilon in all by basic composition, hence
    the second column at epsilon / 2.

By hand, with the packages of bench/synthetic.sh's peers environment and pg_dp on a server:

  python bench/synthetic_peers.py --host /tmp --port 25438 --data target/bench-data/adult --runs 1
"""
import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
import warnings
from importlib import metadata

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import synthetic as sb  # noqa: E402  (bench/synthetic.py: loading, public domains and bins, metrics)

EPSILONS = (0.3, 1.0, 3.0)
DELTAS = (0.0, 1e-9)
METHODS = ["pg_dp mst", "pg_dp tree2", "pg_dp privbayes", "reference MST", "reference MST iid", "reference PrivBayes",
           "reference PrivBayes eps/2"]
# the settings each one supports: pg_dp both deltas; MST is (epsilon, delta)-DP with delta > 0;
# DataSynthesizer is pure epsilon
SUPPORTS = {"pg_dp mst": DELTAS, "pg_dp tree2": DELTAS, "pg_dp privbayes": DELTAS, "reference MST": (1e-9,), "reference MST iid": (1e-9,),
            "reference PrivBayes": (0.0,), "reference PrivBayes eps/2": (0.0,)}
# "reference MST iid" is no run of its own: the same fitted model as "reference MST", drawn again
PACKAGES = ["smartnoise-synth", "mbi", "DataSynthesizer", "numpy", "pandas", "scikit-learn", "jax", "opendp", "psycopg"]


def reference_mst(codes, cards, eps, delta, seed):
    """smartnoise-synth's MSTSynthesizer through its fit() and sample(), public cardinalities. Returns
    two draws of the one fitted model: sample() as the package does it (mbi's synthetic_data with its
    default method, "round"), and the same with method "sample" (rows drawn independently), each as
    (columns, fit seconds, sample seconds)."""
    import pandas as pd
    from snsynth.mst.mst import MSTSynthesizer
    from snsynth.transform.bin import BinTransformer
    from snsynth.transform.table import TableTransformer

    np.random.seed(seed)  # its selection and sampling draw from numpy's global generator
    df = pd.DataFrame({f"c{j}": np.asarray(c) for j, c in enumerate(codes)})
    transformer = TableTransformer([BinTransformer(bins=c, lower=0, upper=c) for c in cards])
    t0 = time.perf_counter()
    synth = MSTSynthesizer(epsilon=eps, delta=delta)
    synth.fit(df, transformer=transformer, preprocessor_eps=0.0)
    t1 = time.perf_counter()
    rows = synth.sample()  # as many rows as the input (the package's default)
    t2 = time.perf_counter()
    out = np.floor(np.asarray(rows, dtype=np.float64)).astype(np.int64)  # bin midpoints back to codes
    package = [np.clip(out[:, j], 0, cards[j] - 1) for j in range(len(cards))]
    # the same model drawn row by row: mbi's own option, then the package's own undoing of its domain
    # compression (its BinTransformer maps code c to c, so the codes need no inverse transform)
    t3 = time.perf_counter()
    drawn = synth.undo_compress_fn(synth.synthesizer.synthetic_data(rows=len(df), method="sample")).to_dict()
    t4 = time.perf_counter()
    iid = [np.asarray(drawn[f"col{j}"], dtype=np.int64) for j in range(len(cards))]
    return (package, t1 - t0, t2 - t1), (iid, t1 - t0, t4 - t3)


def reference_privbayes(codes, cards, eps, seed, k, workdir):
    """DataSynthesizer's correlated attribute mode (PrivBayes) on the codes, every code declared."""
    from DataSynthesizer.DataDescriber import DataDescriber
    from DataSynthesizer.DataGenerator import DataGenerator

    cols = [f"c{j}" for j in range(len(cards))]
    csv = os.path.join(workdir, "codes.csv")
    domain = os.path.join(workdir, "domain.json")
    desc = os.path.join(workdir, "description.json")
    n = len(codes[0])
    np.savetxt(csv, np.column_stack(codes), fmt="%d", delimiter=",", header=",".join(cols), comments="")
    with open(domain, "w") as f:
        json.dump({c: list(range(cards[j])) for j, c in enumerate(cols)}, f)
    quiet = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(quiet):
        describer = DataDescriber()
        describer.describe_dataset_in_correlated_attribute_mode(
            csv, k=k, epsilon=eps,
            attribute_to_datatype={c: "Integer" for c in cols},
            attribute_to_is_categorical={c: True for c in cols},
            attribute_to_is_candidate_key={c: False for c in cols},
            categorical_attribute_domain_file=domain, seed=seed)
        describer.save_dataset_description_to_file(desc)
    t1 = time.perf_counter()
    with contextlib.redirect_stdout(quiet):
        generator = DataGenerator()
        generator.generate_dataset_in_correlated_attribute_mode(n, desc, seed=seed)
    t2 = time.perf_counter()
    syn = generator.synthetic_dataset
    return [np.clip(syn[c].to_numpy(dtype=np.float64).astype(np.int64), 0, cards[j] - 1) for j, c in enumerate(cols)], t1 - t0, t2 - t1


def scores(real, syn, cards, target, positive):
    return {
        "tvd1": sb.mean_tvd(real, syn, cards, 1),
        "tvd2": sb.mean_tvd(real, syn, cards, 2),
        "tvd3": sb.mean_tvd(real, syn, cards, 3),
        "maxcell2": sb.max_cell_error(real, syn, cards, 2),
        "tstr": sb.tstr_accuracy(real, syn, cards, target, positive),
    }


def versions():
    out = {}
    for p in PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = "not installed"
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="/tmp")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--epsilons", default=",".join(f"{e:g}" for e in EPSILONS))
    ap.add_argument("--privbayes-k", type=int, default=1, help="DataSynthesizer's parents per column")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--out", help="write every run's scores here (JSON lines)")
    a = ap.parse_args()
    epsilons = [float(e) for e in a.epsilons.split(",")]
    methods = [m.strip() for m in a.methods.split(",")]
    warnings.filterwarnings("ignore")

    conn, rows = sb.setup(a.host, a.port, a.data, dbname="bench_synthetic_peers")
    names = [n for n, _ in sb.COLUMNS]
    real_raw = {n: [r[i] for r in rows] for i, n in enumerate(names)}
    # the public encodings: those of a release's report (they depend on the declarations only)
    encs, _, _ = sb.release(conn, "syn", 1.0, 0.0, "mst")
    cards = sb.cardinalities(encs, names)
    real = [sb.encode(real_raw[n], encs[n]) for n in names]
    target = names.index("income")
    positive = encs["income"]["values"].index(">50K")
    print(f"Adult: {len(rows)} rows, {len(names)} columns, codes per column {cards}", flush=True)
    vers = versions()
    print("versions: " + ", ".join(f"{p} {v}" for p, v in vers.items()), flush=True)

    # what a model trained on the real rows themselves reaches, and always answering the majority
    real_acc = sb.tstr_accuracy(real, real, cards, target, positive)
    majority = max(np.mean(real[target] == positive), 1 - np.mean(real[target] == positive))

    results = {}  # (method, eps, delta) -> list of run dicts
    out = open(a.out, "w") if a.out else None
    with tempfile.TemporaryDirectory() as workdir:
        for eps in epsilons:
            for delta in DELTAS:
                for method in methods:
                    if delta not in SUPPORTS[method] or method == "reference MST iid":
                        continue
                    for run in range(a.runs):
                        seed = 1000 * run + int(eps * 10) + (1 if delta else 0)
                        if method.startswith("pg_dp"):
                            e2, synth, secs = sb.release(conn, "syn", eps, delta, method.split()[1])
                            assert sb.cardinalities(e2, names) == cards
                            syn = [sb.encode(synth[i], encs[n]) for i, n in enumerate(names)]
                            draws = {method: (syn, secs, None)}
                        elif method == "reference MST":
                            package, iid = reference_mst(real, cards, eps, delta, seed)
                            draws = {method: package, "reference MST iid": iid}
                        elif method == "reference PrivBayes":
                            draws = {method: reference_privbayes(real, cards, eps, seed, a.privbayes_k, workdir)}
                        else:  # called with half the epsilon: what it spends in all is then epsilon
                            draws = {method: reference_privbayes(real, cards, eps / 2, seed, a.privbayes_k, workdir)}
                        for name, (syn, fit, sample) in draws.items():
                            if name not in methods:
                                continue
                            s = scores(real, syn, cards, target, positive)
                            s.update(fit=fit, sample=sample, rows=len(syn[0]))
                            results.setdefault((name, eps, delta), []).append(s)
                            if out:
                                out.write(json.dumps({"method": name, "epsilon": eps, "delta": delta, "run": run, **s}) + "\n")
                                out.flush()
                            t = f"{fit:.2f} s" if sample is None else f"fit {fit:.2f} s, sample {sample:.2f} s"
                            print(f"  {name:<25} epsilon {eps:<4g} delta {delta:<6g} run {run}: TVD {s['tvd1']:.4f}/{s['tvd2']:.4f}/{s['tvd3']:.4f}"
                                  f"  max cell {s['maxcell2']:.4f}  TSTR {s['tstr']:.4f}  {t}  ({s['rows']} rows)", flush=True)
    if out:
        out.close()

    def cell(method, eps, delta, key, fmt):
        runs = results.get((method, eps, delta))
        if not runs:
            return "—"
        vals = [r[key] for r in runs]
        return fmt(float(np.mean(vals)))

    def rows_of(title, value):
        """One Markdown table: a row per (ε, δ), a column per method, value(method, ε, δ) in each cell."""
        print()
        print(f"{title}:")
        print()
        print("| ε | δ | " + " | ".join(methods) + " |")
        print("|---|---|" + "---|" * len(methods))
        for eps in epsilons:
            for delta in DELTAS:
                print(f"| {eps:g} | {delta:g} | " + " | ".join(value(m, eps, delta) for m in methods) + " |")

    def table(title, key, fmt):
        rows_of(f"{title} ({a.runs} runs each, mean)", lambda m, eps, delta: cell(m, eps, delta, key, fmt))

    f3 = lambda v: f"{v:.3f}"  # noqa: E731
    print()
    print(f"Versions: {', '.join(f'{p} {v}' for p, v in vers.items())}")
    table("Mean TVD over all 14 one-way marginals", "tvd1", f3)
    table("Mean TVD over all 91 two-way marginals", "tvd2", f3)
    table("Mean TVD over all 364 three-way marginals", "tvd3", f3)
    table("Largest cell error over all two-way marginals (absolute difference of proportions)", "maxcell2", f3)
    table("Train on synthetic, test on real: accuracy of income > 50K on the 48,842 real rows", "tstr", f3)
    print()
    print(f"Same model trained on the real rows: {real_acc:.3f}; always the majority class: {majority:.3f}")

    def timing(method, eps, delta):
        runs = results.get((method, eps, delta))
        if not runs:
            return "—"
        fit = np.mean([r["fit"] for r in runs])
        if runs[0]["sample"] is None:
            return f"{fit:.2f}"
        return f"{fit:.2f} + {np.mean([r['sample'] for r in runs]):.2f}"

    rows_of(f"Seconds ({a.runs} runs each, mean): pg_dp one call (read, fit, sample, write the table); references fit + sample", timing)


if __name__ == "__main__":
    main()
