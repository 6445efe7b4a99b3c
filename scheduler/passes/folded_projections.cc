// Pass: the embeddings a run with folded input projections need not gather.
#include <algorithm>
#include <utility>
#include <vector>

#include "core/status.h"
#include "scheduler/passes/passes.h"

namespace cavs::scheduler::internal {

using vertex::Node;
using vertex::OpClass;
using vertex::OpKind;

int ProjectedEmbed(const vertex::Program& p, int id) {
  const Node& n = p.nodes[id];
  if (n.kind != OpKind::kMatMul || !p.nodes[n.inputs[1]].is_static()) return -1;
  int x = n.inputs[0];
  if (p.nodes[x].kind == OpKind::kDropout) x = p.nodes[x].inputs[0];
  return p.nodes[x].kind == OpKind::kEmbed ? x : -1;
}

std::vector<char> FoldedEmbedsUnread(const vertex::Function& f, const ProgramSchedule& s) {
  const vertex::Program& p = f.forward();
  const int nodes = static_cast<int>(p.nodes.size());
  std::vector<std::vector<int>> readers(nodes);
  for (int id = 0; id < nodes; ++id) {
    for (int in : p.nodes[id].inputs) readers[in].push_back(id);
  }
  // Read outside the program: the fields the parents gather, the pushes (-1: not a MatMul).
  for (const vertex::ScatterField& field : f.scatter()) readers[field.node].push_back(-1);
  for (int push : f.pushes()) readers[push].push_back(-1);
  // A MatMul whose folded gather writes every row it would have started.
  auto starts = [&](int id) {
    if (id < 0 || ProjectedEmbed(p, id) < 0 ||
        p.nodes[id].op_class != vertex::OpClass::kBeforeRounds) {
      return false;
    }
    const int sum = s.gemm[id].sum;
    if (sum < 0) return true;
    for (int other = 0; other < nodes; ++other) {
      if (other != id && s.gemm[other].sum == sum &&
          p.nodes[other].op_class == vertex::OpClass::kBeforeRounds) {
        return false;
      }
    }
    return true;
  };
  std::vector<char> unread(nodes, 0);
  for (int e = 0; e < nodes; ++e) {
    if (p.nodes[e].kind != OpKind::kEmbed || readers[e].empty()) continue;
    bool ok = true;
    for (int r : readers[e]) {
      if (r >= 0 && p.nodes[r].kind == OpKind::kDropout) {
        bool dropout_unread = !readers[r].empty();
        for (int rr : readers[r]) dropout_unread = dropout_unread && starts(rr);
        unread[r] = dropout_unread ? 1 : 0;
        ok = ok && dropout_unread;
      } else {
        ok = ok && starts(r);
      }
    }
    unread[e] = ok ? 1 : 0;
  }
  return unread;
}

}  // namespace cavs::scheduler::internal
