#!/usr/bin/env bash
# The Python package's tests: builds the `imgfeed` binary (the tests compare against it),
# installs the package into a fresh virtual environment and runs pytest there.
#   bash python/test.sh [PYTEST ARGS]        (VENV=DIR to pick the environment's folder)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin imgfeed
VENV="${VENV:-target/python-venv}"
VENV_ABS="$(pwd)/$VENV"
rm -rf "$VENV_ABS"
python3 -m venv "$VENV_ABS"
"$VENV_ABS/bin/pip" install --quiet --upgrade pip
"$VENV_ABS/bin/pip" install --quiet "./python[test]"
cd python/tests
IMGFEED_BIN="$PWD/../../target/release/imgfeed" "$VENV_ABS/bin/python" -m pytest -q "$@"
