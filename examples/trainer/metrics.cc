#include "examples/trainer/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace cavs::trainer {

double EvalMetrics::Perplexity() const { return labelled > 0 ? std::exp(MeanLoss()) : 0.0; }

double EvalMetrics::BinaryAccuracy() const {
  if (binary_roots == 0) return std::numeric_limits<double>::quiet_NaN();
  return Ratio(binary_correct, binary_roots);
}

bool BinaryPositive(const float* logits) {
  float mx = *std::max_element(logits, logits + 5);
  double p[5];
  for (int k = 0; k < 5; ++k) p[k] = std::exp(static_cast<double>(logits[k] - mx));
  return p[3] + p[4] > p[0] + p[1];
}

absl::Status AccumulateMetrics(const std::vector<scheduler::Graph>& graphs,
                               const scheduler::RunResult& result, bool sentiment, int classes,
                               EvalMetrics* m) {
  m->loss_sum += result.loss_sum;
  m->labelled += result.labelled;
  m->correct += result.correct;
  if (!sentiment) return absl::OkStatus();
  if (result.predictions.size() != graphs.size() || result.outputs.size() != graphs.size()) {
    return absl::InternalError("evaluation: the run returned no predictions or outputs");
  }
  for (size_t g = 0; g < graphs.size(); ++g) {
    const scheduler::Graph& graph = graphs[g];
    for (int32_t root : graph.Roots()) {
      int32_t gold = graph.labels.empty() ? -1 : graph.labels[root];
      if (gold < 0) continue;
      ++m->roots;
      if (result.predictions[g][root] == gold) ++m->root_correct;
      if (gold == 2 || classes != 5) continue;
      ++m->binary_roots;
      bool positive = BinaryPositive(&result.outputs[g][static_cast<size_t>(root) * classes]);
      if (positive == (gold > 2)) ++m->binary_correct;
    }
  }
  return absl::OkStatus();
}

}  // namespace cavs::trainer
