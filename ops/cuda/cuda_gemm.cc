#include "ops/cuda/cuda_gemm.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cuda/cublas_status.h"
#include "ops/cuda/cuda_status.h"

namespace cavs::ops {

namespace {

// The checks both paths share: sizes, strides at least the rows' widths, 32-bit sizes.
absl::Status CheckGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda,
                       int64_t ldb, int64_t ldc) {
  if (m < 0 || n < 0 || k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gemm: negative size m=", m, " n=", n, " k=", k));
  }
  // The column-major views: op(B)^T is [n, k], op(A)^T is [k, m], C^T is [n, m]. cuBLAS wants
  // each leading dimension at least the view's row count (and at least 1).
  const int64_t need_a = trans_a ? m : k;
  const int64_t need_b = trans_b ? k : n;
  if (lda < need_a || ldb < need_b || ldc < n) {
    return absl::InvalidArgumentError(absl::StrCat("Gemm: row strides too small: lda=", lda,
                                                   " (needs ", need_a, "), ldb=", ldb, " (needs ",
                                                   need_b, "), ldc=", ldc, " (needs ", n, ")"));
  }
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (m > kMax || n > kMax || k > kMax || lda > kMax || ldb > kMax || ldc > kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gemm: sizes beyond 32 bits: m=", m, " n=", n, " k=", k));
  }
  return absl::OkStatus();
}

// The alignment every row of a float matrix at `p` with row stride `ld` keeps, capped at 256
// bytes (what cuBLASLt assumes by default).
uint32_t RowAlignment(const void* p, int64_t ld) {
  const uint64_t bits = reinterpret_cast<uintptr_t>(p) | (static_cast<uint64_t>(ld) * 4) | 256;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

}  // namespace

absl::Status CublasGemmRowMajor(cublasHandle_t handle, bool trans_a, bool trans_b, int64_t m,
                                int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                                const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  CAVS_RETURN_IF_ERROR(CheckGemm(trans_a, trans_b, m, n, k, lda, ldb, ldc));
  if (m == 0 || n == 0) return absl::OkStatus();
  const auto to_int = [](int64_t v) { return static_cast<int>(std::max<int64_t>(v, 1)); };
  CAVS_CUBLAS_RETURN_IF_ERROR(cublasSgemm(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                          trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                                          static_cast<int>(m), static_cast<int>(k), &alpha, b,
                                          to_int(ldb), a, to_int(lda), &beta, c, to_int(ldc)));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CublasLtGemm>> CublasLtGemm::Create() {
  cublasLtHandle_t handle = nullptr;
  CAVS_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&handle));
  void* workspace = nullptr;
  if (const cudaError_t e = cudaMalloc(&workspace, kWorkspaceBytes); e != cudaSuccess) {
    cublasLtDestroy(handle);
    return CudaStatus(e, "cudaMalloc(&workspace, kWorkspaceBytes)", __FILE__, __LINE__);
  }
  return std::unique_ptr<CublasLtGemm>(new CublasLtGemm(handle, workspace));
}

CublasLtGemm::~CublasLtGemm() {
  cudaFree(workspace_);  // stream-ordered after every queued cublasLtMatmul (cudaFree syncs)
  cublasLtDestroy(handle_);
}

absl::StatusOr<std::unique_ptr<CublasLtGemm::Plan>> CublasLtGemm::MakePlan(const Problem& p) const {
  auto plan = std::make_unique<Plan>();
  CAVS_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescInit(
      &plan->op, p.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Row-major C = op(a) op(b) is column-major C^T = op(b)^T op(a)^T: cuBLASLt's A is our b and
  // its B our a, each a column-major view of the row-major matrix with the same leading
  // dimension (see CublasGemmRowMajor).
  const cublasOperation_t op_a = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  CAVS_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(&plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  CAVS_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(&plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  CAVS_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutInit(&plan->a, CUDA_R_32F, p.trans_b ? p.k : p.n,
                                                       p.trans_b ? p.n : p.k, p.ldb));
  CAVS_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutInit(&plan->b, CUDA_R_32F, p.trans_a ? p.m : p.k,
                                                       p.trans_a ? p.k : p.m, p.lda));
  CAVS_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutInit(&plan->c, CUDA_R_32F, p.n, p.m, p.ldc));
  cublasLtMatmulPreferenceOpaque_t pref;
  CAVS_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceInit(&pref));
  const uint64_t workspace = kWorkspaceBytes;
  CAVS_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      &pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, p.align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, p.align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, p.align_c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, p.align_c}};
  for (const auto& [attr, bytes] : aligns) {
    CAVS_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulPreferenceSetAttribute(&pref, attr, &bytes, sizeof(bytes)));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t h = cublasLtMatmulAlgoGetHeuristic(
      handle_, &plan->op, &plan->a, &plan->b, &plan->c, &plan->c, &pref, 1, &result, &found);
  if (h == CUBLAS_STATUS_NOT_SUPPORTED || (h == CUBLAS_STATUS_SUCCESS && found == 0)) {
    return plan;  // not supported: the caller uses cublasSgemm
  }
  CAVS_CUBLAS_RETURN_IF_ERROR(h);
  plan->supported = true;
  plan->algo = result.algo;
  plan->workspace = result.workspaceSize;
  return plan;
}

absl::Status CublasLtGemm::Run(cudaStream_t stream, bool allow_tf32, bool trans_a, bool trans_b,
                               int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                               int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                               int64_t ldc) {
  CAVS_RETURN_IF_ERROR(CheckGemm(trans_a, trans_b, m, n, k, lda, ldb, ldc));
  if (m == 0 || n == 0) return absl::OkStatus();
  if (k == 0) return absl::NotFoundError("Gemm with k = 0: no cuBLASLt plan");
  const Problem p{trans_a,
                  trans_b,
                  allow_tf32,
                  m,
                  n,
                  k,
                  lda,
                  ldb,
                  ldc,
                  RowAlignment(a, lda),
                  RowAlignment(b, ldb),
                  RowAlignment(c, ldc)};
  auto it = plans_.find(p);
  if (it == plans_.end()) {
    if (plans_.size() >= kMaxProblems) plans_.clear();
    CAVS_ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan, MakePlan(p));
    ++planned_;
    unsupported_ += plan->supported ? 0 : 1;
    it = plans_.emplace(p, std::move(plan)).first;
  }
  Plan& plan = *it->second;
  if (!plan.supported) {
    return absl::NotFoundError(
        absl::StrCat("cuBLASLt has no algorithm for m=", m, " n=", n, " k=", k));
  }
  CAVS_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(handle_, &plan.op, &alpha, b, &plan.a, a, &plan.b,
                                             &beta, c, &plan.c, c, &plan.c, &plan.algo, workspace_,
                                             plan.workspace, stream));
  return absl::OkStatus();
}

}  // namespace cavs::ops
