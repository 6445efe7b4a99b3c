// Row support: which rows of a node can be nonzero, and which rows anybody reads.
//
// A batch's rows are round-major, so the vertices that carry a token (leaves, for SST) or that
// have a child (internal vertices) sit in contiguous stretches. An op whose input is zero on a
// stretch is zero there too (a GEMM, tanh, a product); a sum is nonzero where either operand is.
// In the backward, a child's gradient is dropped where the child is absent and an embedding's
// where there is no token, so nothing outside those rows is read. The engine runs each GEMM
// only on rows inside both intervals: for a Tree-LSTM that skips x W on internal vertices and
// h U on leaves, forward and backward. Intervals are hulls [lo, hi) — conservative, never wrong.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "scheduler/plan.h"
#include "vertex/function.h"

namespace cavs::scheduler {

using Interval = RowRange;

// The smallest interval holding both; the overlap of both.
Interval Hull(Interval a, Interval b);
Interval Meet(Interval a, Interval b);

// Per node of `p`: the rows where it can be nonzero. For the backward program, `fwd` holds the
// forward program's supports (its kForwardValue leaves take them); nullptr for the forward.
std::vector<Interval> Supports(const vertex::Program& p, const Plan& plan,
                               const std::vector<Interval>* fwd);

// Per node of f's backward program: the rows some consumer reads.
std::vector<Interval> Needs(const vertex::Function& f, const Plan& plan);

}  // namespace cavs::scheduler
