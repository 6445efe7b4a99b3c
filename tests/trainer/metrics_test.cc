#include "examples/trainer/metrics.h"

#include <cmath>

#include "examples/trainer/dataset.h"
#include "examples/trainer/report.h"
#include "gtest/gtest.h"

namespace cavs::trainer {
namespace {

TEST(MetricsTest, BinaryComparesNegativeAndPositiveMass) {
  // argmax is neutral, but P(3)+P(4) > P(0)+P(1).
  const float a[5] = {0.0f, 0.0f, 2.0f, 1.0f, 1.0f};
  EXPECT_TRUE(BinaryPositive(a));
  const float b[5] = {1.5f, 0.0f, 3.0f, 1.0f, 0.0f};
  EXPECT_FALSE(BinaryPositive(b));
}

TEST(MetricsTest, RootBinaryAndAllNodes) {
  // Two trees of 3 vertices (two leaves, root last). Gold roots: 4 (positive) and 2 (neutral).
  std::vector<scheduler::Graph> graphs(2);
  for (auto& g : graphs) {
    g.AddVertex({}, 0, 1);
    g.AddVertex({}, 1, 3);
    g.AddVertex({0, 1}, -1, 4);
  }
  graphs[1].labels[2] = 2;
  scheduler::RunResult r;
  r.loss_sum = 6.0;
  r.labelled = 6;
  r.correct = 4;
  r.predictions = {{1, 3, 3}, {0, 3, 2}};
  r.outputs.assign(2, std::vector<float>(15, 0.0f));
  r.outputs[0][2 * 5 + 3] = 2.0f;  // root 0: positive side wins
  EvalMetrics m;
  ASSERT_TRUE(AccumulateMetrics(graphs, r, /*sentiment=*/true, 5, &m).ok());
  EXPECT_EQ(m.roots, 2);
  EXPECT_EQ(m.root_correct, 1);  // tree 1's root: 2 == 2
  EXPECT_EQ(m.binary_roots, 1);  // the neutral root is excluded
  EXPECT_EQ(m.binary_correct, 1);
  EXPECT_DOUBLE_EQ(m.AllNodesAccuracy(), 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(m.Perplexity(), std::exp(1.0));
}

TEST(MetricsTest, SentenceChainPredictsTheNextToken) {
  scheduler::Graph g = SentenceChain({7, 8}, /*begin=*/1, /*end=*/2);
  ASSERT_EQ(g.num_vertices(), 3);
  EXPECT_EQ(g.tokens, (std::vector<int32_t>{1, 7, 8}));
  EXPECT_EQ(g.labels, (std::vector<int32_t>{7, 8, 2}));
  EXPECT_EQ(g.child(2, 0), 1);
  EXPECT_EQ(g.child(0, 0), -1);
}

TEST(ReportTest, CsvRowsRoundTrip) {
  EpochRecord r{3, 0.5, 0.25, 0.4, 0.8, 0.9, 0.0, 1234.5, 61.0};
  auto rows = ParseCsvRows(CsvRow(r, false) + "\n" + CsvRow(r, false) + "\n", false);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[1].epoch, 3);
  EXPECT_DOUBLE_EQ((*rows)[1].dev_binary_acc, 0.8);
  EXPECT_DOUBLE_EQ((*rows)[1].seconds, 61.0);
  EXPECT_FALSE(ParseCsvRows("1,2,x\n", false).ok());
  EXPECT_EQ(FormatDuration(65), "1m05s");
}

TEST(ReportTest, BestEpochIsTheFirstBest) {
  std::vector<EpochRecord> curve(3);
  for (int i = 0; i < 3; ++i) curve[i].epoch = i + 1;
  curve[0].dev_root_acc = 0.4;
  curve[1].dev_root_acc = 0.45;
  curve[2].dev_root_acc = 0.45;
  curve[0].dev_perplexity = 90;
  curve[1].dev_perplexity = 80;
  curve[2].dev_perplexity = 70;
  EXPECT_EQ(BestEpoch(curve, false).epoch, 2);
  EXPECT_EQ(BestEpoch(curve, true).epoch, 3);
  EXPECT_EQ(BestLine(curve[1], false),
            "best dev epoch 2: root 45.00%  binary 0.00%  all-nodes 0.00%");
}

}  // namespace
}  // namespace cavs::trainer
