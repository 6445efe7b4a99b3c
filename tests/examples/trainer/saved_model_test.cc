// LoadSavedModel: a cavs-train checkpoint alone rebuilds the model (sizes, vocabulary,
// parameters); a checkpoint from before the vocabulary was recorded, or one whose vocabulary
// does not match its hash, is refused naming why.
#include "examples/trainer/saved_model.h"

#include <gtest/gtest.h>

#include <string>

#include "core/checkpoint.h"
#include "examples/trainer/trainer.h"
#include "tests/testing/temp_dir.h"

namespace cavs::trainer {
namespace {

TEST(SavedModelTest, ACheckpointAloneRebuildsTheModel) {
  TrainerConfig c;
  c.hidden = 8;
  c.embed = 8;
  c.max_train = 60;
  c.max_dev = 20;
  c.epochs = 1;
  c.checkpoint_dir = tests::FreshTempDir("saved_model");
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(c);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE((*t)->Run().ok());
  // The directory: its newest checkpoint.
  absl::StatusOr<SavedModel> m = LoadSavedModel(c.checkpoint_dir, core::Device::Cpu());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->path, core::CheckpointPath(c.checkpoint_dir, 1));
  EXPECT_EQ(m->kind, ModelKind::kTreeLstm);
  EXPECT_EQ(m->cell.hidden, 8);
  EXPECT_EQ(m->vocabulary.size(), (*t)->data().vocab_size);
  EXPECT_EQ(m->vocabulary.ToText(), (*t)->data().vocabulary.ToText());
  const auto& trained = (*t)->store().parameters();
  ASSERT_EQ(m->store->parameters().size(), trained.size());
  for (size_t i = 0; i < trained.size(); ++i) {
    EXPECT_EQ(m->store->parameters()[i]->value.ToVector(), trained[i]->value.ToVector());
  }

  // The same file without its vocabulary, as cavs-train wrote them before serving existed.
  absl::StatusOr<core::CheckpointInfo> info = core::ReadCheckpointMetadata(m->path);
  ASSERT_TRUE(info.ok());
  core::CheckpointMetadata meta = info->metadata;
  meta.erase(kCheckpointVocabularyKey);
  const std::string old = tests::TempPath("old.cavs");
  ASSERT_TRUE(core::SaveCheckpoint(old, *m->store, nullptr, 1, meta).ok());
  absl::StatusOr<SavedModel> refused = LoadSavedModel(old, core::Device::Cpu());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("holds no vocabulary"), std::string::npos)
      << refused.status();
  // A vocabulary that is not the one trained on.
  meta[kCheckpointVocabularyKey] = "<unk>\nsome\nother\nwords\n";
  ASSERT_TRUE(core::SaveCheckpoint(old, *m->store, nullptr, 1, meta).ok());
  refused = LoadSavedModel(old, core::Device::Cpu());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(refused.status().message().find("does not match"), std::string::npos)
      << refused.status();
}

}  // namespace
}  // namespace cavs::trainer
