#!/usr/bin/env bash
# Checks bmpipe's framework exports (tests/golden/exports/<case>/) with the frameworks' own code:
# megatron-core, DeepSpeed, torchtitan and torch.distributed.pipelining on the CPU (gloo), and
# MindFormers' documented format. Installs or updates build/pyenv first (scripts/pyenv.sh).
# Extra arguments go to pytest (e.g. -k megatron, -x).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
start=$(date +%s)
scripts/pyenv.sh
rc=0
DS_ACCELERATOR=cpu CUDA_VISIBLE_DEVICES= build/pyenv/bin/python -m pytest -q tests/framework_checks "$@" || rc=$?
echo "framework-tests: $(( $(date +%s) - start )) s, pytest exit $rc"
exit $rc
