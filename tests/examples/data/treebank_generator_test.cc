#include "examples/data/treebank_generator.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "tests/examples/data/data_test_util.h"
#include "tests/testing/temp_dir.h"

namespace cavs::examples {
namespace {

TEST(SplitMix64Test, MatchesTheReferenceSequence) {
  // Reference values of Vigna's splitmix64.c for seed 0.
  SplitMix64 rng(0);
  EXPECT_EQ(rng.Next(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(rng.Next(), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(rng.Next(), 0x06c45d188009454fULL);
}

TEST(LexiconTest, ClassesAndUniqueWords) {
  const Lexicon lex = Lexicon::Make(7, 500);
  absl::flat_hash_set<std::string> seen;
  for (const LexiconEntry& e : lex.entries()) EXPECT_TRUE(seen.insert(e.word).second) << e.word;
  EXPECT_EQ(lex.entries().size(), 40u + 4 + 6 + 5 + 2 + 500);  // function, operators, content
  EXPECT_EQ(lex.Find("not")->word_class, WordClass::kNegator);
  EXPECT_EQ(lex.Find("very")->word_class, WordClass::kIntensifier);
  EXPECT_EQ(lex.Find("somewhat")->word_class, WordClass::kDiminisher);
  EXPECT_EQ(lex.Find("but")->word_class, WordClass::kContrast);
  EXPECT_EQ(lex.Find("the")->word_class, WordClass::kNeutral);
  EXPECT_EQ(lex.Find("zzz"), nullptr);
  for (int score : {60, 100, 200, -60, -100, -200}) {
    EXPECT_FALSE(lex.OfClass(WordClass::kSentiment, score).empty()) << score;
  }
}

TEST(RuleTest, ScoreToLabelBoundaries) {
  const std::vector<std::pair<int, int>> cases = {{-300, 0}, {-150, 0}, {-149, 1}, {-50, 1},
                                                  {-49, 2},  {0, 2},    {49, 2},   {50, 3},
                                                  {149, 3},  {150, 4},  {300, 4}};
  for (auto [score, label] : cases) EXPECT_EQ(ScoreToLabel(score), label) << score;
}

// The rule on hand-built trees, with words of known classes from the lexicon.
class RuleOnTreesTest : public ::testing::Test {
 protected:
  const Lexicon lex_ = Lexicon::Make(kSyntheticSeed, kSyntheticContentWords);
  std::string Word(int score) const {
    return lex_.entries()[lex_.OfClass(WordClass::kSentiment, score).front()].word;
  }
  // Root score of `tree`, an SST line whose words G/B are replaced by +100/-100 words and
  // g by a +60 word.
  int Root(std::string tree) const {
    for (auto [from, score] : {std::pair<char, int>{'G', 100}, {'B', -100}, {'g', 60}}) {
      for (size_t at; (at = tree.find(std::string(" ") + from + ")")) != std::string::npos;) {
        tree.replace(at + 1, 1, Word(score));
      }
    }
    absl::StatusOr<SstTree> t = ParseSstTree(tree);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? RuleScores(*t, lex_).back() : -999;
  }
};

TEST_F(RuleOnTreesTest, OperatorsActOnTheirSiblingPhrase) {
  EXPECT_EQ(Root("(2 (2 the) (2 G))"), 100);
  EXPECT_EQ(Root("(2 (2 not) (2 G))"), -80);  // negation flips and damps
  EXPECT_EQ(Root("(2 (2 not) (2 B))"), 80);
  EXPECT_EQ(Root("(2 (2 very) (2 G))"), 200);                     // intensifier doubles
  EXPECT_EQ(Root("(2 (2 somewhat) (2 B))"), -50);                 // diminisher halves
  EXPECT_EQ(Root("(2 (2 G) (2 (2 but) (2 B)))"), 100 / 4 - 100);  // "but": the right dominates
  EXPECT_EQ(Root("(2 (2 (2 but) (2 B)) (2 G))"), 0);              // a left "but" phrase just adds
  EXPECT_EQ(Root("(2 (2 G) (2 not))"), 100);                      // an operator with no scope
  EXPECT_EQ(Root("(2 (2 very) (2 (2 very) (2 (2 G) (2 G))))"), 300);  // clamped at 300
  EXPECT_EQ(Root("(2 (2 not) (2 (2 very) (2 g)))"), -96);             // -(2 * 60) * 4 / 5
}

TEST_F(RuleOnTreesTest, SameWordsDifferentTreesDifferentLabels) {
  // A bag of words cannot tell these apart; the scope of "not" decides.
  const int narrow = Root("(2 (2 (2 not) (2 G)) (2 G))");  // (not G) G
  const int wide = Root("(2 (2 not) (2 (2 G) (2 G)))");    // not (G G)
  EXPECT_EQ(narrow, 20);
  EXPECT_EQ(wide, -160);
  EXPECT_NE(ScoreToLabel(narrow), ScoreToLabel(wide));
}

TEST(TreebankGeneratorTest, DeterministicAndSeeded) {
  const std::string a = SyntheticSplitText(1, 300, 0, 50);
  EXPECT_EQ(a, SyntheticSplitText(1, 300, 0, 50));
  EXPECT_NE(a, SyntheticSplitText(2, 300, 0, 50));
  EXPECT_NE(a, SyntheticSplitText(1, 300, 1, 50));
  // A longer run starts with the same trees.
  EXPECT_EQ(SyntheticSplitText(1, 300, 0, 80).substr(0, a.size()), a);
}

// Below the minimum a word class is empty (the generator used to abort on an internal check);
// the minimum is exact, and the bounds are errors naming the flag.
TEST(TreebankGeneratorTest, ContentWordsAreCheckedUpFront) {
  const int sizes[3] = {5, 1, 1};
  for (uint64_t seed : {kSyntheticSeed, uint64_t{1}, uint64_t{2}, uint64_t{3}}) {
    const int min = Lexicon::MinContentWords(seed);
    ASSERT_GT(min, 7) << seed;  // at least one word per class
    EXPECT_TRUE(Lexicon::Make(seed, min).Complete()) << seed;
    EXPECT_FALSE(Lexicon::Make(seed, min - 1).Complete()) << seed;
    EXPECT_TRUE(CheckSyntheticOptions(seed, min, sizes).ok()) << seed;
    const std::string text = SyntheticSplitText(seed, min, 0, 200);  // every class drawn from
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 200);
    absl::Status few = CheckSyntheticOptions(seed, min - 1, sizes);
    EXPECT_EQ(few.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(testing::Has(
        few.message(), absl::StrCat("--content_words=", min - 1, ": too few for seed ", seed)));
    EXPECT_TRUE(testing::Has(few.message(), absl::StrCat("use at least ", min)));
  }
  EXPECT_TRUE(testing::Has(CheckSyntheticOptions(1, 1000000000, sizes).message(),
                           "--content_words=1000000000: must be in [1, 1000000]"));
  EXPECT_TRUE(testing::Has(CheckSyntheticOptions(1, 0, sizes).message(), "--content_words=0"));
  const int huge[3] = {5, 2000000, 1};
  EXPECT_TRUE(testing::Has(CheckSyntheticOptions(1, 3000, huge).message(),
                           "--dev=2000000: the number of trees must be in [0, 1000000]"));
}

// The binary: a bad option exits with 2 and one error line naming it, never an abort.
TEST(TreebankGeneratorTest, BinaryRejectsBadOptions) {
  const std::string out_dir = cavs::tests::TempPath("gen");
  for (const std::string& args :
       {std::string("--content_words 1"), std::string("--content_words 100"),
        std::string("--content_words=1000000000"), std::string("--train=-1"),
        std::string("--content_words=x"), std::string("--bogus=1")}) {
    const std::string cmd = std::string(CAVS_GEN_TREEBANK_BINARY) + " --out_dir " + out_dir +
                            " --train 5 --dev 1 --test 1 " + args + " 2>&1";
    std::FILE* pipe = popen(cmd.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string output;
    char buffer[512];
    for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;) output.append(buffer, n);
    const int raw = pclose(pipe);
    EXPECT_TRUE(WIFEXITED(raw) && WEXITSTATUS(raw) == 2) << args << ": " << output;
    EXPECT_EQ(output.rfind("cavs-gen-treebank: error: ", 0), 0u) << output;
  }
}

std::string ShippedFile(const std::string& name) {
  return std::string(CAVS_SOURCE_DIR) + "/data/synthetic/" + name;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

struct GenOutcome {
  int status = -1;
  std::string output;  // stdout and stderr
};

// Runs cavs-gen-treebank with `args` (shell words).
GenOutcome RunGenerator(const std::string& args) {
  GenOutcome o;
  const std::string cmd = std::string(CAVS_GEN_TREEBANK_BINARY) + " " + args + " 2>&1";
  std::FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return o;
  char buffer[512];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;) o.output.append(buffer, n);
  const int raw = pclose(pipe);
  o.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return o;
}

// Every usage error names the argument at fault in its first line; --help is no error.
TEST(TreebankGeneratorTest, BinaryUsageErrorsNameTheArgument) {
  const std::string sizes = " --train 2 --dev 1 --test 1";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"stray" + sizes, "unexpected argument 'stray'"},
      {"--out_dir --seed 3" + sizes, "--out_dir needs a value"},
      {"--out_dir=" + sizes, "--out_dir: the folder name is empty"},
      {"--out_dir /tmp/x --train", "--train needs a value"},
      {"--nope 1" + sizes, "unknown option --nope"},
      {"-x", "unexpected argument '-x'"},
  };
  for (const auto& [args, error] : cases) {
    const GenOutcome o = RunGenerator(args);
    EXPECT_EQ(o.status, 2) << args << ": " << o.output;
    EXPECT_EQ(o.output.rfind("cavs-gen-treebank: error: " + error, 0), 0u)
        << args << ": " << o.output;
  }
  const GenOutcome help = RunGenerator("--help");
  EXPECT_EQ(help.status, 0) << help.output;
  EXPECT_EQ(help.output.rfind("usage: cavs-gen-treebank --out_dir DIR", 0), 0u) << help.output;
}

// --out_dir is created, parents included; a folder that cannot be made or a file that cannot
// be written is exit status 1 with the OS's reason.
TEST(TreebankGeneratorTest, BinaryCreatesTheFolderAndReportsWriteErrors) {
  const std::string base = cavs::tests::FreshTempDir("gen_out");
  const std::string out = base + "/a/b";
  GenOutcome o = RunGenerator("--out_dir " + out + " --train 3 --dev 1 --test 2");
  ASSERT_EQ(o.status, 0) << o.output;
  for (const char* name : {"train.txt", "dev.txt", "test.txt"}) {
    EXPECT_TRUE(std::filesystem::is_regular_file(out + "/" + name)) << name;
  }
  EXPECT_EQ(ReadAll(out + "/test.txt"),
            SyntheticSplitText(kSyntheticSeed, kSyntheticContentWords, 2, 2));
  o = RunGenerator("--out_dir " + out + "/train.txt --train 1 --dev 1 --test 1");
  EXPECT_EQ(o.status, 1) << o.output;
  EXPECT_EQ(o.output.rfind(
                "cavs-gen-treebank: error: --out_dir: cannot create '" + out + "/train.txt': ", 0),
            0u)
      << o.output;
  // A full disk: dev.txt is /dev/full.
  std::filesystem::remove(out + "/dev.txt");
  std::filesystem::create_symlink("/dev/full", out + "/dev.txt");
  o = RunGenerator("--out_dir " + out + " --train 1 --dev 1 --test 1");
  EXPECT_EQ(o.status, 1) << o.output;
  EXPECT_TRUE(testing::Has(o.output, "cavs-gen-treebank: error: cannot write '" + out +
                                         "/dev.txt': " + std::strerror(ENOSPC)));
}

struct Split {
  const char* file;
  int index;
  int size;
};
constexpr std::array<Split, 3> kSplits = {{{"train.txt", 0, kSyntheticTrain},
                                           {"dev.txt", 1, kSyntheticDev},
                                           {"test.txt", 2, kSyntheticTest}}};

TEST(TreebankGeneratorTest, ShippedFilesAreReproducedByteForByte) {
  for (const Split& s : kSplits) {
    const std::string shipped = ReadAll(ShippedFile(s.file));
    ASSERT_FALSE(shipped.empty()) << ShippedFile(s.file);
    const std::string generated =
        SyntheticSplitText(kSyntheticSeed, kSyntheticContentWords, s.index, s.size);
    // Not EXPECT_EQ: a megabyte diff helps no one. Regenerate with the command in
    // data/README.md if the generator changed on purpose.
    EXPECT_TRUE(shipped == generated)
        << s.file << " drifted from the generator (" << shipped.size() << " vs " << generated.size()
        << " bytes); see data/README.md";
  }
}

// Label statistics of the shipped splits, and agreement with the rule.
TEST(TreebankGeneratorTest, ShippedLabelsAreReasonableAndFollowTheRule) {
  const Lexicon lex = Lexicon::Make(kSyntheticSeed, kSyntheticContentWords);
  for (const Split& s : kSplits) {
    absl::StatusOr<std::vector<SstTree>> trees = ReadSstFile(ShippedFile(s.file));
    ASSERT_TRUE(trees.ok()) << trees.status();
    ASSERT_EQ(static_cast<int>(trees->size()), s.size);
    std::array<int64_t, 5> roots{}, nodes{};
    int64_t words = 0, agree = 0, total = 0, bag_differs = 0;
    size_t max_words = 0;
    for (const SstTree& t : *trees) {
      ASSERT_TRUE(ValidateSstTree(t).ok()) << ValidateSstTree(t);
      ++roots[t.graph.labels.back()];
      for (int32_t label : t.graph.labels) ++nodes[label];
      words += static_cast<int64_t>(t.words.size());
      max_words = std::max(max_words, t.words.size());
      const std::vector<int> scores = RuleScores(t, lex);
      for (size_t v = 0; v < scores.size(); ++v)
        agree += ScoreToLabel(scores[v]) == t.graph.labels[v];
      total += static_cast<int64_t>(scores.size());
      int bag = 0;  // the root's score if operators had no scope: the plain sum of word scores
      for (const std::string& w : t.words) {
        const LexiconEntry* e = lex.Find(w);
        if (e != nullptr && e->word_class == WordClass::kSentiment) bag += e->score;
      }
      bag_differs += ScoreToLabel(std::clamp(bag, -300, 300)) != ScoreToLabel(scores.back());
    }
    const double n = static_cast<double>(s.size);
    std::printf(
        "%s: %d trees, %.1f words/tree (max %zu), roots 0-4: %.3f %.3f %.3f %.3f %.3f, "
        "nodes 0-4: %.3f %.3f %.3f %.3f %.3f, rule agreement %.3f, root label changed "
        "by structure %.3f\n",
        s.file, s.size, words / n, max_words, roots[0] / n, roots[1] / n, roots[2] / n,
        roots[3] / n, roots[4] / n, nodes[0] / double(total), nodes[1] / double(total),
        nodes[2] / double(total), nodes[3] / double(total), nodes[4] / double(total),
        agree / double(total), bag_differs / n);
    for (int c = 0; c < 5; ++c) {
      EXPECT_GT(roots[c], s.size / 20) << "root class " << c;  // each class at least 5%
      EXPECT_LT(roots[c], s.size / 2) << "root class " << c;   // none dominates
    }
    EXPECT_GT(words / n, 16.0);
    EXPECT_LT(words / n, 23.0);
    EXPECT_LE(max_words, 50u);
    EXPECT_GT(agree / double(total), 0.95);  // noise is 3% of nodes
    EXPECT_LT(agree / double(total), 0.99);
    EXPECT_GT(bag_differs / n, 0.2);  // structure changes the root's label often
  }
}

}  // namespace
}  // namespace cavs::examples
