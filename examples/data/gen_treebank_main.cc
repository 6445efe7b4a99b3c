// cavs-gen-treebank: writes the synthetic SST-like treebank (train.txt, dev.txt, test.txt) into
// a folder. With no options but --out_dir it reproduces the shipped data/synthetic/ files:
//   cavs-gen-treebank --out_dir data/synthetic
// Exit status: 0 on success (and for --help), 2 on a bad option (one line naming it, then the
// usage), 1 when the folder cannot be created or a file cannot be written (with the OS's
// reason). --out_dir is created, parents included, where it does not exist.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "examples/data/line_reader.h"
#include "examples/data/text_file.h"
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

// A name of an option this program takes (the values are checked later).
bool IsOption(std::string_view arg) {
  for (std::string_view name :
       {"--out_dir", "--seed", "--content_words", "--train", "--dev", "--test"}) {
    if (arg == name) return true;
  }
  return false;
}

// Parses "--name=value" or "--name value", then checks the values (CheckSyntheticOptions), so
// that a bad one is an error naming the flag, never an internal check failing mid-generation.
// Every error names the argument at fault; *help is set for --help or -h.
absl::Status ParseArgs(int argc, char** argv, Args* args, bool* help) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i], value;
    if (arg == "--help" || arg == "-h") {
      *help = true;
      return absl::OkStatus();
    }
    if (arg.substr(0, 2) != "--") {
      return Usage(absl::StrCat("unexpected argument '", AbslView(arg),
                                "' (options are --name=value or --name value)"));
    }
    const size_t eq = arg.find('=');
    const bool inline_value = eq != std::string_view::npos;
    if (inline_value) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    if (!IsOption(arg)) return Usage(absl::StrCat("unknown option ", AbslView(arg)));
    if (!inline_value) {
      // The next argument, unless it is an option itself ("--out_dir --seed 3").
      if (i + 1 >= argc || std::string_view(argv[i + 1]).substr(0, 2) == "--") {
        return Usage(absl::StrCat(AbslView(arg), " needs a value"));
      }
      value = argv[++i];
    }
    int* size = arg == "--train"           ? &args->sizes[0]
                : arg == "--dev"           ? &args->sizes[1]
                : arg == "--test"          ? &args->sizes[2]
                : arg == "--content_words" ? &args->content_words
                                           : nullptr;
    if (arg == "--out_dir") {
      if (value.empty()) return Usage("--out_dir: the folder name is empty");
      args->out_dir = std::string(value);
    } else if (arg == "--seed") {
      if (!absl::SimpleAtoi(AbslView(value), &args->seed)) {
        return Usage(absl::StrCat("--seed: '", AbslView(value), "' is not a non-negative integer"));
      }
    } else if (!absl::SimpleAtoi(AbslView(value), size)) {
      return Usage(
          absl::StrCat(AbslView(arg), ": '", AbslView(value), "' is not an integer in range"));
    }
  }
  if (args->out_dir.empty()) return Usage("--out_dir is required");
  return cavs::examples::CheckSyntheticOptions(args->seed, args->content_words, args->sizes);
}

// Writes `text` to `path`; an error names the file and the OS's reason.
absl::Status WriteFile(const std::string& path, const std::string& text) {
  if (const auto failed = cavs::examples::WriteWholeFile(path, text)) {
    return absl::InternalError(
        absl::StrCat("cannot write '", path, "': ", std::strerror(failed->error)));
  }
  return absl::OkStatus();
}

// Creates --out_dir (and its parents) where it does not exist yet, then writes the splits.
absl::Status Generate(const Args& args) {
  std::error_code ec;
  std::filesystem::create_directories(args.out_dir, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("--out_dir: cannot create '", args.out_dir, "': ", ec.message()));
  }
  const char* names[3] = {"train", "dev", "test"};
  for (int split = 0; split < 3; ++split) {
    const std::string path = absl::StrCat(args.out_dir, "/", names[split], ".txt");
    const std::string text =
        cavs::examples::SyntheticSplitText(args.seed, args.content_words, split, args.sizes[split]);
    CAVS_RETURN_IF_ERROR(WriteFile(path, text));
    std::printf("%s: %d trees, %zu bytes\n", path.c_str(), args.sizes[split], text.size());
  }
  return absl::OkStatus();
}

void PrintError(const absl::Status& status) {
  std::fprintf(stderr, "cavs-gen-treebank: error: %s\n", std::string(status.message()).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  bool help = false;
  if (absl::Status parsed = ParseArgs(argc, argv, &args, &help); !parsed.ok()) {
    PrintError(parsed);
    return 2;
  }
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (absl::Status generated = Generate(args); !generated.ok()) {
    PrintError(generated);
    return 1;
  }
  return 0;
}
