// Batcher: the dynamic batching of cavs-serve. Requests put their samples into one bounded
// queue; a BatchPolicy cuts batches from its front; one executor thread runs them on the engine
// in arrival order, and a scheduler::PlanQueue thread forms and plans batch i+1 while batch i
// runs (the plan is the host's share of a batch; on a GPU it would otherwise idle the device).
//
//   Batcher::Submit(graphs) -> Ticket ... the executor fills it ... Ticket::Wait() -> results
//
// With BatcherOptions::join, samples also join the batch that runs (Engine::RunJoining): after
// each of its rounds the executor looks, oldest first, at the queued samples whose rounds fit
// in the rounds the batch has left (a joined tree never holds the batch's answers back), up to
// the policy's max_batch samples in all, and takes them where they are all that waits (else
// the next batch runs anyway, and joining saves its samples little of it) and the join's host
// time (measured per row of the running batch, times those rows) is at most the fixed cost of
// the batch of their own it saves (measured: the intercept of batch time against rows), and,
// summed over the running batch's samples that wait for it, at most what the joiners save (a
// batch of their own each: the mean run of a batch nothing joined). The rest wait for the
// next batch as before.
//
// A request's samples are queued together or not at all (Unavailable, kQueueFull, when they
// do not fit: the queue never grows past its capacity); they may land in different batches.
// Every sample's logits are those Engine::Run gives for it in its batch, with the options
// cavs-train's evaluation uses (training and backward off; folded input projections with
// `fold`). Stop() refuses new requests (kShuttingDown) and returns once every queued sample is
// answered.
//
// Thread-safety: Submit, Stop and the Ticket are safe from any thread. The engine is used by
// the batcher's threads only (Run on the executor, PlanBatch on the planner) until it stops.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "examples/serve/batch_policy.h"
#include "examples/serve/serve_metrics.h"
#include "scheduler/engine.h"
#include "scheduler/graph.h"

namespace cavs::serve {

struct BatcherOptions {
  size_t queue_capacity = 4096;  // samples waiting, at most
  bool fold = true;              // RunOptions::folded_projections (FoldInputProjections first)
  bool join = false;             // samples join running batches (Engine::RunJoining)
};

// One request's results, filled by the executor.
class Ticket {
 public:
  explicit Ticket(size_t samples) : logits_(samples), remaining_(samples) {}
  // Waits until every sample is answered; then the first error of any of its batches, or OK.
  absl::Status Wait();
  // Sample i's push-0 rows, [vertices * classes], in vertex order. REQUIRES: Wait() was OK.
  const std::vector<float>& logits(size_t i) const { return logits_[i]; }

 private:
  friend class Batcher;
  void Answer(size_t i, std::vector<float> logits);
  void Fail(const absl::Status& status, size_t samples);

  std::mutex mu_;
  std::condition_variable done_;
  std::vector<std::vector<float>> logits_;
  size_t remaining_;
  absl::Status status_;
};

class Batcher {
 public:
  // Folds the input projections (with options.fold) and starts the threads. `engine`, `policy`
  // and `metrics` must outlive the Batcher. With options.join, the engine's
  // Engine::JoinSupported error where it cannot join.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Batcher>> Create(scheduler::Engine* engine,
                                                                       const BatchPolicy* policy,
                                                                       ServeMetrics* metrics,
                                                                       BatcherOptions options);
  ~Batcher();  // Stop()

  // Queues `graphs` (checked by the caller: scheduler::ValidateBatch passes on each).
  // Unavailable with kQueueFull or kShuttingDown.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<Ticket>> Submit(
      std::vector<scheduler::Graph> graphs);
  // From now on batches start as soon as samples wait, without asking the policy (a server
  // shutting down answers what it accepted without waiting for deadlines). Still accepts.
  void Flush();
  // Refuses new requests, answers every queued one and joins the threads. Idempotent.
  void Stop();

 private:
  using Clock = std::chrono::steady_clock;
  struct Item {
    std::shared_ptr<Ticket> ticket;
    size_t index;
    Clock::time_point queued_at;
    int32_t rounds = 0;  // its graph's rounds alone (scheduler::HeightRounds), with join
  };
  struct Formed {  // a batch the policy cut: its samples' tickets, in batch order
    std::vector<Item> items;
  };

  Batcher(scheduler::Engine* engine, const BatchPolicy* policy, ServeMetrics* metrics,
          BatcherOptions options)
      : engine_(engine), policy_(policy), metrics_(metrics), options_(options) {}
  // The PlanQueue's source: blocks until the policy cuts batch `i` (null once stopped and
  // drained).
  std::shared_ptr<const std::vector<scheduler::Graph>> Form(int64_t i);
  void Execute();
  // Moves the queue's first `take` samples into `formed` and their graphs into `graphs`, counting
  // their waits. REQUIRES: mu_ held, take <= queue_.size().
  void TakeFront(size_t take, Formed& formed, std::vector<scheduler::Graph>& graphs);
  // RunJoining's source: the queued samples that fit after `at`, moved into `formed`, where
  // joining pays (the class comment); adds the running batch's rows to *joined_rows if any.
  std::vector<scheduler::Graph> Join(const scheduler::JoinPoint& at, Formed& formed,
                                     int64_t* joined_rows);
  // Updates the estimates Join weighs from a batch's run of `seconds` (`joined_rows`: the
  // running batch's rows summed over its joins).
  void Measure(const scheduler::EngineStats& stats, double seconds, int64_t joined_rows);

  scheduler::Engine* const engine_;
  const BatchPolicy* const policy_;
  ServeMetrics* const metrics_;
  const BatcherOptions options_;

  std::mutex mu_;
  std::condition_variable changed_;  // a sample arrived, the executor went idle, or stopping_
  std::deque<Item> queue_;
  std::deque<scheduler::Graph> graphs_;  // queue_'s graphs, moved into batches
  bool stopping_ = false;
  bool flushing_ = false;
  bool executor_idle_ = false;        // the executor waits for the next batch
  std::map<int64_t, Formed> formed_;  // batches cut but not yet run, by index
  // Join's estimates, measured (executor thread only; 0 until measured): a join's host time per
  // row of the running batch; the run time of a batch nothing joined, its mean and its fixed
  // part (the intercept of a fit against its rows: what a batch costs besides its rows).
  double join_seconds_per_row_ = 0.0;
  double batch_seconds_ = 0.0;
  double batch_fixed_seconds_ = 0.0;
  struct {
    double n = 0, x = 0, y = 0, xx = 0, xy = 0;
  } fit_;
  std::mutex join_mu_;  // Stop's join, once
  std::thread executor_;
};

}  // namespace cavs::serve
