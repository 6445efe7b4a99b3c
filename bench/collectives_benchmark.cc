// The collectives cavs's synchronizer uses, timed against the alpha-beta bound of the link they
// cross (bench/RESULTS.md, "Emulated cluster"; docs/cluster.md). Launched under mpirun, on one
// machine or on the emulated cluster (scripts/cluster.sh run -- ...):
//
//   collectives_benchmark [--sizes=4K,64K,1M,16M,64M] [--reps=5] [--ops=...]
//                         [--link-mbit=1000] [--latency-us=0] [--timeout=120]
//                         [--stream=1M] [--at=0.25] [--piece-bytes=-1]
//
// ops (default all):
//   allreduce        Communicator::AllReduce (MPI_Iallreduce; Open MPI's algorithm as the
//                    environment sets OMPI_MCA_coll_libnbc_iallreduce_algorithm)
//   allreduce-fp16   the same on `size` bytes of float16 (what a compressed bucket sends: the
//                    half-precision sum, a user-defined MPI operation); only where --ops names it
//   bucket           one allreduce bucket of the GradientSynchronizer, flat (pack, allreduce,
//                    unpack: what a training step runs)
//   hier-bucket      the same bucket with topology=hierarchical
//   reduce-bcast     Reduce to rank 0, then Broadcast from it
//   allgatherv       AllGatherV of size / ranks bytes from every rank
//   exchange         rank 0 and the first rank of the next host send `size` bytes to each other
//                    at once (Isend + Irecv both ways): the rate of each direction
//   oneway           the same, from rank 0 only: the rate of one direction alone
//   behind           rank 0 sends `size` bytes to the first rank of the next host and, --at of
//                    the way through (by --link-mbit), 8 bytes on another communicator: the
//                    time from then until the small message arrives (alone it takes the
//                    latency; behind a transfer its connection carries in order, the transfer's
//                    rest, (1 - at) of it)
//   against          the first rank of the next host streams --stream bytes (default 1M) to
//                    rank 0 and, --at of the way through (default 0.25, by --link-mbit), rank 0
//                    sends `size` bytes the other way: the time from then until they arrive.
//                    Alone that is the latency and size / link; a message over Open MPI's eager
//                    limit (btl_tcp_eager_limit, 64 KiB) is a rendezvous, and if the receiver's
//                    acknowledgement waits behind the stream's rest on its direction, the rest
//                    of the stream ((1 - at) x its time) comes on top. Only where --ops names it
//   ps-pair          two PS shards of `size` bytes each through the GradientSynchronizer, one
//                    served by rank 0 and one by the first rank of the next host (each a reduce
//                    to its server, then a broadcast from it): what a PS strategy's shards do
//                    at once, in both directions of the link; with --piece-bytes
//                    (CommOptions::piece_bytes, default -1: the communicator's choice) each
//                    shard's reduce and broadcast go in pieces
//   ps-bucket        one PS shard served by the next host's first rank beside one allreduce
//                    bucket of the same size, in one synchronizer step
//
// Each is run --reps times after one warm-up; a repetition's time is the slowest rank's (an
// allreduce of the max), and the row gives the median. The bound assumes every host has one link
// of --link-mbit each way (the emulated cluster's cap) and --latency-us one-way latency, ranks of
// a host sharing memory at no cost, and H hosts: an allreduce (and reduce + broadcast) must put
// 2 (H - 1) / H of the buffer on each host's link each way, an allgather (H - 1) / H, one
// message its size; each pays the latency once per step of a log2(H)-deep exchange; ps-pair and
// ps-bucket, on 2 hosts, twice the size each way (0: no bound on more hosts). Rank 0 prints one
// row per op and size: time, bound, time / bound, and the algorithm bandwidth.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/initializer.h"
#include "core/parameter.h"
#include "core/status.h"
#include "distributed/comm_state.h"
#include "distributed/communicator.h"
#include "distributed/strategy.h"
#include "distributed/synchronizer.h"

namespace cavs {
namespace {

using core::Tensor;
using distributed::Communicator;

struct Flags {
  std::vector<int64_t> sizes = {4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20};
  int reps = 5;
  std::vector<std::string> ops = {"allreduce",  "bucket",   "hier-bucket", "reduce-bcast",
                                  "allgatherv", "exchange", "oneway",      "behind",
                                  "ps-pair",    "ps-bucket"};
  double link_mbit = 1000, latency_us = 0;
  int timeout_s = 120;
  int64_t piece_bytes = -1;        // CommOptions::piece_bytes: the PS ops' pieces
  int64_t stream_bytes = 1 << 20;  // against: the stream the other way
  double at = 0.25;                // behind, against: when the second message leaves
};

absl::StatusOr<int64_t> ParseSize(absl::string_view s) {
  int64_t mult = 1;
  if (!s.empty() && (s.back() == 'K' || s.back() == 'M' || s.back() == 'G')) {
    mult = s.back() == 'K' ? 1 << 10 : s.back() == 'M' ? 1 << 20 : int64_t{1} << 30;
    s.remove_suffix(1);
  }
  int64_t v = 0;
  if (!absl::SimpleAtoi(s, &v) || v <= 0 || v > (int64_t{1} << 40) / mult) {
    return absl::InvalidArgumentError(absl::StrCat("bad size '", s, "'"));
  }
  return v * mult;
}

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    bool ok = kv.size() == 2;
    if (ok && kv[0] == "--sizes") {
      f.sizes.clear();
      for (absl::string_view s : absl::StrSplit(kv[1], ',')) {
        CAVS_ASSIGN_OR_RETURN(int64_t v, ParseSize(s));
        f.sizes.push_back(v);
      }
    } else if (ok && kv[0] == "--reps") {
      ok = absl::SimpleAtoi(kv[1], &f.reps) && f.reps >= 1;
    } else if (ok && kv[0] == "--ops") {
      f.ops = absl::StrSplit(kv[1], ',');
    } else if (ok && kv[0] == "--link-mbit") {
      ok = absl::SimpleAtod(kv[1], &f.link_mbit) && f.link_mbit > 0;
    } else if (ok && kv[0] == "--latency-us") {
      ok = absl::SimpleAtod(kv[1], &f.latency_us) && f.latency_us >= 0;
    } else if (ok && kv[0] == "--stream") {
      CAVS_ASSIGN_OR_RETURN(f.stream_bytes, ParseSize(kv[1]));
    } else if (ok && kv[0] == "--at") {
      ok = absl::SimpleAtod(kv[1], &f.at) && f.at >= 0 && f.at < 1;
    } else if (ok && kv[0] == "--timeout") {
      ok = absl::SimpleAtoi(kv[1], &f.timeout_s) && f.timeout_s >= 1;
    } else if (ok && kv[0] == "--piece-bytes") {
      ok = absl::SimpleAtoi(kv[1], &f.piece_bytes) && f.piece_bytes >= -1;
    } else {
      ok = false;
    }
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("bad argument '", argv[i], "'"));
  }
  std::vector<std::string> known = Flags().ops;
  known.push_back("allreduce-fp16");  // not in the default list: --ops names it
  known.push_back("against");
  for (const std::string& op : f.ops) {
    if (std::find(known.begin(), known.end(), op) == known.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown op '", op, "' (expected ", absl::StrJoin(known, ", "), ")"));
    }
  }
  return f;
}

double Seconds(std::chrono::steady_clock::time_point a) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}

// The slowest rank's time.
absl::StatusOr<double> MaxOverRanks(Communicator& comm, double t) {
  // int64 nanoseconds: the reduction is a sum, so gather and take the max.
  Tensor mine = Tensor::Host({1}, core::DType::kInt64);
  mine.data<int64_t>()[0] = static_cast<int64_t>(t * 1e9);
  Tensor all = Tensor::Host({comm.world_size()}, core::DType::kInt64);
  CAVS_RETURN_IF_ERROR(comm.AllGather(mine, all));
  const int64_t* v = all.data<int64_t>();
  return *std::max_element(v, v + comm.world_size()) * 1e-9;
}

// One synchronizer bucket of `floats` floats (one dense parameter), flat or hierarchical.
struct Bucket {
  core::ParameterStore store;
  std::unique_ptr<distributed::GradientSynchronizer> sync;
};

// Two parameters of `floats` floats in one synchronizer: `a` on PS served by rank 0 (ps-pair)
// or in an allreduce bucket (ps-bucket), `b` on PS served by `peer`.
absl::StatusOr<std::unique_ptr<Bucket>> MakePsPair(Communicator& comm, int64_t floats, int peer,
                                                   bool beside_bucket) {
  auto b = std::make_unique<Bucket>();
  for (const char* name : {"a", "b"}) {
    CAVS_RETURN_IF_ERROR(
        b->store.GetOrCreate(name, core::Shape({floats, 1}), core::Initializer::Zeros()).status());
  }
  distributed::Strategy s;
  s.name = beside_bucket ? "ps-bucket" : "ps-pair";
  s.world_size = comm.world_size();
  distributed::ParameterServerSync on_zero, on_peer;
  on_zero.placement = {0};
  on_peer.placement = {peer};
  if (beside_bucket) {
    s.params.push_back({"a", distributed::AllReduceSync{}});
  } else {
    s.params.push_back({"a", on_zero});
  }
  s.params.push_back({"b", on_peer});
  CAVS_ASSIGN_OR_RETURN(b->sync, distributed::GradientSynchronizer::Create(&comm, &b->store, s));
  return b;
}

absl::StatusOr<std::unique_ptr<Bucket>> MakeBucket(Communicator& comm, int64_t floats,
                                                   bool hierarchical) {
  auto b = std::make_unique<Bucket>();
  CAVS_ASSIGN_OR_RETURN(core::Parameter * p, b->store.GetOrCreate("w", core::Shape({floats}),
                                                                  core::Initializer::Zeros()));
  (void)p;
  distributed::Strategy s;
  s.name = hierarchical ? "hier-bucket" : "bucket";
  s.world_size = comm.world_size();
  distributed::AllReduceSync ar;
  if (hierarchical) ar.topology = distributed::AllReduceTopology::kHierarchical;
  s.params.push_back({"w", ar});
  CAVS_ASSIGN_OR_RETURN(b->sync, distributed::GradientSynchronizer::Create(&comm, &b->store, s));
  return b;
}

struct Context {
  Communicator& comm;
  distributed::Topology topology;
  int peer = -1;                        // the first rank of host 1 (exchange, oneway, behind)
  std::unique_ptr<Communicator> other;  // a duplicate, for behind's small message
  double behind_s = 0;        // behind, against: when the receiver saw the message, after it left
  double behind_after_s = 0;  // behind, against: when rank 0 sends it, from the start
  int64_t stream_bytes = 0;   // against: what the peer streams to rank 0 meanwhile
};

// Runs `op` once on `bytes` bytes.
absl::Status RunOnce(Context& c, const std::string& op, int64_t bytes, Tensor& buf,
                     Bucket* bucket) {
  Communicator& comm = c.comm;
  const int r = comm.rank(), w = comm.world_size();
  if (op == "allreduce") return comm.AllReduce(buf);
  if (op == "allreduce-fp16") {
    Tensor half = Tensor::Host({std::max<int64_t>(1, bytes / 2)}, core::DType::kFloat16);
    std::memset(half.raw_data(), 0, static_cast<size_t>(half.numel()) * 2);
    return comm.AllReduce(half);
  }
  if (op == "bucket" || op == "hier-bucket" || op == "ps-pair" || op == "ps-bucket") {
    return bucket->sync->Synchronize(1).status();
  }
  if (op == "reduce-bcast") {
    CAVS_RETURN_IF_ERROR(comm.Reduce(buf, 0));
    return comm.Broadcast(buf, 0);
  }
  if (op == "allgatherv") {
    const int64_t per = std::max<int64_t>(1, bytes / 4 / w);
    std::vector<int64_t> counts(w, per);
    Tensor send = buf.View(core::Shape({buf.numel(), 1})).Rows(0, per);
    Tensor recv = Tensor::Host({per * w, 1});
    return comm.AllGatherV(send, recv, counts);
  }
  // exchange, oneway, behind: rank 0 and `peer`.
  c.behind_s = 0;
  if (c.peer < 0 || (r != 0 && r != c.peer)) return absl::OkStatus();
  const int other = r == 0 ? c.peer : 0;
  if (op == "against" || op == "behind") {
    // A transfer between the two (behind: rank 0's `buf` to the peer; against: the peer's
    // stream to rank 0) and, --at of the way through, a second message from rank 0 to the peer
    // on the duplicate communicator (behind: 8 bytes; against: `buf`). The row's time is the
    // receiver's (the peer's): from when rank 0 sends the second until the peer has it; the
    // transfer is waited for after.
    const bool against = op == "against";
    Tensor bulk_buf = against ? Tensor::Host({std::max<int64_t>(1, c.stream_bytes / 4)})
                              : Tensor::Host(buf.shape());
    Tensor second = against ? Tensor::Host(buf.shape()) : Tensor::Host({2});
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<distributed::Work> bulk, msg;
    if (r == 0) {
      CAVS_ASSIGN_OR_RETURN(
          bulk, against ? comm.StartRecv(bulk_buf, other, 7) : comm.StartSend(buf, other, 7));
      for (int iteration = 0; Seconds(t0) < c.behind_after_s; ++iteration) {
        CAVS_RETURN_IF_ERROR(bulk->Test().status());
        distributed::internal::PollPause(iteration);
      }
      CAVS_ASSIGN_OR_RETURN(msg, c.other->StartSend(against ? buf : second, other, 8));
    } else {
      CAVS_ASSIGN_OR_RETURN(
          bulk, against ? comm.StartSend(bulk_buf, other, 7) : comm.StartRecv(bulk_buf, other, 7));
      CAVS_ASSIGN_OR_RETURN(msg, c.other->StartRecv(second, other, 8));
    }
    for (int iteration = 0;; ++iteration) {
      CAVS_RETURN_IF_ERROR(bulk->Test().status());
      CAVS_ASSIGN_OR_RETURN(bool done, msg->Test());
      if (done) break;
      distributed::internal::PollPause(iteration);
    }
    c.behind_s = r == 0 ? 0 : Seconds(t0) - c.behind_after_s;
    return bulk->Wait();
  }
  const bool both = op == "exchange";
  Tensor in = Tensor::Host(buf.shape());
  std::vector<std::unique_ptr<distributed::Work>> works;
  if (both || r == 0) {
    CAVS_ASSIGN_OR_RETURN(auto s, comm.StartSend(buf, other, 7));
    works.push_back(std::move(s));
  }
  if (both || r != 0) {
    CAVS_ASSIGN_OR_RETURN(auto v, comm.StartRecv(in, other, 7));
    works.push_back(std::move(v));
  }
  for (auto& work : works) CAVS_RETURN_IF_ERROR(work->Wait());
  return absl::OkStatus();
}

// The alpha-beta floor of `op` on `bytes` (seconds).
double Bound(const Flags& f, const std::string& op, int64_t bytes, int hosts) {
  const double bw = f.link_mbit * 1e6 / 8, alpha = f.latency_us * 1e-6;
  const double h = hosts;
  const double steps = hosts > 1 ? std::ceil(std::log2(h)) : 0;
  if (hosts <= 1) return 0;
  if (op == "ps-pair" || op == "ps-bucket") return hosts == 2 ? 2 * alpha + 2.0 * bytes / bw : 0;
  if (op == "allreduce" || op == "allreduce-fp16" || op == "bucket" || op == "hier-bucket" ||
      op == "reduce-bcast") {
    return 2 * steps * alpha + 2 * (h - 1) / h * bytes / bw;
  }
  if (op == "allgatherv") return steps * alpha + (h - 1) / h * bytes / bw;
  if (op == "behind") return alpha;  // the small message alone
  return alpha + bytes / bw;  // exchange, oneway: one message each way; against: the message alone
}

absl::Status Main(int argc, char** argv) {
  CAVS_ASSIGN_OR_RETURN(Flags f, ParseFlags(argc, argv));
  CAVS_ASSIGN_OR_RETURN(
      std::unique_ptr<Communicator> comm,
      distributed::MakeCommunicator(
          "auto", {.timeout = absl::Seconds(f.timeout_s), .piece_bytes = f.piece_bytes}));
  CAVS_ASSIGN_OR_RETURN(distributed::Topology topology, comm->DiscoverTopology());
  Context c{*comm, topology};
  if (topology.num_hosts() > 1) c.peer = topology.RanksOn(1)[0];
  c.stream_bytes = f.stream_bytes;
  CAVS_ASSIGN_OR_RETURN(c.other, comm->Duplicate());
  const bool chief = comm->rank() == 0;
  const int hosts = topology.num_hosts();
  if (chief) {
    const char* algo = std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm");
    std::printf(
        "ranks %d as %s; link %.0f Mbit/s, latency %.0f us (for the bound); "
        "iallreduce algorithm %s; %d reps, median of the slowest rank\n",
        comm->world_size(), topology.Describe().c_str(), f.link_mbit, f.latency_us,
        algo != nullptr ? algo : "(Open MPI's choice)", f.reps);
    std::printf("%-13s %10s %11s %11s %8s %11s\n", "op", "bytes", "time_ms", "bound_ms", "x_bound",
                "algbw_MB/s");
  }
  for (const std::string& op : f.ops) {
    const bool ps = op == "ps-pair" || op == "ps-bucket";
    if ((op == "exchange" || op == "oneway" || op == "behind" || op == "against" || ps) &&
        c.peer < 0) {
      continue;
    }
    for (int64_t bytes : f.sizes) {
      const int64_t floats = std::max<int64_t>(1, bytes / 4);
      Tensor buf = Tensor::Host({floats});
      std::fill_n(buf.data<float>(), floats, 1.0f);
      std::unique_ptr<Bucket> bucket;
      if (op == "bucket" || op == "hier-bucket") {
        CAVS_ASSIGN_OR_RETURN(bucket, MakeBucket(*comm, floats, op == "hier-bucket"));
      } else if (ps) {
        CAVS_ASSIGN_OR_RETURN(bucket, MakePsPair(*comm, floats, c.peer, op == "ps-bucket"));
      }
      const double ahead = op == "against" ? static_cast<double>(f.stream_bytes) : floats * 4.0;
      c.behind_after_s = ahead / (f.link_mbit * 1e6 / 8) * f.at;
      std::vector<double> times;
      for (int rep = 0; rep <= f.reps; ++rep) {
        CAVS_RETURN_IF_ERROR(comm->Barrier());
        const auto t0 = std::chrono::steady_clock::now();
        CAVS_RETURN_IF_ERROR(RunOnce(c, op, bytes, buf, bucket.get()));
        const double mine = op == "behind" || op == "against" ? c.behind_s : Seconds(t0);
        CAVS_ASSIGN_OR_RETURN(double t, MaxOverRanks(*comm, mine));
        if (rep > 0) times.push_back(t);  // the first is a warm-up
      }
      std::sort(times.begin(), times.end());
      const double t = times[times.size() / 2];
      const double bound = Bound(f, op, floats * 4, hosts);
      if (chief) {
        std::printf("%-13s %10lld %11.3f %11.3f %8.2f %11.1f\n", op.c_str(),
                    static_cast<long long>(floats * 4), t * 1e3, bound * 1e3,
                    bound > 0 ? t / bound : 0.0, floats * 4 / t / 1e6);
        std::fflush(stdout);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace cavs

int main(int argc, char** argv) {
  absl::Status s = cavs::Main(argc, argv);
  if (!s.ok()) {
    std::fprintf(stderr, "collectives_benchmark: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
