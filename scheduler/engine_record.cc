#include "scheduler/engine_record.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "scheduler/passes/passes.h"

namespace cavs::scheduler::internal {

using vertex::Node;
using vertex::OpClass;
using vertex::OpKind;

void Recorder::EmitInstr(const vertex::Program& p, const ProgramSchedule& s, int id) {
  const Node& n = p.nodes[id];
  // A Dropout of an Embed that only folded projections read: an empty instruction.
  if (&p == &f_.forward() && FoldedRun() && (*b_.in.folded_unread)[id]) {
    b_.out.instrs.emplace_back();
    return;
  }
  ops::EwInstr in;
  in.width = n.width;
  in.dst = Arg(p, s, id);
  if (!n.inputs.empty()) in.a = Arg(p, s, n.inputs[0]);
  if (n.inputs.size() > 1) in.b = Arg(p, s, n.inputs[1]);
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
      if (b_.in.options->training && n.scalar > 0.0f) {
        in.op = ops::EwOp::kDropout;
        in.scalar = n.scalar;
        in.seed = DropoutKey(b_.in.options->dropout_seed, n.index);
        in.uids = Ints(b_.in.plan->uids);
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
        cp.dst = {Ptr(s, id, 0) + col, Ld(s, id)};
        cp.a = Arg(p, s, x);
        b_.out.instrs.push_back(cp);
        col += cp.width;
      }
      return;
    }
    case OpKind::kPadSlice: {
      ops::EwInstr zero;
      zero.op = ops::EwOp::kZero;
      zero.width = n.width;
      zero.dst = in.dst;
      b_.out.instrs.push_back(zero);
      in.op = ops::EwOp::kCopy;
      in.width = n.end - n.begin;
      in.dst.ptr += n.begin;
      break;
    }
    default:
      CAVS_CHECK(false, "not fusable: ", vertex::OpKindName(n.kind));
  }
  b_.out.instrs.push_back(in);
}

const int32_t* Batch::Ints(int64_t plan_offset) {
  CAVS_CHECK(plan_offset >= 0, "an index array the plan does not have");
  for (const IntsArray& a : out.ints_arrays) {
    if (a.plan_at == plan_offset) return in.ints + a.packed_at;
  }
  const int64_t count = in.plan->ArrayLength(plan_offset);
  CAVS_CHECK(count >= 0, "no index array starts at ", plan_offset);
  out.ints_arrays.push_back({plan_offset, count, out.ints_packed});
  out.ints_packed += out.ints_arrays.back().count;
  return in.ints + out.ints_arrays.back().packed_at;
}

size_t Recorder::ProgramOf(const vertex::Program& p, const ProgramSchedule& s, const Step& st) {
  auto [it, fresh] = b_.rec.program_at.try_emplace(&st, b_.out.instrs.size());
  if (!fresh) return it->second;
  const size_t first = it->second;
  // Where every vertex has one parent: each child's gradient from its parent's row first
  // (Step::pulls), the step's own instructions, then its fields into the parents' gathered rows
  // (Step::pushes). Elsewhere the pulls and pushes are empty instructions (width 0).
  const bool unique = b_.in.plan->unique_parents;
  for (const Pull& pull : st.pulls) {
    const Node& n = p.nodes[pull.grad];
    ops::EwInstr in;
    in.op = ops::EwOp::kAccumulate;
    if (unique) {
      const int dy = n.inputs.back();
      in.width = p.nodes[dy].width;
      in.dst = {b_.in.buffer_base[pull.field_grad], in.width};
      in.a = {Ptr(s, dy, 0), Ld(s, dy), -1, ParentRows(n.index)};
    }
    b_.out.instrs.push_back(in);
  }
  for (int id : st.nodes) EmitInstr(p, s, id);
  for (const Push& push : st.pushes) {
    const Node& n = p.nodes[push.gather];
    ops::EwInstr in;
    in.op = ops::EwOp::kCopy;
    if (unique) {
      in.width = n.width;
      in.dst = {Ptr(s, push.gather, 0), Ld(s, push.gather), -1, ParentRows(n.index)};
      in.a = {Ptr(s, push.producer, 0), Ld(s, push.producer)};
    }
    b_.out.instrs.push_back(in);
  }
  CAVS_CHECK(b_.out.instrs.size() - first == static_cast<size_t>(st.instrs), "instruction count");
  return first;
}

void Recorder::Fused(const vertex::Program& p, const ProgramSchedule& s, const Step& st, int64_t r0,
                     int64_t r1) {
  const size_t first = ProgramOf(p, s, st);
  const int count = st.instrs;
  // A program with a Dropout emptied by EmitInstr (a folded run's pre-ops only) is another
  // shape than the plain run's, and with nothing else in it, no launch.
  bool emptied = false;
  if (&p == &f_.forward() && FoldedRun() &&
      p.nodes[st.nodes[0]].op_class == OpClass::kBeforeRounds) {
    for (int id : st.nodes) emptied = emptied || (*b_.in.folded_unread)[id];
  }
  const auto program = b_.out.instrs.begin() + static_cast<std::ptrdiff_t>(first);
  if (emptied &&
      std::all_of(program, program + count, [](const ops::EwInstr& in) { return in.width == 0; })) {
    last_gemm_.reset();
    return;
  }
  const uint64_t shape =
      st.shapes[(emptied ? 4 : 0) + (r1 - r0 == 1 ? 2 : 0) + (b_.in.options->training ? 1 : 0)];
  // The GEMM recorded just before over the same rows joins this program's call
  // (Kernels::GemmThenElementwise).
  std::optional<LastGemm> gemm;
  if (last_gemm_.has_value() && last_gemm_->command + 1 == b_.out.commands.size() &&
      last_gemm_->row0 == r0 && last_gemm_->rows == r1 - r0) {
    gemm = last_gemm_;
    b_.out.commands.pop_back();
    ++b_.counts.gemm_programs;
  }
  last_gemm_.reset();
  const LaunchKey key{&st, gemm ? kGemmProgram : kProgram, shape, gemm ? gemm->launch : -1};
  LaunchInstrs(key, first, count, r0, r1 - r0, shape, gemm ? &*gemm : nullptr);
}

void Recorder::Record(Launch launch, int64_t row0, int64_t rows) {
  b_.out.commands.push_back({static_cast<int32_t>(b_.out.launches.size()), row0, rows});
  b_.out.launches.push_back(std::move(launch));
}

// A GEMM's call over rows [row0, row0 + rows) of the call `g` writes for rows from row 0 (a
// non-transposed a: its rows are the output's).
ops::Kernels::GemmCall GemmAt(ops::Kernels::GemmCall g, int64_t row0, int64_t rows) {
  g.a += row0 * g.lda;
  g.c += row0 * g.ldc;
  g.m = rows;
  return g;
}

void Recorder::LaunchInstrs(LaunchKey key, size_t first, int count, int64_t r0, int64_t rows,
                            uint64_t shape, const LastGemm* gemm) {
  Batch* b = &b_;
  ops::Kernels* k = &k_;
  const std::optional<ops::Kernels::GemmCall> g =
      gemm ? std::optional<ops::Kernels::GemmCall>(gemm->g) : std::nullopt;
  // The launch of the program at b->out.instrs[at], over rows from row0 + its own offset.
  auto make = [b, k, g, count, shape](size_t at, bool offset) -> Launch {
    return [b, k, g, at, count, shape, offset](int64_t row0, int64_t n) {
      const ops::EwInstr* host = b->out.instrs.data() + at;
      const ops::EwInstr* dev = b->in.dev_instrs + at;
      const int64_t ew_row0 = offset ? row0 : 0;
      if (g.has_value()) {
        return k->GemmThenElementwise(GemmAt(*g, row0, n), host, dev, count, n, shape, ew_row0);
      }
      return k->Elementwise(host, dev, count, n, shape, ew_row0);
    };
  };
  if (k_.ElementwiseRowOffset()) {
    RecordShared(
        key, [&] { return make(first, true); }, r0, rows);
    return;
  }
  // No row offset: from row 0 the program as written, elsewhere a copy moved to r0.
  size_t at = first;
  if (r0 != 0) {
    at = b_.out.instrs.size();
    b_.out.instrs.resize(at + static_cast<size_t>(count));
    ops::RebaseEwProgram(b_.out.instrs.data() + first, count, r0, b_.out.instrs.data() + at);
  }
  Record(make(at, false), r0, rows);
}

absl::Status Recorder::MatMul(bool backward, const vertex::Program& p, const ProgramSchedule& s,
                              const Step& st, int64_t r0, int64_t r1) {
  const int id = st.nodes[0];
  const Node& n = p.nodes[id];
  const Node& w = p.nodes[n.inputs[1]];
  float* dst0 = Ptr(s, id, 0);
  const int64_t ld = Ld(s, id);
  const float* x0 = Ptr(s, n.inputs[0], 0);
  const int64_t xld = Ld(s, n.inputs[0]);
  const float* wv = ParamValue(w.name);
  const int64_t in = n.transpose ? w.param_shape[1] : w.param_shape[0];
  const int64_t wld = w.param_shape[1];
  // An input projection folded for this inference run (Engine::FoldInputProjections): the rows
  // this GEMM would start are rows of E op(W) (+ the sum's bias) gathered by token, where every
  // row of the support has a token (else a row without one would read zeros, not the bias).
  // Rows an earlier term of the sum wrote still take the GEMM (unpacked).
  const core::Tensor* folded = !backward && b_.in.folded != nullptr && b_.in.plan->tokens_dense &&
                                       (*b_.in.folded)[id].defined()
                                   ? &(*b_.in.folded)[id]
                                   : nullptr;
  const float* packed = nullptr;
  if (folded == nullptr) {
    CAVS_ASSIGN_OR_RETURN(packed, PackedWeight(wv, n.transpose, in, n.width, wld));
  }
  ops::Kernels* k = &k_;
  const int64_t width = n.width;
  // The GEMM over rows [lo, hi): + bias (packed, or where the device's Gemm adds one), + beta *
  // the old rows.
  auto gemm = [&](int64_t lo, int64_t hi, const float* bias, float beta) {
    const int64_t mm = hi - lo;
    if (mm <= 0) return;
    b_.counts.gemm_flops += 2 * mm * width * in;
    const uint64_t detail = (bias != nullptr ? 1 : 0) + (beta != 0.0f ? 2 : 0);
    if (packed != nullptr) {
      RecordShared(
          {&st, kPackedGemm, detail},
          [=]() -> Launch {
            return [=](int64_t row0, int64_t rows) {
              return k->GemmPackedB(rows, width, in, x0 + row0 * xld, xld, packed, bias, beta,
                                    dst0 + row0 * ld, ld);
            };
          },
          lo, mm);
      return;
    }
    const ops::Kernels::GemmCall g{false, n.transpose, 0,   width, in,   1.0f, x0,
                                   xld,   wv,          wld, beta,  dst0, ld,   bias};
    const int32_t launch = RecordShared(
        {&st, kGemm, detail},
        [=]() -> Launch {
          return [k, g](int64_t row0, int64_t rows) { return k->Gemm(GemmAt(g, row0, rows)); };
        },
        lo, mm);
    last_gemm_ = LastGemm{b_.out.commands.size() - 1, launch, g, lo, mm};
  };
  auto gather = [&](int64_t lo, int64_t hi) {
    const int64_t mm = hi - lo;
    if (mm <= 0) return;
    const float* table = folded->data<float>();
    const int32_t* tok = Ints(b_.in.plan->tokens);
    RecordShared(
        {&st, kFoldedRows},
        [=]() -> Launch {
          return [=](int64_t row0, int64_t rows) {
            return k->GatherRows(table, width, tok + row0, rows, width, dst0 + row0 * ld, ld);
          };
        },
        lo, mm);
  };
  // Rows outside the input's support are zero, rows outside the need unread: only the rest
  // are computed.
  Interval rows =
      backward ? Meet(b_.in.bwd_support[id], b_.in.bwd_need[id]) : b_.in.fwd_support[id];
  rows = Meet(rows, {r0, r1});
  if (rows.first >= rows.second) rows = {r0, r0};
  const internal::GemmWrite gw = s.gemm[id];
  if (gw.sum < 0) {  // a plain GEMM: zero the rows read but not computed (or, if strided,
                     // compute them all); backward, rows outside the need are never read
    if (ld != width) rows = {r0, r1};
    const Interval read = backward ? Meet(b_.in.bwd_need[id], {r0, r1}) : Interval{r0, r1};
    if (rows.first >= rows.second) rows = {read.second, read.second};  // zero all of `read`
    const int64_t head = std::max<int64_t>(rows.first - read.first, 0);
    const int64_t tail = std::max<int64_t>(read.second - rows.second, 0);
    if (head > 0 && tail > 0) {  // both in one launch of its own
      float* h = dst0 + read.first * ld;
      float* t = dst0 + rows.second * ld;
      Record(
          [=](int64_t, int64_t) {
            CAVS_RETURN_IF_ERROR(k->Fill(h, head * ld, 0.0f));
            return k->Fill(t, tail * ld, 0.0f);
          },
          0, 0);
    } else if (head > 0 || tail > 0) {
      RecordShared(
          {&st, kZeroRows},
          [=]() -> Launch {
            return [=](int64_t row0, int64_t n) { return k->Fill(dst0 + row0 * ld, n * ld, 0.0f); };
          },
          head > 0 ? read.first : rows.second, head > 0 ? head : tail);
    }
    if (folded != nullptr) {
      gather(rows.first, rows.second);
    } else {
      gemm(rows.first, rows.second, nullptr, 0.0f);
    }
    return absl::OkStatus();
  }
  // A term of a folded sum: accumulate where an earlier term wrote, start the rest (with the
  // bias: in the GEMM where the packed GEMM or the device's Gemm adds it, else a fill of the
  // bias and the GEMM onto it), and as the last term fill what no term wrote.
  std::vector<Interval>& written = b_.rec.sum_written[gw.sum];
  const float* bias = gw.bias >= 0 ? ParamValue(p.nodes[gw.bias].name) : nullptr;
  int fills = 0;
  for (const auto& [piece, done] : SplitByWritten(rows, written)) {
    const auto [lo, hi] = piece;
    if (done) {
      gemm(lo, hi, nullptr, 1.0f);
    } else if (folded != nullptr) {
      gather(lo, hi);
    } else if (packed != nullptr || bias == nullptr || k_.GemmAddsBias()) {
      gemm(lo, hi, bias, 0.0f);
    } else {
      FillRows(st, dst0, ld, width, bias, lo, hi - lo);
      ++fills;
      gemm(lo, hi, nullptr, 1.0f);
    }
  }
  AddWritten(rows, written);
  if (gw.last) {
    for (const auto& [gap, done] : SplitByWritten({r0, r1}, written)) {
      if (done) continue;
      FillRows(st, dst0, ld, width, bias, gap.first, gap.second - gap.first);
      ++fills;
    }
  }
  CAVS_CHECK(fills <= st.instrs, "a folded sum's term needs ", fills, " fills, more than the ",
             st.instrs, " reserved");
  return absl::OkStatus();
}

absl::Status Recorder::Single(bool backward, const vertex::Program& p, const ProgramSchedule& s,
                              int id, int64_t r0, int64_t r1) {
  const Node& n = p.nodes[id];
  const int64_t m = r1 - r0;
  ops::Kernels* k = &k_;
  float* dst0 = vertex::IsSink(n.kind) ? nullptr : Ptr(s, id, 0);
  const int64_t ld = vertex::IsSink(n.kind) ? 0 : Ld(s, id);
  const int64_t width = n.width;
  switch (n.kind) {
    case OpKind::kEmbed: {
      // Nothing reads its rows in a folded run (each MatMul reading them gathers E op(W)).
      if (!backward && FoldedRun() && (*b_.in.folded_unread)[id]) {
        return absl::OkStatus();
      }
      const float* table = ParamValue(p.nodes[n.inputs[0]].name);
      const int32_t* tok = Ints(b_.in.plan->tokens);
      RecordShared(
          {&n, kEmbed},
          [=]() -> Launch {
            return [=](int64_t row0, int64_t rows) {
              return k->GatherRows(table, width, tok + row0, rows, width, dst0 + row0 * ld, ld);
            };
          },
          r0, m);
      return absl::OkStatus();
    }
    case OpKind::kGatherReduce: {
      const int src_node = f_.scatter()[s.field[id]].node;
      const float* src = Ptr(c_.fwd, src_node, 0);
      const int64_t sld = Ld(c_.fwd, src_node);
      const int32_t* off = Ints(b_.in.plan->reduce_offsets);
      const int32_t* ids = Ints(b_.in.plan->reduce_ids);
      int32_t* argmax = nullptr;
      if (n.reduce == vertex::Reduce::kMax) {  // one [rows, width] buffer, found by the backward
        auto it = b_.rec.argmax_of.find(id);
        if (it == b_.rec.argmax_of.end()) {
          CAVS_ASSIGN_OR_RETURN(core::Tensor t,
                                core::Tensor::Empty(core::Shape({b_.in.plan->num_rows, width}),
                                                    core::DType::kInt32, k_.device()));
          b_.out.scratch.push_back(t);
          it = b_.rec.argmax_of.emplace(id, t.data<int32_t>()).first;
        }
        argmax = it->second;
      }
      const ops::ReduceOp op = static_cast<ops::ReduceOp>(n.reduce);
      RecordShared(
          {&n, kReduce},
          [=]() -> Launch {
            return [=](int64_t row0, int64_t rows) {
              int32_t* am = argmax ? argmax + row0 * width : nullptr;
              return k->SegmentReduce(op, src, sld, off + row0, ids, rows, width, dst0 + row0 * ld,
                                      ld, am);
            };
          },
          r0, m);
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
  const float* dy0 = Ptr(s, dy_node, 0);
  const int64_t dld = Ld(s, dy_node);
  const int64_t w = p.nodes[dy_node].width;
  switch (n.kind) {
    case OpKind::kGatherReduceGrad: {
      float* acc = b_.in.buffer_base[c_.field_grad[s.field[id]]];
      const int32_t* off = Ints(b_.in.plan->reduce_offsets);
      const int32_t* ids = Ints(b_.in.plan->reduce_ids);
      const ops::ReduceOp op = static_cast<ops::ReduceOp>(n.reduce);
      const int32_t* am = n.reduce == vertex::Reduce::kMax
                              ? b_.rec.argmax_of.at(static_cast<int>(n.index))
                              : nullptr;
      RecordShared(
          {&n, kReduceGrad},
          [=]() -> Launch {
            return [=](int64_t row0, int64_t rows) {
              return k->SegmentReduceGrad(op, dy0 + row0 * dld, dld, off + row0, ids,
                                          am ? am + row0 * w : nullptr, rows, w, acc, w);
            };
          },
          r0, m);
      return absl::OkStatus();
    }
    case OpKind::kWeightGradMatMul: {
      // dW [in, out] += xᵀ dy over all rows; transposed forward (y = x Wᵀ): dW += dyᵀ x.
      const int x_node = n.inputs[0];
      const float* x0 = Ptr(s, x_node, 0);
      const int64_t xld = Ld(s, x_node);
      const int64_t xw = p.nodes[x_node].width;
      float* g = ParamGrad(n.name);
      // Only rows where both x and dy can be nonzero contribute.
      const Interval rows =
          Meet(Meet(b_.in.bwd_support[x_node], b_.in.bwd_support[dy_node]), {r0, r1});
      if (rows.first >= rows.second) return absl::OkStatus();
      b_.counts.gemm_flops += 2 * (rows.second - rows.first) * w * xw;
      const bool trans = n.transpose;
      RecordShared(
          {&n, kWeightGrad},
          [=]() -> Launch {
            return [=](int64_t row0, int64_t mm) {
              const float* x = x0 + row0 * xld;
              const float* dy = dy0 + row0 * dld;
              if (trans) return k->Gemm(true, false, w, xw, mm, 1.0f, dy, dld, x, xld, 1.0f, g, xw);
              return k->Gemm(true, false, xw, w, mm, 1.0f, x, xld, dy, dld, 1.0f, g, w);
            };
          },
          rows.first, rows.second - rows.first);
      return absl::OkStatus();
    }
    case OpKind::kWeightGradBias: {
      float* g = ParamGrad(n.name);
      const float alpha = n.scalar;
      RecordShared(
          {&n, kBiasGrad},
          [=]() -> Launch {
            return [=](int64_t row0, int64_t rows) {
              return k->ColumnSum(dy0 + row0 * dld, dld, rows, w, alpha, g);
            };
          },
          r0, m);
      return absl::OkStatus();
    }
    case OpKind::kWeightGradScale: {
      const float* x0 = Ptr(s, n.inputs[0], 0);
      const int64_t xld = Ld(s, n.inputs[0]);
      float* g = ParamGrad(n.name);
      RecordShared(
          {&n, kScaleGrad},
          [=]() -> Launch {
            return [=](int64_t row0, int64_t rows) {
              return k->ColumnDot(x0 + row0 * xld, xld, dy0 + row0 * dld, dld, rows, w, g);
            };
          },
          r0, m);
      return absl::OkStatus();
    }
    case OpKind::kEmbedGrad: {
      // Over every row (WeightGrads records sinks over all of them), each token's rows are
      // summed in row order (the plan's CSR): the first embedding of the table writes every row
      // of its gradient (nothing to zero), another sums its own apart and adds them on with
      // plain adds, one row per token. No atomics, so the same bits on every run of every
      // device.
      CAVS_CHECK(r0 == 0 && r1 == b_.in.plan->num_rows && b_.in.plan->token_row_offsets >= 0,
                 "an embedding gradient over every row of a plan with tokens");
      const int64_t slots = static_cast<int64_t>(b_.in.plan->unique_tokens.size());
      const bool first = !b_.out.embed_rows.defined();
      if (first) {
        CAVS_ASSIGN_OR_RETURN(
            b_.out.embed_rows,
            core::Tensor::Empty(core::Shape({slots, w}), core::DType::kFloat32, k_.device()));
        b_.out.embed_table = n.name;
      }
      if (b_.out.embed_table != n.name) {
        return absl::UnimplementedError(absl::StrCat("embedding tables '", b_.out.embed_table,
                                                     "' and '", n.name, "' in one function"));
      }
      float* rows = b_.out.embed_rows.data<float>();
      float* sums = rows;
      if (!first) {
        CAVS_ASSIGN_OR_RETURN(
            core::Tensor apart,
            core::Tensor::Empty(core::Shape({slots, w}), core::DType::kFloat32, k_.device()));
        b_.out.scratch.push_back(apart);
        sums = apart.data<float>();
      }
      const int32_t* off = Ints(b_.in.plan->token_row_offsets);
      const int32_t* ids = Ints(b_.in.plan->token_row_ids);
      Record(
          [=](int64_t, int64_t) {
            return k->SegmentReduce(ops::ReduceOp::kSum, dy0, dld, off, ids, slots, w, sums, w,
                                    nullptr);
          },
          0, 0);
      if (!first) {
        const int32_t* iota = Ints(b_.in.plan->token_slot_ids);
        Record([=](int64_t,
                   int64_t) { return k->ScatterAddRows(sums, w, iota, slots, w, rows, w, true); },
               0, 0);
      }
      return absl::OkStatus();
    }
    default:
      return absl::InternalError("not a sink");
  }
}

ops::RowCopy Recorder::GatherCopy(const ProgramSchedule& s, int id) const {
  const Node& n = f_.forward().nodes[id];
  const int src_node = f_.scatter()[s.field[id]].node;
  return {Ptr(c_.fwd, src_node, 0),
          Ld(c_.fwd, src_node),
          Ints(b_.in.plan->child_rows[n.index]),
          n.width,
          Ptr(s, id, 0),
          Ld(s, id)};
}

ops::RowCopy Recorder::GatherGradCopy(const vertex::Program& p, const ProgramSchedule& s,
                                      int id) const {
  const Node& n = p.nodes[id];
  const int dy_node = n.inputs.back();
  const int64_t w = p.nodes[dy_node].width;
  return {Ptr(s, dy_node, 0),
          Ld(s, dy_node),
          Ints(b_.in.plan->child_rows[n.index]),
          w,
          b_.in.buffer_base[c_.field_grad[s.field[id]]],
          w};
}

// Multi-copy kinds: a forward Gather, or a backward GatherGrad.
bool IsCopyStep(const vertex::Program& p, const Step& st, OpKind kind) {
  return !st.fused && p.nodes[st.nodes[0]].kind == kind;
}

// A forward Gather its children push (Step::pushes) or a backward GatherGrad they pull
// (Step::pulls): skipped where parents are unique.
bool Replaced(const ProgramSchedule& s, int id) {
  return !s.replaced.empty() && s.replaced[id] != 0;
}

// The run of copy steps of steps[i]'s kind that one multi-copy launch takes, from steps[i]: up
// to kMaxRowCopies copies, passing over those the children push or pull where parents are
// `unique`. Calls take(node) for each copy taken; returns the index after the run.
template <typename Take>
size_t CopyRun(const vertex::Program& p, const ProgramSchedule& s, const std::vector<Step>& steps,
               size_t i, bool unique, Take take) {
  const OpKind kind = p.nodes[steps[i].nodes[0]].kind;
  for (int taken = 0;
       i < steps.size() && IsCopyStep(p, steps[i], kind) && taken < ops::kMaxRowCopies; ++i) {
    const int id = steps[i].nodes[0];
    if (unique && Replaced(s, id)) continue;
    take(id);
    ++taken;
  }
  return i;
}

size_t Recorder::Coalesced(const vertex::Program& p, const ProgramSchedule& s,
                           const std::vector<Step>& steps, size_t i, int64_t r0, int64_t r1) {
  const bool gather = p.nodes[steps[i].nodes[0]].kind == OpKind::kGather;
  const bool unique = b_.in.plan->unique_parents;
  int taken = 0;
  const size_t end = CopyRun(p, s, steps, i, unique, [&taken](int) { ++taken; });
  if (taken == 0) return end;
  ops::Kernels* k = &k_;
  // The launch owns the copies for rows from row 0, made once (the rounds after the first only
  // count theirs); a gather's destination rows and a scatter-add's source rows are the
  // command's.
  RecordShared(
      {&steps[i], kCopies},
      [&]() -> Launch {
        std::vector<ops::RowCopy> copies;
        CopyRun(p, s, steps, i, unique, [&](int id) {
          copies.push_back(gather ? GatherCopy(s, id) : GatherGradCopy(p, s, id));
        });
        return [k, gather, unique, copies = std::move(copies)](int64_t row0, int64_t rows) {
          std::array<ops::RowCopy, ops::kMaxRowCopies> at;
          const int count = static_cast<int>(copies.size());
          for (int c = 0; c < count; ++c) {
            at[c] = copies[c];
            at[c].idx += row0;
            if (gather) {
              at[c].dst += row0 * at[c].dst_ld;
            } else {
              at[c].src += row0 * at[c].src_ld;
            }
          }
          if (gather) return k->GatherRowsMulti(at.data(), count, rows);
          return k->ScatterAddRowsMulti(at.data(), count, rows, unique);
        };
      },
      r0, r1 - r0);
  return end;
}

absl::Status Recorder::WeightGrads(const std::vector<Step>& steps, int64_t n) {
  if (n == 0) return absl::OkStatus();
  const vertex::Program& p = f_.backward();
  const bool hooks = b_.in.options->on_gradient_ready && k_.CallsHostHooksBetweenLaunches();
  for (const Step& st : steps) {
    CAVS_RETURN_IF_ERROR(Single(true, p, c_.bwd, st.nodes[0], 0, n));
    const Node& sink = p.nodes[st.nodes[0]];
    if (!hooks || sink.kind == OpKind::kEmbedGrad || --b_.rec.sinks_left[sink.name] > 0) continue;
    const RunOptions* o = b_.in.options;
    const std::string name = sink.name;
    Record([o, name](int64_t, int64_t) { return o->on_gradient_ready(name); }, 0, 0);
  }
  return absl::OkStatus();
}

void Recorder::Progress() {
  if (!b_.in.options->on_progress || !k_.CallsHostHooksBetweenLaunches()) return;
  const RunOptions* o = b_.in.options;
  RecordShared(
      {o, kProgress},
      [o]() -> Launch { return [o](int64_t, int64_t) { return o->on_progress(); }; }, 0, 0);
}

absl::Status Recorder::Program(bool backward, OpClass cls, int64_t r0, int64_t r1) {
  const vertex::Program& p = backward ? f_.backward() : f_.forward();
  const ProgramSchedule& s = backward ? c_.bwd : c_.fwd;
  if (r1 <= r0) return absl::OkStatus();
  const std::vector<Step>& steps = s.steps[static_cast<int>(cls)];
  last_gemm_.reset();  // a GEMM and a program merge only within one call (one phase, one round)
  for (size_t i = 0; i < steps.size();) {
    const Step& st = steps[i];
    if (IsCopyStep(p, st, OpKind::kGather) || IsCopyStep(p, st, OpKind::kGatherGrad)) {
      i = Coalesced(p, s, steps, i, r0, r1);
      continue;
    }
    if (st.fused) {
      Fused(p, s, st, r0, r1);
    } else if (p.nodes[st.nodes[0]].kind == OpKind::kMatMul) {
      CAVS_RETURN_IF_ERROR(MatMul(backward, p, s, st, r0, r1));
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
  const int64_t n = b_.in.plan->num_rows;
  const int64_t classes = f_.forward().nodes[push0].width;
  const int32_t* labels = Ints(b_.in.plan->labels);
  const bool mean = b_.in.options->loss == RunOptions::Loss::kMean && b_.in.plan->labelled > 0;
  const float scale = mean ? 1.0f / static_cast<float>(b_.in.plan->labelled) : 1.0f;
  float* dlogits =
      c_.dlogits >= 0 && b_.in.buffer_base[c_.dlogits] ? b_.in.buffer_base[c_.dlogits] : nullptr;
  float* stats = b_.in.stats;
  int32_t* pred = b_.in.pred;
  ops::Kernels* k = &k_;
  Record(
      [=](int64_t, int64_t) {
        return k->SoftmaxCrossEntropy(logits, ld, n, classes, labels, scale, dlogits, stats, pred);
      },
      0, 0);
}

int CountLaunches(const vertex::Program& p, const ProgramSchedule& s, OpClass cls,
                  bool gemm_then_program, bool gemm_adds_bias) {
  const std::vector<Step>& steps = s.steps[static_cast<int>(cls)];
  int launches = 0;
  for (size_t i = 0; i < steps.size();) {
    if (IsCopyStep(p, steps[i], OpKind::kGather) || IsCopyStep(p, steps[i], OpKind::kGatherGrad)) {
      int copies = 0;
      i = CopyRun(p, s, steps, i, /*unique=*/true, [&copies](int) { ++copies; });
      launches += copies > 0 ? 1 : 0;
      continue;
    }
    const bool merged = gemm_then_program && steps[i].fused && i > 0 && !steps[i - 1].fused &&
                        p.nodes[steps[i - 1].nodes[0]].kind == OpKind::kMatMul;
    if (!merged) ++launches;
    // A term of a folded sum with a bias fills the bias first where the GEMM cannot add it
    // (Recorder::MatMul; only over rows no earlier term wrote, so at most).
    const int id = steps[i].nodes[0];
    if (!steps[i].fused && p.nodes[id].kind == OpKind::kMatMul && !gemm_adds_bias &&
        s.gemm[id].sum >= 0 && s.gemm[id].bias >= 0) {
      ++launches;
    }
    ++i;
  }
  return launches;
}

absl::Status RecordSchedule(Recorder& rec, const vertex::Function& f, const Compiled& c,
                            const Plan& plan, bool backward,
                            std::array<size_t, kNumPhases>& phase_at, Batch& b,
                            const RecordFrom& from) {
  const int64_t n = plan.num_rows;
  const std::vector<Step>& early = c.bwd.early_weight_grads;
  const std::vector<Step>& late = c.bwd.steps[static_cast<int>(OpClass::kWeightGrad)];
  if (n > 0) {  // with no rows no step is recorded, so no hook is either
    for (const std::vector<Step>* list : {&early, &late}) {
      for (const Step& st : *list) ++b.rec.sinks_left[f.backward().nodes[st.nodes[0]].name];
    }
  }
  auto mark = [&](Phase p) { phase_at[static_cast<int>(p)] = b.out.commands.size(); };
  // Commands recorded so far (a GEMM joined to its program counted as two).
  auto commands = [&b] {
    return static_cast<int64_t>(b.out.commands.size()) + b.counts.gemm_programs;
  };
  auto round = [&](bool bwd, int r) {
    return rec.Program(bwd, OpClass::kInRounds, plan.round_offsets[r], plan.round_offsets[r + 1]);
  };
  mark(Phase::kBeforeRounds);
  CAVS_RETURN_IF_ERROR(rec.Program(false, OpClass::kBeforeRounds, from.row, n));
  mark(Phase::kRounds);
  const int64_t before_rounds = commands();
  b.out.round_at.assign(static_cast<size_t>(plan.num_rounds) + 1, b.out.commands.size());
  for (int r = from.round; r < plan.num_rounds; ++r) {
    b.out.round_at[static_cast<size_t>(r)] = b.out.commands.size();
    CAVS_RETURN_IF_ERROR(round(false, r));
    rec.Progress();
  }
  b.out.round_at.back() = b.out.commands.size();
  b.counts.forward_round_commands = commands() - before_rounds;
  if (from.after_support != nullptr) b.in.fwd_support = *from.after_support;
  mark(Phase::kAfterRounds);
  CAVS_RETURN_IF_ERROR(rec.Program(false, OpClass::kAfterRounds, 0, n));
  rec.Loss();
  mark(Phase::kBackward);
  if (backward) {
    CAVS_RETURN_IF_ERROR(rec.Program(true, OpClass::kBeforeRounds, 0, n));
    // The output layer's weight gradients are final now: they run (and can be sent) before
    // the backward rounds.
    CAVS_RETURN_IF_ERROR(rec.WeightGrads(early, n));
    const int64_t before_backward_rounds = commands();
    for (int r = plan.num_rounds - 1; r >= 0; --r) {
      CAVS_RETURN_IF_ERROR(round(true, r));
      rec.Progress();
    }
    b.counts.backward_round_commands = commands() - before_backward_rounds;
    CAVS_RETURN_IF_ERROR(rec.Program(true, OpClass::kAfterRounds, 0, n));
  }
  mark(Phase::kWeightGrad);
  if (backward) CAVS_RETURN_IF_ERROR(rec.WeightGrads(late, n));
  mark(Phase::kEnd);
  return absl::OkStatus();
}

}  // namespace cavs::scheduler::internal
