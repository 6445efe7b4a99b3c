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
#include "scheduler/engine_compile.h"
#include "scheduler/engine_record.h"
#include "scheduler/row_support.h"

namespace cavs::scheduler {

using internal::Batch;
using internal::Command;
using internal::Compiled;
using internal::ProgramSchedule;
using internal::Recorder;
using internal::Step;
using internal::View;
using vertex::Node;
using vertex::OpClass;
using vertex::OpKind;

struct Engine::Compiled : internal::Compiled {};

namespace {

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

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
  static_cast<internal::Compiled&>(*e->compiled_) =
      internal::Compile(e->function_, e->kernels_->ElementwiseScratch());
  return e;
}

namespace {

// One part of the plan's upload: `bytes` from `src`, at `at` in the upload.
struct UploadPart {
  const void* src;
  int64_t at, bytes;
};

// Fills the host side of the plan's upload (`bytes` in all): each part at its offset, in the
// backend's pinned staging buffer where it has one, else in `fallback` (kept across batches: no
// page faults per step).
absl::StatusOr<char*> Stage(core::Backend& backend, int64_t bytes,
                            const std::vector<UploadPart>& parts, std::vector<char>* fallback) {
  CAVS_ASSIGN_OR_RETURN(void* pinned, backend.HostStaging(bytes));
  char* staging = static_cast<char*>(pinned);
  if (staging == nullptr) {
    if (static_cast<int64_t>(fallback->size()) < bytes) fallback->resize(bytes);
    staging = fallback->data();
  }
  for (const UploadPart& p : parts) {
    if (p.bytes > 0) std::memcpy(staging + p.at, p.src, p.bytes);
  }
  return staging;
}

// Runs the recorded commands, telling `timer` (if any) where each phase begins.
absl::Status Replay(const Batch& b, const std::array<size_t, kNumPhases>& phase_at,
                    PhaseTimer* timer) {
  size_t next = 0;
  for (int p = static_cast<int>(Phase::kBeforeRounds); p <= static_cast<int>(Phase::kEnd); ++p) {
    if (timer != nullptr) timer->Begin(static_cast<Phase>(p));
    const size_t end = p == static_cast<int>(Phase::kEnd) ? b.commands.size() : phase_at[p + 1];
    for (; next < end; ++next) {
      const Command& c = b.commands[next];
      CAVS_RETURN_IF_ERROR(b.launches[static_cast<size_t>(c.launch)](c.row0, c.rows));
    }
  }
  return absl::OkStatus();
}

// At most the fused instructions the batch records (sizes the upload before recording): each
// step's program once, and where the device's Elementwise takes no row offset
// (`row_offsets` false), a copy for each round (but one that starts at row 0).
int64_t CountInstrs(const Compiled& c, int64_t rows, int rounds, bool backward, bool row_offsets) {
  int64_t total = 0;
  if (rows == 0) return 0;
  for (int pass = 0; pass < (backward ? 2 : 1); ++pass) {
    const ProgramSchedule& s = pass == 0 ? c.fwd : c.bwd;
    for (int cls = 0; cls < 5; ++cls) {
      const bool copied = cls == static_cast<int>(OpClass::kInRounds) && !row_offsets;
      const int64_t times = copied ? 1 + rounds : 1;
      for (const Step& st : s.steps[cls]) total += st.instrs * times;
    }
  }
  return total;
}

// Where a batch's buffers go: the arena ([rows, width] per buffer, 16-float aligned: first the
// buffers zeroed before each batch, the 2 loss statistics and the rows children push into, so
// that one fill zeroes them all, up to the last row with an empty slot; then the others) and the
// upload region (fused programs | features | the index arrays the run reads, packed (Batch::Ints;
// room for all of them) | predictions, written on the device). Only the bytes up to the last packed
// array are copied.
struct Layout {
  std::vector<int64_t> offsets;  // per buffer: floats into the arena, -1 if not allocated
  int64_t arena_floats = 0, stats_at = 0;
  int64_t zero_floats = 0;  // the arena's first floats, zeroed before each batch
  int64_t instr_count = 0, feat_at = 0, ints_at = 0, pred_at = 0, region_bytes = 0;
};

Layout LayOut(const Compiled& c, const Plan& plan, bool backward, bool row_offsets) {
  Layout l;
  const int64_t n = plan.num_rows;
  l.offsets.assign(c.buffers.size(), -1);
  auto place = [&](size_t i) {
    l.offsets[i] = l.arena_floats;
    l.arena_floats += (n * c.buffers[i].width + 15) / 16 * 16;
  };
  auto place_all = [&](bool zero) {
    for (size_t i = 0; i < c.buffers.size(); ++i) {
      const internal::Buffer& buf = c.buffers[i];
      if ((buf.backward_only && !backward) || buf.features || buf.unused || buf.zero != zero ||
          static_cast<int>(i) == c.pushed_rows) {
        continue;
      }
      place(i);
    }
  };
  place_all(true);
  l.stats_at = l.arena_floats;
  l.arena_floats += 16;
  l.zero_floats = l.arena_floats;
  if (c.pushed_rows >= 0) {  // last of the zeroed buffers: only its rows with an empty slot
    place(c.pushed_rows);
    const int64_t rows = plan.unique_parents ? plan.slots_full_from : n;
    l.zero_floats += rows * c.buffers[c.pushed_rows].width;
  }
  place_all(false);
  l.instr_count = CountInstrs(c, n, plan.num_rounds, backward, row_offsets);
  auto aligned = [](int64_t bytes) { return (bytes + 63) / 64 * 64; };
  l.feat_at = aligned(l.instr_count * static_cast<int64_t>(sizeof(ops::EwInstr)));
  l.ints_at = aligned(l.feat_at + static_cast<int64_t>(plan.features.size()) * 4);
  l.pred_at = aligned(l.ints_at + static_cast<int64_t>(plan.ints.size()) * 4);
  l.region_bytes = l.pred_at + n * 4;
  return l;
}

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

namespace {

// fn(), or ResourceExhausted where it ran out of host memory: a batch too large for the host
// (a million-vertex chain records its programs per round) is an error the caller can report,
// not an abort from an uncaught std::bad_alloc.
template <typename Fn>
auto HostMemoryOrError(const char* what, Fn fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": out of host memory"));
  }
}

}  // namespace

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

namespace {

// A batch's device memory: the arena of its buffers and the upload region (Layout).
struct BatchMemory {
  core::Tensor arena, upload;
  float* arena_floats() const { return arena.data<float>(); }
  char* region() const { return static_cast<char*>(upload.raw_data()); }
};

absl::StatusOr<BatchMemory> Allocate(const Layout& l, core::Device dev) {
  BatchMemory m;
  CAVS_ASSIGN_OR_RETURN(
      m.arena, core::Tensor::Empty(core::Shape({l.arena_floats}), core::DType::kFloat32, dev));
  CAVS_ASSIGN_OR_RETURN(m.upload, core::Tensor::Empty(core::Shape({(l.region_bytes + 3) / 4}),
                                                      core::DType::kFloat32, dev));
  return m;
}

// Points `b` at its memory and its plan, before recording.
void Bind(const Compiled& c, const Layout& l, const BatchMemory& m, const Plan& plan,
          const RunOptions& options, Batch& b) {
  char* up = m.region();
  b.plan = &plan;
  b.options = &options;
  b.ints = reinterpret_cast<const int32_t*>(up + l.ints_at);
  b.pred = reinterpret_cast<int32_t*>(up + l.pred_at);
  b.dev_instrs = reinterpret_cast<const ops::EwInstr*>(up);
  b.instrs.reserve(l.instr_count);
  b.stats = m.arena_floats() + l.stats_at;
  b.sum_written.assign(c.fwd.num_sums, {});
  b.buffer_base.assign(c.buffers.size(), nullptr);
  for (size_t i = 0; i < c.buffers.size(); ++i) {
    if (c.buffers[i].features) b.buffer_base[i] = reinterpret_cast<float*>(up + l.feat_at);
    if (l.offsets[i] >= 0) b.buffer_base[i] = m.arena_floats() + l.offsets[i];
  }
}

// Queues the batch's one upload (every fused program, the features and the index arrays the
// launches read, from pinned memory where the backend has it: then the copy is queued, not
// waited for) and the one fill of the gradient accumulators, the rows children push into and
// the loss statistics (after a fill with NaN where `poison`). Returns the bytes uploaded.
absl::StatusOr<int64_t> Upload(core::Backend& backend, ops::Kernels& kernels, const Batch& b,
                               const Plan& plan, const Layout& l, const BatchMemory& m, bool poison,
                               std::vector<char>* fallback) {
  std::vector<UploadPart> parts = {
      {b.instrs.data(), 0, static_cast<int64_t>(b.instrs.size() * sizeof(ops::EwInstr))},
      {plan.features.data(), l.feat_at, static_cast<int64_t>(plan.features.size()) * 4}};
  for (const Batch::IntsArray& a : b.ints_arrays) {
    parts.push_back({plan.Ints(a.plan_at), l.ints_at + a.packed_at * 4, a.count * 4});
  }
  const int64_t bytes = l.ints_at + b.ints_packed * 4;
  CAVS_ASSIGN_OR_RETURN(char* staging, Stage(backend, bytes, parts, fallback));
  CAVS_RETURN_IF_ERROR(backend.CopyFromHost(m.region(), staging, bytes));
  if (poison) {
    CAVS_RETURN_IF_ERROR(
        kernels.Fill(m.arena_floats(), l.arena_floats, std::numeric_limits<float>::quiet_NaN()));
  }
  CAVS_RETURN_IF_ERROR(kernels.Fill(m.arena_floats(), l.zero_floats, 0.0f));
  return bytes;
}

// Queues the recorded launches: as one unit (a CUDA graph where the kernels run that way) where
// the caller does not wait for it right away and no timer must see each phase begin. Returns
// whether they went as one graph.
absl::StatusOr<bool> Launch(ops::Kernels& kernels, const Batch& b,
                            const std::array<size_t, kNumPhases>& phase_at, PhaseTimer* timer,
                            bool waited) {
  if (timer == nullptr && !waited) {
    return kernels.QueueRecorded([&]() { return Replay(b, phase_at, nullptr); });
  }
  CAVS_RETURN_IF_ERROR(Replay(b, phase_at, timer));
  return false;
}

}  // namespace

absl::StatusOr<PendingRun> Engine::ReadBack(const Batch& b, const Plan& plan,
                                            const RunOptions& options, core::Backend& backend,
                                            int64_t* parts) {
  PendingRun pending;
  pending.result_.labelled = function_.pushes().empty() ? 0 : plan.labelled;  // no loss: none count
  pending.result_.vertices = plan.num_rows;
  std::vector<core::ReadbackPart> results = {{b.stats, 2 * sizeof(float)}};
  if (!function_.pushes().empty()) {
    const View v = compiled_->fwd.views[function_.pushes()[0]];
    pending.keep_outputs_ = options.keep_outputs;
    pending.row_of_uid_ = plan.row_of_uid;
    pending.graph_offsets_ = plan.graph_offsets;
    results.push_back({b.pred, static_cast<size_t>(plan.num_rows) * sizeof(int32_t)});
    if (options.keep_outputs) {
      results.push_back(
          {b.buffer_base[v.buffer], static_cast<size_t>(plan.num_rows * v.ld) * sizeof(float)});
    }
  }
  CAVS_ASSIGN_OR_RETURN(pending.readback_, backend.StartReadback(results));
  *parts = static_cast<int64_t>(results.size());
  return pending;
}

absl::StatusOr<int64_t> Engine::AdoptEmbeddingGradient(const Batch& b, const Plan& plan,
                                                       const RunOptions& options) {
  int64_t syncs = 0;
  if (b.embed_rows.defined() && !plan.unique_tokens.empty()) {
    core::Parameter* table = store_->Find(b.embed_table);
    if (table->grad_rows.empty()) {
      // The usual case (gradients zeroed before the step): adopt the rows where they are,
      // sorted and unique like the store's own; no copy, no wait.
      table->grad_rows = plan.unique_tokens;
      table->grad_values = b.embed_rows;
    } else {  // merges on the host: a round trip through host memory
      CAVS_RETURN_IF_ERROR(store_->AccumulateSparseGrad(table, plan.unique_tokens, b.embed_rows));
      syncs += kernels_->RunsSynchronously() ? 0 : 1;
    }
  }
  if (b.embed_rows.defined() && options.on_gradient_ready &&
      kernels_->CallsHostHooksBetweenLaunches()) {
    CAVS_RETURN_IF_ERROR(options.on_gradient_ready(b.embed_table));
  }
  return syncs;
}

absl::StatusOr<PendingRun> Engine::Queue(const RunOptions& options, const Plan& plan, double t0,
                                         bool waited) {
  const Compiled& c = *compiled_;
  const core::Device dev = options_.device;
  CAVS_RETURN_IF_ERROR(CheckRunOptions(options));
  // Lay out, bind, record.
  const Layout l = LayOut(c, plan, options.backward, kernels_->ElementwiseRowOffset());
  CAVS_ASSIGN_OR_RETURN(const BatchMemory m, Allocate(l, dev));
  Batch b;
  Bind(c, l, m, plan, options, b);
  if (options.folded_projections && !folded_.empty()) {
    b.folded = &folded_;
    b.folded_unread = &c.fold_unread;
  }
  b.fwd_support = Supports(function_.forward(), plan, nullptr);
  if (options.backward) {
    b.bwd_support = Supports(function_.backward(), plan, &b.fwd_support);
    b.bwd_need = Needs(function_, plan);
  }
  std::array<size_t, kNumPhases> phase_at{};
  Recorder rec(function_, c, *store_, *kernels_, b);
  CAVS_RETURN_IF_ERROR(
      internal::RecordSchedule(rec, function_, c, plan, options.backward, phase_at, b));
  CAVS_CHECK(static_cast<int64_t>(b.instrs.size()) <= l.instr_count, "fused program size");
  const double t_plan = Seconds();
  // Upload, launch, read back. The device buffers are freed when this returns, after the
  // read-back's copies in stream order; Finish waits for those.
  PhaseTimer* timer = options_.phase_timer;
  if (timer != nullptr) timer->Begin(Phase::kUpload);
  CAVS_ASSIGN_OR_RETURN(core::Backend * backend, core::GetBackend(dev));
  CAVS_ASSIGN_OR_RETURN(const int64_t upload_bytes, Upload(*backend, *kernels_, b, plan, l, m,
                                                           options_.poison_buffers, &staging_));
  CAVS_ASSIGN_OR_RETURN(const bool as_graph, Launch(*kernels_, b, phase_at, timer, waited));
  const double t_queued = Seconds();
  int64_t readback_parts = 0;
  CAVS_ASSIGN_OR_RETURN(PendingRun pending, ReadBack(b, plan, options, *backend, &readback_parts));
  CAVS_ASSIGN_OR_RETURN(const int64_t syncs, AdoptEmbeddingGradient(b, plan, options));
  stats_.rounds = plan.num_rounds;
  stats_.rows = plan.num_rows;
  stats_.plan_seconds = t_plan - t0;  // t0 is before PlanBatch when Run built the plan
  stats_.queue_seconds = t_queued - t_plan;
  stats_.run_seconds = Seconds() - t0;
  stats_.commands = static_cast<int64_t>(b.commands.size()) + b.gemm_programs;
  stats_.gemm_programs = b.gemm_programs;
  stats_.program_instrs = static_cast<int64_t>(b.instrs.size());
  stats_.forward_round_commands = b.forward_round_commands;
  stats_.backward_round_commands = b.backward_round_commands;
  stats_.gemm_flops = b.gemm_flops;
  stats_.pack_bytes = b.pack_bytes;
  stats_.arena_bytes = l.arena_floats * 4;
  stats_.upload_bytes = upload_bytes;
  stats_.upload_index_bytes = b.ints_packed * 4;
  stats_.zeroed_bytes = l.zero_floats * 4;
  stats_.upload_region_bytes = l.region_bytes;
  stats_.host_syncs = syncs;
  stats_.graph = as_graph;
  // The upload, the fill (and the poison), the launches, each read-back copy and its event.
  stats_.host_launches = kernels_->RunsSynchronously()
                             ? 0
                             : 2 + (options_.poison_buffers ? 1 : 0) +
                                   (as_graph ? 1 : stats_.commands) + readback_parts + 1;
  return pending;
}

}  // namespace cavs::scheduler
