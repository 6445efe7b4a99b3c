// Trainer: the training loop of cavs-train.
//
// One run: load the data (dataset.h), build the model's vertex function (model_registry.h),
// the parameter store, the batched Engine and the optimizer; then per epoch shuffle the
// training samples (core::Rng), take one optimizer step per batch, evaluate the dev set in a
// fixed order (training=false, backward=false), print the epoch line, append to the JSON log
// and the CSV, and write ckpt-<epoch>.cavs atomically.
//
// Reproducibility: parameters are initialized from --seed; the shuffle order comes from an Rng
// whose state is saved in every checkpoint; each step's dropout seed is a function of --seed
// and the global step number. So a run resumed from a checkpoint ends with parameters
// bit-identical to those of an uninterrupted run with the same flags.
//
// The library never exits: every failure is a Status (InvalidArgument / NotFound /
// FailedPrecondition for user errors). Not thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/checkpoint.h"
#include "core/optimizer.h"
#include "core/parameter.h"
#include "core/random.h"
#include "examples/trainer/dataset.h"
#include "examples/trainer/metrics.h"
#include "examples/trainer/model_registry.h"
#include "examples/trainer/report.h"
#include "examples/trainer/trainer_config.h"
#include "scheduler/engine.h"
#include "vertex/function.h"

namespace cavs::trainer {

struct TrainOptions {
  std::ostream* out = nullptr;  // epoch lines, notes and the SUMMARY line; null: silent
  bool progress = false;        // draw the progress bar on `out` (a terminal)
};

class Trainer {
 public:
  // Loads the data and builds the model, store, engine and optimizer. With config.resume,
  // restores the latest checkpoint of config.checkpoint_dir (none there: a fresh start);
  // a checkpoint written with other settings is a FailedPrecondition naming the setting.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Trainer>> Create(
      const TrainerConfig& config, const TrainOptions& options = {});

  // Trains the remaining epochs up to config.epochs, then evaluates the test set if any and
  // writes the CSV, the plot and the SUMMARY line.
  [[nodiscard]] absl::Status Run();

  // Evaluates `graphs` in fixed order without touching gradients.
  [[nodiscard]] absl::StatusOr<EvalMetrics> Evaluate(const std::vector<scheduler::Graph>& graphs);

  const core::ParameterStore& store() const { return *store_; }
  const std::vector<EpochRecord>& curve() const { return curve_; }
  const Dataset& data() const { return data_; }
  int epochs_done() const { return epochs_done_; }
  // The SUMMARY line's JSON object (after Run).
  const std::string& summary_json() const { return summary_json_; }

 private:
  Trainer(const TrainerConfig& config, const TrainOptions& options)
      : config_(config), options_(options), shuffle_rng_(config.seed, kShuffleStream) {}
  static constexpr uint64_t kShuffleStream = 0x5348554646ull;

  [[nodiscard]] absl::Status Build();
  [[nodiscard]] absl::StatusOr<double> TrainEpoch(int epoch, double* trees_per_sec);
  [[nodiscard]] absl::Status FinishEpoch(EpochRecord record);
  [[nodiscard]] absl::Status Resume();
  [[nodiscard]] absl::Status SaveEpochCheckpoint() const;
  [[nodiscard]] absl::Status WriteOutputs(const EvalMetrics* test);
  core::CheckpointMetadata ConfigMetadata() const;
  double Elapsed() const;
  void Say(const std::string& line) const;

  TrainerConfig config_;
  TrainOptions options_;
  ModelKind kind_ = ModelKind::kTreeLstm;
  Dataset data_;
  std::unique_ptr<vertex::Function> function_;
  std::unique_ptr<core::ParameterStore> store_;
  std::unique_ptr<scheduler::Engine> engine_;
  std::unique_ptr<core::Optimizer> optimizer_;
  core::Rng shuffle_rng_;
  int epochs_done_ = 0;
  std::vector<EpochRecord> curve_;
  double elapsed_before_ = 0.0;  // wall time of the runs this one resumes
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::string summary_json_;
};

// The dropout seed of global step `step` (0-based) of a run seeded with `seed`.
uint64_t StepDropoutSeed(uint64_t seed, int64_t step);

}  // namespace cavs::trainer
