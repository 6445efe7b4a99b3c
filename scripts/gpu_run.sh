#!/usr/bin/env bash
# Runs on the lent GPU machine from the repository root, over what scripts/gpu_pack.sh packed
# into .gpucarry/: the CUDA tests (with every generated kernel's shape verified), compute-
# sanitizer memcheck on the CUDA op suite, the Tree-LSTM benchmark with the generated element-
# wise kernels, with the interpreter (CAVS_CUDA_FUSED=0, the overlapped rows) and with the
# GEMMs through cuBLASLt (CAVS_CUBLASLT=1, the same rows), and the LSTM-vs-cuDNN benchmark
# (cublasSgemm and cuBLASLt). One log per group under $OUT (default: .gpucarry/out; 7 files,
# the device tool returns at most 8); a part that fails is reported and the rest still run.
#
#   bash .gpucarry/run.sh tests|bench|bench_ab|all
#
# Each of `tests`, `bench` and `bench_ab` (the A/B rows: interpreter, cuBLASLt) stays under the
# tool's 10 minutes per call (every part has a timeout); `all` (the default) is for a machine
# without that limit.
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
summary="$OUT/summary.txt"
: >"$summary"
part() {  # part <log> <name> <seconds> <command...>: runs it, appending to $OUT/<log>.log
  local log="$OUT/$1.log" name="$2" secs="$3"
  shift 3
  local t0=$SECONDS rc=0
  echo "==== $name" >>"$log"
  timeout "$secs" "$@" >>"$log" 2>&1 || rc=$?
  echo "$name: exit $rc, $((SECONDS - t0)) s" | tee -a "$summary"
}

mode="${1:-all}"
nvidia-smi -L | tee -a "$summary"
if [[ "$mode" == tests || "$mode" == all ]]; then
  export CAVS_VERIFY_EW_SHAPES=1
  part tests ops_cuda_test 90 "$bin/ops_cuda_test" --gtest_brief=1
  part tests equivalence 60 "$bin/ops_kernels_equivalence_test" --gtest_brief=1
  part tests engine 120 "$bin/scheduler_engine_test" --gtest_brief=1
  part tests trainer 60 "$bin/trainer_test" --gtest_brief=1 --gtest_filter='*Cuda*'
  # The engine once more with its GEMMs through cuBLASLt (CAVS_CUBLASLT=1, cuda_gemm.h).
  CAVS_CUBLASLT=1 part tests engine_cublaslt 90 "$bin/scheduler_engine_test" --gtest_brief=1
  part memcheck memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$bin/ops_cuda_test" --gtest_brief=1 --gtest_filter='CudaFused*:CudaKernels*'
  unset CAVS_VERIFY_EW_SHAPES
fi
if [[ "$mode" == bench* || "$mode" == all ]]; then
  [[ -f data/sst_train.txt ]] && export CAVS_BENCH_SST="$PWD/data/sst_train.txt"
  [[ -f data/ptb.txt ]] && export CAVS_BENCH_PTB="$PWD/data/ptb.txt"
fi
tabular=--benchmark_counters_tabular=true
if [[ "$mode" == bench || "$mode" == all ]]; then
  part bench_tree tree_gpu_bench 240 "$bin/tree_lstm_gpu_benchmark" "$tabular"
  part bench_lstm lstm_gpu_bench 120 "$bin/lstm_gpu_benchmark" "$tabular"
  CAVS_CUBLASLT=1 part bench_lstm lstm_gpu_bench_cublaslt 90 "$bin/lstm_gpu_benchmark" "$tabular"
fi
if [[ "$mode" == bench_ab || "$mode" == all ]]; then
  # The overlapped rows again, with the interpreter and with the GEMMs through cuBLASLt.
  overlapped='BM_TreeLstm/(train_overlap|infer_overlap)/'
  CAVS_CUDA_FUSED=0 part bench_tree_interpreter tree_gpu_bench_interpreter 150 \
    "$bin/tree_lstm_gpu_benchmark" "$tabular" --benchmark_filter="$overlapped"
  CAVS_CUBLASLT=1 part bench_tree_cublaslt tree_gpu_bench_cublaslt 150 \
    "$bin/tree_lstm_gpu_benchmark" "$tabular" --benchmark_filter="$overlapped"
fi
cat "$summary"
