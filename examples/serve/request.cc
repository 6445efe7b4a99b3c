#include "examples/serve/request.h"

#include <algorithm>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "examples/data/line_reader.h"
#include "examples/data/sst_reader.h"
#include "examples/data/text_reader.h"

namespace cavs::serve {
namespace {

using examples::AbslView;

constexpr char kKindPayload[] = "type.cavs/serve.ErrorKind";
constexpr const char* kKindNames[kNumErrorKinds] = {
    "none",          "malformed_json", "unknown_field",   "malformed_tree", "malformed_input",
    "too_deep",      "too_wide",       "too_many_inputs", "body_too_large", "queue_full",
    "shutting_down", "internal"};

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
bool IsControl(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }

// `text` without the blanks that end it (a newline after a body is common); its start is kept,
// so that offsets count from the input as given.
std::string_view TrimEnd(std::string_view text) {
  while (!text.empty() && IsBlank(text.back())) text.remove_suffix(1);
  return text;
}

size_t FirstNonBlank(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && IsBlank(text[i])) ++i;
  return i;
}

// The height of `g` in vertices. REQUIRES: children before parents (post-order ids).
int Height(const scheduler::Graph& g) {
  std::vector<int> h(g.num_vertices(), 1);
  int top = 0;
  for (int v = 0; v < g.num_vertices(); ++v) {
    for (int k = 0; k < g.num_children(v); ++k) {
      const int32_t c = g.child(v, k);
      if (c >= 0) h[v] = std::max(h[v], h[c] + 1);
    }
    top = std::max(top, h[v]);
  }
  return top;
}

// The SST parser's "name:1:column: what" as "name, character column: what".
absl::Status TreeError(const absl::Status& s, std::string_view name) {
  absl::string_view m = s.message();
  const std::string prefix = absl::StrCat(AbslView(name), ":1:");
  ErrorKind kind = m.find("nested deeper than") != std::string_view::npos
                       ? ErrorKind::kTooDeep
                       : ErrorKind::kMalformedTree;
  if (!absl::StartsWith(m, prefix)) return RequestError(kind, m);
  m.remove_prefix(prefix.size());
  const size_t colon = m.find(": ");
  int column = 0;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(m.substr(0, colon), &column)) {
    return RequestError(kind, s.message());
  }
  return RequestError(
      kind, absl::StrCat(AbslView(name), ", character ", column, ": ", m.substr(colon + 2)));
}

// Vertices [lo, hi) of `ids` as a balanced binary tree appended to `g` in post-order, the left
// half the larger; returns the root. Recursion depth is log2 of the words.
int32_t AppendBalanced(const std::vector<int32_t>& ids, size_t lo, size_t hi, scheduler::Graph* g) {
  if (hi - lo == 1) return g->AddVertex({}, ids[lo]);
  const size_t mid = lo + (hi - lo + 1) / 2;
  const int32_t left = AppendBalanced(ids, lo, mid, g);
  const int32_t right = AppendBalanced(ids, mid, hi, g);
  return g->AddVertex({left, right});
}

// The error of a sentence's word number `word`, at byte `offset`, past the limit on its words:
// max_words, or for a chain (kChain, one round per vertex, <s> included) max_depth - 1 where
// that is less (too_deep then: the rounds are what the limit guards).
absl::Status TooManyWords(std::string_view name, size_t offset, size_t word,
                          const RequestLimits& limits, InputForm form) {
  const std::string where =
      absl::StrCat(AbslView(name), ", character ", offset + 1, " (word ", word, "): ");
  if (form == InputForm::kChain && limits.max_depth - 1 < limits.max_words) {
    return RequestError(
        ErrorKind::kTooDeep,
        absl::StrCat(where, "more than ", limits.max_depth - 1,
                     " words: a language model runs a sentence one round per word and one for "
                     "<s>, and the limit is ",
                     limits.max_depth, " rounds"));
  }
  return RequestError(ErrorKind::kTooWide,
                      absl::StrCat(where, "more than the limit of ", limits.max_words, " words"));
}

// The token ids of a sentence's words, split at spaces and tabs as cavs-train's text reader
// splits a line. REQUIRES: `text` holds a word.
absl::StatusOr<std::vector<int32_t>> SentenceIds(std::string_view text, std::string_view name,
                                                 const examples::Vocabulary& vocabulary,
                                                 const RequestLimits& limits, InputForm form) {
  const int max_words = form == InputForm::kChain ? std::min(limits.max_words, limits.max_depth - 1)
                                                  : limits.max_words;
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    if (IsControl(text[i])) {
      const bool line_break = text[i] == '\n' || text[i] == '\r';
      return RequestError(
          ErrorKind::kMalformedInput,
          absl::StrCat(
              AbslView(name), ", character ", i + 1, ": control byte in a sentence ",
              examples::QuoteForError(text.substr(i, 1)),
              line_break ? " (an input is one sentence: send several as a JSON array)" : ""));
    }
    if (text[i] == ' ' || text[i] == '\t') {
      ++i;
      continue;
    }
    const size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t' && !IsControl(text[i])) ++i;
    if (static_cast<int>(ids.size()) >= max_words) {
      return TooManyWords(name, start, ids.size() + 1, limits, form);
    }
    ids.push_back(vocabulary.Id(text.substr(start, i - start)));
  }
  return ids;
}

absl::StatusOr<scheduler::Graph> ParseSentence(std::string_view text, std::string_view name,
                                               const examples::Vocabulary& vocabulary,
                                               const RequestLimits& limits, InputForm form) {
  CAVS_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                        SentenceIds(text, name, vocabulary, limits, form));
  if (form == InputForm::kChain) {
    return examples::SentenceChain(ids, vocabulary.Id(examples::kBeginToken),
                                   vocabulary.Id(examples::kEndToken));
  }
  scheduler::Graph g;
  AppendBalanced(ids, 0, ids.size(), &g);
  if (const int h = Height(g); h > limits.max_depth) {
    return RequestError(
        ErrorKind::kTooDeep,
        absl::StrCat(AbslView(name), ": a sentence of ", ids.size(), " words is a balanced tree ",
                     h, " levels high, more than the limit of ", limits.max_depth));
  }
  return g;
}

absl::StatusOr<scheduler::Graph> ParseTree(std::string_view text, std::string_view name,
                                           const examples::Vocabulary& vocabulary,
                                           const RequestLimits& limits) {
  examples::SstReadOptions options;
  options.max_line_bytes = text.size() + 1;
  options.max_depth = limits.max_depth;
  options.vocabulary = &vocabulary;
  absl::StatusOr<examples::SstTree> tree = examples::ParseSstTree(text, options, name, 1);
  if (!tree.ok()) return TreeError(tree.status(), name);
  if (static_cast<int>(tree->words.size()) > limits.max_words) {
    return RequestError(ErrorKind::kTooWide,
                        absl::StrCat(AbslView(name), ": ", tree->words.size(),
                                     " words, more than the limit of ", limits.max_words));
  }
  // Binarizing an n-ary node nests deeper than its brackets: the rounds are what count.
  if (const int h = Height(tree->graph); h > limits.max_depth) {
    return RequestError(ErrorKind::kTooDeep,
                        absl::StrCat(AbslView(name), ": the binarized tree is ", h,
                                     " levels high, more than the limit of ", limits.max_depth));
  }
  tree->graph.labels.clear();
  return std::move(tree->graph);
}

// The JSON body's inputs (strings) and options, before any input is parsed.
struct JsonRequest {
  std::vector<std::string> inputs;
  bool nodes = false;
  int top_k = 0;
};

absl::Status JsonError(std::string_view what) {
  return RequestError(ErrorKind::kMalformedJson, absl::StrCat("malformed JSON: ", AbslView(what)));
}

absl::Status TakeInputs(const nlohmann::json& value, std::string_view where, JsonRequest* out) {
  if (value.is_string()) {
    out->inputs.push_back(value.get<std::string>());
    return absl::OkStatus();
  }
  if (!value.is_array()) {
    return JsonError(absl::StrCat(AbslView(where), " is ", value.type_name(),
                                  ", not a string or an array of strings"));
  }
  for (size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_string()) {
      return JsonError(
          absl::StrCat(AbslView(where), "[", i, "] is ", value[i].type_name(), ", not a string"));
    }
    out->inputs.push_back(value[i].get<std::string>());
  }
  return absl::OkStatus();
}

// A language model's "top_k": an integer from 0 to the smaller of the limit and the vocabulary.
absl::Status TakeTopK(const nlohmann::json& value, int most, JsonRequest* out) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > most) {
    const std::string what = value.is_number() ? value.dump() : value.type_name();
    return JsonError(absl::StrCat("\"top_k\" is ", what, ", not an integer from 0 to ", most));
  }
  out->top_k = value.get<int>();
  return absl::OkStatus();
}

// `max_top_k`: the largest "top_k" a kChain request may ask for.
absl::StatusOr<JsonRequest> ParseJson(std::string_view body, InputForm form, int max_top_k) {
  // Values nested deeper than an object's array of strings are refused while parsing (and not
  // kept), so that no input builds a deep document.
  bool too_deep = false;
  auto keep = [&too_deep](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > 2) too_deep = true;
    return depth <= 2;
  };
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(body.begin(), body.end(), keep);
  } catch (const std::exception& e) {  // nlohmann::json::parse_error names the byte
    return JsonError(e.what());
  }
  if (too_deep) return JsonError("nested deeper than an object holding an array of strings");
  JsonRequest out;
  if (doc.is_array()) {
    CAVS_RETURN_IF_ERROR(TakeInputs(doc, "the body", &out));
    return out;
  }
  if (!doc.is_object()) return JsonError("the body is neither an array nor an object");
  const bool chain = form == InputForm::kChain;
  bool has_inputs = false;
  for (const auto& [key, value] : doc.items()) {
    if (key == "inputs") {
      has_inputs = true;
      CAVS_RETURN_IF_ERROR(TakeInputs(value, "\"inputs\"", &out));
    } else if (key == "nodes" && !chain) {
      if (!value.is_boolean()) {
        return JsonError(absl::StrCat("\"nodes\" is ", value.type_name(), ", not true or false"));
      }
      out.nodes = value.get<bool>();
    } else if (key == "top_k" && chain) {
      CAVS_RETURN_IF_ERROR(TakeTopK(value, max_top_k, &out));
    } else {
      return RequestError(
          ErrorKind::kUnknownField,
          absl::StrCat("unknown field ", examples::QuoteForError(key),
                       chain ? " (known for a language model: \"inputs\", \"top_k\")"
                             : " (known: \"inputs\", \"nodes\")"));
    }
  }
  if (!has_inputs) return JsonError("no \"inputs\" field");
  return out;
}

}  // namespace

const char* ErrorKindName(ErrorKind kind) {
  const int i = static_cast<int>(kind);
  return i >= 0 && i < kNumErrorKinds ? kKindNames[i] : "internal";
}

absl::Status RequestError(ErrorKind kind, absl::string_view message) {
  absl::StatusCode code = absl::StatusCode::kInvalidArgument;
  if (kind == ErrorKind::kBodyTooLarge) code = absl::StatusCode::kOutOfRange;
  if (kind == ErrorKind::kQueueFull || kind == ErrorKind::kShuttingDown) {
    code = absl::StatusCode::kUnavailable;
  }
  if (kind == ErrorKind::kInternal) code = absl::StatusCode::kInternal;
  absl::Status s(code, message);
  s.SetPayload(kKindPayload, absl::Cord(absl::StrCat(static_cast<int>(kind))));
  return s;
}

ErrorKind ErrorKindOf(const absl::Status& status) {
  if (status.ok()) return ErrorKind::kNone;
  absl::optional<absl::Cord> payload = status.GetPayload(kKindPayload);
  int kind = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &kind) || kind <= 0 ||
      kind >= kNumErrorKinds) {
    return ErrorKind::kInternal;
  }
  return static_cast<ErrorKind>(kind);
}

absl::StatusOr<scheduler::Graph> ParseInput(std::string_view text, size_t index,
                                            const examples::Vocabulary& vocabulary,
                                            const RequestLimits& limits, InputForm form) {
  const std::string name = absl::StrCat("input ", index);
  text = TrimEnd(text);
  const size_t first = FirstNonBlank(text);
  if (first == text.size()) {
    return RequestError(ErrorKind::kMalformedInput, absl::StrCat(name, " is empty"));
  }
  if (form == InputForm::kTree && text[first] == '(') {
    return ParseTree(text, name, vocabulary, limits);
  }
  return ParseSentence(text, name, vocabulary, limits, form);
}

absl::StatusOr<ParsedRequest> ParseRequest(std::string_view body,
                                           const examples::Vocabulary& vocabulary,
                                           const RequestLimits& limits, InputForm form) {
  const size_t first = FirstNonBlank(body);
  JsonRequest request;
  if (first < body.size() && (body[first] == '[' || body[first] == '{')) {
    CAVS_ASSIGN_OR_RETURN(request,
                          ParseJson(body, form, std::min(limits.max_top_k, vocabulary.size())));
  } else {
    request.inputs.emplace_back(body);
  }
  if (request.inputs.empty() || request.inputs.size() > limits.max_inputs) {
    return RequestError(
        ErrorKind::kTooManyInputs,
        absl::StrCat(request.inputs.size(), " inputs; a request holds 1 to ", limits.max_inputs));
  }
  ParsedRequest out;
  out.nodes = request.nodes;
  out.top_k = request.top_k;
  out.graphs.reserve(request.inputs.size());
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    CAVS_ASSIGN_OR_RETURN(scheduler::Graph g,
                          ParseInput(request.inputs[i], i, vocabulary, limits, form));
    if (form == InputForm::kChain) out.next_tokens.push_back(std::move(g.labels));
    g.labels.clear();
    out.graphs.push_back(std::move(g));
  }
  return out;
}

}  // namespace cavs::serve
