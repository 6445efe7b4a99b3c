// libFuzzer target: cavs-serve's request parser (examples/serve/request.h), on a body's bytes,
// read as a tree model's request and as a language model's. Any input must give either an
// InvalidArgument carrying a request error kind, or graphs that pass the engine's validation
// and keep the limits (inputs, words, height, top_k); a language model's are cavs-train's
// chains (<s> first, each vertex's next token the following vertex's, "</s>" last). Anything
// else aborts, which libFuzzer reports. Corpus: fuzz/corpus/serve_request (docs/fuzzing.md).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "examples/data/text_reader.h"
#include "examples/serve/request.h"

namespace {

using cavs::serve::InputForm;

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

// That chain `g` with next tokens `next` is cavs-train's chain of its words.
void CheckChain(const cavs::scheduler::Graph& g, const std::vector<int32_t>& next,
                const cavs::examples::Vocabulary& vocab) {
  const int n = g.num_vertices();
  CAVS_CHECK(n >= 2 && static_cast<int>(next.size()) == n, "a chain of ", n, " vertices, ",
             next.size(), " next tokens");
  CAVS_CHECK(g.tokens[0] == vocab.Id(cavs::examples::kBeginToken), "no <s> first");
  CAVS_CHECK(next[n - 1] == vocab.Id(cavs::examples::kEndToken), "no </s> last");
  for (int v = 0; v < n; ++v) {
    CAVS_CHECK(g.num_children(v) == (v > 0 ? 1 : 0) && (v == 0 || g.child(v, 0) == v - 1),
               "vertex ", v, " is not a chain's");
    if (v + 1 < n) CAVS_CHECK(next[v] == g.tokens[v + 1], "vertex ", v, " predicts another token");
  }
}

void Check(std::string_view body, InputForm form, const cavs::examples::Vocabulary& vocab,
           const cavs::serve::RequestLimits& limits) {
  using namespace cavs::serve;
  absl::StatusOr<ParsedRequest> r = ParseRequest(body, vocab, limits, form);
  if (!r.ok()) {
    const ErrorKind kind = ErrorKindOf(r.status());
    CAVS_CHECK(absl::IsInvalidArgument(r.status()) && kind != ErrorKind::kNone &&
                   kind != ErrorKind::kInternal,
               "an error without its kind: ", r.status().ToString());
    return;
  }
  const bool chain = form == InputForm::kChain;
  CAVS_CHECK(!r->graphs.empty() && r->graphs.size() <= limits.max_inputs, "inputs out of bounds");
  CAVS_CHECK(r->next_tokens.size() == (chain ? r->graphs.size() : 0), "next tokens of trees");
  CAVS_CHECK(r->top_k >= 0 && r->top_k <= std::min(limits.max_top_k, vocab.size()) &&
                 (chain || r->top_k == 0),
             "top_k ", r->top_k, " out of bounds");
  CAVS_CHECK(!chain || !r->nodes, "nodes asked of a language model");
  for (size_t i = 0; i < r->graphs.size(); ++i) {
    const cavs::scheduler::Graph& g = r->graphs[i];
    const absl::Status valid = cavs::scheduler::ValidateGraph(g, static_cast<int>(i), 2);
    CAVS_CHECK(valid.ok(), valid.message());
    CAVS_CHECK(g.Roots().size() == 1 && g.Roots()[0] == g.num_vertices() - 1, "root not last");
    CAVS_CHECK(Height(g) <= limits.max_depth, "height over the limit");
    const auto words = std::count_if(g.tokens.begin(), g.tokens.end(),
                                     [&](int32_t t) { return t >= 0 && t < vocab.size(); });
    CAVS_CHECK(words - (chain ? 1 : 0) <= limits.max_words && g.labels.empty(),
               "words over the limit, or labels");
    if (chain) CheckChain(g, r->next_tokens[i], vocab);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const cavs::examples::Vocabulary vocab =
      *cavs::examples::Vocabulary::FromWords({"<s>", "</s>", "a", "b", "good", "-LRB-"}, "fuzz");
  cavs::serve::RequestLimits limits;
  limits.max_inputs = 8;
  limits.max_depth = 20;
  limits.max_words = 40;
  limits.max_top_k = 5;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  Check(body, InputForm::kTree, vocab, limits);
  Check(body, InputForm::kChain, vocab, limits);
  return 0;
}
