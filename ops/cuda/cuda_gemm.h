// Row-major SGEMM through cuBLAS (Kernels::Gemm), and through cuBLASLt with memoized plans.
//
// cuBLAS is column-major; a row-major [r, c] matrix with row stride ld is the column-major
// [c, r] matrix with leading dimension ld, its transpose. So C = op(A) op(B) in row-major is
// C^T = op(B)^T op(A)^T in column-major: one cublasSgemm with the operands swapped and m, n
// exchanged, and no copies.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cavs::ops {

// c: [m, n] = alpha * op(a) op(b) + beta * c (row-major; see Kernels::Gemm). Queued on the
// handle's stream with the handle's math mode.
[[nodiscard]] absl::Status CublasGemmRowMajor(cublasHandle_t handle, bool trans_a, bool trans_b,
                                              int64_t m, int64_t n, int64_t k, float alpha,
                                              const float* a, int64_t lda, const float* b,
                                              int64_t ldb, float beta, float* c, int64_t ldc);

// The same GEMM through cuBLASLt, with the descriptors and the algorithm chosen once per problem
// (transposes, sizes, row strides, the operands' alignment, TF32) and reused: a call of a known
// problem is one cublasLtMatmul with no heuristic query, which cuBLAS's cublasSgemm makes on
// every call. That query is host time, and a round of the engine is launch-bound on the host
// (docs/gpu_performance.md: about 6 to 7 us a launch); NVIDIA's RAFT measured its GEMM launch
// latency halved this way (10 to 5 us). The plans are kept for up to kMaxProblems problems,
// then dropped and rebuilt as needed.
//
// Alignment: cuBLASLt assumes 256-byte aligned operands unless told otherwise, and the engine
// passes row offsets into its buffers; each problem records the alignment its pointers and row
// strides guarantee, and the algorithm is chosen for that.
//
// Thread-safety: one caller at a time (as ops::Kernels).
class CublasLtGemm {
 public:
  static constexpr size_t kMaxProblems = 4096;
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLAS's advice for Hopper

  // On the current device; allocates the workspace there.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<CublasLtGemm>> Create();
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // As CublasGemmRowMajor, queued on `stream`. NotFound when cuBLASLt has no algorithm for the
  // problem (the caller then uses cublasSgemm); k == 0 is the caller's (cublasSgemm scales C).
  [[nodiscard]] absl::Status Run(cudaStream_t stream, bool allow_tf32, bool trans_a, bool trans_b,
                                 int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                                 int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                                 int64_t ldc);

  // Problems planned so far (including those dropped at kMaxProblems), and those with no
  // algorithm.
  int64_t problems_planned() const { return planned_; }
  int64_t problems_unsupported() const { return unsupported_; }

 private:
  struct Problem {
    bool trans_a, trans_b, tf32;
    int64_t m, n, k, lda, ldb, ldc;
    uint32_t align_a, align_b, align_c;
    bool operator==(const Problem& o) const {
      return trans_a == o.trans_a && trans_b == o.trans_b && tf32 == o.tf32 && m == o.m &&
             n == o.n && k == o.k && lda == o.lda && ldb == o.ldb && ldc == o.ldc &&
             align_a == o.align_a && align_b == o.align_b && align_c == o.align_c;
    }
    template <typename H>
    friend H AbslHashValue(H h, const Problem& p) {
      return H::combine(std::move(h), p.trans_a, p.trans_b, p.tf32, p.m, p.n, p.k, p.lda, p.ldb,
                        p.ldc, p.align_a, p.align_b, p.align_c);
    }
  };
  struct Plan {
    bool supported = false;
    cublasLtMatmulDescOpaque_t op;
    cublasLtMatrixLayoutOpaque_t a, b, c;  // cuBLASLt's A (our b), B (our a), C = D
    cublasLtMatmulAlgo_t algo;
    size_t workspace = 0;
  };

  CublasLtGemm(cublasLtHandle_t handle, void* workspace) : handle_(handle), workspace_(workspace) {}
  absl::StatusOr<std::unique_ptr<Plan>> MakePlan(const Problem& p) const;

  cublasLtHandle_t handle_;
  void* workspace_;
  absl::flat_hash_map<Problem, std::unique_ptr<Plan>> plans_;
  int64_t planned_ = 0, unsupported_ = 0;
};

}  // namespace cavs::ops
