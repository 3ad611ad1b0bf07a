#!/usr/bin/env bash
# How close SNOWFLAKE.NEXT comes to INCR, and to the floor of any module command: rounds of
# `redis-benchmark -c 50 -P 32` interleaved in one run against one redis-server with the
# module loaded, for
#   INCR ki                  the native command
#   SNOWFLAKE.BOUND kb       a read-only module command that opens a snowflake key and replies
#                            a 19-digit ID: the least any module command doing that can cost
#   SNOWFLAKE.NEXT ks        the product
# Prints each round and the medians as ratios to INCR. Needs the release module built
# (cargo build --release -p idgen-module) and redis-benchmark (redis-tools).
#
#   scripts/module-floor.sh [ROUNDS] [REQUESTS]      # defaults: 3 rounds of 2,000,000
#   REDIS_SERVER=$(scripts/servers.sh path valkey-9.1) scripts/module-floor.sh   # on Valkey 9.1
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
requests=${2:-2000000}
module=$PWD/target/release/libidgen.so
[ -f "$module" ] || { echo "build the module first: cargo build --release -p idgen-module" >&2; exit 1; }
dir=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
server=${REDIS_SERVER:-redis-server}
"$server" --version
"$server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  --logfile "$dir/redis.log" --loadmodule "$module" snowflake-restart-fence no >/dev/null &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
  redis-cli -p "$port" PING >/dev/null 2>&1 && break
  sleep 0.1
done
# redis-benchmark spins forever against a port where nothing answers: check first.
redis-cli -p "$port" PING >/dev/null || { cat "$dir/redis.log" >&2; exit 1; }
redis-cli -p "$port" SNOWFLAKE.NEXT kb >/dev/null

rate() {
  redis-benchmark -p "$port" -c 50 -P 32 -n "$requests" -q "$@" 2>/dev/null |
    tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1 | cut -d' ' -f1
}
declare -A all
for round in $(seq "$rounds"); do
  for cmd in "INCR ki" "SNOWFLAKE.BOUND kb" "SNOWFLAKE.NEXT ks"; do
    r=$(rate $cmd)
    all[$cmd]+="$r "
    printf 'round %s  %-20s %12s requests/s\n' "$round" "$cmd" "$r"
  done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
incr=$(echo "${all[INCR ki]}" | median)
for cmd in "INCR ki" "SNOWFLAKE.BOUND kb" "SNOWFLAKE.NEXT ks"; do
  m=$(echo "${all[$cmd]}" | median)
  awk -v c="$cmd" -v m="$m" -v i="$incr" 'BEGIN {printf "median %-20s %12.0f requests/s  %.2f x INCR\n", c, m, m / i}'
done
