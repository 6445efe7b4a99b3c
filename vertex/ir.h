// The intermediate representation of a traced vertex function.
//
// A Program is a list of Nodes in topological order (every input id is smaller than the node's
// own). A node is either *static* (a parameter: one tensor for the whole batch) or
// *per-vertex* (one row of `width` floats for every vertex of the batch). Ops never mix rows of
// different vertices except through the gather leaves, whose rows come from the vertex's
// children; that is what lets the scheduler run a node for many vertices at once.
//
// Both the forward function and its derived backward are Programs over the same op set; the
// backward adds leaves that read forward values and incoming gradients, and sinks that export
// gradients (to children, to parameters, to embedding rows).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/initializer.h"
#include "core/shape.h"

namespace cavs::vertex {

enum class OpKind : uint8_t {
  // Leaves.
  kParam,         // a parameter; static. attr: name
  kPull,          // the vertex's feature row (zeros if the graph has none)
  kEmbed,         // inputs {table param}: the row of the vertex's token (zeros if none)
  kGather,        // child slot `index`, field `field` (zeros where the child is absent)
  kGatherReduce,  // sum / mean / max of field `field` over all children (zeros if none)
  // Per-vertex ops.
  kMatMul,   // inputs {x, W param}: x W, or x Wᵀ when `transpose`
  kAdd,      // inputs {a, b}; b may be a parameter row (broadcast)
  kSub,      // inputs {a, b}; b may be a parameter row
  kMul,      // inputs {a, b}; b may be a parameter row
  kSigmoid,  //
  kTanh,     //
  kRelu,     //
  kNeg,      //
  kScale,    // attrs: scalar, offset: scalar * x + offset
  kConcat,   // inputs: any number, concatenated along the row
  kSlice,    // columns [begin, end)
  kSum,      // row sum: width 1
  kDropout,  // attr: scalar = drop probability, index = seed; identity in eval mode
  // Backward-only per-vertex ops.
  kSigmoidGrad,    // inputs {y, dy}: dy * y * (1 - y)
  kTanhGrad,       // inputs {y, dy}: dy * (1 - y²)
  kReluGrad,       // inputs {y, dy}: dy * (y > 0)
  kPadSlice,       // inputs {x}: x placed at columns [begin, end) of a zero row of `width`
  kBroadcastCols,  // inputs {x of width 1}: x repeated `width` times
  // Backward leaves.
  kForwardValue,  // the forward value of forward node `index`
  kScatterGrad,   // the gradient arriving at scattered field `field` from the vertex's parents
  kPushGrad,      // the gradient of the loss with respect to push output `index`
  // Backward sinks (exports).
  kGatherGrad,        // inputs {dy}: scatter-add into child slot `index`'s field `field`
  kGatherReduceGrad,  // inputs {dy}: to every child (sum, mean) or the argmax child (max)
  kWeightGradMatMul,  // inputs {x, dy}: param `name` += Σ_v xᵀ dy
  kWeightGradBias,    // inputs {dy}: param `name` += Σ_v dy (times `scalar`)
  kWeightGradScale,   // inputs {x, dy}: param `name` += Σ_v x ⊙ dy
  kEmbedGrad,         // inputs {dy}: row token(v) of param `name` += dy (row-sparse)
};

enum class Reduce : uint8_t { kSum, kMean, kMax };

// Bounds Define enforces, each with an error naming the op and the value beyond it.
//
// A per-vertex row holds at most kMaxWidth floats (64 MiB). Executors size buffers as rows x
// width for a whole batch, so a wider row is a mistake, not a model; rejecting it at Define
// keeps it from surfacing later as a failed (or aborted) allocation.
inline constexpr int64_t kMaxWidth = int64_t{1} << 24;
// gather(k) reads child slots k < kMaxChildSlots. The plan keeps two index arrays per slot,
// one entry per vertex of the batch, whether or not children fill the slot, so slots cost
// memory; vertices with more children are read through the reductions (gather_sum, ...),
// which have no bound.
inline constexpr int kMaxChildSlots = 1 << 12;

// When the scheduler evaluates a node. For the forward program these are Cavs's op classes:
// pre-ops (kBeforeRounds), recurrent ops (kInRounds), post-ops (kAfterRounds). For the backward
// program the rounds run in reverse and kWeightGrad sinks reduce over all vertices at the end.
enum class OpClass : uint8_t { kStatic, kBeforeRounds, kInRounds, kAfterRounds, kWeightGrad };

struct Node {
  OpKind kind = OpKind::kParam;
  std::vector<int> inputs;
  int64_t width = -1;       // per-vertex row width; -1 until inferred
  core::Shape param_shape;  // kParam: the parameter's shape
  OpClass op_class = OpClass::kBeforeRounds;
  // Attributes (meaning depends on kind, see OpKind).
  std::string name;   // parameter name (kParam and weight-gradient sinks)
  std::string field;  // scatter field (gathers, scatter gradients)
  int64_t index = 0;  // child slot, push index, forward node id, dropout seed
  int64_t begin = 0, end = 0;
  // kSlice made by Split: part `begin` of `split_parts` equal parts. Inference resolves it to
  // columns [begin, end) once the operand's width is known and then resets it to 0.
  int64_t split_parts = 0;
  float scalar = 0.0f;
  float offset = 0.0f;
  bool transpose = false;
  Reduce reduce = Reduce::kSum;
  core::Initializer init;    // kParam
  bool sparse_grad = false;  // kParam used as an embedding table

  bool is_static() const { return kind == OpKind::kParam; }
};

struct ScatterField {
  std::string name;
  int node = -1;
};

struct Program {
  std::vector<Node> nodes;
};

const char* OpKindName(OpKind kind);
const char* OpClassName(OpClass c, bool backward);

inline const char* OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kParam:
      return "Param";
    case OpKind::kPull:
      return "Pull";
    case OpKind::kEmbed:
      return "Embed";
    case OpKind::kGather:
      return "Gather";
    case OpKind::kGatherReduce:
      return "GatherReduce";
    case OpKind::kMatMul:
      return "MatMul";
    case OpKind::kAdd:
      return "Add";
    case OpKind::kSub:
      return "Sub";
    case OpKind::kMul:
      return "Mul";
    case OpKind::kSigmoid:
      return "Sigmoid";
    case OpKind::kTanh:
      return "Tanh";
    case OpKind::kRelu:
      return "Relu";
    case OpKind::kNeg:
      return "Neg";
    case OpKind::kScale:
      return "Scale";
    case OpKind::kConcat:
      return "Concat";
    case OpKind::kSlice:
      return "Slice";
    case OpKind::kSum:
      return "Sum";
    case OpKind::kDropout:
      return "Dropout";
    case OpKind::kSigmoidGrad:
      return "SigmoidGrad";
    case OpKind::kTanhGrad:
      return "TanhGrad";
    case OpKind::kReluGrad:
      return "ReluGrad";
    case OpKind::kPadSlice:
      return "PadSlice";
    case OpKind::kBroadcastCols:
      return "BroadcastCols";
    case OpKind::kForwardValue:
      return "ForwardValue";
    case OpKind::kScatterGrad:
      return "ScatterGrad";
    case OpKind::kPushGrad:
      return "PushGrad";
    case OpKind::kGatherGrad:
      return "GatherGrad";
    case OpKind::kGatherReduceGrad:
      return "GatherReduceGrad";
    case OpKind::kWeightGradMatMul:
      return "WeightGradMatMul";
    case OpKind::kWeightGradBias:
      return "WeightGradBias";
    case OpKind::kWeightGradScale:
      return "WeightGradScale";
    case OpKind::kEmbedGrad:
      return "EmbedGrad";
  }
  return "?";
}

inline const char* OpClassName(OpClass c, bool backward) {
  switch (c) {
    case OpClass::kStatic:
      return "static";
    case OpClass::kBeforeRounds:
      return backward ? "before-rounds" : "pre";
    case OpClass::kInRounds:
      return backward ? "in-rounds" : "recurrent";
    case OpClass::kAfterRounds:
      return backward ? "after-rounds" : "post";
    case OpClass::kWeightGrad:
      return "weight-grad";
  }
  return "?";
}

// True for ops computed row by row from same-row inputs (the ones a fused kernel can chain).
inline bool IsElementwise(OpKind k) {
  switch (k) {
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kSigmoid:
    case OpKind::kTanh:
    case OpKind::kRelu:
    case OpKind::kNeg:
    case OpKind::kScale:
    case OpKind::kConcat:
    case OpKind::kSlice:
    case OpKind::kSum:
    case OpKind::kDropout:
    case OpKind::kSigmoidGrad:
    case OpKind::kTanhGrad:
    case OpKind::kReluGrad:
    case OpKind::kPadSlice:
    case OpKind::kBroadcastCols:
      return true;
    default:
      return false;
  }
}

inline bool IsSink(OpKind k) {
  return k == OpKind::kGatherGrad || k == OpKind::kGatherReduceGrad ||
         k == OpKind::kWeightGradMatMul || k == OpKind::kWeightGradBias ||
         k == OpKind::kWeightGradScale || k == OpKind::kEmbedGrad;
}

}  // namespace cavs::vertex
