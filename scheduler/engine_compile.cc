#include "scheduler/engine_compile.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <utility>

#include "absl/hash/hash.h"
#include "core/status.h"
#include "scheduler/passes/passes.h"

namespace cavs::scheduler::internal {

using vertex::Node;
using vertex::OpClass;
using vertex::OpKind;

int InstrCount(const Node& n) {
  if (n.kind == OpKind::kConcat) return static_cast<int>(n.inputs.size());
  if (n.kind == OpKind::kPadSlice) return 2;
  return 1;
}

bool IsLeafOrView(OpKind k) {
  return k == OpKind::kParam || k == OpKind::kPull || k == OpKind::kForwardValue ||
         k == OpKind::kScatterGrad || k == OpKind::kPushGrad || k == OpKind::kSlice;
}

int NewBuffer(Compiled& c, int64_t width, bool backward_only, bool zero) {
  c.buffers.push_back({width, zero, backward_only, false});
  return static_cast<int>(c.buffers.size()) - 1;
}

namespace {

void AssignViews(Compiled& c, const vertex::Function& f, const vertex::Program& p,
                 ProgramSchedule& s, bool backward) {
  for (int id = 0; id < static_cast<int>(p.nodes.size()); ++id) {
    const Node& n = p.nodes[id];
    if (n.is_static() || vertex::IsSink(n.kind)) {
      s.no_op[id] = 1;
      continue;
    }
    switch (n.kind) {
      case OpKind::kPull: {
        const int b = NewBuffer(c, n.width, false);
        c.buffers[b].features = true;
        s.views[id] = {b, 0, n.width};
        s.no_op[id] = 1;
        continue;
      }
      case OpKind::kSlice: {
        const View in = s.views[n.inputs[0]];
        s.views[id] = {in.buffer, in.col + n.begin, in.ld};
        s.no_op[id] = 1;
        continue;
      }
      case OpKind::kForwardValue:
        s.views[id] = c.fwd.views[n.index];
        s.no_op[id] = 1;
        continue;
      case OpKind::kScatterGrad:
        if (const int fi = s.field[id]; fi >= 0) {
          s.views[id] = {c.field_grad[fi], 0, n.width};
        }
        s.no_op[id] = 1;
        continue;
      case OpKind::kPushGrad:
        s.views[id] = n.index == 0 ? View{c.dlogits, 0, n.width}
                                   : View{NewBuffer(c, n.width, true, true), 0, n.width};
        s.no_op[id] = 1;
        continue;
      default:
        if (s.views[id].buffer < 0) s.views[id] = {NewBuffer(c, n.width, backward), 0, n.width};
    }
  }
}

bool Fusable(const Node& n) { return vertex::IsElementwise(n.kind); }

// Cuts one op class into steps: all ready single ops, then one maximal fused group, repeated.
std::vector<Step> CutSteps(const vertex::Program& p, const ProgramSchedule& s, OpClass cls) {
  const int n = static_cast<int>(p.nodes.size());
  std::vector<char> done(n, 1);
  std::vector<int> pending;
  for (int id = 0; id < n; ++id) {
    if (p.nodes[id].op_class == cls && !p.nodes[id].is_static()) {
      done[id] = 0;
      pending.push_back(id);
    }
  }
  auto ready = [&](int id) {
    for (int in : p.nodes[id].inputs) {
      if (!done[in]) return false;
    }
    return true;
  };
  std::vector<Step> steps;
  while (!pending.empty()) {
    bool progress = true;
    while (progress) {
      progress = false;
      for (int id : pending) {
        if (done[id] || !ready(id) || (Fusable(p.nodes[id]) && !s.no_op[id])) continue;
        done[id] = 1;
        progress = true;
        if (!s.no_op[id] || vertex::IsSink(p.nodes[id].kind)) steps.push_back({false, {id}, 0});
      }
    }
    Step group{true, {}, 0};
    for (int id : pending) {
      if (done[id] || !ready(id)) continue;
      if (!s.no_op[id] && !Fusable(p.nodes[id])) continue;
      if (s.no_op[id] && vertex::IsSink(p.nodes[id].kind)) continue;
      done[id] = 1;
      if (s.no_op[id]) continue;
      group.nodes.push_back(id);
      group.instrs += InstrCount(p.nodes[id]);
    }
    if (!group.nodes.empty()) steps.push_back(std::move(group));
    std::vector<int> rest;
    for (int id : pending) {
      if (!done[id]) rest.push_back(id);
    }
    CAVS_CHECK(rest.size() < pending.size() || rest.empty(), "schedule made no progress");
    pending.swap(rest);
  }
  return steps;
}

// Within each run of single steps, gathers (leaves: nothing to wait for) go first and
// gradient sends to children (sinks: nothing waits for them) go last, so that each kind forms
// one run that the engine launches as one multi-copy kernel.
void GroupCopies(const vertex::Program& p, std::vector<Step>& steps) {
  auto rank = [&](const Step& st) {
    if (st.fused) return 1;
    const OpKind k = p.nodes[st.nodes[0]].kind;
    return k == OpKind::kGather ? 0 : k == OpKind::kGatherGrad ? 2 : 1;
  };
  for (size_t i = 0; i < steps.size();) {
    size_t j = i;
    while (j < steps.size() && !steps[j].fused) ++j;
    std::stable_sort(steps.begin() + i, steps.begin() + j,
                     [&](const Step& a, const Step& b) { return rank(a) < rank(b); });
    i = j + 1;
  }
}

}  // namespace

// Step::shapes of every step: a hash of the Compile call's serial (unique in the process), the
// program, the class, the step's index and the launch's kind. Nonzero (0 means none).
void NameShapes(Compiled& c) {
  static std::atomic<uint64_t> next_serial{1};
  const uint64_t serial = next_serial.fetch_add(1, std::memory_order_relaxed);
  for (int program = 0; program < 2; ++program) {
    auto& classes = program == 0 ? c.fwd.steps : c.bwd.steps;
    for (size_t cls = 0; cls < classes.size(); ++cls) {
      for (size_t i = 0; i < classes[cls].size(); ++i) {
        for (int kind = 0; kind < 8; ++kind) {
          classes[cls][i].shapes[kind] = absl::HashOf(serial, program, cls, i, kind) | 1;
        }
      }
    }
  }
}

namespace {

// Compiled::read_after_its_round and sum_across_rounds.
void MarkJoinFacts(Compiled& c, const vertex::Function& f) {
  const vertex::Program& p = f.forward();
  c.read_after_its_round.assign(c.buffers.size(), 0);
  auto mark = [&](int node) {
    const int buffer = c.fwd.views[static_cast<size_t>(node)].buffer;
    if (buffer >= 0) c.read_after_its_round[static_cast<size_t>(buffer)] = 1;
  };
  for (const Node& n : p.nodes) {
    if (n.op_class != OpClass::kAfterRounds) continue;
    for (int in : n.inputs) {
      const OpClass cls = p.nodes[static_cast<size_t>(in)].op_class;
      if (cls == OpClass::kBeforeRounds || cls == OpClass::kInRounds) mark(in);
    }
  }
  for (const vertex::ScatterField& field : f.scatter()) mark(field.node);
  for (int push : f.pushes()) mark(push);
  std::vector<std::array<bool, 2>> classes(static_cast<size_t>(c.fwd.num_sums));
  for (size_t id = 0; id < p.nodes.size(); ++id) {
    const int sum = c.fwd.gemm[id].sum;
    if (sum < 0) continue;
    classes[static_cast<size_t>(sum)][0] |= p.nodes[id].op_class == OpClass::kBeforeRounds;
    classes[static_cast<size_t>(sum)][1] |= p.nodes[id].op_class == OpClass::kAfterRounds;
  }
  for (const std::array<bool, 2>& k : classes) c.sum_across_rounds |= k[0] && k[1];
}

}  // namespace

Compiled Compile(const vertex::Function& f, const CompileOptions& options) {
  Compiled c;
  const vertex::Program& fp = f.forward();
  const vertex::Program& bp = f.backward();
  auto fields = [&f](const vertex::Program& p) {
    std::vector<int> out;
    for (const Node& n : p.nodes) out.push_back(n.field.empty() ? -1 : f.FieldIndex(n.field));
    return out;
  };
  c.fwd.field = fields(fp);
  c.bwd.field = fields(bp);
  c.fwd.views.assign(fp.nodes.size(), View());
  c.fwd.no_op.assign(fp.nodes.size(), 0);
  c.fwd.gemm.assign(fp.nodes.size(), GemmWrite());
  if (options.alias_concats) AliasConcats(c, fp, c.fwd, false);
  std::vector<GemmSum> sums;
  if (options.fold_gemm_sums) sums = FoldGemmSums(c, f, c.fwd);
  AssignViews(c, f, fp, c.fwd, false);
  if (!f.pushes().empty()) {
    const int64_t classes = fp.nodes[f.pushes()[0]].width;
    c.dlogits = NewBuffer(c, classes, false);  // the loss kernel writes it in inference too
  }
  for (const vertex::ScatterField& sf : f.scatter()) {
    c.field_grad.push_back(NewBuffer(c, fp.nodes[sf.node].width, true, true));
  }
  c.bwd.views.assign(bp.nodes.size(), View());
  c.bwd.no_op.assign(bp.nodes.size(), 0);
  c.bwd.gemm.assign(bp.nodes.size(), GemmWrite());
  c.fwd.scratch_col.assign(fp.nodes.size(), -1);
  c.bwd.scratch_col.assign(bp.nodes.size(), -1);
  if (options.alias_concats) AliasConcats(c, bp, c.bwd, true);
  AssignViews(c, f, bp, c.bwd, true);
  for (int cls = 0; cls < 5; ++cls) {
    c.fwd.steps[cls] = CutSteps(fp, c.fwd, static_cast<OpClass>(cls));
    c.bwd.steps[cls] = CutSteps(bp, c.bwd, static_cast<OpClass>(cls));
    GroupCopies(fp, c.fwd.steps[cls]);
    GroupCopies(bp, c.bwd.steps[cls]);
  }
  OrderGemmSums(sums, c.fwd);
  if (options.scratch_rows) {
    AssignScratch(c, f, false);
    AssignScratch(c, f, true);
  }
  if (options.early_weight_grads) SplitEarlyWeightGrads(bp, c.bwd);
  c.fwd.replaced.assign(fp.nodes.size(), 0);
  c.bwd.replaced.assign(bp.nodes.size(), 0);
  if (options.push_pull) {
    MarkPushes(c, f);
    MergePushedRows(c);
    MarkPulls(c, f);
  }
  NameShapes(c);
  c.fold_unread = FoldedEmbedsUnread(f, c.fwd);
  MarkJoinFacts(c, f);
  return c;
}

}  // namespace cavs::scheduler::internal
