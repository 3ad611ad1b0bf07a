#!/usr/bin/env bash
# Builds a release into dist/ from this checkout, checks it, and prints what it made:
#
#   dist/libidgen-VERSION-x86_64-linux-gnu.so   the Redis module (debug info stripped)
#   dist/idgen-VERSION-x86_64-linux-gnu         the `idgen` command-line tool, when the
#                                               workspace has it (a binary target `idgen`)
#   dist/idgen-core-VERSION.crate               the publishable crates, as `cargo package`
#   dist/idgen-client-VERSION.crate             makes them (verified: they build unpacked)
#   dist/BUILDINFO.txt                          commit, toolchain, and the oldest glibc the
#                                               module and tool need (from their symbol versions)
#   dist/SHA256SUMS                             `cd dist && sha256sum -c SHA256SUMS`
#
#   scripts/release.sh          # a clean tree is required (the release is a commit)
#   scripts/release.sh --dirty  # allow local changes (for trying the script)
#
# At the end the module from dist/ is loaded into a redis-server on a free port and asked
# for its version, so a release that does not load is never left in dist/.
set -euo pipefail
cd "$(dirname "$0")/.."

dirty=no
for arg in "$@"; do
  case "$arg" in
    --dirty) dirty=yes ;;
    *) echo "usage: $0 [--dirty]" >&2; exit 2 ;;
  esac
done
if [ "$dirty" = no ] && [ -n "$(git status --porcelain)" ]; then
  echo "release.sh: the working tree has changes; commit them, or pass --dirty to try anyway" >&2
  exit 1
fi

scripts/deps.sh
metadata=$(cargo metadata --format-version 1 --no-deps)
field() { python3 -c "import json,sys; m=json.load(sys.stdin); $1" <<<"$metadata"; }
target_dir=$(field 'print(m["target_directory"])')
version=$(field 'print(next(p["version"] for p in m["packages"] if p["name"]=="idgen-module"))')
# The command-line tool: whichever workspace package has a binary target named `idgen`.
cli_package=$(field 'print(next((p["name"] for p in m["packages"] for t in p["targets"] if t["name"]=="idgen" and "bin" in t["kind"]), ""))')
arch=$(uname -m)
[ "$arch" = x86_64 ] || { echo "release.sh: builds the x86_64 Linux release; this machine is $arch" >&2; exit 1; }

dist=dist
rm -rf "$dist"
mkdir -p "$dist"

echo "release.sh: building idgen $version${cli_package:+ and the idgen tool ($cli_package)}" >&2
build_args=(--release --locked -p idgen-module)
[ -n "$cli_package" ] && build_args+=(-p "$cli_package")
cargo build "${build_args[@]}"

module="$dist/libidgen-$version-x86_64-linux-gnu.so"
strip --strip-debug -o "$module" "$target_dir/release/libidgen.so"
binaries=("$module")
if [ -n "$cli_package" ]; then
  cli="$dist/idgen-$version-x86_64-linux-gnu"
  strip --strip-debug -o "$cli" "$target_dir/release/idgen"
  binaries+=("$cli")
fi

# The oldest glibc a binary needs is the highest GLIBC_x.y symbol version it references.
oldest_glibc() {
  objdump -T "$1" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1
}

# cargo package verifies each crate by building it unpacked; idgen-client is verified
# against the idgen-core just packaged, unpacked under ~/.cargo/registry/src/-<hash>/. An
# unpacked copy of the same version from an earlier run at the same path would be reused
# stale: remove those copies of our own crates first.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/idgen-core-* \
  "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/idgen-client-* \
  "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/-*/idgen-core-* \
  "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/-*/idgen-client-*
package_args=(--locked -p idgen-core -p idgen-client)
[ "$dirty" = yes ] && package_args+=(--allow-dirty)
cargo package "${package_args[@]}"
for crate in idgen-core idgen-client; do
  cp "$target_dir/package/$crate-$version.crate" "$dist/"
done

{
  echo "redis-idgen $version"
  echo "commit: $(git rev-parse HEAD)$([ "$dirty" = yes ] && [ -n "$(git status --porcelain)" ] && echo ' (with local changes)')"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -sm)"
  echo "toolchain: $(rustc --version)"
  for binary in "${binaries[@]}"; do
    echo "$(basename "$binary"): needs glibc $(oldest_glibc "$binary") or later (x86_64 Linux)"
  done
  echo "module: load with redis-server --loadmodule /path/to/$(basename "$module") step N offset K"
  echo "module version as MODULE LIST shows it: $(python3 -c "a,b,c=map(int,'$version'.split('-')[0].split('.'));print(a*10000+b*100+c)")"
} >"$dist/BUILDINFO.txt"

(cd "$dist" && sha256sum -- * >SHA256SUMS && sha256sum --quiet -c SHA256SUMS)

# The module from dist/ loads and answers.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
scratch=$(mktemp -d /tmp/idgen-release.XXXXXX)
redis-server --port "$port" --bind 127.0.0.1 --save "" --dir "$scratch" --logfile "$scratch/log" \
  --loadmodule "$PWD/$module" step 2 offset 1 &
server_pid=$!
stop() { kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; rm -rf "$scratch"; }
trap stop EXIT
for _ in $(seq 1 100); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.05; done
modules=$(redis-cli -p "$port" MODULE LIST | tr '\n' ' ')
identity=$(redis-cli -p "$port" IDGEN.IDENTITY | tr '\n' ' ')
case "$modules $identity" in
  *idgen*version*"$version"*) ;;
  *) echo "release.sh: the module from $module did not load or answer:" >&2; cat "$scratch/log" >&2; exit 1 ;;
esac
echo "release.sh: $module loaded: MODULE LIST: $modules" >&2

echo "release.sh: dist/ holds:" >&2
(cd "$dist" && ls -l && cat BUILDINFO.txt)
