// The CUDA source of a generated element-wise kernel, from its plan (ops/ew_plan.h).
//
// The source is text for NVRTC (ops/cuda/cuda_fused.h compiles it). Making it needs no CUDA, so
// this file is compiled in every configuration: the emulation test (tests/ops) compiles the
// emitted source with the host compiler and runs it on host threads, without a GPU.
#pragma once

#include <cstdint>
#include <string>

#include "ops/ew_plan.h"

namespace cavs::ops::cuda {

// A name for the plan's kernel: "cavs_ew_", the CRC-32 of the key and its length; the same in
// every process, so the on-disk kernel cache (cuda_fused.h) finds it again.
std::string EwKernelName(const EwKernelPlan& plan);

// The CUDA C++ source of the plan's kernel, for NVRTC:
//   extern "C" __global__ void <name>(const unsigned char* program, long long rows,
//                                     int rows_per_block, long long row0)
// `program` is the program's EwInstr array in device memory (its pointers, strides, scalars,
// seeds and uids are loaded from there); block b runs rows [b * rows_per_block, ...), each
// row i reading and writing row row0 + i of its operands (Kernels::Elementwise), with
// kEwKernelThreads threads and plan.shared_width * rows_per_block floats of dynamic shared
// memory. Includes "ops/cuda/ew_math.cuh" (the ops' arithmetic, shared with the interpreter)
// and, when the program has a dropout, "core/philox.h".
std::string EmitEwKernelCuda(const EwKernelPlan& plan, const std::string& name);

// The kernel's body alone, as a device function for `threads` threads (a multiple of 32)
// that runs the rows of block `block`, for kernels that run a program among other work:
//   __device__ void <name>(const unsigned char* program, long long rows, int rows_per_block,
//                          long long block, long long row0)
// with its includes. Every thread of the block calls it (it may contain block-wide barriers);
// EmitEwKernelCuda's kernel is this body for kEwKernelThreads threads and block blockIdx.x.
std::string EmitEwBodyCuda(const EwKernelPlan& plan, const std::string& name, int threads);

inline constexpr int kEwKernelThreads = 256;

// Rows per block of an element-wise launch, the interpreter's and the generated kernels': about
// 4096 elements a block (a few per thread) for rows `width` wide, but no fewer blocks than
// twice the `num_sms` multiprocessors where there are rows to spare.
int64_t EwRowsPerBlock(int64_t rows, int64_t width, int num_sms);

}  // namespace cavs::ops::cuda
