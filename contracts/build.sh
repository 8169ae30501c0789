#!/usr/bin/env bash
# Compile contracts/*.sol with solc-js 0.8.37 into contracts/build/.
#
#   bash contracts/build.sh           rebuild the committed artifacts
#   bash contracts/build.sh --check   rebuild into a temporary directory; exit 1 if any
#                                     committed artifact differs from (or is missing in) it
#
# solcjs is taken from $SOLCJS, else .ci/node/node_modules/.bin/solcjs (installed by
# `bash .ci/install-chain-tools.sh`), else `npx --no-install solcjs`.
set -euo pipefail

SOLC_VERSION=0.8.37

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
build="$here/build"

check=0
case "${1:-}" in
  "") ;;
  --check) check=1 ;;
  *) echo "usage: bash contracts/build.sh [--check]" >&2; exit 2 ;;
esac

if [[ -n "${SOLCJS:-}" ]]; then
  solc=("$SOLCJS")
elif [[ -x "$repo/.ci/node/node_modules/.bin/solcjs" ]]; then
  solc=("$repo/.ci/node/node_modules/.bin/solcjs")
elif (cd "$repo" && npx --no-install solcjs --version >/dev/null 2>&1); then
  solc=(npx --no-install solcjs)
else
  echo "build.sh: solcjs not found; run: bash .ci/install-chain-tools.sh (or set SOLCJS)" >&2
  exit 1
fi

version="$(cd "$repo" && "${solc[@]}" --version)"
if [[ "$version" != "$SOLC_VERSION+"* ]]; then
  echo "build.sh: need solc $SOLC_VERSION, but ${solc[*]} is $version" >&2
  exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

node "$here/compile.js" input >"$tmp/input.json"
# Imports (EntryPoint's, and the interfaces ours use) come from the npm packages.
(cd "$repo" && "${solc[@]}" --standard-json --base-path . --include-path .ci/node/node_modules) \
  <"$tmp/input.json" >"$tmp/solc-output.txt"
node "$here/compile.js" output "$tmp/solc-output.txt" "$tmp/build"

if [[ "$check" == 1 ]]; then
  status=0
  for fresh in "$tmp/build"/*; do
    name="$(basename "$fresh")"
    if [[ ! -f "$build/$name" ]]; then
      echo "build.sh --check: contracts/build/$name is missing (run: bash contracts/build.sh)" >&2
      status=1
    elif ! cmp -s "$fresh" "$build/$name"; then
      echo "build.sh --check: contracts/build/$name differs from a fresh build (run: bash contracts/build.sh)" >&2
      status=1
    fi
  done
  if [[ "$status" == 0 ]]; then
    echo "contracts/build is up to date (solc $version)"
  fi
  exit "$status"
fi

mkdir -p "$build"
cp "$tmp/build"/* "$build/"
echo "wrote contracts/build/ (solc $version):"
(cd "$build" && ls -1)
echo "selectors:"
cat "$build/selectors.json"
