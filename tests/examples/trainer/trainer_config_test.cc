#include "examples/trainer/trainer_config.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace cavs::trainer {
namespace {

absl::StatusOr<TrainerConfig> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "cavs-train");
  return ParseTrainerFlags(args);
}

void ExpectError(std::vector<std::string> args, const std::string& fragment) {
  absl::StatusOr<TrainerConfig> c = Parse(args);
  ASSERT_FALSE(c.ok()) << args[0];
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(fragment), std::string::npos) << c.status();
  EXPECT_EQ(std::string(c.status().message()).find('\n'), std::string::npos);
}

TEST(TrainerFlagsTest, DefaultsAreTheMainJob) {
  absl::StatusOr<TrainerConfig> c = Parse({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model, "tree-lstm");
  EXPECT_EQ(c->batch, 25);
  EXPECT_EQ(c->hidden, 150);
  EXPECT_EQ(c->embed, 300);
  EXPECT_EQ(c->optimizer, "adagrad");
  EXPECT_DOUBLE_EQ(c->lr, 0.05);
  EXPECT_TRUE(c->train_path.empty());
}

TEST(TrainerFlagsTest, ParsesBothFormsAndUnderscores) {
  absl::StatusOr<TrainerConfig> c =
      Parse({"--model=lstm-lm", "--epochs", "4", "--weight_decay=1e-4", "--resume",
             "--checkpoint-dir", "/tmp/x", "--device=cpu", "--policy=agenda", "--seed=7"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model, "lstm-lm");
  EXPECT_EQ(c->epochs, 4);
  EXPECT_DOUBLE_EQ(c->weight_decay, 1e-4);
  EXPECT_TRUE(c->resume);
  EXPECT_EQ(c->checkpoint_dir, "/tmp/x");
  EXPECT_EQ(c->policy, "agenda");
  EXPECT_EQ(c->seed, 7u);
  EXPECT_EQ(c->plan_threads, -1);
  EXPECT_EQ(Parse({"--plan-threads=3"})->plan_threads, 3);
  EXPECT_TRUE(Parse({})->sync_overlap);
  EXPECT_FALSE(Parse({"--sync-overlap=false"})->sync_overlap);
  EXPECT_TRUE(Parse({"--sync_overlap", "true"})->sync_overlap);
}

TEST(TrainerFlagsTest, HelpListsEveryFlag) {
  absl::StatusOr<TrainerConfig> c = Parse({"--help"});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->help);
  std::string help = HelpText();
  for (const char* flag :
       {"--model",        "--train",   "--dev",     "--test",           "--epochs",
        "--batch",        "--hidden",  "--embed",   "--optimizer",      "--lr",
        "--weight-decay", "--clip",    "--dropout", "--min-count",      "--seed",
        "--device",       "--threads", "--policy",  "--checkpoint-dir", "--resume",
        "--log-json",     "--csv",     "--plot",    "--plan-threads"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
  }
}

TEST(TrainerFlagsTest, ErrorsNameTheFlag) {
  ExpectError({"--bogus=1"}, "unknown flag --bogus");
  ExpectError({"--epochs"}, "--epochs needs a value");
  ExpectError({"--epochs=two"}, "--epochs: 'two' is not an integer");
  ExpectError({"--lr=fast"}, "--lr: 'fast' is not a number");
  ExpectError({"--model=transformer"}, "unknown model 'transformer'");
  ExpectError({"--optimizer=lbfgs"}, "lbfgs");
  ExpectError({"--device=tpu"}, "unknown device");
  ExpectError({"--policy=random"}, "random");
  ExpectError({"--epochs=0"}, "--epochs");
  ExpectError({"--dropout=1.5"}, "--dropout");
  ExpectError({"--resume"}, "--resume needs --checkpoint-dir");
  ExpectError({"--resume=maybe"}, "true or false");
  ExpectError({"--sync-overlap=sometimes"}, "--sync-overlap: 'sometimes' is not true or false");
  ExpectError({"stray"}, "unexpected argument 'stray'");
  ExpectError({"--strategy=ring"}, "--strategy: 'ring' is not one of allreduce, ps, ps-lb");
  ExpectError({"--strategy=ps", "--strategy-file=s.txt"}, "exclude each other");
  ExpectError({"--auto-steps=0"}, "--auto-steps: 0 is out of range (1 to 1000)");
  ExpectError({"--auto-profile-steps=0"}, "--auto-profile-steps: 0 is out of range (1 to 1000)");
  ExpectError({"--auto-candidates=101"}, "--auto-candidates: 101 is out of range (0 to 100)");
  ExpectError({"--auto-reserve=-1"}, "--auto-reserve: -1 is out of range (0 to 100)");
  ExpectError({"--auto-builders=2"}, "--auto-builders: 2 is out of range (0 to 1)");
  ExpectError({"--auto-cutoff=0.5"}, "--auto-cutoff: 0.5 is neither 0 nor >= 1");
  ExpectError({"--auto-early=soon"}, "--auto-early: 'soon' is not one of auto, none, allreduce");
  ExpectError({"--auto-trial-seconds=-1"}, "--auto-trial-seconds: -1 is out of range (0 to 3600)");
  ExpectError({"--profile-out=p.txt"}, "need --strategy=auto");
  ExpectError({"--strategy=allreduce", "--allow-compression"}, "need --strategy=auto");
  ExpectError({"--comm-timeout=0"}, "--comm-timeout must be positive");
  ExpectError({"--plan-threads=-2"}, "--plan-threads: -2 is out of range (-1 to 64)");
  ExpectError({"--fold-eval=maybe"}, "--fold-eval: 'maybe' is not one of auto, on, off");
}

// An empty path would silently mean the default (the bundled data, no output).
TEST(TrainerFlagsTest, EmptyPathsAreErrors) {
  for (const char* flag : {"train", "dev", "test", "checkpoint-dir", "log-json", "csv", "plot",
                           "strategy-file", "trace"}) {
    ExpectError({std::string("--") + flag + "="}, std::string("--") + flag + ": empty path");
  }
  ExpectError({"--train", ""}, "--train: empty path");
}

// Values that the trainer hands on as floats must stay finite and nonzero as floats.
TEST(TrainerFlagsTest, NumbersMustFitTheirType) {
  ExpectError({"--lr=1e40"}, "--lr: 1e+40 is out of range for a float");
  ExpectError({"--lr=1e-50"}, "--lr: 1e-50 is out of range for a float");
  ExpectError({"--clip=1e-320"}, "--clip: ");
  ExpectError({"--weight-decay=1e39"}, "--weight-decay: ");
  ExpectError({"--lr=nan"}, "--lr: 'nan' is not a finite number");
  ExpectError({"--comm-timeout=inf"}, "--comm-timeout: 'inf' is not a finite number");
  ExpectError({"--dropout=0.99999999999"}, "--dropout must be in [0, 1)");  // 1.0f as a float
  EXPECT_TRUE(Parse({"--dropout=0.9999", "--lr=1e-30", "--clip=0"}).ok());
}

// An integer flag out of its field's type or its sane range is an error naming the flag; before,
// 2^32 + 1 epochs trained 1 epoch and --batch=4294967321 trained as --batch=25.
TEST(TrainerFlagsTest, IntegersOutOfRangeAreErrorsNotWrapped) {
  ExpectError({"--epochs=4294967297"}, "--epochs: 4294967297 is out of range (1 to 1000000)");
  ExpectError({"--batch=4294967321"}, "--batch: 4294967321 is out of range (1 to 1000000)");
  ExpectError({"--plan-threads=4294967296"}, "--plan-threads: 4294967296 is out of range");
  ExpectError({"--threads=4294967297"}, "--threads: 4294967297 is out of range (0 to 1024)");
  ExpectError({"--min-count=4294967297"}, "--min-count: 4294967297 is out of range");
  ExpectError({"--hidden=2000000000"}, "--hidden: 2000000000 is out of range (1 to 16777216)");
  ExpectError({"--embed=100000000"}, "--embed: 100000000 is out of range (1 to 16777216)");
  ExpectError({"--max-train=-1"}, "--max-train: -1 is out of range");
  ExpectError({"--max-dev=99999999999999999999"},
              "--max-dev: 99999999999999999999 is out of range (0 to 9223372036854775807)");
  ExpectError({"--seed=-1"}, "--seed: -1 is out of range (0 to 18446744073709551615)");
  ExpectError({"--seed=18446744073709551616"}, "--seed: 18446744073709551616 is out of range");
  ExpectError({"--epochs=1e3"}, "--epochs: '1e3' is not an integer");
  absl::StatusOr<TrainerConfig> c =
      Parse({"--seed=18446744073709551615", "--epochs=1000000", "--max-train=9223372036854775807",
             "--threads=0", "--plan-threads=-1", "--hidden=16777216"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->seed, 18446744073709551615u);
  EXPECT_EQ(c->epochs, 1000000);
  EXPECT_EQ(c->max_train, INT64_MAX);
  EXPECT_EQ(c->hidden, 16777216);
  // A config made in code is checked against the same ranges.
  TrainerConfig made;
  made.threads = 5000;
  EXPECT_EQ(ValidateConfig(made).message(), "--threads: 5000 is out of range (0 to 1024)");
}

// The kernel flags set config.kernels, starting from the process's options; without one it stays
// unset (the kernels run as the process set them).
TEST(TrainerFlagsTest, KernelFlagsSetTheKernelOptions) {
  absl::StatusOr<TrainerConfig> none = Parse({});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->kernels.has_value());
  absl::StatusOr<TrainerConfig> c =
      Parse({"--packed-gemm=0", "--packed-gemm-avx2=1", "--cublas-lt", "false", "--gemm-autotune=1",
             "--small-gemm=everywhere", "--generated-kernels=0", "--kernel-cache=/tmp/k"});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->kernels.has_value());
  EXPECT_FALSE(c->kernels->cpu.packed_gemm);
  EXPECT_TRUE(c->kernels->cpu.packed_gemm_avx2);
  EXPECT_FALSE(c->kernels->cuda.cublas_lt);
  EXPECT_TRUE(c->kernels->cuda.gemm_autotune);
  EXPECT_EQ(c->kernels->cuda.small_gemm, ops::SmallGemmUse::kEverywhere);
  EXPECT_FALSE(c->kernels->cuda.generated_elementwise);
  EXPECT_TRUE(c->kernels->cuda.kernel_cache);
  EXPECT_EQ(c->kernels->cuda.kernel_cache_dir, "/tmp/k");
  absl::StatusOr<TrainerConfig> off = Parse({"--kernel-cache=off", "--small-gemm=off"});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->kernels->cuda.kernel_cache);
  EXPECT_EQ(off->kernels->cuda.small_gemm, ops::SmallGemmUse::kOff);
  ExpectError({"--small-gemm=sometimes"}, "--small-gemm: 'sometimes' is not one of off");
  ExpectError({"--packed-gemm=maybe"}, "--packed-gemm: 'maybe' is not true or false");
  ExpectError({"--kernel-cache="}, "--kernel-cache: empty path");
}

}  // namespace
}  // namespace cavs::trainer
