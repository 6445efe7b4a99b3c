#include "examples/data/vocabulary.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "examples/data/line_reader.h"

namespace cavs::examples {

bool IsValidToken(std::string_view token) {
  if (token.empty()) return false;
  for (unsigned char c : token) {
    if (c <= 0x20 || c == 0x7f) return false;  // controls, space, DEL
  }
  return true;
}

Vocabulary::Vocabulary() { Add(std::string(kUnk)); }

bool Vocabulary::Add(std::string word) {
  auto [it, inserted] = ids_.try_emplace(word, size());
  if (inserted) words_.push_back(std::move(word));
  return inserted;
}

Vocabulary Vocabulary::FromCounts(const absl::flat_hash_map<std::string, int64_t>& counts,
                                  int64_t min_count, const std::vector<std::string>& reserved) {
  Vocabulary vocab;
  for (const std::string& r : reserved) vocab.Add(r);
  std::vector<std::pair<int64_t, const std::string*>> kept;
  for (const auto& [word, count] : counts) {
    if (count >= min_count && !vocab.Contains(word)) kept.push_back({count, &word});
  }
  std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : *a.second < *b.second;
  });
  for (const auto& [count, word] : kept) vocab.Add(*word);
  return vocab;
}

int32_t Vocabulary::Id(std::string_view word) const {
  auto it = ids_.find(AbslView(word));
  return it == ids_.end() ? kUnkId : it->second;
}

bool Vocabulary::Contains(std::string_view word) const { return ids_.contains(AbslView(word)); }

const std::string& Vocabulary::Word(int32_t id) const {
  CAVS_CHECK(id >= 0 && id < size(), "token id ", id, " out of range [0, ", size(), ")");
  return words_[id];
}

namespace {

// The vocabulary of `reader`'s lines (Load's format); `name` stands for the source in errors.
absl::StatusOr<Vocabulary> ReadTokens(LineReader& reader, std::string_view name) {
  std::vector<std::string> words;
  std::string_view line;
  while (true) {
    CAVS_ASSIGN_OR_RETURN(bool more, reader.Next(&line));
    if (!more) break;
    const int n = reader.line_number();
    if (!IsValidToken(line)) {
      return reader.Error(1, line.empty() ? "empty token"
                                          : absl::StrCat("invalid token ", QuoteForError(line),
                                                         " (whitespace or control byte)"));
    }
    if (n == 1) {
      if (line != Vocabulary::kUnk) {
        return reader.Error(1,
                            absl::StrCat("first token must be '<unk>', got ", QuoteForError(line)));
      }
      continue;
    }
    words.emplace_back(line);
  }
  if (reader.line_number() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(AbslView(name), ": empty vocabulary file"));
  }
  return Vocabulary::FromWords(words, name);
}

}  // namespace

absl::StatusOr<Vocabulary> Vocabulary::FromWords(const std::vector<std::string>& words,
                                                 std::string_view name) {
  Vocabulary vocab;
  for (size_t i = 0; i < words.size(); ++i) {
    // Line i + 2 of the file: "<unk>" is line 1 and not in `words`.
    if (!IsValidToken(words[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(AbslView(name), ":", i + 2, ":1: invalid token ", QuoteForError(words[i])));
    }
    if (!vocab.Add(words[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(AbslView(name), ":", i + 2, ":1: duplicate token ", QuoteForError(words[i]),
                       " (first on line ", vocab.Id(words[i]) + 1, ")"));
    }
  }
  return vocab;
}

absl::StatusOr<Vocabulary> Vocabulary::Load(const std::string& path) {
  CAVS_ASSIGN_OR_RETURN(LineReader reader, LineReader::OpenFile(path));
  return ReadTokens(reader, path);
}

absl::StatusOr<Vocabulary> Vocabulary::FromText(std::string_view text, std::string_view name) {
  LineReader reader = LineReader::FromString(text, name);
  return ReadTokens(reader, name);
}

std::string Vocabulary::ToText() const {
  std::string out;
  for (const std::string& w : words_) absl::StrAppend(&out, w, "\n");
  return out;
}

absl::Status Vocabulary::Save(const std::string& path) const {
  for (int32_t id = 0; id < size(); ++id) {
    if (!IsValidToken(words_[id])) {
      return absl::InvalidArgumentError(absl::StrCat("cannot save token ", id, " ",
                                                     QuoteForError(words_[id]), " to '", path,
                                                     "': whitespace or control byte"));
    }
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "wb"),
                                                       &std::fclose);
  if (file == nullptr) return absl::NotFoundError(absl::StrCat("cannot write '", path, "'"));
  for (const std::string& w : words_) {
    if (std::fwrite(w.data(), 1, w.size(), file.get()) != w.size() ||
        std::fputc('\n', file.get()) == EOF) {
      return absl::DataLossError(absl::StrCat("write error on '", path, "'"));
    }
  }
  if (std::fclose(file.release()) != 0) {
    return absl::DataLossError(absl::StrCat("write error on '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace cavs::examples
