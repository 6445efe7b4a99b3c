#include "scheduler/graph.h"

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace cavs::scheduler {

std::vector<int32_t> Graph::Roots() const {
  std::vector<char> has_parent(num_vertices(), 0);
  for (int32_t c : child_ids) {
    if (c >= 0 && c < num_vertices()) has_parent[c] = 1;
  }
  std::vector<int32_t> roots;
  for (int v = 0; v < num_vertices(); ++v) {
    if (!has_parent[v]) roots.push_back(v);
  }
  return roots;
}

int32_t Graph::AddVertex(const std::vector<int32_t>& children, int32_t token, int32_t label) {
  const int32_t id = num_vertices();
  child_ids.insert(child_ids.end(), children.begin(), children.end());
  child_offsets.push_back(static_cast<int32_t>(child_ids.size()));
  if (token >= 0 || !tokens.empty()) {
    tokens.resize(id, -1);
    tokens.push_back(token);
  }
  if (label >= 0 || !labels.empty()) {
    labels.resize(id, -1);
    labels.push_back(label);
  }
  return id;
}

Graph Graph::Chain(int n) {
  Graph g;
  for (int t = 0; t < n; ++t) g.AddVertex(t == 0 ? std::vector<int32_t>{} : std::vector{t - 1});
  return g;
}

absl::StatusOr<Graph> Graph::FromParents(const std::vector<int32_t>& parents) {
  const int n = static_cast<int>(parents.size());
  std::vector<std::vector<int32_t>> children(n);
  for (int v = 0; v < n; ++v) {
    const int32_t p = parents[v];
    if (p == -1) continue;
    if (p < 0 || p >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("vertex ", v, ": parent ", p, " out of range [0, ", n, ")"));
    }
    children[p].push_back(v);
  }
  Graph g;
  for (int v = 0; v < n; ++v) g.AddVertex(children[v]);
  return g;
}

namespace {

absl::Status VertexError(int sample, int v, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("sample ", sample, ", vertex ", v, ": ", what));
}

// Iterative three-colour DFS: reports the first vertex found on a cycle.
absl::Status CheckAcyclic(const Graph& g, int sample) {
  const int n = g.num_vertices();
  std::vector<char> colour(n, 0);          // 0 new, 1 on stack, 2 done
  std::vector<std::pair<int, int>> stack;  // (vertex, next child slot)
  for (int s = 0; s < n; ++s) {
    if (colour[s] != 0) continue;
    stack.push_back({s, 0});
    colour[s] = 1;
    while (!stack.empty()) {
      auto& [v, k] = stack.back();
      if (k == g.num_children(v)) {
        colour[v] = 2;
        stack.pop_back();
        continue;
      }
      const int32_t c = g.child(v, k++);
      if (c < 0) continue;
      if (colour[c] == 1) {
        return VertexError(sample, v, absl::StrCat("cycle: child ", c, " is also an ancestor"));
      }
      if (colour[c] == 0) {
        colour[c] = 1;
        stack.push_back({c, 0});
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSizes(const Graph& g, int sample) {
  const int n = g.num_vertices();
  if (!g.tokens.empty() && static_cast<int>(g.tokens.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("sample ", sample, ": ", g.tokens.size(), " tokens for ", n, " vertices"));
  }
  if (!g.labels.empty() && static_cast<int>(g.labels.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("sample ", sample, ": ", g.labels.size(), " labels for ", n, " vertices"));
  }
  if (g.feature_dim < 0 || (g.feature_dim > 0 && static_cast<int64_t>(g.features.size()) !=
                                                     static_cast<int64_t>(n) * g.feature_dim)) {
    return absl::InvalidArgumentError(absl::StrCat("sample ", sample, ": ", g.features.size(),
                                                   " feature values for ", n, " vertices of width ",
                                                   g.feature_dim));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateGraph(const Graph& g, int sample, int max_arity) {
  if (g.child_offsets.empty() || g.child_offsets[0] != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sample ", sample, ": child_offsets must start with 0"));
  }
  const int n = g.num_vertices();
  if (g.child_offsets[n] != static_cast<int32_t>(g.child_ids.size())) {
    return absl::InvalidArgumentError(absl::StrCat("sample ", sample, ": child_offsets end at ",
                                                   g.child_offsets[n], " but there are ",
                                                   g.child_ids.size(), " child ids"));
  }
  for (int v = 0; v < n; ++v) {
    if (g.child_offsets[v + 1] < g.child_offsets[v]) {
      return VertexError(sample, v, "child_offsets decrease");
    }
  }
  // The offsets run from 0 to the ids' end without decreasing: every id read below is in
  // bounds (checking them vertex by vertex as the ids are read let offsets like 0, 1, 0 read
  // past the end).
  const int32_t* off = g.child_offsets.data();
  const int32_t* ids = g.child_ids.data();
  bool children_first = true;  // every child numbered below its parent: acyclic, no DFS
  for (int v = 0; v < n; ++v) {
    if (max_arity >= 0 && off[v + 1] - off[v] > max_arity) {
      return VertexError(sample, v,
                         absl::StrCat(off[v + 1] - off[v], " children, but the vertex function ",
                                      "reads at most ", max_arity));
    }
    for (int32_t j = off[v]; j < off[v + 1]; ++j) {
      const int32_t c = ids[j];
      if (c < -1 || c >= n) {
        return VertexError(sample, v, absl::StrCat("child ", c, " out of range [0, ", n, ")"));
      }
      if (c == v) return VertexError(sample, v, "cycle: vertex is its own child");
      children_first &= c < v;
    }
  }
  CAVS_RETURN_IF_ERROR(CheckSizes(g, sample));
  return children_first ? absl::OkStatus() : CheckAcyclic(g, sample);
}

}  // namespace cavs::scheduler
