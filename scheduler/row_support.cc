#include "scheduler/row_support.h"

#include <algorithm>

namespace cavs::scheduler {

using vertex::Node;
using vertex::OpKind;

Interval Hull(Interval a, Interval b) {
  if (a.first >= a.second) return b;
  if (b.first >= b.second) return a;
  return {std::min(a.first, b.first), std::max(a.second, b.second)};
}
Interval Meet(Interval a, Interval b) {
  return {std::max(a.first, b.first), std::min(a.second, b.second)};
}

std::vector<Interval> Supports(const vertex::Program& p, const Plan& plan,
                               const std::vector<Interval>* fwd) {
  const Interval all{0, plan.num_rows};
  std::vector<Interval> sup(p.nodes.size(), all);
  for (size_t id = 0; id < p.nodes.size(); ++id) {
    const Node& n = p.nodes[id];
    auto in = [&](int i) { return p.nodes[n.inputs[i]].is_static() ? all : sup[n.inputs[i]]; };
    switch (n.kind) {
      case OpKind::kEmbed:
        sup[id] = plan.token_rows;
        break;
      case OpKind::kGather:
        sup[id] = plan.child_slot_rows[n.index];
        break;
      case OpKind::kGatherReduce:
        sup[id] = plan.parent_rows;
        break;
      case OpKind::kForwardValue:
        sup[id] = (*fwd)[n.index];
        break;
      case OpKind::kMatMul:
      case OpKind::kTanh:
      case OpKind::kRelu:
      case OpKind::kNeg:
      case OpKind::kSlice:
      case OpKind::kPadSlice:
      case OpKind::kSum:
      case OpKind::kBroadcastCols:
      case OpKind::kDropout:
        sup[id] = in(0);
        break;
      case OpKind::kScale:
        sup[id] = n.offset == 0.0f ? in(0) : all;
        break;
      case OpKind::kMul:
      case OpKind::kReluGrad:
        sup[id] = Meet(in(0), in(1));
        break;
      case OpKind::kSigmoidGrad:
      case OpKind::kTanhGrad:
        sup[id] = in(1);
        break;
      case OpKind::kAdd:
      case OpKind::kSub:
        sup[id] = Hull(in(0), in(1));
        break;
      case OpKind::kConcat: {
        Interval h{0, 0};
        for (size_t i = 0; i < n.inputs.size(); ++i) h = Hull(h, in(static_cast<int>(i)));
        sup[id] = h;
        break;
      }
      default:
        break;  // Pull, Sigmoid, leaves of the backward: anywhere
    }
  }
  return sup;
}

std::vector<Interval> Needs(const vertex::Function& f, const Plan& plan) {
  const vertex::Program& p = f.backward();
  const Interval all{0, plan.num_rows};
  std::vector<Interval> need(p.nodes.size(), Interval{0, 0});
  for (int id = static_cast<int>(p.nodes.size()) - 1; id >= 0; --id) {
    const Node& n = p.nodes[id];
    if (vertex::IsSink(n.kind)) {
      Interval s = all;
      if (n.kind == OpKind::kEmbedGrad) {
        s = plan.token_rows;
      } else if (n.kind == OpKind::kGatherGrad) {
        s = plan.child_slot_rows[n.index];
      }
      need[id] = s;
    }
    for (int i : n.inputs) need[i] = Hull(need[i], need[id]);
  }
  return need;
}

}  // namespace cavs::scheduler
