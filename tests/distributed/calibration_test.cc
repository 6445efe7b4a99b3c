#include "distributed/calibration.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "distributed/collective_cost.h"
#include "distributed/probe.h"

namespace cavs::distributed {
namespace {

constexpr double kUs = 1e-6;
constexpr double kGbit = 1e9 / 8;

ClusterSpec Cluster(int hosts, int ranks) {
  ClusterSpec c;
  for (int h = 0; h < hosts; ++h) c.hosts.push_back({"h" + std::to_string(h), ranks, 1 * kGbit});
  return c;
}

TEST(CalibrationTest, FitRecoversAlphaAndBetaFromTheModelsOwnTerms) {
  ClusterSpec c = Cluster(4, 2);
  c.algorithms.allreduce = AllReduceAlgorithm::kRecursiveDoubling;
  const double alpha = 120 * kUs, beta = 1.0 / (0.45 * kGbit);
  std::vector<FitPoint> points;
  for (double bytes : {4e3, 64e3, 1e6, 16e6}) {
    FitPoint terms = CollectiveFitTerms(c, Collective::kAllReduce, bytes, 0);
    // Two ranks per host: each inter-host step carries 2 B per direction, 2 such steps; every
    // rank handles one message in each of the 3 steps.
    EXPECT_DOUBLE_EQ(terms.bytes, 4 * bytes);
    EXPECT_DOUBLE_EQ(terms.messages, 3);
    terms.seconds = terms.messages * alpha + terms.bytes * beta;
    points.push_back(terms);
  }
  absl::StatusOr<AlphaBeta> fit = FitAlphaBeta(points);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->alpha, alpha, alpha * 1e-9);
  EXPECT_NEAR(fit->beta, beta, beta * 1e-9);
  EXPECT_NEAR(fit->rms_error, 0, 1e-12);
  // A linear reduce to rank 0: its host's link takes (W - ranks on it) buffers in, and rank 0
  // handles all 7 messages.
  const FitPoint reduce = CollectiveFitTerms(c, Collective::kReduce, 1000, 0);
  EXPECT_DOUBLE_EQ(reduce.bytes, 6000);
  EXPECT_DOUBLE_EQ(reduce.messages, 7);
}

TEST(CalibrationTest, FitRejectsPointsThatCannotSeparateTheTerms) {
  EXPECT_FALSE(FitAlphaBeta({{1, 100, 1}}).ok());
  EXPECT_FALSE(FitAlphaBeta({{1, 100, 1}, {2, 200, 2}}).ok());
  EXPECT_FALSE(FitAlphaBeta({{1, 100, -1}, {2, 300, 2}}).ok());
  // Noise that would make alpha negative: alpha 0, beta refitted.
  absl::StatusOr<AlphaBeta> fit = FitAlphaBeta({{1, 100, 0.5}, {2, 300, 3}});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->alpha, 0.0);
  EXPECT_NEAR(fit->beta, (100 * 0.5 + 300 * 3.0) / (100.0 * 100 + 300.0 * 300), 1e-15);
}

// Timings made by the model itself on a known cluster, fitted and applied to a cluster file with
// other values, give back the known overhead, efficiency and duplex factor.
TEST(CalibrationTest, RecoversTheClustersLinkParameters) {
  ClusterSpec truth = Cluster(4, 1);
  truth.inter_latency = 30 * kUs;
  truth.message_overhead = 70 * kUs;
  truth.efficiency = 0.9;
  truth.duplex = 0.55;
  truth.algorithms = {AllReduceAlgorithm::kRecursiveDoubling, ReduceAlgorithm::kBinomial,
                      BroadcastAlgorithm::kBinomial, AllGatherAlgorithm::kRing};
  internal::Collectives collectives(truth);
  const internal::Resources resources(truth);
  auto measure = [&](Collective op) {
    std::vector<FitPoint> points;
    for (double bytes : {1e3, 1e5, 1e7}) {
      const double seconds =
          internal::AloneSeconds(collectives.Run(op, {0, 1, 2, 3}, 0, bytes), resources);
      points.push_back(CollectiveFitTerms(truth, op, bytes, seconds));
    }
    return FitAlphaBeta(points);
  };
  ClusterSpec file = truth;
  file.message_overhead = 0;
  file.efficiency = 1;
  file.duplex = 1;
  absl::StatusOr<AlphaBeta> reduce = measure(Collective::kReduce);
  ASSERT_TRUE(reduce.ok()) << reduce.status();
  EXPECT_NEAR(reduce->alpha, 100 * kUs, 1e-12);
  ASSERT_TRUE(ApplyInterHostFit(*reduce, Collective::kReduce, &file).ok());
  EXPECT_NEAR(file.message_overhead, 70 * kUs, 1e-12);
  EXPECT_NEAR(file.efficiency, 0.9, 1e-9);
  absl::StatusOr<AlphaBeta> allreduce = measure(Collective::kAllReduce);
  ASSERT_TRUE(allreduce.ok()) << allreduce.status();
  file.hosts[1].duplex = 0.9;  // the fit is every host's: a host's own factor goes
  ASSERT_TRUE(ApplyInterHostFit(*allreduce, Collective::kAllReduce, &file).ok());
  EXPECT_NEAR(file.duplex, 0.55, 1e-9);
  EXPECT_EQ(file.hosts[1].duplex, 0.0);
  EXPECT_NEAR(file.message_overhead, 70 * kUs, 1e-12);

  // Faster than the line rate the file states: refused, nothing changed.
  AlphaBeta too_fast = *reduce;
  too_fast.beta /= 2;
  const ClusterSpec before = file;
  absl::Status s = ApplyInterHostFit(too_fast, Collective::kReduce, &file);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("expected a fraction in (0, 1]"), std::string::npos) << s;
  EXPECT_EQ(file, before);
  ClusterSpec one = Cluster(1, 4);
  EXPECT_FALSE(ApplyInterHostFit(*reduce, Collective::kReduce, &one).ok());
}

// The probe's calibration of one collective from two sizes: a line with a fixed time where the
// ratio to the model falls with the size; where it grows, the line with the small size's ratio
// below it; at one point, or points that do not rise together, the ratio alone.
TEST(CalibrationTest, CollectiveCalibrationKeepsBothPoints) {
  auto at = [](const CollectiveCalibration& c, double modelled) {
    return std::max(c.min_factor * modelled, c.extra + c.factor * modelled);
  };
  {  // 1 ms fixed, then 1.2x: the line, no minimum.
    const double modelled[2] = {0.01, 0.04}, measured[2] = {0.013, 0.049};
    const CollectiveCalibration c = CalibrateCollective(modelled, measured, 2);
    EXPECT_NEAR(c.factor, 1.2, 1e-12);
    EXPECT_NEAR(c.extra, 1e-3, 1e-12);
    EXPECT_EQ(c.min_factor, 0);
  }
  {  // 0.97x at the small size, 1.86x at the large one (libnbc's allgatherv on slow links).
    const double modelled[2] = {0.05, 0.2}, measured[2] = {0.0485, 0.372};
    const CollectiveCalibration c = CalibrateCollective(modelled, measured, 2);
    EXPECT_LT(c.extra, 0);
    EXPECT_NEAR(c.min_factor, 0.97, 1e-12);
    EXPECT_NEAR(at(c, modelled[0]), measured[0], 1e-12);  // both points kept
    EXPECT_NEAR(at(c, modelled[1]), measured[1], 1e-12);
    EXPECT_NEAR(at(c, 0.01), 0.0097, 1e-12);  // below: the small size's ratio
    for (double m = 0.001; m < 0.5; m *= 1.5) EXPECT_GT(at(c, m * 1.5), at(c, m));
  }
  {  // Clamped: a slope over 50 stays 50, the line through the small point.
    const double modelled[2] = {0.01, 0.011}, measured[2] = {0.01, 0.2};
    const CollectiveCalibration c = CalibrateCollective(modelled, measured, 2);
    EXPECT_EQ(c.factor, 50);
    EXPECT_NEAR(at(c, modelled[0]), measured[0], 1e-12);
  }
  {  // Falling times, or one point: the last point's ratio.
    const double modelled[2] = {0.01, 0.04}, measured[2] = {0.03, 0.02};
    const CollectiveCalibration c = CalibrateCollective(modelled, measured, 2);
    EXPECT_NEAR(c.factor, 0.5, 1e-12);
    EXPECT_EQ(c.extra, 0);
    EXPECT_EQ(c.min_factor, 0);
    EXPECT_NEAR(CalibrateCollective(modelled, measured, 1).factor, 3, 1e-12);
    const double none[2] = {0, 0};
    EXPECT_EQ(CalibrateCollective(none, measured, 1).factor, 1);
  }
}

TEST(CalibrationTest, ProbeSizesShrinkToTheSlowestLinkOnly) {
  const ProbeOptions o;  // 1 and 4 MiB, 0.2 s
  using Sizes = std::array<int64_t, 2>;
  EXPECT_EQ(CalibrationSizes(o, 0), (Sizes{1 << 20, 4 << 20}));  // one host: no link
  EXPECT_EQ(CalibrationSizes(o, 1 * kGbit), (Sizes{1 << 20, 4 << 20}));
  // 50 Mbit/s: an allreduce of 625,000 bytes puts about 1.25 MB through a link, 0.2 s; the
  // smaller keeps its quarter.
  EXPECT_EQ(CalibrationSizes(o, 0.05 * kGbit), (Sizes{156250, 625000}));
  // 1 Mbit/s: no smaller than 64 KiB.
  EXPECT_EQ(CalibrationSizes(o, 0.001 * kGbit), (Sizes{16384, 65536}));
  // Off, or no calibration: as given.
  ProbeOptions off = o;
  off.calibration_seconds = 0;
  EXPECT_EQ(CalibrationSizes(off, 0.05 * kGbit), (Sizes{1 << 20, 4 << 20}));
  ProbeOptions none = o;
  none.calibration_bytes = 0;
  EXPECT_EQ(CalibrationSizes(none, 0.05 * kGbit)[0], 0);
  // One size (the larger 0): it alone scales; sizes out of order scale by one factor.
  ProbeOptions one = o;
  one.calibration_large_bytes = 0;
  EXPECT_EQ(CalibrationSizes(one, 0.05 * kGbit), (Sizes{625000, 0}));
  ProbeOptions swapped = o;
  std::swap(swapped.calibration_bytes, swapped.calibration_large_bytes);
  EXPECT_EQ(CalibrationSizes(swapped, 0.05 * kGbit), (Sizes{625000, 156250}));
  // More bandwidth never measures at smaller sizes.
  Sizes last{0, 0};
  for (double gbit = 0.0005; gbit < 4; gbit *= 1.7) {
    const Sizes s = CalibrationSizes(o, gbit * kGbit);
    EXPECT_GE(s[0], last[0]) << gbit;
    EXPECT_GE(s[1], last[1]) << gbit;
    EXPECT_LT(s[0], s[1]) << gbit;
    last = s;
  }
}

}  // namespace
}  // namespace cavs::distributed
