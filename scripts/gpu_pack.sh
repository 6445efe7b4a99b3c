#!/usr/bin/env bash
# Packs the GPU checks for one call of the device tool (a lent H100/H200; see
# /work/.library/device/README.md): builds the default configuration's GPU tests, benchmarks and
# trainer here, and copies them with the shared libraries a bare CUDA image lacks (Abseil,
# OpenBLAS, GoogleTest, Google Benchmark, Open MPI, libstdc++; not the CUDA libraries, which the
# image has) into .gpucarry/, which .git/info/exclude keeps out of git. Data by path:
#
#   scripts/gpu_pack.sh [SST train file] [PTB text file] [SST dev file]
#
# Then one device call: carry [".gpucarry"], command "bash .gpucarry/run.sh" (scripts/gpu_run.sh,
# copied in): tests, memcheck, benchmarks, each log under $OUT.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

sst="${1:-../shared/data/sst/train.txt}"
ptb="${2:-../shared/data/ptb/valid.txt}"
sst_dev="${3:-../shared/data/sst/dev.txt}"
targets=(ops_cuda_test ops_kernels_equivalence_test scheduler_engine_test trainer_test cavs-train
  tree_lstm_gpu_benchmark lstm_gpu_benchmark)

cavs_configure_default >/dev/null
ninja -C build/default -t targets all 2>/dev/null | grep -q '^ops_cuda_test:' || {
  echo "gpu_pack.sh: build/default has no CUDA (nvcc not found?)" >&2
  exit 1
}
cmake --build build/default -j "$CAVS_JOBS" --target "${targets[@]}"

out=.gpucarry
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/data"
grep -qx '/.gpucarry/' .git/info/exclude 2>/dev/null || echo '/.gpucarry/' >>.git/info/exclude
for t in "${targets[@]}"; do
  bin=$(find build/default -name "$t" -type f -executable -print -quit)
  [[ -n "$bin" ]] || { echo "gpu_pack.sh: $t was not built" >&2; exit 1; }
  strip -o "$out/bin/$t" "$bin"
  # Every library it loads but glibc's, the driver's and the CUDA toolkit's.
  ldd "$bin" | awk '$3 ~ /^\// {print $3}' |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*)\.so|/libcuda\.so|/usr/local/cuda' |
    while read -r lib; do cp -nL "$lib" "$out/lib/"; done
done
[[ -f "$sst" ]] && cp "$sst" "$out/data/sst_train.txt"
[[ -f "$ptb" ]] && cp "$ptb" "$out/data/ptb.txt"
[[ -f "$sst_dev" ]] && cp "$sst_dev" "$out/data/sst_dev.txt"
# Compressed: the tool carries 64 MiB with the working tree, and OpenBLAS alone is 36 MB.
tar -C "$out" -czf "$out/pack.tgz" bin lib
rm -rf "$out/bin" "$out/lib"
cp scripts/gpu_run.sh "$out/run.sh"
du -sh "$out"
echo "gpu_pack.sh: packed ${#targets[@]} binaries into $out (device: carry [\"$out\"], run \"bash $out/run.sh\")"
