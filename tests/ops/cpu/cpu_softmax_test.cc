// CpuKernels::SoftmaxCrossEntropy: a hand-computed case, stability for huge logits, masked
// rows, finite differences of the loss, and a naive double-precision reference over many rows.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "ops/cpu/cpu_kernels.h"
#include "tests/ops/ops_test_util.h"

namespace cavs::ops::cpu {
namespace {

using testing::AllClose;
using testing::RandomFloats;
using testing::RandomInts;

Kernels* K() { return CpuKernels::Get(); }

TEST(CpuSoftmaxTest, HandComputedCase) {
  // Row 0: logits (1, 2, 3), label 2. Σe = e + e^2 + e^3 = 30.19287485; softmax =
  // (0.09003057, 0.24472847, 0.66524096); loss = ln(30.19287485) - 3 = 0.40760596.
  // Row 1: logits (0, 0, 0) masked.
  const std::vector<float> logits = {1, 2, 3, 0, 0, 0};
  const std::vector<int32_t> labels = {2, -1};
  std::vector<float> dlogits(6, 9.0f);
  float stats[2] = {10.0f, 1.0f};  // accumulated into
  int32_t pred[2] = {-9, -9};
  ASSERT_TRUE(K()->SoftmaxCrossEntropy(logits.data(), 3, 2, 3, labels.data(), 0.5f, dlogits.data(),
                                       stats, pred)
                  .ok());
  EXPECT_NEAR(stats[0], 10.0f + 0.40760596f, 1e-6);
  EXPECT_EQ(stats[1], 2.0f);  // argmax 2 == label
  EXPECT_EQ(pred[0], 2);
  EXPECT_EQ(pred[1], 0);  // masked rows still get a prediction (first of the ties)
  const std::vector<double> want = {
      0.5 * 0.09003057, 0.5 * 0.24472847, 0.5 * (0.66524096 - 1), 0, 0, 0};
  EXPECT_TRUE(AllClose(dlogits, want, 1e-6, 1e-7));
}

TEST(CpuSoftmaxTest, StableForHugeLogits) {
  const std::vector<float> logits = {1000.0f, 1001.0f, -1000.0f, 88.0f, -3e4f, 3e4f};
  const std::vector<int32_t> labels = {0, 0};
  std::vector<float> dlogits(6);
  float stats[2] = {0, 0};
  ASSERT_TRUE(K()->SoftmaxCrossEntropy(logits.data(), 3, 2, 3, labels.data(), 1.0f, dlogits.data(),
                                       stats, nullptr)
                  .ok());
  // Row 0: loss = ln(1 + e) = 1.31326169; row 1: loss = 3e4 - 88 (label logit 88, max 3e4).
  EXPECT_NEAR(stats[0], 1.31326169 + (3e4 - 88.0), 1e-2);
  for (float g : dlogits) EXPECT_TRUE(std::isfinite(g));
  EXPECT_NEAR(dlogits[0], 1 / (1 + std::exp(1.0)) - 1, 1e-6);
}

// The loss of one labelled row, in double.
double NaiveLoss(const float* x, int64_t c, int32_t label) {
  double mx = x[0];
  for (int64_t j = 0; j < c; ++j) mx = std::max<double>(mx, x[j]);
  double sum = 0;
  for (int64_t j = 0; j < c; ++j) sum += std::exp(x[j] - mx);
  return std::log(sum) - (x[label] - mx);
}

TEST(CpuSoftmaxTest, GradientMatchesFiniteDifferencesOfLoss) {
  const int64_t n = 3, c = 5, ld = 7;
  std::vector<float> logits = RandomFloats(n * ld, 1, -2.0f, 2.0f);
  const std::vector<int32_t> labels = {4, -1, 1};
  const float scale = 0.25f;
  std::vector<float> dlogits(n * c);
  ASSERT_TRUE(K()->SoftmaxCrossEntropy(logits.data(), ld, n, c, labels.data(), scale,
                                       dlogits.data(), nullptr, nullptr)
                  .ok());
  auto loss = [&] {
    float stats[2] = {0, 0};
    EXPECT_TRUE(K()->SoftmaxCrossEntropy(logits.data(), ld, n, c, labels.data(), scale, nullptr,
                                         stats, nullptr)
                    .ok());
    return static_cast<double>(stats[0]);
  };
  const float h = 1e-2f;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < c; ++j) {
      float& x = logits[i * ld + j];
      const float x0 = x;
      x = x0 + h;
      const double up = loss();
      x = x0 - h;
      const double down = loss();
      x = x0;
      // dlogits carries `scale` (the caller's 1 / batch), the summed loss does not.
      EXPECT_NEAR(dlogits[i * c + j], scale * (up - down) / (2 * h), 1e-4) << i << "," << j;
    }
  }
}

TEST(CpuSoftmaxTest, ManyRowsMatchNaiveAndThreadCount) {
  const int64_t n = 5000, c = 11, ld = 12;
  const std::vector<float> logits = RandomFloats(n * ld, 2, -4.0f, 4.0f);
  const std::vector<int32_t> labels = RandomInts(n, 3, -1, c - 1);
  double want_loss = 0;
  int64_t want_correct = 0;
  std::vector<double> want_d(n * c, 0.0);
  std::vector<int32_t> want_pred(n);
  for (int64_t i = 0; i < n; ++i) {
    const float* x = logits.data() + i * ld;
    want_pred[i] = static_cast<int32_t>(std::max_element(x, x + c) - x);
    if (labels[i] < 0) continue;
    want_loss += NaiveLoss(x, c, labels[i]);
    want_correct += want_pred[i] == labels[i];
    double mx = *std::max_element(x, x + c), sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += std::exp(x[j] - mx);
    for (int64_t j = 0; j < c; ++j) {
      want_d[i * c + j] = std::exp(x[j] - mx) / sum - (j == labels[i] ? 1.0 : 0.0);
    }
  }
  float stats_by_threads[2][2];
  for (int threads : {1, 2}) {
    SetCpuThreads(threads);
    std::vector<float> d(n * c);
    std::vector<int32_t> pred(n);
    float* stats = stats_by_threads[threads - 1];
    stats[0] = stats[1] = 0;
    ASSERT_TRUE(K()->SoftmaxCrossEntropy(logits.data(), ld, n, c, labels.data(), 1.0f, d.data(),
                                         stats, pred.data())
                    .ok());
    EXPECT_TRUE(AllClose(d, want_d, 1e-5, 1e-6));
    EXPECT_EQ(pred, want_pred);
    EXPECT_NEAR(stats[0], want_loss, 1e-5 * want_loss);
    EXPECT_EQ(stats[1], static_cast<float>(want_correct));
  }
  SetCpuThreads(0);
  EXPECT_EQ(stats_by_threads[0][0], stats_by_threads[1][0]);  // same chunked sum
}

TEST(CpuSoftmaxTest, RejectsLabelOutOfRange) {
  const std::vector<float> logits(6);
  const std::vector<int32_t> labels = {1, 3};
  absl::Status s = K()->SoftmaxCrossEntropy(logits.data(), 3, 2, 3, labels.data(), 1.0f, nullptr,
                                            nullptr, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("row 1"), absl::string_view::npos) << s;
  EXPECT_EQ(K()->SoftmaxCrossEntropy(logits.data(), 3, 2, 0, labels.data(), 1.0f, nullptr, nullptr,
                                     nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cavs::ops::cpu
