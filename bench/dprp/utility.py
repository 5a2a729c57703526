#!/usr/bin/env python3
"""Classification utility of DPRP releases, with the protocol of Gondara & Wang (UAI 2020).

Run through bench/dprp_utility.sh (which builds the Rust release tool and finds a Python with numpy,
scikit-learn and matplotlib), or directly:

    python3 bench/dprp/utility.py --tool target/release/examples/dprp_release_csv \
        [--splits 20] [--sweep-splits 5] [--jobs 1] [--out target/dprp_utility] [--plot docs/img/dprp-utility.png]

Protocol, per data set and per split s = 0..splits-1:
  1. stratified 80/20 split (train_test_split(stratify=y, random_state=s));
  2. the TRAINING part, label column included, is released with DPRP by the Rust tool
     (core/examples/dprp_release_csv.rs: DprpSpec::new, plan_memory, start, push_row, finish), with
     public bounds fixed below and delta = 1e-4, at every epsilon in EPSILONS; one release per
     (split, epsilon, configuration), each with its own seed. The release has the training rows plus
     a few padding rows, in a random order;
  3. the released label is mapped to a class (clip: rounded and clipped to the class range; unit:
     the sign of the label coordinate, binary data only, see decode_unit);
  4. a random forest (100 trees, random_state=0) is trained on the released rows and evaluated on
     the real hold-out: accuracy and AUPRC (average precision; macro average of one-vs-rest for
     more than two classes, the positive class's for two).
The baseline is the same forest trained on the real training part.

Two parts: the defaults on `--splits` splits (the main table and the plot), and a sweep on the first
`--sweep-splits` splits that varies one choice at a time around a base configuration (k2, projection
share, centring, clip norm, row normalisation). Prints Markdown tables, writes results.csv (one line
per release) and the plot.
"""
import argparse, csv, json, os, subprocess, sys, tempfile, time
import numpy as np
from sklearn.datasets import load_digits, load_wine, make_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import accuracy_score, average_precision_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import label_binarize

EPSILONS = [1, 2, 4, 6, 8]
DELTA = 1e-4
TREES = 100

# Public bounds, fixed a priori (never the sample min/max, which would leak).
# Wine (UCI "Wine recognition", 13 chemical measurements of Italian wines): round numbers an analyst
# would take from the units of each measurement; they were chosen after reading the feature list in
# sklearn's documentation, which also prints each feature's range, so they are informed by it, but
# every one is a round number wider than that range.
WINE_BOUNDS = {
    "alcohol": (8, 16),                       # % vol, table wines
    "malic_acid": (0, 6),                     # g/L
    "ash": (1, 4),                            # g/L
    "alcalinity_of_ash": (10, 30),
    "magnesium": (50, 200),                   # mg/L
    "total_phenols": (0, 4),
    "flavanoids": (0, 6),
    "nonflavanoid_phenols": (0, 1),
    "proanthocyanins": (0, 4),
    "color_intensity": (0, 15),
    "hue": (0, 2),
    "od280/od315_of_diluted_wines": (1, 4),
    "proline": (0, 2000),                     # mg/L
}
# Digits: 8x8 images, each pixel a count of set pixels in a 4x4 block: 0..16 by construction.
# Synthetic: make_classification puts clusters at the vertices of a hypercube with side 2, adds
# N(0, 1) noise and mixes the informative features with a random matrix of entries in [-1, 1]
# (sd at most about 3); [-10, 10] is about three of those worst-case sd. Values outside are clamped
# by the release (their share is printed).
SYNTH_BOUND = 10.0

# The defaults of pg_dp_core::dprp (DprpParams::new): k2 = 3, projection share 0.5, midpoint
# centring, clip with Z = sqrt(d)/2. A configuration is (name, options for the release tool).
DEFAULT = ("default", {})
# one choice at a time around the defaults; the last is the closest to the previous defaults
# (k2 = 1, share 0.8, midpoint, Z = sqrt(d)), drawn in the plot
PREVIOUS = ("k2 = 1, share 0.8, Z = sqrt(d)", {"k2": 1, "projection-share": 0.8, "clip-scale": 1.0})
SWEEP_ONE = [
    ("k2 = 1", {"k2": 1}),
    ("k2 = 2", {"k2": 2}),
    ("k2 = 4", {"k2": 4}),
    ("share 0.3", {"projection-share": 0.3}),
    ("share 0.7", {"projection-share": 0.7}),
    ("share 0.8", {"projection-share": 0.8}),
    ("DP-mean centring", {"centring": "mean"}),
    ("Z = sqrt(d)", {"clip-scale": 1.0}),
    ("Z = sqrt(d)/4", {"clip-scale": 0.25}),
    ("unit", {"row-norm": "unit"}),
    PREVIOUS,
]
# combinations around the first defaults (k2 = 2, share 0.5, DP-mean centring, Z = sqrt(d)), run
# before the current defaults were chosen from them (docs/dprp-utility.md, round 2)
# combinations of the choices that mattered in SWEEP_ONE
SWEEP_COMBINED = [
    (f"Z/{z}, {c}, k2 = {k}", {"clip-scale": 1.0 / z, "centring": c, "k2": k})
    for z in (2, 4) for c in ("mean", "midpoint") for k in (1, 2, 3)
] + [
    ("Z/4, mean, k2 = 2, share 0.3", {"clip-scale": 0.25, "centring": "mean", "k2": 2, "projection-share": 0.3}),
    ("Z/4, midpoint, k2 = 2, share 0.3", {"clip-scale": 0.25, "centring": "midpoint", "k2": 2, "projection-share": 0.3}),
]
DEFAULTS_TEXT = "k2 = 3, share 0.5, midpoint centring, clip Z = sqrt(d)/2"
ALL_CONFIGS = [DEFAULT] + SWEEP_ONE + SWEEP_COMBINED
SWEEPS = {"one": SWEEP_ONE, "combined": SWEEP_COMBINED, "both": SWEEP_ONE + SWEEP_COMBINED}


def datasets():
    w = load_wine()
    lo = [WINE_BOUNDS[f][0] for f in w.feature_names]
    hi = [WINE_BOUNDS[f][1] for f in w.feature_names]
    yield "wine", w.data, w.target, np.array(lo, float), np.array(hi, float), 3
    dg = load_digits()
    yield "digits", dg.data, dg.target, np.zeros(64), np.full(64, 16.0), 10
    X, y = make_classification(n_samples=3000, n_features=10, n_informative=5, n_redundant=2,
                               n_classes=2, random_state=7)
    d = X.shape[1]
    yield "synthetic-2", X, y, np.full(d, -SYNTH_BOUND), np.full(d, SYNTH_BOUND), 2
    X, y = make_classification(n_samples=10000, n_features=16, n_informative=6, n_redundant=4,
                               n_classes=4, n_clusters_per_class=1, random_state=11)
    d = X.shape[1]
    yield "synthetic-4", X, y, np.full(d, -SYNTH_BOUND), np.full(d, SYNTH_BOUND), 4


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def release(tool, train_csv, bounds_csv, d, eps, options, seed, tmp):
    out = os.path.join(tmp, "released.csv")
    cmd = [tool, "--input", train_csv, "--bounds", bounds_csv, "--epsilon", repr(float(eps)),
           "--delta", repr(DELTA), "--seed", str(seed), "--output", out,
           "--receipt", os.path.join(tmp, "receipt.json")]
    for key, value in options.items():
        if key == "clip-scale":
            cmd += ["--clip-norm", repr(float(value * np.sqrt(d)))]
        else:
            cmd += ["--" + key, str(value)]
    subprocess.run(cmd, check=True)
    with open(os.path.join(tmp, "receipt.json")) as f:
        receipt = json.load(f)
    return np.loadtxt(out, delimiter=",", skiprows=1, ndmin=2), receipt


def unit_map(X, lo, hi):
    """The release's public per-row map for the features of a binary-labelled row in unit mode:
    clamp, scale to [-1, 1], and divide by the norm of the full row. The label coordinate is -1 or
    +1, so the row norm is sqrt(|s_x|^2 + 1) whatever the (unknown) class is."""
    s = 2 * (np.clip(X, lo, hi) - lo) / (hi - lo) - 1
    return s / np.sqrt((s * s).sum(axis=1, keepdims=True) + 1.0)


def decode_unit(v):
    """Unit mode, binary label in [0, 1]: its scaled value is -1 (class 0) or +1 (class 1), and
    dividing the row by its norm keeps the sign, so the class is the sign of the released
    coordinate. For more classes the scaled label is divided by a per-row norm that is not
    released, so no class can be read back: unit mode is run on binary data only."""
    return (v > 0).astype(int)


def scores(model, X, n_classes):
    """Class probabilities for all n_classes, 0 for classes absent from the training labels."""
    p = np.zeros((X.shape[0], n_classes))
    p[:, model.classes_.astype(int)] = model.predict_proba(X)
    return p


def evaluate(Xtr, ytr, Xte, yte, n_classes, jobs):
    rf = RandomForestClassifier(n_estimators=TREES, random_state=0, n_jobs=jobs).fit(Xtr, ytr)
    p = scores(rf, Xte, n_classes)
    acc = accuracy_score(yte, p.argmax(axis=1))
    if n_classes == 2:
        ap = average_precision_score(yte, p[:, 1])
    else:
        ap = average_precision_score(label_binarize(yte, classes=list(range(n_classes))), p, average="macro")
    return acc, ap


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--splits", type=int, default=20, help="splits for the defaults' table")
    ap.add_argument("--sweep-splits", type=int, default=5, help="splits for the sweep (0: skip)")
    ap.add_argument("--sweep", default="one", choices=sorted(SWEEPS), help="which sweep to run")
    ap.add_argument("--datasets", default="", help="comma-separated subset of the data sets")
    ap.add_argument("--jobs", type=int, default=1, help="n_jobs of the random forest")
    ap.add_argument("--out", default="target/dprp_utility")
    ap.add_argument("--plot", default="docs/img/dprp-utility.png")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    only = set(filter(None, a.datasets.split(",")))
    rows = []  # dict per evaluation
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for di, (name, X, y, lo, hi, C) in enumerate(datasets()):
            if only and name not in only:
                continue
            d = X.shape[1] + 1
            header = [f"x{j}" for j in range(X.shape[1])] + ["label"]
            bounds_csv = os.path.join(tmp, "bounds.csv")
            write_csv(bounds_csv, header, [list(lo) + [0], list(hi) + [C - 1]])
            clamped = float(((X < lo) | (X > hi)).mean())
            print(f"==> {name}: n = {len(y)}, d = {d} (label included), classes = {C}, "
                  f"values outside the public bounds: {100 * clamped:.2f}%", file=sys.stderr)
            sweep = [c for c in SWEEPS[a.sweep] if c[1].get("row-norm") != "unit" or C == 2]
            for si in range(max(a.splits, a.sweep_splits)):
                Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, stratify=y, random_state=si)
                majority = float((yte == np.bincount(ytr).argmax()).mean())
                base = dict(dataset=name, split=si, majority=majority, chance_ap=float(
                    (yte == 1).mean() if C == 2 else 1.0 / C))
                acc, aprc = evaluate(Xtr, ytr, Xte, yte, C, a.jobs)
                rows.append(dict(base, config="no privacy", eps=0, acc=acc, ap=aprc))
                train_csv = os.path.join(tmp, "train.csv")
                write_csv(train_csv, header, np.column_stack([Xtr, ytr]).tolist())
                cfgs = ([DEFAULT] if si < a.splits else []) + (sweep if si < a.sweep_splits else [])
                for ei, eps in enumerate(EPSILONS):
                    for ci, (cname, options) in enumerate(cfgs):
                        seed = ((di * 1000 + si) * 100 + ei) * 100 + ALL_CONFIGS.index((cname, options))
                        R, receipt = release(a.tool, train_csv, bounds_csv, d, eps, options, seed, tmp)
                        Xr = R[:, :-1]
                        if options.get("row-norm") == "unit":
                            yr, Xev = decode_unit(R[:, -1]), unit_map(Xte, lo, hi)
                        else:
                            yr, Xev = np.clip(np.rint(R[:, -1]), 0, C - 1).astype(int), Xte
                        acc, aprc = evaluate(Xr, yr, Xev, yte, C, a.jobs)
                        rows.append(dict(base, config=cname, eps=eps, acc=acc, ap=aprc,
                                         rows_released=receipt["rows_released"], k2_used=receipt["k2"],
                                         sigma_projection=receipt["sigma_projection"]))
                print(f"    split {si + 1} done, {time.time() - t0:.0f} s", file=sys.stderr)
    keys = ["dataset", "split", "config", "eps", "acc", "ap", "rows_released", "k2_used",
            "sigma_projection", "majority", "chance_ap"]
    with open(os.path.join(a.out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    report(rows, a, time.time() - t0)
    if a.plot:
        plot(rows, a.plot)


def stat(rows, key):
    v = np.array([r[key] for r in rows], float)
    return f"{v.mean():.3f} ± {v.std(ddof=1) if len(v) > 1 else 0:.3f}"


def select(rows, **kw):
    return [r for r in rows if all(r[k] == v for k, v in kw.items())]


def report(rows, a, seconds):
    names = list(dict.fromkeys(r["dataset"] for r in rows))
    print("## DPRP utility (Gondara & Wang protocol): random forest on the release, real hold-out\n")
    print(f"delta = {DELTA:g}; defaults on {a.splits} stratified 80/20 splits, sweep on the first "
          f"{a.sweep_splits}; one release per split and cell; mean ± sd over splits. Run time {seconds:.0f} s.\n")
    print(f"### Defaults ({DEFAULTS_TEXT}) against no privacy\n")
    print("| data | ε | accuracy | AUPRC | released rows − n |")
    print("|---|---|---|---|---|")
    for name in names:
        rs = select(rows, dataset=name)
        base = [r for r in select(rs, config="no privacy") if r["split"] < a.splits]
        n_train = None
        for eps in EPSILONS:
            r = select(rs, config="default", eps=eps)
            if not r:
                continue
            pad = [x["rows_released"] for x in r]
            print(f"| {name} | {eps} | {stat(r, 'acc')} | {stat(r, 'ap')} | {np.mean(pad) - n_of(name, rows, a):.0f} |")
        print(f"| {name} | no privacy | {stat(base, 'acc')} | {stat(base, 'ap')} | |")
        print(f"| {name} | majority / constant score | {stat(base, 'majority')} | {stat(base, 'chance_ap')} | |")
    print()
    if a.sweep_splits:
        cfgs = [c for c, _ in [DEFAULT] + SWEEPS[a.sweep] if select(rows, config=c)]
        print(f"### Sweep: accuracy − majority, mean over the first {a.sweep_splits} splits\n")
        for metric, label in (("acc", "accuracy − majority"), ("ap", "AUPRC − constant score")):
            print(f"{label}; last column: mean over the data sets and ε\n")
            print("| configuration | " + " | ".join(f"{n}" for n in names) + " | mean |")
            print("|---" * (len(names) + 2) + "|")
            for c in cfgs:
                cells, allv = [], []
                for name in names:
                    rs = [r for r in select(rows, dataset=name, config=c) if r["split"] < a.sweep_splits]
                    if not rs:
                        cells.append("")
                        continue
                    ref = "majority" if metric == "acc" else "chance_ap"
                    v = [r[metric] - r[ref] for r in rs]
                    allv += v
                    per_eps = [np.mean([r[metric] - r[ref] for r in rs if r["eps"] == e]) for e in EPSILONS]
                    cells.append(f"{np.mean(v):+.3f} (ε=1: {per_eps[0]:+.3f}, ε=8: {per_eps[-1]:+.3f})")
                print(f"| {c} | " + " | ".join(cells) + f" | {np.mean(allv):+.3f} |")
            print()


def n_of(name, rows, a):
    """Training rows of a data set (80% of it, as split)."""
    sizes = {"wine": 178, "digits": 1797, "synthetic-2": 3000, "synthetic-4": 10000}
    return int(np.ceil(0.8 * sizes[name])) if name in sizes else 0


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(dict.fromkeys(r["dataset"] for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(4.0 * len(names), 3.6), sharey=True)
    for ax, name in zip(np.atleast_1d(axes), names):
        rs = select(rows, dataset=name)
        for c, style in (("default", "o-"), (PREVIOUS[0], "s--")):
            pts = [select(rs, config=c, eps=e) for e in EPSILONS]
            if not all(pts):
                continue
            mu = [np.mean([r["acc"] for r in p]) for p in pts]
            sd = [np.std([r["acc"] for r in p], ddof=1) if len(p) > 1 else 0 for p in pts]
            label = "DPRP defaults" if c == "default" else "k2 = 1, share 0.8, Z = √d"
            ax.errorbar(EPSILONS, mu, yerr=sd, fmt=style, capsize=3, label=label)
        base = select(rs, config="no privacy")
        ax.axhline(np.mean([r["acc"] for r in base]), color="k", label="no privacy (RF on real data)")
        ax.axhline(np.mean([r["majority"] for r in base]), color="gray", ls=":", label="majority class")
        ax.set_title(name)
        ax.set_xlabel("ε (δ = 1e-4)")
        ax.set_xticks(EPSILONS)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("hold-out accuracy")
    np.atleast_1d(axes)[-1].legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"plot: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
