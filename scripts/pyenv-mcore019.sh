#!/usr/bin/env bash
# Creates or updates build/pyenv-mcore019, the Python 3.12 virtual environment with megatron-core
# 0.19.2 (python/requirements-mcore019.txt, every transitive package pinned by
# python/constraints-mcore019.txt) that tests/framework_checks/test_megatron_core_019.py runs in:
# megatron-core 0.17 and later need Python 3.12, the other framework checks' pins (scripts/pyenv.sh)
# Python 3.11.
#
# Idempotent: a stamp file holds a hash of the requirements, the constraints, this script and the
# interpreter's version; when it matches, nothing is done. Environment: PYTHON312 (interpreter,
# default pyenv's 3.12, else python3.12 on PATH), BMPIPE_PYENV_MCORE019 (venv folder).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${BMPIPE_PYENV_MCORE019:-$root/build/pyenv-mcore019}
req=$root/python/requirements-mcore019.txt
con=$root/python/constraints-mcore019.txt
stamp=$venv/.bmpipe-stamp

say() { printf 'pyenv-mcore019: %s\n' "$*"; }
die() { printf 'pyenv-mcore019: error: %s\n' "$*" >&2; exit 1; }

py=${PYTHON312:-}
if [[ -z $py ]] && command -v pyenv >/dev/null 2>&1; then
  prefix=$(pyenv prefix 3.12 2>/dev/null || pyenv prefix 3.12.1 2>/dev/null || true)
  [[ -n $prefix && -x $prefix/bin/python3 ]] && py=$prefix/bin/python3
fi
py=${py:-python3.12}
command -v "$py" >/dev/null 2>&1 || die "no Python 3.12 ('$py'); set PYTHON312 to one (pyenv install 3.12)"
pyver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])') || die "'$py' does not run"
[[ $pyver == 3.12 ]] || die "'$py' is Python $pyver; megatron-core 0.19.2's pins need Python 3.12 (set PYTHON312)"

want=$(cat "$req" "$con" "${BASH_SOURCE[0]}" <("$py" -VV) | sha256sum | cut -d' ' -f1)
if [[ -f $stamp && -x $venv/bin/python && $(cat "$stamp") == "$want" ]]; then
  say "up to date: $venv"
  exit 0
fi
start=$(date +%s)
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
say "creating $venv with $("$py" -V 2>&1)"
"$py" -m venv "$venv" || die "python -m venv failed"
export PIP_DISABLE_PIP_VERSION_CHECK=1
"$venv/bin/python" -m pip install --no-input --progress-bar off -r "$req" -c "$con" \
  || die "pip install failed (see above)"
printf '%s\n' "$want" > "$stamp"
say "ready: $venv ($(du -sh "$venv" | cut -f1), $(( $(date +%s) - start )) s)"
