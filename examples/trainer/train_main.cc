// cavs-train: trains a model with examples/trainer (see docs/trainer.md and --help).
// Exit status: 0 on success, 2 on a usage, file or data error, 1 on any other failure (a write
// that fails on a full disk, to a log, a checkpoint or stdout, and a peer that stopped answering
// under mpirun included).
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "examples/trainer/trainer.h"
#include "examples/trainer/trainer_config.h"
#include "ops/kernels.h"

namespace {

int Fail(const absl::Status& status) {
  std::string message = absl::StrReplaceAll(status.message(), {{"\n", " "}});
  // Under mpirun every rank reports its own error; say which.
  const int rank = cavs::trainer::LauncherRank();
  std::string who = rank >= 0 ? absl::StrCat("cavs-train: rank ", rank, ": ") : "cavs-train: ";
  // One write, so that the lines of several ranks do not interleave.
  const std::string line = absl::StrCat(who, "error: ", message, "\n");
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

// Output that did not reach stdout (a full disk, /dev/full) is a failure, not a success. The
// caller clears errno before its writes: a write that fails on the way (the help text is longer
// than stdio's buffer) leaves the stream bad with its errno.
int FlushStdout() {
  std::cout.flush();
  if (std::cout && std::fflush(stdout) == 0) return 0;
  const int err = errno != 0 ? errno : EIO;
  return Fail(absl::InternalError(absl::StrCat("writing to stdout: ", std::strerror(err))));
}

}  // namespace

int main(int argc, char** argv) {
  // A write past the file size limit (ulimit -f) would kill the process with SIGXFSZ in the
  // middle of a checkpoint; ignored, it fails with EFBIG, and the checkpoint's error path removes
  // its temporary file and reports (docs/checkpoint.md).
  std::signal(SIGXFSZ, SIG_IGN);
  // The one place cavs-train reads the environment's kernel options (ops/kernel_options.h);
  // kernel flags apply on top of them.
  const absl::StatusOr<std::string> env_line =
      cavs::ops::ApplyEnvironmentKernelOptions("cavs-train");
  if (!env_line.ok()) return Fail(env_line.status());
  std::vector<std::string> args(argv, argv + argc);
  absl::StatusOr<cavs::trainer::TrainerConfig> config = cavs::trainer::ParseTrainerFlags(args);
  if (!config.ok()) return Fail(config.status());
  if (config->help) {
    errno = 0;
    std::cout << cavs::trainer::HelpText();
    return FlushStdout();
  }
  cavs::trainer::TrainOptions options;
  options.out = &std::cout;
  options.startup_line = *env_line;
  // No bar under mpirun: Open MPI gives the ranks a pseudo-terminal even when its own output
  // goes to a file.
  options.progress =
      !config->quiet && isatty(fileno(stdout)) != 0 && cavs::trainer::LauncherRank() < 0;
  auto trainer = cavs::trainer::Trainer::Create(*config, options);
  if (!trainer.ok()) return Fail(trainer.status());
  absl::Status status = (*trainer)->Run();
  if (!status.ok()) return Fail(status);
  errno = 0;
  return FlushStdout();
}
