// ServeMetrics: the counters and histograms of cavs-serve, rendered in Prometheus's text
// exposition format (version 0.0.4) for GET /metrics.
//
//   cavs_serve_requests_total{code="200"}         requests answered, by HTTP status
//   cavs_serve_errors_total{kind="malformed_tree"} refused or failed requests, by ErrorKind
//   cavs_serve_samples_total                      inputs predicted
//   cavs_serve_joined_samples_total               of those, inputs that joined a running batch
//                                                 (--join)
//   cavs_serve_batches_total                      batches run
//   cavs_serve_batch_size                         histogram: samples per batch
//   cavs_serve_queue_wait_seconds                 histogram: a sample's wait from its request's
//                                                 arrival in the queue to its batch's start
//   cavs_serve_batch_seconds                      histogram: a batch's run (plan excluded)
//   cavs_serve_request_seconds                    histogram: a predict request's latency, from
//                                                 its body's parse to its response
//   cavs_serve_queued_samples                     gauge: samples waiting now
//
// The format is a few lines of text per family; a client library would add a registry and a
// dependency for what fits here. Thread-safe: every member may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "examples/serve/request.h"

namespace cavs::serve {

// A Prometheus histogram: cumulative counts per upper bound, the sum and the count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  // Appends the family `name` (with # HELP and # TYPE lines) to `out`.
  void Render(const std::string& name, const std::string& help, std::string* out) const;
  int64_t count() const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<int64_t> counts_;  // per bucket (not cumulative); the last is +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

class ServeMetrics {
 public:
  ServeMetrics();

  void CountRequest(int http_status);
  void CountError(ErrorKind kind);
  // A batch of `samples` inputs, `joined` of them after it began (Engine::RunJoining).
  void CountBatch(size_t samples, double run_seconds, size_t joined = 0);
  void ObserveQueueWait(double seconds) { queue_wait_.Observe(seconds); }
  void ObserveLatency(double seconds) { latency_.Observe(seconds); }
  void SetQueued(int64_t samples) { queued_.store(samples, std::memory_order_relaxed); }

  int64_t errors(ErrorKind kind) const;
  int64_t batches() const { return batch_size_.count(); }
  int64_t joined() const { return joined_.load(std::memory_order_relaxed); }
  int64_t queued() const { return queued_.load(std::memory_order_relaxed); }

  std::string Render() const;

 private:
  mutable std::mutex mu_;
  std::map<int, int64_t> requests_;  // by HTTP status
  std::array<std::atomic<int64_t>, kNumErrorKinds> errors_{};
  std::atomic<int64_t> samples_{0};
  std::atomic<int64_t> joined_{0};
  std::atomic<int64_t> queued_{0};
  Histogram batch_size_, queue_wait_, batch_seconds_, latency_;
};

}  // namespace cavs::serve
