// Pass: a fused step's temporaries in its scratch row.
#include <algorithm>
#include <utility>
#include <vector>

#include "core/status.h"
#include "scheduler/passes/passes.h"

namespace cavs::scheduler::internal {

using vertex::Node;
using vertex::OpClass;
using vertex::OpKind;

void AssignScratch(Compiled& c, const vertex::Function& f, bool backward) {
  const vertex::Program& p = backward ? f.backward() : f.forward();
  ProgramSchedule& s = backward ? c.bwd : c.fwd;
  std::vector<int> viewers(c.buffers.size(), 0);
  for (const ProgramSchedule* sched : {&c.fwd, &c.bwd}) {
    for (const View& v : sched->views) {
      if (v.buffer >= 0) ++viewers[v.buffer];
    }
  }
  std::vector<char> exported(p.nodes.size(), 0);
  if (!backward) {
    for (int id : f.pushes()) exported[id] = 1;
    for (const vertex::ScatterField& sf : f.scatter()) exported[sf.node] = 1;
  }
  std::vector<int> step_of(p.nodes.size(), -1);
  int step_id = 0;
  for (const std::vector<Step>& steps : s.steps) {
    for (const Step& st : steps) {
      for (int id : st.nodes) step_of[id] = step_id;
      ++step_id;
    }
  }
  std::vector<char> outside(p.nodes.size(), 0);  // read by a node of another step
  for (size_t id = 0; id < p.nodes.size(); ++id) {
    for (int in : p.nodes[id].inputs) {
      if (step_of[id] < 0 || step_of[id] != step_of[in]) outside[in] = 1;
    }
  }
  for (std::vector<Step>& steps : s.steps) {
    for (Step& st : steps) {
      if (!st.fused) continue;
      int64_t col = 0;
      for (int id : st.nodes) {
        const Node& n = p.nodes[id];
        const View& v = s.views[id];
        // One instruction that writes the node's own view (a Concat or PadSlice writes
        // column ranges of it instead, even with one input).
        if (InstrCount(n) != 1 || n.kind == OpKind::kConcat || n.kind == OpKind::kPadSlice ||
            exported[id] || outside[id] || v.buffer < 0 || v.col != 0 ||
            c.buffers[v.buffer].width != n.width || viewers[v.buffer] != 1 ||
            c.buffers[v.buffer].zero || c.buffers[v.buffer].features) {
          continue;
        }
        s.scratch_col[id] = col;
        c.buffers[v.buffer].unused = true;
        col += (n.width + 15) / 16 * 16;
      }
    }
  }
}

}  // namespace cavs::scheduler::internal
