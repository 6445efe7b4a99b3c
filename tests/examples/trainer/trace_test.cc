// TraceRecorder: the Chrome trace JSON, file names, a disabled recorder; and cavs-train's
// single-process --trace (one file, rank 0, every phase but the gradient sync).
#include "examples/trainer/trace.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "examples/trainer/trainer.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace cavs::trainer {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(TraceTest, CompleteEventsWithArgs) {
  TraceRecorder t(true, 3);
  t.Span("forward+backward", 1000, {{"step", 7}, {"rounds", 12}});
  ASSERT_EQ(t.num_spans(), 1);
  const std::string json = t.Json();
  EXPECT_EQ(json.rfind("{\"traceEvents\":[", 0), 0u);
  EXPECT_NE(json.find("\"name\":\"process_name\",\"ph\":\"M\",\"pid\":3"), std::string::npos);
  EXPECT_NE(json.find("{\"name\":\"forward+backward\",\"cat\":\"cavs\",\"ph\":\"X\",\"ts\":1000,"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"pid\":3,\"tid\":0,\"args\":{\"step\":7,\"rounds\":12}}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("],\"displayTimeUnit\":\"ms\"}"), std::string::npos);
}

TEST(TraceTest, DisabledRecordsNothing) {
  TraceRecorder t(false, 0);
  t.Span("data", TraceRecorder::Now());
  EXPECT_EQ(t.num_spans(), 0);
}

TEST(TraceTest, PathPerRank) {
  EXPECT_EQ(TracePath("/tmp/run.json", 2), "/tmp/run.json.rank2.json");
}

TEST(TraceTest, WriteErrorIsAStatus) {
  TraceRecorder t(true, 0);
  absl::Status s = t.Write("/nonexistent/dir/run.json");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_NE(s.message().find("--trace: cannot write /nonexistent/dir/run.json.tmp"),
            std::string::npos)
      << s;
}

TEST(TraceTest, SingleProcessTrainerWritesRankZero) {
  std::string dir = cavs::tests::FreshTempDir("trace");
  TrainerConfig c;
  c.hidden = 8;
  c.embed = 8;
  c.max_train = 20;
  c.max_dev = 20;
  c.epochs = 1;
  c.batch = 10;
  c.trace = dir + "/run.json";
  c.checkpoint_dir = dir + "/ckpt";
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(c);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE((*t)->Run().ok());
  const std::string json = ReadAll(dir + "/run.json.rank0.json");
  for (const char* phase : {"\"data\"", "\"forward+backward\"", "\"optimizer\"", "\"results\"",
                            "\"eval\"", "\"checkpoint\""}) {
    EXPECT_NE(json.find(phase), std::string::npos) << phase;
  }
  EXPECT_EQ(json.find("\"gradient sync\""), std::string::npos);
  // 2 steps of 4 spans, dev and test evaluations, one checkpoint.
  EXPECT_EQ((*t)->trace().num_spans(), 2 * 4 + 2 + 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cavs::trainer
