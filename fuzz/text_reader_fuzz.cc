// libFuzzer target: the text (PTB) reader (examples/data/text_reader.h), on a file's bytes, the
// way cavs-train reads a language model's training file: the format sniffed from the reader
// (LineReader::PeekNonBlank), the words read on from it, a vocabulary built from them, then the
// same bytes read as sentences with that vocabulary. Any input must give an error
// "fuzz:line:column: ..." or sentences whose chains hold what the words say (checked against
// the vocabulary here, independently of the reader); anything else aborts.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "examples/data/line_reader.h"
#include "examples/data/text_reader.h"
#include "examples/data/vocabulary.h"
#include "scheduler/graph.h"

namespace {

using cavs::examples::LineReader;

constexpr size_t kMaxLine = 1 << 12;

void CheckError(const absl::Status& s) {
  CAVS_CHECK(s.message().find("fuzz:") == 0, "error without a location: ", s.message());
  CAVS_CHECK(s.message().find('\n') == std::string_view::npos, "error of several lines");
}

// A word as the reader must split them: not empty, no space, tab or control byte.
void CheckWord(const std::string& w) {
  CAVS_CHECK(!w.empty(), "empty word");
  for (unsigned char c : w) CAVS_CHECK(c >= 0x20 && c != 0x7f && c != ' ', "byte ", int{c});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cavs::examples;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  LineReader reader = LineReader::FromString(text, "fuzz", kMaxLine);
  absl::StatusOr<std::optional<char>> first = reader.PeekNonBlank();
  if (!first.ok()) {
    CheckError(first.status());
    return 0;
  }
  absl::StatusOr<std::vector<std::vector<std::string>>> words = ReadTextWords(reader);
  if (!words.ok()) {
    CheckError(words.status());
    return 0;
  }
  CAVS_CHECK(first->has_value() == !words->empty(), "sniffed byte and sentences disagree");
  if (first->has_value()) CAVS_CHECK(**first == (*words)[0][0][0], "sniffed the wrong byte");

  WordCounter counter;
  for (const auto& sentence : *words) counter.AddAll(sentence);
  const Vocabulary vocab = Vocabulary::FromCounts(
      counter.counts(), 2, {std::string(kBeginToken), std::string(kEndToken)});
  TextReadOptions options;
  options.max_line_bytes = kMaxLine;
  options.add_begin_token = size % 2 == 0;
  absl::StatusOr<std::vector<TextSentence>> sentences =
      ReadTextString(text, vocab, options, "fuzz");
  CAVS_CHECK(sentences.ok(),
             "read the words but not the sentences: ", sentences.status().ToString());
  CAVS_CHECK(sentences->size() == words->size(), "sentence count");
  const int offset = options.add_begin_token ? 1 : 0;
  for (size_t s = 0; s < sentences->size(); ++s) {
    const TextSentence& got = (*sentences)[s];
    const std::vector<std::string>& want = (*words)[s];
    CAVS_CHECK(got.words == want, "sentence ", s, ": words differ");
    const cavs::scheduler::Graph& g = got.graph;
    const int n = static_cast<int>(want.size()) + offset;
    CAVS_CHECK(g.num_vertices() == n && static_cast<int>(g.tokens.size()) == n &&
                   static_cast<int>(g.labels.size()) == n,
               "sentence ", s, ": ", n, " vertices expected");
    const absl::Status valid = cavs::scheduler::ValidateGraph(g, static_cast<int>(s));
    CAVS_CHECK(valid.ok(), valid.message());
    for (int v = 0; v < n; ++v) {
      CAVS_CHECK(g.child(v, 0) == v - 1 && g.num_children(v) == (v == 0 ? 0 : 1), "not a chain");
      const int32_t token = v < offset ? vocab.Id(kBeginToken) : vocab.Id(want[v - offset]);
      const int32_t label = v + 1 < n ? vocab.Id(want[v + 1 - offset]) : vocab.Id(kEndToken);
      CAVS_CHECK(g.tokens[v] == token && g.labels[v] == label, "sentence ", s, " vertex ", v);
    }
    for (const std::string& w : want) CheckWord(w);
  }
  return 0;
}
