// Vertex functions shared by the scheduler tests.
#pragma once

#include "vertex/vertex.h"

namespace cavs::scheduler::testing {

// Exercises every op: pull (3 wide), embed (vocab 50), gather slots and all reductions,
// param-row Sub/Mul, Relu, Neg, Scale with offset, Sum, Concat, Slice, Dropout; `classes`
// logits.
inline absl::StatusOr<vertex::Function> EveryOp(int64_t classes) {
  using namespace vertex;
  return Define("every_op", [classes](Vertex& v) {
    Expr x = v.pull(3);
    Expr e = v.embed("emb", 50, 3);
    State s = v.gather_sum(), m = v.gather_mean(), mx = v.gather_max(), c0 = v.gather(0);
    Expr in = Concat({x, e, s["h"], m["h"], mx["h"], c0["h"]});
    Expr a = MatMul(in, v.param("W", {14, 4})) - v.param("bias", {4});
    Expr b = Relu(a) * v.param("gain", {1, 4}) + Neg(Tanh(Slice(a, 0, 4)));
    Expr d = Dropout(Scale(b, 0.5f, 0.25f), 0.3f, 9);
    Expr h = Sigmoid(Concat({d, Slice(d, 0, 2)})) *
             Tanh(Concat({Sum(d), d, Slice(d, 1, 2)}) * Concat({x, x}));
    v.scatter({{"h", Slice(h, 0, 2)}});
    v.push(MatMul(OneMinus(h), v.param("out", {6, classes})));
  });
}

// Sums of GEMMs that the engine computes in place (terms write into the sum's rows): x A + h B
// (terms in different op classes, x only on tokened rows), (h C + cb) + t D (same class, a bias,
// the sum a Concat input so its rows are strided), and x E + h F where x E is also read
// elsewhere (not folded). `classes` logits through a folded GEMM plus bias.
inline absl::StatusOr<vertex::Function> GemmSums(int64_t classes) {
  using namespace vertex;
  return Define("gemm_sums", [classes](Vertex& v) {
    Expr x = v.embed("emb", 50, 4);
    State c0 = v.gather(0), c1 = v.gather(1);
    Expr s1 = MatMul(x, v.param("A", {4, 6})) + MatMul(c0["h"], v.param("B", {6, 6}));
    Expr t = Tanh(s1);
    Expr s2 = MatMul(c1["h"], v.param("C", {6, 3})) + v.param("cb", {3}) +
              MatMul(t, v.param("D", {6, 3}));
    Expr cat = Concat({s2, t});
    Expr e = MatMul(x, v.param("E", {4, 6}));
    Expr s3 = e + MatMul(c1["h"], v.param("F", {6, 6}));
    Expr h = Tanh(Slice(cat, 0, 6)) * Sigmoid(s3) + Sigmoid(e) * Slice(cat, 3, 9);
    v.scatter({{"h", h}});
    v.push(MatMul(h, v.param("out", {6, classes})) + v.param("out_b", {classes}));
  });
}

// An embedding x that a folded run (Engine::FoldInputProjections) must still gather: x W, a
// projection the engine folds, starts the gates' sum, and x is read besides: `which` 0, as a
// field the parents gather; 1, as a Concat input; 2, x W comes after another term in the
// pre-ops (a pull's projection); 3, by a second projection in the same sum. With `dropout`, x
// is the embedding's Dropout (a copy in inference, which a folded run must then still make).
// `classes` logits.
inline absl::StatusOr<vertex::Function> EmbedReadBesidesAFold(int which, int64_t classes,
                                                              bool dropout = false) {
  using namespace vertex;
  return Define("embed_read_besides_a_fold", [which, classes, dropout](Vertex& v) {
    Expr x = v.embed("emb", 50, 4);
    if (dropout) x = Dropout(x, 0.5f, 3);
    State c0 = v.gather(0);
    Expr g =
        MatMul(x, v.param("W", {4, 6})) + MatMul(c0["h"], v.param("U", {6, 6})) + v.param("b", {6});
    if (which == 0) g = g + MatMul(c0["x"], v.param("V", {4, 6}));
    if (which == 1) g = g + MatMul(Concat({x, c0["h"]}), v.param("V", {10, 6}));
    if (which == 2) g = MatMul(v.pull(3), v.param("P", {3, 6})) + g;
    if (which == 3) g = g + MatMul(x, v.param("W2", {4, 6}));
    Expr h = Tanh(g);
    if (which == 0) {
      v.scatter({{"h", h}, {"x", x}});
    } else {
      v.scatter({{"h", h}});
    }
    v.push(MatMul(h, v.param("out", {6, classes})));
  });
}

// The embedding's Dropout in a fused step with other work (a pull's Tanh): a folded run empties
// the Dropout's instruction there and still runs the step, a program of another shape than the
// plain run's. `classes` logits.
inline absl::StatusOr<vertex::Function> FoldedDropoutBesideOtherWork(int64_t classes) {
  using namespace vertex;
  return Define("folded_dropout_beside_other_work", [classes](Vertex& v) {
    Expr x = Dropout(v.embed("emb", 50, 4), 0.5f, 3);
    Expr t = Tanh(v.pull(3));
    State c0 = v.gather(0);
    Expr g =
        MatMul(x, v.param("W", {4, 6})) + MatMul(c0["h"], v.param("U", {6, 6})) + v.param("b", {6});
    Expr h = Tanh(g) * Sigmoid(MatMul(t, v.param("T", {3, 6})));
    v.scatter({{"h", h}});
    v.push(MatMul(h, v.param("out", {6, classes})));
  });
}

// One-input Concats whose only readers sit in the same fused step, next to plain temporaries:
// the Concat of a pull and of a slice of a gathered child (neither aliasable into the Concat's
// columns); the slice's gradient is a PadSlice in the backward. `classes` logits.
inline absl::StatusOr<vertex::Function> SingleInputConcats(int64_t classes) {
  using namespace vertex;
  return Define("single_input_concats", [classes](Vertex& v) {
    Expr x = Concat({v.pull(3)});
    Expr c = Concat({Slice(v.gather(0)["h"], 0, 3)});
    Expr h = Tanh(x) * Sigmoid(c);
    v.scatter({{"h", Concat({h, h})}});
    v.push(MatMul(h, v.param("out", {3, classes})));
  });
}

}  // namespace cavs::scheduler::testing
