#include <algorithm>

#include "ops/cuda/cuda_gather.h"

namespace cavs::ops::cuda {

namespace {

constexpr int kThreads = 256;
// Sums a thread of SegmentReduceKernel keeps in flight (a power of two).
constexpr int kSegmentParts = 16;

// Threads along x over a row's `cols` (vectors), along y and the grid over rows.
struct RowGrid {
  dim3 grid, block;
};

RowGrid MakeRowGrid(int64_t m, int64_t cols) {
  int bx = 32;
  while (bx < cols && bx < kThreads) bx *= 2;
  const int by = kThreads / bx;
  const int64_t blocks = std::min<int64_t>((m + by - 1) / by, int64_t{1} << 20);
  return {dim3(static_cast<unsigned>(std::max<int64_t>(blocks, 1))), dim3(bx, by)};
}

#define CAVS_FOR_EACH_ROW(row, m)                                                            \
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; row < (m); \
       row += static_cast<int64_t>(gridDim.x) * blockDim.y)

template <int V>
struct Vec;
template <>
struct Vec<1> {
  using T = float;
  __device__ static T Zero() { return 0.0f; }
  __device__ static void Add(T& d, T s) { d += s; }
  __device__ static void AtomicAdd(T* d, T s) { atomicAdd(d, s); }
};
template <>
struct Vec<4> {
  using T = float4;
  __device__ static T Zero() { return make_float4(0.0f, 0.0f, 0.0f, 0.0f); }
  __device__ static void Add(T& d, T s) {
    d.x += s.x;
    d.y += s.y;
    d.z += s.z;
    d.w += s.w;
  }
  __device__ static void AtomicAdd(T* d, T s) {
    atomicAdd(&d->x, s.x);
    atomicAdd(&d->y, s.y);
    atomicAdd(&d->z, s.z);
    atomicAdd(&d->w, s.w);
  }
};

// dst: [m, cols * V] row i = src row idx[i] (zeros where idx[i] < 0). Strides in vectors.
template <int V>
__global__ void GatherKernel(const typename Vec<V>::T* __restrict__ src, int64_t src_ld,
                             const int32_t* __restrict__ idx, int64_t m, int64_t cols,
                             typename Vec<V>::T* __restrict__ dst, int64_t dst_ld) {
  CAVS_FOR_EACH_ROW(i, m) {
    const int64_t s = idx[i];
    auto* d = dst + i * dst_ld;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      d[c] = s >= 0 ? src[s * src_ld + c] : Vec<V>::Zero();
    }
  }
}

// dst row idx[i] += src row i, atomically unless the rows are known to be distinct.
template <int V, bool kAtomic>
__global__ void ScatterAddKernel(const typename Vec<V>::T* __restrict__ src, int64_t src_ld,
                                 const int32_t* __restrict__ idx, int64_t m, int64_t cols,
                                 typename Vec<V>::T* dst, int64_t dst_ld) {
  CAVS_FOR_EACH_ROW(i, m) {
    const int64_t t = idx[i];
    if (t < 0) continue;
    const auto* s = src + i * src_ld;
    auto* d = dst + t * dst_ld;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      if constexpr (kAtomic) {
        Vec<V>::AtomicAdd(d + c, s[c]);
      } else {
        Vec<V>::Add(d[c], s[c]);
      }
    }
  }
}

// dst: [m, w] row i = reduce of src rows ids[offsets[i] .. offsets[i+1]).
__global__ void SegmentReduceKernel(ReduceOp op, const float* __restrict__ src, int64_t src_ld,
                                    const int32_t* __restrict__ offsets,
                                    const int32_t* __restrict__ ids, int64_t m, int64_t w,
                                    float* __restrict__ dst, int64_t dst_ld,
                                    int32_t* __restrict__ argmax) {
  CAVS_FOR_EACH_ROW(i, m) {
    const int32_t begin = offsets[i], end = offsets[i + 1];
    for (int64_t c = threadIdx.x; c < w; c += blockDim.x) {
      float acc = 0.0f;
      if (op == ReduceOp::kMax) {
        int32_t arg = -1;
        if (begin < end) {
          arg = ids[begin];
          acc = src[arg * src_ld + c];
        }
        for (int32_t j = begin + 1; j < end; ++j) {
          const float v = src[static_cast<int64_t>(ids[j]) * src_ld + c];
          if (v > acc) {
            acc = v;
            arg = ids[j];
          }
        }
        if (argmax != nullptr) argmax[i * w + c] = arg;
      } else {
        // kSegmentParts sums in flight, so that a long segment (the embedding's gradient of a
        // frequent token: 236 rows for "." in an SST batch of 256) waits for its loads 16 at a
        // time, not one: the kernel lasts as long as its longest segment's chain of loads
        // (four sums took 68 us for an SST training batch of 256 on an H200). Added in a fixed
        // order, so the result does not depend on timing; up to three rows sum as a single
        // accumulator would.
        float part[kSegmentParts];
#pragma unroll
        for (int u = 0; u < kSegmentParts; ++u) part[u] = 0.0f;
        // The next step's row ids are loaded while this step's rows are: one wait a step.
        int32_t row[kSegmentParts];
        int32_t j = begin;
#pragma unroll
        for (int u = 0; u < kSegmentParts; ++u) row[u] = j + u < end ? ids[j + u] : 0;
        for (; j + kSegmentParts <= end; j += kSegmentParts) {
          int32_t next[kSegmentParts];
#pragma unroll
          for (int u = 0; u < kSegmentParts; ++u) {
            const int32_t k = j + kSegmentParts + u;
            next[u] = k < end ? ids[k] : 0;
          }
#pragma unroll
          for (int u = 0; u < kSegmentParts; ++u)
            part[u] += src[static_cast<int64_t>(row[u]) * src_ld + c];
#pragma unroll
          for (int u = 0; u < kSegmentParts; ++u) row[u] = next[u];
        }
#pragma unroll
        for (int u = 0; u < kSegmentParts; ++u) {
          if (j + u < end) part[u] += src[static_cast<int64_t>(row[u]) * src_ld + c];
        }
        // A pairwise tree: ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7)) + ...
#pragma unroll
        for (int stride = 1; stride < kSegmentParts; stride *= 2) {
#pragma unroll
          for (int u = 0; u + stride < kSegmentParts; u += 2 * stride) part[u] += part[u + stride];
        }
        acc = part[0];
        if (op == ReduceOp::kMean && end > begin) acc /= static_cast<float>(end - begin);
      }
      dst[i * dst_ld + c] = acc;
    }
  }
}

// dsrc row ids[j] += dy row i (scaled for kMean; only the argmax row per element for kMax).
__global__ void SegmentReduceGradKernel(ReduceOp op, const float* __restrict__ dy, int64_t dy_ld,
                                        const int32_t* __restrict__ offsets,
                                        const int32_t* __restrict__ ids,
                                        const int32_t* __restrict__ argmax, int64_t m, int64_t w,
                                        float* dsrc, int64_t dsrc_ld) {
  CAVS_FOR_EACH_ROW(i, m) {
    const int32_t begin = offsets[i], end = offsets[i + 1];
    if (begin >= end) continue;
    for (int64_t c = threadIdx.x; c < w; c += blockDim.x) {
      const float g = dy[i * dy_ld + c];
      if (op == ReduceOp::kMax) {
        const int64_t arg = argmax[i * w + c];
        if (arg >= 0) atomicAdd(&dsrc[arg * dsrc_ld + c], g);
        continue;
      }
      const float v = op == ReduceOp::kMean ? g / static_cast<float>(end - begin) : g;
      for (int32_t j = begin; j < end; ++j) {
        atomicAdd(&dsrc[static_cast<int64_t>(ids[j]) * dsrc_ld + c], v);
      }
    }
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// float4 access is possible when widths, strides and base pointers are multiples of 4 floats.
bool CanVectorize(const float* a, int64_t a_ld, const float* b, int64_t b_ld, int64_t w) {
  return w % 4 == 0 && a_ld % 4 == 0 && b_ld % 4 == 0 && Aligned16(a) && Aligned16(b);
}

}  // namespace

cudaError_t LaunchGatherRows(cudaStream_t stream, const float* src, int64_t src_ld,
                             const int32_t* idx, int64_t m, int64_t w, float* dst, int64_t dst_ld) {
  if (m <= 0 || w <= 0) return cudaSuccess;
  if (CanVectorize(src, src_ld, dst, dst_ld, w)) {
    const RowGrid g = MakeRowGrid(m, w / 4);
    GatherKernel<4><<<g.grid, g.block, 0, stream>>>(reinterpret_cast<const float4*>(src),
                                                    src_ld / 4, idx, m, w / 4,
                                                    reinterpret_cast<float4*>(dst), dst_ld / 4);
  } else {
    const RowGrid g = MakeRowGrid(m, w);
    GatherKernel<1><<<g.grid, g.block, 0, stream>>>(src, src_ld, idx, m, w, dst, dst_ld);
  }
  return cudaGetLastError();
}

cudaError_t LaunchScatterAddRows(cudaStream_t stream, const float* src, int64_t src_ld,
                                 const int32_t* idx, int64_t m, int64_t w, float* dst,
                                 int64_t dst_ld, bool unique) {
  if (m <= 0 || w <= 0) return cudaSuccess;
  if (CanVectorize(src, src_ld, dst, dst_ld, w)) {
    const RowGrid g = MakeRowGrid(m, w / 4);
    const auto* s = reinterpret_cast<const float4*>(src);
    auto* d = reinterpret_cast<float4*>(dst);
    if (unique) {
      ScatterAddKernel<4, false>
          <<<g.grid, g.block, 0, stream>>>(s, src_ld / 4, idx, m, w / 4, d, dst_ld / 4);
    } else {
      ScatterAddKernel<4, true>
          <<<g.grid, g.block, 0, stream>>>(s, src_ld / 4, idx, m, w / 4, d, dst_ld / 4);
    }
  } else {
    const RowGrid g = MakeRowGrid(m, w);
    if (unique) {
      ScatterAddKernel<1, false>
          <<<g.grid, g.block, 0, stream>>>(src, src_ld, idx, m, w, dst, dst_ld);
    } else {
      ScatterAddKernel<1, true>
          <<<g.grid, g.block, 0, stream>>>(src, src_ld, idx, m, w, dst, dst_ld);
    }
  }
  return cudaGetLastError();
}

namespace {

struct RowCopies {
  RowCopy c[kMaxRowCopies];
};

// Block (32, 8): x over a row's columns, y over rows; grid.y is the copy.
__global__ void GatherMultiKernel(RowCopies copies, int64_t m) {
  const RowCopy& c = copies.c[blockIdx.y];
  CAVS_FOR_EACH_ROW(i, m) {
    const int32_t j = c.idx[i];
    float* d = c.dst + i * c.dst_ld;
    for (int64_t k = threadIdx.x; k < c.w; k += blockDim.x) {
      d[k] = j < 0 ? 0.0f : c.src[static_cast<int64_t>(j) * c.src_ld + k];
    }
  }
}

template <bool kAtomic>
__global__ void ScatterAddMultiKernel(RowCopies copies, int64_t m) {
  const RowCopy& c = copies.c[blockIdx.y];
  CAVS_FOR_EACH_ROW(i, m) {
    const int32_t j = c.idx[i];
    if (j < 0) continue;
    const float* s = c.src + i * c.src_ld;
    float* d = c.dst + static_cast<int64_t>(j) * c.dst_ld;
    for (int64_t k = threadIdx.x; k < c.w; k += blockDim.x) {
      if (kAtomic) {
        atomicAdd(&d[k], s[k]);
      } else {
        d[k] += s[k];
      }
    }
  }
}

dim3 MultiGrid(int64_t m, int count) {
  const int64_t blocks = std::min<int64_t>((m + 7) / 8, int64_t{1} << 16);
  return dim3(static_cast<unsigned>(std::max<int64_t>(blocks, 1)), static_cast<unsigned>(count));
}

}  // namespace

cudaError_t LaunchGatherRowsMulti(cudaStream_t stream, const RowCopy* copies, int count,
                                  int64_t m) {
  if (m <= 0 || count <= 0) return cudaSuccess;
  RowCopies arg;
  for (int i = 0; i < count; ++i) arg.c[i] = copies[i];
  GatherMultiKernel<<<MultiGrid(m, count), dim3(32, 8), 0, stream>>>(arg, m);
  return cudaGetLastError();
}

cudaError_t LaunchScatterAddRowsMulti(cudaStream_t stream, const RowCopy* copies, int count,
                                      int64_t m, bool unique) {
  if (m <= 0 || count <= 0) return cudaSuccess;
  RowCopies arg;
  for (int i = 0; i < count; ++i) arg.c[i] = copies[i];
  if (unique) {
    ScatterAddMultiKernel<false><<<MultiGrid(m, count), dim3(32, 8), 0, stream>>>(arg, m);
  } else {
    ScatterAddMultiKernel<true><<<MultiGrid(m, count), dim3(32, 8), 0, stream>>>(arg, m);
  }
  return cudaGetLastError();
}

cudaError_t LaunchSegmentReduce(cudaStream_t stream, ReduceOp op, const float* src, int64_t src_ld,
                                const int32_t* offsets, const int32_t* ids, int64_t m, int64_t w,
                                float* dst, int64_t dst_ld, int32_t* argmax) {
  if (m <= 0 || w <= 0) return cudaSuccess;
  // A row's columns in one pass where they fit in 512 threads (two passes at 256 threads
  // doubled the longest segment's chain at width 300); 1,024 threads ask for more registers
  // than a block has (72 a thread).
  RowGrid g = MakeRowGrid(m, w);
  if (w > kThreads) {
    const int bx = static_cast<int>(std::min<int64_t>((w + 31) / 32 * 32, 512));
    g = {dim3(static_cast<unsigned>(std::min<int64_t>(m, int64_t{1} << 20))), dim3(bx, 1)};
  }
  SegmentReduceKernel<<<g.grid, g.block, 0, stream>>>(op, src, src_ld, offsets, ids, m, w, dst,
                                                      dst_ld, argmax);
  return cudaGetLastError();
}

cudaError_t LaunchSegmentReduceGrad(cudaStream_t stream, ReduceOp op, const float* dy,
                                    int64_t dy_ld, const int32_t* offsets, const int32_t* ids,
                                    const int32_t* argmax, int64_t m, int64_t w, float* dsrc,
                                    int64_t dsrc_ld) {
  if (m <= 0 || w <= 0) return cudaSuccess;
  if (op == ReduceOp::kMax && argmax == nullptr) return cudaErrorInvalidValue;
  const RowGrid g = MakeRowGrid(m, w);
  SegmentReduceGradKernel<<<g.grid, g.block, 0, stream>>>(op, dy, dy_ld, offsets, ids, argmax, m, w,
                                                          dsrc, dsrc_ld);
  return cudaGetLastError();
}

}  // namespace cavs::ops::cuda
