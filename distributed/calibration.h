// Calibration of a ClusterSpec from measured collectives (docs/distributed.md, "Calibration").
// The cost model (distributed/cost_model.h) prices a collective alone as
//
//   seconds = messages x alpha + bytes x beta
//
// where `messages` are the messages on its critical path and `bytes` those on the busiest
// direction of one host's link; alpha is a link's latency plus the per-message overhead, beta
// 1 / (efficiency x line rate) for a collective that loads one direction of each link (reduce,
// broadcast, gather) and 1 / (duplex x efficiency x line rate) for one that loads both
// (allreduce, allgather). So timings of a collective at several sizes give alpha and beta by
// least squares, and those give the cluster's overhead, efficiency and duplex factor. Fit
// algorithms with one message per rank and step (ring or recursive-doubling allreduce,
// binomial reduce and broadcast): for the linear ones the overhead and the latency weigh
// differently and one alpha cannot fit both.
//
// Thread-safety: pure functions.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "distributed/cluster_spec.h"

namespace cavs::distributed {

// One measured collective, with the model's regressors.
struct FitPoint {
  double messages = 0.0;  // on the critical path: the sum over steps of the most one rank handles
  double bytes = 0.0;     // on the busiest direction of one host's link (one host: its memory)
  double seconds = 0.0;   // measured
};

struct AlphaBeta {
  double alpha = 0.0;      // s per message on the critical path (latency + overhead)
  double beta = 0.0;       // s per byte on the busiest link direction
  double rms_error = 0.0;  // s, root mean square of the residuals
};

// The regressors of one collective of `bytes` (per participant for the gathers) over every rank
// of `cluster` (root 0) under its algorithms, with the time measured for it.
FitPoint CollectiveFitTerms(const ClusterSpec& cluster, Collective op, double bytes,
                            double seconds);

// Least squares of seconds = messages x alpha + bytes x beta, both at least 0 (a coefficient
// the data would make negative is set to 0 and the other refitted). Errors: fewer than 2
// points, a negative or non-finite value, points that cannot tell alpha from beta (all with the
// same messages / bytes ratio: measure several sizes).
[[nodiscard]] absl::StatusOr<AlphaBeta> FitAlphaBeta(const std::vector<FitPoint>& points);

// Sets what a fit of `op` between hosts of `cluster` measured: message_overhead = alpha less
// the inter-host latency already there (at least 0); with a one-direction collective (reduce,
// broadcast, gather) efficiency = 1 / (beta x line rate), with a both-directions one (allreduce,
// allgather) duplex = 1 / (beta x efficiency x line rate), for every host (their own factors
// are cleared); the line rate is the slowest host's.
// Errors: a cluster of one host, beta <= 0, or a factor outside (0, 1] (the measured rate is
// above the line rate the file states: nothing is changed).
[[nodiscard]] absl::Status ApplyInterHostFit(const AlphaBeta& fit, Collective op,
                                             ClusterSpec* cluster);

// The probe's calibration of one collective kind (ClusterSpec::factor, ::extra, ::min_factor)
// from its times `measured` at `points` sizes (1 or 2, ascending) against the model's times
// `modelled` for the same collectives. Two points: the line through them, measured = extra +
// factor x modelled, factor within [0.5, 50]; where that line needs a negative extra (the ratio
// to the model grows with the size), the line still, with the smaller size's ratio as
// min_factor below it, so that small collectives keep their own ratio and large ones the
// line's. One point, or two that do not rise together: the ratio at the last one, extra 0.
struct CollectiveCalibration {
  double factor = 1.0;
  double extra = 0.0;  // s
  double min_factor = 0.0;
};
CollectiveCalibration CalibrateCollective(const double modelled[2], const double measured[2],
                                          int points);

}  // namespace cavs::distributed
