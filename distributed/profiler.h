// BuildModelProfile: what a few profiled training steps (DataParallelStep with profiling on)
// say about a model, as the cost model's ModelProfile, the same on every rank.
//
// Per step and rank: forward is the time into compute of the first gradient's MarkReady (on the
// CPU the output layer's gradient is final as backward starts), backward the rest of compute,
// hooks the part of compute spent in the synchronizer's hooks (StepTimes::hooks), with the part
// of compute after the first unit started and the hooks in it (StepTimes::overlap,
// overlap_hooks), these three the rank's with the most hooks; each parameter's ready_ms is its
// MarkReady time after forward (unset where compute did not report it: at the end of backward,
// as on a GPU); a row-sparse parameter's touched rows are
// this rank's, and the union over ranks (the synchronized gradient's rows) gives the
// union_rows point at the world size. Each figure is the median over steps; over ranks, the
// slowest rank's times and the mean of the row counts. The spread (where in the table the rows
// fall) pools every step and rank: at each of SpreadEdges(rows), the rows below it over all
// rows, touched and union. The first step is skipped where there are several (its memory is
// fresh).
//
// Collective where `comm` is not null (every rank calls it with its own steps).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/parameter.h"
#include "distributed/communicator.h"
#include "distributed/model_profile.h"
#include "distributed/step.h"

namespace cavs::distributed {

[[nodiscard]] absl::StatusOr<ModelProfile> BuildModelProfile(Communicator* comm,
                                                             const core::ParameterStore& store,
                                                             const std::vector<StepTimes>& steps,
                                                             int64_t batch_per_rank,
                                                             const std::string& name);

}  // namespace cavs::distributed
