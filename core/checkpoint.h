// Checkpoints: a model's parameters, an optimizer's state, the step and a string metadata map
// (model config, data position, RNG state, world size, ...) in one binary file, for --resume.
//
// The format is described in docs/checkpoint.md: magic, version, header, typed entries, and a
// CRC32 over everything before it. Writes are atomic (temporary file in the same directory,
// fsync, rename, fsync of the directory), so a crash or a failed write never leaves a partial
// file under the final name and never clobbers the previous checkpoint.
//
// Loading is all or nothing: the file is read, parsed, checksummed and matched against the
// store (names, shapes, dtypes; a missing or extra parameter is an error naming it) and the
// optimizer before anything is copied. Every failure is a Status naming the file and what is
// wrong with it (the byte offset and entry for corrupt files); corrupt lengths are checked
// against the file's size before anything is allocated from them.
//
// Thread-safety: the functions are thread-safe for distinct files and distinct stores.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/dtype.h"
#include "core/optimizer.h"
#include "core/parameter.h"
#include "core/shape.h"

namespace cavs::core {

inline constexpr char kCheckpointMagic[] = "CAVSCKPT";  // the first 8 bytes of every file
inline constexpr uint32_t kCheckpointVersion = 1;
// Limits a valid file stays within; larger values are reported as corrupt.
inline constexpr uint32_t kCheckpointMaxNameBytes = 4096;
inline constexpr int kCheckpointMaxRank = 8;
// Metadata keys starting with this prefix are written by cavs itself.
inline constexpr char kCheckpointReservedPrefix[] = "cavs.";

// key -> value, both arbitrary bytes; sorted, so a file's bytes depend only on its contents.
using CheckpointMetadata = std::map<std::string, std::string>;

enum class CheckpointEntryKind : uint8_t { kParameter = 1, kOptimizerState = 2, kMetadata = 3 };

struct CheckpointTensorInfo {
  CheckpointEntryKind kind = CheckpointEntryKind::kParameter;
  std::string name;
  DType dtype = DType::kFloat32;
  Shape shape;
};

// What a checkpoint holds, apart from the tensor values.
struct CheckpointInfo {
  int64_t step = 0;
  CheckpointMetadata metadata;  // the caller's metadata (no reserved keys)
  std::string optimizer;        // "sgd", "adagrad", "adam"; empty if saved without one
  int64_t optimizer_step = 0;   // Optimizer::step() at save time
  std::vector<CheckpointTensorInfo> tensors;  // parameters, then optimizer state, in file order
};

// Writes `store`'s parameters, `optimizer`'s state (if not null), `step` and `metadata` to
// `path`, atomically. Errors: a reserved or invalid metadata key, a negative step, any I/O
// failure (the temporary file is removed and an existing `path` is left as it was).
[[nodiscard]] absl::Status SaveCheckpoint(const std::string& path, const ParameterStore& store,
                                          const Optimizer* optimizer, int64_t step,
                                          const CheckpointMetadata& metadata = {});

// Restores the parameters of `store` (which must already exist, with the same names and shapes)
// and, if `optimizer` is not null, its state and step, through Tensor::CopyFrom so that device
// parameters work. With a null optimizer, stored optimizer state is ignored. The optimizer must
// be of the kind the file was saved with; a parameter whose state the file lacks (saved before
// its first step) starts from fresh state. Returns the step and metadata. On error nothing is
// changed.
[[nodiscard]] absl::StatusOr<CheckpointInfo> LoadCheckpoint(const std::string& path,
                                                            ParameterStore& store,
                                                            Optimizer* optimizer);

// Reads and verifies (checksum included) `path`, and returns what it holds, touching no store.
[[nodiscard]] absl::StatusOr<CheckpointInfo> ReadCheckpointMetadata(const std::string& path);

// "ckpt-<step>.cavs", and that name inside `dir`.
std::string CheckpointFileName(int64_t step);
std::string CheckpointPath(const std::string& dir, int64_t step);

// The regular files of `dir` named like CheckpointFileName, newest step first, verified or not
// (temporary files are not listed). A missing `dir` has none; a `dir` that is not a directory is
// an InvalidArgument, one that cannot be listed an Internal error.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> ListCheckpoints(const std::string& dir);

// Removes the temporary files that SaveCheckpoint leaves in `dir` only when its process dies in
// the middle of a write (SIGKILL, a power cut): names ".ckpt-<step>.cavs.tmp-<pid>-<n>" whose
// writer, process <pid>, no longer exists on this host (kill(pid, 0) fails with ESRCH). A file
// of a live process, or of a pid this process may not signal, is kept: it may be a write in
// progress. Returns the removed paths. A missing `dir` has none; one that is not a directory is
// an InvalidArgument (as for ListCheckpoints); one that cannot be listed, or a file that cannot
// be removed, an Internal error naming it.
// REQUIRES: no process on another host writes checkpoints into `dir` (its pids mean nothing here).
[[nodiscard]] absl::StatusOr<std::vector<std::string>> RemoveStaleTemporaryFiles(
    const std::string& dir);

// The path of the complete, verified checkpoint with the highest step among
// ListCheckpoints(dir). Newer files that fail to verify are skipped, and their errors (each
// naming its file and what is wrong with it) appended to `skipped` if not null, so that a caller
// can say why it fell back to an older file. NotFound if `dir` holds no checkpoint file; DataLoss
// naming every file and its error if it holds some but none verifies (a caller must not take
// that for an empty directory and write over them).
[[nodiscard]] absl::StatusOr<std::string> LatestCheckpoint(
    const std::string& dir, std::vector<absl::Status>* skipped = nullptr);

}  // namespace cavs::core
