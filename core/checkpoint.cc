#include "core/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace cavs::core {

static_assert(std::endian::native == std::endian::little,
              "checkpoint payloads are little-endian; big-endian hosts are not supported");

namespace {

constexpr size_t kMagicBytes = 8;
constexpr size_t kHeaderBytes = 32;  // magic, version, flags, step, entry count
constexpr char kOptimizerKey[] = "cavs.optimizer";
constexpr char kOptimizerStepKey[] = "cavs.optimizer_step";

std::string ErrnoText(int err) { return std::strerror(err); }

uint32_t UpdateCrc(uint32_t crc, const char* data, size_t n) {
  while (n > 0) {
    const uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = static_cast<uint32_t>(crc32(crc, reinterpret_cast<const Bytef*>(data), chunk));
    data += chunk;
    n -= chunk;
  }
  return crc;
}

// ---------------------------------------------------------------------------------------------
// Writing.

// A file descriptor closed on destruction.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now, reporting the error close() may return.
  int Close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

// Buffered writes to a file with a running CRC32 of everything appended.
class CheckpointWriter {
 public:
  CheckpointWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

  void Append(const void* data, size_t n) {
    if (!status_.ok() || n == 0) return;
    crc_ = UpdateCrc(crc_, static_cast<const char*>(data), n);
    if (buffer_.size() + n > kBufferBytes) Flush();
    if (n >= kBufferBytes) {
      WriteAll(static_cast<const char*>(data), n);
    } else {
      buffer_.append(static_cast<const char*>(data), n);
    }
  }
  template <typename T>
  void AppendInt(T v) {
    static_assert(std::is_integral_v<T>);
    Append(&v, sizeof(v));  // little-endian host (static_assert above)
  }
  void AppendString(absl::string_view s) {
    AppendInt(static_cast<uint32_t>(s.size()));
    Append(s.data(), s.size());
  }
  // Appends the CRC of everything so far (not itself part of the CRC) and flushes.
  absl::Status Finish() {
    const uint32_t crc = crc_;
    Append(&crc, sizeof(crc));
    Flush();
    return status_;
  }
  const absl::Status& status() const { return status_; }

 private:
  static constexpr size_t kBufferBytes = 1 << 20;

  void Flush() {
    WriteAll(buffer_.data(), buffer_.size());
    buffer_.clear();
  }
  void WriteAll(const char* p, size_t n) {
    while (status_.ok() && n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        status_ = absl::InternalError(
            absl::StrCat("writing ", path_, ": ", w < 0 ? ErrnoText(errno) : "no progress"));
        return;
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  }

  int fd_;
  std::string path_;
  std::string buffer_;
  uint32_t crc_ = 0;
  absl::Status status_;
};

std::string DirectoryOf(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? std::string(".") : dir;
}

absl::Status SyncDirectory(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) {
    return absl::InternalError(absl::StrCat("opening directory ", dir, ": ", ErrnoText(errno)));
  }
  if (::fsync(fd.get()) != 0 && errno != EINVAL) {  // some filesystems cannot sync directories
    return absl::InternalError(absl::StrCat("fsync of directory ", dir, ": ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

// Writes `path` through a temporary file in the same directory: write, fsync, rename, fsync
// the directory. On any failure the temporary file is removed and `path` is untouched.
absl::Status WriteAtomically(const std::string& path,
                             const std::function<absl::Status(CheckpointWriter&)>& body) {
  static std::atomic<uint64_t> counter{0};
  const std::string dir = DirectoryOf(path);
  const std::string tmp = absl::StrCat(dir, "/.", std::filesystem::path(path).filename().string(),
                                       ".tmp-", ::getpid(), "-", counter.fetch_add(1));
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) {
    return absl::InternalError(absl::StrCat("cannot write checkpoint ", path,
                                            ": creating temporary file ", tmp, ": ",
                                            ErrnoText(errno)));
  }
  CheckpointWriter writer(fd.get(), tmp);
  absl::Status s = body(writer);
  if (s.ok()) s = writer.Finish();
  if (s.ok() && ::fsync(fd.get()) != 0) {
    s = absl::InternalError(absl::StrCat("fsync of ", tmp, ": ", ErrnoText(errno)));
  }
  if (fd.Close() != 0 && s.ok()) {
    s = absl::InternalError(absl::StrCat("closing ", tmp, ": ", ErrnoText(errno)));
  }
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = absl::InternalError(absl::StrCat("renaming ", tmp, " to ", path, ": ", ErrnoText(errno)));
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return absl::Status(s.code(),
                        absl::StrCat("cannot write checkpoint ", path, ": ", s.message()));
  }
  return SyncDirectory(dir);
}

absl::Status WriteTensorEntry(CheckpointWriter& w, CheckpointEntryKind kind,
                              const std::string& name, const Tensor& t) {
  // A device tensor goes through a host copy, one tensor at a time.
  Tensor host = t;
  if (!t.device().is_cpu()) {
    absl::StatusOr<Tensor> copy = t.CopyTo(Device::Cpu());
    if (!copy.ok()) {
      return absl::Status(
          copy.status().code(),
          absl::StrCat("copying '", name, "' to the host: ", copy.status().message()));
    }
    host = *std::move(copy);
  }
  w.AppendInt(static_cast<uint8_t>(kind));
  w.AppendString(name);
  w.AppendInt(static_cast<uint8_t>(host.dtype()));
  w.AppendInt(static_cast<uint8_t>(host.shape().rank()));
  for (int64_t d : host.shape().dims()) w.AppendInt(d);
  w.AppendInt(static_cast<uint64_t>(host.nbytes()));
  w.Append(host.raw_data(), host.nbytes());
  return w.status();
}

absl::Status CheckSaveArguments(const std::string& path, int64_t step,
                                const CheckpointMetadata& metadata) {
  if (step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write checkpoint ", path, ": negative step ", step));
  }
  for (const auto& [key, value] : metadata) {
    if (key.empty() || key.size() > kCheckpointMaxNameBytes ||
        absl::StartsWith(key, kCheckpointReservedPrefix)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write checkpoint ", path, ": metadata key '", key,
                       "' is empty, longer than ", kCheckpointMaxNameBytes,
                       " bytes, or reserved (prefix '", kCheckpointReservedPrefix, "')"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SaveCheckpoint(const std::string& path, const ParameterStore& store,
                            const Optimizer* optimizer, int64_t step,
                            const CheckpointMetadata& metadata) {
  CAVS_RETURN_IF_ERROR(CheckSaveArguments(path, step, metadata));
  CheckpointMetadata all = metadata;
  std::vector<std::pair<std::string, Tensor>> state;
  if (optimizer != nullptr) {
    all[kOptimizerKey] = optimizer->name();
    all[kOptimizerStepKey] = absl::StrCat(optimizer->step());
    state = optimizer->StateTensors();
  }
  for (const auto& p : store.parameters()) {
    if (p->name.size() > kCheckpointMaxNameBytes) {
      return absl::InvalidArgumentError(absl::StrCat("cannot write checkpoint ", path,
                                                     ": parameter name longer than ",
                                                     kCheckpointMaxNameBytes, " bytes"));
    }
  }
  const uint64_t entries = all.size() + store.parameters().size() + state.size();
  return WriteAtomically(path, [&](CheckpointWriter& w) {
    w.Append(kCheckpointMagic, kMagicBytes);
    w.AppendInt(kCheckpointVersion);
    w.AppendInt(uint32_t{0});  // flags
    w.AppendInt(step);
    w.AppendInt(entries);
    for (const auto& [key, value] : all) {
      w.AppendInt(static_cast<uint8_t>(CheckpointEntryKind::kMetadata));
      w.AppendString(key);
      w.AppendInt(static_cast<uint64_t>(value.size()));
      w.Append(value.data(), value.size());
    }
    for (const auto& p : store.parameters()) {
      CAVS_RETURN_IF_ERROR(WriteTensorEntry(w, CheckpointEntryKind::kParameter, p->name, p->value));
    }
    for (const auto& [name, t] : state) {
      CAVS_RETURN_IF_ERROR(WriteTensorEntry(w, CheckpointEntryKind::kOptimizerState, name, t));
    }
    return w.status();
  });
}

// ---------------------------------------------------------------------------------------------
// Reading and parsing.

namespace {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    const int err = errno;
    const std::string msg = absl::StrCat("cannot read checkpoint ", path, ": ", ErrnoText(err));
    return err == ENOENT ? absl::NotFoundError(msg) : absl::InternalError(msg);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read checkpoint ", path, ": not a regular file"));
  }
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t r = ::read(fd.get(), data.data() + done, data.size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      return absl::InternalError(absl::StrCat("reading checkpoint ", path, ": ", ErrnoText(errno)));
    }
    if (r == 0) break;  // shrank while reading: parse what is there, it will not verify
    done += static_cast<size_t>(r);
  }
  data.resize(done);
  return data;
}

struct ParsedTensor {
  CheckpointTensorInfo info;
  absl::string_view payload;
};

struct ParsedCheckpoint {
  CheckpointInfo info;
  std::vector<ParsedTensor> tensors;  // same order as info.tensors
};

// Parses a checkpoint held in memory. Every read is bounds-checked against the data, so a
// corrupt length is reported, never trusted.
class CheckpointParser {
 public:
  CheckpointParser(const std::string& path, absl::string_view data) : path_(path), data_(data) {}

  absl::StatusOr<ParsedCheckpoint> Parse();

 private:
  absl::Status ParseHeader(int64_t* step, uint64_t* entries);
  absl::Status ParseEntry(ParsedCheckpoint& out);
  absl::Status ParseTensorFields(ParsedTensor& t);
  absl::Status ParseReserved(ParsedCheckpoint& out, const std::string& key, absl::string_view v);
  absl::Status VerifyChecksum();

  // Reads `n` bytes described by `what` into *out, or reports the truncation.
  absl::Status Take(size_t n, const char* what, absl::string_view* out) {
    if (n > data_.size() - pos_) {
      return Corrupt(absl::StrCat("truncated: ", what, " needs ", n, " bytes at byte ", pos_,
                                  " but the file has ", data_.size(), " bytes"));
    }
    *out = data_.substr(pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }
  template <typename T>
  absl::Status TakeInt(const char* what, T* out) {
    absl::string_view bytes;
    CAVS_RETURN_IF_ERROR(Take(sizeof(T), what, &bytes));
    std::memcpy(out, bytes.data(), sizeof(T));
    return absl::OkStatus();
  }
  absl::Status Corrupt(absl::string_view what) const {
    return absl::DataLossError(absl::StrCat("checkpoint ", path_, ": ", where_, what));
  }

  const std::string& path_;
  absl::string_view data_;
  size_t pos_ = 0;
  std::string entry_;                      // "entry 3 of 9 at byte 120" while inside an entry
  std::string where_;                      // entry_ and its name, as a message prefix
  absl::flat_hash_set<std::string> seen_;  // "<kind>:<name>" of the tensors so far
};

absl::Status CheckpointParser::ParseHeader(int64_t* step, uint64_t* entries) {
  const size_t have = std::min(data_.size(), kMagicBytes);
  if (data_.substr(0, have) != absl::string_view(kCheckpointMagic, have)) {
    return Corrupt("bad magic: not a cavs checkpoint");
  }
  absl::string_view magic;
  CAVS_RETURN_IF_ERROR(Take(kMagicBytes, "the magic", &magic));
  uint32_t version = 0, flags = 0;
  CAVS_RETURN_IF_ERROR(TakeInt("the format version", &version));
  if (version != kCheckpointVersion) {
    return absl::UnimplementedError(
        absl::StrCat("checkpoint ", path_, ": unsupported format version ", version,
                     " (this build reads version ", kCheckpointVersion, ")"));
  }
  CAVS_RETURN_IF_ERROR(TakeInt("the flags", &flags));
  if (flags != 0) return Corrupt(absl::StrCat("unknown header flags ", flags));
  CAVS_RETURN_IF_ERROR(TakeInt("the step", step));
  CAVS_RETURN_IF_ERROR(TakeInt("the entry count", entries));
  if (*step < 0) return Corrupt(absl::StrCat("implausible step ", *step));
  return absl::OkStatus();
}

absl::Status CheckpointParser::ParseTensorFields(ParsedTensor& t) {
  uint8_t dtype = 0, rank = 0;
  CAVS_RETURN_IF_ERROR(TakeInt("the dtype", &dtype));
  if (!IsValidDType(dtype)) return Corrupt(absl::StrCat("invalid dtype ", int{dtype}));
  t.info.dtype = static_cast<DType>(dtype);
  CAVS_RETURN_IF_ERROR(TakeInt("the rank", &rank));
  if (rank > kCheckpointMaxRank) {
    return Corrupt(
        absl::StrCat("implausible rank ", int{rank}, " (at most ", kCheckpointMaxRank, ")"));
  }
  std::vector<int64_t> dims(rank);
  uint64_t numel = 1;
  bool overflow = false;
  for (int i = 0; i < rank; ++i) {
    CAVS_RETURN_IF_ERROR(TakeInt("a dimension", &dims[i]));
    if (dims[i] < 0) return Corrupt(absl::StrCat("implausible dimension ", dims[i]));
    const uint64_t d = static_cast<uint64_t>(dims[i]);
    if (d != 0 && numel > (uint64_t{1} << 62) / d) overflow = true;
    numel *= d;
  }
  t.info.shape = Shape(std::move(dims));
  uint64_t bytes = 0;
  CAVS_RETURN_IF_ERROR(TakeInt("the payload length", &bytes));
  if (overflow || bytes != numel * SizeOf(t.info.dtype)) {
    return Corrupt(absl::StrCat("payload length ", bytes, " does not match ",
                                DTypeName(t.info.dtype), t.info.shape.DebugString()));
  }
  return Take(bytes, "the payload", &t.payload);
}

absl::Status CheckpointParser::ParseReserved(ParsedCheckpoint& out, const std::string& key,
                                             absl::string_view value) {
  if (key == kOptimizerKey) {
    out.info.optimizer = std::string(value);
    if (!ParseOptimizerKind(value).ok()) {
      return Corrupt(absl::StrCat("unknown optimizer '", value, "'"));
    }
  } else if (key == kOptimizerStepKey) {
    if (!absl::SimpleAtoi(value, &out.info.optimizer_step) || out.info.optimizer_step < 0) {
      return Corrupt(absl::StrCat("invalid optimizer step '", value, "'"));
    }
  } else {
    return Corrupt(absl::StrCat("unknown reserved metadata key '", key, "'"));
  }
  return absl::OkStatus();
}

absl::Status CheckpointParser::ParseEntry(ParsedCheckpoint& out) {
  uint8_t kind = 0;
  uint32_t name_bytes = 0;
  absl::string_view name;
  CAVS_RETURN_IF_ERROR(TakeInt("the entry kind", &kind));
  if (kind < 1 || kind > 3) return Corrupt(absl::StrCat("invalid entry kind ", int{kind}));
  CAVS_RETURN_IF_ERROR(TakeInt("the name length", &name_bytes));
  if (name_bytes == 0 || name_bytes > kCheckpointMaxNameBytes) {
    return Corrupt(absl::StrCat("implausible name length ", name_bytes));
  }
  CAVS_RETURN_IF_ERROR(Take(name_bytes, "the name", &name));
  const std::string key(name);
  where_ = absl::StrCat(entry_, " ('", key, "'): ");
  if (kind == static_cast<uint8_t>(CheckpointEntryKind::kMetadata)) {
    uint64_t bytes = 0;
    absl::string_view value;
    CAVS_RETURN_IF_ERROR(TakeInt("the value length", &bytes));
    CAVS_RETURN_IF_ERROR(Take(bytes, "the value", &value));
    if (absl::StartsWith(key, kCheckpointReservedPrefix)) return ParseReserved(out, key, value);
    if (!out.info.metadata.emplace(key, std::string(value)).second) {
      return Corrupt("duplicate metadata key");
    }
    return absl::OkStatus();
  }
  ParsedTensor t;
  t.info.kind = static_cast<CheckpointEntryKind>(kind);
  t.info.name = key;
  CAVS_RETURN_IF_ERROR(ParseTensorFields(t));
  if (!seen_.insert(absl::StrCat(int{kind}, ":", key)).second)
    return Corrupt("duplicate tensor name");
  out.tensors.push_back(std::move(t));
  return absl::OkStatus();
}

absl::Status CheckpointParser::VerifyChecksum() {
  const size_t covered = pos_;
  uint32_t stored = 0;
  CAVS_RETURN_IF_ERROR(TakeInt("the checksum", &stored));
  if (pos_ != data_.size()) {
    return Corrupt(
        absl::StrCat(data_.size() - pos_, " unexpected bytes after the checksum at byte ", pos_));
  }
  const uint32_t actual = UpdateCrc(0, data_.data(), covered);
  if (actual != stored) {
    return Corrupt(absl::StrCat("checksum mismatch: stored ", absl::Hex(stored), ", computed ",
                                absl::Hex(actual), " (the file is corrupt)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ParsedCheckpoint> CheckpointParser::Parse() {
  ParsedCheckpoint out;
  uint64_t entries = 0;
  CAVS_RETURN_IF_ERROR(ParseHeader(&out.info.step, &entries));
  // No reserve(entries): the count is untrusted. Each entry takes at least 13 bytes, so a
  // corrupt count ends in a truncation error, not a long loop.
  for (uint64_t i = 0; i < entries; ++i) {
    entry_ = absl::StrCat("entry ", i, " of ", entries, " at byte ", pos_);
    where_ = entry_ + ": ";
    CAVS_RETURN_IF_ERROR(ParseEntry(out));
  }
  where_.clear();
  CAVS_RETURN_IF_ERROR(VerifyChecksum());
  for (const ParsedTensor& t : out.tensors) out.info.tensors.push_back(t.info);
  return out;
}

absl::StatusOr<ParsedCheckpoint> ReadAndParse(const std::string& path, std::string* data) {
  CAVS_ASSIGN_OR_RETURN(*data, ReadWholeFile(path));
  return CheckpointParser(path, *data).Parse();
}

}  // namespace

absl::StatusOr<CheckpointInfo> ReadCheckpointMetadata(const std::string& path) {
  std::string data;
  CAVS_ASSIGN_OR_RETURN(ParsedCheckpoint parsed, ReadAndParse(path, &data));
  return std::move(parsed.info);
}

// ---------------------------------------------------------------------------------------------
// Loading into a store.

namespace {

absl::Status Mismatch(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("checkpoint ", path, ": ", what));
}

// Parameters: the file's and the store's must be the same set, with the same shapes.
absl::Status MatchParameters(const std::string& path, const ParsedCheckpoint& ckpt,
                             const ParameterStore& store) {
  absl::flat_hash_set<std::string> in_file;
  for (const ParsedTensor& t : ckpt.tensors) {
    if (t.info.kind != CheckpointEntryKind::kParameter) continue;
    in_file.insert(t.info.name);
    const Parameter* p = store.Find(t.info.name);
    if (p == nullptr) {
      return Mismatch(
          path, absl::StrCat("has parameter '", t.info.name, "', which the model does not have"));
    }
    if (p->value.shape() != t.info.shape || p->value.dtype() != t.info.dtype) {
      return Mismatch(path, absl::StrCat("parameter '", t.info.name, "' has shape ",
                                         DTypeName(t.info.dtype), t.info.shape.DebugString(),
                                         " in the checkpoint but ", DTypeName(p->value.dtype()),
                                         p->value.shape().DebugString(), " in the model"));
    }
  }
  for (const auto& p : store.parameters()) {
    if (!in_file.contains(p->name)) {
      return Mismatch(path, absl::StrCat("parameter '", p->name, "' is missing"));
    }
  }
  return absl::OkStatus();
}

// Optimizer state: "<param>/<slot>" for a parameter of the store and a slot of `optimizer`,
// of the parameter's shape; a parameter has all of its slots in the file or none.
absl::Status MatchOptimizerState(const std::string& path, const ParsedCheckpoint& ckpt,
                                 const ParameterStore& store, const Optimizer& optimizer) {
  if (ckpt.info.optimizer.empty()) {
    return Mismatch(path, "was saved without optimizer state; load it with a null optimizer");
  }
  if (ckpt.info.optimizer != optimizer.name()) {
    return Mismatch(path, absl::StrCat("was saved with optimizer '", ckpt.info.optimizer,
                                       "', not '", optimizer.name(), "'"));
  }
  const std::vector<std::string> slots = optimizer.SlotNames();
  absl::flat_hash_map<std::string, int> slots_found;  // parameter -> number of its slots
  for (const ParsedTensor& t : ckpt.tensors) {
    if (t.info.kind != CheckpointEntryKind::kOptimizerState) continue;
    const size_t slash = t.info.name.rfind('/');
    const Parameter* p =
        slash == std::string::npos ? nullptr : store.Find(t.info.name.substr(0, slash));
    const bool known_slot =
        slash != std::string::npos &&
        std::find(slots.begin(), slots.end(), t.info.name.substr(slash + 1)) != slots.end();
    if (p == nullptr || !known_slot) {
      return Mismatch(path, absl::StrCat("has optimizer state '", t.info.name, "', which ",
                                         optimizer.name(), " over this model does not have"));
    }
    if (p->value.shape() != t.info.shape || t.info.dtype != DType::kFloat32) {
      return Mismatch(path, absl::StrCat("optimizer state '", t.info.name, "' has shape ",
                                         t.info.shape.DebugString(), " but parameter '", p->name,
                                         "' has shape ", p->value.shape().DebugString()));
    }
    ++slots_found[p->name];
  }
  for (const auto& [param, found] : slots_found) {
    if (found != static_cast<int>(slots.size())) {
      return Mismatch(
          path, absl::StrCat("optimizer state of parameter '", param, "' is incomplete: ", found,
                             " of ", slots.size(), " slots"));
    }
  }
  return absl::OkStatus();
}

absl::Status CopyPayload(const ParsedTensor& t, Tensor& dst) {
  if (t.payload.empty()) return absl::OkStatus();
  CAVS_CHECK(t.payload.size() == dst.nbytes(), "payload of ", t.info.name);
  if (dst.device().is_cpu()) {
    std::memcpy(dst.raw_data(), t.payload.data(), t.payload.size());
    return absl::OkStatus();
  }
  Tensor host = Tensor::Host(dst.shape(), dst.dtype());
  std::memcpy(host.raw_data(), t.payload.data(), t.payload.size());
  return dst.CopyFrom(host);
}

absl::Status ApplyCheckpoint(const ParsedCheckpoint& ckpt, ParameterStore& store,
                             Optimizer* optimizer) {
  for (const ParsedTensor& t : ckpt.tensors) {
    if (t.info.kind != CheckpointEntryKind::kParameter) continue;
    CAVS_RETURN_IF_ERROR(CopyPayload(t, store.Find(t.info.name)->value));
  }
  if (optimizer == nullptr) return absl::OkStatus();
  optimizer->ResetState();
  CAVS_RETURN_IF_ERROR(optimizer->EnsureState(store));
  absl::flat_hash_map<std::string, Tensor> state;
  for (auto& [name, tensor] : optimizer->StateTensors()) state.emplace(name, tensor);
  for (const ParsedTensor& t : ckpt.tensors) {
    if (t.info.kind != CheckpointEntryKind::kOptimizerState) continue;
    auto it = state.find(t.info.name);
    CAVS_CHECK(it != state.end(), "optimizer state ", t.info.name, " was matched but not made");
    CAVS_RETURN_IF_ERROR(CopyPayload(t, it->second));
  }
  optimizer->set_step(ckpt.info.optimizer_step);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CheckpointInfo> LoadCheckpoint(const std::string& path, ParameterStore& store,
                                              Optimizer* optimizer) {
  std::string data;
  CAVS_ASSIGN_OR_RETURN(ParsedCheckpoint ckpt, ReadAndParse(path, &data));
  CAVS_RETURN_IF_ERROR(MatchParameters(path, ckpt, store));
  if (optimizer != nullptr) {
    CAVS_RETURN_IF_ERROR(MatchOptimizerState(path, ckpt, store, *optimizer));
  }
  CAVS_RETURN_IF_ERROR(ApplyCheckpoint(ckpt, store, optimizer));
  return std::move(ckpt.info);
}

// ---------------------------------------------------------------------------------------------
// Checkpoint directories.

std::string CheckpointFileName(int64_t step) { return absl::StrCat("ckpt-", step, ".cavs"); }

std::string CheckpointPath(const std::string& dir, int64_t step) {
  return (std::filesystem::path(dir) / CheckpointFileName(step)).string();
}

namespace {

// The step in a name "ckpt-<digits>.cavs", or -1.
int64_t StepOfFileName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, "ckpt-") || !absl::ConsumeSuffix(&name, ".cavs")) return -1;
  if (name.empty() ||
      !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  int64_t step = -1;
  return absl::SimpleAtoi(name, &step) ? step : -1;
}

// The writer's pid in a temporary name ".ckpt-<step>.cavs.tmp-<pid>-<n>" (WriteAtomically's,
// for a CheckpointFileName), or -1.
int64_t PidOfTemporaryName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, ".")) return -1;
  const size_t tmp = name.find(".tmp-");
  if (tmp == absl::string_view::npos || StepOfFileName(name.substr(0, tmp)) < 0) return -1;
  name.remove_prefix(tmp + 5);
  const size_t dash = name.find('-');
  if (dash == absl::string_view::npos) return -1;
  const absl::string_view pid = name.substr(0, dash), n = name.substr(dash + 1);
  auto digits = [](absl::string_view s) {
    return !s.empty() && s.size() <= 18 &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  int64_t value = -1;
  if (!digits(pid) || !digits(n) || !absl::SimpleAtoi(pid, &value)) return -1;
  return value > 0 && value <= std::numeric_limits<pid_t>::max() ? value : -1;
}

}  // namespace

namespace {

// The names of the regular files in `dir` with what `keep` makes of each name (kept where it
// gives >= 0), as (value, path). A missing `dir` has none; a `dir` that is not a directory is an
// InvalidArgument, one that cannot be listed an Internal error; a file removed meanwhile is
// simply not listed.
absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> FilesNamed(
    const std::string& dir, int64_t (*keep)(absl::string_view name)) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec == std::errc::no_such_file_or_directory) {
    return std::vector<std::pair<int64_t, std::string>>{};
  }
  if (ec == std::errc::not_a_directory) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint directory ", dir, " is not a directory"));
  }
  if (ec) return absl::InternalError(absl::StrCat("listing ", dir, ": ", ec.message()));
  std::vector<std::pair<int64_t, std::string>> found;
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const int64_t value = keep(it->path().filename().string());
    std::error_code type_error;
    if (value >= 0 && it->is_regular_file(type_error))
      found.emplace_back(value, it->path().string());
  }
  if (ec) return absl::InternalError(absl::StrCat("listing ", dir, ": ", ec.message()));
  return found;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> RemoveStaleTemporaryFiles(const std::string& dir) {
  CAVS_ASSIGN_OR_RETURN(auto temporary, FilesNamed(dir, PidOfTemporaryName));
  std::vector<std::string> stale;
  for (const auto& [pid, path] : temporary) {
    // ESRCH only: EPERM means a live process of another user.
    if (::kill(static_cast<pid_t>(pid), 0) == -1 && errno == ESRCH) stale.push_back(path);
  }
  std::sort(stale.begin(), stale.end());
  for (const std::string& path : stale) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return absl::InternalError(absl::StrCat("cannot remove the stale temporary checkpoint file ",
                                              path, ": ", ErrnoText(errno)));
    }
  }
  return stale;
}

absl::StatusOr<std::vector<std::string>> ListCheckpoints(const std::string& dir) {
  CAVS_ASSIGN_OR_RETURN(auto found, FilesNamed(dir, StepOfFileName));
  std::sort(found.rbegin(), found.rend());
  std::vector<std::string> paths;
  for (auto& [step, path] : found) paths.push_back(std::move(path));
  return paths;
}

absl::StatusOr<std::string> LatestCheckpoint(const std::string& dir,
                                             std::vector<absl::Status>* skipped) {
  CAVS_ASSIGN_OR_RETURN(std::vector<std::string> paths, ListCheckpoints(dir));
  if (paths.empty()) return absl::NotFoundError(absl::StrCat("no checkpoint in ", dir));
  std::vector<std::string> reasons;
  for (const std::string& path : paths) {
    absl::Status verified = ReadCheckpointMetadata(path).status();
    if (verified.ok()) return path;  // newest one that verifies
    if (skipped != nullptr) skipped->push_back(verified);
    reasons.emplace_back(verified.message());
  }
  return absl::DataLossError(absl::StrCat("no checkpoint in ", dir, " loads (", paths.size(),
                                          " file(s)): ", absl::StrJoin(reasons, "; ")));
}

}  // namespace cavs::core
