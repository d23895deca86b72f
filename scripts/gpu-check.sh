#!/usr/bin/env bash
# bmpipe's accelerator check (docs/python.md, "The accelerator check"): one command, a few minutes on
# one GPU. It builds what it needs, then on the device profiles a small GPT's layers under every
# option with bmpipe.torch.measure and with torch.profiler traces read by `bmpipe profile`, compares
# the two (kernel times, kept bytes), runs a 1-rank plan (and a 2-process one with two GPUs) with
# torch.distributed.pipelining, and writes a short report of measured against predicted (time per
# layer and per step, peak memory from torch.cuda.max_memory_allocated and max_memory_reserved):
# OUT/gpu-check.md and OUT/gpu-check.json, with the traces.
#
#   scripts/gpu-check.sh [--device cuda|cpu] [--out DIR]
#
# Without --device: cuda when the interpreter's torch sees a GPU; otherwise it says so and exits 0.
# --device cpu runs every part on the CPU (what CI runs). The interpreter: PYTHON (one whose torch
# has CUDA, on a GPU machine), else build/pyenv's (scripts/pyenv.sh: torch 2.13.0 for the CPU); the
# bmpipe package is built into build/gpu-check/site for it. Exit codes: 0 done or no GPU, 1 a part
# failed, 2 bad arguments.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
device=""
out=build/gpu-check
while (($#)); do
  case $1 in
    --device) device=${2:-}; shift 2 ;;
    --out) out=${2:-}; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (usage: scripts/gpu-check.sh [--device cuda|cpu] [--out DIR])" >&2; exit 2 ;;
  esac
done
if [[ -n $device && $device != cuda && $device != cpu ]]; then
  echo "gpu-check: --device '$device': use cuda or cpu" >&2
  exit 2
fi
start=$(date +%s)
say() { printf 'gpu-check: %s\n' "$*" >&2; }

# The interpreter and its bmpipe.
if [[ -n ${PYTHON:-} ]]; then
  py=$PYTHON
  site=$root/build/gpu-check/site
  say "building the bmpipe package for $py into $site"
  "$py" -m pip install --no-input --progress-bar off --no-build-isolation --no-deps --quiet --upgrade --target "$site" . >&2
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
else
  scripts/pyenv.sh >&2
  py=$root/build/pyenv/bin/python
  say "building the bmpipe package into build/pyenv"
  "$py" -m pip install --no-input --progress-bar off --no-build-isolation --no-deps --quiet . >&2
fi

if [[ -z $device ]]; then
  if "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    device=cuda
  else
    gpus=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)
    if ((gpus > 0)); then
      say "nvidia-smi lists $gpus GPU(s), but $py's torch $("$py" -c 'import torch; print(torch.__version__)') has no CUDA: set PYTHON to an interpreter whose torch has CUDA. Skipped."
    else
      say "no GPU on this machine (torch.cuda.is_available() is False, nvidia-smi lists none): the GPU check is skipped. 'scripts/gpu-check.sh --device cpu' runs its parts on the CPU."
    fi
    exit 0
  fi
fi
say "running on $device; report in $out/gpu-check.md"
rc=0
"$py" scripts/gpu_check.py --device "$device" --out "$out" || rc=$?
say "$(( $(date +%s) - start )) s, exit $rc"
if ((rc == 2)); then exit 2; fi
((rc == 0)) || exit 1
