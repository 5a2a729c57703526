#!/usr/bin/env bash
# DPRP speed of the core against a straightforward numpy implementation of the same algorithm, in
# the same run: bash bench/dprp_speed.sh. Needs numpy (python3 -m pip install --user numpy).
# The SQL functions end to end are timed by: bash bench/run.sh 10000000 --sections dprp
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-/usr/bin/python3}"
cd "$ROOT"
cargo build -q -p pg_dp_core --release --example dprp_bench
"$PYTHON" bench/dprp_numpy.py --rust target/release/examples/dprp_bench
