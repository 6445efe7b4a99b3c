// Generated fused element-wise kernels on CUDA (issue #6): NVRTC compiles the kernel that
// ops/ew_codegen.h emits for a program's shape, once per process and shape, and
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
// and must give the same key, and every launch is with CAVS_VERIFY_EW_SHAPES=1 (the tests).
//
// CAVS_CUDA_FUSED=0 in the environment keeps the interpreter (and no scratch operands).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ops/cuda/small_gemm.h"
#include "ops/ew_codegen.h"
#include "ops/kernels.h"

namespace cavs::ops {

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

// The kernel cache directory the environment asks for: $CAVS_KERNEL_CACHE (empty or "0": none),
// else $XDG_CACHE_HOME/cavs/kernels, else $HOME/.cache/cavs/kernels, else none.
std::string KernelCacheDirFromEnv();

// Whether the environment asks for generated kernels (CAVS_CUDA_FUSED unset or not "0").
bool FusedElementwiseFromEnv();

// Whether the environment asks for forward rounds in one launch (CAVS_FUSED_ROUND=1; off by
// default until it is measured on a GPU).
bool FusedRoundFromEnv();

// The compiled kernels of one device. Used by one thread at a time (as Kernels are).
class CudaFusedElementwise {
 public:
  // `arch`: the device's compute capability as major * 10 + minor; `num_sms`: its
  // multiprocessor count (sets the grid). The device must be current for every call.
  // `verify_all`: plan every launch with a known shape too and check the key (for tests).
  CudaFusedElementwise(int arch, int num_sms, bool verify_all = VerifyEwShapesFromEnv())
      : arch_(arch),
        num_sms_(num_sms),
        verify_all_(verify_all),
        cache_dir_(KernelCacheDirFromEnv()) {}
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
  // `shape` was seen), compiles the plan's kernel if new, and queues one launch on `stream`.
  [[nodiscard]] absl::Status Launch(cudaStream_t stream, const EwInstr* host, const EwInstr* device,
                                    int count, int64_t rows, uint64_t shape);

  // Kernels::GemmThenElementwise for the small GEMM `g` in RoundTiles (whose chunk of inputs
  // takes `gemm_shared_bytes` of shared memory, at most what PrepareSmallGemm allowed) and a
  // validated program: one launch of the round kernel (EmitRoundKernelCuda) over as many blocks as
  // the GEMM has tiles or, if fewer, as can be resident at once (each then takes several tiles in
  // turn); else the small GEMM's kernel, then the program as Launch runs it. Two launches where
  // the program has nothing of nonzero width, the round kernel did not compile or load for this
  // device (NVRTC's error is kept, not tried again), the GEMM's chunk or the program's shared
  // rows do not fit it, or the cooperative launch is refused.
  [[nodiscard]] absl::Status LaunchRound(cudaStream_t stream, const small_gemm::Args& g,
                                         size_t gemm_shared_bytes, const EwInstr* host,
                                         const EwInstr* device, int count, int64_t rows,
                                         uint64_t shape);

  // Distinct kernels compiled so far, launches that skipped the plan, and rounds launched as one
  // kernel (LaunchRound).
  int64_t compiled() const { return static_cast<int64_t>(kernels_.size()); }
  int64_t shape_hits() const { return shape_hits_; }
  int64_t rounds_fused() const { return rounds_fused_; }

 private:
  // A round kernel, loaded with its shared memory set, and how many of its blocks a
  // multiprocessor holds.
  struct Round {
    Compiled kernel;
    int64_t shared_bytes = 0;  // the dynamic shared memory it may take
    int blocks_per_sm = 0;
  };
  // What a launch needs, kept per caller shape with the program's fingerprint.
  struct Shaped {
    std::vector<int64_t> fingerprint;  // ops, widths, strides, scratch columns
    EwKernelPlan plan;                 // its key, widths, and the round kernel's source
    Compiled kernel;
    int launches = 0;
    std::optional<absl::StatusOr<Round>> round;  // once a round asked for it
  };
  // The Shaped for a program: the one kept for `shape` if its fingerprint matches (checking the
  // plan as Launch documents), else a new plan (kept for `shape`, or in `*local` for shape 0)
  // with its kernel compiled.
  absl::StatusOr<Shaped*> Find(const EwInstr* host, int count, int64_t rows, uint64_t shape,
                               Shaped* local);
  absl::StatusOr<Compiled> KernelFor(const EwKernelPlan& plan);
  absl::StatusOr<Round> RoundFor(const EwKernelPlan& plan, size_t gemm_shared_bytes);
  // LaunchRound's one launch; NotFound, with nothing queued, where the round kernel cannot run.
  absl::Status LaunchRoundKernel(cudaStream_t stream, const small_gemm::Args& g,
                                 size_t gemm_shared_bytes, Shaped& s, const EwInstr* device,
                                 int64_t rows);
  absl::Status LaunchKernel(cudaStream_t stream, const Compiled& kernel, const EwInstr* device,
                            int64_t rows, int64_t shared_width, int64_t max_width);

  int arch_;
  int num_sms_;
  bool verify_all_;
  std::string cache_dir_;  // compiled kernels on disk (empty: none)
  int64_t shape_hits_ = 0;
  int64_t rounds_fused_ = 0;
  unsigned* barrier_ = nullptr;  // the round kernels' grid barrier (a word of device memory)
  absl::flat_hash_map<std::vector<int64_t>, absl::StatusOr<Compiled>> kernels_;
  absl::flat_hash_map<std::vector<int64_t>, absl::StatusOr<Round>> rounds_;  // by the plan's key
  absl::flat_hash_map<uint64_t, Shaped> shapes_;
};

}  // namespace cavs::ops
