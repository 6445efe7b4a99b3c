#include "ops/cuda/ew_codegen.h"

#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cavs::ops::cuda {

int64_t EwRowsPerBlock(int64_t rows, int64_t width, int num_sms) {
  constexpr int64_t kElementsPerBlock = 4096;
  const int64_t min_blocks = 2 * static_cast<int64_t>(std::max(num_sms, 1));
  return std::min(std::max<int64_t>(1, kElementsPerBlock / std::max<int64_t>(width, 1)),
                  std::max<int64_t>(1, (rows + min_blocks - 1) / min_blocks));
}

std::string EwKernelName(const EwKernelPlan& plan) {
  // zlib's CRC-32 of the key's bytes: the same in every process (absl::Hash is seeded per
  // process, which made every process emit a new source and miss the on-disk kernel cache).
  // Collisions are harmless: kernels are found by the whole key, each in its own library.
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(plan.key.data()),
              static_cast<uInt>(plan.key.size() * sizeof(plan.key[0])));
  return absl::StrFormat("cavs_ew_%08x_%d", static_cast<uint32_t>(crc), plan.key.size());
}

namespace {

// Byte offsets of EwInstr's fields, for loads from the program in device memory.
size_t FieldOffset(int field) {
  return field == 0   ? offsetof(EwInstr, dst)
         : field == 1 ? offsetof(EwInstr, a)
                      : offsetof(EwInstr, b);
}

std::string At(int program_index, size_t offset) {
  return absl::StrCat("program + ", static_cast<size_t>(program_index) * sizeof(EwInstr) + offset);
}

// The expression that reads operand `o` at column `col` ("c" or "0") of the element's row.
std::string Read(const EwPlanOperand& o, const std::string& col, int64_t shared_width) {
  switch (o.source) {
    case EwSource::kMemory:
      return absl::StrCat("p", o.index, "[row * l", o.index, " + ", col, "]");
    case EwSource::kRegister:
      return absl::StrCat("v", o.index);
    case EwSource::kShared:
      return absl::StrCat("shared[r * ", shared_width, " + ", o.col, " + ", col, "]");
    case EwSource::kNone:
      break;
  }
  return "0.0f";
}

// The value of instruction k, from its operands' read expressions: the op's function in
// ops/cuda/ew_math.cuh, which the interpreter calls too (explicitly rounded arithmetic, so that
// values passed in registers round as values passed through memory).
std::string Value(const EwPlanInstr& p, int k, const std::string& a, const std::string& b,
                  const std::string& d) {
  switch (p.op) {
    case EwOp::kCopy:
    case EwOp::kBroadcast:
      return a;
    case EwOp::kZero:
      return "0.0f";
    case EwOp::kAdd:
      return absl::StrCat("ew::Add(", a, ", ", b, ")");
    case EwOp::kSub:
      return absl::StrCat("ew::Sub(", a, ", ", b, ")");
    case EwOp::kMul:
      return absl::StrCat("ew::Mul(", a, ", ", b, ")");
    case EwOp::kAccumulate:
      return absl::StrCat("ew::Add(", d, ", ", a, ")");
    case EwOp::kSigmoid:
      return absl::StrCat("ew::Sigmoid(", a, ")");
    case EwOp::kTanh:
      return absl::StrCat("ew::Tanh(", a, ")");
    case EwOp::kRelu:
      return absl::StrCat("ew::Relu(", a, ")");
    case EwOp::kNeg:
      return absl::StrCat("-", a);
    case EwOp::kScale:
      return absl::StrCat("ew::Scale(", a, ", s", k, ", o", k, ")");
    case EwOp::kDropout:
      return absl::StrCat("ew::Dropout(", a, ", cavs::core::PhiloxUniform(seed", k,
                          ", static_cast<unsigned long long>(static_cast<long long>(uid", k,
                          "[row])) * ", p.width, "ull + c) >= rate", k, ", keep", k, ")");
    case EwOp::kSigmoidGrad:
      return absl::StrCat("ew::SigmoidGrad(", a, ", ", b, ")");
    case EwOp::kTanhGrad:
      return absl::StrCat("ew::TanhGrad(", a, ", ", b, ")");
    case EwOp::kReluGrad:
      return absl::StrCat("ew::ReluGrad(", a, ", ", b, ")");
    case EwOp::kSum:
      break;
  }
  return "0.0f";
}

// Stores v<k> where instruction k's dst keeps it (nothing for a register).
std::string Store(const EwPlanInstr& p, int k, const std::string& col, int64_t shared_width,
                  const std::string& indent) {
  if (p.dst.source == EwSource::kRegister) return "";
  if (p.dst_mapped) {  // row rows[row] of the slot's pointer, none where negative
    return absl::StrCat(indent, "if (ix", k, "[row] >= 0) p", p.dst.index,
                        "[static_cast<long long>(ix", k, "[row]) * l", p.dst.index, " + ", col,
                        "] = v", k, ";\n");
  }
  return absl::StrCat(indent, Read(p.dst, col, shared_width), " = v", k, ";\n");
}

}  // namespace

std::string EmitEwKernelCuda(const EwKernelPlan& plan, const std::string& name) {
  const std::string body = absl::StrCat(name, "_body");
  return absl::StrCat(EmitEwBodyCuda(plan, body, kEwKernelThreads),
                      "extern \"C\" __global__ void __launch_bounds__(", kEwKernelThreads, ")\n",
                      name, "(const unsigned char* __restrict__ program, long long rows, ",
                      "int rows_per_block, long long row0) {\n  ", body,
                      "(program, rows, rows_per_block, blockIdx.x, row0);\n}\n");
}

std::string EmitEwBodyCuda(const EwKernelPlan& plan, const std::string& name, int threads) {
  const int64_t sw = plan.shared_width;
  bool dropout = false;
  for (const EwPlanInstr& p : plan.instrs) dropout |= p.op == EwOp::kDropout;
  std::string s =
      "// Generated by cavs (ops/cuda/ew_codegen.cc): one fused element-wise program.\n";
  if (dropout) s += "#include \"core/philox.h\"\n";
  s += "#include \"ops/cuda/ew_math.cuh\"\nnamespace ew = cavs::ops::cuda::ew;\n";
  // The shared row's declaration, replaceable where the source is compiled for something else
  // than a GPU (tests/ops/ew_emulation_test.cc runs it on host threads).
  if (plan.shared_width > 0) {
    s += "#ifndef CAVS_EW_SHARED\n#define CAVS_EW_SHARED(name) extern __shared__ float "
         "name[]\n#endif\n";
  }
  absl::StrAppend(&s, "__device__ __forceinline__ void ", name,
                  "(const unsigned char* __restrict__ program, long long rows, ",
                  "int rows_per_block, long long block, long long row0) {\n");
  if (sw > 0) s += "  CAVS_EW_SHARED(shared);\n";
  s += "  const long long r0 = block * rows_per_block;\n";
  s += "  const int nr = static_cast<int>(rows - r0 < rows_per_block ? rows - r0 : "
       "rows_per_block);\n";
  // `type const var` = the field at `offset` of program instruction `index`.
  auto load = [&](const char* type, const std::string& var, int index, size_t offset) {
    absl::StrAppend(&s, "  ", type, " const ", var, " = *reinterpret_cast<", type, " const*>(",
                    At(index, offset), ");\n");
  };
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    const EwPlanSlot& slot = plan.slots[i];
    const size_t off = FieldOffset(slot.field);
    load("float*", absl::StrCat("p", i), slot.program_index, off + offsetof(EwArg, ptr));
    load("long long", absl::StrCat("l", i), slot.program_index, off + offsetof(EwArg, ld));
  }
  for (size_t k = 0; k < plan.instrs.size(); ++k) {
    const EwPlanInstr& p = plan.instrs[k];
    const int at = p.program_index;
    if (p.dst_mapped) {
      load("const int*", absl::StrCat("ix", k), at, offsetof(EwInstr, dst) + offsetof(EwArg, rows));
    }
    if (p.a_mapped) {
      load("const int*", absl::StrCat("ixa", k), at, offsetof(EwInstr, a) + offsetof(EwArg, rows));
    }
    if (p.op == EwOp::kScale) {
      load("float", absl::StrCat("s", k), at, offsetof(EwInstr, scalar));
      load("float", absl::StrCat("o", k), at, offsetof(EwInstr, offset));
    } else if (p.op == EwOp::kDropout) {
      load("float", absl::StrCat("rate", k), at, offsetof(EwInstr, scalar));
      absl::StrAppend(&s, "  const float keep", k, " = 1.0f / (1.0f - rate", k, ");\n");
      load("unsigned long long", absl::StrCat("seed", k), at, offsetof(EwInstr, seed));
      load("const int*", absl::StrCat("uid", k), at, offsetof(EwInstr, uids));
    }
  }
  for (size_t g = 0; g < plan.segments.size(); ++g) {
    const EwPlanSegment& seg = plan.segments[g];
    if (g > 0) s += "  __syncthreads();\n";
    if (seg.row_sum) {
      const EwPlanInstr& p = plan.instrs[seg.first];
      absl::StrAppend(
          &s, "  for (int r = threadIdx.x >> 5; r < nr; r += ", threads / 32, ") {\n",
          "    const long long row = row0 + r0 + r;\n", "    float sum = 0.0f;\n",
          "    for (int c = threadIdx.x & 31; c < ", seg.width, "; c += 32) sum = ew::Add(sum, ",
          Read(p.a, "c", sw), ");\n", "    for (int off = 16; off > 0; off >>= 1) {\n",
          "      sum = ew::Add(sum, __shfl_xor_sync(0xffffffffu, sum, off));\n", "    }\n",
          "    if ((threadIdx.x & 31) == 0) {\n", "      const float v", seg.first, " = sum;\n",
          Store(p, seg.first, "0", sw, "      "), "    }\n", "  }\n");
      continue;
    }
    absl::StrAppend(&s, "  for (int e = threadIdx.x; e < nr * ", seg.width, "; e += ", threads,
                    ") {\n", "    const int r = e / ", seg.width, ";\n",
                    "    const int c = e - r * ", seg.width, ";\n",
                    "    const long long row = row0 + r0 + r;\n");
    s += "    (void)row;\n";  // unused when every operand is in a register or shared memory
    // Every operand not taken from a register is read at the top of the element's body: no
    // earlier write of the segment overlaps it (the plan would have forwarded it, or split the
    // segment), so the loads may all be in flight before the first store.
    auto name = [](const char* prefix, int k) { return absl::StrCat(prefix, k); };
    for (int k = seg.first; k < seg.end; ++k) {
      const EwPlanInstr& p = plan.instrs[k];
      const std::pair<const EwPlanOperand*, const char*> reads[] = {
          {&p.a, "a"}, {&p.b, "b"}, {&p.dst_in, "d"}};
      for (const auto& [o, prefix] : reads) {
        if (o->source == EwSource::kNone || o->source == EwSource::kRegister) continue;
        const bool col0 = o == &p.a && p.op == EwOp::kBroadcast;
        if (o == &p.a && p.a_mapped) {  // row rows[row] of the slot's pointer, 0 where negative
          absl::StrAppend(&s, "    const float ", name(prefix, k), " = ixa", k, "[row] >= 0 ? p",
                          o->index, "[static_cast<long long>(ixa", k, "[row]) * l", o->index,
                          " + c] : 0.0f;\n");
          continue;
        }
        absl::StrAppend(&s, "    const float ", name(prefix, k), " = ",
                        Read(*o, col0 ? "0" : "c", sw), ";\n");
      }
    }
    for (int k = seg.first; k < seg.end; ++k) {
      const EwPlanInstr& p = plan.instrs[k];
      auto operand = [&](const EwPlanOperand& o, const char* prefix) -> std::string {
        if (o.source == EwSource::kNone) return "";
        return o.source == EwSource::kRegister ? absl::StrCat("v", o.index) : name(prefix, k);
      };
      absl::StrAppend(&s, "    const float v", k, " = ",
                      Value(p, k, operand(p.a, "a"), operand(p.b, "b"), operand(p.dst_in, "d")),
                      ";\n", Store(p, k, "c", sw, "    "));
    }
    s += "  }\n";
  }
  s += "}\n";
  return s;
}

}  // namespace cavs::ops::cuda
