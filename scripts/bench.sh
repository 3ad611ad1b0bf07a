#!/usr/bin/env bash
# Runs the side-by-side benchmarks and rewrites BENCHMARKS.md and bench/throughput.svg.
#   scripts/bench.sh            # full run (3 rounds, medians; about 6 minutes here after the build)
#   scripts/bench.sh --quick    # a small smoke run, written to the temp directory
set -euo pipefail
# --help prints the comment above instead of starting the work (builds, servers, runs).
case "${1:-}" in -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p'; exit 0 ;; esac
cd "$(dirname "$0")/.."
scripts/deps.sh --bench
# The floor of a module command is compared on every server CI tests.
scripts/servers.sh install
cargo build --release -p idgen-module -p idgen-bench
IDGEN_FLOOR_MODULE=$(scripts/floor-module.sh)
export IDGEN_FLOOR_MODULE
exec target/release/idgen-bench "$@"
