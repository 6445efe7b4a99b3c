#include "distributed/auto_strategy.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "core/tensor.h"
#include "distributed/builders.h"
#include "distributed/profiler.h"
#include "distributed/stats.h"
#include "distributed/strategy_search.h"

namespace cavs::distributed {

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Per index, the largest value over ranks (doubles through int64 bits: every rank gets the same).
absl::StatusOr<std::vector<double>> MaxOverRanks(Communicator& comm, const std::vector<double>& v) {
  const int n = static_cast<int>(v.size()), w = comm.world_size();
  core::Tensor mine = core::Tensor::Host({std::max(n, 1)}, core::DType::kInt64);
  std::memcpy(mine.raw_data(), v.data(), n * sizeof(double));
  core::Tensor all = core::Tensor::Host({w * std::max(n, 1)}, core::DType::kInt64);
  CAVS_RETURN_IF_ERROR(comm.AllGather(mine, all));
  std::vector<double> out(v.size(), 0.0);
  for (int q = 0; q < w; ++q) {
    for (int i = 0; i < n; ++i) {
      double x;
      std::memcpy(&x, static_cast<const char*>(all.raw_data()) + (q * std::max(n, 1) + i) * 8, 8);
      out[i] = q == 0 ? x : std::max(out[i], x);
    }
  }
  return out;
}

// The profile's steps that count: the first warms the strategy up (as in a trial), where there
// are others.
std::vector<double> CountedProfileSteps(const std::vector<double>& steps) {
  return {steps.begin() + (steps.size() > 1 ? 1 : 0), steps.end()};
}

// The same synchronization up to the strategy's name. Where every host has one rank a
// hierarchical bucket is its flat allreduce (no reduce or broadcast within a host: the same
// allreduce over the same ranks), so `hier-allreduce` is `allreduce` there, tried once.
bool SameSync(const Strategy& a, const Strategy& b, const ClusterSpec& cluster) {
  if (a.world_size != b.world_size || a.params.size() != b.params.size()) return false;
  const bool flat_hosts = std::all_of(cluster.hosts.begin(), cluster.hosts.end(),
                                      [](const HostSpec& h) { return h.ranks == 1; });
  auto flat = [&](ParamSync sync) {
    if (auto* ar = std::get_if<AllReduceSync>(&sync); ar != nullptr && flat_hosts) {
      ar->topology = AllReduceTopology::kFlat;
    }
    return sync;
  };
  for (size_t i = 0; i < a.params.size(); ++i) {
    if (a.params[i].param != b.params[i].param ||
        flat(a.params[i].sync) != flat(b.params[i].sync)) {
      return false;
    }
  }
  return true;
}

}  // namespace

AutoStrategy::AutoStrategy(Communicator* comm, core::ParameterStore* store,
                           core::Optimizer* optimizer, AutoOptions options)
    : comm_(comm), store_(store), optimizer_(optimizer), options_(std::move(options)) {
  trial_steps_ = options_.trial_steps;
  trial_rounds_ = options_.trial_rounds;
}

AutoStrategy::~AutoStrategy() = default;

absl::StatusOr<std::unique_ptr<AutoStrategy>> AutoStrategy::Create(Communicator* comm,
                                                                   core::ParameterStore* store,
                                                                   core::Optimizer* optimizer,
                                                                   AutoOptions options) {
  if (comm == nullptr || store == nullptr || optimizer == nullptr) {
    return absl::InvalidArgumentError("AutoStrategy needs a communicator, a store, an optimizer");
  }
  if (options.profile_steps < 1 || options.trial_steps < 1 || options.trial_rounds < 1 ||
      !(options.trial_seconds >= 0) || options.candidates < 0 || options.reserve < 0 ||
      !(options.noise >= 0 && options.noise < 1) || !(options.cutoff == 0 || options.cutoff >= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "auto strategy: profile_steps (", options.profile_steps, "), trial_steps (",
        options.trial_steps, ") and trial_rounds (", options.trial_rounds,
        ") must be >= 1, trial_seconds (", options.trial_seconds, ") >= 0, candidates (",
        options.candidates, ") and reserve (", options.reserve, ") >= 0, noise (", options.noise,
        ") in [0, 1), cutoff (", options.cutoff, ") 0 or >= 1"));
  }
  if (options.early != "auto" && options.early != "none" && !IsStrategyBuilder(options.early)) {
    return absl::InvalidArgumentError(absl::StrCat("auto strategy: early builder '", options.early,
                                                   "' is none of auto, none, ",
                                                   absl::StrJoin(StrategyBuilderNames(), ", ")));
  }
  std::unique_ptr<AutoStrategy> a(new AutoStrategy(comm, store, optimizer, std::move(options)));
  const double t0 = Now();
  absl::StatusOr<ProbeResult> probe = ProbeCluster(*comm, a->options_.probe);
  if (!probe.ok()) return core::Prefixed("auto strategy: probing the cluster", probe.status());
  a->cluster_ = std::move(probe->cluster);
  a->probe_seconds_ = Now() - t0;
  CAVS_ASSIGN_OR_RETURN(Strategy start,
                        BuildStrategy(a->options_.start, *store, comm->world_size()));
  CAVS_RETURN_IF_ERROR(a->Use(start));
  return a;
}

absl::Status AutoStrategy::Use(const Strategy& strategy, size_t candidate) {
  const double t0 = Now();
  // Collective on every rank in the same order (every rank decides the same): the previous
  // synchronizer is kept for its trial's next visit or its communicators go, then the next
  // candidate's kept one is taken up or a new one verifies the strategy on every rank.
  step_.reset();
  if (candidate == kNoCandidate || candidate != sync_of_) {
    if (sync_of_ != kNoCandidate && phase_ == Phase::kTrial && Pending(sync_of_)) {
      kept_syncs_.resize(std::max(kept_syncs_.size(), sync_of_ + 1));
      kept_syncs_[sync_of_] = std::move(sync_);
    }
    sync_.reset();
    if (candidate < kept_syncs_.size() && kept_syncs_[candidate] != nullptr) {
      sync_ = std::move(kept_syncs_[candidate]);
    } else {
      CAVS_ASSIGN_OR_RETURN(sync_, GradientSynchronizer::Create(comm_, store_, strategy));
      ++synchronizers_made_;
    }
    sync_of_ = candidate;
  }
  if (phase_ == Phase::kDecided) kept_syncs_.clear();  // no trial visits again
  step_ = std::make_unique<DataParallelStep>(store_, optimizer_, sync_.get());
  step_->set_profiling(phase_ == Phase::kProfile);
  step_->set_overlap(options_.overlap);
  if (run_began_ != 0) {
    // The trial it starts pays for it, though it runs in the last step of the one before.
    const Part part = CurrentPart();
    const double took = Now() - t0;
    parts_[part].use_s += took;
    parts_[part].run_s += took;
    parts_[run_part_].run_s -= took;
  }
  return absl::OkStatus();
}

absl::Status AutoStrategy::CalibrateToProfile() {
  profile_.strategy = options_.start;
  profile_.step_ms = 1e3 * Median(ProfileStepsAtWork());
  CAVS_ASSIGN_OR_RETURN(const Strategy start,
                        BuildStrategy(options_.start, *store_, comm_->world_size()));
  CAVS_ASSIGN_OR_RETURN(step_calibration_, CalibrateToProfiledStep(profile_, cluster_, start,
                                                                   1e-3 * profile_.step_ms));
  return absl::OkStatus();
}

absl::Status AutoStrategy::StartEarly() {
  const int w = comm_->world_size();
  early_ = options_.early;
  if (early_ == "none") early_note_ = "none asked (--auto-early=none)";
  if (w < 2) early_note_ = "one rank, no units";
  if (!early_note_.empty()) {
    early_.clear();
    return BeginTrials();
  }
  if (early_ == "auto") {
    // The fastest predicted builder with units in flight in a good part of its compute: the
    // polls' cost shows where they are, and a fast one costs the search the least.
    const double t0 = Now();
    CAVS_ASSIGN_OR_RETURN(std::unique_ptr<CostModel> model,
                          CostModel::Create(profile_, step_calibration_.cluster));
    early_.clear();
    double best = 0;
    for (const std::string& name : StrategyBuilderNames()) {
      if (name == options_.start) continue;
      CAVS_ASSIGN_OR_RETURN(const Strategy s, BuildStrategy(name, *store_, w));
      CAVS_ASSIGN_OR_RETURN(const Prediction p, model->Predict(s));
      if (MeanUnitsInFlight(p) < kEarlyUnitsInFlight) continue;
      if (early_.empty() || p.step_s < best) early_ = name, best = p.step_s;
    }
    search_seconds_ += Now() - t0;
    if (early_.empty()) {
      early_note_ = absl::StrFormat(
          "no builder other than '%s' has %.2f units or more in flight on average over its "
          "compute",
          options_.start, kEarlyUnitsInFlight);
      return BeginTrials();
    }
  }
  CAVS_ASSIGN_OR_RETURN(const Strategy early, BuildStrategy(early_, *store_, w));
  early_phase_ = true;
  return Use(early);
}

absl::Status AutoStrategy::FitPolls() {
  const double t0 = Now();
  // The slowest rank's compute of each step, both strategies' alike (profiling on in both),
  // and the early steps' times; the median of each after its first step (a warm-up).
  std::vector<double> v;
  for (const StepTimes& t : profiled_) v.push_back(t.compute);
  for (const StepTimes& t : early_times_) v.push_back(t.compute);
  for (const StepTimes& t : early_times_) v.push_back(t.total());
  CAVS_ASSIGN_OR_RETURN(v, MaxOverRanks(*comm_, v));
  const size_t np = profiled_.size(), ne = early_times_.size();
  const auto median_after_first = [&](size_t from, size_t n) {
    return Median(std::vector<double>(v.begin() + from + (n > 1 ? 1 : 0), v.begin() + from + n));
  };
  profile_compute_s_ = median_after_first(0, np);
  early_compute_s_ = median_after_first(np, ne);
  early_steps_.assign(v.begin() + np + ne, v.end());
  const int w = comm_->world_size();
  CAVS_ASSIGN_OR_RETURN(const Strategy profiled, BuildStrategy(options_.start, *store_, w));
  CAVS_ASSIGN_OR_RETURN(const Strategy early, BuildStrategy(early_, *store_, w));
  profile_.early_strategy = early_;
  profile_.early_compute_ratio = early_compute_s_ / profile_compute_s_;
  // The cost moves the profiled strategy's predicted step a little (its own units in flight),
  // and the calibration moves the units' times in flight: fitted and calibrated again, twice;
  // the last calibration is the profile's with its cost, as cavs-sim makes it.
  for (int round = 0; round < 2; ++round) {
    CAVS_ASSIGN_OR_RETURN(std::unique_ptr<CostModel> model,
                          CostModel::Create(profile_, step_calibration_.cluster));
    CAVS_ASSIGN_OR_RETURN(poll_fit_,
                          model->FitPollCost(profiled, early, profile_.early_compute_ratio));
    profile_.poll_cost = poll_fit_.cost;
    CAVS_RETURN_IF_ERROR(CalibrateToProfile());
  }
  search_seconds_ += Now() - t0;
  return absl::OkStatus();
}

absl::Status AutoStrategy::BeginTrials() {
  CAVS_RETURN_IF_ERROR(RankCandidates());
  // Try the searched ones, then (where asked) the builders, in the candidates' order;
  // candidates_ keeps the untried ones too (predicted only).
  phase_ = Phase::kTrial;
  bool any = false;
  for (size_t i = 0; i < candidates_.size(); ++i) any = any || Pending(i);
  if (!any) return absl::InternalError("auto strategy: no candidate");
  return StartTrials();
}

absl::Status AutoStrategy::RankCandidates() {
  const double t0 = Now();
  const int w = comm_->world_size();
  SearchOptions so;
  so.allow_compression = options_.allow_compression;
  so.top_k = std::max(1, options_.candidates + options_.reserve);
  candidates_.clear();
  profiled_candidate_ = -1;
  if (options_.candidates > 0) {
    CAVS_ASSIGN_OR_RETURN(SearchReport found,
                          SearchStrategies(profile_, step_calibration_.cluster, so));
    for (size_t i = 0; i < found.best.size(); ++i) {
      AutoCandidate c;
      c.name = absl::StrCat("auto#", i + 1);
      c.searched = true;
      c.strategy = std::move(found.best[i].strategy);
      c.strategy.name = c.name;
      c.prediction = std::move(found.best[i].prediction);
      c.reserve = static_cast<int>(i) >= options_.candidates;
      candidates_.push_back(std::move(c));
    }
  }
  CAVS_ASSIGN_OR_RETURN(std::unique_ptr<CostModel> model,
                        CostModel::Create(profile_, step_calibration_.cluster));
  for (const std::string& name : StrategyBuilderNames()) {
    CAVS_ASSIGN_OR_RETURN(Strategy s, BuildStrategy(name, *store_, w));
    auto same = std::find_if(candidates_.begin(), candidates_.end(), [&](const AutoCandidate& c) {
      return SameSync(c.strategy, s, step_calibration_.cluster);
    });
    if (name == options_.start) {
      profiled_candidate_ = static_cast<int>(same != candidates_.end() ? same - candidates_.begin()
                                                                       : candidates_.size());
    }
    if (same != candidates_.end()) {
      absl::StrAppend(&same->name, " (= ", name, ")");
      // A builder is tried where builders are, even as a searched strategy held in reserve.
      if (options_.try_builders) same->reserve = false;
      continue;
    }
    AutoCandidate c;
    c.name = name;
    c.strategy = std::move(s);
    CAVS_ASSIGN_OR_RETURN(c.prediction, model->Predict(c.strategy));
    candidates_.push_back(std::move(c));
  }
  search_seconds_ += Now() - t0;
  SizeTrials();
  return absl::OkStatus();
}

bool AutoStrategy::Pending(size_t i) const {
  const AutoCandidate& c = candidates_[i];
  return c.measured_s < 0 && !c.reserve && (options_.try_builders || c.searched);
}

namespace {

// The steps a trial_seconds budget asks of steps of `step_s` (at most kMaxBudgetSteps); 0 where
// there is no budget or no step time.
int BudgetSteps(double seconds, double step_s) {
  if (seconds <= 0 || step_s <= 0) return 0;
  return static_cast<int>(std::min<double>(kMaxBudgetSteps, std::ceil(seconds / step_s)));
}

}  // namespace

void AutoStrategy::SizeTrials() {
  trial_steps_ = options_.trial_steps;
  trial_rounds_ = options_.trial_rounds;
  // Every rank predicts the same (the same profile, cluster and search), so every rank sizes
  // the trials the same.
  double fastest = 0;
  for (const AutoCandidate& c : candidates_) {
    const double t = c.prediction.step_s;
    if (t > 0 && (fastest == 0 || t < fastest)) fastest = t;
  }
  const int counted = BudgetSteps(options_.trial_seconds, fastest);
  if (counted <= CountedSteps()) return;
  budget_step_s_ = fastest;
  trial_steps_ = counted + 1;  // and a step to warm up
  trial_rounds_ = std::max(trial_rounds_, (counted + kBudgetVisitSteps - 1) / kBudgetVisitSteps);
}

int AutoStrategy::WarmUpSteps() const { return trial_steps_ > 1 ? 1 : 0; }

int AutoStrategy::CountedSteps() const { return trial_steps_ - WarmUpSteps(); }

int AutoStrategy::Rounds() const { return std::min(trial_rounds_, CountedSteps()); }

int AutoStrategy::VisitSteps(const AutoCandidate& c) const {
  const int counted = CountedSteps(), rounds = Rounds();
  return WarmUpSteps() + counted / rounds + (c.visits < counted % rounds ? 1 : 0);
}

double AutoStrategy::BestSoFar() const {
  double best = -1;
  for (const AutoCandidate& c : candidates_) {
    if (c.counted_s.empty()) continue;
    const double m = c.measured_s >= 0 ? c.measured_s : Median(c.counted_s);
    if (best < 0 || m < best) best = m;
  }
  return best;
}

absl::Status AutoStrategy::StartTrials() {
  round_ = -1;
  // Each call plans its own trials: the first round's, then a second round's.
  for (size_t i = 0; i < candidates_.size(); ++i) {
    if (Pending(i)) trial_steps_planned_ += CountedSteps() + Rounds() * WarmUpSteps();
  }
  order_.clear();
  next_in_order_ = 0;
  return NextVisit();
}

absl::Status AutoStrategy::NextVisit() {
  for (;;) {
    while (next_in_order_ < order_.size()) {
      const size_t i = order_[next_in_order_++];
      if (!Pending(i)) continue;  // its trial was cut
      trying_ = i;
      ClearVisitSteps();
      return Use(candidates_[i].strategy, i);
    }
    if (++round_ >= Rounds()) break;
    // Searched ones first, then the builders, in the candidates' order; every other round the
    // other way round.
    order_.clear();
    next_in_order_ = 0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      if (Pending(i)) order_.push_back(i);
    }
    if (order_.empty()) break;
    if (round_ % 2 == 1) std::reverse(order_.begin(), order_.end());
  }
  return Decide();
}

size_t AutoStrategy::BestMeasured() const {
  size_t best = candidates_.size();
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const AutoCandidate& c = candidates_[i];
    if (c.measured_s < 0 || (second_round_ && !c.second)) continue;
    if (best == candidates_.size()) {
      best = i;
      continue;
    }
    const AutoCandidate& b = candidates_[best];
    const bool faster = c.measured_s < b.measured_s * (1 - options_.noise);
    const bool tie = !faster && c.measured_s <= b.measured_s * (1 + options_.noise);
    if (faster || (tie && c.prediction.step_s < b.prediction.step_s &&
                   c.measured_s < b.measured_s * (1 + options_.noise))) {
      best = i;
    }
  }
  return best;
}

absl::Status AutoStrategy::Decide() {
  // The noise of the measurements: each trial's steps about their own mean, pooled (a best of
  // the first round tried again: its two rounds apart, a drift between them is no noise).
  std::vector<std::vector<double>> series, raw_series;
  for (const AutoCandidate& c : candidates_) {
    series.emplace_back(c.counted_s.begin(), c.counted_s.begin() + c.second_from);
    series.emplace_back(c.counted_s.begin() + c.second_from, c.counted_s.end());
    raw_series.emplace_back(c.counted_raw_s.begin(), c.counted_raw_s.begin() + c.second_from);
    raw_series.emplace_back(c.counted_raw_s.begin() + c.second_from, c.counted_raw_s.end());
  }
  spread_ = PooledSpread(series);
  raw_spread_ = PooledSpread(raw_series);
  for (AutoCandidate& c : candidates_) {
    c.standard_error = c.measured_s >= 0 ? MedianStandardError(spread_, c.measured_steps) : -1;
  }
  // Every rank holds the same measurements (the slowest rank's), so the same fit.
  std::vector<Trial> trials;
  for (const AutoCandidate& c : candidates_) {
    if (c.measured_s >= 0) {
      trials.push_back(
          {&c.prediction, c.measured_s, std::max(0.0, c.standard_error) * c.measured_s});
    }
  }
  correction_ = FitTrialCorrection(trials);
  out_of_sample_ = LeaveOneOutErrors(trials);
  for (AutoCandidate& c : candidates_) c.corrected_s = CorrectedStep(trials, c.prediction);
  const size_t best = BestMeasured();
  if (best == candidates_.size()) return absl::InternalError("auto strategy: nothing was tried");
  if (!corrected_round_) {
    corrected_round_ = true;
    std::vector<size_t> picked;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      const AutoCandidate& c = candidates_[i];
      if (c.reserve && c.corrected_s < candidates_[best].measured_s * (1 - options_.noise)) {
        picked.push_back(i);
      }
    }
    std::stable_sort(picked.begin(), picked.end(), [&](size_t a, size_t b) {
      return candidates_[a].corrected_s < candidates_[b].corrected_s;
    });
    picked.resize(std::min<size_t>(picked.size(), std::max(1, options_.candidates)));
    if (!picked.empty()) {
      for (size_t i : picked) {
        candidates_[i].reserve = false;
        candidates_[i].second = true;
      }
      // The best so far is tried again beside them: a drift over the run falls on both.
      AutoCandidate& b = candidates_[best];
      b.second = true;
      b.first_measured_s = b.measured_s;
      b.second_from = b.counted_s.size();
      b.measured_s = -1;
      b.measured_steps = 0;
      b.visits = 0;
      second_round_ = true;
      return StartTrials();
    }
  }
  chosen_ = best;
  // Seconds the steps took beyond what the chosen strategy's would have.
  const auto beyond_chosen = [&](const std::vector<double>& steps) {
    double extra = 0.0;
    for (double t : steps) extra += std::max(0.0, t - candidates_[chosen_].measured_s);
    return extra;
  };
  // This Run so far counts with the trial it ends; the rest of it (the chosen strategy's Use)
  // would be paid without a search too.
  ChargeRun();
  // Beyond the steps and the cost model (RankCandidates ran in a profiled step's Run), and the
  // synchronizers: the least over ranks, as minus the largest of the negatives.
  CAVS_ASSIGN_OR_RETURN(
      std::vector<double> least,
      MaxOverRanks(*comm_, {parts_[kSearch].steps_s + search_seconds_ - parts_[kSearch].run_s,
                            parts_[kComparison].steps_s - parts_[kComparison].run_s,
                            -parts_[kSearch].use_s, -parts_[kComparison].use_s}));
  search_cost_.profile_s = beyond_chosen(profile_steps_) + beyond_chosen(early_steps_);
  for (Part p : {kSearch, kComparison}) {
    SearchCost& cost = p == kSearch ? search_cost_ : comparison_cost_;
    cost.first_steps_s = beyond_chosen(parts_[p].first_steps);
    cost.counted_steps_s = beyond_chosen(parts_[p].counted_steps);
    cost.switching_s = std::max(0.0, -least[p]);
    cost.synchronizers_s = std::max(0.0, -least[2 + p]);
  }
  phase_ = Phase::kDecided;
  return Use(candidates_[chosen_].strategy, chosen_);
}

absl::StatusOr<StepTimes> AutoStrategy::Run(
    int64_t local_count, const std::function<absl::Status(const StepHooks&)>& compute,
    bool run_empty) {
  if (phase_ == Phase::kDecided) return step_->Run(local_count, compute, run_empty);
  // A failure (a dead peer's deadline, say) names the part of the search it stopped.
  const std::string what =
      phase_ == Phase::kTrial
          ? absl::StrCat("auto strategy: trying '", candidates_[trying_].name, "'")
      : early_phase_
          ? absl::StrCat("auto strategy: timing the polls under '", early_, "'")
          : absl::StrCat("auto strategy: profiling the model under '", options_.start, "'");
  run_began_ = Now();
  run_part_ = CurrentPart();
  absl::StatusOr<StepTimes> t = Search(local_count, compute, run_empty);
  if (!t.ok()) return core::Prefixed(what, t.status());
  ChargeRun();
  return t;
}

AutoStrategy::Part AutoStrategy::CurrentPart() const {
  return phase_ == Phase::kTrial && !candidates_[trying_].searched ? kComparison : kSearch;
}

void AutoStrategy::ChargeRun() {
  if (run_began_ == 0) return;
  parts_[run_part_].run_s += Now() - run_began_;
  run_began_ = 0;
}

absl::StatusOr<int> AutoStrategy::StepsFor(double seconds, const StepTimes& first) {
  if (options_.trial_seconds <= 0) return options_.profile_steps;
  CAVS_ASSIGN_OR_RETURN(const std::vector<double> slowest,
                        MaxOverRanks(*comm_, std::vector<double>{first.total()}));
  // And the first, not counted.
  return std::max(options_.profile_steps, 1 + BudgetSteps(seconds, slowest[0]));
}

absl::StatusOr<StepTimes> AutoStrategy::Search(
    int64_t local_count, const std::function<absl::Status(const StepHooks&)>& compute,
    bool run_empty) {
  CAVS_ASSIGN_OR_RETURN(StepTimes t, step_->Run(local_count, compute, run_empty));
  parts_[run_part_].steps_s += t.total();
  if (phase_ == Phase::kProfile && early_phase_) {
    early_times_.push_back(t);
    if (early_times_.size() == 1) {
      // As many steps as the profile's, or with a trial budget, half its time (the compute's
      // median is steadier than the step's).
      CAVS_ASSIGN_OR_RETURN(early_target_, StepsFor(0.5 * options_.trial_seconds, t));
    }
    if (static_cast<int>(early_times_.size()) < early_target_) return t;
    early_phase_ = false;
    CAVS_RETURN_IF_ERROR(FitPolls());
    CAVS_RETURN_IF_ERROR(BeginTrials());
    return t;
  }
  if (phase_ == Phase::kProfile) {
    profiled_.push_back(t);
    profile_work_.push_back(static_cast<double>(local_count));
    if (profiled_.size() == 1) {
      // With a trial budget the profile is sized by it too: short steps are profiled for
      // about trial_seconds, their medians then less the noise of a few steps.
      CAVS_ASSIGN_OR_RETURN(profile_target_, StepsFor(options_.trial_seconds, t));
    }
    if (static_cast<int>(profiled_.size()) < profile_target_) return t;
    CAVS_ASSIGN_OR_RETURN(
        profile_,
        BuildModelProfile(comm_, *store_, profiled_, options_.batch_per_rank, options_.model_name));
    std::vector<double> totals;
    for (const StepTimes& p : profiled_) totals.push_back(p.total());
    CAVS_ASSIGN_OR_RETURN(profile_steps_, MaxOverRanks(*comm_, totals));
    CAVS_RETURN_IF_ERROR(MeasureWorkRate());
    CAVS_RETURN_IF_ERROR(CalibrateToProfile());
    CAVS_RETURN_IF_ERROR(StartEarly());
    return t;
  }
  // A trial step of candidates_[trying_].
  trial_times_.push_back(t.total());
  trial_compute_.push_back(t.compute);
  trial_hooks_.push_back(t.hooks);
  trial_work_.push_back(static_cast<double>(local_count));
  ++trial_steps_run_;
  const AutoCandidate& c = candidates_[trying_];
  const int steps = static_cast<int>(trial_times_.size());
  if (steps >= VisitSteps(c)) {
    CAVS_RETURN_IF_ERROR(EndVisit(/*cut=*/false));
    return t;
  }
  // A builder after its first two counted steps in its first visit: stop if both are already
  // far behind (every rank decides on the same slowest-rank times). Two, not one: a single slow
  // step (on a capped link a TCP retransmission waits 200 ms) must not end a trial and be its
  // measurement. (Where a visit counts one step, EndVisit looks once two are counted.)
  if (options_.cutoff == 0 || steps != 3 || c.searched || c.visits > 0) return t;
  const double best = BestSoFar();
  if (best < 0) return t;
  CAVS_ASSIGN_OR_RETURN(std::vector<double> counted,
                        MaxOverRanks(*comm_, {trial_times_[1], trial_times_[2]}));
  if (std::min(counted[0], counted[1]) > options_.cutoff * best) {
    CAVS_RETURN_IF_ERROR(EndVisit(/*cut=*/true));
  }
  return t;
}

absl::Status AutoStrategy::EndVisit(bool cut) {
  CAVS_RETURN_IF_ERROR(FoldVisit(cut, /*whole=*/true));
  return NextVisit();
}

void AutoStrategy::ClearVisitSteps() {
  trial_times_.clear();
  trial_compute_.clear();
  trial_hooks_.clear();
  trial_work_.clear();
}

absl::Status AutoStrategy::MeasureWorkRate() {
  work_rate_ = work_ref_ = 0;
  // Every profiled step's own work and labelled vertices, each the slowest rank's (one
  // reduction; every rank then holds the same rate).
  std::vector<double> mine;
  for (const StepTimes& p : profiled_) mine.push_back(p.compute - p.hooks);
  mine.insert(mine.end(), profile_work_.begin(), profile_work_.end());
  CAVS_ASSIGN_OR_RETURN(const std::vector<double> most, MaxOverRanks(*comm_, mine));
  const size_t n = most.size() / 2;
  profile_vertices_.assign(most.begin() + n, most.end());
  // The rate and the mean of the counted steps.
  const std::vector<double> own = CountedProfileSteps({most.begin(), most.begin() + n});
  const std::vector<double> vertices = CountedProfileSteps(profile_vertices_);
  double own_sum = 0, vertex_sum = 0;
  for (size_t i = 0; i < own.size(); ++i) own_sum += own[i], vertex_sum += vertices[i];
  if (own.empty() || own_sum <= 0 || vertex_sum <= 0) return absl::OkStatus();
  work_rate_ = own_sum / vertex_sum;
  work_ref_ = vertex_sum / static_cast<double>(own.size());
  return absl::OkStatus();
}

std::vector<double> AutoStrategy::ProfileStepsAtWork() const {
  std::vector<double> steps = CountedProfileSteps(profile_steps_);
  if (!AtEqualWork()) return steps;
  const std::vector<double> vertices = CountedProfileSteps(profile_vertices_);
  for (size_t i = 0; i < steps.size(); ++i) steps[i] -= work_rate_ * (vertices[i] - work_ref_);
  return steps;
}

absl::Status AutoStrategy::FoldVisit(bool cut, bool whole) {
  // One reduction for the four: the steps, their compute, their hooks, their work.
  const size_t n = trial_times_.size();
  std::vector<double> mine = trial_times_;
  mine.insert(mine.end(), trial_compute_.begin(), trial_compute_.end());
  mine.insert(mine.end(), trial_hooks_.begin(), trial_hooks_.end());
  mine.insert(mine.end(), trial_work_.begin(), trial_work_.end());
  ClearVisitSteps();
  CAVS_ASSIGN_OR_RETURN(const std::vector<double> most, MaxOverRanks(*comm_, mine));
  std::vector<double> slowest(most.begin(), most.begin() + n);
  std::vector<double> compute(most.begin() + n, most.begin() + 2 * n);
  std::vector<double> hooks(most.begin() + 2 * n, most.begin() + 3 * n);
  std::vector<double> work(most.begin() + 3 * n, most.end());
  AutoCandidate& c = candidates_[trying_];
  PartTimes& part = parts_[c.searched ? kSearch : kComparison];
  if (WarmUpSteps() > 0) {  // the visit's first step warms the strategy up
    part.first_steps.push_back(slowest[0]);
    for (std::vector<double>* v : {&slowest, &compute, &hooks, &work}) v->erase(v->begin());
  }
  part.counted_steps.insert(part.counted_steps.end(), slowest.begin(), slowest.end());
  // Each step at the profile's work: its own work moved by what its labelled vertices differ.
  std::vector<double> at_ref = slowest;
  if (AtEqualWork()) {
    for (size_t i = 0; i < at_ref.size(); ++i) at_ref[i] -= work_rate_ * (work[i] - work_ref_);
  }
  const size_t before = c.counted_s.size();
  c.counted_s.insert(c.counted_s.end(), at_ref.begin(), at_ref.end());
  c.counted_raw_s.insert(c.counted_raw_s.end(), slowest.begin(), slowest.end());
  c.counted_compute_s.insert(c.counted_compute_s.end(), compute.begin(), compute.end());
  c.counted_hooks_s.insert(c.counted_hooks_s.end(), hooks.begin(), hooks.end());
  if (!at_ref.empty()) c.visit_steps.push_back(at_ref.size());
  if (!whole) return absl::OkStatus();
  ++c.visits;
  // A builder whose visits count one step each: the cutoff once two are counted.
  const double best = BestSoFar();
  if (!cut && !c.searched && options_.cutoff != 0 && before < 2 && c.counted_s.size() >= 2 &&
      c.visits < Rounds() && best >= 0 &&
      std::min(c.counted_s[0], c.counted_s[1]) > options_.cutoff * best) {
    cut = true;
  }
  if (cut || c.visits >= Rounds()) Measure(c);
  return absl::OkStatus();
}

void AutoStrategy::Measure(AutoCandidate& c) {
  const std::vector<double> steps(c.counted_s.begin() + c.second_from, c.counted_s.end());
  c.measured_s = Median(steps);
  c.measured_steps = static_cast<int>(steps.size());
  const auto median_from = [&](const std::vector<double>& v) {
    return v.size() > c.second_from ? Median({v.begin() + c.second_from, v.end()}) : -1.0;
  };
  c.measured_compute_s = median_from(c.counted_compute_s);
  c.measured_hooks_s = median_from(c.counted_hooks_s);
}

absl::Status AutoStrategy::Conclude() {
  if (phase_ != Phase::kTrial) return absl::OkStatus();  // decided, or still profiling
  // Undecided where no step is counted: the visit under way, if any, goes on as it was.
  bool any = trial_times_.size() > static_cast<size_t>(WarmUpSteps());
  for (const AutoCandidate& c : candidates_) any = any || !c.counted_s.empty();
  if (!any) return absl::OkStatus();
  if (!trial_times_.empty()) CAVS_RETURN_IF_ERROR(FoldVisit(/*cut=*/false, /*whole=*/false));
  for (AutoCandidate& c : candidates_) {
    if (c.measured_s >= 0) continue;
    if (c.counted_s.size() > c.second_from) {
      Measure(c);
    } else if (c.first_measured_s >= 0) {  // the best of the first round, not yet again
      c.measured_s = c.first_measured_s;
      c.measured_steps = static_cast<int>(c.counted_s.size());
    }
  }
  cut_short_ = true;
  corrected_round_ = true;  // no further trials: the reserve stays predicted only
  return Decide();
}

std::optional<double> AutoStrategy::drift() const {
  if (profiled_candidate_ < 0 || profile_.step_ms <= 0) return std::nullopt;
  const double measured = candidates_[profiled_candidate_].measured_s;
  if (measured <= 0) return std::nullopt;
  return measured / (1e-3 * profile_.step_ms) - 1;
}

std::string AutoStrategy::Report() const {
  std::string out = absl::StrFormat("auto strategy on %s (probe %.2f s, search %.3f s)\n",
                                    cluster_.name, probe_seconds_, search_seconds_);
  int width = 28;
  for (const AutoCandidate& c : candidates_) {
    width = std::max(width, static_cast<int>(c.name.size()));
  }
  absl::StrAppendFormat(&out, "  %-*s %6s %13s %12s %12s %6s %6s\n", width, "strategy", "units",
                        "predicted_ms", "corrected_ms", "measured_ms", "steps", "se_%");
  const auto ms = [](double s) {
    return s < 0 ? std::string("-") : absl::StrFormat("%.2f", 1e3 * s);
  };
  const auto median_abs = [](std::vector<double> errors) {
    for (double& e : errors) e = std::abs(e);
    return Median(std::move(errors));
  };
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const AutoCandidate& c = candidates_[i];
    absl::StrAppendFormat(
        &out, "  %-*s %6d %13.2f %12s %12s %6s %6s%s\n", width, c.name,
        static_cast<int>(c.prediction.units.size()), 1e3 * c.prediction.step_s, ms(c.corrected_s),
        ms(c.measured_s), c.measured_steps > 0 ? absl::StrCat(c.measured_steps) : "-",
        c.standard_error >= 0 ? absl::StrFormat("%.1f", 100 * c.standard_error) : "-",
        decided() && i == chosen_ ? "  <- chosen" : "");
  }
  if (decided()) {
    absl::StrAppend(&out, "  trial correction: ", correction_.Describe());
    if (out_of_sample_.size() > 1) {
      double largest = 0;
      for (double e : out_of_sample_) largest = std::max(largest, std::abs(e));
      absl::StrAppendFormat(&out,
                            "; out of sample (each trial from the others): median |error| %.1f%%, "
                            "largest %.1f%%",
                            100 * median_abs(out_of_sample_), 100 * largest);
    }
    absl::StrAppend(&out, "\n");
    for (const AutoCandidate& c : candidates_) {
      if (c.first_measured_s < 0) continue;
      absl::StrAppendFormat(&out,
                            "  second round: the reserve the correction picked, beside %s, the "
                            "best of the first, tried again: %s ms then, %s ms now\n",
                            c.name, ms(c.first_measured_s),
                            c.counted_s.size() > c.second_from ? ms(c.measured_s) : "-");
    }
    absl::StrAppendFormat(&out, "  trials: %d counted steps a strategy in %d round%s%s",
                          CountedSteps(), Rounds(), Rounds() > 1 ? "s" : "",
                          WarmUpSteps() > 0 ? ", after a step to warm up in each" : "");
    if (budget_step_s_ > 0) {
      absl::StrAppendFormat(&out, " (%.3g s a strategy at the fastest predicted step, %s ms)",
                            options_.trial_seconds, ms(budget_step_s_));
    }
    absl::StrAppend(&out, "\n");
    if (spread_ > 0) {
      absl::StrAppendFormat(&out,
                            "  noise: the counted steps spread %.1f%% about their strategy's "
                            "mean (pooled over the trials); se_%%: each measured median's "
                            "standard error at that spread, %.1f%% at %d steps\n",
                            100 * spread_, 100 * MedianStandardError(spread_, CountedSteps()),
                            CountedSteps());
    }
    if (AtEqualWork()) {
      absl::StrAppendFormat(&out,
                            "  equal work: each counted step at the profile's %.0f labelled "
                            "vertices (the slowest rank's), its own work moved %.3g us a vertex; "
                            "as measured the steps spread %.1f%%\n",
                            work_ref_, 1e6 * work_rate_, 100 * raw_spread_);
    }
    if (const std::optional<double> drift = this->drift(); drift.has_value()) {
      const AutoCandidate& c = candidates_[profiled_candidate_];
      const size_t profiled = CountedProfileSteps(profile_steps_).size();
      absl::StrAppendFormat(&out,
                            "  drift: '%s' measured %.2f ms in the profile (%d step%s) and %s "
                            "ms in its trial (%d step%s), %+.1f%%: what moves a whole trial, "
                            "which se_%% does not count\n",
                            options_.start, profile_.step_ms, static_cast<int>(profiled),
                            profiled == 1 ? "" : "s", ms(c.measured_s), c.measured_steps,
                            c.measured_steps == 1 ? "" : "s", 100 * *drift);
    }
    // The compute the hooks' terms predict, beside what the trials measured.
    std::string computes;
    std::vector<double> compute_errors;
    for (const AutoCandidate& c : candidates_) {
      if (c.measured_compute_s <= 0) continue;
      const Prediction& p = c.prediction;
      compute_errors.push_back((p.compute_s - c.measured_compute_s) / c.measured_compute_s);
      absl::StrAppendFormat(&computes, "    %-*s compute %8.2f / %8.2f   hooks %8.2f / %8.2f\n",
                            width, c.name, 1e3 * p.compute_s, 1e3 * c.measured_compute_s,
                            1e3 * p.hooks_s, 1e3 * c.measured_hooks_s);
    }
    if (!compute_errors.empty()) {
      absl::StrAppendFormat(&out,
                            "  compute and its hooks, predicted / measured (ms, the slowest "
                            "rank's medians): median error %+.1f%%, median |error| %.1f%%\n%s",
                            100 * Median(compute_errors), 100 * median_abs(compute_errors),
                            computes);
    }
    // Each tried strategy's counted steps in the order they ran, visit by visit: what moves a
    // whole visit (the machine, the place in the order) shows here, not in se_%.
    std::string counted;
    for (const AutoCandidate& c : candidates_) {
      if (c.counted_s.empty()) continue;
      absl::StrAppendFormat(&counted, "    %-*s", width, c.name);
      size_t k = 0;
      for (size_t v = 0; v < c.visit_steps.size(); ++v) {
        if (v > 0) absl::StrAppend(&counted, k == c.second_from ? " ||" : " |");
        for (size_t end = k + c.visit_steps[v]; k < end; ++k) {
          absl::StrAppendFormat(&counted, " %.1f", 1e3 * c.counted_s[k]);
        }
      }
      absl::StrAppend(&counted, "\n");
    }
    if (!counted.empty()) {
      absl::StrAppend(&out, "  counted steps (ms, in the order they ran",
                      AtEqualWork() ? ", at the profile's work" : "",
                      "; | between visits, || before a second round's):\n", counted);
    }
    if (cut_short_) {
      int tried = 0;
      for (const AutoCandidate& c : candidates_) tried += c.measured_s >= 0 ? 1 : 0;
      absl::StrAppendFormat(
          &out,
          "  the run ended before the trials did (%d of the %d trial steps planned): chosen "
          "from the %d candidates with a counted step, measured on the steps they had; more "
          "steps (--epochs) or shorter trials (--auto-steps, --auto-rounds, --auto-trial-seconds, "
          "--auto-builders=0) let them finish\n",
          trial_steps_run_, trial_steps_planned_, tried);
    }
    std::string profiled;
    for (size_t i = 0; i < profile_steps_.size(); ++i) {
      absl::StrAppendFormat(&profiled, " %.1f", 1e3 * profile_steps_[i]);
      if (i < profile_vertices_.size()) {
        absl::StrAppendFormat(&profiled, " (%.0f)", profile_vertices_[i]);
      }
    }
    absl::StrAppend(&out, "  profile: ", profile_steps_.size(), " steps under '", options_.start,
                    "',", profiled, " ms (labelled vertices; the slowest rank's)");
    if (AtEqualWork()) {
      std::string at_work;
      for (double t : ProfileStepsAtWork()) absl::StrAppendFormat(&at_work, " %.1f", 1e3 * t);
      absl::StrAppend(&out, "; counted at its work,", at_work, " ms");
    }
    absl::StrAppend(&out, "\n");
    absl::StrAppend(&out, "  ", DescribeStepCalibration(step_calibration_), "\n");
    if (early_.empty()) {
      absl::StrAppend(&out, "  polls while units are in flight: not measured (", early_note_,
                      ")\n");
    } else {
      std::string steps;
      for (double t : early_steps_) absl::StrAppendFormat(&steps, " %.1f", 1e3 * t);
      const CostModel::PollCostFit& f = poll_fit_;
      absl::StrAppendFormat(
          &out,
          "  polls while units are in flight: %.3f s of compute a second of its own per unit in "
          "flight, where the cost "
          "model predicts '%s''s compute over '%s''s as measured, %.1f / %.1f ms = %.3fx "
          "(predicted %.3fx; with none %.3fx, at most %.3fx); %d steps under it,%s ms\n",
          f.cost, early_, options_.start, 1e3 * early_compute_s_, 1e3 * profile_compute_s_, f.ratio,
          f.predicted, f.at_zero, f.at_max, static_cast<int>(early_steps_.size()), steps);
    }
    const SearchCost& s = search_cost_;
    absl::StrAppendFormat(
        &out,
        "  cost of the search: probe %.2f s, cost model %.3f s, %.2f s of steps slower than the "
        "chosen strategy's (profile %.2f, trials' first steps %.2f, counted steps %.2f), "
        "switching %.2f s (of it new synchronizers %.2f s): %.2f s in all\n",
        probe_seconds_, search_seconds_, s.steps_s(), s.profile_s, s.first_steps_s,
        s.counted_steps_s, s.switching_s, s.synchronizers_s,
        probe_seconds_ + search_seconds_ + s.total_s());
    const SearchCost& b = comparison_cost_;
    if (!parts_[kComparison].first_steps.empty() || !parts_[kComparison].counted_steps.empty()) {
      absl::StrAppendFormat(
          &out,
          "  cost of the builders' comparison: %.2f s of steps slower than the chosen "
          "strategy's (first steps %.2f, counted steps %.2f), switching %.2f s (of it new "
          "synchronizers %.2f s): %.2f s in all (--auto-builders=0 leaves it out)\n",
          b.steps_s(), b.first_steps_s, b.counted_steps_s, b.switching_s, b.synchronizers_s,
          b.total_s());
    }
  }
  return out;
}

}  // namespace cavs::distributed
