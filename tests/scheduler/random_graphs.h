// Random input graphs for tests: trees, chains and DAGs with shared children, with tokens and
// labels. Deterministic for a seed.
#pragma once

#include <cstdint>
#include <vector>

#include "core/random.h"
#include "scheduler/graph.h"

namespace cavs::scheduler::testing {

struct RandomGraphOptions {
  int vocab = 20;
  int classes = 3;
  double token_prob = 1.0;  // chance a leaf (or chain step) carries a token
  bool internal_tokens = false;
  double label_prob = 0.8;
};

// A random binary tree with `leaves` leaves, children in slot order, root last; some internal
// vertices are unary (only slot 0) when `allow_unary`.
inline Graph RandomTree(core::Rng& rng, int leaves, const RandomGraphOptions& o,
                        bool allow_unary = false) {
  Graph g;
  std::vector<int32_t> pool;
  auto attrs = [&](bool leaf, int32_t* token, int32_t* label) {
    *token = (leaf || o.internal_tokens) && rng.Uniform() < o.token_prob
                 ? static_cast<int32_t>(rng.UniformInt(o.vocab))
                 : -1;
    *label = rng.Uniform() < o.label_prob ? static_cast<int32_t>(rng.UniformInt(o.classes)) : -1;
  };
  int32_t t, l;
  for (int i = 0; i < leaves; ++i) {
    attrs(true, &t, &l);
    pool.push_back(g.AddVertex({}, t, l));
  }
  while (pool.size() > 1 || (allow_unary && rng.Uniform() < 0.1)) {
    attrs(false, &t, &l);
    const size_t i = rng.UniformInt(pool.size());
    if (allow_unary && (pool.size() == 1 || rng.Uniform() < 0.2)) {
      pool[i] = g.AddVertex({pool[i]}, t, l);
      continue;
    }
    size_t j = rng.UniformInt(pool.size() - 1);
    if (j >= i) ++j;
    const int32_t a = pool[i], b = pool[j];
    pool.erase(pool.begin() + std::max(i, j));
    pool.erase(pool.begin() + std::min(i, j));
    pool.push_back(g.AddVertex({a, b}, t, l));
  }
  g.tokens.resize(g.num_vertices(), -1);
  g.labels.resize(g.num_vertices(), -1);
  return g;
}

// A chain of n steps, each with a token and a label.
inline Graph RandomChain(core::Rng& rng, int n, const RandomGraphOptions& o) {
  Graph g = Graph::Chain(n);
  for (int v = 0; v < n; ++v) {
    g.tokens.push_back(static_cast<int32_t>(rng.UniformInt(o.vocab)));
    g.labels.push_back(
        rng.Uniform() < o.label_prob ? static_cast<int32_t>(rng.UniformInt(o.classes)) : -1);
  }
  return g;
}

// A DAG: vertex v picks up to `max_children` children among earlier vertices, so children are
// shared between parents; absent slots (-1) appear too.
inline Graph RandomDag(core::Rng& rng, int n, int max_children, const RandomGraphOptions& o) {
  Graph g;
  for (int v = 0; v < n; ++v) {
    std::vector<int32_t> kids;
    const int k = v == 0 ? 0 : static_cast<int>(rng.UniformInt(max_children + 1));
    for (int i = 0; i < k; ++i) {
      kids.push_back(rng.Uniform() < 0.15 ? -1 : static_cast<int32_t>(rng.UniformInt(v)));
    }
    const int32_t token = rng.Uniform() < 0.7 ? static_cast<int32_t>(rng.UniformInt(o.vocab)) : -1;
    const int32_t label =
        rng.Uniform() < o.label_prob ? static_cast<int32_t>(rng.UniformInt(o.classes)) : -1;
    g.AddVertex(kids, token, label);
  }
  g.tokens.resize(n, -1);
  g.labels.resize(n, -1);
  return g;
}

}  // namespace cavs::scheduler::testing
