// Trainer: the training loop of cavs-train.
//
// One run: load the data (dataset.h), build the model's vertex function (model_registry.h),
// the parameter store, the batched Engine and the optimizer; then per epoch shuffle the
// training samples (core::Rng), take one optimizer step per batch, evaluate the dev set in a
// fixed order (training=false, backward=false), print the epoch line, write ckpt-<epoch>.cavs
// atomically, then rewrite the JSON log and the CSV from the learning curve (which the
// checkpoint holds, so a resumed run never logs an epoch twice). A non-finite training loss
// stops the run before anything of its epoch is written. Every output path is checked before
// the data loads (output_files.h).
//
// Reproducibility: parameters are initialized from --seed; the shuffle order comes from an Rng
// whose state is saved in every checkpoint; each step's dropout seed is a function of --seed
// and the global step number. So a run resumed from a checkpoint ends with parameters
// bit-identical to those of an uninterrupted run with the same flags.
//
// Under mpirun (world size > 1; docs/trainer.md, "Distributed training"): every rank loads the
// same data, draws the same shuffle order and walks the same global batches; each global batch
// is split into contiguous per-rank slices (uneven, possibly empty), each rank runs its slice
// with the loss summed (RunOptions::Loss::kSum) and a distributed::GradientSynchronizer
// divides the summed gradients by the global labelled count. So N ranks take the step one
// process takes on the same global batch (up to float rounding; dropout masks differ). Every
// rank evaluates its shard of the dev and test sets and the metric counts are summed; rank 0
// alone prints, writes logs, curves and checkpoints. A checkpoint records the world size and is
// resumed only at the same one.
//
// The library never exits: every failure is a Status (InvalidArgument / NotFound /
// FailedPrecondition for user errors; DeadlineExceeded when a peer stops answering). Not
// thread-safe.
#pragma once

#include <chrono>
#include <functional>
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
#include "distributed/auto_strategy.h"
#include "distributed/communicator.h"
#include "distributed/step.h"
#include "distributed/synchronizer.h"
#include "examples/trainer/dataset.h"
#include "examples/trainer/metrics.h"
#include "examples/trainer/model_registry.h"
#include "examples/trainer/report.h"
#include "examples/trainer/trace.h"
#include "examples/trainer/trainer_config.h"
#include "scheduler/engine.h"
#include "scheduler/plan_queue.h"
#include "vertex/function.h"

namespace cavs::trainer {

struct TrainOptions {
  std::ostream* out = nullptr;  // epoch lines, notes and the SUMMARY line; null: silent
  bool progress = false;        // draw the progress bar on `out` (a terminal)
  // Printed on `out` before the first epoch (cavs-train: the kernel options its environment
  // override set); empty: nothing.
  std::string startup_line;
  // The ranks to train with (not owned; must outlive the Trainer). Null: the trainer makes its
  // own, MakeCommunicator("auto") with --comm-timeout (MPI under mpirun, else one process).
  distributed::Communicator* comm = nullptr;
  // Called after every optimizer step with the number of steps taken so far (tests).
  std::function<void(int64_t)> after_step;
};

class Trainer {
 public:
  // Checks the outputs (CheckOutputs), loads the data and builds the model, store, engine and
  // optimizer. With config.resume, restores the latest checkpoint of config.checkpoint_dir that
  // loads (none there: a fresh start), warning on `out` about newer files that do not; files of
  // which none loads are a DataLoss, a checkpoint written with other settings a
  // FailedPrecondition naming the setting.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Trainer>> Create(
      const TrainerConfig& config, const TrainOptions& options = {});

  // Trains the remaining epochs up to config.epochs, then evaluates the test set if any, on the
  // parameters of the best dev epoch and on the last epoch's, writes --save-best, the CSV, the
  // plot and the SUMMARY line; then (also after a failure) the trace. The store ends with the
  // last epoch's parameters.
  [[nodiscard]] absl::Status Run();

  // Evaluates `graphs` in fixed order without touching gradients. Under mpirun: collective;
  // each rank evaluates its contiguous shard and every rank gets the sums over all ranks.
  [[nodiscard]] absl::StatusOr<EvalMetrics> Evaluate(const std::vector<scheduler::Graph>& graphs);

  int rank() const { return comm_ != nullptr ? comm_->rank() : 0; }
  int world_size() const { return comm_ != nullptr ? comm_->world_size() : 1; }
  // Null in a single process.
  const distributed::GradientSynchronizer* synchronizer() const {
    return auto_ != nullptr ? auto_->synchronizer() : sync_.get();
  }
  // --strategy=auto's search (null otherwise).
  const distributed::AutoStrategy* auto_strategy() const { return auto_.get(); }
  // Traffic and counts of the last step (distributed runs).
  const distributed::StepStats& last_step_stats() const { return last_stats_; }
  const TraceRecorder& trace() const { return trace_; }

  const core::ParameterStore& store() const { return *store_; }
  // Evaluations (or, distributed, this rank's shares of them) run with the input projections
  // folded (--fold-eval).
  int64_t evaluations_folded() const { return evaluations_folded_; }
  const std::vector<EpochRecord>& curve() const { return curve_; }
  // The epoch whose parameters are kept as the best so far (0: none kept; they are kept only
  // with a test set or --save-best).
  int best_epoch_kept() const { return best_.epoch; }
  const Dataset& data() const { return data_; }
  int epochs_done() const { return epochs_done_; }
  // The SUMMARY line's JSON object (after Run).
  const std::string& summary_json() const { return summary_json_; }

 private:
  Trainer(const TrainerConfig& config, const TrainOptions& options)
      : config_(config),
        options_(options),
        shuffle_rng_(config.seed, kShuffleStream),
        trace_(!config.trace.empty(), 0) {}
  static constexpr uint64_t kShuffleStream = 0x5348554646ull;

  [[nodiscard]] absl::Status Build();
  [[nodiscard]] absl::Status RunEpochs();
  [[nodiscard]] absl::StatusOr<double> TrainEpoch(int epoch, double* trees_per_sec);
  [[nodiscard]] absl::StatusOr<EvalMetrics> EvaluateShard(
      const std::vector<scheduler::Graph>& graphs, size_t begin, size_t end);
  // Whether evaluating graphs [begin, end) folds the input projections (--fold-eval), folded
  // from the current parameters if so.
  [[nodiscard]] absl::StatusOr<bool> FoldForEval(const std::vector<scheduler::Graph>& graphs,
                                                 size_t begin, size_t end);
  // Host threads that plan batches ahead: --plan-threads, where -1 means none on the CPU (its
  // cores run the step) and min(4, cores - 1) on a GPU.
  int PlanThreads() const;
  // The batches of graphs[order[first..last)], `batch` at a time (with `rank_slice`, this
  // rank's slice of each: RankSlice), sliced and planned ahead by PlanThreads() threads.
  // `graphs` and `order` must outlive the queue.
  std::unique_ptr<scheduler::PlanQueue> QueueBatches(const std::vector<scheduler::Graph>& graphs,
                                                     const std::vector<size_t>& order, size_t first,
                                                     size_t last, size_t batch,
                                                     bool rank_slice = false) const;
  // trainer_distributed.cc: the communicator, strategy and synchronizer; one distributed
  // epoch and step; sums over ranks.
  [[nodiscard]] absl::Status SetUpDistributed();
  // One setting that every rank, and a resumed run, must share: the key a checkpoint stores it
  // under (trainer.config.<key>), its value, and what sets it, for error messages.
  struct Setting {
    std::string key;
    std::string value;
    std::string source;  // "--hidden"; "the training data (--train, --max-train, ...)"
  };
  // Everything that changes the parameters a run ends with (what a checkpoint records and a
  // resume must match), in the order errors name them.
  std::vector<Setting> ResultSettings() const;
  // Collective: every rank compares `settings` with rank 0's (a hash per setting, allgathered),
  // and every rank fails with a FailedPrecondition naming the first that differs.
  [[nodiscard]] absl::Status CheckRanksAgree(const std::vector<Setting>& settings);
  [[nodiscard]] absl::Status CheckSameRun();
  [[nodiscard]] absl::StatusOr<double> TrainEpochDistributed(int epoch, double* trees_per_sec);
  [[nodiscard]] absl::StatusOr<scheduler::RunResult> DistributedStep(scheduler::PlanQueue& queue);
  [[nodiscard]] absl::Status ReportAutoStrategy();
  // The run ended before --strategy=auto decided: decides from the trials so far (and reports),
  // or says what the run trained under.
  [[nodiscard]] absl::Status ConcludeAutoStrategy();
  // --profile-out, once --strategy=auto has profiled (rank 0).
  [[nodiscard]] absl::Status WriteAutoProfile();
  [[nodiscard]] absl::Status SumOverRanks(std::vector<double>* reals, std::vector<int64_t>* counts);
  bool distributed() const { return sync_ != nullptr || auto_ != nullptr; }
  bool is_chief() const { return rank() == 0; }
  [[nodiscard]] absl::Status FinishEpoch(EpochRecord record);
  // The parameters of the best dev epoch so far: host copies in the store's order, taken as an
  // epoch beats the one kept (every rank keeps them: all evaluate the test set). epoch 0: none.
  struct KeptParameters {
    int epoch = 0;
    double score = 0;  // DevScore
    std::vector<core::Tensor> values;
  };
  // Whether the run needs the best epoch's parameters at the end.
  bool KeepsBest() const { return !data_.test.empty() || !config_.save_best.empty(); }
  [[nodiscard]] absl::StatusOr<std::vector<core::Tensor>> CopyParameters() const;
  [[nodiscard]] absl::Status SetParameters(const std::vector<core::Tensor>& values);
  // trainer_checkpoint.cc: after --resume, the parameters of the best epoch so far, reloaded
  // from its checkpoint (where that fails, a warning: the best is then kept from the resumed
  // epochs on).
  [[nodiscard]] absl::Status ReloadBest();
  // trainer_checkpoint.cc: writes the store's parameters to --save-best as those of `epoch`.
  [[nodiscard]] absl::Status SaveBest(int epoch) const;
  // After the last epoch: the test set on the best epoch's parameters and on the last's,
  // --save-best, then WriteOutputs.
  [[nodiscard]] absl::Status FinishRun();
  [[nodiscard]] absl::Status Resume();
  // Whether the checkpoint `path`, whose metadata is `info`, was written with this run's
  // ResultSettings: a FailedPrecondition naming the first that differs. `warn`: say so where
  // the checkpoint predates the training data's fingerprint.
  [[nodiscard]] absl::Status CheckSettings(const std::string& path,
                                           const core::CheckpointInfo& info, bool warn) const;
  // The parameters of the checkpoint `path` of this run's epoch `epoch` (checked as --resume
  // checks), on the host in the store's order.
  [[nodiscard]] absl::StatusOr<std::vector<core::Tensor>> ReadParameters(const std::string& path,
                                                                         int epoch) const;
  // Rank 0, with --checkpoint-dir: removes the partial checkpoints of writers that died in the
  // middle of a write (core::RemoveStaleTemporaryFiles), saying so.
  [[nodiscard]] absl::Status RemoveStaleCheckpointFiles() const;
  [[nodiscard]] absl::Status SaveEpochCheckpoint() const;
  // The plot and the SUMMARY; `test` holds the test figures of `test_epoch`'s parameters (the
  // best dev epoch's), `last_test` those of the last epoch's where that is another epoch.
  [[nodiscard]] absl::Status WriteOutputs(int test_epoch, const EvalMetrics* test,
                                          const EvalMetrics* last_test);
  core::CheckpointMetadata ConfigMetadata() const;
  double Elapsed() const;
  // Prints `line` on options.out (rank 0); a failed write is remembered for OutputStatus.
  void Say(const std::string& line) const;
  // An Internal error once a line could not be written (a full disk, /dev/full).
  [[nodiscard]] absl::Status OutputStatus() const;

  TrainerConfig config_;
  TrainOptions options_;
  ModelKind kind_ = ModelKind::kTreeLstm;
  Dataset data_;
  std::unique_ptr<vertex::Function> function_;
  std::unique_ptr<core::ParameterStore> store_;
  int64_t evaluations_folded_ = 0;
  std::unique_ptr<scheduler::Engine> engine_;
  std::unique_ptr<core::Optimizer> optimizer_;
  std::unique_ptr<distributed::Communicator> owned_comm_;
  distributed::Communicator* comm_ = nullptr;
  std::unique_ptr<distributed::GradientSynchronizer> sync_;
  std::unique_ptr<distributed::DataParallelStep> step_;  // the step under mpirun
  std::unique_ptr<distributed::AutoStrategy> auto_;      // --strategy=auto, instead of the two
  distributed::StepStats last_stats_;
  core::Rng shuffle_rng_;
  TraceRecorder trace_;
  int epochs_done_ = 0;
  std::vector<EpochRecord> curve_;
  KeptParameters best_;
  double elapsed_before_ = 0.0;  // wall time of the runs this one resumes
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::string summary_json_;
  mutable int out_error_ = 0;  // errno of the first failed write to options.out
};

// The dropout seed of global step `step` (0-based) of a run seeded with `seed`.
uint64_t StepDropoutSeed(uint64_t seed, int64_t step);

// The slice [first, last) of the global batch [begin, end) that rank `rank` of `world_size`
// runs: contiguous, in rank order, sizes differing by at most one (the first ranks get the
// extra samples; ranks past the batch's size get none).
std::pair<size_t, size_t> RankSlice(size_t begin, size_t end, int rank, int world_size);

// The rank an MPI launcher gave this process, or -1 (distributed/communicator.h).
using distributed::LauncherRank;

}  // namespace cavs::trainer
