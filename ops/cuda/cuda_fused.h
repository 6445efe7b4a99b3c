// Generated fused element-wise kernels on CUDA: NVRTC compiles the kernel that
// ops/cuda/ew_codegen.h emits for a program's shape, once per process and shape, and
// Kernels::Elementwise launches it instead of the interpreter (cuda_elementwise.cu).
//
// The first launch of a new shape pays the compile (tens of milliseconds, or a file read when an
// earlier process compiled it: CompileCudaSourceCached; a vertex function's schedule has a
// handful of shapes: its forward and backward rounds, pre- and post-ops, fills);
// every later one only plans (PlanEwKernel, microseconds on the host) and launches. Compiled
// for the device's own architecture (sm_XY from its compute capability), loaded with the
// runtime's library API (cudaLibraryLoadData), so no driver-API library is linked.
//
// A launch with a `shape` (Kernels::Elementwise) seen before skips the plan: the program's ops,
// widths, strides and scratch columns are compared with the first one's (a few nanoseconds per
// instruction) and its kernel is launched. The plan's analysis is quadratic in the program's
// operands (2 to 3 us for a Tree-LSTM round on the development machine, BM_EwKernelPlan), the
// check linear. The first kVerifiedLaunches launches of every shape are also planned in full
// and must give the same key, and every launch is with KernelOptions::verify_ew_shapes (the tests).
//
// CudaKernelOptions::generated_elementwise = false keeps the interpreter (and no scratch
// operands).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ops/cuda/ew_codegen.h"
#include "ops/kernel_options.h"
#include "ops/kernels.h"

namespace cavs::ops::cuda {

// NVRTC: `source` (which may include "core/philox.h") to a cubin for sm_<arch> (e.g. 90), or,
// where this NVRTC does not know that architecture, to PTX for the newest one below it (the
// driver finishes it at load). Needs no GPU. A compile error carries NVRTC's log.
[[nodiscard]] absl::StatusOr<std::string> CompileCudaSource(const std::string& source,
                                                            const std::string& file, int arch);

// CompileCudaSource through an on-disk cache in `cache_dir` (empty: no cache), so that a later
// process loads what an earlier one compiled instead of running NVRTC again. An entry holds
// the source it was compiled from (compared on load: no collision can return another kernel's
// code), the code, and a CRC-32 of both; a missing, torn or foreign entry is compiled again and
// rewritten (through a temporary file and a rename, so readers never see a partial entry).
// Entries are keyed by the source, the headers it includes and NVRTC's options (stored whole
// with the source), the architecture, the NVRTC version and the cache format.
// A cache that cannot be written is not an error: the code is still returned.
[[nodiscard]] absl::StatusOr<std::string> CompileCudaSourceCached(const std::string& source,
                                                                  const std::string& file, int arch,
                                                                  const std::string& cache_dir);

// The entry CompileCudaSourceCached uses for `source` and `arch` in `cache_dir`.
std::string KernelCachePath(const std::string& cache_dir, const std::string& source, int arch);

// The kernel cache directory `options` ask for (CudaKernelOptions::kernel_cache_dir): that
// directory, or by default $XDG_CACHE_HOME/cavs/kernels, else $HOME/.cache/cavs/kernels; empty
// (no cache) where the cache is off or neither variable is set.
std::string KernelCacheDir(const CudaKernelOptions& options);

// The compiled kernels of one device. Used by one thread at a time (as Kernels are).
class CudaFusedElementwise {
 public:
  // `arch`: the device's compute capability as major * 10 + minor; `num_sms`: its
  // multiprocessor count (sets the grid). The device must be current for every call.
  // `verify_all`: plan every launch with a known shape too and check the key (for tests;
  // KernelOptions::verify_ew_shapes). `cache_dir`: the on-disk kernel cache (empty: none).
  CudaFusedElementwise(int arch, int num_sms, bool verify_all = false, std::string cache_dir = {})
      : arch_(arch), num_sms_(num_sms), verify_all_(verify_all), cache_dir_(std::move(cache_dir)) {}
  ~CudaFusedElementwise();
  CudaFusedElementwise(const CudaFusedElementwise&) = delete;
  CudaFusedElementwise& operator=(const CudaFusedElementwise&) = delete;

  static constexpr int kVerifiedLaunches = 4;

  // A loaded kernel (its library stays loaded while this object lives).
  struct Compiled {
    cudaLibrary_t library = nullptr;
    cudaKernel_t kernel = nullptr;
  };

  // Compiles (through the kernel cache), loads and launches a trivial kernel, and checks that
  // it ran: whether NVRTC, the library API and the driver's loading (lazy: at the first
  // launch) work here at all.
  [[nodiscard]] absl::Status Probe();

  // Kernels::Elementwise for a validated program (scratch operands allowed): plans (unless
  // `shape` was seen), compiles the plan's kernel if new, and queues one launch on `stream`
  // over rows [row0, row0 + rows) of the operands.
  [[nodiscard]] absl::Status Launch(cudaStream_t stream, const EwInstr* host, const EwInstr* device,
                                    int count, int64_t rows, uint64_t shape, int64_t row0);

  // Distinct kernels compiled so far, and launches that skipped the plan.
  int64_t compiled() const { return static_cast<int64_t>(kernels_.size()); }
  int64_t shape_hits() const { return shape_hits_; }
  bool verify_all() const { return verify_all_; }
  const std::string& cache_dir() const { return cache_dir_; }

 private:
  // What a launch needs, kept per caller shape with the program's fingerprint.
  struct Shaped {
    std::vector<int64_t> fingerprint;  // ops, widths, strides, scratch columns
    EwKernelPlan plan;                 // its key and widths
    Compiled kernel;
    int launches = 0;
  };
  // The Shaped for a program: the one kept for `shape` if its fingerprint matches (checking the
  // plan as Launch documents), else a new plan (kept for `shape`, or in `*local` for shape 0)
  // with its kernel compiled.
  absl::StatusOr<Shaped*> Find(const EwInstr* host, int count, int64_t rows, uint64_t shape,
                               Shaped* local);
  absl::StatusOr<Compiled> KernelFor(const EwKernelPlan& plan);
  absl::Status LaunchKernel(cudaStream_t stream, const Compiled& kernel, const EwInstr* device,
                            int64_t rows, int64_t row0, int64_t shared_width, int64_t max_width);

  int arch_;
  int num_sms_;
  bool verify_all_;
  std::string cache_dir_;  // compiled kernels on disk (empty: none)
  int64_t shape_hits_ = 0;
  absl::flat_hash_map<std::vector<int64_t>, absl::StatusOr<Compiled>> kernels_;
  absl::flat_hash_map<uint64_t, Shaped> shapes_;
};

}  // namespace cavs::ops::cuda
