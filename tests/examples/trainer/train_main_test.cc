// The cavs-train binary: exit status 2 and one error line for user errors, 0 and a SUMMARY
// line for a run.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "examples/trainer/trainer_config.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace {

struct Outcome {
  int status = -1;
  std::string output;  // stdout and stderr
};

// Runs cavs-train with `flags` through /bin/sh, after `prefix` (shell commands such as a ulimit)
// and with `redirect` after its stderr joins the output (">/dev/full" sends stdout there).
Outcome RunTrainer(const std::string& flags, const std::string& prefix = "",
                   const std::string& redirect = "") {
  Outcome o;
  std::string cmd = prefix + std::string(CAVS_TRAIN_BINARY) + " " + flags + " 2>&1 " + redirect;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return o;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) o.output.append(buffer, n);
  int raw = pclose(pipe);
  o.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return o;
}

// `text` as one single-quoted shell word.
std::string ShellQuote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A new empty folder, removed with the test process's temporary folder (tests/testing/temp_dir.h).
std::string FreshDir(const std::string& name) { return cavs::tests::FreshTempDir(name); }

constexpr char kSmall[] = "--hidden=8 --embed=8 --max-train=50 --max-dev=50 --epochs=1 --quiet ";

TEST(TrainMainTest, UserErrorsExitWithTwoAndOneLine) {
  for (const char* flags :
       {"--bogus", "--epochs=x", "--model=nope", "--train=/nonexistent/t.txt", "--resume",
        "--train=", "--lr=1e40", "--dropout=0.99999999999", "--plot=/nonexistent/x.png",
        "--log-json=/nonexistent/log.json", "--checkpoint-dir=/dev/null --resume"}) {
    Outcome o = RunTrainer(flags);
    EXPECT_EQ(o.status, 2) << flags << ": " << o.output;
    EXPECT_EQ(o.output.rfind("cavs-train: error: ", 0), 0u) << o.output;
    EXPECT_EQ(o.output.find('\n'), o.output.size() - 1) << o.output;
  }
}

TEST(TrainMainTest, HelpAndASmallRun) {
  Outcome help = RunTrainer("--help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.output.find("--checkpoint-dir"), std::string::npos);
  Outcome run = RunTrainer("--hidden=8 --embed=8 --max-train=50 --max-dev=50 --epochs=1");
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("epoch 1/1  train loss "), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("SUMMARY {\"model\":\"tree-lstm\""), std::string::npos);
  EXPECT_EQ(run.output.find('\r'), std::string::npos);  // no progress bar into a pipe
}

// Training data from a pipe, which can be read only once: sniffing its format must not eat the
// start of it (trees: a parse error mid-tree; text: no samples at all).
TEST(TrainMainTest, TrainingDataFromAPipe) {
  const std::string data = cavs::trainer::DefaultDataDir();
  Outcome trees = RunTrainer(std::string(kSmall) + "--train=/dev/stdin --dev=" + data + "/dev.txt",
                             "head -n 50 " + ShellQuote(data + "/train.txt") + " | ");
  EXPECT_EQ(trees.status, 0) << trees.output;
  EXPECT_NE(trees.output.find("\"train_samples\":50,"), std::string::npos) << trees.output;
  // Text for a language model: the trees' words, one sentence a line.
  const std::string text = FreshDir("pipe") + "/text.txt";
  {
    std::ifstream in(data + "/train.txt");
    std::ofstream out(text);
    int lines = 0;
    for (std::string tree; lines < 60 && std::getline(in, tree); ++lines) {
      std::string words;
      for (size_t i = 0; i < tree.size(); ++i) {
        if (tree[i] == '(')
          ++i;  // and the label's digit after it
        else if (tree[i] != ')')
          words += tree[i];
      }
      out << words << "\n";
    }
  }
  Outcome lm = RunTrainer(
      std::string(kSmall) + "--model=lstm-lm --train=/dev/stdin --dev=" + ShellQuote(text),
      "cat " + ShellQuote(text) + " | ");
  EXPECT_EQ(lm.status, 0) << lm.output;
  EXPECT_NE(lm.output.find("\"train_samples\":50,"), std::string::npos) << lm.output;
}

// A symlink loop or an overlong name used to escape as a std::filesystem exception (abort, 134).
TEST(TrainMainTest, UncheckablePathsExitWithTwo) {
  const std::string dir = FreshDir("loop");
  std::filesystem::create_symlink(dir + "/loop1", dir + "/loop2");
  std::filesystem::create_symlink(dir + "/loop2", dir + "/loop1");
  for (const std::string& train : {dir + "/loop1", dir + "/" + std::string(300, 'a')}) {
    Outcome o = RunTrainer(kSmall + std::string("--train=") + train + " --dev=" + train);
    EXPECT_EQ(o.status, 2) << o.output;
    EXPECT_EQ(o.output.rfind("cavs-train: error: --train: cannot open " + train, 0), 0u)
        << o.output;
  }
}

// The plot path reaches gnuplot as an argument and inside quotes, never through a shell.
TEST(TrainMainTest, PlotPathWithQuotesRunsNothing) {
  const std::string dir = FreshDir("plot");
  for (const std::string name : {"q';touch PWNED;'.png", "it's.png", "-persist.png"}) {
    Outcome o =
        RunTrainer(kSmall + std::string("--plot=") + ShellQuote(name), "cd " + dir + " && ");
    EXPECT_EQ(o.status, 0) << o.output;
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + name + ".gp")) << o.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/PWNED"));
}

// Past the file size limit a checkpoint write is an error that removes its temporary file
// (cavs-train ignores SIGXFSZ, which would kill it mid-write).
TEST(TrainMainTest, FileSizeLimitIsACleanError) {
  const std::string dir = FreshDir("fsize");
  // 30 blocks (15-30 KB): the epoch's checkpoint (Adagrad, about 45 KB) does not fit.
  Outcome o =
      RunTrainer(kSmall + std::string("--checkpoint-dir=") + dir + "/ckpt", "ulimit -f 30 && ");
  EXPECT_EQ(o.status, 1) << o.output;
  EXPECT_NE(
      o.output.find("cavs-train: error: cannot write checkpoint " + dir + "/ckpt/ckpt-1.cavs: "),
      std::string::npos)
      << o.output;
  EXPECT_NE(o.output.find("File too large"), std::string::npos) << o.output;
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/ckpt")) {
    left.push_back(entry.path().filename().string());
  }
  EXPECT_TRUE(left.empty()) << left.front();
}

// Sizes of which no model can be built name the flags, not only a shape or a row width.
TEST(TrainMainTest, ModelSizesThatCannotBeBuiltNameTheFlags) {
  Outcome o = RunTrainer("--hidden=4000000 --embed=8 --max-train=20 --max-dev=10 --epochs=1");
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_EQ(o.output.rfind("cavs-train: error: cannot build the model --model=tree-lstm "
                           "--hidden=4000000 --embed=8 (vocabulary of ",
                           0),
            0u)
      << o.output;
  EXPECT_NE(o.output.find("row width 20000000 exceeds the limit of 16777216"), std::string::npos)
      << o.output;
}

// A full disk is a failure of the machine, not of the flags: exit status 1 wherever it hits, a
// log, the trace, a checkpoint (FileSizeLimitIsACleanError) or stdout.
TEST(TrainMainTest, AFullDiskExitsWithOneWhateverItHits) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  for (const char* flag : {"--log-json", "--csv"}) {
    Outcome o = RunTrainer(kSmall + std::string(flag) + "=/dev/full");
    EXPECT_EQ(o.status, 1) << o.output;
    EXPECT_NE(o.output.find(std::string(flag) + ": writing /dev/full failed"), std::string::npos)
        << o.output;
  }
  Outcome o = RunTrainer(kSmall, "", ">/dev/full");
  EXPECT_EQ(o.status, 1) << o.output;
  EXPECT_EQ(o.output,
            "cavs-train: error: cannot write the run's output (the epoch lines, stdout for "
            "cavs-train): No space left on device\n");
  Outcome help = RunTrainer("--help", "", ">/dev/full");
  EXPECT_EQ(help.status, 1) << help.output;
  EXPECT_EQ(help.output, "cavs-train: error: writing to stdout: No space left on device\n");
  // --save-best is replaced whole (a temporary file renamed over it): never over a device.
  Outcome best = RunTrainer(kSmall + std::string("--save-best=/dev/full"));
  EXPECT_EQ(best.status, 2) << best.output;
  EXPECT_EQ(best.output, "cavs-train: error: --save-best: /dev/full is not a regular file\n");
}

}  // namespace
