#include "examples/serve/serve_metrics.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace cavs::serve {
namespace {

// Latency buckets from 100 us to 10 s.
std::vector<double> SecondsBuckets() {
  return {1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1, 0.25, 0.5, 1, 2.5, 10};
}

void Header(const std::string& name, const std::string& help, const char* type, std::string* out) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  const size_t bucket =
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();  // le bound
  std::lock_guard<std::mutex> l(mu_);
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

int64_t Histogram::count() const {
  std::lock_guard<std::mutex> l(mu_);
  return count_;
}

void Histogram::Render(const std::string& name, const std::string& help, std::string* out) const {
  Header(name, help, "histogram", out);
  std::lock_guard<std::mutex> l(mu_);
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    absl::StrAppend(out, name, "_bucket{le=\"", bounds_[i], "\"} ", cumulative, "\n");
  }
  absl::StrAppend(out, name, "_bucket{le=\"+Inf\"} ", count_, "\n", name, "_sum ", sum_, "\n", name,
                  "_count ", count_, "\n");
}

ServeMetrics::ServeMetrics()
    : batch_size_({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}),
      queue_wait_(SecondsBuckets()),
      batch_seconds_(SecondsBuckets()),
      latency_(SecondsBuckets()) {}

void ServeMetrics::CountRequest(int http_status) {
  std::lock_guard<std::mutex> l(mu_);
  ++requests_[http_status];
}

void ServeMetrics::CountError(ErrorKind kind) {
  const int i = static_cast<int>(kind);
  if (i > 0 && i < kNumErrorKinds) errors_[i].fetch_add(1, std::memory_order_relaxed);
}

void ServeMetrics::CountBatch(size_t samples, double run_seconds, size_t joined) {
  samples_.fetch_add(static_cast<int64_t>(samples), std::memory_order_relaxed);
  joined_.fetch_add(static_cast<int64_t>(joined), std::memory_order_relaxed);
  batch_size_.Observe(static_cast<double>(samples));
  batch_seconds_.Observe(run_seconds);
}

int64_t ServeMetrics::errors(ErrorKind kind) const {
  const int i = static_cast<int>(kind);
  return i > 0 && i < kNumErrorKinds ? errors_[i].load(std::memory_order_relaxed) : 0;
}

std::string ServeMetrics::Render() const {
  std::string out;
  Header("cavs_serve_requests_total", "Requests answered, by HTTP status.", "counter", &out);
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [code, n] : requests_) {
      absl::StrAppend(&out, "cavs_serve_requests_total{code=\"", code, "\"} ", n, "\n");
    }
  }
  Header("cavs_serve_errors_total", "Requests refused or failed, by kind.", "counter", &out);
  for (int i = 1; i < kNumErrorKinds; ++i) {
    absl::StrAppend(&out, "cavs_serve_errors_total{kind=\"",
                    ErrorKindName(static_cast<ErrorKind>(i)), "\"} ",
                    errors_[i].load(std::memory_order_relaxed), "\n");
  }
  Header("cavs_serve_samples_total", "Inputs predicted.", "counter", &out);
  absl::StrAppend(&out, "cavs_serve_samples_total ", samples_.load(std::memory_order_relaxed),
                  "\n");
  Header("cavs_serve_joined_samples_total", "Inputs that joined a running batch.", "counter", &out);
  absl::StrAppend(&out, "cavs_serve_joined_samples_total ", joined_.load(std::memory_order_relaxed),
                  "\n");
  Header("cavs_serve_queued_samples", "Samples waiting for a batch.", "gauge", &out);
  absl::StrAppend(&out, "cavs_serve_queued_samples ", queued_.load(std::memory_order_relaxed),
                  "\n");
  batch_size_.Render("cavs_serve_batch_size", "Samples per batch.", &out);
  queue_wait_.Render("cavs_serve_queue_wait_seconds",
                     "A sample's wait in the queue until its batch starts.", &out);
  batch_seconds_.Render("cavs_serve_batch_seconds", "A batch's run on the device.", &out);
  latency_.Render("cavs_serve_request_seconds", "A predict request's latency.", &out);
  return out;
}

}  // namespace cavs::serve
