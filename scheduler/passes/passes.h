// The engine's optimization passes over a function's compiled schedule (engine_compile.h), one
// file each in this folder. Compile runs them in order; each but the bookkeeping ones is behind
// a CompileOptions switch, so that the engine can run without it (EngineOptions::passes) and a
// test can compare both with the reference executor (tests/scheduler/passes_test.cc).
//
//   alias_concats       Concat inputs produced in its columns (forward and backward)
//   fold_gemm_sums      x W + h U + b computed in place by its GEMMs (forward)
//   scratch_rows        a fused step's temporaries in a scratch row (devices that have one)
//   early_weight_grads  the output layer's weight gradients before the backward rounds
//   push_pull           children push fields into their parents' rows, pull gradients back
//   folded_projections  which embeddings a run with folded input projections skips (a run-time
//                       option, RunOptions::folded_projections; the tables are the engine's)
//   packed_weights      at record time: a weight packed once per batch for the device's packed
//                       GEMM (Recorder::PackedWeight; a kernel option, KernelOptions::cpu)
// The record-time side of fold_gemm_sums (which rows a sum's terms wrote) is in its file too;
// that of push_pull and folded_projections is in the recorder's fused steps and MatMul.
// Internal to the scheduler.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "scheduler/engine_compile.h"
#include "scheduler/row_support.h"
#include "vertex/function.h"

namespace cavs::scheduler::internal {

// Leaves and views: nodes that compute nothing of their own.
bool IsLeafOrView(vertex::OpKind k);
// A new buffer of `width` floats a row; its index.
int NewBuffer(Compiled& c, int64_t width, bool backward_only, bool zero = false);

// Concat inputs that can be produced straight into the Concat's columns get views there;
// the Concat then costs nothing. Outer Concats first, so nested ones compose.
void AliasConcats(Compiled& c, const vertex::Program& p, ProgramSchedule& s, bool backward);

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
std::vector<GemmSum> FoldGemmSums(Compiled& c, const vertex::Function& f, ProgramSchedule& s);
// Once the steps are cut: each sum's terms in execution order (op class, then step). A term's
// call splits its rows into pieces by what earlier terms wrote: at most (terms before it + 1)
// pieces to start with the bias, and for the last term at most (terms + 1) gaps to fill; its
// step reserves that many fill instructions (unused ones stay as padding).
void OrderGemmSums(const std::vector<GemmSum>& sums, ProgramSchedule& s);
// At record time (Recorder::MatMul, Batch::rec.sum_written): splits `rows` by the sorted,
// disjoint intervals `written`, (piece, written?) in row order; and adds `rows` to them,
// merging where they touch. Recorder::FillRows, the fill of a sum's rows no term wrote, is
// defined with them (fold_gemm_sums.cc).
std::vector<std::pair<Interval, bool>> SplitByWritten(Interval rows,
                                                      const std::vector<Interval>& written);
void AddWritten(Interval rows, std::vector<Interval>& written);

// Nodes of fused steps whose value lives and dies within the step become per-row temporaries:
// one instruction, a buffer of their own that no other node (of either program) views, and
// every reader in the same step; not pushed or scattered.
void AssignScratch(Compiled& c, const vertex::Function& f, bool backward);

// Weight-gradient sinks whose inputs are final before the backward rounds (every input is a
// before-rounds node: the output layer's gradient comes from d loss alone) run before the rounds,
// so that the distributed trainer can send them while the rounds run. Embedding gradients stay
// at the end (their rows are assembled after the batch).
void SplitEarlyWeightGrads(const vertex::Program& p, ProgramSchedule& s);

// A forward Gather in the rounds whose field's producer is in a fused step of the rounds is
// pushed by that step (Step::pushes): the child writes its value into its parent's gathered row
// as soon as it computes it, instead of a gather launch in the parent's round. Rows without a
// child in a slot must then read zero: the gathered buffer is zeroed before each batch.
void MarkPushes(Compiled& c, const vertex::Function& f);
// The buffers of the pushed Gathers become column ranges of one buffer (Compiled::pushed_rows),
// so that the rows a batch must zero (those with an empty slot: the leaves, in round 0 on trees)
// are one range, at the end of the arena's zeroed region (engine.cc, LayOut). A row with a
// child in every slot is written by the pushes before it is read.
void MergePushedRows(Compiled& c);
// A backward GatherGrad in the rounds is pulled by the first step of the rounds that reads its
// field's gradient (the kScatterGrad node, or a view of it such as a Slice where a Concat's
// backward splits it: any input in the field's gradient buffer), if that step is fused: the
// child takes its gradient from its parent's row in its own round, before anything uses it.
void MarkPulls(Compiled& c, const vertex::Function& f);

}  // namespace cavs::scheduler::internal
