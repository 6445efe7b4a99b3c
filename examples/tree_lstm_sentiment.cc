// A binary Tree-LSTM sentiment classifier (Tai et al. 2015) trained with the cavs C++ API: define
// the vertex function, load the trees, build the engine, train with Adagrad, evaluate, save a
// checkpoint and restore it into a fresh model.
//
//   tree_lstm_sentiment [STEPS] [DATA_DIR] [CHECKPOINT]
//
// STEPS is the number of training batches of 25 trees (default 320: two epochs of the bundled
// data); DATA_DIR holds SST-format train.txt and dev.txt (default: the synthetic treebank
// bundled in data/synthetic); CHECKPOINT is where the trained model is saved (default: a
// temporary file, removed at the end). Exits with 1 if a check fails (the dev loss did not
// fall, or the restored model scores differently), 2 on any other error.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/numbers.h"
#include "core/checkpoint.h"
#include "core/optimizer.h"
#include "core/parameter.h"
#include "core/random.h"
#include "core/status.h"
#include "examples/data/sst_reader.h"
#include "scheduler/engine.h"
#include "vertex/vertex.h"

#ifndef CAVS_EXAMPLES_DATA_DIR
#define CAVS_EXAMPLES_DATA_DIR "data/synthetic"
#endif

namespace {

// The DSL (vertex/vertex.h).
using cavs::vertex::Concat;
using cavs::vertex::Define;
using cavs::vertex::Expr;
using cavs::vertex::Function;
using cavs::vertex::MatMul;
using cavs::vertex::Sigmoid;
using cavs::vertex::Split;
using cavs::vertex::State;
using cavs::vertex::Tanh;
using cavs::vertex::Vertex;
// The engine and the batches it runs (scheduler/engine.h).
using cavs::scheduler::Engine;
using cavs::scheduler::Graph;
using cavs::scheduler::RunOptions;
using cavs::scheduler::RunResult;

constexpr int kEmbed = 64, kHidden = 64, kClasses = 5, kBatch = 25;

// One function for leaves and internal vertices: a leaf reads its word's embedding and has no
// children (their state reads as zeros); an internal vertex has no token (a zero embedding).
absl::StatusOr<Function> TreeLstm(int64_t vocab) {
  return Define("tree_lstm", [vocab](Vertex& v) {
    Expr x = v.embed("embedding", vocab, kEmbed);
    State l = v.gather(0), r = v.gather(1);
    Expr g = MatMul(x, v.param("W", {kEmbed, 5 * kHidden})) +
             MatMul(Concat({l["h"], r["h"]}), v.param("U", {2 * kHidden, 5 * kHidden})) +
             v.param("b", {5 * kHidden}, cavs::core::Initializer::Zeros());
    auto [i, o, u, fl, fr] = Split<5>(g);
    Expr c = Sigmoid(i) * Tanh(u) + Sigmoid(fl) * l["c"] + Sigmoid(fr) * r["c"];
    Expr h = Sigmoid(o) * Tanh(c);
    v.scatter({{"h", h}, {"c", c}});                         // what the parents gather
    v.push(MatMul(h, v.param("out", {kHidden, kClasses})) +  // logits, for the loss
           v.param("out_b", {kClasses}, cavs::core::Initializer::Zeros()));
  });
}

struct Metrics {
  double loss = 0.0;      // mean cross-entropy over every labelled node
  double root_acc = 0.0;  // fine-grained accuracy at the roots
};

// Forward only, the whole set as one batch. The root of an SST tree is its last vertex.
absl::StatusOr<Metrics> Evaluate(Engine& engine, const std::vector<Graph>& trees) {
  CAVS_ASSIGN_OR_RETURN(RunResult r,
                        engine.Run(trees, RunOptions{.training = false, .backward = false}));
  int correct = 0;
  for (size_t t = 0; t < trees.size(); ++t) {
    correct += r.predictions[t].back() == trees[t].labels.back();
  }
  return Metrics{r.loss_sum / r.labelled, static_cast<double>(correct) / trees.size()};
}

absl::Status Train(int64_t steps, const std::string& data_dir, std::string checkpoint) {
  // Data: trees with token ids from a vocabulary of the training words.
  CAVS_ASSIGN_OR_RETURN(
      cavs::examples::SstDataset data,
      cavs::examples::LoadSstDataset(data_dir + "/train.txt", data_dir + "/dev.txt"));
  std::vector<Graph> train, dev;
  for (auto& tree : data.train) train.push_back(std::move(tree.graph));
  for (auto& tree : data.dev) dev.push_back(std::move(tree.graph));
  if (dev.empty()) return absl::InvalidArgumentError(data_dir + "/dev.txt has no trees");
  std::printf("%zu training trees, %zu dev trees, %d words\n", train.size(), dev.size(),
              data.vocabulary.size());

  // Model: the function, a store for its parameters (cavs::core::Device::Cuda(0) for a GPU, in
  // the store and the engine), the engine that batches it, and an optimizer.
  CAVS_ASSIGN_OR_RETURN(const Function f, TreeLstm(data.vocabulary.size()));
  cavs::core::ParameterStore store(/*seed=*/1);
  CAVS_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(&f, &store));
  CAVS_ASSIGN_OR_RETURN(
      auto optimizer,
      cavs::core::MakeOptimizer({.kind = cavs::core::OptimizerKind::kAdagrad, .lr = 0.05f}));
  CAVS_ASSIGN_OR_RETURN(const Metrics before, Evaluate(*engine, dev));

  // Training: each step is one batch of trees, forward and backward in a few batched kernels.
  std::vector<size_t> order(train.size());
  std::iota(order.begin(), order.end(), size_t{0});
  cavs::core::Rng rng(/*seed=*/7);
  std::vector<Graph> batch;
  for (int64_t step = 0; step < steps; ++step) {
    const size_t first = step * kBatch % train.size();
    if (first < kBatch) rng.Shuffle(order);  // a new epoch
    batch.clear();
    for (size_t i = first; i < std::min(first + kBatch, train.size()); ++i) {
      batch.push_back(train[order[i]]);
    }
    CAVS_RETURN_IF_ERROR(store.ZeroGrad());
    CAVS_ASSIGN_OR_RETURN(RunResult r, engine->Run(batch, RunOptions{}));  // accumulates grads
    CAVS_RETURN_IF_ERROR(optimizer->Step(store));
    if ((step + 1) % 40 == 0 || step + 1 == steps) {
      std::printf("step %lld  train loss %.4f\n", static_cast<long long>(step + 1),
                  r.loss_sum / r.labelled);
    }
  }
  CAVS_ASSIGN_OR_RETURN(const Metrics after, Evaluate(*engine, dev));
  std::printf("dev loss %.4f -> %.4f, root accuracy %.1f%% -> %.1f%%\n", before.loss, after.loss,
              100 * before.root_acc, 100 * after.root_acc);

  // Checkpoint: parameters and optimizer state in one file, written atomically; then a fresh
  // model restored from it must score the same.
  const bool keep = !checkpoint.empty();
  if (!keep) {
    std::error_code ec;
    checkpoint = std::filesystem::temp_directory_path(ec) /
                 ("tree_lstm_sentiment_" + std::to_string(::getpid()) + ".cavs");
    if (ec) return absl::InternalError("no temporary directory: " + ec.message());
  }
  CAVS_RETURN_IF_ERROR(cavs::core::SaveCheckpoint(checkpoint, store, optimizer.get(),
                                                  optimizer->step(), {{"model", "tree_lstm"}}));
  cavs::core::ParameterStore restored_store(/*seed=*/2);
  CAVS_ASSIGN_OR_RETURN(std::unique_ptr<Engine> restored, Engine::Create(&f, &restored_store));
  absl::StatusOr<cavs::core::CheckpointInfo> info =
      cavs::core::LoadCheckpoint(checkpoint, restored_store, /*optimizer=*/nullptr);
  if (!keep) std::filesystem::remove(checkpoint);
  CAVS_RETURN_IF_ERROR(info.status());
  CAVS_ASSIGN_OR_RETURN(const Metrics reloaded, Evaluate(*restored, dev));
  std::printf("checkpoint %s (step %lld): dev loss %.4f after restoring\n",
              keep ? checkpoint.c_str() : "(temporary)", static_cast<long long>(info->step),
              reloaded.loss);
  if (std::abs(reloaded.loss - after.loss) > 1e-6 * after.loss) {
    return absl::AbortedError("the restored model scores differently");
  }
  if (!(after.loss < before.loss)) return absl::AbortedError("the dev loss did not fall");
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 320;
  if (argc > 4 ||
      (argc > 1 && (!absl::SimpleAtoi(argv[1], &steps) || steps < 1 || steps > 1000000))) {
    std::fprintf(stderr, "usage: %s [STEPS 1..1000000] [DATA_DIR] [CHECKPOINT]\n", argv[0]);
    return 2;
  }
  const absl::Status status =
      Train(steps, argc > 2 ? argv[2] : CAVS_EXAMPLES_DATA_DIR, argc > 3 ? argv[3] : "");
  if (!status.ok()) {
    std::fprintf(stderr, "tree_lstm_sentiment: %s\n", status.ToString().c_str());
    return absl::IsAborted(status) ? 1 : 2;
  }
  return 0;
}
