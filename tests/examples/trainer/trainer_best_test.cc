// The trainer keeps the parameters of the best dev epoch: --test is evaluated on them and on
// the last epoch's, --save-best writes them, --resume reloads them from their checkpoint.
//
// The reference is the dev set itself: with --test naming the dev file, the test figures of an
// epoch's parameters are that epoch's dev figures, to the bit (the same trees in the same
// batches). To make the last epochs worse than the first at will, a test zeroes every parameter
// after an epoch's last step: that epoch's dev figures are then a constant model's.
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "core/initializer.h"
#include "core/parameter.h"
#include "examples/trainer/report.h"
#include "examples/trainer/trainer.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace cavs::trainer {
namespace {

constexpr int kStepsPerEpoch = 8;  // 200 training trees in batches of 25

TrainerConfig DevAsTest() {
  TrainerConfig c;
  c.hidden = 16;
  c.embed = 16;
  c.max_train = 200;
  c.batch = 25;
  c.train_path = DefaultDataDir() + "/train.txt";
  c.dev_path = DefaultDataDir() + "/dev.txt";
  c.test_path = c.dev_path;
  return c;
}

// Every parameter of `store` set to 0.
void Zero(const core::ParameterStore& store) {
  for (const auto& p : store.parameters()) {
    ASSERT_TRUE(p->value.CopyFrom(core::Tensor::Host(p->value.shape())).ok());
  }
}

// Creates a trainer with `c` that zeroes its parameters after each step in `zero_after`.
std::unique_ptr<Trainer> Make(const TrainerConfig& c, std::vector<int64_t> zero_after,
                              std::ostream* out) {
  auto trainer = std::make_shared<Trainer*>(nullptr);
  TrainOptions o;
  o.out = out;
  o.after_step = [trainer, zero_after](int64_t step) {
    for (int64_t s : zero_after) {
      if (s == step) Zero((*trainer)->store());
    }
  };
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(c, o);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return nullptr;
  *trainer = t->get();
  return *std::move(t);
}

// The JSON text of `key`'s value in the flat object `json` ("" if absent).
std::string Field(const std::string& json, const std::string& key) {
  const std::string quoted = "\"" + key + "\":";
  const size_t at = json.find(quoted);
  if (at == std::string::npos) return "";
  const size_t begin = at + quoted.size();
  return json.substr(begin, json.find_first_of(",}", begin) - begin);
}

// The parameters of the checkpoint file `path`, loaded into a store shaped like `like`.
std::vector<std::vector<float>> Load(const std::string& path, const core::ParameterStore& like) {
  core::ParameterStore store(1);
  for (const auto& p : like.parameters()) {
    EXPECT_TRUE(
        store.GetOrCreate(p->name, p->value.shape(), core::Initializer::Zeros(), p->sparse_grad)
            .ok());
  }
  absl::StatusOr<core::CheckpointInfo> info = core::LoadCheckpoint(path, store, nullptr);
  EXPECT_TRUE(info.ok()) << info.status();
  std::vector<std::vector<float>> values;
  for (const auto& p : store.parameters()) values.push_back(p->value.ToVector());
  return values;
}

TEST(TrainerBestTest, TestRunsOnTheBestDevEpochAndTheLast) {
  const std::string dir = cavs::tests::FreshTempDir("best");
  TrainerConfig c = DevAsTest();
  c.epochs = 3;
  c.checkpoint_dir = dir + "/ckpt";
  c.save_best = dir + "/best.cavs";
  std::ostringstream out;
  std::unique_ptr<Trainer> t = Make(c, {3 * kStepsPerEpoch}, &out);
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Run().ok());
  const std::vector<EpochRecord>& curve = t->curve();
  ASSERT_EQ(curve.size(), 3u);
  const EpochRecord& best = BestEpoch(curve, false);
  ASSERT_LT(best.epoch, 3) << out.str();  // the last epoch is a constant model's
  EXPECT_EQ(t->best_epoch_kept(), best.epoch);

  const std::string& json = t->summary_json();
  EXPECT_EQ(Field(json, "best_epoch"), std::to_string(best.epoch)) << json;
  EXPECT_EQ(Field(json, "test_epoch"), std::to_string(best.epoch)) << json;
  EXPECT_EQ(Field(json, "test_root_acc"), JsonNumber(best.dev_root_acc)) << json;
  EXPECT_EQ(Field(json, "test_binary_acc"), JsonNumber(best.dev_binary_acc)) << json;
  EXPECT_EQ(Field(json, "last_test_epoch"), "3") << json;
  EXPECT_EQ(Field(json, "last_test_root_acc"), JsonNumber(curve[2].dev_root_acc)) << json;
  EXPECT_EQ(Field(json, "last_test_binary_acc"), JsonNumber(curve[2].dev_binary_acc)) << json;
  EXPECT_NE(out.str().find("test on epoch " + std::to_string(best.epoch) + " (best dev): root "),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("test on epoch 3 (last): root "), std::string::npos) << out.str();

  // The store ends with the last epoch's parameters; --save-best holds the best epoch's, the
  // same as its checkpoint.
  for (const auto& p : t->store().parameters()) {
    for (float x : p->value.ToVector()) ASSERT_EQ(x, 0.0f) << p->name;
  }
  absl::StatusOr<core::CheckpointInfo> saved = core::ReadCheckpointMetadata(c.save_best);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->step, best.epoch);
  EXPECT_TRUE(saved->optimizer.empty());  // parameters only
  EXPECT_EQ(saved->metadata["trainer.saved_as"], "best");
  EXPECT_EQ(Load(c.save_best, t->store()),
            Load(core::CheckpointPath(c.checkpoint_dir, best.epoch), t->store()));
}

// When the last epoch is the best, one evaluation serves both.
TEST(TrainerBestTest, LastEpochBestIsTestedOnce) {
  TrainerConfig c = DevAsTest();
  c.epochs = 1;
  std::unique_ptr<Trainer> t = Make(c, {}, nullptr);
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Run().ok());
  const std::string& json = t->summary_json();
  EXPECT_EQ(Field(json, "test_epoch"), "1") << json;
  EXPECT_EQ(Field(json, "last_test_epoch"), "1") << json;
  EXPECT_EQ(Field(json, "test_root_acc"), JsonNumber(t->curve()[0].dev_root_acc)) << json;
  EXPECT_EQ(Field(json, "last_test_root_acc"), Field(json, "test_root_acc")) << json;
}

// A resumed run reloads the best epoch so far from its checkpoint; where that checkpoint is
// gone, it says so and keeps the best of the epochs it trains.
TEST(TrainerBestTest, ResumeReloadsTheBestEpochFromItsCheckpoint) {
  const std::string dir = cavs::tests::FreshTempDir("best_resume");
  TrainerConfig c = DevAsTest();
  c.epochs = 2;
  c.checkpoint_dir = dir + "/ckpt";
  std::unique_ptr<Trainer> first = Make(c, {2 * kStepsPerEpoch}, nullptr);
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->Run().ok());
  ASSERT_EQ(BestEpoch(first->curve(), false).epoch, 1);
  const EpochRecord epoch1 = first->curve()[0];

  c.resume = true;
  c.epochs = 3;
  std::unique_ptr<Trainer> second = Make(c, {3 * kStepsPerEpoch}, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->best_epoch_kept(), 1);  // reloaded from ckpt-1.cavs
  ASSERT_TRUE(second->Run().ok());
  EXPECT_EQ(Field(second->summary_json(), "test_epoch"), "1");
  EXPECT_EQ(Field(second->summary_json(), "test_root_acc"), JsonNumber(epoch1.dev_root_acc));
  EXPECT_EQ(Field(second->summary_json(), "last_test_epoch"), "3");

  std::filesystem::remove(core::CheckpointPath(c.checkpoint_dir, 1));
  c.epochs = 4;
  std::ostringstream out;
  std::unique_ptr<Trainer> third = Make(c, {4 * kStepsPerEpoch}, &out);
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(third->best_epoch_kept(), 0);
  EXPECT_NE(out.str().find("warning: --resume: cannot reload the parameters of the best dev "
                           "epoch so far, 1: "),
            std::string::npos)
      << out.str();
  ASSERT_TRUE(third->Run().ok());
  EXPECT_EQ(Field(third->summary_json(), "best_epoch"), "1");
  EXPECT_EQ(Field(third->summary_json(), "test_epoch"), "4");
  EXPECT_NE(out.str().find("test on epoch 4 (best kept): root "), std::string::npos) << out.str();
}

}  // namespace
}  // namespace cavs::trainer
