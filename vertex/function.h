// Function: a traced vertex function with its derived backward — what Define() returns.
//
// Define(name, body) runs `body` once on a tracing Vertex, infers every shape, classifies every
// op (pre / recurrent / post), and derives the backward symbolically. It fails with a Status
// naming the function, the op and both shapes on any mismatch; a Function that exists is
// well-formed, so executors never meet a shape error at run time.
//
// A Function is an immutable value: share it freely across threads.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "vertex/autodiff.h"
#include "vertex/builder.h"
#include "vertex/infer.h"
#include "vertex/ir.h"

namespace cavs::vertex {

struct ParamInfo {
  std::string name;
  core::Shape shape;
  core::Initializer init;
  bool sparse_grad = false;  // an embedding table: row-sparse gradient
};

class Function {
 public:
  const std::string& name() const { return name_; }
  // The forward program and its derived backward.
  const Program& forward() const { return forward_; }
  const Program& backward() const { return backward_; }
  // The fields the vertex exposes to its parents, in scatter order.
  const std::vector<ScatterField>& scatter() const { return scatter_; }
  // The index in scatter() of the field `name`, or -1.
  int FieldIndex(const std::string& name) const {
    for (size_t i = 0; i < scatter_.size(); ++i) {
      if (scatter_[i].name == name) return static_cast<int>(i);
    }
    return -1;
  }
  // Forward node ids of the pushed outputs (push 0 feeds the loss).
  const std::vector<int>& pushes() const { return pushes_; }
  const std::vector<ParamInfo>& params() const { return params_; }
  // The most child slots the function reads through gather(k); -1 if it reduces over all
  // children (any arity). Graphs whose vertices have more children are rejected.
  int max_arity() const { return max_arity_; }
  // The pulled feature width, or 0 if the function pulls no features.
  int64_t pull_width() const { return pull_width_; }
  // True if some op uses the vertex's token (an embedding lookup).
  bool uses_tokens() const { return uses_tokens_; }
  // The embedding tables' vocabulary size: tokens must be below it (0 if none).
  int64_t vocab_size() const { return vocab_size_; }

  // One line per op: id, op, inputs, shape, class.
  std::string DebugString() const;
  // Graphviz DOT of the forward program (solid) and the backward (dashed, in a cluster).
  std::string ToDot() const;

 private:
  friend absl::StatusOr<Function> Define(std::string name, std::function<void(Vertex&)> body);
  std::string name_;
  Program forward_, backward_;
  std::vector<ScatterField> scatter_;
  std::vector<int> pushes_;
  std::vector<ParamInfo> params_;
  int max_arity_ = 0;
  int64_t pull_width_ = 0;
  bool uses_tokens_ = false;
  int64_t vocab_size_ = 0;
};

namespace internal {

inline std::string NodeLine(const Program& p, int id, bool backward) {
  const Node& n = p.nodes[id];
  std::vector<std::string> in;
  for (int i : n.inputs) in.push_back(absl::StrCat("%", i));
  std::string attr;
  if (!n.name.empty()) absl::StrAppend(&attr, " '", n.name, "'");
  if (!n.field.empty()) absl::StrAppend(&attr, " field=", n.field);
  if (n.kind == OpKind::kGather || n.kind == OpKind::kGatherGrad) {
    absl::StrAppend(&attr, " child=", n.index);
  }
  if (n.kind == OpKind::kSlice || n.kind == OpKind::kPadSlice) {
    absl::StrAppend(&attr, " [", n.begin, ":", n.end, "]");
  }
  if (n.kind == OpKind::kForwardValue) absl::StrAppend(&attr, " of %", n.index);
  if (n.transpose) absl::StrAppend(&attr, " transposed");
  return absl::StrCat("  %", id, " = ", OpKindName(n.kind), "(", absl::StrJoin(in, ", "), ")", attr,
                      " ", ShapeOf(n), " ", OpClassName(n.op_class, backward), "\n");
}

inline void CollectFacts(const Program& p, std::vector<ParamInfo>* params, int* max_arity,
                         int64_t* pull_width, bool* tokens, int64_t* vocab) {
  for (const Node& n : p.nodes) {
    if (n.kind == OpKind::kParam) {
      params->push_back({n.name, n.param_shape, n.init, n.sparse_grad});
      if (n.sparse_grad) *vocab = std::max(*vocab, n.param_shape[0]);
    }
    if (n.kind == OpKind::kGather && *max_arity >= 0) {
      // index < kMaxChildSlots (Vertex::gather), so index + 1 fits an int.
      *max_arity = std::max(*max_arity, static_cast<int>(n.index + 1));
    }
    if (n.kind == OpKind::kGatherReduce) *max_arity = -1;
    if (n.kind == OpKind::kPull) *pull_width = n.width;
    if (n.kind == OpKind::kEmbed) *tokens = true;
  }
}

// An embedding table has a row-sparse gradient and no dense one, so the executors cannot also
// use it as a dense operand (a MatMul weight, a broadcast row): reject a parameter that is
// both, naming it and both uses. Checked before pruning, because embed() marks the table
// sparse even when the lookup itself is dead code.
inline absl::Status CheckEmbeddingTables(const std::string& function, const Program& p) {
  for (int id = 0; id < static_cast<int>(p.nodes.size()); ++id) {
    const Node& n = p.nodes[id];
    if (n.kind == OpKind::kEmbed) continue;
    for (int in : n.inputs) {
      const Node& t = p.nodes[in];
      if (t.kind != OpKind::kParam || !t.sparse_grad) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "vertex function '", function, "': parameter '", t.name,
          "' is used both as an embedding table (embed) and as a dense operand of ",
          OpKindName(n.kind), " (op #", id, "); give the two uses separate parameters"));
    }
  }
  return absl::OkStatus();
}

}  // namespace internal

// Traces `body` into a Function (see the file comment). Ops must be called on the thread
// that runs `body`; Defines may nest, each op belonging to the innermost.
[[nodiscard]] inline absl::StatusOr<Function> Define(std::string name,
                                                     std::function<void(Vertex&)> body) {
  internal::Builder b;
  {
    internal::BuilderScope scope(&b);
    Vertex v(&b);
    body(v);
  }
  auto fail = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(s.message()));
  };
  if (!b.error.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("vertex function '", name, "': ", b.error.message()));
  }
  if (b.pushes.empty() && b.scatter.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("vertex function '", name, "' neither scatters nor pushes anything"));
  }
  absl::Status s = internal::CheckEmbeddingTables(name, b.program);
  if (!s.ok()) return s;
  s = internal::InferWidths(name, b.scatter, b.program);
  if (!s.ok()) return fail(s);
  Function f;
  f.name_ = std::move(name);
  f.forward_ = std::move(b.program);
  f.scatter_ = std::move(b.scatter);
  f.pushes_ = std::move(b.pushes);
  {  // drop what neither the scatter nor a push reads
    std::vector<char> roots(f.forward_.nodes.size(), 0);
    for (const ScatterField& sf : f.scatter_) roots[sf.node] = 1;
    for (int p : f.pushes_) roots[p] = 1;
    const std::vector<int> remap = internal::Prune(f.forward_, roots);
    for (ScatterField& sf : f.scatter_) sf.node = remap[sf.node];
    for (int& p : f.pushes_) p = remap[p];
  }
  std::vector<char> scattered(f.forward_.nodes.size(), 0);
  for (const ScatterField& sf : f.scatter_) scattered[sf.node] = 1;
  internal::Classify(
      f.forward_,
      [&](int id) {
        const OpKind k = f.forward_.nodes[id].kind;
        return k == OpKind::kGather || k == OpKind::kGatherReduce;
      },
      [&](int id) { return scattered[id] != 0; });
  f.backward_ = internal::Differentiator(f.forward_, f.scatter_, f.pushes_).Run();
  {
    std::vector<char> sinks(f.backward_.nodes.size(), 0);
    for (size_t id = 0; id < sinks.size(); ++id) sinks[id] = IsSink(f.backward_.nodes[id].kind);
    internal::Prune(f.backward_, sinks);
  }
  s = internal::InferWidths(f.name_, f.scatter_, f.backward_);
  if (!s.ok()) return fail(s);
  internal::Classify(
      f.backward_, [&](int id) { return f.backward_.nodes[id].kind == OpKind::kScatterGrad; },
      [&](int id) {
        const OpKind k = f.backward_.nodes[id].kind;
        return k == OpKind::kGatherGrad || k == OpKind::kGatherReduceGrad;
      });
  internal::CollectFacts(f.forward_, &f.params_, &f.max_arity_, &f.pull_width_, &f.uses_tokens_,
                         &f.vocab_size_);
  return f;
}

inline std::string Function::DebugString() const {
  std::string out = absl::StrCat("vertex function '", name_, "'\nforward:\n");
  for (int id = 0; id < static_cast<int>(forward_.nodes.size()); ++id) {
    absl::StrAppend(&out, internal::NodeLine(forward_, id, false));
  }
  for (const ScatterField& f : scatter_)
    absl::StrAppend(&out, "  scatter ", f.name, " = %", f.node, "\n");
  for (size_t i = 0; i < pushes_.size(); ++i)
    absl::StrAppend(&out, "  push ", i, " = %", pushes_[i], "\n");
  absl::StrAppend(&out, "backward:\n");
  for (int id = 0; id < static_cast<int>(backward_.nodes.size()); ++id) {
    absl::StrAppend(&out, internal::NodeLine(backward_, id, true));
  }
  return out;
}

inline std::string Function::ToDot() const {
  std::string out = absl::StrCat("digraph \"", name_, "\" {\n  rankdir=BT;\n");
  auto emit = [&](const Program& p, const char* prefix, const char* style) {
    for (int id = 0; id < static_cast<int>(p.nodes.size()); ++id) {
      const Node& n = p.nodes[id];
      absl::StrAppend(&out, "  ", prefix, id, " [label=\"", OpKindName(n.kind),
                      n.name.empty() ? "" : absl::StrCat(" ", n.name), "\\n", internal::ShapeOf(n),
                      "\\n", OpClassName(n.op_class, prefix[0] == 'b'), "\", style=", style,
                      "];\n");
      for (int in : n.inputs) absl::StrAppend(&out, "  ", prefix, in, " -> ", prefix, id, ";\n");
    }
  };
  emit(forward_, "f", "solid");
  absl::StrAppend(&out, "  subgraph cluster_backward {\n  label=\"backward\";\n");
  emit(backward_, "b", "dashed");
  absl::StrAppend(&out, "  }\n}\n");
  return out;
}

}  // namespace cavs::vertex
