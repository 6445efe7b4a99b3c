#!/usr/bin/env bash
# The main job: builds the trainer (target cavs-train, defined in examples/) in the default
# configuration and runs it, passing every argument through:
#
#   ./scripts/train.sh --help
#   ./scripts/train.sh <trainer flags...>
#
# Build output goes to stderr so that stdout carries only what the trainer prints. Unless the
# arguments name a --checkpoint-dir, the run writes its checkpoints to build/main-job/ckpt
# (emptied first, unless --resume is given), which ./scripts/serve.sh serves (docs/serving.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

{
  bash scripts/setup.sh
  cavs_configure_default
} >&2

if ! ninja -C build/default -t targets all 2>/dev/null | grep -q '^cavs-train:'; then
  echo "train.sh: this checkout has no 'cavs-train' target yet: examples/CMakeLists.txt must" \
    "define it (see the status table in README.md). Nothing was run." >&2
  exit 1
fi
cmake --build build/default -j "$CAVS_JOBS" --target cavs-train >&2

trainer=build/default/examples/cavs-train
if [[ ! -x "$trainer" ]]; then
  # The examples folder may place its binaries elsewhere; take the one the build produced.
  trainer="$(find build/default -type f -name cavs-train -perm -u+x -print -quit)"
fi
if [[ -z "$trainer" || ! -x "$trainer" ]]; then
  echo "train.sh: cavs-train was built but its binary was not found under build/default" >&2
  exit 1
fi
args=("$@")
own_dir=1
for arg in "$@"; do
  case "$arg" in
  --checkpoint-dir | --checkpoint-dir=* | --checkpoint_dir | --checkpoint_dir=* | --help | -h) own_dir=0 ;;
  esac
done
if ((own_dir)); then
  main_ckpt=build/main-job/ckpt
  if [[ " $* " != *" --resume "* ]]; then
    rm -rf "$main_ckpt"
  fi
  args+=("--checkpoint-dir=$main_ckpt")
fi
exec "$trainer" "${args[@]}"
