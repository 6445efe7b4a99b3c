// SavedModel: a model as cavs-train saved it, loaded for inference from one checkpoint file.
//
// A cavs-train checkpoint (or --save-best file) records the model's name and sizes under
// trainer.config.* and, since serving exists, its vocabulary under trainer.vocabulary
// (docs/checkpoint.md). LoadSavedModel rebuilds the vertex function from them, creates its
// parameters on the device and restores them: nothing else (no data file, no flags) is needed.
// Checkpoints written before the vocabulary was recorded are refused with a message saying so.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/device.h"
#include "core/parameter.h"
#include "examples/data/vocabulary.h"
#include "examples/trainer/model_registry.h"
#include "vertex/function.h"
#include "vertex/models.h"

namespace cavs::trainer {

// Metadata keys of cavs-train's checkpoints that a reader of the model needs.
inline constexpr char kCheckpointConfigPrefix[] = "trainer.config.";
inline constexpr char kCheckpointVocabularyKey[] = "trainer.vocabulary";

struct SavedModel {
  std::string path;  // the checkpoint file read
  int64_t step = 0;  // its step (cavs-train: the epoch)
  ModelKind kind = ModelKind::kTreeLstm;
  vertex::models::CellConfig cell;
  examples::Vocabulary vocabulary;
  std::unique_ptr<vertex::Function> function;
  std::unique_ptr<core::ParameterStore> store;  // the function's parameters on `device`
};

// Loads `path`: a checkpoint file, or a directory whose newest checkpoint that verifies is
// taken (core::LatestCheckpoint). Errors: NotFound (no file), DataLoss (a damaged file, a
// vocabulary that does not match the recorded hash, a parameter that is not finite),
// FailedPrecondition (not a cavs-train checkpoint, or one without a vocabulary).
[[nodiscard]] absl::StatusOr<SavedModel> LoadSavedModel(const std::string& path,
                                                        core::Device device);

}  // namespace cavs::trainer
