// Data-parallel training step of the binary Tree-LSTM (vocabulary 21,701 x embedding 300, a
// row-sparse embedding table, plus the dense cell with hidden 150) under every strategy
// builder, at the world size it is launched with:
//
//   mpirun -np 4 distributed_benchmark [--data=FILE] [--batch=25] [--steps=20] [--warmup=3]
//                                      [--threads=1] [--strategies=allreduce,ps,...]
//
// A plain timed driver (Google Benchmark does not run collectives in lockstep): weak scaling,
// each rank runs --batch trees per step (global batch = ranks x batch), loss summed, gradients
// through distributed::GradientSynchronizer, Adagrad. At one rank it also times the plain
// single-process step (mean loss, no synchronizer) as the baseline, in the same run. Rank 0
// prints one row per strategy: mean step time and its phases, trees/s over all ranks, bytes
// sent per step (StepStats, mean over ranks and the busiest rank) and units.
//
// Open MPI's collective algorithms matter more than the strategy on one machine (RESULTS.md):
// the binary uses whatever the environment says (cavs-train sets few-round ones by default;
// here set OMPI_MCA_coll_libnbc_ireduce_algorithm=2 and ..._iallreduce_algorithm=4 to match).
//
// Data: the SST train trees at --data (default $CAVS_BENCH_SST, else ../shared/data/sst next
// to the source tree, else the bundled synthetic treebank). The model's vocabulary is 21,701
// (SST's) whatever the data's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/optimizer.h"
#include "core/parameter.h"
#include "core/status.h"
#include "distributed/builders.h"
#include "distributed/communicator.h"
#include "distributed/synchronizer.h"
#include "examples/data/sst_reader.h"
#include "ops/cpu/cpu_parallel.h"
#include "scheduler/engine.h"
#include "vertex/models.h"

namespace cavs {
namespace {

constexpr int64_t kVocab = 21701, kEmbed = 300, kHidden = 150;

struct Flags {
  std::string data;
  int batch = 25, steps = 20, warmup = 3, threads = 1;
  std::vector<std::string> strategies = distributed::StrategyBuilderNames();
};

struct Row {
  double step_ms = 0, run_ms = 0, sync_ms = 0, opt_ms = 0;
  double bytes_mean = 0, bytes_max = 0;
  int units = 0, early = 0;
};

double Ms(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::string DefaultData() {
  if (const char* env = std::getenv("CAVS_BENCH_SST")) return env;
  std::string sst = CAVS_SOURCE_DIR "/../shared/data/sst/train.txt";
  if (FILE* f = std::fopen(sst.c_str(), "r")) {
    std::fclose(f);
    return sst;
  }
  return CAVS_SOURCE_DIR "/data/synthetic/train.txt";
}

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  f.data = DefaultData();
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    bool ok = kv.size() == 2;
    if (ok && kv[0] == "--data")
      f.data = kv[1];
    else if (ok && kv[0] == "--batch")
      ok = absl::SimpleAtoi(kv[1], &f.batch);
    else if (ok && kv[0] == "--steps")
      ok = absl::SimpleAtoi(kv[1], &f.steps);
    else if (ok && kv[0] == "--warmup")
      ok = absl::SimpleAtoi(kv[1], &f.warmup);
    else if (ok && kv[0] == "--threads")
      ok = absl::SimpleAtoi(kv[1], &f.threads);
    else if (ok && kv[0] == "--strategies")
      f.strategies = absl::StrSplit(kv[1], ',');
    else
      ok = false;
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("bad argument '", argv[i], "'"));
  }
  if (f.batch < 1 || f.steps < 1 || f.warmup < 0 || f.threads < 1) {
    return absl::InvalidArgumentError("--batch, --steps and --threads must be >= 1");
  }
  return f;
}

// The batch of `rank` at `step`: consecutive trees, wrapping around the data.
std::vector<scheduler::Graph> Batch(const examples::SstDataset& d, const Flags& f, int step,
                                    int rank, int world) {
  std::vector<scheduler::Graph> out;
  const size_t first = (static_cast<size_t>(step) * world + rank) * f.batch;
  for (int i = 0; i < f.batch; ++i) out.push_back(d.train[(first + i) % d.train.size()].graph);
  return out;
}

int64_t Labelled(const std::vector<scheduler::Graph>& graphs) {
  int64_t n = 0;
  for (const auto& g : graphs)
    n += std::count_if(g.labels.begin(), g.labels.end(), [](int32_t l) { return l >= 0; });
  return n;
}

// Mean and maximum over ranks of `x`.
absl::Status MeanMax(distributed::Communicator& comm, double x, double* mean, double* max) {
  core::Tensor mine = core::Tensor::FromVector({static_cast<float>(x)}, {1});
  core::Tensor all = core::Tensor::Host(core::Shape{comm.world_size()});
  CAVS_RETURN_IF_ERROR(comm.AllGather(mine, all));
  std::vector<float> v = all.ToVector();
  *mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  *max = *std::max_element(v.begin(), v.end());
  return absl::OkStatus();
}

// One strategy's run ("none": the single-process step, world size 1 only).
absl::StatusOr<Row> Measure(const examples::SstDataset& d, const Flags& f, const std::string& name,
                            distributed::Communicator& comm) {
  vertex::models::CellConfig cell{kVocab, kEmbed, kHidden, 5, 0.0f};
  CAVS_ASSIGN_OR_RETURN(vertex::Function fn, vertex::models::BinaryTreeLstm(cell));
  core::ParameterStore store(1);
  CAVS_ASSIGN_OR_RETURN(auto engine, scheduler::Engine::Create(&fn, &store));
  core::OptimizerConfig oc;
  oc.kind = core::OptimizerKind::kAdagrad;
  oc.lr = 0.05f;
  CAVS_ASSIGN_OR_RETURN(auto optimizer, core::MakeOptimizer(oc));
  std::unique_ptr<distributed::GradientSynchronizer> sync;
  if (name != "none") {
    CAVS_ASSIGN_OR_RETURN(distributed::Strategy s,
                          distributed::BuildStrategy(name, store, comm.world_size()));
    CAVS_ASSIGN_OR_RETURN(sync, distributed::GradientSynchronizer::Create(&comm, &store, s));
  }
  scheduler::RunOptions ro;
  ro.loss = sync ? scheduler::RunOptions::Loss::kSum : scheduler::RunOptions::Loss::kMean;
  Row row;
  double bytes = 0;
  CAVS_RETURN_IF_ERROR(comm.Barrier());
  for (int step = 0; step < f.warmup + f.steps; ++step) {
    std::vector<scheduler::Graph> batch = Batch(d, f, step, comm.rank(), comm.world_size());
    auto t0 = std::chrono::steady_clock::now();
    CAVS_RETURN_IF_ERROR(store.ZeroGrad());
    if (sync) CAVS_RETURN_IF_ERROR(sync->BeginStep(Labelled(batch)));
    CAVS_RETURN_IF_ERROR(engine->Run(batch, ro).status());
    const auto& params = store.parameters();
    for (auto it = params.rbegin(); sync && it != params.rend(); ++it) {
      CAVS_RETURN_IF_ERROR(sync->MarkReady(it->get()));
    }
    auto t1 = std::chrono::steady_clock::now();
    distributed::StepStats stats;
    if (sync) {
      CAVS_ASSIGN_OR_RETURN(stats, sync->Finish());
    }
    auto t2 = std::chrono::steady_clock::now();
    CAVS_RETURN_IF_ERROR(optimizer->Step(store));
    auto t3 = std::chrono::steady_clock::now();
    if (step < f.warmup) continue;
    row.step_ms += Ms(t0, t3) / f.steps;
    row.run_ms += Ms(t0, t1) / f.steps;
    row.sync_ms += Ms(t1, t2) / f.steps;
    row.opt_ms += Ms(t2, t3) / f.steps;
    bytes += static_cast<double>(stats.bytes_sent) / f.steps;
    row.units = stats.units;
    row.early = stats.units_started_early;
  }
  double step_max = 0;
  CAVS_RETURN_IF_ERROR(MeanMax(comm, row.step_ms, &row.step_ms, &step_max));
  CAVS_RETURN_IF_ERROR(MeanMax(comm, bytes, &row.bytes_mean, &row.bytes_max));
  return row;
}

absl::Status Main(int argc, char** argv) {
  CAVS_ASSIGN_OR_RETURN(Flags f, ParseFlags(argc, argv));
  ops::SetCpuThreads(f.threads);
  CAVS_ASSIGN_OR_RETURN(auto comm, distributed::MakeCommunicator("auto", {absl::Seconds(120)}));
  CAVS_ASSIGN_OR_RETURN(examples::SstDataset d, examples::LoadSstDataset(f.data, f.data));
  if (d.vocabulary.size() > kVocab) {
    return absl::InvalidArgumentError(absl::StrCat(f.data, ": vocabulary ", d.vocabulary.size(),
                                                   " is larger than the model's ", kVocab));
  }
  const int w = comm->world_size();
  const bool chief = comm->rank() == 0;
  if (chief) {
    std::printf("data %s (%zu trees, vocabulary %d); model vocab %ld x embed %ld, hidden %ld\n",
                f.data.c_str(), d.train.size(), d.vocabulary.size(), long{kVocab}, long{kEmbed},
                long{kHidden});
    std::printf(
        "ranks %d, %d trees per rank per step, %d threads per rank, %d steps (+%d warmup)\n", w,
        f.batch, f.threads, f.steps, f.warmup);
    std::printf("%-15s %5s %9s %9s %9s %9s %9s %13s %13s %5s\n", "strategy", "ranks", "step_ms",
                "fwdbwd_ms", "sync_ms", "optim_ms", "trees/s", "sent_B/step", "max_rank_B",
                "units");
  }
  std::vector<std::string> names = f.strategies;
  if (w == 1) names.insert(names.begin(), "none");
  for (const std::string& name : names) {
    CAVS_ASSIGN_OR_RETURN(Row r, Measure(d, f, name, *comm));
    if (!chief) continue;
    std::printf("%-15s %5d %9.2f %9.2f %9.2f %9.2f %9.1f %13.0f %13.0f %5d\n", name.c_str(), w,
                r.step_ms, r.run_ms, r.sync_ms, r.opt_ms, 1000.0 * w * f.batch / r.step_ms,
                r.bytes_mean, r.bytes_max, r.units);
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace cavs

int main(int argc, char** argv) {
  absl::Status s = cavs::Main(argc, argv);
  if (!s.ok()) {
    std::fprintf(stderr, "distributed_benchmark: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
