#include "examples/data/sst_reader.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace cavs::examples {
namespace {

using scheduler::Graph;

bool IsSpace(unsigned char c) { return c == ' ' || c == '\t'; }
bool IsControl(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }
// A byte that ends a token or a label: whitespace, a bracket or a control byte.
bool IsDelimiter(unsigned char c) { return IsSpace(c) || c == '(' || c == ')' || IsControl(c); }

bool IsBlank(std::string_view line) {
  for (unsigned char c : line) {
    if (!IsSpace(c)) return false;
  }
  return true;
}

// Parses one line with an explicit stack (no recursion), emitting vertices in post-order as
// nodes close: a node's children are all closed, and so emitted, before it.
class TreeParser {
 public:
  TreeParser(std::string_view line, const SstReadOptions& options, std::string_view name,
             int line_number)
      : line_(line), options_(options), name_(name), line_number_(line_number) {}

  absl::StatusOr<SstTree> Parse();

 private:
  // An open node: its label, where it opened, its finished children (pending_ from
  // first_child on) or its one bare token (a leaf).
  struct Frame {
    size_t open_pos;
    int32_t label;
    size_t first_child;
    int32_t word = -1;
  };

  // "name:line:column: message" for the byte at 0-based `pos`.
  absl::Status Error(size_t pos, std::string_view message) const {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(name_), ":", line_number_, ":", pos + 1, ": ", AbslView(message)));
  }
  std::string_view ReadWord();  // the maximal run of non-delimiter bytes at pos_
  void SkipSpaces() {
    while (pos_ < line_.size() && IsSpace(line_[pos_])) ++pos_;
  }
  absl::Status Step();
  absl::Status Open();
  absl::Status Close();
  absl::Status Token();
  // Emits the vertex (or vertices) of closed node `f`, whose children are
  // pending_[f.first_child..]; returns the id of the one standing for the whole node.
  absl::StatusOr<int32_t> EmitNode(const Frame& f, size_t close_pos);

  std::string_view line_;
  const SstReadOptions& options_;
  std::string_view name_;
  int line_number_;
  size_t pos_ = 0;
  std::vector<Frame> stack_;
  std::vector<int32_t> pending_;  // finished children of the open nodes, innermost last
  SstTree tree_;
  bool done_ = false;  // the root has closed
};

std::string_view TreeParser::ReadWord() {
  const size_t start = pos_;
  while (pos_ < line_.size() && !IsDelimiter(line_[pos_])) ++pos_;
  return line_.substr(start, pos_ - start);
}

absl::StatusOr<SstTree> TreeParser::Parse() {
  SkipSpaces();
  if (pos_ == line_.size() || line_[pos_] != '(') {
    return Error(pos_, absl::StrCat("expected '(' to start a tree, got ",
                                    pos_ == line_.size() ? "end of line"
                                                         : QuoteForError(line_.substr(pos_))));
  }
  while (true) {
    SkipSpaces();
    if (pos_ == line_.size()) break;
    absl::Status step = Step();
    if (!step.ok()) return step;
  }
  if (!stack_.empty()) {
    return Error(line_.size(), absl::StrCat("unbalanced brackets: end of line with ", stack_.size(),
                                            " '(' not closed (the innermost at column ",
                                            stack_.back().open_pos + 1, ")"));
  }
  return std::move(tree_);
}

absl::Status TreeParser::Step() {
  const unsigned char c = line_[pos_];
  if (IsControl(c)) {
    return Error(pos_, absl::StrCat("invalid control byte ", QuoteForError(line_.substr(pos_, 1))));
  }
  if (done_) {
    return c == ')' ? Error(pos_, "unbalanced brackets: ')' with no matching '('")
                    : Error(pos_, absl::StrCat("unexpected text after the tree: ",
                                               QuoteForError(line_.substr(pos_))));
  }
  if (c == '(') return Open();
  if (c == ')') return Close();
  return Token();
}

absl::Status TreeParser::Open() {
  const size_t open_pos = pos_;
  if (static_cast<int>(stack_.size()) >= options_.max_depth) {
    return Error(open_pos, absl::StrCat("tree nested deeper than ", options_.max_depth));
  }
  if (!stack_.empty() && stack_.back().word >= 0) {
    return Error(open_pos, absl::StrCat("subtree inside the leaf opened at column ",
                                        stack_.back().open_pos + 1, "; a leaf is (label token)"));
  }
  ++pos_;
  SkipSpaces();
  const size_t label_pos = pos_;
  const std::string_view label = ReadWord();
  if (label.empty()) {
    return Error(label_pos, absl::StrCat("missing label after '(', got ",
                                         pos_ == line_.size() ? "end of line"
                                                              : QuoteForError(line_.substr(pos_))));
  }
  if (label.size() != 1 || label[0] < '0' || label[0] > '4') {
    return Error(label_pos, absl::StrCat("bad label ", QuoteForError(label), ", expected 0-4"));
  }
  stack_.push_back({open_pos, label[0] - '0', pending_.size()});
  return absl::OkStatus();
}

absl::Status TreeParser::Token() {
  const size_t token_pos = pos_;
  const std::string_view token = ReadWord();
  Frame& f = stack_.back();  // not empty: the line starts with '(' and the root is open
  if (f.word >= 0) {
    return Error(token_pos, absl::StrCat("second token ", QuoteForError(token),
                                         " in the leaf opened at column ", f.open_pos + 1,
                                         "; a leaf is (label token)"));
  }
  if (pending_.size() > f.first_child) {
    return Error(token_pos, absl::StrCat("bare token ", QuoteForError(token),
                                         " beside subtrees; write it as (label token)"));
  }
  f.word = static_cast<int32_t>(tree_.words.size());
  tree_.words.emplace_back(token);
  return absl::OkStatus();
}

absl::Status TreeParser::Close() {
  const Frame f = stack_.back();
  stack_.pop_back();
  CAVS_ASSIGN_OR_RETURN(const int32_t id, EmitNode(f, pos_));
  ++pos_;
  pending_.resize(f.first_child);
  if (stack_.empty()) {
    done_ = true;
  } else {
    pending_.push_back(id);
  }
  return absl::OkStatus();
}

absl::StatusOr<int32_t> TreeParser::EmitNode(const Frame& f, size_t close_pos) {
  Graph& g = tree_.graph;
  if (f.word >= 0) {
    const int32_t token =
        options_.vocabulary != nullptr ? options_.vocabulary->Id(tree_.words[f.word]) : f.word;
    return g.AddVertex({}, token, f.label);
  }
  const size_t n = pending_.size() - f.first_child;
  if (n == 0) {
    return Error(close_pos, absl::StrCat("empty node: the '(' at column ", f.open_pos + 1,
                                         " has a label but no token or subtree"));
  }
  if (n == 1) {  // unary: collapse into the child, keeping this (the upper) label
    const int32_t child = pending_.back();
    g.labels[child] = f.label;
    return child;
  }
  // n >= 2: right-branching binarization; new vertices are labelled like this node.
  int32_t right = pending_.back();
  for (size_t i = pending_.size() - 1; i-- > f.first_child;) {
    right = g.AddVertex({pending_[i], right}, -1, f.label);
  }
  return right;
}

}  // namespace

absl::StatusOr<SstTree> ParseSstTree(std::string_view line, const SstReadOptions& options,
                                     std::string_view name, int line_number) {
  return TreeParser(line, options, name, line_number).Parse();
}

absl::StatusOr<std::vector<SstTree>> ReadSstLines(LineReader& reader,
                                                  const SstReadOptions& options) {
  std::vector<SstTree> trees;
  std::string_view line;
  while (true) {
    CAVS_ASSIGN_OR_RETURN(const bool more, reader.Next(&line));
    if (!more) break;
    if (IsBlank(line)) continue;
    CAVS_ASSIGN_OR_RETURN(SstTree tree,
                          ParseSstTree(line, options, reader.name(), reader.line_number()));
    trees.push_back(std::move(tree));
  }
  return trees;
}

absl::StatusOr<std::vector<SstTree>> ReadSstFile(const std::string& path,
                                                 const SstReadOptions& options) {
  CAVS_ASSIGN_OR_RETURN(LineReader reader, LineReader::OpenFile(path, options.max_line_bytes));
  return ReadSstLines(reader, options);
}

absl::StatusOr<std::vector<SstTree>> ReadSstString(std::string_view text, std::string_view name,
                                                   const SstReadOptions& options) {
  LineReader reader = LineReader::FromString(text, name, options.max_line_bytes);
  return ReadSstLines(reader, options);
}

void AssignTokenIds(const Vocabulary& vocabulary, std::vector<SstTree>* trees) {
  for (SstTree& tree : *trees) {
    Graph& g = tree.graph;
    size_t k = 0;
    for (int v = 0; v < g.num_vertices(); ++v) {
      if (g.num_children(v) != 0) continue;
      CAVS_CHECK(k < tree.words.size(), "tree has more leaves than words");
      g.tokens[v] = vocabulary.Id(tree.words[k++]);
    }
  }
}

void CountWords(const std::vector<SstTree>& trees, WordCounter* counter) {
  for (const SstTree& tree : trees) counter->AddAll(tree.words);
}

namespace {

absl::Status VertexError(int v, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("SST tree vertex ", v, ": ", AbslView(what)));
}

// Checks vertex v's arity, label, token and exact post-order placement; `size` holds the
// subtree sizes of the vertices before v.
absl::Status CheckVertex(const Graph& g, int v, std::vector<int32_t>& size, int* leaves) {
  if (g.labels[v] < 0 || g.labels[v] >= kSstNumClasses) {
    return VertexError(v, absl::StrCat("label ", g.labels[v], " not in 0-4"));
  }
  const int n = g.num_children(v);
  if (n == 0) {
    if (g.tokens[v] < 0) return VertexError(v, absl::StrCat("leaf token ", g.tokens[v], " < 0"));
    size[v] = 1;
    ++*leaves;
    return absl::OkStatus();
  }
  if (n != 2) return VertexError(v, absl::StrCat(n, " children, expected 0 or 2"));
  if (g.tokens[v] != -1) {
    return VertexError(v, absl::StrCat("internal vertex has token ", g.tokens[v]));
  }
  const int32_t left = g.child(v, 0), right = g.child(v, 1);
  if (right != v - 1 || right < 0 || left < 0 || left != right - size[right]) {
    return VertexError(v, absl::StrCat("children (", left, ", ", right, ") not in post-order"));
  }
  size[v] = 1 + size[left] + size[right];
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSstTree(const SstTree& tree) {
  const Graph& g = tree.graph;
  CAVS_RETURN_IF_ERROR(scheduler::ValidateGraph(g, 0, 2));
  const int n = g.num_vertices();
  if (n == 0) return absl::InvalidArgumentError("SST tree has no vertices");
  if (static_cast<int>(g.labels.size()) != n || static_cast<int>(g.tokens.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("SST tree of ", n, " vertices has ",
                                                   g.labels.size(), " labels and ", g.tokens.size(),
                                                   " tokens"));
  }
  std::vector<int32_t> size(n, 0);
  int leaves = 0;
  for (int v = 0; v < n; ++v) CAVS_RETURN_IF_ERROR(CheckVertex(g, v, size, &leaves));
  if (size[n - 1] != n) {
    return VertexError(n - 1, absl::StrCat("the last vertex spans ", size[n - 1], " of ", n,
                                           " vertices; it must be the only root"));
  }
  if (leaves != static_cast<int>(tree.words.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("SST tree has ", leaves, " leaves but ", tree.words.size(), " words"));
  }
  return absl::OkStatus();
}

std::string FormatSstTree(const SstTree& tree) {
  const Graph& g = tree.graph;
  std::vector<int32_t> word_of(g.num_vertices(), -1);
  for (int v = 0, k = 0; v < g.num_vertices(); ++v) {
    if (g.num_children(v) == 0) word_of[v] = k++;
  }
  constexpr int32_t kClose = -1, kSpace = -2;
  std::string out;
  std::vector<int32_t> todo = {g.num_vertices() - 1};  // vertices to write, or kClose/kSpace
  while (!todo.empty()) {
    const int32_t v = todo.back();
    todo.pop_back();
    if (v == kClose || v == kSpace) {
      out += v == kClose ? ')' : ' ';
      continue;
    }
    absl::StrAppend(&out, "(", g.labels[v], " ");
    if (word_of[v] >= 0) {
      absl::StrAppend(&out, tree.words[word_of[v]], ")");
      continue;
    }
    todo.insert(todo.end(), {kClose, g.child(v, 1), kSpace, g.child(v, 0)});
  }
  return out;
}

absl::StatusOr<SstDataset> LoadSstDataset(const std::string& train_path,
                                          const std::string& dev_path, const std::string& test_path,
                                          int min_count) {
  SstDataset data;
  CAVS_ASSIGN_OR_RETURN(data.train, ReadSstFile(train_path));
  if (data.train.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("no trees in '", train_path, "'"));
  }
  WordCounter counter;
  CountWords(data.train, &counter);
  data.vocabulary = Vocabulary::FromCounts(counter.counts(), min_count);
  AssignTokenIds(data.vocabulary, &data.train);
  SstReadOptions options;
  options.vocabulary = &data.vocabulary;
  CAVS_ASSIGN_OR_RETURN(data.dev, ReadSstFile(dev_path, options));
  if (!test_path.empty()) {
    CAVS_ASSIGN_OR_RETURN(data.test, ReadSstFile(test_path, options));
  }
  return data;
}

}  // namespace cavs::examples
