// A vertex function of your own, checked before it is trained: a tree RNN whose children are
// summed with attention weights. The backward is derived from the forward (vertex/autodiff.h),
// so the checks are of the whole pipeline: the reference executor's gradients (double precision,
// one vertex at a time) against central finite differences of its loss, then the batched
// engine's loss and gradients against the reference's on real trees. A cell that passes trains
// like any other (tree_lstm_sentiment.cc); no registration is needed.
//
//   custom_cell [DATA_DIR]
//
// DATA_DIR holds SST-format dev.txt (default: the synthetic treebank bundled in
// data/synthetic). Exits with 1 if a check fails, 2 on any other error.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "core/parameter.h"
#include "core/status.h"
#include "examples/data/sst_reader.h"
#include "scheduler/engine.h"
#include "scheduler/reference_executor.h"
#include "vertex/vertex.h"

#ifndef CAVS_EXAMPLES_DATA_DIR
#define CAVS_EXAMPLES_DATA_DIR "data/synthetic"
#endif

namespace {

using cavs::core::Initializer;
using cavs::scheduler::Graph;
using cavs::scheduler::ParamValues;
using cavs::scheduler::RunOptions;
using cavs::scheduler::RunReference;
using cavs::scheduler::RunResult;
using cavs::scheduler::SnapshotParameters;
using cavs::vertex::Define;
using cavs::vertex::Expr;
using cavs::vertex::Function;
using cavs::vertex::MatMul;
using cavs::vertex::Sigmoid;
using cavs::vertex::Tanh;
using cavs::vertex::Vertex;

// h = tanh(x W + (Σ_k a_k ⊙ h_k) U + b): child k's state h_k weighted by its attention
// a_k = σ(h_k Wa + h̄ Ua + ba), where h̄ is the mean of the children's states (the query that
// lets a child count more or less next to its siblings); absent children read as zeros.
absl::StatusOr<Function> AttentiveTreeRnn(int64_t vocab, int64_t embed, int64_t hidden) {
  return Define("attentive_tree_rnn", [=](Vertex& v) {
    Expr x = v.embed("embedding", vocab, embed);
    Expr query = v.gather_mean()["h"];
    Expr summary;
    for (int k = 0; k < 2; ++k) {
      Expr h_k = v.gather(k)["h"];
      Expr a_k = Sigmoid(MatMul(h_k, v.param("Wa", {hidden, hidden})) +
                         MatMul(query, v.param("Ua", {hidden, hidden})) +
                         v.param("ba", {hidden}, Initializer::Zeros()));
      summary = k == 0 ? a_k * h_k : summary + a_k * h_k;
    }
    Expr h = Tanh(MatMul(x, v.param("W", {embed, hidden})) +
                  MatMul(summary, v.param("U", {hidden, hidden})) +
                  v.param("b", {hidden}, Initializer::Zeros()));
    v.scatter({{"h", h}});
    v.push(MatMul(h, v.param("out", {hidden, 5})) + v.param("out_b", {5}, Initializer::Zeros()));
  });
}

// The reference's analytic gradient against (L(p + eps) - L(p - eps)) / 2 eps at the 8 largest
// entries of each parameter's gradient. Returns the worst relative error.
absl::StatusOr<double> FiniteDifferenceError(const Function& f, const std::vector<Graph>& graphs,
                                             const ParamValues& params) {
  CAVS_ASSIGN_OR_RETURN(auto base, RunReference(f, graphs, params, RunOptions{}));
  const RunOptions forward_only{.backward = false};
  double worst = 0.0;
  for (const auto& [name, grad] : base.grads) {
    std::vector<size_t> idx(grad.size());
    std::iota(idx.begin(), idx.end(), size_t{0});
    const size_t n = std::min<size_t>(8, idx.size());
    std::partial_sort(idx.begin(), idx.begin() + n, idx.end(),
                      [&](size_t a, size_t b) { return std::abs(grad[a]) > std::abs(grad[b]); });
    for (size_t j = 0; j < n; ++j) {
      const double eps = 1e-6;
      ParamValues plus = params, minus = params;
      plus[name][idx[j]] += eps;
      minus[name][idx[j]] -= eps;
      CAVS_ASSIGN_OR_RETURN(auto lp, RunReference(f, graphs, plus, forward_only));
      CAVS_ASSIGN_OR_RETURN(auto lm, RunReference(f, graphs, minus, forward_only));
      const double numeric = (lp.loss - lm.loss) / (2 * eps);
      worst = std::max(worst, std::abs(numeric - grad[idx[j]]) / std::max(1.0, std::abs(numeric)));
    }
  }
  return worst;
}

// Runs the batched engine (float, on the CPU) on `graphs` and returns the largest difference
// of its loss and gradients from the reference's, relative to the largest reference value.
absl::StatusOr<double> EngineError(const Function& f, const std::vector<Graph>& graphs) {
  cavs::core::ParameterStore store(/*seed=*/3);
  CAVS_ASSIGN_OR_RETURN(auto engine, cavs::scheduler::Engine::Create(&f, &store));
  CAVS_RETURN_IF_ERROR(store.ZeroGrad());
  CAVS_ASSIGN_OR_RETURN(RunResult got, engine->Run(graphs, RunOptions{}));
  CAVS_ASSIGN_OR_RETURN(auto want,
                        RunReference(f, graphs, SnapshotParameters(f, store), RunOptions{}));
  double worst = std::abs(got.loss_sum - want.run.loss_sum) / std::max(1.0, want.run.loss_sum);
  for (const auto& p : store.parameters()) {
    const std::vector<double>& ref = want.grads.at(p->name);
    std::vector<double> grad(ref.size(), 0.0);  // the engine's, dense
    const int64_t cols = p->value.cols();
    if (p->sparse_grad) {  // an embedding table: only the batch's rows
      for (size_t i = 0; i < p->grad_rows.size(); ++i) {
        std::copy_n(p->grad_values.data<float>() + i * cols, cols,
                    grad.begin() + p->grad_rows[i] * cols);
      }
    } else {
      std::copy_n(p->grad.data<float>(), grad.size(), grad.begin());
    }
    double diff = 0.0, scale = 1e-3;
    for (size_t i = 0; i < ref.size(); ++i) {
      diff = std::max(diff, std::abs(grad[i] - ref[i]));
      scale = std::max(scale, std::abs(ref[i]));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

absl::Status Check(const std::string& data_dir) {
  // Trees, and a vocabulary of their words.
  CAVS_ASSIGN_OR_RETURN(std::vector<cavs::examples::SstTree> trees,
                        cavs::examples::ReadSstFile(data_dir + "/dev.txt"));
  cavs::examples::WordCounter words;
  cavs::examples::CountWords(trees, &words);
  const auto vocabulary = cavs::examples::Vocabulary::FromCounts(words.counts(), 1);
  cavs::examples::AssignTokenIds(vocabulary, &trees);
  std::vector<Graph> dev;
  for (auto& tree : trees) dev.push_back(std::move(tree.graph));
  if (dev.size() < 3) return absl::InvalidArgumentError(data_dir + "/dev.txt has < 3 trees");

  // Small sizes, and three trees for finite differences, so that the checks are cheap.
  CAVS_ASSIGN_OR_RETURN(const Function small, AttentiveTreeRnn(vocabulary.size(), 6, 5));
  const std::vector<Graph> few(dev.begin(), dev.begin() + 3);
  cavs::core::ParameterStore init(/*seed=*/5);
  CAVS_RETURN_IF_ERROR(cavs::scheduler::CreateParameters(small, &init));
  CAVS_ASSIGN_OR_RETURN(const double fd_error,
                        FiniteDifferenceError(small, few, SnapshotParameters(small, init)));
  CAVS_ASSIGN_OR_RETURN(const double engine_error, EngineError(small, dev));
  std::printf("reference vs finite differences: worst relative error %.1e\n", fd_error);
  std::printf("engine vs reference on %zu trees: worst relative error %.1e\n", dev.size(),
              engine_error);
  if (!(fd_error < 1e-5 && engine_error < 1e-4)) return absl::AbortedError("gradient check");
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2) {
    std::fprintf(stderr, "usage: %s [DATA_DIR]\n", argv[0]);
    return 2;
  }
  const absl::Status status = Check(argc > 1 ? argv[1] : CAVS_EXAMPLES_DATA_DIR);
  if (!status.ok()) {
    std::fprintf(stderr, "custom_cell: %s\n", status.ToString().c_str());
    return absl::IsAborted(status) ? 1 : 2;
  }
  return 0;
}
