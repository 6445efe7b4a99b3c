#!/usr/bin/env bash
# Fuzzing: builds the libFuzzer targets of fuzz/ with clang in build/fuzz (every library
# instrumented, ASan + UBSan) and runs each for a bounded time from its committed corpus,
# fuzz/corpus/<target>/ (seeds and regression inputs). A crash, a sanitizer report, a leak, an
# input slower than 10 s or one needing more than 2 GiB fails; libFuzzer's reproducer is kept in
# build/fuzz/artifacts/<target>/ (once fixed, it joins the corpus: docs/fuzzing.md). Prints each
# target's executions and coverage. scripts/test.sh runs it as its "fuzz" step.
#
#   CAVS_FUZZ_SECONDS   seconds per target, default 30; 0 skips fuzzing and says so
#   CAVS_FUZZ_TARGETS   the targets, default all: sst_reader text_reader strategy checkpoint
#                       trainer_flags cluster_spec model_profile serve_request
#   CAVS_JOBS           build parallelism, default 2
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

FUZZ_SECONDS="${CAVS_FUZZ_SECONDS:-30}"
ALL_TARGETS="sst_reader text_reader strategy checkpoint trainer_flags cluster_spec model_profile serve_request"
read -r -a TARGETS <<<"${CAVS_FUZZ_TARGETS:-$ALL_TARGETS}"
if [[ ! "$FUZZ_SECONDS" =~ ^[0-9]+$ ]]; then
  echo "fuzz: CAVS_FUZZ_SECONDS='$FUZZ_SECONDS' is not a number of seconds" >&2
  exit 2
fi
if ((FUZZ_SECONDS == 0)); then
  echo "fuzz: SKIPPED (CAVS_FUZZ_SECONDS=0): no fuzz target was built or run"
  exit 0
fi
for target in "${TARGETS[@]}"; do
  if [[ ! -d "fuzz/corpus/$target" ]]; then
    echo "fuzz: unknown target '$target' (no fuzz/corpus/$target)" >&2
    exit 2
  fi
done

# The longest input libFuzzer makes, per target (the seeds may be longer).
declare -A MAX_LEN=([sst_reader]=4096 [text_reader]=4096 [strategy]=2048 [checkpoint]=16384
  [cluster_spec]=2048 [model_profile]=2048
  [trainer_flags]=1024 [serve_request]=4096)

# libFuzzer needs clang and compiler-rt's fuzzer runtime (Debian: clang, libclang-rt-14-dev;
# scripts/setup.sh installs them, as optional packages, so that training never needs them).
mkdir -p build/fuzz
probe=build/fuzz/libfuzzer_probe
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
  clang++ -x c++ -fsanitize=fuzzer,address,undefined - -o "$probe" 2>build/fuzz/probe.log; then
  cat build/fuzz/probe.log >&2 || true
  echo "fuzz: clang cannot build a libFuzzer binary here: install clang and libclang-rt-14-dev" \
    "(scripts/setup.sh tried: see its warnings above), or set CAVS_FUZZ_SECONDS=0 to skip" \
    "fuzzing (the test command then says it was skipped)" >&2
  exit 1
fi
rm -f "$probe" build/fuzz/probe.log

echo "fuzz: configure and build build/fuzz (clang, libFuzzer + ASan + UBSan)"
# -O1 with line tables: quick to build, fast enough to fuzz, stack traces with lines; no NDEBUG,
# so that CAVS_DCHECKs check too.
CC=clang CXX=clang++ cavs_configure build/fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" -DCAVS_BUILD_FUZZERS=ON -DCAVS_BUILD_TESTS=OFF -DCAVS_BUILD_BENCHMARKS=OFF \
  -DCAVS_WITH_CUDA=OFF -DCAVS_WITH_MPI=OFF -DCAVS_WITH_NCCL=OFF >build/fuzz/configure.log ||
  { cat build/fuzz/configure.log; exit 1; }
cmake --build build/fuzz --target cavs_fuzzers -j "$CAVS_JOBS"

# run_target <target>: one libFuzzer run; its exit status in build/fuzz/<target>.rc.
run_target() {
  local target="$1" rc=0
  local work="build/fuzz/corpus/$target"  # what this run finds; the committed corpus is read-only
  local artifacts="build/fuzz/artifacts/$target"
  rm -rf "$work" "$artifacts"
  mkdir -p "$work" "$artifacts"
  "build/fuzz/fuzz/${target}_fuzz" -max_total_time="$FUZZ_SECONDS" -timeout=10 \
    -rss_limit_mb=2048 -max_len="${MAX_LEN[$target]}" -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$work" "fuzz/corpus/$target" >"build/fuzz/$target.log" 2>&1 ||
    rc=$?
  echo "$rc" >"build/fuzz/$target.rc"
}

# CAVS_JOBS targets at a time: each libFuzzer run uses one core.
echo "fuzz: ${#TARGETS[@]} targets, ${FUZZ_SECONDS}s each, $CAVS_JOBS at a time"
for target in "${TARGETS[@]}"; do
  while (($(jobs -rp | wc -l) >= CAVS_JOBS)); do wait -n || true; done
  run_target "$target" &
done
wait

failed=()
for target in "${TARGETS[@]}"; do
  log="build/fuzz/$target.log"
  rc=$(cat "build/fuzz/$target.rc")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  final=$(grep -E '^#[0-9]+[[:space:]]+(DONE|INITED)' "$log" | tail -1 || true)
  cov=$(sed -E -n 's/.* cov: ([0-9]+) .*/\1/p' <<<"$final")
  ft=$(sed -E -n 's/.* ft: ([0-9]+) .*/\1/p' <<<"$final")
  seeds=$(find "fuzz/corpus/$target" -type f | wc -l)
  found=$(find "build/fuzz/corpus/$target" -type f | wc -l)
  if ((rc != 0)); then
    echo "fuzz: $target: FAILED (exit $rc); the log's end:"
    tail -40 "$log" | sed 's/^/    /'
    echo "fuzz: $target: reproducer(s): $(find "build/fuzz/artifacts/$target" -type f | tr '\n' ' ')"
    echo "fuzz: rerun one with build/fuzz/fuzz/${target}_fuzz <file>"
    failed+=("$target")
  else
    echo "fuzz: $target: ${execs:-?} executions in ${FUZZ_SECONDS}s, cov ${cov:-?}," \
      "ft ${ft:-?}, $seeds seeds (+$found new inputs, not kept)"
  fi
done
if ((${#failed[@]} > 0)); then
  echo "fuzz: FAILED: ${failed[*]}"
  exit 1
fi
