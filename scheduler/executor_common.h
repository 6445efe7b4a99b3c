// What every executor shares: run options and results, batch validation, parameter creation,
// and the dropout key. The reference executor and the batched engines agree on all of it, so
// their results can be compared number for number.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/parameter.h"
#include "scheduler/graph.h"
#include "vertex/function.h"

namespace cavs::scheduler {

struct RunOptions {
  bool training = true;  // dropout active
  bool backward = true;  // compute gradients into the parameter store
  // Mean: the loss and its gradient are averaged over the batch's labelled vertices. Sum: the
  // plain sum (the distributed layer divides by the global count itself).
  enum class Loss { kMean, kSum } loss = Loss::kMean;
  uint64_t dropout_seed = 0;  // per step: the same seed gives the same masks
  bool keep_outputs = false;  // return push 0's rows (tests, inference)
  // Inference only (training and backward false): the embeddings' input projections gathered
  // from the tables Engine::FoldInputProjections made, not multiplied (engine.h).
  bool folded_projections = false;
  // Every GEMM by a weight takes the device's packed GEMM (ops::Kernels::GemmPackedB) however
  // few rows the batch has, so that a vertex's results do not depend on the other samples of
  // its batch: OpenBLAS's sgemm, taken below 128 rows, rounds a row differently with the
  // number of rows (its small-matrix path), and its Haswell/Zen kernels by a row's place in the
  // call. The packed kernel computes each row alike wherever it lies. Only where the device has
  // a packed GEMM (the CPU with AVX-512F, or AVX2 and FMA, where it is taken for this alone); a
  // small batch then pays the pack. Serving sets it, and cavs-train's evaluation, so that the two
  // agree.
  bool batch_invariant = false;
  // Hooks for overlapping communication with backward (the distributed trainer). On the CPU,
  // on_gradient_ready(name) runs as soon as the parameter's gradient for this batch is final —
  // the output layer's before the backward rounds, the others as their lazy weight-gradient
  // GEMMs finish, the embedding's at the end — and on_progress between backward rounds. On
  // other devices the host does not wait for the device mid-batch, so neither is called and
  // the caller treats every gradient as ready when Run returns. An error aborts the Run.
  std::function<absl::Status(const std::string& name)> on_gradient_ready;
  std::function<absl::Status()> on_progress;
};

struct RunResult {
  double loss_sum = 0.0;  // Σ cross-entropy over labelled vertices
  int64_t labelled = 0;   // labelled vertices in the batch
  int64_t correct = 0;    // of those, how many have argmax(push 0) == label
  int64_t vertices = 0;
  // Per graph, per vertex: argmax of push 0 (when the function pushes).
  std::vector<std::vector<int32_t>> predictions;
  // Per graph: push 0's rows, [V * width] (keep_outputs only).
  std::vector<std::vector<float>> outputs;
};

// Checks every graph (structure, arity within what `f` reads, tokens below the vocabulary,
// labels below push 0's width, feature width) with errors naming the sample and the vertex.
[[nodiscard]] absl::Status ValidateBatch(const vertex::Function& f,
                                         const std::vector<Graph>& graphs);

// Creates `f`'s parameters in `store` (or checks the existing ones' shapes: the error names
// the parameter and both shapes).
[[nodiscard]] absl::Status CreateParameters(const vertex::Function& f, core::ParameterStore* store);

// That `store` still holds `f`'s parameters as created: float32 values of the declared shapes on
// the store's device, the declared kind of gradient, and with `backward` a dense gradient of the
// value's shape. A run checks it first, since the store is the caller's and may have changed
// since: a parameter replaced by a tensor of another shape would be read and written out of
// bounds. FailedPrecondition naming the parameter, the function and both shapes.
[[nodiscard]] absl::Status CheckParameters(const vertex::Function& f,
                                           const core::ParameterStore& store, bool backward);

// The Philox key of a dropout op's mask in one step. Mask element (vertex uid, column c) keeps
// when PhiloxUniform(key, uid * width + c) >= p. A vertex's uid is its index in the batch in
// input order: graphs' vertex counts before it plus its id in its graph.
inline uint64_t DropoutKey(uint64_t step_seed, int64_t op_seed) {
  return step_seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(op_seed);
}

}  // namespace cavs::scheduler
