// End-to-end tests of the training loop on the bundled synthetic treebank (data/synthetic).
#include "examples/trainer/trainer.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/checkpoint.h"
#include "core/optimizer.h"
#include "gtest/gtest.h"
#include "tests/examples/trainer/near_ties.h"
#include "tests/testing/temp_dir.h"

namespace cavs::trainer {
namespace {

// Root labels of data/synthetic/dev.txt: the most frequent class (2) covers 131 of 500.
constexpr double kDevMajorityRate = 131.0 / 500.0;

// A new empty folder, removed with the test process's temporary folder (tests/testing/temp_dir.h).
std::string FreshDir(const std::string& name) { return cavs::tests::FreshTempDir(name); }

TrainerConfig Small() {
  TrainerConfig c;
  c.hidden = 24;
  c.embed = 24;
  c.max_train = 600;
  c.max_dev = 500;
  c.epochs = 2;
  return c;
}

std::unique_ptr<Trainer> MustCreate(const TrainerConfig& c) {
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(c);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

TEST(TrainerTest, LearnsWellAboveChanceOnTheBundledData) {
  TrainerConfig c = Small();
  c.max_train = 1500;
  c.hidden = 32;
  c.embed = 32;
  std::unique_ptr<Trainer> t = MustCreate(c);
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Run().ok());
  ASSERT_EQ(t->curve().size(), 2u);
  const EpochRecord& last = t->curve().back();
  EXPECT_GT(last.dev_root_acc, kDevMajorityRate + 0.15);  // measured 52-57% over seeds 1-5
  EXPECT_GT(last.dev_binary_acc, 0.70);  // measured 77-78% over seeds 1-5; chance ~50%
  EXPECT_LT(last.train_loss, t->curve().front().train_loss);
  EXPECT_NE(t->summary_json().find("\"dev_root_acc\":"), std::string::npos);
  EXPECT_NE(t->summary_json().find("\"best_epoch\":"), std::string::npos);
}

TEST(TrainerTest, ResumeIsBitIdentical) {
  TrainerConfig c = Small();
  c.max_train = 200;
  c.dropout = 0.3;  // dropout seeds must follow the step, not the process
  c.checkpoint_dir = FreshDir("straight");
  std::unique_ptr<Trainer> straight = MustCreate(c);
  ASSERT_NE(straight, nullptr);
  ASSERT_TRUE(straight->Run().ok());

  c.checkpoint_dir = FreshDir("resumed");
  c.epochs = 1;
  std::unique_ptr<Trainer> first = MustCreate(c);
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->Run().ok());
  c.epochs = 2;
  c.resume = true;
  std::unique_ptr<Trainer> second = MustCreate(c);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->epochs_done(), 1);
  ASSERT_TRUE(second->Run().ok());

  const auto& a = straight->store().parameters();
  const auto& b = second->store().parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    std::vector<float> va = a[i]->value.ToVector(), vb = b[i]->value.ToVector();
    ASSERT_EQ(va.size(), vb.size()) << a[i]->name;
    EXPECT_EQ(std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)), 0) << a[i]->name;
  }
  ASSERT_EQ(second->curve().size(), 2u);  // the curve so far travels in the checkpoint
  EXPECT_EQ(second->curve()[1].train_loss, straight->curve()[1].train_loss);
  EXPECT_TRUE(std::filesystem::exists(c.checkpoint_dir + "/ckpt-2.cavs"));
}

// Planning the next batches on other threads (any number of them) changes nothing but the
// time.
TEST(TrainerTest, PlanningAheadGivesTheSameParameters) {
  TrainerConfig c = Small();
  c.max_train = 150;
  c.epochs = 1;
  c.dropout = 0.3;
  std::vector<std::vector<std::vector<float>>> values;
  std::vector<EvalMetrics> dev;
  for (int threads : {0, 1, 3}) {
    c.plan_threads = threads;
    absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(c);
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_TRUE((*t)->Run().ok());
    values.emplace_back();
    for (const auto& p : (*t)->store().parameters()) values.back().push_back(p->value.ToVector());
    absl::StatusOr<EvalMetrics> m = (*t)->Evaluate((*t)->data().dev);
    ASSERT_TRUE(m.ok()) << m.status();
    dev.push_back(*m);
  }
  for (size_t k = 1; k < values.size(); ++k) {
    ASSERT_EQ(values[0].size(), values[k].size());
    for (size_t i = 0; i < values[0].size(); ++i) EXPECT_EQ(values[0][i], values[k][i]) << i;
    EXPECT_EQ(dev[0].loss_sum, dev[k].loss_sum);
    EXPECT_EQ(dev[0].correct, dev[k].correct);
  }
}

// Evaluation with the input projections folded (--fold-eval=on) gives the plain evaluation's
// metrics, after training moved the parameters (each evaluation folds them as they are then).
TEST(TrainerTest, FoldedEvaluationMatchesThePlainOne) {
  TrainerConfig c = Small();
  c.max_train = 150;
  c.epochs = 1;
  c.dropout = 0.3;
  std::vector<EvalMetrics> dev;
  std::vector<std::vector<std::vector<float>>> logits;
  std::vector<scheduler::Graph> graphs;
  for (const char* fold : {"off", "on"}) {
    c.fold_eval = fold;
    absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(c);
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_TRUE((*t)->Run().ok());
    absl::StatusOr<EvalMetrics> m = (*t)->Evaluate((*t)->data().dev);
    ASSERT_TRUE(m.ok()) << m.status();
    dev.push_back(*m);
    // The epoch's dev pass, the test set's at the end, and this one.
    EXPECT_EQ((*t)->evaluations_folded(), std::string(fold) == "on" ? 3 : 0);
    absl::StatusOr<scheduler::ParamValues> params =
        testing::Snapshot(c, (*t)->data(), (*t)->store());
    ASSERT_TRUE(params.ok()) << params.status();
    absl::StatusOr<std::vector<std::vector<float>>> l =
        testing::ReferenceLogits(c, (*t)->data(), *params, (*t)->data().dev);
    ASSERT_TRUE(l.ok()) << l.status();
    logits.push_back(std::move(*l));
    graphs = (*t)->data().dev;
  }
  // The loss: a sum of positive terms, each from logits that differ by float32 rounding
  // (testing::kEvalRoundoff of their scale, about 168 u).
  EXPECT_NEAR(dev[0].loss_sum, dev[1].loss_sum, testing::kEvalRoundoff * dev[0].loss_sum);
  EXPECT_EQ(dev[0].labelled, dev[1].labelled);
  // Training is the same either way (the same parameters); folded, the table's rows come from
  // another GEMM, so predictions may differ at near ties and nowhere else.
  const testing::NearTies ties = testing::CountNearTies(graphs, logits[0], logits[1]);
  EXPECT_LE(std::abs(dev[0].correct - dev[1].correct), ties.all);
  EXPECT_LE(std::abs(dev[0].root_correct - dev[1].root_correct), ties.roots);
}

TEST(TrainerTest, ResumeRejectsAnotherConfig) {
  TrainerConfig c = Small();
  c.max_train = 50;
  c.epochs = 1;
  c.checkpoint_dir = FreshDir("mismatch");
  std::unique_ptr<Trainer> t = MustCreate(c);
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Run().ok());
  c.resume = true;
  c.hidden = 16;
  absl::StatusOr<std::unique_ptr<Trainer>> again = Trainer::Create(c);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(again.status().message().find("hidden=24, this run has hidden=16"), std::string::npos)
      << again.status();
}

TEST(TrainerTest, ResumeWithoutCheckpointStartsFresh) {
  TrainerConfig c = Small();
  c.max_train = 20;
  c.epochs = 1;
  c.resume = true;
  c.checkpoint_dir = FreshDir("empty");
  std::unique_ptr<Trainer> t = MustCreate(c);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->epochs_done(), 0);
}

TEST(TrainerTest, DataErrorsAreClear) {
  TrainerConfig c = Small();
  c.train_path = "/nonexistent/train.txt";
  c.dev_path = "/nonexistent/dev.txt";
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(c);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound) << t.status();

  std::string dir = FreshDir("bad");
  std::ofstream(dir + "/bad.txt") << "(3 (2 good) (4 fine))\n(3 (2 broken)\n";
  c.train_path = dir + "/bad.txt";
  c.dev_path = dir + "/bad.txt";
  t = Trainer::Create(c);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("bad.txt:2:"), std::string::npos) << t.status();
}

std::string ReadAll(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

bool Has(const absl::Status& s, const std::string& text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

// Paths the filesystem cannot even look at are errors naming the flag, not exceptions.
TEST(TrainerTest, UncheckableInputPathsAreClearErrors) {
  const std::string dir = FreshDir("uncheckable");
  std::filesystem::create_symlink(dir + "/loop1", dir + "/loop2");
  std::filesystem::create_symlink(dir + "/loop2", dir + "/loop1");
  TrainerConfig c = Small();
  c.dev_path = DefaultDataDir() + "/dev.txt";
  for (const std::string& train : {dir + "/loop1", dir + "/" + std::string(300, 'a'), dir}) {
    c.train_path = train;
    absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(c);
    ASSERT_FALSE(t.ok()) << train;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
    EXPECT_TRUE(Has(t.status(), "--train: ") && Has(t.status(), train)) << t.status();
  }
  c.train_path = DefaultDataDir() + "/train.txt";
  c.dev_path = dir + "/loop2";
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(c);
  EXPECT_TRUE(!t.ok() && Has(t.status(), "--dev: ") && Has(t.status(), "symbolic links"))
      << t.status();
}

TEST(TrainerTest, EmptyDevAndTestFilesAreErrorsNamingThem) {
  const std::string dir = FreshDir("emptysets");
  WriteAll(dir + "/empty.txt", "");
  TrainerConfig c = Small();
  c.train_path = DefaultDataDir() + "/train.txt";
  c.dev_path = dir + "/empty.txt";
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(c);
  EXPECT_TRUE(!t.ok() && Has(t.status(), "the dev set is empty: " + dir + "/empty.txt"))
      << t.status();
  c.dev_path = DefaultDataDir() + "/dev.txt";
  c.test_path = dir + "/empty.txt";
  t = Trainer::Create(c);
  EXPECT_TRUE(!t.ok() && Has(t.status(), "the test set is empty: " + dir + "/empty.txt"))
      << t.status();
}

// A newest checkpoint that does not load is reported before the run falls back to an older one;
// files of which none loads are an error, and stay as they were.
TEST(TrainerTest, ResumeReportsCheckpointsThatDoNotLoad) {
  TrainerConfig c = Small();
  c.max_train = 50;
  c.max_dev = 50;
  c.checkpoint_dir = FreshDir("corrupt");
  std::unique_ptr<Trainer> t = MustCreate(c);
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Run().ok());
  const std::string ckpt1 = c.checkpoint_dir + "/ckpt-1.cavs";
  const std::string ckpt2 = c.checkpoint_dir + "/ckpt-2.cavs";
  std::string bytes = ReadAll(ckpt2);
  bytes[bytes.size() / 2] ^= 0x01;
  WriteAll(ckpt2, bytes);

  c.resume = true;
  c.epochs = 3;
  std::ostringstream out;
  absl::StatusOr<std::unique_ptr<Trainer>> resumed = Trainer::Create(c, {.out = &out});
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ((*resumed)->epochs_done(), 1);
  EXPECT_NE(
      out.str().find("warning: --resume: skipping checkpoint " + ckpt2 + ": checksum mismatch"),
      std::string::npos)
      << out.str();

  WriteAll(ckpt1, "");
  WriteAll(ckpt2, "");
  resumed = Trainer::Create(c);
  ASSERT_FALSE(resumed.ok());
  EXPECT_EQ(resumed.status().code(), absl::StatusCode::kDataLoss) << resumed.status();
  EXPECT_TRUE(Has(resumed.status(), ckpt1) && Has(resumed.status(), ckpt2) &&
              Has(resumed.status(), "truncated"))
      << resumed.status();
  EXPECT_EQ(std::filesystem::file_size(ckpt1), 0u);
  EXPECT_EQ(std::filesystem::file_size(ckpt2), 0u);
}

// A fresh run would overwrite some of another run's checkpoints and leave the others.
TEST(TrainerTest, FreshRunRefusesADirectoryWithCheckpoints) {
  TrainerConfig c = Small();
  c.max_train = 20;
  c.max_dev = 20;
  c.epochs = 1;
  c.checkpoint_dir = FreshDir("taken");
  std::unique_ptr<Trainer> t = MustCreate(c);
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Run().ok());
  const std::string before = ReadAll(c.checkpoint_dir + "/ckpt-1.cavs");
  absl::StatusOr<std::unique_ptr<Trainer>> again = Trainer::Create(c);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition) << again.status();
  EXPECT_TRUE(Has(again.status(), "already holds checkpoints (ckpt-1.cavs)") &&
              Has(again.status(), "--resume"))
      << again.status();
  EXPECT_EQ(ReadAll(c.checkpoint_dir + "/ckpt-1.cavs"), before);
}

// Every output is checked before the data loads: a bad one fails at once, and an output never
// replaces an input.
TEST(TrainerTest, OutputsAreCheckedBeforeTraining) {
  const std::string dir = FreshDir("outputs");
  WriteAll(dir + "/afile", "x");
  const std::string train = dir + "/train.txt";
  std::filesystem::copy_file(DefaultDataDir() + "/train.txt", train);
  const std::string train_bytes = ReadAll(train);
  struct Case {
    std::string TrainerConfig::*field;
    std::string value;
    std::string error;
  };
  const std::vector<Case> cases = {
      {&TrainerConfig::checkpoint_dir, dir + "/afile",
       "--checkpoint-dir: " + dir + "/afile is not a directory"},
      {&TrainerConfig::checkpoint_dir, dir + "/afile/sub", "--checkpoint-dir: "},
      {&TrainerConfig::log_json, dir + "/missing/log.json", "--log-json: cannot write"},
      {&TrainerConfig::csv, dir, "--csv: " + dir + " is a directory"},
      {&TrainerConfig::plot, dir + "/missing/x.png", "--plot: cannot write"},
      {&TrainerConfig::trace, dir + "/missing/run", "--trace: cannot write"},
      {&TrainerConfig::csv, train, "--csv: " + train + " is the input file --train"},
      {&TrainerConfig::log_json,
       dir + "/../" + std::filesystem::path(dir).filename().string() + "/train.txt",
       "is the input file --train"},
  };
  for (bool resume : {false, true}) {
    for (const Case& k : cases) {
      TrainerConfig c = Small();
      c.train_path = train;
      c.dev_path = DefaultDataDir() + "/dev.txt";
      c.resume = resume;
      if (resume && k.field != &TrainerConfig::checkpoint_dir) c.checkpoint_dir = dir + "/ckpt";
      c.*(k.field) = k.value;
      absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(c);
      ASSERT_FALSE(t.ok()) << k.value;
      EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
      EXPECT_TRUE(Has(t.status(), k.error)) << t.status() << " lacks " << k.error;
    }
  }
  TrainerConfig c = Small();
  c.log_json = dir + "/same";
  c.csv = dir + "/./same";
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(c);
  EXPECT_TRUE(!t.ok() && Has(t.status(), "is also the file of --log-json")) << t.status();
  EXPECT_EQ(ReadAll(train), train_bytes);
}

// The checkpoint of an epoch is written before its log lines, and the logs are rewritten from
// the curve: a log that fails loses no checkpoint, and a resumed run logs every epoch once.
TEST(TrainerTest, ResumeLogsEveryEpochOnce) {
  const std::string dir = FreshDir("logs");
  TrainerConfig c = Small();
  c.max_train = 50;
  c.max_dev = 50;
  c.batch = 25;
  c.epochs = 3;
  c.checkpoint_dir = dir + "/ckpt";
  c.log_json = dir + "/log.json";
  c.csv = dir + "/curve.csv";
  TrainOptions o;
  // During epoch 2 (steps 3 and 4), the log becomes unwritable (a directory in its place).
  o.after_step = [&](int64_t step) {
    if (step == 3) {
      std::filesystem::remove(c.log_json);
      std::filesystem::create_directory(c.log_json);
    }
  };
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(c, o);
  ASSERT_TRUE(t.ok()) << t.status();
  absl::Status run = (*t)->Run();
  EXPECT_TRUE(Has(run, "--log-json")) << run;
  EXPECT_TRUE(std::filesystem::exists(c.checkpoint_dir + "/ckpt-2.cavs"));  // not lost

  std::filesystem::remove(c.log_json);
  c.resume = true;
  std::unique_ptr<Trainer> resumed = MustCreate(c);
  ASSERT_NE(resumed, nullptr);
  EXPECT_EQ(resumed->epochs_done(), 2);
  ASSERT_TRUE(resumed->Run().ok());
  std::vector<int> epochs;
  std::istringstream log(ReadAll(c.log_json));
  for (std::string line; std::getline(log, line);) {
    const size_t at = line.find("\"epoch\":");
    ASSERT_NE(at, std::string::npos) << line;
    epochs.push_back(std::stoi(line.substr(at + 8)));
  }
  EXPECT_EQ(epochs, (std::vector<int>{1, 2, 3}));
  const std::string csv = ReadAll(c.csv);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4) << csv;  // the header and 3 rows
}

// A diverged run stops at the end of the epoch with an error naming it and the flag to change,
// and keeps nothing of that epoch (no checkpoint, no log line).
TEST(TrainerTest, DivergenceIsAClearError) {
  const std::string dir = FreshDir("diverge");
  TrainerConfig c = Small();
  c.optimizer = "sgd";
  c.lr = 3e38;
  c.max_train = 200;
  c.checkpoint_dir = dir + "/ckpt";
  c.log_json = dir + "/log.json";
  std::unique_ptr<Trainer> t = MustCreate(c);
  ASSERT_NE(t, nullptr);
  absl::Status run = t->Run();
  EXPECT_EQ(run.code(), absl::StatusCode::kOutOfRange) << run;
  EXPECT_TRUE(Has(run, "training diverged in epoch 1") && Has(run, "lower --lr")) << run;
  EXPECT_FALSE(std::filesystem::exists(c.checkpoint_dir + "/ckpt-1.cavs"));
  EXPECT_FALSE(std::filesystem::exists(c.log_json));
}

TEST(TrainerTest, CudaMatchesCpu) {
  if (!core::DeviceAvailable(core::DeviceType::kCuda)) GTEST_SKIP() << "no CUDA device";
  TrainerConfig c = Small();
  c.max_train = 300;
  c.dropout = 0.3;
  std::unique_ptr<Trainer> cpu = MustCreate(c);
  c.device = "cuda";
  std::unique_ptr<Trainer> gpu = MustCreate(c);
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(gpu, nullptr);
  ASSERT_TRUE(cpu->Run().ok());
  ASSERT_TRUE(gpu->Run().ok());
  for (int e = 0; e < 2; ++e) {
    EXPECT_NEAR(gpu->curve()[e].train_loss, cpu->curve()[e].train_loss, 1e-4);
    EXPECT_NEAR(gpu->curve()[e].dev_all_acc, cpu->curve()[e].dev_all_acc, 2e-3);
  }
  const auto& a = cpu->store().parameters();
  const auto& b = gpu->store().parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    std::vector<float> va = a[i]->value.ToVector(), vb = b[i]->value.ToVector();
    ASSERT_EQ(va.size(), vb.size());
    // Adagrad divides by the root of the summed squared gradients, so an element whose few
    // gradients are tiny moves by about lr * sign: rounding can flip it. Compare the mean.
    double sum = 0, worst = 0;
    for (size_t k = 0; k < va.size(); ++k) {
      double d = std::fabs(static_cast<double>(va[k]) - vb[k]);
      sum += d;
      worst = std::max(worst, d);
    }
    double mean = sum / va.size();
    // Measured on an H100: at most 4.2e-7.
    EXPECT_LT(mean, 1e-5) << a[i]->name << " (max difference " << worst << ")";
  }
}

// --format=auto decides once, by the training file: a language model's dev file is read as
// text even where a line starts with '(' (it was sniffed on its own and parsed as SST trees).
TEST(TrainerTest, FormatComesFromTheTrainingFileOnly) {
  const std::string dir = FreshDir("format");
  WriteAll(dir + "/train.txt", "the cat sat\nthe dog ran\n(laughs) a cat\n");
  WriteAll(dir + "/dev.txt", "(laughs) the cat sat\nthe dog ran\n");
  TrainerConfig c = Small();
  c.model = "lstm-lm";
  c.train_path = dir + "/train.txt";
  c.dev_path = dir + "/dev.txt";
  std::unique_ptr<Trainer> t = MustCreate(c);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->data().train.size(), 3u);
  ASSERT_EQ(t->data().dev.size(), 2u);
  EXPECT_EQ(t->data().dev[0].num_vertices(), 5);  // <s> (laughs) the cat sat
  // Blank lines before the first tree: still SST, and every tree read.
  WriteAll(dir + "/trees.txt", "\n \r\n\t\n(3 (2 a) (4 b))\n(1 c)\n");
  c.model = "tree-lstm";
  c.train_path = c.dev_path = dir + "/trees.txt";
  t = MustCreate(c);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->data().train.size(), 2u);
}

// A resume must train on the samples the checkpoint was trained on: the same count and the
// same vocabulary are not enough (lines reordered, labels changed).
TEST(TrainerTest, ResumeRefusesOtherTrainingData) {
  const std::string dir = FreshDir("otherdata");
  std::vector<std::string> lines;
  {
    std::ifstream in(DefaultDataDir() + "/train.txt");
    for (std::string line; lines.size() < 30 && std::getline(in, line);) lines.push_back(line);
  }
  auto write_train = [&](const std::vector<std::string>& trees) {
    std::string text;
    for (const std::string& tree : trees) text += tree + "\n";
    WriteAll(dir + "/train.txt", text);
  };
  write_train(lines);
  TrainerConfig c = Small();
  c.train_path = dir + "/train.txt";
  c.dev_path = DefaultDataDir() + "/dev.txt";
  c.max_dev = 20;
  c.epochs = 1;
  c.checkpoint_dir = dir + "/ckpt";
  std::unique_ptr<Trainer> t = MustCreate(c);
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Run().ok());
  c.resume = true;
  c.epochs = 2;
  std::vector<std::string> reversed(lines.rbegin(), lines.rend());
  std::vector<std::string> zero_labels = lines;
  for (std::string& tree : zero_labels) {
    for (size_t i = 0; i + 1 < tree.size(); ++i) {
      if (tree[i] == '(' && tree[i + 1] >= '0' && tree[i + 1] <= '4') tree[i + 1] = '0';
    }
  }
  for (const auto& other : {reversed, zero_labels}) {
    write_train(other);
    absl::StatusOr<std::unique_ptr<Trainer>> again = Trainer::Create(c);
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_TRUE(Has(again.status(), "it was written with train_hash=") &&
                Has(again.status(), "the training data (--train"))
        << again.status();
  }
  write_train(lines);  // the data it was written with: resumes
  std::unique_ptr<Trainer> resumed = MustCreate(c);
  ASSERT_NE(resumed, nullptr);
  EXPECT_EQ(resumed->epochs_done(), 1);
}

// Files with a valid checksum but values no run writes are refused naming the field: resuming
// them would print a wrong epoch or time, or train on NaN.
TEST(TrainerTest, ResumeRefusesBadValuesInAValidFile) {
  TrainerConfig c = Small();
  c.max_train = 20;
  c.max_dev = 20;
  c.epochs = 1;
  c.checkpoint_dir = FreshDir("badvalues");
  std::unique_ptr<Trainer> t = MustCreate(c);
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Run().ok());
  absl::StatusOr<core::CheckpointInfo> info =
      core::ReadCheckpointMetadata(c.checkpoint_dir + "/ckpt-1.cavs");
  ASSERT_TRUE(info.ok()) << info.status();
  // Adagrad state for the trained parameters (zero accumulators: valid).
  core::OptimizerConfig oc;
  oc.kind = core::OptimizerKind::kAdagrad;
  absl::StatusOr<std::unique_ptr<core::Optimizer>> adagrad = core::MakeOptimizer(oc);
  ASSERT_TRUE(adagrad.ok() && (*adagrad)->EnsureState(t->store()).ok());
  (*adagrad)->set_step(info->optimizer_step);
  core::Parameter* first = t->store().parameters().front().get();
  core::Tensor accum = (*adagrad)->StateTensors().back().second;
  struct Case {
    std::string name, key, value;
    float param, state;  // written into the first parameter / the last state tensor
    std::string error;
  };
  const float w = first->value.data<float>()[0], nan = std::nanf("");
  const std::vector<Case> cases = {
      {"valid", "", "", w, 0.0f, ""},
      {"epoch", "trainer.epoch", "-1", w, 0.0f, "trainer.epoch is '-1'"},
      {"epoch2", "trainer.epoch", "2", w, 0.0f, "trainer.epoch is '2'"},
      {"elapsed", "trainer.elapsed_seconds", "nan", w, 0.0f, "trainer.elapsed_seconds is 'nan'"},
      {"negative_time", "trainer.elapsed_seconds", "-5", w, 0.0f, "trainer.elapsed_seconds"},
      {"curve", "trainer.curve", "", w, 0.0f, "trainer.curve has 0 rows for 1 epoch(s)"},
      {"param", "", "", nan, 0.0f, "parameter '" + first->name + "' is not finite (nan"},
      {"accum", "", "", w, -1.0f, "a sum of squares, is negative (-1 at element 0)"},
      {"inf_accum", "", "", w, std::numeric_limits<float>::infinity(), "is not finite (inf"},
  };
  for (const Case& k : cases) {
    core::CheckpointMetadata m = info->metadata;
    if (!k.key.empty()) m[k.key] = k.value;
    first->value.data<float>()[0] = k.param;
    accum.data<float>()[0] = k.state;
    const std::string dir = FreshDir("badvalues_" + k.name);
    ASSERT_TRUE(core::SaveCheckpoint(dir + "/ckpt-1.cavs", t->store(), adagrad->get(), 1, m).ok());
    first->value.data<float>()[0] = w;
    TrainerConfig r = c;
    r.resume = true;
    r.epochs = 3;
    r.checkpoint_dir = dir;
    absl::StatusOr<std::unique_ptr<Trainer>> resumed = Trainer::Create(r);
    if (k.error.empty()) {
      EXPECT_TRUE(resumed.ok()) << resumed.status();
      continue;
    }
    ASSERT_FALSE(resumed.ok()) << k.name;
    EXPECT_EQ(resumed.status().code(), absl::StatusCode::kDataLoss) << resumed.status();
    EXPECT_TRUE(Has(resumed.status(), "checkpoint " + dir + "/ckpt-1.cavs: ") &&
                Has(resumed.status(), k.error))
        << k.name << ": " << resumed.status();
  }
}

// A checkpoint write killed mid-way (SIGKILL) leaves its temporary file; the next run with
// that --checkpoint-dir removes it and says so, and keeps those of live processes.
TEST(TrainerTest, StaleTemporaryCheckpointFilesAreRemoved) {
  TrainerConfig c = Small();
  c.max_train = 20;
  c.max_dev = 20;
  c.epochs = 1;
  c.checkpoint_dir = FreshDir("stale");
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // pid `child` is gone
  const std::string stale = c.checkpoint_dir + "/.ckpt-3.cavs.tmp-" + std::to_string(child) + "-0";
  const std::string live =
      c.checkpoint_dir + "/.ckpt-3.cavs.tmp-" + std::to_string(getpid()) + "-0";
  WriteAll(stale, "partial");
  WriteAll(live, "partial");
  std::ostringstream out;
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(c, {.out = &out});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NE(out.str().find("removed " + stale +
                           ": a partial checkpoint left by a process that "
                           "died while writing it"),
            std::string::npos)
      << out.str();
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(live));
}

// A dev set of neutral roots only: no binary accuracy (null), not 0%.
TEST(TrainerTest, AllNeutralDevHasNoBinaryAccuracy) {
  const std::string dir = FreshDir("neutral");
  WriteAll(dir + "/dev.txt", "(2 (2 a) (2 b))\n");
  TrainerConfig c = Small();
  c.max_train = 20;
  c.epochs = 1;
  c.dev_path = dir + "/dev.txt";
  c.train_path = DefaultDataDir() + "/train.txt";
  std::ostringstream out;
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(c, {.out = &out});
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE((*t)->Run().ok());
  EXPECT_NE(out.str().find("  binary n/a  "), std::string::npos) << out.str();
  EXPECT_NE((*t)->summary_json().find("\"best_dev_binary_acc\":null"), std::string::npos)
      << (*t)->summary_json();
  EXPECT_NE((*t)->summary_json().find("\"dev_binary_acc\":null"), std::string::npos);
}

// A text whose next word is predictable: windows of a cycle of 30 words.
std::string WriteCyclicText(const std::string& dir) {
  std::string path = dir + "/cyclic.txt";
  std::ofstream out(path);
  uint32_t state = 12345;
  for (int s = 0; s < 600; ++s) {
    state = state * 1664525u + 1013904223u;
    int first = static_cast<int>(state >> 8) % 30, length = 4 + static_cast<int>(state >> 20) % 8;
    for (int k = 0; k < length; ++k) out << (k ? " " : "") << "w" << (first + k) % 30;
    out << "\n";
  }
  return path;
}

TEST(TrainerTest, LanguageModelPerplexityFalls) {
  TrainerConfig c = Small();
  c.model = "lstm-lm";
  c.train_path = WriteCyclicText(FreshDir("lm"));
  c.dev_fraction = 0.1;
  c.max_train = 0;
  c.epochs = 3;
  c.lr = 0.1;
  std::unique_ptr<Trainer> t = MustCreate(c);
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->data().language_model);
  EXPECT_EQ(t->data().dev.size(), 60u);
  ASSERT_TRUE(t->Run().ok());
  ASSERT_EQ(t->curve().size(), 3u);
  EXPECT_LT(t->curve()[1].dev_perplexity, t->curve()[0].dev_perplexity);
  EXPECT_LT(t->curve()[2].dev_perplexity, t->curve()[1].dev_perplexity);
  EXPECT_LT(t->curve()[2].dev_perplexity, 10.0);  // 33 tokens; uniform would be 33
}

}  // namespace
}  // namespace cavs::trainer
