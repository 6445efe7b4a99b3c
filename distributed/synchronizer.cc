#include "distributed/synchronizer.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/status.h"
#include "distributed/comm_state.h"
#include "distributed/kinds/kind.h"
#include "distributed/sync_units.h"
#include "distributed/unit_plan.h"
#include "distributed/verify.h"

namespace cavs::distributed {

namespace {

using core::DType;
using core::Tensor;

// The store's parameters as the unit planner takes them.
std::vector<UnitParam> UnitParams(const core::ParameterStore& store) {
  std::vector<UnitParam> params;
  for (const auto& p : store.parameters()) {
    params.push_back({p->name, p->value.rows(), p->sparse_grad});
  }
  return params;
}

}  // namespace

GradientSynchronizer::GradientSynchronizer(Communicator* comm, core::ParameterStore* store,
                                           Strategy strategy)
    : comm_(comm), store_(store), strategy_(std::move(strategy)) {}

GradientSynchronizer::~GradientSynchronizer() = default;

absl::StatusOr<std::unique_ptr<GradientSynchronizer>> GradientSynchronizer::Create(
    Communicator* comm, core::ParameterStore* store, const Strategy& strategy) {
  if (comm == nullptr || store == nullptr) {
    return absl::InvalidArgumentError("GradientSynchronizer needs a communicator and a store");
  }
  CAVS_RETURN_IF_ERROR(VerifyConsistent(*comm, strategy, *store));
  // From here on every rank holds the same strategy, so the checks below agree across ranks.
  if (strategy.world_size != comm->world_size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("strategy '", strategy.name, "' is for world_size ", strategy.world_size,
                     " but the communicator has ", comm->world_size(), " ranks"));
  }
  for (const ParamStrategy& e : strategy.params) {
    CAVS_RETURN_IF_ERROR(kinds::KindOf(e.sync).CheckRunnable(e.sync, e.param));
  }
  // Servers named by host become ranks (every rank asks for the topology, or none does).
  Strategy resolved = strategy;
  const bool by_host = std::any_of(strategy.params.begin(), strategy.params.end(), [](auto& e) {
    return kinds::KindOf(e.sync).NamesHosts(e.sync);
  });
  if (by_host) {
    CAVS_ASSIGN_OR_RETURN(Topology topology, comm->DiscoverTopology());
    CAVS_ASSIGN_OR_RETURN(resolved, ResolveHostPlacements(strategy, topology.host_of_rank));
  }
  std::unique_ptr<GradientSynchronizer> sync(new GradientSynchronizer(comm, store, resolved));
  CAVS_ASSIGN_OR_RETURN(sync->control_, comm->Duplicate());
  CAVS_RETURN_IF_ERROR(sync->BuildUnits());
  return sync;
}

absl::Status GradientSynchronizer::BuildUnits() {
  param_units_.assign(store_->size(), {});
  const std::vector<UnitParam> params = UnitParams(*store_);
  const std::vector<UnitSpec> specs = PlanUnits(strategy_, params);
  // Every rank holds the same strategy (verified), so every rank makes the same units in the same
  // order, and with them the same collective calls (duplicates, splits, the topology).
  kinds::UnitContext context(comm_, control_.get(), store_, &params);
  for (const UnitSpec& spec : specs) {
    CAVS_ASSIGN_OR_RETURN(std::unique_ptr<internal::SyncUnit> unit,
                          kinds::KindOf(spec.kind).MakeUnit(spec, context));
    for (int p : unit->params()) param_units_[p].push_back(static_cast<int>(units_.size()));
    units_.push_back(std::move(unit));
  }
  for (size_t i = 0; i < store_->parameters().size(); ++i) {
    index_of_[store_->parameters()[i].get()] = static_cast<int>(i);
  }
  return absl::OkStatus();
}

absl::Status GradientSynchronizer::Fail(absl::Status error) {
  // This rank can no longer follow the agreed order of operations: the peers must not wait.
  if (!error.ok()) comm_->MarkBroken(error);
  return error;
}

absl::Status GradientSynchronizer::BeginStep(int64_t local_count) {
  CAVS_RETURN_IF_ERROR(comm_->health());
  if (in_step_) {
    return absl::FailedPreconditionError("BeginStep: the previous step has not been finished");
  }
  if (local_count < 0) {
    return absl::InvalidArgumentError(absl::StrCat("BeginStep: local count ", local_count, " < 0"));
  }
  stats_ = StepStats();
  stats_.local_count = local_count;
  stats_.unit_started_at.assign(units_.size(), -1.0);
  stats_.unit_done_at.assign(units_.size(), -1.0);
  stats_.unit_start_seconds.assign(units_.size(), 0.0);
  stats_.unit_stages_done_at.assign(units_.size(), {});
  step_start_ = absl::Now();
  stats_at_begin_ = comm_->stats();
  finishing_ = false;
  count_known_ = false;
  next_unit_ = 0;
  unit_done_.assign(units_.size(), false);
  pending_.assign(units_.size(), 0);
  for (size_t u = 0; u < units_.size(); ++u) {
    pending_[u] = static_cast<int>(units_[u]->params().size());
  }
  ready_.assign(store_->size(), false);
  Tensor count = Tensor::Host({1}, DType::kInt64);
  count.data<int64_t>()[0] = local_count;
  if (control_->buffer_device() != count.device()) {
    CAVS_ASSIGN_OR_RETURN(count, count.CopyTo(control_->buffer_device()));
  }
  count_ = count;
  CAVS_ASSIGN_OR_RETURN(count_work_, control_->StartAllReduce(count_));
  in_step_ = true;
  return absl::OkStatus();
}

absl::Status GradientSynchronizer::MarkReady(const core::Parameter* p) {
  auto it = index_of_.find(p);
  if (it == index_of_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("MarkReady: '", p == nullptr ? "(null)" : p->name,
                     "' is not a parameter of the synchronizer's store"));
  }
  if (!in_step_) return absl::FailedPreconditionError("MarkReady before BeginStep");
  if (ready_[it->second]) return absl::OkStatus();
  const absl::Time start = absl::Now();
  ready_[it->second] = true;
  for (int u : param_units_[it->second]) --pending_[u];
  CAVS_RETURN_IF_ERROR(Fail(StartReadyUnits()));
  absl::Status s = Fail(PollInFlight());
  CountHook(start);
  return s;
}

absl::Status GradientSynchronizer::Poll() {
  if (!in_step_) return absl::FailedPreconditionError("Poll before BeginStep");
  const absl::Time start = absl::Now();
  absl::Status s = Fail(PollInFlight());
  CountHook(start);
  return s;
}

void GradientSynchronizer::CountHook(absl::Time start) {
  const absl::Time now = absl::Now();
  stats_.hook_seconds += absl::ToDoubleSeconds(now - start);
  ++stats_.polls;
  if (next_unit_ > 0) {
    // In flight from the end of the first unit's Start on: the call that started it counts
    // only its part after that (the overlap StepTimes reports begins there too).
    const absl::Time first = step_start_ + absl::Seconds(stats_.unit_started_at[0]);
    stats_.hook_seconds_in_flight += absl::ToDoubleSeconds(now - std::max(start, first));
    ++stats_.polls_in_flight;
  }
}

absl::Status GradientSynchronizer::StartReadyUnits() {
  while (next_unit_ < units_.size() && pending_[next_unit_] == 0) {
    internal::SyncUnit& unit = *units_[next_unit_];
    float prescale = 1.0f;
    if (unit.NeedsScaleAtStart()) {
      CAVS_ASSIGN_OR_RETURN(prescale, WaitForScale());
    }
    const absl::Time before = absl::Now();
    CAVS_RETURN_IF_ERROR(unit.Start(prescale));
    const absl::Time after = absl::Now();
    stats_.unit_start_seconds[next_unit_] = absl::ToDoubleSeconds(after - before);
    stats_.unit_started_at[next_unit_] = absl::ToDoubleSeconds(after - step_start_);
    if (!finishing_) ++stats_.units_started_early;
    ++next_unit_;
  }
  return absl::OkStatus();
}

absl::StatusOr<float> GradientSynchronizer::WaitForScale() {
  if (!count_known_) {
    CAVS_RETURN_IF_ERROR(count_work_->Wait());
    CAVS_ASSIGN_OR_RETURN(Tensor host, count_.CopyTo(core::Device::Cpu()));
    stats_.global_count = host.data<int64_t>()[0];
    count_known_ = true;
  }
  return stats_.global_count > 0 ? static_cast<float>(1.0 / stats_.global_count) : 0.0f;
}

absl::Status GradientSynchronizer::PollInFlight() {
  CAVS_RETURN_IF_ERROR(count_work_->Test().status());
  for (size_t u = 0; u < next_unit_; ++u) {
    if (unit_done_[u]) continue;
    const int64_t stages_before = units_[u]->progress();
    CAVS_ASSIGN_OR_RETURN(bool done, units_[u]->Advance());
    unit_done_[u] = done;
    if (units_[u]->progress() == stages_before && !done) continue;  // the clock only on news
    const double now = absl::ToDoubleSeconds(absl::Now() - step_start_);
    stats_.unit_stages_done_at[u].insert(stats_.unit_stages_done_at[u].end(),
                                         units_[u]->progress() - stages_before, now);
    if (done) stats_.unit_done_at[u] = now;
  }
  return absl::OkStatus();
}

absl::Status GradientSynchronizer::WaitAll() {
  const absl::Duration timeout = comm_->options().timeout;
  absl::Time last_progress = absl::Now();
  int64_t seen = -1;
  for (int iteration = 0;; ++iteration) {
    CAVS_RETURN_IF_ERROR(PollInFlight());
    int64_t progress = count_work_->done() ? 1 : 0;
    bool all_done = count_work_->done();
    for (size_t u = 0; u < units_.size(); ++u) {
      progress += units_[u]->progress();
      all_done = all_done && unit_done_[u];
    }
    if (all_done) return absl::OkStatus();
    if (progress != seen) {
      seen = progress;
      last_progress = absl::Now();
      iteration = 0;
    } else if (absl::Now() - last_progress > timeout) {
      return PendingError(timeout);
    }
    internal::PollPause(iteration);
  }
}

absl::Status GradientSynchronizer::PendingError(absl::Duration timeout) const {
  std::vector<std::string> waiting;
  if (!count_work_->done()) waiting.push_back("the global sample count");
  for (size_t u = 0; u < units_.size() && waiting.size() < 4; ++u) {
    if (!unit_done_[u]) waiting.push_back(units_[u]->name());
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "gradient synchronization on rank ", comm_->rank(), " of ", comm_->world_size(),
      " made no progress for ", absl::FormatDuration(timeout), "; still waiting for ",
      absl::StrJoin(waiting, ", "), ": a peer is dead, stuck, or not synchronizing the same step"));
}

absl::StatusOr<StepStats> GradientSynchronizer::Finish() {
  if (!in_step_) return absl::FailedPreconditionError("Finish before BeginStep");
  CAVS_RETURN_IF_ERROR(comm_->health());
  const absl::Time start = absl::Now();
  finishing_ = true;
  std::fill(pending_.begin(), pending_.end(), 0);
  CAVS_RETURN_IF_ERROR(Fail(StartReadyUnits()));
  CAVS_RETURN_IF_ERROR(Fail(WaitAll()));
  absl::StatusOr<float> scale = WaitForScale();
  CAVS_RETURN_IF_ERROR(Fail(scale.status()));
  for (auto& unit : units_) CAVS_RETURN_IF_ERROR(Fail(unit->Complete(*scale)));
  CAVS_RETURN_IF_ERROR(Fail(WriteSparseResults()));
  const CommStats now = comm_->stats();
  stats_.bytes_sent = now.bytes_sent - stats_at_begin_.bytes_sent;
  stats_.bytes_received = now.bytes_received - stats_at_begin_.bytes_received;
  stats_.units = num_units();
  stats_.finish_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  in_step_ = false;
  return stats_;
}

absl::StatusOr<StepStats> GradientSynchronizer::Synchronize(int64_t local_count) {
  CAVS_RETURN_IF_ERROR(BeginStep(local_count));
  return Finish();
}

absl::Status GradientSynchronizer::WriteSparseResults() {
  for (int i = 0; i < store_->size(); ++i) {
    core::Parameter& p = *store_->parameters()[i];
    if (!p.sparse_grad) continue;
    // The parameter's shards, in row order (units of one parameter are adjacent, by shard).
    std::vector<const internal::SparseRows*> parts;
    int64_t total = 0;
    for (int u : param_units_[i]) {
      parts.push_back(units_[u]->sparse_result());
      total += static_cast<int64_t>(parts.back()->rows.size());
    }
    const int64_t cols = p.value.cols();
    Tensor values = Tensor::Host({total, cols});
    std::vector<int64_t> rows;
    rows.reserve(total);
    for (const internal::SparseRows* part : parts) {
      if (!part->rows.empty()) {
        std::memcpy(values.data<float>() + rows.size() * cols, part->values.data<float>(),
                    part->values.nbytes());
      }
      rows.insert(rows.end(), part->rows.begin(), part->rows.end());
    }
    if (values.device() != store_->device()) {
      CAVS_ASSIGN_OR_RETURN(values, values.CopyTo(store_->device()));
    }
    p.grad_rows = std::move(rows);
    p.grad_values = values;
  }
  return absl::OkStatus();
}

int GradientSynchronizer::num_in_flight() const {
  int n = 0;
  for (size_t u = 0; u < next_unit_ && u < unit_done_.size(); ++u) n += unit_done_[u] ? 0 : 1;
  return n;
}

std::vector<std::string> GradientSynchronizer::UnitNames() const {
  std::vector<std::string> names;
  for (const auto& u : units_) names.push_back(u->name());
  return names;
}

}  // namespace cavs::distributed
