// The per-function part of the Engine: views (where each node's rows live) and steps (what
// runs, op by op or as a fused element-wise group, in each op class). Internal to the
// scheduler; see engine.h for the design.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "scheduler/engine.h"
#include "vertex/function.h"

namespace cavs::scheduler::internal {

// Where a per-vertex node's rows live: element (row, c) = buffer[row * ld + col + c].
struct View {
  int buffer = -1;  // -1: no rows (parameters, sinks)
  int64_t col = 0;
  int64_t ld = 0;
};

struct Buffer {
  int64_t width = 0;
  bool zero = false;  // zeroed before each batch (gradient accumulators, rows children push into)
  bool backward_only = false;  // not allocated in inference
  bool features = false;       // the pulled features, uploaded with the plan
  bool unused = false;         // its node became a per-row temporary: not allocated
};

// A MatMul that is a term of a folded sum (FoldGemmSums): the terms write the sum's rows in
// execution order. Per batch the engine tracks which rows some term has written: a term
// accumulates (GEMM beta = 1) onto those, and starts the others with the sum's bias (folded
// into the GEMM where the device has a packed GEMM, else broadcast first) or overwrites them;
// the last term fills the rows no term wrote with the bias (or zeros).
struct GemmWrite {
  int sum = -1;       // index of the sum (ProgramSchedule::num_sums), -1: a plain GEMM
  int bias = -1;      // static node of the sum's bias row, or -1
  bool last = false;  // the sum's last term in execution order; Step::instrs reserves fills
};

// A push (forward): the fused step computing `producer` copies it into the parents' rows of
// the Gather node `gather`. A pull (backward): the fused step accumulates the gradient the
// GatherGrad node `grad` sends, from the parent's row, into its field's gradient buffer.
struct Push {
  int gather = -1;
  int producer = -1;
};
struct Pull {
  int grad = -1;
  int field_grad = -1;  // the buffer (Compiled::field_grad of the field)
};

struct Step {
  bool fused = false;      // a group of element-wise nodes run by one Elementwise call
  std::vector<int> nodes;  // one node unless fused
  int instrs = 0;          // instructions per call: fused (with pushes), or a sum term's fills
  // Forward Gathers whose field this fused step computes: where every vertex of the batch has
  // one parent (Plan::unique_parents), the step also copies the field into its parents'
  // gathered rows (a row-mapped copy, EwArg::rows) and the Gather's launch is skipped; else the
  // push is an empty instruction. Counted in `instrs`.
  std::vector<Push> pushes;
  // Backward GatherGrads whose field's gradient this fused step is the first in its round to
  // read: where parents are unique the step first pulls each child's gradient from its
  // parent's row (a row-mapped read, accumulated into the field's gradient rows) and the
  // GatherGrad's scatter-add launch is skipped; else empty instructions. In `instrs`.
  std::vector<Pull> pulls;
  // Kernels::Elementwise's `shape` for a fused step's launches, unique in the process: every
  // round reads and writes the same views at other rows, so one shape per step, with one-row
  // launches apart (row strides stop mattering there) and training apart (dropout is a copy in
  // inference, so that switching does not plan the step again) and a folded run's program
  // with an emptied Dropout apart (Recorder::EmitInstr). Index: 4 * (emptied) + 2 * (one row)
  // + training.
  std::array<uint64_t, 8> shapes{};
};

struct ProgramSchedule {
  std::vector<View> views;
  // Per node: the index in Function::scatter() of the field it names (a Gather, GatherReduce,
  // their gradients, a ScatterGrad), or -1; found once here instead of by name in every round.
  std::vector<int> field;
  std::vector<char> no_op;                 // views of other nodes, leaves, free Concats
  std::array<std::vector<Step>, 5> steps;  // by vertex::OpClass
  std::vector<GemmWrite> gemm;             // per node; MatMuls that are terms of a folded sum
  int num_sums = 0;
  // Per node: >= 0 when the node is a per-row temporary of its fused step, at this column of
  // the step's scratch row (EwArg::scratch); its buffer is then unused.
  std::vector<int64_t> scratch_col;
  // Per node: a forward Gather its children push (Step::pushes), or a backward GatherGrad they
  // pull (Step::pulls): its copy launch is skipped where parents are unique.
  std::vector<char> replaced;
  // Backward only: the weight-gradient steps whose inputs are all final before the backward
  // rounds (the output layer's), moved out of steps[kWeightGrad] to run before the rounds.
  std::vector<Step> early_weight_grads;
};

struct Compiled {
  std::vector<Buffer> buffers;
  ProgramSchedule fwd, bwd;
  int dlogits = -1;             // buffer of d loss / d push 0
  std::vector<int> field_grad;  // scatter field -> its gradient accumulator buffer
  // The one buffer every pushed Gather's rows live in (MergePushedRows), or -1. Only its rows
  // with an empty slot must start at zero: a batch zeroes its first Plan::slots_full_from rows.
  int pushed_rows = -1;
  // Per forward node: FoldedEmbedsUnread's, the Embeds and Dropouts a folded run skips.
  std::vector<char> fold_unread;
  // For Engine::RunJoining (engine_join.cc). Per buffer: whether something reads it in rows
  // whose round has run (the post-round ops' inputs, the fields parents gather, the pushes the
  // loss and the read-back read), so that a join carries those rows over. And whether a sum
  // computed in place has terms both before and after the rounds, which a join cannot carry
  // (it records the first over the later rows only).
  std::vector<char> read_after_its_round;
  bool sum_across_rounds = false;
};

// The optimization passes Compile runs (scheduler/passes/passes.h): EngineOptions::Passes,
// scratch_rows taken as it is (Engine::Create turns it off where the device's fused kernel keeps
// no scratch row, Kernels::ElementwiseScratch).
using CompileOptions = EngineOptions::Passes;

// Builds views and steps for `f` (forward and backward), with the passes `options` turns on.
Compiled Compile(const vertex::Function& f, const CompileOptions& options = {});

// Instructions the fused step's node emits (Concat: one per input; PadSlice: two; else one).
int InstrCount(const vertex::Node& n);

// The Embed node whose rows MatMul node `id` multiplies by a weight (directly or through a
// Dropout), or -1: the input projections Engine::FoldInputProjections precomputes.
int ProjectedEmbed(const vertex::Program& p, int id);

// Per forward node: 1 for an Embed whose rows nothing reads where its projections are folded:
// every reader is a MatMul by a weight in the pre-ops that starts the rows it writes (a plain
// GEMM, or a sum with no other term in the pre-ops), directly or through a Dropout that only
// such MatMuls read, and neither is a field the parents gather nor a push. A folded run skips
// its gather (the GEMM it feeds is a gather of E op(W)). 1 also for a Dropout of an Embed that
// only such MatMuls read (a folded run empties its instruction).
std::vector<char> FoldedEmbedsUnread(const vertex::Function& f, const ProgramSchedule& s);

}  // namespace cavs::scheduler::internal
