// The cost model corrected by trials: after some strategies ran for a few steps, a fit of their
// measured step times to the model's breakdown of its predictions, used to re-predict the
// strategies that did not run (AutoSync's learned correction, as a least-squares fit: with a
// handful of trials a linear model is what the data can carry).
//
// The form: a prediction's step is compute + complete + optimizer + exposed communication, the
// exposed part summed per unit kind (allreduce buckets, PS shards, sparse allgathers, sparse PS
// shards; UnitPrediction::exposed_s). Measured,
//
//   measured_i = compute + complete + optimizer + offset + sum_k factor_k * exposed_k,i
//
// offset for what every step pays beyond the model (polling, the synchronizer's bookkeeping)
// and factor_k for how far each kind's time runs from the model on this cluster (a parameter
// server's hot spot, a compressor's conversions). Fitted by least squares with a ridge towards
// the model itself (offset 0, factors 1) weighted by `prior` trials' worth, so that a kind seen
// in one trial moves only as far as the evidence allows; factors clamped to [1/8, 8].
//
// The ridge's scale per unknown is its column's mean square over the trials, or, for the fit
// that predicts a given strategy (`target`), that strategy's own square where it is larger: a
// kind the trials barely exposed (a few ms of sparse allgather) is weakly held by a ridge on
// their scale, and its factor can wander to the clamp at no cost to the fit, then multiply the
// 50 ms a sparse-heavy strategy exposes. On the target's scale the prior is `prior` trials'
// worth of what that strategy exposes: the factor moves only as far as the trials show for
// time of that size. And a factor's scale is at least the trials' noise (the mean square of
// their standard errors, where they give them): a kind whose time is under the noise of a
// measured step cannot be told from that noise, so the prior holds its factor to where it
// moves a step by about the noise, not to the clamp.
//
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "distributed/cost_model.h"

namespace cavs::distributed {

struct TrialCorrection {
  double offset_s = 0.0;
  std::array<double, kNumUnitKinds> factor = [] {  // by UnitKind; 1: as the model says
    std::array<double, kNumUnitKinds> ones{};
    ones.fill(1.0);
    return ones;
  }();
  int trials = 0;  // measurements fitted

  // The corrected step time of `p`.
  double Predict(const Prediction& p) const;
  // "offset +3.1 ms, allreduce x0.92, ps x0.74 (8 trials)": the kinds the fit moved.
  std::string Describe() const;
};

// One measured strategy: its prediction, its measured step time (seconds) and that
// measurement's standard error (seconds; 0: not known).
struct Trial {
  const Prediction* prediction = nullptr;
  double measured_s = 0.0;
  double standard_error_s = 0.0;
};

// The fit; no trials: the identity correction. `prior` >= 0. With `target`, the fit used to
// predict that strategy (the ridge at least on its scale, above).
TrialCorrection FitTrialCorrection(const std::vector<Trial>& trials, double prior = 0.5,
                                   const Prediction* target = nullptr);

// The target's step corrected by the fit for it: FitTrialCorrection(trials, prior, &target)
// .Predict(target).
double CorrectedStep(const std::vector<Trial>& trials, const Prediction& target,
                     double prior = 0.5);

// The fit checked out of sample: for each trial, (corrected - measured) / measured with the
// correction fitted to the other trials alone (one trial: the model's own error). The in-sample
// error of a fit with as many unknowns as trials says nothing; this says how far the corrected
// model is off for a strategy it did not see, as it is used for the untried ones.
// Ridge::kTarget: each trial predicted by the fit for it (CorrectedStep), as the untried ones
// are; kTrials: by the fit without a target, the ridge on the trials' scale alone (to compare
// the two, as cavs-sim --measured does).
enum class Ridge { kTarget, kTrials };
std::vector<double> LeaveOneOutErrors(const std::vector<Trial>& trials, double prior = 0.5,
                                      Ridge ridge = Ridge::kTarget);

}  // namespace cavs::distributed
