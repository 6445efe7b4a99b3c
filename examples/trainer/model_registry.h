// The models cavs-train knows, by command-line name, built from vertex/models.h cells.
//
// Tree models read SST trees (5 classes per node); language models read sentences as chains
// and predict the next token at every vertex (classes = vocabulary size).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "vertex/function.h"
#include "vertex/models.h"

namespace cavs::trainer {

enum class ModelKind { kTreeLstm, kChildSumTreeLstm, kTreeFc, kTreeGru, kLstmLm, kGruLm };

// "tree-lstm", ...; and the inverse, whose error lists the known names.
const char* ModelKindName(ModelKind kind);
[[nodiscard]] absl::StatusOr<ModelKind> ParseModelKind(absl::string_view name);
std::vector<std::string> ModelNames();

// Language models train on chains and are scored by perplexity.
bool IsLanguageModel(ModelKind kind);

// The vertex function of `kind` for `cell`. Child-sum cells read up to 2 children (SST trees
// are binarized by the reader).
[[nodiscard]] absl::StatusOr<vertex::Function> MakeModel(ModelKind kind,
                                                         const vertex::models::CellConfig& cell);

}  // namespace cavs::trainer
