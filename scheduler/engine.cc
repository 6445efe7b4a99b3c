#include "scheduler/engine.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "scheduler/engine_batch.h"
#include "scheduler/engine_compile.h"
#include "scheduler/engine_record.h"
#include "scheduler/row_support.h"

namespace cavs::scheduler {

using internal::Batch;
using internal::Command;
using internal::Compiled;
using internal::HostMemoryOrError;
using internal::ProgramSchedule;
using internal::Recorder;
using internal::Seconds;
using internal::Step;
using internal::View;
using vertex::Node;
using vertex::OpClass;
using vertex::OpKind;

Engine::~Engine() = default;

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const vertex::Function* f,
                                                       core::ParameterStore* store,
                                                       EngineOptions options) {
  if (f == nullptr || store == nullptr) {
    return absl::InvalidArgumentError(f == nullptr ? "Engine::Create: no vertex function"
                                                   : "Engine::Create: no parameter store");
  }
  if (store->device() != options.device) {
    return absl::InvalidArgumentError(
        absl::StrCat("the parameter store lives on ", store->device().DebugString(),
                     " but the engine runs on ", options.device.DebugString()));
  }
  CAVS_RETURN_IF_ERROR(CreateParameters(*f, store));
  std::unique_ptr<Engine> e(new Engine());
  // A copy: a Function is a value that callers share freely, and one made in a helper may be
  // gone before the engine's first Run.
  e->function_ = *f;
  e->store_ = store;
  e->options_ = options;
  CAVS_ASSIGN_OR_RETURN(e->kernels_, ops::GetKernels(options.device));
  if (options.kernels.has_value()) CAVS_RETURN_IF_ERROR(ops::SetKernelOptions(*options.kernels));
  e->compiled_ = std::make_unique<Compiled>();
  internal::CompileOptions passes = options.passes;
  passes.scratch_rows = passes.scratch_rows && e->kernels_->ElementwiseScratch();
  static_cast<internal::Compiled&>(*e->compiled_) = internal::Compile(e->function_, passes);
  return e;
}

namespace {
// Fills `result`'s predictions (and push 0's rows, if kept) per graph, in each graph's vertex
// order, from the read-back rows: `pred` [n] and `all` [n, ld] (push 0 at column `col`).
void CollectOutputs(const int32_t* pred, const float* all, int64_t ld, int64_t col, int64_t classes,
                    const std::vector<int64_t>& row_of_uid,
                    const std::vector<int64_t>& graph_offsets, RunResult* result) {
  // Each vector sized once (one allocation a graph): on a GPU this runs on the host between
  // batches.
  const size_t graphs = graph_offsets.size() - 1;
  result->predictions.resize(graphs);
  if (all != nullptr) result->outputs.resize(graphs);
  for (size_t gi = 0; gi < graphs; ++gi) {
    const int64_t first = graph_offsets[gi], count = graph_offsets[gi + 1] - first;
    std::vector<int32_t>& p = result->predictions[gi];
    p.resize(count);
    for (int64_t v = 0; v < count; ++v) p[v] = pred[row_of_uid[first + v]];
    if (all == nullptr) continue;
    std::vector<float>& o = result->outputs[gi];
    o.resize(count * classes);
    for (int64_t v = 0; v < count; ++v) {
      const float* out = all + row_of_uid[first + v] * ld + col;
      std::copy(out, out + classes, o.begin() + v * classes);
    }
  }
}

}  // namespace

int Engine::ForwardLaunchesPerRound() const {
  return internal::CountLaunches(function_.forward(), compiled_->fwd, OpClass::kInRounds,
                                 kernels_->FusesGemmThenElementwise(), kernels_->GemmAddsBias());
}
int Engine::BackwardLaunchesPerRound() const {
  return internal::CountLaunches(function_.backward(), compiled_->bwd, OpClass::kInRounds,
                                 kernels_->FusesGemmThenElementwise(), kernels_->GemmAddsBias());
}

int Engine::foldable_projections() const {
  const vertex::Program& p = function_.forward();
  int count = 0;
  for (int id = 0; id < static_cast<int>(p.nodes.size()); ++id) {
    count += internal::ProjectedEmbed(p, id) >= 0 ? 1 : 0;
  }
  return count;
}

void Engine::ClearFoldedProjections() { folded_.clear(); }

internal::Folded Engine::Folded() const { return {&folded_, &compiled_->fold_unread}; }

absl::Status Engine::FoldInputProjections() {
  ClearFoldedProjections();  // a failure below leaves none (not the last ones, now stale)
  CAVS_RETURN_IF_ERROR(CheckParameters(function_, *store_, /*backward=*/false));
  const vertex::Program& p = function_.forward();
  std::vector<core::Tensor> folded(p.nodes.size());
  for (int id = 0; id < static_cast<int>(p.nodes.size()); ++id) {
    const int embed = internal::ProjectedEmbed(p, id);
    if (embed < 0) continue;
    const vertex::Node& n = p.nodes[id];
    const vertex::Node& table = p.nodes[p.nodes[embed].inputs[0]];
    const vertex::Node& w = p.nodes[n.inputs[1]];
    const int64_t vocab = table.param_shape[0], dim = table.param_shape[1];
    // The bias of the sum this term starts (x W + h U + b), as Recorder::MatMul adds it.
    const internal::GemmWrite gw = compiled_->fwd.gemm[id];
    const float* bias = nullptr;
    if (gw.sum >= 0 && gw.bias >= 0) {
      bias = static_cast<const float*>(store_->Find(p.nodes[gw.bias].name)->value.raw_data());
    }
    CAVS_ASSIGN_OR_RETURN(
        core::Tensor t,
        core::Tensor::Empty(core::Shape({vocab, n.width}), core::DType::kFloat32, options_.device));
    const ops::Kernels::GemmCall g{
        false,
        n.transpose,
        vocab,
        n.width,
        dim,
        1.0f,
        static_cast<const float*>(store_->Find(table.name)->value.raw_data()),
        dim,
        static_cast<const float*>(store_->Find(w.name)->value.raw_data()),
        w.param_shape[1],
        0.0f,
        t.data<float>(),
        n.width,
        bias};
    CAVS_RETURN_IF_ERROR(kernels_->Gemm(g));  // GemmBias where there is a bias
    folded[id] = std::move(t);
  }
  folded_ = std::move(folded);
  return absl::OkStatus();
}

absl::StatusOr<Plan> Engine::PlanBatch(const std::vector<Graph>& graphs) const {
  return HostMemoryOrError("planning a batch", [&]() -> absl::StatusOr<Plan> {
    CAVS_RETURN_IF_ERROR(ValidateBatch(function_, graphs));
    return BuildPlan(function_, graphs, options_.plan);
  });
}

PendingRun::PendingRun() = default;
PendingRun::PendingRun(PendingRun&&) noexcept = default;
PendingRun& PendingRun::operator=(PendingRun&&) noexcept = default;
PendingRun::~PendingRun() = default;

absl::StatusOr<RunResult> Engine::Run(const std::vector<Graph>& graphs, const RunOptions& options) {
  const double t0 = Seconds();
  CAVS_ASSIGN_OR_RETURN(Plan plan, PlanBatch(graphs));
  const double built = Seconds() - t0;
  CAVS_ASSIGN_OR_RETURN(PendingRun pending, HostMemoryOrError("recording a batch", [&]() {
                          return Queue(options, plan, t0, /*waited=*/true);
                        }));
  stats_.build_seconds = built;
  return FinishRun(std::move(pending), t0);
}

absl::StatusOr<RunResult> Engine::Run(const std::vector<Graph>& graphs, const RunOptions& options,
                                      const Plan& plan) {
  CAVS_RETURN_IF_ERROR(CheckPlanOf(graphs, plan));
  return Run(plan, options);
}

absl::StatusOr<RunResult> Engine::Run(const Plan& plan, const RunOptions& options) {
  const double t0 = Seconds();
  CAVS_ASSIGN_OR_RETURN(PendingRun pending, QueuePlanned(plan, options, /*waited=*/true));
  return FinishRun(std::move(pending), t0);
}

absl::StatusOr<RunResult> Engine::FinishRun(PendingRun pending, double t0) {
  CAVS_ASSIGN_OR_RETURN(RunResult result, Finish(std::move(pending)));
  stats_.run_seconds = Seconds() - t0;
  stats_.host_syncs += kernels_->RunsSynchronously() ? 0 : 1;  // Finish's wait
  return result;
}

absl::StatusOr<PendingRun> Engine::Submit(const std::vector<Graph>& graphs,
                                          const RunOptions& options, const Plan& plan) {
  CAVS_RETURN_IF_ERROR(CheckPlanOf(graphs, plan));
  return Submit(plan, options);
}

absl::StatusOr<PendingRun> Engine::Submit(const Plan& plan, const RunOptions& options) {
  return QueuePlanned(plan, options, /*waited=*/false);
}

absl::StatusOr<PendingRun> Engine::QueuePlanned(const Plan& plan, const RunOptions& options,
                                                bool waited) {
  stats_.build_seconds = 0.0;
  return HostMemoryOrError("recording a batch",
                           [&]() { return Queue(options, plan, Seconds(), waited); });
}

absl::Status Engine::CheckPlanOf(const std::vector<Graph>& graphs, const Plan& plan) {
  if (plan.graph_offsets.size() != graphs.size() + 1) {
    return absl::InvalidArgumentError(absl::StrCat("a plan of ", plan.graph_offsets.size() - 1,
                                                   " graphs for a batch of ", graphs.size()));
  }
  // A plan of other graphs would run and report its own graphs' results (or read past these
  // graphs' data); the vertex counts tell most of them apart at the cost of one pass.
  for (size_t i = 0; i < graphs.size(); ++i) {
    const int64_t planned = plan.graph_offsets[i + 1] - plan.graph_offsets[i];
    if (planned != graphs[i].num_vertices()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sample ", i, ": the plan has ", planned, " vertices but the graph has ",
                       graphs[i].num_vertices(), " (a plan of other graphs)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RunResult> Engine::Finish(PendingRun pending) {
  if (pending.readback_ == nullptr) {
    return absl::FailedPreconditionError("Engine::Finish of a PendingRun not from Submit");
  }
  CAVS_RETURN_IF_ERROR(pending.readback_->Wait());
  RunResult result = std::move(pending.result_);
  const float* stats = static_cast<const float*>(pending.readback_->part(0));
  result.loss_sum = stats[0];
  result.correct = static_cast<int64_t>(stats[1] + 0.5f);
  if (!function_.pushes().empty()) {
    const int push0 = function_.pushes()[0];
    const View v = compiled_->fwd.views[push0];
    CollectOutputs(
        static_cast<const int32_t*>(pending.readback_->part(1)),
        pending.keep_outputs_ ? static_cast<const float*>(pending.readback_->part(2)) : nullptr,
        v.ld, v.col, function_.forward().nodes[push0].width, pending.row_of_uid_,
        pending.graph_offsets_, &result);
  }
  return result;
}

absl::Status Engine::CheckRunOptions(const RunOptions& options) const {
  CAVS_RETURN_IF_ERROR(CheckParameters(function_, *store_, options.backward));
  if (options.backward && function_.pushes().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("function '", function_.name(),
                     "' pushes nothing, so there is no loss to run backward from"));
  }
  if (options.folded_projections) {
    if (options.training || options.backward) {
      return absl::InvalidArgumentError(
          "RunOptions::folded_projections is for inference: training and backward must be off");
    }
    if (folded_.empty() && foldable_projections() > 0) {
      return absl::FailedPreconditionError(
          "RunOptions::folded_projections before Engine::FoldInputProjections");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PendingRun> Engine::ReadBack(const Batch& b, const Plan& plan,
                                            const RunOptions& options, core::Backend& backend,
                                            int64_t* parts) {
  PendingRun pending;
  pending.result_.labelled = function_.pushes().empty() ? 0 : plan.labelled;  // no loss: none count
  pending.result_.vertices = plan.num_rows;
  std::vector<core::ReadbackPart> results = {{b.in.stats, 2 * sizeof(float)}};
  if (!function_.pushes().empty()) {
    const View v = compiled_->fwd.views[function_.pushes()[0]];
    pending.keep_outputs_ = options.keep_outputs;
    pending.row_of_uid_ = plan.row_of_uid;
    pending.graph_offsets_ = plan.graph_offsets;
    results.push_back({b.in.pred, static_cast<size_t>(plan.num_rows) * sizeof(int32_t)});
    if (options.keep_outputs) {
      results.push_back(
          {b.in.buffer_base[v.buffer], static_cast<size_t>(plan.num_rows * v.ld) * sizeof(float)});
    }
  }
  CAVS_ASSIGN_OR_RETURN(pending.readback_, backend.StartReadback(results));
  *parts = static_cast<int64_t>(results.size());
  return pending;
}

absl::StatusOr<int64_t> Engine::AdoptEmbeddingGradient(const Batch& b, const Plan& plan,
                                                       const RunOptions& options) {
  int64_t syncs = 0;
  if (b.out.embed_rows.defined() && !plan.unique_tokens.empty()) {
    core::Parameter* table = store_->Find(b.out.embed_table);
    if (table->grad_rows.empty()) {
      // The usual case (gradients zeroed before the step): adopt the rows where they are,
      // sorted and unique like the store's own; no copy, no wait.
      table->grad_rows = plan.unique_tokens;
      table->grad_values = b.out.embed_rows;
    } else {  // merges on the host: a round trip through host memory
      CAVS_RETURN_IF_ERROR(
          store_->AccumulateSparseGrad(table, plan.unique_tokens, b.out.embed_rows));
      syncs += kernels_->RunsSynchronously() ? 0 : 1;
    }
  }
  if (b.out.embed_rows.defined() && options.on_gradient_ready &&
      kernels_->CallsHostHooksBetweenLaunches()) {
    CAVS_RETURN_IF_ERROR(options.on_gradient_ready(b.out.embed_table));
  }
  return syncs;
}

absl::StatusOr<PendingRun> Engine::Queue(const RunOptions& options, const Plan& plan, double t0,
                                         bool waited) {
  CAVS_RETURN_IF_ERROR(CheckRunOptions(options));
  CAVS_ASSIGN_OR_RETURN(const internal::RecordedBatch r,
                        internal::RecordBatch(function_, *compiled_, *store_, *kernels_,
                                              options_.device, plan, options, Folded()));
  const Batch& b = *r.batch;
  const internal::Layout& l = r.layout;
  const double t_plan = Seconds();
  // Upload, launch, read back. The device buffers are freed when this returns, after the
  // read-back's copies in stream order; Finish waits for those.
  PhaseTimer* timer = options_.phase_timer;
  if (timer != nullptr) timer->Begin(Phase::kUpload);
  CAVS_ASSIGN_OR_RETURN(core::Backend * backend, core::GetBackend(options_.device));
  CAVS_ASSIGN_OR_RETURN(
      const int64_t upload_bytes,
      internal::Upload(*backend, *kernels_, r, options_.poison_buffers, &staging_));
  CAVS_ASSIGN_OR_RETURN(const bool as_graph, internal::QueueLaunches(*kernels_, r, timer, waited));
  const double t_queued = Seconds();
  int64_t readback_parts = 0;
  CAVS_ASSIGN_OR_RETURN(PendingRun pending, ReadBack(b, plan, options, *backend, &readback_parts));
  CAVS_ASSIGN_OR_RETURN(const int64_t syncs, AdoptEmbeddingGradient(b, plan, options));
  stats_.rounds = plan.num_rounds;
  stats_.rows = plan.num_rows;
  stats_.plan_seconds = t_plan - t0;  // t0 is before PlanBatch when Run built the plan
  stats_.queue_seconds = t_queued - t_plan;
  stats_.run_seconds = Seconds() - t0;
  stats_.commands = static_cast<int64_t>(b.out.commands.size()) + b.counts.gemm_programs;
  stats_.gemm_programs = b.counts.gemm_programs;
  stats_.program_instrs = static_cast<int64_t>(b.out.instrs.size());
  stats_.forward_round_commands = b.counts.forward_round_commands;
  stats_.backward_round_commands = b.counts.backward_round_commands;
  stats_.gemm_flops = b.counts.gemm_flops;
  stats_.pack_bytes = b.counts.pack_bytes;
  stats_.arena_bytes = l.arena_floats * 4;
  stats_.upload_bytes = upload_bytes;
  stats_.upload_index_bytes = b.out.ints_packed * 4;
  stats_.zeroed_bytes = l.zero_floats * 4;
  stats_.upload_region_bytes = l.region_bytes;
  stats_.host_syncs = syncs;
  stats_.joins = 0;
  stats_.joined_graphs = 0;
  stats_.join_seconds = 0.0;
  stats_.graph = as_graph;
  // The upload, the fill (and the poison), the launches, each read-back copy and its event.
  stats_.host_launches = kernels_->RunsSynchronously()
                             ? 0
                             : 2 + (options_.poison_buffers ? 1 : 0) +
                                   (as_graph ? 1 : stats_.commands) + readback_parts + 1;
  return pending;
}

}  // namespace cavs::scheduler
