#include "examples/serve/batcher.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "examples/serve/request.h"
#include "scheduler/plan_queue.h"

namespace cavs::serve {

absl::Status Ticket::Wait() {
  std::unique_lock<std::mutex> l(mu_);
  done_.wait(l, [this] { return remaining_ == 0; });
  return status_;
}

void Ticket::Answer(size_t i, std::vector<float> logits) {
  std::lock_guard<std::mutex> l(mu_);
  logits_[i] = std::move(logits);
  if (--remaining_ == 0) done_.notify_all();
}

void Ticket::Fail(const absl::Status& status, size_t samples) {
  std::lock_guard<std::mutex> l(mu_);
  if (status_.ok()) status_ = status;
  remaining_ -= samples;
  if (remaining_ == 0) done_.notify_all();
}

absl::StatusOr<std::unique_ptr<Batcher>> Batcher::Create(scheduler::Engine* engine,
                                                         const BatchPolicy* policy,
                                                         ServeMetrics* metrics,
                                                         BatcherOptions options) {
  // Folding needs something to fold; a model without embeddings runs plain.
  options.fold = options.fold && engine->foldable_projections() > 0;
  if (options.join) {
    if (absl::Status s = engine->JoinSupported(); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("--join: ", s.message()));
    }
  }
  if (options.fold) CAVS_RETURN_IF_ERROR(engine->FoldInputProjections());
  std::unique_ptr<Batcher> b(new Batcher(engine, policy, metrics, options));
  b->executor_ = std::thread([p = b.get()] { p->Execute(); });
  return b;
}

Batcher::~Batcher() { Stop(); }

absl::StatusOr<std::shared_ptr<Ticket>> Batcher::Submit(std::vector<scheduler::Graph> graphs) {
  auto ticket = std::make_shared<Ticket>(graphs.size());
  // Outside the lock: the request's thread pays for it.
  const std::vector<int32_t> rounds =
      options_.join ? scheduler::HeightRounds(graphs) : std::vector<int32_t>();
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping_) return RequestError(ErrorKind::kShuttingDown, "the server is shutting down");
    if (queue_.size() + graphs.size() > options_.queue_capacity) {
      return RequestError(ErrorKind::kQueueFull,
                          absl::StrCat("the queue is full (", queue_.size(), " of ",
                                       options_.queue_capacity, " samples wait); retry later"));
    }
    const Clock::time_point now = Clock::now();
    for (size_t i = 0; i < graphs.size(); ++i) {
      queue_.push_back({ticket, i, now, rounds.empty() ? 0 : rounds[i]});
      graphs_.push_back(std::move(graphs[i]));
    }
    metrics_->SetQueued(static_cast<int64_t>(queue_.size()));
  }
  changed_.notify_all();
  return ticket;
}

void Batcher::Flush() {
  {
    std::lock_guard<std::mutex> l(mu_);
    flushing_ = true;
  }
  changed_.notify_all();
}

void Batcher::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  std::lock_guard<std::mutex> l(join_mu_);
  if (executor_.joinable()) executor_.join();
}

void Batcher::TakeFront(size_t take, Formed& formed, std::vector<scheduler::Graph>& graphs) {
  const Clock::time_point now = Clock::now();
  formed.items.reserve(formed.items.size() + take);
  graphs.reserve(graphs.size() + take);
  for (size_t k = 0; k < take; ++k) {
    metrics_->ObserveQueueWait(
        std::chrono::duration<double>(now - queue_.front().queued_at).count());
    formed.items.push_back(std::move(queue_.front()));
    graphs.push_back(std::move(graphs_.front()));
    queue_.pop_front();
    graphs_.pop_front();
  }
  metrics_->SetQueued(static_cast<int64_t>(queue_.size()));
}

std::shared_ptr<const std::vector<scheduler::Graph>> Batcher::Form(int64_t i) {
  std::unique_lock<std::mutex> l(mu_);
  size_t take = 0;
  while (take == 0) {
    if (queue_.empty() && stopping_) return nullptr;
    if ((stopping_ || flushing_) && !queue_.empty()) {
      take = std::min(queue_.size(), policy_->max_batch());  // drain without waiting
      break;
    }
    if (flushing_) {
      changed_.wait(l);
      continue;
    }
    const auto oldest = queue_.empty() ? std::chrono::microseconds(0)
                                       : std::chrono::duration_cast<std::chrono::microseconds>(
                                             Clock::now() - queue_.front().queued_at);
    const BatchDecision d = policy_->Decide(queue_.size(), oldest, executor_idle_);
    take = std::min(d.take, queue_.size());
    if (take == 0) changed_.wait_for(l, d.wait);
  }
  auto graphs = std::make_shared<std::vector<scheduler::Graph>>();
  Formed formed;
  TakeFront(take, formed, *graphs);
  formed_.emplace(i, std::move(formed));
  return graphs;
}

std::vector<scheduler::Graph> Batcher::Join(const scheduler::JoinPoint& at, Formed& formed,
                                            int64_t* joined_rows) {
  std::vector<scheduler::Graph> out;
  const int32_t left = at.rounds - at.rounds_done;
  std::lock_guard<std::mutex> l(mu_);
  // They join only where they are all that waits (up to the batch's room): else the next batch
  // runs anyway, and joining saves its waiters little of it (batching shares it) while every
  // join adds host time near saturation. So they are the queue's front.
  const size_t room = policy_->max_batch() - std::min(policy_->max_batch(), formed.items.size());
  const size_t take = std::min(queue_.size(), room);
  if (take == 0) return out;
  for (size_t i = 0; i < take; ++i) {
    if (queue_[i].rounds > left) return out;
  }
  // The join's host time, which batch at a time does not spend: no more than the fixed cost of
  // the batch of their own it saves (so it costs no throughput), and no more, summed over the
  // running batch's samples that wait for it, than the joiners save.
  const double cost = join_seconds_per_row_ * static_cast<double>(at.rows);
  if (cost > batch_fixed_seconds_ || cost * static_cast<double>(formed.items.size()) >
                                         batch_seconds_ * static_cast<double>(take)) {
    return out;
  }
  TakeFront(take, formed, out);
  *joined_rows += at.rows;
  return out;
}

void Batcher::Measure(const scheduler::EngineStats& stats, double seconds, int64_t joined_rows) {
  constexpr double kWeight = 0.05;  // of the newest measurement in the running sums
  auto update = [](double& mean, double x) {
    mean = mean == 0.0 ? x : mean + kWeight * (x - mean);
  };
  if (stats.joins > 0 && joined_rows > 0) {
    update(join_seconds_per_row_, stats.join_seconds / static_cast<double>(joined_rows));
    return;
  }
  if (stats.joins > 0) return;
  update(batch_seconds_, seconds);
  // seconds = fixed + per_row x rows, least squares over recent batches (decayed sums).
  const double x = static_cast<double>(stats.rows);
  for (double* s : {&fit_.n, &fit_.x, &fit_.y, &fit_.xx, &fit_.xy}) *s *= 1.0 - kWeight;
  fit_.n += 1.0;
  fit_.x += x;
  fit_.y += seconds;
  fit_.xx += x * x;
  fit_.xy += x * seconds;
  const double var = fit_.n * fit_.xx - fit_.x * fit_.x;
  if (var > 1e-9 * fit_.n * fit_.xx) {
    const double per_row = (fit_.n * fit_.xy - fit_.x * fit_.y) / var;
    batch_fixed_seconds_ = std::max(0.0, (fit_.y - per_row * fit_.x) / fit_.n);
  }
}

void Batcher::Execute() {
  // One planning thread, one batch ahead: batch i+1 is cut and planned while batch i runs.
  scheduler::PlanQueue plans(
      engine_, std::numeric_limits<int64_t>::max(), [this](int64_t i) { return Form(i); },
      scheduler::PlanQueueOptions{.threads = 1, .depth = 1});
  scheduler::RunOptions ro;
  ro.training = false;
  ro.backward = false;
  ro.keep_outputs = true;
  ro.folded_projections = options_.fold;
  ro.batch_invariant = true;  // a sample's results whatever else shares its batch
  for (int64_t i = 0;; ++i) {
    {
      std::lock_guard<std::mutex> l(mu_);
      executor_idle_ = true;
    }
    changed_.notify_all();
    absl::StatusOr<scheduler::PlannedBatch> planned = plans.Next();
    Formed formed;
    {
      std::lock_guard<std::mutex> l(mu_);
      executor_idle_ = false;
      auto it = formed_.find(i);
      if (it == formed_.end()) return;  // the source gave none: stopped and drained
      formed = std::move(it->second);
      formed_.erase(it);
    }
    const Clock::time_point t0 = Clock::now();
    const size_t first = formed.items.size();
    int64_t joined_rows = 0;
    absl::StatusOr<scheduler::RunResult> result =
        !planned.ok()   ? absl::StatusOr<scheduler::RunResult>(planned.status())
        : options_.join ? engine_->RunJoining(*planned->graphs, planned->plan, ro,
                                              [&](const scheduler::JoinPoint& at) {
                                                return Join(at, formed, &joined_rows);
                                              })
                        : engine_->Run(*planned->graphs, ro, planned->plan);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    metrics_->CountBatch(formed.items.size(), seconds, formed.items.size() - first);
    if (result.ok() && options_.join) Measure(engine_->stats(), seconds, joined_rows);
    if (!result.ok()) {
      const absl::Status error = RequestError(
          ErrorKind::kInternal, absl::StrCat("the batch failed: ", result.status().message()));
      for (Item& item : formed.items) item.ticket->Fail(error, 1);
      continue;
    }
    for (size_t k = 0; k < formed.items.size(); ++k) {
      formed.items[k].ticket->Answer(formed.items[k].index, std::move(result->outputs[k]));
    }
  }
}

}  // namespace cavs::serve
