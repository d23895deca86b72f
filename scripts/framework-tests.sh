#!/usr/bin/env bash
# Checks bmpipe's framework exports (tests/golden/exports/<case>/) with the frameworks' own code:
# megatron-core (0.16.1, and 0.19.2's config validation in its own Python 3.12 venv), DeepSpeed,
# torchtitan and torch.distributed.pipelining on the CPU (gloo), and MindFormers' documented format.
# Installs or updates build/pyenv and build/pyenv-mcore019 first (scripts/pyenv.sh,
# scripts/pyenv-mcore019.sh).
# Extra arguments go to pytest (e.g. -k megatron, -x).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
start=$(date +%s)
scripts/pyenv.sh
scripts/pyenv-mcore019.sh
rc=0
DS_ACCELERATOR=cpu CUDA_VISIBLE_DEVICES= build/pyenv/bin/python -m pytest -q tests/framework_checks \
  --ignore=tests/framework_checks/test_megatron_core_019.py "$@" || rc=$?
# megatron-core 0.19.2 (Python 3.12): its TransformerConfig validation on the Megatron exports.
CUDA_VISIBLE_DEVICES= build/pyenv-mcore019/bin/python -m pytest -q tests/framework_checks/test_megatron_core_019.py \
  "$@" || rc=$?
echo "framework-tests: $(( $(date +%s) - start )) s, pytest exit $rc"
exit $rc
