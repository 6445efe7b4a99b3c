#include "ops/cuda/cuda_gemm.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status.h"
#include "ops/cuda/cublas_status.h"
#include "ops/cuda/cuda_delay.h"
#include "ops/cuda/cuda_small_gemm.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/small_gemm.h"

namespace cavs::ops::cuda {

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

absl::StatusOr<small_gemm::Args> SmallGemmArgs(size_t shared_bytes, bool trans_a, bool trans_b,
                                               int64_t m, int64_t n, int64_t k, float alpha,
                                               const float* a, int64_t lda, const float* b,
                                               int64_t ldb, float beta, float* c, int64_t ldc,
                                               const float* bias) {
  CAVS_RETURN_IF_ERROR(CheckGemm(trans_a, trans_b, m, n, k, lda, ldb, ldc));
  const int chunk = static_cast<int>(std::min<int64_t>(k, small_gemm::kMaxChunk));
  if (trans_a || m == 0 || n == 0 || k == 0 || m > small_gemm::kMaxRows ||
      small_gemm::SharedFloats<small_gemm::RoundTile>(chunk) * sizeof(float) > shared_bytes) {
    return absl::NotFoundError("not a small GEMM");
  }
  small_gemm::Args g{static_cast<int>(m),
                     static_cast<int>(n),
                     static_cast<int>(k),
                     alpha,
                     beta,
                     a,
                     lda,
                     b,
                     ldb,
                     c,
                     ldc,
                     trans_b,
                     chunk,
                     bias};
  return g;
}

absl::Status SmallGemmRowMajor(cudaStream_t stream, size_t shared_bytes, bool trans_a, bool trans_b,
                               int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                               int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                               int64_t ldc, const float* bias) {
  if (m == 0 || n == 0) {
    return CheckGemm(trans_a, trans_b, m, n, k, lda, ldb, ldc);  // nothing to compute
  }
  CAVS_ASSIGN_OR_RETURN(small_gemm::Args g,
                        SmallGemmArgs(shared_bytes, trans_a, trans_b, m, n, k, alpha, a, lda, b,
                                      ldb, beta, c, ldc, bias));
  CAVS_CUDA_RETURN_IF_ERROR(LaunchSmallGemm(stream, g));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CublasLtGemm>> CublasLtGemm::Create(cublasHandle_t sgemm) {
  cublasLtHandle_t handle = nullptr;
  CAVS_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&handle));
  void* workspace = nullptr;
  if (const cudaError_t e = cudaMalloc(&workspace, kWorkspaceBytes); e != cudaSuccess) {
    cublasLtDestroy(handle);
    return CudaStatus(e, "cudaMalloc(&workspace, kWorkspaceBytes)", __FILE__, __LINE__);
  }
  return std::unique_ptr<CublasLtGemm>(new CublasLtGemm(handle, workspace, sgemm));
}

CublasLtGemm::~CublasLtGemm() {
  cudaFree(scratch_);
  cudaFree(workspace_);  // stream-ordered after every queued cublasLtMatmul (cudaFree syncs)
  cublasLtDestroy(handle_);
}

void CublasLtGemm::SetAutotune(bool on) {
  if (on == autotune_) return;
  autotune_ = on;
  plans_.clear();
  choices_.clear();
}

namespace {

// The class a problem's algorithm is tuned for: m rounded up to 16, 24, 32, 48, 64, 96, ...
int64_t RoundRows(int64_t m) {
  for (int64_t r = 16;; r *= 2) {
    if (m <= r) return r;
    if (m <= r + r / 2) return r + r / 2;
  }
}

// Whether `algo`'s minimum alignments (cuBLASLt's A is our b, its B our a, C = D our c) are
// within what problem `p`'s operands keep. An algorithm from the heuristic was chosen for them
// (the preferences name them); one configured by hand or reused from a class is not, and
// cublasLtMatmulAlgoCheck does not see the pointers. A cap that cannot be read does not fit.
bool AlignmentFits(const cublasLtMatmulAlgo_t& algo, uint32_t align_a, uint32_t align_b,
                   uint32_t align_c) {
  const std::pair<cublasLtMatmulAlgoCapAttributes_t, uint32_t> caps[] = {
      {CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_A_BYTES, align_b},
      {CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_B_BYTES, align_a},
      {CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_C_BYTES, align_c},
      {CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_D_BYTES, align_c}};
  for (const auto& [cap, have] : caps) {
    uint32_t need = 0;
    size_t written = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(&algo, cap, &need, sizeof(need), &written) !=
            CUBLAS_STATUS_SUCCESS ||
        need > have) {
      return false;
    }
  }
  return true;
}

// Events created and destroyed with the scope.
class Events {
 public:
  explicit Events(int n) : events_(n, nullptr) {}
  ~Events() {
    for (cudaEvent_t e : events_) {
      if (e != nullptr) cudaEventDestroy(e);
    }
  }
  absl::Status Create() {
    for (cudaEvent_t& e : events_) CAVS_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
    return absl::OkStatus();
  }
  cudaEvent_t operator[](size_t i) const { return events_[i]; }

 private:
  std::vector<cudaEvent_t> events_;
};

}  // namespace

absl::StatusOr<CublasLtGemm::Choice> CublasLtGemm::Tune(const Problem& p, Plan& plan,
                                                        const std::vector<Choice>& candidates,
                                                        const Operands& x) {
  const int found = static_cast<int>(candidates.size());
  // The scratch matrix the candidates write: c's size, and exactly c's alignment (an
  // algorithm is timed on operands as aligned as the caller's, no more).
  const size_t bytes = static_cast<size_t>(p.m) * static_cast<size_t>(p.ldc) * sizeof(float) + 256;
  if (bytes > scratch_bytes_) {
    cudaFree(scratch_);  // waits for the tuning runs queued on it
    scratch_ = nullptr;
    scratch_bytes_ = 0;
    CAVS_CUDA_RETURN_IF_ERROR(cudaMalloc(&scratch_, bytes));
    scratch_bytes_ = bytes;
  }
  float* const out =
      reinterpret_cast<float*>(static_cast<char*>(scratch_) + (p.align_c < 256 ? p.align_c : 0));
  // From zeros: with beta != 0 the candidates read it too.
  CAVS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(scratch_, 0, bytes, x.stream));
  // The last one: cublasSgemm (not with a bias: it would need a second launch).
  const int count = found + (sgemm_ != nullptr && !p.bias ? 1 : 0);
  auto run = [&](int i) {
    if (i < found) {
      return cublasLtMatmul(handle_, &plan.op, &x.alpha, x.b, &plan.a, x.a, &plan.b, &x.beta, out,
                            &plan.c, out, &plan.c, &candidates[i].algo, workspace_,
                            candidates[i].workspace, x.stream) == CUBLAS_STATUS_SUCCESS;
    }
    return CublasGemmRowMajor(sgemm_, p.trans_a, p.trans_b, p.m, p.n, p.k, x.alpha, x.a, p.lda, x.b,
                              p.ldb, x.beta, out, p.ldc)
        .ok();
  };
  std::vector<int> valid;  // the candidates that launch
  for (int i = 0; i < count; ++i) {
    if (run(i)) valid.push_back(i);
  }
  (void)cudaGetLastError();  // a candidate that failed to launch is only not timed
  if (valid.empty()) return Choice{true, {}, 0};
  // kChunk candidates at a time, each kReps times behind one delay: the device runs them back
  // to back, so the events between them time each one's kernels alone. If queueing them took
  // the host longer than the delay, the device waited in between: once more with a longer
  // delay, and if that too is overtaken, the chunk's timings are not used. Chunks keep the
  // launches queued behind a delay well under the driver's queue (about a thousand).
  constexpr int kReps = 5;
  constexpr size_t kChunk = 32;
  std::vector<float> ms(valid.size(), std::numeric_limits<float>::infinity());
  Events events(static_cast<int>(kChunk) + 1);
  CAVS_RETURN_IF_ERROR(events.Create());
  for (size_t begin = 0; begin < valid.size(); begin += kChunk) {
    const size_t end = std::min(valid.size(), begin + kChunk);
    int64_t delay_ns = 200'000 + static_cast<int64_t>(end - begin) * kReps * 20'000;
    std::vector<bool> failed(end - begin, false);
    bool timed = false;
    for (int attempt = 0; attempt < 2 && !timed; ++attempt) {
      CAVS_CUDA_RETURN_IF_ERROR(LaunchDelay(x.stream, delay_ns));
      const auto t0 = std::chrono::steady_clock::now();
      for (size_t j = begin; j < end; ++j) {
        CAVS_CUDA_RETURN_IF_ERROR(cudaEventRecord(events[j - begin], x.stream));
        for (int r = 0; r < kReps; ++r) failed[j - begin] = !run(valid[j]) || failed[j - begin];
      }
      CAVS_CUDA_RETURN_IF_ERROR(cudaEventRecord(events[end - begin], x.stream));
      const int64_t host_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now() - t0)
                                  .count();
      CAVS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(events[end - begin]));
      timed = host_ns < delay_ns;
      delay_ns = 2 * host_ns + 100'000;
    }
    (void)cudaGetLastError();
    for (size_t j = begin; timed && j < end; ++j) {
      float t = 0;
      CAVS_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&t, events[j - begin], events[j - begin + 1]));
      if (!failed[j - begin]) ms[j] = t;
    }
  }
  int best = -1;
  float best_ms = std::numeric_limits<float>::infinity();
  for (size_t j = 0; j < valid.size(); ++j) {
    if (ms[j] < best_ms) {
      best_ms = ms[j];
      best = valid[j];
    }
  }
  if (best < 0) return absl::UnavailableError("no GEMM candidate could be timed");
  // What was chosen, against the heuristic's first choice.
  const float first_ms = valid[0] == 0 ? ms[0] : 0.0f;
  std::string chose = "cublasSgemm";
  if (best < found) {
    int32_t id = 0, splits = 1;
    uint32_t tile = 0;
    size_t written = 0;
    const cublasLtMatmulAlgo_t& algo = candidates[best].algo;
    (void)cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id),
                                               &written);
    (void)cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                               sizeof(tile), &written);
    (void)cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                               sizeof(splits), &written);
    chose = absl::StrCat("algo ", id, " tile ", tile, " split-k ", splits);
  }
  last_tuning_ = absl::StrFormat("%s of %d: %.2f us (heuristic's first %.2f us)", chose,
                                 static_cast<int>(valid.size()), 1e3 * best_ms / kReps,
                                 1e3 * first_ms / kReps);
  if (best == found) return Choice{true, {}, 0};
  return candidates[best];
}

std::optional<size_t> CublasLtGemm::Takes(const Problem& p, const Plan& plan,
                                          const cublasLtMatmulAlgo_t& algo) const {
  cublasLtMatmulHeuristicResult_t check{};
  if (cublasLtMatmulAlgoCheck(
          handle_, const_cast<cublasLtMatmulDesc_t>(&plan.op),
          const_cast<cublasLtMatrixLayout_t>(&plan.a), const_cast<cublasLtMatrixLayout_t>(&plan.b),
          const_cast<cublasLtMatrixLayout_t>(&plan.c), const_cast<cublasLtMatrixLayout_t>(&plan.c),
          &algo, &check) != CUBLAS_STATUS_SUCCESS ||
      check.workspaceSize > kWorkspaceBytes ||
      !AlignmentFits(algo, p.align_a, p.align_b, p.align_c)) {
    return std::nullopt;
  }
  return check.workspaceSize;
}

void CublasLtGemm::AddConfigurations(const Problem& p, const Plan& plan,
                                     std::vector<Choice>* candidates) const {
  const cublasComputeType_t compute = p.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  int ids[64];
  int num_ids = 0;
  if (cublasLtMatmulAlgoGetIds(handle_, compute, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                               CUDA_R_32F, 64, ids, &num_ids) != CUBLAS_STATUS_SUCCESS) {
    return;
  }
  for (int i = 0; i < num_ids; ++i) {
    cublasLtMatmulAlgo_t algo;
    if (cublasLtMatmulAlgoInit(handle_, compute, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                               CUDA_R_32F, ids[i], &algo) != CUBLAS_STATUS_SUCCESS) {
      continue;
    }
    uint32_t tiles[CUBLASLT_MATMUL_TILE_END];
    size_t written = 0;
    size_t num_tiles = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, tiles, sizeof(tiles),
                                          &written) == CUBLAS_STATUS_SUCCESS) {
      num_tiles = written / sizeof(tiles[0]);
    }
    if (num_tiles == 0) {
      tiles[0] = CUBLASLT_MATMUL_TILE_UNDEFINED;
      num_tiles = 1;
    }
    int32_t splitk_support = 0;
    uint32_t schemes = 0;
    (void)cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT,
                                            &splitk_support, sizeof(splitk_support), &written);
    (void)cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK,
                                            &schemes, sizeof(schemes), &written);
    // Split-K sums in place where the algorithm can (no second kernel), else in the workspace.
    uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
    for (const uint32_t s :
         {CUBLASLT_REDUCTION_SCHEME_INPLACE, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE,
          CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE}) {
      if (scheme == CUBLASLT_REDUCTION_SCHEME_NONE && (schemes & s) != 0) scheme = s;
    }
    for (size_t t = 0; t < num_tiles; ++t) {
      for (const int32_t splits : {1, 2, 4, 8, 16}) {
        if (splits > 1 && (splitk_support == 0 || scheme == CUBLASLT_REDUCTION_SCHEME_NONE)) {
          break;
        }
        if (static_cast<int>(candidates->size()) >= kMaxCandidates) return;
        const uint32_t reduction = splits > 1 ? scheme : CUBLASLT_REDUCTION_SCHEME_NONE;
        cublasLtMatmulAlgo_t config = algo;
        if (cublasLtMatmulAlgoConfigSetAttribute(&config, CUBLASLT_ALGO_CONFIG_TILE_ID, &tiles[t],
                                                 sizeof(tiles[t])) != CUBLAS_STATUS_SUCCESS ||
            cublasLtMatmulAlgoConfigSetAttribute(&config, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                                 sizeof(splits)) != CUBLAS_STATUS_SUCCESS ||
            cublasLtMatmulAlgoConfigSetAttribute(&config, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                                 &reduction,
                                                 sizeof(reduction)) != CUBLAS_STATUS_SUCCESS) {
          continue;
        }
        if (const std::optional<size_t> workspace = Takes(p, plan, config)) {
          candidates->push_back(Choice{false, config, *workspace});
        }
      }
    }
  }
}

absl::StatusOr<std::unique_ptr<CublasLtGemm::Plan>> CublasLtGemm::MakePlan(const Problem& p,
                                                                           const Operands& x) {
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
  if (p.bias) {  // the bias pointer is set on each call (Run); here for the tuning runs
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    CAVS_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        &plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    CAVS_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        &plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &x.bias, sizeof(x.bias)));
  }

  // A class tuned before: its choice, where the algorithm takes this problem. A class is the
  // transposes, TF32, the bias epilogue and the sizes rounded up (rows vary from round to round,
  // and so does the summed dimension of a weight gradient); strides and alignment are left out, and
  // cublasLtMatmulAlgoCheck says whether the class's algorithm takes this problem's.
  const Problem cls{
      p.trans_a, p.trans_b, p.tf32, RoundRows(p.m), RoundRows(p.n), RoundRows(p.k), 0, 0, 0,
      0,         0,         0,      p.bias};
  const auto it = choices_.find(cls);
  if (it != choices_.end()) {
    if (it->second.sgemm) {
      plan->use = Use::kSgemm;
      return plan;
    }
    if (const std::optional<size_t> workspace = Takes(p, *plan, it->second.algo)) {
      plan->use = Use::kLt;
      plan->algo = it->second.algo;
      plan->workspace = *workspace;
      return plan;
    }
  }

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
  // A class whose algorithm does not take this problem (its alignment, say) is not tuned again.
  const bool tune = autotune_ && it == choices_.end();
  cublasLtMatmulHeuristicResult_t results[kHeuristicCandidates] = {};
  int found = 0;
  const cublasStatus_t h =
      cublasLtMatmulAlgoGetHeuristic(handle_, &plan->op, &plan->a, &plan->b, &plan->c, &plan->c,
                                     &pref, tune ? kHeuristicCandidates : 1, results, &found);
  if (h == CUBLAS_STATUS_NOT_SUPPORTED || (h == CUBLAS_STATUS_SUCCESS && found == 0)) {
    return plan;  // not supported: the caller uses cublasSgemm
  }
  CAVS_CUBLAS_RETURN_IF_ERROR(h);
  plan->use = Use::kLt;
  plan->algo = results[0].algo;
  plan->workspace = results[0].workspaceSize;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CAVS_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(x.stream, &capture));
  if (!tune || capture != cudaStreamCaptureStatusNone) return plan;
  std::vector<Choice> candidates;
  for (int i = 0; i < found; ++i) {
    candidates.push_back(Choice{false, results[i].algo, results[i].workspaceSize});
  }
  AddConfigurations(p, *plan, &candidates);
  absl::StatusOr<Choice> tuned = Tune(p, *plan, candidates, x);
  (void)cudaGetLastError();
  ++tuned_;
  if (!tuned.ok()) {  // the heuristic's first choice, for the class too (no second try)
    last_tuning_ = absl::StrCat("tuning failed (", tuned.status().ToString(),
                                "); the heuristic's first algorithm");
    tuned = candidates[0];
  }
  const Choice choice = *tuned;
  choices_[cls] = choice;
  if (choice.sgemm) {
    plan->use = Use::kSgemm;
  } else {
    plan->algo = choice.algo;
    plan->workspace = choice.workspace;
  }
  return plan;
}

absl::Status CublasLtGemm::Run(cudaStream_t stream, bool allow_tf32, bool trans_a, bool trans_b,
                               int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                               int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                               int64_t ldc, const float* bias) {
  // Returned for every call left to cublasSgemm: a copy, not a new message each time.
  static const absl::Status* const kUseSgemm =
      new absl::Status(absl::NotFoundError("cublasSgemm: no cuBLASLt algorithm, or it was faster"));
  CAVS_RETURN_IF_ERROR(CheckGemm(trans_a, trans_b, m, n, k, lda, ldb, ldc));
  if (m == 0 || n == 0) return absl::OkStatus();
  // k == 0, or a bias the epilogue may not take (it reads it in 16-byte pieces).
  if (k == 0 || reinterpret_cast<uintptr_t>(bias) % 16 != 0) return *kUseSgemm;
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
                  RowAlignment(c, ldc),
                  bias != nullptr,
                  bias != nullptr ? RowAlignment(bias, 0) : 0};
  auto it = plans_.find(p);
  if (it == plans_.end()) {
    if (plans_.size() >= kMaxProblems) plans_.clear();
    CAVS_ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan,
                          MakePlan(p, Operands{stream, alpha, beta, a, b, bias}));
    ++planned_;
    unsupported_ += plan->use == Use::kUnsupported ? 1 : 0;
    to_sgemm_ += plan->use == Use::kSgemm ? 1 : 0;
    it = plans_.emplace(p, std::move(plan)).first;
  }
  Plan& plan = *it->second;
  if (plan.use != Use::kLt) return *kUseSgemm;
  if (bias != nullptr) {
    CAVS_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        &plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  if (cublasLtMatmul(handle_, &plan.op, &alpha, b, &plan.a, a, &plan.b, &beta, c, &plan.c, c,
                     &plan.c, &plan.algo, workspace_, plan.workspace,
                     stream) != CUBLAS_STATUS_SUCCESS) {
    // Refused at launch (cuBLASLt checks what AlgoCheck cannot, the pointers): this problem
    // goes to cublasSgemm from now on. Nothing was queued.
    (void)cudaGetLastError();
    plan.use = Use::kSgemm;
    ++to_sgemm_;
    return *kUseSgemm;
  }
  return absl::OkStatus();
}

}  // namespace cavs::ops::cuda
