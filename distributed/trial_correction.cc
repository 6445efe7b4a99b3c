#include "distributed/trial_correction.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cavs::distributed {

namespace {

constexpr int kKinds = 4;
constexpr int kUnknowns = kKinds + 1;  // the offset, then a factor per kind
constexpr double kMinFactor = 0.125, kMaxFactor = 8.0;

std::array<double, kKinds> ExposedByKind(const Prediction& p) {
  std::array<double, kKinds> x{};
  for (const UnitPrediction& u : p.units) x[static_cast<int>(u.kind)] += u.exposed_s;
  return x;
}

const char* KindName(int k) {
  switch (static_cast<UnitKind>(k)) {
    case UnitKind::kBucket:
      return "allreduce";
    case UnitKind::kPsShard:
      return "ps";
    case UnitKind::kSparse:
      return "sparse";
    case UnitKind::kPsSparseShard:
      return "sparse ps";
  }
  return "?";
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
  double step = p.compute_s + p.optimizer_s + offset_s;
  for (int k = 0; k < kKinds; ++k) step += factor[k] * x[k];
  return std::max(step, p.compute_s + p.optimizer_s);
}

std::string TrialCorrection::Describe() const {
  std::string out = absl::StrFormat("offset %+.1f ms", 1e3 * offset_s);
  for (int k = 0; k < kKinds; ++k) {
    if (factor[k] != 1.0) absl::StrAppendFormat(&out, ", %s x%.2f", KindName(k), factor[k]);
  }
  absl::StrAppend(&out, " (", trials, trials == 1 ? " trial)" : " trials)");
  return out;
}

TrialCorrection FitTrialCorrection(const std::vector<Trial>& trials, double prior) {
  TrialCorrection fit;
  if (trials.empty()) return fit;
  fit.trials = static_cast<int>(trials.size());
  // Rows: [1, exposed_0, ..., exposed_3] -> measured - compute - optimizer.
  std::array<std::array<double, kUnknowns>, kUnknowns> ata{};
  std::array<double, kUnknowns> atb{};
  std::array<double, kUnknowns> scale{};  // mean square of each column, for the ridge
  for (const Trial& t : trials) {
    const std::array<double, kKinds> x = ExposedByKind(*t.prediction);
    std::array<double, kUnknowns> row{};
    row[0] = 1.0;
    for (int k = 0; k < kKinds; ++k) row[k + 1] = x[k];
    const double y = t.measured_s - t.prediction->compute_s - t.prediction->optimizer_s;
    for (int i = 0; i < kUnknowns; ++i) {
      for (int j = 0; j < kUnknowns; ++j) ata[i][j] += row[i] * row[j];
      atb[i] += row[i] * y;
      scale[i] += row[i] * row[i] / static_cast<double>(trials.size());
    }
  }
  // The ridge: `prior` trials' worth of evidence that the model is right (offset 0, factor 1),
  // per unknown on its own column's scale; a column no trial has (a kind none of them used) is
  // held at the model's value by a unit weight.
  const std::array<double, kUnknowns> target = {0, 1, 1, 1, 1};
  for (int i = 0; i < kUnknowns; ++i) {
    const double w = scale[i] > 0 ? prior * scale[i] : 1.0;
    ata[i][i] += w;
    atb[i] += w * target[i];
  }
  if (!Solve(ata, atb)) return fit;
  fit.offset_s = atb[0];
  for (int k = 0; k < kKinds; ++k) {
    fit.factor[k] = scale[k + 1] > 0 ? std::clamp(atb[k + 1], kMinFactor, kMaxFactor) : 1.0;
  }
  return fit;
}

}  // namespace cavs::distributed
