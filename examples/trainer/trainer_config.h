// TrainerConfig: every setting of a cavs-train run, and its command-line parser.
//
// The parser is hand-rolled (absl/flags exits the process on a bad flag; a library must not):
// it accepts `--name=value` and `--name value`, `-` or `_` inside names, and bare boolean
// flags (`--resume`). Every error is an InvalidArgument naming the flag, one line, so that
// main can print it and exit with status 2. The help text is generated from the same table
// as the parser, so the two cannot drift apart.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ops/kernel_options.h"

namespace cavs::trainer {

struct TrainerConfig {
  std::string model = "tree-lstm";
  std::string train_path;  // empty: the bundled data/synthetic files (DefaultDataDir())
  std::string dev_path;
  std::string test_path;
  std::string format = "auto";  // auto | sst | text (one sentence per line)
  double dev_fraction = 0.0;    // > 0: hold out the last fraction of --train as the dev set
  int64_t max_train = 0;        // > 0: use only the first N training samples
  int64_t max_dev = 0;          // > 0: use only the first N dev samples
  int epochs = 5;
  int batch = 25;
  int64_t hidden = 150;
  int64_t embed = 300;
  std::string optimizer = "adagrad";
  double lr = 0.05;
  double weight_decay = 0.0;
  double clip = 0.0;  // > 0: clip the global gradient norm
  double dropout = 0.0;
  int min_count = 1;
  uint64_t seed = 1;
  std::string device = "cpu";
  int threads = 0;  // 0: the runtime's default
  // How the kernels run (ops/kernel_options.h), where a kernel flag (--packed-gemm, --cublas-lt,
  // ...) was given: the process's options (ops::GetKernelOptions: the defaults, or cavs-train's
  // environment override) with the flags applied. Unset: the kernels run as the process set them.
  std::optional<ops::KernelOptions> kernels;
  // Host threads planning the next batches while the current one runs (scheduler/plan_queue.h):
  // -1 picks (none on the CPU, whose cores run the step; on a GPU up to 4), 0 plans in the step.
  int plan_threads = -1;
  std::string policy = "height";
  // Evaluation with the embeddings' input projections folded (scheduler::Engine::
  // FoldInputProjections): auto where an evaluated set's tokens outnumber the vocabulary four
  // times (the fold then costs less than the GEMMs it replaces), on, or off.
  std::string fold_eval = "auto";
  std::string checkpoint_dir;
  bool resume = false;
  std::string log_json;
  std::string csv;
  std::string plot;
  // Non-empty: write the parameters of the best dev epoch here at the end (a checkpoint file
  // without optimizer state; docs/trainer.md).
  std::string save_best;
  // Distributed (under mpirun; ignored by a single process): the strategy builder's name (empty:
  // allreduce), or a strategy file (distributed/strategy.h); the communication timeout.
  std::string strategy;
  std::string strategy_file;
  // --strategy=auto (distributed/auto_strategy.h): searched strategies tried, and kept in
  // reserve for the corrected model, steps per strategy tried and profiled (and the seconds a
  // trial of short steps is stretched to), whether the builders
  // are tried too and how much slower one may be before its trial stops, whether fp16 is allowed,
  // and where the profile and the probed cluster are written (empty: not written).
  int auto_candidates = 3;
  int auto_reserve = 6;
  int auto_steps = 3;
  int auto_rounds = 1;
  double auto_trial_seconds = 3.0;
  int auto_profile_steps = 3;
  int auto_builders = 1;
  int auto_equal_work = 1;
  double auto_cutoff = 1.5;
  std::string auto_early = "none";
  bool allow_compression = false;
  bool sync_overlap = true;  // DataParallelStep::set_overlap
  std::string profile_out;
  std::string cluster_out;
  double comm_timeout = 60.0;
  int64_t comm_piece_bytes = -1;  // CommOptions::piece_bytes
  std::string trace;   // non-empty: write a Chrome/Perfetto trace to <trace>.rank<N>.json
  bool quiet = false;  // no progress bar even on a terminal
  bool help = false;
};

// Parses argv[1..] (argv[0] is the program name). --help sets `help`; the caller prints
// HelpText(). Errors: an unknown flag, a missing or malformed value, a value out of range.
[[nodiscard]] absl::StatusOr<TrainerConfig> ParseTrainerFlags(const std::vector<std::string>& args);

// The --help text: usage, then every flag with its default and meaning.
std::string HelpText();

// Checks ranges and names (model, optimizer, device, policy, format); ParseTrainerFlags calls it.
[[nodiscard]] absl::Status ValidateConfig(const TrainerConfig& config);

// The folder of the bundled synthetic treebank: the source tree's data/synthetic when it
// exists, else the installed share/cavs/data/synthetic.
std::string DefaultDataDir();

}  // namespace cavs::trainer
