#!/usr/bin/env bash
# Runs on the lent GPU machine from the repository root, over what scripts/gpu_pack.sh packed
# into .gpucarry/: the CUDA tests (with every generated kernel's shape verified; the engine's
# again with its GEMMs through cublasSgemm alone, cuBLASLt autotuned and the small-GEMM kernel
# wherever it applies), SST training, compute-sanitizer memcheck and racecheck on the CUDA op
# suite, the Tree-LSTM benchmark (the defaults: generated element-wise kernels, the small GEMM
# where faster, cuBLASLt elsewhere), its batch-256 rows for every element-wise and GEMM path in
# one process (BM_TreeLstmPaths, random interleaving), and the LSTM-vs-cuDNN benchmark (the
# defaults, cuBLASLt autotuned, cublasSgemm). One log per group under $OUT (default:
# .gpucarry/out; 6 files, the device tool returns at most 8); a part that fails is reported and
# the rest still run. The kernel paths are chosen with the binaries' CAVS_* environment override
# (ops/kernel_options.h), which each binary reads once at start-up.
#
#   bash .gpucarry/run.sh [combined] [profile] [segment] [verify] [graphs] [rowoffset] [tests] [bench] [bench_ab] [all]
#
# `combined` (about 8 minutes expected) is verify's, graphs' and rowoffset's correctness parts
# at once (the CUDA suites with the defaults, with every batch captured and with programs at row
# offsets; memcheck and racecheck; SST launch by launch, as graphs and at row offsets, whose
# SUMMARY lines must be equal), then BM_TreeLstmGraphs' pipelined rows with row offsets off and
# on (one process) and the LSTM-vs-cuDNN benchmark in three processes.
#
# `graphs` (about 5 minutes on an H200) checks and times CUDA graphs (KernelOptions::cuda.graphs):
# the graph tests, the engine and trainer suites with every batch captured (CAVS_CUDA_GRAPHS=1),
# SST training launch by launch and as graphs (the SUMMARY lines must be equal), memcheck of the
# graph tests; then BM_TreeLstmGraphs (off against on, one process), the BM_TreeLstm rows
# against the run-7 table and the LSTM-vs-cuDNN benchmark in two more processes.
#
# `rowoffset` (not yet run; about 4 minutes expected) checks element-wise programs at a row
# offset (KernelOptions::cuda.ew_row_offset, off until this passes): the op tests that compare
# it with the CPU (both kernel paths) and memcheck of them, the engine and trainer suites with
# every program run at its rows (CAVS_CUDA_EW_ROW_OFFSET=1), SST training without and with (the
# SUMMARY lines must be equal), then the BM_TreeLstm rows without and with, in two processes.
#
# `profile` (about 4 minutes expected) times every kernel of the pipelined training and inference
# batches of 256 launch by launch with Nsight Compute (one metric, the kernel's duration; caches
# and clocks as found), 1,000 kernels each past the warm-up, to $OUT/ncu_*.csv; then the
# LSTM-vs-cuDNN benchmark in three processes.
#
# `segment` (about 3 minutes expected) checks the segment reductions (their tests and memcheck of
# them, the engine and CUDA trainer suites, SST training), times the kernels of the pipelined
# training batch of 256 with Nsight Compute as `profile` does, and runs BM_TreeLstmGraphs'
# pipelined training rows with row offsets.
#
# `verify` (about 8 minutes on an H200) runs every correctness part at once (16 host cores), then
# the default benchmarks, the folded rows and BM_TreeLstmPaths 5.
#
# Several modes run in one call, in the order above whatever order they are given in (each
# part still under its own timeout; keep a call's total under the tool's 10 minutes).
#
# Each of `tests`, `bench` and `bench_ab` (the A/B rows) stays under the tool's 10 minutes per
# call (every part has a timeout); on an H100 they took about 1.5, 3 and 2 minutes: if the
# device may be withdrawn, run `tests`, then `bench`, then `bench_ab`.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
[[ -d bin ]] || tar -xzf pack.tgz
export LD_LIBRARY_PATH="$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# cuDNN (the LSTM baseline) where the image keeps it outside the toolkit (a Python wheel, say).
if ! ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9' && [[ ! -e /usr/local/cuda/lib64/libcudnn.so.9 ]]; then
  cudnn=$(find / -name 'libcudnn.so.9' -not -path '/proc/*' 2>/dev/null | head -1)
  [[ -n "$cudnn" ]] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$cudnn")"
fi
export PATH="/usr/local/cuda/bin:$PATH"  # compute-sanitizer
bin="$PWD/bin"
# The benchmarks' real data where it was packed (their generated data otherwise).
[[ -f data/sst_train.txt ]] && export CAVS_BENCH_SST="$PWD/data/sst_train.txt"
[[ -f data/ptb.txt ]] && export CAVS_BENCH_PTB="$PWD/data/ptb.txt"
summary="$OUT/summary.txt"
: >"$summary"
part() {  # part <log> <name> <seconds> <command...>: runs it, appending to $OUT/<log>.log
  local log="$OUT/$1.log" name="$2" secs="$3"
  shift 3
  local t0=$SECONDS rc=0
  echo "==== $name" >>"$log"
  timeout "$secs" stdbuf -oL "$@" >>"$log" 2>&1 || rc=$?
  echo "$name: exit $rc, $((SECONDS - t0)) s" | tee -a "$summary"
}
sanitize() {  # sanitize <memcheck|racecheck> <name> <gtest filter>: the CUDA op suite under it
  part memcheck "$2" 150 compute-sanitizer --tool "$1" --error-exitcode 1 "$bin/ops_cuda_test" \
    --gtest_brief=1 --gtest_filter="$3"
}

vpart() {  # vpart <name> <seconds> <command...>: in the background, logged to $vdir/<name>
  local name="$1" secs="$2"
  shift 2
  (
    t0=$SECONDS
    rc=0
    timeout "$secs" "$@" >"$vdir/$name.log" 2>&1 || rc=$?
    echo "$name: exit $rc, $((SECONDS - t0)) s" >"$vdir/$name.rc"
  ) &
}
vjoin() {  # waits for every vpart, then appends their logs to tests.log
  wait
  for f in "$vdir"/*.rc; do
    n=$(basename "$f" .rc)
    { echo "==== $n"; cat "$vdir/$n.log"; } >>"$OUT/tests.log"
    tee -a "$summary" <"$f"
  done
  rm -rf "$vdir"
}

# SST on the GPU, 3 epochs (bench/RESULTS.md (b): the CPU's dev roots 45.1, 47.1, 48.4%).
sst_flags=(--device=cuda --train=data/sst_train.txt --dev=data/sst_dev.txt --epochs=3
  --hidden=150 --embed=300 --optimizer=adagrad --lr=0.05 --weight-decay=1e-5 --dropout=0.5)
same_summaries() {  # the SST runs' results in tests.log, their speeds left out: one line (count
  # 2) where two runs are equal
  grep -h '^SUMMARY' "$OUT/tests.log" | sed -E 's/"(trees_per_sec|seconds)":[^,}]*,?//g' |
    sort | uniq -c | tee -a "$summary"
}

modes=" ${*:-all} "
want() {  # want <mode>...: whether any of them was asked for (all asks for the first four)
  local m
  for m in "$@"; do [[ "$modes" == *" $m "* ]] && return 0; done
  return 1
}
# ncu_batch <name> <BM_TreeLstmGraphs row>: Nsight Compute's duration of 1,000 kernels past the
# warm-up of that row launch by launch with row offsets, to $OUT/ncu_<name>.csv.
ncu_batch() {
  part profile "ncu_$1" 150 ncu --csv --metrics gpu__time_duration.sum --clock-control none \
    --cache-control none --launch-skip 6000 --launch-count 1000 --log-file "$OUT/ncu_$1.csv" \
    "$bin/tree_lstm_gpu_benchmark" --benchmark_filter="^BM_TreeLstmGraphs/0/$2/1/"
}
# graph_rows <seconds> <filter>: BM_TreeLstmGraphs rows in one process, their GRAPHS lines.
graph_rows() {
  part bench_graphs tree_gpu_bench_graphs "$1" "$bin/tree_lstm_gpu_benchmark" \
    --benchmark_counters_tabular=true --benchmark_filter="$2" \
    --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
  grep -h 'GRAPHS ' "$OUT/bench_graphs.log" | tee -a "$summary"
}
lstm_three() {  # the LSTM-vs-cuDNN benchmark in three processes, their RATIO lines
  for i in 1 2 3; do
    part bench_lstm "lstm_gpu_bench_$i" 45 "$bin/lstm_gpu_benchmark" --benchmark_counters_tabular=true
  done
  grep -h 'RATIO' "$OUT/bench_lstm.log" | tee -a "$summary"
}

nvidia-smi -L | tee -a "$summary"
if want combined; then
  export CAVS_VERIFY_EW_SHAPES=1
  vdir=$(mktemp -d)
  vpart ops_cuda_test 240 "$bin/ops_cuda_test" --gtest_brief=1
  vpart equivalence 150 "$bin/ops_kernels_equivalence_test" --gtest_brief=1
  vpart engine 200 "$bin/scheduler_engine_test" --gtest_brief=1
  vpart engine_sgemm 200 env CAVS_CUBLASLT=0 CAVS_SMALL_GEMM=0 "$bin/scheduler_engine_test" \
    --gtest_brief=1
  vpart engine_all_graphs 200 env CAVS_CUDA_GRAPHS=1 "$bin/scheduler_engine_test" --gtest_brief=1
  vpart engine_offsets 200 env CAVS_CUDA_EW_ROW_OFFSET=1 "$bin/scheduler_engine_test" \
    --gtest_brief=1
  vpart trainer 200 "$bin/trainer_test" --gtest_brief=1 --gtest_filter='*Cuda*'
  vpart trainer_graphs 200 env CAVS_CUDA_GRAPHS=1 "$bin/trainer_test" --gtest_brief=1 \
    --gtest_filter='*Cuda*'
  vpart trainer_offsets 200 env CAVS_CUDA_EW_ROW_OFFSET=1 "$bin/trainer_test" --gtest_brief=1 \
    --gtest_filter='*Cuda*'
  if [[ -f data/sst_train.txt && -f data/sst_dev.txt ]]; then
    vpart sst_plain 240 "$bin/cavs-train" "${sst_flags[@]}" --cuda-graphs=0
    vpart sst_graphs 240 "$bin/cavs-train" "${sst_flags[@]}" --cuda-graphs=1
    vpart sst_offsets 240 env CAVS_CUDA_EW_ROW_OFFSET=1 "$bin/cavs-train" "${sst_flags[@]}"
  fi
  vpart memcheck 240 compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/ops_cuda_test" \
    --gtest_brief=1 --gtest_filter='CudaFused*:CudaKernels*:*CublasLt*:CudaGraph*:-*AFailedCapture*'
  vpart racecheck 240 compute-sanitizer --tool racecheck --error-exitcode 1 \
    "$bin/ops_cuda_test" --gtest_brief=1 \
    --gtest_filter='CudaKernels*SmallGemm*:CudaFused*:CudaKernels*Column*:CudaKernels*Softmax*'
  vjoin
  unset CAVS_VERIFY_EW_SHAPES
  same_summaries
  graph_rows 200 '^BM_TreeLstmGraphs/[01]/[2-5]/'
  lstm_three
fi
if want profile; then
  ncu_batch train 2
  ncu_batch infer 3
  lstm_three
fi
if want segment; then
  vdir=$(mktemp -d)
  vpart segment_ops 150 "$bin/ops_cuda_test" --gtest_brief=1 --gtest_filter='*Segment*'
  vpart segment_memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$bin/ops_cuda_test" --gtest_brief=1 --gtest_filter='*Segment*'
  vpart engine 150 "$bin/scheduler_engine_test" --gtest_brief=1
  vpart trainer 150 "$bin/trainer_test" --gtest_brief=1 --gtest_filter='*Cuda*'
  if [[ -f data/sst_train.txt && -f data/sst_dev.txt ]]; then
    vpart sst 150 "$bin/cavs-train" "${sst_flags[@]}"
  fi
  vjoin
  same_summaries
  ncu_batch train 2
  graph_rows 150 '^BM_TreeLstmGraphs/[01]/[245]/1/'
fi
if want verify; then
  # Every check in one call of about 6 minutes. The correctness parts run at once
  # (the machine has 16 host cores; NVRTC's first compiles dominate a fresh machine), each with
  # its own log, joined into tests.log; then the benchmarks one after another on an idle GPU.
  export CAVS_VERIFY_EW_SHAPES=1
  vdir=$(mktemp -d)
  vpart ops_cuda_test 200 "$bin/ops_cuda_test" --gtest_brief=1
  vpart equivalence 120 "$bin/ops_kernels_equivalence_test" --gtest_brief=1
  vpart engine 150 "$bin/scheduler_engine_test" --gtest_brief=1
  vpart engine_sgemm 150 env CAVS_CUBLASLT=0 CAVS_SMALL_GEMM=0 "$bin/scheduler_engine_test" \
    --gtest_brief=1
  vpart engine_small_gemm 150 env CAVS_SMALL_GEMM=1 "$bin/scheduler_engine_test" --gtest_brief=1
  vpart trainer 150 "$bin/trainer_test" --gtest_brief=1 --gtest_filter='*Cuda*'
  if [[ -f data/sst_train.txt && -f data/sst_dev.txt ]]; then
    vpart trainer_sst 200 "$bin/cavs-train" "${sst_flags[@]}"
  fi
  vpart memcheck 200 compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/ops_cuda_test" \
    --gtest_brief=1 --gtest_filter='CudaFused*:CudaKernels*:*CublasLt*'
  vpart racecheck 200 compute-sanitizer --tool racecheck --error-exitcode 1 \
    "$bin/ops_cuda_test" --gtest_brief=1 \
    --gtest_filter='CudaKernels*SmallGemm*:CudaFused*:CudaKernels*Column*:CudaKernels*Softmax*'
  vjoin
  unset CAVS_VERIFY_EW_SHAPES
  tabular=--benchmark_counters_tabular=true
  # 300 s: BM_GemmCall and BM_LaunchFloor wait for a 3 ms delay kernel every iteration (about
  # 100 s together on an H200), then the engine rows.
  part bench_tree tree_gpu_bench 300 "$bin/tree_lstm_gpu_benchmark" "$tabular" \
    --benchmark_filter='^(BM_DeviceCeilings|BM_LaunchFloor|BM_GemmCall|BM_FusedRound|BM_TreeLstm/)'
  CAVS_BENCH_FOLDED=1 part bench_tree tree_gpu_bench_folded 40 "$bin/tree_lstm_gpu_benchmark" \
    "$tabular" --benchmark_filter='^BM_TreeLstm/infer_pipelined/256'
  part bench_paths paths_defaults 60 "$bin/tree_lstm_gpu_benchmark" "$tabular" \
    --benchmark_filter='^BM_TreeLstmPaths/5/' --benchmark_enable_random_interleaving=true \
    --benchmark_report_aggregates_only=true
  part bench_lstm lstm_gpu_bench 40 "$bin/lstm_gpu_benchmark" "$tabular"
fi
if want graphs; then
  vdir=$(mktemp -d)
  vpart graph_ops 150 "$bin/ops_cuda_test" --gtest_brief=1 --gtest_filter='CudaGraph*'
  vpart graph_engine 150 "$bin/scheduler_engine_test" --gtest_brief=1 \
    --gtest_filter='*CudaGraphs*'
  vpart engine_all_graphs 150 env CAVS_CUDA_GRAPHS=1 "$bin/scheduler_engine_test" --gtest_brief=1
  vpart trainer_graphs 150 env CAVS_CUDA_GRAPHS=1 "$bin/trainer_test" --gtest_brief=1 \
    --gtest_filter='*Cuda*'
  if [[ -f data/sst_train.txt && -f data/sst_dev.txt ]]; then
    vpart sst_plain 150 "$bin/cavs-train" "${sst_flags[@]}"
    vpart sst_graphs 150 "$bin/cavs-train" "${sst_flags[@]}" --cuda-graphs=1
  fi
  vpart graph_memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$bin/ops_cuda_test" --gtest_brief=1 --gtest_filter='CudaGraph*:-*AFailedCapture*'
  vjoin
  same_summaries
  tabular=--benchmark_counters_tabular=true
  part bench_graphs tree_gpu_bench_graphs 150 "$bin/tree_lstm_gpu_benchmark" "$tabular" \
    --benchmark_filter='^BM_TreeLstmGraphs' --benchmark_enable_random_interleaving=true \
    --benchmark_report_aggregates_only=true
  grep -h '^GRAPHS' "$OUT/bench_graphs.log" | tee -a "$summary"
  part bench_tree tree_gpu_bench_engine 120 "$bin/tree_lstm_gpu_benchmark" "$tabular" \
    --benchmark_filter='^BM_TreeLstm/'
  grep -h '^TARGET' "$OUT/bench_tree.log" | tee -a "$summary"
  part bench_lstm lstm_gpu_bench_2 40 "$bin/lstm_gpu_benchmark" "$tabular"
  part bench_lstm lstm_gpu_bench_3 40 "$bin/lstm_gpu_benchmark" "$tabular"
fi
if want rowoffset; then
  vdir=$(mktemp -d)
  vpart offset_ops 150 "$bin/ops_cuda_test" --gtest_brief=1 \
    --gtest_filter='CudaKernels*Elementwise*'
  vpart offset_engine 150 env CAVS_CUDA_EW_ROW_OFFSET=1 CAVS_VERIFY_EW_SHAPES=1 \
    "$bin/scheduler_engine_test" --gtest_brief=1
  vpart offset_trainer 150 env CAVS_CUDA_EW_ROW_OFFSET=1 "$bin/trainer_test" --gtest_brief=1 \
    --gtest_filter='*Cuda*'
  if [[ -f data/sst_train.txt && -f data/sst_dev.txt ]]; then
    vpart sst_copies 150 "$bin/cavs-train" "${sst_flags[@]}"
    vpart sst_offsets 150 env CAVS_CUDA_EW_ROW_OFFSET=1 "$bin/cavs-train" "${sst_flags[@]}"
  fi
  vpart offset_memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$bin/ops_cuda_test" --gtest_brief=1 --gtest_filter='CudaKernels*Elementwise*'
  vjoin
  same_summaries
  tabular=--benchmark_counters_tabular=true
  part bench_offset tree_gpu_bench_copies 120 "$bin/tree_lstm_gpu_benchmark" "$tabular" \
    --benchmark_filter='^BM_TreeLstm/'
  CAVS_CUDA_EW_ROW_OFFSET=1 part bench_offset tree_gpu_bench_offsets 120 \
    "$bin/tree_lstm_gpu_benchmark" "$tabular" --benchmark_filter='^BM_TreeLstm/'
fi
if want tests all; then
  export CAVS_VERIFY_EW_SHAPES=1
  # 240 s: on a fresh machine the generated kernels are compiled (NVRTC) before the disk cache
  # has them; that took 58 s and over 90 s on an H100, 3 s once cached.
  part tests ops_cuda_test 240 "$bin/ops_cuda_test" --gtest_brief=1
  part tests equivalence 60 "$bin/ops_kernels_equivalence_test" --gtest_brief=1
  part tests engine 120 "$bin/scheduler_engine_test" --gtest_brief=1
  CAVS_CUBLASLT=0 CAVS_SMALL_GEMM=0 part tests engine_sgemm 90 "$bin/scheduler_engine_test" \
    --gtest_brief=1
  CAVS_GEMM_AUTOTUNE=1 part tests engine_autotuned 120 \
    "$bin/scheduler_engine_test" --gtest_brief=1
  CAVS_SMALL_GEMM=1 part tests engine_small_gemm 90 "$bin/scheduler_engine_test" --gtest_brief=1
  part tests trainer 60 "$bin/trainer_test" --gtest_brief=1 --gtest_filter='*Cuda*'
  if [[ -f data/sst_train.txt && -f data/sst_dev.txt ]]; then
    part tests trainer_sst 120 "$bin/cavs-train" "${sst_flags[@]}"
  fi
  sanitize memcheck memcheck 'CudaFused*:CudaKernels*:*CublasLt*'
  sanitize racecheck racecheck 'CudaKernels*SmallGemm*:CudaFused*:CudaKernels*Column*:CudaKernels*Softmax*'
  unset CAVS_VERIFY_EW_SHAPES
fi
tabular=--benchmark_counters_tabular=true
if want bench all; then
  part bench_tree tree_gpu_bench 240 "$bin/tree_lstm_gpu_benchmark" "$tabular" \
    --benchmark_filter='^(BM_DeviceCeilings|BM_LaunchFloor|BM_GemmCall|BM_FusedRound|BM_TreeLstm/)'
  CAVS_BENCH_FOLDED=1 part bench_tree tree_gpu_bench_folded 90 "$bin/tree_lstm_gpu_benchmark" \
    "$tabular" --benchmark_filter='^BM_TreeLstm/(infer|infer_pipelined)/256'
  part bench_lstm lstm_gpu_bench 120 "$bin/lstm_gpu_benchmark" "$tabular"
  CAVS_GEMM_AUTOTUNE=1 part bench_lstm lstm_gpu_bench_autotuned 90 \
    "$bin/lstm_gpu_benchmark" "$tabular"
  CAVS_CUBLASLT=0 part bench_lstm lstm_gpu_bench_sgemm 90 "$bin/lstm_gpu_benchmark" "$tabular"
  CAVS_SMALL_GEMM=1 part bench_lstm lstm_gpu_bench_small_gemm 90 "$bin/lstm_gpu_benchmark" \
    "$tabular"
fi
if want bench_ab all; then
  # Every element-wise and GEMM path at batch 256, overlapped and pipelined, in one process
  # with the repetitions interleaved at random (BM_TreeLstmPaths): medians over 3.
  part bench_paths tree_gpu_bench_paths 420 "$bin/tree_lstm_gpu_benchmark" "$tabular" \
    --benchmark_filter=BM_TreeLstmPaths --benchmark_enable_random_interleaving=true \
    --benchmark_report_aggregates_only=true
fi
cat "$summary"
