// Binary Tree-LSTM throughput: the batched engine against the serial reference executor on
// the same batches, in one binary and one run, so the printed ratio holds on a noisy machine.
//
// Data: the SST train trees at $CAVS_BENCH_SST (e.g. ../shared/data/sst/train.txt), else the
// bundled synthetic treebank. Embedding 300; hidden 150 and 256; batches 1, 25, 64, 256.
// Training = forward + backward + Adagrad step; inference = forward only.
// Counters per batch: rounds, vertices per round, plan_share (host plan time / step time),
// GFLOPs (useful GEMM FLOPs per second, see MatMulFlops), kernels_per_batch and round_kernels
// (the calls recorded per batch and per round, forward + backward).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_common.h"
#include "bench/kernel_environment.h"
#include "core/optimizer.h"
#include "core/parameter.h"
#include "examples/data/sst_reader.h"
#include "ops/cpu/cpu_elementwise.h"
#include "ops/cpu/cpu_packed_gemm.h"
#include "ops/cpu/cpu_parallel.h"
#include "ops/ew_plan.h"
#include "ops/kernels.h"
#include "scheduler/engine.h"
#include "scheduler/plan_queue.h"
#include "scheduler/reference_executor.h"
#include "tests/ops/ew_programs.h"
#include "vertex/models.h"

namespace cavs {
namespace {

using bench::Batches;
using bench::Data;

absl::StatusOr<vertex::Function> Model(int hidden) {
  vertex::models::CellConfig c;
  c.vocab = Data().vocabulary.size();
  c.embed = 300;
  c.hidden = hidden;
  c.classes = 5;
  return vertex::models::BinaryTreeLstm(c);
}

// A Tree-LSTM engine on the CPU with its function and parameters, held on the heap (the engine
// keeps pointers to both). Null, with the benchmark skipped, where setup fails.
struct CpuEngine {
  absl::StatusOr<vertex::Function> f;
  core::ParameterStore store{1};
  std::unique_ptr<scheduler::Engine> engine;
};

std::unique_ptr<CpuEngine> MakeEngine(benchmark::State& state, int hidden) {
  auto e = std::make_unique<CpuEngine>();
  e->f = Model(hidden);
  absl::StatusOr<std::unique_ptr<scheduler::Engine>> engine =
      e->f.ok() ? scheduler::Engine::Create(&*e->f, &e->store) : e->f.status();
  if (!engine.ok()) {
    state.SkipWithError(absl::StrCat("setup failed: ", engine.status().ToString()).c_str());
    return nullptr;
  }
  e->engine = *std::move(engine);
  return e;
}

// Useful GEMM FLOPs of one batch: each MatMul counted on the rows where its input can be
// nonzero — pre-ops (x W) on vertices with a token, recurrent ops (h U) on vertices with a
// child, post-ops on every vertex; a training step adds the two backward GEMMs of each.
double MatMulFlops(const vertex::Function& f, const std::vector<scheduler::Graph>& batch,
                   bool backward) {
  int64_t tokens = 0, with_children = 0, all = 0;
  for (const scheduler::Graph& g : batch) {
    for (int v = 0; v < g.num_vertices(); ++v) {
      tokens += !g.tokens.empty() && g.tokens[v] >= 0;
      with_children += g.num_children(v) > 0;
      ++all;
    }
  }
  double flops = 0;
  for (const vertex::Node& n : f.forward().nodes) {
    if (n.kind != vertex::OpKind::kMatMul) continue;
    const core::Shape& w = f.forward().nodes[n.inputs[1]].param_shape;
    const int64_t rows = n.op_class == vertex::OpClass::kBeforeRounds ? tokens
                         : n.op_class == vertex::OpClass::kInRounds   ? with_children
                                                                      : all;
    flops += 2.0 * rows * w[0] * w[1] * (backward ? 3 : 1);
  }
  return flops;
}

// `folded`: inference with the embeddings' input projections folded
// (Engine::FoldInputProjections, once before the timed steps; the GFLOPs counter still counts
// the model's GEMMs).
void BM_Engine(benchmark::State& state, bool train, bool folded = false) {
  const int hidden = static_cast<int>(state.range(0));
  const int batch = static_cast<int>(state.range(1));
  std::unique_ptr<CpuEngine> e = MakeEngine(state, hidden);
  core::OptimizerConfig oc;
  oc.kind = core::OptimizerKind::kAdagrad;
  oc.lr = 0.05f;
  auto opt = core::MakeOptimizer(oc);
  if (e == nullptr || !opt.ok()) {
    if (e != nullptr) state.SkipWithError("setup failed");
    return;
  }
  const vertex::Function& f = *e->f;
  core::ParameterStore& store = e->store;
  scheduler::Engine* engine = e->engine.get();
  const auto batches = Batches(batch);
  scheduler::RunOptions ro;
  ro.training = train;
  ro.backward = train;
  ro.folded_projections = folded;
  if (folded && !engine->FoldInputProjections().ok()) {
    state.SkipWithError("FoldInputProjections failed");
    return;
  }
  // One untimed step first: the arena's first touch (page faults) is not the steady state.
  (void)store.ZeroGrad();
  if (!engine->Run(batches[0], ro).ok()) {
    state.SkipWithError("warm-up step failed");
    return;
  }
  (void)store.ZeroGrad();
  size_t i = 0;
  double rounds = 0, rows = 0, plan = 0, total = 0, flops = 0, commands = 0, round_commands = 0;
  for (auto _ : state) {
    const auto& b = batches[i++ % batches.size()];
    if (train) (void)store.ZeroGrad();
    absl::StatusOr<scheduler::RunResult> r = engine->Run(b, ro);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    if (train) (void)(*opt)->Step(store);
    const scheduler::EngineStats& s = engine->stats();
    rounds += s.rounds;
    rows += s.rows;
    plan += s.plan_seconds;
    total += s.run_seconds;
    flops += MatMulFlops(f, b, train);
    commands += static_cast<double>(s.commands);
    round_commands += static_cast<double>(s.forward_round_commands + s.backward_round_commands);
  }
  const double n = static_cast<double>(state.iterations());
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["rounds"] = rounds / n;
  state.counters["vertices_per_round"] = rows / rounds;
  state.counters["plan_share"] = plan / total;
  state.counters["GFLOPs"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
  // The calls recorded (a GEMM and its program counted as two), per batch and per round: the
  // launches a device without the packed GEMM makes (CAVS_PACKED_GEMM=0 records as CUDA does).
  state.counters["kernels_per_batch"] = commands / n;
  state.counters["round_kernels"] = round_commands / rounds;
}

// A hidden-150 engine with the SST batches of state.range(0) trees and every batch's plan, built
// before the timing; null, with the benchmark skipped, where setup fails.
struct PlannedEngine {
  std::unique_ptr<CpuEngine> e;
  std::vector<std::vector<scheduler::Graph>> batches;
  std::vector<scheduler::Plan> plans;
  size_t next = 0;
  // Engine::Submit of the next batch with its plan, the batches in turn.
  absl::StatusOr<scheduler::PendingRun> SubmitNext(const scheduler::RunOptions& ro) {
    const size_t at = next++ % batches.size();
    return e->engine->Submit(plans[at], ro);
  }
};
std::unique_ptr<PlannedEngine> MakePlannedEngine(benchmark::State& state) {
  auto p = std::make_unique<PlannedEngine>();
  p->e = MakeEngine(state, 150);
  if (p->e == nullptr) return nullptr;
  p->batches = Batches(static_cast<int>(state.range(0)));
  for (const auto& b : p->batches) {
    absl::StatusOr<scheduler::Plan> plan = p->e->engine->PlanBatch(b);
    if (!plan.ok()) {
      state.SkipWithError(plan.status().ToString().c_str());
      return nullptr;
    }
    p->plans.push_back(*std::move(plan));
  }
  return p;
}

// The host's part of a batch after the device's: Engine::Finish, which hands the results back
// per graph (inference at `batch`, the kernels run untimed in Submit). On a GPU it runs on the
// host between queueing one batch and the next, so it counts against a host-bound step.
void BM_Finish(benchmark::State& state) {
  const std::unique_ptr<PlannedEngine> p = MakePlannedEngine(state);
  if (p == nullptr) return;
  scheduler::Engine* engine = p->e->engine.get();
  scheduler::RunOptions ro;
  ro.training = false;
  ro.backward = false;
  for (auto _ : state) {
    state.PauseTiming();
    absl::StatusOr<scheduler::PendingRun> pending = p->SubmitNext(ro);
    state.ResumeTiming();
    if (!pending.ok()) {
      state.SkipWithError(pending.status().ToString().c_str());
      return;
    }
    absl::StatusOr<scheduler::RunResult> r = engine->Finish(*std::move(pending));
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(r->predictions.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

// The host's part of Engine::Submit before anything runs: recording the batch's launches from
// a built plan (EngineStats::plan_seconds with a prebuilt plan), timed manually around the
// kernels the CPU runs in Submit. On a GPU this is on the submitting thread of a pipelined
// step, with the queueing and Finish. upload_KiB: the bytes a batch copies to the device;
// zeroed_KiB: the bytes its one fill zeroes.
// Range 0: the batch; range 1: 1 training, 0 inference.
void BM_Record(benchmark::State& state) {
  const bool train = state.range(1) != 0;
  const std::unique_ptr<PlannedEngine> p = MakePlannedEngine(state);
  if (p == nullptr) return;
  scheduler::Engine* engine = p->e->engine.get();
  scheduler::RunOptions ro;
  ro.training = train;
  ro.backward = train;
  double commands = 0, upload = 0, zeroed = 0;
  for (auto _ : state) {
    if (train) (void)p->e->store.ZeroGrad();
    absl::StatusOr<scheduler::PendingRun> pending = p->SubmitNext(ro);
    if (!pending.ok()) return state.SkipWithError(pending.status().ToString().c_str());
    state.SetIterationTime(engine->stats().plan_seconds);
    commands += static_cast<double>(engine->stats().commands);
    upload += static_cast<double>(engine->stats().upload_bytes);
    zeroed += static_cast<double>(engine->stats().zeroed_bytes);
    absl::StatusOr<scheduler::RunResult> r = engine->Finish(*std::move(pending));
    if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.counters["kernels_per_batch"] = commands / static_cast<double>(state.iterations());
  state.counters["upload_KiB"] = upload / 1024 / static_cast<double>(state.iterations());
  state.counters["zeroed_KiB"] = zeroed / 1024 / static_cast<double>(state.iterations());
}

// Graphs joining a running inference batch (Engine::RunJoining), against batch at a time: a
// batch of range(0) SST trees runs and range(1) more arrive after its round range(2). Mode 0
// (range(3)): batch at a time, the batch and then the arrivals as a batch of their own; mode 1:
// they join it. Folded projections, batch_invariant, as cavs-serve runs. Counters: join_us, the
// host time of the join (re-plan, record, upload, pre-round ops, the carry of the rows that
// ran); rounds, of the joined batch or of the two batches.
void BM_EngineJoin(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  const int joining = static_cast<int>(state.range(1));
  const int at = static_cast<int>(state.range(2));
  const bool join = state.range(3) != 0;
  std::unique_ptr<CpuEngine> e = MakeEngine(state, 150);
  if (e == nullptr) return;
  scheduler::Engine* engine = e->engine.get();
  if (!engine->FoldInputProjections().ok()) return state.SkipWithError("fold failed");
  scheduler::RunOptions ro;
  ro.training = false;
  ro.backward = false;
  ro.folded_projections = true;
  ro.batch_invariant = true;
  const auto firsts = Batches(batch);
  const auto arrivals = Batches(joining);
  std::vector<scheduler::Plan> plans;
  for (const auto& b : firsts) {
    absl::StatusOr<scheduler::Plan> p = engine->PlanBatch(b);
    if (!p.ok()) return state.SkipWithError(p.status().ToString().c_str());
    plans.push_back(*std::move(p));
  }
  size_t i = 0;
  double join_s = 0, rounds = 0;
  for (auto _ : state) {
    const size_t k = i++;
    const auto& a = firsts[k % firsts.size()];
    const auto& more = arrivals[k % arrivals.size()];
    absl::Status s;
    if (join) {
      s = engine
              ->RunJoining(a, plans[k % plans.size()], ro,
                           [&](const scheduler::JoinPoint& p) {
                             return p.rounds_done == at ? more : std::vector<scheduler::Graph>();
                           })
              .status();
      join_s += engine->stats().join_seconds;
      rounds += engine->stats().rounds;
    } else {
      s = engine->Run(a, ro, plans[k % plans.size()]).status();
      rounds += engine->stats().rounds;
      if (s.ok()) s = engine->Run(more, ro).status();
      rounds += engine->stats().rounds;
    }
    if (!s.ok()) return state.SkipWithError(s.ToString().c_str());
  }
  const double n = static_cast<double>(state.iterations());
  state.SetItemsProcessed(state.iterations() * (batch + joining));
  state.counters["join_us"] = join_s / n * 1e6;
  state.counters["rounds"] = rounds / n;
}

// The host's part of a batch that needs no device: validating the batch and building its plan
// (Engine::PlanBatch). On a GPU this runs for the next batch while the device runs this one.
// Range 1: 0 plans on the benchmark's thread; N > 0 takes the plans from a PlanQueue with N
// planning threads (scheduler/plan_queue.h), as fast as they come: the host's plan throughput.
void BM_Plan(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  std::unique_ptr<CpuEngine> e = MakeEngine(state, 150);
  if (e == nullptr) return;
  scheduler::Engine* engine = e->engine.get();
  std::vector<std::shared_ptr<const std::vector<scheduler::Graph>>> batches;
  for (auto& b : Batches(batch)) {
    batches.push_back(std::make_shared<const std::vector<scheduler::Graph>>(std::move(b)));
  }
  std::unique_ptr<scheduler::PlanQueue> queue;
  if (threads > 0) {
    queue = std::make_unique<scheduler::PlanQueue>(
        engine, int64_t{1} << 40, [&](int64_t i) { return batches[i % batches.size()]; },
        scheduler::PlanQueueOptions{.threads = threads});
  }
  size_t i = 0;
  for (auto _ : state) {
    absl::StatusOr<scheduler::Plan> plan;
    if (queue != nullptr) {
      absl::StatusOr<scheduler::PlannedBatch> b = queue->Next();
      plan = b.ok() ? absl::StatusOr<scheduler::Plan>(std::move(b->plan)) : b.status();
    } else {
      plan = engine->PlanBatch(*batches[i++ % batches.size()]);
    }
    if (!plan.ok()) {
      state.SkipWithError(plan.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(plan->ints.data());
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.SetLabel(threads > 0 ? absl::StrCat("PlanQueue, ", threads, " threads") : "PlanBatch");
}

// The host cost a generated CUDA element-wise kernel adds to each launch (ops/ew_plan.h):
// planning a Tree-LSTM round's program (hidden 150, 64 rows; range 0 forward, 1 backward) and
// finding its compiled kernel by the plan's key; or (range 2, 3) what a launch with a known
// shape does instead, the fingerprint check and a lookup (CudaFusedElementwise::Launch); or
// (range 4, 5) the argument checks every Elementwise call makes first (cpu::ValidateProgram).
void BM_EwKernelPlan(benchmark::State& state) {
  const bool fwd = state.range(0) % 2 == 0, shaped = state.range(0) >= 2;
  const bool validate = state.range(0) >= 4;
  const ops::testing::EwProgram p =
      fwd ? ops::testing::TreeLstmForward(150, 64, 1) : ops::testing::TreeLstmBackward(150, 64, 1);
  const int count = static_cast<int>(p.instrs.size());
  absl::flat_hash_map<std::vector<int64_t>, int> kernels;
  kernels[ops::PlanEwKernel(p.instrs.data(), count, p.rows).key] = 1;
  absl::flat_hash_map<uint64_t, std::vector<int64_t>> shapes;
  ops::EwFingerprint(p.instrs.data(), count, p.rows, &shapes[12345]);
  for (auto _ : state) {
    if (validate) {
      benchmark::DoNotOptimize(ops::cpu::ValidateProgram(p.instrs.data(), count, p.rows, true));
    } else if (shaped) {
      auto it = shapes.find(12345);
      benchmark::DoNotOptimize(
          ops::EwFingerprintMatches(it->second, p.instrs.data(), count, p.rows));
    } else {
      ops::EwKernelPlan plan = ops::PlanEwKernel(p.instrs.data(), count, p.rows);
      benchmark::DoNotOptimize(kernels.find(plan.key)->second);
    }
  }
  state.SetLabel(absl::StrCat(count, " instructions, ",
                              validate ? "validated"
                              : shaped ? "known shape"
                                       : "planned"));
}

void BM_Reference(benchmark::State& state) {
  const int hidden = static_cast<int>(state.range(0));
  const int batch = static_cast<int>(state.range(1));
  absl::StatusOr<vertex::Function> f = Model(hidden);
  core::ParameterStore store(1);
  if (!f.ok() || !scheduler::CreateParameters(*f, &store).ok()) {
    state.SkipWithError("setup failed");
    return;
  }
  const scheduler::ParamValues params = scheduler::SnapshotParameters(*f, store);
  const auto batches = Batches(batch);
  size_t i = 0;
  for (auto _ : state) {
    auto r = scheduler::RunReference(*f, batches[i++ % batches.size()], params, {});
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * batch);
}

// The machine's GEMM rate at the Tree-LSTM's shape: [2048, 300] x [300, 750].
void BM_Sgemm(benchmark::State& state) {
  const int64_t m = 2048, k = 300, n = 750;
  std::vector<float> a(m * k, 0.5f), b(k * n, 0.25f), c(m * n);
  ops::Kernels* kern = *ops::GetKernels(core::Device::Cpu());
  for (auto _ : state) {
    (void)kern->Gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
  }
  state.counters["GFLOPs"] =
      benchmark::Counter(2.0 * m * n * k * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

// One round's h U at the Tree-LSTM's shape, [m, 300] x [300, 750], for the row counts rounds
// have: OpenBLAS (arg 0, packs U on every call) against the packed-weight GEMM (arg 1, U packed
// once, as the engine does per batch; the CPU's best kernel), and the packed GEMM's AVX2 kernel
// (arg 2, on an AVX-512 CPU: what CPUs without AVX-512 run for batch invariance; elsewhere the
// same as 1). BM_PackWeight is the price of that one pack.
void BM_RoundGemm(benchmark::State& state) {
  const bool packed = state.range(0) >= 1;
  const bool avx2 = state.range(0) == 2;
  if (avx2) ops::cpu::SetPackedGemmAvx2(true);
  const int64_t m = state.range(1), k = 300, n = 750;
  std::vector<float> a(m * k, 0.5f), b(k * n, 0.25f), c(m * n);
  ops::Kernels* kern = *ops::GetKernels(core::Device::Cpu());
  std::vector<float> pack(std::max<int64_t>(kern->PackedGemmBytes(k, n), 4) / 4);
  if (packed && kern->PackedGemmBytes(k, n) == 0) {
    state.SkipWithError("no packed GEMM on this CPU");
    return;
  }
  if (packed) (void)kern->PackGemmB(false, k, n, b.data(), n, pack.data());
  for (auto _ : state) {
    if (packed) {
      (void)kern->GemmPackedB(m, n, k, a.data(), k, pack.data(), nullptr, 0.0f, c.data(), n);
    } else {
      (void)kern->Gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    }
  }
  if (avx2) ops::cpu::SetPackedGemmAvx2(false);
  state.counters["GFLOPs"] =
      benchmark::Counter(2.0 * m * n * k * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

// U [300, 750] packed as it is (forward, op(U) = U: k 300, n 750) or transposed (backward,
// op(U) = Uᵀ: k 750, n 300).
void BM_PackWeight(benchmark::State& state) {
  const bool trans = state.range(0) == 1;
  const int64_t rows = 300, cols = 750;
  const int64_t k = trans ? cols : rows, n = trans ? rows : cols;
  std::vector<float> u(rows * cols, 0.25f);
  ops::Kernels* kern = *ops::GetKernels(core::Device::Cpu());
  std::vector<float> pack(std::max<int64_t>(kern->PackedGemmBytes(k, n), 4) / 4);
  if (kern->PackedGemmBytes(k, n) == 0) {
    state.SkipWithError("no packed GEMM on this CPU");
    return;
  }
  for (auto _ : state) (void)kern->PackGemmB(trans, k, n, u.data(), cols, pack.data());
}

void Args(benchmark::internal::Benchmark* b) {
  for (int h : {150, 256}) {
    for (int bs : {1, 25, 64, 256}) b->Args({h, bs});
  }
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_Sgemm)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_RoundGemm)
    ->ArgsProduct({{0, 1, 2}, {8, 32, 128, 512}})
    ->ArgNames({"packed", "m"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_PackWeight)->Arg(0)->Arg(1)->ArgName("trans")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Engine, train, true)->Apply(Args);
BENCHMARK_CAPTURE(BM_Engine, infer, false)->Apply(Args);
BENCHMARK_CAPTURE(BM_Engine, infer_folded, false, true)
    ->Args({150, 25})
    ->Args({150, 256})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Plan)
    ->Args({64, 0})
    ->Args({256, 0})
    ->Args({256, 1})
    ->Args({256, 2})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_EngineJoin)
    ->ArgsProduct({{4, 16, 64}, {1, 4}, {2}, {0, 1}})
    ->ArgNames({"batch", "joining", "at", "join"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_Finish)->Arg(256)->Iterations(300)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Record)->Args({256, 0})->Args({256, 1})->Iterations(200)->UseManualTime()->Unit(
    benchmark::kMicrosecond);
BENCHMARK(BM_EwKernelPlan)->DenseRange(0, 5)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_Reference)->Args({150, 25})->Args({150, 64})->Apply(bench::Timed);

// Prints engine / reference ratios for the configurations both measured.
class RatioReporter : public bench::RateReporter {
 public:
  void Finalize() override {
    ConsoleReporter::Finalize();
    for (const char* cfg : {"150/25", "150/64"}) {
      const double eng = Rate(std::string("BM_Engine/train/") + cfg + "/real_time");
      const double ref = Rate(std::string("BM_Reference/") + cfg + "/min_time:2.000/real_time");
      if (eng > 0 && ref > 0) {
        std::printf("RATIO engine/serial training hidden/batch %s: %.1fx (%.0f vs %.1f trees/s)\n",
                    cfg, eng / ref, eng, ref);
      }
    }
  }
};

}  // namespace
}  // namespace cavs

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  cavs::bench::ApplyKernelEnvironment("tree_lstm_benchmark");
  cavs::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
