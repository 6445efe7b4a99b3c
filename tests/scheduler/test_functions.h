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

}  // namespace cavs::scheduler::testing
