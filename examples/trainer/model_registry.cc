#include "examples/trainer/model_registry.h"

#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cavs::trainer {
namespace {

struct Entry {
  ModelKind kind;
  const char* name;
};
constexpr Entry kModels[] = {
    {ModelKind::kTreeLstm, "tree-lstm"}, {ModelKind::kChildSumTreeLstm, "child-sum-tree-lstm"},
    {ModelKind::kTreeFc, "tree-fc"},     {ModelKind::kTreeGru, "tree-gru"},
    {ModelKind::kLstmLm, "lstm-lm"},     {ModelKind::kGruLm, "gru-lm"},
};

}  // namespace

const char* ModelKindName(ModelKind kind) {
  for (const Entry& e : kModels) {
    if (e.kind == kind) return e.name;
  }
  return "?";
}

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  for (const Entry& e : kModels) names.push_back(e.name);
  return names;
}

absl::StatusOr<ModelKind> ParseModelKind(absl::string_view name) {
  for (const Entry& e : kModels) {
    if (name == e.name) return e.kind;
  }
  return absl::InvalidArgumentError(absl::StrCat("--model: unknown model '", name,
                                                 "'; known: ", absl::StrJoin(ModelNames(), ", ")));
}

bool IsLanguageModel(ModelKind kind) {
  return kind == ModelKind::kLstmLm || kind == ModelKind::kGruLm;
}

absl::StatusOr<vertex::Function> MakeModel(ModelKind kind, const vertex::models::CellConfig& cell) {
  namespace m = vertex::models;
  switch (kind) {
    case ModelKind::kTreeLstm:
      return m::BinaryTreeLstm(cell);
    case ModelKind::kChildSumTreeLstm:
      return m::ChildSumTreeLstm(cell, /*max_children=*/2);
    case ModelKind::kTreeFc:
      return m::TreeFc(cell);
    case ModelKind::kTreeGru:
      return m::TreeGru(cell);
    case ModelKind::kLstmLm:
      return m::Lstm(cell);
    case ModelKind::kGruLm:
      return m::Gru(cell);
  }
  return absl::InternalError("unhandled model kind");
}

}  // namespace cavs::trainer
