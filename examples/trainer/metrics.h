// Evaluation metrics of cavs-train.
//
// Sentiment (SST, 5 classes): root fine-grained accuracy; binary accuracy on the roots whose
// gold label is not neutral (gold 0,1 negative, 3,4 positive, 2 excluded), the prediction being
// the more probable side, P(0)+P(1) against P(3)+P(4), of the softmax of the root's logits;
// and fine-grained accuracy over all labelled nodes. Language models: perplexity
// exp(mean cross-entropy per predicted token).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/executor_common.h"
#include "scheduler/graph.h"

namespace cavs::trainer {

struct EvalMetrics {
  double loss_sum = 0.0;
  int64_t labelled = 0;  // labelled vertices (tokens predicted, for a language model)
  int64_t correct = 0;   // of those, argmax == label
  int64_t roots = 0;
  int64_t root_correct = 0;
  int64_t binary_roots = 0;  // roots with a non-neutral gold label
  int64_t binary_correct = 0;

  double MeanLoss() const { return labelled > 0 ? loss_sum / labelled : 0.0; }
  double AllNodesAccuracy() const { return Ratio(correct, labelled); }
  double RootAccuracy() const { return Ratio(root_correct, roots); }
  // NaN where no root is non-neutral: there is no binary accuracy to report (shown "n/a",
  // null in JSON), and 0% would read as a model that gets every sentence wrong.
  double BinaryAccuracy() const;
  double Perplexity() const;

 private:
  static double Ratio(int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / b : 0.0; }
};

// Adds one batch's result to `m`. `sentiment`: also the root and binary accuracies, which need
// `result` to hold predictions and (for binary) outputs with `classes` columns.
[[nodiscard]] absl::Status AccumulateMetrics(const std::vector<scheduler::Graph>& graphs,
                                             const scheduler::RunResult& result, bool sentiment,
                                             int classes, EvalMetrics* m);

// The binary prediction for a root's 5 logits: true = positive.
bool BinaryPositive(const float* logits);

}  // namespace cavs::trainer
