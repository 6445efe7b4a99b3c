#include "examples/trainer/saved_model.h"

#include <cmath>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/checkpoint.h"
#include "core/random.h"
#include "core/status.h"
#include "scheduler/executor_common.h"

namespace cavs::trainer {
namespace {

// The value of trainer.config.<key>, or FailedPrecondition naming the file.
absl::StatusOr<std::string> ConfigValue(const std::string& path, const core::CheckpointInfo& info,
                                        const std::string& key) {
  auto it = info.metadata.find(kCheckpointConfigPrefix + key);
  if (it == info.metadata.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": not a cavs-train checkpoint (no ", key, ")"));
  }
  return it->second;
}

absl::StatusOr<int64_t> ConfigInt(const std::string& path, const core::CheckpointInfo& info,
                                  const std::string& key, int64_t lo, int64_t hi) {
  CAVS_ASSIGN_OR_RETURN(std::string text, ConfigValue(path, info, key));
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < lo || v > hi) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, ": ", key, " is '", text,
                                            "', not an integer in [", lo, ", ", hi, "]"));
  }
  return v;
}

absl::StatusOr<std::string> ResolvePath(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return path;
  return core::LatestCheckpoint(path);
}

// Reads the model's description from `info` into `m` (no parameters yet).
absl::Status ReadDescription(const core::CheckpointInfo& info, SavedModel* m) {
  const std::string& path = m->path;
  CAVS_ASSIGN_OR_RETURN(std::string model, ConfigValue(path, info, "model"));
  CAVS_ASSIGN_OR_RETURN(m->kind, ParseModelKind(model));
  constexpr int64_t kMaxWidth = int64_t{1} << 24;
  CAVS_ASSIGN_OR_RETURN(m->cell.hidden, ConfigInt(path, info, "hidden", 1, kMaxWidth));
  CAVS_ASSIGN_OR_RETURN(m->cell.embed, ConfigInt(path, info, "embed", 1, kMaxWidth));
  CAVS_ASSIGN_OR_RETURN(m->cell.classes, ConfigInt(path, info, "classes", 1, int64_t{1} << 31));
  CAVS_ASSIGN_OR_RETURN(m->cell.vocab, ConfigInt(path, info, "vocab_size", 1, int64_t{1} << 31));
  CAVS_ASSIGN_OR_RETURN(std::string dropout, ConfigValue(path, info, "dropout"));
  double p = 0;
  if (!absl::SimpleAtod(dropout, &p) || !(p >= 0 && p < 1)) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path, ": dropout is '", dropout, "', not in [0, 1)"));
  }
  m->cell.dropout = static_cast<float>(p);
  auto words = info.metadata.find(kCheckpointVocabularyKey);
  if (words == info.metadata.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path,
                     " holds no vocabulary: it was written by a cavs-train from before checkpoints "
                     "recorded one; train again (or resume it for one more epoch) to serve it"));
  }
  CAVS_ASSIGN_OR_RETURN(m->vocabulary,
                        examples::Vocabulary::FromText(words->second, kCheckpointVocabularyKey));
  CAVS_ASSIGN_OR_RETURN(std::string hash, ConfigValue(path, info, "vocab_hash"));
  // The trainer's guard: FNV-1a over the words in id order, each followed by a newline.
  if (m->vocabulary.size() != m->cell.vocab ||
      hash != absl::StrFormat("%016x", core::HashName(words->second))) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, ": the vocabulary (",
                                            m->vocabulary.size(),
                                            " words) does not match its recorded size and hash"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SavedModel> LoadSavedModel(const std::string& path, core::Device device) {
  SavedModel m;
  CAVS_ASSIGN_OR_RETURN(m.path, ResolvePath(path));
  CAVS_ASSIGN_OR_RETURN(core::CheckpointInfo info, core::ReadCheckpointMetadata(m.path));
  m.step = info.step;
  CAVS_RETURN_IF_ERROR(ReadDescription(info, &m));
  absl::StatusOr<vertex::Function> f = MakeModel(m.kind, m.cell);
  if (!f.ok()) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", m.path, ": cannot build its model: ", f.status().message()));
  }
  m.function = std::make_unique<vertex::Function>(*std::move(f));
  m.store = std::make_unique<core::ParameterStore>(/*seed=*/0, device);
  CAVS_RETURN_IF_ERROR(scheduler::CreateParameters(*m.function, m.store.get()));
  CAVS_RETURN_IF_ERROR(core::LoadCheckpoint(m.path, *m.store, nullptr).status());
  for (const auto& p : m.store->parameters()) {
    for (float x : p->value.ToVector()) {
      if (!std::isfinite(x)) {
        return absl::DataLossError(
            absl::StrCat("checkpoint ", m.path, ": parameter '", p->name, "' is not finite"));
      }
    }
  }
  return m;
}

}  // namespace cavs::trainer
