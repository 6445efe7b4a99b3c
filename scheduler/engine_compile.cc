#include "scheduler/engine_compile.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/hash/hash.h"
#include "core/status.h"

namespace cavs::scheduler::internal {

using vertex::Node;
using vertex::OpClass;
using vertex::OpKind;

int InstrCount(const Node& n) {
  if (n.kind == OpKind::kConcat) return static_cast<int>(n.inputs.size());
  if (n.kind == OpKind::kPadSlice) return 2;
  return 1;
}

namespace {

bool IsLeafOrView(OpKind k) {
  return k == OpKind::kParam || k == OpKind::kPull || k == OpKind::kForwardValue ||
         k == OpKind::kScatterGrad || k == OpKind::kPushGrad || k == OpKind::kSlice;
}

int NewBuffer(Compiled& c, int64_t width, bool backward_only, bool zero = false) {
  c.buffers.push_back({width, zero, backward_only, false});
  return static_cast<int>(c.buffers.size()) - 1;
}

// Concat inputs that can be produced straight into the Concat's columns get views there;
// the Concat then costs nothing. Outer Concats first, so nested ones compose.
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

// A sum of GEMMs and at most one bias row, x W + h U + b, that is computed in place: its terms
// write straight into the sum's view, so the adds, the sum's own pass over the rows and the
// zero-fills of rows a GEMM skips all go.
struct GemmSum {
  int root = -1;
  std::vector<int> gemms;
  int bias = -1;
};

// Finds the foldable sums of the forward program and gives their terms and inner adds the
// root's view; the root and inner adds become no-ops. A term qualifies when the sum is its only
// reader and the backward does not read its value; every term must qualify.
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

// Once the steps are cut: each sum's terms in execution order (op class, then step). A term's
// call splits its rows into pieces by what earlier terms wrote: at most (terms before it + 1)
// pieces to start with the bias, and for the last term at most (terms + 1) gaps to fill; its
// step reserves that many fill instructions (unused ones stay as padding).
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

// Nodes of fused steps whose value lives and dies within the step become per-row temporaries:
// one instruction, a buffer of their own that no other node (of either program) views, and
// every reader in the same step; not pushed or scattered.
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

// Weight-gradient sinks whose inputs are final before the backward rounds (every input is a
// before-rounds node: the output layer's gradient comes from d loss alone) run before the rounds,
// so that the distributed trainer can send them while the rounds run. Embedding gradients stay
// at the end (their rows are assembled after the batch).
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

}  // namespace

// A forward Gather in the rounds whose field's producer is in a fused step of the rounds is
// pushed by that step (Step::pushes): the child writes its value into its parent's gathered row
// as soon as it computes it, instead of a gather launch in the parent's round. Rows without a
// child in a slot must then read zero: the gathered buffer is zeroed before each batch.
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

// The buffers of the pushed Gathers become column ranges of one buffer (Compiled::pushed_rows),
// so that the rows a batch must zero (those with an empty slot: the leaves, in round 0 on trees)
// are one range, at the end of the arena's zeroed region (engine.cc, LayOut). A row with a
// child in every slot is written by the pushes before it is read.
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

// A backward GatherGrad in the rounds is pulled by the first step of the rounds that reads its
// field's gradient (the kScatterGrad node, or a view of it such as a Slice where a Concat's
// backward splits it: any input in the field's gradient buffer), if that step is fused: the
// child takes its gradient from its parent's row in its own round, before anything uses it.
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

Compiled Compile(const vertex::Function& f, bool elementwise_scratch) {
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
  AliasConcats(c, fp, c.fwd, false);
  const std::vector<GemmSum> sums = FoldGemmSums(c, f, c.fwd);
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
  AliasConcats(c, bp, c.bwd, true);
  AssignViews(c, f, bp, c.bwd, true);
  for (int cls = 0; cls < 5; ++cls) {
    c.fwd.steps[cls] = CutSteps(fp, c.fwd, static_cast<OpClass>(cls));
    c.bwd.steps[cls] = CutSteps(bp, c.bwd, static_cast<OpClass>(cls));
    GroupCopies(fp, c.fwd.steps[cls]);
    GroupCopies(bp, c.bwd.steps[cls]);
  }
  OrderGemmSums(sums, c.fwd);
  if (elementwise_scratch) {
    AssignScratch(c, f, false);
    AssignScratch(c, f, true);
  }
  SplitEarlyWeightGrads(bp, c.bwd);
  MarkPushes(c, f);
  MergePushedRows(c);
  MarkPulls(c, f);
  NameShapes(c);
  c.fold_unread = FoldedEmbedsUnread(f, c.fwd);
  return c;
}

}  // namespace cavs::scheduler::internal
