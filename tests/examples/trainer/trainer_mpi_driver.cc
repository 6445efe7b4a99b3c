// cavs-train with one rank that dies mid-run, for run_trainer_mpi.cmake's peer-exit scenario:
//   trainer_mpi_driver --exit-rank=R --exit-after-step=S [--exit-by-sigkill] <cavs-train flags...>
// Rank R calls _exit(1) after optimizer step S (with --exit-by-sigkill it is killed by SIGKILL,
// as by kill -9 or the OOM killer); every other rank must fail with a clear error within
// --comm-timeout and exit. Each rank prints one line:
//   "trainer-mpi-driver: rank R ok" (a normal end) or "trainer-mpi-driver: rank R error: ...".
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "examples/trainer/trainer.h"
#include "examples/trainer/trainer_config.h"

int main(int argc, char** argv) {
  int exit_rank = -1;
  int64_t exit_step = -1;
  bool sigkill = false;
  std::vector<std::string> args = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--exit-rank=", 0) == 0) {
      if (!absl::SimpleAtoi(a.substr(12), &exit_rank)) return 2;
    } else if (a.rfind("--exit-after-step=", 0) == 0) {
      if (!absl::SimpleAtoi(a.substr(18), &exit_step)) return 2;
    } else if (a == "--exit-by-sigkill") {
      sigkill = true;
    } else {
      args.push_back(a);
    }
  }
  const int rank = cavs::trainer::LauncherRank();
  auto report = [rank](const absl::Status& s) {
    std::string m = absl::StrReplaceAll(s.message(), {{"\n", " "}});
    std::printf("trainer-mpi-driver: rank %d error: %s\n", rank, m.c_str());
    std::fflush(stdout);
    return 1;
  };
  absl::StatusOr<cavs::trainer::TrainerConfig> config = cavs::trainer::ParseTrainerFlags(args);
  if (!config.ok()) return report(config.status());
  cavs::trainer::TrainOptions options;
  options.after_step = [&](int64_t step) {
    if (rank == exit_rank && step == exit_step) {
      std::printf("trainer-mpi-driver: rank %d exits after step %ld\n", rank, long{step});
      std::fflush(stdout);
      if (sigkill) std::raise(SIGKILL);
      _exit(1);
    }
  };
  auto trainer = cavs::trainer::Trainer::Create(*config, options);
  if (!trainer.ok()) return report(trainer.status());
  if (absl::Status s = (*trainer)->Run(); !s.ok()) return report(s);
  std::printf("trainer-mpi-driver: rank %d ok\n", rank);
  return 0;
}
