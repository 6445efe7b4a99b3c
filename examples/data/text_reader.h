// Text reader for language modelling: one sentence per line (PTB style, words separated by
// spaces or tabs, rare words already replaced by "<unk>"), each sentence a chain Graph.
//
// A sentence w1 .. wn becomes n + 1 vertices with Graph::Chain structure (vertex t has child
// t-1 in slot 0; vertex 0 has none): vertex 0 reads "<s>", vertex t reads w_t, and the label of
// vertex t is the id of the word that follows it, "</s>" for the last, so every word and the
// end of the sentence are predicted (with add_begin_token = false the chain is w1 .. wn and w1
// is never predicted). Blank lines (only spaces/tabs) are skipped. A control byte (NUL, ...) or
// an over-long line is an InvalidArgument error "file:line:column: ...". The vocabulary comes
// from the training file: "<unk>" = 0, "<s>" = 1, "</s>" = 2, then words by count.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "examples/data/line_reader.h"
#include "examples/data/vocabulary.h"
#include "scheduler/graph.h"

namespace cavs::examples {

inline constexpr std::string_view kBeginToken = "<s>";
inline constexpr std::string_view kEndToken = "</s>";

// One sentence: its chain (tokens and labels set) and its words (without <s> and </s>).
struct TextSentence {
  scheduler::Graph graph;
  std::vector<std::string> words;
};

struct TextReadOptions {
  size_t max_line_bytes = kDefaultMaxLineBytes;
  // Prepend "<s>" so that the first word is predicted too.
  bool add_begin_token = true;
};

// The words of every non-blank line, validated as ReadTextFile does.
[[nodiscard]] absl::StatusOr<std::vector<std::vector<std::string>>> ReadTextWords(
    const std::string& path, size_t max_line_bytes = kDefaultMaxLineBytes);
// The same for the remaining lines of `reader` (opened by the caller, say to sniff its format
// first with LineReader::PeekNonBlank).
[[nodiscard]] absl::StatusOr<std::vector<std::vector<std::string>>> ReadTextWords(
    LineReader& reader);

// "<unk>", "<s>", "</s>", then the words of `path` seen at least `min_count` times.
[[nodiscard]] absl::StatusOr<Vocabulary> BuildTextVocabulary(const std::string& path,
                                                             int min_count = 1);
// That `vocab` holds the tokens a chain reads ("</s>", and "<s>" with add_begin_token): an
// InvalidArgument "vocabulary for <what> lacks <token>" if not.
[[nodiscard]] absl::Status CheckSpecialTokens(const Vocabulary& vocab, bool add_begin_token,
                                              const std::string& what);
// The same from sentences in memory (ReadTextWords', or words from any other source).
Vocabulary BuildTextVocabularyFromWords(const std::vector<std::vector<std::string>>& sentences,
                                        int min_count = 1);

// The chain of one sentence, as ReadTextFile makes it from a line holding `words` (given
// without "<s>" and "</s>"). Errors: `vocabulary` lacks "</s>" (or "<s>" with
// add_begin_token); no words and no begin token (a chain needs a vertex).
[[nodiscard]] absl::StatusOr<TextSentence> MakeTextSentence(const std::vector<std::string>& words,
                                                            const Vocabulary& vocabulary,
                                                            bool add_begin_token = true);

// A language model's chain for a sentence of token ids: vertex 0 reads `begin`, vertex t reads
// ids[t-1], and every vertex is labelled with the token that follows (`end` after the last
// word). What cavs-train trains and evaluates on, and what cavs-serve scores.
scheduler::Graph SentenceChain(const std::vector<int32_t>& ids, int32_t begin, int32_t end);

// Reads every sentence of a file with token ids from `vocabulary`, which must hold "</s>"
// (and "<s>" when add_begin_token): an error otherwise.
[[nodiscard]] absl::StatusOr<std::vector<TextSentence>> ReadTextFile(
    const std::string& path, const Vocabulary& vocabulary, const TextReadOptions& options = {});
// Same for text in memory; `name` stands for the file in error messages.
[[nodiscard]] absl::StatusOr<std::vector<TextSentence>> ReadTextString(
    std::string_view text, const Vocabulary& vocabulary, const TextReadOptions& options = {},
    std::string_view name = "<string>");

// Train/valid/test splits sharing one vocabulary built from the training file.
struct TextDataset {
  Vocabulary vocabulary;
  std::vector<TextSentence> train, valid, test;
};
// An empty valid or test path leaves that split empty; an empty training file is an error.
[[nodiscard]] absl::StatusOr<TextDataset> LoadTextDataset(const std::string& train_path,
                                                          const std::string& valid_path,
                                                          const std::string& test_path = "",
                                                          int min_count = 1);

}  // namespace cavs::examples
