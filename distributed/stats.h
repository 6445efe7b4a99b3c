// Medians of measured times, for the probe (distributed/probe.h), the profiler
// (distributed/profiler.h) and the trials of --strategy=auto (distributed/auto_strategy.h).
// Two forms, which differ only for an even count:
//   Median       the mean of the two middle values: a trial of two measured steps is their
//                mean, not the slower one;
//   UpperMedian  the upper of the two middle values: always one of the measurements (the
//                probe's repetitions, the profiler's steps).
// Both are 0 for no values and take their argument by value (they sort a copy).
//
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <vector>

namespace cavs::distributed {

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline double UpperMedian(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace cavs::distributed
