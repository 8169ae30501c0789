#!/usr/bin/env bash
# Runs the Python client's tests against a real `ladder serve`.
#
#   clients/python/run-tests.sh [pytest args...]
#
# Creates a virtual environment in a temporary directory (or reuses $LADDER_PY_VENV), installs
# the package with its test extras, and runs pytest. LADDER_BIN defaults to
# target/release/ladder or target/debug/ladder of the repository, whichever exists (release
# first); build it before (CI runs this after `cargo test --workspace`).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

if [[ -z "${LADDER_BIN:-}" ]]; then
    for profile in release debug; do
        if [[ -x "$repo/target/$profile/ladder" ]]; then
            LADDER_BIN="$repo/target/$profile/ladder"
            break
        fi
    done
fi
if [[ -z "${LADDER_BIN:-}" || ! -x "$LADDER_BIN" ]]; then
    echo "run-tests.sh: no ladder binary (looked for target/release/ladder and target/debug/ladder; set LADDER_BIN)" >&2
    exit 1
fi
export LADDER_BIN

python="${PYTHON:-python3}"
if [[ -n "${LADDER_PY_VENV:-}" ]]; then
    venv="$LADDER_PY_VENV"
else
    venv="$(mktemp -d "${TMPDIR:-/tmp}/ladder-py-venv.XXXXXX")"
    trap 'rm -rf "$venv"' EXIT
fi
if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$here[test]"

cd "$here"
"$venv/bin/python" -m pytest "$@"
