#include "examples/data/sst_reader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "scheduler/graph.h"
#include "tests/examples/data/data_test_util.h"
#include "tests/testing/temp_dir.h"

namespace cavs::examples {
namespace {

using ::cavs::examples::testing::FileExists;
using ::cavs::examples::testing::Has;
using ::cavs::examples::testing::Msg;
using ::cavs::examples::testing::WriteTemp;

SstTree ParseOk(std::string_view line, const SstReadOptions& options = {}) {
  absl::StatusOr<SstTree> tree = ParseSstTree(line, options);
  EXPECT_TRUE(tree.ok()) << tree.status();
  if (!tree.ok()) return {};
  const absl::Status valid = ValidateSstTree(*tree);
  EXPECT_TRUE(valid.ok()) << valid;
  return *std::move(tree);
}

std::vector<int32_t> Children(const scheduler::Graph& g, int v) {
  std::vector<int32_t> c;
  for (int k = 0; k < g.num_children(v); ++k) c.push_back(g.child(v, k));
  return c;
}

TEST(SstReaderTest, BinaryTreeInPostOrder) {
  const SstTree t = ParseOk("(3 (2 It) (4 (2 's) (4 (3 very) (4 good))))");
  const scheduler::Graph& g = t.graph;
  EXPECT_EQ(t.words, (std::vector<std::string>{"It", "'s", "very", "good"}));
  ASSERT_EQ(g.num_vertices(), 7);
  // Leaves 0..3 = It, 's, very, good; 4 = (very good); 5 = ('s ...); 6 = root.
  for (int v = 0; v < 4; ++v) EXPECT_EQ(g.num_children(v), 0) << v;
  EXPECT_EQ(Children(g, 4), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(Children(g, 5), (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(Children(g, 6), (std::vector<int32_t>{0, 5}));
  EXPECT_EQ(g.tokens, (std::vector<int32_t>{0, 1, 2, 3, -1, -1, -1}));
  EXPECT_EQ(g.labels, (std::vector<int32_t>{2, 2, 3, 4, 4, 4, 3}));
  EXPECT_EQ(g.Roots(), (std::vector<int32_t>{6}));
  EXPECT_TRUE(scheduler::ValidateGraph(g, 0, 2).ok());
}

TEST(SstReaderTest, SingleLeafAndSpacing) {
  const SstTree t = ParseOk("  (4 great)\t");
  EXPECT_EQ(t.graph.num_vertices(), 1);
  EXPECT_EQ(t.graph.labels, (std::vector<int32_t>{4}));
  EXPECT_EQ(t.graph.tokens, (std::vector<int32_t>{0}));
  // No space between a label and '(' and between subtrees; tabs; a space after '('.
  const SstTree u = ParseOk("(3(2 a)(\t1\tb  ))");
  EXPECT_EQ(u.words, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(u.graph.labels, (std::vector<int32_t>{2, 1, 3}));
}

TEST(SstReaderTest, UnaryChainKeepsTheUpperLabel) {
  const SstTree leaf = ParseOk("(3 (1 (4 good)))");
  EXPECT_EQ(leaf.graph.num_vertices(), 1);
  EXPECT_EQ(leaf.graph.labels, (std::vector<int32_t>{3}));
  EXPECT_EQ(leaf.graph.tokens, (std::vector<int32_t>{0}));
  const SstTree inner = ParseOk("(0 (2 (1 (3 a) (2 b))))");
  ASSERT_EQ(inner.graph.num_vertices(), 3);
  EXPECT_EQ(Children(inner.graph, 2), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(inner.graph.labels, (std::vector<int32_t>{3, 2, 0}));
  // A unary node below a binary one.
  const SstTree mixed = ParseOk("(2 (4 (1 a)) (3 b))");
  EXPECT_EQ(mixed.graph.labels, (std::vector<int32_t>{4, 3, 2}));
}

TEST(SstReaderTest, NaryBinarizesRightBranching) {
  const SstTree t = ParseOk("(1 (2 a) (3 b) (4 c) (0 d))");
  const scheduler::Graph& g = t.graph;
  ASSERT_EQ(g.num_vertices(), 7);
  EXPECT_EQ(Children(g, 4), (std::vector<int32_t>{2, 3}));  // (c d)
  EXPECT_EQ(Children(g, 5), (std::vector<int32_t>{1, 4}));  // (b (c d))
  EXPECT_EQ(Children(g, 6), (std::vector<int32_t>{0, 5}));  // (a (b (c d)))
  EXPECT_EQ(g.labels, (std::vector<int32_t>{2, 3, 4, 0, 1, 1, 1}));
  EXPECT_EQ(FormatSstTree(t), "(1 (2 a) (1 (3 b) (1 (4 c) (0 d))))");
  // A ternary node whose middle child is a subtree, inside a binary node.
  const SstTree u = ParseOk("(3 (2 x) (0 (2 a) (1 (2 b) (2 c)) (4 d)))");
  EXPECT_EQ(FormatSstTree(u), "(3 (2 x) (0 (2 a) (0 (1 (2 b) (2 c)) (4 d))))");
}

TEST(SstReaderTest, TokensAreKeptVerbatim) {
  const SstTree t = ParseOk(
      "(2 (2 -LRB-) (2 (2 caf\xc3\xa9) (2 (2 a\"b'c\\) (2 (2 C++) (2 (2 100%) (2 -RRB-))))))");
  EXPECT_EQ(t.words,
            (std::vector<std::string>{"-LRB-", "caf\xc3\xa9", "a\"b'c\\", "C++", "100%", "-RRB-"}));
}

TEST(SstReaderTest, VocabularyOptionAndAssignTokenIds) {
  WordCounter counter;
  counter.AddAll({"good", "good", "bad"});
  const Vocabulary vocab = Vocabulary::FromCounts(counter.counts(), 1);
  SstReadOptions options;
  options.vocabulary = &vocab;
  const SstTree t = ParseOk("(3 (2 bad) (3 (3 good) (2 ugly)))", options);
  EXPECT_EQ(t.graph.tokens,
            (std::vector<int32_t>{vocab.Id("bad"), vocab.Id("good"), Vocabulary::kUnkId, -1, -1}));
  std::vector<SstTree> trees = {ParseOk("(3 (2 bad) (3 (3 good) (2 ugly)))")};
  EXPECT_EQ(trees[0].graph.tokens, (std::vector<int32_t>{0, 1, 2, -1, -1}));
  AssignTokenIds(vocab, &trees);
  EXPECT_EQ(trees[0].graph.tokens, t.graph.tokens);
}

TEST(SstReaderTest, ReadsLinesSkippingBlankOnesAndCrlf) {
  absl::StatusOr<std::vector<SstTree>> trees =
      ReadSstString("(2 a)\r\n\n   \t\n(3 (2 b) (4 c))\r\n(1 d)");
  ASSERT_TRUE(trees.ok()) << trees.status();
  ASSERT_EQ(trees->size(), 3u);
  EXPECT_EQ((*trees)[1].words, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ((*trees)[2].words, (std::vector<std::string>{"d"}));
  absl::StatusOr<std::vector<SstTree>> none = ReadSstString("\n\n");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// PeekNonBlank consumes the blank lines before the first byte it returns, and nothing of that
// byte's line, which the next Next() returns whole with its line number.
TEST(LineReaderTest, PeekNonBlankLeavesItsLineToNext) {
  LineReader reader = LineReader::FromString("\n  \r\n\t\n(3 a)\nnext\n", "p.txt");
  absl::StatusOr<std::optional<char>> first = reader.PeekNonBlank();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, '(');
  EXPECT_EQ(reader.line_number(), 3);
  std::string_view line;
  ASSERT_TRUE(*reader.Next(&line));
  EXPECT_EQ(line, "(3 a)");
  EXPECT_EQ(reader.line_number(), 4);
  EXPECT_EQ(**reader.PeekNonBlank(), 'n');  // a peek before a non-blank line consumes nothing
  ASSERT_TRUE(*reader.Next(&line));
  EXPECT_EQ(line, "next");
  // Only blank lines left (the last without '\n'): nothing to peek, and the end of the source.
  LineReader blank = LineReader::FromString(" \n\t\r\n  ", "b.txt");
  EXPECT_EQ(*blank.PeekNonBlank(), std::nullopt);
  EXPECT_FALSE(*blank.Next(&line));
  // A '\r' that does not end its line is no blank; an over-long line is Next()'s error.
  EXPECT_EQ(**LineReader::FromString("\r\r\n", "r.txt").PeekNonBlank(), '\r');
  LineReader long_line = LineReader::FromString("\n          x\n", "l.txt", 8);
  EXPECT_EQ(Msg(long_line.PeekNonBlank().status()), "l.txt:2:9: line longer than 8 bytes");
}

// A UTF-8 byte order mark at the very start is not part of line 1: a file saved by an editor
// that writes one reads as one without (format sniffing included); columns count from after it.
// Elsewhere the bytes are the line's.
TEST(LineReaderTest, SkipsAByteOrderMarkAtTheStart) {
  absl::StatusOr<std::vector<SstTree>> trees = ReadSstString("\xEF\xBB\xBF(3 (2 a) (4 b))\n");
  ASSERT_TRUE(trees.ok()) << trees.status();
  ASSERT_EQ(trees->size(), 1u);
  EXPECT_EQ((*trees)[0].words, (std::vector<std::string>{"a", "b"}));
  absl::StatusOr<LineReader> file =
      LineReader::OpenFile(WriteTemp("bom.txt", "\xEF\xBB\xBF \n (2 c)\n"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(**file->PeekNonBlank(), '(');
  trees = ReadSstLines(*file);
  ASSERT_TRUE(trees.ok()) << trees.status();
  ASSERT_EQ(trees->size(), 1u);
  std::string_view line;
  LineReader only = LineReader::FromString("\xEF\xBB\xBF", "o.txt");
  EXPECT_FALSE(*only.Next(&line));
  EXPECT_EQ(Msg(ReadSstString("\xEF\xBB\xBF(2 a", "c.txt").status()).rfind("c.txt:1:5: ", 0), 0u)
      << ReadSstString("\xEF\xBB\xBF(2 a", "c.txt").status();
  absl::Status second = ReadSstString("(2 a)\n\xEF\xBB\xBF(2 b)\n", "s.txt").status();
  EXPECT_EQ(Msg(second).rfind("s.txt:2:1: ", 0), 0u) << second;
}

// Blank lines over a 64 KiB chunk boundary, a "\r\n" split by it: the peek reads on.
TEST(LineReaderTest, PeekNonBlankReadsAcrossChunks) {
  const std::string path = WriteTemp("peek_chunks.txt", std::string(65535, '\n') + "\r\n x y\n");
  absl::StatusOr<LineReader> reader = LineReader::OpenFile(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(**reader->PeekNonBlank(), 'x');
  std::string_view line;
  ASSERT_TRUE(*reader->Next(&line));
  EXPECT_EQ(line, " x y");
  EXPECT_EQ(reader->line_number(), 65537);
  absl::StatusOr<LineReader> blank =
      LineReader::OpenFile(WriteTemp("peek_blank.txt", std::string(200000, '\n')));
  ASSERT_TRUE(blank.ok());
  EXPECT_EQ(*blank->PeekNonBlank(), std::nullopt);
}

// A pipe can be read once: sniffing its first byte must not lose what the parser reads next
// (cavs-train --train=<(...) once started mid-stream).
TEST(LineReaderTest, PeekThenReadAPipe) {
  const std::string fifo = cavs::tests::TempPath("fifo");
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  std::string text = "\n\n";
  for (int i = 0; i < 10000; ++i) text += "(3 (2 a) (4 b))\n";  // 160 KB: several chunks
  std::thread writer([&] {
    std::FILE* f = std::fopen(fifo.c_str(), "wb");  // blocks until the reader opens
    if (f == nullptr) return;
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  });
  absl::StatusOr<LineReader> reader = LineReader::OpenFile(fifo);
  if (!reader.ok()) {  // release the writer before failing
    if (std::FILE* f = std::fopen(fifo.c_str(), "rb"); f != nullptr) std::fclose(f);
    writer.join();
    FAIL() << reader.status();
  }
  EXPECT_EQ(**reader->PeekNonBlank(), '(');
  absl::StatusOr<std::vector<SstTree>> trees = ReadSstLines(*reader);
  writer.join();
  ::unlink(fifo.c_str());
  ASSERT_TRUE(trees.ok()) << trees.status();
  EXPECT_EQ(trees->size(), 10000u);
}

TEST(SstReaderTest, ReadsAFile) {
  const std::string path = WriteTemp("sst_ok.txt", "(2 (2 a) (3 b))\n(4 c)\n");
  absl::StatusOr<std::vector<SstTree>> trees = ReadSstFile(path);
  ASSERT_TRUE(trees.ok()) << trees.status();
  EXPECT_EQ(trees->size(), 2u);
  absl::StatusOr<std::vector<SstTree>> missing = ReadSstFile(path + ".missing");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Has(missing.status().message(), "sst_ok.txt.missing"));
}

TEST(SstReaderTest, FormatRoundTrips) {
  for (const char* line : {"(3 (2 It) (4 (2 's) (4 (3 very) (4 good))))", "(0 x)",
                           "(1 (0 (2 a) (2 b)) (3 (4 c) (2 d)))"}) {
    const SstTree t = ParseOk(line);
    EXPECT_EQ(FormatSstTree(t), line);
  }
}

TEST(SstReaderTest, DeepTreesNeedNoRecursion) {
  constexpr int kDepth = 100000;
  std::string chain;  // a unary chain 100000 deep: one leaf
  for (int i = 0; i < kDepth; ++i) chain += "(2 ";
  chain += "x";
  chain.append(kDepth, ')');
  SstReadOptions deep;
  deep.max_depth = kDepth + 1;
  EXPECT_EQ(ParseOk(chain, deep).graph.num_vertices(), 1);
  std::string spine;  // a left-branching binary tree 100000 deep
  for (int i = 0; i < kDepth; ++i) spine += "(1 ";
  spine += "(2 w)";
  for (int i = 0; i < kDepth; ++i) spine += " (3 w))";
  const SstTree t = ParseOk(spine, deep);
  EXPECT_EQ(t.graph.num_vertices(), 2 * kDepth + 1);
  EXPECT_EQ(FormatSstTree(t), spine);
}

struct BadCase {
  const char* input;
  const char* message;  // the whole expected message, "name:line:column: what"
};

TEST(SstReaderTest, MalformedLinesGiveLineAndColumn) {
  const std::vector<BadCase> cases = {
      {"", "t.txt:1:1: expected '(' to start a tree, got end of line"},
      {"2 (a)", "t.txt:1:1: expected '(' to start a tree, got '2 (a)'"},
      {"(2 a",
       "t.txt:1:5: unbalanced brackets: end of line with 1 '(' not closed "
       "(the innermost at column 1)"},
      {"(2 (2 a) (3 (2 b)",
       "t.txt:1:18: unbalanced brackets: end of line with 2 '(' not "
       "closed (the innermost at column 10)"},
      {"(2 a))", "t.txt:1:6: unbalanced brackets: ')' with no matching '('"},
      {"(7 a)", "t.txt:1:2: bad label '7', expected 0-4"},
      {"(2 (x a) (2 b))", "t.txt:1:5: bad label 'x', expected 0-4"},
      {"(22 a)", "t.txt:1:2: bad label '22', expected 0-4"},
      {"(-1 a)", "t.txt:1:2: bad label '-1', expected 0-4"},
      {"( (2 a))", "t.txt:1:3: missing label after '(', got '(2 a))'"},
      {"()", "t.txt:1:2: missing label after '(', got ')'"},
      {"(", "t.txt:1:2: missing label after '(', got end of line"},
      {"(2)", "t.txt:1:3: empty node: the '(' at column 1 has a label but no token or subtree"},
      {"(2 a b)",
       "t.txt:1:6: second token 'b' in the leaf opened at column 1; a leaf is "
       "(label token)"},
      {"(2 (2 a) b)", "t.txt:1:10: bare token 'b' beside subtrees; write it as (label token)"},
      {"(2 a (2 b))",
       "t.txt:1:6: subtree inside the leaf opened at column 1; a leaf is "
       "(label token)"},
      {"(2 a) (3 b)", "t.txt:1:7: unexpected text after the tree: '(3 b)'"},
      {"(2 a) junk", "t.txt:1:7: unexpected text after the tree: 'junk'"},
      {"(2 a)\x01", "t.txt:1:6: invalid control byte '\\x01'"},
      {"(2 a\x7f)", "t.txt:1:5: invalid control byte '\\x7f'"},
      {"(2 a\rb)", "t.txt:1:5: invalid control byte '\\r'"},
  };
  for (const BadCase& c : cases) {
    absl::StatusOr<SstTree> t = ParseSstTree(c.input, {}, "t.txt", 1);
    ASSERT_FALSE(t.ok()) << c.input;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(Msg(t.status()), c.message) << c.input;
  }
}

TEST(SstReaderTest, NulByteAndLineNumbersInFiles) {
  const std::string nul("(2 (2 a) (2 b\0c))", 17);
  absl::StatusOr<std::vector<SstTree>> t = ReadSstString(nul, "n.txt");
  EXPECT_EQ(Msg(t.status()), "n.txt:1:14: invalid control byte '\\x00'");
  // Line numbers count blank lines.
  const std::string path = WriteTemp("sst_bad.txt", "(2 a)\n\n  \n(3 (9 b) (2 c))\n");
  t = ReadSstFile(path);
  EXPECT_EQ(Msg(t.status()), path + ":4:5: bad label '9', expected 0-4");
}

TEST(SstReaderTest, CapsDepthAndLineLength) {
  std::string deep;
  for (int i = 0; i <= 1000; ++i) deep += "(2 ";
  absl::StatusOr<std::vector<SstTree>> t = ReadSstString(deep, "d.txt");
  EXPECT_EQ(Msg(t.status()), "d.txt:1:3001: tree nested deeper than 1000");
  SstReadOptions small;
  small.max_line_bytes = 16;
  t = ReadSstString("(2 a)\n(2 aaaaaaaaaaaaaaaaaaaaaaaaaaaaa)\n", "l.txt", small);
  EXPECT_EQ(Msg(t.status()), "l.txt:2:17: line longer than 16 bytes");
  // A file with a 3 MiB line and no newline is refused without reading it whole.
  const std::string path = WriteTemp("sst_long.txt", "(2 " + std::string(3 << 20, 'x'));
  t = ReadSstFile(path);
  EXPECT_EQ(Msg(t.status()), path + ":1:1048577: line longer than 1048576 bytes");
}

TEST(SstReaderTest, ValidateRejectsBrokenTrees) {
  SstTree t = ParseOk("(3 (2 a) (4 b))");
  SstTree bad = t;
  bad.graph.labels[1] = 5;
  EXPECT_TRUE(Has(ValidateSstTree(bad).message(), "vertex 1: label 5"));
  bad = t;
  bad.graph.tokens[2] = 7;
  EXPECT_TRUE(Has(ValidateSstTree(bad).message(), "internal vertex"));
  bad = t;
  bad.words.pop_back();
  EXPECT_TRUE(Has(ValidateSstTree(bad).message(), "2 leaves but 1 words"));
  bad = t;
  std::swap(bad.graph.child_ids[0], bad.graph.child_ids[1]);
  EXPECT_TRUE(Has(ValidateSstTree(bad).message(), "not in post-order"));
}

// The real SST training split, where present (the project never depends on it).
std::string SstDir() {
  const char* env = std::getenv("CAVS_SST_DIR");
  return env != nullptr ? env : CAVS_SOURCE_DIR "/../shared/data/sst";
}

TEST(SstReaderTest, RealSstTrainAndDev) {
  const std::string train_path = SstDir() + "/train.txt";
  if (!FileExists(train_path)) GTEST_SKIP() << "no " << train_path << " (set CAVS_SST_DIR)";
  absl::StatusOr<SstDataset> data = LoadSstDataset(train_path, SstDir() + "/dev.txt");
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->train.size(), 8544u);
  EXPECT_EQ(data->dev.size(), 1101u);
  int64_t vertices = 0, words = 0, max_words = 0;
  std::array<int64_t, kSstNumClasses> roots{};
  for (const SstTree& t : data->train) {
    ASSERT_TRUE(ValidateSstTree(t).ok()) << ValidateSstTree(t);
    vertices += t.graph.num_vertices();
    words += static_cast<int64_t>(t.words.size());
    max_words = std::max<int64_t>(max_words, t.words.size());
    ++roots[t.graph.labels.back()];
  }
  std::printf(
      "SST train: %zu trees, %lld vertices, %lld words (max %lld), vocabulary %d; "
      "root labels %lld %lld %lld %lld %lld\n",
      data->train.size(), static_cast<long long>(vertices), static_cast<long long>(words),
      static_cast<long long>(max_words), data->vocabulary.size(), static_cast<long long>(roots[0]),
      static_cast<long long>(roots[1]), static_cast<long long>(roots[2]),
      static_cast<long long>(roots[3]), static_cast<long long>(roots[4]));
  EXPECT_EQ(vertices, 2 * words - 8544);  // binary trees: 2n - 1 vertices per tree
  EXPECT_GT(words, 150000);
  EXPECT_LT(words, 180000);
}

}  // namespace
}  // namespace cavs::examples
