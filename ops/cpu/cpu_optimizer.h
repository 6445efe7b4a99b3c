// The CPU's core::OptimizerKernels: SGD, Adagrad and Adam as vectorized loops over each
// parameter's contiguous runs (the whole tensor when dense, one row per gradient row when
// sparse), the update rules of core/optimizer_math.h. Built without FMA contraction, so the
// vector clones equal the scalar rule (and CUDA's kernels built from the same header) bit for
// bit. The CPU plug-in (ops/cpu/cpu_plugin.h) holds them.
//
// Thread-safety: stateless; may be called from several threads at once.
#pragma once

#include "core/optimizer.h"

namespace cavs::ops::cpu {

// The process's CPU optimizer kernels (never destroyed).
core::OptimizerKernels* CpuOptimizerKernels();

}  // namespace cavs::ops::cpu
