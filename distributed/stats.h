// Medians of measured times, for the probe (distributed/probe.h), the profiler
// (distributed/profiler.h) and the trials of --strategy=auto (distributed/auto_strategy.h).
// Two forms, which differ only for an even count:
//   Median       the mean of the two middle values: a trial of two measured steps is their
//                mean, not the slower one;
//   UpperMedian  the upper of the two middle values: always one of the measurements (the
//                probe's repetitions, the profiler's steps).
// Both are 0 for no values and take their argument by value (they sort a copy).
// And the noise of a few measured steps:
//   PooledSpread           the step-to-step spread of several series (each a strategy's trial
//                          steps), relative to each series' level and pooled over them: a median
//                          of absolute deviations, scaled to a standard deviation, stable where
//                          each series has only a few steps;
//   MedianStandardError    the standard error, relative, of the median of n steps at that spread.
//
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <cmath>
#include <utility>
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

// Each series of two or more values with a positive mean contributes |x / its mean - 1| per
// value; the result is 1.4826 * sqrt(n / (n - 1)) times the median of them all, n per series
// (x minus its series' mean is normal with variance sigma^2 (n - 1) / n where x is, and the
// median of |normal| is 0.6745 of its standard deviation): the steps' standard deviation
// relative to their level, unbiased for normal noise however few steps a series has, and the
// median keeps an outlier step from moving it far. 0 where no series has two values.
inline double PooledSpread(const std::vector<std::vector<double>>& series) {
  std::vector<double> deviations;
  for (const std::vector<double>& s : series) {
    if (s.size() < 2) continue;
    double mean = 0;
    for (double x : s) mean += x / static_cast<double>(s.size());
    if (mean <= 0) continue;
    const double n = static_cast<double>(s.size());
    for (double x : s) deviations.push_back(std::abs(x / mean - 1) * std::sqrt(n / (n - 1)));
  }
  return 1.4826 * Median(std::move(deviations));
}

// sqrt(pi / 2) * spread / sqrt(n): the median of n normal values is that much less precise than
// their mean. 0 for n < 1.
inline double MedianStandardError(double spread, int n) {
  return n < 1 ? 0.0 : 1.2533 * spread / std::sqrt(static_cast<double>(n));
}

}  // namespace cavs::distributed
