#include "examples/trainer/metrics.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "examples/trainer/report.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

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

// A dev set whose roots are all neutral has no binary accuracy: n/a in the epoch line, null
// in JSON, NaN through the CSV (the checkpoint's curve), and never the best epoch's reason.
TEST(MetricsTest, NoNonNeutralRootMeansNoBinaryAccuracy) {
  scheduler::Graph g;  // (2 (2 a) (2 b))
  g.AddVertex({}, 0, 2);
  g.AddVertex({}, 1, 2);
  g.AddVertex({0, 1}, -1, 2);
  scheduler::RunResult r;
  r.labelled = 3;
  r.correct = 3;
  r.predictions = {{2, 2, 2}};
  r.outputs = {std::vector<float>(15, 0.0f)};
  EvalMetrics m;
  ASSERT_TRUE(AccumulateMetrics({g}, r, /*sentiment=*/true, 5, &m).ok());
  EXPECT_EQ(m.roots, 1);
  EXPECT_EQ(m.binary_roots, 0);
  EXPECT_TRUE(std::isnan(m.BinaryAccuracy()));
  EXPECT_DOUBLE_EQ(m.RootAccuracy(), 1.0);

  EpochRecord e{1, 0.5, 0.25, m.RootAccuracy(), m.BinaryAccuracy(), m.AllNodesAccuracy()};
  const std::string line = EpochLine(e, 3, false);
  EXPECT_NE(line.find("dev root 100.00%  binary n/a  all-nodes 100.00%"), std::string::npos)
      << line;
  const std::string json = EpochJson(e, "tree-lstm", false);
  EXPECT_NE(json.find("\"dev_binary_acc\":null,"), std::string::npos) << json;
  absl::StatusOr<std::vector<EpochRecord>> rows = ParseCsvRows(CsvRow(e, false), false);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_TRUE(std::isnan((*rows)[0].dev_binary_acc));
  EXPECT_EQ(BestLine(e, false), "best dev epoch 1: root 100.00%  binary n/a  all-nodes 100.00%");
  // An epoch without a root accuracy is never the best, even as the first.
  std::vector<EpochRecord> curve = {e, e};
  curve[0].dev_root_acc = std::nan("");
  curve[1].epoch = 2;
  curve[1].dev_root_acc = 0.1;
  EXPECT_EQ(BestEpoch(curve, false).epoch, 2);
  curve[0].dev_perplexity = std::nan("");
  curve[1].dev_perplexity = 500;
  EXPECT_EQ(BestEpoch(curve, true).epoch, 2);
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

// JSON has no NaN: a diverged run's figures must still give parseable lines.
TEST(ReportTest, NonFiniteNumbersAreJsonNull) {
  EpochRecord r{2, std::nan(""), std::numeric_limits<double>::infinity(), 0.5, 0.75, 0.25};
  const std::string json = EpochJson(r, "tree-lstm", false);
  EXPECT_NE(json.find("\"train_loss\":null,\"dev_loss\":null,\"dev_root_acc\":0.5,"),
            std::string::npos)
      << json;
  EXPECT_EQ(json.find("nan"), std::string::npos) << json;
  EXPECT_EQ(json.find("inf"), std::string::npos) << json;
  EXPECT_EQ(JsonNumber(-std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(JsonNumber(0.125), "0.125");
}

TEST(ReportTest, WritesReportAFullDisk) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  // The bytes fit in the stdio buffer: only the flush or the close can see the error.
  absl::Status s = WriteTextFile("--log-json", "/dev/full", "{}\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;  // exit status 1, as a checkpoint's
  EXPECT_NE(s.message().find("--log-json: writing /dev/full failed"), std::string::npos) << s;
  s = WriteCsv("--csv", "/dev/full", {EpochRecord{}}, false);
  EXPECT_NE(s.message().find("--csv: writing /dev/full failed"), std::string::npos) << s;
}

TEST(ReportTest, GnuplotQuoteDoublesSingleQuotes) {
  EXPECT_EQ(GnuplotQuote("plain.png"), "'plain.png'");
  EXPECT_EQ(GnuplotQuote("q';touch PWNED;'.png"), "'q'';touch PWNED;''.png'");
}

std::string ReadAll(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// A plot path with quotes, a semicolon, backquotes and a macro sign reaches neither a shell nor
// gnuplot's command substitution: the plot is written under that very name (with gnuplot) and
// nothing else runs.
TEST(ReportTest, PlotPathsRunNoCommands) {
  const std::string dir = cavs::tests::FreshTempDir("plot");
  const std::string old_cwd = std::filesystem::current_path().string();
  std::filesystem::current_path(dir);  // where `touch PWNED` would land
  std::vector<EpochRecord> curve = {EpochRecord{1, 1.5, 1.4, 0.3}, EpochRecord{2, 1.2, 1.3, 0.4}};
  const std::string png = "q';touch PWNED;'`touch PWNED2`@x.png";
  ASSERT_TRUE(WriteCsv("--csv", "it's.csv", curve, false).ok());
  absl::StatusOr<std::string> note = PlotCurve("it's.csv", png, false, "cavs-train tree-lstm");
  std::filesystem::current_path(old_cwd);
  ASSERT_TRUE(note.ok()) << note.status();
  EXPECT_FALSE(std::filesystem::exists(dir + "/PWNED"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/PWNED2"));
  const std::string script = ReadAll(dir + "/" + png + ".gp");
  EXPECT_NE(script.find("set output " + GnuplotQuote(png) + "\n"), std::string::npos) << script;
  EXPECT_NE(script.find("plot 'it''s.csv' using 1:2"), std::string::npos) << script;
  if (note->rfind("plot written to ", 0) == 0) {
    EXPECT_GT(std::filesystem::file_size(dir + "/" + png), 0u);
  } else {
    EXPECT_NE(note->find("no gnuplot on PATH"), std::string::npos) << *note;
  }
  // A line break would end gnuplot's command: refused.
  absl::StatusOr<std::string> broken =
      PlotCurve(dir + "/it's.csv", dir + "/a\nsystem('touch PWNED').png", false, "t");
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kInvalidArgument) << broken.status();
  EXPECT_FALSE(std::filesystem::exists(dir + "/PWNED"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cavs::trainer
