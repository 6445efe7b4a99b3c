// The fused element-wise program interpreter (Kernels::Elementwise) on CUDA.
//
// One launch runs the whole program: each block owns a chunk of rows, copies the program into
// shared memory and runs the instructions in order over its rows, with a __syncthreads()
// between instructions, since a later instruction may read what an earlier one wrote in the
// same row, also across columns (kSum, kBroadcast, copies at column offsets). Rows never
// depend on each other, so blocks need no coordination.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/kernels.h"

namespace cavs::ops::cuda {

// Queues `count` instructions over rows [0, rows) on `stream`, row i of the launch being row
// row0 + i of every operand (Kernels::Elementwise). `host` (host memory) sets the launch shape,
// `device` (the same program in device memory) is what the kernel reads; `num_sms` is the
// device's multiprocessor count. Returns the launch's error, if any.
cudaError_t LaunchElementwise(cudaStream_t stream, const EwInstr* host, const EwInstr* device,
                              int count, int64_t rows, int num_sms, int64_t row0);

}  // namespace cavs::ops::cuda
