#include <cuda_pipeline.h>

#include <algorithm>

#include "ops/cuda/cuda_small_gemm.h"
#include "ops/cuda/small_gemm.h"

namespace cavs::ops {

namespace {

namespace sg = small_gemm;

// One float into shared memory without waiting for it (cp.async); zero past the edges.
struct CopyAsync {
  __device__ void operator()(float* dst, const float* src) const {
    if (src != nullptr) {
      __pipeline_memcpy_async(dst, src, sizeof(float));
    } else {
      *dst = 0.0f;
    }
  }
};

__global__ void __launch_bounds__(sg::kThreads) SmallGemmKernel(sg::Args g) {
  extern __shared__ float4 shared4[];  // 16-byte aligned: Read4's reads
  float* shared = reinterpret_cast<float*>(shared4);
  float* as = shared;
  float* bs = shared + g.chunk * sg::kPitchA;
  float acc[16] = {};
  for (int k0 = 0; k0 < g.k; k0 += g.chunk) {
    const int len = min(g.chunk, g.k - k0);
    if (k0 > 0) __syncthreads();  // the last chunk's reads are done before it is overwritten
    sg::LoadChunk(g, blockIdx.x, blockIdx.y, threadIdx.x, k0, len, as, bs, CopyAsync{});
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();
    sg::AccumulateChunk(threadIdx.x, len, as, bs, acc);
  }
  __syncthreads();  // the partial tiles overwrite the operands
  sg::Park(threadIdx.x, acc, shared);
  __syncthreads();
  sg::Store(g, blockIdx.x, blockIdx.y, threadIdx.x, shared);
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

cudaError_t LaunchSmallGemm(cudaStream_t stream, bool trans_b, int64_t m, int64_t n, int64_t k,
                            float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                            float beta, float* c, int64_t ldc) {
  const int chunk = static_cast<int>(std::min<int64_t>(k, sg::kMaxChunk));
  const size_t bytes = static_cast<size_t>(sg::SharedFloats(chunk)) * sizeof(float);
  sg::Args g{static_cast<int>(m),
             static_cast<int>(n),
             static_cast<int>(k),
             alpha,
             beta,
             a,
             lda,
             b,
             ldb,
             c,
             ldc,
             trans_b,
             chunk};
  const dim3 grid(static_cast<unsigned>((n + sg::kCols - 1) / sg::kCols),
                  static_cast<unsigned>((m + sg::kRows - 1) / sg::kRows));
  SmallGemmKernel<<<grid, sg::kThreads, bytes, stream>>>(g);
  return cudaGetLastError();
}

}  // namespace cavs::ops
