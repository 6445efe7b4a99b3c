#include <algorithm>

#include "ops/cuda/cuda_small_gemm.h"
#include "ops/cuda/small_gemm_tile.cuh"

namespace cavs::ops::cuda {

namespace {

namespace sg = small_gemm;

template <typename T>
__global__ void __launch_bounds__(sg::kThreads) SmallGemmKernel(sg::Args g) {
  extern __shared__ float4 shared4[];  // 16-byte aligned: Read4's reads
  sg::RunTile<T>(g, blockIdx.x, blockIdx.y, reinterpret_cast<float*>(shared4));
}

template <typename T>
cudaError_t Prepare(size_t* shared_bytes) {
  *shared_bytes = 0;
  int device = 0, optin = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (const cudaError_t e =
          cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
      e != cudaSuccess) {
    return e;
  }
  const size_t bytes = std::min<size_t>(static_cast<size_t>(optin),
                                        sg::SharedFloats<T>(sg::kMaxChunk) * sizeof(float));
  if (const cudaError_t e = cudaFuncSetAttribute(reinterpret_cast<const void*>(SmallGemmKernel<T>),
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(bytes));
      e != cudaSuccess) {
    return e;
  }
  *shared_bytes = bytes;
  return cudaSuccess;
}

template <typename T>
cudaError_t Launch(cudaStream_t stream, const sg::Args& g) {
  const size_t bytes = static_cast<size_t>(sg::SharedFloats<T>(g.chunk)) * sizeof(float);
  const dim3 grid(static_cast<unsigned>((g.n + T::kCols - 1) / T::kCols),
                  static_cast<unsigned>((g.m + T::kRows - 1) / T::kRows));
  SmallGemmKernel<T><<<grid, sg::kThreads, bytes, stream>>>(g);
  return cudaGetLastError();
}

}  // namespace

cudaError_t PrepareSmallGemm(size_t* shared_bytes) { return Prepare<sg::RoundTile>(shared_bytes); }

cudaError_t LaunchSmallGemm(cudaStream_t stream, const sg::Args& g) {
  return Launch<sg::RoundTile>(stream, g);
}

}  // namespace cavs::ops::cuda
