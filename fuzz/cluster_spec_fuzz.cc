// libFuzzer target: the cluster description format (distributed/cluster_spec.h), on a file's
// bytes. Any input must give an error naming the file, or a cluster within the format's limits
// (every host with at least one rank, finite nonnegative link figures) whose text form parses
// back to the same text (the units round once: Gbit/s and us).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"
#include "distributed/cluster_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cavs::distributed;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ClusterSpec> parsed = ParseClusterSpec(text, "fuzz.txt");
  if (!parsed.ok()) {
    const absl::string_view m = parsed.status().message();
    CAVS_CHECK(m.substr(0, 8) == "fuzz.txt", "error not naming the file: ", m);
    return 0;
  }
  int ranks = 0;
  for (const HostSpec& h : parsed->hosts) {
    CAVS_CHECK(h.ranks >= 1 && h.bandwidth >= 0 && !std::isnan(h.bandwidth), "host ", h.name);
    CAVS_CHECK(h.duplex >= 0 && h.duplex <= 1, "host ", h.name, " duplex ", h.duplex);
    ranks += h.ranks;
  }
  CAVS_CHECK(parsed->world_size() == ranks, "world size");
  CAVS_CHECK(static_cast<int>(parsed->HostOfRank().size()) == ranks, "host of rank");
  for (double x : {parsed->inter_latency, parsed->message_overhead, parsed->efficiency,
                   parsed->duplex, parsed->intra_bandwidth, parsed->intra_latency}) {
    CAVS_CHECK(x >= 0 && !std::isnan(x), "a link figure is ", x);
  }
  // The round trip of a `hosts 1000000` line writes and reads a million host lines: linear,
  // but seconds under ASan. Up to 100,000 hosts the corpus's regression-hosts-86089 keeps
  // the reading of many host lines linear (it was quadratic: 25 s).
  if (parsed->hosts.size() > 100000) return 0;
  const std::string once = SerializeClusterSpec(*parsed);
  absl::StatusOr<ClusterSpec> again = ParseClusterSpec(once, "again.txt");
  CAVS_CHECK(again.ok(), "the serialized cluster does not parse: ", again.status().ToString(), "\n",
             once);
  CAVS_CHECK(again->hosts.size() == parsed->hosts.size() && again->name == parsed->name &&
                 again->algorithms == parsed->algorithms,
             "round trip changed the cluster:\n", once);
  CAVS_CHECK(SerializeClusterSpec(*again) == once, "serializing twice differs:\n", once);
  return 0;
}
