// Communicator: collectives and point-to-point messages over core::Tensors among the ranks of
// one data-parallel job, with backends for a single process, MPI and NCCL.
//
// Every operation comes in a nonblocking form (Start*, returning a Work to poll) and a blocking
// form (the same followed by Work::Wait). Reductions sum, over float32, float16, bfloat16, int32
// and int64; gathers, broadcasts and messages move any dtype. Buffers are host tensors (single,
// MPI; MPI stages device tensors through page-locked host memory) or GPU tensors (NCCL); a
// backend's buffer_device() says which it prefers.
//
// Invariants:
//   - Every rank starts the same collectives in the same order on one communicator (as in MPI).
//     Duplicate() gives an independent ordering domain over the same ranks, e.g. one per
//     multi-stage pipeline whose stages start at times that differ between ranks.
//   - Tensors handed to a started operation stay untouched until its Work has completed.
//   - Nothing blocks forever. Work::Wait returns DeadlineExceeded naming the operation and this
//     rank when the operation has made no progress for options().timeout; a Work destroyed
//     before completion abandons its operation (its buffers stay allocated until the process
//     exits, since the transport may still write into them). Either way the communicator, its
//     duplicates and their Works are "broken" from then on: every later call fails at once with
//     FailedPrecondition quoting the first error, because the ranks may no longer agree on the
//     order of collectives.
//
// Thread-safety: a communicator, its duplicates and their Works are used from one thread at a
// time (MPI is initialized with MPI_THREAD_SERIALIZED).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/device.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace cavs::distributed {

struct CommOptions {
  // How long an operation may make no progress before it fails with DeadlineExceeded.
  absl::Duration timeout = absl::Seconds(60);
  // Which ranks share a host, for Communicator::DiscoverTopology: 0 finds out (ranks with the
  // same host name and network namespace share a host); k > 0 declares ranks [0, k),
  // [k, 2k), ... one host each, e.g. to exercise hierarchical strategies on one machine.
  int ranks_per_host = 0;
  // A PS shard's reduce and broadcast larger than this go as pieces of at most this many bytes,
  // each its own collective, all started at once (PieceBytes). -1: the backend's own (the MPI
  // communicator: Open MPI's TCP eager limit less 4 KiB, so that every piece goes without the
  // rendezvous handshake, whose acknowledgement can wait behind a stream the other way for the
  // whole of it: docs/distributed.md, "The parameter server's pieces"); 0: whole.
  int64_t piece_bytes = -1;
};

// Which ranks share a host (a node of shared memory: the ranks of one machine, or of one host
// of the emulated cluster, docs/cluster.md). Hosts are numbered in the order of their lowest
// rank.
struct Topology {
  std::vector<int> host_of_rank;  // per rank

  int world_size() const { return static_cast<int>(host_of_rank.size()); }
  int num_hosts() const;
  // The ranks on `host`, ascending.
  std::vector<int> RanksOn(int host) const;
  // `rank`'s place among the ranks of its host (0 for the host's leader, its lowest rank).
  int LocalRank(int rank) const;
  // "2 hosts x 2 ranks" or "3 hosts (ranks per host 2, 1, 1)".
  std::string Describe() const;

  friend bool operator==(const Topology&, const Topology&) = default;
};

// Traffic of a communicator and its duplicates since creation, in bytes this rank sends and
// receives under a flat model of each collective: the payload a direct implementation moves
// (allreduce is counted as reduce-scatter + allgather, 2(W-1)/W of the buffer each way; a
// broadcast root sends the buffer to W-1 peers; a gather root receives every other block).
// Used by benchmarks and the cost model to compare strategies, not as a wire-level count.
struct CommStats {
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t operations = 0;
};

namespace internal {
class CommState;
}  // namespace internal

// One started operation.
class Work {
 public:
  virtual ~Work();
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // Drives progress once and returns whether the operation has completed (its results are then
  // in place). An error from the transport breaks the communicator.
  [[nodiscard]] absl::StatusOr<bool> Test();
  // Polls until completion; DeadlineExceeded after options().timeout without completion.
  [[nodiscard]] absl::Status Wait();

  bool done() const { return done_; }
  // "allreduce #12 float32[1024]"; "send #3 float32[8] to rank 2 (tag 5)".
  const std::string& description() const { return description_; }

 protected:
  Work(std::shared_ptr<internal::CommState> state, std::string description);
  // Backend progress: true once complete. Called until it returns true or an error.
  [[nodiscard]] virtual absl::StatusOr<bool> Poll() = 0;
  // Marks the communicator broken because this Work is abandoned in flight (for destructors).
  void BreakOnAbandon();
  internal::CommState& state() const { return *state_; }

 private:
  std::shared_ptr<internal::CommState> state_;
  std::string description_;
  bool done_ = false;
};

// The rows of every rank, concatenated in rank order (AllGatherV with unknown counts).
struct Gathered {
  core::Tensor data;            // [sum(counts), trailing dims of the sent tensor...]
  std::vector<int64_t> counts;  // first-dimension slices sent by each rank
};

class Communicator {
 public:
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int world_size() const;
  const CommOptions& options() const;
  // "single", "mpi" or "nccl".
  const std::string& backend() const;
  // Where buffers are best placed: the host for single and MPI, the GPU for NCCL.
  core::Device buffer_device() const;
  // The largest piece a PS shard's transfer goes in (options().piece_bytes, or where that is
  // -1 the backend's own choice); 0: whole.
  int64_t PieceBytes() const;
  // Traffic so far, shared with duplicates.
  CommStats stats() const;
  // OK unless the communicator is broken (see the header comment); then the first error.
  absl::Status health() const;
  // Breaks the communicator and its duplicates, quoting `error`: for callers that poll several
  // Works against a deadline of their own and give up (the first error is kept).
  void MarkBroken(const absl::Status& error);

  // ---- Nonblocking operations. "Slices" are first-dimension slices (rows of a matrix, elements
  // of a vector); counts in AllGatherV and GatherV are in slices. ------------------------------
  // buf: any shape; every rank ends with the elementwise sum over ranks.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Work>> StartAllReduce(core::Tensor buf);
  // buf: the sum over ranks lands in root's buf; the other ranks' buf is only read.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Work>> StartReduce(core::Tensor buf, int root);
  // send: [world_size * n] elements; recv: [n] elements, this rank's block of the sum.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Work>> StartReduceScatter(core::Tensor send,
                                                                         core::Tensor recv);
  // send: [n] elements; recv: [world_size * n] elements, rank r's block at r * n.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Work>> StartAllGather(core::Tensor send,
                                                                     core::Tensor recv);
  // send: [counts[rank], d1, ...]; recv: [sum(counts), d1, ...], rank order. Every rank passes
  // the same counts (from an AllGather of the sizes, see AllGatherV below).
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Work>> StartAllGatherV(core::Tensor send,
                                                                      core::Tensor recv,
                                                                      std::vector<int64_t> counts);
  // As StartAllGatherV, but only `root` receives; recv is ignored elsewhere (may be undefined).
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Work>> StartGatherV(core::Tensor send,
                                                                   core::Tensor recv,
                                                                   std::vector<int64_t> counts,
                                                                   int root);
  // buf: root's contents end up in every rank's buf.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Work>> StartBroadcast(core::Tensor buf, int root);
  // Point-to-point; tags in [0, 32767]. A Recv matches the Send with the same peer and tag.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Work>> StartSend(core::Tensor buf, int peer,
                                                                int tag);
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Work>> StartRecv(core::Tensor buf, int peer,
                                                                int tag);
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Work>> StartBarrier();

  // ---- Blocking forms: Start* then Wait. ------------------------------------------------------
  [[nodiscard]] absl::Status AllReduce(core::Tensor buf);
  [[nodiscard]] absl::Status Reduce(core::Tensor buf, int root);
  [[nodiscard]] absl::Status ReduceScatter(core::Tensor send, core::Tensor recv);
  [[nodiscard]] absl::Status AllGather(core::Tensor send, core::Tensor recv);
  [[nodiscard]] absl::Status AllGatherV(core::Tensor send, core::Tensor recv,
                                        std::vector<int64_t> counts);
  // AllGatherV when the counts are not known: gathers every rank's slice count and slice width
  // first (an error names the rank whose trailing dimensions differ), then the data, on
  // buffer_device().
  [[nodiscard]] absl::StatusOr<Gathered> AllGatherV(const core::Tensor& send);
  [[nodiscard]] absl::Status GatherV(core::Tensor send, core::Tensor recv,
                                     std::vector<int64_t> counts, int root);
  [[nodiscard]] absl::Status Broadcast(core::Tensor buf, int root);
  [[nodiscard]] absl::Status Send(core::Tensor buf, int peer, int tag);
  [[nodiscard]] absl::Status Recv(core::Tensor buf, int peer, int tag);
  [[nodiscard]] absl::Status Barrier();

  // A communicator over the same ranks with its own collective order; shares this one's
  // health and traffic counters. Collective: every rank calls it.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Communicator>> Duplicate();

  // A communicator of the ranks that pass the same `color` (>= 0), ranked by `key` (ties by
  // rank); a rank passing a negative color takes part and gets nullptr. `label` names it in
  // errors ("mpi host-local allreduce #3 ... on rank 1 of 2 (rank 3 of 4 in the job)"). It shares
  // this one's health and traffic counters. Collective: every rank calls it; the colors are
  // first exchanged with a nonblocking allgather, so a dead peer is a DeadlineExceeded.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key,
                                                                    absl::string_view label);
  // Which ranks share a host (options().ranks_per_host, else each rank's host name and network
  // namespace, allgathered). Collective; every rank gets the same answer.
  [[nodiscard]] absl::StatusOr<Topology> DiscoverTopology();

 protected:
  explicit Communicator(std::shared_ptr<internal::CommState> state);
  const std::shared_ptr<internal::CommState>& shared_state() const { return state_; }

  // Backends implement these; arguments are already checked (shapes, dtypes, ranks, tags) and
  // `what` is the Work's description. Element counts replace slice counts in the V variants.
  using WorkOr = absl::StatusOr<std::unique_ptr<Work>>;
  virtual WorkOr DoAllReduce(core::Tensor buf, std::string what) = 0;
  virtual WorkOr DoReduce(core::Tensor buf, int root, std::string what) = 0;
  virtual WorkOr DoReduceScatter(core::Tensor send, core::Tensor recv, std::string what) = 0;
  virtual WorkOr DoAllGather(core::Tensor send, core::Tensor recv, std::string what) = 0;
  virtual WorkOr DoAllGatherV(core::Tensor send, core::Tensor recv,
                              std::vector<int64_t> elem_counts, std::string what) = 0;
  virtual WorkOr DoGatherV(core::Tensor send, core::Tensor recv, std::vector<int64_t> elem_counts,
                           int root, std::string what) = 0;
  virtual WorkOr DoBroadcast(core::Tensor buf, int root, std::string what) = 0;
  virtual WorkOr DoSend(core::Tensor buf, int peer, int tag, std::string what) = 0;
  virtual WorkOr DoRecv(core::Tensor buf, int peer, int tag, std::string what) = 0;
  virtual WorkOr DoBarrier(std::string what) = 0;
  virtual absl::StatusOr<std::unique_ptr<Communicator>> DoDuplicate() = 0;
  // Split after the colors were exchanged (every rank is known to be there): `color` < 0 gives
  // nullptr. The new communicator's state is `state` (a sub-state of this one's), its rank and
  // size already set from the exchanged colors.
  virtual absl::StatusOr<std::unique_ptr<Communicator>> DoSplit(
      int color, int key, std::shared_ptr<internal::CommState> state) = 0;
  // An id of this rank's host, the same on every rank of that host and different across
  // hosts (internal::HostKey: the host name and network namespace). Local: no communication.
  virtual absl::StatusOr<int64_t> DoHostKey() = 0;
  // Whether the backend can work on buffers on `device` (checked before Do*, so that a wrong
  // device is an argument error, not a broken communicator). Default: any device.
  virtual bool AcceptsDevice(core::Device device) const {
    (void)device;
    return true;
  }
  // PieceBytes where the options leave it to the backend. Default: 0 (whole).
  virtual int64_t DefaultPieceBytes() const { return 0; }

 private:
  // Health check, operation numbering and traffic accounting shared by every Start*.
  absl::StatusOr<std::string> Begin(absl::string_view op, const core::Tensor* t, int64_t bytes_sent,
                                    int64_t bytes_received);
  // An argument error unless `t` is defined and on a device the backend accepts.
  absl::Status CheckBuffer(const core::Tensor& t, absl::string_view op,
                           absl::string_view role) const;
  // Breaks the communicator if the backend failed to start an operation.
  absl::StatusOr<std::unique_ptr<Work>> Checked(absl::StatusOr<std::unique_ptr<Work>> work);

  std::shared_ptr<internal::CommState> state_;
};

// Builds a communicator. `kind`: "single" (world size 1), "mpi", "nccl" (GPU buffers, bootstrap
// over MPI), or "auto": MPI when the process was started by an MPI launcher (LaunchedByMpi),
// else single; or a kind registered with RegisterCommunicatorBackend. MPI is initialized on
// first use and finalized at process exit. Errors: an unknown kind; a backend this build lacks;
// a failure to set up the backend (within options.timeout).
[[nodiscard]] absl::StatusOr<std::unique_ptr<Communicator>> MakeCommunicator(
    absl::string_view kind, const CommOptions& options = {});

// A backend's constructor: this process's communicator of that backend.
using CommunicatorFactory =
    std::function<absl::StatusOr<std::unique_ptr<Communicator>>(const CommOptions&)>;

// Makes `kind` a name MakeCommunicator accepts; registering a kind again replaces its factory.
// The backends of cavs register themselves (each backend's Register*Communicator, called from
// distributed/communicator_backends.cc) when MakeCommunicator first looks one up, keeping any
// kind a program registered before (its "mpi", say); a backend
// the build lacks is registered as a factory that says how to build it. "auto" is resolved
// before the lookup and cannot be registered. Thread-safe.
void RegisterCommunicatorBackend(std::string kind, CommunicatorFactory factory);

// True if an MPI launcher started this process (the test "auto" uses): it set a world size
// (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK).
bool LaunchedByMpi();
// The rank an MPI launcher gave this process (OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK), or -1
// when there is none: for messages printed before a communicator exists.
int LauncherRank();

// First-dimension slices of a tensor of `shape` (1 for a scalar) and elements per slice.
int64_t NumSlices(const core::Shape& shape);
int64_t SliceElements(const core::Shape& shape);

}  // namespace cavs::distributed
