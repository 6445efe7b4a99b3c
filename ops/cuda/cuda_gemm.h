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
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ops/cuda/small_gemm.h"

namespace cavs::ops::cuda {

// c: [m, n] = alpha * op(a) op(b) + beta * c (row-major; see Kernels::Gemm). Queued on the
// handle's stream with the handle's math mode.
[[nodiscard]] absl::Status CublasGemmRowMajor(cublasHandle_t handle, bool trans_a, bool trans_b,
                                              int64_t m, int64_t n, int64_t k, float alpha,
                                              const float* a, int64_t lda, const float* b,
                                              int64_t ldb, float beta, float* c, int64_t ldc);

// The same GEMM through the small-GEMM kernel (small_gemm.h; one launch), where it applies: a
// not transposed, 0 < m <= small_gemm::kMaxRows, k > 0, and a chunk's shared memory within
// `shared_bytes` (what PrepareSmallGemm allowed on the current device). NotFound elsewhere (the
// caller then uses cuBLAS). `bias` (or null): one row of n added to every row of c
// (Kernels::GemmBias), in the kernel's store.
[[nodiscard]] absl::Status SmallGemmRowMajor(cudaStream_t stream, size_t shared_bytes, bool trans_a,
                                             bool trans_b, int64_t m, int64_t n, int64_t k,
                                             float alpha, const float* a, int64_t lda,
                                             const float* b, int64_t ldb, float beta, float* c,
                                             int64_t ldc, const float* bias = nullptr);

// SmallGemmRowMajor's checks, and the kernel's arguments where it applies (NotFound elsewhere,
// m or n 0 included).
[[nodiscard]] absl::StatusOr<small_gemm::Args> SmallGemmArgs(
    size_t shared_bytes, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
    const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
    const float* bias = nullptr);

// The same GEMM through cuBLASLt, with the descriptors and the algorithm chosen once per problem
// (transposes, sizes, row strides, the operands' alignment, TF32, a bias) and reused: a call of a
// known problem is one cublasLtMatmul with no heuristic query, which cuBLAS's cublasSgemm makes on
// every call. That query is host time, and a round of the engine is launch-bound on the host
// (docs/gpu_performance.md); NVIDIA's RAFT measured its GEMM launch latency halved this way
// (10 to 5 us). The plans are kept for up to kMaxProblems problems, then dropped and rebuilt.
//
// Autotuning (off by default; SetAutotune, CudaKernelOptions::gemm_autotune turns it on). The
// engine's rounds are GEMMs of a few to a few hundred rows against a weight matrix ([m, 300] x
// [300, 750] for the Tree-LSTM's forward). Every algorithm cuBLAS's heuristic offers for them took
// 9 us on an H100 at 64 rows (bench/RESULTS.md), for 0.4 us of arithmetic spread over the
// chip: with 64x128 or larger tiles, 6 of 132 multiprocessors have work. So the first problem of
// each class (the transposes, TF32, and m, n and k each rounded up to a step of at most 1.5x)
// times candidates on the caller's operands, writing a scratch matrix, behind a delay kernel
// (cuda_delay.h) so that the events time the device alone: the heuristic's
// kHeuristicCandidates algorithms, every tile size and split-K (2 to 16 parts) of every
// cuBLASLt algorithm that cublasLtMatmulAlgoCheck accepts (up to kMaxCandidates in all), and
// cublasSgemm. Hand-configured candidates, and a class's choice reused for another problem,
// must also keep within the problem's alignment (the algorithm's minimum alignment caps: the
// check does not see the pointers), and the scratch matrix is exactly as aligned as c. The
// candidates are timed 32 at a time behind a delay long enough for their launches; a chunk
// whose launches outlast it twice is not used. The fastest serves every problem of the class
// that its algorithm takes (else the heuristic's first). A tuning that fails takes the
// heuristic's first choice for the class. That costs one host wait per class, a few dozen in
// a training run; under stream capture nothing is timed. A problem where cublasSgemm won, or
// cuBLASLt has nothing, returns NotFound and the caller calls cublasSgemm. Tuned choices can
// differ between runs (timings are noisy), so results can differ in the last bits between runs.
// Measured on an H100 (bench/RESULTS.md): the weight gradients' GEMMs up to 1.28x faster (78 to 61
// us at k = 4,096), the rounds' GEMMs within 0.3 us of the heuristic's (about 9 us at 64 rows: no
// tile or split-K configuration spreads 64 rows over the chip), so it stays off by default.
//
// Alignment: cuBLASLt assumes 256-byte aligned operands unless told otherwise, and the engine
// passes row offsets into its buffers; each problem records the alignment its pointers and row
// strides guarantee, and the algorithm is chosen for that.
//
// Bias: a problem with a bias row (Kernels::GemmBias) is planned with cuBLASLt's bias epilogue
// (CUBLASLT_EPILOGUE_BIAS: D = alpha A B + beta C + bias, the bias one value per row of the
// column-major D, one per column of our row-major c), its pointer set on each call (its
// alignment is part of the problem, as the operands'); autotuning
// does not time cublasSgemm for it (which would need a second launch for the bias). A bias
// that is not 16-byte aligned is left to the caller (NotFound), as are problems cuBLASLt has no
// algorithm with the epilogue for.
//
// Thread-safety: one caller at a time (as ops::Kernels).
class CublasLtGemm {
 public:
  static constexpr size_t kMaxProblems = size_t{1} << 16;      // about 0.6 KB each
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLAS's advice for Hopper
  static constexpr int kHeuristicCandidates = 12;  // cuBLASLt's heuristic's algorithms timed
  static constexpr int kMaxCandidates = 160;       // with the configurations enumerated

  // On the current device; allocates the workspace there. `sgemm` (not owned; may be null)
  // is the cuBLAS handle the caller falls back to, timed as one more candidate: it must queue
  // on the stream passed to Run and have the math mode Run's allow_tf32 names.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<CublasLtGemm>> Create(
      cublasHandle_t sgemm = nullptr);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // As CublasGemmRowMajor, queued on `stream`. NotFound when the caller should call cublasSgemm
  // instead: cuBLASLt has no algorithm for the problem, cublasSgemm was timed faster, or
  // cublasLtMatmul refused the problem's plan (from then on); k == 0 is the caller's too
  // (cublasSgemm scales C).
  // With `bias` (or null), c = alpha op(a) op(b) + beta c + bias (see Bias above).
  [[nodiscard]] absl::Status Run(cudaStream_t stream, bool allow_tf32, bool trans_a, bool trans_b,
                                 int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                                 int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                                 int64_t ldc, const float* bias = nullptr);

  // Autotuning on (CudaKernelOptions::gemm_autotune) or off (the default: the heuristic's first
  // algorithm). Switching drops the plans and the tuned choices.
  void SetAutotune(bool on);
  bool autotune() const { return autotune_; }

  // Problems planned so far (including those dropped at kMaxProblems), those with no cuBLASLt
  // algorithm, the classes timed, and the problems left to cublasSgemm because it was faster.
  int64_t problems_planned() const { return planned_; }
  int64_t problems_unsupported() const { return unsupported_; }
  int64_t classes_tuned() const { return tuned_; }
  int64_t problems_to_sgemm() const { return to_sgemm_; }
  // The last class timed: the choice, the candidates timed, its time and the heuristic's.
  const std::string& last_tuning() const { return last_tuning_; }

 private:
  struct Problem {
    bool trans_a, trans_b, tf32;
    int64_t m, n, k, lda, ldb, ldc;
    uint32_t align_a, align_b, align_c;
    bool bias = false;  // with the bias epilogue
    // The bias pointer's alignment (up to 256): cuBLASLt's heuristic reads the pointer to
    // choose, so a plan is reused only for biases aligned as the one it was chosen with.
    uint32_t align_bias = 0;
    bool operator==(const Problem& o) const {
      return trans_a == o.trans_a && trans_b == o.trans_b && tf32 == o.tf32 && m == o.m &&
             n == o.n && k == o.k && lda == o.lda && ldb == o.ldb && ldc == o.ldc &&
             align_a == o.align_a && align_b == o.align_b && align_c == o.align_c &&
             bias == o.bias && align_bias == o.align_bias;
    }
    template <typename H>
    friend H AbslHashValue(H h, const Problem& p) {
      return H::combine(std::move(h), p.trans_a, p.trans_b, p.tf32, p.m, p.n, p.k, p.lda, p.ldb,
                        p.ldc, p.align_a, p.align_b, p.align_c, p.bias, p.align_bias);
    }
  };
  enum class Use { kLt, kSgemm, kUnsupported };
  struct Plan {
    Use use = Use::kUnsupported;
    cublasLtMatmulDescOpaque_t op;
    cublasLtMatrixLayoutOpaque_t a, b, c;  // cuBLASLt's A (our b), B (our a), C = D
    cublasLtMatmulAlgo_t algo;
    size_t workspace = 0;
  };
  // A class's choice: an algorithm, or cublasSgemm.
  struct Choice {
    bool sgemm = false;
    cublasLtMatmulAlgo_t algo;
    size_t workspace = 0;  // for the problem it was timed on
  };
  // The operands of the call that planned a problem, for timing its candidates.
  struct Operands {
    cudaStream_t stream;
    float alpha, beta;
    const float *a, *b;  // c is not needed: the candidates write a scratch matrix
    const float* bias;   // or null
  };

  CublasLtGemm(cublasLtHandle_t handle, void* workspace, cublasHandle_t sgemm)
      : handle_(handle), workspace_(workspace), sgemm_(sgemm) {}
  absl::StatusOr<std::unique_ptr<Plan>> MakePlan(const Problem& p, const Operands& x);
  // Adds every configuration of every cuBLASLt algorithm for problem `p` (each tile size,
  // split-K in 1, 2, 4, 8 or 16 parts) that cublasLtMatmulAlgoCheck accepts and whose minimum
  // alignments p's operands keep, up to kMaxCandidates in all: the heuristic offers none with
  // split-K for the rounds' GEMMs, whose few rows leave most multiprocessors idle with its tiles.
  void AddConfigurations(const Problem& p, const Plan& plan, std::vector<Choice>* candidates) const;
  // The workspace `algo` needs for problem `p` (planned as `plan`), where it takes it:
  // cublasLtMatmulAlgoCheck accepts it, within kWorkspaceBytes, and its minimum alignments
  // within p's operands'. Nothing where it does not.
  std::optional<size_t> Takes(const Problem& p, const Plan& plan,
                              const cublasLtMatmulAlgo_t& algo) const;
  // Times `candidates` and cublasSgemm on `x`; the fastest.
  absl::StatusOr<Choice> Tune(const Problem& p, Plan& plan, const std::vector<Choice>& candidates,
                              const Operands& x);

  cublasLtHandle_t handle_;
  void* workspace_;
  cublasHandle_t sgemm_;
  bool autotune_ = false;
  void* scratch_ = nullptr;  // the tuning runs' C
  size_t scratch_bytes_ = 0;
  absl::flat_hash_map<Problem, std::unique_ptr<Plan>> plans_;
  absl::flat_hash_map<Problem, Choice> choices_;  // by class (m rounded up)
  int64_t planned_ = 0, unsupported_ = 0, tuned_ = 0, to_sgemm_ = 0;
  std::string last_tuning_;
};

}  // namespace cavs::ops::cuda
