#!/usr/bin/env bash
# Creates or updates the Python virtual environment build/pyenv with the pinned frameworks that
# tests/framework_checks checks bmpipe's exports against (python/requirements-frameworks.txt) and what
# the bmpipe package's build and tests need (python/requirements-package.txt), every transitive
# package pinned by python/constraints-frameworks.txt.
#
# Idempotent: a stamp file holds a hash of the requirements, the constraints, this script and the
# interpreter's version; when it matches, nothing is done (well under a second).
# Needs only python3 (3.11, with venv and pip). Environment: PYTHON (interpreter, default
# python3), BMPIPE_PYENV (venv folder, default build/pyenv).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
py=${PYTHON:-python3}
venv=${BMPIPE_PYENV:-$root/build/pyenv}
req=$root/python/requirements-frameworks.txt
req_package=$root/python/requirements-package.txt
con=$root/python/constraints-frameworks.txt
stamp=$venv/.bmpipe-stamp

say() { printf 'pyenv: %s\n' "$*"; }
die() { printf 'pyenv: error: %s\n' "$*" >&2; exit 1; }

command -v "$py" >/dev/null 2>&1 || die "no '$py' on PATH (set PYTHON to a Python 3.11 interpreter)"
pyver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])') \
  || die "'$py' does not run"
[[ $pyver == 3.11 ]] || die "'$py' is Python $pyver; the pins (megatron-core 0.16.1, torch 2.13.0+cpu, cp311 wheels) need Python 3.11 (set PYTHON)"

want=$(cat "$req" "$req_package" "$con" "${BASH_SOURCE[0]}" <("$py" -VV) | sha256sum | cut -d' ' -f1)
if [[ -f $stamp && -x $venv/bin/python && $(cat "$stamp") == "$want" ]]; then
  say "up to date: $venv"
  exit 0
fi

start=$(date +%s)
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
  say "creating virtual environment $venv with $("$py" -V 2>&1)"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$py" -m venv "$venv" || die "python -m venv failed (on Debian: apt-get install python3-venv)"
else
  say "updating $venv (requirements or constraints changed)"
fi
rm -f "$stamp"

# Nothing may compile CUDA or C++ ops: DeepSpeed builds from its sdist with all ops off.
export DS_BUILD_OPS=0 DS_SKIP_CUDA_CHECK=1 DS_BUILD_CPU_ADAM=0 DS_BUILD_FUSED_ADAM=0 \
       DS_BUILD_AIO=0 DS_BUILD_SHM_COMM=0 DS_BUILD_CCL_COMM=0 TORCH_CUDA_ARCH_LIST=
export PIP_DISABLE_PIP_VERSION_CHECK=1

say "installing $(cat "$req" "$req_package" | grep -cE '^[A-Za-z0-9]') pinned packages from python/requirements-{frameworks,package}.txt" \
    "($(grep -cE '^[A-Za-z0-9]' "$con") pins in python/constraints-frameworks.txt)"
if ! "$venv/bin/python" -m pip install --no-input --progress-bar off -r "$req" -r "$req_package" -c "$con"; then
  die "pip install failed (see above). torch==2.13.0+cpu must come from the wheel on this machine's disk
       (pip find-links, /opt/wheels here); PyPI has no CPU build of it. Re-run after fixing."
fi
"$venv/bin/python" -m pip check || say "warning: pip check reports the conflicts above"

printf '%s\n' "$want" > "$stamp"
say "ready: $venv ($(du -sh "$venv" | cut -f1), $(( $(date +%s) - start )) s)"
