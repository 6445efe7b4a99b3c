// The body of a POST /v1/predict request, parsed and checked into graphs the engine can run.
//
// A body is either one input as plain text, or JSON:
//   (3 (2 It) (4 (2 's) (4 good)))               one tree in SST bracket form
//   a sentence of words                           one sentence (whitespace separates words)
//   ["(2 (2 a) (2 b))", "a b c"]                   a JSON array of inputs
//   {"inputs": [...] or "...", "nodes": true}      an object; "nodes" asks for every vertex
//   {"inputs": [...] or "...", "top_k": 5}         a language model's object; "top_k" asks for
//                                                  the k most probable next words per position
// A body whose first non-blank byte is '[' or '{' is JSON; any other body is one input. Words
// are separated by spaces and tabs, as cavs-train's text reader splits a line; words outside
// the model's vocabulary read as "<unk>". What an input becomes depends on the model
// (InputForm):
//   kTree   a tree model's. An input whose first non-blank byte is '(' is a tree, any other a
//           sentence. A tree's labels are ignored (they are the treebank's gold labels). A
//           sentence becomes a balanced binary tree over its words (height ceil(log2 n) + 1, so
//           it takes few rounds), since no parse is given.
//   kChain  a language model's. Every input is a sentence (a '(' is part of a word, as in the
//           text reader), read as cavs-train reads a line: the chain <s> w1 .. wn, vertex t
//           predicting the next token (w(t+1), "</s>" after wn; examples::SentenceChain). One
//           round per vertex, so a sentence of n words counts n + 1 against max_depth.
//
// Every error is an InvalidArgument whose message names the input and, where a place in it is
// at fault, the character (1-based byte offset in the input) and, in a sentence, the word:
// `input 2, character 15: bad label "x", expected 0-4`, `input 0, character 498 (word 100):
// ...`. Its kind (for the metrics and the response) is ErrorKindOf(status). Nothing here
// aborts or recurses on the input: the JSON parser is iterative and deep JSON is refused, the
// SST parser is iterative and capped. Thread-safe (no state).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "examples/data/vocabulary.h"
#include "scheduler/graph.h"

namespace cavs::serve {

struct RequestLimits {
  size_t max_inputs = 256;  // inputs per request
  int max_depth = 100;      // bracket nesting, and a graph's height in vertices (its rounds)
  int max_words = 512;      // words (leaves) per input
  int max_top_k = 100;      // a language model's "top_k"
};

// What the served model reads its inputs as.
enum class InputForm {
  kTree,   // trees, or sentences as balanced trees (the sentiment models)
  kChain,  // sentences as chains predicting the next token (the language models)
};

// What is wrong with a request, for the error response and the errors_total metric.
enum class ErrorKind {
  kNone,
  kMalformedJson,   // not JSON, or JSON of the wrong shape (a number where a string goes)
  kUnknownField,    // an object field other than inputs and nodes (inputs and top_k: kChain)
  kMalformedTree,   // SST bracket syntax
  kMalformedInput,  // an empty input, a control byte in a sentence
  kTooDeep,         // nesting or height over RequestLimits::max_depth
  kTooWide,         // more words than RequestLimits::max_words
  kTooManyInputs,   // none, or more than RequestLimits::max_inputs
  kBodyTooLarge,    // over the server's body limit (HTTP 413)
  kQueueFull,       // the batching queue is full (HTTP 503)
  kShuttingDown,    // the server stopped accepting (HTTP 503)
  kInternal,        // the engine failed (HTTP 500)
};
inline constexpr int kNumErrorKinds = 12;
// "malformed_json", ...: the label of errors_total and the response's "kind".
const char* ErrorKindName(ErrorKind kind);
// An InvalidArgument (or, for the server's own kinds, its code) carrying `kind`.
absl::Status RequestError(ErrorKind kind, absl::string_view message);
// The kind a status carries; kInternal for one that carries none, kNone for OK.
ErrorKind ErrorKindOf(const absl::Status& status);

struct ParsedRequest {
  std::vector<scheduler::Graph> graphs;  // one per input, tokens from the vocabulary, no labels
  // kChain: per input, the token each vertex predicts (its chain's labels, kept here rather
  // than in the graph so that the engine computes no loss: the server scores the sentence).
  std::vector<std::vector<int32_t>> next_tokens;
  bool nodes = false;  // kTree: answer every vertex, not only the root
  int top_k = 0;       // kChain: the most probable next tokens to list per position
};

// REQUIRES: with kChain, `vocabulary` holds "<s>" and "</s>" (a language model's always does).
[[nodiscard]] absl::StatusOr<ParsedRequest> ParseRequest(std::string_view body,
                                                         const examples::Vocabulary& vocabulary,
                                                         const RequestLimits& limits,
                                                         InputForm form = InputForm::kTree);

// One input (a tree or a sentence, as above) into a graph; `index` names it in errors. A
// kChain input's graph carries its labels (the next tokens), as cavs-train's chains do.
[[nodiscard]] absl::StatusOr<scheduler::Graph> ParseInput(std::string_view text, size_t index,
                                                          const examples::Vocabulary& vocabulary,
                                                          const RequestLimits& limits,
                                                          InputForm form = InputForm::kTree);

}  // namespace cavs::serve
