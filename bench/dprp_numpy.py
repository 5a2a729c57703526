#!/usr/bin/env python3
"""A plain numpy DPRP, timed on the sizes of core/examples/dprp_bench.rs, for a side-by-side ratio.

Interpreter: /usr/bin/python3 (or any python3) with numpy (`pip install numpy`). Usage:

    python3 bench/dprp_numpy.py                 # numpy timings only
    python3 bench/dprp_numpy.py --rust BIN      # also run BIN (target/release/examples/dprp_bench)
                                                # and print rust/numpy ratios

The numpy version is the same algorithm as pg_dp_core::dprp with the same defaults (orthonormal
projection with k1 = d, k2 from dprp::default_k2, row clipping to Z = sqrt(d), projection share 0.8
of rho) but the straightforward way: float64 Gaussian noise from numpy's PCG64 (not a CSPRNG, not
exact, no integer grid), the covariance as a float matrix product. It is a speed reference, not a
private implementation.
"""
import argparse, math, subprocess, time
import numpy as np

SIZES = [(10_000, 8), (10_000, 32), (100_000, 8), (100_000, 32), (100_000, 64), (1_000_000, 16)]


def table(n, d, rng):
    basis = rng.random((4, d)) - 0.5
    w = rng.random((n, 4))
    return np.clip(0.5 + 0.5 * w @ basis + 0.05 * (rng.random((n, d)) - 0.5), 0.0, 1.0)


def dprp(x, lower, upper, sigma1, sigma2, k2, rng):
    n, d = x.shape
    s = 2.0 * (np.clip(x, lower, upper) - lower) / (upper - lower) - 1.0
    z = math.sqrt(d)
    norms = np.linalg.norm(s, axis=1)
    s *= np.minimum(1.0, z / np.maximum(norms, 1e-300))[:, None]
    u, _, vt = np.linalg.svd(rng.standard_normal((d, d)))
    r = u @ vt                                           # orthonormal projection, k1 = d
    p = s @ r + sigma1 * rng.standard_normal((n, d))     # P' = XR + N1
    c = s.T @ s
    noise = np.triu(sigma2 * rng.standard_normal((d, d)))
    c += noise + np.triu(noise, 1).T                     # C' = X^T X + N2 (symmetric)
    _, vecs = np.linalg.eigh(c)
    v = vecs[:, ::-1][:, :k2]                            # top-k2 eigenvectors
    out = p @ np.linalg.pinv(v.T @ r) @ v.T              # X' = P'(V^T R)^+ V^T
    return np.clip(lower + (np.clip(out, -1, 1) + 1.0) * 0.5 * (upper - lower), lower, upper)


def bench(n, d, rng, reps=5):
    x = table(n, d, rng)
    lower, upper = np.zeros(d), np.ones(d)
    k2 = max(1, d // 8)  # any k2: the cost does not depend on it
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        dprp(x, lower, upper, 1.0, 1.0, k2, rng)
        times.append(time.perf_counter() - t)
    times.sort()
    return times[0], times[len(times) // 2]


def rust_times(binary):
    out = subprocess.run([binary], capture_output=True, text=True, check=True).stdout
    res = {}
    for line in out.splitlines()[1:]:
        f = line.split("\t")
        res[(int(f[0]), int(f[1]))] = (float(f[4]), float(f[5]))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rust", help="path of the dprp_bench binary")
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    rust = rust_times(args.rust) if args.rust else {}
    print("rows\tcols\tnumpy_best_s\tnumpy_median_s" + ("\trust_best_s\trust_median_s\trust/numpy" if rust else ""))
    for n, d in SIZES:
        best, med = bench(n, d, rng)
        line = f"{n}\t{d}\t{best:.4f}\t{med:.4f}"
        if (n, d) in rust:
            rb, rm = rust[(n, d)]
            line += f"\t{rb:.4f}\t{rm:.4f}\t{rm / med:.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
