// cavs-serve's server on a free loopback port, driven by cpp-httplib's client: predictions
// equal to the offline engine's bit for bit and to cavs-train's evaluation, concurrent clients,
// every bad-input class with its status while the server keeps serving, queue overflow (503),
// graceful shutdown, and the binary itself (SIGTERM).
#include "examples/serve/server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "examples/trainer/trainer.h"
#include "tests/serve/serve_test_util.h"
#include "tests/testing/temp_dir.h"

namespace cavs::serve {
namespace {

using nlohmann::json;
using testing::Post;

// A small Tree-LSTM trained for one epoch on the bundled data, once for the suite.
class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    trainer::TrainerConfig c;
    c.hidden = 16;
    c.embed = 16;
    c.max_train = 300;
    c.max_dev = 120;
    c.epochs = 1;
    c.fold_eval = "on";
    c.checkpoint_dir = tests::FreshTempDir("serve_ckpt");
    absl::StatusOr<std::unique_ptr<trainer::Trainer>> t = trainer::Trainer::Create(c);
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_TRUE((*t)->Run().ok());
    trainer_ = t->release();
    checkpoint_ = c.checkpoint_dir;
    std::ifstream dev(trainer::DefaultDataDir() + "/dev.txt");
    for (std::string line; std::getline(dev, line) && dev_lines_.size() < 120;) {
      dev_lines_.push_back(line);
    }
  }
  static void TearDownTestSuite() { delete trainer_; }

  static std::unique_ptr<testing::RunningServer> Start(ServerOptions o = {}) {
    return testing::StartServer(checkpoint_, o);
  }

  static trainer::Trainer* trainer_;
  static std::string checkpoint_;
  static std::vector<std::string> dev_lines_;
};
trainer::Trainer* ServerTest::trainer_ = nullptr;
std::string ServerTest::checkpoint_;
std::vector<std::string> ServerTest::dev_lines_;

// Offline logits of `lines`, in one batch, as cavs-train evaluates (folded projections).
std::vector<std::vector<float>> OfflineLogits(const std::string& checkpoint,
                                              const std::vector<std::string>& lines) {
  return testing::RunOffline(checkpoint, lines, InputForm::kTree).result.outputs;
}

// The logits of every vertex of prediction `p` (a response with "nodes").
std::vector<float> NodeLogits(const json& p) {
  std::vector<float> out;
  for (const json& node : p["nodes"]) {
    for (const json& x : node["logits"]) out.push_back(x.get<float>());
  }
  return out;
}

TEST_F(ServerTest, PredictionsEqualTheOfflineEngineBitForBit) {
  auto s = Start();
  const std::vector<std::string> lines(dev_lines_.begin(), dev_lines_.begin() + 60);
  const std::vector<std::vector<float>> offline = OfflineLogits(checkpoint_, lines);
  // One request holding them all, as one batch ...
  httplib::Result res = Post(s->port, json{{"inputs", lines}, {"nodes", true}}.dump());
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  ASSERT_EQ(res->status, 200) << res->body;
  const json all = json::parse(res->body)["predictions"];
  ASSERT_EQ(all.size(), lines.size());
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(NodeLogits(all[i]), offline[i]) << i;
  // ... and each on its own, from 6 clients at once, batched with whatever else arrived.
  std::vector<json> one(lines.size());
  std::vector<std::thread> clients;
  for (int c = 0; c < 6; ++c) {
    clients.emplace_back([&, c] {
      for (size_t i = c; i < lines.size(); i += 6) {
        httplib::Result r = Post(s->port, json{{"inputs", lines[i]}, {"nodes", true}}.dump());
        ASSERT_TRUE(r && r->status == 200) << (r ? r->body : httplib::to_string(r.error()));
        one[i] = json::parse(r->body)["predictions"][0];
      }
    });
  }
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(NodeLogits(one[i]), offline[i]) << i;
    EXPECT_EQ(one[i]["class"], all[i]["class"]);
    EXPECT_EQ(one[i]["probabilities"], all[i]["probabilities"]);
  }
  EXPECT_GT(s->server->metrics().batches(), 1);
}

// --join: requests that arrive while a batch runs join it between its rounds, and every answer
// is still the offline one, bit for bit. With the eager policy a batch starts whenever the
// executor idles, so with clients sending at once most requests arrive while one runs.
TEST_F(ServerTest, RequestsJoiningRunningBatchesGetTheOfflineBits) {
  ServerOptions o;
  o.batcher.join = true;
  o.policy = "eager";
  o.batching.max_wait = std::chrono::microseconds(20'000);
  auto s = Start(o);
  const std::vector<std::string> lines(dev_lines_.begin(), dev_lines_.begin() + 96);
  const std::vector<std::vector<float>> offline = OfflineLogits(checkpoint_, lines);
  // When requests arrive is up to the machine: a few tries (each well under a second) so that
  // some join.
  for (int attempt = 0; attempt < 20 && s->server->metrics().joined() == 0; ++attempt) {
    std::vector<std::thread> clients;
    for (int c = 0; c < 8; ++c) {
      clients.emplace_back([&, c] {
        for (size_t i = c; i < lines.size(); i += 8) {
          httplib::Result r = Post(s->port, json{{"inputs", lines[i]}, {"nodes", true}}.dump());
          ASSERT_TRUE(r && r->status == 200) << (r ? r->body : httplib::to_string(r.error()));
          EXPECT_EQ(NodeLogits(json::parse(r->body)["predictions"][0]), offline[i]) << i;
        }
      });
    }
    for (std::thread& t : clients) t.join();
  }
  EXPECT_GT(s->server->metrics().joined(), 0);
  EXPECT_NE(s->server->metrics().Render().find("cavs_serve_joined_samples_total"),
            std::string::npos);
}

TEST_F(ServerTest, JoinRefusedWhereTheEngineCannotJoin) {
  ServerOptions o;
  o.batcher.join = true;
  o.plan.policy = scheduler::Policy::kDepth;
  absl::StatusOr<trainer::SavedModel> m = trainer::LoadSavedModel(checkpoint_, core::Device::Cpu());
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Create(*std::move(m), o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition) << s.status();
  EXPECT_NE(s.status().message().find("--join"), std::string::npos) << s.status();
}

TEST_F(ServerTest, RootAccuracyEqualsTheTrainersEvaluation) {
  auto s = Start();
  absl::StatusOr<trainer::EvalMetrics> eval = trainer_->Evaluate(trainer_->data().dev);
  ASSERT_TRUE(eval.ok()) << eval.status();
  httplib::Result res = Post(s->port, json(dev_lines_).dump());
  ASSERT_TRUE(res && res->status == 200);
  const json p = json::parse(res->body)["predictions"];
  const auto& dev = trainer_->data().dev;
  ASSERT_EQ(p.size(), dev.size());
  int64_t correct = 0;
  for (size_t i = 0; i < dev.size(); ++i) {
    correct += p[i]["class"].get<int>() == dev[i].labels.back() ? 1 : 0;
  }
  EXPECT_EQ(correct, eval->root_correct);
  EXPECT_EQ(static_cast<int64_t>(dev.size()), eval->roots);
}

TEST_F(ServerTest, EveryBadInputGetsItsStatusAndTheServerKeepsServing) {
  ServerOptions o;
  o.max_body_bytes = 4096;
  o.limits.max_depth = 40;
  o.limits.max_words = 50;
  auto s = Start(o);
  std::string deep, wide;
  for (int i = 0; i < 45; ++i) deep += "(2 ";
  deep += "a";
  for (int i = 0; i < 45; ++i) deep += ")";
  for (int i = 0; i < 60; ++i) wide += "w ";
  const std::vector<testing::BadRequest> cases = {
      {"[\"(2 a\"", 400, "malformed_json", "malformed JSON"},
      {R"({"inputs": "a", "top_k": 3})", 400, "unknown_field", "unknown field 'top_k'"},
      {"(2 (2 a) (9 b))", 400, "malformed_tree", "input 0, character 11: bad label"},
      {"", 400, "malformed_input", "input 0 is empty"},
      {deep, 400, "too_deep", "input 0, character 121: tree nested deeper than 40"},
      {wide, 400, "too_wide", "more than the limit of 50 words"},
      {"[]", 400, "too_many_inputs", "0 inputs"},
      {std::string(5000, 'a'), 413, "body_too_large", "over the limit of 4096 bytes"},
  };
  testing::ExpectEachRefusedWhileServing(s->port, cases, "(3 (2 a) (3 good))");
  httplib::Client client("127.0.0.1", s->port);
  httplib::Result metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200);
  for (const testing::BadRequest& c : cases) {
    EXPECT_NE(metrics->body.find(absl::StrCat("cavs_serve_errors_total{kind=\"", c.kind, "\"} 1")),
              std::string::npos)
        << c.kind << "\n"
        << metrics->body;
  }
  EXPECT_NE(metrics->body.find("cavs_serve_requests_total{code=\"200\"} 8"), std::string::npos);
  httplib::Result health = client.Get("/healthz");
  ASSERT_TRUE(health && health->status == 200);
  EXPECT_EQ(json::parse(health->body)["model"], "tree-lstm");
}

TEST_F(ServerTest, BadRequestsInTheSameBatchLeaveTheOthersUnaffected) {
  ServerOptions o;
  o.batching.max_wait = std::chrono::milliseconds(50);  // so that the requests share a batch
  auto s = Start(o);
  std::vector<std::thread> clients;
  std::vector<int> status(8);
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      httplib::Result r = Post(s->port, c % 2 == 0 ? dev_lines_[c] : "(2 (2 a) (2 b)");
      status[c] = r ? r->status : -1;
    });
  }
  for (std::thread& t : clients) t.join();
  for (int c = 0; c < 8; ++c) EXPECT_EQ(status[c], c % 2 == 0 ? 200 : 400) << c;
}

TEST_F(ServerTest, FullQueueGives503AndShutdownAnswersEveryAcceptedRequest) {
  const std::vector<testing::Answer> answers = testing::FillTheQueueThenShutDown(
      checkpoint_, std::vector<std::string>(dev_lines_.begin(), dev_lines_.begin() + 6), "a b");
  for (size_t c = 0; c < answers.size(); ++c) {
    EXPECT_EQ(answers[c].status, 200) << c;
    EXPECT_EQ(answers[c].body["predictions"].size(), 1u);
  }
}

// "eager" runs a lone request at once, where size-or-deadline would wait out the deadline.
TEST_F(ServerTest, EagerPolicyAnswersALoneRequestWithoutWaiting) {
  ServerOptions o;
  o.policy = "eager";
  o.batching.max_wait = std::chrono::seconds(30);
  auto s = Start(o);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {
    httplib::Result r = Post(s->port, dev_lines_[i]);
    ASSERT_TRUE(r && r->status == 200);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

// The binary: prints its port, answers, and exits 0 on SIGTERM.
TEST_F(ServerTest, BinaryServesAndStopsOnSigterm) {
  testing::RunningBinary binary({"--checkpoint=" + checkpoint_, "--max-wait-us=100"},
                                tests::TempPath("serve_stdout.txt"));
  ASSERT_GT(binary.port(), 0);
  httplib::Result res = Post(binary.port(), "(3 (2 a) (3 good))");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  const int wstatus = binary.Stop();
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << wstatus;
}

}  // namespace
}  // namespace cavs::serve
