#include "distributed/calibration.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "distributed/collective_cost.h"

namespace cavs::distributed {

using internal::Collectives;
using internal::Load;
using internal::Phase;

FitPoint CollectiveFitTerms(const ClusterSpec& cluster, Collective op, double bytes,
                            double seconds) {
  Collectives c(cluster);
  std::vector<int> all(cluster.world_size());
  for (int r = 0; r < cluster.world_size(); ++r) all[r] = r;
  const Phase phase = c.Run(op, all, 0, bytes);
  const bool one_host = cluster.hosts.size() == 1;
  double busiest = 0;
  for (const Load& l : phase.loads) {
    const int kind = l.resource % 4;  // 0 out, 1 in, 2 duplex, 3 shared memory
    if (one_host ? kind == 3 : kind < 2) busiest = std::max(busiest, l.bytes);
  }
  return {phase.messages, busiest, seconds};
}

absl::StatusOr<AlphaBeta> FitAlphaBeta(const std::vector<FitPoint>& points) {
  if (points.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("alpha-beta fit: ", points.size(), " points (at least 2 needed)"));
  }
  double mm = 0, mb = 0, bb = 0, mt = 0, bt = 0;
  for (const FitPoint& q : points) {
    for (double v : {q.messages, q.bytes, q.seconds}) {
      if (!std::isfinite(v) || v < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("alpha-beta fit: point (messages ", q.messages, ", bytes ", q.bytes,
                         ", seconds ", q.seconds, ") has a negative or non-finite value"));
      }
    }
    mm += q.messages * q.messages, mb += q.messages * q.bytes, bb += q.bytes * q.bytes;
    mt += q.messages * q.seconds, bt += q.bytes * q.seconds;
  }
  const double det = mm * bb - mb * mb;
  if (!(det > 1e-12 * mm * bb)) {
    return absl::InvalidArgumentError(
        "alpha-beta fit: the points cannot tell latency from bandwidth (measure several sizes)");
  }
  AlphaBeta fit{(mt * bb - bt * mb) / det, (bt * mm - mt * mb) / det, 0.0};
  // A negative coefficient: the best fit with it at 0.
  if (fit.alpha < 0) fit = {0.0, bt / bb, 0.0};
  if (fit.beta < 0) fit = {mt / mm, 0.0, 0.0};
  double sq = 0;
  for (const FitPoint& q : points) {
    const double r = q.messages * fit.alpha + q.bytes * fit.beta - q.seconds;
    sq += r * r;
  }
  fit.rms_error = std::sqrt(sq / points.size());
  return fit;
}

absl::Status ApplyInterHostFit(const AlphaBeta& fit, Collective op, ClusterSpec* cluster) {
  if (cluster == nullptr || cluster->hosts.size() < 2) {
    return absl::InvalidArgumentError(
        "calibration between hosts needs a cluster of 2 hosts or more");
  }
  if (!(fit.beta > 0) || !std::isfinite(fit.beta) || !std::isfinite(fit.alpha)) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibration: beta ", fit.beta, " s/byte gives no bandwidth"));
  }
  double rate = cluster->hosts[0].bandwidth;
  for (const HostSpec& h : cluster->hosts) rate = std::min(rate, h.bandwidth);
  const bool both = op == Collective::kAllReduce || op == Collective::kAllGather;
  const double factor = 1.0 / (fit.beta * rate * (both ? cluster->efficiency : 1.0));
  if (!(factor > 0 && factor <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "calibration: a measured ", CollectiveName(op), " moves ", 1.0 / fit.beta,
        " bytes/s, which is ", factor, " x ", both ? "efficiency x " : "", "the line rate ", rate,
        " bytes/s of the slowest host (expected a fraction in (0, 1])"));
  }
  cluster->message_overhead = std::max(0.0, fit.alpha - cluster->inter_latency);
  (both ? cluster->duplex : cluster->efficiency) = factor;
  if (both) {
    for (HostSpec& h : cluster->hosts) h.duplex = 0;  // the fit is the cluster's, every host's
  }
  return absl::OkStatus();
}

CollectiveCalibration CalibrateCollective(const double modelled[2], const double measured[2],
                                          int points) {
  CollectiveCalibration c;
  if (points == 2 && modelled[0] > 0 && modelled[1] > modelled[0] && measured[0] > 0 &&
      measured[1] > measured[0]) {
    const double slope = (measured[1] - measured[0]) / (modelled[1] - modelled[0]);
    c.factor = std::clamp(slope, 0.5, 50.0);
    c.extra = measured[0] - c.factor * modelled[0];
    if (c.extra < 0) c.min_factor = std::clamp(measured[0] / modelled[0], 0.5, 50.0);
    return c;
  }
  const int last = points - 1;
  if (last >= 0 && modelled[last] > 0 && measured[last] > 0) {
    c.factor = std::clamp(measured[last] / modelled[last], 0.5, 50.0);
  }
  return c;
}

}  // namespace cavs::distributed
