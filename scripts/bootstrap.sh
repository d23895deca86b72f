#!/usr/bin/env bash
# Installs what bmpipe needs from Debian's package archive (only what is missing) and builds
# bmpipe, its tests and its benchmarks into build/. Safe to run again: it rebuilds incrementally.
#
#   scripts/bootstrap.sh [--deps-only [PACKAGE...] | --target TARGET]
#
# --deps-only installs what is missing, and the packages named (scripts/fuzz.sh adds clang), and
# builds nothing. --target builds only that target and what it needs (scripts/run-example.sh:
# bmpipe, the command line, without the test suite and the benchmarks).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ cmake make pkg-config nlohmann-json3-dev libcli11-dev libyaml-dev libfmt-dev
          coinor-libcbc-dev libgtest-dev libbenchmark-dev)
deps_only=0
target=()
if [[ ${1:-} == --deps-only ]]; then
  deps_only=1
  shift
  packages+=("$@")
elif [[ ${1:-} == --target ]]; then
  [[ -n ${2:-} ]] || { echo "usage: scripts/bootstrap.sh [--deps-only [PACKAGE...] | --target TARGET]" >&2; exit 2; }
  target=(--target "$2")
elif [[ -n ${1:-} ]]; then
  echo "usage: scripts/bootstrap.sh [--deps-only [PACKAGE...] | --target TARGET]" >&2
  exit 2
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  echo "bootstrap: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
((deps_only)) && exit 0

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBMPIPE_WERROR=ON >&2
cmake --build build -j"$(nproc)" "${target[@]}" >&2
