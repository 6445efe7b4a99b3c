// An LSTM language model trained with the cavs C++ API: every sentence is a chain of vertices,
// vertex t reads word t and predicts word t + 1, and the engine batches the chains of many
// sentences of different lengths into one kernel per time step. Uses the library's LSTM cell
// (vertex/models.h); see tree_lstm_sentiment.cc for a cell written out in the DSL.
//
//   lstm_language_model [STEPS] [TEXT_FILE] [CHECKPOINT]
//
// STEPS is the number of training batches of 32 sentences (default 300); TEXT_FILE has one
// sentence per line, words separated by spaces (Penn Treebank's format), by default the
// sentences of the synthetic treebank bundled in data/synthetic; its last tenth (one sentence
// at least) is held out to measure perplexity; CHECKPOINT is where the trained model is saved
// (default: a temporary file, removed at the end). Exits with 1 if a check fails (the held-out
// perplexity did not fall, or the restored model scores differently), 2 on any other error.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/numbers.h"
#include "core/checkpoint.h"
#include "core/optimizer.h"
#include "core/parameter.h"
#include "core/status.h"
#include "examples/data/sst_reader.h"
#include "examples/data/text_reader.h"
#include "scheduler/engine.h"
#include "vertex/models.h"

#ifndef CAVS_EXAMPLES_DATA_DIR
#define CAVS_EXAMPLES_DATA_DIR "data/synthetic"
#endif

namespace {

using cavs::scheduler::Engine;
using cavs::scheduler::Graph;
using cavs::scheduler::RunOptions;
using cavs::scheduler::RunResult;

constexpr int kBatch = 32;

// The words of every sentence: from a text file, or the leaves of the bundled treebank.
absl::StatusOr<std::vector<std::vector<std::string>>> ReadSentences(const std::string& path) {
  if (!path.empty()) return cavs::examples::ReadTextWords(path);
  CAVS_ASSIGN_OR_RETURN(auto trees,
                        cavs::examples::ReadSstFile(CAVS_EXAMPLES_DATA_DIR "/train.txt"));
  std::vector<std::vector<std::string>> sentences;
  for (auto& tree : trees) sentences.push_back(std::move(tree.words));
  return sentences;
}

// exp(mean cross-entropy per predicted word), forward only, in batches of 256 sentences (a
// batch holds a row of logits per word: 256 sentences of 25 words and 10,000 words of
// vocabulary are 256 MB).
absl::StatusOr<double> Perplexity(Engine& engine, const std::vector<Graph>& chains) {
  double loss_sum = 0.0;
  int64_t labelled = 0;
  for (size_t first = 0; first < chains.size(); first += 256) {
    const std::vector<Graph> batch(chains.begin() + first,
                                   chains.begin() + std::min(first + 256, chains.size()));
    CAVS_ASSIGN_OR_RETURN(RunResult r,
                          engine.Run(batch, RunOptions{.training = false, .backward = false}));
    loss_sum += r.loss_sum;
    labelled += r.labelled;
  }
  return std::exp(loss_sum / labelled);
}

absl::Status Train(int64_t steps, const std::string& text_file, std::string checkpoint) {
  // Data: a vocabulary of the training words ("<unk>", "<s>", "</s>" first), then one chain
  // per sentence: "<s> w1 .. wn" labelled "w1 .. wn </s>".
  CAVS_ASSIGN_OR_RETURN(auto sentences, ReadSentences(text_file));
  if (sentences.size() < 2) {
    return absl::InvalidArgumentError("need at least 2 sentences, to hold one out");
  }
  const size_t num_train = sentences.size() - std::max<size_t>(1, sentences.size() / 10);
  const std::vector<std::vector<std::string>> train_words(sentences.begin(),
                                                          sentences.begin() + num_train);
  const cavs::examples::Vocabulary vocab =
      cavs::examples::BuildTextVocabularyFromWords(train_words, /*min_count=*/2);
  std::vector<Graph> train, held_out;
  for (size_t i = 0; i < sentences.size(); ++i) {
    CAVS_ASSIGN_OR_RETURN(auto sentence, cavs::examples::MakeTextSentence(sentences[i], vocab));
    (i < num_train ? train : held_out).push_back(std::move(sentence.graph));
  }
  std::printf("%zu training sentences, %zu held out, %d words\n", train.size(), held_out.size(),
              vocab.size());

  // Model: the cell predicts one of the vocabulary's words at every vertex.
  CAVS_ASSIGN_OR_RETURN(
      const cavs::vertex::Function f,
      cavs::vertex::models::Lstm(
          {.vocab = vocab.size(), .embed = 64, .hidden = 64, .classes = vocab.size()}));
  cavs::core::ParameterStore store(/*seed=*/1);
  CAVS_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(&f, &store));
  CAVS_ASSIGN_OR_RETURN(
      auto optimizer,
      cavs::core::MakeOptimizer(
          {.kind = cavs::core::OptimizerKind::kAdam, .lr = 0.01f, .clip_norm = 5.0f}));
  CAVS_ASSIGN_OR_RETURN(const double before, Perplexity(*engine, held_out));

  // Training: consecutive batches of sentences, round and round.
  std::vector<Graph> batch;
  for (int64_t step = 0; step < steps; ++step) {
    batch.clear();
    for (int i = 0; i < kBatch; ++i) batch.push_back(train[(step * kBatch + i) % train.size()]);
    CAVS_RETURN_IF_ERROR(store.ZeroGrad());
    CAVS_ASSIGN_OR_RETURN(RunResult r, engine->Run(batch, RunOptions{}));
    CAVS_RETURN_IF_ERROR(optimizer->Step(store));
    if ((step + 1) % 50 == 0 || step + 1 == steps) {
      std::printf("step %lld  train perplexity %.1f\n", static_cast<long long>(step + 1),
                  std::exp(r.loss_sum / r.labelled));
    }
  }
  CAVS_ASSIGN_OR_RETURN(const double after, Perplexity(*engine, held_out));
  std::printf("held-out perplexity %.1f -> %.1f\n", before, after);

  // Checkpoint: saved with the optimizer's state, so that training could go on from it;
  // restored here into a fresh model, which must score the same.
  const bool keep = !checkpoint.empty();
  if (!keep) {
    std::error_code ec;
    checkpoint = std::filesystem::temp_directory_path(ec) /
                 ("lstm_language_model_" + std::to_string(::getpid()) + ".cavs");
    if (ec) return absl::InternalError("no temporary directory: " + ec.message());
  }
  CAVS_RETURN_IF_ERROR(cavs::core::SaveCheckpoint(checkpoint, store, optimizer.get(),
                                                  optimizer->step(), {{"model", "lstm"}}));
  cavs::core::ParameterStore restored_store(/*seed=*/2);
  CAVS_ASSIGN_OR_RETURN(std::unique_ptr<Engine> restored, Engine::Create(&f, &restored_store));
  absl::StatusOr<cavs::core::CheckpointInfo> info =
      cavs::core::LoadCheckpoint(checkpoint, restored_store, /*optimizer=*/nullptr);
  if (!keep) std::filesystem::remove(checkpoint);
  CAVS_RETURN_IF_ERROR(info.status());
  CAVS_ASSIGN_OR_RETURN(const double reloaded, Perplexity(*restored, held_out));
  std::printf("checkpoint %s (step %lld): held-out perplexity %.1f after restoring\n",
              keep ? checkpoint.c_str() : "(temporary)", static_cast<long long>(info->step),
              reloaded);
  if (std::abs(reloaded - after) > 1e-6 * after) {
    return absl::AbortedError("the restored model scores differently");
  }
  if (!(after < before)) return absl::AbortedError("the held-out perplexity did not fall");
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 300;
  if (argc > 4 ||
      (argc > 1 && (!absl::SimpleAtoi(argv[1], &steps) || steps < 1 || steps > 1000000))) {
    std::fprintf(stderr, "usage: %s [STEPS 1..1000000] [TEXT_FILE] [CHECKPOINT]\n", argv[0]);
    return 2;
  }
  const absl::Status status = Train(steps, argc > 2 ? argv[2] : "", argc > 3 ? argv[3] : "");
  if (!status.ok()) {
    std::fprintf(stderr, "lstm_language_model: %s\n", status.ToString().c_str());
    return absl::IsAborted(status) ? 1 : 2;
  }
  return 0;
}
