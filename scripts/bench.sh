#!/usr/bin/env bash
# Runs the side-by-side benchmarks and rewrites BENCHMARKS.md and bench/throughput.svg.
#   scripts/bench.sh            # full run (several minutes; 3 rounds, medians)
#   scripts/bench.sh --quick    # a small smoke run, written to the temp directory
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --bench
cargo build --release -p idgen-module -p idgen-bench
exec target/release/idgen-bench "$@"
