// Pass: sums of GEMMs computed in place (x W + h U + b).
#include <algorithm>
#include <utility>
#include <vector>

#include "core/status.h"
#include "scheduler/engine_record.h"
#include "scheduler/passes/passes.h"

namespace cavs::scheduler::internal {

using vertex::Node;
using vertex::OpClass;
using vertex::OpKind;

std::vector<GemmSum> FoldGemmSums(Compiled& c, const vertex::Function& f, ProgramSchedule& s) {
  const vertex::Program& p = f.forward();
  const int n = static_cast<int>(p.nodes.size());
  std::vector<int> readers(n, 0);
  std::vector<char> value_read(n, 0);  // read by the backward (kForwardValue)
  for (const Node& node : p.nodes) {
    for (int in : node.inputs) ++readers[in];
  }
  for (int id : f.pushes()) ++readers[id];
  for (const vertex::ScatterField& sf : f.scatter()) ++readers[sf.node];
  for (const Node& node : f.backward().nodes) {
    if (node.kind == OpKind::kForwardValue) value_read[node.index] = 1;
  }
  std::vector<char> absorbed(n, 0);
  std::vector<GemmSum> sums;
  for (int root = n - 1; root >= 0; --root) {
    const Node& r = p.nodes[root];
    if (r.kind != OpKind::kAdd || absorbed[root] || s.no_op[root]) continue;
    GemmSum sum{root, {}, -1};
    std::vector<int> inner, stack = {r.inputs[0], r.inputs[1]};
    bool ok = true;
    while (ok && !stack.empty()) {
      const int x = stack.back();
      stack.pop_back();
      const Node& t = p.nodes[x];
      const bool sole = readers[x] == 1 && !value_read[x] && t.width == r.width &&
                        s.views[x].buffer < 0 && !absorbed[x];
      if (t.kind == OpKind::kAdd && sole) {
        inner.push_back(x);
        stack.push_back(t.inputs[0]);
        stack.push_back(t.inputs[1]);
      } else if (t.kind == OpKind::kMatMul && sole) {
        sum.gemms.push_back(x);
      } else if (t.is_static() && t.param_shape.NumElements() == r.width && sum.bias < 0) {
        sum.bias = x;
      } else {
        ok = false;
      }
    }
    if (!ok || sum.gemms.empty() || (sum.gemms.size() < 2 && sum.bias < 0)) continue;
    // A term that runs once after the rounds would meet one written interval per round of an
    // in-round term: keep such sums unfolded (the per-call fill bound assumes otherwise).
    bool in_rounds = false, after = false;
    for (int x : sum.gemms) {
      in_rounds |= p.nodes[x].op_class == OpClass::kInRounds;
      after |= p.nodes[x].op_class == OpClass::kAfterRounds;
    }
    if (in_rounds && after) continue;
    if (s.views[root].buffer < 0) s.views[root] = {NewBuffer(c, r.width, false), 0, r.width};
    for (int x : sum.gemms) s.views[x] = s.views[root];
    for (int x : inner) {
      s.views[x] = s.views[root];
      s.no_op[x] = 1;
      absorbed[x] = 1;
    }
    s.no_op[root] = 1;
    sums.push_back(std::move(sum));
  }
  return sums;
}
void OrderGemmSums(const std::vector<GemmSum>& sums, ProgramSchedule& s) {
  for (const GemmSum& sum : sums) {
    std::vector<std::pair<std::pair<int, int>, Step*>> order;  // ((class, step), step)
    for (int cls = 0; cls < 5; ++cls) {
      for (size_t i = 0; i < s.steps[cls].size(); ++i) {
        Step& st = s.steps[cls][i];
        if (st.fused) continue;
        for (int x : sum.gemms) {
          if (st.nodes[0] == x) order.push_back({{cls, static_cast<int>(i)}, &st});
        }
      }
    }
    CAVS_CHECK(order.size() == sum.gemms.size(), "a folded sum's GEMMs were not scheduled");
    std::sort(order.begin(), order.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    const int terms = static_cast<int>(order.size());
    for (int i = 0; i < terms; ++i) {
      GemmWrite& w = s.gemm[order[i].second->nodes[0]];
      w.sum = s.num_sums;
      w.bias = sum.bias;
      w.last = i == terms - 1;
      order[i].second->instrs = (sum.bias >= 0 ? i + 1 : 0) + (w.last ? terms + 1 : 0);
    }
    ++s.num_sums;
  }
}

// Record time: the rows each term writes.

std::vector<std::pair<Interval, bool>> SplitByWritten(Interval rows,
                                                      const std::vector<Interval>& written) {
  std::vector<std::pair<Interval, bool>> out;
  int64_t cur = rows.first;
  for (const Interval& w : written) {
    if (cur >= rows.second) break;
    if (w.second <= cur) continue;
    if (w.first >= rows.second) break;
    if (w.first > cur) out.push_back({{cur, w.first}, false});
    const int64_t end = std::min(w.second, rows.second);
    out.push_back({{std::max(cur, w.first), end}, true});
    cur = end;
  }
  if (cur < rows.second) out.push_back({{cur, rows.second}, false});
  return out;
}

void AddWritten(Interval rows, std::vector<Interval>& written) {
  if (rows.first >= rows.second) return;
  std::vector<Interval> out;
  for (const Interval& w : written) {
    if (w.second < rows.first || w.first > rows.second) {
      out.push_back(w);
    } else {
      rows = {std::min(rows.first, w.first), std::max(rows.second, w.second)};
    }
  }
  out.push_back(rows);
  std::sort(out.begin(), out.end());
  written = std::move(out);
}

void Recorder::FillRows(const Step& st, float* dst0, int64_t ld, int64_t width, const float* row,
                        int64_t row0, int64_t rows) {
  auto [it, fresh] = b_.rec.program_at.try_emplace(&st, b_.out.instrs.size());
  if (fresh) {
    ops::EwInstr fill;
    fill.op = row != nullptr ? ops::EwOp::kCopy : ops::EwOp::kZero;
    fill.width = width;
    fill.dst = {dst0, ld};
    fill.a = {const_cast<float*>(row), 0};
    b_.out.instrs.push_back(fill);
  }
  LaunchInstrs({&st, kFillRows}, it->second, 1, row0, rows, 0);
}

}  // namespace cavs::scheduler::internal
