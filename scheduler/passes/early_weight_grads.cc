// Pass: the weight gradients final before the backward rounds run before them.
#include <algorithm>
#include <utility>
#include <vector>

#include "core/status.h"
#include "scheduler/passes/passes.h"

namespace cavs::scheduler::internal {

using vertex::Node;
using vertex::OpClass;
using vertex::OpKind;

void SplitEarlyWeightGrads(const vertex::Program& p, ProgramSchedule& s) {
  std::vector<Step>& late = s.steps[static_cast<int>(OpClass::kWeightGrad)];
  std::vector<Step> rest;
  for (Step& st : late) {
    const Node& n = p.nodes[st.nodes[0]];
    bool early = n.kind != OpKind::kEmbedGrad;
    for (int in : n.inputs) {
      const OpClass c = p.nodes[in].op_class;
      early = early && (c == OpClass::kBeforeRounds || c == OpClass::kStatic);
    }
    (early ? s.early_weight_grads : rest).push_back(std::move(st));
  }
  late = std::move(rest);
}

}  // namespace cavs::scheduler::internal
