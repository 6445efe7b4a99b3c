// A deterministic fuzz smoke test of the SST reader for the ordinary (gcc) test suite: tens of
// thousands of mutated valid trees and random byte strings. Every input must give either an
// error "fuzz:line:column: ..." or trees that pass ValidateSstTree and survive a format/parse
// round trip. The libFuzzer target fuzz/sst_reader_fuzz.cc checks the same with
// coverage guidance where clang is available.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "examples/data/sst_reader.h"
#include "examples/data/treebank_generator.h"
#include "tests/examples/data/data_test_util.h"

namespace cavs::examples {
namespace {

using ::cavs::examples::testing::Msg;

// Whether `message` starts with "fuzz:<line>:<column>: ".
bool HasLocation(const std::string& message) {
  size_t i = 5;
  if (message.compare(0, i, "fuzz:") != 0) return false;
  for (int field = 0; field < 2; ++field) {
    const size_t start = i;
    while (i < message.size() && message[i] >= '0' && message[i] <= '9') ++i;
    if (i == start || i >= message.size() || message[i] != ':') return false;
    ++i;
  }
  return i < message.size() && message[i] == ' ';
}

// Runs the reader on `input`; returns "" if all is well, else what went wrong. Sets *parsed
// (if given) to whether the input was accepted.
std::string Check(const std::string& input, const SstReadOptions& options = {},
                  bool* parsed = nullptr) {
  absl::StatusOr<std::vector<SstTree>> trees = ReadSstString(input, "fuzz", options);
  if (parsed != nullptr) *parsed = trees.ok();
  if (!trees.ok()) {
    return HasLocation(Msg(trees.status())) ? "" : "error without location: " + Msg(trees.status());
  }
  SstReadOptions uncapped;
  uncapped.max_depth = 1 << 30;
  uncapped.max_line_bytes = size_t{1} << 30;
  for (const SstTree& t : *trees) {
    const absl::Status valid = ValidateSstTree(t);
    if (!valid.ok()) return "invalid tree: " + Msg(valid);
    absl::StatusOr<SstTree> again = ParseSstTree(FormatSstTree(t), uncapped);
    if (!again.ok()) return "round trip failed: " + Msg(again.status());
    if (again->words != t.words || again->graph.labels != t.graph.labels ||
        again->graph.child_ids != t.graph.child_ids) {
      return "round trip changed the tree";
    }
  }
  return "";
}

std::vector<std::string> Seeds() {
  std::vector<std::string> seeds = {
      "(3 (2 It) (4 (2 's) (4 (3 very) (4 good))))",
      "(1 (2 a) (3 b) (4 c) (0 d))",
      "(3 (1 (4 good)))",
      "(2 (2 -LRB-) (2 (2 caf\xc3\xa9) (2 -RRB-)))",
      "(2 a)\n\n(3 (2 b) (4 c))\r\n",
  };
  const Lexicon lex = Lexicon::Make(3, 200);
  TreebankOptions options;
  options.num_sentences = 40;
  for (const SstTree& t : GenerateTreebank(lex, options)) seeds.push_back(FormatSstTree(t));
  return seeds;
}

// One random edit of `s`: insert, delete, overwrite, duplicate or splice bytes, with a bias
// towards the bytes that matter to the grammar.
void Mutate(std::string& s, const std::vector<std::string>& seeds, SplitMix64& rng) {
  static constexpr char kInteresting[] =
      "()()  012345-9\n\r\t\0\x7f\xff"
      "x";
  const size_t pos = s.empty() ? 0 : rng.Uniform(s.size() + 1);
  const auto byte = [&] {
    return rng.Uniform(2) == 0 ? kInteresting[rng.Uniform(sizeof(kInteresting) - 1)]
                               : static_cast<char>(rng.Uniform(256));
  };
  switch (rng.Uniform(6)) {
    case 0:
      s.insert(pos, 1, byte());
      break;
    case 1:
      s.erase(pos, 1 + rng.Uniform(8));
      break;
    case 2:
      if (pos < s.size()) s[pos] = byte();
      break;
    case 3:
      s.insert(pos, rng.Uniform(40), rng.Uniform(2) == 0 ? '(' : ')');
      break;
    case 4: {
      const size_t from = s.empty() ? 0 : rng.Uniform(s.size());
      s.insert(pos, s.substr(from, rng.Uniform(32)));
      break;
    }
    default: {
      const std::string& other = seeds[rng.Uniform(seeds.size())];
      const size_t from = rng.Uniform(other.size());
      s.insert(pos, other.substr(from, rng.Uniform(64)));
    }
  }
}

TEST(SstReaderFuzzTest, MutatedTreesNeverCrash) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> seeds = Seeds();
  SplitMix64 rng(42);
  SstReadOptions options;
  options.max_depth = 64;
  int ok = 0, failures = 0;
  constexpr int kRuns = 200000;
  for (int i = 0; i < kRuns; ++i) {
    std::string input = seeds[rng.Uniform(seeds.size())];
    for (int m = 1 + static_cast<int>(rng.Uniform(6)); m > 0; --m) Mutate(input, seeds, rng);
    bool parsed = false;
    const std::string problem = Check(input, options, &parsed);
    if (!problem.empty() && ++failures <= 5) ADD_FAILURE() << problem << " on '" << input << "'";
    ok += parsed;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%d mutated inputs, %d parsed OK, %.2f s\n", kRuns, ok, seconds);
  EXPECT_EQ(failures, 0);
  EXPECT_GT(ok, kRuns / 50);  // the mutations keep some inputs valid, so both paths run
}

TEST(SstReaderFuzzTest, RandomBytesNeverCrash) {
  SplitMix64 rng(7);
  int failures = 0;
  for (int i = 0; i < 50000; ++i) {
    std::string input(rng.Uniform(300), '\0');
    const int alphabet = rng.Uniform(2) == 0 ? 256 : 8;  // raw bytes, or mostly grammar bytes
    for (char& c : input)
      c = alphabet == 256 ? static_cast<char>(rng.Uniform(256)) : "(2 a)\n\0 "[rng.Uniform(8)];
    const std::string problem = Check(input);
    if (!problem.empty() && ++failures <= 5) ADD_FAILURE() << problem;
  }
  EXPECT_EQ(failures, 0);
}

TEST(SstReaderFuzzTest, PathologicalInputs) {
  SstReadOptions unlimited_depth;
  unlimited_depth.max_depth = 1 << 30;
  const std::vector<std::string> inputs = {
      std::string(100000, '('),
      std::string(100000, ')'),
      "(2 " + std::string(900000, 'x') + ")",   // a huge token, under the line cap
      "(2 " + std::string(2 << 20, 'x') + ")",  // over the line cap
      std::string(1 << 20, '\0'),
      std::string(1 << 20, '\n'),
  };
  for (const std::string& input : inputs) {
    EXPECT_EQ(Check(input), "");
    EXPECT_EQ(Check(input, unlimited_depth), "");
  }
  std::string opens;
  for (int i = 0; i < 100000; ++i) opens += "(2 ";
  EXPECT_EQ(Msg(ReadSstString(opens, "fuzz").status()),
            "fuzz:1:3001: tree nested deeper than 1000");
  EXPECT_EQ(Msg(ReadSstString(opens, "fuzz", unlimited_depth).status()),
            "fuzz:1:300001: unbalanced brackets: end of line with 100000 '(' not closed (the "
            "innermost at column 299998)");
  EXPECT_TRUE(ReadSstString("(2 " + std::string(900000, 'x') + ")").ok());
}

}  // namespace
}  // namespace cavs::examples
