// cavs-gen-treebank: writes the synthetic SST-like treebank (train.txt, dev.txt, test.txt) into
// a folder. With no options but --out_dir it reproduces the shipped data/synthetic/ files:
//   cavs-gen-treebank --out_dir data/synthetic
// Exit status: 0 on success, 2 on a bad option (one line naming it, then the usage), 1 when a
// file cannot be written.
#include <cstdio>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "examples/data/line_reader.h"
#include "examples/data/treebank_generator.h"

namespace {

using cavs::examples::AbslView;

struct Args {
  std::string out_dir;
  uint64_t seed = cavs::examples::kSyntheticSeed;
  int content_words = cavs::examples::kSyntheticContentWords;
  int sizes[3] = {cavs::examples::kSyntheticTrain, cavs::examples::kSyntheticDev,
                  cavs::examples::kSyntheticTest};
};

constexpr const char* kUsage =
    "usage: cavs-gen-treebank --out_dir DIR [--seed N] [--content_words N]\n"
    "                         [--train N] [--dev N] [--test N]\n";

absl::Status Usage(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(what, "\n", kUsage));
}

// Parses "--name=value" or "--name value", then checks the values (CheckSyntheticOptions), so
// that a bad one is an error naming the flag, never an internal check failing mid-generation.
absl::Status ParseArgs(int argc, char** argv, Args* args) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i], value;
    const size_t eq = arg.find('=');
    if (eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return Usage(absl::StrCat(AbslView(arg), " needs a value"));
    }
    int* size = arg == "--train"           ? &args->sizes[0]
                : arg == "--dev"           ? &args->sizes[1]
                : arg == "--test"          ? &args->sizes[2]
                : arg == "--content_words" ? &args->content_words
                                           : nullptr;
    if (arg == "--out_dir") {
      args->out_dir = std::string(value);
    } else if (arg == "--seed") {
      if (!absl::SimpleAtoi(AbslView(value), &args->seed)) {
        return Usage(absl::StrCat("--seed: '", AbslView(value), "' is not a non-negative integer"));
      }
    } else if (size == nullptr) {
      return Usage(absl::StrCat("unknown option ", AbslView(arg)));
    } else if (!absl::SimpleAtoi(AbslView(value), size)) {
      return Usage(
          absl::StrCat(AbslView(arg), ": '", AbslView(value), "' is not an integer in range"));
    }
  }
  if (args->out_dir.empty()) return Usage("--out_dir is required");
  return cavs::examples::CheckSyntheticOptions(args->seed, args->content_words, args->sizes);
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (absl::Status parsed = ParseArgs(argc, argv, &args); !parsed.ok()) {
    std::fprintf(stderr, "cavs-gen-treebank: error: %s\n", std::string(parsed.message()).c_str());
    return 2;
  }
  const char* names[3] = {"train", "dev", "test"};
  for (int split = 0; split < 3; ++split) {
    const std::string path = absl::StrCat(args.out_dir, "/", names[split], ".txt");
    const std::string text =
        cavs::examples::SyntheticSplitText(args.seed, args.content_words, split, args.sizes[split]);
    if (!WriteFile(path, text)) {
      std::fprintf(stderr, "cavs-gen-treebank: cannot write '%s'\n", path.c_str());
      return 1;
    }
    std::printf("%s: %d trees, %zu bytes\n", path.c_str(), args.sizes[split], text.size());
  }
  return 0;
}
