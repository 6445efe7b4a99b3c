// Central finite differences of the reference executor's loss, in double precision.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "scheduler/reference_executor.h"

namespace cavs::scheduler::testing {

// Checks every analytic gradient entry of every parameter (or `max_entries` evenly spaced ones)
// against (L(p + h) - L(p - h)) / 2h. Returns the worst relative error seen.
inline double CheckGradients(const vertex::Function& f, const std::vector<Graph>& graphs,
                             const ParamValues& params, const RunOptions& options,
                             int max_entries = 40, double tolerance = 1e-6) {
  absl::StatusOr<ReferenceResult> base = RunReference(f, graphs, params, options);
  EXPECT_TRUE(base.ok()) << base.status();
  if (!base.ok()) return 1.0;
  RunOptions fwd_only = options;
  fwd_only.backward = false;
  double worst = 0.0;
  for (const vertex::ParamInfo& p : f.params()) {
    const std::vector<double>& analytic = base->grads.at(p.name);
    const int64_t n = static_cast<int64_t>(analytic.size());
    const int64_t step = std::max<int64_t>(1, n / max_entries);
    for (int64_t i = 0; i < n; i += step) {
      const double h = 1e-6;
      ParamValues plus = params, minus = params;
      plus[p.name][i] += h;
      minus[p.name][i] -= h;
      const double lp = RunReference(f, graphs, plus, fwd_only)->loss;
      const double lm = RunReference(f, graphs, minus, fwd_only)->loss;
      const double numeric = (lp - lm) / (2 * h);
      const double err = std::abs(numeric - analytic[i]) / std::max(1.0, std::abs(numeric));
      worst = std::max(worst, err);
      EXPECT_LT(err, tolerance) << f.name() << " parameter " << p.name << "[" << i << "]: analytic "
                                << analytic[i] << " numeric " << numeric;
    }
  }
  return worst;
}

}  // namespace cavs::scheduler::testing
