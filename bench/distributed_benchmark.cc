// The data-parallel training step (distributed::DataParallelStep, the step cavs-train runs) of a
// model under each strategy, at the world size it is launched with, on one machine or on the
// emulated cluster (scripts/cluster.sh run -- ...):
//
//   mpirun -np 4 distributed_benchmark [--model=tree-lstm|lstm-lm] [--data=FILE] [--batch=N]
//       [--vocab=V] [--embed=E] [--hidden=H] [--steps=20] [--warmup=3] [--first-warmup=8]
//       [--threads=1]
//       [--strategies=allreduce,ps,...] [--strategy-file=FILE]... [--baseline=1|0]
//       [--unit-times=0|1] [--piece-bytes=-1] [--predict=0|1] [--profile-out=FILE]
//       [--cluster-out=FILE] [--overlap=1|0]
//
// Models:
//   tree-lstm  the binary Tree-LSTM on SST trees (vocabulary 21,701 x embedding 300, row-sparse;
//              the cell with hidden 150, 1.8 MB dense): the sparse-dominated model; --batch trees
//              a rank (25). Data: --data, else $CAVS_BENCH_SST, else ../shared/data/sst next to
//              the source tree, else the bundled synthetic treebank.
//   lstm-lm    an LSTM language model with a large vocabulary: a 10,000 x 512 row-sparse input
//              embedding and a dense 512 x 10,000 output layer (20 MB), hidden 512: the model
//              where communication dominates; --batch sentences a rank (8). Data: --data (one
//              sentence per line, PTB style), else generated sentences (lengths 10 to 34, tokens
//              Zipf-distributed over the vocabulary, so ranks share frequent rows).
//
// Weak scaling: every rank runs --batch samples a step (the global batch is ranks x batch), loss
// summed, gradients through the synchronizer with the engine's hooks (MarkReady as gradients
// become final, Poll between rounds), Adagrad. With --baseline (default) rank 0 first times the
// plain single-process step on the same batch (mean loss, no synchronizer) while the others wait,
// so each row's efficiency (plain step / distributed step) is measured in the same run. Rank 0
// prints one row per strategy: the slowest rank's mean step time and its phases, samples/s over
// all ranks, bytes sent per step (StepStats' payload model, mean over ranks and the busiest
// rank), the bytes each host's network interfaces sent a step (its namespace's /proc/net/dev,
// loopback excluded: 0 on one machine), units, and the efficiency. With --unit-times, each row
// is followed by its units: the median over the steps of when each started and when a poll found
// it complete (ms from BeginStep), the latest rank's: the measured side of cavs-sim's unit table;
// then how long its Start call took (StepStats::unit_start_seconds) and when a poll found each
// of its stages complete (StepStats::unit_stages_done_at), the same.
//
// With --predict, the cost model's side in the same run: before the first strategy every rank
// probes the cluster (ProbeCluster, as --strategy=auto does), the first strategy's measured
// steps are profiled (BuildModelProfile), and each row is followed by the model's prediction for
// its strategy on that profile and cluster (CostModel), its error, and, with --unit-times, each
// unit's predicted start and end beside the measured ones (matched by name). --profile-out and
// --cluster-out write the profile and the probed cluster (cavs-sim's inputs; implies --predict).
//
// --warmup steps run before each strategy's counted ones, and --first-warmup more before the
// first strategy's (on its first batches again, so every strategy counts the same batches): the
// process's first steps over the links run slow for several steps (on the emulated cluster's
// 1 Gbit/s 4 x 1, with 2 warm-up steps the first strategy measured 11 to 17% slower than the
// same units later in the run; with 8, within the steps' noise).
//
// --overlap=0 is DataParallelStep::set_overlap(false) (cavs-train's --sync-overlap=false): the
// hooks do not reach the synchronizer, every unit starts after compute, and the synchronizer's
// CPU share of compute (the hooks' time, printed per row) is none.
//
// --piece-bytes is CommOptions::piece_bytes (cavs-train's --comm-piece-bytes): the PS shards'
// pieces; -1, the default, leaves it to the communicator.
//
// Open MPI's nonblocking algorithms are what the environment sets (cavs-train sets few-round ones
// by default; docs/cluster.md and bench/RESULTS.md say why they matter).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/optimizer.h"
#include "core/parameter.h"
#include "core/random.h"
#include "core/status.h"
#include "distributed/builders.h"
#include "distributed/communicator.h"
#include "distributed/cost_model.h"
#include "distributed/model_profile.h"
#include "distributed/probe.h"
#include "distributed/profiler.h"
#include "distributed/stats.h"
#include "distributed/step.h"
#include "distributed/strategy.h"
#include "distributed/synchronizer.h"
#include "examples/data/sst_reader.h"
#include "examples/data/text_file.h"
#include "examples/data/text_reader.h"
#include "ops/cpu/cpu_parallel.h"
#include "scheduler/engine.h"
#include "vertex/models.h"

namespace cavs {
namespace {

struct Flags {
  std::string model = "tree-lstm";
  std::string data;
  int batch = 0, steps = 20, warmup = 3, first_warmup = 8, threads = 1;
  int64_t vocab = 0, embed = 0, hidden = 0;
  int64_t piece_bytes = -1;  // CommOptions::piece_bytes
  bool baseline = true;
  bool unit_times = false;
  bool predict = false;
  bool overlap = true;
  std::string profile_out, cluster_out;
  std::vector<std::string> strategies = distributed::StrategyBuilderNames();
  std::vector<std::string> strategy_files;
};

struct Row {
  double step_ms = 0, compute_ms = 0, finish_ms = 0, opt_ms = 0;
  double bytes_mean = 0, bytes_max = 0;
  double wire_per_host = 0;       // bytes a step each host's network links sent, mean over hosts
  double hook_ms = 0, polls = 0;  // in the synchronizer's hooks during compute (StepStats)
  double overlap_hook_ms = 0, overlap_polls = 0;  // of those, with a unit in flight
  double hook_mean_ms = 0, compute_max_ms = 0;
  int units = 0;
  // Per unit, with --unit-times: name, and the latest rank's median start and completion, ms.
  std::vector<std::string> unit_names;
  std::vector<double> unit_start_ms, unit_done_ms;
  std::vector<std::vector<double>> unit_stages_ms;  // per unit, each stage's completion
  std::vector<double> unit_start_call_ms;           // per unit, the latest rank's Start call
};

// Bytes this process's network namespace has sent on every interface but loopback
// (/proc/net/dev is per namespace): on the emulated cluster, its host's link.
int64_t WireBytesSent() {
  std::ifstream in("/proc/net/dev");
  std::string line;
  int64_t sent = 0;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string iface = line.substr(0, colon);
    iface.erase(0, iface.find_first_not_of(' '));
    if (iface == "lo") continue;
    std::istringstream fields(line.substr(colon + 1));
    int64_t v[9] = {};
    for (int64_t& x : v) fields >> x;
    sent +=
        v[8];  // receive: bytes packets errs drop fifo frame compressed multicast; transmit: bytes
  }
  return sent;
}

std::string DefaultSst() {
  if (const char* env = std::getenv("CAVS_BENCH_SST")) return env;
  std::string sst = CAVS_SOURCE_DIR "/../shared/data/sst/train.txt";
  if (std::ifstream(sst).good()) return sst;
  return CAVS_SOURCE_DIR "/data/synthetic/train.txt";
}

// A 0|1 flag's value into `out`; false where it is neither.
bool Bit(const std::string& v, bool* out) {
  *out = v == "1";
  return v == "0" || v == "1";
}

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    bool ok = kv.size() == 2;
    const std::string& v = ok ? kv[1] : kv[0];
    if (ok && kv[0] == "--model") {
      f.model = v;
      ok = v == "tree-lstm" || v == "lstm-lm";
    } else if (ok && kv[0] == "--data") {
      f.data = v;
    } else if (ok && kv[0] == "--batch") {
      ok = absl::SimpleAtoi(v, &f.batch) && f.batch >= 1;
    } else if (ok && kv[0] == "--steps") {
      ok = absl::SimpleAtoi(v, &f.steps) && f.steps >= 1;
    } else if (ok && kv[0] == "--warmup") {
      ok = absl::SimpleAtoi(v, &f.warmup) && f.warmup >= 0;
    } else if (ok && kv[0] == "--first-warmup") {
      ok = absl::SimpleAtoi(v, &f.first_warmup) && f.first_warmup >= 0;
    } else if (ok && kv[0] == "--piece-bytes") {
      ok = absl::SimpleAtoi(v, &f.piece_bytes) && f.piece_bytes >= -1;
    } else if (ok && kv[0] == "--threads") {
      ok = absl::SimpleAtoi(v, &f.threads) && f.threads >= 1;
    } else if (ok && kv[0] == "--vocab") {
      ok = absl::SimpleAtoi(v, &f.vocab) && f.vocab >= 4;
    } else if (ok && kv[0] == "--embed") {
      ok = absl::SimpleAtoi(v, &f.embed) && f.embed >= 1;
    } else if (ok && kv[0] == "--hidden") {
      ok = absl::SimpleAtoi(v, &f.hidden) && f.hidden >= 1;
    } else if (ok && kv[0] == "--baseline") {
      ok = Bit(v, &f.baseline);
    } else if (ok && kv[0] == "--unit-times") {
      ok = Bit(v, &f.unit_times);
    } else if (ok && kv[0] == "--overlap") {
      ok = Bit(v, &f.overlap);
    } else if (ok && kv[0] == "--predict") {
      ok = Bit(v, &f.predict);
    } else if (ok && kv[0] == "--profile-out") {
      f.profile_out = v;
      ok = !v.empty();
    } else if (ok && kv[0] == "--cluster-out") {
      f.cluster_out = v;
      ok = !v.empty();
    } else if (ok && kv[0] == "--strategies") {
      f.strategies = v.empty() ? std::vector<std::string>() : absl::StrSplit(v, ',');
    } else if (ok && kv[0] == "--strategy-file") {
      f.strategy_files.push_back(v);
    } else {
      ok = false;
    }
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("bad argument '", argv[i], "'"));
  }
  const bool lm = f.model == "lstm-lm";
  if (f.batch == 0) f.batch = lm ? 8 : 25;
  if (f.vocab == 0) f.vocab = lm ? 10000 : 21701;
  if (f.embed == 0) f.embed = lm ? 512 : 300;
  if (f.hidden == 0) f.hidden = lm ? 512 : 150;
  if (!lm && f.data.empty()) f.data = DefaultSst();
  if (!f.profile_out.empty() || !f.cluster_out.empty()) f.predict = true;
  return f;
}

// Samples of one model: graphs, tokens and labels set.
struct Data {
  std::vector<scheduler::Graph> samples;
  std::string what;
};

absl::StatusOr<Data> LoadData(const Flags& f) {
  Data d;
  if (f.model == "tree-lstm") {
    CAVS_ASSIGN_OR_RETURN(examples::SstDataset sst, examples::LoadSstDataset(f.data, f.data));
    if (sst.vocabulary.size() > f.vocab) {
      return absl::InvalidArgumentError(absl::StrCat(f.data, ": vocabulary ", sst.vocabulary.size(),
                                                     " is larger than the model's ", f.vocab));
    }
    for (const auto& t : sst.train) d.samples.push_back(t.graph);
    d.what = absl::StrCat(f.data, " (", d.samples.size(), " trees, vocabulary ",
                          sst.vocabulary.size(), ")");
    return d;
  }
  if (!f.data.empty()) {
    CAVS_ASSIGN_OR_RETURN(examples::TextDataset text, examples::LoadTextDataset(f.data, ""));
    if (text.vocabulary.size() > f.vocab) {
      return absl::InvalidArgumentError(absl::StrCat(f.data, ": vocabulary ",
                                                     text.vocabulary.size(),
                                                     " is larger than the model's ", f.vocab));
    }
    for (const auto& s : text.train) d.samples.push_back(s.graph);
    d.what = absl::StrCat(f.data, " (", d.samples.size(), " sentences, vocabulary ",
                          text.vocabulary.size(), ")");
    return d;
  }
  // Generated: 4,096 sentences, lengths uniform in [10, 34], tokens Zipf(1) over the vocabulary
  // by inverting its CDF, each vertex labelled with the next token.
  core::Rng rng(7);
  std::vector<double> cdf(f.vocab);
  double total = 0;
  for (int64_t k = 0; k < f.vocab; ++k) cdf[k] = total += 1.0 / (k + 1);
  for (double& c : cdf) c /= total;
  for (int s = 0; s < 4096; ++s) {
    const int n = 10 + static_cast<int>(rng.UniformInt(25));
    scheduler::Graph g = scheduler::Graph::Chain(n + 1);
    std::vector<int32_t> words(n + 1);
    for (int t = 0; t <= n; ++t) {
      words[t] = static_cast<int32_t>(std::lower_bound(cdf.begin(), cdf.end(), rng.Uniform()) -
                                      cdf.begin());
      words[t] = std::min<int32_t>(words[t], static_cast<int32_t>(f.vocab - 1));
    }
    g.tokens = words;
    g.labels.resize(n + 1);
    for (int t = 0; t < n; ++t) g.labels[t] = words[t + 1];
    g.labels[n] = 2;  // end of sentence
    d.samples.push_back(std::move(g));
  }
  d.what = absl::StrCat("generated (", d.samples.size(),
                        " sentences of 11 to 35 tokens, Zipf(1) "
                        "over ",
                        f.vocab, ")");
  return d;
}

// The batch of `rank` at `step`: consecutive samples, wrapping around the data.
std::vector<scheduler::Graph> Batch(const Data& d, const Flags& f, int step, int rank, int world) {
  std::vector<scheduler::Graph> out;
  const size_t first = (static_cast<size_t>(step) * world + rank) * f.batch;
  for (int i = 0; i < f.batch; ++i) out.push_back(d.samples[(first + i) % d.samples.size()]);
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

absl::StatusOr<vertex::Function> Model(const Flags& f) {
  if (f.model == "lstm-lm") {
    return vertex::models::Lstm({f.vocab, f.embed, f.hidden, f.vocab, 0.0f});
  }
  return vertex::models::BinaryTreeLstm({f.vocab, f.embed, f.hidden, 5, 0.0f});
}

// One strategy's run, or the plain single-process step where `strategy` is null (on whichever
// ranks call it; `world` and `rank` place the batches). `extra_warmup` steps (on the first
// batches) run before the --warmup ones. Where `profile` is not null, the measured steps are
// profiled into it (BuildModelProfile: collective, as the whole call is).
absl::StatusOr<Row> Measure(const Data& d, const Flags& f, const distributed::Strategy* strategy,
                            distributed::Communicator* comm, int rank, int world, int extra_warmup,
                            distributed::ModelProfile* profile = nullptr) {
  CAVS_ASSIGN_OR_RETURN(vertex::Function fn, Model(f));
  core::ParameterStore store(1);
  CAVS_ASSIGN_OR_RETURN(auto engine, scheduler::Engine::Create(&fn, &store));
  core::OptimizerConfig oc;
  oc.kind = core::OptimizerKind::kAdagrad;
  oc.lr = 0.05f;
  CAVS_ASSIGN_OR_RETURN(auto optimizer, core::MakeOptimizer(oc));
  std::unique_ptr<distributed::GradientSynchronizer> sync;
  if (strategy != nullptr) {
    CAVS_ASSIGN_OR_RETURN(sync, distributed::GradientSynchronizer::Create(comm, &store, *strategy));
  }
  distributed::DataParallelStep step(&store, optimizer.get(), sync.get());
  step.set_profiling(profile != nullptr);
  step.set_overlap(f.overlap);
  std::vector<distributed::StepTimes> profiled;
  scheduler::RunOptions ro;
  ro.training = true;
  ro.backward = true;
  ro.loss = sync ? scheduler::RunOptions::Loss::kSum : scheduler::RunOptions::Loss::kMean;
  Row row;
  double bytes = 0;
  std::vector<std::vector<double>> started, done, start_call;  // per unit, per step: ms
  std::vector<std::vector<std::vector<double>>> stages;        // per unit, per stage, per step: ms
  if (comm != nullptr && strategy != nullptr) CAVS_RETURN_IF_ERROR(comm->Barrier());
  int64_t wire_start = 0;
  for (int i = 0; i < extra_warmup + f.warmup + f.steps; ++i) {
    const int s = i < extra_warmup ? i : i - extra_warmup;  // the batch's index
    if (i == extra_warmup + f.warmup) wire_start = WireBytesSent();
    const std::vector<scheduler::Graph> batch = Batch(d, f, s, rank, world);
    CAVS_ASSIGN_OR_RETURN(
        distributed::StepTimes t,
        step.Run(Labelled(batch), [&](const distributed::StepHooks& hooks) -> absl::Status {
          scheduler::RunOptions run = ro;
          run.on_gradient_ready = hooks.on_gradient_ready;
          run.on_progress = hooks.on_progress;
          return engine->Run(batch, run).status();
        }));
    if (i < extra_warmup + f.warmup) continue;
    if (profile != nullptr) profiled.push_back(t);
    row.step_ms += 1e3 * t.total() / f.steps;
    row.compute_ms += 1e3 * t.compute / f.steps;
    row.finish_ms += 1e3 * t.finish / f.steps;
    row.opt_ms += 1e3 * t.optimizer / f.steps;
    row.hook_ms += 1e3 * t.sync.hook_seconds / f.steps;
    row.polls += static_cast<double>(t.sync.polls) / f.steps;
    row.overlap_hook_ms += 1e3 * t.overlap_hooks / f.steps;
    row.overlap_polls += static_cast<double>(t.overlap_polls) / f.steps;
    bytes += static_cast<double>(t.sync.bytes_sent) / f.steps;
    row.units = t.sync.units;
    started.resize(t.sync.unit_started_at.size());
    done.resize(t.sync.unit_done_at.size());
    start_call.resize(t.sync.unit_start_seconds.size());
    stages.resize(t.sync.unit_stages_done_at.size());
    for (size_t u = 0; u < started.size(); ++u) {
      started[u].push_back(1e3 * t.sync.unit_started_at[u]);
      done[u].push_back(1e3 * t.sync.unit_done_at[u]);
      start_call[u].push_back(1e3 * t.sync.unit_start_seconds[u]);
      const std::vector<double>& at = t.sync.unit_stages_done_at[u];
      if (stages[u].size() < at.size()) stages[u].resize(at.size());
      for (size_t k = 0; k < at.size(); ++k) stages[u][k].push_back(1e3 * at[k]);
    }
  }
  if (profile != nullptr) {
    CAVS_ASSIGN_OR_RETURN(*profile,
                          distributed::BuildModelProfile(comm, store, profiled, f.batch, f.model));
  }
  if (strategy != nullptr) {
    // Each host's link once: its lowest rank reads the counters, the others report 0.
    CAVS_ASSIGN_OR_RETURN(distributed::Topology topology, comm->DiscoverTopology());
    const double wire = topology.LocalRank(rank) == 0
                            ? static_cast<double>(WireBytesSent() - wire_start) / f.steps
                            : 0.0;
    double wire_mean = 0, wire_max = 0;
    CAVS_RETURN_IF_ERROR(MeanMax(*comm, wire, &wire_mean, &wire_max));
    row.wire_per_host = wire_mean * world / topology.num_hosts();
    double mean_step = 0, max_step = 0, unused = 0;
    CAVS_RETURN_IF_ERROR(MeanMax(*comm, row.hook_ms, &row.hook_mean_ms, &row.hook_ms));
    CAVS_RETURN_IF_ERROR(MeanMax(*comm, row.compute_ms, &unused, &row.compute_max_ms));
    CAVS_RETURN_IF_ERROR(MeanMax(*comm, row.polls, &unused, &row.polls));
    CAVS_RETURN_IF_ERROR(MeanMax(*comm, row.overlap_hook_ms, &unused, &row.overlap_hook_ms));
    CAVS_RETURN_IF_ERROR(MeanMax(*comm, row.overlap_polls, &unused, &row.overlap_polls));
    CAVS_RETURN_IF_ERROR(MeanMax(*comm, row.step_ms, &mean_step, &max_step));
    row.step_ms = max_step;
    CAVS_RETURN_IF_ERROR(MeanMax(*comm, bytes, &row.bytes_mean, &row.bytes_max));
    if (f.unit_times) {
      row.unit_names = sync->UnitNames();
      for (size_t u = 0; u < started.size(); ++u) {
        double mean = 0, latest = 0;
        CAVS_RETURN_IF_ERROR(MeanMax(*comm, distributed::Median(started[u]), &mean, &latest));
        row.unit_start_ms.push_back(latest);
        CAVS_RETURN_IF_ERROR(MeanMax(*comm, distributed::Median(done[u]), &mean, &latest));
        row.unit_done_ms.push_back(latest);
        CAVS_RETURN_IF_ERROR(MeanMax(*comm, distributed::Median(start_call[u]), &mean, &latest));
        row.unit_start_call_ms.push_back(latest);
        // Its stages: as many as the rank with the most runs (a server runs its own).
        double most = 0;
        CAVS_RETURN_IF_ERROR(MeanMax(*comm, static_cast<double>(stages[u].size()), &mean, &most));
        row.unit_stages_ms.emplace_back();
        for (size_t k = 0; k < static_cast<size_t>(most); ++k) {
          const double mine = k < stages[u].size() ? distributed::Median(stages[u][k]) : -1.0;
          CAVS_RETURN_IF_ERROR(MeanMax(*comm, mine, &mean, &latest));
          row.unit_stages_ms.back().push_back(latest);
        }
      }
    }
  }
  return row;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `text` to `path` on the chief; nothing where the path is empty.
absl::Status WriteOutput(const std::string& flag, const std::string& path, bool chief,
                         const std::string& text) {
  if (path.empty() || !chief) return absl::OkStatus();
  const std::optional<examples::WriteFailure> failed = examples::WriteWholeFile(path, text);
  if (!failed.has_value()) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(flag, ": cannot write ", path, ": ", std::strerror(failed->error)));
}

absl::Status Main(int argc, char** argv) {
  CAVS_ASSIGN_OR_RETURN(Flags f, ParseFlags(argc, argv));
  ops::cpu::SetCpuThreads(f.threads);
  CAVS_ASSIGN_OR_RETURN(auto comm,
                        distributed::MakeCommunicator(
                            "auto", {.timeout = absl::Seconds(600), .piece_bytes = f.piece_bytes}));
  CAVS_ASSIGN_OR_RETURN(distributed::Topology topology, comm->DiscoverTopology());
  CAVS_ASSIGN_OR_RETURN(Data d, LoadData(f));
  const int w = comm->world_size(), r = comm->rank();
  const bool chief = r == 0;
  if (chief) {
    std::printf("model %s: vocab %lld x embed %lld, hidden %lld; data %s\n", f.model.c_str(),
                static_cast<long long>(f.vocab), static_cast<long long>(f.embed),
                static_cast<long long>(f.hidden), d.what.c_str());
    std::printf(
        "ranks %d as %s, %d samples per rank per step, %d threads per rank, %d steps "
        "(+%d warmup, +%d more before the first strategy)\n",
        w, topology.Describe().c_str(), f.batch, f.threads, f.steps, f.warmup, f.first_warmup);
  }
  double plain_ms = 0;
  if (f.baseline) {
    if (chief) {
      CAVS_ASSIGN_OR_RETURN(Row plain, Measure(d, f, nullptr, nullptr, 0, 1, 0));
      plain_ms = plain.step_ms;
      std::printf("plain single-process step: %.2f ms (compute %.2f, optimizer %.2f)\n",
                  plain.step_ms, plain.compute_ms, plain.opt_ms);
    }
    CAVS_RETURN_IF_ERROR(comm->Barrier());
  }
  if (chief) {
    std::printf("%-20s %5s %9s %10s %9s %9s %10s %12s %12s %12s %5s %6s\n", "strategy", "ranks",
                "step_ms", "compute_ms", "finish_ms", "optim_ms", "samples/s", "sent_B/step",
                "max_rank_B", "wire_B/host", "units", "eff");
  }
  std::vector<std::pair<std::string, distributed::Strategy>> runs;
  for (const std::string& name : f.strategies) {
    // The engine creates the parameters, so the builders see the real shapes.
    CAVS_ASSIGN_OR_RETURN(vertex::Function fn, Model(f));
    core::ParameterStore store(1);
    CAVS_ASSIGN_OR_RETURN(auto engine, scheduler::Engine::Create(&fn, &store));
    CAVS_ASSIGN_OR_RETURN(distributed::Strategy s, distributed::BuildStrategy(name, store, w));
    runs.emplace_back(name, std::move(s));
  }
  for (const std::string& path : f.strategy_files) {
    CAVS_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
    CAVS_ASSIGN_OR_RETURN(distributed::Strategy s, distributed::ParseStrategy(text));
    runs.emplace_back(s.name.empty() ? path : s.name, std::move(s));
  }
  // The model's side: the cluster probed before any strategy runs, the profile from the first.
  std::optional<distributed::ClusterSpec> cluster;
  std::unique_ptr<distributed::CostModel> model;
  if (f.predict && !runs.empty()) {
    CAVS_ASSIGN_OR_RETURN(distributed::ProbeResult probe,
                          distributed::ProbeCluster(*comm, distributed::ProbeOptions{}));
    cluster = std::move(probe.cluster);
    if (chief) std::printf("probed %s in %.2f s\n", cluster->name.c_str(), probe.seconds);
    CAVS_RETURN_IF_ERROR(WriteOutput("--cluster-out", f.cluster_out, chief,
                                     distributed::SerializeClusterSpec(*cluster)));
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& [name, strategy] = runs[i];
    distributed::ModelProfile profile;
    const bool profiling = cluster.has_value() && model == nullptr;
    CAVS_ASSIGN_OR_RETURN(Row row,
                          Measure(d, f, &strategy, comm.get(), r, w, i == 0 ? f.first_warmup : 0,
                                  profiling ? &profile : nullptr));
    if (profiling) {
      // The profiled strategy's measured step calibrates the cluster, as --strategy=auto's
      // profile does; a profile written out carries it where the strategy is a builder's.
      const std::vector<std::string>& builders = distributed::StrategyBuilderNames();
      if (std::find(builders.begin(), builders.end(), name) != builders.end()) {
        profile.strategy = name;
        profile.step_ms = row.step_ms;
      }
      CAVS_RETURN_IF_ERROR(WriteOutput("--profile-out", f.profile_out, chief,
                                       distributed::SerializeModelProfile(profile)));
      CAVS_ASSIGN_OR_RETURN(
          const distributed::StepCalibration calibration,
          distributed::CalibrateToProfiledStep(profile, *cluster, strategy, 1e-3 * row.step_ms));
      CAVS_ASSIGN_OR_RETURN(
          model, distributed::CostModel::Create(std::move(profile), calibration.cluster));
      if (chief) {
        std::printf("profiled under %s; %s\n", name.c_str(),
                    distributed::DescribeStepCalibration(calibration).c_str());
      }
    }
    std::optional<distributed::Prediction> predicted;
    if (model != nullptr) {
      CAVS_ASSIGN_OR_RETURN(predicted, model->Predict(strategy));
    }
    if (!chief) continue;
    std::printf("%-20s %5d %9.2f %10.2f %9.2f %9.2f %10.1f %12.0f %12.0f %12.0f %5d %6.2f\n",
                name.c_str(), w, row.step_ms, row.compute_ms, row.finish_ms, row.opt_ms,
                1000.0 * w * f.batch / row.step_ms, row.bytes_mean, row.bytes_max,
                row.wire_per_host, row.units, plain_ms > 0 ? plain_ms / row.step_ms : 0.0);
    if (row.hook_ms > 0) {
      std::printf(
          "    in the hooks during compute: %.2f ms a step (mean over ranks %.2f) over %.0f calls;"
          " compute %.2f ms on the slowest rank; with a unit in flight %.2f ms over %.1f calls\n",
          row.hook_ms, row.hook_mean_ms, row.polls, row.compute_max_ms, row.overlap_hook_ms,
          row.overlap_polls);
    }
    if (predicted.has_value()) {
      const double ms = 1e3 * predicted->step_s;
      std::printf(
          "    predicted %.2f ms (compute %.2f with hooks %.2f, exposed %.2f, optimizer %.2f): "
          "measured %+.1f%%\n",
          ms, 1e3 * predicted->compute_s, 1e3 * predicted->hooks_s, 1e3 * predicted->exposed_comm_s,
          1e3 * predicted->optimizer_s, 100.0 * (row.step_ms / ms - 1.0));
    }
    for (size_t u = 0; u < row.unit_names.size(); ++u) {
      std::printf("    %9.2f %9.2f %9.2f  ", row.unit_start_ms[u], row.unit_done_ms[u],
                  row.unit_done_ms[u] - row.unit_start_ms[u]);
      if (predicted.has_value()) {
        const auto it = std::find_if(
            predicted->units.begin(), predicted->units.end(),
            [&](const distributed::UnitPrediction& p) { return p.name == row.unit_names[u]; });
        if (it != predicted->units.end()) {
          std::printf("predicted %9.2f %9.2f %9.2f  ", 1e3 * it->start_s, 1e3 * it->end_s,
                      1e3 * (it->end_s - it->start_s));
        } else {
          std::printf("predicted %29s  ", "(no unit of that name)");
        }
      }
      std::printf("%s; Start took %.2f; stages done at", row.unit_names[u].c_str(),
                  row.unit_start_call_ms[u]);
      for (double at : row.unit_stages_ms[u]) std::printf(" %.2f", at);
      std::printf("\n");
    }
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
