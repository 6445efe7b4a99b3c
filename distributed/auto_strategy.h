// AutoStrategy: the synchronization strategy found for the model and the cluster a job runs on
// (cavs-train --strategy=auto; AutoSync's idea in cavs's terms). It is a training step
// (DataParallelStep's contract) whose first steps also find the strategy:
//
//   1. probe: which ranks share a host, each host link's bandwidth and latency, duplex, the
//      MPI's collective algorithms (ProbeCluster), at the first step;
//   2. profile: `profile_steps` steps under the `start` builder's strategy, with profiling on:
//      per parameter its shape, sparsity, rows touched and their union over ranks, when its
//      gradient is ready; the step's compute (BuildModelProfile); and the profiled steps' own
//      time, the median after the first, which calibrates the collectives the start strategy
//      runs at the model's own sizes (CalibrateToProfiledStep);
//   2b. the polls while units are in flight (off by default): where `early` names or picks a
//      builder whose units start early in backward, as many steps again under it (as
//      profiled), and what each unit in flight costs the compute thread fitted so that the
//      cost model predicts its measured compute over the profiled strategy's
//      (CostModel::FitPollCost; the profile's poll_cost);
//   3. search: the cost model ranks the builders' strategies and searched per-parameter ones
//      (SearchStrategies) for that profile and cluster;
//   4. trials: the best `candidates` searched strategies, and every builder where `try_builders`,
//      each for `trial_steps` real steps, or more where `trial_seconds` asks (as the profile's
//      steps: short steps measured for about that long; every strategy computes the same mean
//      gradient, so these are ordinary training steps); the measured step time of each is the
//      median over its counted steps of the slowest rank's time. With `trial_rounds` R > 1 the
//      counted steps are split into R visits, the candidates visited in turn, each round in the
//      order opposite the round before's (a drift over the trials, or whatever the first trial
//      after the profile pays, is shared instead of falling on one candidate); each visit's first
//      step warms the strategy up and is not counted (where trial_steps > 1). A builder's trial
//      ends after its first two counted steps where both are over `cutoff` times the best measured
//      so far (it is only there for the report's comparison, and a slow builder's steps are the
//      search's largest cost; two, so that one slow step does not end it);
//   5. correction: the trials' measured times fit the cost model's breakdown
//      (FitTrialCorrection: an offset, a factor per unit kind); with it the `reserve` searched
//      strategies ranked after the tried ones are predicted again, and those now predicted
//      faster than the best measured by more than `noise` are tried too (once, up to
//      `candidates` of them, best first), in a second round of trials beside the best measured
//      so far, tried again: the machine may run faster or slower by then (a 4-rank Tree-LSTM
//      step on the 2-core test bed measured 85 ms early in a run and 62 ms later), and that
//      falls on both;
//   6. the fastest measured is kept for the rest of training: where there was a second round,
//      the fastest of it (its best beat every other of the first round there).
// All ranks end with the same strategy: everything decided is computed from data every rank
// holds the same (the probe's spec is rank 0's, broadcast; the profile and the trial times are
// gathered from every rank), and the synchronizers' VerifyConsistent checks it.
//
// Ties and noise: a candidate replaces the best so far only if it is measured faster by more
// than `noise` (a fraction; default 3%, about the spread of repeated steps on the development
// machine); among candidates within that band the one predicted faster wins, then the one met
// first (searched ones before builders, in the search's order). With the same seed, data and
// cluster the same strategy is chosen unless the measurements differ by more than that band.
// The band is fixed; the report says how noisy the trials were: the counted steps' spread about
// their strategy's mean, pooled over the trials (PooledSpread), and each measured median's
// standard error at it (se_%). Two measurements less than about two standard errors of their
// difference apart are not told apart by the trials (4 steps of a 2-core test bed's language
// model: a spread of about 7%, an error of 4.4% each).
//
// Thread-safety: one thread at a time (the trainer's).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/optimizer.h"
#include "core/parameter.h"
#include "distributed/cluster_spec.h"
#include "distributed/communicator.h"
#include "distributed/cost_model.h"
#include "distributed/model_profile.h"
#include "distributed/probe.h"
#include "distributed/step.h"
#include "distributed/strategy.h"
#include "distributed/synchronizer.h"
#include "distributed/trial_correction.h"

namespace cavs::distributed {

// The most counted steps a trial_seconds budget gives a trial, and the counted steps of each of
// its visits (its rounds: the candidates visited in turn).
inline constexpr int kMaxBudgetSteps = 60;
inline constexpr int kBudgetVisitSteps = 6;

// A builder `early` = "auto" picks has at least this many units in flight on average over its
// predicted compute.
inline constexpr double kEarlyUnitsInFlight = 0.25;

struct AutoOptions {
  std::string start = "hybrid";  // the builder the profiled steps run under
  // The builder the poll cost is measured under, after the profiled steps and for as many:
  // "auto" (the one predicted fastest, other than `start`, whose units are in flight for at
  // least kEarlyUnitsInFlight of its compute; none where none is), "none" (no such steps: no
  // poll cost; the default, docs/distributed.md, "The polls while units are in flight", says
  // why), or a builder's name.
  std::string early = "none";
  int profile_steps = 4;  // steps profiled (the first is not counted)
  int trial_steps = 3;    // steps per candidate (the first is not counted where > 1)
  int trial_rounds = 1;   // visits the counted steps are split into (at most as many)
  // > 0: where the fastest predicted step is short, more counted steps than trial_steps has,
  // so that a candidate's take about this many seconds (at most kMaxBudgetSteps), in rounds of
  // about kBudgetVisitSteps (at least trial_rounds): a trial of 2 steps of a 65 ms step is
  // noise, one of 2 steps of a 2 s step is not. The profile the same, from its first step's
  // time (at least profile_steps). 0: the counts as they are.
  double trial_seconds = 0;
  int candidates = 3;        // searched strategies tried
  int reserve = 6;           // searched strategies after those, tried only if corrected
  bool try_builders = true;  // also try every builder (the report's comparison)
  // Trial steps compared at the profile's work: a step's own work (compute less the hooks)
  // scales with its labelled vertices (Run's local_count, the slowest rank's), which differ
  // from batch to batch; each counted step is taken at the profile's mean work, at the
  // profile's own work a vertex (docs/distributed.md, "--strategy=auto", item 4).
  bool equal_work = true;
  double cutoff = 1.5;  // a builder this much slower in two counted steps stops (0: never)
  bool allow_compression = false;
  bool overlap = true;  // DataParallelStep::set_overlap for the profile, trials and training
  double noise = 0.03;
  int64_t batch_per_rank = 0;  // recorded in the profile
  std::string model_name;      // recorded in the profile
  ProbeOptions probe;
};

// One strategy tried (or only predicted).
struct AutoCandidate {
  std::string name;  // "auto" (searched, ranked 1, 2, ... as auto#1 ...) or a builder's
  Strategy strategy;
  Prediction prediction;
  bool searched = false;   // found by the search (a builder it equals keeps its place)
  double measured_s = -1;  // median of the slowest rank's step time; -1: not tried
  int measured_steps = 0;  // the steps measured_s is the median of
  // measured_s's standard error, relative: MedianStandardError of measured_steps at the trials'
  // pooled spread (AutoStrategy::spread); -1: not measured.
  double standard_error = -1;
  // Its counted steps so far (the slowest rank's), in order, at the profile's work where
  // AutoOptions::equal_work (else as measured), and as measured.
  std::vector<double> counted_s, counted_raw_s;
  std::vector<size_t> visit_steps;  // how many of them each visit counted, in order
  // Of the same steps, the compute (StepTimes::compute) and the hooks in it (StepTimes::hooks)
  // of the rank slowest in each, and their medians once measured (-1: not measured): the
  // cost model's compute_s and hooks_s, measured.
  std::vector<double> counted_compute_s, counted_hooks_s;
  double measured_compute_s = -1, measured_hooks_s = -1;
  int visits = 0;           // its trial's visits so far
  bool reserve = false;     // searched beyond `candidates`: tried only if the correction says so
  double corrected_s = -1;  // the prediction corrected by the trials (once they are done)
  // Tried in the second round of trials: the reserve candidates the correction picked, and the
  // best of the first trials again beside them (its measured_s then that round's; before, in
  // first_measured_s, and its counted steps from `second_from` on).
  bool second = false;
  double first_measured_s = -1;
  size_t second_from = 0;
};

class AutoStrategy {
 public:
  // Collective (every rank, the same options). REQUIRES: comm, store and optimizer outlive it.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<AutoStrategy>> Create(
      Communicator* comm, core::ParameterStore* store, core::Optimizer* optimizer,
      AutoOptions options);
  ~AutoStrategy();

  // One training step, as DataParallelStep::Run; the first steps probe, profile and try
  // candidates as the header says.
  [[nodiscard]] absl::StatusOr<StepTimes> Run(
      int64_t local_count, const std::function<absl::Status(const StepHooks&)>& compute,
      bool run_empty = false);

  bool decided() const { return phase_ == Phase::kDecided; }
  bool profiling() const { return phase_ == Phase::kProfile; }
  // Where the run ends before the search decided (its trials need more steps than the run
  // has): decides from the trials so far, a visit under way counted with its counted steps and
  // every candidate with any counted step measured from those (the report says so). Where none
  // has one (the run ended while profiling, or in the first trial's warm-up step) it stays
  // undecided: the run trained under the strategy of its steps. Collective; nothing where
  // decided().
  [[nodiscard]] absl::Status Conclude();
  // Whether the decision was Conclude's, on trials cut short.
  bool cut_short() const { return cut_short_; }
  // Steps run so far before the decision: profiled, and trial steps (of the trial steps the
  // first round of trials planned: every pending candidate's, warm-up steps included).
  int profiled_steps() const { return static_cast<int>(profiled_.size()); }
  int trial_steps_run() const { return trial_steps_run_; }
  int trial_steps_planned() const { return trial_steps_planned_; }
  // The synchronizer of the current step's strategy.
  GradientSynchronizer* synchronizer() const { return sync_.get(); }
  // The probed cluster (valid after the first step), as the probe found it.
  const ClusterSpec& cluster() const { return cluster_; }
  // The probed cluster calibrated at the profiled step, which the search and the trials'
  // predictions use (valid once profiling is done).
  const StepCalibration& step_calibration() const { return step_calibration_; }
  // What the search found (valid once profiling is done) and what was tried.
  const ModelProfile& profile() const { return profile_; }
  const std::vector<AutoCandidate>& candidates() const { return candidates_; }
  // The chosen one (valid once decided()).
  const AutoCandidate& chosen() const { return candidates_[chosen_]; }
  // The cost model's correction fitted to the trials (valid once decided()).
  const TrialCorrection& correction() const { return correction_; }
  // The step-to-step spread of the trials' counted steps, relative, pooled over the strategies
  // (PooledSpread; valid once decided(), 0 where no trial counted two steps): what each
  // candidate's standard_error is computed from.
  double spread() const { return spread_; }
  // The same spread of the steps as measured, where equal_work took them to the profile's
  // work (else spread()): what taking the work out of the steps removed.
  double raw_spread() const { return raw_spread_; }
  // The profile's own work (compute less the hooks) a labelled vertex, and its mean labelled
  // vertices a step, the slowest rank's (0 where not measured): what equal_work scales by.
  double work_rate() const { return work_rate_; }
  double work_ref() const { return work_ref_; }
  // The profiled strategy measured twice, in the profile and in its own trial (valid once
  // decided()): its trial's median over the profile's (step_ms), less 1; none where it was not
  // tried. What moves a whole trial (the machine over the minutes of a run) and so the trials'
  // standard errors, taken about each trial's own mean, do not see.
  std::optional<double> drift() const;
  // Synchronizers made so far: the profile's, then one per candidate's trial (kept between its
  // visits), and the chosen one's unless it was the last tried.
  int synchronizers_made() const { return synchronizers_made_; }
  // Seconds spent probing; the cost model's own time; beyond what the chosen strategy would
  // have taken, before the decision (valid once decided()): the search's (SearchCost) and the
  // builders' trials (the comparison's, none without try_builders).
  double probe_seconds() const { return probe_seconds_; }
  double search_seconds() const { return search_seconds_; }
  struct SearchCost {
    // Steps slower than the chosen strategy's measured step (slowest-rank times): the profiled
    // steps (the search's only), the trials' first (uncounted) steps and their counted steps.
    double profile_s = 0, first_steps_s = 0, counted_steps_s = 0;
    // The time in Run beyond the steps' own and the cost model's (the least over ranks: the
    // others' waits for the slowest are in its step times): the new synchronizer of each
    // strategy tried (its VerifyConsistent and communicators; `synchronizers_s` of it, the
    // least over ranks too, charged to the part whose trial it starts), gathering the
    // profile (BuildModelProfile) and the trials' times.
    double switching_s = 0;
    double synchronizers_s = 0;
    double steps_s() const { return profile_s + first_steps_s + counted_steps_s; }
    double total_s() const { return steps_s() + switching_s; }
  };
  const SearchCost& search_cost() const { return search_cost_; }
  const SearchCost& comparison_cost() const { return comparison_cost_; }
  // A table: every candidate's predicted and measured step time, the choice, the costs.
  std::string Report() const;

 private:
  enum class Phase { kProfile, kTrial, kDecided };
  AutoStrategy(Communicator* comm, core::ParameterStore* store, core::Optimizer* optimizer,
               AutoOptions options);
  // Trains under `strategy` from the next step: candidates_[candidate]'s (kNoCandidate: the
  // profile's). A candidate's synchronizer is kept between the visits of its trial (made once,
  // not once a visit: with the trials in rounds that was seconds of the search) and, where the
  // chosen one is the last tried, for the training after.
  static constexpr size_t kNoCandidate = static_cast<size_t>(-1);
  absl::Status Use(const Strategy& strategy, size_t candidate = kNoCandidate);
  // The profiled steps' time into the profile (strategy, step_ms) and the cluster calibrated at
  // it (step_calibration_).
  absl::Status CalibrateToProfile();
  // The search's cost model: the searched candidates and the builders, predicted.
  absl::Status RankCandidates();
  // After the profile: the early builder's steps begin (early_phase_), or, where there is
  // none, the trials (BeginTrials).
  absl::Status StartEarly();
  // The poll cost fitted to the early steps' compute (and the cluster calibrated again with
  // it), into profile_.
  absl::Status FitPolls();
  // The candidates ranked and the first round of trials started.
  absl::Status BeginTrials();
  // The steps of a profile from its first: profile_steps, or where there is a trial budget,
  // more where steps as slow as the first's (the slowest rank's, so that every rank counts the
  // same) take less than `seconds`. Collective where there is a budget.
  absl::StatusOr<int> StepsFor(double seconds, const StepTimes& first);
  // Run's step before the decision: profiling, or a trial.
  absl::StatusOr<StepTimes> Search(int64_t local_count,
                                   const std::function<absl::Status(const StepHooks&)>& compute,
                                   bool run_empty);
  absl::Status Decide();
  // Whether candidates_[i] is still to be tried (or its trial to be finished).
  bool Pending(size_t i) const;
  // The counted steps of each trial, its visits (trial_rounds, at most one a counted step), and
  // the steps of candidate c's next visit (its warm-up step included): trial_steps_ and
  // trial_rounds_, the options' or, with trial_seconds, what the budget gives (SizeTrials).
  void SizeTrials();
  int WarmUpSteps() const;  // a visit's first, not counted (where trial_steps_ > 1)
  int CountedSteps() const;
  int Rounds() const;
  int VisitSteps(const AutoCandidate& c) const;
  // The fastest measured candidate within the noise band (see the header).
  size_t BestMeasured() const;
  // The least median of the counted steps so far over the candidates (the cutoff's reference);
  // < 0 where none has any.
  double BestSoFar() const;
  // Starts the first round of trials of the pending candidates, or decides if none is pending.
  absl::Status StartTrials();
  // Starts the next visit of this round, or of the next round, or decides.
  absl::Status NextVisit();
  // Ends the visit of candidates_[trying_] with the steps so far (`cut`: its trial ends here,
  // measured from the steps counted so far), and starts the next one (or decides). Collective.
  absl::Status EndVisit(bool cut);
  // c's measured time: the median of its counted steps (of the second round's, where it was
  // the best of the first, tried again).
  static void Measure(AutoCandidate& c);
  // EndVisit's first part: the visit's steps counted (and, where `whole`, the visit counted and
  // the trial measured where it ends; not `whole`: a visit the run's end cut short). Collective.
  absl::Status FoldVisit(bool cut, bool whole);
  // Empties the current visit's steps (trial_times_ and their compute, hooks and work).
  void ClearVisitSteps();
  // work_rate_, work_ref_ and profile_vertices_ from the profiled steps. Collective.
  absl::Status MeasureWorkRate();
  // Whether counted steps are taken at the profile's work: equal_work, and a rate measured.
  bool AtEqualWork() const { return options_.equal_work && work_rate_ > 0; }
  // The profile's counted steps (the slowest rank's), each at the profile's mean work where
  // equal_work (as a trial's counted steps are), else as measured: what profile_.step_ms is the
  // median of.
  std::vector<double> ProfileStepsAtWork() const;
  // Adds the time since the current Run began to the search's or the comparison's (once).
  void ChargeRun();
  // The part the current step belongs to: a builder's trial is the comparison's.
  enum Part { kSearch = 0, kComparison = 1 };
  Part CurrentPart() const;

  Communicator* comm_;
  core::ParameterStore* store_;
  core::Optimizer* optimizer_;
  AutoOptions options_;
  Phase phase_ = Phase::kProfile;
  std::unique_ptr<GradientSynchronizer> sync_;
  size_t sync_of_ = kNoCandidate;  // the candidate sync_ is of
  int synchronizers_made_ = 0;
  // By candidate: the synchronizers of trials with visits to come (while the trials last).
  std::vector<std::unique_ptr<GradientSynchronizer>> kept_syncs_;
  std::unique_ptr<DataParallelStep> step_;
  ClusterSpec cluster_;
  StepCalibration step_calibration_;
  ModelProfile profile_;
  std::vector<StepTimes> profiled_;
  std::vector<AutoCandidate> candidates_;
  size_t trying_ = 0;                                // the candidate in trial
  std::vector<double> trial_times_;                  // this rank's step times of the current visit
  std::vector<double> trial_compute_, trial_hooks_;  // and their compute and hooks
  std::vector<double> trial_work_;                   // and their labelled vertices (local_count)
  int round_ = 0;                                    // the trials' round, and its order of visits
  std::vector<size_t> order_;
  size_t next_in_order_ = 0;
  size_t chosen_ = 0;
  TrialCorrection correction_;
  double spread_ = 0, raw_spread_ = 0;
  double work_rate_ = 0, work_ref_ = 0;
  std::vector<double> profile_work_;      // this rank's labelled vertices of each profiled step
  std::vector<double> profile_vertices_;  // and the slowest rank's (MeasureWorkRate)
  int profiled_candidate_ = -1;           // the candidate that is the profiled builder's strategy
  std::vector<double> out_of_sample_;     // LeaveOneOutErrors of the trials the correction fitted
  bool corrected_round_ = false;  // the reserve candidates the correction picked were queued
  bool second_round_ = false;     // ... and tried in a second round (AutoCandidate::second)
  bool cut_short_ = false;
  int trial_steps_run_ = 0, trial_steps_planned_ = 0;
  int trial_steps_ = 0, trial_rounds_ = 0;  // as the trials run (SizeTrials)
  int profile_target_ = 0;                  // the steps to profile (from its first step)
  double budget_step_s_ = 0;                // the fastest predicted step, where it sized them
  double probe_seconds_ = 0, search_seconds_ = 0;
  SearchCost search_cost_, comparison_cost_;
  // Slowest-rank step times of the profile, before the decision.
  std::vector<double> profile_steps_;
  // The early builder's steps (poll cost): its name ("" none, and why in early_note_), their
  // times on this rank, and their slowest-rank step times; the target count; the fit, and the
  // medians of the slowest rank's compute it was fitted to.
  std::string early_, early_note_;
  bool early_phase_ = false;
  std::vector<StepTimes> early_times_;
  std::vector<double> early_steps_;
  int early_target_ = 0;
  CostModel::PollCostFit poll_fit_;
  double profile_compute_s_ = 0, early_compute_s_ = 0;
  // The steps before the decision, in two parts: the profile's and the searched candidates'
  // (kSearch), the builders' (kComparison).
  struct PartTimes {
    std::vector<double> first_steps, counted_steps;  // the trials' (slowest-rank times)
    // This rank's seconds: in Run, in its steps, making synchronizers.
    double run_s = 0, steps_s = 0, use_s = 0;
  };
  PartTimes parts_[2];
  double run_began_ = 0;  // when the current Run began (0: none, or already charged)
  Part run_part_ = kSearch;
};

}  // namespace cavs::distributed
