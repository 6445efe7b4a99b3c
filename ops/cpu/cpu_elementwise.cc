#include "ops/cpu/cpu_elementwise.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/random.h"
#include "core/status.h"
#include "ops/cpu/cpu_math.h"
#include "ops/cpu/cpu_parallel.h"

namespace cavs::ops::cpu {
namespace {

bool IsValidOp(EwOp op) {
  return static_cast<uint8_t>(op) <= static_cast<uint8_t>(EwOp::kReluGrad);
}

absl::Status CheckOperand(const EwArg& arg, const char* name, int i, bool allow_scratch) {
  if (arg.scratch >= 0) {
    if (allow_scratch) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("Elementwise: instruction ", i, " operand ",
                                                   name,
                                                   " is a scratch operand, which this "
                                                   "device does not support"));
  }
  if (arg.ptr == nullptr || arg.ld < 0) {
    return absl::InvalidArgumentError(absl::StrCat("Elementwise: instruction ", i, " operand ",
                                                   name, " is null or has ld ", arg.ld, " < 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckInstr(const EwInstr& in, int i, int64_t rows, bool allow_scratch) {
  if (!IsValidOp(in.op)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Elementwise: instruction ", i, " has unknown op ", static_cast<int>(in.op)));
  }
  if (in.width < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Elementwise: instruction ", i, " has width ", in.width));
  }
  if (in.width == 0 || rows == 0) return absl::OkStatus();
  CAVS_RETURN_IF_ERROR(CheckOperand(in.dst, "dst", i, allow_scratch));
  const bool mapped_a_ok = (in.op == EwOp::kCopy || in.op == EwOp::kAccumulate) &&
                           in.a.scratch < 0 && in.dst.scratch < 0 && in.dst.rows == nullptr;
  if (in.b.rows != nullptr || (in.a.rows != nullptr && !mapped_a_ok) ||
      (in.dst.rows != nullptr && (in.op != EwOp::kCopy || in.dst.scratch >= 0))) {
    return absl::InvalidArgumentError(
        absl::StrCat("Elementwise: instruction ", i,
                     " has a row-mapped operand where none may be (a kCopy's dst, or the a of a "
                     "kCopy or kAccumulate into a plain dst)"));
  }
  const int64_t dst_width = in.op == EwOp::kSum ? 1 : in.width;
  if (rows > 1 && in.dst.scratch < 0 && in.dst.ld < dst_width) {
    return absl::InvalidArgumentError(
        absl::StrCat("Elementwise: instruction ", i, " writes overlapping rows (dst ld ", in.dst.ld,
                     " < width ", dst_width, " with ", rows, " rows)"));
  }
  if (EwReadsA(in.op)) CAVS_RETURN_IF_ERROR(CheckOperand(in.a, "a", i, allow_scratch));
  if (EwReadsB(in.op)) CAVS_RETURN_IF_ERROR(CheckOperand(in.b, "b", i, allow_scratch));
  if (in.op == EwOp::kDropout && (in.uids == nullptr || !(in.scalar >= 0.0f && in.scalar < 1.0f))) {
    return absl::InvalidArgumentError(absl::StrCat("Elementwise: dropout instruction ", i,
                                                   " needs uids and a rate in [0, 1), got ",
                                                   in.scalar));
  }
  return absl::OkStatus();
}

// dst[c] = a[c] * keep(c) / (1 - p) for one row; keep(c) = PhiloxUniform(seed, uid * w + c)
// >= p. The row's Philox blocks (one per four counters) are drawn first, a chunk at a time, in
// a loop of independent blocks that vectorizes; then the mask is applied.
CAVS_CPU_INLINE void DropoutRow(float* d, const float* a, int64_t w, const EwInstr& in, int64_t r) {
  constexpr int64_t kChunkBlocks = 64;
  const float p = in.scalar;
  const float inv_keep = 1.0f / (1.0f - p);
  const uint64_t base =
      static_cast<uint64_t>(static_cast<int64_t>(in.uids[r])) * static_cast<uint64_t>(w);
  uint32_t bits[4 * kChunkBlocks];
  int64_t c = 0;
  while (c < w) {
    const uint64_t first_block = (base + static_cast<uint64_t>(c)) >> 2;
    const int64_t skip = static_cast<int64_t>((base + static_cast<uint64_t>(c)) & 3);
    const int64_t n = std::min<int64_t>(w - c, 4 * kChunkBlocks - skip);
    const int64_t blocks = (skip + n + 3) / 4;
    for (int64_t j = 0; j < blocks; ++j) {
      const core::PhiloxBlock out =
          core::PhiloxStreamBlock(in.seed, 0, first_block + static_cast<uint64_t>(j));
      bits[4 * j] = out.v[0];
      bits[4 * j + 1] = out.v[1];
      bits[4 * j + 2] = out.v[2];
      bits[4 * j + 3] = out.v[3];
    }
    const uint32_t* chunk = bits + skip;
    float* dc = d + c;
    const float* ac = a + c;
    _Pragma("GCC ivdep") for (int64_t i = 0; i < n; ++i) {
      const bool keep = core::UniformFromBits(chunk[i]) >= p;
      dc[i] = keep ? ac[i] * inv_keep : 0.0f;
    }
    c += n;
  }
}

// The element-wise loops: `#pragma GCC ivdep` because dst may be a or b (same element read
// before written), which is safe, and the compiler's alias checks would otherwise send the
// in-place case down the scalar path.
#define CAVS_EW_LOOP _Pragma("GCC ivdep") for (int64_t c = 0; c < w; ++c)

// The ops that read a and b, over one row of w columns.
CAVS_CPU_INLINE void BinaryRow(EwOp op, float* d, const float* a, const float* b, int64_t w) {
  switch (op) {
    case EwOp::kAdd:
      CAVS_EW_LOOP d[c] = a[c] + b[c];
      break;
    case EwOp::kSub:
      CAVS_EW_LOOP d[c] = a[c] - b[c];
      break;
    case EwOp::kMul:
      CAVS_EW_LOOP d[c] = a[c] * b[c];
      break;
    case EwOp::kSigmoidGrad:
      CAVS_EW_LOOP d[c] = b[c] * a[c] * (1.0f - a[c]);
      break;
    case EwOp::kTanhGrad:
      CAVS_EW_LOOP d[c] = b[c] * (1.0f - a[c] * a[c]);
      break;
    case EwOp::kReluGrad:
      CAVS_EW_LOOP d[c] = a[c] > 0.0f ? b[c] : 0.0f;
      break;
    default:
      break;
  }
}

// The ops that read a only (or nothing), except dropout, over one row of w columns.
CAVS_CPU_INLINE void UnaryRow(const EwInstr& in, float* d, const float* a, int64_t w) {
  switch (in.op) {
    case EwOp::kCopy:
      CAVS_EW_LOOP d[c] = a[c];
      break;
    case EwOp::kZero:
      CAVS_EW_LOOP d[c] = 0.0f;
      break;
    case EwOp::kAccumulate:
      CAVS_EW_LOOP d[c] += a[c];
      break;
    case EwOp::kSigmoid:
      CAVS_EW_LOOP d[c] = Sigmoid(a[c]);
      break;
    case EwOp::kTanh:
      CAVS_EW_LOOP d[c] = Tanh(a[c]);
      break;
    case EwOp::kRelu:
      CAVS_EW_LOOP d[c] = a[c] > 0.0f ? a[c] : 0.0f;
      break;
    case EwOp::kNeg:
      CAVS_EW_LOOP d[c] = -a[c];
      break;
    case EwOp::kScale: {
      const float s = in.scalar, o = in.offset;
      CAVS_EW_LOOP d[c] = s * a[c] + o;
      break;
    }
    case EwOp::kSum: {
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t c = 0; c < w; ++c) sum += a[c];
      d[0] = sum;
      break;
    }
    case EwOp::kBroadcast: {
      const float v = a[0];
      CAVS_EW_LOOP d[c] = v;
      break;
    }
    default:
      break;
  }
}

// A row of `w` zeros: what a row-mapped read gets where the row has none to read.
const float* ZeroRow(int64_t w) {
  thread_local std::vector<float> zeros;
  if (static_cast<int64_t>(zeros.size()) < w) zeros.assign(static_cast<size_t>(w), 0.0f);
  return zeros.data();
}

// Applies instruction `in` to row r. A row-mapped operand (EwArg::rows) is row rows[r] of its
// buffer: a dst with none is not written, an a with none reads zeros.
CAVS_CPU_INLINE void RunInstr(const EwInstr& in, int64_t r) {
  const int64_t to = in.dst.rows != nullptr ? in.dst.rows[r] : r;
  if (to < 0) return;
  float* d = in.dst.ptr + to * in.dst.ld;
  const float* a = in.a.ptr != nullptr ? in.a.ptr + r * in.a.ld : nullptr;
  if (in.a.rows != nullptr) {
    const int64_t from = in.a.rows[r];
    a = from >= 0 ? in.a.ptr + from * in.a.ld : ZeroRow(in.width);
  }
  if (in.op == EwOp::kDropout) {
    DropoutRow(d, a, in.width, in, r);
  } else if (EwReadsB(in.op)) {
    BinaryRow(in.op, d, a, in.b.ptr + r * in.b.ld, in.width);
  } else {
    UnaryRow(in, d, a, in.width);
  }
}

#undef CAVS_EW_LOOP

}  // namespace

namespace internal {

// Rows [begin, end) of the program; compiled once per vector ISA (CAVS_CPU_VECTOR_CLONES).
CAVS_CPU_VECTOR_CLONES
void RunProgramRows(const EwInstr* program, int count, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    for (int i = 0; i < count; ++i) {
      if (program[i].width > 0) RunInstr(program[i], r);
    }
  }
}

}  // namespace internal

absl::Status ValidateProgram(const EwInstr* program, int count, int64_t rows, bool allow_scratch) {
  if (count < 0 || rows < 0 || (count > 0 && program == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Elementwise: ", count, " instructions over ", rows, " rows"));
  }
  for (int i = 0; i < count; ++i) {
    CAVS_RETURN_IF_ERROR(CheckInstr(program[i], i, rows, allow_scratch));
  }
  return absl::OkStatus();
}

absl::Status Elementwise(const EwInstr* program, int count, int64_t rows, int64_t row0) {
  CAVS_RETURN_IF_ERROR(ValidateProgram(program, count, rows));
  if (row0 < 0) {
    return absl::InvalidArgumentError(absl::StrCat("Elementwise: row offset ", row0, " < 0"));
  }
  int64_t row_work = 0;
  for (int i = 0; i < count; ++i) row_work += program[i].width;
  if (rows == 0 || row_work == 0) return absl::OkStatus();
  // Row i of the launch is row row0 + i of every operand (RebaseEwProgram): the rows run are
  // [row0, row0 + rows). Scratch operands: each chunk of rows runs a copy of the program whose
  // scratch operands point at a row buffer of its own, with ld 0 (every row reuses it, whatever
  // its number).
  const int64_t scratch = EwScratchWidth(program, count);
  if (scratch == 0) {
    ParallelFor(rows, row_work, [&](int64_t begin, int64_t end) {
      internal::RunProgramRows(program, count, row0 + begin, row0 + end);
    });
    return absl::OkStatus();
  }
  ParallelFor(rows, row_work, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> row;
    thread_local std::vector<EwInstr> local;
    row.resize(static_cast<size_t>(scratch));
    local.assign(program, program + count);
    for (EwInstr& in : local) {
      for (EwArg* arg : {&in.dst, &in.a, &in.b}) {
        if (arg->scratch >= 0) *arg = {row.data() + arg->scratch, 0, -1};
      }
    }
    internal::RunProgramRows(local.data(), count, row0 + begin, row0 + end);
  });
  return absl::OkStatus();
}

absl::Status Fill(float* dst, int64_t n, float value) {
  if (n < 0 || (n > 0 && dst == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Fill: ", n, " elements", dst == nullptr ? " into null" : ""));
  }
  ParallelFor(n, 1, [&](int64_t begin, int64_t end) { std::fill(dst + begin, dst + end, value); });
  return absl::OkStatus();
}

}  // namespace cavs::ops::cpu
