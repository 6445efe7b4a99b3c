#!/usr/bin/env bash
# The test command: format check, then for each configuration a configure + build + ctest, then
# an install of the default build and a separate project built against it (tests/consumer).
#
#   CAVS_TEST_CONFIGS   which configurations run, default "asan tsan default":
#                         cpu      CUDA and NCCL off, Release, in build/cpu: every test, then
#                                  the portability runs below
#                         asan     CUDA and NCCL off with AddressSanitizer, LeakSanitizer and
#                                  UndefinedBehaviorSanitizer (-O1), in build/asan: every test
#                                  (the CPU-only build of the default run)
#                         tsan     CUDA and NCCL off with ThreadSanitizer (-O1), in build/tsan:
#                                  the suites with threads (pool, plan queue, engine, trainer,
#                                  synchronizer, MPI)
#                         default  everything found (CUDA sources compiled where nvcc exists;
#                                  GPU tests skip without a GPU), Release, in build/default: every
#                                  test, the portability runs (the CPU kernel and engine suites
#                                  again under other OpenBLAS kernels, OPENBLAS_CORETYPE, and with
#                                  the packed GEMM off), the install into build/install and the
#                                  consumer check (a separate project: tests/consumer, an
#                                  example trained on it)
#                       The CPU-only Release build (cpu) repeats what asan and default cover,
#                       so it is left out by default to keep CI's time; name it to run it.
#   CAVS_JOBS           build and ctest parallelism, default 2
#   CAVS_FUZZ_SECONDS   the fuzz step (scripts/fuzz.sh, last): seconds per libFuzzer target,
#                       default 30; 0 skips it and says so
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

START=$SECONDS
STEP="setup"
CONFIGS="${CAVS_TEST_CONFIGS:-asan tsan default}"
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
  if [[ "$config" != cpu && "$config" != asan && "$config" != tsan && "$config" != default ]]; then
    STEP="arguments"
    echo "test.sh: unknown configuration '$config' in CAVS_TEST_CONFIGS" \
      "(use cpu, asan, tsan, default)" >&2
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
# with), Nehalem's (SSE only, other blocking), and CAVS_PACKED_GEMM=0 (OpenBLAS for every GEMM).
# On a CPU with AVX-512F, also what a CPU without it runs (an AMD Zen: Haswell's OpenBLAS, the
# packed GEMM's AVX2 kernel for batch invariance alone, CAVS_PACKED_GEMM_AVX2=1), with the
# serving suite, whose bit-for-bit checks across batches fail on that path without the kernel.
# portability_runs <configuration>: in build/<configuration>.
portability_runs() {
  local config="$1"
  if [[ "$(uname -m)" != x86_64 ]]; then
    echo "portability: not x86-64; OPENBLAS_CORETYPE names x86 kernels, skipped"
    return
  fi
  if has_cpu_flags avx2 fma; then
    step "$config: kernel suites, OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=512"
    OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=512 run_ctest "build/$config" -R "$KERNEL_SUITES"
    if has_cpu_flags avx512f; then
      step "$config: kernel and serving suites as a CPU without AVX-512 (CAVS_PACKED_GEMM_AVX2=1)"
      CAVS_PACKED_GEMM_AVX2=1 OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=512 \
        run_ctest "build/$config" -R "$KERNEL_SUITES|^serve_test[.]"
    fi
  else
    echo "portability: this CPU has no AVX2/FMA; Haswell kernels skipped"
  fi
  step "$config: kernel suites, OPENBLAS_CORETYPE=Nehalem"
  OPENBLAS_CORETYPE=Nehalem run_ctest "build/$config" -R "$KERNEL_SUITES"
  step "$config: kernel suites, CAVS_PACKED_GEMM=0"
  CAVS_PACKED_GEMM=0 run_ctest "build/$config" -R "$KERNEL_SUITES"
}

# The sanitizer builds: the cpu configuration at -O1 with line tables, benchmarks off.
SANITIZER_ARGS=(-DCAVS_WITH_CUDA=OFF -DCAVS_WITH_NCCL=OFF -DCAVS_BUILD_BENCHMARKS=OFF
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1")
SUPPRESSIONS="$PWD/scripts/sanitizers"

asan_tests() {
  export UBSAN_OPTIONS=print_stacktrace=1
  # intercept_tls_get_addr=0: GCC 12's runtime (up to GCC 13 and LLVM 16) takes a dynamic TLS
  # block whose address is 16 mod 4096 for one with glibc 2.19's header and records the two
  # words before it as the block's start and size. Since glibc 2.25 there is no such header, so
  # when a block lands there by chance, LeakSanitizer's tracer scans a garbage range at exit and
  # dies ("Tracer caught signal 11 ... LeakSanitizer has encountered a fatal error") after every
  # test passed: a rare flake, most likely in the MPI suites, whose Open MPI components are
  # dlopen'ed with TLS of their own (google/sanitizers#1322). The cost: dynamic TLS is not
  # scanned for roots, so a block reachable only from there would be reported as a leak.
  export LSAN_OPTIONS="suppressions=$SUPPRESSIONS/lsan.supp intercept_tls_get_addr=0"
  # ops_ew_emulation_test compiles generated CUDA sources with the host compiler and runs them as
  # shared objects built without the sanitizers: 75 s under ASan that check only the harness.
  # The Release configurations run it.
  step "asan: test (all but MPI)"
  run_ctest build/asan -LE mpi -E '^ops_ew_emulation_test[.]'

  # Open MPI's own leaks at MPI_Finalize (lsan.supp) are attributed to its libraries only with
  # full stack unwinding: the fast unwinder stops at the first frame of code built without frame
  # pointers.
  # Tests labelled `cluster` (an emulated cluster of network namespaces: minutes of cavs-train
  # even in Release) run in the Release configurations only, to keep CI's time.
  step "asan: test (MPI, distributed)"
  ASAN_OPTIONS=fast_unwind_on_malloc=0 run_ctest build/asan -L mpi -LE cluster -R '^distributed_'
  # Full unwinding makes the trainer's allocations 20x slower (a 1 s test takes 20 s), so the
  # trainer under mpirun runs without the leak check: memory errors and undefined behaviour
  # still fail it, and the same code is leak-checked by trainer_test in one process.
  step "asan: test (MPI, trainer; no leak check)"
  ASAN_OPTIONS=detect_leaks=0 run_ctest build/asan -L mpi -LE cluster -R '^trainer_'
  unset UBSAN_OPTIONS LSAN_OPTIONS
}

# The code with threads of its own: the CPU pool (under every kernel of ops_cpu_kernels_test),
# the plan queue, the trainer planning ahead (in one process and under mpirun), the
# synchronizer polling its nonblocking operations (in one process and under mpirun) and
# cavs-serve's server, its batcher and its HTTP workers (with the reports of Debian's
# uninstrumented libcpp-httplib.so about its own buffers suppressed: tsan.supp says why). The engine
# suite adds no thread of its own (the pool's kernels are ops_cpu_kernels_test's) and the rest of
# trainer_test none beyond the planning-ahead test: left to the other configurations, they would
# double the build and the run.
TSAN_TARGETS=(ops_cpu_kernels_test scheduler_plan_queue_test trainer_test distributed_test
  distributed_mpi_test trainer_mpi_test serve_test cavs-serve)
TSAN_TESTS='^(ops_cpu_kernels_test|scheduler_plan_queue_test|distributed_test|serve_test)[.]'
TSAN_TESTS+='|^trainer_test[.]TrainerTest[.]PlanningAhead|^(distributed_mpi_np|trainer_mpi_np)[0-9]+$'

tsan_tests() {
  step "tsan: test"
  TSAN_OPTIONS="suppressions=$SUPPRESSIONS/tsan.supp halt_on_error=1 second_deadlock_stack=1" \
    run_ctest build/tsan -R "$TSAN_TESTS"
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
      portability_runs cpu
      ;;
    asan)
      step "asan: configure"
      cavs_configure build/asan "${SANITIZER_ARGS[@]}" -DCAVS_SANITIZE=address,undefined
      step "asan: build"
      cmake --build build/asan -j "$CAVS_JOBS"
      asan_tests
      ;;
    tsan)
      step "tsan: configure"
      cavs_configure build/tsan "${SANITIZER_ARGS[@]}" -DCAVS_SANITIZE=thread
      step "tsan: build"
      cmake --build build/tsan -j "$CAVS_JOBS" --target "${TSAN_TARGETS[@]}"
      tsan_tests
      ;;
    default)
      step "default: configure"
      cavs_configure_default
      step "default: build"
      cmake --build build/default -j "$CAVS_JOBS"
      step "default: test"
      run_ctest build/default
      portability_runs default
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
      # The chain-graph check and examples/tree_lstm_sentiment.cc trained on the installed data.
      ctest --test-dir build/consumer --output-on-failure --no-tests=error --timeout 600
      ;;
  esac
done
step "fuzz"
bash scripts/fuzz.sh
STEP="done"
