#!/usr/bin/env python3
"""A plain numpy DPRP, timed on the sizes of core/examples/dprp_bench.rs, for a side-by-side ratio.

Interpreter: any python3 with numpy (bench/dprp_speed.sh finds or installs one). Usage:

    python3 bench/dprp_numpy.py                       # numpy timings only
    python3 bench/dprp_numpy.py --rust BIN [--threads 1,0]
                                                      # also run BIN (target/release/examples/dprp_bench)
                                                      # once per thread count (0 = all cores) and
                                                      # print rust/numpy ratios

The numpy version is the same algorithm as pg_dp_core::dprp with the same defaults (noisy row count
and padding rows, noisy column sum for the mean, noisy XᵀX, orthonormal projection with k1 = d,
k2 = 2, clip to Z = sqrt(d), centred reconstruction, shuffled rows) but the straightforward way:
float64 Gaussian noise from numpy's PCG64 (not a CSPRNG, not exact, no integer grid), XᵀX as a
float matrix product. It is a speed reference, not a private implementation.
"""
import argparse, math, subprocess, time
import numpy as np

SIZES = [(10_000, 8), (10_000, 32), (100_000, 8), (100_000, 32), (100_000, 64), (1_000_000, 16)]


def table(n, d, rng):
    basis = rng.random((4, d)) - 0.5
    w = rng.random((n, 4))
    return np.clip(0.5 + 0.5 * w @ basis + 0.05 * (rng.random((n, d)) - 0.5), 0.0, 1.0)


def dprp(x, lower, upper, sigmas, k2, rng):
    sigma_count, sigma_mean, sigma1, sigma2, offset = sigmas
    n, d = x.shape
    s = 2.0 * (np.clip(x, lower, upper) - lower) / (upper - lower) - 1.0
    z = math.sqrt(d)
    norms = np.linalg.norm(s, axis=1)
    s *= np.minimum(1.0, z / np.maximum(norms, 1e-300))[:, None]
    v = n + offset + sigma_count * rng.standard_normal()            # noisy row count
    m = max(n, math.ceil(v))
    mean = np.clip((s.sum(axis=0) + sigma_mean * rng.standard_normal(d)) / max(v, 1.0), -1, 1)
    c = s.T @ s
    noise = np.triu(sigma2 * rng.standard_normal((d, d)))
    c += noise + np.triu(noise, 1).T                                 # C' = XᵀX + N2 (symmetric)
    c -= max(v, 1.0) * np.outer(mean, mean)
    u, _, vt = np.linalg.svd(rng.standard_normal((d, d)))
    r = u @ vt                                                       # orthonormal projection, k1 = d
    padded = np.vstack([s, np.zeros((m - n, d))])
    p = padded @ r + sigma1 * rng.standard_normal((m, d))            # P' = X̃R + N1
    _, vecs = np.linalg.eigh(c)
    top = vecs[:, ::-1][:, :k2]                                      # top-k2 eigenvectors
    out = mean + (p - mean @ r) @ np.linalg.pinv(top.T @ r) @ top.T  # X' = μ + (P' − μR)(VᵀR)⁺Vᵀ
    out = np.clip(lower + (np.clip(out, -1, 1) + 1.0) * 0.5 * (upper - lower), lower, upper)
    return out[rng.permutation(m)]


def bench(n, d, rng, reps=5):
    x = table(n, d, rng)
    lower, upper = np.zeros(d), np.ones(d)
    sigmas = (20.0, 60.0, 20.0, 60.0, 90.0)  # the cost does not depend on them
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        dprp(x, lower, upper, sigmas, 2, rng)
        times.append(time.perf_counter() - t)
    times.sort()
    return times[0], times[len(times) // 2]


def rust_times(binary, threads):
    out = subprocess.run([binary, "--threads", str(threads)], capture_output=True, text=True, check=True).stdout
    res = {}
    for line in out.splitlines()[1:]:
        f = line.split("\t")
        res[(int(f[0]), int(f[1]))] = (int(f[4]), float(f[5]), float(f[6]))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rust", help="path of the dprp_bench binary")
    ap.add_argument("--threads", default="1,0", help="thread counts for the Rust runs (0 = all cores)")
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    runs = [rust_times(args.rust, int(t)) for t in args.threads.split(",")] if args.rust else []
    head = "rows\tcols\tnumpy_best_s\tnumpy_median_s"
    for _ in runs:
        head += "\trust_threads\trust_median_s\trust/numpy"
    print(head)
    for n, d in SIZES:
        best, med = bench(n, d, rng)
        line = f"{n}\t{d}\t{best:.4f}\t{med:.4f}"
        for res in runs:
            if (n, d) in res:
                threads, _, rm = res[(n, d)]
                line += f"\t{threads}\t{rm:.4f}\t{rm / med:.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
