// Trainer's checkpoints: what must match for a resume, what is restored.
#include <cmath>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/initializer.h"
#include "core/status.h"
#include "examples/trainer/saved_model.h"
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
constexpr const char* kConfigPrefix = kCheckpointConfigPrefix;  // saved_model.h
// "best" in a --save-best file: parameters only, no optimizer state, not for --resume.
constexpr char kSavedAsKey[] = "trainer.saved_as";

// What a checkpoint says about where the run stands, checked.
struct ResumeState {
  int epoch = 0;
  double elapsed = 0;
  core::Rng rng{0, 0};
  std::vector<EpochRecord> curve;
};

absl::Status Corrupt(const std::string& path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat("checkpoint ", path, ": ", what));
}

// The trainer's metadata of `info`, the checkpoint at `path`: the epoch (at least 1, the file's
// step, one learning-curve row each), the elapsed time (finite, >= 0), the shuffling Rng.
absl::StatusOr<ResumeState> ReadResumeState(const std::string& path, core::CheckpointInfo& info,
                                            bool language_model) {
  ResumeState st;
  const std::string& epoch = info.metadata[kEpochKey];
  if (!absl::SimpleAtoi(epoch, &st.epoch) || st.epoch < 1 || st.epoch != info.step) {
    return Corrupt(path, absl::StrCat(kEpochKey, " is '", epoch,
                                      "', not an epoch >= 1 equal to the file's step ", info.step));
  }
  const std::string& elapsed = info.metadata[kElapsedKey];
  if (!absl::SimpleAtod(elapsed, &st.elapsed) || !std::isfinite(st.elapsed) || st.elapsed < 0) {
    return Corrupt(path, absl::StrCat(kElapsedKey, " is '", elapsed, "', not a finite time >= 0"));
  }
  absl::StatusOr<core::Rng> rng = core::Rng::FromState(info.metadata[kRngKey]);
  if (!rng.ok()) return Corrupt(path, absl::StrCat(kRngKey, ": ", rng.status().message()));
  st.rng = *rng;
  absl::StatusOr<std::vector<EpochRecord>> curve =
      ParseCsvRows(info.metadata[kCurveKey], language_model);
  if (!curve.ok()) return Corrupt(path, absl::StrCat(kCurveKey, ": ", curve.status().message()));
  if (curve->size() != static_cast<size_t>(st.epoch)) {
    return Corrupt(
        path, absl::StrCat(kCurveKey, " has ", curve->size(), " rows for ", st.epoch, " epoch(s)"));
  }
  st.curve = *std::move(curve);
  return st;
}

// The first element of `t` that `bad` rejects, as " (x at element i)", or "" if none.
std::string FirstBad(const core::Tensor& t, bool (*bad)(float)) {
  const std::vector<float> v = t.ToVector();
  for (size_t i = 0; i < v.size(); ++i) {
    if (bad(v[i])) return absl::StrCat(" (", v[i], " at element ", i, ")");
  }
  return "";
}

// The values a checkpoint loaded into `store` and `optimizer`: parameters and optimizer state
// finite, and the state that is a sum of squares (Adagrad's accumulator, Adam's second moment)
// not negative, where a square root is taken of it.
absl::Status CheckLoadedValues(const std::string& path, const core::ParameterStore& store,
                               const core::Optimizer* optimizer) {
  auto not_finite = [](float x) { return !std::isfinite(x); };
  auto negative = [](float x) { return x < 0; };
  for (const auto& p : store.parameters()) {
    if (std::string bad = FirstBad(p->value, not_finite); !bad.empty()) {
      return Corrupt(path, absl::StrCat("parameter '", p->name, "' is not finite", bad));
    }
  }
  if (optimizer == nullptr) return absl::OkStatus();
  for (const auto& [name, tensor] : optimizer->StateTensors()) {
    if (std::string bad = FirstBad(tensor, not_finite); !bad.empty()) {
      return Corrupt(path, absl::StrCat("optimizer state '", name, "' is not finite", bad));
    }
    const bool squares = absl::EndsWith(name, "/adagrad_accum") || absl::EndsWith(name, "/adam_v");
    if (std::string bad = squares ? FirstBad(tensor, negative) : ""; !bad.empty()) {
      return Corrupt(
          path, absl::StrCat("optimizer state '", name, "', a sum of squares, is negative", bad));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<Trainer::Setting> Trainer::ResultSettings() const {
  const TrainerConfig& c = config_;
  constexpr char kData[] = " (--train, --max-train, --dev-fraction, --min-count, --format)";
  return {
      {"model", c.model, "--model"},
      {"hidden", absl::StrCat(c.hidden), "--hidden"},
      {"embed", absl::StrCat(c.embed), "--embed"},
      {"batch", absl::StrCat(c.batch), "--batch"},
      {"optimizer", c.optimizer, "--optimizer"},
      {"lr", absl::StrCat(c.lr), "--lr"},
      {"weight_decay", absl::StrCat(c.weight_decay), "--weight-decay"},
      {"clip", absl::StrCat(c.clip), "--clip"},
      {"dropout", absl::StrCat(c.dropout), "--dropout"},
      {"seed", absl::StrCat(c.seed), "--seed"},
      {"classes", absl::StrCat(data_.classes), absl::StrCat("the number of classes", kData)},
      {"vocab_size", absl::StrCat(data_.vocab_size), absl::StrCat("the vocabulary size", kData)},
      {"vocab_hash", absl::StrFormat("%016x", data_.vocab_hash),
       absl::StrCat("the vocabulary", kData)},
      {"train_samples", absl::StrCat(data_.train.size()),
       absl::StrCat("the number of training samples", kData)},
      {"train_hash", absl::StrFormat("%016x", data_.train_hash),
       absl::StrCat("the training data", kData)},
  };
}

core::CheckpointMetadata Trainer::ConfigMetadata() const {
  core::CheckpointMetadata out;
  for (const Setting& s : ResultSettings()) out[kConfigPrefix + s.key] = s.value;
  // The vocabulary, so that a checkpoint alone can serve (saved_model.h). Not a setting that a
  // resume compares: vocab_hash guards that.
  out[kCheckpointVocabularyKey] = data_.vocabulary.ToText();
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

absl::Status Trainer::RemoveStaleCheckpointFiles() const {
  absl::StatusOr<std::vector<std::string>> removed =
      core::RemoveStaleTemporaryFiles(config_.checkpoint_dir);
  if (!removed.ok()) {
    return absl::Status(removed.status().code(),
                        absl::StrCat("--checkpoint-dir: ", removed.status().message()));
  }
  for (const std::string& path : *removed) {
    Say(absl::StrCat("removed ", path,
                     ": a partial checkpoint left by a process that died while writing it"));
  }
  return absl::OkStatus();
}

absl::Status Trainer::CheckSettings(const std::string& path, const core::CheckpointInfo& info,
                                    bool warn) const {
  for (const Setting& s : ResultSettings()) {
    auto it = info.metadata.find(kConfigPrefix + s.key);
    if (it == info.metadata.end() && s.key == "train_hash") {
      // Written before checkpoints recorded the data: the sizes and the vocabulary still match.
      if (warn)
        Say(absl::StrCat(
            "warning: --resume: ", path,
            " does not record its training data; cannot check that --train is the same"));
      continue;
    }
    if (it == info.metadata.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": not a cavs-train checkpoint (no ", s.key, ")"));
    }
    if (it->second != s.value) {
      // A flag's values say it all; data differs in ways only its flags can hint at.
      const std::string hint =
          absl::StartsWith(s.source, "--")
              ? "use the same flags"
              : absl::StrCat(s.source, " differs: use the same files and flags");
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot resume from ", path, ": it was written with ", s.key, "=", it->second,
          ", this run has ", s.key, "=", s.value, " (", hint, " or another --checkpoint-dir)"));
    }
  }
  return absl::OkStatus();
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
  CAVS_RETURN_IF_ERROR(CheckSettings(*path, info, /*warn=*/true));
  CAVS_ASSIGN_OR_RETURN(ResumeState state, ReadResumeState(*path, info, data_.language_model));
  CAVS_RETURN_IF_ERROR(core::LoadCheckpoint(*path, *store_, optimizer_.get()).status());
  // A hand-made or damaged file can carry a valid checksum; garbage values must not train on.
  CAVS_RETURN_IF_ERROR(CheckLoadedValues(*path, *store_, optimizer_.get()));
  shuffle_rng_ = state.rng;
  epochs_done_ = state.epoch;
  elapsed_before_ = state.elapsed;
  curve_ = std::move(state.curve);
  Say(absl::StrCat("resumed from ", *path, " (epoch ", state.epoch, ", step ", optimizer_->step(),
                   ")"));
  return ReloadBest();
}

absl::StatusOr<std::vector<core::Tensor>> Trainer::ReadParameters(const std::string& path,
                                                                  int epoch) const {
  CAVS_ASSIGN_OR_RETURN(core::CheckpointInfo info, core::ReadCheckpointMetadata(path));
  CAVS_RETURN_IF_ERROR(CheckSettings(path, info, /*warn=*/false));
  if (info.step != epoch) {
    return Corrupt(path, absl::StrCat("holds epoch ", info.step, ", not epoch ", epoch));
  }
  core::ParameterStore scratch(config_.seed, core::Device::Cpu());
  for (const auto& p : store_->parameters()) {
    CAVS_RETURN_IF_ERROR(
        scratch.GetOrCreate(p->name, p->value.shape(), core::Initializer::Zeros(), p->sparse_grad)
            .status());
  }
  CAVS_RETURN_IF_ERROR(core::LoadCheckpoint(path, scratch, nullptr).status());
  CAVS_RETURN_IF_ERROR(CheckLoadedValues(path, scratch, nullptr));
  std::vector<core::Tensor> values;
  for (const auto& p : scratch.parameters()) values.push_back(p->value);  // shares the storage
  return values;
}

absl::Status Trainer::ReloadBest() {
  if (!KeepsBest() || curve_.empty()) return absl::OkStatus();
  const EpochRecord& best = BestEpoch(curve_, data_.language_model);
  if (best.epoch == epochs_done_) {  // the parameters just resumed
    CAVS_ASSIGN_OR_RETURN(best_.values, CopyParameters());
  } else {
    const std::string path = core::CheckpointPath(config_.checkpoint_dir, best.epoch);
    absl::StatusOr<std::vector<core::Tensor>> values = ReadParameters(path, best.epoch);
    if (!values.ok()) {
      Say(absl::StrCat(
          "warning: --resume: cannot reload the parameters of the best dev epoch so "
          "far, ",
          best.epoch, ": ", values.status().message(), "; --test and --save-best ",
          epochs_done_ < config_.epochs
              ? absl::StrCat("take the best epoch from epoch ", epochs_done_ + 1, " on")
              : "take the last epoch's parameters"));
      return absl::OkStatus();
    }
    best_.values = *std::move(values);
  }
  best_.epoch = best.epoch;
  best_.score = DevScore(best, data_.language_model);
  return absl::OkStatus();
}

absl::Status Trainer::SaveBest(int epoch) const {
  if (config_.save_best.empty() || !is_chief()) return absl::OkStatus();
  core::CheckpointMetadata m = ConfigMetadata();
  m[kEpochKey] = absl::StrCat(epoch);
  m[kSavedAsKey] = "best";
  absl::Status s = core::SaveCheckpoint(config_.save_best, *store_, nullptr, epoch, m);
  return s.ok() ? s : core::Prefixed("--save-best", s);
}

}  // namespace cavs::trainer
