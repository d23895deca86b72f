#!/usr/bin/env bash
# Builds and installs the bmpipe Python package (pyproject.toml: the C++ core through CMake and
# nanobind) into build/pyenv, then runs its tests (python/tests) with pytest. Installs or updates
# build/pyenv first (scripts/pyenv.sh). The package's CMake build lives in build/python/ and is
# incremental. Extra arguments go to pytest (e.g. -k plan, -x).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
start=$(date +%s)
scripts/bootstrap.sh --deps-only
scripts/pyenv.sh
echo "python-tests: building and installing the package into build/pyenv" >&2
build/pyenv/bin/python -m pip install --no-input --progress-bar off --no-build-isolation --no-deps --quiet . >&2
rc=0
build/pyenv/bin/python -m pytest -q "$@" || rc=$?
echo "python-tests: $(( $(date +%s) - start )) s, pytest exit $rc"
exit $rc
