// The stages of one batch's run, after its plan: lay out its memory, record its launches,
// stage and upload what they read, replay them. Engine::Queue runs them once per batch;
// Engine::RunJoining (engine_join.cc) runs several batches' stages in turn, carrying rows from
// one to the next. Internal to the scheduler; see engine.h for the design.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/backend.h"
#include "core/parameter.h"
#include "core/tensor.h"
#include "ops/kernels.h"
#include "scheduler/engine.h"
#include "scheduler/engine_compile.h"
#include "scheduler/engine_record.h"
#include "scheduler/plan.h"

namespace cavs::scheduler::internal {

// Where a batch's buffers go: the arena ([rows, width] per buffer, 16-float aligned: first the
// buffers zeroed before each batch, the 2 loss statistics and the rows children push into, so
// that one fill zeroes them all, up to the last row with an empty slot; then the others) and the
// upload region (fused programs | features | the index arrays the run reads, packed (Batch::Ints;
// room for all of them) | predictions, written on the device). Only the bytes up to the last packed
// array are copied.
struct Layout {
  std::vector<int64_t> offsets;  // per buffer: floats into the arena, -1 if not allocated
  int64_t arena_floats = 0, stats_at = 0;
  int64_t zero_floats = 0;  // the arena's first floats, zeroed before each batch
  // The rows children push into, the last of the zeroed buffers: its offset (-1: none) and width.
  int64_t pushed_at = -1, pushed_width = 0;
  int64_t instr_count = 0, feat_at = 0, ints_at = 0, pred_at = 0, region_bytes = 0;
};
// `from_row`: the batch is recorded from a row after 0 (RecordFrom).
Layout LayOut(const Compiled& c, const Plan& plan, bool backward, bool row_offsets,
              bool from_row = false);

// A batch's device memory: the arena of its buffers and the upload region (Layout).
struct BatchMemory {
  core::Tensor arena, upload;
  float* arena_floats() const { return arena.data<float>(); }
  char* region() const { return static_cast<char*>(upload.raw_data()); }
};

// The folded input projections a run gathers (Engine::FoldInputProjections), where it uses them.
struct Folded {
  const std::vector<core::Tensor>* tables = nullptr;
  const std::vector<char>* unread = nullptr;  // Compiled::fold_unread
};

// A batch laid out, bound to its memory and recorded: ready to upload and replay.
struct RecordedBatch {
  Layout layout;
  BatchMemory memory;
  std::unique_ptr<Batch> batch;  // the launches and commands; bound to `memory` and the plan
  std::array<size_t, kNumPhases> phase_at{};
};

// Lays out, allocates, binds and records `plan`'s batch (from where `from` says). `plan` and
// `options` must outlive the result (the Batch points at them).
absl::StatusOr<RecordedBatch> RecordBatch(const vertex::Function& f, const Compiled& c,
                                          core::ParameterStore& store, ops::Kernels& kernels,
                                          core::Device device, const Plan& plan,
                                          const RunOptions& options, const Folded& folded,
                                          const RecordFrom& from = {});

// Queues the batch's one upload (every fused program, the features and the index arrays the
// launches read, from pinned memory where the backend has it: then the copy is queued, not
// waited for) and the one fill of the gradient accumulators, the rows children push into and
// the loss statistics (after a fill with NaN where `poison`). `fallback`: the host staging
// where the backend has no pinned buffer (kept across batches: no page faults per step). The
// rows children push into are zeroed from `first_row` on (a batch recorded RecordFrom a row:
// the rows before it ran in another batch). Returns the bytes uploaded.
absl::StatusOr<int64_t> Upload(core::Backend& backend, ops::Kernels& kernels,
                               const RecordedBatch& r, bool poison, std::vector<char>* fallback,
                               int64_t first_row = 0);

// Runs commands [from, to) of `b`.
absl::Status ReplayCommands(const Batch& b, size_t from, size_t to);

// Queues the recorded launches: as one unit (a CUDA graph where the kernels run that way) where
// the caller does not wait for it right away and no timer must see each phase begin, else one
// by one, telling `timer` (if any) where each phase begins. Returns whether they went as one
// graph.
absl::StatusOr<bool> QueueLaunches(ops::Kernels& kernels, const RecordedBatch& r, PhaseTimer* timer,
                                   bool waited);

// Seconds on the steady clock, for EngineStats' timings.
inline double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// fn(), or ResourceExhausted where it ran out of host memory: a batch too large for the host
// (a million-vertex chain records its programs per round) is an error the caller can report,
// not an abort from an uncaught std::bad_alloc.
template <typename Fn>
auto HostMemoryOrError(const char* what, Fn fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": out of host memory"));
  }
}

}  // namespace cavs::scheduler::internal

namespace cavs::scheduler {
struct Engine::Compiled : internal::Compiled {};
}  // namespace cavs::scheduler
