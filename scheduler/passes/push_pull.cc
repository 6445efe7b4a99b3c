// Pass: children push their fields into their parents' rows and pull their gradients back.
#include <algorithm>
#include <utility>
#include <vector>

#include "core/status.h"
#include "scheduler/passes/passes.h"

namespace cavs::scheduler::internal {

using vertex::Node;
using vertex::OpClass;
using vertex::OpKind;

void MarkPushes(Compiled& c, const vertex::Function& f) {
  const vertex::Program& fp = f.forward();
  c.fwd.replaced.assign(fp.nodes.size(), 0);
  std::vector<Step>& steps = c.fwd.steps[static_cast<int>(OpClass::kInRounds)];
  for (const Step& gst : steps) {
    for (int g : gst.nodes) {
      const Node& n = fp.nodes[g];
      const int field = c.fwd.field[g];
      if (n.kind != OpKind::kGather || c.fwd.views[g].buffer < 0 || field < 0) continue;
      const int producer = f.scatter()[field].node;
      if (c.fwd.scratch_col[producer] >= 0 || c.fwd.views[producer].buffer < 0) continue;
      for (Step& st : steps) {
        if (!st.fused || std::find(st.nodes.begin(), st.nodes.end(), producer) == st.nodes.end()) {
          continue;
        }
        st.pushes.push_back({g, producer});
        ++st.instrs;
        c.fwd.replaced[g] = 1;
        c.buffers[c.fwd.views[g].buffer].zero = true;
        break;
      }
    }
  }
}
void MergePushedRows(Compiled& c) {
  std::vector<int> pushed;  // buffer ids, in first-push order
  for (const Step& st : c.fwd.steps[static_cast<int>(OpClass::kInRounds)]) {
    for (const Push& push : st.pushes) {
      const int b = c.fwd.views[push.gather].buffer;
      if (std::find(pushed.begin(), pushed.end(), b) == pushed.end()) pushed.push_back(b);
    }
  }
  if (pushed.empty()) return;
  std::vector<int64_t> base(c.buffers.size(), -1);  // column of each merged buffer
  int64_t width = 0;
  for (int b : pushed) {
    base[b] = width;
    width += c.buffers[b].width;
    c.buffers[b].unused = true;
  }
  const int merged = NewBuffer(c, width, false, true);
  for (ProgramSchedule* s : {&c.fwd, &c.bwd}) {
    for (View& v : s->views) {
      if (v.buffer < 0 || base[v.buffer] < 0) continue;
      CAVS_CHECK(v.ld == c.buffers[v.buffer].width,
                 "a view of a pushed buffer with its own stride");
      v = {merged, base[v.buffer] + v.col, width};
    }
  }
  c.pushed_rows = merged;
}
void MarkPulls(Compiled& c, const vertex::Function& f) {
  const vertex::Program& bp = f.backward();
  c.bwd.replaced.assign(bp.nodes.size(), 0);
  std::vector<Step>& steps = c.bwd.steps[static_cast<int>(OpClass::kInRounds)];
  for (const Step& gst : steps) {
    for (int g : gst.nodes) {
      const Node& n = bp.nodes[g];
      const int field = c.bwd.field[g];
      if (n.kind != OpKind::kGatherGrad || field < 0) continue;
      const int buffer = c.field_grad[field];
      for (Step& st : steps) {
        bool reads = false;
        for (int id : st.nodes) {
          for (int in : bp.nodes[id].inputs) reads |= c.bwd.views[in].buffer == buffer;
        }
        if (!reads) continue;
        if (st.fused) {
          st.pulls.push_back({g, buffer});
          ++st.instrs;
          c.bwd.replaced[g] = 1;
        }
        break;  // the first reader decides
      }
    }
  }
}

}  // namespace cavs::scheduler::internal
