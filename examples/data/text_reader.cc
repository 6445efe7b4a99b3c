#include "examples/data/text_reader.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace cavs::examples {
namespace {

// Splits the current line of `reader` at spaces and tabs; a control byte is an error.
absl::StatusOr<std::vector<std::string_view>> SplitWords(const LineReader& reader,
                                                         std::string_view line) {
  std::vector<std::string_view> words;
  size_t start = 0;
  for (size_t i = 0; i <= line.size(); ++i) {
    const unsigned char c = i < line.size() ? line[i] : ' ';
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      return reader.Error(i + 1,
                          absl::StrCat("invalid control byte ", QuoteForError(line.substr(i, 1))));
    }
    if (c != ' ' && c != '\t') continue;
    if (i > start) words.push_back(line.substr(start, i - start));
    start = i + 1;
  }
  return words;
}

// REQUIRES: `words` or add_begin_token non-empty.
template <typename Word>
TextSentence MakeSentence(const std::vector<Word>& words, const Vocabulary& vocab,
                          bool add_begin_token) {
  TextSentence s;
  const int offset = add_begin_token ? 1 : 0;
  const int n = static_cast<int>(words.size()) + offset;
  s.graph = scheduler::Graph::Chain(n);
  s.graph.tokens.resize(n);
  s.graph.labels.resize(n);
  if (add_begin_token) s.graph.tokens[0] = vocab.Id(kBeginToken);
  for (size_t i = 0; i < words.size(); ++i) {
    s.words.emplace_back(words[i]);
    const int32_t id = vocab.Id(words[i]);
    s.graph.tokens[i + offset] = id;
    if (i + offset > 0) s.graph.labels[i + offset - 1] = id;
  }
  s.graph.labels[n - 1] = vocab.Id(kEndToken);
  return s;
}

// Calls `visit(words)` for the words of every non-blank line.
template <typename Visit>
absl::Status ForEachSentence(LineReader& reader, Visit visit) {
  std::string_view line;
  while (true) {
    CAVS_ASSIGN_OR_RETURN(const bool more, reader.Next(&line));
    if (!more) return absl::OkStatus();
    CAVS_ASSIGN_OR_RETURN(const std::vector<std::string_view> words, SplitWords(reader, line));
    if (!words.empty()) visit(words);
  }
}

absl::StatusOr<std::vector<TextSentence>> ReadSentences(LineReader& reader, const Vocabulary& vocab,
                                                        const TextReadOptions& options) {
  CAVS_RETURN_IF_ERROR(
      CheckSpecialTokens(vocab, options.add_begin_token, absl::StrCat("'", reader.name(), "'")));
  std::vector<TextSentence> sentences;
  CAVS_RETURN_IF_ERROR(ForEachSentence(reader, [&](const std::vector<std::string_view>& words) {
    sentences.push_back(MakeSentence(words, vocab, options.add_begin_token));
  }));
  return sentences;
}

}  // namespace

absl::StatusOr<std::vector<std::vector<std::string>>> ReadTextWords(const std::string& path,
                                                                    size_t max_line_bytes) {
  CAVS_ASSIGN_OR_RETURN(LineReader reader, LineReader::OpenFile(path, max_line_bytes));
  return ReadTextWords(reader);
}

absl::StatusOr<std::vector<std::vector<std::string>>> ReadTextWords(LineReader& reader) {
  std::vector<std::vector<std::string>> sentences;
  CAVS_RETURN_IF_ERROR(ForEachSentence(reader, [&](const std::vector<std::string_view>& words) {
    sentences.emplace_back(words.begin(), words.end());
  }));
  return sentences;
}

absl::Status CheckSpecialTokens(const Vocabulary& vocab, bool add_begin_token,
                                const std::string& what) {
  for (std::string_view special : {kEndToken, kBeginToken}) {
    if (special == kBeginToken && !add_begin_token) continue;
    if (!vocab.Contains(special)) {
      return absl::InvalidArgumentError(
          absl::StrCat("vocabulary for ", what, " lacks ", AbslView(special)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Vocabulary> BuildTextVocabulary(const std::string& path, int min_count) {
  CAVS_ASSIGN_OR_RETURN(const auto sentences, ReadTextWords(path));
  return BuildTextVocabularyFromWords(sentences, min_count);
}

Vocabulary BuildTextVocabularyFromWords(const std::vector<std::vector<std::string>>& sentences,
                                        int min_count) {
  WordCounter counter;
  for (const auto& words : sentences) counter.AddAll(words);
  return Vocabulary::FromCounts(counter.counts(), min_count,
                                {std::string(kBeginToken), std::string(kEndToken)});
}

absl::StatusOr<TextSentence> MakeTextSentence(const std::vector<std::string>& words,
                                              const Vocabulary& vocabulary, bool add_begin_token) {
  CAVS_RETURN_IF_ERROR(CheckSpecialTokens(vocabulary, add_begin_token, "a sentence"));
  if (words.empty() && !add_begin_token) {
    return absl::InvalidArgumentError(
        "a sentence without words and without a begin token has no vertex");
  }
  return MakeSentence(words, vocabulary, add_begin_token);
}

scheduler::Graph SentenceChain(const std::vector<int32_t>& ids, int32_t begin, int32_t end) {
  scheduler::Graph g = scheduler::Graph::Chain(static_cast<int>(ids.size()) + 1);
  g.tokens.push_back(begin);
  g.tokens.insert(g.tokens.end(), ids.begin(), ids.end());
  g.labels = ids;
  g.labels.push_back(end);
  return g;
}

absl::StatusOr<std::vector<TextSentence>> ReadTextFile(const std::string& path,
                                                       const Vocabulary& vocabulary,
                                                       const TextReadOptions& options) {
  CAVS_ASSIGN_OR_RETURN(LineReader reader, LineReader::OpenFile(path, options.max_line_bytes));
  return ReadSentences(reader, vocabulary, options);
}

absl::StatusOr<std::vector<TextSentence>> ReadTextString(std::string_view text,
                                                         const Vocabulary& vocabulary,
                                                         const TextReadOptions& options,
                                                         std::string_view name) {
  LineReader reader = LineReader::FromString(text, name, options.max_line_bytes);
  return ReadSentences(reader, vocabulary, options);
}

absl::StatusOr<TextDataset> LoadTextDataset(const std::string& train_path,
                                            const std::string& valid_path,
                                            const std::string& test_path, int min_count) {
  TextDataset data;
  CAVS_ASSIGN_OR_RETURN(data.vocabulary, BuildTextVocabulary(train_path, min_count));
  CAVS_ASSIGN_OR_RETURN(data.train, ReadTextFile(train_path, data.vocabulary));
  if (data.train.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("no sentences in '", train_path, "'"));
  }
  if (!valid_path.empty()) {
    CAVS_ASSIGN_OR_RETURN(data.valid, ReadTextFile(valid_path, data.vocabulary));
  }
  if (!test_path.empty()) {
    CAVS_ASSIGN_OR_RETURN(data.test, ReadTextFile(test_path, data.vocabulary));
  }
  return data;
}

}  // namespace cavs::examples
