#include "examples/trainer/trainer_config.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "core/device.h"
#include "core/optimizer.h"
#include "core/status.h"
#include "distributed/builders.h"
#include "examples/trainer/model_registry.h"
#include "ops/kernels.h"
#include "scheduler/plan.h"

#ifndef CAVS_TRAINER_SOURCE_DATA_DIR
#define CAVS_TRAINER_SOURCE_DATA_DIR ""
#endif
#ifndef CAVS_TRAINER_INSTALL_DATA_DIR
#define CAVS_TRAINER_INSTALL_DATA_DIR "/usr/local/share/cavs/data/synthetic"
#endif

namespace cavs::trainer {
namespace {

struct FlagSpec {
  const char* name;
  const char* value_name;  // empty for boolean flags
  const char* help;
  std::function<absl::Status(TrainerConfig&, const std::string&)> set;
};

absl::Status BadValue(const std::string& flag, const std::string& value, const char* what) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", value, "' is not ", what));
}

// The range of an integer flag: within its field's type, and what makes sense for it (a value
// that a narrower type would wrap, 2^32 + 1 epochs becoming 1, is out of range, not wrapped).
struct IntRange {
  const char* name;
  int64_t lo, hi;
};
constexpr IntRange kMaxTrainRange{"max-train", 0, INT64_MAX};
constexpr IntRange kMaxDevRange{"max-dev", 0, INT64_MAX};
constexpr IntRange kEpochsRange{"epochs", 1, 1'000'000};
constexpr IntRange kBatchRange{"batch", 1, 1'000'000};
// A row of a vertex function holds at most 2^24 floats (vertex::kMaxWidth).
constexpr IntRange kHiddenRange{"hidden", 1, int64_t{1} << 24};
constexpr IntRange kEmbedRange{"embed", 1, int64_t{1} << 24};
constexpr IntRange kMinCountRange{"min-count", 1, INT32_MAX};
constexpr IntRange kThreadsRange{"threads", 0, 1024};
constexpr IntRange kPieceBytesRange{"comm-piece-bytes", -1, int64_t{1} << 40};
constexpr IntRange kPlanThreadsRange{"plan-threads", -1, 64};
constexpr IntRange kAutoCandidatesRange{"auto-candidates", 0, 100};
constexpr IntRange kAutoReserveRange{"auto-reserve", 0, 100};
constexpr IntRange kAutoStepsRange{"auto-steps", 1, 1000};
constexpr IntRange kAutoRoundsRange{"auto-rounds", 1, 1000};
constexpr IntRange kAutoProfileStepsRange{"auto-profile-steps", 1, 1000};
constexpr IntRange kAutoBuildersRange{"auto-builders", 0, 1};
constexpr IntRange kAutoEqualWorkRange{"auto-equal-work", 0, 1};

absl::Status OutOfRange(const IntRange& r, const std::string& value) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", r.name, ": ", value, " is out of range (", r.lo, " to ", r.hi, ")"));
}

absl::Status CheckRange(const IntRange& r, int64_t x) {
  return x < r.lo || x > r.hi ? OutOfRange(r, absl::StrCat(x)) : absl::OkStatus();
}

// Whether `v` is a decimal integer, whatever its size: optional sign, digits.
bool LooksLikeInteger(absl::string_view v) {
  v = absl::StripAsciiWhitespace(v);
  if (!v.empty() && (v[0] == '-' || v[0] == '+')) v.remove_prefix(1);
  return !v.empty() && std::all_of(v.begin(), v.end(), absl::ascii_isdigit);
}

template <typename T>
std::function<absl::Status(TrainerConfig&, const std::string&)> Int(const IntRange& range,
                                                                    T TrainerConfig::*field) {
  static_assert(sizeof(T) <= sizeof(int64_t) && std::is_signed_v<T>);
  CAVS_CHECK(range.lo >= std::numeric_limits<T>::min() && range.hi <= std::numeric_limits<T>::max(),
             "--", range.name, ": range wider than its type");
  return [&range, field](TrainerConfig& c, const std::string& v) {
    int64_t x = 0;
    if (!absl::SimpleAtoi(v, &x)) {
      return LooksLikeInteger(v) ? OutOfRange(range, v) : BadValue(range.name, v, "an integer");
    }
    CAVS_RETURN_IF_ERROR(CheckRange(range, x));
    c.*field = static_cast<T>(x);
    return absl::OkStatus();
  };
}

// --seed: any 64-bit unsigned value; a negative one is out of range (it was taken modulo 2^64).
std::function<absl::Status(TrainerConfig&, const std::string&)> Seed() {
  return [](TrainerConfig& c, const std::string& v) {
    uint64_t x = 0;
    if (absl::SimpleAtoi(v, &x)) {
      c.seed = x;
      return absl::OkStatus();
    }
    if (!LooksLikeInteger(v)) return BadValue("seed", v, "an integer");
    return absl::InvalidArgumentError(
        absl::StrCat("--seed: ", v, " is out of range (0 to ", UINT64_MAX, ")"));
  };
}

std::function<absl::Status(TrainerConfig&, const std::string&)> Real(const char* name,
                                                                     double TrainerConfig::*field) {
  return [name, field](TrainerConfig& c, const std::string& v) {
    double x = 0;
    if (!absl::SimpleAtod(v, &x)) return BadValue(name, v, "a number");
    if (!std::isfinite(x)) return BadValue(name, v, "a finite number");
    c.*field = x;
    return absl::OkStatus();
  };
}

// A file or folder: an empty value (`--train=`, a shell variable that was not set) is an
// error rather than the default, which would silently use other data or drop an output.
std::function<absl::Status(TrainerConfig&, const std::string&)> Path(
    const char* name, std::string TrainerConfig::*field) {
  return [name, field](TrainerConfig& c, const std::string& v) {
    if (v.empty()) return absl::InvalidArgumentError(absl::StrCat("--", name, ": empty path"));
    c.*field = v;
    return absl::OkStatus();
  };
}

std::function<absl::Status(TrainerConfig&, const std::string&)> Text(
    std::string TrainerConfig::*field) {
  return [field](TrainerConfig& c, const std::string& v) {
    c.*field = v;
    return absl::OkStatus();
  };
}

absl::Status ParseBool(const std::string& v, bool* out) {
  if (v == "true" || v == "1" || v.empty()) {
    *out = true;
  } else if (v == "false" || v == "0") {
    *out = false;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not true or false"));
  }
  return absl::OkStatus();
}

std::function<absl::Status(TrainerConfig&, const std::string&)> Bool(const char* name,
                                                                     bool TrainerConfig::*field) {
  return [name, field](TrainerConfig& c, const std::string& v) {
    absl::Status s = ParseBool(v, &(c.*field));
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", s.message()));
    return s;
  };
}

// A kernel flag: sets a field of config.kernels, made from the process's options at the first.
std::function<absl::Status(TrainerConfig&, const std::string&)> Kernel(
    const char* name, std::function<absl::Status(ops::KernelOptions&, const std::string&)> set) {
  return [name, set = std::move(set)](TrainerConfig& c, const std::string& v) {
    if (!c.kernels.has_value()) c.kernels = ops::GetKernelOptions();
    absl::Status s = set(*c.kernels, v);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", s.message()));
    return s;
  };
}

std::function<absl::Status(TrainerConfig&, const std::string&)> KernelBool(
    const char* name, bool* (*field)(ops::KernelOptions&)) {
  return Kernel(name, [field](ops::KernelOptions& k, const std::string& v) {
    return ParseBool(v, field(k));
  });
}

absl::Status ParseSmallGemm(ops::KernelOptions& k, const std::string& v) {
  if (v == "off") {
    k.cuda.small_gemm = ops::SmallGemmUse::kOff;
  } else if (v == "where-faster") {
    k.cuda.small_gemm = ops::SmallGemmUse::kWhereFaster;
  } else if (v == "everywhere") {
    k.cuda.small_gemm = ops::SmallGemmUse::kEverywhere;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("'", v, "' is not one of off, where-faster, everywhere"));
  }
  return absl::OkStatus();
}

absl::Status ParseKernelCache(ops::KernelOptions& k, const std::string& v) {
  if (v.empty()) return absl::InvalidArgumentError("empty path (off: no cache)");
  k.cuda.kernel_cache = v != "off";
  k.cuda.kernel_cache_dir = v == "off" ? "" : v;
  return absl::OkStatus();
}

const std::vector<FlagSpec>& Flags() {
  using C = TrainerConfig;
  static const auto* flags = new std::vector<FlagSpec>{
      {"model", "NAME", "tree-lstm | child-sum-tree-lstm | tree-fc | tree-gru | lstm-lm | gru-lm",
       Text(&C::model)},
      {"train", "FILE", "training data (default: the bundled data/synthetic/train.txt)",
       Path("train", &C::train_path)},
      {"dev", "FILE", "dev data (default: the bundled data/synthetic/dev.txt)",
       Path("dev", &C::dev_path)},
      {"test", "FILE",
       "test data, evaluated once at the end (default: the bundled test.txt when --train is not "
       "given, else none)",
       Path("test", &C::test_path)},
      {"format", "FMT", "auto | sst (bracketed trees) | text (one sentence per line)",
       Text(&C::format)},
      {"dev-fraction", "F", "> 0: hold out the last fraction F of --train as dev (ignores --dev)",
       Real("dev-fraction", &C::dev_fraction)},
      {"max-train", "N", "use only the first N training samples (0: all)",
       Int(kMaxTrainRange, &C::max_train)},
      {"max-dev", "N", "use only the first N dev samples (0: all)", Int(kMaxDevRange, &C::max_dev)},
      {"epochs", "N", "training epochs (default 5)", Int(kEpochsRange, &C::epochs)},
      {"batch", "N", "samples per batch (default 25)", Int(kBatchRange, &C::batch)},
      {"hidden", "N", "hidden state size (default 150)", Int(kHiddenRange, &C::hidden)},
      {"embed", "N", "embedding size (default 300)", Int(kEmbedRange, &C::embed)},
      {"optimizer", "NAME", "sgd | adagrad | adam (default adagrad)", Text(&C::optimizer)},
      {"lr", "X", "learning rate (default 0.05)", Real("lr", &C::lr)},
      {"weight-decay", "X", "L2 weight decay (AdamW-style for adam; default 0)",
       Real("weight-decay", &C::weight_decay)},
      {"clip", "X", "> 0: clip the global gradient norm to X (default 0: off)",
       Real("clip", &C::clip)},
      {"dropout", "P", "dropout on the input embedding (default 0)", Real("dropout", &C::dropout)},
      {"min-count", "N", "vocabulary: words seen fewer times become <unk> (default 1)",
       Int(kMinCountRange, &C::min_count)},
      {"seed", "N", "seed of initialization, shuffling and dropout (default 1)", Seed()},
      {"device", "DEV", "cpu | cuda | cuda:N (default cpu)", Text(&C::device)},
      {"threads", "N", "CPU threads (default 0: the runtime's default)",
       Int(kThreadsRange, &C::threads)},
      {"packed-gemm", "BOOL",
       "cpu: the packed-weight GEMM for the rounds, where the CPU has AVX-512F or AVX2 (default "
       "1; 0: OpenBLAS for every GEMM)",
       KernelBool("packed-gemm", [](ops::KernelOptions& k) { return &k.cpu.packed_gemm; })},
      {"packed-gemm-avx2", "BOOL",
       "cpu: where the CPU has AVX-512F, run as a CPU without it would: the packed GEMM's AVX2 "
       "kernel, OpenBLAS for speed (default 0)",
       KernelBool("packed-gemm-avx2",
                  [](ops::KernelOptions& k) { return &k.cpu.packed_gemm_avx2; })},
      {"generated-kernels", "BOOL",
       "cuda: element-wise programs through kernels generated per program shape (default 1; 0: "
       "the interpreter)",
       KernelBool("generated-kernels",
                  [](ops::KernelOptions& k) { return &k.cuda.generated_elementwise; })},
      {"cublas-lt", "BOOL", "cuda: GEMMs through cuBLASLt (default 1; 0: cublasSgemm)",
       KernelBool("cublas-lt", [](ops::KernelOptions& k) { return &k.cuda.cublas_lt; })},
      {"gemm-autotune", "BOOL",
       "cuda: time cuBLASLt's algorithms once per class of GEMMs and keep the fastest (default 0)",
       KernelBool("gemm-autotune", [](ops::KernelOptions& k) { return &k.cuda.gemm_autotune; })},
      {"small-gemm", "WHERE",
       "cuda: where GEMMs take the small-GEMM kernel: off | where-faster | everywhere (default "
       "where-faster)",
       Kernel("small-gemm", ParseSmallGemm)},
      {"cuda-graphs", "BOOL",
       "cuda: each batch's launches captured into a CUDA graph and launched as one (default 1)",
       KernelBool("cuda-graphs", [](ops::KernelOptions& k) { return &k.cuda.graphs; })},
      {"kernel-cache", "DIR",
       "cuda: the generated kernels' on-disk cache (default $XDG_CACHE_HOME/cavs/kernels, else "
       "~/.cache/cavs/kernels; off: none)",
       Kernel("kernel-cache", ParseKernelCache)},
      {"plan-threads", "N",
       "host threads planning the next batches ahead (default -1: none on the CPU, up to 4 on a "
       "GPU; 0: none)",
       Int(kPlanThreadsRange, &C::plan_threads)},
      {"policy", "NAME", "batching policy: height | depth | agenda (default height)",
       Text(&C::policy)},
      {"fold-eval", "WHEN",
       "evaluate with the embeddings' input projections precomputed (x W gathered from E W): "
       "auto (where a set's tokens outnumber the vocabulary 4 times), on or off (default auto)",
       Text(&C::fold_eval)},
      {"checkpoint-dir", "DIR", "write ckpt-<epoch>.cavs here after every epoch",
       Path("checkpoint-dir", &C::checkpoint_dir)},
      {"resume", "", "continue from the latest checkpoint in --checkpoint-dir",
       Bool("resume", &C::resume)},
      {"log-json", "FILE", "write one JSON object per epoch to FILE",
       Path("log-json", &C::log_json)},
      {"csv", "FILE", "write the learning curve (one row per epoch) to FILE", Path("csv", &C::csv)},
      {"plot", "FILE.png", "plot the learning curve with gnuplot (needs --csv or writes one)",
       Path("plot", &C::plot)},
      {"save-best", "FILE",
       "write the parameters of the best dev epoch (the ones --test is evaluated on) to FILE",
       Path("save-best", &C::save_best)},
      {"strategy", "NAME",
       "under mpirun: allreduce | ps | ps-lb | partitioned-ps | hybrid | hier-allreduce | "
       "hier-hybrid | auto (probe the cluster, profile the model, search and try strategies; "
       "docs/distributed.md) (default allreduce)",
       Text(&C::strategy)},
      {"auto-candidates", "N",
       "--strategy=auto: searched strategies tried for a few steps each (default 3)",
       Int(kAutoCandidatesRange, &C::auto_candidates)},
      {"auto-reserve", "N",
       "--strategy=auto: searched strategies after those, tried only where the cost model "
       "corrected by the trials predicts them faster than the best measured (default 6)",
       Int(kAutoReserveRange, &C::auto_reserve)},
      {"auto-steps", "N",
       "--strategy=auto: steps per strategy tried, counted after one to warm up (default 3)",
       Int(kAutoStepsRange, &C::auto_steps)},
      {"auto-rounds", "N",
       "--strategy=auto: visits each strategy's counted steps are split into, the strategies "
       "visited in turn, every other round in reverse order (default 1)",
       Int(kAutoRoundsRange, &C::auto_rounds)},
      {"auto-trial-seconds", "S",
       "--strategy=auto: where steps are short, more steps profiled and counted a strategy "
       "than --auto-profile-steps and --auto-steps, to about S seconds each (at most 60, the "
       "trials in rounds of about 6; 0: the counts as given; default 3)",
       Real("auto-trial-seconds", &C::auto_trial_seconds)},
      {"auto-profile-steps", "N",
       "--strategy=auto: steps profiled under hybrid before the search, counted after one to "
       "warm up (default 3)",
       Int(kAutoProfileStepsRange, &C::auto_profile_steps)},
      {"auto-builders", "BOOL",
       "--strategy=auto: also try every builder, for the comparison in the report (default 1)",
       Int(kAutoBuildersRange, &C::auto_builders)},
      {"auto-equal-work", "BOOL",
       "--strategy=auto: compare trial steps at the profile's work, each step's own work scaled "
       "from its labelled vertices to the profile's (default 1)",
       Int(kAutoEqualWorkRange, &C::auto_equal_work)},
      {"auto-cutoff", "X",
       "--strategy=auto: a builder whose first two counted trial steps are over X times the "
       "best measured stops there (0: every builder runs all its steps; default 1.5)",
       Real("auto-cutoff", &C::auto_cutoff)},
      {"auto-early", "NAME",
       "--strategy=auto: the builder whose units start early that what a unit in flight costs "
       "compute is measured under, for as many steps as the profile: auto (the fastest "
       "predicted with a quarter of a unit in flight on average over its compute), none (no "
       "such steps, no cost), or a builder's name (default none)",
       Text(&C::auto_early)},
      {"allow-compression", "", "--strategy=auto may send fp16 gradients (changes the numbers)",
       Bool("allow-compression", &C::allow_compression)},
      {"profile-out", "FILE",
       "--strategy=auto: write the model's profile (cavs-sim's --profile) to FILE",
       Path("profile-out", &C::profile_out)},
      {"cluster-out", "FILE",
       "--strategy=auto: write the probed cluster description (cavs-sim's --cluster) to FILE",
       Path("cluster-out", &C::cluster_out)},
      {"sync-overlap", "BOOL",
       "under mpirun: start synchronizing each gradient as backward makes it final, overlapping "
       "the rest of backward (false: all after backward, compute free of the synchronizer's "
       "CPU; docs/distributed.md) (default true)",
       Bool("sync-overlap", &C::sync_overlap)},
      {"strategy-file", "FILE", "under mpirun: read the strategy from FILE (docs/distributed.md)",
       Path("strategy-file", &C::strategy_file)},
      {"comm-timeout", "SECONDS", "under mpirun: a peer silent this long is an error (default 60)",
       Real("comm-timeout", &C::comm_timeout)},
      {"comm-piece-bytes", "N",
       "under mpirun: a PS shard's reduce and broadcast in pieces of at most N bytes (default -1: "
       "Open MPI's TCP eager limit less 4 KiB, so no piece waits for a handshake; 0: whole)",
       Int(kPieceBytesRange, &C::comm_piece_bytes)},
      {"trace", "FILE", "write a Chrome/Perfetto trace of every step to FILE.rank<N>.json",
       Path("trace", &C::trace)},
      {"quiet", "", "no progress bar, even on a terminal", Bool("quiet", &C::quiet)},
      {"help", "", "print this help and exit", Bool("help", &C::help)},
  };
  return *flags;
}

const FlagSpec* FindFlag(const std::string& name) {
  std::string canonical = absl::StrReplaceAll(name, {{"_", "-"}});
  for (const FlagSpec& f : Flags()) {
    if (canonical == f.name) return &f;
  }
  return nullptr;
}

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

absl::StatusOr<TrainerConfig> ParseTrainerFlags(const std::vector<std::string>& args) {
  TrainerConfig config;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 3 || arg.rfind("--", 0) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", arg, "' (flags look like --name=value)"));
    }
    size_t eq = arg.find('=');
    std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const FlagSpec* flag = FindFlag(name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " (see --help)"));
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (*flag->value_name != '\0') {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("--", flag->name, " needs a value"));
      }
      value = args[++i];
    }
    CAVS_RETURN_IF_ERROR(flag->set(config, value));
  }
  if (config.help) return config;
  CAVS_RETURN_IF_ERROR(ValidateConfig(config));
  return config;
}

absl::Status ValidateConfig(const TrainerConfig& c) {
  auto bad = [](const std::string& what) { return absl::InvalidArgumentError(what); };
  CAVS_RETURN_IF_ERROR(ParseModelKind(c.model).status());
  CAVS_RETURN_IF_ERROR(core::ParseOptimizerKind(c.optimizer).status());
  CAVS_RETURN_IF_ERROR(core::ParseDevice(c.device).status());
  CAVS_RETURN_IF_ERROR(scheduler::ParsePolicy(c.policy).status());
  if (c.format != "auto" && c.format != "sst" && c.format != "text") {
    return bad(absl::StrCat("--format: '", c.format, "' is not auto, sst or text"));
  }
  for (const auto& [range, x] : {std::pair<const IntRange&, int64_t>{kMaxTrainRange, c.max_train},
                                 {kMaxDevRange, c.max_dev},
                                 {kEpochsRange, c.epochs},
                                 {kBatchRange, c.batch},
                                 {kHiddenRange, c.hidden},
                                 {kEmbedRange, c.embed},
                                 {kMinCountRange, c.min_count},
                                 {kThreadsRange, c.threads},
                                 {kPlanThreadsRange, c.plan_threads},
                                 {kAutoCandidatesRange, c.auto_candidates},
                                 {kAutoReserveRange, c.auto_reserve},
                                 {kAutoStepsRange, c.auto_steps},
                                 {kAutoRoundsRange, c.auto_rounds},
                                 {kAutoProfileStepsRange, c.auto_profile_steps},
                                 {kAutoBuildersRange, c.auto_builders},
                                 {kAutoEqualWorkRange, c.auto_equal_work}}) {
    CAVS_RETURN_IF_ERROR(CheckRange(range, x));
  }
  // The optimizer and the model take these as floats: a value that becomes inf, or 0 without
  // being 0, would fail far from the flag (or train with no effect).
  for (const auto& [flag, x] : {std::pair<const char*, double>{"--lr", c.lr},
                                {"--weight-decay", c.weight_decay},
                                {"--clip", c.clip},
                                {"--dropout", c.dropout}}) {
    const float f = static_cast<float>(x);
    if (!std::isfinite(f) || (x != 0 && f == 0)) {
      return bad(absl::StrCat(flag, ": ", x,
                              " is out of range for a float (magnitudes 1.4e-45 to 3.4e38)"));
    }
  }
  if (!(c.lr > 0)) return bad("--lr must be positive");
  if (!(c.auto_cutoff == 0 || (c.auto_cutoff >= 1 && std::isfinite(c.auto_cutoff)))) {
    return bad(absl::StrCat("--auto-cutoff: ", c.auto_cutoff, " is neither 0 nor >= 1"));
  }
  if (!(c.auto_trial_seconds >= 0 && c.auto_trial_seconds <= 3600)) {
    return bad(absl::StrCat("--auto-trial-seconds: ", c.auto_trial_seconds,
                            " is out of range (0 to 3600)"));
  }
  if (c.weight_decay < 0 || c.clip < 0) return bad("--weight-decay and --clip must be >= 0");
  // As a float (what the model gets): 0.99999999999 rounds to 1, which drops everything.
  if (!(c.dropout >= 0 && static_cast<float>(c.dropout) < 1.0f)) {
    return bad("--dropout must be in [0, 1) (as a float: below 0.99999994)");
  }
  if (!(c.dev_fraction >= 0 && c.dev_fraction < 1)) return bad("--dev-fraction must be in [0, 1)");
  if (c.fold_eval != "auto" && c.fold_eval != "on" && c.fold_eval != "off") {
    return bad(absl::StrCat("--fold-eval: '", c.fold_eval, "' is not one of auto, on, off"));
  }
  if (c.resume && c.checkpoint_dir.empty()) return bad("--resume needs --checkpoint-dir");
  if (!c.strategy.empty() && !c.strategy_file.empty()) {
    return bad("--strategy and --strategy-file exclude each other");
  }
  if (!c.strategy.empty() && c.strategy != "auto") {
    if (!distributed::IsStrategyBuilder(c.strategy)) {
      return bad(absl::StrCat("--strategy: '", c.strategy, "' is not one of ",
                              absl::StrJoin(distributed::StrategyBuilderNames(), ", "), ", auto"));
    }
  }
  if (c.auto_early != "auto" && c.auto_early != "none" &&
      !distributed::IsStrategyBuilder(c.auto_early)) {
    return bad(absl::StrCat("--auto-early: '", c.auto_early, "' is not one of auto, none, ",
                            absl::StrJoin(distributed::StrategyBuilderNames(), ", ")));
  }
  if (c.strategy != "auto" &&
      (!c.profile_out.empty() || !c.cluster_out.empty() || c.allow_compression)) {
    return bad("--profile-out, --cluster-out and --allow-compression need --strategy=auto");
  }
  if (!(c.comm_timeout > 0)) return bad("--comm-timeout must be positive");
  return absl::OkStatus();
}

std::string HelpText() {
  std::string out =
      "Usage: cavs-train [--flag=value ...]\n"
      "Trains a Cavs model (one vertex function, batched over differently shaped graphs).\n"
      "With no flags: a binary Tree-LSTM on the bundled synthetic treebank (data/synthetic).\n"
      "Errors exit with status 2.\n\nFlags:\n";
  for (const FlagSpec& f : Flags()) {
    std::string left = absl::StrCat("  --", f.name);
    if (*f.value_name != '\0') absl::StrAppend(&left, "=", f.value_name);
    left.resize(std::max<size_t>(left.size() + 1, 28), ' ');
    absl::StrAppend(&out, left, f.help, "\n");
  }
  return out;
}

std::string DefaultDataDir() {
  std::string source = CAVS_TRAINER_SOURCE_DATA_DIR;
  if (!source.empty() && IsDir(source)) return source;
  return CAVS_TRAINER_INSTALL_DATA_DIR;
}

}  // namespace cavs::trainer
