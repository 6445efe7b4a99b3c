// The serial reference executor: the oracle every batched and GPU path is checked against.
//
// It evaluates the vertex function one vertex at a time, in topological order, forward and
// then backward, with plain loops in double precision, as simply as possible. It is a pure
// function of (function, graphs, parameter values, options): it owns no state and touches no
// store, which also makes it the engine of finite-difference gradient checks.
#pragma once

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/parameter.h"
#include "scheduler/executor_common.h"
#include "scheduler/graph.h"
#include "vertex/function.h"

namespace cavs::scheduler {

// Parameter values or gradients by name, row-major, in double.
using ParamValues = absl::flat_hash_map<std::string, std::vector<double>>;

struct ReferenceResult {
  RunResult run;      // outputs are push 0's rows, rounded to float
  double loss = 0.0;  // the loss as normalized by options.loss
  ParamValues grads;  // dense, embedding tables included (all zeros if no backward)
};

// Copies the store's values of `f`'s parameters (host or device) to double.
ParamValues SnapshotParameters(const vertex::Function& f, const core::ParameterStore& store);

// Runs forward, the loss on push 0 and (if options.backward) backward. The batch is validated
// first (errors name the sample and the vertex).
[[nodiscard]] absl::StatusOr<ReferenceResult> RunReference(const vertex::Function& f,
                                                           const std::vector<Graph>& graphs,
                                                           const ParamValues& params,
                                                           const RunOptions& options);

}  // namespace cavs::scheduler
