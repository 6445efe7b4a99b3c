#include "ops/cuda/cuda_fused.h"

#include <nvrtc.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/nvrtc_status.h"

namespace cavs::ops::cuda {

namespace {

#include "nvrtc_headers.inc"

constexpr int64_t kSharedBytes = 48 * 1024;  // dynamic shared memory without an opt-in

// NVRTC's options besides the architecture: nvcc's defaults, as the interpreter is built; no
// fast math (the ops' adds and multiplies are explicitly rounded intrinsics, ew_math.cuh,
// which no contraction setting reaches).
constexpr const char* kNvrtcOptions[] = {"--std=c++17", "--fmad=true"};

// Destroys an NVRTC program on every path out.
struct ProgramHolder {
  nvrtcProgram program = nullptr;
  ~ProgramHolder() {
    if (program != nullptr) nvrtcDestroyProgram(&program);
  }
};

}  // namespace

absl::StatusOr<std::string> CompileCudaSource(const std::string& source, const std::string& file,
                                              int arch) {
  // Machine code for the device's own sm_XY where this NVRTC knows it; else PTX for the newest
  // architecture it knows, which the driver compiles for the device when loading.
  int num_archs = 0;
  CAVS_NVRTC_RETURN_IF_ERROR(nvrtcGetNumSupportedArchs(&num_archs));
  std::vector<int> archs(static_cast<size_t>(num_archs));
  CAVS_NVRTC_RETURN_IF_ERROR(nvrtcGetSupportedArchs(archs.data()));
  int ptx_arch = 0;
  for (int a : archs) {
    if (a <= arch) ptx_arch = std::max(ptx_arch, a);
  }
  const bool cubin = std::find(archs.begin(), archs.end(), arch) != archs.end();
  if (!cubin && ptx_arch == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "NVRTC supports no architecture at or below sm_", arch, " to compile ", file, " for"));
  }
  const std::string gpu = cubin ? absl::StrCat("--gpu-architecture=sm_", arch)
                                : absl::StrCat("--gpu-architecture=compute_", ptx_arch);
  std::vector<const char*> headers, include_names;
  for (const NvrtcHeader& h : kNvrtcHeaders) {
    headers.push_back(h.text);
    include_names.push_back(h.name);
  }
  ProgramHolder holder;
  CAVS_NVRTC_RETURN_IF_ERROR(nvrtcCreateProgram(&holder.program, source.c_str(), file.c_str(),
                                                static_cast<int>(headers.size()), headers.data(),
                                                include_names.data()));
  const char* options[] = {gpu.c_str(), kNvrtcOptions[0], kNvrtcOptions[1]};
  const nvrtcResult result = nvrtcCompileProgram(holder.program, 3, options);
  if (result != NVRTC_SUCCESS) {
    size_t log_size = 0;
    std::string log;
    if (nvrtcGetProgramLogSize(holder.program, &log_size) == NVRTC_SUCCESS && log_size > 1) {
      log.resize(log_size);
      if (nvrtcGetProgramLog(holder.program, log.data()) != NVRTC_SUCCESS) log.clear();
      while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    }
    absl::Status s = NvrtcStatus(result, "nvrtcCompileProgram", __FILE__, __LINE__);
    return absl::Status(s.code(), absl::StrCat(s.message(), " compiling ", file, " (", gpu, ")",
                                               log.empty() ? "" : ":\n", log));
  }
  size_t size = 0;
  std::string code;
  if (cubin) {
    CAVS_NVRTC_RETURN_IF_ERROR(nvrtcGetCUBINSize(holder.program, &size));
    code.resize(size);
    CAVS_NVRTC_RETURN_IF_ERROR(nvrtcGetCUBIN(holder.program, code.data()));
  } else {
    CAVS_NVRTC_RETURN_IF_ERROR(nvrtcGetPTXSize(holder.program, &size));
    code.resize(size);  // NUL-terminated, as cudaLibraryLoadData wants PTX
    CAVS_NVRTC_RETURN_IF_ERROR(nvrtcGetPTX(holder.program, code.data()));
  }
  return code;
}

namespace {

constexpr char kCacheMagic[] = "CAVS-KERNEL-CACHE-2\n";

// CRC-32 of a then b: an entry's check, and its name (stable across processes, unlike
// absl::Hash; a collision is harmless, an entry is used only if its stored source matches).
uint32_t Crc(const std::string& a, const std::string& b) {
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(a.data()), static_cast<uInt>(a.size()));
  crc = crc32(crc, reinterpret_cast<const Bytef*>(b.data()), static_cast<uInt>(b.size()));
  return static_cast<uint32_t>(crc);
}

void PutU64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }

// What a compiled kernel depends on besides the architecture and NVRTC's version: its source,
// the headers it includes (embedded at build time) and the options. An entry stores it whole
// and is used only if it matches, so editing ew_math.cuh or an option invalidates the cache.
const std::string& CacheSalt() {
  static const std::string* salt = [] {
    auto* s = new std::string("\n// cavs kernel cache: options");
    for (const char* o : kNvrtcOptions) absl::StrAppend(s, " ", o);
    for (const NvrtcHeader& h : kNvrtcHeaders)
      absl::StrAppend(s, "\n// header ", h.name, "\n", h.text);
    return s;
  }();
  return *salt;
}

std::string CacheIdentity(const std::string& source) { return source + CacheSalt(); }

// The code of a valid entry for `source` (a CacheIdentity), or nothing.
std::optional<std::string> ReadEntry(const std::string& path, const std::string& source) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const size_t magic = sizeof(kCacheMagic) - 1;
  if (bytes.size() < magic + 20 || bytes.compare(0, magic, kCacheMagic) != 0) return std::nullopt;
  size_t at = magic;
  auto u64 = [&](uint64_t* v) {
    if (bytes.size() - at < 8) return false;
    std::memcpy(v, bytes.data() + at, 8);
    at += 8;
    return true;
  };
  uint64_t source_size = 0, code_size = 0;
  if (!u64(&source_size) || source_size != source.size() || bytes.size() - at < source_size ||
      bytes.compare(at, source_size, source) != 0) {
    return std::nullopt;
  }
  at += source_size;
  if (!u64(&code_size) || bytes.size() - at != code_size + 4) return std::nullopt;
  std::string code = bytes.substr(at, code_size);
  uint32_t crc = 0;
  std::memcpy(&crc, bytes.data() + at + code_size, 4);
  if (crc != Crc(source, code)) return std::nullopt;
  return code;
}

// Writes the entry through a temporary file and a rename; failures leave no file behind.
void WriteEntry(const std::string& path, const std::string& source, const std::string& code) {
  static std::atomic<uint64_t> counter{0};
  std::string bytes = kCacheMagic;
  PutU64(&bytes, source.size());
  bytes += source;
  PutU64(&bytes, code.size());
  bytes += code;
  const uint32_t crc = Crc(source, code);
  bytes.append(reinterpret_cast<const char*>(&crc), 4);
  const std::string tmp =
      absl::StrCat(path, ".tmp-", ::getpid(), "-", counter.fetch_add(1, std::memory_order_relaxed));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace

std::string KernelCachePath(const std::string& cache_dir, const std::string& source, int arch) {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) major = minor = -1;
  const uint32_t h = Crc(CacheIdentity(source), absl::StrCat(kCacheMagic, "sm_", arch, " nvrtc ",
                                                             major, ".", minor, "\n"));
  return absl::StrCat(cache_dir, "/", absl::Hex(h, absl::kZeroPad8), ".bin");
}

std::string KernelCacheDir(const CudaKernelOptions& options) {
  if (!options.kernel_cache) return "";
  if (!options.kernel_cache_dir.empty()) return options.kernel_cache_dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] != '\0') {
    return absl::StrCat(xdg, "/cavs/kernels");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0') {
    return absl::StrCat(home, "/.cache/cavs/kernels");
  }
  return "";
}

absl::StatusOr<std::string> CompileCudaSourceCached(const std::string& source,
                                                    const std::string& file, int arch,
                                                    const std::string& cache_dir) {
  if (cache_dir.empty()) return CompileCudaSource(source, file, arch);
  const std::string path = KernelCachePath(cache_dir, source, arch);
  const std::string identity = CacheIdentity(source);
  if (std::optional<std::string> code = ReadEntry(path, identity)) return *std::move(code);
  CAVS_ASSIGN_OR_RETURN(std::string code, CompileCudaSource(source, file, arch));
  std::error_code ec;
  std::filesystem::create_directories(cache_dir, ec);
  if (!ec) WriteEntry(path, identity, code);
  return code;
}

CudaFusedElementwise::~CudaFusedElementwise() {
  for (auto& [key, k] : kernels_) {
    if (k.ok() && k->library != nullptr) cudaLibraryUnload(k->library);
  }
}

namespace {

// Loads `code` (a cubin or PTX) and finds `name` in it.
absl::StatusOr<CudaFusedElementwise::Compiled> LoadKernel(const std::string& code,
                                                          const std::string& name) {
  CudaFusedElementwise::Compiled c;
  // A failed call stays the runtime's last error, which the next launch check (the
  // interpreter's, a gather's) would report as its own: clear it.
  auto failed = [&name](cudaError_t err, const char* call, int line) {
    (void)cudaGetLastError();
    const absl::Status s = CudaStatus(err, call, __FILE__, line);
    return absl::Status(s.code(), absl::StrCat(s.message(), " (kernel ", name, ")"));
  };
  cudaError_t err =
      cudaLibraryLoadData(&c.library, code.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (err != cudaSuccess) return failed(err, "cudaLibraryLoadData", __LINE__);
  err = cudaLibraryGetKernel(&c.kernel, c.library, name.c_str());
  if (err != cudaSuccess) {
    cudaLibraryUnload(c.library);
    return failed(err, "cudaLibraryGetKernel", __LINE__);
  }
  return c;
}

}  // namespace

absl::Status CudaFusedElementwise::Probe() {
  const std::string name = "cavs_ew_probe";
  CAVS_ASSIGN_OR_RETURN(std::string code,
                        CompileCudaSourceCached(
                            "extern \"C\" __global__ void cavs_ew_probe(float* x) { x[0] = 1.0f; }",
                            name + ".cu", arch_, cache_dir_));
  CAVS_ASSIGN_OR_RETURN(Compiled c, LoadKernel(code, name));
  // Loading is lazy (CUDA_MODULE_LOADING=LAZY, the default): a PTX the driver cannot JIT, or an
  // image for another device, fails only at the first launch. So launch it once, on a stream
  // of its own, and check that it ran.
  float* x = nullptr;
  cudaStream_t stream = nullptr;
  cudaError_t err = cudaMalloc(reinterpret_cast<void**>(&x), sizeof(float));
  const char* call = "cudaMalloc";
  if (err == cudaSuccess) {
    call = "cudaStreamCreateWithFlags";
    err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  }
  float value = 0.0f;
  if (err == cudaSuccess) {
    call = "cudaLaunchKernel (the probe kernel)";
    void* args[] = {&x};
    err = cudaLaunchKernel(reinterpret_cast<const void*>(c.kernel), dim3(1), dim3(1), args, 0,
                           stream);
  }
  if (err == cudaSuccess) {
    call = "cudaMemcpyAsync (the probe's result)";
    err = cudaMemcpyAsync(&value, x, sizeof(float), cudaMemcpyDeviceToHost, stream);
  }
  if (err == cudaSuccess) {
    call = "cudaStreamSynchronize (the probe)";
    err = cudaStreamSynchronize(stream);
  }
  if (err != cudaSuccess) (void)cudaGetLastError();
  if (stream != nullptr) cudaStreamDestroy(stream);
  if (x != nullptr) cudaFree(x);
  cudaLibraryUnload(c.library);
  if (err != cudaSuccess) return CudaStatus(err, call, __FILE__, __LINE__);
  if (value != 1.0f) {
    return absl::InternalError("the probe kernel ran but did not write its result");
  }
  return absl::OkStatus();
}

absl::StatusOr<CudaFusedElementwise::Compiled> CudaFusedElementwise::KernelFor(
    const EwKernelPlan& plan) {
  auto it = kernels_.find(plan.key);
  if (it != kernels_.end()) return it->second;
  const std::string name = EwKernelName(plan);
  absl::StatusOr<std::string> code = CompileCudaSourceCached(
      EmitEwKernelCuda(plan, name), absl::StrCat(name, ".cu"), arch_, cache_dir_);
  if (!code.ok()) {
    kernels_.emplace(plan.key, code.status());  // NVRTC's verdict stands: not compiled again
    return code.status();
  }
  // A load failure (out of memory, say) is not kept: the next launch tries again.
  CAVS_ASSIGN_OR_RETURN(Compiled c, LoadKernel(*code, name));
  kernels_.emplace(plan.key, c);
  return c;
}

absl::StatusOr<CudaFusedElementwise::Shaped*> CudaFusedElementwise::Find(const EwInstr* host,
                                                                         int count, int64_t rows,
                                                                         uint64_t shape,
                                                                         Shaped* local) {
  if (shape != 0) {
    auto it = shapes_.find(shape);
    if (it != shapes_.end() && EwFingerprintMatches(it->second.fingerprint, host, count, rows)) {
      Shaped& s = it->second;
      if (verify_all_ || s.launches < kVerifiedLaunches) {
        if (PlanEwKernel(host, count, rows).key != s.plan.key) return BrokenShapeError(shape);
      } else {
        ++shape_hits_;
      }
      ++s.launches;
      return &s;
    }
  }
  EwKernelPlan plan = PlanEwKernel(host, count, rows);
  Compiled kernel;
  if (!plan.instrs.empty()) {
    CAVS_ASSIGN_OR_RETURN(kernel, KernelFor(plan));
  }
  Shaped* s = local;
  if (shape != 0) {
    s = &shapes_[shape];
    EwFingerprint(host, count, rows, &s->fingerprint);
  }
  s->kernel = kernel;
  s->launches = 1;
  s->plan = std::move(plan);
  return s;
}

absl::Status CudaFusedElementwise::Launch(cudaStream_t stream, const EwInstr* host,
                                          const EwInstr* device, int count, int64_t rows,
                                          uint64_t shape, int64_t row0) {
  if (count <= 0 || rows <= 0) return absl::OkStatus();
  Shaped local;
  CAVS_ASSIGN_OR_RETURN(Shaped * s, Find(host, count, rows, shape, &local));
  if (s->plan.max_width == 0) return absl::OkStatus();  // nothing of nonzero width
  return LaunchKernel(stream, s->kernel, device, rows, row0, s->plan.shared_width,
                      s->plan.max_width);
}

absl::Status CudaFusedElementwise::LaunchKernel(cudaStream_t stream, const Compiled& kernel,
                                                const EwInstr* device, int64_t rows, int64_t row0,
                                                int64_t shared_width, int64_t max_width) {
  // Rows per block as the interpreter picks them, and no more than the shared rows fit.
  int64_t rows_per_block = EwRowsPerBlock(rows, max_width, num_sms_);
  const int64_t row_bytes = shared_width * static_cast<int64_t>(sizeof(float));
  if (row_bytes > kSharedBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Elementwise: the program's scratch operands that cross columns or segments need ",
        shared_width, " floats of shared memory per row; at most ",
        kSharedBytes / static_cast<int64_t>(sizeof(float)), " fit"));
  }
  if (row_bytes > 0) rows_per_block = std::min(rows_per_block, kSharedBytes / row_bytes);
  if (rows_per_block * max_width > std::numeric_limits<int32_t>::max() - kEwKernelThreads) {
    return absl::InvalidArgumentError(
        absl::StrCat("Elementwise: width ", max_width, " is too wide for one launch"));
  }
  const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
  if (blocks >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrCat("Elementwise: ", rows, " rows in one launch"));
  }
  const unsigned char* program = reinterpret_cast<const unsigned char*>(device);
  long long n = rows;
  int per_block = static_cast<int>(rows_per_block);
  long long first = row0;
  void* args[] = {&program, &n, &per_block, &first};
  const cudaError_t err = cudaLaunchKernel(
      reinterpret_cast<const void*>(kernel.kernel), dim3(static_cast<unsigned>(blocks)),
      dim3(kEwKernelThreads), args, static_cast<size_t>(rows_per_block * row_bytes), stream);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // not the next launch check's error (see LoadKernel)
    return CudaStatus(err, "cudaLaunchKernel", __FILE__, __LINE__);
  }
  return absl::OkStatus();
}

}  // namespace cavs::ops::cuda
