#!/usr/bin/env bash
# Builds the idgen module of the previous release from this repository's history and prints
# the path of the library, for the tests of rolling upgrades and mixed versions (a node
# restarted from one release onto the other, replicas of another release than their master).
#
#   scripts/previous-release.sh          # builds if needed, prints the .so path
#
# The library is named libidgen_previous.so so that it sits beside the current build in the
# same target directory (the dependencies, redis-module among them, are built once for both);
# the module it loads as is still `idgen`.
set -euo pipefail
cd "$(dirname "$0")/.."

# Release 0.2.0 (CHANGELOG.md): rolling upgrades, data compatibility, CI on four servers.
# Release 0.1.0 was 651782b676c8b062cbb43bd32ef2dda4c69012e1.
version=0.2.0
commit=69eb90484b9f50848c0c2e8e7b2fbc0d814d2dc7

git cat-file -e "$commit^{commit}" 2>/dev/null || {
  echo "previous-release.sh: commit $commit (release $version) is not in this clone;" \
    "the upgrade tests need the repository's history (git fetch --unshallow)" >&2
  exit 1
}
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
src="$target_dir/previous-release/$version"
if [ ! -f "$src/.complete" ]; then
  rm -rf "$src"
  mkdir -p "$src"
  git archive "$commit" | tar -x -C "$src"
  sed -i 's/^name = "idgen"$/name = "idgen_previous"/' "$src/module/Cargo.toml"
  grep -q '^name = "idgen_previous"$' "$src/module/Cargo.toml"
  touch "$src/.complete"
fi
cargo build --quiet --release --locked -p idgen-module --manifest-path "$src/Cargo.toml" --target-dir "$target_dir" >&2
echo "$target_dir/release/libidgen_previous.so"
