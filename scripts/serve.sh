#!/usr/bin/env bash
# Serves the model the main job trained: builds cavs-serve (examples/serve) in the default
# configuration and runs it on the main job's checkpoints (scripts/train.sh leaves them in
# build/main-job/ckpt), passing every argument through (docs/serving.md):
#
#   ./scripts/serve.sh                       # http://127.0.0.1:8080, the newest checkpoint
#   ./scripts/serve.sh --port=9000 --max-batch=64
#   ./scripts/serve.sh --checkpoint=ckpt/ckpt-3.cavs
#
# Build output goes to stderr.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

{
  bash scripts/setup.sh
  cavs_configure_default
} >&2
cmake --build build/default -j "$CAVS_JOBS" --target cavs-serve >&2

args=("$@")
if [[ " $* " != *" --checkpoint"* && " $* " != *" --help "* ]]; then
  if [[ ! -d build/main-job/ckpt ]]; then
    echo "serve.sh: no build/main-job/ckpt: run ./scripts/train.sh first, or give --checkpoint" >&2
    exit 2
  fi
  args+=("--checkpoint=build/main-job/ckpt")
fi
exec build/default/examples/serve/cavs-serve "${args[@]}"
