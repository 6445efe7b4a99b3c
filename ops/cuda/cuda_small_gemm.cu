#include <cuda_pipeline.h>

#include <algorithm>
#include <atomic>

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

// Devices whose kernel attribute is set (up to 64 ordinals).
std::atomic<uint64_t> g_opted_in{0};

}  // namespace

cudaError_t LaunchSmallGemm(cudaStream_t stream, bool trans_b, int64_t m, int64_t n, int64_t k,
                            float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                            float beta, float* c, int64_t ldc) {
  const int chunk = static_cast<int>(std::min<int64_t>(k, sg::kMaxChunk));
  const size_t bytes = static_cast<size_t>(sg::SharedFloats(chunk)) * sizeof(float);
  if (bytes > 48 * 1024) {
    int device = 0;
    if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
    const uint64_t bit = uint64_t{1} << (device & 63);
    if ((g_opted_in.load(std::memory_order_relaxed) & bit) == 0) {
      const cudaError_t e =
          cudaFuncSetAttribute(SmallGemmKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(sg::SharedFloats(sg::kMaxChunk) * sizeof(float)));
      if (e != cudaSuccess) return e;
      g_opted_in.fetch_or(bit, std::memory_order_relaxed);
    }
  }
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
