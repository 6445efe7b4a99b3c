// Links an installed cavs through find_package(cavs): builds a chain graph, validates it and
// allocates a host tensor. Exits 0 only if everything checks out.
#include <cstdio>

#include "core/tensor.h"
#include "scheduler/graph.h"

int main() {
  const cavs::scheduler::Graph chain = cavs::scheduler::Graph::Chain(5);
  const absl::Status status = cavs::scheduler::ValidateGraph(chain, /*sample=*/0);
  if (!status.ok()) {
    std::fprintf(stderr, "consumer: chain graph invalid: %s\n", status.ToString().c_str());
    return 1;
  }
  if (chain.num_vertices() != 5 || chain.Roots().size() != 1 || chain.Roots()[0] != 4) {
    std::fprintf(stderr, "consumer: Chain(5) has %d vertices and %zu roots\n", chain.num_vertices(),
                 chain.Roots().size());
    return 1;
  }
  const cavs::core::Tensor tensor = cavs::core::Tensor::Host({2, 3});
  if (!tensor.defined() || tensor.numel() != 6) {
    std::fprintf(stderr, "consumer: Tensor::Host({2, 3}) has %lld elements\n",
                 static_cast<long long>(tensor.numel()));
    return 1;
  }
  const float* data = tensor.data<float>();
  for (int i = 0; i < 6; ++i) {
    if (data[i] != 0.0f) {
      std::fprintf(stderr, "consumer: Tensor::Host is not zero-filled at %d\n", i);
      return 1;
    }
  }
  std::printf("consumer: ok (chain of %d vertices valid, tensor %s)\n", chain.num_vertices(),
              tensor.shape().DebugString().c_str());
  return 0;
}
