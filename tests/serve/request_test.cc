// The request parser against hand-written cases: each accepted form, every error kind with its
// message (input and character), and the limits.
#include "examples/serve/request.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "examples/data/text_reader.h"

namespace cavs::serve {
namespace {

// Ids: <unk> 0, a 1, b 2, good 3, <s> 4, </s> 5, (laughs) 6.
examples::Vocabulary Vocab() {
  absl::StatusOr<examples::Vocabulary> v =
      examples::Vocabulary::FromWords({"a", "b", "good", "<s>", "</s>", "(laughs)"}, "v");
  EXPECT_TRUE(v.ok()) << v.status();
  return *v;
}

absl::StatusOr<ParsedRequest> Parse(std::string_view body, RequestLimits limits = {},
                                    InputForm form = InputForm::kTree) {
  static const examples::Vocabulary vocab = Vocab();
  return ParseRequest(body, vocab, limits, form);
}

// The error of `body`: its kind and message.
void ExpectError(std::string_view body, ErrorKind kind, std::string_view message,
                 RequestLimits limits = {}, InputForm form = InputForm::kTree) {
  absl::StatusOr<ParsedRequest> r = Parse(body, limits, form);
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
  ExpectError("a b a b a", ErrorKind::kTooWide,
              "input 0, character 9 (word 5): more than the limit of 4 words", limits);
  ExpectError("(2 (2 a) (2 (2 b) (2 (2 a) (2 (2 b) (2 a)))))", ErrorKind::kTooDeep, "", limits);
  ExpectError(R"j(["a", "b", "a"])j", ErrorKind::kTooManyInputs, "3 inputs", limits);
  EXPECT_TRUE(Parse("a b a b", limits).ok());
  // A sentence's balanced tree counts against the height too: 4 words, 3 levels; 5 words, 4.
  limits.max_words = 10;
  EXPECT_TRUE(Parse("a b a b", limits).ok());
  ExpectError("a b a b a", ErrorKind::kTooDeep,
              "input 0: a sentence of 5 words is a balanced tree 4 levels high, more than the "
              "limit of 3",
              limits);
}

// A language model's requests: sentences as cavs-train's chains.
absl::StatusOr<ParsedRequest> ParseChains(std::string_view body, RequestLimits limits = {}) {
  return Parse(body, limits, InputForm::kChain);
}

void ExpectChainError(std::string_view body, ErrorKind kind, std::string_view message,
                      RequestLimits limits = {}) {
  ExpectError(body, kind, message, limits, InputForm::kChain);
}

TEST(RequestTest, LanguageModelSentenceIsTheTrainersChain) {
  // Spaces and tabs separate words, as in the text reader; '(' starts no tree; an unknown word
  // is <unk>.
  absl::StatusOr<ParsedRequest> r = ParseChains(" a\tb  zebra (laughs)\r\n");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->graphs.size(), 1u);
  const scheduler::Graph expected = examples::SentenceChain({1, 2, 0, 6}, 4, 5);
  const scheduler::Graph& g = r->graphs[0];
  EXPECT_EQ(g.tokens, expected.tokens);
  EXPECT_EQ(g.child_offsets, expected.child_offsets);
  EXPECT_EQ(g.child_ids, expected.child_ids);
  EXPECT_TRUE(g.labels.empty());  // the engine computes no loss: the server scores
  ASSERT_EQ(r->next_tokens.size(), 1u);
  EXPECT_EQ(r->next_tokens[0], expected.labels);
  EXPECT_EQ(r->top_k, 0);
}

TEST(RequestTest, LanguageModelFieldsAndTopK) {
  absl::StatusOr<ParsedRequest> r = ParseChains(R"j({"inputs": ["a", "b a"], "top_k": 3})j");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graphs.size(), 2u);
  EXPECT_EQ(r->next_tokens.size(), 2u);
  EXPECT_EQ(r->top_k, 3);
  // At most the limit, and at most the vocabulary (7 tokens).
  RequestLimits limits;
  limits.max_top_k = 4;
  ExpectChainError(R"j({"inputs": "a", "top_k": 5})j", ErrorKind::kMalformedJson,
                   "\"top_k\" is 5, not an integer from 0 to 4", limits);
  ExpectChainError(R"j({"inputs": "a", "top_k": 8})j", ErrorKind::kMalformedJson,
                   "\"top_k\" is 8, not an integer from 0 to 7");
  ExpectChainError(R"j({"inputs": "a", "top_k": -1})j", ErrorKind::kMalformedJson,
                   "not an integer from 0 to 7");
  ExpectChainError(R"j({"inputs": "a", "top_k": 2.5})j", ErrorKind::kMalformedJson,
                   "\"top_k\" is 2.5");
  ExpectChainError(R"j({"inputs": "a", "top_k": "2"})j", ErrorKind::kMalformedJson,
                   "\"top_k\" is string");
  // Each model knows its own fields.
  ExpectChainError(R"j({"inputs": "a", "nodes": true})j", ErrorKind::kUnknownField,
                   "unknown field 'nodes' (known for a language model: \"inputs\", \"top_k\")");
  ExpectError(R"j({"inputs": "a", "top_k": 1})j", ErrorKind::kUnknownField,
              "unknown field 'top_k' (known: \"inputs\", \"nodes\")");
}

TEST(RequestTest, LanguageModelSentenceErrorsNameTheWordAndCharacter) {
  ExpectChainError("", ErrorKind::kMalformedInput, "input 0 is empty");
  ExpectChainError(R"j(["a", " \t "])j", ErrorKind::kMalformedInput, "input 1 is empty");
  ExpectChainError("a b\na", ErrorKind::kMalformedInput,
                   "input 0, character 4: control byte in a sentence '\\n' (an input is one "
                   "sentence: send several as a JSON array)");
  // A chain runs a round per word and one for <s>: max_depth 4 takes 3 words.
  RequestLimits limits;
  limits.max_depth = 4;
  EXPECT_TRUE(ParseChains("a b a", limits).ok());
  ExpectChainError("a b  a b", ErrorKind::kTooDeep,
                   "input 0, character 8 (word 4): more than 3 words: a language model runs a "
                   "sentence one round per word and one for <s>, and the limit is 4 rounds",
                   limits);
  limits.max_words = 2;
  ExpectChainError("[\"a\", \"a b a\"]", ErrorKind::kTooWide,
                   "input 1, character 5 (word 3): more than the limit of 2 words", limits);
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
