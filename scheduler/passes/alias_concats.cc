// Pass: Concats whose inputs are produced straight into its columns.
#include <algorithm>
#include <utility>
#include <vector>

#include "core/status.h"
#include "scheduler/passes/passes.h"

namespace cavs::scheduler::internal {

using vertex::Node;
using vertex::OpClass;
using vertex::OpKind;

void AliasConcats(Compiled& c, const vertex::Program& p, ProgramSchedule& s, bool backward) {
  std::vector<char> aliased(p.nodes.size(), 0);
  for (int id = static_cast<int>(p.nodes.size()) - 1; id >= 0; --id) {
    const Node& n = p.nodes[id];
    if (n.kind != OpKind::kConcat) continue;
    bool ok = true;
    for (size_t i = 0; i < n.inputs.size() && ok; ++i) {
      const int in = n.inputs[i];
      ok = !IsLeafOrView(p.nodes[in].kind) && !p.nodes[in].is_static() && !aliased[in] &&
           s.views[in].buffer < 0;
      for (size_t j = 0; j < i; ++j) ok = ok && n.inputs[j] != in;
    }
    if (!ok) continue;
    if (s.views[id].buffer < 0) s.views[id] = {NewBuffer(c, n.width, backward), 0, n.width};
    int64_t col = s.views[id].col;
    for (int in : n.inputs) {
      s.views[in] = {s.views[id].buffer, col, s.views[id].ld};
      aliased[in] = 1;
      col += p.nodes[in].width;
    }
    s.no_op[id] = 1;
  }
}

}  // namespace cavs::scheduler::internal
