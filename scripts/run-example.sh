#!/usr/bin/env bash
# Installs what is missing, builds, and runs bmpipe on the built-in example: the MindFormers
# pipeline-balance tool's demo (96-layer model, 16 stages, 16 micro-batches, 56 GB devices),
# planned and proven optimal, reported per stage and per rank. Builds only the command line (not the
# test suite or the benchmarks): a few minutes on 2 cores from a fresh clone.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh --target bmpipe
build/bmpipe plan
