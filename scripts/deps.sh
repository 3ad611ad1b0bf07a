#!/usr/bin/env bash
# Installs what building and testing need, only where it is missing: redis-server and
# redis-cli (Debian's 7.0), libclang for the bindings redis-module generates, and
# docker-compose (to validate docker-compose.yml). With --bench, also valgrind (the
# benchmarks count instructions per request with callgrind).
set -euo pipefail

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
if ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 && ! ls /usr/lib/*/libclang*.so* >/dev/null 2>&1; then
  missing+=(libclang-dev)
fi
command -v cc >/dev/null 2>&1 || missing+=(gcc)
# Only to validate docker-compose.yml in the tests: no Docker engine runs here.
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
if [ "${1:-}" = "--bench" ]; then
  command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "Installing: ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "Need root (or sudo) to apt-get install ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian's package may start a system redis on 6379; the project never uses it.
