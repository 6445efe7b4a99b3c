#include <algorithm>

#include "ops/cuda/cuda_small_gemm.h"
#include "ops/cuda/small_gemm_tile.cuh"

namespace cavs::ops {

namespace {

namespace sg = small_gemm;

__global__ void __launch_bounds__(sg::kThreads) SmallGemmKernel(sg::Args g) {
  extern __shared__ float4 shared4[];  // 16-byte aligned: Read4's reads
  sg::RunTile(g, blockIdx.x, blockIdx.y, reinterpret_cast<float*>(shared4));
}

}  // namespace

cudaError_t PrepareSmallGemm(size_t* shared_bytes) {
  *shared_bytes = 0;
  int device = 0, optin = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (const cudaError_t e =
          cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
      e != cudaSuccess) {
    return e;
  }
  const size_t bytes =
      std::min<size_t>(static_cast<size_t>(optin), sg::SharedFloats(sg::kMaxChunk) * sizeof(float));
  if (const cudaError_t e = cudaFuncSetAttribute(
          SmallGemmKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
      e != cudaSuccess) {
    return e;
  }
  *shared_bytes = bytes;
  return cudaSuccess;
}

cudaError_t LaunchSmallGemm(cudaStream_t stream, const sg::Args& g) {
  const size_t bytes = static_cast<size_t>(sg::SharedFloats(g.chunk)) * sizeof(float);
  const dim3 grid(static_cast<unsigned>((g.n + sg::kCols - 1) / sg::kCols),
                  static_cast<unsigned>((g.m + sg::kRows - 1) / sg::kRows));
  SmallGemmKernel<<<grid, sg::kThreads, bytes, stream>>>(g);
  return cudaGetLastError();
}

}  // namespace cavs::ops
