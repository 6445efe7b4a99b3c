#include "examples/serve/sentence_score.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "core/flush_denormal.h"
#include "core/status.h"
#include "examples/trainer/metrics.h"
#include "ops/cpu/cpu_softmax.h"

namespace cavs::serve {
namespace {

// Row `x`'s position: probabilities exp(x - lse) in double, lse its log-sum-exp.
// x: [classes]. REQUIRES: best is the row's argmax, 0 <= next < classes. `ids`: top_k's
// scratch, kept by the caller across positions.
PositionScore ScorePosition(const float* x, int64_t classes, int32_t best, int32_t next, int top_k,
                            std::vector<int32_t>& ids) {
  const double mx = x[best];
  double sum = 0.0;
  for (int64_t c = 0; c < classes; ++c) sum += std::exp(double{x[c]} - mx);
  const double lse = mx + std::log(sum);
  PositionScore p;
  p.best = best;
  p.best_probability = std::exp(mx - lse);
  p.next_probability = std::exp(double{x[next]} - lse);
  if (top_k > 0) {
    ids.resize(static_cast<size_t>(classes));
    std::iota(ids.begin(), ids.end(), 0);
    const auto k = std::min<int64_t>(top_k, classes);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                      [x](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
    for (int64_t i = 0; i < k; ++i) p.top.emplace_back(ids[i], std::exp(double{x[ids[i]]} - lse));
  }
  return p;
}

}  // namespace

absl::StatusOr<SentenceScore> ScoreSentence(const std::vector<float>& logits, int64_t classes,
                                            const std::vector<int32_t>& next, int top_k) {
  const auto rows = static_cast<int64_t>(next.size());
  if (rows == 0 || classes < 1 || static_cast<int64_t>(logits.size()) != rows * classes) {
    return absl::InternalError(absl::StrCat("ScoreSentence: ", logits.size(), " logits for ", rows,
                                            " positions of ", classes, " classes"));
  }
  for (int32_t t : next) {
    if (t < 0 || t >= classes) {
      return absl::InternalError(
          absl::StrCat("ScoreSentence: next token ", t, " outside [0, ", classes, ")"));
    }
  }
  // The engine's loss on the CPU: the same kernel, under the same denormal mode as
  // ops::CpuKernels runs it, over the rows in the order a chain evaluated alone has them.
  float stats[2] = {0.0f, 0.0f};
  std::vector<int32_t> best(static_cast<size_t>(rows));
  {
    core::ScopedFlushDenormal flush;
    CAVS_RETURN_IF_ERROR(ops::cpu::SoftmaxCrossEntropy(logits.data(), classes, rows, classes,
                                                       next.data(), /*scale=*/0.0f, nullptr, stats,
                                                       best.data()));
  }
  // What Engine::Finish and Trainer::Evaluate make of the kernel's float sum.
  trainer::EvalMetrics m;
  m.loss_sum = stats[0];
  m.labelled = rows;
  SentenceScore s;
  s.log_prob = -m.loss_sum;
  s.tokens = rows;
  s.perplexity = m.Perplexity();
  s.positions.reserve(static_cast<size_t>(rows));
  std::vector<int32_t> ids;
  for (int64_t r = 0; r < rows; ++r) {
    s.positions.push_back(ScorePosition(&logits[static_cast<size_t>(r * classes)], classes, best[r],
                                        next[r], top_k, ids));
  }
  return s;
}

}  // namespace cavs::serve
