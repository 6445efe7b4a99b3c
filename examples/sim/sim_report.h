// cavs-sim's work: read a model profile and a cluster description, predict the step time of
// every strategy builder, of a strategy file and of the searched strategies with the cost
// model (distributed/cost_model.h), print them broken down, and project to larger clusters (a
// scaling table, and its plot through gnuplot).
//
// Not thread-safe (writes to one stream).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "distributed/cluster_spec.h"
#include "distributed/cost_model.h"
#include "distributed/model_profile.h"
#include "distributed/strategy.h"
#include "examples/sim/sim_config.h"

namespace cavs::sim {

// One strategy's prediction, under a label ("allreduce", "auto", "file").
struct Row {
  std::string label;
  distributed::Strategy strategy;
  distributed::Prediction prediction;
};

// One line of the scaling table: the step time of each strategy (labels as the columns).
struct ScalingRow {
  int hosts = 0;
  int ranks = 0;
  std::vector<double> step_s;  // per column; the last is the searched strategy
};

// The predicted rows of the builders on `cluster`, in StrategyBuilderNames() order. `store`
// holds the profile's parameters.
[[nodiscard]] absl::StatusOr<std::vector<Row>> PredictBuilders(
    const distributed::ModelProfile& profile, const distributed::ClusterSpec& cluster,
    const core::ParameterStore& store);

// The table of rows: step, compute, exposed communication, optimizer, units, against the best
// row, the busiest server and link.
std::string FormatTable(const std::vector<Row>& rows, const distributed::ClusterSpec& cluster);

// One row's units: start, end, exposed, payload.
std::string FormatUnits(const Row& row);

// The scaling table as text, and as CSV (ranks first, then samples per second per column).
std::string FormatScaling(const std::vector<ScalingRow>& rows,
                          const std::vector<std::string>& labels, int64_t batch_per_rank);
std::string ScalingCsv(const std::vector<ScalingRow>& rows, const std::vector<std::string>& labels,
                       int64_t batch_per_rank);

// The whole run: reads the files named by `config`, writes the report to `out`. Errors:
// NotFound for an unreadable file, InvalidArgument for a malformed one (naming the file, line
// and field) or a strategy file that does not fit the profile and cluster.
[[nodiscard]] absl::Status RunSim(const SimConfig& config, std::ostream& out);

}  // namespace cavs::sim
