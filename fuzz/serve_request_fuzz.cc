// libFuzzer target: cavs-serve's request parser (examples/serve/request.h), on a body's bytes.
// Any input must give either an InvalidArgument carrying a request error kind, or graphs that
// pass the engine's validation and keep the limits (inputs, words, height); anything else
// aborts, which libFuzzer reports. Corpus: fuzz/corpus/serve_request (docs/fuzzing.md).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "examples/serve/request.h"

namespace {

int Height(const cavs::scheduler::Graph& g) {
  std::vector<int> h(g.num_vertices(), 1);
  int top = 0;
  for (int v = 0; v < g.num_vertices(); ++v) {
    for (int k = 0; k < g.num_children(v); ++k) {
      const int32_t c = g.child(v, k);
      CAVS_CHECK(c >= 0 && c < v, "vertex ", v, " has child ", c, ": not in post-order");
      h[v] = std::max(h[v], h[c] + 1);
    }
    top = std::max(top, h[v]);
  }
  return top;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cavs::serve;
  static const cavs::examples::Vocabulary vocab =
      *cavs::examples::Vocabulary::FromWords({"a", "b", "good", "-LRB-"}, "fuzz");
  RequestLimits limits;
  limits.max_inputs = 8;
  limits.max_depth = 20;
  limits.max_words = 40;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ParsedRequest> r = ParseRequest(body, vocab, limits);
  if (!r.ok()) {
    const ErrorKind kind = ErrorKindOf(r.status());
    CAVS_CHECK(absl::IsInvalidArgument(r.status()) && kind != ErrorKind::kNone &&
                   kind != ErrorKind::kInternal,
               "an error without its kind: ", r.status().ToString());
    return 0;
  }
  CAVS_CHECK(!r->graphs.empty() && r->graphs.size() <= limits.max_inputs, "inputs out of bounds");
  for (size_t i = 0; i < r->graphs.size(); ++i) {
    const cavs::scheduler::Graph& g = r->graphs[i];
    const absl::Status valid = cavs::scheduler::ValidateGraph(g, static_cast<int>(i), 2);
    CAVS_CHECK(valid.ok(), valid.message());
    CAVS_CHECK(g.Roots().size() == 1 && g.Roots()[0] == g.num_vertices() - 1, "root not last");
    CAVS_CHECK(Height(g) <= limits.max_depth, "height over the limit");
    const auto words = std::count_if(g.tokens.begin(), g.tokens.end(),
                                     [&](int32_t t) { return t >= 0 && t < vocab.size(); });
    CAVS_CHECK(words <= limits.max_words && g.labels.empty(), "words over the limit, or labels");
  }
  return 0;
}
