// The cavs-train binary: exit status 2 and one error line for user errors, 0 and a SUMMARY
// line for a run.
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace {

struct Outcome {
  int status = -1;
  std::string output;  // stdout and stderr
};

Outcome RunTrainer(const std::string& flags) {
  Outcome o;
  std::string cmd = std::string(CAVS_TRAIN_BINARY) + " " + flags + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return o;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) o.output.append(buffer, n);
  int raw = pclose(pipe);
  o.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return o;
}

TEST(TrainMainTest, UserErrorsExitWithTwoAndOneLine) {
  for (const char* flags :
       {"--bogus", "--epochs=x", "--model=nope", "--train=/nonexistent/t.txt", "--resume"}) {
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

}  // namespace
