// cavs-serve serving a language model (cavs-train --model=lstm-lm) on a free loopback port,
// driven by cpp-httplib's client: the served sentences are cavs-train's chains, their
// perplexities equal cavs-train's evaluation of the same sentences bit for bit (one request
// for all, and one request each from concurrent clients), the per-position answers equal the
// offline engine's logits, bad sentences get their 400 while the server keeps serving, a full
// queue 503 and a shutdown answers what it accepted, and the binary serves the checkpoint.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "examples/data/sst_reader.h"
#include "examples/serve/server.h"
#include "examples/trainer/trainer.h"
#include "tests/serve/serve_test_util.h"
#include "tests/testing/temp_dir.h"

namespace cavs::serve {
namespace {

using nlohmann::json;
using testing::Post;

// Writes the words of the first `n` trees of the bundled `split` as text, a sentence a line.
std::vector<std::string> TextLines(const std::string& split, size_t n) {
  absl::StatusOr<std::vector<examples::SstTree>> trees =
      examples::ReadSstFile(trainer::DefaultDataDir() + "/" + split + ".txt");
  EXPECT_TRUE(trees.ok()) << trees.status();
  std::vector<std::string> lines;
  for (size_t i = 0; i < n && i < trees->size(); ++i) {
    lines.push_back(absl::StrJoin((*trees)[i].words, " "));
  }
  return lines;
}

void WriteLines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path);
  for (const std::string& line : lines) out << line << "\n";
}

// A small LSTM language model trained for one epoch on text files, once for the suite.
class LanguageModelServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dev_lines_ = TextLines("dev", 40);
    // What the text reader splits (runs of spaces, tabs), an unknown word and a '(' word.
    dev_lines_.push_back("it  is\tvery   good");
    dev_lines_.push_back("(laughs) zzzunknownword the film");
    dev_lines_.push_back("the");
    const std::string train = tests::TempPath("lm_train.txt"), dev = tests::TempPath("lm_dev.txt");
    WriteLines(train, TextLines("train", 400));
    WriteLines(dev, dev_lines_);
    trainer::TrainerConfig c;
    c.model = "lstm-lm";
    c.train_path = train;
    c.dev_path = dev;
    c.hidden = 16;
    c.embed = 16;
    c.epochs = 1;
    c.fold_eval = "on";  // as the server runs
    c.checkpoint_dir = tests::FreshTempDir("lm_serve_ckpt");
    absl::StatusOr<std::unique_ptr<trainer::Trainer>> t = trainer::Trainer::Create(c);
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_TRUE((*t)->Run().ok());
    trainer_ = t->release();
    checkpoint_ = c.checkpoint_dir;
    ASSERT_EQ(trainer_->data().dev.size(), dev_lines_.size());
  }
  static void TearDownTestSuite() { delete trainer_; }

  static std::unique_ptr<testing::RunningServer> Start(ServerOptions o = {}) {
    return testing::StartServer(checkpoint_, o);
  }

  // cavs-train's evaluation of dev sentence i alone.
  static trainer::EvalMetrics EvaluateAlone(size_t i) {
    absl::StatusOr<trainer::EvalMetrics> m =
        trainer_->Evaluate(std::vector<scheduler::Graph>{trainer_->data().dev[i]});
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *m : trainer::EvalMetrics{};
  }

  static trainer::Trainer* trainer_;
  static std::string checkpoint_;
  static std::vector<std::string> dev_lines_;
};
trainer::Trainer* LanguageModelServerTest::trainer_ = nullptr;
std::string LanguageModelServerTest::checkpoint_;
std::vector<std::string> LanguageModelServerTest::dev_lines_;

TEST_F(LanguageModelServerTest, SentencesAreTheTrainersChains) {
  const auto& dev = trainer_->data().dev;
  for (size_t i = 0; i < dev_lines_.size(); ++i) {
    absl::StatusOr<ParsedRequest> r =
        ParseRequest(dev_lines_[i], trainer_->data().vocabulary, {}, InputForm::kChain);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->graphs[0].tokens, dev[i].tokens) << dev_lines_[i];
    EXPECT_EQ(r->graphs[0].child_ids, dev[i].child_ids) << dev_lines_[i];
    EXPECT_EQ(r->next_tokens[0], dev[i].labels) << dev_lines_[i];
  }
}

TEST_F(LanguageModelServerTest, PerplexityEqualsTheTrainersEvaluationBitForBit) {
  auto s = Start();
  // One request holding every sentence, as one batch ...
  httplib::Result res = Post(s->port, json(dev_lines_).dump());
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  ASSERT_EQ(res->status, 200) << res->body;
  const json all = json::parse(res->body)["predictions"];
  ASSERT_EQ(all.size(), dev_lines_.size());
  // ... and each on its own, from 4 clients at once, batched with whatever else arrived.
  std::vector<json> one(dev_lines_.size());
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      for (size_t i = c; i < dev_lines_.size(); i += 4) {
        httplib::Result r = Post(s->port, dev_lines_[i]);
        ASSERT_TRUE(r && r->status == 200) << (r ? r->body : httplib::to_string(r.error()));
        one[i] = json::parse(r->body)["predictions"][0];
      }
    });
  }
  for (std::thread& t : clients) t.join();
  double loss_sum = 0;
  int64_t tokens = 0;
  for (size_t i = 0; i < dev_lines_.size(); ++i) {
    const trainer::EvalMetrics m = EvaluateAlone(i);
    EXPECT_EQ(all[i]["perplexity"].get<double>(), m.Perplexity()) << dev_lines_[i];
    EXPECT_EQ(all[i]["log_prob"].get<double>(), -m.loss_sum) << dev_lines_[i];
    EXPECT_EQ(all[i]["tokens"].get<int64_t>(), m.labelled) << dev_lines_[i];
    EXPECT_EQ(one[i], all[i]) << dev_lines_[i];
    loss_sum -= all[i]["log_prob"].get<double>();
    tokens += all[i]["tokens"].get<int64_t>();
  }
  // The whole dev set as the trainer reports it: its batches sum in another order (and round
  // the sum to a float), so the figures agree up to rounding.
  absl::StatusOr<trainer::EvalMetrics> whole = trainer_->Evaluate(trainer_->data().dev);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(tokens, whole->labelled);
  EXPECT_NEAR(loss_sum, whole->loss_sum, 1e-5 * whole->loss_sum);
  EXPECT_NEAR(std::exp(loss_sum / tokens), whole->Perplexity(), 1e-5 * whole->Perplexity());
  EXPECT_GT(s->server->metrics().batches(), 1);
}

TEST_F(LanguageModelServerTest, PositionsEqualTheOfflineEngine) {
  const testing::OfflineRun offline =
      testing::RunOffline(checkpoint_, dev_lines_, InputForm::kChain);
  ASSERT_EQ(offline.result.outputs.size(), dev_lines_.size());
  auto s = Start();
  constexpr int kTopK = 3;
  httplib::Result res = Post(s->port, json{{"inputs", dev_lines_}, {"top_k", kTopK}}.dump());
  ASSERT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
  const json p = json::parse(res->body)["predictions"];
  const int64_t classes = offline.classes;
  const examples::Vocabulary& vocab = offline.vocabulary;
  for (size_t i = 0; i < dev_lines_.size(); ++i) {
    const scheduler::Graph& g = offline.parsed.graphs[i];
    const std::vector<int32_t>& next = offline.parsed.next_tokens[i];
    const json& positions = p[i]["positions"];
    ASSERT_EQ(positions.size(), next.size());
    int64_t unknown = 0;
    for (size_t t = 0; t < next.size(); ++t) {
      unknown += t > 0 && g.tokens[t] == examples::Vocabulary::kUnkId ? 1 : 0;
      const float* x = &offline.result.outputs[i][t * classes];
      double sum = 0;
      const int32_t best = offline.result.predictions[i][t];
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(double{x[c]} - x[best]);
      const double lse = x[best] + std::log(sum);
      const json& at = positions[t];
      EXPECT_EQ(at["word"], vocab.Word(g.tokens[t]));
      EXPECT_EQ(at["next"], vocab.Word(next[t]));
      EXPECT_EQ(at["best"], vocab.Word(best)) << i << " " << t;
      EXPECT_NEAR(at["best_probability"].get<double>(), std::exp(x[best] - lse), 1e-12);
      EXPECT_NEAR(at["next_probability"].get<double>(), std::exp(x[next[t]] - lse), 1e-12);
      std::vector<int32_t> ids(classes);
      std::iota(ids.begin(), ids.end(), 0);
      std::stable_sort(ids.begin(), ids.end(), [x](int32_t a, int32_t b) { return x[a] > x[b]; });
      ASSERT_EQ(at["top"].size(), static_cast<size_t>(kTopK));
      for (int k = 0; k < kTopK; ++k) {
        EXPECT_EQ(at["top"][k]["word"], vocab.Word(ids[k]));
        EXPECT_NEAR(at["top"][k]["probability"].get<double>(), std::exp(x[ids[k]] - lse), 1e-12);
      }
    }
    EXPECT_EQ(p[i]["unknown_words"].get<int64_t>(), unknown);
  }
  EXPECT_EQ(p[dev_lines_.size() - 2]["unknown_words"], 2);  // "(laughs)", "zzzunknownword"
}

TEST_F(LanguageModelServerTest, BadSentencesGet400AndTheServerKeepsServing) {
  ServerOptions o;
  o.limits.max_depth = 12;  // 11 words
  o.limits.max_top_k = 20;
  auto s = Start(o);
  std::vector<std::string> words(13, "the");
  const std::vector<testing::BadRequest> cases = {
      {"[\"the film\"", 400, "malformed_json", "malformed JSON"},
      {R"({"inputs": "the", "nodes": true})", 400, "unknown_field",
       "unknown field 'nodes' (known for a language model: \"inputs\", \"top_k\")"},
      {R"({"inputs": "the", "top_k": 21})", 400, "malformed_json",
       "\"top_k\" is 21, not an integer from 0 to 20"},
      {" \t ", 400, "malformed_input", "input 0 is empty"},
      {"the film\nis good", 400, "malformed_input",
       "input 0, character 9: control byte in a sentence '\\n' (an input is one sentence: send "
       "several as a JSON array)"},
      {absl::StrJoin(words, " "), 400, "too_deep",
       "input 0, character 45 (word 12): more than 11 words: a language model runs a sentence "
       "one round per word and one for <s>, and the limit is 12 rounds"},
      {"[]", 400, "too_many_inputs", "0 inputs"},
  };
  testing::ExpectEachRefusedWhileServing(s->port, cases, "the film is good");
  httplib::Client client("127.0.0.1", s->port);
  httplib::Result metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200);
  EXPECT_NE(metrics->body.find("cavs_serve_errors_total{kind=\"malformed_json\"} 2"),
            std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("cavs_serve_errors_total{kind=\"too_deep\"} 1"), std::string::npos);
  EXPECT_NE(metrics->body.find("cavs_serve_requests_total{code=\"400\"} 7"), std::string::npos);
  EXPECT_NE(metrics->body.find("cavs_serve_samples_total 7"), std::string::npos) << metrics->body;
  httplib::Result health = client.Get("/healthz");
  ASSERT_TRUE(health && health->status == 200);
  EXPECT_EQ(json::parse(health->body)["model"], "lstm-lm");
}

TEST_F(LanguageModelServerTest, FullQueueGives503AndShutdownAnswersEveryAcceptedRequest) {
  const std::vector<testing::Answer> answers = testing::FillTheQueueThenShutDown(
      checkpoint_, std::vector<std::string>(dev_lines_.begin(), dev_lines_.begin() + 5),
      "the film");
  for (size_t c = 0; c < answers.size(); ++c) {
    ASSERT_EQ(answers[c].status, 200) << c;
    EXPECT_EQ(answers[c].body["predictions"][0]["perplexity"].get<double>(),
              EvaluateAlone(c).Perplexity());
  }
}

// The binary: serves the language model's checkpoint, and exits 0 on SIGTERM.
TEST_F(LanguageModelServerTest, BinaryServesTheCheckpoint) {
  testing::RunningBinary binary({"--checkpoint=" + checkpoint_, "--batch-policy=eager"},
                                tests::TempPath("lm_serve_stdout.txt"));
  ASSERT_GT(binary.port(), 0);
  httplib::Result res = Post(binary.port(), dev_lines_[0]);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["predictions"][0]["perplexity"].get<double>(),
            EvaluateAlone(0).Perplexity());
  const int wstatus = binary.Stop();
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << wstatus;
}

}  // namespace
}  // namespace cavs::serve
