#include "ops/cpu/cpu_kernels.h"

#include <vector>

#include "core/flush_denormal.h"
#include "core/status.h"
#include "ops/cpu/cpu_elementwise.h"
#include "ops/cpu/cpu_gather.h"
#include "ops/cpu/cpu_gemm.h"
#include "ops/cpu/cpu_packed_gemm.h"
#include "ops/cpu/cpu_parallel.h"
#include "ops/cpu/cpu_reduce.h"
#include "ops/cpu/cpu_softmax.h"

namespace cavs::ops::cpu {

CpuKernels::CpuKernels() {
  CpuThreads();  // puts OpenBLAS in single-threaded mode
}

absl::Status CpuKernels::Configure(const KernelOptions& options) {
  SetCpuThreads(options.cpu.threads);
  cpu::SetPackedGemmEnabled(options.cpu.packed_gemm);
  cpu::SetPackedGemmAvx2(options.cpu.packed_gemm_avx2);
  if (!options.verify_ew_shapes) {
    shape_checker_.reset();
  } else if (shape_checker_ == nullptr) {
    shape_checker_ = std::make_unique<EwShapeChecker>();
  }
  as_planned_ = options.cpu.ew_as_planned;
  row_offset_ = options.cpu.ew_row_offset;
  return absl::OkStatus();
}

CpuKernels* CpuKernels::Get() {
  static CpuKernels* kernels = new CpuKernels();
  return kernels;
}

absl::Status CpuKernels::Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                              float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                              float beta, float* c, int64_t ldc) {
  core::ScopedFlushDenormal flush;
  return cpu::Gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

absl::Status CpuKernels::GemmBias(const GemmCall& g) {
  core::ScopedFlushDenormal flush;
  CAVS_RETURN_IF_ERROR(cpu::Gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b,
                                 g.ldb, g.beta, g.c, g.ldc));
  if (g.bias == nullptr) return absl::OkStatus();
  // The sizes are checked by now: the bias onto the rows, split over the threads.
  cpu::ParallelFor(g.m, g.n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* row = g.c + i * g.ldc;
      for (int64_t j = 0; j < g.n; ++j) row[j] += g.bias[j];
    }
  });
  return absl::OkStatus();
}

int64_t CpuKernels::PackedGemmBytes(int64_t k, int64_t n) const {
  return cpu::PackedGemmBytes(k, n);
}

absl::Status CpuKernels::PackGemmB(bool trans_b, int64_t k, int64_t n, const float* b, int64_t ldb,
                                   float* packed) {
  core::ScopedFlushDenormal flush;
  return cpu::PackGemmB(trans_b, k, n, b, ldb, packed);
}

absl::Status CpuKernels::GemmPackedB(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                                     const float* packed, const float* bias, float beta, float* c,
                                     int64_t ldc) {
  core::ScopedFlushDenormal flush;
  return cpu::GemmPackedB(m, n, k, a, lda, packed, bias, beta, c, ldc);
}

absl::Status CpuKernels::Elementwise(const EwInstr* host, const EwInstr* /*device*/, int count,
                                     int64_t rows, uint64_t shape, int64_t row0) {
  if (row0 != 0 && !row_offset_) {
    return absl::InvalidArgumentError(absl::StrCat("Elementwise: row offset ", row0,
                                                   " with KernelOptions::cpu.ew_row_offset off"));
  }
  if ((shape_checker_ != nullptr || as_planned_) && count > 0 && rows > 0) {
    // The checks see the program as it runs: rebased to its rows.
    thread_local std::vector<EwInstr> rebased;
    if (row0 != 0) {
      rebased.resize(static_cast<size_t>(count));
      RebaseEwProgram(host, count, row0, rebased.data());
      host = rebased.data();
      row0 = 0;
    }
    CAVS_RETURN_IF_ERROR(cpu::ValidateProgram(host, count, rows));
    if (shape_checker_ != nullptr) {
      CAVS_RETURN_IF_ERROR(shape_checker_->Check(host, count, rows, shape));
    }
    if (as_planned_) {
      RunEwPlanOnHost(PlanEwKernel(host, count, rows), host, rows);
      return absl::OkStatus();
    }
  }
  core::ScopedFlushDenormal flush;
  return cpu::Elementwise(host, count, rows, row0);
}

absl::Status CpuKernels::GatherRows(const float* src, int64_t src_ld, const int32_t* idx, int64_t m,
                                    int64_t w, float* dst, int64_t dst_ld) {
  core::ScopedFlushDenormal flush;
  return cpu::GatherRows(src, src_ld, idx, m, w, dst, dst_ld);
}

absl::Status CpuKernels::ScatterAddRows(const float* src, int64_t src_ld, const int32_t* idx,
                                        int64_t m, int64_t w, float* dst, int64_t dst_ld,
                                        bool unique) {
  core::ScopedFlushDenormal flush;
  return cpu::ScatterAddRows(src, src_ld, idx, m, w, dst, dst_ld, unique);
}

absl::Status CpuKernels::SegmentReduce(ReduceOp op, const float* src, int64_t src_ld,
                                       const int32_t* offsets, const int32_t* ids, int64_t m,
                                       int64_t w, float* dst, int64_t dst_ld, int32_t* argmax) {
  core::ScopedFlushDenormal flush;
  return cpu::SegmentReduce(op, src, src_ld, offsets, ids, m, w, dst, dst_ld, argmax);
}

absl::Status CpuKernels::SegmentReduceGrad(ReduceOp op, const float* dy, int64_t dy_ld,
                                           const int32_t* offsets, const int32_t* ids,
                                           const int32_t* argmax, int64_t m, int64_t w, float* dsrc,
                                           int64_t dsrc_ld) {
  core::ScopedFlushDenormal flush;
  return cpu::SegmentReduceGrad(op, dy, dy_ld, offsets, ids, argmax, m, w, dsrc, dsrc_ld);
}

absl::Status CpuKernels::SoftmaxCrossEntropy(const float* logits, int64_t ld, int64_t n, int64_t c,
                                             const int32_t* labels, float scale, float* dlogits,
                                             float* stats, int32_t* pred) {
  core::ScopedFlushDenormal flush;
  return cpu::SoftmaxCrossEntropy(logits, ld, n, c, labels, scale, dlogits, stats, pred);
}

absl::Status CpuKernels::ColumnSum(const float* src, int64_t ld, int64_t m, int64_t w, float alpha,
                                   float* dst) {
  core::ScopedFlushDenormal flush;
  return cpu::ColumnSum(src, ld, m, w, alpha, dst);
}

absl::Status CpuKernels::ColumnDot(const float* x, int64_t x_ld, const float* y, int64_t y_ld,
                                   int64_t m, int64_t w, float* dst) {
  core::ScopedFlushDenormal flush;
  return cpu::ColumnDot(x, x_ld, y, y_ld, m, w, dst);
}

absl::Status CpuKernels::Fill(float* dst, int64_t n, float value) {
  core::ScopedFlushDenormal flush;
  return cpu::Fill(dst, n, value);
}

}  // namespace cavs::ops::cpu
