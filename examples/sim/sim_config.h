// SimConfig: the settings of a cavs-sim run, and its command-line parser.
//
// The parser accepts `--name=value` and `--name value`, `-` or `_` inside names, and bare
// boolean flags, like cavs-train's (examples/trainer/trainer_config.h). Every error is an
// InvalidArgument naming the flag, one line, for main to print with exit status 2. The help
// text comes from the same table as the parser.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cavs::sim {

struct SimConfig {
  std::string profile_path;   // --profile: the model profile (required)
  std::string cluster_path;   // --cluster: the cluster description (required)
  std::string strategy_path;  // --strategy-file: also predict this strategy
  std::string strategy_out;   // --strategy-out: write the searched strategy here
  std::string measured_path;  // --measured: measured step times to correct the model by
  bool allow_compression = false;
  // --poll-cost: what a unit in flight costs compute (ModelProfile::poll_cost) instead of the
  // profile's; < 0: the profile's.
  double poll_cost = -1;
  // --poll-cost-per-mb: ModelProfile::poll_cost_per_mb instead of the profile's; < 0: the
  // profile's.
  double poll_cost_per_mb = -1;
  // Host counts of the scaling table; empty: no table.
  std::vector<int> scaling = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  int ranks_per_host = 8;
  std::string plot;   // --plot: the scaling table as a PNG through gnuplot
  int top = 3;        // searched strategies listed
  bool units = true;  // per-unit breakdown of every strategy
  bool help = false;
};

// Parses argv[1..]. Errors: an unknown flag, a missing or malformed value, a value out of
// range, no --profile or --cluster (unless --help).
[[nodiscard]] absl::StatusOr<SimConfig> ParseSimFlags(const std::vector<std::string>& args);

// The --help text: usage, then every flag with its default and meaning.
std::string SimHelpText();

}  // namespace cavs::sim
