// SST reader: parses Stanford Sentiment Treebank bracketed trees, one per line,
//   (3 (2 It) (4 (2 's) (4 (3 very) (4 good))))
// into binary cavs::scheduler::Graph trees for the Tree-LSTM examples.
//
// Output invariants (checked by ValidateSstTree, which the tests and the fuzzer run on every
// tree): vertex ids are in post-order (children before parents, left subtree before right), so
// the root is the last vertex; every vertex has 0 or 2 children, left child in slot 0 and right
// in slot 1; every vertex has a label in 0..4; leaves carry a token id >= 0 and internal
// vertices token -1; the k-th leaf (in id order) is words[k], the k-th word of the sentence.
//
// Choices (see docs/data.md): a unary chain (L1 (L2 ... x)) collapses into its lowest vertex
// with the UPPER label L1; an n-ary node (L c1 c2 ... cn) is binarized right-branching as
// (L c1 (L c2 (... (L cn-1 cn)))), the new vertices labelled like their parent. Tokens are
// kept verbatim (-LRB- stays "-LRB-"); any byte >= 0x80 may appear in a token. Blank lines,
// and lines of only spaces/tabs, are skipped. Malformed input is an InvalidArgument error
// "file:line:column: what" (1-based, columns in bytes), never a crash: the parser is iterative
// and caps line length and nesting depth.
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

inline constexpr int kSstNumClasses = 5;

// One sentence: its binary tree and its words (the leaves, left to right).
struct SstTree {
  scheduler::Graph graph;
  std::vector<std::string> words;
};

struct SstReadOptions {
  // A longer line is an error (it is not read into memory whole).
  size_t max_line_bytes = kDefaultMaxLineBytes;
  // Bracket nesting deeper than this is an error. Real SST trees nest at most 30 deep.
  int max_depth = 1000;
  // If set, leaf tokens are vocabulary->Id(word) ("<unk>" = 0 for unknown words); if null,
  // a leaf's token is its word's position in `words` (0, 1, ...), to be mapped later with
  // AssignTokenIds once a vocabulary is built from these very trees.
  const Vocabulary* vocabulary = nullptr;
};

// Reads every tree of a file. Errors: NotFound for a missing file, InvalidArgument
// "path:line:column: ..." for the first malformed line.
[[nodiscard]] absl::StatusOr<std::vector<SstTree>> ReadSstFile(const std::string& path,
                                                               const SstReadOptions& options = {});
// Reads every remaining tree of `reader` (one opened by the caller, say to sniff its format
// first with LineReader::PeekNonBlank). options.max_line_bytes is the reader's own.
[[nodiscard]] absl::StatusOr<std::vector<SstTree>> ReadSstLines(LineReader& reader,
                                                                const SstReadOptions& options = {});
// Same for text in memory; `name` stands for the file in error messages.
[[nodiscard]] absl::StatusOr<std::vector<SstTree>> ReadSstString(
    std::string_view text, std::string_view name = "<string>", const SstReadOptions& options = {});
// Parses exactly one tree from `line` (no newline), reporting errors as "name:line_number:col".
[[nodiscard]] absl::StatusOr<SstTree> ParseSstTree(std::string_view line,
                                                   const SstReadOptions& options = {},
                                                   std::string_view name = "<string>",
                                                   int line_number = 1);

// Sets every leaf token to vocabulary.Id(word) (leaves in id order match `words`).
void AssignTokenIds(const Vocabulary& vocabulary, std::vector<SstTree>* trees);
// Adds every word of `trees` to `counter`.
void CountWords(const std::vector<SstTree>& trees, WordCounter* counter);

// Checks the output invariants above; an error names the vertex. Iterative.
[[nodiscard]] absl::Status ValidateSstTree(const SstTree& tree);

// Writes `tree` back in SST format (one line, no newline): "(3 (2 a) (3 b))". Iterative.
// REQUIRES: ValidateSstTree(tree).ok().
std::string FormatSstTree(const SstTree& tree);

// Train/dev/test splits sharing one vocabulary built from the training words.
struct SstDataset {
  Vocabulary vocabulary;
  std::vector<SstTree> train, dev, test;
};
// Reads the splits (an empty `test_path` leaves `test` empty), builds the vocabulary from the
// training words seen at least `min_count` times and assigns token ids everywhere. An empty
// training file is an error.
[[nodiscard]] absl::StatusOr<SstDataset> LoadSstDataset(const std::string& train_path,
                                                        const std::string& dev_path,
                                                        const std::string& test_path = "",
                                                        int min_count = 1);

}  // namespace cavs::examples
