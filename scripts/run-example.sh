#!/usr/bin/env bash
# Installs what is missing, builds, and runs bmpipe on the bundled example: the MindFormers
# pipeline-balance tool's demo (96-layer model, 16 stages, 16 micro-batches) with that tool's
# own plan, simulated exactly and reported per stage and per rank.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
build/bmpipe simulate --problem examples/mindformers-demo/problem.yaml \
  --plan examples/mindformers-demo/tool-plan.json
