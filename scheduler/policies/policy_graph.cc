#include "scheduler/policies/policy_graph.h"

#include <algorithm>

namespace cavs::scheduler::policies {

Merged Merge(const BatchGraphs& batch) {
  Merged m;
  m.n = batch.graph_offsets.back();
  m.child_offsets.resize(m.n + 1);
  m.children.resize(batch.edges);
  m.child_offsets[0] = 0;
  int64_t e = 0;
  for (size_t gi = 0; gi < batch.graphs.size(); ++gi) {
    const Graph& g = batch.graphs[gi];
    const int32_t base = static_cast<int32_t>(batch.graph_offsets[gi]);
    const int n = g.num_vertices();
    for (int v = 0; v < n; ++v) m.child_offsets[base + v + 1] = e + g.child_offsets[v + 1];
    const int32_t* ids = g.child_ids.data();
    int32_t* out = m.children.data() + e;
    for (size_t j = 0; j < g.child_ids.size(); ++j) out[j] = ids[j] < 0 ? -1 : base + ids[j];
    e += static_cast<int64_t>(g.child_ids.size());
  }
  return m;
}

std::vector<int32_t> RoundsBottomUp(const Merged& m, int64_t cap) {
  std::vector<int32_t> pending(m.n, 0), round(m.n, 0);
  std::vector<int64_t> poff(m.n + 1, 0);
  for (int32_t c : m.children) {
    if (c >= 0) ++poff[c + 1];
  }
  for (int64_t i = 0; i < m.n; ++i) poff[i + 1] += poff[i];
  std::vector<int32_t> parents(poff[m.n]);
  std::vector<int64_t> fill(poff.begin(), poff.end() - 1);
  for (int64_t v = 0; v < m.n; ++v) {
    for (int64_t j = m.child_offsets[v]; j < m.child_offsets[v + 1]; ++j) {
      const int32_t c = m.children[j];
      if (c >= 0) {
        parents[fill[c]++] = static_cast<int32_t>(v);
        ++pending[v];
      }
    }
  }
  std::vector<int32_t> ready, next;
  for (int64_t v = 0; v < m.n; ++v) {
    if (pending[v] == 0) ready.push_back(static_cast<int32_t>(v));
  }
  int32_t r = 0;
  while (!ready.empty()) {
    // The agenda takes the oldest uids first; without a cap the order within a round does not
    // matter here (rows are put in uid order within each round afterwards).
    if (cap > 0) std::sort(ready.begin(), ready.end());
    const size_t take = cap > 0 ? std::min<size_t>(ready.size(), cap) : ready.size();
    next.assign(ready.begin() + take, ready.end());
    for (size_t i = 0; i < take; ++i) {
      const int32_t v = ready[i];
      round[v] = r;
      for (int64_t j = poff[v]; j < poff[v + 1]; ++j) {
        if (--pending[parents[j]] == 0) next.push_back(parents[j]);
      }
    }
    ready.swap(next);
    ++r;
  }
  return round;
}

bool HeightsChildrenFirst(const BatchGraphs& batch, std::vector<int32_t>* height) {
  height->resize(batch.graph_offsets.back());
  bool children_first = true;
  for (size_t gi = 0; gi < batch.graphs.size(); ++gi) {
    const Graph& g = batch.graphs[gi];
    const int32_t* off = g.child_offsets.data();
    const int32_t* ids = g.child_ids.data();
    int32_t* h = height->data() + batch.graph_offsets[gi];
    for (int v = 0; v < g.num_vertices(); ++v) {
      int32_t hv = 0;
      for (int32_t j = off[v]; j < off[v + 1]; ++j) {
        children_first &= ids[j] < v;  // else h[ids[j]] is not yet known (but in range)
        if (ids[j] >= 0) hv = std::max(hv, h[ids[j]] + 1);
      }
      h[v] = hv;
    }
  }
  return children_first;
}

std::vector<int32_t> RoundsByDepth(const Merged& m, const std::vector<int32_t>& height) {
  // Process parents before children: decreasing height order is a valid order.
  std::vector<int32_t> order(m.n);
  for (int64_t i = 0; i < m.n; ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return height[a] > height[b]; });
  std::vector<int32_t> depth(m.n, 0);
  int32_t max_depth = 0;
  for (int32_t v : order) {
    max_depth = std::max(max_depth, depth[v]);
    for (int64_t j = m.child_offsets[v]; j < m.child_offsets[v + 1]; ++j) {
      const int32_t c = m.children[j];
      if (c >= 0) depth[c] = std::max(depth[c], depth[v] + 1);
    }
  }
  for (int32_t& d : depth) d = max_depth - d;
  return depth;
}

}  // namespace cavs::scheduler::policies
