// Element-wise programs for the fused-kernel tests (ew_codegen_test.cc, cuda_fused_test.cc):
// the Binary Tree-LSTM's forward and backward round programs as the engine emits them, and
// random programs over a few buffers. Each program owns its buffers, so its pointers stay valid.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/random.h"
#include "ops/kernels.h"

namespace cavs::ops::testing {

struct EwProgram {
  std::vector<EwInstr> instrs;
  std::vector<std::unique_ptr<std::vector<float>>> buffers;  // every pointer points into one
  std::vector<int32_t> uids;                                 // kDropout's per-row uids
  std::vector<int32_t> push_rows;  // a row-mapped dst's rows (EwArg::rows), if the program has one
  std::vector<int32_t> pull_rows;  // a row-mapped a's rows, if the program has one
  int64_t rows = 0;

  // A new buffer of n floats, uniform in [-1, 1).
  float* Buffer(size_t n, core::Rng& rng) {
    buffers.push_back(std::make_unique<std::vector<float>>(n));
    for (float& x : *buffers.back()) x = rng.Uniform(-1.0f, 1.0f);
    return buffers.back()->data();
  }
  void Add(EwOp op, int64_t width, EwArg dst, EwArg a = {}, EwArg b = {}) {
    EwInstr in;
    in.op = op;
    in.width = width;
    in.dst = dst;
    in.a = a;
    in.b = b;
    instrs.push_back(in);
  }
};

inline EwArg Scratch(int64_t col) { return {nullptr, 0, col}; }

// A Tree-LSTM round, forward: gates from the pre-activations g (ld 5h: i, o, u, f_l, f_r
// column blocks), c = i u + f_l c_l + f_r c_r, h = o tanh(c); products in scratch.
inline EwProgram TreeLstmForward(int64_t h, int64_t rows, uint64_t seed) {
  core::Rng rng(seed);
  EwProgram p;
  p.rows = rows;
  float* g = p.Buffer(rows * 5 * h, rng);
  auto field = [&] { return EwArg{p.Buffer(rows * h, rng), h}; };
  const EwArg cl = field(), cr = field(), i = field(), fl = field(), fr = field(), u = field(),
              c = field(), tc = field(), o = field(), hh = field();
  const int64_t s = (h + 15) / 16 * 16;
  p.Add(EwOp::kSigmoid, h, fr, {g + 4 * h, 5 * h});
  p.Add(EwOp::kMul, h, Scratch(0), fr, cr);
  p.Add(EwOp::kSigmoid, h, fl, {g + 3 * h, 5 * h});
  p.Add(EwOp::kMul, h, Scratch(s), fl, cl);
  p.Add(EwOp::kTanh, h, u, {g + 2 * h, 5 * h});
  p.Add(EwOp::kSigmoid, h, i, {g, 5 * h});
  p.Add(EwOp::kMul, h, Scratch(2 * s), i, u);
  p.Add(EwOp::kAdd, h, Scratch(3 * s), Scratch(2 * s), Scratch(s));
  p.Add(EwOp::kAdd, h, c, Scratch(3 * s), Scratch(0));
  p.Add(EwOp::kTanh, h, tc, c);
  p.Add(EwOp::kSigmoid, h, o, {g + h, 5 * h});
  p.Add(EwOp::kMul, h, hh, o, tc);
  return p;
}

// The same round, backward: dh and dc in, dg (ld 5h) and the children's dc out.
inline EwProgram TreeLstmBackward(int64_t h, int64_t rows, uint64_t seed) {
  core::Rng rng(seed);
  EwProgram p;
  p.rows = rows;
  float* dg = p.Buffer(rows * 5 * h, rng);
  auto field = [&] { return EwArg{p.Buffer(rows * h, rng), h}; };
  const EwArg dh1 = field(), dh2 = field(), tc = field(), o = field(), dc_in = field(), u = field(),
              i = field(), cl = field(), fl = field(), cr = field(), fr = field(), dcl = field(),
              dcr = field();
  const int64_t s = (h + 15) / 16 * 16;
  p.Add(EwOp::kAdd, h, Scratch(0), dh1, dh2);
  p.Add(EwOp::kMul, h, Scratch(s), Scratch(0), tc);
  p.Add(EwOp::kMul, h, Scratch(2 * s), Scratch(0), o);
  p.Add(EwOp::kSigmoidGrad, h, {dg + h, 5 * h}, o, Scratch(s));
  p.Add(EwOp::kTanhGrad, h, Scratch(3 * s), tc, Scratch(2 * s));
  p.Add(EwOp::kAdd, h, Scratch(4 * s), dc_in, Scratch(3 * s));
  p.Add(EwOp::kMul, h, Scratch(5 * s), Scratch(4 * s), u);
  p.Add(EwOp::kMul, h, Scratch(6 * s), Scratch(4 * s), i);
  p.Add(EwOp::kSigmoidGrad, h, {dg, 5 * h}, i, Scratch(5 * s));
  p.Add(EwOp::kTanhGrad, h, {dg + 2 * h, 5 * h}, u, Scratch(6 * s));
  p.Add(EwOp::kMul, h, Scratch(7 * s), Scratch(4 * s), cl);
  p.Add(EwOp::kMul, h, dcl, Scratch(4 * s), fl);
  p.Add(EwOp::kSigmoidGrad, h, {dg + 3 * h, 5 * h}, fl, Scratch(7 * s));
  p.Add(EwOp::kMul, h, Scratch(8 * s), Scratch(4 * s), cr);
  p.Add(EwOp::kMul, h, dcr, Scratch(4 * s), fr);
  p.Add(EwOp::kSigmoidGrad, h, {dg + 4 * h, 5 * h}, fr, Scratch(8 * s));
  return p;
}

// A random valid program: 1 to `max_instrs` instructions over two row buffers (ld 3w and 2w + 1,
// operands at any column offset), a read-only broadcast row (ld 0) and a scratch row; most
// instructions of width w, some of width w2, kSum and kBroadcast among them. An instruction's
// dst overlaps its own operands only element for element (in place); a scratch read is of
// columns written before. Operands often repeat an earlier dst exactly, so values flow.
// Rows in [1, max_rows], widths in [1, max_width]; without scratch operands if !scratch.
inline EwProgram RandomProgram(core::Rng& rng, int max_instrs, int64_t max_rows = 7,
                               int64_t max_width = 9, bool scratch = true, bool push = true) {
  EwProgram p;
  p.rows = 1 + static_cast<int64_t>(rng.UniformInt(max_rows));
  const int64_t w = 1 + static_cast<int64_t>(rng.UniformInt(max_width));
  const int64_t w2 = 1 + static_cast<int64_t>(rng.UniformInt(max_width));
  const int64_t ld0 = 3 * w, ld1 = 2 * w + 1;
  float* b0 = p.Buffer(p.rows * ld0, rng);
  float* b1 = p.Buffer(p.rows * ld1, rng);
  float* bias = p.Buffer(3 * w, rng);
  const int64_t scratch_cols = 4 * w;
  std::vector<bool> written(scratch_cols, false);
  for (int64_t r = 0; r < p.rows; ++r) {
    p.uids.push_back(static_cast<int32_t>(rng.UniformInt(1000)) - 10);
  }
  std::vector<EwArg> dsts;                              // earlier destinations, to read back
  auto base_of = [&](const float* x) -> const float* {  // the row buffer x points into
    if (x >= b0 && x < b0 + p.rows * ld0) return b0;
    if (x >= b1 && x < b1 + p.rows * ld1) return b1;
    return bias;
  };
  // An operand of `width` columns that fits, or nothing (then the instruction is drawn again).
  auto any = [&](int64_t width, bool for_write) -> std::optional<EwArg> {
    // A column offset where `width` columns fit, in a row buffer or the scratch row.
    for (int attempt = 0; attempt < 20; ++attempt) {
      const uint64_t kind = rng.UniformInt(for_write ? 3 : 5);
      if (kind == 0 && width <= ld0) return EwArg{b0 + rng.UniformInt(ld0 - width + 1), ld0};
      if (kind == 1 && width <= ld1) return EwArg{b1 + rng.UniformInt(ld1 - width + 1), ld1};
      if (kind == 2 && scratch && width <= scratch_cols) {
        const int64_t col = static_cast<int64_t>(rng.UniformInt(scratch_cols - width + 1));
        bool ok = for_write;
        if (!for_write) {
          ok = true;
          for (int64_t c = col; c < col + width; ++c) ok = ok && written[c];
        }
        if (ok) return Scratch(col);
      }
      if (kind == 3 && !dsts.empty()) {
        const EwArg d = dsts[rng.UniformInt(dsts.size())];
        if (d.scratch < 0 || d.scratch + width <= scratch_cols) {
          bool ok = true;
          for (int64_t c = d.scratch; d.scratch >= 0 && c < d.scratch + width; ++c) {
            ok = ok && written[c];
          }
          // A row buffer's operand stays within its row.
          const int64_t col = d.scratch >= 0 ? 0 : d.ptr - base_of(d.ptr);
          if (ok && (d.scratch >= 0 || col + width <= d.ld)) return d;
        }
      }
      if (kind == 4 && width <= 3 * w) return EwArg{bias + rng.UniformInt(3 * w - width + 1), 0};
    }
    return std::nullopt;
  };
  const int n = 1 + static_cast<int>(rng.UniformInt(max_instrs));
  while (static_cast<int>(p.instrs.size()) < n) {
    EwInstr in;
    in.op = static_cast<EwOp>(rng.UniformInt(static_cast<uint64_t>(EwOp::kReluGrad) + 1));
    in.width = rng.UniformInt(4) == 0 ? w2 : w;
    const bool sum = in.op == EwOp::kSum, bcast = in.op == EwOp::kBroadcast;
    // A destination from an earlier one (a value overwritten) or anywhere.
    const std::optional<EwArg> dst = rng.UniformInt(3) == 0 && !dsts.empty()
                                         ? dsts[rng.UniformInt(dsts.size())]
                                         : any(sum ? 1 : in.width, true);
    if (!dst) continue;
    in.dst = *dst;
    const int64_t dst_width = sum ? 1 : in.width;
    const int64_t dst_col = in.dst.scratch >= 0 ? 0 : in.dst.ptr - base_of(in.dst.ptr);
    if (in.dst.scratch >= 0 ? in.dst.scratch + dst_width > scratch_cols
                            : dst_col + dst_width > in.dst.ld) {
      continue;
    }
    const std::optional<EwArg> a = any(bcast ? 1 : in.width, false);
    const std::optional<EwArg> b = EwReadsB(in.op) ? any(in.width, false) : EwArg{};
    if (!a || !b) continue;
    in.a = *a;
    in.b = *b;
    in.scalar = in.op == EwOp::kDropout ? 0.3f : rng.Uniform(-2.0f, 2.0f);
    in.offset = rng.Uniform(-1.0f, 1.0f);
    in.seed = rng.NextU64();
    in.uids = p.uids.data();
    // No overlap between dst and an operand other than element for element (with kSum and
    // kBroadcast, none at all): the contract of Kernels::Elementwise.
    auto clash = [&](const EwArg& x, int64_t xw, bool exact_ok) {
      if ((x.scratch >= 0) != (in.dst.scratch >= 0)) return false;
      if (x.scratch >= 0) {
        if (exact_ok && x.scratch == in.dst.scratch && xw == dst_width) return false;
        return x.scratch < in.dst.scratch + dst_width && in.dst.scratch < x.scratch + xw;
      }
      if (x.ptr == in.dst.ptr && x.ld == in.dst.ld && exact_ok && xw == dst_width) return false;
      // Same buffer (equal ld) or the read-only row: overlap within a row.
      const float* base = base_of(x.ptr);
      const float* dbase = base_of(in.dst.ptr);
      if (base != dbase) return false;
      const int64_t xc = x.ptr - base, dc = in.dst.ptr - dbase;
      return xc < dc + dst_width && dc < xc + xw;
    };
    if (in.op == EwOp::kAccumulate && in.dst.scratch >= 0) {  // reads its dst: written before?
      bool ok = true;
      for (int64_t c = in.dst.scratch; c < in.dst.scratch + dst_width; ++c) ok = ok && written[c];
      if (!ok) continue;
    }
    const bool exact_ok = !sum && !bcast;
    if (clash(in.a, bcast ? 1 : in.width, exact_ok) || clash(in.b, in.width, exact_ok)) continue;
    if (in.op == EwOp::kZero) in.a = {};
    p.instrs.push_back(in);
    if (in.dst.scratch >= 0) {
      for (int64_t c = in.dst.scratch; c < in.dst.scratch + dst_width; ++c) written[c] = true;
    }
    if (!sum) dsts.push_back(in.dst);
  }
  // Sometimes a push: a row-mapped copy of an earlier value into rows of a buffer nothing else
  // touches, each row to its own target or none (a child's value into its parent's row).
  if (push && !dsts.empty() && rng.UniformInt(2) == 0) {
    const EwArg from = dsts[rng.UniformInt(dsts.size())];
    const int64_t width =
        from.scratch >= 0 ? w : std::min(w, from.ld - (from.ptr - base_of(from.ptr)));
    bool ok = width > 0;
    for (int64_t c = from.scratch; ok && from.scratch >= 0 && c < from.scratch + width; ++c) {
      ok = c < scratch_cols && written[c];
    }
    if (ok) {
      p.push_rows.resize(p.rows);
      std::vector<int32_t> targets(2 * p.rows);
      for (size_t t = 0; t < targets.size(); ++t) targets[t] = static_cast<int32_t>(t);
      rng.Shuffle(targets);
      for (int64_t r = 0; r < p.rows; ++r) {
        p.push_rows[r] = rng.UniformInt(4) == 0 ? -1 : targets[r];
      }
      float* pushed = p.Buffer(2 * p.rows * (width + 1), rng);
      EwInstr in;
      in.op = EwOp::kCopy;
      in.width = width;
      in.dst = {pushed, width + 1, -1, p.push_rows.data()};
      in.a = from;
      // Anywhere when it copies memory (an older value is a value too); after everything when
      // it copies scratch, which is written before it is read.
      const size_t at = from.scratch >= 0 ? p.instrs.size() : rng.UniformInt(p.instrs.size() + 1);
      p.instrs.insert(p.instrs.begin() + static_cast<std::ptrdiff_t>(at), in);
    }
  }
  // Sometimes a pull: a row-mapped read, accumulated into a row buffer, of a buffer nothing
  // writes (a child's gradient from its parent's row; several rows may read one, or none).
  if (push && rng.UniformInt(2) == 0) {
    const int64_t width = std::min(w, ld1);
    p.pull_rows.resize(p.rows);
    for (int64_t r = 0; r < p.rows; ++r) {
      p.pull_rows[r] = static_cast<int32_t>(rng.UniformInt(2 * p.rows + 1)) - 1;
    }
    float* parents = p.Buffer(2 * p.rows * width, rng);
    EwInstr in;
    in.op = rng.UniformInt(2) == 0 ? EwOp::kAccumulate : EwOp::kCopy;
    in.width = width;
    in.dst = {b1 + rng.UniformInt(ld1 - width + 1), ld1};
    in.a = {parents, width, -1, p.pull_rows.data()};
    p.instrs.insert(
        p.instrs.begin() + static_cast<std::ptrdiff_t>(rng.UniformInt(p.instrs.size() + 1)), in);
  }
  return p;
}

}  // namespace cavs::ops::testing
