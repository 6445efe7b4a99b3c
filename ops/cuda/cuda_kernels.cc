#include "ops/cuda/cuda_kernels.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cpu/cpu_elementwise.h"
#include "ops/cuda/cublas_status.h"
#include "ops/cuda/cuda_device_guard.h"
#include "ops/cuda/cuda_elementwise.h"
#include "ops/cuda/cuda_fused.h"
#include "ops/cuda/cuda_gather.h"
#include "ops/cuda/cuda_gemm.h"
#include "ops/cuda/cuda_reduce.h"
#include "ops/cuda/cuda_small_gemm.h"
#include "ops/cuda/cuda_softmax.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/small_gemm.h"

namespace cavs::ops::cuda {

namespace {

// Sizes must be non-negative; with work to do, every listed pointer must be set.
absl::Status CheckArgs(const char* op, int64_t rows, int64_t cols,
                       std::initializer_list<const void*> pointers) {
  if (rows < 0 || cols < 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": negative size [", rows, ", ", cols, "]"));
  }
  if (rows == 0 || cols == 0) return absl::OkStatus();
  int i = 0;
  for (const void* p : pointers) {
    if (p == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": pointer argument ", i, " is null for [", rows, ", ", cols, "]"));
    }
    ++i;
  }
  return absl::OkStatus();
}

// Gemm's argument checks: C, and A and B where there is something to sum.
absl::Status CheckGemmArgs(int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                           const float* c) {
  CAVS_RETURN_IF_ERROR(CheckArgs("Gemm", m, n, {c}));
  if (k > 0) return CheckArgs("Gemm", m, n, {a, b});
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaKernels>> CudaKernels::Create(CudaBackend* backend,
                                                                 const KernelOptions& options) {
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(backend->MakeCurrent(guard));
  int num_sms = 0, major = 0, minor = 0;
  CAVS_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, backend->ordinal()));
  CAVS_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, backend->ordinal()));
  CAVS_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, backend->ordinal()));
  cublasHandle_t handle = nullptr;
  CAVS_CUBLAS_RETURN_IF_ERROR(cublasCreate(&handle));
  std::unique_ptr<CudaKernels> kernels(
      new CudaKernels(backend, handle, num_sms, major * 10 + minor));
  CAVS_CUBLAS_RETURN_IF_ERROR(cublasSetStream(handle, backend->stream()));
  CAVS_CUBLAS_RETURN_IF_ERROR(cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_HOST));
  // The reductions' workspace now, before the caching allocator holds the device's memory: made
  // later, inside a batch, it could fail, and the column sums and loss statistics would then
  // run without it (one chunk; atomics) with nothing to say so.
  CAVS_RETURN_IF_ERROR(kernels->MakeWorkspace());
  CAVS_RETURN_IF_ERROR(kernels->SetAllowTf32(false));
  // The small GEMM's shared memory, set once here (the device is current), not per launch. A
  // device that refuses leaves it nowhere to run (NotFound: cuBLAS takes its GEMMs).
  if (PrepareSmallGemm(&kernels->small_gemm_shared_bytes_) != cudaSuccess) {
    (void)cudaGetLastError();
    kernels->small_gemm_shared_bytes_ = 0;
  }
  CAVS_RETURN_IF_ERROR(kernels->Configure(options));
  return kernels;
}

absl::Status CudaKernels::Configure(const KernelOptions& options) {
  verify_ew_shapes_ = options.verify_ew_shapes;
  kernel_cache_dir_ = KernelCacheDir(options.cuda);
  // New settings for the generated kernels take effect in a new CudaFusedElementwise.
  if (fused_ != nullptr &&
      (fused_->verify_all() != verify_ew_shapes_ || fused_->cache_dir() != kernel_cache_dir_)) {
    CAVS_RETURN_IF_ERROR(SetFusedElementwise(false));
  }
  const absl::Status fused = SetFusedElementwise(options.cuda.generated_elementwise);
  if (!fused.ok()) {  // e.g. no NVRTC for this device: the interpreter still runs everything
    std::fprintf(stderr,
                 "cavs: generated element-wise kernels unavailable (%s); using the "
                 "interpreter\n",
                 std::string(fused.message()).c_str());
  }
  SetSmallGemm(options.cuda.small_gemm);
  CAVS_RETURN_IF_ERROR(SetCublasLt(options.cuda.cublas_lt));
  gemm_autotune_ = options.cuda.gemm_autotune;
  if (lt_ != nullptr) lt_->SetAutotune(gemm_autotune_);
  SetGraphs(options.cuda.graphs);
  row_offset_ = options.cuda.ew_row_offset;
  return absl::OkStatus();
}

void CudaKernels::SetGraphs(bool on) {
  graphs_on_ = on;
  if (!on) graphs_.Clear();
}

absl::StatusOr<bool> CudaKernels::QueueRecorded(const std::function<absl::Status()>& queue) {
  if (!graphs_on_) return Kernels::QueueRecorded(queue);
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(backend_->MakeCurrent(guard));
  return graphs_.Queue(backend_->stream(), queue);
}

CudaKernels::CudaKernels(CudaBackend* backend, cublasHandle_t cublas, int num_sms, int arch)
    : backend_(backend), cublas_(cublas), num_sms_(num_sms), arch_(arch) {}

CudaKernels::~CudaKernels() {
  CudaDeviceGuard guard;
  if (backend_->MakeCurrent(guard).ok()) {
    if (fused_ != nullptr) (void)backend_->Synchronize();  // no launch of a kernel unloaded
    graphs_.Clear();  // before the kernels their nodes name are unloaded
    fused_.reset();
    lt_.reset();
    cudaFree(workspace_.partial);  // cudaFree waits for the kernels queued before it
    cudaFree(workspace_.arrivals);
    cublasDestroy(cublas_);
  }
}

absl::Status CudaKernels::SetCublasLt(bool on) {
  if (on == (lt_ != nullptr)) return absl::OkStatus();
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(backend_->MakeCurrent(guard));
  if (!on) {
    graphs_.Clear();  // their GEMM nodes use the workspace about to be freed
    lt_.reset();      // frees the workspace, which waits for the queued GEMMs
    return absl::OkStatus();
  }
  CAVS_ASSIGN_OR_RETURN(lt_, CublasLtGemm::Create(cublas_));
  lt_->SetAutotune(gemm_autotune_);
  return absl::OkStatus();
}

int64_t CudaKernels::lt_problems_planned() const {
  return lt_ == nullptr ? 0 : lt_->problems_planned();
}
int64_t CudaKernels::lt_problems_unsupported() const {
  return lt_ == nullptr ? 0 : lt_->problems_unsupported();
}
int64_t CudaKernels::lt_classes_tuned() const { return lt_ == nullptr ? 0 : lt_->classes_tuned(); }
int64_t CudaKernels::lt_problems_to_sgemm() const {
  return lt_ == nullptr ? 0 : lt_->problems_to_sgemm();
}

std::string CudaKernels::lt_last_tuning() const {
  return lt_ == nullptr ? std::string() : lt_->last_tuning();
}

absl::Status CudaKernels::SetGemmAutotune(bool on) {
  if (lt_ == nullptr) return absl::FailedPreconditionError("SetGemmAutotune: cuBLASLt is off");
  lt_->SetAutotune(on);
  return absl::OkStatus();
}
bool CudaKernels::gemm_autotune() const { return lt_ != nullptr && lt_->autotune(); }

absl::Status CudaKernels::SetFusedElementwise(bool on) {
  if (on == (fused_ != nullptr)) return absl::OkStatus();
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(backend_->MakeCurrent(guard));
  if (!on) {
    // Queued launches may still use the kernels about to be unloaded; so may the graphs kept.
    CAVS_RETURN_IF_ERROR(backend_->Synchronize());
    graphs_.Clear();
    fused_.reset();
    return absl::OkStatus();
  }
  auto fused =
      std::make_unique<CudaFusedElementwise>(arch_, num_sms_, verify_ew_shapes_, kernel_cache_dir_);
  CAVS_RETURN_IF_ERROR(fused->Probe());
  fused_ = std::move(fused);
  return absl::OkStatus();
}

int64_t CudaKernels::fused_kernels_compiled() const {
  return fused_ == nullptr ? 0 : fused_->compiled();
}

absl::Status CudaKernels::SetAllowTf32(bool allow) {
  CAVS_CUBLAS_RETURN_IF_ERROR(
      cublasSetMathMode(cublas_, allow ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  allow_tf32_ = allow;
  return absl::OkStatus();
}

bool CudaKernels::UsesSmallGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) const {
  return small_gemm_ == SmallGemm::kEverywhere ||
         (small_gemm_ == SmallGemm::kWhereFaster &&
          small_gemm::Faster(trans_a, trans_b, m, n, k, num_sms_));
}

absl::Status CudaKernels::MakeWorkspace() {
  const size_t floats = static_cast<size_t>(num_sms_) * static_cast<size_t>(kWorkspaceFloatsPerSm);
  void* arrivals = nullptr;
  void* partial = nullptr;
  cudaError_t err = cudaMalloc(&arrivals, num_sms_ * sizeof(unsigned));
  if (err == cudaSuccess) err = cudaMalloc(&partial, floats * sizeof(float));
  if (err == cudaSuccess) {  // zero before the first kernel that counts on the stream
    err = cudaMemsetAsync(arrivals, 0, num_sms_ * sizeof(unsigned), stream());
  }
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // else the next launch's check would report it as its own
    cudaFree(arrivals);
    cudaFree(partial);
    return CudaStatus(err, "cudaMalloc (the reductions' workspace)", __FILE__, __LINE__);
  }
  workspace_ = ReduceWorkspace{static_cast<float*>(partial), static_cast<int64_t>(floats),
                               static_cast<unsigned*>(arrivals), num_sms_};
  return absl::OkStatus();
}

absl::Status CudaKernels::Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                               float alpha, const float* a, int64_t lda, const float* b,
                               int64_t ldb, float beta, float* c, int64_t ldc) {
  return GemmBias(GemmCall{trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc});
}

absl::Status CudaKernels::GemmBias(const GemmCall& g) {
  CAVS_RETURN_IF_ERROR(CheckGemmArgs(g.m, g.n, g.k, g.a, g.b, g.c));
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(backend_->MakeCurrent(guard));
  if (UsesSmallGemm(g.trans_a, g.trans_b, g.m, g.n, g.k)) {
    const absl::Status s =
        SmallGemmRowMajor(backend_->stream(), small_gemm_shared_bytes_, g.trans_a, g.trans_b, g.m,
                          g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc, g.bias);
    if (s.ok()) ++small_gemms_;
    if (!absl::IsNotFound(s)) return s;  // NotFound where it cannot: cuBLAS
  }
  if (lt_ != nullptr && g.k > 0) {
    const absl::Status s =
        lt_->Run(backend_->stream(), allow_tf32_, g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, g.a,
                 g.lda, g.b, g.ldb, g.beta, g.c, g.ldc, g.bias);
    if (!absl::IsNotFound(s)) return s;  // NotFound: no cuBLASLt algorithm, use cublasSgemm
  }
  CAVS_RETURN_IF_ERROR(CublasGemmRowMajor(cublas_, g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha,
                                          g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc));
  if (g.bias != nullptr) {  // checked by the call above: then the bias onto what it wrote
    CAVS_CUDA_RETURN_IF_ERROR(LaunchBiasRows(stream(), g.m, g.n, g.bias, g.c, g.ldc));
  }
  return absl::OkStatus();
}

absl::Status CudaKernels::CheckProgram(const EwInstr* host, const EwInstr* device, int count,
                                       int64_t rows) const {
  CAVS_RETURN_IF_ERROR(CheckArgs("Elementwise", rows, count, {host, device}));
  if (rows == 0 || count == 0) return absl::OkStatus();
  // The same checks as the CPU; scratch operands only for generated kernels.
  return cpu::ValidateProgram(host, count, rows, ElementwiseScratch());
}

absl::Status CudaKernels::Elementwise(const EwInstr* host, const EwInstr* device, int count,
                                      int64_t rows, uint64_t shape, int64_t row0) {
  if (row0 != 0 && !row_offset_) {
    return absl::InvalidArgumentError(absl::StrCat("Elementwise: row offset ", row0,
                                                   " with KernelOptions::cuda.ew_row_offset off"));
  }
  CAVS_RETURN_IF_ERROR(CheckProgram(host, device, count, rows));
  if (rows == 0 || count == 0) return absl::OkStatus();
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(backend_->MakeCurrent(guard));
  if (fused_ != nullptr) return fused_->Launch(stream(), host, device, count, rows, shape, row0);
  CAVS_CUDA_RETURN_IF_ERROR(LaunchElementwise(stream(), host, device, count, rows, num_sms_, row0));
  return absl::OkStatus();
}

absl::Status CudaKernels::GatherRows(const float* src, int64_t src_ld, const int32_t* idx,
                                     int64_t m, int64_t w, float* dst, int64_t dst_ld) {
  CAVS_RETURN_IF_ERROR(CheckArgs("GatherRows", m, w, {src, idx, dst}));
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(backend_->MakeCurrent(guard));
  CAVS_CUDA_RETURN_IF_ERROR(LaunchGatherRows(stream(), src, src_ld, idx, m, w, dst, dst_ld));
  return absl::OkStatus();
}

absl::Status CudaKernels::GatherRowsMulti(const RowCopy* copies, int count, int64_t m) {
  if (count <= 0 || count > kMaxRowCopies) {
    return absl::InvalidArgumentError(absl::StrCat("GatherRowsMulti: ", count, " copies"));
  }
  for (int i = 0; i < count; ++i) {
    const RowCopy& c = copies[i];
    CAVS_RETURN_IF_ERROR(CheckArgs("GatherRowsMulti", m, c.w, {c.src, c.idx, c.dst}));
  }
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(backend_->MakeCurrent(guard));
  CAVS_CUDA_RETURN_IF_ERROR(LaunchGatherRowsMulti(stream(), copies, count, m));
  return absl::OkStatus();
}

absl::Status CudaKernels::ScatterAddRowsMulti(const RowCopy* copies, int count, int64_t m,
                                              bool unique) {
  if (count <= 0 || count > kMaxRowCopies) {
    return absl::InvalidArgumentError(absl::StrCat("ScatterAddRowsMulti: ", count, " copies"));
  }
  for (int i = 0; i < count; ++i) {
    const RowCopy& c = copies[i];
    CAVS_RETURN_IF_ERROR(CheckArgs("ScatterAddRowsMulti", m, c.w, {c.src, c.idx, c.dst}));
  }
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(backend_->MakeCurrent(guard));
  CAVS_CUDA_RETURN_IF_ERROR(LaunchScatterAddRowsMulti(stream(), copies, count, m, unique));
  return absl::OkStatus();
}

absl::Status CudaKernels::ScatterAddRows(const float* src, int64_t src_ld, const int32_t* idx,
                                         int64_t m, int64_t w, float* dst, int64_t dst_ld,
                                         bool unique) {
  CAVS_RETURN_IF_ERROR(CheckArgs("ScatterAddRows", m, w, {src, idx, dst}));
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(backend_->MakeCurrent(guard));
  CAVS_CUDA_RETURN_IF_ERROR(
      LaunchScatterAddRows(stream(), src, src_ld, idx, m, w, dst, dst_ld, unique));
  return absl::OkStatus();
}

absl::Status CudaKernels::SegmentReduce(ReduceOp op, const float* src, int64_t src_ld,
                                        const int32_t* offsets, const int32_t* ids, int64_t m,
                                        int64_t w, float* dst, int64_t dst_ld, int32_t* argmax) {
  CAVS_RETURN_IF_ERROR(CheckArgs("SegmentReduce", m, w, {src, offsets, ids, dst}));
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(backend_->MakeCurrent(guard));
  CAVS_CUDA_RETURN_IF_ERROR(
      LaunchSegmentReduce(stream(), op, src, src_ld, offsets, ids, m, w, dst, dst_ld, argmax));
  return absl::OkStatus();
}

absl::Status CudaKernels::SegmentReduceGrad(ReduceOp op, const float* dy, int64_t dy_ld,
                                            const int32_t* offsets, const int32_t* ids,
                                            const int32_t* argmax, int64_t m, int64_t w,
                                            float* dsrc, int64_t dsrc_ld) {
  CAVS_RETURN_IF_ERROR(CheckArgs("SegmentReduceGrad", m, w, {dy, offsets, ids, dsrc}));
  if (op == ReduceOp::kMax) {
    CAVS_RETURN_IF_ERROR(CheckArgs("SegmentReduceGrad(max)", m, w, {argmax}));
  }
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(backend_->MakeCurrent(guard));
  CAVS_CUDA_RETURN_IF_ERROR(
      LaunchSegmentReduceGrad(stream(), op, dy, dy_ld, offsets, ids, argmax, m, w, dsrc, dsrc_ld));
  return absl::OkStatus();
}

absl::Status CudaKernels::SoftmaxCrossEntropy(const float* logits, int64_t ld, int64_t n, int64_t c,
                                              const int32_t* labels, float scale, float* dlogits,
                                              float* stats, int32_t* pred) {
  CAVS_RETURN_IF_ERROR(CheckArgs("SoftmaxCrossEntropy", n, c, {logits, labels}));
  if (n > 0 && c > 0 && ld < c) {
    return absl::InvalidArgumentError(
        absl::StrCat("SoftmaxCrossEntropy: row stride ", ld, " below the class count ", c));
  }
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(backend_->MakeCurrent(guard));
  CAVS_CUDA_RETURN_IF_ERROR(LaunchSoftmaxCrossEntropy(stream(), logits, ld, n, c, labels, scale,
                                                      dlogits, stats, pred, workspace_));
  return absl::OkStatus();
}

absl::Status CudaKernels::ColumnSum(const float* src, int64_t ld, int64_t m, int64_t w, float alpha,
                                    float* dst) {
  CAVS_RETURN_IF_ERROR(CheckArgs("ColumnSum", m, w, {src, dst}));
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(backend_->MakeCurrent(guard));
  CAVS_CUDA_RETURN_IF_ERROR(
      LaunchColumnReduce(stream(), src, ld, nullptr, 0, m, w, alpha, dst, num_sms_, workspace_));
  return absl::OkStatus();
}

absl::Status CudaKernels::ColumnDot(const float* x, int64_t x_ld, const float* y, int64_t y_ld,
                                    int64_t m, int64_t w, float* dst) {
  CAVS_RETURN_IF_ERROR(CheckArgs("ColumnDot", m, w, {x, y, dst}));
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(backend_->MakeCurrent(guard));
  CAVS_CUDA_RETURN_IF_ERROR(
      LaunchColumnReduce(stream(), x, x_ld, y, y_ld, m, w, 1.0f, dst, num_sms_, workspace_));
  return absl::OkStatus();
}

absl::Status CudaKernels::Fill(float* dst, int64_t n, float value) {
  CAVS_RETURN_IF_ERROR(CheckArgs("Fill", n, 1, {dst}));
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(backend_->MakeCurrent(guard));
  CAVS_CUDA_RETURN_IF_ERROR(LaunchFill(stream(), dst, n, value));
  return absl::OkStatus();
}

absl::StatusOr<CudaKernels*> GetCudaKernels(int ordinal) {
  static std::mutex* mu = new std::mutex();
  static std::vector<CudaKernels*>* all = new std::vector<CudaKernels*>();  // never freed
  CAVS_ASSIGN_OR_RETURN(CudaBackend * backend, GetCudaBackend(ordinal));
  std::lock_guard<std::mutex> lock(*mu);
  if (all->size() <= static_cast<size_t>(ordinal)) all->resize(ordinal + 1, nullptr);
  if ((*all)[ordinal] == nullptr) {
    CAVS_ASSIGN_OR_RETURN(std::unique_ptr<CudaKernels> kernels,
                          CudaKernels::Create(backend, GetKernelOptions()));
    (*all)[ordinal] = kernels.release();
  }
  return (*all)[ordinal];
}

}  // namespace cavs::ops::cuda
