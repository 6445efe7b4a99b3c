// SentenceScore: a language model's answer for one sentence, from its chain's logits.
//
// Per position (vertex t of the chain <s> w1 .. wn, which predicts the next token): the most
// probable next token, the probability of the sentence's own next token and, on request, the
// k most probable; for the sentence its log-probability and perplexity.
//
// The sentence's figures are computed as cavs-train's evaluation computes its loss: by the
// CPU's softmax cross-entropy kernel (ops/cpu/cpu_softmax.h, the function the engine's CPU
// loss runs), over the chain's rows in vertex order, which is the engine's row order for a
// chain evaluated alone; the perplexity by trainer::EvalMetrics. So on the CPU a sentence's
// perplexity is, bit for bit, the one cavs-train reports for that sentence alone (given the
// same logits, which the server's batch invariance gives). The per-position probabilities are
// a softmax in double, as the tree server's; their logarithms add up to the sentence's
// log-probability only up to rounding (the kernel sums in float).
//
// Thread-safe (no state; the kernel may use the CPU pool, which callers share safely).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace cavs::serve {

struct PositionScore {
  int32_t best = 0;               // the most probable next token (the first of equal logits)
  double best_probability = 0.0;  // its probability
  double next_probability = 0.0;  // the probability of the sentence's own next token
  // With top_k: the top_k most probable tokens and their probabilities, most probable first
  // (equal logits: the lower id first).
  std::vector<std::pair<int32_t, double>> top;
};

struct SentenceScore {
  double log_prob = 0.0;    // ln P(w1 .. wn </s> | <s>) = -(the summed cross-entropy)
  int64_t tokens = 0;       // tokens predicted: the words and "</s>"
  double perplexity = 0.0;  // exp(-log_prob / tokens), cavs-train's formula
  std::vector<PositionScore> positions;
};

// logits: [next.size(), classes], the chain's push-0 rows in vertex order. next: the token each
// vertex predicts (ParsedRequest::next_tokens). Errors: sizes that disagree, or a token outside
// [0, classes) (Internal: the parser and the engine guarantee both).
[[nodiscard]] absl::StatusOr<SentenceScore> ScoreSentence(const std::vector<float>& logits,
                                                          int64_t classes,
                                                          const std::vector<int32_t>& next,
                                                          int top_k);

}  // namespace cavs::serve
