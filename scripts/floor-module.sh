#!/usr/bin/env bash
# Builds bench/floor/floor.c — a module command that does nothing of idgen's (see the file) —
# into target/release/libidgen_floor.so and prints that path. The header is redismodule.h as
# the redis-module crate ships it (the file Redis publishes for modules), found through cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
manifest=$(cargo metadata --format-version 1 --locked 2>/dev/null |
  python3 -c 'import json, sys
print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"] == "redis-module"))')
include=$(dirname "$manifest")/src/include
[ -f "$include/redismodule.h" ] || { echo "no redismodule.h in $include" >&2; exit 1; }
out=$PWD/target/release/libidgen_floor.so
mkdir -p "$(dirname "$out")"
if [ ! -f "$out" ] || [ bench/floor/floor.c -nt "$out" ]; then
  cc -O2 -fPIC -shared -std=c99 -Wall -Wextra -Werror -I "$include" bench/floor/floor.c -o "$out"
fi
echo "$out"
