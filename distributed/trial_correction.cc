#include "distributed/trial_correction.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cavs::distributed {

namespace {

constexpr int kKinds = kNumUnitKinds;
constexpr int kUnknowns = kKinds + 1;  // the offset, then a factor per kind
constexpr double kMinFactor = 0.125, kMaxFactor = 8.0;

std::array<double, kKinds> ExposedByKind(const Prediction& p) {
  std::array<double, kKinds> x{};
  for (const UnitPrediction& u : p.units) x[static_cast<int>(u.kind)] += u.exposed_s;
  return x;
}

// Solves a x = b in place by Gaussian elimination with partial pivoting; false if singular.
bool Solve(std::array<std::array<double, kUnknowns>, kUnknowns>& a,
           std::array<double, kUnknowns>& b) {
  for (int c = 0; c < kUnknowns; ++c) {
    int pivot = c;
    for (int r = c + 1; r < kUnknowns; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    }
    if (std::abs(a[pivot][c]) < 1e-300) return false;
    std::swap(a[c], a[pivot]);
    std::swap(b[c], b[pivot]);
    for (int r = c + 1; r < kUnknowns; ++r) {
      const double f = a[r][c] / a[c][c];
      for (int k = c; k < kUnknowns; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (int c = kUnknowns - 1; c >= 0; --c) {
    for (int k = c + 1; k < kUnknowns; ++k) b[c] -= a[c][k] * b[k];
    b[c] /= a[c][c];
  }
  return true;
}

}  // namespace

double TrialCorrection::Predict(const Prediction& p) const {
  const std::array<double, kKinds> x = ExposedByKind(p);
  const double fixed = p.compute_s + p.complete_s + p.optimizer_s;
  double step = fixed + offset_s;
  for (int k = 0; k < kKinds; ++k) step += factor[k] * x[k];
  return std::max(step, fixed);
}

std::string TrialCorrection::Describe() const {
  std::string out = absl::StrFormat("offset %+.1f ms", 1e3 * offset_s);
  for (int k = 0; k < kKinds; ++k) {
    if (factor[k] != 1.0)
      absl::StrAppendFormat(&out, ", %s x%.2f", UnitKindName(static_cast<UnitKind>(k)), factor[k]);
  }
  absl::StrAppend(&out, " (", trials, trials == 1 ? " trial)" : " trials)");
  return out;
}

TrialCorrection FitTrialCorrection(const std::vector<Trial>& trials, double prior,
                                   const Prediction* target) {
  TrialCorrection fit;
  if (trials.empty()) return fit;
  fit.trials = static_cast<int>(trials.size());
  // Rows: [1, exposed_0, ..., exposed_3] -> measured - compute - optimizer.
  std::vector<std::array<double, kUnknowns>> rows;
  std::vector<double> ys;
  std::array<double, kUnknowns> scale{};  // mean square of each column, for the ridge
  for (const Trial& t : trials) {
    const std::array<double, kKinds> x = ExposedByKind(*t.prediction);
    std::array<double, kUnknowns> row{};
    row[0] = 1.0;
    for (int k = 0; k < kKinds; ++k) row[k + 1] = x[k];
    rows.push_back(row);
    ys.push_back(t.measured_s - t.prediction->compute_s - t.prediction->complete_s -
                 t.prediction->optimizer_s);
    for (int i = 0; i < kUnknowns; ++i) {
      scale[i] += row[i] * row[i] / static_cast<double>(trials.size());
    }
  }
  // The trials' noise: a factor's column under it cannot be told from it.
  double noise = 0.0;
  for (const Trial& t : trials) {
    noise += t.standard_error_s * t.standard_error_s / static_cast<double>(trials.size());
  }
  std::array<double, kUnknowns> ridge = scale;
  for (int k = 0; k < kKinds; ++k) {
    if (scale[k + 1] > 0) ridge[k + 1] = std::max(ridge[k + 1], noise);
  }
  if (target != nullptr) {
    const std::array<double, kKinds> x = ExposedByKind(*target);
    for (int k = 0; k < kKinds; ++k) ridge[k + 1] = std::max(ridge[k + 1], x[k] * x[k]);
  }
  // Least squares with the ridge: `prior` trials' worth of evidence that the model is right
  // (offset 0, factors 1), per unknown on its own column's scale (or the target's or the
  // noise's, where larger); a column no trial has (a kind none of them used) stays at the model's
  // value. Factors are bounded: one the unbounded solution puts outside [kMinFactor, kMaxFactor] is
  // fixed at the bound and the others are solved again (an active set; at most one pass per kind),
  // so that no other unknown is left compensating for a value the bound took away.
  std::array<double, kUnknowns> model;  // the model's own values: offset 0, factors 1
  model.fill(1.0);
  model[0] = 0.0;
  std::array<bool, kUnknowns> fixed{};
  std::array<double, kUnknowns> value = model;
  for (int k = 0; k < kKinds; ++k) fixed[k + 1] = scale[k + 1] <= 0;
  for (int pass = 0; pass <= kKinds; ++pass) {
    std::array<std::array<double, kUnknowns>, kUnknowns> ata{};
    std::array<double, kUnknowns> atb{};
    for (size_t t = 0; t < rows.size(); ++t) {
      double y = ys[t];
      for (int i = 0; i < kUnknowns; ++i) {
        if (fixed[i]) y -= rows[t][i] * value[i];
      }
      for (int i = 0; i < kUnknowns; ++i) {
        if (fixed[i]) continue;
        for (int j = 0; j < kUnknowns; ++j) {
          if (!fixed[j]) ata[i][j] += rows[t][i] * rows[t][j];
        }
        atb[i] += rows[t][i] * y;
      }
    }
    for (int i = 0; i < kUnknowns; ++i) {
      if (fixed[i]) {  // an identity row: the solve leaves it at its value
        ata[i][i] = 1.0;
        atb[i] = value[i];
        continue;
      }
      const double w = prior * ridge[i];
      ata[i][i] += w;
      atb[i] += w * model[i];
    }
    if (!Solve(ata, atb)) return fit;
    bool clamped = false;
    for (int i = 0; i < kUnknowns; ++i) {
      value[i] = atb[i];
      if (i > 0 && !fixed[i] && (value[i] < kMinFactor || value[i] > kMaxFactor)) {
        value[i] = std::clamp(value[i], kMinFactor, kMaxFactor);
        fixed[i] = true;
        clamped = true;
      }
    }
    if (!clamped) break;
  }
  fit.offset_s = value[0];
  for (int k = 0; k < kKinds; ++k) fit.factor[k] = value[k + 1];
  return fit;
}

double CorrectedStep(const std::vector<Trial>& trials, const Prediction& target, double prior) {
  return FitTrialCorrection(trials, prior, &target).Predict(target);
}

std::vector<double> LeaveOneOutErrors(const std::vector<Trial>& trials, double prior, Ridge ridge) {
  std::vector<double> errors;
  std::vector<Trial> others;
  for (size_t i = 0; i < trials.size(); ++i) {
    others.clear();
    for (size_t j = 0; j < trials.size(); ++j) {
      if (j != i) others.push_back(trials[j]);
    }
    const Prediction& p = *trials[i].prediction;
    const double predicted = ridge == Ridge::kTarget ? CorrectedStep(others, p, prior)
                                                     : FitTrialCorrection(others, prior).Predict(p);
    errors.push_back((predicted - trials[i].measured_s) / trials[i].measured_s);
  }
  return errors;
}

}  // namespace cavs::distributed
