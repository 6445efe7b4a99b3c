// Trainer under mpirun: the communicator, the strategy and the gradient synchronizer; one
// distributed epoch and step; sums over ranks. See trainer.h for the scheme.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status.h"
#include "distributed/builders.h"
#include "distributed/verify.h"
#include "examples/trainer/report.h"
#include "examples/trainer/trainer.h"

namespace cavs::trainer {
namespace {

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

int64_t CountLabelled(const std::vector<scheduler::Graph>& graphs) {
  int64_t n = 0;
  for (const scheduler::Graph& g : graphs) {
    for (int32_t label : g.labels) n += label >= 0 ? 1 : 0;
  }
  return n;
}

absl::StatusOr<distributed::Strategy> ReadStrategyFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("--strategy-file: cannot read ", path));
  std::stringstream text;
  text << file.rdbuf();
  std::string bytes = text.str();
  // A UTF-8 byte order mark (some editors write one) is not part of the first line.
  if (bytes.rfind("\xEF\xBB\xBF", 0) == 0) bytes.erase(0, 3);
  absl::StatusOr<distributed::Strategy> strategy = distributed::ParseStrategy(bytes);
  if (!strategy.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", strategy.status().message()));
  }
  return strategy;
}

// A peer that stopped answering: say where the work so far is.
absl::Status Annotate(const absl::Status& s, int64_t step, const std::string& checkpoint_dir) {
  std::string hint = checkpoint_dir.empty()
                         ? ""
                         : absl::StrCat("; the last complete checkpoint in ", checkpoint_dir,
                                        " resumes with --resume at the same number of ranks");
  return absl::Status(s.code(), absl::StrCat("step ", step + 1, ": ", s.message(), hint));
}

}  // namespace

std::pair<size_t, size_t> RankSlice(size_t begin, size_t end, int rank, int world_size) {
  const size_t n = end - begin, w = static_cast<size_t>(world_size), r = static_cast<size_t>(rank);
  const size_t base = n / w, extra = n % w;
  const size_t first = begin + r * base + std::min(r, extra);
  return {first, first + base + (r < extra ? 1 : 0)};
}

absl::Status Trainer::SetUpDistributed() {
  comm_ = options_.comm;
  if (comm_ == nullptr) {
    distributed::CommOptions co;
    co.timeout = absl::Seconds(config_.comm_timeout);
    co.piece_bytes = config_.comm_piece_bytes;
    CAVS_ASSIGN_OR_RETURN(owned_comm_, distributed::MakeCommunicator("auto", co));
    comm_ = owned_comm_.get();
  }
  trace_ = TraceRecorder(!config_.trace.empty(), comm_->rank());
  if (comm_->world_size() == 1) {  // the single-process loop
    if (!config_.strategy.empty() || !config_.strategy_file.empty()) {
      Say("note: one process: --strategy and --strategy-file have no effect");
    }
    return absl::OkStatus();
  }
  // Before the strategy and the parameters are compared: a rank started with other flags is
  // named by its flag, and the ranks agree on --epochs, which no parameter shows (a rank with
  // fewer epochs would finish while the others wait for it until --comm-timeout).
  std::vector<Setting> settings = ResultSettings();
  settings.push_back({"epochs", absl::StrCat(config_.epochs), "--epochs"});
  settings.push_back({"dev_samples", absl::StrCat(data_.dev.size()),
                      "the number of dev samples (--dev, --max-dev, --dev-fraction)"});
  settings.push_back(
      {"test_samples", absl::StrCat(data_.test.size()), "the number of test samples (--test)"});
  settings.push_back({"sync_overlap", config_.sync_overlap ? "true" : "false", "--sync-overlap"});
  if (config_.strategy == "auto") {
    // The search's collectives follow these: a rank with other counts would leave the profile
    // or a trial at another step than its peers.
    const TrainerConfig& c = config_;
    settings.insert(
        settings.end(),
        {{"auto_steps", absl::StrCat(c.auto_steps), "--auto-steps"},
         {"auto_rounds", absl::StrCat(c.auto_rounds), "--auto-rounds"},
         {"auto_trial_seconds", absl::StrCat(c.auto_trial_seconds), "--auto-trial-seconds"},
         {"auto_profile_steps", absl::StrCat(c.auto_profile_steps), "--auto-profile-steps"},
         {"auto_candidates", absl::StrCat(c.auto_candidates), "--auto-candidates"},
         {"auto_reserve", absl::StrCat(c.auto_reserve), "--auto-reserve"},
         {"auto_builders", absl::StrCat(c.auto_builders), "--auto-builders"},
         {"auto_equal_work", absl::StrCat(c.auto_equal_work), "--auto-equal-work"},
         {"auto_cutoff", absl::StrCat(c.auto_cutoff), "--auto-cutoff"},
         {"auto_early", c.auto_early, "--auto-early"},
         {"allow_compression", c.allow_compression ? "true" : "false", "--allow-compression"}});
  }
  CAVS_RETURN_IF_ERROR(CheckRanksAgree(settings));
  if (config_.strategy == "auto") {
    distributed::AutoOptions ao;
    ao.profile_steps = config_.auto_profile_steps + 1;  // the first is not counted
    ao.trial_steps = config_.auto_steps + (config_.auto_steps > 1 ? 1 : 0);
    ao.trial_rounds = config_.auto_rounds;
    ao.trial_seconds = config_.auto_trial_seconds;
    ao.candidates = config_.auto_candidates;
    ao.reserve = config_.auto_reserve;
    ao.try_builders = config_.auto_builders == 1;
    ao.equal_work = config_.auto_equal_work == 1;
    ao.cutoff = config_.auto_cutoff;
    ao.early = config_.auto_early;
    ao.allow_compression = config_.allow_compression;
    ao.overlap = config_.sync_overlap;
    ao.batch_per_rank = (config_.batch + comm_->world_size() - 1) / comm_->world_size();
    ao.model_name = config_.model;
    CAVS_ASSIGN_OR_RETURN(
        auto_, distributed::AutoStrategy::Create(comm_, store_.get(), optimizer_.get(), ao));
    Say(absl::StrCat("distributed: ", comm_->world_size(), " ranks (", comm_->backend(),
                     "), strategy auto: ", auto_->cluster().name, " in ",
                     absl::StrFormat("%.2f", auto_->probe_seconds()),
                     " s; profiling, then trying strategies"));
    if (!config_.cluster_out.empty() && is_chief()) {
      CAVS_RETURN_IF_ERROR(WriteTextFile("--cluster-out", config_.cluster_out,
                                         distributed::SerializeClusterSpec(auto_->cluster())));
    }
    return absl::OkStatus();
  }
  distributed::Strategy strategy;
  if (!config_.strategy_file.empty()) {
    CAVS_ASSIGN_OR_RETURN(strategy, ReadStrategyFile(config_.strategy_file));
  } else {
    const std::string name = config_.strategy.empty() ? "allreduce" : config_.strategy;
    CAVS_ASSIGN_OR_RETURN(strategy, distributed::BuildStrategy(name, *store_, comm_->world_size()));
  }
  // Collective: VerifyConsistent before step 1 (an error names the parameter on every rank).
  CAVS_ASSIGN_OR_RETURN(sync_,
                        distributed::GradientSynchronizer::Create(comm_, store_.get(), strategy));
  step_ =
      std::make_unique<distributed::DataParallelStep>(store_.get(), optimizer_.get(), sync_.get());
  step_->set_overlap(config_.sync_overlap);
  Say(absl::StrCat("distributed: ", comm_->world_size(), " ranks (", comm_->backend(),
                   "), strategy ", strategy.name, " (", sync_->num_units(), " units)"));
  return absl::OkStatus();
}

absl::Status Trainer::CheckRanksAgree(const std::vector<Setting>& settings) {
  std::vector<std::string> values;
  for (const Setting& s : settings) values.push_back(s.key + "=" + s.value);
  // The same first difference on every rank: settings in order, then ranks in order.
  CAVS_ASSIGN_OR_RETURN(std::optional<distributed::RankDifference> d,
                        distributed::FirstDifference(*comm_, values));
  if (!d.has_value()) return absl::OkStatus();
  const Setting& s = settings[d->index];
  return absl::FailedPreconditionError(absl::StrCat(
      "ranks disagree on ", s.source, ": rank ", d->rank, " differs from rank 0 (rank ", rank(),
      " has ", s.key, "=", s.value, "; start every rank with the same flags and files)"));
}

// After a resume: every rank must continue from the same checkpoint.
absl::Status Trainer::CheckSameRun() {
  constexpr char kSource[] = "the checkpoint resumed (--resume, --checkpoint-dir)";
  return CheckRanksAgree({{"resumed_epoch", absl::StrCat(epochs_done_), kSource},
                          {"resumed_step", absl::StrCat(optimizer_->step()), kSource},
                          {"best_epoch_kept", absl::StrCat(best_.epoch), kSource}});
}

absl::Status Trainer::SumOverRanks(std::vector<double>* reals, std::vector<int64_t>* counts) {
  const int64_t nr = static_cast<int64_t>(reals->size()), w = world_size();
  core::Tensor c =
      core::Tensor::Host(core::Shape{static_cast<int64_t>(counts->size())}, core::DType::kInt64);
  std::copy(counts->begin(), counts->end(), c.data<int64_t>());
  CAVS_RETURN_IF_ERROR(comm_->AllReduce(c));
  std::copy(c.data<int64_t>(), c.data<int64_t>() + counts->size(), counts->begin());
  // Doubles travel as their bits and are summed in rank order: the same sum on every rank.
  core::Tensor mine = core::Tensor::Host(core::Shape{nr}, core::DType::kInt64);
  core::Tensor all = core::Tensor::Host(core::Shape{nr * w}, core::DType::kInt64);
  std::memcpy(mine.data<int64_t>(), reals->data(), nr * sizeof(double));
  CAVS_RETURN_IF_ERROR(comm_->AllGather(mine, all));
  for (int64_t i = 0; i < nr; ++i) {
    double sum = 0;
    for (int64_t r = 0; r < w; ++r) {
      double x;
      std::memcpy(&x, all.data<int64_t>() + r * nr + i, sizeof(double));
      sum += x;
    }
    (*reals)[i] = sum;
  }
  return absl::OkStatus();
}

absl::StatusOr<double> Trainer::TrainEpochDistributed(int epoch, double* trees_per_sec) {
  const auto& train = data_.train;
  std::vector<size_t> order(train.size());
  std::iota(order.begin(), order.end(), size_t{0});
  shuffle_rng_.Shuffle(order);  // the same order on every rank
  const bool draw = options_.progress && options_.out != nullptr && is_chief();
  ProgressBar bar(options_.out, draw);
  bar.Start(epoch, static_cast<int64_t>(train.size()));
  auto start = std::chrono::steady_clock::now();
  double loss_sum = 0.0;
  int64_t labelled = 0;
  // This rank's slice of each step's global batch, planned ahead as in TrainEpoch (with
  // PlanThreads() threads; none on the CPU by default).
  std::unique_ptr<scheduler::PlanQueue> queue =
      QueueBatches(train, order, 0, train.size(), config_.batch, /*rank_slice=*/true);
  for (size_t begin = 0; begin < train.size(); begin += config_.batch) {
    const size_t end = std::min(train.size(), begin + config_.batch);
    CAVS_ASSIGN_OR_RETURN(scheduler::RunResult r, DistributedStep(*queue));
    loss_sum += r.loss_sum;
    labelled += r.labelled;
    bar.Update(static_cast<int64_t>(end), labelled > 0 ? loss_sum / labelled : 0.0);
  }
  bar.Finish();
  std::vector<double> reals = {loss_sum};
  std::vector<int64_t> counts = {labelled};
  CAVS_RETURN_IF_ERROR(SumOverRanks(&reals, &counts));
  const double seconds = Since(start);
  *trees_per_sec = seconds > 0 ? train.size() / seconds : 0.0;
  return counts[0] > 0 ? reals[0] / counts[0] : 0.0;
}

// Once --strategy=auto has decided: its report and chosen strategy (rank 0), the profile.
absl::Status Trainer::ReportAutoStrategy() {
  if (!is_chief()) return absl::OkStatus();
  const distributed::AutoCandidate& chosen = auto_->chosen();
  Say(auto_->Report());
  Say(absl::StrCat("auto strategy chosen: ", chosen.name, ", ", chosen.prediction.units.size(),
                   " units; as a strategy file (--strategy-file):\n",
                   distributed::SerializeStrategy(chosen.strategy)));
  return WriteAutoProfile();
}

absl::Status Trainer::WriteAutoProfile() {
  if (config_.profile_out.empty()) return absl::OkStatus();
  return WriteTextFile("--profile-out", config_.profile_out,
                       distributed::SerializeModelProfile(auto_->profile()));
}

absl::Status Trainer::ConcludeAutoStrategy() {
  CAVS_RETURN_IF_ERROR(auto_->Conclude());
  if (auto_->decided()) return ReportAutoStrategy();
  if (!is_chief()) return absl::OkStatus();
  const std::string under = auto_->synchronizer()->strategy().name;
  if (auto_->profiling()) {
    Say(absl::StrCat("auto strategy: the run ended while profiling (", auto_->profiled_steps(),
                     " of ", config_.auto_profile_steps + 1,
                     " steps): no strategy was chosen, it trained under '", under,
                     "'; give it more steps (--epochs) or profile fewer (--auto-profile-steps)"));
    return absl::OkStatus();
  }
  Say(absl::StrCat("auto strategy: the run ended before a trial step was counted (",
                   auto_->trial_steps_run(), " of the ", auto_->trial_steps_planned(),
                   " trial steps planned): no strategy was chosen, it trained under '", under,
                   "'; give it more steps (--epochs)"));
  return WriteAutoProfile();
}

// One step on this rank's slice of the step's global batch, the next from `queue`.
absl::StatusOr<scheduler::RunResult> Trainer::DistributedStep(scheduler::PlanQueue& queue) {
  const int64_t step = optimizer_->step(), t0 = TraceRecorder::Now();
  CAVS_ASSIGN_OR_RETURN(scheduler::PlannedBatch planned, queue.Next());
  const std::vector<scheduler::Graph>& batch = *planned.graphs;
  const int64_t local = CountLabelled(batch);
  trace_.Span("data", t0,
              {{"step", step}, {"samples", int64_t(batch.size())}, {"labelled", local}});
  const int64_t t1 = TraceRecorder::Now();
  scheduler::RunResult r;
  int rounds = 0;
  // On a rank without samples the step joins with zero gradients and count 0.
  auto compute = [&](const distributed::StepHooks& hooks) -> absl::Status {
    scheduler::RunOptions ro;
    ro.training = true;
    ro.backward = true;
    ro.loss = scheduler::RunOptions::Loss::kSum;
    ro.dropout_seed =
        core::HashName(absl::StrCat("dropout:", config_.seed, ":", step, ":", rank()));
    // Overlap: the synchronizer starts each unit as soon as its gradients are final (on the
    // CPU the output layer's before the backward rounds, the rest as their weight-gradient
    // GEMMs finish) and drives the ones in flight between rounds.
    ro.on_gradient_ready = hooks.on_gradient_ready;
    ro.on_progress = hooks.on_progress;
    CAVS_ASSIGN_OR_RETURN(r, engine_->Run(planned.plan, ro));
    rounds = engine_->stats().rounds;
    if (r.labelled != local) {
      return absl::InternalError(
          absl::StrCat("engine counted ", r.labelled, " labelled vertices, the trainer ", local));
    }
    return absl::OkStatus();
  };
  const bool deciding = auto_ != nullptr && !auto_->decided();
  absl::StatusOr<distributed::StepTimes> times =
      auto_ != nullptr ? auto_->Run(local, compute, /*run_empty=*/!batch.empty())
                       : step_->Run(local, compute, /*run_empty=*/!batch.empty());
  if (!times.ok()) return Annotate(times.status(), step, config_.checkpoint_dir);
  if (deciding && auto_->decided()) CAVS_RETURN_IF_ERROR(ReportAutoStrategy());
  const distributed::StepStats& stats = times->sync;
  last_stats_ = stats;
  const int64_t t2 = t1 + static_cast<int64_t>(times->compute * 1e6);
  const int64_t t3 = t2 + static_cast<int64_t>(times->finish * 1e6);
  trace_.SpanTo("forward+backward", t1, t2,
                {{"step", step}, {"rounds", rounds}, {"rows", planned.plan.num_rows}});
  trace_.SpanTo("gradient sync", t2, t3,
                {{"step", step},
                 {"bytes_sent", stats.bytes_sent},
                 {"bytes_received", stats.bytes_received},
                 {"units", stats.units},
                 {"units_started_early", stats.units_started_early},
                 {"global_count", stats.global_count}});
  trace_.SpanTo("optimizer", t3, t3 + static_cast<int64_t>(times->optimizer * 1e6),
                {{"step", step}});
  if (options_.after_step) options_.after_step(optimizer_->step());
  return r;
}

}  // namespace cavs::trainer
