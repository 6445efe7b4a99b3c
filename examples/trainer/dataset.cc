#include "examples/trainer/dataset.h"

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/random.h"
#include "core/status.h"
#include "examples/data/sst_reader.h"
#include "examples/data/text_reader.h"
#include "examples/data/vocabulary.h"
#include "examples/trainer/model_registry.h"

namespace cavs::trainer {
namespace {

using Sentences = std::vector<std::vector<std::string>>;

struct Paths {
  std::string train, dev, test;
};

Paths ResolvePaths(const TrainerConfig& c) {
  Paths p{c.train_path, c.dev_path, c.test_path};
  if (p.train.empty()) {
    std::string dir = DefaultDataDir();
    p.train = dir + "/train.txt";
    if (p.dev.empty()) p.dev = dir + "/dev.txt";
    if (p.test.empty()) p.test = dir + "/test.txt";
  }
  return p;
}

// The training file, opened, and whether the run reads SST trees: --format, or with auto the
// first non-blank byte of the training file ('(' means SST). The byte is sniffed from the
// reader that then reads the file on, so a pipe (--train=<(...)), which cannot be read twice,
// loses nothing; dev and test files are read in the same format, never sniffed on their own.
struct TrainingInput {
  examples::LineReader reader;
  bool sst;
};

absl::StatusOr<TrainingInput> OpenTraining(const std::string& path, const std::string& format) {
  CAVS_ASSIGN_OR_RETURN(examples::LineReader reader, examples::LineReader::OpenFile(path));
  bool sst = format == "sst";
  if (format == "auto") {
    CAVS_ASSIGN_OR_RETURN(std::optional<char> first, reader.PeekNonBlank());
    sst = first == '(';
  }
  return TrainingInput{std::move(reader), sst};
}

uint64_t HashVocabulary(const examples::Vocabulary& v) {
  std::string all;
  for (int32_t i = 0; i < v.size(); ++i) absl::StrAppend(&all, v.Word(i), "\n");
  return core::HashName(all);
}

template <typename T>
void Truncate(std::vector<T>* items, int64_t max) {
  if (max > 0 && static_cast<int64_t>(items->size()) > max) items->resize(max);
}

// Moves the last `fraction` of `train` into `dev` (which it replaces).
template <typename T>
void HoldOut(double fraction, std::vector<T>* train, std::vector<T>* dev) {
  if (fraction <= 0) return;
  size_t keep = train->size() - static_cast<size_t>(fraction * train->size());
  dev->assign(std::make_move_iterator(train->begin() + keep),
              std::make_move_iterator(train->end()));
  train->resize(keep);
}

absl::StatusOr<std::vector<examples::SstTree>> ReadTrees(const std::string& path) {
  if (path.empty()) return std::vector<examples::SstTree>{};
  return examples::ReadSstFile(path);
}

absl::StatusOr<Dataset> LoadSentiment(const TrainerConfig& c, const Paths& p,
                                      examples::LineReader& train_reader) {
  CAVS_ASSIGN_OR_RETURN(auto train, examples::ReadSstLines(train_reader));
  std::vector<examples::SstTree> dev, test;
  if (c.dev_fraction > 0) {
    HoldOut(c.dev_fraction, &train, &dev);
  } else {
    CAVS_ASSIGN_OR_RETURN(dev, ReadTrees(p.dev));
  }
  CAVS_ASSIGN_OR_RETURN(test, ReadTrees(p.test));
  Truncate(&train, c.max_train);
  Truncate(&dev, c.max_dev);
  examples::WordCounter counter;
  examples::CountWords(train, &counter);
  examples::Vocabulary vocab = examples::Vocabulary::FromCounts(counter.counts(), c.min_count);
  Dataset d;
  for (auto* split : {&train, &dev, &test}) examples::AssignTokenIds(vocab, split);
  auto graphs = [](std::vector<examples::SstTree>& trees) {
    std::vector<scheduler::Graph> out;
    out.reserve(trees.size());
    for (auto& t : trees) out.push_back(std::move(t.graph));
    return out;
  };
  d.train = graphs(train);
  d.dev = graphs(dev);
  d.test = graphs(test);
  d.vocab_size = vocab.size();
  d.vocab_hash = HashVocabulary(vocab);
  d.vocabulary = std::move(vocab);
  d.classes = examples::kSstNumClasses;
  return d;
}

// The sentences of `reader`: its lines, or with `sst` the words of its trees.
absl::StatusOr<Sentences> ReadSentences(examples::LineReader& reader, bool sst) {
  if (!sst) return examples::ReadTextWords(reader);
  CAVS_ASSIGN_OR_RETURN(auto trees, examples::ReadSstLines(reader));
  Sentences out;
  for (auto& t : trees) out.push_back(std::move(t.words));
  return out;
}

absl::StatusOr<Sentences> ReadSentences(const std::string& path, bool sst) {
  if (path.empty()) return Sentences{};
  CAVS_ASSIGN_OR_RETURN(examples::LineReader reader, examples::LineReader::OpenFile(path));
  return ReadSentences(reader, sst);
}

std::vector<scheduler::Graph> Chains(const Sentences& sentences,
                                     const examples::Vocabulary& vocab) {
  int32_t begin = vocab.Id(examples::kBeginToken), end = vocab.Id(examples::kEndToken);
  std::vector<scheduler::Graph> out;
  out.reserve(sentences.size());
  for (const auto& words : sentences) {
    std::vector<int32_t> ids;
    for (const std::string& w : words) ids.push_back(vocab.Id(w));
    out.push_back(examples::SentenceChain(ids, begin, end));
  }
  return out;
}

absl::StatusOr<Dataset> LoadLanguage(const TrainerConfig& c, const Paths& p, TrainingInput& input) {
  CAVS_ASSIGN_OR_RETURN(Sentences train, ReadSentences(input.reader, input.sst));
  Sentences dev, test;
  if (c.dev_fraction > 0) {
    HoldOut(c.dev_fraction, &train, &dev);
  } else {
    CAVS_ASSIGN_OR_RETURN(dev, ReadSentences(p.dev, input.sst));
  }
  CAVS_ASSIGN_OR_RETURN(test, ReadSentences(p.test, input.sst));
  Truncate(&train, c.max_train);
  Truncate(&dev, c.max_dev);
  examples::Vocabulary vocab = examples::BuildTextVocabularyFromWords(train, c.min_count);
  Dataset d;
  d.train = Chains(train, vocab);
  d.dev = Chains(dev, vocab);
  d.test = Chains(test, vocab);
  d.vocab_size = vocab.size();
  d.vocab_hash = HashVocabulary(vocab);
  d.classes = vocab.size();
  d.vocabulary = std::move(vocab);
  d.language_model = true;
  return d;
}

// An input file that can be read: NotFound where there is none, InvalidArgument naming the flag
// where the path cannot even be looked at (a symlink loop, a name too long, no permission) or
// is a directory. The error_code overloads: the throwing ones would abort the binary.
absl::Status CheckInputFile(const std::string& flag, const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (st.type() == std::filesystem::file_type::not_found) {
    return absl::NotFoundError(absl::StrCat(flag, ": ", path, ": no such file"));
  }
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": cannot open ", path, ": ", ec.message()));
  }
  if (std::filesystem::is_directory(st)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " is a directory"));
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t HashGraphs(const std::vector<scheduler::Graph>& graphs) {
  uint64_t h = core::kFnv1aBasis;
  auto add = [&h](const void* data, size_t bytes) {
    h = core::Fnv1a(std::string_view(static_cast<const char*>(data), bytes), h);
  };
  // Each vector behind its length, so that no two different lists share a byte stream.
  auto add_vector = [&add](const auto& v) {
    const uint64_t n = v.size();
    add(&n, sizeof(n));
    add(v.data(), v.size() * sizeof(v[0]));
  };
  for (const scheduler::Graph& g : graphs) {
    add_vector(g.child_offsets);
    add_vector(g.child_ids);
    add_vector(g.tokens);
    add_vector(g.labels);
    add_vector(g.features);
    add(&g.feature_dim, sizeof(g.feature_dim));
  }
  return h;
}

std::vector<std::pair<std::string, std::string>> InputFiles(const TrainerConfig& config) {
  const Paths p = ResolvePaths(config);
  std::vector<std::pair<std::string, std::string>> out = {{"--train", p.train}};
  if (!p.dev.empty() && config.dev_fraction <= 0) out.emplace_back("--dev", p.dev);
  if (!p.test.empty()) out.emplace_back("--test", p.test);
  return out;
}

absl::StatusOr<Dataset> LoadDataset(const TrainerConfig& config) {
  CAVS_ASSIGN_OR_RETURN(ModelKind kind, ParseModelKind(config.model));
  Paths paths = ResolvePaths(config);
  if (paths.dev.empty() && config.dev_fraction <= 0) {
    return absl::InvalidArgumentError("no dev set: give --dev or --dev-fraction");
  }
  for (const auto& [flag, path] : InputFiles(config)) {
    CAVS_RETURN_IF_ERROR(CheckInputFile(flag, path));
  }
  CAVS_ASSIGN_OR_RETURN(TrainingInput input, OpenTraining(paths.train, config.format));
  Dataset d;
  if (IsLanguageModel(kind)) {
    CAVS_ASSIGN_OR_RETURN(d, LoadLanguage(config, paths, input));
  } else {
    if (!input.sst) {
      return absl::InvalidArgumentError(absl::StrCat(paths.train, ": --model=", config.model,
                                                     " needs SST trees (bracketed, one per line)"));
    }
    CAVS_ASSIGN_OR_RETURN(d, LoadSentiment(config, paths, input.reader));
  }
  if (d.train.empty()) return absl::InvalidArgumentError(paths.train + ": no training samples");
  d.train_hash = HashGraphs(d.train);
  if (d.dev.empty()) {
    return absl::InvalidArgumentError(
        config.dev_fraction > 0
            ? absl::StrCat("the dev set is empty: --dev-fraction=", config.dev_fraction, " of ",
                           paths.train, " holds no sample")
            : absl::StrCat("the dev set is empty: ", paths.dev, " (--dev) has no samples"));
  }
  // An empty test file is a mistake as much as an empty dev file; ignoring it would hide it.
  if (!paths.test.empty() && d.test.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the test set is empty: ", paths.test, " (--test) has no samples"));
  }
  return d;
}

}  // namespace cavs::trainer
