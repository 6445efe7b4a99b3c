// Pass (record time): weights packed once per batch for the device's packed GEMM.
#include "core/status.h"
#include "scheduler/engine_record.h"
#include "scheduler/passes/passes.h"

namespace cavs::scheduler::internal {

absl::StatusOr<const float*> Recorder::PackedWeight(const float* w, bool trans, int64_t k,
                                                    int64_t n, int64_t ld) {
  // A pack costs about as much as two or three calls that re-pack: a batch of a few vertices
  // (a tree or two) has too few rows to win it back.
  constexpr int64_t kMinRowsToPack = 128;
  const int64_t bytes = k_.PackedGemmBytes(k, n);
  // Batch invariance takes it always; speed where it is fast and the batch has the rows.
  const bool take = b_.in.options->batch_invariant ||
                    (k_.PackedGemmFast() && b_.in.plan->num_rows >= kMinRowsToPack);
  if (bytes <= 0 || !take) return nullptr;
  auto it = b_.rec.packed.find({w, trans});
  if (it != b_.rec.packed.end()) return it->second;
  CAVS_ASSIGN_OR_RETURN(core::Tensor t, core::Tensor::Empty(core::Shape({(bytes + 3) / 4}),
                                                            core::DType::kFloat32, k_.device()));
  b_.out.scratch.push_back(t);
  b_.counts.pack_bytes += bytes;
  float* packed = t.data<float>();
  ops::Kernels* kernels = &k_;
  Record([=](int64_t, int64_t) { return kernels->PackGemmB(trans, k, n, w, ld, packed); }, 0, 0);
  b_.rec.packed.emplace(std::make_pair(w, trans), packed);
  return packed;
}

}  // namespace cavs::scheduler::internal
