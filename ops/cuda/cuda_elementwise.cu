#include <algorithm>

#include "core/random.h"
#include "ops/cuda/cuda_elementwise.h"
#include "ops/cuda/ew_codegen.h"
#include "ops/cuda/ew_math.cuh"

namespace cavs::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kSharedInstrs = 48;  // longer programs are read from global memory

__device__ __forceinline__ float& At(const EwArg& x, int64_t row, int64_t c) {
  return x.ptr[row * x.ld + c];
}

// Operand x at row r, column c; a row-mapped x (EwArg::rows) reads row rows[r] of its buffer,
// 0 where that is negative.
__device__ __forceinline__ float Read(const EwArg& x, int64_t r, int64_t c) {
  if (x.rows == nullptr) return At(x, r, c);
  const int64_t from = x.rows[r];
  return from >= 0 ? At(x, from, c) : 0.0f;
}

// Calls f(row, c) for every (row, c) of rows [r0, r0 + nr) x [0, width), threads over both.
template <typename F>
__device__ __forceinline__ void ForEach(int64_t r0, int nr, int width, F f) {
  const int total = nr * width;
  for (int e = threadIdx.x; e < total; e += kThreads) {
    const int r = e / width;
    f(r0 + r, e - r * width);
  }
}

// dst[0] = Σ_c a[c]: one warp per row, lanes over columns.
__device__ void RowSum(const EwInstr& in, int64_t r0, int nr) {
  const int lane = threadIdx.x & 31;
  const int width = static_cast<int>(in.width);
  for (int r = threadIdx.x >> 5; r < nr; r += kWarps) {
    float sum = 0.0f;
    for (int c = lane; c < width; c += 32) sum = ew::Add(sum, At(in.a, r0 + r, c));
    for (int off = 16; off > 0; off >>= 1) {
      sum = ew::Add(sum, __shfl_xor_sync(0xffffffffu, sum, off));
    }
    if (lane == 0) At(in.dst, r0 + r, 0) = sum;
  }
}

__device__ void Dropout(const EwInstr& in, int64_t r0, int nr) {
  const float p = in.scalar;
  const float inv_keep = 1.0f / (1.0f - p);
  const uint64_t width = static_cast<uint64_t>(in.width);
  ForEach(r0, nr, static_cast<int>(in.width), [&](int64_t row, int c) {
    const uint64_t uid = static_cast<uint64_t>(static_cast<int64_t>(in.uids[row]));
    const bool keep = core::PhiloxUniform(in.seed, uid * width + c) >= p;
    At(in.dst, row, c) = ew::Dropout(At(in.a, row, c), keep, inv_keep);
  });
}

// One instruction over rows [r0, r0 + nr) of the block.
__device__ void Run(const EwInstr& in, int64_t r0, int nr) {
  if (in.width <= 0) return;
  const int w = static_cast<int>(in.width);
  const EwArg &d = in.dst, &a = in.a, &b = in.b;
  switch (in.op) {
    case EwOp::kCopy:
      if (d.rows != nullptr) {  // row-mapped: row r goes to row rows[r] (none if negative)
        return ForEach(r0, nr, w, [&](int64_t r, int c) {
          const int64_t to = d.rows[r];
          if (to >= 0) At(d, to, c) = At(a, r, c);
        });
      }
      return ForEach(r0, nr, w, [&](int64_t r, int c) { At(d, r, c) = Read(a, r, c); });
    case EwOp::kZero:
      return ForEach(r0, nr, w, [&](int64_t r, int c) { At(d, r, c) = 0.0f; });
    case EwOp::kAdd:
      return ForEach(r0, nr, w,
                     [&](int64_t r, int c) { At(d, r, c) = ew::Add(At(a, r, c), At(b, r, c)); });
    case EwOp::kSub:
      return ForEach(r0, nr, w,
                     [&](int64_t r, int c) { At(d, r, c) = ew::Sub(At(a, r, c), At(b, r, c)); });
    case EwOp::kMul:
      return ForEach(r0, nr, w,
                     [&](int64_t r, int c) { At(d, r, c) = ew::Mul(At(a, r, c), At(b, r, c)); });
    case EwOp::kAccumulate:
      return ForEach(r0, nr, w,
                     [&](int64_t r, int c) { At(d, r, c) = ew::Add(At(d, r, c), Read(a, r, c)); });
    case EwOp::kSigmoid:
      return ForEach(r0, nr, w, [&](int64_t r, int c) { At(d, r, c) = ew::Sigmoid(At(a, r, c)); });
    case EwOp::kTanh:
      return ForEach(r0, nr, w, [&](int64_t r, int c) { At(d, r, c) = ew::Tanh(At(a, r, c)); });
    case EwOp::kRelu:
      return ForEach(r0, nr, w, [&](int64_t r, int c) { At(d, r, c) = ew::Relu(At(a, r, c)); });
    case EwOp::kNeg:
      return ForEach(r0, nr, w, [&](int64_t r, int c) { At(d, r, c) = -At(a, r, c); });
    case EwOp::kScale: {
      const float s = in.scalar, o = in.offset;
      return ForEach(r0, nr, w,
                     [&](int64_t r, int c) { At(d, r, c) = ew::Scale(At(a, r, c), s, o); });
    }
    case EwOp::kSum:
      return RowSum(in, r0, nr);
    case EwOp::kBroadcast:
      return ForEach(r0, nr, w, [&](int64_t r, int c) { At(d, r, c) = At(a, r, 0); });
    case EwOp::kDropout:
      return Dropout(in, r0, nr);
    case EwOp::kSigmoidGrad:
      return ForEach(r0, nr, w, [&](int64_t r, int c) {
        const float y = At(a, r, c);
        At(d, r, c) = ew::SigmoidGrad(y, At(b, r, c));
      });
    case EwOp::kTanhGrad:
      return ForEach(r0, nr, w, [&](int64_t r, int c) {
        const float y = At(a, r, c);
        At(d, r, c) = ew::TanhGrad(y, At(b, r, c));
      });
    case EwOp::kReluGrad:
      return ForEach(r0, nr, w, [&](int64_t r, int c) {
        At(d, r, c) = ew::ReluGrad(At(a, r, c), At(b, r, c));
      });
  }
}

// program: [count] instructions in device memory; each block runs them over its rows, row i
// of the launch being row row0 + i of every operand.
__global__ void __launch_bounds__(kThreads)
    ElementwiseKernel(const EwInstr* __restrict__ program, int count, int64_t rows,
                      int rows_per_block, int64_t row0) {
  __shared__ alignas(16) unsigned char shared[kSharedInstrs * sizeof(EwInstr)];
  const EwInstr* prog = program;
  if (count <= kSharedInstrs) {
    const int words = count * static_cast<int>(sizeof(EwInstr) / sizeof(int));
    for (int i = threadIdx.x; i < words; i += kThreads) {
      reinterpret_cast<int*>(shared)[i] = reinterpret_cast<const int*>(program)[i];
    }
    __syncthreads();
    prog = reinterpret_cast<const EwInstr*>(shared);
  }
  const int64_t first = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  const int nr = static_cast<int>(min(static_cast<int64_t>(rows_per_block), rows - first));
  for (int k = 0; k < count; ++k) {
    if (k > 0) __syncthreads();  // later instructions read earlier results of the same rows
    Run(prog[k], row0 + first, nr);
  }
}

static_assert(sizeof(EwInstr) % sizeof(int) == 0);

}  // namespace

cudaError_t LaunchElementwise(cudaStream_t stream, const EwInstr* host, const EwInstr* device,
                              int count, int64_t rows, int num_sms, int64_t row0) {
  if (count <= 0 || rows <= 0) return cudaSuccess;
  int64_t width = 1;
  for (int k = 0; host != nullptr && k < count; ++k) width = std::max(width, host[k].width);
  // Enough rows per block to give each thread a few elements, but enough blocks to fill the
  // device twice over when there are rows to spare.
  const int64_t rows_per_block = EwRowsPerBlock(rows, width, num_sms);
  if (rows_per_block * width >= (int64_t{1} << 31)) return cudaErrorInvalidValue;
  const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
  if (blocks >= (int64_t{1} << 31)) return cudaErrorInvalidValue;
  ElementwiseKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      device, count, rows, static_cast<int>(rows_per_block), row0);
  return cudaGetLastError();
}

}  // namespace cavs::ops::cuda
