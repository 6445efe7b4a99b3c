// ServeConfig: cavs-serve's command line. Same conventions as cavs-train's (trainer_config.h):
// `--name=value` or `--name value`, every error an InvalidArgument naming the flag, every
// integer checked against its range, the help text generated from the parser's own table.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "examples/serve/server.h"

namespace cavs::serve {

struct ServeConfig {
  std::string checkpoint;  // a checkpoint file, or a directory (its newest that verifies)
  std::string device = "cpu";
  int threads = 0;  // CPU threads of the engine; 0: the runtime's default
  bool fold = true;
  bool join = false;
  ServerOptions server;
  bool help = false;
};

[[nodiscard]] absl::StatusOr<ServeConfig> ParseServeFlags(const std::vector<std::string>& args);
std::string ServeHelpText();

}  // namespace cavs::serve
