// A small model whose per-sample gradients are computed by hand, for the synchronizer tests:
//
//   x = E[token]                    embed/E  [kVocab, kEmbed]   row-sparse gradient
//   h = tanh(x W1 + b1)             hidden/W [kEmbed, kHidden], hidden/b [kHidden]
//   logits = h W2 + b2              out/W    [kHidden, kClasses], out/b [kClasses]
//   loss = cross-entropy(softmax(logits), label)
//
// Sample s has token (7 s) mod 13 (few distinct rows, so ranks touch the same rows) and label
// s mod kClasses. GradientSums writes, into a store, the SUM over the given samples of the
// per-sample gradients (accumulated in double, stored as float), the contract of the
// synchronizer; a reference run on one store over the union batch divides by the count itself.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/parameter.h"
#include "core/status.h"

namespace cavs::distributed::testing {

constexpr int64_t kVocab = 40, kEmbed = 6, kHidden = 5, kClasses = 4;

inline absl::Status BuildModel(core::ParameterStore& store) {
  using core::Initializer;
  CAVS_RETURN_IF_ERROR(
      store.GetOrCreate("embed/E", {kVocab, kEmbed}, Initializer::Uniform(-0.5f, 0.5f), true)
          .status());
  CAVS_RETURN_IF_ERROR(
      store.GetOrCreate("hidden/W", {kEmbed, kHidden}, Initializer::XavierUniform()).status());
  CAVS_RETURN_IF_ERROR(
      store.GetOrCreate("hidden/b", {kHidden}, Initializer::Uniform(-0.1f, 0.1f)).status());
  CAVS_RETURN_IF_ERROR(
      store.GetOrCreate("out/W", {kHidden, kClasses}, Initializer::XavierUniform()).status());
  return store.GetOrCreate("out/b", {kClasses}, Initializer::Uniform(-0.1f, 0.1f)).status();
}

inline int64_t TokenOf(int64_t sample) { return (7 * sample) % 13; }
inline int64_t LabelOf(int64_t sample) { return sample % kClasses; }

// Gradient sums in double: dense per parameter name, sparse per (row -> values).
struct GradSums {
  std::map<std::string, std::vector<double>> dense;
  std::map<int64_t, std::vector<double>> embed_rows;
};

inline GradSums ComputeGradSums(const core::ParameterStore& store,
                                const std::vector<int64_t>& samples) {
  auto values = [&](const std::string& name) { return store.Find(name)->value.ToVector(); };
  const std::vector<float> E = values("embed/E"), W1 = values("hidden/W"), b1 = values("hidden/b"),
                           W2 = values("out/W"), b2 = values("out/b");
  GradSums g;
  g.dense["hidden/W"].assign(W1.size(), 0.0);
  g.dense["hidden/b"].assign(b1.size(), 0.0);
  g.dense["out/W"].assign(W2.size(), 0.0);
  g.dense["out/b"].assign(b2.size(), 0.0);
  for (int64_t s : samples) {
    const int64_t t = TokenOf(s), y = LabelOf(s);
    std::vector<double> x(kEmbed), h(kHidden), logits(kClasses), p(kClasses);
    for (int64_t d = 0; d < kEmbed; ++d) x[d] = E[t * kEmbed + d];
    for (int64_t j = 0; j < kHidden; ++j) {
      double z = b1[j];
      for (int64_t d = 0; d < kEmbed; ++d) z += x[d] * W1[d * kHidden + j];
      h[j] = std::tanh(z);
    }
    double max_logit = -1e300, norm = 0.0;
    for (int64_t c = 0; c < kClasses; ++c) {
      logits[c] = b2[c];
      for (int64_t j = 0; j < kHidden; ++j) logits[c] += h[j] * W2[j * kClasses + c];
      max_logit = std::max(max_logit, logits[c]);
    }
    for (int64_t c = 0; c < kClasses; ++c) norm += p[c] = std::exp(logits[c] - max_logit);
    std::vector<double> dz(kHidden, 0.0), dx(kEmbed, 0.0);
    for (int64_t c = 0; c < kClasses; ++c) {
      const double dl = p[c] / norm - (c == y ? 1.0 : 0.0);
      g.dense["out/b"][c] += dl;
      for (int64_t j = 0; j < kHidden; ++j) {
        g.dense["out/W"][j * kClasses + c] += h[j] * dl;
        dz[j] += W2[j * kClasses + c] * dl;
      }
    }
    for (int64_t j = 0; j < kHidden; ++j) {
      dz[j] *= 1.0 - h[j] * h[j];
      g.dense["hidden/b"][j] += dz[j];
      for (int64_t d = 0; d < kEmbed; ++d) {
        g.dense["hidden/W"][d * kHidden + j] += x[d] * dz[j];
        dx[d] += W1[d * kHidden + j] * dz[j];
      }
    }
    std::vector<double>& row = g.embed_rows[t];
    row.resize(kEmbed, 0.0);
    for (int64_t d = 0; d < kEmbed; ++d) row[d] += dx[d];
  }
  return g;
}

// Writes gradient sums into the store's gradients (as float).
inline absl::Status WriteGradients(const GradSums& g, core::ParameterStore& store) {
  CAVS_RETURN_IF_ERROR(store.ZeroGrad());
  for (const auto& [name, sums] : g.dense) {
    core::Parameter* p = store.Find(name);
    std::vector<float> f(sums.begin(), sums.end());
    CAVS_RETURN_IF_ERROR(p->grad.CopyFrom(core::Tensor::FromVector(f, p->grad.shape())));
  }
  std::vector<int64_t> rows;
  std::vector<float> values;
  for (const auto& [row, sums] : g.embed_rows) {
    rows.push_back(row);
    values.insert(values.end(), sums.begin(), sums.end());
  }
  core::Parameter* e = store.Find("embed/E");
  return store.AccumulateSparseGrad(
      e, rows, core::Tensor::FromVector(values, {static_cast<int64_t>(rows.size()), kEmbed}));
}

// The synchronized gradient of `p` as a dense host vector (sparse rows scattered).
inline std::vector<float> DenseGradient(const core::Parameter& p) {
  if (!p.sparse_grad) return p.grad.ToVector();
  std::vector<float> dense(static_cast<size_t>(p.value.numel()), 0.0f);
  const std::vector<float> values = p.grad_values.ToVector();
  const int64_t cols = p.value.cols();
  for (size_t i = 0; i < p.grad_rows.size(); ++i) {
    for (int64_t c = 0; c < cols; ++c) dense[p.grad_rows[i] * cols + c] = values[i * cols + c];
  }
  return dense;
}

// The expected mean gradient of `name` over `count` samples whose sums are `g`, dense.
inline std::vector<double> ExpectedMean(const GradSums& g, const std::string& name, int64_t count) {
  std::vector<double> out;
  if (name == "embed/E") {
    out.assign(kVocab * kEmbed, 0.0);
    for (const auto& [row, sums] : g.embed_rows) {
      for (int64_t d = 0; d < kEmbed; ++d) out[row * kEmbed + d] = sums[d];
    }
  } else {
    out = g.dense.at(name);
  }
  for (double& v : out) v = count > 0 ? v / count : 0.0;
  return out;
}

// Largest |got - want| / max(|want|, floor) over the elements; `floor` keeps elements near zero
// from turning rounding into large relative errors.
inline double MaxRelativeError(const std::vector<float>& got, const std::vector<double>& want,
                               double floor = 1e-3) {
  if (got.size() != want.size()) return 1e30;
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]) / std::max(std::abs(want[i]), floor));
  }
  return worst;
}

// Largest |got - want| over the largest |want|: the error relative to the tensor's scale, the
// measure for float16 compression, whose rounding is relative to the values summed.
inline double MaxScaledError(const std::vector<float>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return 1e30;
  double worst = 0.0, scale = 1e-30;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return worst / scale;
}

}  // namespace cavs::distributed::testing
