#!/usr/bin/env bash
# Runs every test: the pure core's unit and property tests, and the integration tests
# against real redis-server processes that the tests start (and stop) themselves.
#
# Builds in release: the module under test is the one users load, and the million-ID
# bursts run in a second instead of ten.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
cargo build --release -p idgen-module
cargo test --release --workspace "$@"
