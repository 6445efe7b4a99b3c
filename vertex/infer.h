// Shape inference and op classification for a Program.
//
// Widths: every per-vertex node gets the width of its row. Gathers take the width of the field
// their children scatter, which may itself depend on gathers (an LSTM's c depends on the
// children's c), so inference runs to a fixed point: a first pass leaves unknown what depends
// on unknown gathers, the scattered widths then fix the gathers, and a final pass checks
// everything. A mismatch is an error naming the function, the op and both shapes.
//
// Classes (Cavs's lazy batching): a node that depends on a recurrent source (a gather; in the
// backward, a scatter gradient) and feeds a recurrent sink (a scattered field; in the
// backward, a gradient sent to children) runs once per round; one that depends on no source
// runs once over all vertices before the rounds; the rest once over all vertices after them.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "vertex/ir.h"

namespace cavs::vertex::internal {

inline std::string ShapeOf(const Node& n) {
  if (n.is_static()) return n.param_shape.DebugString();
  return n.width < 0 ? std::string("[?]") : absl::StrCat("[", n.width, "]");
}

struct InferContext {
  const std::string& function;
  const std::vector<ScatterField>& scatter;
  bool final_pass;
};

inline absl::Status OpError(const InferContext& ctx, const Program& p, int id,
                            const std::string& what) {
  const Node& n = p.nodes[id];
  std::string shapes;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    absl::StrAppend(&shapes, i == 0 ? "" : " and ", ShapeOf(p.nodes[n.inputs[i]]));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("vertex function '", ctx.function, "': ", OpKindName(n.kind), " (op #", id,
                   "): ", what, shapes.empty() ? "" : ": shapes ", shapes));
}

// Width of the row broadcast from a parameter operand: [w] or [1, w]; -1 if not a row.
inline int64_t RowWidth(const Node& p) {
  if (p.param_shape.rank() == 1) return p.param_shape[0];
  if (p.param_shape.rank() == 2 && p.param_shape[0] == 1) return p.param_shape[1];
  return -1;
}

inline absl::Status InferBinary(const InferContext& ctx, Program& p, int id) {
  Node& n = p.nodes[id];
  const Node& a = p.nodes[n.inputs[0]];
  const Node& b = p.nodes[n.inputs[1]];
  if (a.is_static()) return OpError(ctx, p, id, "needs a per-vertex operand");
  int64_t wb = b.width;
  if (b.is_static()) {
    wb = RowWidth(b);
    if (wb < 0) return OpError(ctx, p, id, "a parameter operand must be a row ([w] or [1, w])");
  }
  if (a.width >= 0 && wb >= 0 && a.width != wb) return OpError(ctx, p, id, "widths differ");
  n.width = a.width >= 0 ? a.width : wb;
  return absl::OkStatus();
}

inline absl::Status InferMatMul(const InferContext& ctx, Program& p, int id) {
  Node& n = p.nodes[id];
  const Node& x = p.nodes[n.inputs[0]];
  const Node& w = p.nodes[n.inputs[1]];
  if (x.is_static() || !w.is_static() || w.param_shape.rank() != 2) {
    return OpError(ctx, p, id, "expects a per-vertex row times a rank-2 parameter");
  }
  const int64_t in = n.transpose ? w.param_shape[1] : w.param_shape[0];
  if (x.width >= 0 && x.width != in) return OpError(ctx, p, id, "inner dimensions differ");
  n.width = n.transpose ? w.param_shape[0] : w.param_shape[1];
  return absl::OkStatus();
}

inline absl::Status InferGather(const InferContext& ctx, Program& p, int id) {
  Node& n = p.nodes[id];
  std::string names;
  for (const ScatterField& f : ctx.scatter) {
    if (f.name == n.field) {
      n.width = p.nodes[f.node].width;
      return absl::OkStatus();
    }
    absl::StrAppend(&names, names.empty() ? "" : ", ", f.name);
  }
  return OpError(
      ctx, p, id,
      absl::StrCat("reads field '", n.field, "', but the function scatters {", names, "}"));
}

inline absl::Status InferSlice(const InferContext& ctx, Program& p, int id) {
  Node& n = p.nodes[id];
  const int64_t w = p.nodes[n.inputs[0]].width;
  if (w < 0) return absl::OkStatus();
  if (n.split_parts > 0) {  // part `begin` of `split_parts` equal parts (Split)
    const int64_t parts = n.split_parts;
    if (w % parts != 0) {
      return OpError(ctx, p, id, absl::StrCat("cannot split into ", parts, " equal parts"));
    }
    n.end = (n.begin + 1) * (w / parts);
    n.begin = n.begin * (w / parts);
    n.split_parts = 0;  // now plain columns, for later passes and executors
  }
  if (n.begin < 0 || n.end > w || n.begin >= n.end) {
    return OpError(ctx, p, id, absl::StrCat("columns [", n.begin, ", ", n.end, ") out of range"));
  }
  n.width = n.end - n.begin;
  return absl::OkStatus();
}

inline absl::Status InferSameWidth(const InferContext& ctx, Program& p, int id) {
  Node& n = p.nodes[id];
  int64_t w = -1;
  for (int in : n.inputs) {
    const Node& x = p.nodes[in];
    if (x.is_static()) return OpError(ctx, p, id, "needs per-vertex operands");
    if (x.width >= 0 && w >= 0 && x.width != w) return OpError(ctx, p, id, "widths differ");
    if (x.width >= 0) w = x.width;
  }
  n.width = w;
  return absl::OkStatus();
}

inline absl::Status InferNode(const InferContext& ctx, Program& p, int id) {
  Node& n = p.nodes[id];
  switch (n.kind) {
    case OpKind::kParam:
    case OpKind::kPull:
    case OpKind::kForwardValue:
    case OpKind::kScatterGrad:
    case OpKind::kPushGrad:
    case OpKind::kPadSlice:
    case OpKind::kBroadcastCols:
      return absl::OkStatus();  // widths set at creation
    case OpKind::kEmbed: {
      const Node& t = p.nodes[n.inputs[0]];
      if (t.param_shape.rank() != 2) return OpError(ctx, p, id, "table must be rank 2");
      n.width = t.param_shape[1];
      return absl::OkStatus();
    }
    case OpKind::kGather:
    case OpKind::kGatherReduce:
      return InferGather(ctx, p, id);
    case OpKind::kMatMul:
      return InferMatMul(ctx, p, id);
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
      return InferBinary(ctx, p, id);
    case OpKind::kConcat: {
      int64_t w = 0;
      for (int in : n.inputs) {
        if (p.nodes[in].is_static()) return OpError(ctx, p, id, "needs per-vertex operands");
        if (p.nodes[in].width < 0) w = -1;
        if (w >= 0) w += p.nodes[in].width;
      }
      if (n.inputs.empty()) return OpError(ctx, p, id, "needs at least one operand");
      n.width = w;
      return absl::OkStatus();
    }
    case OpKind::kSlice:
      return InferSlice(ctx, p, id);
    case OpKind::kSum:
      if (p.nodes[n.inputs[0]].is_static()) return OpError(ctx, p, id, "needs a per-vertex row");
      n.width = 1;
      return absl::OkStatus();
    case OpKind::kDropout:
      // Written so that NaN fails too: every comparison with NaN is false.
      if (!(n.scalar >= 0.0f && n.scalar < 1.0f)) {
        return OpError(ctx, p, id, absl::StrCat("drop probability ", n.scalar, " not in [0, 1)"));
      }
      return InferSameWidth(ctx, p, id);
    case OpKind::kWeightGradMatMul:  // {x, dy}: sized by the parameter, not the row
      n.width = p.nodes[n.inputs[1]].width;
      return absl::OkStatus();
    default:  // unary and backward ops keep their operands' width
      return InferSameWidth(ctx, p, id);
  }
}

inline absl::Status InferPass(const InferContext& ctx, Program& p) {
  for (int id = 0; id < static_cast<int>(p.nodes.size()); ++id) {
    const absl::Status s = InferNode(ctx, p, id);
    if (!s.ok()) return s;
    const Node& n = p.nodes[id];
    if (ctx.final_pass && !n.is_static() && n.width < 0) {
      return OpError(ctx, p, id, "width cannot be inferred");
    }
    if (!n.is_static() && n.width > kMaxWidth) {  // from a parameter's shape or a Concat
      return OpError(ctx, p, id,
                     absl::StrCat("row width ", n.width, " exceeds the limit of ", kMaxWidth));
    }
  }
  return absl::OkStatus();
}

// Infers every width (see the file comment); the gathers' widths follow the scatter.
inline absl::Status InferWidths(const std::string& function, const std::vector<ScatterField>& sc,
                                Program& p) {
  for (int pass = 0; pass < 4; ++pass) {
    const absl::Status s = InferPass({function, sc, /*final_pass=*/false}, p);
    if (!s.ok()) return s;
  }
  return InferPass({function, sc, /*final_pass=*/true}, p);
}

// Removes the nodes no root depends on; returns old id -> new id (-1 for removed).
inline std::vector<int> Prune(Program& p, const std::vector<char>& is_root) {
  const int n = static_cast<int>(p.nodes.size());
  std::vector<char> live(is_root);
  for (int id = n - 1; id >= 0; --id) {
    if (!live[id]) continue;
    for (int in : p.nodes[id].inputs) live[in] = 1;
  }
  std::vector<int> remap(n, -1);
  Program out;
  for (int id = 0; id < n; ++id) {
    if (!live[id]) continue;
    remap[id] = static_cast<int>(out.nodes.size());
    Node node = std::move(p.nodes[id]);
    for (int& in : node.inputs) in = remap[in];
    out.nodes.push_back(std::move(node));
  }
  p = std::move(out);
  return remap;
}

// Assigns op classes. `is_source`/`is_sink` say which nodes are the recurrent sources and
// sinks of this program (see the file comment).
template <typename SourceFn, typename SinkFn>
void Classify(Program& p, SourceFn is_source, SinkFn is_sink) {
  const int n = static_cast<int>(p.nodes.size());
  std::vector<char> from_source(n, 0), to_sink(n, 0);
  for (int id = 0; id < n; ++id) {
    from_source[id] = is_source(id);
    for (int in : p.nodes[id].inputs) from_source[id] |= from_source[in];
  }
  for (int id = n - 1; id >= 0; --id) {
    to_sink[id] |= is_sink(id);
    if (to_sink[id]) {
      for (int in : p.nodes[id].inputs) to_sink[in] = 1;
    }
  }
  for (int id = 0; id < n; ++id) {
    Node& node = p.nodes[id];
    if (node.is_static()) {
      node.op_class = OpClass::kStatic;
    } else if (node.kind == OpKind::kWeightGradMatMul || node.kind == OpKind::kWeightGradBias ||
               node.kind == OpKind::kWeightGradScale || node.kind == OpKind::kEmbedGrad) {
      node.op_class = OpClass::kWeightGrad;
    } else if (!from_source[id]) {
      node.op_class = OpClass::kBeforeRounds;
    } else {
      node.op_class = to_sink[id] ? OpClass::kInRounds : OpClass::kAfterRounds;
    }
  }
}

}  // namespace cavs::vertex::internal
