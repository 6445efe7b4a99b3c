// Trainer's checkpoints: what must match for a resume, what is restored.
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status.h"
#include "examples/trainer/trainer.h"

namespace cavs::trainer {
namespace {

constexpr char kEpochKey[] = "trainer.epoch";
constexpr char kRngKey[] = "trainer.shuffle_rng";
constexpr char kCurveKey[] = "trainer.curve";
constexpr char kElapsedKey[] = "trainer.elapsed_seconds";
// The number of ranks that wrote it (absent in checkpoints of single-process runs before
// distributed training existed: 1).
constexpr char kWorldSizeKey[] = "trainer.world_size";
constexpr char kConfigPrefix[] = "trainer.config.";

}  // namespace

// Everything that changes the parameters a run ends with; a resume must match all of it.
core::CheckpointMetadata Trainer::ConfigMetadata() const {
  const TrainerConfig& c = config_;
  core::CheckpointMetadata m = {
      {"model", c.model},
      {"hidden", absl::StrCat(c.hidden)},
      {"embed", absl::StrCat(c.embed)},
      {"classes", absl::StrCat(data_.classes)},
      {"vocab_size", absl::StrCat(data_.vocab_size)},
      {"vocab_hash", absl::StrFormat("%016x", data_.vocab_hash)},
      {"train_samples", absl::StrCat(data_.train.size())},
      {"batch", absl::StrCat(c.batch)},
      {"optimizer", c.optimizer},
      {"lr", absl::StrCat(c.lr)},
      {"weight_decay", absl::StrCat(c.weight_decay)},
      {"clip", absl::StrCat(c.clip)},
      {"dropout", absl::StrCat(c.dropout)},
      {"seed", absl::StrCat(c.seed)},
  };
  core::CheckpointMetadata out;
  for (auto& [k, v] : m) out[kConfigPrefix + k] = v;
  return out;
}

absl::Status Trainer::SaveEpochCheckpoint() const {
  std::error_code error;
  std::filesystem::create_directories(config_.checkpoint_dir, error);
  if (error) {
    return absl::InvalidArgumentError(absl::StrCat("--checkpoint-dir: cannot create ",
                                                   config_.checkpoint_dir, ": ", error.message()));
  }
  core::CheckpointMetadata m = ConfigMetadata();
  m[kEpochKey] = absl::StrCat(epochs_done_);
  m[kRngKey] = shuffle_rng_.State();
  m[kElapsedKey] = absl::StrCat(Elapsed());
  m[kWorldSizeKey] = absl::StrCat(world_size());
  std::string curve;
  for (const EpochRecord& r : curve_)
    absl::StrAppend(&curve, CsvRow(r, data_.language_model), "\n");
  m[kCurveKey] = curve;
  return core::SaveCheckpoint(core::CheckpointPath(config_.checkpoint_dir, epochs_done_), *store_,
                              optimizer_.get(), epochs_done_, m);
}

absl::Status Trainer::Resume() {
  std::vector<absl::Status> skipped;
  absl::StatusOr<std::string> path = core::LatestCheckpoint(config_.checkpoint_dir, &skipped);
  if (absl::IsNotFound(path.status())) {
    Say(absl::StrCat("no checkpoint in ", config_.checkpoint_dir, ": starting from scratch"));
    return absl::OkStatus();
  }
  // Files there but none that loads (DataLoss): an error, so that nothing overwrites them.
  if (!path.ok()) {
    return absl::Status(path.status().code(), absl::StrCat("--resume: ", path.status().message(),
                                                           " (move them away to start afresh)"));
  }
  // A newer file that does not load is worth knowing about before training resumes from an
  // older one (and, epoch by epoch, writes over it).
  for (const absl::Status& s : skipped) {
    Say(absl::StrCat("warning: --resume: skipping ", s.message()));
  }
  CAVS_ASSIGN_OR_RETURN(core::CheckpointInfo info, core::ReadCheckpointMetadata(*path));
  auto ranks = info.metadata.find(kWorldSizeKey);
  const std::string written = ranks == info.metadata.end() ? "1" : ranks->second;
  if (written != absl::StrCat(world_size())) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot resume from ", *path, ": it was written by a run of ", written,
                     " rank(s), this run has ", world_size(),
                     " (resume with the same number of ranks, or use another --checkpoint-dir)"));
  }
  for (const auto& [key, want] : ConfigMetadata()) {
    auto it = info.metadata.find(key);
    std::string name = key.substr(sizeof(kConfigPrefix) - 1);
    if (it == info.metadata.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat(*path, ": not a cavs-train checkpoint (no ", name, ")"));
    }
    if (it->second != want) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot resume from ", *path, ": it was written with ", name, "=", it->second,
          ", this run has ", name, "=", want, " (use the same flags or another --checkpoint-dir)"));
    }
  }
  int epoch = 0;
  double elapsed = 0;
  if (!absl::SimpleAtoi(info.metadata[kEpochKey], &epoch) ||
      !absl::SimpleAtod(info.metadata[kElapsedKey], &elapsed)) {
    return absl::FailedPreconditionError(absl::StrCat(*path, ": bad epoch or elapsed time"));
  }
  CAVS_ASSIGN_OR_RETURN(core::Rng rng, core::Rng::FromState(info.metadata[kRngKey]));
  CAVS_ASSIGN_OR_RETURN(auto curve, ParseCsvRows(info.metadata[kCurveKey], data_.language_model));
  CAVS_RETURN_IF_ERROR(core::LoadCheckpoint(*path, *store_, optimizer_.get()).status());
  shuffle_rng_ = rng;
  epochs_done_ = epoch;
  elapsed_before_ = elapsed;
  curve_ = std::move(curve);
  Say(absl::StrCat("resumed from ", *path, " (epoch ", epoch, ", step ", optimizer_->step(), ")"));
  return absl::OkStatus();
}

}  // namespace cavs::trainer
