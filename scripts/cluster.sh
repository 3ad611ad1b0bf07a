#!/usr/bin/env bash
# A 3-master/3-replica Redis Cluster on loopback with the idgen module on every node, each
# node with its own offset (0..5) in one shared step — no Docker needed.
#
#   scripts/cluster.sh start [--port 7000] [--dir DIR] [--step 8] [--password PW] [--node-timeout MS]
#                                                                  # nodes on ports 7000..7005
#   scripts/cluster.sh stop  [--dir DIR]                           # stops them (by pid)
#   scripts/cluster.sh status [--dir DIR]
#
# The step has headroom (8 for 6 nodes) so nodes can be added later without changing it.
# Data, logs and pid files live in DIR (default /tmp/idgen-cluster). With --password every
# node requires it (requirepass) and uses it towards its master (masterauth); clients then
# connect with redis://:PW@127.0.0.1:7000/.
set -euo pipefail
cd "$(dirname "$0")/.."

action="${1:-}"; shift || true
port=7000
dir=/tmp/idgen-cluster
step=8
password=""
node_timeout=2000
# The build cargo makes: under $CARGO_TARGET_DIR when that is set (a relative one is taken
# from the repository root, as cargo does), else under target/.
target_dir="${CARGO_TARGET_DIR:-target}"
case "$target_dir" in /*) ;; *) target_dir="$PWD/$target_dir" ;; esac
module="${IDGEN_MODULE:-$target_dir/release/libidgen.so}"
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --step) step="$2"; shift 2 ;;
    --password) password="$2"; shift 2 ;;
    --node-timeout) node_timeout="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
nodes=6
auth_args=()
if [ -n "$password" ]; then
  auth_args=(--requirepass "$password" --masterauth "$password")
  # redis-cli reads the password from here, without warning about it on the command line.
  export REDISCLI_AUTH="$password"
fi

stop() {
  for pidfile in "$dir"/node-*/redis.pid; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
}

case "$action" in
  start)
    if [ -z "${IDGEN_MODULE:-}" ]; then
      scripts/deps.sh
      cargo build --release -p idgen-module
    fi
    mkdir -p "$dir"
    stop
    addresses=()
    for i in $(seq 0 $((nodes - 1))); do
      p=$((port + i))
      d="$dir/node-$i"
      rm -rf "$d"; mkdir -p "$d"
      # Each node: its own offset i; every node the same step and layout, and the default
      # (safe) idgen settings otherwise. Persistence is AOF with fsync every second.
      # REDIS_SERVER picks another server binary (the tests run Valkey this way);
      # IDGEN_MODULE_ARGS adds module arguments (e.g. `lease-workers 16`).
      node=("${REDIS_SERVER:-redis-server}" --port "$p" --bind 127.0.0.1 --dir "$d" --daemonize yes
        --pidfile "$d/redis.pid" --logfile "$d/redis.log"
        --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout "$node_timeout"
        --appendonly yes --appendfsync everysec --save "" --repl-diskless-sync-delay 0
        --enable-debug-command yes "${auth_args[@]}"
        --loadmodule "$module" step "$step" offset "$i" ${IDGEN_MODULE_ARGS:-})
      # The node's command line, NUL-separated, to restart it the same way (the tests
      # restart nodes onto another module release).
      printf '%s\0' "${node[@]}" >"$d/command"
      "${node[@]}"
      addresses+=("127.0.0.1:$p")
    done
    for i in $(seq 0 $((nodes - 1))); do
      for _ in $(seq 1 100); do
        redis-cli -p $((port + i)) PING >/dev/null 2>&1 && break
        sleep 0.05
      done
      if ! redis-cli -p $((port + i)) PING >/dev/null 2>&1; then
        echo "node $i (port $((port + i))) did not start; its log:" >&2
        cat "$dir/node-$i/redis.log" >&2
        stop; exit 1
      fi
    done
    redis-cli --cluster create "${addresses[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 || {
      cat "$dir/create.log" >&2; stop; exit 1; }
    # Ready when every node reports cluster_state:ok and sees 3 replicas (the replicas are
    # attached a moment after the slots are assigned).
    ready=no
    for _ in $(seq 1 300); do
      ready=yes
      for i in $(seq 0 $((nodes - 1))); do
        state=$(redis-cli -p $((port + i)) CLUSTER INFO | tr -d '\r' | sed -n 's/^cluster_state://p')
        replicas=$(redis-cli -p $((port + i)) CLUSTER NODES | grep -c slave || true)
        if [ "$state" != ok ] || [ "$replicas" != 3 ]; then ready=no; break; fi
      done
      [ "$ready" = yes ] && break
      sleep 0.1
    done
    if [ "$ready" != yes ]; then
      echo "the cluster did not settle into 3 masters and 3 replicas:" >&2
      redis-cli -p "$port" CLUSTER NODES >&2; stop; exit 1
    fi
    echo "cluster up: ${addresses[*]} (step $step, offsets 0..$((nodes - 1)))"
    if [ -n "$password" ]; then
      echo "try: REDISCLI_AUTH=… redis-cli -c -p $port SNOWFLAKE.NEXT orders"
    else
      echo "try: redis-cli -c -p $port SNOWFLAKE.NEXT orders"
    fi
    ;;
  stop)
    stop
    echo "cluster in $dir stopped"
    ;;
  status)
    # With a password: REDISCLI_AUTH=PW scripts/cluster.sh status
    redis-cli -p "$port" CLUSTER NODES 2>/dev/null || echo "no cluster answers on port $port"
    ;;
  *)
    echo "usage: $0 start|stop|status [--port P] [--dir DIR] [--step N]" >&2
    exit 2
    ;;
esac
