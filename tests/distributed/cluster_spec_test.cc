#include "distributed/cluster_spec.h"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "absl/strings/match.h"

namespace cavs::distributed {
namespace {

constexpr char kCluster[] = R"(# an uneven test bed
version 1
name testbed
inter latency_us=60 overhead_us=40 efficiency=0.95 duplex=0.5
intra bandwidth_gbit=40 latency_us=2
algorithms allreduce=recursive_doubling reduce=binomial broadcast=libnbc allgather=ring
host a ranks=2 bandwidth_gbit=1
host "b 2" ranks=1 bandwidth_gbit=0.25 duplex=1
hosts 2 ranks=3 bandwidth_gbit=10
)";

TEST(ClusterSpecTest, ParsesEveryFieldInSiUnits) {
  absl::StatusOr<ClusterSpec> c = ParseClusterSpec(kCluster, "c.txt");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "testbed");
  EXPECT_DOUBLE_EQ(c->inter_latency, 60e-6);
  EXPECT_DOUBLE_EQ(c->message_overhead, 40e-6);
  EXPECT_EQ(c->efficiency, 0.95);
  EXPECT_EQ(c->duplex, 0.5);
  EXPECT_DOUBLE_EQ(c->intra_bandwidth, 5e9);
  EXPECT_DOUBLE_EQ(c->intra_latency, 2e-6);
  EXPECT_EQ(c->algorithms.allreduce, AllReduceAlgorithm::kRecursiveDoubling);
  EXPECT_EQ(c->algorithms.reduce, ReduceAlgorithm::kBinomial);
  EXPECT_EQ(c->algorithms.broadcast, BroadcastAlgorithm::kLibnbc);
  EXPECT_EQ(c->algorithms.allgather, AllGatherAlgorithm::kRing);
  ASSERT_EQ(c->hosts.size(), 4u);
  EXPECT_EQ(c->hosts[0], (HostSpec{"a", 2, 1.25e8}));
  EXPECT_EQ(c->hosts[1], (HostSpec{"b 2", 1, 0.3125e8, 1.0}));
  EXPECT_EQ(c->hosts[2], (HostSpec{"h2", 3, 1.25e9}));
  EXPECT_EQ(c->hosts[3], (HostSpec{"h3", 3, 1.25e9}));
  EXPECT_EQ(c->world_size(), 9);
  EXPECT_EQ(c->HostOfRank(), (std::vector<int>{0, 0, 1, 2, 2, 2, 3, 3, 3}));
  // A host's own duplex factor, else the cluster's.
  EXPECT_EQ(c->HostDuplex(0), 0.5);
  EXPECT_EQ(c->HostDuplex(1), 1.0);
  EXPECT_EQ(c->HostDuplex(3), 0.5);
}

TEST(ClusterSpecTest, DefaultsAreTheTextbookAlgorithmsOnAnIdealLink) {
  absl::StatusOr<ClusterSpec> c = ParseClusterSpec("version 1\nhost x bandwidth_gbit=8\n", "c");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hosts[0].ranks, 1);
  EXPECT_EQ(c->inter_latency, 0.0);
  EXPECT_EQ(c->efficiency, 1.0);
  EXPECT_EQ(c->duplex, 1.0);
  EXPECT_EQ(c->algorithms, CollectiveAlgorithms{});
  EXPECT_EQ(c->algorithms.allreduce, AllReduceAlgorithm::kRing);
  EXPECT_EQ(c->algorithms.reduce, ReduceAlgorithm::kLinear);
}

TEST(ClusterSpecTest, RoundTripsThroughTheText) {
  absl::StatusOr<ClusterSpec> c = ParseClusterSpec(kCluster, "c.txt");
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string text = SerializeClusterSpec(*c);
  absl::StatusOr<ClusterSpec> again = ParseClusterSpec(text, "again.txt");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << text;
  EXPECT_EQ(again->name, c->name);
  EXPECT_EQ(again->algorithms, c->algorithms);
  ASSERT_EQ(again->hosts.size(), c->hosts.size());
  for (size_t i = 0; i < c->hosts.size(); ++i) {
    EXPECT_EQ(again->hosts[i].name, c->hosts[i].name);
    EXPECT_EQ(again->hosts[i].ranks, c->hosts[i].ranks);
    EXPECT_DOUBLE_EQ(again->hosts[i].bandwidth, c->hosts[i].bandwidth);
    EXPECT_EQ(again->hosts[i].duplex, c->hosts[i].duplex);
  }
  EXPECT_DOUBLE_EQ(again->inter_latency, c->inter_latency);
  EXPECT_DOUBLE_EQ(again->message_overhead, c->message_overhead);
  EXPECT_DOUBLE_EQ(again->intra_bandwidth, c->intra_bandwidth);
  EXPECT_DOUBLE_EQ(again->intra_latency, c->intra_latency);
  EXPECT_EQ(again->duplex, c->duplex);
  EXPECT_EQ(again->efficiency, c->efficiency);
}

// The probe's calibration line: optional (every factor 1 without it), written only where a
// factor differs from 1, and read back the same; factors must be positive.
TEST(ClusterSpecTest, CalibrationFactorsRoundTrip) {
  absl::StatusOr<ClusterSpec> c = ParseClusterSpec(kCluster, "c.txt");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->factor, (std::array<double, 5>{1, 1, 1, 1, 1}));
  EXPECT_FALSE(absl::StrContains(SerializeClusterSpec(*c), "calibration"));
  absl::StatusOr<ClusterSpec> cal = ParseClusterSpec(
      std::string(kCluster) + "calibration allreduce=1.25 broadcast=2\n", "cal.txt");
  ASSERT_TRUE(cal.ok()) << cal.status();
  EXPECT_EQ(cal->factor, (std::array<double, 5>{1.25, 1, 2, 1, 1}));
  absl::StatusOr<ClusterSpec> again = ParseClusterSpec(SerializeClusterSpec(*cal), "again.txt");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->factor, cal->factor);
  // A fixed time per collective beside the factor, in microseconds; written only where set.
  EXPECT_FALSE(absl::StrContains(SerializeClusterSpec(*cal), "broadcast_us"));
  absl::StatusOr<ClusterSpec> extra = ParseClusterSpec(
      std::string(kCluster) + "calibration broadcast=0.9 broadcast_us=1500 gather_us=20\n",
      "extra.txt");
  ASSERT_TRUE(extra.ok()) << extra.status();
  EXPECT_EQ(extra->factor, (std::array<double, 5>{1, 1, 0.9, 1, 1}));
  EXPECT_NEAR(extra->extra[static_cast<int>(Collective::kBroadcast)], 1.5e-3, 1e-15);
  EXPECT_NEAR(extra->extra[static_cast<int>(Collective::kGather)], 20e-6, 1e-15);
  absl::StatusOr<ClusterSpec> round = ParseClusterSpec(SerializeClusterSpec(*extra), "round.txt");
  ASSERT_TRUE(round.ok()) << round.status();
  EXPECT_EQ(*round, *extra);
  // Bad calibration lines: the error, which names the field.
  auto error = [](const std::string& line) {
    absl::StatusOr<ClusterSpec> c = ParseClusterSpec(std::string(kCluster) + line, "bad.txt");
    EXPECT_FALSE(c.ok()) << line;
    return std::string(c.status().message());
  };
  const std::string negative = error("calibration reduce_us=-1\n");
  EXPECT_TRUE(absl::StrContains(negative, "field 'reduce_us'")) << negative;
  EXPECT_TRUE(absl::StrContains(negative, "reduce_min")) << negative;
  // With the ratio below the line, a negative fixed time reads and round-trips.
  absl::StatusOr<ClusterSpec> two = ParseClusterSpec(
      std::string(kCluster) + "calibration allgather=2.1 allgather_us=-350 allgather_min=0.97\n",
      "two.txt");
  ASSERT_TRUE(two.ok()) << two.status();
  const int ag = static_cast<int>(Collective::kAllGather);
  EXPECT_EQ(two->factor[ag], 2.1);
  EXPECT_NEAR(two->extra[ag], -350e-6, 1e-15);
  EXPECT_EQ(two->min_factor, (std::array<double, 5>{0, 0, 0, 0.97, 0}));
  EXPECT_TRUE(absl::StrContains(SerializeClusterSpec(*two), "allgather_min=0.97"));
  absl::StatusOr<ClusterSpec> two_again =
      ParseClusterSpec(SerializeClusterSpec(*two), "two_again.txt");
  ASSERT_TRUE(two_again.ok()) << two_again.status();
  EXPECT_EQ(*two_again, *two);
  const std::string bad_min = error("calibration gather_min=-1\n");
  EXPECT_TRUE(absl::StrContains(bad_min, "field 'gather_min'")) << bad_min;
  const std::string bad = error("calibration gather=0\n");
  EXPECT_TRUE(absl::StrContains(bad, "field 'gather'")) << bad;
}

// Float16 compression's CPU costs: optional (0, not charged, without the line), in ns per
// element, written only where one is set, and read back the same.
TEST(ClusterSpecTest, Fp16CostsRoundTrip) {
  absl::StatusOr<ClusterSpec> c = ParseClusterSpec(kCluster, "c.txt");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->fp16, Fp16Costs{});
  EXPECT_FALSE(absl::StrContains(SerializeClusterSpec(*c), "fp16"));
  absl::StatusOr<ClusterSpec> f =
      ParseClusterSpec(std::string(kCluster) + "fp16 encode_ns=0.55 sum_ns=3.4\n", "f.txt");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_NEAR(f->fp16.encode, 0.55e-9, 1e-20);
  EXPECT_EQ(f->fp16.decode, 0.0);
  EXPECT_NEAR(f->fp16.sum, 3.4e-9, 1e-20);
  absl::StatusOr<ClusterSpec> round = ParseClusterSpec(SerializeClusterSpec(*f), "round.txt");
  ASSERT_TRUE(round.ok()) << round.status();
  EXPECT_EQ(*round, *f);
  EXPECT_EQ(ScaleCluster(*f, 8, 4).fp16, f->fp16);
}

TEST(ClusterSpecTest, ScaleKeepsTheLinksAndTheirMix) {
  absl::StatusOr<ClusterSpec> c = ParseClusterSpec(kCluster, "c.txt");
  ASSERT_TRUE(c.ok()) << c.status();
  const ClusterSpec big = ScaleCluster(*c, 6, 8);
  EXPECT_EQ(big.world_size(), 48);
  ASSERT_EQ(big.hosts.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(big.hosts[i].ranks, 8);
    EXPECT_EQ(big.hosts[i].bandwidth, c->hosts[i % 4].bandwidth);
    EXPECT_EQ(big.hosts[i].duplex, c->hosts[i % 4].duplex);
  }
  EXPECT_EQ(big.duplex, c->duplex);
  EXPECT_EQ(big.algorithms, c->algorithms);
}

TEST(ClusterSpecTest, ErrorsNameTheFileLineAndField) {
  const std::string head = "version 1\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "c.txt: no 'version 1' line"},
      {head, "c.txt: no 'host' or 'hosts' line"},
      {"host a bandwidth_gbit=1\n", "c.txt line 1: the first line must be 'version 1'"},
      {"version 1\nversion 1\n", "c.txt line 2: 'version' given twice (first on line 1)"},
      {head + "inter latency_us=1\ninter duplex=1\n",
       "c.txt line 3: 'inter' given twice (first on line 2)"},
      {head + "inter duplex=0\n",
       "c.txt line 2: field 'duplex': bad value '0' (expected a number in (0, 1])"},
      {head + "inter duplex=1.5\n",
       "c.txt line 2: field 'duplex': bad value '1.5' (expected a number in (0, 1])"},
      {head + "inter latency_us=-5\n",
       "c.txt line 2: field 'latency_us': bad value '-5' (expected a number >= 0)"},
      {head + "inter latency=5\n",
       "c.txt line 2: unknown field 'latency=5' (expected latency_us=, overhead_us=, "
       "efficiency=, duplex=)"},
      {head + "intra bandwidth_gbit=0\n",
       "c.txt line 2: field 'bandwidth_gbit': bad value '0' (expected a number > 0)"},
      {head + "algorithms allreduce=tree\n",
       "c.txt line 2: field 'allreduce': unknown algorithm 'tree' (expected ring, "
       "recursive_doubling or rabenseifner)"},
      {head + "algorithms broadcast=chain\n",
       "c.txt line 2: field 'broadcast': unknown algorithm 'chain' (expected linear, binomial "
       "or libnbc)"},
      {head + "host\n", "c.txt line 2: 'host' needs a name"},
      {head + "host a\n", "c.txt line 2: field 'bandwidth_gbit': missing"},
      {head + "host a bandwidth_gbit=1 duplex=0\n",
       "c.txt line 2: field 'duplex': bad value '0' (expected a number in (0, 1])"},
      {head + "hosts 2 bandwidth_gbit=1 duplex=1.2\n",
       "c.txt line 2: field 'duplex': bad value '1.2' (expected a number in (0, 1])"},
      {head + "host a ranks=0 bandwidth_gbit=1\n",
       "c.txt line 2: field 'ranks': bad value '0' (expected an integer in [1, 1048576])"},
      {head + "host a bandwidth_gbit=fast\n",
       "c.txt line 2: field 'bandwidth_gbit': bad value 'fast' (expected a number > 0)"},
      {head + "host a bandwidth_gbit=1\nhost a bandwidth_gbit=2\n",
       "c.txt line 3: host 'a' given twice (first on line 2)"},
      {head + "host h1 bandwidth_gbit=1\nhosts 2 bandwidth_gbit=2\n",
       "c.txt line 3: host 'h1' given twice (first on line 2)"},
      {head + "hosts x bandwidth_gbit=1\n",
       "c.txt line 2: field 'count': bad value 'x' (expected an integer in [1, 1048576])"},
      {head + "hosts 2000 ranks=1000 bandwidth_gbit=1\n",
       "c.txt line 2: more than 1048576 ranks in all"},
      {head + "switch x\n",
       "c.txt line 2: unknown directive 'switch' (expected version, name, inter, intra, "
       "algorithms, calibration, fp16, host or hosts)"},
      {head + "fp16 encode_ns=-1\n",
       "c.txt line 2: field 'encode_ns': bad value '-1' (expected a number >= 0)"},
      {head + "fp16 sum_us=3\n",
       "c.txt line 2: unknown field 'sum_us=3' (expected encode_ns=, decode_ns=, sum_ns=)"},
  };
  for (const auto& [text, error] : cases) {
    absl::StatusOr<ClusterSpec> c = ParseClusterSpec(text, "c.txt");
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(c.status().message(), error) << text;
  }
}

}  // namespace
}  // namespace cavs::distributed
