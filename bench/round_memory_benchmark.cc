// Host memory of a batch beyond its activations, per round: one chain-shaped tree
// of N rounds, (2 (2 a) (2 (2 a) ... (2 a))) -- a leaf and an inner vertex per round, the shape
// of a long sentence -- trained one step (forward, backward) by the binary Tree-LSTM on the CPU.
//
// Every operator new of the process is counted, so the figure is what the engine keeps on the
// heap while it runs the batch: the plan's index arrays, the recorded launches and fused
// programs, the upload staging. The activations live in the arena, which the caching allocator
// takes with aligned_alloc, outside the count; it is reported beside (arena_B_per_round).
// Counters: host_B_per_round = (peak heap during Run - heap before) / rounds; the commands
// recorded per round (EngineStats::commands, a GEMM joined to its program counted once) and the
// fused-program instructions of the batch (EngineStats::program_instrs).
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "bench/kernel_environment.h"
#include "core/parameter.h"
#include "scheduler/engine.h"
#include "scheduler/graph.h"
#include "vertex/models.h"

namespace {

std::atomic<int64_t> g_live{0};  // bytes allocated by operator new and not freed
std::atomic<int64_t> g_peak{0};  // the highest g_live since the last reset

void Count(int64_t bytes) {
  const int64_t live = g_live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

}  // namespace

void* operator new(std::size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  Count(static_cast<int64_t>(malloc_usable_size(p)));
  return p;
}
void operator delete(void* p) noexcept {
  if (p == nullptr) return;
  Count(-static_cast<int64_t>(malloc_usable_size(p)));
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }

namespace cavs {
namespace {

// A leaf and an inner vertex per round: round r's inner vertex has round r's leaf and round
// r-1's vertex as children.
scheduler::Graph Chain(int rounds) {
  scheduler::Graph g;
  int32_t last = g.AddVertex({}, /*token=*/0, /*label=*/2);
  for (int r = 1; r < rounds; ++r) {
    const int32_t leaf = g.AddVertex({}, 0, 2);
    last = g.AddVertex({leaf, last}, -1, 2);
  }
  return g;
}

void BM_HostMemoryPerRound(benchmark::State& state) {
  const int rounds = static_cast<int>(state.range(0));
  vertex::models::CellConfig c;
  c.vocab = 2;
  c.embed = state.range(1);
  c.hidden = state.range(1);
  absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(c);
  core::ParameterStore store(1);
  absl::StatusOr<std::unique_ptr<scheduler::Engine>> engine =
      f.ok() ? scheduler::Engine::Create(&*f, &store) : f.status();
  if (!engine.ok()) return state.SkipWithError(engine.status().ToString().c_str());
  const std::vector<scheduler::Graph> batch = {Chain(rounds)};
  scheduler::RunOptions ro;
  ro.training = true;
  ro.backward = true;
  double host = 0, arena = 0;
  for (auto _ : state) {
    (void)store.ZeroGrad();
    const int64_t before = g_live.load();
    g_peak.store(before);
    absl::StatusOr<scheduler::RunResult> r = (*engine)->Run(batch, ro);
    if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
    host = static_cast<double>(g_peak.load() - before);
    arena = static_cast<double>((*engine)->stats().arena_bytes);
  }
  const double n = static_cast<double>((*engine)->stats().rounds);
  state.counters["rounds"] = n;
  state.counters["host_B_per_round"] = host / n;
  state.counters["arena_B_per_round"] = arena / n;
  state.counters["commands_per_round"] =
      static_cast<double>((*engine)->stats().commands - (*engine)->stats().gemm_programs) / n;
  state.counters["program_instrs"] = static_cast<double>((*engine)->stats().program_instrs);
}

BENCHMARK(BM_HostMemoryPerRound)
    ->ArgNames({"rounds", "hidden"})
    ->Args({1000, 8})
    ->Args({4000, 8})
    ->Args({1000, 150})
    ->Args({4000, 150})
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace cavs

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  cavs::bench::ApplyKernelEnvironment("round_memory_benchmark");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
