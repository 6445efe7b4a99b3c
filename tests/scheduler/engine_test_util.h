// What the engine suites share: the cell they run, the tolerance against the reference, and
// random batches of trees and chains.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parameter.h"
#include "core/random.h"
#include "scheduler/graph.h"
#include "tests/scheduler/random_graphs.h"
#include "vertex/models.h"

namespace cavs::scheduler::testing {

// The engine (float32, batched, any GEMM kernel and thread split) against the reference
// (double, one vertex at a time), relative to each tensor's largest value: 1e-5 is about 168
// float32 roundings (u = 2^-24). The cells here (embed 8, hidden 6, 5 classes) form each forward
// and input-gradient value with sums of at most 2 hidden + embed + 1 = 21 terms (bound
// γ_21 = 21 u / (1 - 21 u) = 1.3e-6 of their magnitudes) and element-wise ops accurate to 1e-6
// (ops/cpu/cpu_math.h), a few per round over rounds that do not expand errors. A weight
// gradient sums over every row of the batch (a few thousand here): its worst-case bound
// (γ_3000 = 1.8e-4 of Σ|terms|) is above the tolerance, and the test relies on those roundings
// being random, about sqrt(rows) u = 3e-6. Measured worst: 2.4e-6 (2026-11, AVX-512 Xeon), the same
// with OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=512, with Nehalem and the packed GEMM off, and
// with KernelOptions::cpu.ew_as_planned (CAVS_CPU_EW_AS_PLANNED=1 in tests/scheduler).
inline constexpr double kTolerance = 1e-5;

inline vertex::models::CellConfig Cell() {
  return {.vocab = 50, .embed = 8, .hidden = 6, .classes = 5};
}

// max |a - b| / max(max |b|, 1e-3): the error relative to the tensor's scale.
template <typename T>
double RelErr(const std::vector<float>& a, const std::vector<T>& b) {
  double err = 0, scale = 1e-3;
  for (size_t i = 0; i < b.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return err / scale;
}

// A parameter's gradient as a dense [rows, cols] array (a row-sparse one scattered).
inline std::vector<float> DenseGrad(const core::Parameter& p) {
  if (!p.sparse_grad) return p.grad.ToVector();
  std::vector<float> out(p.value.numel(), 0.0f);
  const std::vector<float> rows = p.grad_values.ToVector();
  const int64_t w = p.value.cols();
  for (size_t i = 0; i < p.grad_rows.size(); ++i) {
    for (int64_t j = 0; j < w; ++j) out[p.grad_rows[i] * w + j] += rows[i * w + j];
  }
  return out;
}

// `count` random binary trees of 1 to max_leaves leaves (vocabulary 50, 5 classes); with
// `unary`, every other one has unary internal vertices.
inline std::vector<Graph> Trees(core::Rng& rng, int count, int max_leaves, bool unary = false) {
  std::vector<Graph> gs;
  for (int i = 0; i < count; ++i) {
    gs.push_back(RandomTree(rng, 1 + static_cast<int>(rng.UniformInt(max_leaves)),
                            {.vocab = 50, .classes = 5}, unary && i % 2 == 1));
  }
  return gs;
}

// `count` chains of 1 to max_len vertices, as Trees.
inline std::vector<Graph> Chains(core::Rng& rng, int count, int max_len) {
  std::vector<Graph> gs;
  for (int i = 0; i < count; ++i) {
    gs.push_back(RandomChain(rng, 1 + static_cast<int>(rng.UniformInt(max_len)),
                             {.vocab = 50, .classes = 5}));
  }
  return gs;
}

}  // namespace cavs::scheduler::testing
