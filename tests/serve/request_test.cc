// The request parser against hand-written cases: each accepted form, every error kind with its
// message (input and character), and the limits.
#include "examples/serve/request.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace cavs::serve {
namespace {

examples::Vocabulary Vocab() {
  absl::StatusOr<examples::Vocabulary> v = examples::Vocabulary::FromWords({"a", "b", "good"}, "v");
  EXPECT_TRUE(v.ok()) << v.status();
  return *v;
}

absl::StatusOr<ParsedRequest> Parse(std::string_view body, RequestLimits limits = {}) {
  static const examples::Vocabulary vocab = Vocab();
  return ParseRequest(body, vocab, limits);
}

// The error of `body`: its kind and message.
void ExpectError(std::string_view body, ErrorKind kind, std::string_view message,
                 RequestLimits limits = {}) {
  absl::StatusOr<ParsedRequest> r = Parse(body, limits);
  ASSERT_FALSE(r.ok()) << body;
  EXPECT_EQ(ErrorKindOf(r.status()), kind) << r.status();
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_NE(r.status().message().find(std::string(message)), std::string::npos)
      << r.status().message() << "\nexpected: " << message;
}

TEST(RequestTest, PlainTreeBecomesItsBinaryGraphWithoutLabels) {
  absl::StatusOr<ParsedRequest> r = Parse("(3 (2 a) (4 (2 good) (2 zebra)))\n");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->graphs.size(), 1u);
  const scheduler::Graph& g = r->graphs[0];
  ASSERT_EQ(g.num_vertices(), 5);
  EXPECT_TRUE(g.labels.empty());
  // Leaves in word order, "<unk>" (0) for a word outside the vocabulary; the root last.
  EXPECT_EQ(g.tokens, (std::vector<int32_t>{1, 3, 0, -1, -1}));
  EXPECT_EQ(g.child(4, 0), 0);
  EXPECT_EQ(g.child(4, 1), 3);
  EXPECT_FALSE(r->nodes);
}

TEST(RequestTest, SentenceBecomesABalancedTree) {
  absl::StatusOr<ParsedRequest> r = Parse("a b good a b");
  ASSERT_TRUE(r.ok()) << r.status();
  const scheduler::Graph& g = r->graphs[0];
  // 5 leaves, 4 internal vertices: ((a b) good) (a b) -> height 4 = ceil(log2 5) + 1.
  ASSERT_EQ(g.num_vertices(), 9);
  const std::vector<int32_t> leaves = {1, 2, 3, 1, 2};
  std::vector<int32_t> tokens;
  for (int32_t t : g.tokens) {
    if (t >= 0) tokens.push_back(t);
  }
  EXPECT_EQ(tokens, leaves);
  EXPECT_EQ(g.Roots(), (std::vector<int32_t>{8}));
}

TEST(RequestTest, JsonArrayAndObject) {
  absl::StatusOr<ParsedRequest> r = Parse(R"j(["(2 (2 a) (2 b))", "a b"])j");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graphs.size(), 2u);
  r = Parse(R"j( {"nodes": true, "inputs": "good"} )j");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graphs.size(), 1u);
  EXPECT_TRUE(r->nodes);
  EXPECT_EQ(r->graphs[0].num_vertices(), 1);
}

TEST(RequestTest, MalformedTreeNamesInputAndCharacter) {
  ExpectError("(3 (2 a) (x b))", ErrorKind::kMalformedTree,
              "input 0, character 11: bad label 'x', expected 0-4");
  ExpectError(R"j(["a", "(2 (2 a) (2 b)"])j", ErrorKind::kMalformedTree,
              "input 1, character 15: unbalanced brackets");
  ExpectError("(2 (2 a) (2 b)))", ErrorKind::kMalformedTree, "input 0, character 16");
}

TEST(RequestTest, MalformedJsonAndUnknownField) {
  ExpectError("[\"a\", ", ErrorKind::kMalformedJson, "malformed JSON");
  ExpectError("[1]", ErrorKind::kMalformedJson, "the body[0] is number, not a string");
  ExpectError(R"j({"inputs": "a", "nodes": 1})j", ErrorKind::kMalformedJson, "\"nodes\" is number");
  ExpectError(R"j({"input": "a"})j", ErrorKind::kUnknownField, "unknown field 'input'");
  ExpectError(R"j({"nodes": true})j", ErrorKind::kMalformedJson, "no \"inputs\" field");
  ExpectError("[[[[[[\"a\"]]]]]]", ErrorKind::kMalformedJson, "nested deeper");
  ExpectError(std::string(100000, '['), ErrorKind::kMalformedJson, "malformed JSON");
}

TEST(RequestTest, EmptyAndControlBytes) {
  ExpectError("", ErrorKind::kMalformedInput, "input 0 is empty");
  ExpectError(R"j(["a", "  "])j", ErrorKind::kMalformedInput, "input 1 is empty");
  ExpectError(std::string("a b\x01", 4), ErrorKind::kMalformedInput,
              "input 0, character 4: control byte");
  ExpectError("[]", ErrorKind::kTooManyInputs, "0 inputs; a request holds 1 to 256");
}

TEST(RequestTest, LimitsOnDepthWidthAndInputs) {
  RequestLimits limits;
  limits.max_depth = 3;
  limits.max_words = 4;
  limits.max_inputs = 2;
  ExpectError("(2 (2 (2 (2 a) (2 b)) (2 a)) (2 b))", ErrorKind::kTooDeep,
              "input 0, character 10: tree nested deeper than 3", limits);
  // Nesting within the bound, but binarized 4 levels high.
  ExpectError("(2 (2 a) (2 b) (2 a) (2 b))", ErrorKind::kTooDeep,
              "the binarized tree is 4 levels high", limits);
  ExpectError("a b a b a", ErrorKind::kTooWide, "input 0, character 9: more than the limit of 4",
              limits);
  ExpectError("(2 (2 a) (2 (2 b) (2 (2 a) (2 (2 b) (2 a)))))", ErrorKind::kTooDeep, "", limits);
  ExpectError(R"j(["a", "b", "a"])j", ErrorKind::kTooManyInputs, "3 inputs", limits);
  EXPECT_TRUE(Parse("a b a b", limits).ok());
}

TEST(RequestTest, ErrorKindsRoundTripThroughStatus) {
  for (int k = 1; k < kNumErrorKinds; ++k) {
    const ErrorKind kind = static_cast<ErrorKind>(k);
    EXPECT_EQ(ErrorKindOf(RequestError(kind, "x")), kind) << ErrorKindName(kind);
  }
  EXPECT_EQ(ErrorKindOf(absl::InternalError("x")), ErrorKind::kInternal);
  EXPECT_EQ(ErrorKindOf(absl::OkStatus()), ErrorKind::kNone);
}

}  // namespace
}  // namespace cavs::serve
