// The recording half of Engine::Run: a batch's memory (Batch) and the Recorder that turns the
// compiled schedule (engine_compile.h) into a command list of launches with final device
// pointers, round by round. Internal to the scheduler; see engine.h for the design.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/parameter.h"
#include "core/tensor.h"
#include "ops/kernels.h"
#include "scheduler/engine.h"
#include "scheduler/engine_compile.h"
#include "scheduler/executor_common.h"
#include "scheduler/plan.h"
#include "scheduler/row_support.h"
#include "vertex/function.h"

namespace cavs::scheduler::internal {

// A launch recorded once and run by each command that names it, over the command's rows: its
// operands are those of row 0, moved to row0 when it runs (pointers by row0 rows, index arrays
// by row0 entries, fused programs through Kernels::Elementwise's row0). The rounds that run a
// step share its launches, so that a round records commands (24 bytes each), not launches.
using Launch = std::function<absl::Status(int64_t row0, int64_t rows)>;
struct Command {
  int32_t launch = 0;  // index into Batch::out.launches
  int64_t row0 = 0, rows = 0;
};

// What a shared launch launches: the step or node it is for, which of its launches, that
// launch's own key (a fused program's shape, a GEMM's bias and beta) and the launch it joins
// (a program's GEMM), if any.
struct LaunchKey {
  const void* of = nullptr;
  int what = 0;
  uint64_t detail = 0;
  int64_t joins = -1;
  bool operator==(const LaunchKey& o) const {
    return of == o.of && what == o.what && detail == o.detail && joins == o.joins;
  }
  template <typename H>
  friend H AbslHashValue(H h, const LaunchKey& k) {
    return H::combine(std::move(h), k.of, k.what, k.detail, k.joins);
  }
};

// One batch's memory and recorded launches, in four parts by who writes them: `in`, by Bind
// and the engine before recording (the recorder reads it); `out`, the command list the recorder
// writes and the later stages read (Upload stages its programs and index arrays, Replay runs
// its commands, ReadBack and the embedding gradient's hand-over read its results' places);
// `rec`, the recorder's own state between its calls; `counts`, what it recorded, for
// EngineStats.
struct Batch {
  struct In {
    const Plan* plan = nullptr;
    const RunOptions* options = nullptr;
    std::vector<float*> buffer_base;           // per buffer: row 0 (nullptr if not allocated)
    const int32_t* ints = nullptr;             // where the packed index arrays land on the device
    const ops::EwInstr* dev_instrs = nullptr;  // where the fused programs land on the device
    float* stats = nullptr;                    // 2 floats: loss sum, correct
    int32_t* pred = nullptr;                   // argmax per row
    // Per forward node, its folded input projection (Engine::FoldInputProjections), where the
    // run uses them (RunOptions::folded_projections); else null.
    const std::vector<core::Tensor>* folded = nullptr;
    const std::vector<char>* folded_unread = nullptr;  // Embeds not gathered then
    // Row intervals [lo, hi) outside which a node is known to be zero (support), and outside
    // which nobody reads its value (need, backward only). GEMMs run only where both hold.
    std::vector<Interval> fwd_support, bwd_support, bwd_need;
  } in;

  // The plan's index arrays that the recorded launches read, each uploaded once from `ints` on,
  // back to back in the order first asked for (Ints). Only these are uploaded: an inference
  // batch of trees reads neither its child rows (children push into their parents' rows), its
  // uids (no dropout) nor its token slots (no embedding gradient).
  struct IntsArray {
    int64_t plan_at = 0, count = 0, packed_at = 0;  // offsets and count in ints
  };
  struct Out {
    // Host copy of every fused program: each step's written for row 0, once (Rec::program_at),
    // and where the device's Elementwise takes no row offset, a copy moved to each launch's rows.
    std::vector<ops::EwInstr> instrs;
    std::vector<IntsArray> ints_arrays;
    int64_t ints_packed = 0;  // ints packed so far
    std::vector<Launch> launches;
    std::vector<Command> commands;  // what the batch runs, in order
    // Per forward round r: its first command; round_at[num_rounds]: the end of the last.
    std::vector<size_t> round_at;
    std::vector<core::Tensor> scratch;  // argmax buffers, the embedding gradient rows
    core::Tensor embed_rows;            // [unique tokens, dim] gradient of the table
    std::string embed_table;
  } out;

  struct Rec {
    absl::flat_hash_map<const void*, size_t> program_at;  // step -> its program in out.instrs
    absl::flat_hash_map<LaunchKey, int32_t> shared;       // the launches commands share
    // Weights packed for the device's packed GEMM, by (value, transposed).
    absl::flat_hash_map<std::pair<const float*, bool>, const float*> packed;
    // Per folded sum: the rows some term has written so far (sorted, disjoint).
    std::vector<std::vector<Interval>> sum_written;
    absl::flat_hash_map<int, int32_t*> argmax_of;      // forward GatherReduce(max) -> argmax
    absl::flat_hash_map<std::string, int> sinks_left;  // parameter -> weight-gradient steps to go
  } rec;

  struct Counts {
    int64_t gemm_flops = 0;     // of the recorded GEMMs
    int64_t gemm_programs = 0;  // commands that are a GEMM and a program (GemmThenElementwise)
    // Commands recorded in the forward and in the backward rounds (a GEMM with its program
    // counted as two), as EngineStats::commands.
    int64_t forward_round_commands = 0, backward_round_commands = 0;
    int64_t pack_bytes = 0;  // of the weights packed
  } counts;

  // The device copy of the plan's index array at `plan_offset` (an array's start in plan.ints),
  // packed into out.ints_arrays at its first use.
  const int32_t* Ints(int64_t plan_offset);
};

// Records one batch's launches into a Batch.
class Recorder {
 public:
  Recorder(const vertex::Function& f, const Compiled& c, core::ParameterStore& store,
           ops::Kernels& k, Batch& b)
      : f_(f), c_(c), store_(store), k_(k), b_(b) {}

  absl::Status Program(bool backward, vertex::OpClass cls, int64_t r0, int64_t r1);
  void Loss();
  // Records weight-gradient steps over all rows and, where the caller asked and the device is
  // the CPU, the "gradient ready" hook after each parameter's last one.
  absl::Status WeightGrads(const std::vector<Step>& steps, int64_t n);
  // Records the progress hook (CPU only, if the caller gave one).
  void Progress();

 private:
  // Which launch of a step or node a shared launch is (LaunchKey::what).
  enum What : int {
    kProgram,      // a fused step's program; detail: its shape
    kGemmProgram,  // the GEMM before it (joins) and the program; detail: its shape
    kGemm,         // detail: 1 with the bias, + 2 with beta 1
    kPackedGemm,   // as kGemm
    kFoldedRows,   // rows of a folded projection gathered by token
    kZeroRows,
    kFillRows,  // a sum's rows filled with its bias (or zeros)
    kCopies,    // a run of Gathers or GatherGrads in one multi-copy launch
    kEmbed,
    kReduce,
    kReduceGrad,
    kWeightGrad,
    kBiasGrad,
    kScaleGrad,
    kProgress,
  };

  float* Ptr(const ProgramSchedule& s, int node, int64_t row) const {
    const View& v = s.views[node];
    return b_.in.buffer_base[v.buffer] + row * v.ld + v.col;
  }
  int64_t Ld(const ProgramSchedule& s, int node) const { return s.views[node].ld; }
  float* ParamValue(const std::string& name) const {
    return static_cast<float*>(store_.Find(name)->value.raw_data());
  }
  float* ParamGrad(const std::string& name) const {
    return static_cast<float*>(store_.Find(name)->grad.raw_data());
  }
  const int32_t* Ints(int64_t offset) const { return b_.Ints(offset); }
  // Whether this run gathers folded projections where it can (RunOptions::folded_projections,
  // a batch whose token rows all have a token): then the Embeds and Dropouts FoldedEmbedsUnread
  // marks are not run.
  bool FoldedRun() const { return b_.in.folded_unread != nullptr && b_.in.plan->tokens_dense; }
  // Per row: the row of its parent through child slot `slot` (-1: none there).
  const int32_t* ParentRows(int64_t slot) const {
    return Ints(b_.in.plan->parent_of_slot[static_cast<size_t>(slot)]);
  }
  ops::EwArg Arg(const vertex::Program& p, const ProgramSchedule& s, int node) const {
    if (p.nodes[node].is_static()) return {ParamValue(p.nodes[node].name), 0};
    if (s.scratch_col[node] >= 0) return {nullptr, 0, s.scratch_col[node]};
    return {Ptr(s, node, 0), Ld(s, node)};
  }

  // Records a command that runs `launch`, a launch of its own, over rows [row0, row0 + rows).
  void Record(Launch launch, int64_t row0, int64_t rows);
  // Records a command that runs the launch shared under `key` (made by make() the first time)
  // over rows [row0, row0 + rows); returns that launch's index.
  template <typename Make>
  int32_t RecordShared(const LaunchKey& key, Make make, int64_t row0, int64_t rows) {
    auto [it, fresh] = b_.rec.shared.try_emplace(key, static_cast<int32_t>(b_.out.launches.size()));
    if (fresh) b_.out.launches.push_back(make());
    b_.out.commands.push_back({it->second, row0, rows});
    return it->second;
  }

  // Step `st`'s fused program written for row 0 (recorded at its first use): its first
  // instruction in b_.out.instrs.
  size_t ProgramOf(const vertex::Program& p, const ProgramSchedule& s, const Step& st);
  void Fused(const vertex::Program& p, const ProgramSchedule& s, const Step& st, int64_t r0,
             int64_t r1);
  // Records an Elementwise launch of `count` instructions from b_.out.instrs[first] (written for
  // row 0) over rows [r0, r0 + rows), shared under `key`; `shape` as Kernels::Elementwise takes
  // it (0: none); after the GEMM of `gemm` (launch and template, as last_gemm_ holds them) in
  // one call, if given (Kernels::GemmThenElementwise). Where the device's Elementwise takes no
  // row offset, a copy of the program moved to r0 is recorded instead, for this command only.
  struct LastGemm;
  void LaunchInstrs(LaunchKey key, size_t first, int count, int64_t r0, int64_t rows,
                    uint64_t shape, const LastGemm* gemm = nullptr);
  // The weight `w` (op(w): [k, n]) packed for the device's packed GEMM, packed by a launch
  // recorded at its first use in the batch; nullptr where the device has no packed GEMM.
  absl::StatusOr<const float*> PackedWeight(const float* w, bool trans, int64_t k, int64_t n,
                                            int64_t ld);
  // The copy a forward Gather or a backward GatherGrad makes, for rows from row 0.
  ops::RowCopy GatherCopy(const ProgramSchedule& s, int id) const;
  ops::RowCopy GatherGradCopy(const vertex::Program& p, const ProgramSchedule& s, int id) const;
  // Records steps[i..] that are Gathers (or GatherGrads) as one multi-copy launch; returns
  // the index of the first step it did not take.
  size_t Coalesced(const vertex::Program& p, const ProgramSchedule& s,
                   const std::vector<Step>& steps, size_t i, int64_t r0, int64_t r1);
  void EmitInstr(const vertex::Program& p, const ProgramSchedule& s, int id);
  absl::Status Single(bool backward, const vertex::Program& p, const ProgramSchedule& s, int id,
                      int64_t r0, int64_t r1);
  // A MatMul step's GEMM over rows [r0, r1), only where its input can be nonzero and its output
  // is read; a term of a folded sum also keeps the sum's written rows (GemmWrite) and uses the
  // step's fill program.
  absl::Status MatMul(bool backward, const vertex::Program& p, const ProgramSchedule& s,
                      const Step& st, int64_t r0, int64_t r1);
  // Records the fill of rows [row0, row0 + rows) of MatMul step `st`'s output (`dst0` its row 0,
  // stride ld) with `row` broadcast, or zeros where row is null.
  void FillRows(const Step& st, float* dst0, int64_t ld, int64_t width, const float* row,
                int64_t row0, int64_t rows);
  absl::Status Sink(const vertex::Program& p, const ProgramSchedule& s, int id, int64_t r0,
                    int64_t r1);

  const vertex::Function& f_;
  const Compiled& c_;
  core::ParameterStore& store_;
  ops::Kernels& k_;
  Batch& b_;
  // The last plain GEMM that MatMul recorded: a fused step recorded right after it over the
  // same rows in the same Program call joins its launch (GemmThenElementwise).
  struct LastGemm {
    size_t command = 0;
    int32_t launch = 0;
    ops::Kernels::GemmCall g;  // for rows from row 0 (a and c at row 0, m unset)
    int64_t row0 = 0, rows = 0;
  };
  std::optional<LastGemm> last_gemm_;
};

// Launches per call of a class's steps: runs of Gathers (GatherGrads) share one launch per
// kMaxRowCopies, as Recorder::Program records them; with `gemm_then_program` (the device's
// Kernels::FusesGemmThenElementwise), a fused step right after a MatMul step shares its launch;
// without `gemm_adds_bias` (Kernels::GemmAddsBias), a MatMul that is a term of a folded sum
// with a bias takes one more: the fill of the bias before it, where no earlier term wrote its
// rows (a tree's internal vertices, every round); where one did (x W + b for every row of the
// LSTM), an upper bound.
int CountLaunches(const vertex::Program& p, const ProgramSchedule& s, vertex::OpClass cls,
                  bool gemm_then_program, bool gemm_adds_bias);

// Where a batch's recording starts: the default, the whole batch. A batch that continues one
// whose rounds before `round` ran (Engine::RunJoining; its rows before `row`, the first of
// `round`, carried over) records the forward ops before the rounds over rows [row, n) only and
// the rounds from `round` on; `after_support`, where set, replaces Batch::in.fwd_support from the
// ops after the rounds on (they run over every row: supports over all of them).
struct RecordFrom {
  int round = 0;
  int64_t row = 0;
  const std::vector<Interval>* after_support = nullptr;
};

// Records the whole schedule; phase_at[p] is the index of phase p's first launch, and
// Batch::out.round_at where each forward round's commands begin.
absl::Status RecordSchedule(Recorder& rec, const vertex::Function& f, const Compiled& c,
                            const Plan& plan, bool backward,
                            std::array<size_t, kNumPhases>& phase_at, Batch& b,
                            const RecordFrom& from = {});

}  // namespace cavs::scheduler::internal
