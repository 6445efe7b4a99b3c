#include "scheduler/engine.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <functional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "scheduler/engine_compile.h"
#include "scheduler/row_support.h"

namespace cavs::scheduler {

using internal::Compiled;
using internal::ProgramSchedule;
using internal::Step;
using internal::View;
using vertex::Node;
using vertex::OpClass;
using vertex::OpKind;

struct Engine::Compiled : internal::Compiled {};

namespace {

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One batch's memory and recorded launches.
struct Batch {
  const Plan* plan = nullptr;
  const RunOptions* options = nullptr;
  std::vector<float*> buffer_base;   // per buffer: row 0 (nullptr if not allocated)
  const int32_t* ints = nullptr;     // device copy of plan.ints
  std::vector<ops::EwInstr> instrs;  // host copy of every fused program
  const ops::EwInstr* dev_instrs = nullptr;
  std::vector<std::function<absl::Status()>> launches;
  std::vector<core::Tensor> scratch;  // argmax buffers, the embedding gradient rows
  float* stats = nullptr;             // 2 floats: loss sum, correct
  int64_t gemm_flops = 0;             // of the recorded GEMMs
  // Weights packed for the device's packed GEMM, by (parameter, transposed), and their bytes.
  absl::flat_hash_map<std::pair<std::string, bool>, const float*> packed;
  // Per folded sum: the rows some term has written so far (sorted, disjoint).
  std::vector<std::vector<Interval>> sum_written;
  int64_t pack_bytes = 0;
  int32_t* pred = nullptr;  // argmax per row
  core::Tensor embed_rows;  // [unique tokens, dim] gradient of the table
  std::string embed_table;
  absl::flat_hash_map<int, int32_t*> argmax_of;      // forward GatherReduce(max) -> argmax
  absl::flat_hash_map<std::string, int> sinks_left;  // parameter -> weight-gradient steps to go
  // Row intervals [lo, hi) outside which a node is known to be zero (support), and outside
  // which nobody reads its value (need, backward only). GEMMs run only where both hold.
  std::vector<Interval> fwd_support, bwd_support, bwd_need;
};

// Splits `rows` by the sorted, disjoint intervals `written`: (piece, written?) in row order.
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

// Adds `rows` to the sorted, disjoint intervals `written`, merging where they touch.
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

class Recorder {
 public:
  Recorder(const vertex::Function& f, const Compiled& c, core::ParameterStore& store,
           ops::Kernels& k, Batch& b)
      : f_(f), c_(c), store_(store), k_(k), b_(b) {}

  absl::Status Program(bool backward, OpClass cls, int64_t r0, int64_t r1);
  void Loss();
  // Records weight-gradient steps over all rows and, where the caller asked and the device is
  // the CPU, the "gradient ready" hook after each parameter's last one.
  absl::Status WeightGrads(const std::vector<Step>& steps, int64_t n);
  // Records the progress hook (CPU only, if the caller gave one).
  void Progress();

 private:
  float* Ptr(const ProgramSchedule& s, int node, int64_t row) const {
    const View& v = s.views[node];
    return b_.buffer_base[v.buffer] + row * v.ld + v.col;
  }
  int64_t Ld(const ProgramSchedule& s, int node) const { return s.views[node].ld; }
  float* ParamValue(const std::string& name) const {
    return static_cast<float*>(store_.Find(name)->value.raw_data());
  }
  float* ParamGrad(const std::string& name) const {
    return static_cast<float*>(store_.Find(name)->grad.raw_data());
  }
  const int32_t* Ints(int64_t offset) const { return b_.ints + offset; }
  int FieldIndex(const std::string& name) const {
    for (size_t i = 0; i < f_.scatter().size(); ++i) {
      if (f_.scatter()[i].name == name) return static_cast<int>(i);
    }
    return -1;
  }
  ops::EwArg Arg(const vertex::Program& p, const ProgramSchedule& s, int node, int64_t r0) const {
    if (p.nodes[node].is_static()) return {ParamValue(p.nodes[node].name), 0};
    if (s.scratch_col[node] >= 0) return {nullptr, 0, s.scratch_col[node]};
    return {Ptr(s, node, r0), Ld(s, node)};
  }

  void Fused(const vertex::Program& p, const ProgramSchedule& s, const Step& st, int64_t r0,
             int64_t r1);
  // The weight `name` (op(w): [k, n]) packed for the device's packed GEMM, packed by a launch
  // recorded at its first use in the batch; nullptr where the device has no packed GEMM.
  absl::StatusOr<const float*> PackedWeight(const std::string& name, bool trans, int64_t k,
                                            int64_t n, int64_t ld);
  // The copy a forward Gather or a backward GatherGrad makes over rows [r0, ...).
  ops::RowCopy GatherCopy(const ProgramSchedule& s, int id, int64_t r0) const;
  ops::RowCopy GatherGradCopy(const vertex::Program& p, const ProgramSchedule& s, int id,
                              int64_t r0) const;
  // Records steps[i..] that are Gathers (or GatherGrads) as one multi-copy launch; returns
  // the index of the first step it did not take.
  size_t Coalesced(const vertex::Program& p, const ProgramSchedule& s,
                   const std::vector<Step>& steps, size_t i, int64_t r0, int64_t r1);
  void EmitInstr(const vertex::Program& p, const ProgramSchedule& s, int id, int64_t r0);
  absl::Status Single(bool backward, const vertex::Program& p, const ProgramSchedule& s, int id,
                      int64_t r0, int64_t r1);
  // A MatMul's GEMM over rows [r0, r1), only where its input can be nonzero and its output is
  // read; a term of a folded sum also keeps the sum's written rows (GemmWrite).
  absl::Status MatMul(bool backward, const vertex::Program& p, const ProgramSchedule& s, int id,
                      int64_t r0, int64_t r1);
  // Records one fill instruction: rows [lo, hi) of `dst` (rows from r0, stride ld) = `row`
  // broadcast, or zeros when row is null.
  void FillRows(float* dst, int64_t ld, int64_t width, const float* row, int64_t lo, int64_t hi);
  absl::Status Sink(const vertex::Program& p, const ProgramSchedule& s, int id, int64_t r0,
                    int64_t r1);

  const vertex::Function& f_;
  const Compiled& c_;
  core::ParameterStore& store_;
  ops::Kernels& k_;
  Batch& b_;
};

void Recorder::EmitInstr(const vertex::Program& p, const ProgramSchedule& s, int id, int64_t r0) {
  const Node& n = p.nodes[id];
  ops::EwInstr in;
  in.width = n.width;
  in.dst = Arg(p, s, id, r0);
  if (!n.inputs.empty()) in.a = Arg(p, s, n.inputs[0], r0);
  if (n.inputs.size() > 1) in.b = Arg(p, s, n.inputs[1], r0);
  switch (n.kind) {
    case OpKind::kAdd:
      in.op = ops::EwOp::kAdd;
      break;
    case OpKind::kSub:
      in.op = ops::EwOp::kSub;
      break;
    case OpKind::kMul:
      in.op = ops::EwOp::kMul;
      break;
    case OpKind::kSigmoid:
      in.op = ops::EwOp::kSigmoid;
      break;
    case OpKind::kTanh:
      in.op = ops::EwOp::kTanh;
      break;
    case OpKind::kRelu:
      in.op = ops::EwOp::kRelu;
      break;
    case OpKind::kNeg:
      in.op = ops::EwOp::kNeg;
      break;
    case OpKind::kScale:
      in.op = ops::EwOp::kScale;
      in.scalar = n.scalar;
      in.offset = n.offset;
      break;
    case OpKind::kSum:
      in.op = ops::EwOp::kSum;
      in.width = p.nodes[n.inputs[0]].width;
      break;
    case OpKind::kBroadcastCols:
      in.op = ops::EwOp::kBroadcast;
      break;
    case OpKind::kSigmoidGrad:
      in.op = ops::EwOp::kSigmoidGrad;
      break;
    case OpKind::kTanhGrad:
      in.op = ops::EwOp::kTanhGrad;
      break;
    case OpKind::kReluGrad:
      in.op = ops::EwOp::kReluGrad;
      break;
    case OpKind::kDropout:
      if (b_.options->training && n.scalar > 0.0f) {
        in.op = ops::EwOp::kDropout;
        in.scalar = n.scalar;
        in.seed = DropoutKey(b_.options->dropout_seed, n.index);
        in.uids = Ints(b_.plan->uids) + r0;
      } else {
        in.op = ops::EwOp::kCopy;
      }
      break;
    case OpKind::kConcat: {
      int64_t col = 0;
      for (int x : n.inputs) {
        ops::EwInstr cp;
        cp.op = ops::EwOp::kCopy;
        cp.width = p.nodes[x].width;
        cp.dst = {Ptr(s, id, r0) + col, Ld(s, id)};
        cp.a = Arg(p, s, x, r0);
        b_.instrs.push_back(cp);
        col += cp.width;
      }
      return;
    }
    case OpKind::kPadSlice: {
      ops::EwInstr zero;
      zero.op = ops::EwOp::kZero;
      zero.width = n.width;
      zero.dst = in.dst;
      b_.instrs.push_back(zero);
      in.op = ops::EwOp::kCopy;
      in.width = n.end - n.begin;
      in.dst.ptr += n.begin;
      break;
    }
    default:
      CAVS_CHECK(false, "not fusable: ", vertex::OpKindName(n.kind));
  }
  b_.instrs.push_back(in);
}

void Recorder::Fused(const vertex::Program& p, const ProgramSchedule& s, const Step& st, int64_t r0,
                     int64_t r1) {
  const size_t first = b_.instrs.size();
  for (int id : st.nodes) EmitInstr(p, s, id, r0);
  const int count = static_cast<int>(b_.instrs.size() - first);
  CAVS_CHECK(count == st.instrs, "instruction count");
  Batch* b = &b_;
  ops::Kernels* k = &k_;
  b_.launches.push_back([b, k, first, count, rows = r1 - r0]() {
    return k->Elementwise(b->instrs.data() + first, b->dev_instrs + first, count, rows);
  });
}

absl::StatusOr<const float*> Recorder::PackedWeight(const std::string& name, bool trans, int64_t k,
                                                    int64_t n, int64_t ld) {
  // A pack costs about as much as two or three calls that re-pack: a batch of a few vertices
  // (a tree or two) has too few rows to win it back.
  constexpr int64_t kMinRowsToPack = 128;
  const int64_t bytes = k_.PackedGemmBytes(k, n);
  if (bytes <= 0 || b_.plan->num_rows < kMinRowsToPack) return nullptr;
  auto it = b_.packed.find(std::make_pair(name, trans));
  if (it != b_.packed.end()) return it->second;
  CAVS_ASSIGN_OR_RETURN(core::Tensor t, core::Tensor::Empty(core::Shape({(bytes + 3) / 4}),
                                                            core::DType::kFloat32, k_.device()));
  b_.scratch.push_back(t);
  b_.pack_bytes += bytes;
  float* packed = t.data<float>();
  const float* w = ParamValue(name);
  ops::Kernels* kernels = &k_;
  b_.launches.push_back([=]() { return kernels->PackGemmB(trans, k, n, w, ld, packed); });
  b_.packed.emplace(std::make_pair(name, trans), packed);
  return packed;
}

void Recorder::FillRows(float* dst, int64_t ld, int64_t width, const float* row, int64_t lo,
                        int64_t hi) {
  ops::EwInstr fill;
  fill.op = row != nullptr ? ops::EwOp::kCopy : ops::EwOp::kZero;
  fill.width = width;
  fill.dst = {dst + lo * ld, ld};
  fill.a = {const_cast<float*>(row), 0};
  const size_t first = b_.instrs.size();
  b_.instrs.push_back(fill);
  Batch* b = &b_;
  ops::Kernels* k = &k_;
  const int64_t m = hi - lo;
  b_.launches.push_back([b, k, first, m]() {
    return k->Elementwise(b->instrs.data() + first, b->dev_instrs + first, 1, m);
  });
}

absl::Status Recorder::MatMul(bool backward, const vertex::Program& p, const ProgramSchedule& s,
                              int id, int64_t r0, int64_t r1) {
  const Node& n = p.nodes[id];
  const Node& w = p.nodes[n.inputs[1]];
  float* dst = Ptr(s, id, r0);
  const int64_t ld = Ld(s, id);
  const float* x = Ptr(s, n.inputs[0], r0);
  const int64_t xld = Ld(s, n.inputs[0]);
  const float* wv = ParamValue(w.name);
  const int64_t in = n.transpose ? w.param_shape[1] : w.param_shape[0];
  const int64_t wld = w.param_shape[1];
  CAVS_ASSIGN_OR_RETURN(const float* packed, PackedWeight(w.name, n.transpose, in, n.width, wld));
  ops::Kernels* k = &k_;
  // The GEMM over rows [lo, hi) (relative to r0): + bias (packed only), + beta * the old rows.
  auto gemm = [&](int64_t lo, int64_t hi, const float* bias, float beta) {
    const int64_t mm = hi - lo;
    if (mm <= 0) return;
    b_.gemm_flops += 2 * mm * n.width * in;
    const float* xs = x + lo * xld;
    float* ds = dst + lo * ld;
    if (packed != nullptr) {
      b_.launches.push_back(
          [=]() { return k->GemmPackedB(mm, n.width, in, xs, xld, packed, bias, beta, ds, ld); });
    } else {
      b_.launches.push_back([=]() {
        return k->Gemm(false, n.transpose, mm, n.width, in, 1.0f, xs, xld, wv, wld, beta, ds, ld);
      });
    }
  };
  // Rows outside the input's support are zero, rows outside the need unread: only the rest
  // are computed.
  Interval rows = backward ? Meet(b_.bwd_support[id], b_.bwd_need[id]) : b_.fwd_support[id];
  rows = Meet(rows, {r0, r1});
  if (rows.first >= rows.second) rows = {r0, r0};
  const internal::GemmWrite gw = s.gemm[id];
  if (gw.sum < 0) {  // a plain GEMM: zero the other rows (or, if strided, compute them all)
    if (ld != n.width) rows = {r0, r1};
    if (rows.first > r0 || rows.second < r1) {
      float* head = dst;
      float* tail = dst + (rows.second - r0) * ld;
      const int64_t nh = (rows.first - r0) * ld, nt = (r1 - rows.second) * ld;
      b_.launches.push_back([=]() {
        CAVS_RETURN_IF_ERROR(k->Fill(head, nh, 0.0f));
        return k->Fill(tail, nt, 0.0f);
      });
    }
    gemm(rows.first - r0, rows.second - r0, nullptr, 0.0f);
    return absl::OkStatus();
  }
  // A term of a folded sum: accumulate where an earlier term wrote, start the rest (with the
  // bias), and as the last term fill what no term wrote.
  std::vector<Interval>& written = b_.sum_written[gw.sum];
  const float* bias = gw.bias >= 0 ? ParamValue(p.nodes[gw.bias].name) : nullptr;
  const size_t first_instr = b_.instrs.size();
  for (const auto& [piece, done] : SplitByWritten(rows, written)) {
    const int64_t lo = piece.first - r0, hi = piece.second - r0;
    if (done) {
      gemm(lo, hi, nullptr, 1.0f);
    } else if (packed != nullptr || bias == nullptr) {
      gemm(lo, hi, packed != nullptr ? bias : nullptr, 0.0f);
    } else {
      FillRows(dst, ld, n.width, bias, lo, hi);
      gemm(lo, hi, nullptr, 1.0f);
    }
  }
  AddWritten(rows, written);
  if (gw.last) {
    for (const auto& [gap, done] : SplitByWritten({r0, r1}, written)) {
      if (!done) FillRows(dst, ld, n.width, bias, gap.first - r0, gap.second - r0);
    }
  }
  const size_t used = b_.instrs.size() - first_instr;
  CAVS_CHECK(used <= static_cast<size_t>(gw.fills), "a folded sum's term needs ", used,
             " fills, more than the ", gw.fills, " reserved");
  b_.instrs.resize(first_instr + gw.fills);  // padding: width 0, never launched
  return absl::OkStatus();
}

absl::Status Recorder::Single(bool backward, const vertex::Program& p, const ProgramSchedule& s,
                              int id, int64_t r0, int64_t r1) {
  const Node& n = p.nodes[id];
  const int64_t m = r1 - r0;
  ops::Kernels* k = &k_;
  float* dst = vertex::IsSink(n.kind) ? nullptr : Ptr(s, id, r0);
  const int64_t ld = vertex::IsSink(n.kind) ? 0 : Ld(s, id);
  switch (n.kind) {
    case OpKind::kMatMul:
      return MatMul(backward, p, s, id, r0, r1);
    case OpKind::kEmbed: {
      const float* table = ParamValue(p.nodes[n.inputs[0]].name);
      const int32_t* tok = Ints(b_.plan->tokens) + r0;
      b_.launches.push_back(
          [=]() { return k->GatherRows(table, n.width, tok, m, n.width, dst, ld); });
      return absl::OkStatus();
    }
    case OpKind::kGatherReduce: {
      const int src_node = f_.scatter()[FieldIndex(n.field)].node;
      const float* src = Ptr(c_.fwd, src_node, 0);
      const int64_t sld = Ld(c_.fwd, src_node);
      const int32_t* off = Ints(b_.plan->reduce_offsets) + r0;
      const int32_t* ids = Ints(b_.plan->reduce_ids);
      int32_t* argmax = nullptr;
      if (n.reduce == vertex::Reduce::kMax) {  // one [rows, width] buffer, found by the backward
        auto it = b_.argmax_of.find(id);
        if (it == b_.argmax_of.end()) {
          CAVS_ASSIGN_OR_RETURN(core::Tensor t,
                                core::Tensor::Empty(core::Shape({b_.plan->num_rows, n.width}),
                                                    core::DType::kInt32, k_.device()));
          b_.scratch.push_back(t);
          it = b_.argmax_of.emplace(id, t.data<int32_t>()).first;
        }
        argmax = it->second;
      }
      const ops::ReduceOp op = static_cast<ops::ReduceOp>(n.reduce);
      int32_t* am = argmax ? argmax + r0 * n.width : nullptr;
      b_.launches.push_back(
          [=]() { return k->SegmentReduce(op, src, sld, off, ids, m, n.width, dst, ld, am); });
      return absl::OkStatus();
    }
    default:
      if (vertex::IsSink(n.kind)) return Sink(p, s, id, r0, r1);
      return absl::InternalError(absl::StrCat("no kernel for ", vertex::OpKindName(n.kind),
                                              backward ? " (backward)" : ""));
  }
}

absl::Status Recorder::Sink(const vertex::Program& p, const ProgramSchedule& s, int id, int64_t r0,
                            int64_t r1) {
  const Node& n = p.nodes[id];
  const int64_t m = r1 - r0;
  ops::Kernels* k = &k_;
  const int dy_node = n.inputs.back();
  const float* dy = Ptr(s, dy_node, r0);
  const int64_t dld = Ld(s, dy_node);
  const int64_t w = p.nodes[dy_node].width;
  switch (n.kind) {
    case OpKind::kGatherReduceGrad: {
      float* acc = b_.buffer_base[c_.field_grad[FieldIndex(n.field)]];
      const int32_t* off = Ints(b_.plan->reduce_offsets) + r0;
      const int32_t* ids = Ints(b_.plan->reduce_ids);
      const ops::ReduceOp op = static_cast<ops::ReduceOp>(n.reduce);
      const int32_t* am = nullptr;
      if (n.reduce == vertex::Reduce::kMax)
        am = b_.argmax_of.at(static_cast<int>(n.index)) + r0 * w;
      b_.launches.push_back(
          [=]() { return k->SegmentReduceGrad(op, dy, dld, off, ids, am, m, w, acc, w); });
      return absl::OkStatus();
    }
    case OpKind::kWeightGradMatMul: {
      // dW [in, out] += xᵀ dy over all rows; transposed forward (y = x Wᵀ): dW += dyᵀ x.
      const int x_node = n.inputs[0];
      const float* x = Ptr(s, x_node, r0);
      const int64_t xld = Ld(s, x_node);
      const int64_t xw = p.nodes[x_node].width;
      float* g = ParamGrad(n.name);
      // Only rows where both x and dy can be nonzero contribute.
      const Interval rows = Meet(Meet(b_.bwd_support[x_node], b_.bwd_support[dy_node]), {r0, r1});
      if (rows.first >= rows.second) return absl::OkStatus();
      const int64_t skip = rows.first - r0;
      const int64_t m = rows.second - rows.first;
      x += skip * xld;
      dy += skip * dld;
      b_.gemm_flops += 2 * m * w * xw;
      if (n.transpose) {
        b_.launches.push_back(
            [=]() { return k->Gemm(true, false, w, xw, m, 1.0f, dy, dld, x, xld, 1.0f, g, xw); });
      } else {
        b_.launches.push_back(
            [=]() { return k->Gemm(true, false, xw, w, m, 1.0f, x, xld, dy, dld, 1.0f, g, w); });
      }
      return absl::OkStatus();
    }
    case OpKind::kWeightGradBias: {
      float* g = ParamGrad(n.name);
      const float alpha = n.scalar;
      b_.launches.push_back([=]() { return k->ColumnSum(dy, dld, m, w, alpha, g); });
      return absl::OkStatus();
    }
    case OpKind::kWeightGradScale: {
      const float* x = Ptr(s, n.inputs[0], r0);
      const int64_t xld = Ld(s, n.inputs[0]);
      float* g = ParamGrad(n.name);
      b_.launches.push_back([=]() { return k->ColumnDot(x, xld, dy, dld, m, w, g); });
      return absl::OkStatus();
    }
    case OpKind::kEmbedGrad: {
      if (!b_.embed_rows.defined()) {
        CAVS_ASSIGN_OR_RETURN(
            b_.embed_rows,
            core::Tensor::Zeros(
                core::Shape({static_cast<int64_t>(b_.plan->unique_tokens.size()), w}),
                core::DType::kFloat32, k_.device()));
        b_.embed_table = n.name;
      }
      if (b_.embed_table != n.name) {
        return absl::UnimplementedError(absl::StrCat("embedding tables '", b_.embed_table,
                                                     "' and '", n.name, "' in one function"));
      }
      float* rows = b_.embed_rows.data<float>();
      const int32_t* slot = Ints(b_.plan->token_slot) + r0;
      b_.launches.push_back(
          [=]() { return k->ScatterAddRows(dy, dld, slot, m, w, rows, w, false); });
      return absl::OkStatus();
    }
    default:
      return absl::InternalError("not a sink");
  }
}

ops::RowCopy Recorder::GatherCopy(const ProgramSchedule& s, int id, int64_t r0) const {
  const Node& n = f_.forward().nodes[id];
  const int src_node = f_.scatter()[FieldIndex(n.field)].node;
  return {Ptr(c_.fwd, src_node, 0),
          Ld(c_.fwd, src_node),
          Ints(b_.plan->child_rows[n.index]) + r0,
          n.width,
          Ptr(s, id, r0),
          Ld(s, id)};
}

ops::RowCopy Recorder::GatherGradCopy(const vertex::Program& p, const ProgramSchedule& s, int id,
                                      int64_t r0) const {
  const Node& n = p.nodes[id];
  const int dy_node = n.inputs.back();
  const int64_t w = p.nodes[dy_node].width;
  return {Ptr(s, dy_node, r0),
          Ld(s, dy_node),
          Ints(b_.plan->child_rows[n.index]) + r0,
          w,
          b_.buffer_base[c_.field_grad[FieldIndex(n.field)]],
          w};
}

// Multi-copy kinds: a forward Gather, or a backward GatherGrad.
bool IsCopyStep(const vertex::Program& p, const Step& st, OpKind kind) {
  return !st.fused && p.nodes[st.nodes[0]].kind == kind;
}

size_t Recorder::Coalesced(const vertex::Program& p, const ProgramSchedule& s,
                           const std::vector<Step>& steps, size_t i, int64_t r0, int64_t r1) {
  const OpKind kind = p.nodes[steps[i].nodes[0]].kind;
  std::vector<ops::RowCopy> copies;
  for (; i < steps.size() && IsCopyStep(p, steps[i], kind) &&
         copies.size() < static_cast<size_t>(ops::kMaxRowCopies);
       ++i) {
    const int id = steps[i].nodes[0];
    copies.push_back(kind == OpKind::kGather ? GatherCopy(s, id, r0)
                                             : GatherGradCopy(p, s, id, r0));
  }
  ops::Kernels* k = &k_;
  const int64_t m = r1 - r0;
  const bool unique = b_.plan->unique_parents;
  const int count = static_cast<int>(copies.size());
  if (kind == OpKind::kGather) {
    b_.launches.push_back([=]() { return k->GatherRowsMulti(copies.data(), count, m); });
  } else {
    b_.launches.push_back(
        [=]() { return k->ScatterAddRowsMulti(copies.data(), count, m, unique); });
  }
  return i;
}

absl::Status Recorder::WeightGrads(const std::vector<Step>& steps, int64_t n) {
  if (n == 0) return absl::OkStatus();
  const vertex::Program& p = f_.backward();
  const bool hooks = b_.options->on_gradient_ready && k_.device().is_cpu();
  for (const Step& st : steps) {
    CAVS_RETURN_IF_ERROR(Single(true, p, c_.bwd, st.nodes[0], 0, n));
    const Node& sink = p.nodes[st.nodes[0]];
    if (!hooks || sink.kind == OpKind::kEmbedGrad || --b_.sinks_left[sink.name] > 0) continue;
    const RunOptions* o = b_.options;
    const std::string name = sink.name;
    b_.launches.push_back([o, name]() { return o->on_gradient_ready(name); });
  }
  return absl::OkStatus();
}

void Recorder::Progress() {
  if (!b_.options->on_progress || !k_.device().is_cpu()) return;
  const RunOptions* o = b_.options;
  b_.launches.push_back([o]() { return o->on_progress(); });
}

absl::Status Recorder::Program(bool backward, OpClass cls, int64_t r0, int64_t r1) {
  const vertex::Program& p = backward ? f_.backward() : f_.forward();
  const ProgramSchedule& s = backward ? c_.bwd : c_.fwd;
  if (r1 <= r0) return absl::OkStatus();
  const std::vector<Step>& steps = s.steps[static_cast<int>(cls)];
  for (size_t i = 0; i < steps.size();) {
    const Step& st = steps[i];
    if (IsCopyStep(p, st, OpKind::kGather) || IsCopyStep(p, st, OpKind::kGatherGrad)) {
      i = Coalesced(p, s, steps, i, r0, r1);
      continue;
    }
    if (st.fused) {
      Fused(p, s, st, r0, r1);
    } else {
      CAVS_RETURN_IF_ERROR(Single(backward, p, s, st.nodes[0], r0, r1));
    }
    ++i;
  }
  return absl::OkStatus();
}

void Recorder::Loss() {
  if (f_.pushes().empty()) return;
  const int push0 = f_.pushes()[0];
  const float* logits = Ptr(c_.fwd, push0, 0);
  const int64_t ld = Ld(c_.fwd, push0);
  const int64_t n = b_.plan->num_rows;
  const int64_t classes = f_.forward().nodes[push0].width;
  const int32_t* labels = Ints(b_.plan->labels);
  const bool mean = b_.options->loss == RunOptions::Loss::kMean && b_.plan->labelled > 0;
  const float scale = mean ? 1.0f / static_cast<float>(b_.plan->labelled) : 1.0f;
  float* dlogits =
      c_.dlogits >= 0 && b_.buffer_base[c_.dlogits] ? b_.buffer_base[c_.dlogits] : nullptr;
  float* stats = b_.stats;
  int32_t* pred = b_.pred;
  ops::Kernels* k = &k_;
  b_.launches.push_back([=]() {
    return k->SoftmaxCrossEntropy(logits, ld, n, classes, labels, scale, dlogits, stats, pred);
  });
}

}  // namespace
}  // namespace cavs::scheduler

namespace cavs::scheduler {

Engine::~Engine() = default;

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const vertex::Function* f,
                                                       core::ParameterStore* store,
                                                       EngineOptions options) {
  if (store->device() != options.device) {
    return absl::InvalidArgumentError(
        absl::StrCat("the parameter store lives on ", store->device().DebugString(),
                     " but the engine runs on ", options.device.DebugString()));
  }
  CAVS_RETURN_IF_ERROR(CreateParameters(*f, store));
  std::unique_ptr<Engine> e(new Engine());
  e->f_ = f;
  e->store_ = store;
  e->options_ = options;
  CAVS_ASSIGN_OR_RETURN(e->kernels_, ops::GetKernels(options.device));
  e->compiled_ = std::make_unique<Compiled>();
  static_cast<internal::Compiled&>(*e->compiled_) =
      internal::Compile(*f, e->kernels_->ElementwiseScratch());
  return e;
}

namespace {

// Fills the host side of the plan's upload: each part's bytes at its offset, in the backend's
// pinned staging buffer where it has one, else in `fallback` (kept across batches: no page
// faults per step).
absl::StatusOr<char*> Stage(core::Backend& backend, int64_t bytes,
                            const std::array<std::pair<const void*, int64_t>, 3>& parts,
                            const std::array<int64_t, 3>& sizes, std::vector<char>* fallback) {
  CAVS_ASSIGN_OR_RETURN(void* pinned, backend.HostStaging(bytes));
  char* staging = static_cast<char*>(pinned);
  if (staging == nullptr) {
    if (static_cast<int64_t>(fallback->size()) < bytes) fallback->resize(bytes);
    staging = fallback->data();
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    if (sizes[i] > 0) std::memcpy(staging + parts[i].second, parts[i].first, sizes[i]);
  }
  return staging;
}

// Runs the recorded launches, telling `timer` (if any) where each phase begins.
absl::Status Replay(const std::vector<std::function<absl::Status()>>& launches,
                    const std::array<size_t, kNumPhases>& phase_at, PhaseTimer* timer) {
  size_t next = 0;
  for (int p = static_cast<int>(Phase::kBeforeRounds); p <= static_cast<int>(Phase::kEnd); ++p) {
    if (timer != nullptr) timer->Begin(static_cast<Phase>(p));
    const size_t end = p == static_cast<int>(Phase::kEnd) ? launches.size() : phase_at[p + 1];
    for (; next < end; ++next) CAVS_RETURN_IF_ERROR(launches[next]());
  }
  return absl::OkStatus();
}

// Launches per call of a class's steps: runs of Gathers (GatherGrads) share one launch per
// kMaxRowCopies, as Recorder::Program records them.
int CountLaunches(const vertex::Program& p, const ProgramSchedule& s, OpClass cls) {
  const std::vector<Step>& steps = s.steps[static_cast<int>(cls)];
  int launches = 0;
  for (size_t i = 0; i < steps.size();) {
    for (OpKind kind : {OpKind::kGather, OpKind::kGatherGrad}) {
      if (!IsCopyStep(p, steps[i], kind)) continue;
      size_t j = i;
      while (j < steps.size() && IsCopyStep(p, steps[j], kind) && j - i < ops::kMaxRowCopies) ++j;
      i = j - 1;
    }
    ++launches;
    ++i;
  }
  return launches;
}

// Total fused instructions the batch records (sizes the upload before recording).
int64_t CountInstrs(const Compiled& c, int64_t rows, int rounds, bool backward) {
  int64_t total = 0;
  if (rows == 0) return 0;
  for (int pass = 0; pass < (backward ? 2 : 1); ++pass) {
    const ProgramSchedule& s = pass == 0 ? c.fwd : c.bwd;
    for (int cls = 0; cls < 5; ++cls) {
      const int64_t times = cls == static_cast<int>(OpClass::kInRounds) ? rounds : 1;
      for (const Step& st : s.steps[cls]) total += st.instrs * times;
    }
  }
  return total;
}

// Where a batch's buffers go: the arena ([rows, width] per buffer, 16-float aligned, then the
// 2 loss statistics) and the upload region (ints and predictions | features | fused programs).
struct Layout {
  std::vector<int64_t> offsets;  // per buffer: floats into the arena, -1 if not allocated
  int64_t arena_floats = 0, stats_at = 0;
  int64_t feat_at = 0, instr_at = 0, instr_count = 0, upload_bytes = 0;
};

Layout LayOut(const Compiled& c, const Plan& plan, bool backward) {
  Layout l;
  const int64_t n = plan.num_rows;
  l.offsets.assign(c.buffers.size(), -1);
  for (size_t i = 0; i < c.buffers.size(); ++i) {
    if ((c.buffers[i].backward_only && !backward) || c.buffers[i].features || c.buffers[i].unused) {
      continue;
    }
    l.offsets[i] = l.arena_floats;
    l.arena_floats += (n * c.buffers[i].width + 15) / 16 * 16;
  }
  l.stats_at = l.arena_floats;
  l.arena_floats += 16;
  l.instr_count = CountInstrs(c, n, plan.num_rounds, backward);
  const int64_t ints_bytes = static_cast<int64_t>(plan.ints.size() + n) * 4;  // + predictions
  l.feat_at = (ints_bytes + 63) / 64 * 64;
  l.instr_at = (l.feat_at + static_cast<int64_t>(plan.features.size()) * 4 + 63) / 64 * 64;
  l.upload_bytes = l.instr_at + l.instr_count * static_cast<int64_t>(sizeof(ops::EwInstr));
  return l;
}

// Records the whole schedule; phase_at[p] is the index of phase p's first launch.
absl::Status RecordSchedule(Recorder& rec, const vertex::Function& f, const Compiled& c,
                            const Plan& plan, bool backward,
                            std::array<size_t, kNumPhases>& phase_at, Batch& b) {
  const int64_t n = plan.num_rows;
  const std::vector<Step>& early = c.bwd.early_weight_grads;
  const std::vector<Step>& late = c.bwd.steps[static_cast<int>(OpClass::kWeightGrad)];
  if (n > 0) {  // with no rows no step is recorded, so no hook is either
    for (const std::vector<Step>* list : {&early, &late}) {
      for (const Step& st : *list) ++b.sinks_left[f.backward().nodes[st.nodes[0]].name];
    }
  }
  auto mark = [&](Phase p) { phase_at[static_cast<int>(p)] = b.launches.size(); };
  auto round = [&](bool bwd, int r) {
    return rec.Program(bwd, OpClass::kInRounds, plan.round_offsets[r], plan.round_offsets[r + 1]);
  };
  mark(Phase::kBeforeRounds);
  CAVS_RETURN_IF_ERROR(rec.Program(false, OpClass::kBeforeRounds, 0, n));
  mark(Phase::kRounds);
  for (int r = 0; r < plan.num_rounds; ++r) {
    CAVS_RETURN_IF_ERROR(round(false, r));
    rec.Progress();
  }
  mark(Phase::kAfterRounds);
  CAVS_RETURN_IF_ERROR(rec.Program(false, OpClass::kAfterRounds, 0, n));
  rec.Loss();
  mark(Phase::kBackward);
  if (backward) {
    CAVS_RETURN_IF_ERROR(rec.Program(true, OpClass::kBeforeRounds, 0, n));
    // The output layer's weight gradients are final now: they run (and can be sent) before
    // the backward rounds.
    CAVS_RETURN_IF_ERROR(rec.WeightGrads(early, n));
    for (int r = plan.num_rounds - 1; r >= 0; --r) {
      CAVS_RETURN_IF_ERROR(round(true, r));
      rec.Progress();
    }
    CAVS_RETURN_IF_ERROR(rec.Program(true, OpClass::kAfterRounds, 0, n));
  }
  mark(Phase::kWeightGrad);
  if (backward) CAVS_RETURN_IF_ERROR(rec.WeightGrads(late, n));
  mark(Phase::kEnd);
  return absl::OkStatus();
}

// Copies predictions (and push 0's rows, if kept) back per graph, in each graph's vertex order.
// Returns the number of device read-backs.
absl::StatusOr<int64_t> ReadOutputs(core::Backend& backend, const vertex::Function& f,
                                    const Compiled& c, const Plan& plan, const Batch& b,
                                    size_t num_graphs, bool keep_outputs, RunResult* result) {
  const int64_t n = plan.num_rows;
  int64_t syncs = 0;
  std::vector<int32_t> pred(n);
  CAVS_RETURN_IF_ERROR(backend.CopyToHost(pred.data(), b.pred, n * 4));
  ++syncs;
  const int push0 = f.pushes()[0];
  const int64_t classes = f.forward().nodes[push0].width;
  std::vector<float> out;
  if (keep_outputs) {
    const View v = c.fwd.views[push0];
    std::vector<float> all(n * v.ld);
    CAVS_RETURN_IF_ERROR(backend.CopyToHost(all.data(), b.buffer_base[v.buffer], n * v.ld * 4));
    ++syncs;
    out.resize(n * classes);
    for (int64_t r = 0; r < n; ++r) {
      std::memcpy(out.data() + r * classes, all.data() + r * v.ld + v.col, classes * 4);
    }
  }
  for (size_t gi = 0; gi < num_graphs; ++gi) {
    result->predictions.emplace_back();
    if (keep_outputs) result->outputs.emplace_back();
    for (int64_t u = plan.graph_offsets[gi]; u < plan.graph_offsets[gi + 1]; ++u) {
      const int64_t row = plan.row_of_uid[u];
      result->predictions.back().push_back(pred[row]);
      if (keep_outputs) {
        result->outputs.back().insert(result->outputs.back().end(), out.begin() + row * classes,
                                      out.begin() + (row + 1) * classes);
      }
    }
  }
  return syncs;
}

}  // namespace

int Engine::ForwardLaunchesPerRound() const {
  return CountLaunches(f_->forward(), compiled_->fwd, OpClass::kInRounds);
}
int Engine::BackwardLaunchesPerRound() const {
  return CountLaunches(f_->backward(), compiled_->bwd, OpClass::kInRounds);
}

absl::StatusOr<Plan> Engine::PlanBatch(const std::vector<Graph>& graphs) const {
  CAVS_RETURN_IF_ERROR(ValidateBatch(*f_, graphs));
  return BuildPlan(*f_, graphs, options_.plan);
}

absl::StatusOr<RunResult> Engine::Run(const std::vector<Graph>& graphs, const RunOptions& options) {
  const double t0 = Seconds();
  CAVS_ASSIGN_OR_RETURN(Plan plan, PlanBatch(graphs));
  stats_.build_seconds = Seconds() - t0;
  return Execute(graphs, options, plan, t0);
}

absl::StatusOr<RunResult> Engine::Run(const std::vector<Graph>& graphs, const RunOptions& options,
                                      const Plan& plan) {
  if (plan.graph_offsets.size() != graphs.size() + 1) {
    return absl::InvalidArgumentError(absl::StrCat("a plan of ", plan.graph_offsets.size() - 1,
                                                   " graphs for a batch of ", graphs.size()));
  }
  stats_.build_seconds = 0.0;
  return Execute(graphs, options, plan, Seconds());
}

absl::StatusOr<RunResult> Engine::Execute(const std::vector<Graph>& graphs,
                                          const RunOptions& options, const Plan& plan, double t0) {
  const Compiled& c = *compiled_;
  const core::Device dev = options_.device;
  const int64_t n = plan.num_rows;
  const Layout l = LayOut(c, plan, options.backward);
  CAVS_ASSIGN_OR_RETURN(core::Tensor arena, core::Tensor::Empty(core::Shape({l.arena_floats}),
                                                                core::DType::kFloat32, dev));
  CAVS_ASSIGN_OR_RETURN(
      core::Tensor upload,
      core::Tensor::Empty(core::Shape({(l.upload_bytes + 3) / 4}), core::DType::kFloat32, dev));
  char* up = static_cast<char*>(upload.raw_data());
  Batch b;
  b.plan = &plan;
  b.options = &options;
  b.ints = reinterpret_cast<const int32_t*>(up);
  b.pred = reinterpret_cast<int32_t*>(up) + plan.ints.size();
  b.dev_instrs = reinterpret_cast<const ops::EwInstr*>(up + l.instr_at);
  b.instrs.reserve(l.instr_count);
  b.stats = arena.data<float>() + l.stats_at;
  b.sum_written.assign(c.fwd.num_sums, {});
  b.buffer_base.assign(c.buffers.size(), nullptr);
  for (size_t i = 0; i < c.buffers.size(); ++i) {
    if (c.buffers[i].features) b.buffer_base[i] = reinterpret_cast<float*>(up + l.feat_at);
    if (l.offsets[i] >= 0) b.buffer_base[i] = arena.data<float>() + l.offsets[i];
  }
  b.fwd_support = Supports(f_->forward(), plan, nullptr);
  if (options.backward) {
    b.bwd_support = Supports(f_->backward(), plan, &b.fwd_support);
    b.bwd_need = Needs(*f_, plan);
  }
  std::array<size_t, kNumPhases> phase_at{};
  Recorder rec(*f_, c, *store_, *kernels_, b);
  CAVS_RETURN_IF_ERROR(RecordSchedule(rec, *f_, c, plan, options.backward, phase_at, b));
  CAVS_CHECK(static_cast<int64_t>(b.instrs.size()) == l.instr_count, "fused program size");
  const double t_plan = Seconds();
  PhaseTimer* timer = options_.phase_timer;
  if (timer != nullptr) timer->Begin(Phase::kUpload);
  // One transfer: the plan's ints, its features and every fused program, from pinned memory
  // where the backend has it (then the copy is queued, not waited for).
  CAVS_ASSIGN_OR_RETURN(core::Backend * backend, core::GetBackend(dev));
  const std::array<std::pair<const void*, int64_t>, 3> parts = {{
      {plan.ints.data(), 0},
      {plan.features.data(), l.feat_at},
      {b.instrs.data(), l.instr_at},
  }};
  const std::array<int64_t, 3> sizes = {static_cast<int64_t>(plan.ints.size()) * 4,
                                        static_cast<int64_t>(plan.features.size()) * 4,
                                        l.instr_count * static_cast<int64_t>(sizeof(ops::EwInstr))};
  CAVS_ASSIGN_OR_RETURN(char* staging, Stage(*backend, l.upload_bytes, parts, sizes, &staging_));
  CAVS_RETURN_IF_ERROR(backend->CopyFromHost(up, staging, l.upload_bytes));
  for (size_t i = 0; i < c.buffers.size(); ++i) {
    if (l.offsets[i] >= 0 && c.buffers[i].zero) {
      CAVS_RETURN_IF_ERROR(kernels_->Fill(b.buffer_base[i], n * c.buffers[i].width, 0.0f));
    }
  }
  CAVS_RETURN_IF_ERROR(kernels_->Fill(b.stats, 2, 0.0f));
  CAVS_RETURN_IF_ERROR(Replay(b.launches, phase_at, timer));
  const double t_queued = Seconds();
  // Results. Each read-back waits for the device.
  RunResult result;
  float stats[2] = {0, 0};
  CAVS_RETURN_IF_ERROR(backend->CopyToHost(stats, b.stats, sizeof(stats)));
  int64_t syncs = 1;
  result.loss_sum = stats[0];
  result.correct = static_cast<int64_t>(stats[1] + 0.5f);
  result.labelled = plan.labelled;
  result.vertices = n;
  if (!f_->pushes().empty()) {
    CAVS_ASSIGN_OR_RETURN(const int64_t more, ReadOutputs(*backend, *f_, c, plan, b, graphs.size(),
                                                          options.keep_outputs, &result));
    syncs += more;
  }
  if (b.embed_rows.defined() && !plan.unique_tokens.empty()) {
    core::Parameter* table = store_->Find(b.embed_table);
    if (table->grad_rows.empty()) {
      // The usual case (gradients zeroed before the step): adopt the rows where they are,
      // sorted and unique like the store's own; no copy, no wait.
      table->grad_rows = plan.unique_tokens;
      table->grad_values = b.embed_rows;
    } else {  // merges on the host: a round trip through host memory
      CAVS_RETURN_IF_ERROR(store_->AccumulateSparseGrad(table, plan.unique_tokens, b.embed_rows));
      syncs += dev.type == core::DeviceType::kCpu ? 0 : 1;
    }
  }
  if (b.embed_rows.defined() && options.on_gradient_ready && dev.is_cpu()) {
    CAVS_RETURN_IF_ERROR(options.on_gradient_ready(b.embed_table));
  }
  stats_.rounds = plan.num_rounds;
  stats_.rows = n;
  stats_.plan_seconds = t_plan - t0;  // t0 is before PlanBatch when Run built the plan
  stats_.queue_seconds = t_queued - t_plan;
  stats_.run_seconds = Seconds() - t0;
  stats_.commands = static_cast<int64_t>(b.launches.size());
  stats_.gemm_flops = b.gemm_flops;
  stats_.pack_bytes = b.pack_bytes;
  stats_.arena_bytes = l.arena_floats * 4;
  stats_.upload_bytes = l.upload_bytes;
  stats_.host_syncs = dev.type == core::DeviceType::kCpu ? 0 : syncs;
  return result;
}

}  // namespace cavs::scheduler
