// ScoreSentence against a hand-computed case: the log-probability, perplexity and per-position
// probabilities of a two-position chain over three tokens, the order of the top k (equal
// logits: the lower id first), and its errors.
#include "examples/serve/sentence_score.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace cavs::serve {
namespace {

// ln Σ_j e^(x_j), in double.
double LogSumExp(const std::vector<double>& x) {
  double sum = 0;
  for (double v : x) sum += std::exp(v);
  return std::log(sum);
}

TEST(SentenceScoreTest, HandComputedChain) {
  // logits: [2, 3]. Position 0 predicts token 2, position 1 token 0 (tied with token 1).
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, 0.5f, 0.5f, -1.0f};
  absl::StatusOr<SentenceScore> s = ScoreSentence(logits, 3, {2, 0}, /*top_k=*/2);
  ASSERT_TRUE(s.ok()) << s.status();
  const double lse0 = LogSumExp({1, 2, 3}), lse1 = LogSumExp({0.5, 0.5, -1});
  const double log_prob = (3 - lse0) + (0.5 - lse1);
  EXPECT_NEAR(s->log_prob, log_prob, 1e-6);  // the kernel sums in float
  EXPECT_EQ(s->tokens, 2);
  EXPECT_DOUBLE_EQ(s->perplexity, std::exp(-s->log_prob / 2));
  ASSERT_EQ(s->positions.size(), 2u);
  const PositionScore& p0 = s->positions[0];
  EXPECT_EQ(p0.best, 2);
  EXPECT_NEAR(p0.best_probability, std::exp(3 - lse0), 1e-12);
  EXPECT_NEAR(p0.next_probability, std::exp(3 - lse0), 1e-12);
  ASSERT_EQ(p0.top.size(), 2u);
  EXPECT_EQ(p0.top[0].first, 2);
  EXPECT_EQ(p0.top[1].first, 1);
  EXPECT_NEAR(p0.top[1].second, std::exp(2 - lse0), 1e-12);
  const PositionScore& p1 = s->positions[1];
  EXPECT_EQ(p1.best, 0);  // the first of equal maxima, as the engine's argmax
  EXPECT_NEAR(p1.next_probability, std::exp(0.5 - lse1), 1e-12);
  ASSERT_EQ(p1.top.size(), 2u);
  EXPECT_EQ(p1.top[0].first, 0);
  EXPECT_EQ(p1.top[1].first, 1);
  EXPECT_EQ(p1.top[0].second, p1.top[1].second);
}

TEST(SentenceScoreTest, TopKIsCappedByTheClassesAndOffByDefault) {
  const std::vector<float> logits = {0.0f, 1.0f};
  absl::StatusOr<SentenceScore> s = ScoreSentence(logits, 2, {1}, /*top_k=*/5);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->positions[0].top.size(), 2u);
  s = ScoreSentence(logits, 2, {1}, /*top_k=*/0);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->positions[0].top.empty());
}

TEST(SentenceScoreTest, SizesThatDisagreeAreInternalErrors) {
  EXPECT_TRUE(absl::IsInternal(ScoreSentence({0.0f, 1.0f, 2.0f}, 2, {1}, 0).status()));
  EXPECT_TRUE(absl::IsInternal(ScoreSentence({0.0f, 1.0f}, 2, {2}, 0).status()));
  EXPECT_TRUE(absl::IsInternal(ScoreSentence({}, 2, {}, 0).status()));
}

}  // namespace
}  // namespace cavs::serve
