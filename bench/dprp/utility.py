#!/usr/bin/env python3
"""Classification utility of DPRP releases, with the protocol of Gondara & Wang (UAI 2020).

Run through bench/dprp_utility.sh (which builds the Rust release tool and finds a Python with numpy,
scikit-learn and matplotlib), or directly:

    python3 bench/dprp/utility.py --tool target/release/examples/dprp_release_csv \
        [--splits 20] [--k2-splits 10] [--jobs 1] [--out target/dprp_utility] [--plot docs/img/dprp-utility.png]

Protocol, per data set and per split s = 0..splits-1:
  1. stratified 80/20 split (train_test_split(stratify=y, random_state=s));
  2. the TRAINING part, label column included, is released with DPRP by the Rust tool
     (core/examples/dprp_release_csv.rs, i.e. DprpSpec::release), with public bounds fixed below
     and delta = 1e-4, at every epsilon in EPSILONS; one release per (split, epsilon, configuration),
     each with its own seed;
  3. the released label is mapped to a class (clip: rounded and clipped to the class range; unit:
     the sign of the label coordinate, binary data only, see decode_unit);
  4. a random forest (100 trees, random_state=0) is trained on the released rows and evaluated on
     the real hold-out: accuracy and AUPRC (average precision; macro average of one-vs-rest for
     more than two classes, the positive class's for two).
The baseline is the same forest trained on the real training part. Prints Markdown tables and
writes results.csv (one line per release) and the plot.
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
# N(0, 1) noise and mixes the 5 informative features with a random matrix of entries in [-1, 1]
# (sd at most about sqrt(5 * 2) = 3.2); [-10, 10] is about three of those worst-case sd. Values
# outside are clamped by the release (counted in the output).
SYNTH_BOUND = 10.0


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
    yield "synthetic", X, y, np.full(d, -SYNTH_BOUND), np.full(d, SYNTH_BOUND), 2


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def release(tool, train_csv, bounds_csv, eps, row_norm, k2, seed, tmp):
    out = os.path.join(tmp, "released.csv")
    cmd = [tool, "--input", train_csv, "--bounds", bounds_csv, "--epsilon", repr(float(eps)),
           "--delta", repr(DELTA), "--row-norm", row_norm, "--seed", str(seed), "--output", out,
           "--receipt", os.path.join(tmp, "receipt.json")]
    if k2 is not None:
        cmd += ["--k2", str(k2)]
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
    coordinate (exact without noise). For more classes the scaled label is divided by a per-row
    norm that is not released, so no class can be read back: unit mode is reported for binary
    data only."""
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
    ap.add_argument("--splits", type=int, default=20)
    ap.add_argument("--k2-splits", type=int, default=10, help="splits for the k2 sweep (0: skip)")
    ap.add_argument("--k2", default="2,4", help="k2 values tried besides the default")
    ap.add_argument("--jobs", type=int, default=1, help="n_jobs of the random forest")
    ap.add_argument("--out", default="target/dprp_utility")
    ap.add_argument("--plot", default="docs/img/dprp-utility.png")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    extra_k2 = [int(k) for k in a.k2.split(",") if k]
    rows = []  # dict per evaluation
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for di, (name, X, y, lo, hi, C) in enumerate(datasets()):
            d = X.shape[1] + 1
            header = [f"x{j}" for j in range(X.shape[1])] + ["label"]
            bounds_csv = os.path.join(tmp, "bounds.csv")
            write_csv(bounds_csv, header, [list(lo) + [0], list(hi) + [C - 1]])
            clamped = float(((X < lo) | (X > hi)).mean())
            print(f"==> {name}: n = {len(y)}, d = {d} (label included), classes = {C}, "
                  f"values outside the public bounds: {100 * clamped:.2f}%", file=sys.stderr)
            configs = [("clip", None)] + ([("unit", None)] if C == 2 else [])
            for si in range(a.splits):
                Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, stratify=y, random_state=si)
                majority = float((yte == np.bincount(ytr).argmax()).mean())
                base = dict(dataset=name, split=si, majority=majority, chance_ap=float(
                    (yte == 1).mean() if C == 2 else 1.0 / C))
                acc, aprc = evaluate(Xtr, ytr, Xte, yte, C, a.jobs)
                rows.append(dict(base, mode="none", eps=0, k2="", acc=acc, ap=aprc, label_agree=1.0))
                train_csv = os.path.join(tmp, "train.csv")
                write_csv(train_csv, header, np.column_stack([Xtr, ytr]).tolist())
                cfgs = list(configs)
                if si < a.k2_splits:
                    cfgs += [("clip", k) for k in extra_k2 if k <= d]
                for ei, eps in enumerate(EPSILONS):
                    for ci, (mode, k2) in enumerate(cfgs):
                        seed = ((di * 1000 + si) * 100 + ei) * 100 + ci
                        R, receipt = release(a.tool, train_csv, bounds_csv, eps, mode, k2, seed, tmp)
                        if mode == "clip":
                            Xr = R[:, :-1]
                            yr = np.clip(np.rint(R[:, -1]), 0, C - 1).astype(int)
                            Xev = Xte
                        else:
                            Xr = R[:, :-1]
                            yr = decode_unit(R[:, -1])
                            Xev = unit_map(Xte, lo, hi)
                        acc, aprc = evaluate(Xr, yr, Xev, yte, C, a.jobs)
                        rows.append(dict(base, mode=mode, eps=eps, k2="default" if k2 is None else k2,
                                         acc=acc, ap=aprc, label_agree=float((yr == ytr).mean()),
                                         released_classes=len(np.unique(yr)), k2_used=receipt["k2"],
                                         sigma_projection=receipt["sigma_projection"]))
                print(f"    split {si + 1}/{a.splits} done, {time.time() - t0:.0f} s", file=sys.stderr)
    keys = ["dataset", "split", "mode", "eps", "k2", "acc", "ap", "label_agree", "released_classes",
            "k2_used", "sigma_projection", "majority", "chance_ap"]
    with open(os.path.join(a.out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    report(rows, a, time.time() - t0)
    plot(rows, a.plot)


def stat(rows, key):
    v = np.array([r[key] for r in rows], float)
    return f"{v.mean():.3f} ± {v.std(ddof=1) if len(v) > 1 else 0:.3f}"


def select(rows, **kw):
    return [r for r in rows if all(r[k] == v for k, v in kw.items())]


def report(rows, a, seconds):
    names = list(dict.fromkeys(r["dataset"] for r in rows))
    print(f"## DPRP utility (Gondara & Wang protocol): random forest on the release, real hold-out\n")
    print(f"delta = {DELTA:g}; {a.splits} stratified 80/20 splits, one release per split and cell; "
          f"mean ± sd over splits; default k2 (receipt); orthonormal projection, k1 = d. "
          f"Run time {seconds:.0f} s.\n")
    for name in names:
        rs = select(rows, dataset=name)
        modes = [m for m in ("clip", "unit") if select(rs, mode=m, k2="default")]
        used = sorted({r["k2_used"] for r in select(rs, k2="default")})
        print(f"### {name} (default k2 = {', '.join(map(str, used))})\n")
        cols = []
        for m in modes:
            cols += [f"{m}: accuracy", f"{m}: AUPRC", f"{m}: released label = true"]
        print("| ε | " + " | ".join(cols) + " |")
        print("|---" * (len(cols) + 1) + "|")
        for eps in EPSILONS:
            cells = []
            for m in modes:
                r = select(rs, mode=m, k2="default", eps=eps)
                cells += [stat(r, "acc"), stat(r, "ap"), stat(r, "label_agree")]
            print(f"| {eps} | " + " | ".join(cells) + " |")
        base = select(rs, mode="none")
        print(f"| no privacy | {stat(base, 'acc')} | {stat(base, 'ap')} | |" + " | | |" * (len(modes) - 1))
        print(f"\nMajority class (of the training part) on the hold-out: accuracy {stat(base, 'majority')}; "
              f"AUPRC of a constant score: {stat(base, 'chance_ap')}.\n")
    sweep = [r for r in rows if r["mode"] == "clip" and r["k2"] != "default"]
    if sweep:
        ks = sorted({r["k2"] for r in sweep})
        print(f"### k2 (clip mode, accuracy, first {a.k2_splits} splits only)\n")
        print("| data | ε | default | " + " | ".join(f"k2 = {k}" for k in ks) + " |")
        print("|---" * (len(ks) + 3) + "|")
        for name in names:
            for eps in EPSILONS:
                dflt = [r for r in select(rows, dataset=name, mode="clip", k2="default", eps=eps)
                        if r["split"] < a.k2_splits]
                cells = [stat(dflt, "acc")] + [stat(select(sweep, dataset=name, eps=eps, k2=k), "acc") for k in ks]
                print(f"| {name} | {eps} | " + " | ".join(cells) + " |")
        print()


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(dict.fromkeys(r["dataset"] for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), sharey=True)
    for ax, name in zip(np.atleast_1d(axes), names):
        rs = select(rows, dataset=name)
        for m, style in (("clip", "o-"), ("unit", "s--")):
            pts = [select(rs, mode=m, k2="default", eps=e) for e in EPSILONS]
            if not pts[0]:
                continue
            mu = [np.mean([r["acc"] for r in p]) for p in pts]
            sd = [np.std([r["acc"] for r in p], ddof=1) for p in pts]
            ax.errorbar(EPSILONS, mu, yerr=sd, fmt=style, capsize=3, label=f"DPRP ({m})")
        base = select(rs, mode="none")
        ax.axhline(np.mean([r["acc"] for r in base]), color="k", label="no privacy (RF on real data)")
        ax.axhline(np.mean([r["majority"] for r in base]), color="gray", ls=":", label="majority class")
        ax.set_title(name)
        ax.set_xlabel("ε (δ = 1e-4)")
        ax.set_xticks(EPSILONS)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("hold-out accuracy")
    np.atleast_1d(axes)[-1].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"plot: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
