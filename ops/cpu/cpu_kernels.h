// CpuKernels: the CPU implementation of cavs::ops::Kernels, always built and returned by
// GetKernels(Device::Cpu()) (the CPU plug-in, ops/cpu/cpu_plugin.h). The reference every other
// device is tested against.
//
// GEMM is OpenBLAS sgemm, or a packed-weight kernel of our own for the rounds' skinny products
// (ops/cpu/cpu_packed_gemm.h); everything else is plain loops that the compiler vectorizes (built
// once per vector ISA and picked at load time, see ops/cpu/cpu_math.h). Work is split over one
// small thread pool shared with OpenBLAS (ops/cpu/cpu_parallel.h: SetCpuThreads, or
// KernelOptions::cpu.threads). Every method has finished when it returns.
//
// Results are bit-identical for any thread count, except possibly GEMM's: the pool splits a
// large product into blocks of C, which OpenBLAS need not round exactly as the whole.
//
// Thread-safety: methods may be called from several threads at once (the pool then serves one
// caller and the others run serially), though the Kernels contract asks for one at a time.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "core/device.h"
#include "ops/cpu/cpu_packed_gemm.h"
#include "ops/cpu/cpu_parallel.h"
#include "ops/ew_plan.h"
#include "ops/kernels.h"

namespace cavs::ops::cpu {

class CpuKernels final : public Kernels {
 public:
  CpuKernels();

  // The process-wide instance (what GetKernels(Device::Cpu()) returns).
  static CpuKernels* Get();

  core::Device device() const override { return core::Device::Cpu(); }
  // The process's thread count (SetCpuThreads) and packed GEMM (cpu::SetPackedGemmEnabled),
  // and this object's checks.
  absl::Status Configure(const KernelOptions& options) override;

  absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                    int64_t ldc) override;
  // Gemm, then the bias added to every row of c. SetGemmAddsBias(false) makes GemmAddsBias say
  // false (GemmBias still works), so that tests can run the engine's path for devices without
  // it: a fill of the bias and a GEMM onto it. On by default.
  bool GemmAddsBias() const override { return gemm_adds_bias_; }
  void SetGemmAddsBias(bool on) { gemm_adds_bias_ = on; }
  absl::Status GemmBias(const GemmCall& g) override;
  // Packed weights: ops/cpu/cpu_packed_gemm.h (AVX-512 or AVX2 + FMA CPUs; 0 bytes elsewhere;
  // fast, and so taken for speed, with AVX-512 only).
  int64_t PackedGemmBytes(int64_t k, int64_t n) const override;
  bool PackedGemmFast() const override { return cpu::PackedGemmFast(); }
  absl::Status PackGemmB(bool trans_b, int64_t k, int64_t n, const float* b, int64_t ldb,
                         float* packed) override;
  absl::Status GemmPackedB(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                           const float* packed, const float* bias, float beta, float* c,
                           int64_t ldc) override;
  // Every call runs on the calling thread, so recorded host functions run between launches.
  bool RunsSynchronously() const override { return true; }
  bool CallsHostHooksBetweenLaunches() const override { return true; }
  bool ElementwiseScratch() const override { return true; }
  bool ElementwiseRowOffset() const override { return row_offset_; }
  using Kernels::Elementwise;
  absl::Status Elementwise(const EwInstr* host, const EwInstr* device, int count, int64_t rows,
                           uint64_t shape, int64_t row0) override;
  absl::Status GatherRows(const float* src, int64_t src_ld, const int32_t* idx, int64_t m,
                          int64_t w, float* dst, int64_t dst_ld) override;
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
  absl::Status Synchronize() override { return absl::OkStatus(); }

 private:
  // KernelOptions::verify_ew_shapes: Elementwise checks its callers' shapes (ops/ew_plan.h).
  std::unique_ptr<EwShapeChecker> shape_checker_;
  // KernelOptions::cpu.ew_as_planned: Elementwise runs programs as a generated CUDA kernel would
  // (RunEwPlanOnHost, single-threaded), to check the plans of real programs without a GPU.
  bool as_planned_ = false;
  bool row_offset_ = true;  // KernelOptions::cpu.ew_row_offset
  bool gemm_adds_bias_ = true;
};

}  // namespace cavs::ops::cpu
