// Symbolic reverse-mode differentiation of a forward Program, done once at definition time.
//
// The backward is itself a Program over the same op set. Its leaves read forward values
// (kForwardValue), the gradient parents sent to this vertex's scattered fields (kScatterGrad)
// and the loss gradient of each push (kPushGrad); its sinks send gradients on: to children
// (kGatherGrad, kGatherReduceGrad — the scheduler turns them into scatter-adds into the
// children's kScatterGrad rows), to parameters (kWeightGrad*, reduced over all vertices at the
// end: Cavs's lazy weight gradients) and to embedding rows (kEmbedGrad, row-sparse).
// A node with several consumers gets the sum of their contributions.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "vertex/ir.h"

namespace cavs::vertex::internal {

class Differentiator {
 public:
  Differentiator(const Program& fwd, const std::vector<ScatterField>& scatter,
                 const std::vector<int>& pushes)
      : fwd_(fwd), contrib_(fwd.nodes.size()), needs_grad_(fwd.nodes.size(), 0) {
    for (size_t id = 0; id < fwd.nodes.size(); ++id) {
      const Node& n = fwd.nodes[id];
      needs_grad_[id] =
          n.kind == OpKind::kParam || n.kind == OpKind::kGather || n.kind == OpKind::kGatherReduce;
      for (int in : n.inputs) needs_grad_[id] |= needs_grad_[in];
    }
    for (size_t i = 0; i < pushes.size(); ++i) {
      Node g = Leaf(OpKind::kPushGrad, fwd.nodes[pushes[i]].width);
      g.index = static_cast<int64_t>(i);
      contrib_[pushes[i]].push_back(Add(std::move(g)));
    }
    for (const ScatterField& f : scatter) {
      Node g = Leaf(OpKind::kScatterGrad, fwd.nodes[f.node].width);
      g.field = f.name;
      contrib_[f.node].push_back(Add(std::move(g)));
    }
  }

  Program Run() {
    for (int id = static_cast<int>(fwd_.nodes.size()) - 1; id >= 0; --id) {
      if (contrib_[id].empty() || !needs_grad_[id]) continue;
      int g = Tiled(contrib_[id]);
      if (g < 0) {
        g = contrib_[id][0];
        for (size_t i = 1; i < contrib_[id].size(); ++i) g = Op(OpKind::kAdd, {g, contrib_[id][i]});
      }
      Backprop(id, g);
    }
    return std::move(bw_);
  }

 private:
  static Node Leaf(OpKind kind, int64_t width) {
    Node n;
    n.kind = kind;
    n.width = width;
    return n;
  }
  int Add(Node n) {
    bw_.nodes.push_back(std::move(n));
    return static_cast<int>(bw_.nodes.size()) - 1;
  }
  int Op(OpKind kind, std::vector<int> inputs, Node attrs = Node()) {
    attrs.kind = kind;
    attrs.inputs = std::move(inputs);
    attrs.width = -1;
    return Add(std::move(attrs));
  }
  int Value(int fwd_id) {
    auto it = values_.find(fwd_id);
    if (it != values_.end()) return it->second;
    const Node& f = fwd_.nodes[fwd_id];
    int id;
    if (f.is_static()) {
      Node p = f;
      p.inputs.clear();
      id = Add(std::move(p));
    } else {
      Node v = Leaf(OpKind::kForwardValue, f.width);
      v.index = fwd_id;
      id = Add(std::move(v));
    }
    values_[fwd_id] = id;
    return id;
  }
  void Give(int fwd_id, int grad) {
    if (needs_grad_[fwd_id] && !fwd_.nodes[fwd_id].is_static()) contrib_[fwd_id].push_back(grad);
  }
  void Sink(OpKind kind, std::vector<int> inputs, const std::string& param, float scalar = 1.0f,
            bool transpose = false) {
    Node n;
    n.name = param;
    n.scalar = scalar;
    n.transpose = transpose;
    Op(kind, std::move(inputs), n);
  }

  // If the contributions are PadSlices that tile the row exactly (the gradient of a Split),
  // their sum is the Concat of the slices: returns that node, else -1.
  int Tiled(std::vector<int> parts) {
    if (parts.size() < 2) return -1;
    for (int p : parts) {
      if (bw_.nodes[p].kind != OpKind::kPadSlice) return -1;
    }
    std::sort(parts.begin(), parts.end(),
              [&](int a, int b) { return bw_.nodes[a].begin < bw_.nodes[b].begin; });
    int64_t next = 0;
    std::vector<int> inputs;
    for (int p : parts) {
      if (bw_.nodes[p].begin != next) return -1;
      next = bw_.nodes[p].end;
      inputs.push_back(bw_.nodes[p].inputs[0]);
    }
    if (next != bw_.nodes[parts[0]].width) return -1;
    return Op(OpKind::kConcat, std::move(inputs));
  }

  void BackpropBinary(const Node& n, int g);
  void Backprop(int id, int g);

  const Program& fwd_;
  Program bw_;
  std::vector<std::vector<int>> contrib_;
  std::vector<char> needs_grad_;
  absl::flat_hash_map<int, int> values_;
};

inline void Differentiator::BackpropBinary(const Node& n, int g) {
  const int a = n.inputs[0], b = n.inputs[1];
  const Node& bn = fwd_.nodes[b];
  const int gb = n.kind == OpKind::kSub ? Op(OpKind::kNeg, {g}) : g;
  if (n.kind == OpKind::kAdd || n.kind == OpKind::kSub) {
    Give(a, g);
    if (bn.is_static()) {
      Sink(OpKind::kWeightGradBias, {g}, bn.name, n.kind == OpKind::kSub ? -1.0f : 1.0f);
    } else {
      Give(b, gb);
    }
    return;
  }
  // kMul
  if (needs_grad_[a]) Give(a, Op(OpKind::kMul, {g, Value(b)}));
  if (bn.is_static()) {
    Sink(OpKind::kWeightGradScale, {Value(a), g}, bn.name);
  } else if (needs_grad_[b]) {
    Give(b, Op(OpKind::kMul, {g, Value(a)}));
  }
}

inline void Differentiator::Backprop(int id, int g) {
  const Node& n = fwd_.nodes[id];
  Node attrs;
  switch (n.kind) {
    case OpKind::kEmbed:
      Sink(OpKind::kEmbedGrad, {g}, fwd_.nodes[n.inputs[0]].name);
      return;
    case OpKind::kGather:
    case OpKind::kGatherReduce:
      attrs.kind = n.kind == OpKind::kGather ? OpKind::kGatherGrad : OpKind::kGatherReduceGrad;
      attrs.field = n.field;
      attrs.reduce = n.reduce;
      attrs.index = n.kind == OpKind::kGather ? n.index : id;  // max needs the forward node
      Op(attrs.kind, {g}, attrs);
      return;
    case OpKind::kMatMul: {
      const Node& w = fwd_.nodes[n.inputs[1]];
      if (needs_grad_[n.inputs[0]]) {
        attrs.transpose = !n.transpose;
        Give(n.inputs[0], Op(OpKind::kMatMul, {g, Value(n.inputs[1])}, attrs));
      }
      Sink(OpKind::kWeightGradMatMul, {Value(n.inputs[0]), g}, w.name, 1.0f, n.transpose);
      return;
    }
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
      BackpropBinary(n, g);
      return;
    case OpKind::kSigmoid:
      Give(n.inputs[0], Op(OpKind::kSigmoidGrad, {Value(id), g}));
      return;
    case OpKind::kTanh:
      Give(n.inputs[0], Op(OpKind::kTanhGrad, {Value(id), g}));
      return;
    case OpKind::kRelu:
      Give(n.inputs[0], Op(OpKind::kReluGrad, {Value(id), g}));
      return;
    case OpKind::kNeg:
      Give(n.inputs[0], Op(OpKind::kNeg, {g}));
      return;
    case OpKind::kScale:
      attrs.scalar = n.scalar;
      Give(n.inputs[0], Op(OpKind::kScale, {g}, attrs));
      return;
    case OpKind::kDropout:
      attrs.scalar = n.scalar;
      attrs.index = n.index;
      Give(n.inputs[0], Op(OpKind::kDropout, {g}, attrs));
      return;
    case OpKind::kConcat: {
      int64_t off = 0;
      for (int in : n.inputs) {
        const int64_t w = fwd_.nodes[in].width;
        if (needs_grad_[in]) {
          attrs.begin = off;
          attrs.end = off + w;
          Give(in, Op(OpKind::kSlice, {g}, attrs));
        }
        off += w;
      }
      return;
    }
    case OpKind::kSlice:
      attrs.begin = n.begin;
      attrs.end = n.end;
      attrs.width = fwd_.nodes[n.inputs[0]].width;
      attrs.kind = OpKind::kPadSlice;
      attrs.inputs = {g};
      Give(n.inputs[0], Add(attrs));
      return;
    case OpKind::kSum:
      attrs.kind = OpKind::kBroadcastCols;
      attrs.width = fwd_.nodes[n.inputs[0]].width;
      attrs.inputs = {g};
      Give(n.inputs[0], Add(attrs));
      return;
    default:
      return;  // leaves without gradients (pull) and parameters (handled by their consumers)
  }
}

}  // namespace cavs::vertex::internal
