#!/usr/bin/env bash
# The test command: format check, then for each configuration a configure + build + ctest, then
# an install of the default build and a separate project built against it (tests/consumer).
#
#   CAVS_TEST_CONFIGS   which configurations run, default "cpu default":
#                         cpu      CUDA and NCCL off, in build/cpu; then the CPU kernel and
#                                  engine suites again under other OpenBLAS kernels
#                                  (OPENBLAS_CORETYPE) and with the packed GEMM off
#                         default  everything found (CUDA sources compiled where nvcc exists;
#                                  GPU tests skip without a GPU), in build/default, followed by
#                                  the install into build/install and the consumer check
#   CAVS_JOBS           build and ctest parallelism, default 2
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

# run_ctest <build dir> [ctest args...]
run_ctest() {
  local dir="$1"
  shift
  ctest --test-dir "$dir" -j "$CAVS_JOBS" --output-on-failure --no-tests=error --timeout 600 "$@"
}

# The suites whose results depend on the GEMM kernel: the CPU kernels (threads vs one, the CUDA
# small GEMM emulated against the CPU's) and the engine against the reference executor.
KERNEL_SUITES='^(ops_cpu_kernels_test|ops_small_gemm_test|scheduler_engine_test)[.]'

# has_cpu_flags <flag...>: whether /proc/cpuinfo lists every flag.
has_cpu_flags() {
  local flags flag
  flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
  for flag in "$@"; do
    [[ "$flags" == *" $flag "* ]] || return 1
  done
}

# The kernel suites under other OpenBLAS kernels than this CPU's own and with the packed GEMM
# off, so that a tolerance that holds only for one kernel's summation order fails here rather
# than on a user's machine: Haswell's with a 512 KB L2 (AVX2; what AMD Zen machines are set up
# with), Nehalem's (SSE only, other blocking), and CAVS_PACKED_GEMM=0 (OpenBLAS for every GEMM,
# the path of CPUs without AVX-512).
portability_runs() {
  if [[ "$(uname -m)" != x86_64 ]]; then
    echo "portability: not x86-64; OPENBLAS_CORETYPE names x86 kernels, skipped"
    return
  fi
  if has_cpu_flags avx2 fma; then
    step "cpu: kernel suites, OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=512"
    OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=512 run_ctest build/cpu -R "$KERNEL_SUITES"
  else
    echo "portability: this CPU has no AVX2/FMA; Haswell kernels skipped"
  fi
  step "cpu: kernel suites, OPENBLAS_CORETYPE=Nehalem"
  OPENBLAS_CORETYPE=Nehalem run_ctest build/cpu -R "$KERNEL_SUITES"
  step "cpu: kernel suites, CAVS_PACKED_GEMM=0"
  CAVS_PACKED_GEMM=0 run_ctest build/cpu -R "$KERNEL_SUITES"
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
      portability_runs
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
STEP="done"
