// CudaKernels: ops::Kernels for one GPU: cuBLAS for Gemm, custom kernels for the rest.
//
// Every method queues its work on the device backend's stream (cuda_backend.h) and returns;
// errors in the arguments it can see (negative sizes, missing pointers) and launch errors are
// Statuses, faults inside a kernel surface at the next synchronizing call. Launches per call:
// Gemm one cuBLAS or cuBLASLt call or small-GEMM kernel, GemmBias the same (the bias in the
// small GEMM's store or cuBLASLt's epilogue; on cublasSgemm a second kernel adds it);
// Elementwise one kernel for the whole program; GemmThenElementwise the two calls; GatherRows,
// ScatterAddRows, SegmentReduce(Grad), SoftmaxCrossEntropy, ColumnSum, ColumnDot one kernel each;
// Fill one kernel or memset. The op families live in cuda_gemm, cuda_small_gemm, cuda_fused
// (generated element-wise kernels) and cuda_elementwise (the interpreter), cuda_gather,
// cuda_softmax and cuda_reduce.
//
// TF32: Gemm computes in full fp32 by default (CUBLAS_DEFAULT_MATH), so results match the CPU
// up to summation order. SetAllowTf32(true) lets cuBLAS use TF32 tensor cores (about 10 bits of
// mantissa in the products), faster and less exact.
//
// Gemm is, by default, the small-GEMM kernel where it measured faster (small_gemm.h:
// the Tree-LSTM's forward rounds, a few rows against a wide weight) and elsewhere cuBLASLt with
// a plan memoized per problem (cuda_gemm.h: no heuristic query per call), falling back to
// cublasSgemm where cuBLASLt has no algorithm. On an H100 (batch 256, three processes)
// cuBLASLt was ahead of cublasSgemm in 11 of 12 rows, and these defaults led every other path
// in 3 of 4 rows of one process and tied the fourth (bench/RESULTS.md). How they run is set by
// KernelOptions (ops/kernel_options.h; Configure), or one setting at a time by the setters:
// SetCublasLt(false) gives plain cublasSgemm; SetSmallGemm chooses where the small GEMM runs;
// SetGemmAutotune(true) (with cuBLASLt on) times candidate algorithms on the device once per
// class of problems and keeps the fastest (cuda_gemm.h).
//
// Thread-safety: as ops::Kernels, one executor thread at a time.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/cuda_gemm.h"
#include "ops/cuda/cuda_graph.h"
#include "ops/cuda/cuda_reduce.h"
#include "ops/cuda/small_gemm.h"
#include "ops/kernels.h"

namespace cavs::ops::cuda {

class CudaFusedElementwise;
class CublasLtGemm;

class CudaKernels final : public Kernels {
 public:
  // Kernels on `backend`'s device and stream (not owned; outlives this), configured by
  // `options`.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<CudaKernels>> Create(
      CudaBackend* backend, const KernelOptions& options = {});
  ~CudaKernels() override;
  CudaKernels(const CudaKernels&) = delete;
  CudaKernels& operator=(const CudaKernels&) = delete;

  core::Device device() const override { return backend_->device(); }
  // Takes options.cuda and options.verify_ew_shapes through the setters below. Generated
  // kernels that cannot be had here (no NVRTC for the device) are a warning, not an error: the
  // interpreter runs everything.
  absl::Status Configure(const KernelOptions& options) override;
  absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                    int64_t ldc) override;
  bool GemmAddsBias() const override { return true; }
  // Gemm's implementation too (g.bias null).
  absl::Status GemmBias(const GemmCall& g) override;
  // Generated kernels (cuda_fused.h) take scratch operands; the interpreter does not.
  bool ElementwiseScratch() const override { return fused_ != nullptr; }
  bool ElementwiseRowOffset() const override { return row_offset_; }
  using Kernels::Elementwise;
  absl::Status Elementwise(const EwInstr* host, const EwInstr* device, int count, int64_t rows,
                           uint64_t shape, int64_t row0) override;
  absl::Status GatherRows(const float* src, int64_t src_ld, const int32_t* idx, int64_t m,
                          int64_t w, float* dst, int64_t dst_ld) override;
  absl::Status GatherRowsMulti(const RowCopy* copies, int count, int64_t m) override;
  absl::Status ScatterAddRowsMulti(const RowCopy* copies, int count, int64_t m,
                                   bool unique) override;
  absl::Status ScatterAddRows(const float* src, int64_t src_ld, const int32_t* idx, int64_t m,
                              int64_t w, float* dst, int64_t dst_ld, bool unique) override;
  absl::Status SegmentReduce(ReduceOp op, const float* src, int64_t src_ld, const int32_t* offsets,
                             const int32_t* ids, int64_t m, int64_t w, float* dst, int64_t dst_ld,
                             int32_t* argmax) override;
  absl::Status SegmentReduceGrad(ReduceOp op, const float* dy, int64_t dy_ld,
                                 const int32_t* offsets, const int32_t* ids, const int32_t* argmax,
                                 int64_t m, int64_t w, float* dsrc, int64_t dsrc_ld) override;
  absl::Status SoftmaxCrossEntropy(const float* logits, int64_t ld, int64_t n, int64_t c,
                                   const int32_t* labels, float scale, float* dlogits, float* stats,
                                   int32_t* pred) override;
  absl::Status ColumnSum(const float* src, int64_t ld, int64_t m, int64_t w, float alpha,
                         float* dst) override;
  absl::Status ColumnDot(const float* x, int64_t x_ld, const float* y, int64_t y_ld, int64_t m,
                         int64_t w, float* dst) override;
  absl::Status Fill(float* dst, int64_t n, float value) override;
  absl::Status Synchronize() override { return backend_->Synchronize(); }
  // As one CUDA graph where graphs are on (SetGraphs; cuda_graph.h), else launch by launch.
  absl::StatusOr<bool> QueueRecorded(const std::function<absl::Status()>& queue) override;

  // QueueRecorded through CUDA graphs (KernelOptions::cuda.graphs; on by default). Turning
  // them off frees the executable graphs kept.
  void SetGraphs(bool on);
  bool graphs() const { return graphs_on_; }
  const CudaGraphReplay::Stats& graph_stats() const { return graphs_.stats(); }

  // Element-wise programs at a row offset (KernelOptions::cuda.ew_row_offset). An engine reads
  // it when it lays out a batch: switch between engines, not during one's batch.
  void SetElementwiseRowOffset(bool on) { row_offset_ = on; }

  // Elementwise through generated kernels (the default, CudaKernelOptions::generated_elementwise;
  // where a trial compile fails, a warning and the interpreter) or the interpreter. An engine asks
  // ElementwiseScratch() once, when it is created: switch before. Switching off waits for the
  // stream. An error if a trial compile and load fails (the setting is then unchanged).
  [[nodiscard]] absl::Status SetFusedElementwise(bool on);
  bool fused_elementwise() const { return fused_ != nullptr; }
  // Program shapes compiled so far by the generated-kernel path.
  int64_t fused_kernels_compiled() const;

  // Gemm through cuBLASLt with memoized plans (on, the default), or cublasSgemm (off). Turning it
  // on allocates cuBLASLt's workspace.
  [[nodiscard]] absl::Status SetCublasLt(bool on);
  bool cublas_lt() const { return lt_ != nullptr; }
  // Autotuning of the cuBLASLt path's algorithms (off by default); an error while cuBLASLt is
  // off.
  [[nodiscard]] absl::Status SetGemmAutotune(bool on);
  bool gemm_autotune() const;
  // The cuBLASLt path's problems planned so far, those it had no algorithm for, the classes
  // timed, and the problems left to cublasSgemm because it was timed faster.
  int64_t lt_problems_planned() const;
  int64_t lt_problems_unsupported() const;
  int64_t lt_classes_tuned() const;
  int64_t lt_problems_to_sgemm() const;
  // CublasLtGemm::last_tuning (empty while cuBLASLt is off).
  std::string lt_last_tuning() const;

  // Where Gemm uses the small-GEMM kernel (small_gemm.h; one launch whose 16 x 32 tiles spread
  // over the chip; fp32 whatever the TF32 setting): nowhere, where measured faster than cuBLAS
  // (small_gemm::Faster: the Tree-LSTM's forward rounds; the default), or wherever it
  // applies (a not transposed, m <= small_gemm::kMaxRows; for tests and A/B rows).
  using SmallGemm = SmallGemmUse;
  void SetSmallGemm(SmallGemm use) { small_gemm_ = use; }
  SmallGemm small_gemm() const { return small_gemm_; }
  // Whether Gemm takes the small GEMM for this problem by the setting above (before the small
  // GEMM's own checks, which may still leave it to cuBLAS).
  bool UsesSmallGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) const;
  // The GEMMs that Gemm ran on the small GEMM so far.
  int64_t small_gemms() const { return small_gemms_; }

  // Lets Gemm use TF32 tensor cores (off by default).
  [[nodiscard]] absl::Status SetAllowTf32(bool allow);
  bool allow_tf32() const { return allow_tf32_; }

  CudaBackend* backend() const { return backend_; }
  int num_sms() const { return num_sms_; }  // the device's multiprocessors
  // The reductions' workspace per multiprocessor, in floats (column sums' chunks, the loss
  // statistics' blocks).
  static constexpr int64_t kWorkspaceFloatsPerSm = 1024;
  cudaStream_t stream() const { return backend_->stream(); }
  cublasHandle_t cublas() const { return cublas_; }

 private:
  CudaKernels(CudaBackend* backend, cublasHandle_t cublas, int num_sms, int arch);
  // Elementwise's checks of a program before anything is queued (the CPU's; scratch operands
  // only for generated kernels).
  absl::Status CheckProgram(const EwInstr* host, const EwInstr* device, int count,
                            int64_t rows) const;
  // Makes the reductions' workspace (workspace_), its counts zeroed on the stream.
  absl::Status MakeWorkspace();

  CudaBackend* backend_;
  cublasHandle_t cublas_;
  int num_sms_;
  int arch_;  // compute capability, major * 10 + minor
  std::unique_ptr<CudaFusedElementwise> fused_;
  std::unique_ptr<CublasLtGemm> lt_;
  bool allow_tf32_ = false;
  SmallGemm small_gemm_ = SmallGemm::kWhereFaster;
  size_t small_gemm_shared_bytes_ = 0;  // PrepareSmallGemm's for this device (0: none)
  int64_t small_gemms_ = 0;
  // Where the blocks of a reduction split over blocks meet, made by Create: column sums over row
  // chunks (ColumnSum, ColumnDot) and the loss statistics over blocks (SoftmaxCrossEntropy),
  // kWorkspaceFloatsPerSm floats and a count per multiprocessor. Kernels on the one stream take
  // turns with it.
  ReduceWorkspace workspace_;
  // Configure's settings for what the setters make later: the generated kernels' checks and
  // cache directory, and cuBLASLt's autotuning.
  bool verify_ew_shapes_ = false;
  std::string kernel_cache_dir_;
  bool gemm_autotune_ = false;
  bool graphs_on_ = true;
  bool row_offset_ = false;  // CudaKernelOptions::ew_row_offset
  CudaGraphReplay graphs_;
};

// The kernels of cuda:`ordinal`, created on first use and never destroyed; an error where the
// machine has no such device.
[[nodiscard]] absl::StatusOr<CudaKernels*> GetCudaKernels(int ordinal);

}  // namespace cavs::ops::cuda
