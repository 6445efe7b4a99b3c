// The tracing front end of the DSL: Expr, State, Vertex and the op functions.
//
// Define() (vertex/function.h) calls the user's lambda once with a Vertex; every op called on
// Exprs appends a Node to the Builder's program. Nothing is computed. Errors made while tracing
// (an Expr of another function, a second scatter, ...) are recorded and returned by Define();
// shapes are checked after tracing, once the widths of the scattered state are known.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/initializer.h"
#include "core/shape.h"
#include "vertex/ir.h"

namespace cavs::vertex {

namespace internal {

struct Builder {
  Program program;
  std::vector<ScatterField> scatter;
  std::vector<int> pushes;
  bool scattered = false;
  absl::Status error;
  absl::flat_hash_map<std::string, int> params;   // name -> node
  absl::flat_hash_map<std::string, int> gathers;  // "slot/field" or "reduce/field" -> node
  int pull_node = -1;

  int Add(Node n) {
    program.nodes.push_back(std::move(n));
    return static_cast<int>(program.nodes.size()) - 1;
  }
  void Fail(std::string msg) {
    if (error.ok()) error = absl::InvalidArgumentError(std::move(msg));
  }
};

}  // namespace internal

// A value in a vertex function: a per-vertex row or a parameter. Cheap to copy.
class Expr {
 public:
  Expr() = default;
  Expr(internal::Builder* b, int id) : b_(b), id_(id) {}
  bool valid() const { return b_ != nullptr && id_ >= 0; }
  int id() const { return id_; }
  internal::Builder* builder() const { return b_; }

 private:
  internal::Builder* b_ = nullptr;
  int id_ = -1;
};

// The state gathered from one child slot, or reduced over all children; fields by name.
class State {
 public:
  State(internal::Builder* b, bool reduce, int slot, Reduce r)
      : b_(b), reduce_(reduce), slot_(slot), r_(r) {}
  // The field `name` as scattered by the child (zeros where the child is absent).
  Expr operator[](const std::string& name) const {
    const std::string key = reduce_ ? absl::StrCat("reduce", static_cast<int>(r_), "/", name)
                                    : absl::StrCat(slot_, "/", name);
    auto it = b_->gathers.find(key);
    if (it != b_->gathers.end()) return Expr(b_, it->second);
    Node n;
    n.kind = reduce_ ? OpKind::kGatherReduce : OpKind::kGather;
    n.field = name;
    n.index = slot_;
    n.reduce = r_;
    const int id = b_->Add(std::move(n));
    b_->gathers[key] = id;
    return Expr(b_, id);
  }

 private:
  internal::Builder* b_;
  bool reduce_;
  int slot_;
  Reduce r_;
};

// What the user's lambda receives: the vertex's inputs, its children, its parameters.
class Vertex {
 public:
  explicit Vertex(internal::Builder* b) : b_(b) {}

  // The vertex's feature row of `width` floats (zeros where the graph carries none).
  Expr pull(int64_t width) {
    if (b_->pull_node >= 0) {
      if (b_->program.nodes[b_->pull_node].width != width) {
        b_->Fail(absl::StrCat("pull(", width, ") after pull(",
                              b_->program.nodes[b_->pull_node].width, "): one feature width"));
      }
      return Expr(b_, b_->pull_node);
    }
    Node n;
    n.kind = OpKind::kPull;
    n.width = width;
    if (width <= 0) b_->Fail(absl::StrCat("pull(", width, "): width must be positive"));
    b_->pull_node = b_->Add(std::move(n));
    return Expr(b_, b_->pull_node);
  }

  // The row of table `table` ([vocab, dim]) for the vertex's token; zeros where it has none.
  Expr embed(const std::string& table, int64_t vocab, int64_t dim,
             core::Initializer init = core::Initializer::Uniform(-0.05f, 0.05f)) {
    Expr t = param(table, {vocab, dim}, init);
    if (!t.valid()) return t;
    b_->program.nodes[t.id()].sparse_grad = true;
    Node n;
    n.kind = OpKind::kEmbed;
    n.inputs = {t.id()};
    return Expr(b_, b_->Add(std::move(n)));
  }

  // Child slot k's scattered state.
  State gather(int k) {
    if (k < 0) b_->Fail(absl::StrCat("gather(", k, "): child slot must be >= 0"));
    return State(b_, false, k, Reduce::kSum);
  }
  State gather_sum() { return State(b_, true, 0, Reduce::kSum); }
  State gather_mean() { return State(b_, true, 0, Reduce::kMean); }
  State gather_max() { return State(b_, true, 0, Reduce::kMax); }

  // A parameter. Asking again for the same name returns the same parameter.
  Expr param(const std::string& name, core::Shape shape,
             core::Initializer init = core::Initializer::XavierUniform()) {
    auto it = b_->params.find(name);
    if (it != b_->params.end()) {
      const core::Shape& have = b_->program.nodes[it->second].param_shape;
      if (have != shape) {
        b_->Fail(absl::StrCat("parameter '", name, "' declared with shape ", have.DebugString(),
                              " and again with ", shape.DebugString()));
      }
      return Expr(b_, it->second);
    }
    bool ok = shape.rank() == 1 || shape.rank() == 2;
    for (int64_t d : shape.dims()) ok = ok && d > 0;
    if (!ok) {
      b_->Fail(absl::StrCat("parameter '", name, "': shape ", shape.DebugString(),
                            " must be rank 1 or 2 with positive dimensions"));
    }
    Node n;
    n.kind = OpKind::kParam;
    n.name = name;
    n.param_shape = std::move(shape);
    n.init = init;
    n.op_class = OpClass::kStatic;
    const int id = b_->Add(std::move(n));
    b_->params[name] = id;
    return Expr(b_, id);
  }

  // The state this vertex exposes to its parents. Called once.
  void scatter(const std::vector<std::pair<std::string, Expr>>& fields) {
    if (b_->scattered) b_->Fail("scatter() called twice");
    b_->scattered = true;
    for (const auto& [name, e] : fields) {
      if (!Check(e, "scatter")) return;
      for (const ScatterField& f : b_->scatter) {
        if (f.name == name) b_->Fail(absl::StrCat("scatter field '", name, "' given twice"));
      }
      b_->scatter.push_back({name, e.id()});
    }
  }

  // An output of the vertex (push 0 feeds the loss).
  void push(Expr e) {
    if (Check(e, "push")) b_->pushes.push_back(e.id());
  }

 private:
  bool Check(const Expr& e, const char* what) {
    if (!e.valid() || e.builder() != b_) {
      b_->Fail(absl::StrCat(what, ": an expression that does not belong to this function"));
      return false;
    }
    if (b_->program.nodes[e.id()].is_static()) {
      b_->Fail(absl::StrCat(what, ": expects a per-vertex value, got parameter '",
                            b_->program.nodes[e.id()].name, "'"));
      return false;
    }
    return true;
  }

  internal::Builder* b_;
};

namespace internal {

inline Expr MakeOp(OpKind kind, std::vector<Expr> in, Node attrs = Node()) {
  Builder* b = nullptr;
  for (const Expr& e : in) {
    if (!e.valid()) return Expr();
    if (b == nullptr) b = e.builder();
    if (e.builder() != b) {
      b->Fail(absl::StrCat(OpKindName(kind), ": mixes expressions of two vertex functions"));
      return Expr();
    }
  }
  if (b == nullptr) return Expr();
  attrs.kind = kind;
  attrs.inputs.clear();
  for (const Expr& e : in) attrs.inputs.push_back(e.id());
  return Expr(b, b->Add(std::move(attrs)));
}

inline bool IsParam(const Expr& e) {
  return e.valid() && e.builder()->program.nodes[e.id()].is_static();
}

// Binary element-wise op with the parameter (if any) moved to the right.
inline Expr Binary(OpKind kind, Expr a, Expr b) {
  if (IsParam(a) && !IsParam(b)) {
    if (kind == OpKind::kSub) return MakeOp(OpKind::kAdd, {MakeOp(OpKind::kNeg, {b}), a});
    std::swap(a, b);
  }
  return MakeOp(kind, {a, b});
}

}  // namespace internal

// x W for a parameter W of shape [in, out]: a row of width `out`.
inline Expr MatMul(Expr x, Expr w) { return internal::MakeOp(OpKind::kMatMul, {x, w}); }
inline Expr operator+(Expr a, Expr b) { return internal::Binary(OpKind::kAdd, a, b); }
inline Expr operator-(Expr a, Expr b) { return internal::Binary(OpKind::kSub, a, b); }
inline Expr operator*(Expr a, Expr b) { return internal::Binary(OpKind::kMul, a, b); }
inline Expr operator-(Expr a) { return internal::MakeOp(OpKind::kNeg, {a}); }
inline Expr Sigmoid(Expr x) { return internal::MakeOp(OpKind::kSigmoid, {x}); }
inline Expr Tanh(Expr x) { return internal::MakeOp(OpKind::kTanh, {x}); }
inline Expr Relu(Expr x) { return internal::MakeOp(OpKind::kRelu, {x}); }
inline Expr Neg(Expr x) { return -x; }
// scalar * x + offset.
inline Expr Scale(Expr x, float scalar, float offset = 0.0f) {
  Node n;
  n.scalar = scalar;
  n.offset = offset;
  return internal::MakeOp(OpKind::kScale, {x}, n);
}
inline Expr operator*(float s, Expr x) { return Scale(x, s); }
// 1 - x, the usual gate complement.
inline Expr OneMinus(Expr x) { return Scale(x, -1.0f, 1.0f); }
inline Expr Concat(std::vector<Expr> parts) {
  return internal::MakeOp(OpKind::kConcat, std::move(parts));
}
// Columns [begin, end) of x.
inline Expr Slice(Expr x, int64_t begin, int64_t end) {
  Node n;
  n.begin = begin;
  n.end = end;
  return internal::MakeOp(OpKind::kSlice, {x}, n);
}
// x split into N equal parts along the row (its width must divide by N).
template <int N>
std::array<Expr, N> Split(Expr x) {
  std::array<Expr, N> out;
  for (int i = 0; i < N; ++i) {
    Node n;
    n.begin = i;
    n.end = -N;  // resolved to columns when the width of x is known
    out[i] = internal::MakeOp(OpKind::kSlice, {x}, n);
  }
  return out;
}
// The row's sum: width 1.
inline Expr Sum(Expr x) { return internal::MakeOp(OpKind::kSum, {x}); }
// Inverted dropout with drop probability p; the mask is a function of (seed, step, vertex,
// column), so it is reproducible and identical in forward and backward. Identity in eval mode.
inline Expr Dropout(Expr x, float p, int64_t seed = 0) {
  Node n;
  n.scalar = p;
  n.index = seed;
  return internal::MakeOp(OpKind::kDropout, {x}, n);
}

}  // namespace cavs::vertex
