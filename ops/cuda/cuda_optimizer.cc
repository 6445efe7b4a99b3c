#include "ops/cuda/cuda_optimizer.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cuda/cuda_device_guard.h"
#include "ops/cuda/cuda_status.h"

namespace cavs::ops::cuda {

namespace {

size_t AlignUp(size_t v) { return (v + 63) / 64 * 64; }

// The backend of the device holding `p`.
absl::StatusOr<CudaBackend*> BackendOf(const void* p) {
  cudaPointerAttributes attr;
  CAVS_CUDA_RETURN_IF_ERROR(cudaPointerGetAttributes(&attr, p));
  if (attr.type != cudaMemoryTypeDevice) {
    return absl::InvalidArgumentError("CUDA optimizer: a parameter is not in device memory");
  }
  return GetCudaBackend(attr.device);
}

// Elements a slot updates; an error for a malformed slot.
absl::StatusOr<int64_t> SlotCount(const core::OptimizerSlot& s, size_t i, bool state0,
                                  bool state1) {
  const int64_t count = s.sparse ? s.num_rows * s.cols : s.rows * s.cols;
  if (s.rows < 0 || s.cols < 0 || s.num_rows < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA optimizer: slot ", i, " has shape [", s.rows, ", ", s.cols, "]"));
  }
  if (count == 0) return 0;
  if (s.param == nullptr || s.grad == nullptr || (state0 && s.state0 == nullptr) ||
      (state1 && s.state1 == nullptr) || (s.sparse && s.row_ids == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA optimizer: slot ", i, " lacks a buffer it needs"));
  }
  for (int64_t r = 0; s.sparse && r < s.num_rows; ++r) {
    if (s.row_ids[r] < 0 || s.row_ids[r] >= s.rows) {
      return absl::InvalidArgumentError(absl::StrCat("CUDA optimizer: slot ", i, " row id ",
                                                     s.row_ids[r], " outside [0, ", s.rows, ")"));
    }
  }
  return count;
}

// The host image of one call's tables: [slots][chunks][row ids], each part 64-byte aligned.
struct TableLayout {
  size_t chunks_offset = 0;
  size_t ids_offset = 0;
  size_t bytes = 0;
  int64_t num_chunks = 0;
};

TableLayout Layout(size_t num_slots, const std::vector<int64_t>& counts,
                   absl::Span<const core::OptimizerSlot> slots) {
  TableLayout t;
  int64_t ids = 0;
  for (size_t i = 0; i < num_slots; ++i) {
    t.num_chunks += (counts[i] + kMultiTensorChunk - 1) / kMultiTensorChunk;
    if (slots[i].sparse && counts[i] > 0) ids += slots[i].num_rows;
  }
  t.chunks_offset = AlignUp(num_slots * sizeof(MultiTensorSlot));
  t.ids_offset = t.chunks_offset + AlignUp(t.num_chunks * sizeof(MultiTensorChunk));
  t.bytes = t.ids_offset + static_cast<size_t>(ids) * sizeof(int64_t);
  return t;
}

// Writes the tables into `host`, with device pointers relative to `device`.
void FillTables(const TableLayout& t, const std::vector<int64_t>& counts,
                absl::Span<const core::OptimizerSlot> slots, char* host, char* device) {
  auto* table = reinterpret_cast<MultiTensorSlot*>(host);
  auto* chunks = reinterpret_cast<MultiTensorChunk*>(host + t.chunks_offset);
  size_t ids = t.ids_offset;
  for (size_t i = 0; i < slots.size(); ++i) {
    const core::OptimizerSlot& s = slots[i];
    MultiTensorSlot& d = table[i];
    d = MultiTensorSlot{s.param,  s.grad, s.state0, s.state1, nullptr, std::max<int64_t>(s.cols, 1),
                        counts[i]};
    if (s.sparse && counts[i] > 0) {
      std::memcpy(host + ids, s.row_ids, s.num_rows * sizeof(int64_t));
      d.row_ids = reinterpret_cast<const int64_t*>(device + ids);
      ids += s.num_rows * sizeof(int64_t);
    }
    for (int64_t b = 0; b < counts[i]; b += kMultiTensorChunk) {
      *chunks++ = MultiTensorChunk{static_cast<int64_t>(i), b};
    }
  }
}

}  // namespace

CudaOptimizerKernels* CudaOptimizerKernels::Global() {
  static CudaOptimizerKernels* kernels = new CudaOptimizerKernels();
  return kernels;
}

absl::StatusOr<PinnedStaging*> CudaOptimizerKernels::Staging(CudaBackend* backend) {
  const size_t ordinal = static_cast<size_t>(backend->ordinal());
  if (staging_.size() <= ordinal) staging_.resize(ordinal + 1);
  if (staging_[ordinal] == nullptr) staging_[ordinal] = std::make_unique<PinnedStaging>(backend);
  return staging_[ordinal].get();
}

absl::StatusOr<double> CudaOptimizerKernels::Run(MultiTensorOp op, const MultiTensorHyper& h,
                                                 absl::Span<const core::OptimizerSlot> slots) {
  const bool state0 = op == MultiTensorOp::kAdagrad || op == MultiTensorOp::kAdam ||
                      (op == MultiTensorOp::kSgd && h.sgd.momentum != 0.0f);
  const bool state1 = op == MultiTensorOp::kAdam;
  std::vector<int64_t> counts(slots.size());
  const core::OptimizerSlot* first = nullptr;
  for (size_t i = 0; i < slots.size(); ++i) {
    CAVS_ASSIGN_OR_RETURN(counts[i], SlotCount(slots[i], i, state0, state1));
    if (first == nullptr && counts[i] > 0) first = &slots[i];
  }
  if (first == nullptr) return 0.0;
  std::lock_guard<std::mutex> lock(mu_);
  CAVS_ASSIGN_OR_RETURN(CudaBackend * backend, BackendOf(first->param));
  CudaDeviceGuard guard;
  CAVS_RETURN_IF_ERROR(backend->MakeCurrent(guard));
  const TableLayout t = Layout(slots.size(), counts, slots);
  const bool sums = op == MultiTensorOp::kSumOfSquares;
  const size_t partial_bytes = sums ? t.num_chunks * sizeof(double) : 0;
  core::Allocator* allocator = backend->allocator();
  CAVS_ASSIGN_OR_RETURN(void* device, allocator->Allocate(t.bytes + partial_bytes));
  // The block returns to the stream-ordered cache as soon as the work is queued.
  struct Release {
    core::Allocator* a;
    void* p;
    size_t n;
    ~Release() { a->Deallocate(p, n); }
  } release{allocator, device, t.bytes + partial_bytes};
  CAVS_ASSIGN_OR_RETURN(PinnedStaging * staging, Staging(backend));
  CAVS_ASSIGN_OR_RETURN(void* host, staging->Acquire(t.bytes));
  FillTables(t, counts, slots, static_cast<char*>(host), static_cast<char*>(device));
  CAVS_RETURN_IF_ERROR(staging->Upload(device, t.bytes));
  char* base = static_cast<char*>(device);
  double* partials = sums ? reinterpret_cast<double*>(base + t.bytes) : nullptr;
  CAVS_CUDA_RETURN_IF_ERROR(LaunchMultiTensor(
      backend->stream(), op, h, reinterpret_cast<const MultiTensorSlot*>(base),
      reinterpret_cast<const MultiTensorChunk*>(base + t.chunks_offset), t.num_chunks, partials));
  if (!sums) return 0.0;
  std::vector<double> host_partials(t.num_chunks);
  CAVS_RETURN_IF_ERROR(backend->CopyToHost(host_partials.data(), partials, partial_bytes));
  double total = 0.0;
  for (double p : host_partials) total += p;
  return total;
}

absl::Status CudaOptimizerKernels::Sgd(const core::SgdHyper& h,
                                       absl::Span<const core::OptimizerSlot> slots) {
  MultiTensorHyper hyper;
  hyper.sgd = h;
  return Run(MultiTensorOp::kSgd, hyper, slots).status();
}

absl::Status CudaOptimizerKernels::Adagrad(const core::AdagradHyper& h,
                                           absl::Span<const core::OptimizerSlot> slots) {
  MultiTensorHyper hyper;
  hyper.adagrad = h;
  return Run(MultiTensorOp::kAdagrad, hyper, slots).status();
}

absl::Status CudaOptimizerKernels::Adam(const core::AdamHyper& h,
                                        absl::Span<const core::OptimizerSlot> slots) {
  MultiTensorHyper hyper;
  hyper.adam = h;
  return Run(MultiTensorOp::kAdam, hyper, slots).status();
}

namespace {

// Buffers as dense one-column slots (no gradient: kScale and kSumOfSquares read only param).
std::vector<core::OptimizerSlot> BufferSlots(absl::Span<const core::FloatBuffer> buffers) {
  static const float kNoGrad = 0.0f;
  std::vector<core::OptimizerSlot> slots(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    slots[i].param = buffers[i].data;
    slots[i].grad = &kNoGrad;  // never read
    slots[i].rows = buffers[i].size;
    slots[i].cols = 1;
  }
  return slots;
}

}  // namespace

absl::StatusOr<double> CudaOptimizerKernels::SumOfSquares(
    absl::Span<const core::FloatBuffer> buffers) {
  return Run(MultiTensorOp::kSumOfSquares, MultiTensorHyper{}, BufferSlots(buffers));
}

absl::Status CudaOptimizerKernels::Scale(absl::Span<const core::FloatBuffer> buffers,
                                         float factor) {
  MultiTensorHyper hyper;
  hyper.factor = factor;
  return Run(MultiTensorOp::kScale, hyper, BufferSlots(buffers)).status();
}

}  // namespace cavs::ops::cuda
