// PlanQueue: plans a sequence of batches ahead of the caller on a pool of host threads and
// hands them out in order, so that the host's per-batch planning (validation and BuildPlan,
// Engine::PlanBatch) runs beside the device's work and scales with the host's cores.
//
// A GPU step at large batches is bounded by the host: planning 256 SST trees took about as
// long as the device's whole step on an H100 (docs/gpu_performance.md). One
// planning thread hides the plan behind the step as long as the plan is shorter than the step;
// several threads, each planning a different upcoming batch, keep it hidden when it is not.
//
//   PlanQueue q(engine, num_batches, [&](int64_t i) { return BatchOf(i); }, {.threads = 4});
//   for (int64_t i = 0; i < num_batches; ++i) {
//     CAVS_ASSIGN_OR_RETURN(PlannedBatch b, q.Next());
//     CAVS_ASSIGN_OR_RETURN(RunResult r, engine->Run(b.plan, options));
//   }
//
// The plans are exactly Engine::PlanBatch's (a plan depends only on the batch), so training
// with a queue gives the same parameters as without one. With threads = 0 nothing runs ahead:
// Next() builds batch i's plan on the calling thread.
//
// Thread-safety: Next() from one thread at a time. `source` is called from the planning
// threads, for distinct i concurrently; it must be safe to call that way (reading shared const
// data is). The engine must outlive the queue; Engine::PlanBatch is const and may run beside
// Engine::Run.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/engine.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"

namespace cavs::scheduler {

struct PlannedBatch {
  int64_t index = 0;
  std::shared_ptr<const std::vector<Graph>> graphs;
  Plan plan;
};

struct PlanQueueOptions {
  int threads = 1;  // planning threads; 0: plan on the caller's thread inside Next()
  int depth = 0;    // batches claimed ahead of the caller at most; 0: 2 per thread
};

class PlanQueue {
 public:
  // Batch i's graphs (i in [0, count)); null is an error for that batch.
  using Source = std::function<std::shared_ptr<const std::vector<Graph>>(int64_t i)>;

  PlanQueue(const Engine* engine, int64_t count, Source source, PlanQueueOptions options = {});
  // Starts no new plan, waits for those under way and joins the threads.
  ~PlanQueue();
  PlanQueue(const PlanQueue&) = delete;
  PlanQueue& operator=(const PlanQueue&) = delete;

  // The next batch (0, 1, ... count - 1) with its plan, waiting until it is built. A batch that
  // fails validation comes back as its own error (naming the sample and vertex) and the later
  // batches are unaffected; after `count` batches, OutOfRange.
  [[nodiscard]] absl::StatusOr<PlannedBatch> Next();

  int threads() const { return static_cast<int>(workers_.size()); }

 private:
  absl::StatusOr<PlannedBatch> Build(int64_t i) const;
  void Work();

  const Engine* engine_;
  const int64_t count_;
  const Source source_;
  const int64_t depth_;

  std::mutex mu_;
  std::condition_variable claimable_;  // a batch may be claimed, or stop_
  std::condition_variable built_;      // a batch was built
  int64_t next_claim_ = 0;             // the next batch a thread plans
  int64_t next_out_ = 0;               // the next batch Next() returns
  bool stop_ = false;
  std::map<int64_t, absl::StatusOr<PlannedBatch>> ready_;
  std::vector<std::thread> workers_;  // last: started once the rest is set
};

}  // namespace cavs::scheduler
