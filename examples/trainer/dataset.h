// The data of a cavs-train run: train/dev/test graphs and the vocabulary they share.
//
// Tree models read SST files; language models read sentences (one per line) or, with an SST
// file, the sentences of its trees. --format=auto decides once, by the training file's first
// non-blank byte, sniffed from the reader that then reads it on (so --train may be a pipe), and
// the dev and test files are read in that format. Either way the vocabulary is built from the
// training split only (after --dev-fraction holds out the tail of the training file), so dev words
// unseen in training are <unk>.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "examples/data/vocabulary.h"
#include "examples/trainer/trainer_config.h"
#include "scheduler/graph.h"

namespace cavs::trainer {

struct Dataset {
  std::vector<scheduler::Graph> train, dev, test;
  int64_t vocab_size = 0;
  examples::Vocabulary vocabulary;  // what checkpoints carry for serving (docs/checkpoint.md)
  uint64_t vocab_hash = 0;          // FNV-1a over the words in id order: a checkpoint's guard
  // FNV-1a over the training samples as trained on (after --max-train and --dev-fraction):
  // structure, token ids and labels (HashGraphs). With vocab_hash, what a resumed run must
  // match for its parameters to be those of an uninterrupted run.
  uint64_t train_hash = 0;
  int classes = 0;  // 5 for sentiment; vocab_size for a language model
  bool language_model = false;
};

// Loads the files named by `config` (the bundled synthetic treebank where none are given).
// Errors: a missing file (NotFound), a path that cannot be looked at or is a directory
// (InvalidArgument naming the flag), a malformed line (InvalidArgument "file:line:col: ..."),
// an empty training, dev or test set (naming the file).
[[nodiscard]] absl::StatusOr<Dataset> LoadDataset(const TrainerConfig& config);

// The input files `config` reads, as (flag, path): --train (the bundled file when none is
// given), --dev unless --dev-fraction replaces it, --test if any.
std::vector<std::pair<std::string, std::string>> InputFiles(const TrainerConfig& config);

// FNV-1a over every graph's vertex count, child slots, tokens, labels and features, in order:
// two lists hash alike only if they hold the same samples in the same order (up to hash
// collisions).
uint64_t HashGraphs(const std::vector<scheduler::Graph>& graphs);

}  // namespace cavs::trainer
