#include "examples/data/treebank_generator.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace cavs::examples {
namespace {

using scheduler::Graph;

constexpr int kMaxScore = 300;
constexpr std::array<int, 3> kStrengths = {60, 100, 200};

constexpr std::array<std::string_view, 40> kFunctionWords = {
    "the",  "a",    "an",   "of",    "and",   "to",   "in",    "is",    "it",  "that",
    "this", "with", "as",   "for",   "its",   "film", "movie", "story", "one", "by",
    "on",   "his",  "her",  "about", "from",  "at",   "be",    "are",   "has", "was",
    "who",  "more", "than", "like",  "their", "some", "what",  "there", "you", "we"};
constexpr std::array<std::string_view, 4> kNegators = {"not", "never", "n't", "no"};
constexpr std::array<std::string_view, 6> kIntensifiers = {"very",  "extremely", "really",
                                                           "truly", "so",        "incredibly"};
constexpr std::array<std::string_view, 5> kDiminishers = {"somewhat", "slightly", "rather",
                                                          "fairly", "mildly"};
constexpr std::array<std::string_view, 2> kContrasts = {"but", "yet"};

constexpr std::array<std::string_view, 30> kOnsets = {
    "b", "bl", "br", "d", "dr", "f",  "fl", "fr", "g",  "gl", "gr", "h", "j",  "k", "kl",
    "l", "m",  "n",  "p", "pl", "pr", "r",  "s",  "sk", "sl", "st", "t", "tr", "v", "z"};
constexpr std::array<std::string_view, 9> kVowels = {"a",  "e",  "i",  "o", "u",
                                                     "ai", "ea", "oa", "ou"};
constexpr std::array<std::string_view, 10> kCodas = {"",  "",  "n",  "r",  "l",
                                                     "s", "m", "nd", "rt", "x"};

template <size_t N>
std::string_view Pick(const std::array<std::string_view, N>& a, SplitMix64& rng) {
  return a[rng.Uniform(N)];
}

std::string PseudoWord(SplitMix64& rng) {
  std::string word;
  const int syllables = 2 + static_cast<int>(rng.Uniform(2));
  for (int s = 0; s < syllables; ++s) {
    word += Pick(kOnsets, rng);
    word += Pick(kVowels, rng);
  }
  word += Pick(kCodas, rng);
  return word;
}

// An index in [0, n) skewed towards 0 (product of two uniforms), so that words have
// Zipf-like frequencies: a few frequent, many rare.
int Skewed(SplitMix64& rng, size_t n) {
  return static_cast<int>(rng.Uniform(n) * rng.Uniform(n) / n);
}

int64_t ClassKey(WordClass c, int score) { return static_cast<int64_t>(c) * 1000 + score; }

}  // namespace

void Lexicon::Add(std::string word, WordClass c, int score) {
  const int id = static_cast<int>(entries_.size());
  if (!index_.try_emplace(word, id).second) return;
  by_class_[ClassKey(c, score)].push_back(id);
  entries_.push_back({std::move(word), c, score});
}

Lexicon Lexicon::Fixed() {
  Lexicon lex;
  for (auto w : kFunctionWords) lex.Add(std::string(w), WordClass::kNeutral, 0);
  for (auto w : kNegators) lex.Add(std::string(w), WordClass::kNegator, 0);
  for (auto w : kIntensifiers) lex.Add(std::string(w), WordClass::kIntensifier, 0);
  for (auto w : kDiminishers) lex.Add(std::string(w), WordClass::kDiminisher, 0);
  for (auto w : kContrasts) lex.Add(std::string(w), WordClass::kContrast, 0);
  return lex;
}

void Lexicon::AddContentWord(SplitMix64& rng) {
  std::string word = PseudoWord(rng);
  const uint64_t r = rng.Uniform(100);
  if (r < 80) {
    Add(std::move(word), WordClass::kNeutral, 0);
  } else {  // 20% carry sentiment: either polarity, three strengths
    const int strength = kStrengths[r % 3];
    Add(std::move(word), WordClass::kSentiment, r % 2 == 0 ? strength : -strength);
  }
}

Lexicon Lexicon::Make(uint64_t seed, int num_content_words) {
  Lexicon lex = Fixed();
  const size_t target = lex.entries_.size() + num_content_words;
  SplitMix64 rng(seed);
  while (lex.entries_.size() < target) lex.AddContentWord(rng);
  return lex;
}

int Lexicon::MinContentWords(uint64_t seed) {
  // The same draws as Make, stopped as soon as every class has a word.
  Lexicon lex = Fixed();
  const size_t fixed = lex.entries_.size();
  SplitMix64 rng(seed);
  while (!lex.Complete()) {
    if (lex.entries_.size() - fixed >= static_cast<size_t>(kMaxSyntheticContentWords)) return -1;
    lex.AddContentWord(rng);
  }
  return static_cast<int>(lex.entries_.size() - fixed);
}

bool Lexicon::Complete() const {
  // PickWord draws plain words from the neutral entries after the function words.
  if (OfClass(WordClass::kNeutral).size() <= kFunctionWords.size()) return false;
  for (int strength : kStrengths) {
    if (OfClass(WordClass::kSentiment, strength).empty() ||
        OfClass(WordClass::kSentiment, -strength).empty()) {
      return false;
    }
  }
  return true;
}

absl::Status CheckSyntheticOptions(uint64_t seed, int content_words, const int sizes[3]) {
  const char* flags[3] = {"--train", "--dev", "--test"};
  for (int split = 0; split < 3; ++split) {
    if (sizes[split] < 0 || sizes[split] > kMaxSyntheticSentences) {
      return absl::InvalidArgumentError(absl::StrCat(flags[split], "=", sizes[split],
                                                     ": the number of trees must be in [0, ",
                                                     kMaxSyntheticSentences, "]"));
    }
  }
  if (content_words < 1 || content_words > kMaxSyntheticContentWords) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--content_words=", content_words, ": must be in [1, ", kMaxSyntheticContentWords, "]"));
  }
  const int min = Lexicon::MinContentWords(seed);
  if (min < 0) {  // no seed tried has come near; a word class would stay empty
    return absl::InvalidArgumentError(
        absl::StrCat("--seed=", seed, ": gives no complete lexicon; try another seed"));
  }
  if (content_words < min) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--content_words=", content_words, ": too few for seed ", seed,
        " to give every word class (neutral, and each sentiment polarity and strength) a word; ",
        "use at least ", min));
  }
  return absl::OkStatus();
}

const LexiconEntry* Lexicon::Find(std::string_view word) const {
  auto it = index_.find(AbslView(word));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

const std::vector<int>& Lexicon::OfClass(WordClass c, int score) const {
  static const std::vector<int> kNone;
  auto it = by_class_.find(ClassKey(c, score));
  return it == by_class_.end() ? kNone : it->second;
}

int ScoreToLabel(int score) {
  if (score <= -150) return 0;
  if (score <= -50) return 1;
  if (score < 50) return 2;
  if (score < 150) return 3;
  return 4;
}

namespace {

// A phrase under the rule: its score, the operator it is (leaves only), and whether it is a
// "but X" phrase that dominates its left neighbour.
struct RuleValue {
  int score = 0;
  WordClass op = WordClass::kNeutral;
  bool contrast = false;
};

bool IsOperator(WordClass c) { return c != WordClass::kNeutral && c != WordClass::kSentiment; }

RuleValue LeafValue(const LexiconEntry* entry) {
  if (entry == nullptr) return {};
  if (IsOperator(entry->word_class)) return {0, entry->word_class, false};
  return {entry->score, WordClass::kNeutral, false};
}

RuleValue Combine(const RuleValue& l, const RuleValue& r) {
  RuleValue out;
  if (IsOperator(r.op)) {
    out.score = IsOperator(l.op) ? 0 : l.score;  // an operator with nothing to its right
  } else if (l.op == WordClass::kNegator) {
    out.score = -r.score * 4 / 5;  // "not great" is bad, "not bad" is only mildly good
  } else if (l.op == WordClass::kIntensifier) {
    out.score = r.score * 2;
  } else if (l.op == WordClass::kDiminisher) {
    out.score = r.score / 2;
  } else if (l.op == WordClass::kContrast) {
    out.score = r.score;
    out.contrast = true;
  } else if (r.contrast) {
    out.score = l.score / 4 + r.score;  // "X but Y": Y dominates
  } else {
    out.score = l.score + r.score;
  }
  out.score = std::clamp(out.score, -kMaxScore, kMaxScore);
  return out;
}

}  // namespace

std::vector<int> RuleScores(const SstTree& tree, const Lexicon& lexicon) {
  const Graph& g = tree.graph;
  std::vector<RuleValue> values(g.num_vertices());
  std::vector<int> scores(g.num_vertices());
  size_t k = 0;
  for (int v = 0; v < g.num_vertices(); ++v) {
    if (g.num_children(v) == 0) {
      CAVS_CHECK(k < tree.words.size(), "tree has more leaves than words");
      values[v] = LeafValue(lexicon.Find(tree.words[k++]));
    } else {
      values[v] = Combine(values[g.child(v, 0)], values[g.child(v, 1)]);
    }
    scores[v] = values[v].score;
  }
  return scores;
}

namespace {

// 1..max_length tokens: 1 + three uniforms on [0, 11] (mean 17.5), plus a long tail.
int SentenceLength(SplitMix64& rng, int max_length) {
  int n = 1 + static_cast<int>(rng.Uniform(12) + rng.Uniform(12) + rng.Uniform(12));
  if (rng.Uniform(4) == 0) n += static_cast<int>(rng.Uniform(17));
  return std::min(n, max_length);
}

// Appends a random binary tree over `n` leaves to `tree` in post-order; returns its root.
// Splits lean right-branching, as English parses do. Recursion depth is at most n (<= 50s).
int32_t AddRandomShape(int n, SplitMix64& rng, SstTree& tree) {
  if (n == 1) {
    const auto leaf = static_cast<int32_t>(tree.words.size());
    tree.words.emplace_back();
    return tree.graph.AddVertex({}, leaf, 2);
  }
  const uint64_t r = rng.Uniform(100);
  const int left = r < 40 ? 1 : r < 50 ? n - 1 : 1 + static_cast<int>(rng.Uniform(n - 1));
  const int32_t l = AddRandomShape(left, rng, tree);
  const int32_t rr = AddRandomShape(n - left, rng, tree);
  return tree.graph.AddVertex({l, rr}, -1, 2);
}

// An operator for a leaf that is a left child, or kNeutral for a plain word.
WordClass PickOperator(SplitMix64& rng, bool sibling_is_phrase) {
  const uint64_t r = rng.Uniform(1000);
  if (r < 70) return WordClass::kNegator;
  if (r < 140) return WordClass::kIntensifier;
  if (r < 180) return WordClass::kDiminisher;
  if (r < 220 && sibling_is_phrase) return WordClass::kContrast;
  return WordClass::kNeutral;
}

// A word for a leaf: the operator `op`, or else a function word (30%), a sentiment word
// (15%; weak 40%, moderate 40%, strong 20%) or a neutral content word, each pool Zipf-skewed.
const std::string& PickWord(const Lexicon& lex, WordClass op, SplitMix64& rng) {
  const std::vector<int>* pool = &lex.OfClass(op);
  size_t begin = 0, end = pool->size();
  if (op == WordClass::kNeutral) {
    const uint64_t r = rng.Uniform(1000);
    if (r < 300) {
      end = kFunctionWords.size();  // the first neutral entries
    } else if (r < 450) {
      const uint64_t s = rng.Uniform(5);
      const int score = kStrengths[s < 2 ? 0 : s < 4 ? 1 : 2];
      pool = &lex.OfClass(WordClass::kSentiment, rng.Uniform(2) == 0 ? score : -score);
      end = pool->size();
    } else {
      begin = kFunctionWords.size();
    }
  }
  CAVS_CHECK(end > begin && end <= pool->size(), "lexicon has an empty word class");
  return lex.entries()[(*pool)[begin + Skewed(rng, end - begin)]].word;
}

SstTree GenerateTree(const Lexicon& lex, const TreebankOptions& options, SplitMix64& rng) {
  SstTree tree;
  AddRandomShape(SentenceLength(rng, options.max_length), rng, tree);
  Graph& g = tree.graph;
  // Which leaves are left children, and whether their sibling is a phrase.
  std::vector<int8_t> left_leaf(g.num_vertices(), 0);  // 0 no, 1 sibling leaf, 2 sibling phrase
  for (int v = 0; v < g.num_vertices(); ++v) {
    if (g.num_children(v) == 2 && g.num_children(g.child(v, 0)) == 0) {
      left_leaf[g.child(v, 0)] = g.num_children(g.child(v, 1)) == 0 ? 1 : 2;
    }
  }
  for (int v = 0; v < g.num_vertices(); ++v) {
    if (g.num_children(v) != 0) continue;
    const WordClass op =
        left_leaf[v] != 0 ? PickOperator(rng, left_leaf[v] == 2) : WordClass::kNeutral;
    tree.words[g.tokens[v]] = PickWord(lex, op, rng);
  }
  const std::vector<int> scores = RuleScores(tree, lex);
  for (int v = 0; v < g.num_vertices(); ++v) {
    int label = ScoreToLabel(scores[v]);
    if (rng.PerMille(options.noise_per_mille)) {
      label = label == 0 ? 1 : label == 4 ? 3 : label + (rng.Uniform(2) == 0 ? -1 : 1);
    }
    g.labels[v] = label;
  }
  return tree;
}

}  // namespace

std::vector<SstTree> GenerateTreebank(const Lexicon& lexicon, const TreebankOptions& options) {
  SplitMix64 rng(options.seed);
  std::vector<SstTree> trees;
  trees.reserve(options.num_sentences);
  for (int i = 0; i < options.num_sentences; ++i) {
    trees.push_back(GenerateTree(lexicon, options, rng));
  }
  return trees;
}

std::string SyntheticSplitText(uint64_t seed, int content_words, int split, int num_sentences) {
  const Lexicon lexicon = Lexicon::Make(seed, content_words);
  TreebankOptions options;
  options.seed = SplitMix64(seed + 0x632be59bd9b4e019ULL * static_cast<uint64_t>(split + 1)).Next();
  options.num_sentences = num_sentences;
  std::string text;
  for (const SstTree& tree : GenerateTreebank(lexicon, options)) {
    text += FormatSstTree(tree);
    text += '\n';
  }
  return text;
}

}  // namespace cavs::examples
