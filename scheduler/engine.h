// Engine: the batched executor. Runs a vertex function over a batch of graphs, forward, loss
// and backward, with Cavs's lazy batching, on any device that has ops::Kernels.
//
// Once per function (Create): every per-vertex node of the forward and backward programs is
// given a view — a buffer of [num_rows, width] floats in the batch's arena, a column range of
// another node's buffer (a Slice; an input of a Concat, which is then free), a forward value
// (in the backward), or a gradient accumulator — and each op class is cut into steps: single
// ops (GEMM, gather, reduce) and maximal groups of element-wise ops that one fused kernel runs.
//
// Per batch (Run): build the Plan; record the whole schedule as a command list with final
// device pointers (pre-ops over all rows, recurrent ops round by round, post-ops, the loss, the
// backward in reverse rounds, then one GEMM per weight gradient over all rows); upload the
// plan's index arrays, features and fused-kernel programs in one transfer; replay.
//
// The parameter store must live on the engine's device. Gradients are accumulated into it
// (dense += ; embedding tables get row-sparse gradients); callers zero them between steps.
// Thread-safety: one Run at a time per Engine.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/parameter.h"
#include "core/tensor.h"
#include "ops/kernels.h"
#include "scheduler/executor_common.h"
#include "scheduler/plan.h"
#include "vertex/function.h"

namespace cavs::scheduler {

struct EngineOptions {
  core::Device device = core::Device::Cpu();
  PlanOptions plan;
};

// What the last Run did, for benchmarks and logs.
struct EngineStats {
  int rounds = 0;
  int64_t rows = 0;
  double plan_seconds = 0.0;  // BuildPlan + recording the schedule (host)
  double run_seconds = 0.0;   // the whole Run, including the plan
  int64_t commands = 0;       // kernel launches
  int64_t arena_bytes = 0;    // the batch's buffers (the plan's memory estimate)
  int64_t upload_bytes = 0;   // index arrays, features and fused programs
};

class Engine {
 public:
  // Checks that the store holds `f`'s parameters on options.device (creating them if absent).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Engine>> Create(const vertex::Function* f,
                                                                      core::ParameterStore* store,
                                                                      EngineOptions options = {});
  ~Engine();

  // Forward, loss and (if options.backward) backward over `graphs`. Validates the batch first.
  [[nodiscard]] absl::StatusOr<RunResult> Run(const std::vector<Graph>& graphs,
                                              const RunOptions& options);

  const EngineStats& stats() const { return stats_; }
  // Kernel launches one round makes, forward and backward (per the compiled steps).
  int ForwardLaunchesPerRound() const;
  int BackwardLaunchesPerRound() const;

  struct Compiled;  // the per-function schedule (engine.cc)

 private:
  Engine() = default;
  const vertex::Function* f_ = nullptr;
  core::ParameterStore* store_ = nullptr;
  EngineOptions options_;
  ops::Kernels* kernels_ = nullptr;
  std::unique_ptr<Compiled> compiled_;
  EngineStats stats_;
  std::vector<char> staging_;  // host side of the per-batch upload
};

}  // namespace cavs::scheduler
