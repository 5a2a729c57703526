#!/usr/bin/env bash
# DPRP speed of the core against a straightforward numpy implementation of the same algorithm, in
# the same run (bench/dprp_numpy.py prints the ratios): bash bench/dprp_speed.sh [thread counts]
# The Rust release runs once per thread count (default "1,0"; 0 = every available core). Finds or
# installs numpy like the other bench scripts (bench/python_env.sh). Pure core: no PostgreSQL.
# The SQL functions end to end are timed by: bash bench/run.sh 10000000 --sections dprp
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
THREADS="${1:-1,0}"
source "$ROOT/bench/python_env.sh"
PY="$(pick_python "$ROOT/target/dprp-utility-venv" "numpy" numpy)"
cd "$ROOT"
cargo build -q -p pg_dp_core --release --example dprp_bench
# numpy with single-threaded BLAS: multi-threaded OpenBLAS spin-waits when the other core is busy
# (10,000 × 32 took 0.37 s with 2 BLAS threads and 0.018 s with one on the shared test machine);
# compare it with the Rust column for 1 thread
OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
    "$PY" bench/dprp_numpy.py --rust target/release/examples/dprp_bench --threads "$THREADS"
