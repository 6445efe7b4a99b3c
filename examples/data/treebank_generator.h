// A deterministic generator of SST-like sentiment treebanks, the project's default dataset
// (data/synthetic/), so that the Tree-LSTM examples run anywhere without the real SST.
//
// Sentences have SST-like lengths (1..50 tokens, mean about 19) and binary trees of random
// shape. Words come from a lexicon of pseudo-words in classes: neutral, positive/negative of
// three strengths, and operators (negators "not", intensifiers "very", diminishers "somewhat",
// contrastives "but"). Every node's label follows a compositional rule on the tree (RuleScore):
// an operator applies to its right sibling phrase (negation flips and damps it, intensifiers
// double it, diminishers halve it, "but" makes the phrase after it dominate its left
// neighbour), other phrases add up; scores map to labels 0-4; a few labels are then shifted by
// one (noise). Because an operator's scope is its sibling subtree, a bag of words cannot
// recover the labels but a tree model can.
//
// Determinism: only integer arithmetic and an own SplitMix64 generator (never std::
// distributions, which differ between standard libraries), so a seed gives the same bytes on
// every platform and compiler; a test regenerates the shipped files and compares them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "examples/data/sst_reader.h"

namespace cavs::examples {

// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and fully specified.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) (modulo bias below 2^-40 for the n used here). REQUIRES: n > 0.
  uint64_t Uniform(uint64_t n) { return Next() % n; }
  // True with probability per_mille / 1000.
  bool PerMille(int per_mille) { return Uniform(1000) < static_cast<uint64_t>(per_mille); }

 private:
  uint64_t state_;
};

enum class WordClass { kNeutral, kSentiment, kNegator, kIntensifier, kDiminisher, kContrast };

struct LexiconEntry {
  std::string word;
  WordClass word_class;
  int score;  // kSentiment: polarity in hundredths (+-60 weak, +-100 moderate, +-200 strong)
};

// The generator's words. Operators and a few dozen function words are English; content words
// are pseudo-words ("drelon", "skavi") so that no prior knowledge of English helps.
class Lexicon {
 public:
  // `num_content_words` pseudo-words (about 20% of them carry sentiment) from `seed`. The words
  // come in a fixed order per seed, so a smaller lexicon is a prefix of a larger one.
  static Lexicon Make(uint64_t seed, int num_content_words);
  // The fewest content words with which Make(seed, n) has a word in every class the generator
  // draws from (neutral content words and the six sentiment scores); n below it leaves a class
  // empty. Searched up to kMaxSyntheticContentWords; -1 if not reached there.
  static int MinContentWords(uint64_t seed);
  // Whether every class the generator draws from has a word.
  bool Complete() const;
  // The entry for `word`, or null (an unknown word is neutral).
  const LexiconEntry* Find(std::string_view word) const;
  const std::vector<LexiconEntry>& entries() const { return entries_; }
  // Indices into entries() of one class; for kSentiment, of one score.
  const std::vector<int>& OfClass(WordClass c, int score = 0) const;

 private:
  void Add(std::string word, WordClass c, int score);
  // The fixed English words of every lexicon.
  static Lexicon Fixed();
  // Draws one content word (a duplicate of an earlier word adds nothing).
  void AddContentWord(SplitMix64& rng);

  std::vector<LexiconEntry> entries_;
  absl::flat_hash_map<std::string, int> index_;
  absl::flat_hash_map<int64_t, std::vector<int>> by_class_;  // key: class * 1000 + score
};

// Score (hundredths, clamped to [-300, 300]) to label: <= -150 -> 0, <= -50 -> 1,
// < 50 -> 2, < 150 -> 3, else 4.
int ScoreToLabel(int score);

// The noiseless rule: the score of every vertex of `tree`, in vertex order.
// REQUIRES: ValidateSstTree(tree).ok().
std::vector<int> RuleScores(const SstTree& tree, const Lexicon& lexicon);

struct TreebankOptions {
  uint64_t seed = 1;
  int num_sentences = 100;
  int max_length = 50;       // tokens; lengths are 1..max_length
  int noise_per_mille = 30;  // chance that a node's label is shifted by one
};

// Generates `options.num_sentences` trees with labels; tokens are word positions.
std::vector<SstTree> GenerateTreebank(const Lexicon& lexicon, const TreebankOptions& options);

// The shipped dataset: data/synthetic/{train,dev,test}.txt, made by `cavs-gen-treebank` with
// these defaults. Changing any of them changes the files (and a test says so).
inline constexpr uint64_t kSyntheticSeed = 20180711;  // Cavs at USENIX ATC '18
inline constexpr int kSyntheticContentWords = 3000;
inline constexpr int kSyntheticTrain = 4000, kSyntheticDev = 500, kSyntheticTest = 500;

// Bounds of cavs-gen-treebank's flags: beyond them the generator would only use up memory
// (the pseudo-words run out near 2e8, and the lexicon loop would never end).
inline constexpr int kMaxSyntheticContentWords = 1000000;
inline constexpr int kMaxSyntheticSentences = 1000000;  // per split

// Checks cavs-gen-treebank's settings: content_words in [Lexicon::MinContentWords(seed),
// kMaxSyntheticContentWords] (fewer would leave a word class empty), every split size in
// [0, kMaxSyntheticSentences]. InvalidArgument naming the flag and the bound.
[[nodiscard]] absl::Status CheckSyntheticOptions(uint64_t seed, int content_words,
                                                 const int sizes[3]);

// One split of the synthetic treebank in SST format, one tree per line, each ending in '\n'.
// split: 0 train, 1 dev, 2 test (each split draws from its own seeded stream).
// REQUIRES: CheckSyntheticOptions(seed, content_words, ...).ok().
std::string SyntheticSplitText(uint64_t seed, int content_words, int split, int num_sentences);

}  // namespace cavs::examples
