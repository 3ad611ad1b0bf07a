#!/usr/bin/env bash
# Builds the module, starts a local redis-server with it on a free port, and shows the
# commands at work. The server is stopped at the end unless --keep is given.
#
#   scripts/demo.sh                      # step 1, offset 0 (a single instance)
#   scripts/demo.sh --keep               # leave the server running and say how to reach it
#   scripts/demo.sh -- step 6 offset 2   # any module arguments after --
set -euo pipefail
cd "$(dirname "$0")/.."

keep=no
module_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=yes; shift ;;
    --) shift; module_args=("$@"); break ;;
    *) echo "usage: $0 [--keep] [-- module arguments]" >&2; exit 2 ;;
  esac
done

scripts/deps.sh
cargo build --release -p idgen-module
# Where cargo put it (CARGO_TARGET_DIR and build.target-dir move it).
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
module="$target_dir/release/libidgen.so"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 6390)
dir=$(mktemp -d /tmp/idgen-demo.XXXXXX)
# AOF on, as production runs it (the directory is removed at the end).
server_args=(--port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly yes
  --logfile "$dir/redis.log" --loadmodule "$module" "${module_args[@]}")
if [ "$keep" = yes ]; then
  redis-server "${server_args[@]}" --daemonize yes --pidfile "$dir/redis.pid"
else
  # A child of this script, so it is stopped and reaped by its pid on exit.
  redis-server "${server_args[@]}" --daemonize no &
  server_pid=$!
fi
stop() {
  if [ -n "${server_pid:-}" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
for _ in $(seq 1 100); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.05; done
if ! redis-cli -p "$port" PING >/dev/null 2>&1; then
  echo "redis-server did not start; its log:" >&2; cat "$dir/redis.log" >&2; stop; exit 1
fi
[ "$keep" = yes ] || trap stop EXIT

show() { echo; echo "redis> $*"; redis-cli --no-raw -p "$port" "$@"; }
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') with idgen on 127.0.0.1:$port"
show CONFIG GET 'idgen.*'
show SNOWFLAKE.NEXT orders
show SNOWFLAKE.NEXT orders COUNT 5
id=$(redis-cli -p "$port" SNOWFLAKE.NEXT orders SHARD 42)
echo; echo "redis> SNOWFLAKE.NEXT orders SHARD 42"; echo "(integer) $id"
echo "# The time is up to idgen.max-drift-ms (2 s) ahead right after a start: the restart"
echo "# fence keeps IDs lost in a crash from being issued again (docs/guarantees.md)."
show SNOWFLAKE.DECODE "$id"
show SET invoice 5000000
show SEGMENT.NEXT invoice
echo "# The first use of a key after a start skips idgen.segment-fence (10^9) values, so"
echo "# values a crash lost from disk are never handed out again (docs/guarantees.md)."
show SEGMENT.NEXT invoice COUNT 1000
show GET invoice
show INFO idgen

if [ "$keep" = yes ]; then
  echo
  echo "The server keeps running: redis-cli -p $port"
  echo "Stop it with: kill \$(cat $dir/redis.pid) && rm -rf $dir"
fi
