#include "core/checkpoint.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/backend.h"
#include "core/random.h"
#include "tests/core/host_memory_device.h"
#include "tests/testing/temp_dir.h"

namespace cavs::core {
namespace {

namespace fs = std::filesystem;

bool Contains(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

// A new empty folder inside the test process's own (removed at exit, also after a failure).
std::string MakeTempDir() {
  static int made = 0;
  return cavs::tests::FreshTempDir("ckpt_" + std::to_string(made++));
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A small model: a sparse embedding table, a matrix and a bias.
void BuildModel(ParameterStore& store) {
  CAVS_CHECK(store.GetOrCreate("emb", {6, 3}, Initializer::Uniform(-1, 1), true).ok());
  CAVS_CHECK(store.GetOrCreate("cell/W", {3, 4}, Initializer::XavierUniform()).ok());
  CAVS_CHECK(store.GetOrCreate("cell/b", {4}, Initializer::Zeros()).ok());
}

// Sets gradients that depend on `k` and takes one step.
void TrainStep(ParameterStore& store, Optimizer& opt, int k) {
  CAVS_CHECK(store.ZeroGrad().ok());
  for (const auto& p : store.parameters()) {
    if (p->sparse_grad) {
      std::vector<float> g(6);
      for (int i = 0; i < 6; ++i) g[i] = 0.1f * (i - k);
      CAVS_CHECK(
          store.AccumulateSparseGrad(p.get(), {k % 6, (k + 3) % 6}, Tensor::FromVector(g, {2, 3}))
              .ok());
    } else {
      float* g = p->grad.data<float>();
      for (int64_t i = 0; i < p->grad.numel(); ++i) g[i] = 0.05f * ((i + k) % 5) - 0.1f;
    }
  }
  CAVS_CHECK(opt.Step(store).ok());
}

std::unique_ptr<Optimizer> MakeAdam() {
  return *MakeOptimizer({.kind = OptimizerKind::kAdam, .lr = 0.01f, .weight_decay = 0.01f});
}

std::vector<std::vector<float>> Values(const ParameterStore& store) {
  std::vector<std::vector<float>> v;
  for (const auto& p : store.parameters()) v.push_back(p->value.ToVector());
  return v;
}

class CheckpointTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    BuildModel(store_);
    adam_ = MakeAdam();
    for (int k = 0; k < 3; ++k) TrainStep(store_, *adam_, k);
    path_ = CheckpointPath(dir_, 42);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir_;
  std::string path_;
  ParameterStore store_{7};
  std::unique_ptr<Optimizer> adam_;
};

TEST_F(CheckpointTest, RoundTripRestoresValuesStateStepAndMetadata) {
  const CheckpointMetadata meta = {{"model", "tree_lstm h=150"},
                                   {"data_position", "1234"},
                                   {"rng", Rng(9, 1, 77).State()},
                                   {"binary", std::string("a\0b", 3)}};
  ASSERT_TRUE(SaveCheckpoint(path_, store_, adam_.get(), 42, meta).ok());
  EXPECT_EQ(ListDir(dir_), (std::vector<std::string>{"ckpt-42.cavs"}));  // no temporary left

  ParameterStore restored(99);  // another seed: different initial values
  BuildModel(restored);
  ASSERT_NE(Values(restored), Values(store_));
  auto adam = MakeAdam();
  absl::StatusOr<CheckpointInfo> info = LoadCheckpoint(path_, restored, adam.get());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->step, 42);
  EXPECT_EQ(info->metadata, meta);
  EXPECT_EQ(info->optimizer, "adam");
  EXPECT_EQ(info->optimizer_step, 3);
  EXPECT_EQ(Values(restored), Values(store_));
  EXPECT_EQ(adam->step(), 3);
  auto want = adam_->StateTensors(), got = adam->StateTensors();
  ASSERT_EQ(got.size(), 6u);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first);
    EXPECT_EQ(got[i].second.ToVector(), want[i].second.ToVector()) << got[i].first;
  }
  // Resuming is exact: the next steps agree bit for bit.
  for (int k = 3; k < 5; ++k) {
    TrainStep(store_, *adam_, k);
    TrainStep(restored, *adam, k);
  }
  EXPECT_EQ(Values(restored), Values(store_));
}

TEST_F(CheckpointTest, ReadMetadataWithoutAStore) {
  ASSERT_TRUE(SaveCheckpoint(path_, store_, adam_.get(), 42, {{"world_size", "4"}}).ok());
  absl::StatusOr<CheckpointInfo> info = ReadCheckpointMetadata(path_);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->step, 42);
  EXPECT_EQ(info->metadata, (CheckpointMetadata{{"world_size", "4"}}));
  EXPECT_EQ(info->optimizer, "adam");
  std::vector<std::string> names;
  for (const CheckpointTensorInfo& t : info->tensors) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"emb", "cell/W", "cell/b", "emb/adam_m", "emb/adam_v",
                                             "cell/W/adam_m", "cell/W/adam_v", "cell/b/adam_m",
                                             "cell/b/adam_v"}));
  EXPECT_EQ(info->tensors[1].shape, Shape({3, 4}));
  EXPECT_EQ(info->tensors[1].kind, CheckpointEntryKind::kParameter);
  EXPECT_EQ(info->tensors[3].kind, CheckpointEntryKind::kOptimizerState);
}

TEST_F(CheckpointTest, OptimizerPairing) {
  ASSERT_TRUE(SaveCheckpoint(path_, store_, nullptr, 1).ok());
  ParameterStore other;
  BuildModel(other);
  auto adam = MakeAdam();
  absl::Status s = LoadCheckpoint(path_, other, adam.get()).status();
  EXPECT_TRUE(Contains(s, "without optimizer state")) << s;
  ASSERT_TRUE(LoadCheckpoint(path_, other, nullptr).ok());  // parameters only
  EXPECT_EQ(Values(other), Values(store_));

  ASSERT_TRUE(SaveCheckpoint(path_, store_, adam_.get(), 1).ok());
  auto sgd = *MakeOptimizer({.kind = OptimizerKind::kSgd, .momentum = 0.9f});
  s = LoadCheckpoint(path_, other, sgd.get()).status();
  EXPECT_TRUE(Contains(s, "saved with optimizer 'adam', not 'sgd'")) << s;
  ASSERT_TRUE(LoadCheckpoint(path_, other, nullptr).ok());  // state ignored
}

TEST_F(CheckpointTest, SavedBeforeTheFirstStepLoadsFreshState) {
  ParameterStore fresh(7);
  BuildModel(fresh);
  auto adagrad = *MakeOptimizer({.kind = OptimizerKind::kAdagrad, .initial_accumulator = 0.5f});
  ASSERT_TRUE(SaveCheckpoint(path_, fresh, adagrad.get(), 0).ok());
  auto loaded = *MakeOptimizer({.kind = OptimizerKind::kAdagrad, .initial_accumulator = 0.5f});
  ASSERT_TRUE(LoadCheckpoint(path_, store_, loaded.get()).ok());
  EXPECT_EQ(Values(store_), Values(fresh));
  auto state = loaded->StateTensors();
  ASSERT_EQ(state.size(), 3u);
  EXPECT_EQ(state[0].second.ToVector(), std::vector<float>(18, 0.5f));
}

TEST_F(CheckpointTest, ShapeAndNameMismatchesNameTheParameter) {
  ASSERT_TRUE(SaveCheckpoint(path_, store_, adam_.get(), 5).ok());
  {
    ParameterStore wrong;
    ASSERT_TRUE(wrong.GetOrCreate("emb", {6, 3}, Initializer::Zeros(), true).ok());
    ASSERT_TRUE(wrong.GetOrCreate("cell/W", {3, 5}, Initializer::Zeros()).ok());
    ASSERT_TRUE(wrong.GetOrCreate("cell/b", {4}, Initializer::Zeros()).ok());
    const auto before = Values(wrong);
    absl::Status s = LoadCheckpoint(path_, wrong, nullptr).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(s, "'cell/W'") && Contains(s, "[3, 4]") && Contains(s, "[3, 5]")) << s;
    EXPECT_EQ(Values(wrong), before);  // nothing was copied
  }
  {
    ParameterStore fewer;
    ASSERT_TRUE(fewer.GetOrCreate("emb", {6, 3}, Initializer::Zeros(), true).ok());
    ASSERT_TRUE(fewer.GetOrCreate("cell/W", {3, 4}, Initializer::Zeros()).ok());
    absl::Status s = LoadCheckpoint(path_, fewer, nullptr).status();
    EXPECT_TRUE(Contains(s, "has parameter 'cell/b', which the model does not have")) << s;
    EXPECT_EQ(fewer.Find("cell/W")->value.ToVector(), std::vector<float>(12, 0.0f));
  }
  {
    ParameterStore more;
    BuildModel(more);
    ASSERT_TRUE(more.GetOrCreate("out", {4, 5}, Initializer::Zeros()).ok());
    absl::Status s = LoadCheckpoint(path_, more, nullptr).status();
    EXPECT_TRUE(Contains(s, "parameter 'out' is missing")) << s;
  }
}

TEST_F(CheckpointTest, MissingFileAndBadArguments) {
  absl::Status s = LoadCheckpoint(dir_ + "/nope.cavs", store_, nullptr).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(s, "nope.cavs")) << s;
  EXPECT_FALSE(LoadCheckpoint(dir_, store_, nullptr).ok());  // a directory
  s = SaveCheckpoint(path_, store_, nullptr, 1, {{"cavs.optimizer", "x"}});
  EXPECT_TRUE(Contains(s, "reserved")) << s;
  s = SaveCheckpoint(path_, store_, nullptr, -1);
  EXPECT_TRUE(Contains(s, "negative step")) << s;
  EXPECT_TRUE(ListDir(dir_).empty());
}

TEST_F(CheckpointTest, EveryTruncationIsDetected) {
  ASSERT_TRUE(SaveCheckpoint(path_, store_, adam_.get(), 42, {{"model", "m"}}).ok());
  const std::string full = ReadBytes(path_);
  const auto before = Values(store_);
  const std::string cut = dir_ + "/cut.cavs";
  for (size_t n = 0; n < full.size(); ++n) {
    WriteBytes(cut, full.substr(0, n));
    absl::Status s = LoadCheckpoint(cut, store_, adam_.get()).status();
    ASSERT_EQ(s.code(), absl::StatusCode::kDataLoss) << n << ": " << s;
    ASSERT_TRUE(Contains(s, "truncated") && Contains(s, "at byte")) << n << ": " << s;
    if (n > 40 && n + 4 < full.size()) {
      ASSERT_TRUE(Contains(s, "entry ")) << n << ": " << s;
    }
  }
  EXPECT_EQ(Values(store_), before);
  WriteBytes(cut, full + "x");
  absl::Status s = LoadCheckpoint(cut, store_, nullptr).status();
  EXPECT_TRUE(Contains(s, "1 unexpected bytes after the checksum")) << s;
}

TEST_F(CheckpointTest, EveryFlippedByteIsDetected) {
  ASSERT_TRUE(SaveCheckpoint(path_, store_, adam_.get(), 42, {{"model", "m"}}).ok());
  const std::string full = ReadBytes(path_);
  const auto before = Values(store_);
  const int64_t step_before = adam_->step();
  const std::string bad = dir_ + "/bad.cavs";
  for (size_t i = 0; i < full.size(); ++i) {
    for (unsigned char mask : {0x01, 0x80}) {
      std::string bytes = full;
      bytes[i] = static_cast<char>(bytes[i] ^ mask);
      WriteBytes(bad, bytes);
      absl::Status s = LoadCheckpoint(bad, store_, adam_.get()).status();
      ASSERT_FALSE(s.ok()) << "byte " << i << " mask " << int{mask};
      ASSERT_FALSE(ReadCheckpointMetadata(bad).ok()) << "byte " << i;
    }
  }
  EXPECT_EQ(Values(store_), before);
  EXPECT_EQ(adam_->step(), step_before);
  std::string bytes = full;
  bytes[full.size() - 10] ^= 0x10;  // inside the last payload
  WriteBytes(bad, bytes);
  absl::Status s = LoadCheckpoint(bad, store_, nullptr).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(s, "checksum mismatch")) << s;
}

TEST_F(CheckpointTest, BadMagicAndVersion) {
  ASSERT_TRUE(SaveCheckpoint(path_, store_, nullptr, 42).ok());
  std::string bytes = ReadBytes(path_);
  std::string magic = bytes;
  magic.replace(0, 8, "NOTACKPT");
  WriteBytes(path_, magic);
  absl::Status s = LoadCheckpoint(path_, store_, nullptr).status();
  EXPECT_TRUE(Contains(s, "bad magic")) << s;
  WriteBytes(path_, "CX");  // short, and not a prefix of the magic
  EXPECT_TRUE(Contains(LoadCheckpoint(path_, store_, nullptr).status(), "bad magic"));
  WriteBytes(path_, "CA");  // a prefix of the magic: a truncated checkpoint
  EXPECT_TRUE(Contains(LoadCheckpoint(path_, store_, nullptr).status(), "truncated"));
  std::string version = bytes;
  version[8] = 2;
  WriteBytes(path_, version);
  s = LoadCheckpoint(path_, store_, nullptr).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(Contains(s, "unsupported format version 2 (this build reads version 1)")) << s;
}

// Builds files by hand, following docs/checkpoint.md, independently of the writer.
class FileBuilder {
 public:
  FileBuilder(int64_t step, uint64_t entries) {
    bytes_ += "CAVSCKPT";
    Int(uint32_t{1});
    Int(uint32_t{0});
    Int(step);
    Int(entries);
  }
  template <typename T>
  FileBuilder& Int(T v) {
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof(v));
    return *this;
  }
  FileBuilder& Name(const std::string& s) {
    Int(static_cast<uint32_t>(s.size()));
    bytes_ += s;
    return *this;
  }
  FileBuilder& Raw(const std::string& s) {
    bytes_ += s;
    return *this;
  }
  FileBuilder& Floats(const std::vector<float>& v) {
    Int(static_cast<uint64_t>(v.size() * 4));
    bytes_.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    return *this;
  }
  // The bytes so far, without a checksum.
  const std::string& Bytes() const { return bytes_; }
  std::string Finish() const {
    const uint32_t crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(bytes_.data()), static_cast<uInt>(bytes_.size())));
    return bytes_ + std::string(reinterpret_cast<const char*>(&crc), 4);
  }

 private:
  std::string bytes_;
};

TEST_F(CheckpointTest, HandBuiltFileFollowsTheDocumentedFormat) {
  FileBuilder b(7, 2);
  b.Int(uint8_t{3}).Name("note").Int(uint64_t{2}).Raw("hi");
  b.Int(uint8_t{1}).Name("p").Int(uint8_t{0}).Int(uint8_t{1}).Int(int64_t{2});
  b.Floats({1.5f, -2.0f});
  WriteBytes(path_, b.Finish());
  ParameterStore store;
  ASSERT_TRUE(store.GetOrCreate("p", {2}, Initializer::Zeros()).ok());
  absl::StatusOr<CheckpointInfo> info = LoadCheckpoint(path_, store, nullptr);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->step, 7);
  EXPECT_EQ(info->metadata, (CheckpointMetadata{{"note", "hi"}}));
  EXPECT_EQ(store.Find("p")->value.ToVector(), (std::vector<float>{1.5f, -2.0f}));
  // The writer produces the same bytes for the same contents.
  ASSERT_TRUE(SaveCheckpoint(dir_ + "/same.cavs", store, nullptr, 7, {{"note", "hi"}}).ok());
  EXPECT_EQ(ReadBytes(dir_ + "/same.cavs"), ReadBytes(path_));
}

// Each corrupt field is reported as such, with a valid checksum, and nothing huge is allocated.
TEST_F(CheckpointTest, ImplausibleSizesAreReportedNotAllocated) {
  struct Case {
    std::string file;
    std::string message;
  };
  auto param = [](uint8_t kind, uint8_t dtype, uint8_t rank) {
    FileBuilder b(1, 1);
    b.Int(kind).Name("p").Int(dtype).Int(rank);
    return b;
  };
  std::vector<Case> cases;
  cases.push_back({FileBuilder(1, 1).Int(uint8_t{1}).Int(uint32_t{0xfffffff0u}).Finish(),
                   "implausible name length 4294967280"});
  cases.push_back({param(1, 9, 1).Int(int64_t{2}).Floats({1, 2}).Finish(), "invalid dtype 9"});
  cases.push_back({param(1, 0, 200).Finish(), "implausible rank 200"});
  cases.push_back({param(7, 0, 1).Finish(), "invalid entry kind 7"});
  cases.push_back(
      {param(1, 0, 1).Int(int64_t{-2}).Floats({}).Finish(), "implausible dimension -2"});
  cases.push_back({param(1, 0, 2).Int(int64_t{1} << 40).Int(int64_t{1} << 40).Floats({}).Finish(),
                   "payload length 0 does not match float32[1099511627776, 1099511627776]"});
  cases.push_back({param(1, 0, 1).Int(int64_t{1} << 60).Int(uint64_t{1} << 62).Finish(),
                   "truncated: the payload needs 4611686018427387904 bytes"});
  cases.push_back({FileBuilder(1, uint64_t{1} << 62).Bytes(),
                   "entry 0 of 4611686018427387904 at byte 32: truncated: the entry kind"});
  cases.push_back({FileBuilder(1, 1).Int(uint8_t{3}).Name("k").Int(~uint64_t{0}).Finish(),
                   "truncated: the value needs 18446744073709551615 bytes"});
  cases.push_back({FileBuilder(-5, 0).Finish(), "implausible step -5"});
  cases.push_back({FileBuilder(1, 1).Int(uint8_t{3}).Name("cavs.x").Int(uint64_t{0}).Finish(),
                   "unknown reserved metadata key 'cavs.x'"});
  for (const Case& c : cases) {
    WriteBytes(path_, c.file);
    absl::Status s = ReadCheckpointMetadata(path_).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_TRUE(Contains(s, c.message)) << "want '" << c.message << "', got " << s;
  }
}

TEST_F(CheckpointTest, DuplicateNamesAreCorrupt) {
  FileBuilder b(1, 2);
  for (int i = 0; i < 2; ++i) {
    b.Int(uint8_t{1}).Name("p").Int(uint8_t{0}).Int(uint8_t{1}).Int(int64_t{1}).Floats({1});
  }
  WriteBytes(path_, b.Finish());
  absl::Status s = ReadCheckpointMetadata(path_).status();
  EXPECT_TRUE(Contains(s, "entry 1 of 2") && Contains(s, "('p')") && Contains(s, "duplicate")) << s;
}

TEST_F(CheckpointTest, OverwriteKeepsOnlyTheNewFile) {
  ASSERT_TRUE(SaveCheckpoint(path_, store_, adam_.get(), 42).ok());
  ASSERT_TRUE(SaveCheckpoint(path_, store_, adam_.get(), 43).ok());
  EXPECT_EQ(ReadCheckpointMetadata(path_)->step, 43);
  EXPECT_EQ(ListDir(dir_), (std::vector<std::string>{"ckpt-42.cavs"}));
}

// A write that fails half-way (the file size limit) leaves the old checkpoint and no temporary.
TEST_F(CheckpointTest, FailedWriteNeverClobbersTheOldCheckpoint) {
  ASSERT_TRUE(SaveCheckpoint(path_, store_, nullptr, 1).ok());
  const std::string old_bytes = ReadBytes(path_);
  TrainStep(store_, *adam_, 9);
  struct rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  struct rlimit small = saved;
  small.rlim_cur = 100;
  auto old_handler = signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  absl::Status s = SaveCheckpoint(path_, store_, adam_.get(), 2);
  setrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, old_handler);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s, "cannot write checkpoint") && Contains(s, path_)) << s;
  EXPECT_EQ(ReadBytes(path_), old_bytes);
  EXPECT_EQ(ListDir(dir_), (std::vector<std::string>{"ckpt-42.cavs"}));
  EXPECT_EQ(ReadCheckpointMetadata(path_)->step, 1);
}

TEST_F(CheckpointTest, UnwritableLocationsFailCleanly) {
  absl::Status s = SaveCheckpoint(dir_ + "/missing/ckpt-1.cavs", store_, nullptr, 1);
  EXPECT_TRUE(Contains(s, "cannot write checkpoint") && Contains(s, "No such file")) << s;
  if (geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  ASSERT_TRUE(SaveCheckpoint(path_, store_, nullptr, 1).ok());
  const std::string old_bytes = ReadBytes(path_);
  fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec);
  s = SaveCheckpoint(path_, store_, nullptr, 2);
  fs::permissions(dir_, fs::perms::owner_all);
  EXPECT_TRUE(Contains(s, "Permission denied")) << s;
  EXPECT_EQ(ReadBytes(path_), old_bytes);
  EXPECT_EQ(ListDir(dir_), (std::vector<std::string>{"ckpt-42.cavs"}));
}

TEST_F(CheckpointTest, LatestCheckpointPicksTheNewestCompleteFile) {
  EXPECT_EQ(LatestCheckpoint(dir_).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LatestCheckpoint(dir_ + "/missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(CheckpointFileName(20), "ckpt-20.cavs");
  for (int64_t step : {5, 20, 100}) {
    ASSERT_TRUE(SaveCheckpoint(CheckpointPath(dir_, step), store_, adam_.get(), step).ok());
  }
  const std::string newest = ReadBytes(CheckpointPath(dir_, 100));
  WriteBytes(CheckpointPath(dir_, 100), newest.substr(0, newest.size() / 2));  // torn
  WriteBytes(dir_ + "/.ckpt-200.cavs.tmp-1-0", newest);                        // in flight
  WriteBytes(dir_ + "/ckpt-abc.cavs", newest);
  WriteBytes(dir_ + "/ckpt-300.cavs.bak", newest);
  fs::create_directory(dir_ + "/ckpt-400.cavs");
  std::vector<absl::Status> skipped;
  absl::StatusOr<std::string> latest = LatestCheckpoint(dir_, &skipped);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, CheckpointPath(dir_, 20));  // numeric order: 20 > 5
  // The torn newest file is reported, with its name and what is wrong with it.
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(skipped[0], CheckpointPath(dir_, 100)) && Contains(skipped[0], "truncated"))
      << skipped[0];
  absl::StatusOr<std::vector<std::string>> all = ListCheckpoints(dir_);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(*all, (std::vector<std::string>{CheckpointPath(dir_, 100), CheckpointPath(dir_, 20),
                                            CheckpointPath(dir_, 5)}));
}

// Checkpoint files that all fail to verify are an error naming each of them, never "no
// checkpoint" (a trainer would start afresh and write over them).
TEST_F(CheckpointTest, LatestCheckpointReportsFilesThatAllFailToLoad) {
  ASSERT_TRUE(SaveCheckpoint(CheckpointPath(dir_, 1), store_, adam_.get(), 1).ok());
  ASSERT_TRUE(SaveCheckpoint(CheckpointPath(dir_, 2), store_, adam_.get(), 2).ok());
  WriteBytes(CheckpointPath(dir_, 1), "");  // emptied
  std::string bytes = ReadBytes(CheckpointPath(dir_, 2));
  bytes[bytes.size() / 2] ^= 0x10;  // one bit flipped
  WriteBytes(CheckpointPath(dir_, 2), bytes);
  std::vector<absl::Status> skipped;
  absl::StatusOr<std::string> latest = LatestCheckpoint(dir_, &skipped);
  ASSERT_FALSE(latest.ok());
  EXPECT_EQ(latest.status().code(), absl::StatusCode::kDataLoss) << latest.status();
  EXPECT_TRUE(Contains(latest.status(), CheckpointPath(dir_, 1)) &&
              Contains(latest.status(), CheckpointPath(dir_, 2)) &&
              Contains(latest.status(), "checksum mismatch") &&
              Contains(latest.status(), "truncated"))
      << latest.status();
  EXPECT_EQ(skipped.size(), 2u);
  // A file where the directory should be is said to be one.
  absl::StatusOr<std::vector<std::string>> listed = ListCheckpoints(CheckpointPath(dir_, 1));
  EXPECT_EQ(listed.status().code(), absl::StatusCode::kInvalidArgument) << listed.status();
  EXPECT_TRUE(Contains(listed.status(), "is not a directory")) << listed.status();
}

// The pid of a process that has exited (and been reaped): no process has it, until reused.
pid_t DeadPid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  CAVS_CHECK(child > 0, "fork");
  int status = 0;
  CAVS_CHECK(waitpid(child, &status, 0) == child, "waitpid");
  return child;
}

// The temporary file of a writer killed mid-write (SIGKILL leaves it behind) is removed; those
// of live processes, and files that only look alike, are kept.
TEST_F(CheckpointTest, RemovesTemporaryFilesOfDeadWritersOnly) {
  ASSERT_TRUE(SaveCheckpoint(CheckpointPath(dir_, 1), store_, adam_.get(), 1).ok());
  const pid_t dead = DeadPid();
  const std::string stale = absl::StrCat(dir_, "/.ckpt-2.cavs.tmp-", dead, "-0");
  const std::vector<std::string> kept = {
      absl::StrCat(".ckpt-2.cavs.tmp-", getpid(), "-3"),  // this process: a write in flight
      absl::StrCat(".ckpt-2.cavs.tmp-", getppid(), "-0"),
      absl::StrCat(".notes.txt.tmp-", dead, "-0"),   // not a checkpoint's
      absl::StrCat(".ckpt-2.cavs.tmp-", dead),       // no counter
      absl::StrCat("ckpt-2.cavs.tmp-", dead, "-0"),  // no leading dot
      ".ckpt-2.cavs.tmp-99999999999999999999-0",     // no such pid can exist
  };
  WriteBytes(stale, "partial");
  for (const std::string& name : kept) WriteBytes(dir_ + "/" + name, "partial");
  absl::StatusOr<std::vector<std::string>> removed = RemoveStaleTemporaryFiles(dir_);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, std::vector<std::string>{stale});
  EXPECT_FALSE(fs::exists(stale));
  for (const std::string& name : kept) EXPECT_TRUE(fs::exists(dir_ + "/" + name)) << name;
  EXPECT_TRUE(fs::exists(CheckpointPath(dir_, 1)));
  // Nothing left to remove; a missing directory has nothing either.
  EXPECT_TRUE(RemoveStaleTemporaryFiles(dir_)->empty());
  EXPECT_TRUE(RemoveStaleTemporaryFiles(dir_ + "/missing")->empty());
}

// The host-memory stand-in "cuda:0" (tests/core/host_memory_device.h) takes the device code
// paths (copies through the backend, optimizer kernels from the registry) without a GPU.
TEST(DeviceCheckpointTest, DeviceParametersTrainSaveAndLoadLikeHostOnes) {
  test_devices::HostMemoryDevice* device = test_devices::UseHostMemoryDevice();
  if (device == nullptr) GTEST_SKIP() << "a real CUDA backend is linked";
  ParameterStore dev_store(7, Device::Cuda(0)), host_store(7);
  BuildModel(dev_store);
  BuildModel(host_store);
  auto dev_adam = MakeAdam(), host_adam = MakeAdam();
  EXPECT_EQ(dev_adam->Step(dev_store).code(), absl::StatusCode::kFailedPrecondition);  // no kernels
  test_devices::RegisterHostMemoryDevice(device, test_devices::HostOptimizerKernels());
  for (int k = 0; k < 3; ++k) {
    TrainStep(dev_store, *dev_adam, k);
    TrainStep(host_store, *host_adam, k);
  }
  EXPECT_EQ(dev_store.parameters()[0]->value.device(), Device::Cuda(0));
  EXPECT_EQ(Values(dev_store), Values(host_store));
  const std::string dir = MakeTempDir();
  const std::string dev_path = dir + "/dev.cavs", host_path = dir + "/host.cavs";
  ASSERT_TRUE(SaveCheckpoint(dev_path, dev_store, dev_adam.get(), 3).ok());
  ASSERT_TRUE(SaveCheckpoint(host_path, host_store, host_adam.get(), 3).ok());
  EXPECT_EQ(ReadBytes(dev_path), ReadBytes(host_path));  // the device does not show in the file

  ParameterStore loaded(8, Device::Cuda(0));
  BuildModel(loaded);
  auto loaded_adam = MakeAdam();
  const int copies_before = device->copies;
  ASSERT_TRUE(LoadCheckpoint(host_path, loaded, loaded_adam.get()).ok());
  EXPECT_GE(device->copies - copies_before, 9);  // 3 parameters and 6 state tensors
  EXPECT_EQ(Values(loaded), Values(host_store));
  TrainStep(loaded, *loaded_adam, 3);
  TrainStep(host_store, *host_adam, 3);
  EXPECT_EQ(Values(loaded), Values(host_store));
  test_devices::RegisterHostMemoryDevice(device);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cavs::core
