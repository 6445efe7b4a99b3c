#include "scheduler/plan_queue.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace cavs::scheduler {

PlanQueue::PlanQueue(const Engine* engine, int64_t count, Source source, PlanQueueOptions options)
    : engine_(engine),
      count_(std::max<int64_t>(count, 0)),
      source_(std::move(source)),
      depth_(options.depth > 0 ? options.depth : 2 * std::max(options.threads, 1)) {
  const int threads = static_cast<int>(std::min<int64_t>(std::max(options.threads, 0), count_));
  workers_.reserve(threads);
  for (int t = 0; t < threads; ++t) workers_.emplace_back([this] { Work(); });
}

PlanQueue::~PlanQueue() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    claimable_.notify_all();
  }
  for (std::thread& t : workers_) t.join();
}

absl::StatusOr<PlannedBatch> PlanQueue::Build(int64_t i) const {
  PlannedBatch b;
  b.index = i;
  b.graphs = source_(i);
  if (b.graphs == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("batch ", i, ": the source gave no graphs"));
  }
  CAVS_ASSIGN_OR_RETURN(b.plan, engine_->PlanBatch(*b.graphs));
  return b;
}

void PlanQueue::Work() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    claimable_.wait(
        l, [this] { return stop_ || (next_claim_ < count_ && next_claim_ < next_out_ + depth_); });
    if (stop_) return;
    const int64_t i = next_claim_++;
    l.unlock();
    absl::StatusOr<PlannedBatch> b = Build(i);
    l.lock();
    ready_.emplace(i, std::move(b));
    built_.notify_all();
  }
}

absl::StatusOr<PlannedBatch> PlanQueue::Next() {
  std::unique_lock<std::mutex> l(mu_);
  if (next_out_ >= count_) {
    return absl::OutOfRangeError(absl::StrCat("all ", count_, " batches were taken"));
  }
  const int64_t i = next_out_++;
  if (workers_.empty()) {
    l.unlock();
    return Build(i);
  }
  claimable_.notify_all();  // the window moved on by one
  built_.wait(l, [&] { return ready_.count(i) > 0; });
  auto it = ready_.find(i);
  absl::StatusOr<PlannedBatch> b = std::move(it->second);
  ready_.erase(it);
  return b;
}

}  // namespace cavs::scheduler
