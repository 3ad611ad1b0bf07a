#!/usr/bin/env bash
# A randomized fault soak of the module: a deployment (Sentinel with three data nodes, or a
# Redis Cluster of three masters and three replicas), clients of the project's own crate
# that follow the master and plain clients pinned to one node, a seeded nemesis, and a
# history checker. See docs/guarantees.md ("Fault soak").
#
#   scripts/soak.sh [--seconds N] [--seed S] [--server NAME] [--topology sentinel|cluster]
#                   [--control shared-offset|identity-warn|lease-fence] [--holders H]
#                   [--no-namespaces] [--base-port P]
#
# Besides the clients, H (default 4) leased-generator holders run as processes of their own
# (tests/src/bin/lease_holder.rs), each issuing IDs under a worker id leased from the
# deployment and writing every one to a file for the checker.
# As root, every data node runs in a network namespace of its own (soak-n0…), and so does
# every holder (soak-h0…), joined by a bridge in the namespace the clients and sentinels
# run in (soak-c), so a partition is a link taken down; addresses 10.231.0.0/24 exist only
# inside these namespaces, and all are removed on exit. Without root (or with
# --no-namespaces) everything runs on 127.0.0.1 and the partition faults are skipped (the
# output says so).
#
# The last line: `soak: F faults, N snowflakes + M segment values, D duplicates, longest
# outage T s; L leased IDs from P holder processes, longest holder without an ID U s`.
# Exit 0 only when no value repeated and enough traffic and faults happened;
# with --control shared-offset (every node on offset 0, which the docs forbid), exit 0 only
# when the soak found duplicates: the test of the test. --control identity-warn (cluster):
# every node under identity-conflicts warn and only identity mistakes (a master restarted
# with another node's offset): exit 0 only when duplicates were found — what the identity
# guard prevents in the other runs. --control lease-fence (Sentinel): the module's lease
# fence after a start or promotion turned off (a hidden debug setting) and only lost grants
# (a master restarted without the last grant while its holder still issues, then another
# holder leasing): exit 0 only when duplicates were found — what the fence prevents.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=90 seed=1 server=redis-7.0 topology=sentinel control="" namespaces=auto base_port=7300
holders=4
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --server) server="$2"; shift 2 ;;
    --topology) topology="$2"; shift 2 ;;
    --control) control="$2"; shift 2 ;;
    --holders) holders="$2"; shift 2 ;;
    --no-namespaces) namespaces=no; shift ;;
    --base-port) base_port="$2"; shift 2 ;;
    -h|--help) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "soak.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# What it needs: the servers, redis-cli (the cluster is created with it) and ip (iproute2).
scripts/deps.sh --test
server_path="$(scripts/servers.sh path "$server")"
cargo build --release -q -p idgen-module
cargo build --release -q -p idgen-tests --bin soak --bin lease_holder
target="${CARGO_TARGET_DIR:-$PWD/target}"
args=(--seconds "$seconds" --seed "$seed" --topology "$topology" --base-port "$base_port"
      --holders "$holders"
      --dir "/tmp/soak-run-$topology-$seed-$$")
[ -n "$control" ] && args+=(--control "$control")

nodes=3
[ "$topology" = cluster ] && nodes=6
if [ "$namespaces" = auto ]; then
  if [ "$(id -u)" = 0 ] && command -v ip >/dev/null; then namespaces=yes; else namespaces=no; fi
fi

cleanup() {
  for i in $(seq 0 $((nodes - 1))); do ip netns del "soak-n$i" 2>/dev/null || true; done
  for i in $(seq 0 $((holders - 1))); do ip netns del "soak-h$i" 2>/dev/null || true; done
  ip netns del soak-c 2>/dev/null || true
}

run=(env REDIS_SERVER="$server_path" CARGO_TARGET_DIR="$target" "$target/release/soak" "${args[@]}")
if [ "$namespaces" = yes ]; then
  cleanup
  trap cleanup EXIT
  ip netns add soak-c
  ip -n soak-c link set lo up
  ip -n soak-c link add soak-br type bridge
  ip -n soak-c addr add 10.231.0.1/24 dev soak-br
  ip -n soak-c link set soak-br up
  for i in $(seq 0 $((nodes - 1))); do
    ip netns add "soak-n$i"
    ip -n "soak-n$i" link set lo up
    ip link add "soak-v$i" netns soak-c type veth peer name eth0 netns "soak-n$i"
    ip -n soak-c link set "soak-v$i" master soak-br up
    ip -n "soak-n$i" addr add "10.231.0.$((10 + i))/24" dev eth0
    ip -n "soak-n$i" link set eth0 up
  done
  for i in $(seq 0 $((holders - 1))); do
    ip netns add "soak-h$i"
    ip -n "soak-h$i" link set lo up
    ip link add "soak-w$i" netns soak-c type veth peer name eth0 netns "soak-h$i"
    ip -n soak-c link set "soak-w$i" master soak-br up
    ip -n "soak-h$i" addr add "10.231.0.$((50 + i))/24" dev eth0
    ip -n "soak-h$i" link set eth0 up
  done
  ip netns exec soak-c "${run[@]}" --namespaces
else
  "${run[@]}"
fi
