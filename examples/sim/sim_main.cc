// cavs-sim: the cost model as a tool (docs/distributed.md, "cavs-sim"; --help).
// Exit status: 0 on success, 2 on a bad flag or input file, 1 on any other failure.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "examples/sim/sim_config.h"
#include "examples/sim/sim_report.h"

namespace {

int Fail(const absl::Status& status) {
  const std::string line =
      absl::StrCat("cavs-sim: error: ", absl::StrReplaceAll(status.message(), {{"\n", " "}}), "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kDataLoss:
      return 2;
    default:
      return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv, argv + argc);
  absl::StatusOr<cavs::sim::SimConfig> config = cavs::sim::ParseSimFlags(args);
  if (!config.ok()) return Fail(config.status());
  if (config->help) {
    std::cout << cavs::sim::SimHelpText();
    return 0;
  }
  absl::Status status = cavs::sim::RunSim(*config, std::cout);
  std::cout.flush();
  if (!status.ok()) return Fail(status);
  return 0;
}
