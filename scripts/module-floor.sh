#!/usr/bin/env bash
# How close idgen's commands come to the floor of any module command, on every server CI
# tests: rounds of `redis-benchmark -c 50 -P 32`, interleaved, against one server per
# version with both modules loaded, for
#   INCR ki              the native command
#   IDFLOOR.NEXTID kf    a C module command that shares no code with idgen: same name length,
#                        flags and key spec as SNOWFLAKE.NEXT, opens its existing key for
#                        reading and replies a 19-digit integer (bench/floor/floor.c)
#   SNOWFLAKE.NEXT ks    the product
#   SEGMENT.NEXT kg      the product
# Prints each round, then per server the median rate and the median of each round's ratio to
# the floor and to INCR. Installs what it needs (redis-benchmark, the servers) and builds
# the release module first.
#
#   scripts/module-floor.sh [ROUNDS] [REQUESTS]            # defaults: 25 rounds of 300,000
#   IDGEN_SERVERS="valkey-9.1" scripts/module-floor.sh     # one server (names: servers.sh names)
set -euo pipefail
# --help prints the comment above instead of starting the work (builds, servers, runs).
case "${1:-}" in -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p'; exit 0 ;; esac
cd "$(dirname "$0")/.."
rounds=${1:-25}
requests=${2:-300000}
case "$rounds$requests" in *[!0-9]*) echo "usage: $0 [ROUNDS] [REQUESTS] (numbers; --help)" >&2; exit 2 ;; esac
scripts/deps.sh --bench
[ -n "${REDIS_SERVER:-}" ] || scripts/servers.sh install
cargo build --release -p idgen-module
module=$PWD/target/release/libidgen.so
floor=$(scripts/floor-module.sh)
# The server on core 0 and redis-benchmark on core 1 where the machine can (bench/src/cpus.rs
# says why): sharing a core now and then swings single rounds by a third.
server_on=() driver_on=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  server_on=(taskset -c 0) driver_on=(taskset -c 1)
fi
commands=("INCR ki" "IDFLOOR.NEXTID kf" "SNOWFLAKE.NEXT ks" "SEGMENT.NEXT kg")
summary=()

measure() { # server-name server-binary
  local name=$1 server=$2 dir port pid
  dir=$(mktemp -d)
  echo "== $name: $("$server" --version)"
  local attempt
  for attempt in 1 2 3 4 5; do
    # Below the kernel's ephemeral range (32768 and up here), where redis-benchmark's own
    # connections take their local ports; a port taken anyway makes the server exit, and
    # another is tried.
    port=$((20000 + RANDOM % 12000))
    "${server_on[@]}" "$server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --dir "$dir" --logfile "$dir/server.log" --loadmodule "$module" \
      snowflake-restart-fence no --loadmodule "$floor" >/dev/null &
    pid=$!
    for _ in $(seq 100); do
      redis-cli -p "$port" PING >/dev/null 2>&1 && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && break
  done
  # redis-benchmark spins forever against a port where nothing answers: check first.
  if ! redis-cli -p "$port" PING >/dev/null; then
    cat "$dir/server.log" >&2; kill "$pid" 2>/dev/null; rm -rf "$dir"; exit 1
  fi
  # Every command's key exists before the rounds, as in steady use.
  redis-cli -p "$port" SET kf 1 >/dev/null
  redis-cli -p "$port" SNOWFLAKE.NEXT ks >/dev/null
  redis-cli -p "$port" SEGMENT.NEXT kg >/dev/null
  declare -A all=()
  local round cmd r
  for round in $(seq "$rounds"); do
    for cmd in "${commands[@]}"; do
      r=$("${driver_on[@]}" redis-benchmark -p "$port" -c 50 -P 32 -n "$requests" -q $cmd 2>/dev/null |
        tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1 | cut -d' ' -f1)
      all[$cmd]+="${r:-0} "
      printf 'round %s  %-20s %12s requests/s\n' "$round" "$cmd" "${r:-none}"
    done
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true; rm -rf "$dir"
  local m to_floor to_incr
  for cmd in "${commands[@]}"; do
    m=$(echo "${all[$cmd]}" | median)
    # The median of each round's ratio: the commands of a round ran back to back.
    to_floor=$(ratios "${all[$cmd]}" "${all[IDFLOOR.NEXTID kf]}" | median)
    to_incr=$(ratios "${all[$cmd]}" "${all[INCR ki]}" | median)
    summary+=("$(printf '%-11s %-20s %11.0f requests/s  %.2f x floor  %.2f x INCR' \
      "$name" "$cmd" "$m" "$to_floor" "$to_incr")")
  done
}
# ratios "a1 a2 …" "b1 b2 …": a1/b1, a2/b2, … one a line.
ratios() { paste <(tr ' ' '\n' <<<"$1" | grep .) <(tr ' ' '\n' <<<"$2" | grep .) | awk '{print $1 / $2}'; }
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

if [ -n "${REDIS_SERVER:-}" ]; then
  measure "$(basename "$REDIS_SERVER")" "$REDIS_SERVER"
else
  for name in ${IDGEN_SERVERS:-$(scripts/servers.sh names)}; do
    measure "$name" "$(scripts/servers.sh path "$name")"
  done
fi
echo "== medians of $rounds rounds (redis-benchmark -c 50 -P 32 -n $requests${server_on:+, server and driver pinned to cores 0 and 1}); ratios: median of the rounds' ratios"
printf '%s\n' "${summary[@]}"
