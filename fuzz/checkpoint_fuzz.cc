// libFuzzer target: the checkpoint loader (core/checkpoint.h), on a file's bytes, as
// `cavs-train --resume` meets them. Each input is read twice: as it is, and with its last four
// bytes replaced by the CRC-32 of the rest, so that mutations get past the checksum into the
// loader's matching and copying. Checked:
//   - an error names the file, is one of the documented codes, and changes nothing: the store's
//     values and the optimizer's step are as before;
//   - a file that reads is loaded into a store made from its own parameter list (and the
//     optimizer it names), and into an unrelated store; a load that succeeds restores the
//     optimizer's step;
//   - the trainer's metadata inside (the learning curve, the shuffling Rng) parses or fails
//     cleanly (examples/trainer/report.h, core/random.h).
// The file lives in memory (memfd_create), not on disk.
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/checkpoint.h"
#include "core/initializer.h"
#include "core/optimizer.h"
#include "core/parameter.h"
#include "core/random.h"
#include "core/status.h"
#include "examples/trainer/report.h"

namespace {

using namespace cavs::core;

constexpr float kBefore = 0.5f;            // every value of a store before a load
constexpr int64_t kMaxElements = 1 << 16;  // larger files are read, not loaded

// An in-memory file holding `bytes`, with a path that open(2) accepts.
class MemFile {
 public:
  explicit MemFile(const std::string& bytes) : fd_(memfd_create("cavs_fuzz_ckpt", MFD_CLOEXEC)) {
    CAVS_CHECK(fd_ >= 0, "memfd_create");
    CAVS_CHECK(write(fd_, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    path_ = absl::StrCat("/proc/self/fd/", fd_);
  }
  ~MemFile() { close(fd_); }
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

void CheckError(const absl::Status& s, const std::string& path) {
  CAVS_CHECK(absl::IsDataLoss(s) || absl::IsUnimplemented(s) || absl::IsInvalidArgument(s),
             "unexpected error code: ", s.ToString());
  CAVS_CHECK(s.message().find(path) != absl::string_view::npos,
             "error without the file: ", s.message());
}

// Every value of `store` is still kBefore.
bool Untouched(const ParameterStore& store) {
  for (const auto& p : store.parameters()) {
    for (float x : p->value.ToVector()) {
      if (x != kBefore) return false;
    }
  }
  return true;
}

// Loads `path` into `store` (and `optimizer`, may be null) and checks the outcome.
void Load(const std::string& path, ParameterStore& store, Optimizer* optimizer) {
  absl::StatusOr<CheckpointInfo> loaded = LoadCheckpoint(path, store, optimizer);
  if (!loaded.ok()) {
    CheckError(loaded.status(), path);
    CAVS_CHECK(Untouched(store), "a failed load changed the parameters");
    CAVS_CHECK(optimizer == nullptr || optimizer->step() == 0, "a failed load set the step");
    return;
  }
  if (optimizer != nullptr) {
    CAVS_CHECK(optimizer->step() == loaded->optimizer_step, "the optimizer's step");
  }
}

void Examine(const std::string& bytes) {
  MemFile file(bytes);
  absl::StatusOr<CheckpointInfo> info = ReadCheckpointMetadata(file.path());
  if (!info.ok()) {
    CheckError(info.status(), file.path());
    return;
  }
  CAVS_CHECK(info->step >= 0 && info->optimizer_step >= 0, "negative step");
  for (const auto& [key, value] : info->metadata) {
    CAVS_CHECK(key.rfind(kCheckpointReservedPrefix, 0) != 0, "reserved key returned: ", key);
  }
  (void)cavs::trainer::ParseCsvRows(info->metadata["trainer.curve"], /*language_model=*/false);
  (void)cavs::trainer::ParseCsvRows(info->metadata["trainer.curve"], /*language_model=*/true);
  (void)Rng::FromState(info->metadata["trainer.shuffle_rng"]);

  // A store made from the file's own parameter list, where it is small and all float32.
  ParameterStore own(1);
  int64_t elements = 0;
  bool loadable = true;
  for (const CheckpointTensorInfo& t : info->tensors) {
    if (t.kind != CheckpointEntryKind::kParameter) continue;
    CAVS_CHECK(!t.name.empty() && t.name.size() <= kCheckpointMaxNameBytes, "name length");
    const int64_t n = t.shape.CheckedNumElements();
    elements += n;
    loadable = n >= 0 && t.dtype == DType::kFloat32 && elements <= kMaxElements;
    if (!loadable) break;
    if (!own.GetOrCreate(t.name, t.shape, Initializer::Constant(kBefore)).ok()) loadable = false;
  }
  if (loadable) {
    std::unique_ptr<Optimizer> optimizer;
    if (absl::StatusOr<OptimizerKind> kind = ParseOptimizerKind(info->optimizer); kind.ok()) {
      OptimizerConfig config;
      config.kind = *kind;
      optimizer = *MakeOptimizer(config);
    }
    Load(file.path(), own, optimizer.get());
  }
  ParameterStore other(1);
  CAVS_CHECK(other.GetOrCreate("w", Shape({2, 3}), Initializer::Constant(kBefore)).ok());
  Load(file.path(), other, nullptr);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  Examine(bytes);
  if (size >= 4) {
    const uint32_t crc = static_cast<uint32_t>(
        crc32(crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(data), size - 4));
    std::memcpy(bytes.data() + size - 4, &crc, 4);  // little-endian, as the format stores it
    if (std::memcmp(bytes.data() + size - 4, data + size - 4, 4) != 0) Examine(bytes);
  }
  return 0;
}
