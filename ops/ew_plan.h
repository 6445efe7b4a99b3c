// The fused element-wise program's plan: the device-neutral IR of a generated kernel.
//
// Kernels::Elementwise gets a program of EwInstr with the round's pointers. The interpreter
// kernel (ops/cuda/cuda_elementwise.cu) walks it instruction by instruction with a block-wide
// barrier between any two, so each thread may read what another wrote. A generated kernel
// instead runs, in one loop over the block's elements, every instruction of a *segment*: a run
// of instructions of one width in which each element depends only on the same element of
// earlier instructions. A value a later instruction of the segment reads back is taken from the
// register that computed it, and a scratch temporary (EwArg::scratch) read only that way never
// leaves a register; one read across columns or segments lives in a shared-memory row. A
// Tree-LSTM round's forward and backward programs are one segment each: no barrier at all.
//
// PlanEwKernel analyses one program for its row count: which instructions share a segment, where
// each operand's value comes from, which pointers the kernel loads. The result does not depend
// on the pointers' values, only on how they relate (equal, overlapping, disjoint), so every
// round of a vertex function's schedule gets the same plan and the same `key`: the kernel is
// generated (ops/cuda/ew_codegen.h) and compiled once per distinct key (ops/cuda/cuda_fused.h)
// and reused.
//
// Overlaps are decided on the concrete pointers and row count: two operands are the same
// element only when they have the same pointer and row stride (or there is one row); any other
// overlap between a write and another access ends the segment. Rows never depend on each other
// (Kernels::Elementwise's contract), so only a row's own columns matter.
//
// Nothing here is CUDA: the CPU kernels check shape promises with EwShapeChecker and run plans
// with RunEwPlanOnHost (KernelOptions::cpu.ew_as_planned), in every configuration.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "ops/kernels.h"

namespace cavs::ops {

// Where an operand's value is read from, or where a result is kept, in a generated kernel.
enum class EwSource : uint8_t {
  kNone,      // not used by the op
  kMemory,    // global memory through pointer slot `index`: element (row, c) at p[row * ld + c]
  kRegister,  // the value instruction `index` computed for the same element, in this thread
  kShared,    // the block's shared scratch row of the element's row, columns from `col`
};

struct EwPlanOperand {
  EwSource source = EwSource::kNone;
  int32_t index = -1;  // kMemory: slot; kRegister: instruction (in EwKernelPlan::instrs)
  int64_t col = 0;     // kShared: first column of the shared row (packed, see shared_width)
};

struct EwPlanInstr {
  int32_t program_index = 0;  // the instruction's index in the program (its fields are read there)
  EwOp op = EwOp::kCopy;
  int64_t width = 0;
  int32_t segment = 0;
  bool dst_mapped = false;  // dst is row-mapped (EwArg::rows): stored at row rows[row]
  bool a_mapped = false;    // a is row-mapped: read from row rows[row] (0 where negative)
  // dst: kMemory (stored), kShared (stored in the shared row) or kRegister (index = itself: kept
  // in a register only). dst_in: kAccumulate's read of dst.
  EwPlanOperand dst, dst_in, a, b;
};

// A pointer (and row stride) the kernel loads once: operand `field` of program instruction
// `program_index` (0 dst, 1 a, 2 b). Operands with equal pointer and stride share a slot.
struct EwPlanSlot {
  int32_t program_index = 0;
  int32_t field = 0;
};

struct EwPlanSegment {
  int32_t first = 0, end = 0;  // instrs [first, end)
  int64_t width = 0;           // the width every instruction of the segment iterates over
  bool row_sum = false;        // a kSum: one warp per row, lanes over columns
};

struct EwKernelPlan {
  std::vector<EwPlanInstr> instrs;  // the program's instructions of nonzero width, in order
  std::vector<EwPlanSlot> slots;
  std::vector<EwPlanSegment> segments;
  // Floats of shared scratch per row (0: none): the scratch columns read or written through
  // the shared row, packed (register-resident temporaries take no room).
  int64_t shared_width = 0;
  int64_t max_width = 0;  // the widest segment (sets the launch's rows per block)
  int registers = 0;      // scratch results kept in registers only
  // Everything the generated source depends on; equal keys generate equal kernels.
  std::vector<int64_t> key;
};

// The plan for `count` instructions over `rows` rows (a program that passed
// cpu::ValidateProgram). Never fails on a valid program.
[[nodiscard]] EwKernelPlan PlanEwKernel(const EwInstr* program, int count, int64_t rows);

// What a caller's shape (Kernels::Elementwise) promises is fixed, and can be checked in linear
// time: the ops, widths, row strides and scratch columns, and whether there is one row.
void EwFingerprint(const EwInstr* program, int count, int64_t rows, std::vector<int64_t>* out);
bool EwFingerprintMatches(const std::vector<int64_t>& fingerprint, const EwInstr* program,
                          int count, int64_t rows);

// The error of a broken shape promise: two programs under one shape that plan differently.
[[nodiscard]] absl::Status BrokenShapeError(uint64_t shape);

// Checks callers' shape promises: the first program of each shape is remembered (fingerprint
// and plan key); a later one with the same fingerprint must plan to the same key. The CPU
// kernels run it with KernelOptions::verify_ew_shapes (the tests), so the engine's shapes are
// checked on every machine. Thread-safe.
class EwShapeChecker {
 public:
  [[nodiscard]] absl::Status Check(const EwInstr* program, int count, int64_t rows, uint64_t shape);

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::pair<std::vector<int64_t>, std::vector<int64_t>>> seen_
      ABSL_GUARDED_BY(mu_);
};

// Runs `plan` (from PlanEwKernel(program, count, rows)) over `program` on the host, as the
// generated kernel would, one element after another in reverse order within each segment (the
// order least like the row-by-row one): the operands not taken from a register are read at the
// top of the element's body, values forwarded in per-element registers, scratch read across
// columns or segments kept in a row of its own. Float pointers must be host memory. The CPU
// kernels run programs this way with KernelOptions::cpu.ew_as_planned, so the engine suite
// checks the plans of real programs on machines without a GPU.
void RunEwPlanOnHost(const EwKernelPlan& plan, const EwInstr* program, int64_t rows);

// One element of `in` on the host, in scalar float arithmetic (RunEwPlanOnHost's): a and b its
// operands, d the dst's old value (kAccumulate), `row` for a dropout's uid, c the column.
// REQUIRES: in.op != kSum.
float EwApplyOnHost(const EwInstr& in, float a, float b, float d, int64_t row, int64_t c);

}  // namespace cavs::ops
