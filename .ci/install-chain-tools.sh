#!/usr/bin/env bash
# Install the pinned chain tools into .ci/node (git-ignored) from the npm registry:
#   solc-js 0.8.37 (solcjs, used by contracts/build.sh), anvil 1.7.1 (a local EVM node), and
#   the sources contracts/build.sh compiles beside ours: ERC-4337's EntryPoint v0.7
#   (@account-abstraction/contracts 0.7.0) with the OpenZeppelin 5.0.2 it imports, and
#   Pimlico's Alto 0.0.20 (@pimlico/alto), the ERC-4337 bundler the chain tests run beside anvil.
# Idempotent: does nothing when all are already installed at the pinned versions.
set -euo pipefail
cd "$(dirname "$0")/.."

SOLC_VERSION=0.8.37
ANVIL_VERSION=1.7.1
AA_VERSION=0.7.0
OZ_VERSION=5.0.2
ALTO_VERSION=0.0.20
prefix=.ci/node
modules="$prefix/node_modules"

installed_version() { # package-dir -> version or empty
  node -e 'try { process.stdout.write(require(process.argv[1]).version) } catch (e) {}' \
    "$PWD/$1/package.json"
}

if [[ -x "$modules/.bin/anvil" && -x "$modules/.bin/solcjs" \
  && "$(installed_version "$modules/solc")" == "$SOLC_VERSION" \
  && "$(installed_version "$modules/@foundry-rs/anvil")" == "$ANVIL_VERSION" \
  && "$(installed_version "$modules/@account-abstraction/contracts")" == "$AA_VERSION" \
  && "$(installed_version "$modules/@openzeppelin/contracts")" == "$OZ_VERSION" \
  && "$(installed_version "$modules/@pimlico/alto")" == "$ALTO_VERSION" ]]; then
  echo "chain tools already installed in $prefix"
else
  mkdir -p "$prefix"
  # anvil's binary ships in the optional platform package (@foundry-rs/anvil-<os>-<arch>);
  # its postinstall script only downloads that package when npm skipped it, so scripts
  # are not needed (and --foreground-scripts only shows their output if they run).
  npm install --no-audit --no-fund --foreground-scripts --prefix "$prefix" \
    "solc@$SOLC_VERSION" "@foundry-rs/anvil@$ANVIL_VERSION" \
    "@account-abstraction/contracts@$AA_VERSION" "@openzeppelin/contracts@$OZ_VERSION" \
    "@pimlico/alto@$ALTO_VERSION"
fi

"$modules/.bin/anvil" --version | head -n 1
echo "solcjs $("$modules/.bin/solcjs" --version)"
echo "alto $(installed_version "$modules/@pimlico/alto")"
