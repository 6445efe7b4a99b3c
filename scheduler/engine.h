// Engine: the batched executor. Runs a vertex function over a batch of graphs, forward, loss
// and backward, with Cavs's lazy batching, on any device that has ops::Kernels.
//
// Once per function (Create): every per-vertex node of the forward and backward programs is
// given a view — a buffer of [num_rows, width] floats in the batch's arena, a column range of
// another node's buffer (a Slice; an input of a Concat, which is then free), a forward value
// (in the backward), or a gradient accumulator — and each op class is cut into steps: single
// ops (GEMM, gather, reduce) and maximal groups of element-wise ops that one fused kernel runs.
//
// Per batch (Run): build the Plan; record the whole schedule as a command list with final
// device pointers (pre-ops over all rows, recurrent ops round by round, post-ops, the loss, the
// backward in reverse rounds, then one GEMM per weight gradient over all rows); upload the
// plan's index arrays, features and fused-kernel programs in one transfer (queued from the
// backend's pinned HostStaging where it has one); replay; copy the results back. PlanBatch +
// Run(plan, options) split off the device-free part, so the next batch can be planned
// on another thread; Submit + Finish split off the wait for the results, so the next batch can
// be queued while the device runs this one.
//
// The parameter store must live on the engine's device. Gradients are accumulated into it
// (dense += ; embedding tables get row-sparse gradients: a table with no gradient rows yet takes
// the batch's device rows as they are, else they are merged on the host); callers zero them
// between steps.
// Thread-safety: one Run (or Submit, or Finish) at a time per Engine.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/backend.h"
#include "core/parameter.h"
#include "core/tensor.h"
#include "ops/kernel_options.h"
#include "ops/kernels.h"
#include "scheduler/executor_common.h"
#include "scheduler/plan.h"
#include "vertex/function.h"

namespace cavs::scheduler {

namespace internal {
struct Batch;   // one batch's memory and recorded launches (engine_record.h)
struct Folded;  // the folded tables a run gathers (engine_batch.h)
}  // namespace internal

// The phases of a Run's replay, in the order they are queued.
enum class Phase {
  kUpload,        // the plan's one host-to-device copy, zeroing the accumulators
  kBeforeRounds,  // forward ops over all rows before the recurrence
  kRounds,        // forward rounds
  kAfterRounds,   // forward ops after the recurrence, the loss
  kBackward,      // backward: before, rounds (reversed), after
  kWeightGrad,    // one GEMM (or reduction) per weight gradient over all rows
  kEnd,           // everything is queued; the results are read back after this
};
inline constexpr int kNumPhases = 7;

// An optional observer of the replay: Begin(p) is called on the Run's thread just before the
// work of phase p is queued (kEnd: after the last launch), so a GPU benchmark can record a
// device event there. Device-agnostic: implementations live with the caller.
class PhaseTimer {
 public:
  virtual ~PhaseTimer() = default;
  virtual void Begin(Phase phase) = 0;
};

struct EngineOptions {
  core::Device device = core::Device::Cpu();
  PlanOptions plan;
  // Not owned; may be null. A timer needs the launches one by one: with one, a batch is never
  // queued as one graph (Submit, KernelOptions::cuda.graphs).
  PhaseTimer* phase_timer = nullptr;
  // How the device's kernels run (ops/kernel_options.h). Set: Create applies it with
  // ops::SetKernelOptions, for the whole process (a device's kernels are shared by every engine
  // on it; the last set wins). Unset: the kernels run as the process last set them (the
  // defaults, unless a binary's environment override or another engine changed them).
  std::optional<ops::KernelOptions> kernels;
  // A check for tests: each batch's buffers are filled with NaN before its ops run (one more
  // Fill), so that an op reading rows no op wrote (the rows a GEMM skips as known zero or
  // unread, say) turns the results NaN instead of reading what the last batch left there.
  bool poison_buffers = false;
  // The engine's optimization passes (scheduler/passes/passes.h), all on by default. A test and
  // benchmark hook: a pass turned off leaves its work to the plain path (the same values up to
  // rounding, more launches, copies or memory); the tests check each pass that way against the
  // reference executor. scratch_rows applies where the device's fused kernel has a scratch row.
  struct Passes {
    bool alias_concats = true;
    bool fold_gemm_sums = true;
    bool scratch_rows = true;
    bool early_weight_grads = true;
    bool push_pull = true;
  } passes;
};

// What the last Run did, for benchmarks and logs.
struct EngineStats {
  int rounds = 0;
  int64_t rows = 0;
  double plan_seconds = 0.0;   // BuildPlan + recording the schedule (host)
  double build_seconds = 0.0;  // of which validation + BuildPlan (0 with a prebuilt plan)
  double queue_seconds = 0.0;  // host time to queue the upload and every launch
  double run_seconds = 0.0;    // the whole Run, including the plan
  int64_t commands = 0;        // kernel launches (a GEMM with its program counted as two)
  // Fused-program instructions recorded: each step's program once where the device's
  // Elementwise takes a row offset (ops::Kernels::ElementwiseRowOffset), else also a copy per
  // round, so that only there they grow with the rounds.
  int64_t program_instrs = 0;
  int64_t gemm_programs = 0;  // GEMMs recorded with the fused program after them, one call
                              // (ops::Kernels::GemmThenElementwise; one launch where joined)
  // Of the commands, those in the forward rounds and in the backward rounds: the launches
  // per round as recorded (ForwardLaunchesPerRound counts a round's steps, this what ran).
  int64_t forward_round_commands = 0, backward_round_commands = 0;
  int64_t gemm_flops = 0;    // 2·m·n·k over the batch's GEMMs (rows known zero are skipped)
  int64_t arena_bytes = 0;   // the batch's buffers (the plan's memory estimate)
  int64_t pack_bytes = 0;    // weights packed for the device's packed GEMM (if it has one)
  int64_t upload_bytes = 0;  // copied to the device: programs, features, the index arrays read
  int64_t upload_index_bytes = 0;  // of which the plan's index arrays
  int64_t zeroed_bytes = 0;        // the one fill before the batch (accumulators, pushed-into rows)
  int64_t upload_region_bytes = 0;  // the device region it lands in, predictions included
  int64_t host_syncs = 0;           // waits for the device (read-backs) in the last Run
  // Whether the batch's launches were queued as one graph (Kernels::QueueRecorded: Submit on
  // CUDA with KernelOptions::cuda.graphs and no phase_timer), and the calls the host made to queue
  // the batch's device work: the upload, the fills, the launches (one graph, or each kernel) and
  // the read-back's copies and event. CPU: 0 (the host computes; nothing is queued).
  bool graph = false;
  int64_t host_launches = 0;
  // Engine::RunJoining: the times graphs joined the run, how many, and the host time the joins
  // took (planning, recording and uploading the grown batch, carrying its rows over).
  int joins = 0;
  int64_t joined_graphs = 0;
  double join_seconds = 0.0;
};

// Where Engine::RunJoining asks for graphs to join: after `rounds_done` of the batch's `rounds`
// forward rounds (0 < rounds_done < rounds), the batch `rows` vertices large (a join's host
// time grows with them: EngineStats::join_seconds).
struct JoinPoint {
  int rounds_done = 0;
  int rounds = 0;
  int64_t rows = 0;
};
// The graphs that join there (each as PlanBatch would accept it), in the order their results
// are to come; none: the run goes on as it is.
using JoinSource = std::function<std::vector<Graph>(const JoinPoint&)>;

// A batch whose work Engine::Submit queued and whose results Engine::Finish reads. Movable;
// destroying one unfinished waits for its read-back.
class PendingRun {
 public:
  PendingRun();
  PendingRun(PendingRun&&) noexcept;
  PendingRun& operator=(PendingRun&&) noexcept;
  ~PendingRun();

 private:
  friend class Engine;
  std::unique_ptr<core::Readback> readback_;  // stats, then predictions, then push 0's rows
  RunResult result_;                          // what the host knows without the device
  bool keep_outputs_ = false;
  std::vector<int64_t> row_of_uid_, graph_offsets_;  // the plan's (it need not outlive Submit)
};

class Engine {
 public:
  // Checks that the store holds `f`'s parameters on options.device (creating them if absent).
  // The engine keeps its own copy of `f`; `store` must outlive it. Every run checks that the
  // store still holds the parameters as created (shapes, device, gradients): an error naming
  // the parameter, not a read out of bounds, if the caller replaced one.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Engine>> Create(const vertex::Function* f,
                                                                      core::ParameterStore* store,
                                                                      EngineOptions options = {});
  ~Engine();

  // Forward, loss and (if options.backward) backward over `graphs`. Validates the batch first.
  [[nodiscard]] absl::StatusOr<RunResult> Run(const std::vector<Graph>& graphs,
                                              const RunOptions& options);
  // Validates `graphs` and builds their Plan: the part of Run that needs no device. Const and
  // safe to call from another thread while Run executes, so a caller can plan the next batch
  // while the device runs this one.
  [[nodiscard]] absl::StatusOr<Plan> PlanBatch(const std::vector<Graph>& graphs) const;
  // Run with `plan` from PlanBatch: the plan holds everything the batch's run needs of its
  // graphs, so they need not be kept.
  [[nodiscard]] absl::StatusOr<RunResult> Run(const Plan& plan, const RunOptions& options);
  // The same, after checking that `plan` is PlanBatch(graphs)'s (a plan whose graphs' vertex
  // counts differ from `graphs`' is an InvalidArgument naming the sample).
  [[nodiscard]] absl::StatusOr<RunResult> Run(const std::vector<Graph>& graphs,
                                              const RunOptions& options, const Plan& plan);
  // Run in two halves. Submit queues the batch's work and the copy of its results to the host
  // and returns without waiting for the device where the backend can (CUDA; the CPU computes
  // everything inside Submit); Finish waits for the copy and returns the results. Between the
  // two the caller may queue more work, an optimizer step or the next batch's Submit, so that
  // the host queues batch i+1 while the device runs batch i (after Run's wait the device idles
  // until the host has queued the next batch's first launch). Submit queues the batch as one
  // CUDA graph where the kernels are set to (KernelOptions::cuda.graphs, the default; Run never
  // does: it would wait for the whole capture before the device starts). Otherwise
  // Run(plan, options) is Finish(Submit(plan, options)). Gradients are accumulated into the
  // store by the queued work, as with Run. stats() after Submit describe that batch
  // (host_syncs without the read-back's wait). REQUIRES: Finish in the order of Submit; one
  // Submit at a time. The overload with graphs checks the plan against them first, as Run's.
  [[nodiscard]] absl::StatusOr<PendingRun> Submit(const Plan& plan, const RunOptions& options);
  [[nodiscard]] absl::StatusOr<PendingRun> Submit(const std::vector<Graph>& graphs,
                                                  const RunOptions& options, const Plan& plan);
  [[nodiscard]] absl::StatusOr<RunResult> Finish(PendingRun pending);

  // Inference in which graphs join the running batch (continuous batching for trees): after
  // each forward round but the last the engine asks `join` for graphs; those it gives start in
  // the next round (their leaves run beside the batch's next round, each vertex in round
  // start + its height), and the batch runs on with them, its rounds extended where a joined
  // graph is higher than the rounds left. The results are those of `graphs` and then of every
  // joined graph, in the order joined; a graph's are those Run gives it, bit for bit with
  // RunOptions::batch_invariant (else up to GEMM rounding: rows computed beside others).
  // How: each join plans the grown batch (its rounds before the join point hold only the rows
  // that ran), records and uploads it, runs its ops before the rounds over the rows from the
  // join point on, and copies the running batch's rows over (the rounds that ran, and the
  // rows of later rounds their pushes wrote into). Needs inference (training and backward
  // off), the height policy, and a device whose kernels run synchronously (the CPU: the host
  // decides between rounds; elsewhere Unimplemented). `plan` is PlanBatch(graphs)'s.
  [[nodiscard]] absl::StatusOr<RunResult> RunJoining(const std::vector<Graph>& graphs,
                                                     const Plan& plan, const RunOptions& options,
                                                     const JoinSource& join);
  // OK where this engine can run RunJoining (its device, its policy, and no sum computed in
  // place with terms both before and after the rounds in its function), else why not.
  [[nodiscard]] absl::Status JoinSupported() const;

  // Inference with the embeddings' input projections precomputed. For every MatMul of an
  // embedding's rows by a weight (x W, the gates' input term of the Tree-LSTM and the LSTM;
  // through a dropout too, a copy in inference), makes the table's product E op(W), plus the
  // bias where x W starts a sum with one (x W + h U + b), from the parameters as they are now:
  // [vocab, out] floats each, on the engine's device. Runs with RunOptions::folded_projections
  // then gather those rows by token instead of multiplying the embedded rows: on SST the
  // leaves' x W, about half of an inference batch's FLOPs, becomes a row copy, and the
  // embedding's own gather goes where nothing else reads its rows. Only in batches whose token
  // rows all have a token (Plan::tokens_dense: trees with tokens on the leaves and chains
  // under the height policy; the depth policy or a capped agenda may interleave them with
  // other rows, and then the GEMMs run as usual). Results equal the plain run's up to
  // rounding. The tables do not follow the parameters: call it again after they change (a
  // training step, a checkpoint load); a fold that fails leaves none.
  [[nodiscard]] absl::Status FoldInputProjections();
  // Frees the tables (runs with RunOptions::folded_projections then fail until the next fold).
  void ClearFoldedProjections();
  // The MatMuls FoldInputProjections folds (0 where the function has none).
  int foldable_projections() const;

  const EngineStats& stats() const { return stats_; }
  // Kernel launches one round makes, forward and backward (per the compiled steps, for a batch
  // whose vertices have one parent each: a DAG batch adds the gathers its pushes replace). Where
  // the device runs a GEMM and the program after it as one launch (ops::Kernels::
  // FusesGemmThenElementwise), they count once: on CUDA that holds for the rounds whose GEMM
  // takes the small GEMM (at most one block per multiprocessor), the others take one more.
  int ForwardLaunchesPerRound() const;
  int BackwardLaunchesPerRound() const;

  struct Compiled;  // the per-function schedule (engine.cc)

 private:
  Engine() = default;
  // Submit's work; t0: when the Run began (before PlanBatch where Run built the plan). `waited`:
  // the caller waits for the results right away (Run), so the launches go one by one: the
  // device starts on the first while the host queues the rest, where a graph would have it wait
  // for the whole capture.
  absl::StatusOr<PendingRun> Queue(const RunOptions& options, const Plan& plan, double t0,
                                   bool waited);
  // Queue's stages besides those in engine.cc's anonymous namespace: the checks of `options`
  // against the function and the store; the read-back of the results (the count of its copies
  // in *parts); the embedding gradient's rows handed to the store (returns the waits it took).
  absl::Status CheckRunOptions(const RunOptions& options) const;
  absl::StatusOr<PendingRun> ReadBack(const internal::Batch& b, const Plan& plan,
                                      const RunOptions& options, core::Backend& backend,
                                      int64_t* parts);
  absl::StatusOr<int64_t> AdoptEmbeddingGradient(const internal::Batch& b, const Plan& plan,
                                                 const RunOptions& options);
  // Queue of a plan made before (build_seconds 0), its host memory errors as Statuses.
  absl::StatusOr<PendingRun> QueuePlanned(const Plan& plan, const RunOptions& options, bool waited);
  // Whether `plan` can be PlanBatch(graphs)'s: as many graphs, as many vertices in each.
  static absl::Status CheckPlanOf(const std::vector<Graph>& graphs, const Plan& plan);
  // The folded tables a run with RunOptions::folded_projections gathers.
  internal::Folded Folded() const;
  // RunJoining's work, its host memory errors as Statuses.
  absl::StatusOr<RunResult> Joining(const std::vector<Graph>& graphs, const Plan& plan,
                                    const RunOptions& options, const JoinSource& join);
  // Finish, and the stats of a whole Run begun at t0.
  absl::StatusOr<RunResult> FinishRun(PendingRun pending, double t0);
  vertex::Function function_;  // the engine's own copy
  core::ParameterStore* store_ = nullptr;
  EngineOptions options_;
  ops::Kernels* kernels_ = nullptr;
  std::unique_ptr<Compiled> compiled_;
  EngineStats stats_;
  std::vector<char> staging_;  // host side of the per-batch upload
  // Per forward node: E op(W) (+ bias) where FoldInputProjections folded it, else undefined.
  std::vector<core::Tensor> folded_;
};

}  // namespace cavs::scheduler
