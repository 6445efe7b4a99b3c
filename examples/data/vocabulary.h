// Vocabulary: a bijection between word strings and dense token ids, built from training
// sentences with a minimum count, saved and loaded as a text file with one token per line.
//
// Invariants: id 0 is always "<unk>" (kUnkId), and Id() maps every word not in the vocabulary
// to it, so a lookup never fails; reserved tokens follow at ids 1, 2, ... in the order given;
// the remaining words come by decreasing count, ties in byte order, so a build is deterministic.
// There is no "<pad>": a Graph vertex without a token uses token -1. A token is non-empty and
// holds no whitespace or control byte, so the file format (line n = id n-1) is unambiguous.
// Immutable after construction; safe to share between threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cavs::examples {

class Vocabulary {
 public:
  static constexpr int32_t kUnkId = 0;
  static constexpr std::string_view kUnk = "<unk>";

  // A vocabulary holding only "<unk>".
  Vocabulary();

  // Builds from word counts: "<unk>", then `reserved`, then every other word seen at least
  // `min_count` times. A word equal to "<unk>" or to a reserved token is not added twice.
  static Vocabulary FromCounts(const absl::flat_hash_map<std::string, int64_t>& counts,
                               int64_t min_count, const std::vector<std::string>& reserved = {});

  // Loads a file written by Save. Errors name the file and line: an empty or over-long line,
  // a token with whitespace or control bytes, a duplicate token, a first line other than
  // "<unk>", a missing file.
  [[nodiscard]] static absl::StatusOr<Vocabulary> Load(const std::string& path);
  // The same from text in memory in that format (a checkpoint's copy); `name` stands for the
  // file in errors.
  [[nodiscard]] static absl::StatusOr<Vocabulary> FromText(std::string_view text,
                                                           std::string_view name);
  // "<unk>", then `words` (the ids 1, 2, ...): errors as Load's, `name` standing for the file.
  [[nodiscard]] static absl::StatusOr<Vocabulary> FromWords(const std::vector<std::string>& words,
                                                            std::string_view name);
  // Save's format in memory: one token per line, in id order.
  std::string ToText() const;
  // Writes one token per line, in id order.
  [[nodiscard]] absl::Status Save(const std::string& path) const;

  // The id of `word`, or kUnkId if absent.
  int32_t Id(std::string_view word) const;
  // Whether `word` has an id of its own ("<unk>" counts).
  bool Contains(std::string_view word) const;
  // The token with id `id`. REQUIRES: 0 <= id < size().
  const std::string& Word(int32_t id) const;
  int32_t size() const { return static_cast<int32_t>(words_.size()); }

 private:
  // Adds `word` if new; returns false if it was already present.
  bool Add(std::string word);

  std::vector<std::string> words_;
  absl::flat_hash_map<std::string, int32_t> ids_;
};

// Counts words sentence by sentence, for Vocabulary::FromCounts.
class WordCounter {
 public:
  void Add(std::string_view word) { ++counts_[std::string(word)]; }
  void AddAll(const std::vector<std::string>& words) {
    for (const std::string& w : words) ++counts_[w];
  }
  const absl::flat_hash_map<std::string, int64_t>& counts() const { return counts_; }

 private:
  absl::flat_hash_map<std::string, int64_t> counts_;
};

// Whether `token` can be a vocabulary entry: non-empty, no whitespace, no control byte.
bool IsValidToken(std::string_view token);

}  // namespace cavs::examples
