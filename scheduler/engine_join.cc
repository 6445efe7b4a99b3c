// Engine::RunJoining: continuous batching for trees. Graphs join a running inference batch
// between its forward rounds; each join re-plans the grown batch and carries the rows that
// ran over (engine.h says what and why).
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "scheduler/engine.h"
#include "scheduler/engine_batch.h"
#include "scheduler/row_support.h"

namespace cavs::scheduler {

using internal::Seconds;

namespace {

// The height policy with each graph starting in its own round: a joined graph's leaves run in
// the round after the one it joined at.
class StartRoundPolicy final : public BatchingPolicy {
 public:
  explicit StartRoundPolicy(std::vector<int32_t> start) : start_(std::move(start)) {}
  std::string name() const override { return "height from each graph's start round"; }
  std::vector<int32_t> Rounds(const BatchGraphs& batch) const override {
    std::vector<int32_t> round = MakeHeightPolicy()->Rounds(batch);
    for (size_t gi = 0; gi < batch.graphs.size(); ++gi) {
      for (int64_t u = batch.graph_offsets[gi]; u < batch.graph_offsets[gi + 1]; ++u) {
        round[static_cast<size_t>(u)] += start_[gi];
      }
    }
    return round;
  }

 private:
  std::vector<int32_t> start_;
};

// Copies the live rows of `from` (run up to round `done`) into `to`, the batch grown from it:
// its rounds before `done` are from's, row for row; in each later round from's rows come
// first, in the same order (uid order within a round, and from's graphs come first). Live: of
// the rounds that ran, the buffers Compiled::read_after_its_round names; of the later rows,
// the rows their children pushed into. The rest the grown batch writes before it reads it:
// the ops before the rounds, which it runs over the later rows again (the same values; and
// what it then believes written is what it wrote, where the running batch's supports may have
// covered other rows), the rounds, and the ops after them.
absl::Status Carry(core::Backend& backend, const internal::Compiled& c,
                   const internal::RecordedBatch& from, const Plan& from_plan,
                   const internal::RecordedBatch& to, const Plan& to_plan, int done) {
  struct Block {
    int64_t from_row, to_row, rows;
    bool ran;
  };
  std::vector<Block> blocks = {{0, 0, from_plan.round_offsets[done], true}};
  for (int r = done; r < from_plan.num_rounds; ++r) {
    blocks.push_back(
        {from_plan.round_offsets[r], to_plan.round_offsets[r], from_plan.RoundRows(r), false});
  }
  for (size_t i = 0; i < c.buffers.size(); ++i) {
    const int64_t src = from.layout.offsets[i], dst = to.layout.offsets[i];
    if (src < 0 || dst < 0) continue;
    const int64_t width = c.buffers[i].width;
    for (const Block& k : blocks) {
      const bool live =
          k.ran ? c.read_after_its_round[i] != 0 : static_cast<int>(i) == c.pushed_rows;
      if (k.rows == 0 || !live) continue;
      CAVS_RETURN_IF_ERROR(backend.CopyWithin(to.memory.arena_floats() + dst + k.to_row * width,
                                              from.memory.arena_floats() + src + k.from_row * width,
                                              static_cast<size_t>(k.rows * width) * sizeof(float)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Engine::JoinSupported() const {
  if (!kernels_->RunsSynchronously()) {
    return absl::UnimplementedError(absl::StrCat(
        "joining running batches on ", options_.device.DebugString(),
        ": only where the kernels run synchronously (the CPU), so that the host can add rows "
        "between rounds"));
  }
  if (options_.plan.custom != nullptr || options_.plan.policy != Policy::kHeight) {
    return absl::FailedPreconditionError(
        "joining running batches needs the height batching policy (a graph joins by starting "
        "its heights at the next round)");
  }
  if (compiled_->sum_across_rounds) {
    return absl::UnimplementedError(absl::StrCat(
        "joining running batches with function '", function_.name(),
        "': it has a sum of GEMMs computed in place with terms before and after the rounds"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RunResult> Engine::RunJoining(const std::vector<Graph>& graphs, const Plan& plan,
                                             const RunOptions& options, const JoinSource& join) {
  CAVS_RETURN_IF_ERROR(CheckPlanOf(graphs, plan));
  CAVS_RETURN_IF_ERROR(CheckRunOptions(options));
  if (options.training || options.backward) {
    return absl::InvalidArgumentError(
        "Engine::RunJoining is for inference: training and backward must be off");
  }
  CAVS_RETURN_IF_ERROR(JoinSupported());
  if (plan.policy != MakeHeightPolicy()->name()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Engine::RunJoining: a plan of the '", plan.policy,
                     "' batching policy; a join needs the height policy's rounds"));
  }
  return internal::HostMemoryOrError("joining batches",
                                     [&]() { return Joining(graphs, plan, options, join); });
}

absl::StatusOr<RunResult> Engine::Joining(const std::vector<Graph>& graphs, const Plan& plan,
                                          const RunOptions& options, const JoinSource& join) {
  const double t0 = Seconds();
  const internal::Compiled& c = *compiled_;
  CAVS_ASSIGN_OR_RETURN(core::Backend * backend, core::GetBackend(options_.device));
  std::vector<Graph> all;       // every graph of the batch, once one joined
  std::vector<int32_t> start;   // the round each starts in
  std::unique_ptr<Plan> owned;  // the grown batch's plan, once one joined
  const Plan* cur = &plan;
  CAVS_ASSIGN_OR_RETURN(internal::RecordedBatch run,
                        internal::RecordBatch(function_, c, *store_, *kernels_, options_.device,
                                              plan, options, Folded()));
  CAVS_RETURN_IF_ERROR(
      internal::Upload(*backend, *kernels_, run, options_.poison_buffers, &staging_).status());
  const auto before_rounds = [](const internal::RecordedBatch& r) {
    return internal::ReplayCommands(*r.batch, r.phase_at[static_cast<int>(Phase::kBeforeRounds)],
                                    r.phase_at[static_cast<int>(Phase::kRounds)]);
  };
  CAVS_RETURN_IF_ERROR(before_rounds(run));
  int joins = 0;
  int64_t joined = 0;
  double join_seconds = 0.0;
  for (int done = 0; done < cur->num_rounds;) {
    const internal::Batch& b = *run.batch;
    CAVS_RETURN_IF_ERROR(internal::ReplayCommands(b, b.out.round_at[static_cast<size_t>(done)],
                                                  b.out.round_at[static_cast<size_t>(done) + 1]));
    if (++done == cur->num_rounds) break;
    std::vector<Graph> more = join(JoinPoint{done, cur->num_rounds, cur->num_rows});
    if (more.empty()) continue;
    const double tj = Seconds();
    if (absl::Status s = ValidateBatch(function_, more); !s.ok()) {
      return core::Prefixed(absl::StrCat("a graph joining after round ", done), s);
    }
    if (all.empty()) {
      all = graphs;
      start.assign(graphs.size(), 0);
    }
    for (Graph& g : more) {
      all.push_back(std::move(g));
      start.push_back(done);
    }
    PlanOptions po;
    po.custom = std::make_shared<StartRoundPolicy>(start);
    CAVS_ASSIGN_OR_RETURN(Plan grown, BuildPlan(function_, all, po));
    auto next_plan = std::make_unique<Plan>(std::move(grown));
    for (int r = 0; r <= done; ++r) {
      CAVS_CHECK(next_plan->round_offsets[r] == cur->round_offsets[r], "joined rounds kept");
    }
    // The ops after the rounds run over every row: supports over all of them. Those before
    // the rounds and the rounds themselves run over the rows from the join point on.
    const std::vector<Interval> after = Supports(function_.forward(), *next_plan, nullptr);
    const int64_t first_row = next_plan->round_offsets[done];
    RestrictHulls(*next_plan, first_row);
    CAVS_ASSIGN_OR_RETURN(
        internal::RecordedBatch next,
        internal::RecordBatch(function_, c, *store_, *kernels_, options_.device, *next_plan,
                              options, Folded(), internal::RecordFrom{done, first_row, &after}));
    CAVS_RETURN_IF_ERROR(
        internal::Upload(*backend, *kernels_, next, options_.poison_buffers, &staging_, first_row)
            .status());
    CAVS_RETURN_IF_ERROR(before_rounds(next));
    CAVS_RETURN_IF_ERROR(Carry(*backend, c, run, *cur, next, *next_plan, done));
    run = std::move(next);  // the old batch goes before its plan
    owned = std::move(next_plan);
    cur = owned.get();
    ++joins;
    joined += static_cast<int64_t>(more.size());
    join_seconds += Seconds() - tj;
  }
  const internal::Batch& b = *run.batch;
  CAVS_RETURN_IF_ERROR(internal::ReplayCommands(
      b, run.phase_at[static_cast<int>(Phase::kAfterRounds)], b.out.commands.size()));
  int64_t parts = 0;
  CAVS_ASSIGN_OR_RETURN(PendingRun pending, ReadBack(b, *cur, options, *backend, &parts));
  CAVS_ASSIGN_OR_RETURN(RunResult result, Finish(std::move(pending)));
  stats_ = EngineStats{};
  stats_.rounds = cur->num_rounds;
  stats_.rows = cur->num_rows;
  stats_.commands = static_cast<int64_t>(b.out.commands.size()) + b.counts.gemm_programs;
  stats_.gemm_flops = b.counts.gemm_flops;
  stats_.arena_bytes = run.layout.arena_floats * 4;
  stats_.joins = joins;
  stats_.joined_graphs = joined;
  stats_.join_seconds = join_seconds;
  stats_.run_seconds = Seconds() - t0;
  return result;
}

}  // namespace cavs::scheduler
