#include "ops/cpu/cpu_softmax.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cpu/cpu_math.h"
#include "ops/cpu/cpu_parallel.h"

namespace cavs::ops::cpu {
namespace {

// Rows per chunk of the deterministic loss sum.
constexpr int64_t kRowsPerChunk = 32;

absl::Status CheckArgs(const float* logits, int64_t ld, int64_t n, int64_t c,
                       const int32_t* labels) {
  if (n < 0 || c < 0 || (n > 0 && c == 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SoftmaxCrossEntropy: bad size n=", n, " classes=", c));
  }
  if (n == 0) return absl::OkStatus();
  if (logits == nullptr || labels == nullptr || ld < 0 || (n > 1 && ld < c)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SoftmaxCrossEntropy: logits or labels null, or ld ", ld, " < classes ", c));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (labels[i] >= c) {
      return absl::InvalidArgumentError(absl::StrCat("SoftmaxCrossEntropy: row ", i, " has label ",
                                                     labels[i], " but only ", c, " classes"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

namespace internal {

struct RowResult {
  double loss = 0.0;
  int64_t correct = 0;
};

// One row: x: [c], d: [c] or null. Returns the row's loss and whether its argmax is the label.
CAVS_CPU_VECTOR_CLONES
RowResult SoftmaxRow(const float* x, int64_t c, int32_t label, float scale, float* d,
                     int32_t* pred) {
  float mx = x[0];
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < c; ++j) mx = x[j] > mx ? x[j] : mx;
  int64_t best = 0;
  while (best < c - 1 && !(x[best] == mx)) ++best;
  if (pred != nullptr) *pred = static_cast<int32_t>(best);
  if (label < 0) {
    if (d != nullptr) {
      for (int64_t j = 0; j < c; ++j) d[j] = 0.0f;
    }
    return {};
  }
  float sum = 0.0f;
  if (d != nullptr) {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < c; ++j) {
      d[j] = Exp(x[j] - mx);
      sum += d[j];
    }
    const float inv = scale / sum;
    for (int64_t j = 0; j < c; ++j) d[j] *= inv;
    d[label] -= scale;
  } else {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < c; ++j) sum += Exp(x[j] - mx);
  }
  RowResult r;
  r.loss = std::log(static_cast<double>(sum)) - (static_cast<double>(x[label]) - mx);
  r.correct = best == label ? 1 : 0;
  return r;
}

}  // namespace internal

absl::Status SoftmaxCrossEntropy(const float* logits, int64_t ld, int64_t n, int64_t c,
                                 const int32_t* labels, float scale, float* dlogits, float* stats,
                                 int32_t* pred) {
  CAVS_RETURN_IF_ERROR(CheckArgs(logits, ld, n, c, labels));
  if (n == 0) return absl::OkStatus();
  using internal::RowResult;
  std::vector<RowResult> partial(static_cast<size_t>(NumChunks(n, kRowsPerChunk)));
  ParallelForChunks(n, kRowsPerChunk, c, [&](int64_t chunk, int64_t begin, int64_t end) {
    RowResult acc;
    for (int64_t i = begin; i < end; ++i) {
      const RowResult r = internal::SoftmaxRow(logits + i * ld, c, labels[i], scale,
                                               dlogits != nullptr ? dlogits + i * c : nullptr,
                                               pred != nullptr ? pred + i : nullptr);
      acc.loss += r.loss;
      acc.correct += r.correct;
    }
    partial[static_cast<size_t>(chunk)] = acc;
  });
  if (stats != nullptr) {
    RowResult total;
    for (const RowResult& r : partial) {
      total.loss += r.loss;
      total.correct += r.correct;
    }
    stats[0] += static_cast<float>(total.loss);
    stats[1] += static_cast<float>(total.correct);
  }
  return absl::OkStatus();
}

}  // namespace cavs::ops::cpu
