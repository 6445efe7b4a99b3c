// TraceRecorder: a Chrome / Perfetto trace of a cavs-train run ("traceEvents" JSON, open it at
// ui.perfetto.dev or chrome://tracing).
//
// Every span is a complete event ("ph":"X") with its start in microseconds of wall-clock time
// (so that the files of several ranks on one machine line up when loaded together), its
// duration, pid = the rank, tid 0, and integer args (step, epoch, rounds, bytes, ...). One file
// per rank: TracePath("run.json", 2) is "run.json.rank2.json".
//
// Spans are kept in memory (a few per step) and written once, at the end of the run or after
// a failure. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cavs::trainer {

class TraceRecorder {
 public:
  using Args = std::vector<std::pair<std::string, int64_t>>;

  // A disabled recorder records nothing (Now() still works).
  TraceRecorder(bool enabled, int rank) : enabled_(enabled), rank_(rank) {}

  bool enabled() const { return enabled_; }
  // Microseconds of wall-clock time.
  static int64_t Now();
  // A span named `name` from `start_us` (a Now()) to now.
  void Span(absl::string_view name, int64_t start_us, Args args = {});
  // A span from `start_us` to `end_us`.
  void SpanTo(absl::string_view name, int64_t start_us, int64_t end_us, Args args = {});
  int num_spans() const { return static_cast<int>(events_.size()); }

  // The JSON document: {"traceEvents":[...],"displayTimeUnit":"ms"}.
  std::string Json() const;
  // Writes Json() to `path` (a temporary file renamed into place). Error: cannot write.
  [[nodiscard]] absl::Status Write(const std::string& path) const;

 private:
  struct Event {
    std::string name;
    int64_t start_us;
    int64_t duration_us;
    Args args;
  };
  bool enabled_;
  int rank_;
  std::vector<Event> events_;
};

// "<base>.rank<rank>.json".
std::string TracePath(const std::string& base, int rank);

}  // namespace cavs::trainer
