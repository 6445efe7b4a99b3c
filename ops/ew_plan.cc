#include "ops/ew_plan.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/philox.h"

namespace cavs::ops {
namespace {

// Operand `field` of an instruction: 0 dst, 1 a, 2 b.
const EwArg& OperandOf(const EwInstr& in, int field) {
  return field == 0 ? in.dst : field == 1 ? in.a : in.b;
}

// The op with its row-mapped operands, as the key and the fingerprint record it.
int64_t OpBits(EwOp op, bool dst_mapped, bool a_mapped) {
  return static_cast<int64_t>(op) | (dst_mapped ? 256 : 0) | (a_mapped ? 512 : 0);
}

// What a shape promises is fixed of one instruction (EwFingerprint), 8 values.
constexpr size_t kInstrFingerprint = 8;
std::array<int64_t, kInstrFingerprint> InstrFingerprint(const EwInstr& in) {
  return {OpBits(in.op, in.dst.rows != nullptr, in.a.rows != nullptr),
          in.width,
          in.dst.ld,
          in.dst.scratch,
          in.a.ld,
          in.a.scratch,
          in.b.ld,
          in.b.scratch};
}

// One operand access of an instruction, for the overlap analysis.
struct Access {
  int instr = 0;  // in plan.instrs
  int field = 0;  // 0 dst, 1 a, 2 b
  bool write = false;
  bool elementwise = false;  // element c of the iteration touches column c (else: see cols)
  bool scratch = false;
  bool mapped = false;  // a row-mapped dst (EwArg::rows): rows nothing else in the launch touches
  const EwArg* arg = nullptr;
  int64_t col0 = 0, col1 = 0;  // columns touched in a row, relative to the operand
  // Everything touched over all rows: bytes of memory, or columns of the scratch row.
  intptr_t lo = 0, hi = 0;
};

// The same element for the same iteration index: then the thread that writes one reads the other.
bool Identical(const Access& x, const Access& y, int64_t rows) {
  if (!x.elementwise || !y.elementwise || x.scratch != y.scratch) return false;
  if (x.mapped || y.mapped) return false;
  if (x.col1 != y.col1) return false;  // another width: not every element is covered
  if (x.scratch) return x.arg->scratch == y.arg->scratch;
  return x.arg->ptr == y.arg->ptr && (x.arg->ld == y.arg->ld || rows == 1);
}

bool Intersect(int64_t a0, int64_t a1, int64_t b0, int64_t b1) { return a0 < b1 && b0 < a1; }

// Whether two accesses may touch a common element (conservative: true when unsure).
bool Overlap(const Access& x, const Access& y, int64_t rows) {
  if (x.mapped || y.mapped) return false;  // the caller's promise (EwArg::rows)
  if (x.scratch != y.scratch || x.hi <= y.lo || y.hi <= x.lo) return false;
  if (x.scratch || rows == 1) return true;  // the ranges are the footprints themselves
  // Element offsets from x's pointer; pointers into different allocations compare as integers.
  const intptr_t bytes =
      reinterpret_cast<intptr_t>(y.arg->ptr) - reinterpret_cast<intptr_t>(x.arg->ptr);
  if (bytes % static_cast<intptr_t>(sizeof(float)) != 0) return true;
  const int64_t delta = static_cast<int64_t>(bytes / static_cast<intptr_t>(sizeof(float)));
  const int64_t ld = x.arg->ld;
  if (y.arg->ld != ld || ld <= 0 || x.col1 > ld || y.col1 > ld) return true;
  if (delta <= -ld || delta >= ld) return true;  // row r against another row: unsure
  // Row r of y against rows r - 1, r and r + 1 of x (the only ones within reach).
  for (int64_t k = -1; k <= 1; ++k) {
    if (Intersect(x.col0 + k * ld, x.col1 + k * ld, delta + y.col0, delta + y.col1)) return true;
  }
  return false;
}

// The accesses of one instruction: reads first, then the write.
void AccessesOf(const EwInstr& in, int instr, int64_t rows, std::vector<Access>* out) {
  const int64_t w = in.width;
  auto add = [&](int field, bool write, bool elementwise, const EwArg& arg, int64_t c1) {
    Access x{instr, field, write, elementwise, arg.scratch >= 0, arg.rows != nullptr, &arg, 0, c1};
    if (x.scratch) {
      x.lo = static_cast<intptr_t>(arg.scratch);
      x.hi = static_cast<intptr_t>(arg.scratch + c1);
    } else {
      x.lo = reinterpret_cast<intptr_t>(arg.ptr);
      x.hi = x.lo + static_cast<intptr_t>(((rows - 1) * arg.ld + c1) * sizeof(float));
    }
    out->push_back(x);
  };
  switch (in.op) {
    case EwOp::kSum:
      add(1, false, false, in.a, w);
      add(0, true, false, in.dst, 1);
      return;
    case EwOp::kBroadcast:
      add(1, false, false, in.a, 1);
      add(0, true, true, in.dst, w);
      return;
    case EwOp::kAccumulate:
      add(0, false, true, in.dst, w);
      break;
    default:
      break;
  }
  if (EwReadsA(in.op)) add(1, false, true, in.a, w);
  if (EwReadsB(in.op)) add(2, false, true, in.b, w);
  add(0, true, true, in.dst, w);
}

}  // namespace

EwKernelPlan PlanEwKernel(const EwInstr* program, int count, int64_t rows) {
  EwKernelPlan plan;
  plan.instrs.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    if (program[i].width <= 0) continue;
    EwPlanInstr p;
    p.program_index = i;
    p.op = program[i].op;
    p.width = program[i].width;
    p.dst_mapped = program[i].dst.rows != nullptr;
    p.a_mapped = program[i].a.rows != nullptr;
    plan.instrs.push_back(p);
  }
  const int n = static_cast<int>(plan.instrs.size());
  std::vector<Access> acc;
  acc.reserve(static_cast<size_t>(n) * 3);
  std::vector<int> first_access(n + 1, 0);
  for (int k = 0; k < n; ++k) {
    first_access[k] = static_cast<int>(acc.size());
    AccessesOf(program[plan.instrs[k].program_index], k, rows, &acc);
  }
  first_access[n] = static_cast<int>(acc.size());

  // Segments: a new one at a width change, at or after a kSum, and where an instruction's access
  // overlaps a write of the segment (or writes over its access) other than element for element.
  for (int k = 0; k < n; ++k) {
    const bool row_sum = plan.instrs[k].op == EwOp::kSum;
    bool split = plan.segments.empty();
    if (!split) {
      const EwPlanSegment& seg = plan.segments.back();
      split = row_sum || seg.row_sum || seg.width != plan.instrs[k].width;
      // Reads against the segment's writes (the last access of each instruction); the write
      // against every access of the segment.
      for (int y = first_access[k]; !split && y < first_access[k + 1]; ++y) {
        if (acc[y].write) {
          for (int x = first_access[seg.first]; !split && x < first_access[k]; ++x) {
            split = Overlap(acc[x], acc[y], rows) && !Identical(acc[x], acc[y], rows);
          }
        } else {
          for (int j = seg.first; !split && j < k; ++j) {
            const Access& x = acc[first_access[j + 1] - 1];
            split = Overlap(x, acc[y], rows) && !Identical(x, acc[y], rows);
          }
        }
      }
    }
    if (split) {
      EwPlanSegment seg;
      seg.first = k;
      seg.width = plan.instrs[k].width;
      seg.row_sum = row_sum;
      plan.segments.push_back(seg);
    }
    plan.segments.back().end = k + 1;
    plan.instrs[k].segment = static_cast<int32_t>(plan.segments.size()) - 1;
    plan.max_width = std::max(plan.max_width, plan.instrs[k].width);
  }

  // A scratch result stays in a register when every later read of its columns, up to the next
  // write over them, is the same element in the same segment.
  std::vector<bool> in_register(n, false);
  for (int j = 0; j < n; ++j) {
    const Access& w = acc[first_access[j + 1] - 1];  // the write is the last access
    if (!w.scratch || !w.elementwise) continue;      // a row sum's result is in one lane
    bool ok = true, done = false;
    for (int y = first_access[j + 1]; ok && !done && y < first_access[n]; ++y) {
      if (!Overlap(w, acc[y], rows)) continue;
      const bool same = Identical(w, acc[y], rows);
      if (acc[y].write) {
        ok = same;
        done = true;
      } else {
        ok = same && plan.instrs[acc[y].instr].segment == plan.instrs[j].segment;
      }
    }
    in_register[j] = ok;
    plan.registers += ok ? 1 : 0;
  }

  // Operand sources. A read takes the latest earlier write over it that is the same element in
  // the same segment from its register; else memory or the shared row.
  std::vector<std::pair<int64_t, int64_t>> ranges;  // shared-row columns [begin, end) used
  auto slot_of = [&](const Access& x) {
    for (size_t s = 0; s < plan.slots.size(); ++s) {
      const EwPlanSlot& slot = plan.slots[s];
      const EwArg& arg = OperandOf(program[slot.program_index], slot.field);
      // A row-mapped dst keeps a slot of its own: its pointer is its buffer's row 0, which an
      // operand of the first round's rows may equal in one round and not in the next.
      if (arg.ptr == x.arg->ptr && arg.ld == x.arg->ld && arg.rows == x.arg->rows) {
        return static_cast<int32_t>(s);
      }
    }
    plan.slots.push_back({plan.instrs[x.instr].program_index, x.field});
    return static_cast<int32_t>(plan.slots.size()) - 1;
  };
  for (int k = 0; k < n; ++k) {
    EwPlanInstr& p = plan.instrs[k];
    for (int y = first_access[k]; y < first_access[k + 1]; ++y) {
      const Access& a = acc[y];
      EwPlanOperand op;
      if (a.write) {
        if (!a.scratch) {
          op = {EwSource::kMemory, slot_of(a), 0};
        } else if (in_register[k]) {
          op = {EwSource::kRegister, k, 0};
        } else {
          op = {EwSource::kShared, -1, a.arg->scratch};
        }
      } else {
        int from = -1;
        for (int j = k - 1; j >= 0; --j) {
          const Access& x = acc[first_access[j + 1] - 1];  // instruction j's write
          if (!Overlap(x, a, rows)) continue;
          if (plan.instrs[j].segment == p.segment && Identical(x, a, rows)) from = j;
          break;  // the latest write over it decides
        }
        if (from >= 0) {
          op = {EwSource::kRegister, from, 0};
        } else if (a.scratch) {
          op = {EwSource::kShared, -1, a.arg->scratch};
        } else {
          op = {EwSource::kMemory, slot_of(a), 0};
        }
      }
      if (op.source == EwSource::kShared) ranges.emplace_back(op.col, op.col + a.col1);
      EwPlanOperand* slot = a.write        ? &p.dst
                            : a.field == 0 ? &p.dst_in
                            : a.field == 1 ? &p.a
                                           : &p.b;
      *slot = op;
    }
  }

  // Shared scratch columns packed: the ranges read or written through the shared row, merged
  // where they overlap, laid side by side (the scratch row also holds the register-resident
  // temporaries, which need no shared memory).
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<int64_t, int64_t>> merged;  // disjoint, sorted
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first < merged.back().second) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  std::vector<int64_t> packed_at(merged.size());
  for (size_t i = 0; i < merged.size(); ++i) {
    packed_at[i] = plan.shared_width;
    plan.shared_width += merged[i].second - merged[i].first;
  }
  for (EwPlanInstr& p : plan.instrs) {
    for (EwPlanOperand* o : {&p.dst, &p.dst_in, &p.a, &p.b}) {
      if (o->source != EwSource::kShared) continue;
      const auto it = std::upper_bound(merged.begin(), merged.end(),
                                       std::make_pair(o->col, std::numeric_limits<int64_t>::max()));
      const size_t i = static_cast<size_t>(it - merged.begin()) - 1;
      o->col = packed_at[i] + (o->col - merged[i].first);
    }
  }

  // The key: everything EmitEwKernelCuda reads.
  std::vector<int64_t>& key = plan.key;
  key.reserve(static_cast<size_t>(n) * 16 + plan.slots.size() * 2 + 4);
  key.push_back(n);
  for (const EwPlanInstr& p : plan.instrs) {
    key.push_back(p.program_index);
    key.push_back(OpBits(p.op, p.dst_mapped, p.a_mapped));
    key.push_back(p.width);
    key.push_back(p.segment);
    for (const EwPlanOperand* o : {&p.dst, &p.dst_in, &p.a, &p.b}) {
      key.push_back(static_cast<int64_t>(o->source));
      key.push_back(o->index);
      key.push_back(o->col);
    }
  }
  key.push_back(static_cast<int64_t>(plan.slots.size()));
  for (const EwPlanSlot& s : plan.slots) {
    key.push_back(s.program_index);
    key.push_back(s.field);
  }
  key.push_back(plan.shared_width);
  return plan;
}

void EwFingerprint(const EwInstr* program, int count, int64_t rows, std::vector<int64_t>* out) {
  out->assign({count, rows == 1 ? 1 : 2});
  for (int i = 0; i < count; ++i) {
    const auto f = InstrFingerprint(program[i]);
    out->insert(out->end(), f.begin(), f.end());
  }
}

bool EwFingerprintMatches(const std::vector<int64_t>& f, const EwInstr* program, int count,
                          int64_t rows) {
  if (f.size() != 2 + kInstrFingerprint * static_cast<size_t>(count) || f[0] != count ||
      f[1] != (rows == 1 ? 1 : 2)) {
    return false;
  }
  const int64_t* at = f.data() + 2;
  for (int i = 0; i < count; ++i, at += kInstrFingerprint) {
    const auto g = InstrFingerprint(program[i]);
    for (size_t j = 0; j < kInstrFingerprint; ++j) {
      if (g[j] != at[j]) return false;
    }
  }
  return true;
}

absl::Status BrokenShapeError(uint64_t shape) {
  return absl::FailedPreconditionError(
      absl::StrCat("Elementwise: two programs passed with shape ", shape,
                   " relate their pointers differently (the caller's promise is broken)"));
}

absl::Status EwShapeChecker::Check(const EwInstr* program, int count, int64_t rows,
                                   uint64_t shape) {
  if (shape == 0) return absl::OkStatus();
  std::vector<int64_t> key = PlanEwKernel(program, count, rows).key;
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = seen_.try_emplace(shape);
  if (inserted || !EwFingerprintMatches(it->second.first, program, count, rows)) {
    EwFingerprint(program, count, rows, &it->second.first);
    it->second.second = std::move(key);
    return absl::OkStatus();
  }
  return it->second.second == key ? absl::OkStatus() : BrokenShapeError(shape);
}

// The value of one element of `in` (a, b its operands, d the dst's old value): the CPU's and
// the interpreter's arithmetic.
float EwApplyOnHost(const EwInstr& in, float a, float b, float d, int64_t row, int64_t c) {
  switch (in.op) {
    case EwOp::kCopy:
    case EwOp::kBroadcast:
      return a;
    case EwOp::kZero:
      return 0.0f;
    case EwOp::kAdd:
      return a + b;
    case EwOp::kSub:
      return a - b;
    case EwOp::kMul:
      return a * b;
    case EwOp::kAccumulate:
      return d + a;
    case EwOp::kSigmoid:
      return 1.0f / (1.0f + std::exp(-a));
    case EwOp::kTanh:
      return std::tanh(a);
    case EwOp::kRelu:
      return std::fmax(a, 0.0f);
    case EwOp::kNeg:
      return -a;
    case EwOp::kScale:
      return in.scalar * a + in.offset;
    case EwOp::kDropout: {
      const uint64_t counter = static_cast<uint64_t>(static_cast<int64_t>(in.uids[row])) *
                                   static_cast<uint64_t>(in.width) +
                               static_cast<uint64_t>(c);
      return core::PhiloxUniform(in.seed, counter) >= in.scalar ? a * (1.0f / (1.0f - in.scalar))
                                                                : 0.0f;
    }
    case EwOp::kSigmoidGrad:
      return b * a * (1.0f - a);
    case EwOp::kTanhGrad:
      return b * (1.0f - a * a);
    case EwOp::kReluGrad:
      return a > 0.0f ? b : 0.0f;
    case EwOp::kSum:
      break;
  }
  return 0.0f;
}

void RunEwPlanOnHost(const EwKernelPlan& plan, const EwInstr* program, int64_t rows) {
  const int64_t sw = std::max<int64_t>(plan.shared_width, 1);
  std::vector<float> shared(static_cast<size_t>(rows * sw), 0.0f);
  auto slot = [&](int32_t s) -> const EwArg& {
    return OperandOf(program[plan.slots[s].program_index], plan.slots[s].field);
  };
  auto at = [&](const EwPlanOperand& o, int64_t row, int64_t c) -> float* {
    if (o.source == EwSource::kShared) return &shared[row * sw + o.col + c];
    const EwArg& x = slot(o.index);
    return x.ptr + row * x.ld + c;
  };
  std::vector<float> regs(plan.instrs.size());
  std::vector<std::array<float, 3>> loaded(plan.instrs.size());
  for (const EwPlanSegment& seg : plan.segments) {
    if (seg.row_sum) {
      const EwPlanInstr& p = plan.instrs[seg.first];
      for (int64_t row = rows - 1; row >= 0; --row) {
        float sum = 0.0f;
        for (int64_t c = 0; c < seg.width; ++c) sum += *at(p.a, row, c);
        *at(p.dst, row, 0) = sum;
      }
      continue;
    }
    for (int64_t e = rows * seg.width - 1; e >= 0; --e) {
      const int64_t row = e / seg.width, c = e % seg.width;
      for (int k = seg.first; k < seg.end; ++k) {
        const EwPlanInstr& p = plan.instrs[k];
        const EwPlanOperand* ops[] = {&p.a, &p.b, &p.dst_in};
        for (int o = 0; o < 3; ++o) {
          const EwSource src = ops[o]->source;
          if (o == 0 && p.a_mapped) {
            const EwInstr& in = program[p.program_index];
            const EwArg& x = slot(p.a.index);
            const int64_t from = in.a.rows[row];
            loaded[k][o] = from >= 0 ? x.ptr[from * x.ld + c] : 0.0f;
          } else if (src == EwSource::kMemory || src == EwSource::kShared) {
            loaded[k][o] = *at(*ops[o], row, o == 0 && p.op == EwOp::kBroadcast ? 0 : c);
          }
        }
      }
      for (int k = seg.first; k < seg.end; ++k) {
        const EwPlanInstr& p = plan.instrs[k];
        auto value = [&](const EwPlanOperand& o, int which) {
          return o.source == EwSource::kRegister ? regs[o.index] : loaded[k][which];
        };
        regs[k] = EwApplyOnHost(program[p.program_index], value(p.a, 0), value(p.b, 1),
                                value(p.dst_in, 2), row, c);
        if (p.dst_mapped) {
          const EwInstr& in = program[p.program_index];
          if (in.dst.rows[row] >= 0) {
            const EwArg& x = slot(p.dst.index);
            x.ptr[static_cast<int64_t>(in.dst.rows[row]) * x.ld + c] = regs[k];
          }
        } else if (p.dst.source != EwSource::kRegister) {
          *at(p.dst, row, c) = regs[k];
        }
      }
    }
  }
}

}  // namespace cavs::ops
