// A console reporter that keeps every run's items_per_second by benchmark name, so that a
// benchmark binary can print ratios or targets after its table (in Finalize).
#pragma once

#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

namespace cavs::bench {

// The console table, plus every run's items_per_second by benchmark name, so that a binary can
// print ratios or targets after the table (in Finalize).
class RateReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      auto it = r.counters.find("items_per_second");
      if (it != r.counters.end()) rates_[r.benchmark_name()] = it->second;
    }
    ConsoleReporter::ReportRuns(runs);
  }

 protected:
  // items/s of the run named `name`, or 0 if it did not run.
  double Rate(const std::string& name) const {
    auto it = rates_.find(name);
    return it == rates_.end() ? 0.0 : it->second;
  }

 private:
  std::map<std::string, double> rates_;
};

}  // namespace cavs::bench
