#!/usr/bin/env python3
"""Writes the evaluation tables for DPRP as headerless CSV (last column = label where there is one).

Uses /usr/bin/python3 or python3 with numpy and scikit-learn (`pip install numpy scikit-learn`).
The sklearn tables ship with the package (no download). Usage: datasets.py OUTDIR
"""
import sys, os
import numpy as np
from sklearn import datasets

out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/dprp_data"
os.makedirs(out, exist_ok=True)

def save(name, X, y=None):
    M = X if y is None else np.column_stack([X, y])
    np.savetxt(os.path.join(out, name + ".csv"), M, delimiter=",", fmt="%.10g")
    print(name, M.shape)

for name, loader in [("wine", datasets.load_wine), ("digits", datasets.load_digits),
                     ("breast_cancer", datasets.load_breast_cancer), ("diabetes", datasets.load_diabetes)]:
    b = loader()
    save(name, b.data, b.target)

# synthetic classification table: 20 informative-ish features, binary label
X, y = datasets.make_classification(n_samples=20000, n_features=20, n_informative=6, n_redundant=6,
                                    n_clusters_per_class=2, random_state=1)
save("synth_class", X, y)
