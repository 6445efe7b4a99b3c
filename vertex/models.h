// Model cells written in the DSL, kept for users to copy: each is one vertex function.
//
// Conventions: leaves read their token's embedding through embed("embedding", ...); internal
// vertices have no token, so that row is zero. Every cell pushes per-vertex logits (`classes`
// wide) as push 0, which the scheduler's loss reads; the scattered state is named "h" (and
// "c" for LSTMs).
#pragma once

#include <string>

#include "vertex/vertex.h"

namespace cavs::vertex::models {

struct CellConfig {
  int64_t vocab = 1000;
  int64_t embed = 300;
  int64_t hidden = 150;
  int64_t classes = 5;
  float dropout = 0.0f;  // on the input embedding; 0 disables
};

namespace internal_models {
inline Expr Input(Vertex& v, const CellConfig& c) {
  Expr x = v.embed("embedding", c.vocab, c.embed);
  return c.dropout > 0.0f ? Dropout(x, c.dropout, /*seed=*/1) : x;
}
inline void PushLogits(Vertex& v, Expr h, const CellConfig& c) {
  v.push(MatMul(h, v.param("out_W", {c.hidden, c.classes})) +
         v.param("out_b", {c.classes}, core::Initializer::Zeros()));
}
}  // namespace internal_models

// Binary Tree-LSTM (Tai et al. 2015, N-ary with N = 2): one function for leaves and internal
// nodes; separate forget gates for the left and right child.
inline absl::StatusOr<Function> BinaryTreeLstm(const CellConfig& c) {
  return Define("binary_tree_lstm", [c](Vertex& v) {
    Expr x = internal_models::Input(v, c);
    State l = v.gather(0), r = v.gather(1);
    Expr g = MatMul(x, v.param("W", {c.embed, 5 * c.hidden})) +
             MatMul(Concat({l["h"], r["h"]}), v.param("U", {2 * c.hidden, 5 * c.hidden})) +
             v.param("b", {5 * c.hidden}, core::Initializer::Zeros());
    auto [i, o, u, fl, fr] = Split<5>(g);
    Expr cell = Sigmoid(i) * Tanh(u) + Sigmoid(fl) * l["c"] + Sigmoid(fr) * r["c"];
    Expr h = Sigmoid(o) * Tanh(cell);
    v.scatter({{"h", h}, {"c", cell}});
    internal_models::PushLogits(v, h, c);
  });
}

// Child-sum Tree-LSTM (Tai et al. 2015) for up to `max_children` children: h̃ = Σ h_k, one
// forget gate per child from (x, h_k). An absent child's c is zero, so its term vanishes.
inline absl::StatusOr<Function> ChildSumTreeLstm(const CellConfig& c, int max_children) {
  return Define("child_sum_tree_lstm", [c, max_children](Vertex& v) {
    Expr x = internal_models::Input(v, c);
    Expr hsum = v.gather_sum()["h"];
    Expr g = MatMul(x, v.param("W", {c.embed, 3 * c.hidden})) +
             MatMul(hsum, v.param("U", {c.hidden, 3 * c.hidden})) +
             v.param("b", {3 * c.hidden}, core::Initializer::Zeros());
    auto [i, o, u] = Split<3>(g);
    Expr cell = Sigmoid(i) * Tanh(u);
    Expr fx = MatMul(x, v.param("Wf", {c.embed, c.hidden})) +
              v.param("bf", {c.hidden}, core::Initializer::Zeros());
    for (int k = 0; k < max_children; ++k) {
      State child = v.gather(k);
      Expr f = Sigmoid(fx + MatMul(child["h"], v.param("Uf", {c.hidden, c.hidden})));
      cell = cell + f * child["c"];
    }
    Expr h = Sigmoid(o) * Tanh(cell);
    v.scatter({{"h", h}, {"c", cell}});
    internal_models::PushLogits(v, h, c);
  });
}

// Tree-FC (the Cavs paper's fully connected tree): h = tanh(x Wx + [h_l, h_r] U + b).
inline absl::StatusOr<Function> TreeFc(const CellConfig& c) {
  return Define("tree_fc", [c](Vertex& v) {
    Expr x = internal_models::Input(v, c);
    State l = v.gather(0), r = v.gather(1);
    Expr h = Tanh(MatMul(x, v.param("Wx", {c.embed, c.hidden})) +
                  MatMul(Concat({l["h"], r["h"]}), v.param("U", {2 * c.hidden, c.hidden})) +
                  v.param("b", {c.hidden}, core::Initializer::Zeros()));
    v.scatter({{"h", h}});
    internal_models::PushLogits(v, h, c);
  });
}

// Sequence LSTM cell: gather(0) is the previous time step. For a language model, classes is
// the vocabulary size and each vertex's label is the next token.
inline absl::StatusOr<Function> Lstm(const CellConfig& c) {
  return Define("lstm", [c](Vertex& v) {
    Expr x = internal_models::Input(v, c);
    State prev = v.gather(0);
    Expr g = MatMul(x, v.param("W", {c.embed, 4 * c.hidden})) +
             MatMul(prev["h"], v.param("U", {c.hidden, 4 * c.hidden})) +
             v.param("b", {4 * c.hidden}, core::Initializer::Zeros());
    auto [i, f, o, u] = Split<4>(g);
    Expr cell = Sigmoid(i) * Tanh(u) + Sigmoid(f) * prev["c"];
    Expr h = Sigmoid(o) * Tanh(cell);
    v.scatter({{"h", h}, {"c", cell}});
    internal_models::PushLogits(v, h, c);
  });
}

// Sequence GRU cell (Cho et al. 2014): h = (1 - z) ⊙ n + z ⊙ h_prev.
inline absl::StatusOr<Function> Gru(const CellConfig& c) {
  return Define("gru", [c](Vertex& v) {
    Expr x = internal_models::Input(v, c);
    Expr hp = v.gather(0)["h"];
    Expr gx = MatMul(x, v.param("W", {c.embed, 3 * c.hidden})) +
              v.param("b", {3 * c.hidden}, core::Initializer::Zeros());
    auto [zx, rx, nx] = Split<3>(gx);
    auto [zh, rh] = Split<2>(MatMul(hp, v.param("U", {c.hidden, 2 * c.hidden})));
    Expr z = Sigmoid(zx + zh), r = Sigmoid(rx + rh);
    Expr n = Tanh(nx + MatMul(r * hp, v.param("Un", {c.hidden, c.hidden})));
    Expr h = OneMinus(z) * n + z * hp;
    v.scatter({{"h", h}});
    internal_models::PushLogits(v, h, c);
  });
}

// Binary tree-GRU: per-child reset gates, and an update gate mixing the candidate with the
// children's mean state.
inline absl::StatusOr<Function> TreeGru(const CellConfig& c) {
  return Define("tree_gru", [c](Vertex& v) {
    Expr x = internal_models::Input(v, c);
    Expr hl = v.gather(0)["h"], hr = v.gather(1)["h"];
    Expr hc = Concat({hl, hr});
    Expr gates = MatMul(x, v.param("W", {c.embed, 3 * c.hidden})) +
                 MatMul(hc, v.param("U", {2 * c.hidden, 3 * c.hidden})) +
                 v.param("b", {3 * c.hidden}, core::Initializer::Zeros());
    auto [z, rl, rr] = Split<3>(gates);
    Expr reset = Concat({Sigmoid(rl) * hl, Sigmoid(rr) * hr});
    Expr n = Tanh(MatMul(x, v.param("Wn", {c.embed, c.hidden})) +
                  MatMul(reset, v.param("Un", {2 * c.hidden, c.hidden})));
    Expr zs = Sigmoid(z);
    Expr h = OneMinus(zs) * n + zs * Scale(hl + hr, 0.5f);
    v.scatter({{"h", h}});
    internal_models::PushLogits(v, h, c);
  });
}

}  // namespace cavs::vertex::models
