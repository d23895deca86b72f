#!/usr/bin/env bash
# Installs what is missing, builds, and runs bmpipe on the built-in example: the MindFormers
# pipeline-balance tool's demo (96-layer model, 16 stages, 16 micro-batches, 56 GB devices),
# planned and proven optimal, reported per stage and per rank.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
build/bmpipe plan
