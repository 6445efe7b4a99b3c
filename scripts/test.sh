#!/usr/bin/env bash
# The test command: format check, then for each configuration a configure + build + ctest, then
# an install of the default build and a separate project built against it (tests/consumer).
#
#   CAVS_TEST_CONFIGS   which configurations run, default "cpu default":
#                         cpu      CUDA and NCCL off, in build/cpu
#                         default  everything found (CUDA sources compiled where nvcc exists;
#                                  GPU tests skip without a GPU), in build/default, followed by
#                                  the install into build/install and the consumer check
#   CAVS_JOBS           build and ctest parallelism, default 2
#   CAVS_FUZZ_SECONDS   the fuzz step (scripts/fuzz.sh, last): seconds per libFuzzer target,
#                       default 30; 0 skips it and says so
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

START=$SECONDS
STEP="setup"
CONFIGS="${CAVS_TEST_CONFIGS:-cpu default}"
finish() {
  local rc=$?
  if ((rc == 0)); then
    echo "test.sh: PASSED (configs: $CONFIGS; $(cavs_elapsed "$START"))"
  else
    echo "test.sh: FAILED in step '$STEP' (exit $rc; $(cavs_elapsed "$START"))"
  fi
}
trap finish EXIT

step() {
  STEP="$1"
  echo
  echo "==== $STEP ($(cavs_elapsed "$START"))"
}

for config in $CONFIGS; do
  if [[ "$config" != cpu && "$config" != default ]]; then
    STEP="arguments"
    echo "test.sh: unknown configuration '$config' in CAVS_TEST_CONFIGS (use cpu, default)" >&2
    exit 2
  fi
done

step "setup"
bash scripts/setup.sh

step "format"
# Every tracked C++/CUDA source; untracked work in progress is not checked.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -d '' sources < <(git ls-files -z -- '*.h' '*.cc' '*.cu' '*.cuh')
else  # an exported tree without .git: every source outside the build folders
  mapfile -d '' sources < <(find . -path './build*' -prune -o -type f \( -name '*.h' -o \
    -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) -print0)
fi
if ((${#sources[@]} > 0)); then
  clang-format --dry-run --Werror "${sources[@]}"
fi
echo "format: ${#sources[@]} files clean"

run_ctest() {
  ctest --test-dir "$1" -j "$CAVS_JOBS" --output-on-failure --no-tests=error --timeout 600
}

for config in $CONFIGS; do
  case "$config" in
    cpu)
      step "cpu: configure"
      cavs_configure build/cpu -DCAVS_WITH_CUDA=OFF -DCAVS_WITH_NCCL=OFF
      step "cpu: build"
      cmake --build build/cpu -j "$CAVS_JOBS"
      step "cpu: test"
      run_ctest build/cpu
      ;;
    default)
      step "default: configure"
      cavs_configure_default
      step "default: build"
      cmake --build build/default -j "$CAVS_JOBS"
      step "default: test"
      run_ctest build/default
      step "default: install"
      rm -rf build/install
      cmake --install build/default --prefix "$PWD/build/install" >/dev/null
      echo "installed into build/install"
      step "consumer: find_package(cavs) from build/install"
      consumer_args=(-S tests/consumer -B build/consumer -G Ninja -DCMAKE_BUILD_TYPE=Release
        "-DCMAKE_PREFIX_PATH=$PWD/build/install")
      if command -v ccache >/dev/null; then
        consumer_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
      fi
      cmake "${consumer_args[@]}"
      cmake --build build/consumer -j "$CAVS_JOBS"
      build/consumer/cavs_consumer
      ;;
  esac
done
step "fuzz"
bash scripts/fuzz.sh
STEP="done"
