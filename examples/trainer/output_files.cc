#include "examples/trainer/output_files.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/checkpoint.h"
#include "core/status.h"
#include "examples/trainer/dataset.h"
#include "examples/trainer/trace.h"

namespace cavs::trainer {
namespace {

namespace fs = std::filesystem;

// (flag, path) of one input or output file.
using NamedPaths = std::vector<std::pair<std::string, std::string>>;

absl::Status Bad(const std::string& flag, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", what));
}

// The type of `path` (not_found where it or a folder on the way does not exist), or an error
// naming `flag` (a symlink loop, a name too long, no permission to look).
absl::StatusOr<fs::file_type> TypeOf(const std::string& flag, const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) return fs::file_type::not_found;
  if (ec) return Bad(flag, absl::StrCat("cannot use ", path, ": ", ec.message()));
  return st.type();
}

// Whether a file can be written at `path` (nothing is created): an existing one must be a
// writable non-directory, else its folder a writable directory.
absl::Status CheckWritableFile(const std::string& flag, const std::string& path) {
  CAVS_ASSIGN_OR_RETURN(fs::file_type type, TypeOf(flag, path));
  if (type == fs::file_type::directory) return Bad(flag, absl::StrCat(path, " is a directory"));
  if (type != fs::file_type::not_found) {
    if (::access(path.c_str(), W_OK) != 0) {
      return Bad(flag, absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  CAVS_ASSIGN_OR_RETURN(fs::file_type dir_type, TypeOf(flag, dir));
  if (dir_type == fs::file_type::not_found) {
    return Bad(flag, absl::StrCat("cannot write ", path, ": no directory ", dir));
  }
  if (dir_type != fs::file_type::directory) {
    return Bad(flag, absl::StrCat("cannot write ", path, ": ", dir, " is not a directory"));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return Bad(flag, absl::StrCat("cannot write ", path, ": ", dir, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

bool SameFile(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::equivalent(a, b, ec) && !ec) return true;
  // Outputs that do not exist yet: the same path after normalization.
  const fs::path na = fs::weakly_canonical(a, ec);
  if (ec) return false;
  const fs::path nb = fs::weakly_canonical(b, ec);
  return !ec && na == nb;
}

NamedPaths OutputFiles(const TrainerConfig& c) {
  NamedPaths out;
  if (!c.log_json.empty()) out.emplace_back("--log-json", c.log_json);
  if (!c.csv.empty()) out.emplace_back("--csv", c.csv);
  if (!c.save_best.empty()) out.emplace_back("--save-best", c.save_best);
  if (!c.plot.empty()) {
    out.emplace_back("--plot", c.plot);
    out.emplace_back("--plot", c.plot + ".gp");
    if (c.csv.empty()) out.emplace_back("--plot", c.plot + ".csv");
  }
  // Every rank writes its own file beside this one.
  if (!c.trace.empty()) out.emplace_back("--trace", TracePath(c.trace, 0));
  return out;
}

absl::Status CheckCheckpointDir(const TrainerConfig& c) {
  const std::string& dir = c.checkpoint_dir;
  CAVS_ASSIGN_OR_RETURN(fs::file_type type, TypeOf("--checkpoint-dir", dir));
  if (type != fs::file_type::not_found && type != fs::file_type::directory) {
    return Bad("--checkpoint-dir", absl::StrCat(dir, " is not a directory"));
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Bad("--checkpoint-dir", absl::StrCat("cannot create ", dir, ": ", ec.message()));
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return Bad("--checkpoint-dir",
               absl::StrCat("cannot write in ", dir, ": ", std::strerror(errno)));
  }
  absl::StatusOr<std::vector<std::string>> existing = core::ListCheckpoints(dir);
  if (!existing.ok()) return Bad("--checkpoint-dir", std::string(existing.status().message()));
  if (!c.resume && !existing->empty()) {
    std::vector<std::string> names;
    for (const std::string& p : *existing) names.push_back(fs::path(p).filename().string());
    return absl::FailedPreconditionError(absl::StrCat(
        "--checkpoint-dir: ", dir, " already holds checkpoints (", absl::StrJoin(names, ", "),
        "); pass --resume to continue that run, or choose another --checkpoint-dir"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckOutputs(const TrainerConfig& config) {
  if (!config.checkpoint_dir.empty()) CAVS_RETURN_IF_ERROR(CheckCheckpointDir(config));
  const NamedPaths outputs = OutputFiles(config);
  NamedPaths inputs = InputFiles(config);
  if (!config.strategy_file.empty()) inputs.emplace_back("--strategy-file", config.strategy_file);
  // A checkpoint file is written beside its path and renamed over it: only a regular file may
  // be replaced so (as root, a rename would replace /dev/full itself).
  if (!config.save_best.empty()) {
    CAVS_ASSIGN_OR_RETURN(fs::file_type type, TypeOf("--save-best", config.save_best));
    if (type != fs::file_type::not_found && type != fs::file_type::regular) {
      return Bad("--save-best", absl::StrCat(config.save_best, " is not a regular file"));
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& [flag, path] = outputs[i];
    CAVS_RETURN_IF_ERROR(CheckWritableFile(flag, path));
    for (const auto& [in_flag, in_path] : inputs) {
      if (SameFile(path, in_path)) {
        return Bad(flag, absl::StrCat(path, " is the input file ", in_flag, "=", in_path,
                                      ": writing it would destroy it"));
      }
    }
    for (size_t j = 0; j < i; ++j) {
      if (SameFile(path, outputs[j].second)) {
        return Bad(flag, absl::StrCat(path, " is also the file of ", outputs[j].first));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace cavs::trainer
