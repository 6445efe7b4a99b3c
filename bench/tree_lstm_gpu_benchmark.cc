// Binary Tree-LSTM on one GPU: the batched engine's trees/s for training (forward + backward +
// Adagrad step) and inference, with where the time goes and how far it is from the floor.
//
// Data: the SST train trees at $CAVS_BENCH_SST (e.g. ../shared/data/sst/train.txt), else the
// bundled synthetic treebank. Embedding 300, hidden 150, fp32; batches 25, 64, 256 (training)
// and 256 (inference).
//
// BM_DeviceCeilings runs first and measures the two ceilings on this device: cuBLAS sgemm at a
// large square shape and at the Tree-LSTM's shape, and HBM bandwidth (a device-to-device copy,
// bytes read + written). The engine benchmarks then report per batch:
//   rounds, kernels_per_round (forward + backward launches of one round, counted from the
//   compiled steps), round_kernels (the same as the rounds recorded them), kernels_per_batch,
//   peak_MiB (the CUDA allocator's peak over the steps, above what the parameters and the
//   optimizer hold) against plan_MiB (the plan's arena + upload), host_syncs per Run,
//   *_ms: each phase's device time, from CUDA events the engine's PhaseTimer hook records
//   (upload, pre-ops, rounds, post-ops + loss, backward, weight gradients, optimizer), and
//   plan_host_ms (validation, BuildPlan and recording, host; build_host_ms the first two),
//   queue_host_ms (host time to queue the upload and every launch: near the device phases'
//   sum means the GPU waits for the host), run_wall_ms (the whole Engine::Run, host clock).
// BM_FusedRound times one Tree-LSTM round's fused element-wise program (hidden 150; forward 12
// instructions, backward 16) alone, as the generated kernel and as the interpreter (its scratch
// temporaries then in a device buffer): device_us per launch from CUDA events over 100 launches
// queued behind a delay kernel (so the device's time alone), host_us per Elementwise call; and
// the forward round's GEMM and program, the same two figures per GemmThenElementwise call.
// BM_GemmCall times the rounds' GEMM shapes through cublasSgemm, cuBLASLt with the heuristic's
// algorithm (the default where the small GEMM does not run), cuBLASLt autotuned and the
// small-GEMM kernel (CAVS_CUBLASLT=0, CAVS_GEMM_AUTOTUNE=1 and CAVS_SMALL_GEMM=0 or 1 run the
// engine rows the other ways; cuda_gemm.h, small_gemm.h): host_us per call, device_us per
// GEMM, as above; an autotuned row's label names the choice and the candidates timed.
// The *_overlap variants take each batch's Plan from a PlanQueue (scheduler/plan_queue.h):
// $CAVS_PLAN_THREADS (default 4) host threads build the next batches' plans while the current
// batch runs, as cavs-train does on a GPU. The *_pipelined variants also split each Run into
// Engine::Submit and Finish and finish batch i after batch i+1 (and its optimizer step) is
// queued, so the host never waits for the device with nothing queued behind the wait; they
// report no device phases (consecutive batches' events would interleave), and their
// run_wall_ms is Submit's host time, not a whole Run's.
// CAVS_BENCH_FOLDED=1 runs the inference rows with the embeddings' input projections folded
// (Engine::FoldInputProjections: the leaves' x W gathered from E W + b, not multiplied).
// BM_TreeLstmPaths runs the overlapped and pipelined rows at batch 256 for each element-wise and
// GEMM path in one process, 3 repetitions each (for --benchmark_enable_random_interleaving).
//   floor_ms: max(GEMM FLOPs / sgemm rate, minimum bytes / bandwidth) per batch;
//   ew_kernels: element-wise kernels generated so far in the process (0 with CAVS_CUDA_FUSED=0);
//   gemm_tuned: GEMM classes autotuned so far in the process, gemm_sgemm: problems left to
//   cublasSgemm (timed faster), gemm_planned: GEMM problems (shapes) planned.
// A table against the targets (docs/gpu_performance.md, "Against the targets") is printed last.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_common.h"
#include "bench/kernel_environment.h"
#include "core/backend.h"
#include "core/optimizer.h"
#include "core/parameter.h"
#include "examples/data/sst_reader.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/cuda_delay.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/kernels.h"
#include "scheduler/engine.h"
#include "scheduler/plan_queue.h"
#include "tests/ops/ew_programs.h"
#include "vertex/models.h"

namespace cavs {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Measured by BM_DeviceCeilings (0 until it ran).
double g_sgemm_flops = 0;      // FLOP/s at the Tree-LSTM's GEMM shape
double g_bandwidth_bytes = 0;  // bytes/s, device-to-device copy

using bench::Batches;
using bench::Data;

// CUDA events on the device's stream, one per phase boundary, reused every Run.
class EventTimer final : public scheduler::PhaseTimer {
 public:
  explicit EventTimer(cudaStream_t stream) : stream_(stream) {
    for (auto& e : events_) cudaEventCreate(&e);
  }
  ~EventTimer() override {
    for (auto& e : events_) cudaEventDestroy(e);
  }
  void Begin(scheduler::Phase p) override {
    cudaEventRecord(events_[static_cast<int>(p)], stream_);
  }
  // Adds each phase's milliseconds to `ms`. REQUIRES: the stream has passed kEnd.
  void Accumulate(std::array<double, scheduler::kNumPhases>* ms) const {
    for (int p = 0; p + 1 < scheduler::kNumPhases; ++p) {
      float t = 0;
      if (cudaEventElapsedTime(&t, events_[p], events_[p + 1]) == cudaSuccess) (*ms)[p] += t;
    }
  }

 private:
  cudaStream_t stream_;
  std::array<cudaEvent_t, scheduler::kNumPhases> events_{};
};

absl::StatusOr<vertex::Function> Model() {
  vertex::models::CellConfig c;
  c.vocab = Data().vocabulary.size();
  c.embed = 300;
  c.hidden = 150;
  c.classes = 5;
  return vertex::models::BinaryTreeLstm(c);
}

// GEMM FLOPs of one forward (and backward: data and weight gradients) over `rows` vertices.
double MatMulFlops(const vertex::Function& f, int64_t rows, bool backward) {
  double flops = 0;
  for (const vertex::Node& n : f.forward().nodes) {
    if (n.kind != vertex::OpKind::kMatMul) continue;
    const core::Shape& w = f.forward().nodes[n.inputs[1]].param_shape;
    flops += 2.0 * rows * w[0] * w[1] * (backward ? 3 : 1);
  }
  return flops;
}

// The fewest bytes one step moves: each arena buffer written once and read once, the upload,
// the dense parameters read (training: gradient written and read, Adagrad's value and
// accumulator read and written), the embedding rows the batch touches.
double MinBytes(const core::ParameterStore& store, const scheduler::EngineStats& s, bool train,
                int64_t touched_rows) {
  double dense = 0, row_bytes = 0;
  for (const auto& p : store.parameters()) {
    if (p->sparse_grad) {
      row_bytes = p->value.cols() * 4.0;
    } else {
      dense += p->value.numel() * 4.0;
    }
  }
  const double per_param = train ? 6.0 : 1.0;
  return 2.0 * s.arena_bytes + s.upload_bytes + per_param * (dense + touched_rows * row_bytes);
}

struct Totals {
  bool device_phases = true;  // the phase and optimizer events were read (not pipelined)
  std::array<double, scheduler::kNumPhases> phase_ms{};
  double opt_ms = 0, plan_s = 0, run_s = 0, build_s = 0, queue_s = 0, rounds = 0, flops = 0,
         bytes = 0, plan_bytes = 0, syncs = 0, commands = 0, round_commands = 0, host_launches = 0,
         graphs = 0;
  int64_t peak = 0;
};

void Report(benchmark::State& state, const Totals& t, const scheduler::Engine& e, bool train) {
  const double n = static_cast<double>(state.iterations());
  state.counters["rounds"] = t.rounds / n;
  state.counters["kernels_per_round"] =
      e.ForwardLaunchesPerRound() + (train ? e.BackwardLaunchesPerRound() : 0);
  // As recorded (EngineStats' round commands), forward + backward: what kernels_per_round
  // counts from the compiled steps.
  state.counters["round_kernels"] = t.rounds > 0 ? t.round_commands / t.rounds : 0.0;
  // Launches: the recorded calls (a GEMM with its program counted as two).
  state.counters["kernels_per_batch"] = t.commands / n;
  // Calls the host made to queue a batch's device work (EngineStats::host_launches), and the
  // share of batches queued as one CUDA graph.
  state.counters["host_launches"] = t.host_launches / n;
  state.counters["graph_share"] = t.graphs / n;
  // The element-wise path: kernels generated so far in the process (0: the interpreter).
  if (absl::StatusOr<ops::cuda::CudaKernels*> k = ops::cuda::GetCudaKernels(0); k.ok()) {
    state.counters["ew_kernels"] = static_cast<double>((*k)->fused_kernels_compiled());
    state.counters["gemm_tuned"] = static_cast<double>((*k)->lt_classes_tuned());
    state.counters["gemm_sgemm"] = static_cast<double>((*k)->lt_problems_to_sgemm());
    state.counters["gemm_planned"] = static_cast<double>((*k)->lt_problems_planned());
  }
  state.counters["host_syncs"] = t.syncs / n;
  state.counters["peak_MiB"] = t.peak / kMiB;
  state.counters["plan_MiB"] = t.plan_bytes / kMiB;
  static const char* kNames[] = {"upload_ms", "pre_ms", "rounds_ms",
                                 "post_ms",   "bwd_ms", "wgrad_ms"};
  for (int p = 0; t.device_phases && p + 1 < scheduler::kNumPhases; ++p) {
    if (train || p < 4) state.counters[kNames[p]] = t.phase_ms[p] / n;
  }
  if (train && t.device_phases) state.counters["opt_ms"] = t.opt_ms / n;
  state.counters["plan_host_ms"] = 1e3 * t.plan_s / n;
  state.counters["run_wall_ms"] = 1e3 * t.run_s / n;
  state.counters["build_host_ms"] = 1e3 * t.build_s / n;
  state.counters["queue_host_ms"] = 1e3 * t.queue_s / n;
  state.counters["GFLOP_per_batch"] = t.flops / n / 1e9;
  state.counters["MB_per_batch"] = t.bytes / n / 1e6;
  if (g_sgemm_flops > 0 && g_bandwidth_bytes > 0) {
    state.counters["floor_ms"] =
        1e3 * std::max(t.flops / g_sgemm_flops, t.bytes / g_bandwidth_bytes) / n;
  }
}

// Embedding rows the last step's gradient touched.
int64_t TouchedRows(const core::ParameterStore& s) {
  for (const auto& p : s.parameters()) {
    if (p->sparse_grad) return static_cast<int64_t>(p->grad_rows.size());
  }
  return 0;
}

// Planning threads of the *_overlap rows: $CAVS_PLAN_THREADS, else 4.
int PlanThreads() {
  const char* env = std::getenv("CAVS_PLAN_THREADS");
  const int n = env != nullptr ? std::atoi(env) : 4;
  return n > 0 ? n : 4;
}

double ElapsedMs(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  return cudaEventElapsedTime(&ms, a, b) == cudaSuccess ? ms : 0.0;
}

// One configuration's model, store, engine and optimizer on cuda:0, and its timed steps.
class TreeLstmRun {
 public:
  // `phase_timer`: device events at each phase of a batch (a batch is then never one graph).
  TreeLstmRun(bool train, int batch, bool phase_timer = true)
      : train_(train), phase_timer_(phase_timer) {
    for (auto& b : Batches(batch)) {
      batches_.push_back(std::make_shared<const std::vector<scheduler::Graph>>(std::move(b)));
    }
  }
  ~TreeLstmRun() {
    if (opt_begin_ != nullptr) cudaEventDestroy(opt_begin_);
    if (opt_end_ != nullptr) cudaEventDestroy(opt_end_);
  }

  absl::Status Init() {
    CAVS_ASSIGN_OR_RETURN(backend_, ops::cuda::GetCudaBackend(0));
    CAVS_ASSIGN_OR_RETURN(vertex::Function f, Model());
    f_ = std::make_unique<vertex::Function>(std::move(f));
    timer_ = std::make_unique<EventTimer>(backend_->stream());
    store_ = std::make_unique<core::ParameterStore>(1, core::Device::Cuda(0));
    scheduler::EngineOptions eo;
    eo.device = core::Device::Cuda(0);
    eo.phase_timer = phase_timer_ ? timer_.get() : nullptr;
    CAVS_ASSIGN_OR_RETURN(engine_, scheduler::Engine::Create(f_.get(), store_.get(), eo));
    // CAVS_BENCH_FOLDED=1: inference with the input projections folded (FoldInputProjections).
    const char* folded = std::getenv("CAVS_BENCH_FOLDED");
    folded_ = !train_ && folded != nullptr && std::string_view(folded) == "1";
    if (folded_) CAVS_RETURN_IF_ERROR(engine_->FoldInputProjections());
    core::OptimizerConfig oc;
    oc.kind = core::OptimizerKind::kAdagrad;
    oc.lr = 0.05f;
    CAVS_ASSIGN_OR_RETURN(opt_, core::MakeOptimizer(oc));
    CAVS_CUDA_RETURN_IF_ERROR(cudaEventCreate(&opt_begin_));
    CAVS_CUDA_RETURN_IF_ERROR(cudaEventCreate(&opt_end_));
    for (const auto& b : batches_) CAVS_RETURN_IF_ERROR(Step(*b, nullptr, nullptr));  // warm-up
    return backend_->Synchronize();
  }

  // One pipelined step: ZeroGrad, Submit(plan), Adagrad queued, then Finish of the
  // previous step's Submit (so the host queues this batch while the device runs the last one);
  // adds the host-side figures to `t`. FinishLast() reads the last one's results.
  absl::Status PipelinedStep(const std::vector<scheduler::Graph>& graphs,
                             const scheduler::Plan& plan, Totals* t) {
    scheduler::RunOptions ro;
    ro.training = train_;
    ro.backward = train_;
    ro.folded_projections = folded_;
    if (train_) CAVS_RETURN_IF_ERROR(store_->ZeroGrad());
    CAVS_ASSIGN_OR_RETURN(scheduler::PendingRun next, engine_->Submit(plan, ro));
    CountHost(t);
    if (train_) CAVS_RETURN_IF_ERROR(opt_->Step(*store_));
    if (pending_.has_value()) t->syncs += 1;  // Finish waits for the last batch's results
    CAVS_RETURN_IF_ERROR(FinishLast());
    pending_ = std::move(next);
    return absl::OkStatus();
  }
  absl::Status FinishLast() {
    if (!pending_.has_value()) return absl::OkStatus();
    absl::StatusOr<scheduler::RunResult> r = engine_->Finish(std::move(*pending_));
    pending_.reset();
    return r.status();
  }

  // One step (ZeroGrad, Run, Adagrad) on `graphs`, with `plan` if given; adds to `t` if given.
  absl::Status Step(const std::vector<scheduler::Graph>& graphs, const scheduler::Plan* plan,
                    Totals* t) {
    scheduler::RunOptions ro;
    ro.training = train_;
    ro.backward = train_;
    ro.folded_projections = folded_;
    if (train_) CAVS_RETURN_IF_ERROR(store_->ZeroGrad());
    absl::StatusOr<scheduler::RunResult> r =
        plan != nullptr ? engine_->Run(*plan, ro) : engine_->Run(graphs, ro);
    CAVS_RETURN_IF_ERROR(r.status());
    if (t != nullptr) Count(t);  // Run read its results back: every event before is done
    if (!train_) return absl::OkStatus();
    CAVS_CUDA_RETURN_IF_ERROR(cudaEventRecord(opt_begin_, backend_->stream()));
    CAVS_RETURN_IF_ERROR(opt_->Step(*store_));
    CAVS_CUDA_RETURN_IF_ERROR(cudaEventRecord(opt_end_, backend_->stream()));
    opt_pending_ = t != nullptr;
    return absl::OkStatus();
  }

  // The timed loop; with `overlap` the next batches' plans are built by a PlanQueue of
  // PlanThreads() threads while the current batch runs; with `pipelined` as well, each step is
  // a PipelinedStep (no device phase timing: the events of consecutive batches would overlap).
  absl::Status Loop(benchmark::State& state, bool overlap, bool pipelined, Totals* t) {
    core::Allocator* alloc = backend_->allocator();
    const int64_t base = alloc->stats().bytes_in_use;
    alloc->ResetPeak();
    std::unique_ptr<scheduler::PlanQueue> queue;
    if (overlap) {
      queue = std::make_unique<scheduler::PlanQueue>(
          engine_.get(), int64_t{1} << 40,
          [this](int64_t k) { return batches_[k % batches_.size()]; },
          scheduler::PlanQueueOptions{.threads = PlanThreads()});
    }
    size_t i = 0;
    for (auto _ : state) {
      const std::vector<scheduler::Graph>& graphs = *batches_[i++ % batches_.size()];
      if (overlap) {
        CAVS_ASSIGN_OR_RETURN(scheduler::PlannedBatch b, queue->Next());
        CAVS_RETURN_IF_ERROR(pipelined ? PipelinedStep(graphs, b.plan, t)
                                       : Step(graphs, &b.plan, t));
      } else {
        CAVS_RETURN_IF_ERROR(Step(graphs, nullptr, t));
      }
    }
    CAVS_RETURN_IF_ERROR(FinishLast());
    t->device_phases = !pipelined && phase_timer_;
    queue.reset();
    CAVS_RETURN_IF_ERROR(backend_->Synchronize());
    t->opt_ms += opt_pending_ ? ElapsedMs(opt_begin_, opt_end_) : 0.0;
    t->peak = alloc->stats().peak_bytes_in_use - base;
    return absl::OkStatus();
  }

  const scheduler::Engine& engine() const { return *engine_; }

 private:
  void Count(Totals* t) {
    // Without a phase timer its events were never recorded: reading them would fail and leave
    // the error for the next launch's check.
    if (phase_timer_) timer_->Accumulate(&t->phase_ms);
    t->opt_ms += opt_pending_ ? ElapsedMs(opt_begin_, opt_end_) : 0.0;
    CountHost(t);
  }
  // What the engine's stats of its last Run or Submit say.
  void CountHost(Totals* t) {
    const scheduler::EngineStats& s = engine_->stats();
    t->rounds += s.rounds;
    t->plan_s += s.plan_seconds;
    t->run_s += s.run_seconds;
    t->build_s += s.build_seconds;
    t->queue_s += s.queue_seconds;
    t->syncs += static_cast<double>(s.host_syncs);
    t->commands += static_cast<double>(s.commands);
    t->round_commands += static_cast<double>(s.forward_round_commands + s.backward_round_commands);
    t->host_launches += static_cast<double>(s.host_launches);
    t->graphs += s.graph ? 1.0 : 0.0;
    t->flops += MatMulFlops(*f_, s.rows, train_);
    t->bytes += MinBytes(*store_, s, train_, train_ ? TouchedRows(*store_) : 0);
    t->plan_bytes = std::max<double>(t->plan_bytes, s.arena_bytes + s.upload_region_bytes);
  }

  const bool train_;
  const bool phase_timer_;
  std::vector<std::shared_ptr<const std::vector<scheduler::Graph>>> batches_;
  ops::cuda::CudaBackend* backend_ = nullptr;
  std::unique_ptr<vertex::Function> f_;
  std::unique_ptr<EventTimer> timer_;
  std::unique_ptr<core::ParameterStore> store_;
  std::unique_ptr<scheduler::Engine> engine_;
  std::unique_ptr<core::Optimizer> opt_;
  cudaEvent_t opt_begin_ = nullptr, opt_end_ = nullptr;
  bool opt_pending_ = false;  // the events hold an optimizer step not yet counted
  bool folded_ = false;       // inference with folded input projections
  std::optional<scheduler::PendingRun> pending_;  // PipelinedStep's last Submit
};

// One configuration's timed loop and its counters.
absl::Status TimeTreeLstm(benchmark::State& state, bool train, int batch, bool overlap,
                          bool pipelined, bool phase_timer = true) {
  TreeLstmRun run(train, batch, phase_timer);
  Totals t;
  CAVS_RETURN_IF_ERROR(run.Init());
  CAVS_RETURN_IF_ERROR(run.Loop(state, overlap, pipelined, &t));
  state.SetItemsProcessed(state.iterations() * batch);
  Report(state, t, run.engine(), train);
  return absl::OkStatus();
}

void BM_TreeLstm(benchmark::State& state, bool train, bool overlap, bool pipelined) {
  if (!core::DeviceAvailable(core::DeviceType::kCuda)) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const absl::Status s =
      TimeTreeLstm(state, train, static_cast<int>(state.range(0)), overlap, pipelined);
  if (!s.ok()) state.SkipWithError(s.ToString().c_str());
}

// The element-wise and GEMM paths of one process, set for one benchmark run and restored.
class PathSetting {
 public:
  // 0: generated kernels + cublasSgemm, 1: + cuBLASLt, 2: + cuBLASLt autotuned, 3: the
  // interpreter + cublasSgemm, 4: generated kernels + the small-GEMM kernel wherever it applies
  // (cublasSgemm elsewhere), 5: the defaults (generated kernels, the small GEMM where faster,
  // cuBLASLt elsewhere). Paths 0 to 3 have the small GEMM off.
  static absl::StatusOr<PathSetting> Set(int path) {
    CAVS_ASSIGN_OR_RETURN(ops::cuda::CudaKernels * k, ops::cuda::GetCudaKernels(0));
    PathSetting s(k);
    using Small = ops::cuda::CudaKernels::SmallGemm;
    k->SetSmallGemm(path == 4 ? Small::kEverywhere : path == 5 ? Small::kWhereFaster : Small::kOff);
    CAVS_RETURN_IF_ERROR(k->SetFusedElementwise(path != 3));
    const bool lt = path == 1 || path == 2 || path >= 5;
    CAVS_RETURN_IF_ERROR(k->SetCublasLt(lt));
    if (lt) CAVS_RETURN_IF_ERROR(k->SetGemmAutotune(path == 2));
    return s;
  }
  static const char* Name(int path) {
    static const char* kNames[] = {"generated + cublasSgemm",
                                   "generated + cuBLASLt",
                                   "generated + cuBLASLt autotuned",
                                   "interpreter + cublasSgemm",
                                   "generated + small GEMM",
                                   "defaults: generated + small GEMM where faster + cuBLASLt"};
    return kNames[path];
  }
  absl::Status Restore() {
    k_->SetSmallGemm(small_);
    if (k_->cublas_lt()) CAVS_RETURN_IF_ERROR(k_->SetGemmAutotune(tuning_));
    CAVS_RETURN_IF_ERROR(k_->SetCublasLt(lt_));
    return k_->SetFusedElementwise(fused_);
  }

 private:
  explicit PathSetting(ops::cuda::CudaKernels* k)
      : k_(k),
        fused_(k->fused_elementwise()),
        lt_(k->cublas_lt()),
        tuning_(k->gemm_autotune()),
        small_(k->small_gemm()) {}
  ops::cuda::CudaKernels* k_;
  bool fused_, lt_, tuning_;
  ops::cuda::CudaKernels::SmallGemm small_;
};

// The paths against each other in one process: range(0) the path (PathSetting), range(1) the
// step: 0 training with plans overlapped, 1 inference overlapped, 2 training pipelined,
// 3 inference pipelined; batch 256. Run with --benchmark_enable_random_interleaving=true: the
// repetitions of every configuration interleave, so a drift of the machine (engine rows moved
// by up to 30% between processes on an H100) falls on all paths alike.
void BM_TreeLstmPaths(benchmark::State& state) {
  if (!core::DeviceAvailable(core::DeviceType::kCuda)) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int path = static_cast<int>(state.range(0)), mode = static_cast<int>(state.range(1));
  const bool train = mode == 0 || mode == 2, pipelined = mode >= 2;
  absl::StatusOr<PathSetting> setting = PathSetting::Set(path);
  if (!setting.ok()) {
    state.SkipWithError(setting.status().ToString().c_str());
    return;
  }
  const absl::Status s = TimeTreeLstm(state, train, 256, /*overlap=*/true, pipelined);
  const absl::Status restored = setting->Restore();
  if (!s.ok() || !restored.ok()) {
    state.SkipWithError((s.ok() ? restored : s).ToString().c_str());
    return;
  }
  static const char* kModes[] = {"train, overlap", "infer, overlap", "train, pipelined",
                                 "infer, pipelined"};
  state.SetLabel(absl::StrCat(PathSetting::Name(path), "; ", kModes[mode]));
}

// Launch by launch against one CUDA graph per batch (KernelOptions::cuda.graphs) in one
// process: range(0) 0 off, 1 on; range(1) the configuration of the targets: 0 training batch 25
// and 1 batch 64 with plans overlapped, 2 training batch 256 pipelined, 3 inference batch 256
// pipelined; and 4, 5 training batches 25 and 64 pipelined; range(2) element-wise programs at
// a row offset (KernelOptions::cuda.ew_row_offset) 0 off, 1 on. No phase timer in either (a
// timer needs the launches one by one). Rows 0 and 1 wait for each batch (Engine::Run), which
// never queues a graph: their two settings run alike. Run with
// --benchmark_enable_random_interleaving=true.
void BM_TreeLstmGraphs(benchmark::State& state) {
  if (!core::DeviceAvailable(core::DeviceType::kCuda)) {
    state.SkipWithError("no CUDA device");
    return;
  }
  absl::StatusOr<ops::cuda::CudaKernels*> k = ops::cuda::GetCudaKernels(0);
  if (!k.ok()) {
    state.SkipWithError(k.status().ToString().c_str());
    return;
  }
  const bool graphs = state.range(0) == 1;
  const int mode = static_cast<int>(state.range(1));
  static constexpr int kBatch[] = {25, 64, 256, 256, 25, 64};
  const bool train = mode != 3, pipelined = mode >= 2;
  const bool offset = state.range(2) == 1;
  const bool was = (*k)->graphs(), offset_was = (*k)->ElementwiseRowOffset();
  const ops::cuda::CudaGraphReplay::Stats before = (*k)->graph_stats();
  (*k)->SetGraphs(graphs);
  (*k)->SetElementwiseRowOffset(offset);
  const absl::Status s =
      TimeTreeLstm(state, train, kBatch[mode], /*overlap=*/true, pipelined, /*phase_timer=*/false);
  (*k)->SetGraphs(was);
  (*k)->SetElementwiseRowOffset(offset_was);
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  const ops::cuda::CudaGraphReplay::Stats& g = (*k)->graph_stats();
  // Over this run, warm-up included: executable graphs made, updated, and captures that failed.
  state.counters["graphs_made"] = static_cast<double>(g.instantiated - before.instantiated);
  state.counters["graphs_updated"] = static_cast<double>(g.updated - before.updated);
  state.counters["graph_fallbacks"] = static_cast<double>(g.fallbacks - before.fallbacks);
  static const char* kModes[] = {"train 25, plans overlapped", "train 64, plans overlapped",
                                 "train 256, pipelined",       "infer 256, pipelined",
                                 "train 25, pipelined",        "train 64, pipelined"};
  state.SetLabel(absl::StrCat(graphs ? "CUDA graph per batch; " : "launch by launch; ",
                              kModes[mode], offset ? "; row offsets" : ""));
}

// Times `fn` (queued on `stream`) with events: the median of `reps` runs, in seconds.
template <typename Fn>
double MedianSeconds(cudaStream_t stream, int reps, Fn fn) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(a, stream);
    fn();
    cudaEventRecord(b, stream);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms * 1e-3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Random-filled device buffer of `n` floats.
absl::StatusOr<core::Tensor> RandomDevice(int64_t n) {
  std::vector<float> host(n);
  uint32_t x = 12345;
  for (float& v : host) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<float>(x >> 8) / 16777216.0f - 0.5f;
  }
  CAVS_ASSIGN_OR_RETURN(core::Tensor t, core::Tensor::Empty(core::Shape({n}), core::DType::kFloat32,
                                                            core::Device::Cuda(0)));
  CAVS_RETURN_IF_ERROR(t.CopyFrom(core::Tensor::FromVector(host, core::Shape({n}))));
  return t;
}

// sgemm FLOP/s (through the engine's ops::Kernels, i.e. cuBLAS) for [m, k] x [k, n].
absl::StatusOr<double> SgemmRate(cudaStream_t stream, int64_t m, int64_t n, int64_t k) {
  CAVS_ASSIGN_OR_RETURN(ops::Kernels * kern, ops::GetKernels(core::Device::Cuda(0)));
  CAVS_ASSIGN_OR_RETURN(core::Tensor a, RandomDevice(m * k));
  CAVS_ASSIGN_OR_RETURN(core::Tensor b, RandomDevice(k * n));
  CAVS_ASSIGN_OR_RETURN(core::Tensor c, RandomDevice(m * n));
  auto gemm = [&]() {
    (void)kern->Gemm(false, false, m, n, k, 1.0f, a.data<float>(), k, b.data<float>(), n, 0.0f,
                     c.data<float>(), n);
  };
  for (int w = 0; w < 3; ++w) gemm();
  return 2.0 * m * n * k / MedianSeconds(stream, 20, gemm);
}

void BM_DeviceCeilings(benchmark::State& state) {
  absl::StatusOr<ops::cuda::CudaBackend*> backend = ops::cuda::GetCudaBackend(0);
  if (!backend.ok()) {
    state.SkipWithError(backend.status().ToString().c_str());
    return;
  }
  cudaStream_t stream = (*backend)->stream();
  const int64_t rows = 8192;  // about a batch of 256 SST trees' vertices
  double square = 0, shaped = 0, bw = 0;
  for (auto _ : state) {
    absl::StatusOr<double> s1 = SgemmRate(stream, 8192, 8192, 8192);
    absl::StatusOr<double> s2 = SgemmRate(stream, rows, 750, 300);
    const int64_t floats = 256ll << 20;  // 1 GiB
    absl::StatusOr<core::Tensor> src = RandomDevice(floats);
    absl::StatusOr<core::Tensor> dst = RandomDevice(floats);
    if (!s1.ok() || !s2.ok() || !src.ok() || !dst.ok()) {
      state.SkipWithError("ceiling measurement failed");
      return;
    }
    auto copy = [&]() {
      cudaMemcpyAsync(dst->raw_data(), src->raw_data(), floats * 4, cudaMemcpyDeviceToDevice,
                      stream);
    };
    copy();
    bw = 2.0 * floats * 4 / MedianSeconds(stream, 10, copy);
    square = *s1;
    shaped = *s2;
  }
  g_sgemm_flops = shaped;
  g_bandwidth_bytes = bw;
  state.counters["sgemm_8192_TFLOPs"] = square / 1e12;
  state.counters["sgemm_8192x300x750_TFLOPs"] = shaped / 1e12;
  state.counters["copy_GBps"] = bw / 1e9;
}

// Times `call` (a Kernels method queuing one launch on `stream`, returning its Status): three
// untimed calls, then per benchmark iteration 100 calls behind a delay kernel (cuda_delay.h),
// their device time from events as the iteration's manual time. Per call: host_us to issue it,
// device_us to run it (the calls run back to back: the delay outlasts their queueing, so the
// device never waits for the host between them). ok: every call and CUDA event succeeded.
struct CallTimes {
  bool ok = true;
  int64_t calls = 0;
  double host_us = 0, device_us = 0;
};
template <typename Call>
CallTimes TimeCalls(benchmark::State& state, cudaStream_t stream, Call call) {
  constexpr int kCalls = 100;
  CallTimes t;
  for (int i = 0; t.ok && i < 3; ++i) t.ok = call().ok();  // compiles, plans, learns the shape
  cudaEvent_t start = nullptr, stop = nullptr;
  t.ok = t.ok && cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess;
  double host_s = 0, device_ms = 0;
  for (auto _ : state) {
    if (!t.ok) break;
    t.ok = ops::cuda::LaunchDelay(stream, 3'000'000) == cudaSuccess;  // 100 calls queue in ~1 ms
    cudaEventRecord(start, stream);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) t.ok = t.ok && call().ok();
    host_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cudaEventRecord(stop, stream);
    t.ok = t.ok && cudaEventSynchronize(stop) == cudaSuccess;
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    device_ms += ms;
    t.calls += kCalls;
    state.SetIterationTime(ms / 1e3);
  }
  if (start != nullptr) cudaEventDestroy(start);
  if (stop != nullptr) cudaEventDestroy(stop);
  if (t.calls > 0) {
    t.host_us = 1e6 * host_s / t.calls;
    t.device_us = 1e3 * device_ms / t.calls;
  }
  return t;
}

// range(0): 0 forward, 1 backward; range(1): 0 generated kernel, 1 interpreter, 2 (forward) the
// round's GEMM ([rows, 300] x [300, 750] onto the gates, beta 1, the default GEMM path) then the
// generated kernel (GemmThenElementwise); range(2): rows.
void BM_FusedRound(benchmark::State& state) {
  const int how = static_cast<int>(state.range(1));
  const bool backward = state.range(0) == 1, interpreter = how == 1, with_gemm = how >= 2;
  const int64_t rows = state.range(2);
  ops::testing::EwProgram p = backward ? ops::testing::TreeLstmBackward(150, rows, 1)
                                       : ops::testing::TreeLstmForward(150, rows, 1);
  absl::StatusOr<ops::cuda::CudaKernels*> kernels = ops::cuda::GetCudaKernels(0);
  if (!kernels.ok()) {
    state.SkipWithError(kernels.status().ToString().c_str());
    return;
  }
  // Device copies of the buffers, the program's pointers moved into them; for the interpreter,
  // the scratch columns become a [rows, width] device buffer.
  const int64_t scratch_width =
      ops::EwScratchWidth(p.instrs.data(), static_cast<int>(p.instrs.size()));
  std::vector<float*> dev(p.buffers.size() + 1, nullptr);
  bool ok = true;
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    ok = ok &&
         cudaMalloc(reinterpret_cast<void**>(&dev[i]), p.buffers[i]->size() * 4) == cudaSuccess &&
         cudaMemcpy(dev[i], p.buffers[i]->data(), p.buffers[i]->size() * 4,
                    cudaMemcpyHostToDevice) == cudaSuccess;
  }
  ok = ok && cudaMalloc(reinterpret_cast<void**>(&dev.back()),
                        std::max<int64_t>(1, rows * scratch_width) * 4) == cudaSuccess;
  std::vector<ops::EwInstr> program = p.instrs;
  for (ops::EwInstr& in : program) {
    for (ops::EwArg* a : {&in.dst, &in.a, &in.b}) {
      if (a->scratch >= 0 && interpreter) {
        *a = {dev.back() + a->scratch, scratch_width, -1};
        continue;
      }
      for (size_t i = 0; i < p.buffers.size() && a->ptr != nullptr; ++i) {
        float* base = p.buffers[i]->data();
        if (a->ptr >= base && a->ptr < base + p.buffers[i]->size()) {
          a->ptr = dev[i] + (a->ptr - base);
          break;
        }
      }
    }
  }
  ops::EwInstr* dev_program = nullptr;
  ok = ok &&
       cudaMalloc(reinterpret_cast<void**>(&dev_program), program.size() * sizeof(ops::EwInstr)) ==
           cudaSuccess &&
       cudaMemcpy(dev_program, program.data(), program.size() * sizeof(ops::EwInstr),
                  cudaMemcpyHostToDevice) == cudaSuccess;
  const bool was_fused = (*kernels)->fused_elementwise();
  ok = ok && (*kernels)->SetFusedElementwise(!interpreter).ok();
  const int count = static_cast<int>(program.size());
  absl::StatusOr<core::Tensor> x = RandomDevice(with_gemm ? rows * 300 : 1),
                               w = RandomDevice(with_gemm ? 300 * 750 : 1);
  ok = ok && x.ok() && w.ok();
  ops::Kernels::GemmCall gemm{
      false, false,   rows, 750,  300,    1.0f, nullptr,
      300,   nullptr, 750,  1.0f, dev[0], 750};  // buffer 0: the gates the program reads
  if (ok) {
    gemm.a = static_cast<const float*>(x->raw_data());
    gemm.b = static_cast<const float*>(w->raw_data());
  }
  const CallTimes t = ok ? TimeCalls(state, (*kernels)->stream(),
                                     [&]() {
                                       if (with_gemm) {
                                         return (*kernels)->GemmThenElementwise(
                                             gemm, program.data(), dev_program, count, rows, 77, 0);
                                       }
                                       return (*kernels)->Elementwise(program.data(), dev_program,
                                                                      count, rows, 77, 0);
                                     })
                         : CallTimes{false};
  (void)(*kernels)->SetFusedElementwise(was_fused);
  if (!ok || !t.ok) state.SkipWithError("a CUDA call or launch failed");
  if (t.calls > 0) {
    state.counters["device_us"] = t.device_us;
    state.counters["host_us"] = t.host_us;
    // The bytes the program must move: each distinct operand in memory once.
    std::vector<const float*> seen;
    int64_t bytes = 0;
    for (const ops::EwInstr& in : p.instrs) {
      for (const ops::EwArg* a : {&in.dst, &in.a, &in.b}) {
        if (a->ptr == nullptr || std::find(seen.begin(), seen.end(), a->ptr) != seen.end()) {
          continue;
        }
        seen.push_back(a->ptr);
        bytes += rows * in.width * 4;
      }
    }
    if (!with_gemm) state.counters["GBps"] = bytes / (t.device_us * 1e-6) / 1e9;
  }
  static const char* kHow[] = {"generated", "interpreter", "GEMM + generated"};
  state.SetLabel(
      absl::StrCat(backward ? "backward" : "forward", ", ", kHow[how], ", ", rows, " rows"));
  for (float* d : dev) cudaFree(d);
  cudaFree(dev_program);
}

// One round-shaped GEMM accumulated onto its rows (beta = 1, as the rounds' h U) through one
// GEMM path: host_us per Gemm call (the host time a launch-bound round pays), device_us per
// GEMM. range(0): 0 cublasSgemm, 1 cuBLASLt with the heuristic's algorithm (cuda_gemm.h; the
// default where the small GEMM does not run), 2 cuBLASLt autotuned, 3 the small-GEMM kernel
// (CudaKernels::SetSmallGemm); range(1): rows m; range(2): the
// GEMM of a round: 0 the Tree-LSTM's forward [m, 300] x [300, 750], 1 its backward to the inputs
// [m, 750] x [750, 300]^T, 2 its weight gradient [m, 300]^T x [m, 750] (m is then the summed
// dimension), 3 the LSTM's recurrent forward [m, 512] x [512, 2048], 4 its backward to h
// [m, 2048] x [512, 2048]^T.
void BM_GemmCall(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  const int64_t rows = state.range(1);
  const int shape = static_cast<int>(state.range(2));
  struct Shape {
    bool ta, tb;
    int64_t m, n, k;
    const char* what;
  };
  const Shape g = shape == 0   ? Shape{false, false, rows, 750, 300, "Tree-LSTM forward"}
                  : shape == 1 ? Shape{false, true, rows, 300, 750, "Tree-LSTM backward"}
                  : shape == 2 ? Shape{true, false, 300, 750, rows, "Tree-LSTM weight gradient"}
                  : shape == 3 ? Shape{false, false, rows, 2048, 512, "LSTM recurrent"}
                               : Shape{false, true, rows, 512, 2048, "LSTM backward to h"};
  absl::StatusOr<ops::cuda::CudaKernels*> kernels = ops::cuda::GetCudaKernels(0);
  if (!kernels.ok()) {
    state.SkipWithError(kernels.status().ToString().c_str());
    return;
  }
  absl::StatusOr<core::Tensor> a = RandomDevice(g.m * g.k), b = RandomDevice(g.k * g.n),
                               c = RandomDevice(g.m * g.n);
  constexpr int kPath[] = {0, 1, 2, 4};  // PathSetting's, by mode
  absl::StatusOr<PathSetting> setting = PathSetting::Set(kPath[mode]);
  const bool small = mode == 3 && (*kernels)->UsesSmallGemm(g.ta, g.tb, g.m, g.n, g.k);
  bool ok = a.ok() && b.ok() && c.ok() && setting.ok();
  const int64_t tuned = (*kernels)->lt_classes_tuned();
  const int64_t to_sgemm = (*kernels)->lt_problems_to_sgemm();
  auto call = [&]() {
    return (*kernels)->Gemm(g.ta, g.tb, g.m, g.n, g.k, 1.0f,
                            static_cast<const float*>(a->raw_data()), g.ta ? g.m : g.k,
                            static_cast<const float*>(b->raw_data()), g.tb ? g.k : g.n, 1.0f,
                            static_cast<float*>(c->raw_data()), g.n);
  };
  const CallTimes t = ok ? TimeCalls(state, (*kernels)->stream(), call) : CallTimes{false};
  const bool left_to_sgemm = (*kernels)->lt_problems_to_sgemm() > to_sgemm;
  const bool timed = (*kernels)->lt_classes_tuned() > tuned;
  const std::string tuning = timed ? (*kernels)->lt_last_tuning() : "";  // Restore clears it
  ok = (!setting.ok() || setting->Restore().ok()) && ok && t.ok;
  if (!ok) state.SkipWithError("a CUDA call or GEMM failed");
  if (t.calls > 0) {
    state.counters["host_us"] = t.host_us;
    state.counters["device_us"] = t.device_us;
    state.counters["TFLOPs"] = 2.0 * g.m * g.n * g.k / (t.device_us * 1e6);
  }
  const char* how[] = {"cublasSgemm", "cuBLASLt heuristic", "cuBLASLt autotuned",
                       "small GEMM (small_gemm.h; cublasSgemm where it does not apply)"};
  state.SetLabel(absl::StrCat(
      how[mode], small ? " [16 x 32 tiles]" : "", mode == 2 && timed ? " [" + tuning + "]" : "",
      left_to_sgemm ? " -> cublasSgemm" : "", ", ", g.what, " m=", g.m, " n=", g.n, " k=", g.k));
}

// The floor of a launch's host time on this machine: what a round pays per kernel before any
// of the engine's own work. range(0): 0 a bare kernel launch (one thread that returns at once,
// the runtime API's <<<>>>), 1 cudaMemsetAsync of 4 bytes, 2 Kernels::Fill of one float (the
// argument checks, the device guard and a fill kernel: the wrapper every engine call goes
// through), 3 the same Fill called through a std::function, as Engine::Submit replays its
// recorded calls. host_us and device_us per call as BM_GemmCall's. Mode 0 against 2 and 3 is
// the part of a launch's host time that is ours.
void BM_LaunchFloor(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  absl::StatusOr<ops::cuda::CudaKernels*> kernels = ops::cuda::GetCudaKernels(0);
  if (!kernels.ok()) {
    state.SkipWithError(kernels.status().ToString().c_str());
    return;
  }
  absl::StatusOr<core::Tensor> buf = RandomDevice(1);
  if (!buf.ok()) {
    state.SkipWithError(buf.status().ToString().c_str());
    return;
  }
  float* dst = static_cast<float*>(buf->raw_data());
  cudaStream_t stream = (*kernels)->stream();
  // 1.0, not 0.0: a fill of zeros is a cudaMemsetAsync, not a kernel.
  const std::function<absl::Status()> replayed = [&]() { return (*kernels)->Fill(dst, 1, 1.0f); };
  const CallTimes t = TimeCalls(state, stream, [&]() -> absl::Status {
    switch (mode) {
      case 0:
        return CAVS_CUDA_STATUS(ops::cuda::LaunchDelay(stream, 0));
      case 1:
        return CAVS_CUDA_STATUS(cudaMemsetAsync(dst, 0, sizeof(float), stream));
      case 2:
        return (*kernels)->Fill(dst, 1, 1.0f);
      default:
        return replayed();
    }
  });
  if (!t.ok) state.SkipWithError("a CUDA call failed");
  if (t.calls > 0) {
    state.counters["host_us"] = t.host_us;
    state.counters["device_us"] = t.device_us;
  }
  static const char* kWhat[] = {"bare kernel launch (<<<>>>)", "cudaMemsetAsync, 4 bytes",
                                "Kernels::Fill, 1 float", "Kernels::Fill through std::function"};
  state.SetLabel(kWhat[mode]);
}

BENCHMARK(BM_DeviceCeilings)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GemmCall)
    ->ArgsProduct({{0, 1, 2, 3}, {64, 512, 4096}, {0}})
    ->ArgsProduct({{0, 1, 2, 3}, {64, 512}, {1}})
    ->ArgsProduct({{0, 1, 2}, {512, 4096}, {2}})
    ->ArgsProduct({{0, 1, 2, 3}, {64}, {3, 4}})
    ->ArgsProduct({{1, 3}, {100}, {0}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LaunchFloor)->DenseRange(0, 3)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FusedRound)
    ->ArgsProduct({{0, 1}, {0, 1}, {64, 4096}})
    ->ArgsProduct({{0}, {2}, {16, 64, 80}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_TreeLstm, train, true, false, false)
    ->Arg(25)
    ->Arg(64)
    ->Arg(256)
    ->Apply(bench::Timed);
BENCHMARK_CAPTURE(BM_TreeLstm, train_overlap, true, true, false)
    ->Arg(25)
    ->Arg(64)
    ->Arg(256)
    ->Apply(bench::Timed);
BENCHMARK_CAPTURE(BM_TreeLstm, train_pipelined, true, true, true)->Arg(256)->Apply(bench::Timed);
BENCHMARK_CAPTURE(BM_TreeLstm, infer, false, false, false)->Arg(256)->Apply(bench::Timed);
BENCHMARK_CAPTURE(BM_TreeLstm, infer_overlap, false, true, false)->Arg(256)->Apply(bench::Timed);
BENCHMARK_CAPTURE(BM_TreeLstm, infer_pipelined, false, true, true)->Arg(256)->Apply(bench::Timed);

BENCHMARK(BM_TreeLstmGraphs)
    ->ArgsProduct({{0, 1}, {0, 1, 2, 3, 4, 5}, {0, 1}})
    ->Repetitions(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0);
BENCHMARK(BM_TreeLstmPaths)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5}, {0, 1, 2, 3}})
    ->Repetitions(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0);

// Prints trees/s against the targets (docs/gpu_performance.md).
class TargetReporter : public bench::RateReporter {
 public:
  void Finalize() override {
    ConsoleReporter::Finalize();
    const std::vector<std::pair<std::string, double>> targets = {{"train/25", 15000},
                                                                 {"train/64", 35000},
                                                                 {"train/256", 100000},
                                                                 {"train_overlap/25", 15000},
                                                                 {"train_overlap/64", 35000},
                                                                 {"train_overlap/256", 100000},
                                                                 {"infer/256", 400000},
                                                                 {"infer_overlap/256", 400000},
                                                                 {"train_pipelined/256", 100000},
                                                                 {"infer_pipelined/256", 400000}};
    for (const auto& [cfg, target] : targets) {
      const double rate = Rate("BM_TreeLstm/" + cfg + "/min_time:2.000/real_time");
      if (rate == 0) continue;
      std::printf("TARGET %-18s %10.0f trees/s  target %8.0f  %s\n", cfg.c_str(), rate, target,
                  rate >= target ? "met" : "MISSED");
    }
    // BM_TreeLstmGraphs: the medians launch by launch and as graphs, their ratio, and the
    // targets of the host-free step (docs/gpu_performance.md).
    static const char* kModes[] = {"train 25 overlapped", "train 64 overlapped",
                                   "train 256 pipelined", "infer 256 pipelined",
                                   "train 25 pipelined",  "train 64 pipelined"};
    static const double kTargets[] = {40000, 100000, 250000, 600000, 40000, 100000};
    for (int offset = 0; offset < 2; ++offset) {
      for (int mode = 0; mode < 6; ++mode) {
        auto rate = [&](int on) {
          return Rate(absl::StrCat("BM_TreeLstmGraphs/", on, "/", mode, "/", offset,
                                   "/min_time:1.000/repeats:3/real_time_median"));
        };
        const double off = rate(0), on = rate(1);
        if (off == 0 || on == 0) continue;
        std::printf(
            "GRAPHS %-20s %-11s launch by launch %9.0f  graphs %9.0f trees/s  x%.2f  target"
            " %7.0f  %s\n",
            kModes[mode], offset ? "row offsets" : "copies", off, on, on / off, kTargets[mode],
            std::max(on, off) >= kTargets[mode] ? "met" : "MISSED");
      }
    }
  }
};

}  // namespace
}  // namespace cavs

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  cavs::bench::ApplyKernelEnvironment("tree_lstm_gpu_benchmark");
  cavs::TargetReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
