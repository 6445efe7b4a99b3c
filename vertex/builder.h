// The tracing front end of the DSL: Expr, State, Vertex and the op functions.
//
// Define() (vertex/function.h) calls the user's lambda once with a Vertex; every op called on
// Exprs appends a Node to the program of the function being defined (the innermost Define on
// the calling thread). Nothing is computed. Errors made while tracing (an Expr of another or a
// finished function, a second scatter, an empty name, a bound of ir.h exceeded, ...) are
// recorded in that function and returned by Define(); shapes are checked after tracing, once
// the widths of the scattered state are known.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
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

// Ids of Builders, unique in the process (0 is no builder). An Expr records the id of the
// builder that made it instead of its address: every Define's Builder lives on the stack and
// usually lands at the same address, so an Expr kept from an earlier Define would otherwise
// pass for one of the current function and silently alias one of its nodes.
inline std::atomic<uint64_t> next_builder_id{1};

struct Builder {
  const uint64_t id = next_builder_id.fetch_add(1, std::memory_order_relaxed);
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

// The builder of the Define running on this thread (the innermost one if Defines nest), or
// nullptr. Ops record their nodes and errors here, so that a mistake is reported by the
// function being defined, never by the function an operand came from (which may be finished).
inline thread_local Builder* current_builder = nullptr;

// Makes `b` the current builder for its lifetime (restoring the previous one, for nesting).
class BuilderScope {
 public:
  explicit BuilderScope(Builder* b) : saved_(current_builder) { current_builder = b; }
  ~BuilderScope() { current_builder = saved_; }
  BuilderScope(const BuilderScope&) = delete;
  BuilderScope& operator=(const BuilderScope&) = delete;

 private:
  Builder* saved_;
};

// Records `msg` in the function being defined; outside Define there is no one to tell, and the
// invalid Expr the caller returns is reported where it is used.
inline void FailCurrent(std::string msg) {
  if (current_builder != nullptr) current_builder->Fail(std::move(msg));
}

}  // namespace internal

// A value in a vertex function: a per-vertex row or a parameter. Cheap to copy. Valid only in
// the Define that made it (ops called on the same thread as that Define's lambda).
class Expr {
 public:
  Expr() = default;
  Expr(uint64_t function_id, int id) : fn_(function_id), id_(id) {}
  bool valid() const { return fn_ != 0 && id_ >= 0; }
  int id() const { return id_; }
  // The id of the Define (internal::Builder::id) that made this expression; 0 if none.
  uint64_t function_id() const { return fn_; }

 private:
  uint64_t fn_ = 0;
  int id_ = -1;
};

namespace internal {

// True if `e` is a value of `b`'s function; otherwise records an error naming `op` in `b`.
// Never dereferences anything `e` came from: the function that made it may be gone.
inline bool Owns(Builder* b, const Expr& e, const char* op) {
  if (!e.valid()) {
    b->Fail(absl::StrCat(op,
                         ": an empty Expr (default-constructed, or the result of an op that "
                         "failed)"));
    return false;
  }
  if (e.function_id() != b->id) {
    b->Fail(absl::StrCat(op, ": an expression from another function or a finished Define"));
    return false;
  }
  return true;
}

}  // namespace internal

// The state gathered from one child slot, or reduced over all children; fields by name.
class State {
 public:
  State(uint64_t function_id, bool reduce, int slot, Reduce r)
      : fn_(function_id), reduce_(reduce), slot_(slot), r_(r) {}
  // The field `name` as scattered by the child (zeros where the child is absent).
  Expr operator[](const std::string& name) const {
    internal::Builder* b = internal::current_builder;
    auto what = [&] { return absl::StrCat(Call(), "[\"", name, "\"]"); };  // errors only
    if (b == nullptr) return Expr();
    if (b->id != fn_) {
      b->Fail(absl::StrCat(what(), ": a State from another function or a finished Define"));
      return Expr();
    }
    // An empty name means "no field" to the engine, which would then read a buffer it never
    // allocated.
    if (name.empty()) {
      b->Fail(absl::StrCat(what(), ": a field needs a non-empty name"));
      return Expr();
    }
    const std::string key = reduce_ ? absl::StrCat("reduce", static_cast<int>(r_), "/", name)
                                    : absl::StrCat(slot_, "/", name);
    auto it = b->gathers.find(key);
    if (it != b->gathers.end()) return Expr(b->id, it->second);
    Node n;
    n.kind = reduce_ ? OpKind::kGatherReduce : OpKind::kGather;
    n.field = name;
    n.index = slot_;
    n.reduce = r_;
    const int id = b->Add(std::move(n));
    b->gathers[key] = id;
    return Expr(b->id, id);
  }

 private:
  // How the user wrote this state: gather(k), gather_sum(), ...
  std::string Call() const {
    if (!reduce_) return absl::StrCat("gather(", slot_, ")");
    switch (r_) {
      case Reduce::kSum:
        return "gather_sum()";
      case Reduce::kMean:
        return "gather_mean()";
      case Reduce::kMax:
        return "gather_max()";
    }
    return "gather_?()";
  }

  uint64_t fn_;
  bool reduce_;
  int slot_;
  Reduce r_;
};

// What the user's lambda receives: the vertex's inputs, its children, its parameters. Not
// copyable: it lives as long as the Define that made it.
class Vertex {
 public:
  explicit Vertex(internal::Builder* b) : b_(b) {}
  Vertex(const Vertex&) = delete;
  Vertex& operator=(const Vertex&) = delete;

  // The vertex's feature row of `width` floats (zeros where the graph carries none);
  // 1 <= width <= kMaxWidth.
  Expr pull(int64_t width) {
    if (b_->pull_node >= 0) {
      if (b_->program.nodes[b_->pull_node].width != width) {
        b_->Fail(absl::StrCat("pull(", width, ") after pull(",
                              b_->program.nodes[b_->pull_node].width, "): one feature width"));
      }
      return Expr(b_->id, b_->pull_node);
    }
    Node n;
    n.kind = OpKind::kPull;
    n.width = width;
    if (width <= 0 || width > kMaxWidth) {
      b_->Fail(absl::StrCat("pull(", width, "): width must be in [1, ", kMaxWidth, "]"));
    }
    b_->pull_node = b_->Add(std::move(n));
    return Expr(b_->id, b_->pull_node);
  }

  // The row of table `table` ([vocab, dim]) for the vertex's token; zeros where it has none.
  // The table is an embedding: its gradient is row-sparse, so it may not also serve as a
  // dense parameter (a MatMul weight, a bias) of the same function.
  Expr embed(const std::string& table, int64_t vocab, int64_t dim,
             core::Initializer init = core::Initializer::Uniform(-0.05f, 0.05f)) {
    Expr t = Param("embed", table, {vocab, dim}, init);
    if (!t.valid()) return t;
    b_->program.nodes[t.id()].sparse_grad = true;
    Node n;
    n.kind = OpKind::kEmbed;
    n.inputs = {t.id()};
    return Expr(b_->id, b_->Add(std::move(n)));
  }

  // Child slot k's scattered state; 0 <= k < kMaxChildSlots.
  State gather(int k) {
    if (k < 0) b_->Fail(absl::StrCat("gather(", k, "): child slot must be >= 0"));
    if (k >= kMaxChildSlots) {
      b_->Fail(absl::StrCat("gather(", k, "): child slot must be below ", kMaxChildSlots,
                            "; read wider vertices with gather_sum/mean/max"));
    }
    return State(b_->id, false, k, Reduce::kSum);
  }
  State gather_sum() { return State(b_->id, true, 0, Reduce::kSum); }
  State gather_mean() { return State(b_->id, true, 0, Reduce::kMean); }
  State gather_max() { return State(b_->id, true, 0, Reduce::kMax); }

  // A parameter, rank 1 or 2 with positive dimensions and a non-empty name. Asking again for
  // the same name returns the same parameter.
  Expr param(const std::string& name, core::Shape shape,
             core::Initializer init = core::Initializer::XavierUniform()) {
    return Param("param", name, std::move(shape), init);
  }

  // The state this vertex exposes to its parents. Called once; field names non-empty.
  void scatter(const std::vector<std::pair<std::string, Expr>>& fields) {
    if (b_->scattered) b_->Fail("scatter() called twice");
    b_->scattered = true;
    for (const auto& [name, e] : fields) {
      // An empty name means "no field" to the engine (see State::operator[]).
      if (name.empty()) {
        b_->Fail("scatter: a field needs a non-empty name");
        return;
      }
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
  // param() and embed(); `call` names the one the user wrote.
  Expr Param(const char* call, const std::string& name, core::Shape shape,
             const core::Initializer& init) {
    if (name.empty()) {
      // The store keys parameters by name; an empty one would only fail at Engine::Create,
      // far from here and without the function's name.
      b_->Fail(absl::StrCat(call, "(\"\", ", shape.DebugString(),
                            "): a parameter needs a non-empty name"));
      return Expr();
    }
    auto it = b_->params.find(name);
    if (it != b_->params.end()) {
      const core::Shape& have = b_->program.nodes[it->second].param_shape;
      if (have != shape) {
        b_->Fail(absl::StrCat("parameter '", name, "' declared with shape ", have.DebugString(),
                              " and again with ", shape.DebugString()));
      }
      return Expr(b_->id, it->second);
    }
    bool ok = shape.rank() == 1 || shape.rank() == 2;
    for (int64_t d : shape.dims()) ok = ok && d > 0;
    if (!ok) {
      b_->Fail(absl::StrCat("parameter '", name, "': shape ", shape.DebugString(),
                            " must be rank 1 or 2 with positive dimensions"));
    } else if (shape.CheckedNumElements() < 0) {
      // NumElements() would wrap and size the parameter's storage with a small number.
      b_->Fail(absl::StrCat("parameter '", name, "': shape ", shape.DebugString(),
                            " has more than ", core::Shape::kMaxElements, " elements"));
    }
    Node n;
    n.kind = OpKind::kParam;
    n.name = name;
    n.param_shape = std::move(shape);
    n.init = init;
    n.op_class = OpClass::kStatic;
    const int id = b_->Add(std::move(n));
    b_->params[name] = id;
    return Expr(b_->id, id);
  }

  bool Check(const Expr& e, const char* what) {
    if (!internal::Owns(b_, e, what)) return false;
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

// Appends op `kind` over `in` to the function being defined. A foreign or empty operand is an
// error of that function (not of the operand's, which may be finished) and yields an empty
// Expr; so does any op called outside Define.
inline Expr MakeOp(OpKind kind, const std::vector<Expr>& in, Node attrs = Node()) {
  Builder* b = current_builder;
  if (b == nullptr) return Expr();
  for (const Expr& e : in) {
    if (!Owns(b, e, OpKindName(kind))) return Expr();
  }
  attrs.kind = kind;
  attrs.inputs.clear();
  for (const Expr& e : in) attrs.inputs.push_back(e.id());
  return Expr(b->id, b->Add(std::move(attrs)));
}

// True if `e` is a parameter of the function being defined (false for a foreign Expr, whose
// function may be gone; MakeOp reports it).
inline bool IsParam(const Expr& e) {
  const Builder* b = current_builder;
  return b != nullptr && e.valid() && e.function_id() == b->id &&
         b->program.nodes[e.id()].is_static();
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
// The parts side by side; at least one.
inline Expr Concat(const std::vector<Expr>& parts) {
  if (parts.empty()) {
    internal::FailCurrent("Concat: needs at least one operand");
    return Expr();
  }
  return internal::MakeOp(OpKind::kConcat, parts);
}
// Columns [begin, end) of x: 0 <= begin < end <= width of x (the last checked by inference).
inline Expr Slice(Expr x, int64_t begin, int64_t end) {
  if (begin < 0 || begin >= end) {
    internal::FailCurrent(absl::StrCat("Slice(x, ", begin, ", ", end,
                                       "): columns [begin, end) need 0 <= begin < end"));
    return Expr();
  }
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
    n.split_parts = N;  // resolved to columns when the width of x is known
    out[i] = internal::MakeOp(OpKind::kSlice, {x}, n);
  }
  return out;
}
// The row's sum: width 1.
inline Expr Sum(Expr x) { return internal::MakeOp(OpKind::kSum, {x}); }
// Inverted dropout with drop probability p in [0, 1); the mask is a function of (seed, step,
// vertex, column), so it is reproducible and identical in forward and backward. Identity in eval
// mode.
inline Expr Dropout(Expr x, float p, int64_t seed = 0) {
  Node n;
  n.scalar = p;
  n.index = seed;
  return internal::MakeOp(OpKind::kDropout, {x}, n);
}

}  // namespace cavs::vertex
