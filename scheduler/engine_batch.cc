#include "scheduler/engine_batch.h"

#include <cstring>
#include <limits>
#include <utility>

#include "core/status.h"
#include "scheduler/row_support.h"

namespace cavs::scheduler::internal {

using vertex::OpClass;

namespace {

// One part of the plan's upload: `bytes` from `src`, at `at` in the upload.
struct UploadPart {
  const void* src;
  int64_t at, bytes;
};

// Fills the host side of the plan's upload (`bytes` in all): each part at its offset, in the
// backend's pinned staging buffer where it has one, else in `fallback`.
absl::StatusOr<char*> Stage(core::Backend& backend, int64_t bytes,
                            const std::vector<UploadPart>& parts, std::vector<char>* fallback) {
  CAVS_ASSIGN_OR_RETURN(void* pinned, backend.HostStaging(bytes));
  char* staging = static_cast<char*>(pinned);
  if (staging == nullptr) {
    if (static_cast<int64_t>(fallback->size()) < bytes) fallback->resize(bytes);
    staging = fallback->data();
  }
  for (const UploadPart& p : parts) {
    if (p.bytes > 0) std::memcpy(staging + p.at, p.src, p.bytes);
  }
  return staging;
}

// Runs the recorded commands, telling `timer` (if any) where each phase begins.
absl::Status Replay(const Batch& b, const std::array<size_t, kNumPhases>& phase_at,
                    PhaseTimer* timer) {
  for (int p = static_cast<int>(Phase::kBeforeRounds); p <= static_cast<int>(Phase::kEnd); ++p) {
    if (timer != nullptr) timer->Begin(static_cast<Phase>(p));
    const size_t end = p == static_cast<int>(Phase::kEnd) ? b.out.commands.size() : phase_at[p + 1];
    CAVS_RETURN_IF_ERROR(ReplayCommands(b, phase_at[p], end));
  }
  return absl::OkStatus();
}

// At most the fused instructions the batch records (sizes the upload before recording): each
// step's program once, and where the device's Elementwise takes no row offset
// (`row_offsets` false), a copy for each round (but one that starts at row 0), and for the
// pre-round ops of a batch recorded from a row after 0 (`from_row`).
int64_t CountInstrs(const Compiled& c, int64_t rows, int rounds, bool backward, bool row_offsets,
                    bool from_row) {
  int64_t total = 0;
  if (rows == 0) return 0;
  for (int pass = 0; pass < (backward ? 2 : 1); ++pass) {
    const ProgramSchedule& s = pass == 0 ? c.fwd : c.bwd;
    for (int cls = 0; cls < 5; ++cls) {
      int64_t times = 1;
      if (!row_offsets && cls == static_cast<int>(OpClass::kInRounds)) times = 1 + rounds;
      if (!row_offsets && from_row && cls == static_cast<int>(OpClass::kBeforeRounds)) times = 2;
      for (const Step& st : s.steps[cls]) total += st.instrs * times;
    }
  }
  return total;
}

absl::StatusOr<BatchMemory> Allocate(const Layout& l, core::Device dev) {
  BatchMemory m;
  CAVS_ASSIGN_OR_RETURN(
      m.arena, core::Tensor::Empty(core::Shape({l.arena_floats}), core::DType::kFloat32, dev));
  CAVS_ASSIGN_OR_RETURN(m.upload, core::Tensor::Empty(core::Shape({(l.region_bytes + 3) / 4}),
                                                      core::DType::kFloat32, dev));
  return m;
}

// Points `b` at its memory and its plan, before recording.
void Bind(const Compiled& c, const Layout& l, const BatchMemory& m, const Plan& plan,
          const RunOptions& options, Batch& b) {
  char* up = m.region();
  b.in.plan = &plan;
  b.in.options = &options;
  b.in.ints = reinterpret_cast<const int32_t*>(up + l.ints_at);
  b.in.pred = reinterpret_cast<int32_t*>(up + l.pred_at);
  b.in.dev_instrs = reinterpret_cast<const ops::EwInstr*>(up);
  b.out.instrs.reserve(l.instr_count);
  b.in.stats = m.arena_floats() + l.stats_at;
  b.rec.sum_written.assign(c.fwd.num_sums, {});
  b.in.buffer_base.assign(c.buffers.size(), nullptr);
  for (size_t i = 0; i < c.buffers.size(); ++i) {
    if (c.buffers[i].features) b.in.buffer_base[i] = reinterpret_cast<float*>(up + l.feat_at);
    if (l.offsets[i] >= 0) b.in.buffer_base[i] = m.arena_floats() + l.offsets[i];
  }
}

}  // namespace

Layout LayOut(const Compiled& c, const Plan& plan, bool backward, bool row_offsets, bool from_row) {
  Layout l;
  const int64_t n = plan.num_rows;
  l.offsets.assign(c.buffers.size(), -1);
  auto place = [&](size_t i) {
    l.offsets[i] = l.arena_floats;
    l.arena_floats += (n * c.buffers[i].width + 15) / 16 * 16;
  };
  auto place_all = [&](bool zero) {
    for (size_t i = 0; i < c.buffers.size(); ++i) {
      const internal::Buffer& buf = c.buffers[i];
      if ((buf.backward_only && !backward) || buf.features || buf.unused || buf.zero != zero ||
          static_cast<int>(i) == c.pushed_rows) {
        continue;
      }
      place(i);
    }
  };
  place_all(true);
  l.stats_at = l.arena_floats;
  l.arena_floats += 16;
  l.zero_floats = l.arena_floats;
  if (c.pushed_rows >= 0) {  // last of the zeroed buffers: only its rows with an empty slot
    place(c.pushed_rows);
    l.pushed_at = l.offsets[c.pushed_rows];
    l.pushed_width = c.buffers[c.pushed_rows].width;
    const int64_t rows = plan.unique_parents ? plan.slots_full_from : n;
    l.zero_floats += rows * c.buffers[c.pushed_rows].width;
  }
  place_all(false);
  l.instr_count = CountInstrs(c, n, plan.num_rounds, backward, row_offsets, from_row);
  auto aligned = [](int64_t bytes) { return (bytes + 63) / 64 * 64; };
  l.feat_at = aligned(l.instr_count * static_cast<int64_t>(sizeof(ops::EwInstr)));
  l.ints_at = aligned(l.feat_at + static_cast<int64_t>(plan.features.size()) * 4);
  l.pred_at = aligned(l.ints_at + static_cast<int64_t>(plan.ints.size()) * 4);
  l.region_bytes = l.pred_at + n * 4;
  return l;
}

absl::StatusOr<RecordedBatch> RecordBatch(const vertex::Function& f, const Compiled& c,
                                          core::ParameterStore& store, ops::Kernels& kernels,
                                          core::Device device, const Plan& plan,
                                          const RunOptions& options, const Folded& folded,
                                          const RecordFrom& from) {
  RecordedBatch r;
  r.layout = LayOut(c, plan, options.backward, kernels.ElementwiseRowOffset(), from.row > 0);
  CAVS_ASSIGN_OR_RETURN(r.memory, Allocate(r.layout, device));
  r.batch = std::make_unique<Batch>();
  Batch& b = *r.batch;
  Bind(c, r.layout, r.memory, plan, options, b);
  if (options.folded_projections && folded.tables != nullptr && !folded.tables->empty()) {
    b.in.folded = folded.tables;
    b.in.folded_unread = folded.unread;
  }
  b.in.fwd_support = Supports(f.forward(), plan, nullptr);
  if (options.backward) {
    b.in.bwd_support = Supports(f.backward(), plan, &b.in.fwd_support);
    b.in.bwd_need = Needs(f, plan);
  }
  Recorder rec(f, c, store, kernels, b);
  CAVS_RETURN_IF_ERROR(RecordSchedule(rec, f, c, plan, options.backward, r.phase_at, b, from));
  CAVS_CHECK(static_cast<int64_t>(b.out.instrs.size()) <= r.layout.instr_count,
             "fused program size");
  return r;
}

absl::StatusOr<int64_t> Upload(core::Backend& backend, ops::Kernels& kernels,
                               const RecordedBatch& r, bool poison, std::vector<char>* fallback,
                               int64_t first_row) {
  const Batch& b = *r.batch;
  const Plan& plan = *b.in.plan;
  const Layout& l = r.layout;
  const BatchMemory& m = r.memory;
  std::vector<UploadPart> parts = {
      {b.out.instrs.data(), 0, static_cast<int64_t>(b.out.instrs.size() * sizeof(ops::EwInstr))},
      {plan.features.data(), l.feat_at, static_cast<int64_t>(plan.features.size()) * 4}};
  for (const Batch::IntsArray& a : b.out.ints_arrays) {
    parts.push_back({plan.Ints(a.plan_at), l.ints_at + a.packed_at * 4, a.count * 4});
  }
  const int64_t bytes = l.ints_at + b.out.ints_packed * 4;
  CAVS_ASSIGN_OR_RETURN(char* staging, Stage(backend, bytes, parts, fallback));
  CAVS_RETURN_IF_ERROR(backend.CopyFromHost(m.region(), staging, bytes));
  if (poison) {
    CAVS_RETURN_IF_ERROR(
        kernels.Fill(m.arena_floats(), l.arena_floats, std::numeric_limits<float>::quiet_NaN()));
  }
  if (first_row == 0 || l.pushed_at < 0) {
    CAVS_RETURN_IF_ERROR(kernels.Fill(m.arena_floats(), l.zero_floats, 0.0f));
    return bytes;
  }
  CAVS_RETURN_IF_ERROR(kernels.Fill(m.arena_floats(), l.pushed_at, 0.0f));
  const int64_t from = l.pushed_at + first_row * l.pushed_width;
  if (from < l.zero_floats) {
    CAVS_RETURN_IF_ERROR(kernels.Fill(m.arena_floats() + from, l.zero_floats - from, 0.0f));
  }
  return bytes;
}

absl::Status ReplayCommands(const Batch& b, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) {
    const Command& c = b.out.commands[i];
    CAVS_RETURN_IF_ERROR(b.out.launches[static_cast<size_t>(c.launch)](c.row0, c.rows));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> QueueLaunches(ops::Kernels& kernels, const RecordedBatch& r, PhaseTimer* timer,
                                   bool waited) {
  const Batch& b = *r.batch;
  if (timer == nullptr && !waited) {
    return kernels.QueueRecorded([&]() { return Replay(b, r.phase_at, nullptr); });
  }
  CAVS_RETURN_IF_ERROR(Replay(b, r.phase_at, timer));
  return false;
}

}  // namespace cavs::scheduler::internal
