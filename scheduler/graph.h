// Graph: one input sample's structure — a tree, a chain or a DAG — with per-vertex inputs and
// labels. The vertex function reads children through gather(k): child slot k of vertex v is
// child_ids[child_offsets[v] + k], or absent (zeros) when the slot is -1 or past v's arity.
//
// Invariants checked by Validate (never assumed): offsets are monotone and sized V+1, every
// child id is -1 or in [0, V), no vertex is its own descendant (no cycles), arity is within
// what the vertex function reads, tokens and labels are sized V (or empty). A vertex may have
// several parents (a DAG); vertices with no parent are roots.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cavs::scheduler {

struct Graph {
  std::vector<int32_t> child_offsets{0};  // size V + 1
  std::vector<int32_t> child_ids;         // -1: an absent child slot
  std::vector<int32_t> tokens;            // size V or empty; -1: no token (pull gives zeros)
  std::vector<int32_t> labels;            // size V or empty; -1: unlabelled
  std::vector<float> features;            // size V * feature_dim, or empty
  int feature_dim = 0;

  int num_vertices() const { return static_cast<int>(child_offsets.size()) - 1; }
  int num_children(int v) const { return child_offsets[v + 1] - child_offsets[v]; }
  // Child slot k of v, or -1 if absent.
  int32_t child(int v, int k) const {
    return k < num_children(v) ? child_ids[child_offsets[v] + k] : -1;
  }
  // Vertices that are no vertex's child, in increasing order.
  std::vector<int32_t> Roots() const;

  // Appends a vertex with the given children (child slots, -1 for absent); returns its id.
  int32_t AddVertex(const std::vector<int32_t>& children, int32_t token = -1, int32_t label = -1);

  // A chain of n vertices: vertex t has child t-1 (vertex 0 has none); tokens and labels empty.
  static Graph Chain(int n);
  // From parent ids (-1 for the root). Children of each vertex appear in increasing id order.
  static absl::StatusOr<Graph> FromParents(const std::vector<int32_t>& parents);
};

// Checks the invariants above. `max_arity` is the highest child slot count the vertex function
// reads (-1: any, for functions that only use gather reductions). Errors name the sample and
// the vertex: "sample 3, vertex 7: child 12 out of range [0, 10)".
[[nodiscard]] absl::Status ValidateGraph(const Graph& graph, int sample, int max_arity = -1);

}  // namespace cavs::scheduler
