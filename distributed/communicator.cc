#include "distributed/communicator.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "distributed/comm_state.h"
#include "distributed/communicator_backends.h"

namespace cavs::distributed {

using core::Tensor;

// ---- CommState and helpers ----------------------------------------------------------------------

namespace internal {

std::string CommState::Who() const {
  std::string who = absl::StrCat("rank ", rank_, " of ", world_size_);
  if (root_ != nullptr)
    absl::StrAppend(&who, " (rank ", root_->rank_, " of ", root_->world_size_, " in the job)");
  return who;
}

absl::Status CommState::health() const {
  if (root_ != nullptr) return root_->health();
  if (first_error_.ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(backend_, " communicator on rank ", rank_,
                                                    " is unusable after an earlier ",
                                                    "failure: ", first_error_.message()));
}

void CommState::Break(const absl::Status& error) {
  if (root_ != nullptr) return root_->Break(error);
  if (first_error_.ok() && !error.ok()) first_error_ = error;
}

absl::StatusOr<int64_t> HostKey() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) {
    return absl::InternalError(absl::StrCat("gethostname failed: ", std::strerror(errno)));
  }
  struct stat ns {};
  std::string id = name;
  if (stat("/proc/self/ns/net", &ns) == 0) absl::StrAppend(&id, "/netns:", ns.st_ino);
  return static_cast<int64_t>(std::hash<std::string>()(id) & INT64_MAX);
}

void PollPause(int iteration) {
  if (iteration < 8) {
    std::this_thread::yield();
    return;
  }
  const int micros = std::min(500, 25 * (iteration - 7));
  std::this_thread::sleep_for(std::chrono::microseconds(micros));
}

namespace {
class DoneWork final : public Work {
 public:
  DoneWork(std::shared_ptr<CommState> state, std::string what)
      : Work(std::move(state), std::move(what)) {}

 protected:
  absl::StatusOr<bool> Poll() override { return true; }
};
}  // namespace

std::unique_ptr<Work> MakeDoneWork(std::shared_ptr<CommState> state, std::string what) {
  return std::make_unique<DoneWork>(std::move(state), std::move(what));
}

}  // namespace internal

int64_t NumSlices(const core::Shape& shape) { return shape.rank() == 0 ? 1 : shape.dim(0); }

int64_t SliceElements(const core::Shape& shape) {
  int64_t n = 1;
  for (int i = 1; i < shape.rank(); ++i) n *= shape.dim(i);
  return n;
}

namespace {

// What each MPI launcher sets in the processes it starts (Open MPI's mpirun, MPICH's Hydra,
// PMIx): the variable of the rank and the one of the world size.
struct LauncherVariables {
  const char* rank;
  const char* size;
};
constexpr LauncherVariables kLaunchers[] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                            {"PMI_RANK", "PMI_SIZE"},
                                            {"PMIX_RANK", "PMIX_RANK"}};

}  // namespace

bool LaunchedByMpi() {
  for (const LauncherVariables& v : kLaunchers) {
    if (std::getenv(v.size) != nullptr) return true;
  }
  return false;
}

int LauncherRank() {
  for (const LauncherVariables& v : kLaunchers) {
    if (const char* r = std::getenv(v.rank); r != nullptr) return std::atoi(r);
  }
  return -1;
}

// ---- Work ---------------------------------------------------------------------------------------

Work::Work(std::shared_ptr<internal::CommState> state, std::string description)
    : state_(std::move(state)), description_(std::move(description)) {}

Work::~Work() = default;

void Work::BreakOnAbandon() {
  if (done_) return;
  state_->Break(absl::AbortedError(
      absl::StrCat(description_, " on ", state_->Who(), " was abandoned before it completed")));
}

absl::StatusOr<bool> Work::Test() {
  if (done_) return true;
  absl::StatusOr<bool> polled = Poll();
  if (!polled.ok()) {
    absl::Status error(polled.status().code(),
                       absl::StrCat(state_->backend(), " ", description_, " on ", state_->Who(),
                                    ": ", polled.status().message()));
    state_->Break(error);
    return error;
  }
  done_ = *polled;
  return done_;
}

absl::Status Work::Wait() {
  const absl::Duration timeout = state_->options().timeout;
  const absl::Time start = absl::Now();
  for (int iteration = 0;; ++iteration) {
    CAVS_ASSIGN_OR_RETURN(bool done, Test());
    if (done) return absl::OkStatus();
    // Another operation already failed: the peers may never arrive, so do not wait again.
    if (state_->broken()) return state_->health();
    if (absl::Now() - start > timeout) {
      absl::Status error = absl::DeadlineExceededError(
          absl::StrCat(state_->backend(), " ", description_, " on ", state_->Who(),
                       " made no progress for ", absl::FormatDuration(timeout),
                       ": a peer is dead, stuck, or did not start the same operation"));
      state_->Break(error);
      return error;
    }
    internal::PollPause(iteration);
  }
}

// ---- Communicator: argument checks and accounting
// ------------------------------------------------

namespace {

absl::Status CheckDefined(const Tensor& t, absl::string_view op, absl::string_view role) {
  if (t.defined()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": the ", role, " tensor is undefined"));
}

absl::Status CheckRank(int r, int world_size, absl::string_view op, absl::string_view role) {
  if (r >= 0 && r < world_size) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": ", role, " ", r, " is out of range for world size ", world_size));
}

absl::Status CheckSameDType(const Tensor& a, const Tensor& b, absl::string_view op) {
  if (a.dtype() == b.dtype()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": send is ", core::DTypeName(a.dtype()),
                                                 " but recv is ", core::DTypeName(b.dtype())));
}

// Checks the counts of a V collective and converts them to element counts.
absl::StatusOr<std::vector<int64_t>> ElementCounts(const Tensor& send, const Tensor* recv,
                                                   const std::vector<int64_t>& counts, int rank,
                                                   int world_size, absl::string_view op) {
  if (static_cast<int>(counts.size()) != world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", counts.size(), " counts for world size ", world_size));
  }
  for (int r = 0; r < world_size; ++r) {
    if (counts[r] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": negative count for rank ", r));
    }
  }
  if (counts[rank] != NumSlices(send.shape())) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": counts[", rank, "] is ", counts[rank],
                                                   " but this rank sends ",
                                                   send.shape().DebugString()));
  }
  const int64_t width = SliceElements(send.shape());
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if (recv != nullptr && recv->numel() != total * width) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": recv ", recv->shape().DebugString(),
                                                   " does not hold ", total, " slices of ", width,
                                                   " elements"));
  }
  std::vector<int64_t> elements(counts.size());
  for (size_t r = 0; r < counts.size(); ++r) elements[r] = counts[r] * width;
  return elements;
}

}  // namespace

Communicator::Communicator(std::shared_ptr<internal::CommState> state) : state_(std::move(state)) {}
Communicator::~Communicator() = default;

int Communicator::rank() const { return state_->rank(); }
int Communicator::world_size() const { return state_->world_size(); }
const CommOptions& Communicator::options() const { return state_->options(); }
const std::string& Communicator::backend() const { return state_->backend(); }

int64_t Communicator::PieceBytes() const {
  const int64_t set = options().piece_bytes;
  return set >= 0 ? set : std::max<int64_t>(0, DefaultPieceBytes());
}
core::Device Communicator::buffer_device() const { return state_->buffer_device(); }
CommStats Communicator::stats() const { return state_->stats(); }
absl::Status Communicator::health() const { return state_->health(); }
void Communicator::MarkBroken(const absl::Status& error) { state_->Break(error); }

absl::StatusOr<std::string> Communicator::Begin(absl::string_view op, const Tensor* t,
                                                int64_t bytes_sent, int64_t bytes_received) {
  CAVS_RETURN_IF_ERROR(state_->health());
  CommStats& stats = state_->stats();
  stats.bytes_sent += bytes_sent;
  stats.bytes_received += bytes_received;
  ++stats.operations;
  std::string what = absl::StrCat(op, " #", state_->NextSequence());
  if (t != nullptr) {
    absl::StrAppend(&what, " ", core::DTypeName(t->dtype()), t->shape().DebugString());
  }
  return what;
}

absl::Status Communicator::CheckBuffer(const Tensor& t, absl::string_view op,
                                       absl::string_view role) const {
  CAVS_RETURN_IF_ERROR(CheckDefined(t, op, role));
  if (AcceptsDevice(t.device())) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": the ", backend(), " communicator needs ", buffer_device().DebugString(),
                   " buffers, but the ", role, " is ", t.DebugString()));
}

absl::StatusOr<std::unique_ptr<Work>> Communicator::Checked(
    absl::StatusOr<std::unique_ptr<Work>> work) {
  // A transport that fails to start an operation leaves the ranks out of step.
  if (!work.ok()) state_->Break(work.status());
  return work;
}

absl::StatusOr<std::unique_ptr<Work>> Communicator::StartAllReduce(Tensor buf) {
  CAVS_RETURN_IF_ERROR(CheckBuffer(buf, "allreduce", "buffer"));
  const int64_t w = world_size();
  const int64_t bytes = 2 * (w - 1) * static_cast<int64_t>(buf.nbytes()) / w;
  CAVS_ASSIGN_OR_RETURN(std::string what, Begin("allreduce", &buf, bytes, bytes));
  return Checked(DoAllReduce(std::move(buf), std::move(what)));
}

absl::StatusOr<std::unique_ptr<Work>> Communicator::StartReduce(Tensor buf, int root) {
  CAVS_RETURN_IF_ERROR(CheckBuffer(buf, "reduce", "buffer"));
  CAVS_RETURN_IF_ERROR(CheckRank(root, world_size(), "reduce", "root"));
  const int64_t bytes = static_cast<int64_t>(buf.nbytes());
  const bool is_root = root == rank();
  CAVS_ASSIGN_OR_RETURN(std::string what,
                        Begin(absl::StrCat("reduce to rank ", root), &buf, is_root ? 0 : bytes,
                              is_root ? (world_size() - 1) * bytes : 0));
  return Checked(DoReduce(std::move(buf), root, std::move(what)));
}

absl::StatusOr<std::unique_ptr<Work>> Communicator::StartReduceScatter(Tensor send, Tensor recv) {
  CAVS_RETURN_IF_ERROR(CheckBuffer(send, "reduce_scatter", "send"));
  CAVS_RETURN_IF_ERROR(CheckBuffer(recv, "reduce_scatter", "recv"));
  CAVS_RETURN_IF_ERROR(CheckSameDType(send, recv, "reduce_scatter"));
  if (send.numel() != recv.numel() * world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("reduce_scatter: send ", send.shape().DebugString(), " is not world size ",
                     world_size(), " times recv ", recv.shape().DebugString()));
  }
  const int64_t bytes = (world_size() - 1) * static_cast<int64_t>(recv.nbytes());
  CAVS_ASSIGN_OR_RETURN(std::string what, Begin("reduce_scatter", &send, bytes, bytes));
  return Checked(DoReduceScatter(std::move(send), std::move(recv), std::move(what)));
}

absl::StatusOr<std::unique_ptr<Work>> Communicator::StartAllGather(Tensor send, Tensor recv) {
  CAVS_RETURN_IF_ERROR(CheckBuffer(send, "allgather", "send"));
  CAVS_RETURN_IF_ERROR(CheckBuffer(recv, "allgather", "recv"));
  CAVS_RETURN_IF_ERROR(CheckSameDType(send, recv, "allgather"));
  if (recv.numel() != send.numel() * world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("allgather: recv ", recv.shape().DebugString(),
                                                   " is not world size ", world_size(),
                                                   " times send ", send.shape().DebugString()));
  }
  const int64_t bytes = (world_size() - 1) * static_cast<int64_t>(send.nbytes());
  CAVS_ASSIGN_OR_RETURN(std::string what, Begin("allgather", &send, bytes, bytes));
  return Checked(DoAllGather(std::move(send), std::move(recv), std::move(what)));
}

absl::StatusOr<std::unique_ptr<Work>> Communicator::StartAllGatherV(Tensor send, Tensor recv,
                                                                    std::vector<int64_t> counts) {
  CAVS_RETURN_IF_ERROR(CheckBuffer(send, "allgatherv", "send"));
  CAVS_RETURN_IF_ERROR(CheckBuffer(recv, "allgatherv", "recv"));
  CAVS_RETURN_IF_ERROR(CheckSameDType(send, recv, "allgatherv"));
  CAVS_ASSIGN_OR_RETURN(std::vector<int64_t> elements,
                        ElementCounts(send, &recv, counts, rank(), world_size(), "allgatherv"));
  const int64_t own = static_cast<int64_t>(send.nbytes());
  CAVS_ASSIGN_OR_RETURN(std::string what, Begin("allgatherv", &send, (world_size() - 1) * own,
                                                static_cast<int64_t>(recv.nbytes()) - own));
  return Checked(
      DoAllGatherV(std::move(send), std::move(recv), std::move(elements), std::move(what)));
}

absl::StatusOr<std::unique_ptr<Work>> Communicator::StartGatherV(Tensor send, Tensor recv,
                                                                 std::vector<int64_t> counts,
                                                                 int root) {
  CAVS_RETURN_IF_ERROR(CheckBuffer(send, "gatherv", "send"));
  CAVS_RETURN_IF_ERROR(CheckRank(root, world_size(), "gatherv", "root"));
  const bool is_root = root == rank();
  if (is_root) {
    CAVS_RETURN_IF_ERROR(CheckBuffer(recv, "gatherv", "recv"));
    CAVS_RETURN_IF_ERROR(CheckSameDType(send, recv, "gatherv"));
  }
  CAVS_ASSIGN_OR_RETURN(
      std::vector<int64_t> elements,
      ElementCounts(send, is_root ? &recv : nullptr, counts, rank(), world_size(), "gatherv"));
  const int64_t own = static_cast<int64_t>(send.nbytes());
  CAVS_ASSIGN_OR_RETURN(std::string what,
                        Begin(absl::StrCat("gatherv to rank ", root), &send, is_root ? 0 : own,
                              is_root ? static_cast<int64_t>(recv.nbytes()) - own : 0));
  return Checked(
      DoGatherV(std::move(send), std::move(recv), std::move(elements), root, std::move(what)));
}

absl::StatusOr<std::unique_ptr<Work>> Communicator::StartBroadcast(Tensor buf, int root) {
  CAVS_RETURN_IF_ERROR(CheckBuffer(buf, "broadcast", "buffer"));
  CAVS_RETURN_IF_ERROR(CheckRank(root, world_size(), "broadcast", "root"));
  const int64_t bytes = static_cast<int64_t>(buf.nbytes());
  const bool is_root = root == rank();
  CAVS_ASSIGN_OR_RETURN(std::string what,
                        Begin(absl::StrCat("broadcast from rank ", root), &buf,
                              is_root ? (world_size() - 1) * bytes : 0, is_root ? 0 : bytes));
  return Checked(DoBroadcast(std::move(buf), root, std::move(what)));
}

absl::StatusOr<std::unique_ptr<Work>> Communicator::StartSend(Tensor buf, int peer, int tag) {
  CAVS_RETURN_IF_ERROR(CheckBuffer(buf, "send", "buffer"));
  CAVS_RETURN_IF_ERROR(CheckRank(peer, world_size(), "send", "peer"));
  if (tag < 0 || tag > 32767) {
    return absl::InvalidArgumentError(absl::StrCat("send: tag ", tag, " not in [0, 32767]"));
  }
  CAVS_ASSIGN_OR_RETURN(std::string what, Begin("send", &buf, buf.nbytes(), 0));
  absl::StrAppend(&what, " to rank ", peer, " (tag ", tag, ")");
  return Checked(DoSend(std::move(buf), peer, tag, std::move(what)));
}

absl::StatusOr<std::unique_ptr<Work>> Communicator::StartRecv(Tensor buf, int peer, int tag) {
  CAVS_RETURN_IF_ERROR(CheckBuffer(buf, "recv", "buffer"));
  CAVS_RETURN_IF_ERROR(CheckRank(peer, world_size(), "recv", "peer"));
  if (tag < 0 || tag > 32767) {
    return absl::InvalidArgumentError(absl::StrCat("recv: tag ", tag, " not in [0, 32767]"));
  }
  CAVS_ASSIGN_OR_RETURN(std::string what, Begin("recv", &buf, 0, buf.nbytes()));
  absl::StrAppend(&what, " from rank ", peer, " (tag ", tag, ")");
  return Checked(DoRecv(std::move(buf), peer, tag, std::move(what)));
}

absl::StatusOr<std::unique_ptr<Work>> Communicator::StartBarrier() {
  CAVS_ASSIGN_OR_RETURN(std::string what, Begin("barrier", nullptr, 0, 0));
  return Checked(DoBarrier(std::move(what)));
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Duplicate() {
  CAVS_RETURN_IF_ERROR(state_->health());
  return DoDuplicate();
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Split(int color, int key,
                                                                  absl::string_view label) {
  CAVS_RETURN_IF_ERROR(state_->health());
  // Every rank's (color, key), so that each knows its rank and size in the new communicator,
  // and a dead peer fails here, with a deadline, before the backend's blocking split.
  Tensor mine = Tensor::Host({2}, core::DType::kInt64);
  mine.data<int64_t>()[0] = color;
  mine.data<int64_t>()[1] = key;
  Tensor all = Tensor::Host({2 * world_size()}, core::DType::kInt64);
  CAVS_RETURN_IF_ERROR(AllGather(mine, all));
  const int64_t* v = all.data<int64_t>();
  std::vector<int> members;
  for (int r = 0; r < world_size(); ++r) {
    if (color >= 0 && v[2 * r] == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return v[2 * a + 1] < v[2 * b + 1]; });
  std::shared_ptr<internal::CommState> sub;
  if (color >= 0) {
    const int new_rank =
        static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
    sub = std::make_shared<internal::CommState>(state_, std::string(label), new_rank,
                                                static_cast<int>(members.size()));
  }
  absl::StatusOr<std::unique_ptr<Communicator>> split = DoSplit(color, key, std::move(sub));
  if (!split.ok()) state_->Break(split.status());
  return split;
}

absl::StatusOr<Topology> Communicator::DiscoverTopology() {
  CAVS_RETURN_IF_ERROR(state_->health());
  Topology t;
  const int per_host = options().ranks_per_host;
  if (per_host < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ranks_per_host ", per_host, " is negative (0 asks the backend)"));
  }
  if (per_host > 0) {
    for (int r = 0; r < world_size(); ++r) t.host_of_rank.push_back(r / per_host);
    return t;
  }
  absl::StatusOr<int64_t> key = DoHostKey();
  if (!key.ok()) {
    state_->Break(key.status());
    return key.status();
  }
  Tensor mine = Tensor::Host({1}, core::DType::kInt64);
  mine.data<int64_t>()[0] = *key;
  Tensor all = Tensor::Host({world_size()}, core::DType::kInt64);
  CAVS_RETURN_IF_ERROR(AllGather(mine, all));
  std::vector<int64_t> keys;  // hosts in the order of their lowest rank
  for (int r = 0; r < world_size(); ++r) {
    const int64_t k = all.data<int64_t>()[r];
    auto it = std::find(keys.begin(), keys.end(), k);
    if (it == keys.end()) {
      keys.push_back(k);
      it = keys.end() - 1;
    }
    t.host_of_rank.push_back(static_cast<int>(it - keys.begin()));
  }
  return t;
}

int Topology::num_hosts() const {
  int n = 0;
  for (int h : host_of_rank) n = std::max(n, h + 1);
  return n;
}

std::vector<int> Topology::RanksOn(int host) const {
  std::vector<int> ranks;
  for (int r = 0; r < world_size(); ++r) {
    if (host_of_rank[r] == host) ranks.push_back(r);
  }
  return ranks;
}

int Topology::LocalRank(int rank) const {
  int local = 0;
  for (int r = 0; r < rank; ++r) local += host_of_rank[r] == host_of_rank[rank] ? 1 : 0;
  return local;
}

std::string Topology::Describe() const {
  const int hosts = num_hosts();
  std::vector<int> sizes;
  for (int h = 0; h < hosts; ++h) sizes.push_back(static_cast<int>(RanksOn(h).size()));
  if (std::all_of(sizes.begin(), sizes.end(), [&](int n) { return n == sizes[0]; })) {
    return absl::StrCat(hosts, hosts == 1 ? " host" : " hosts", " x ", sizes.empty() ? 0 : sizes[0],
                        sizes.empty() || sizes[0] == 1 ? " rank" : " ranks");
  }
  return absl::StrCat(hosts, " hosts (ranks per host ", absl::StrJoin(sizes, ", "), ")");
}

// ---- Blocking forms ----------------------------------------------------------------------------

namespace {
absl::Status WaitFor(absl::StatusOr<std::unique_ptr<Work>> work) {
  CAVS_RETURN_IF_ERROR(work.status());
  return (*work)->Wait();
}
}  // namespace

absl::Status Communicator::AllReduce(Tensor buf) { return WaitFor(StartAllReduce(buf)); }
absl::Status Communicator::Reduce(Tensor buf, int root) { return WaitFor(StartReduce(buf, root)); }
absl::Status Communicator::ReduceScatter(Tensor send, Tensor recv) {
  return WaitFor(StartReduceScatter(send, recv));
}
absl::Status Communicator::AllGather(Tensor send, Tensor recv) {
  return WaitFor(StartAllGather(send, recv));
}
absl::Status Communicator::AllGatherV(Tensor send, Tensor recv, std::vector<int64_t> counts) {
  return WaitFor(StartAllGatherV(send, recv, std::move(counts)));
}
absl::Status Communicator::GatherV(Tensor send, Tensor recv, std::vector<int64_t> counts,
                                   int root) {
  return WaitFor(StartGatherV(send, recv, std::move(counts), root));
}
absl::Status Communicator::Broadcast(Tensor buf, int root) {
  return WaitFor(StartBroadcast(buf, root));
}
absl::Status Communicator::Send(Tensor buf, int peer, int tag) {
  return WaitFor(StartSend(buf, peer, tag));
}
absl::Status Communicator::Recv(Tensor buf, int peer, int tag) {
  return WaitFor(StartRecv(buf, peer, tag));
}
absl::Status Communicator::Barrier() { return WaitFor(StartBarrier()); }

absl::StatusOr<Gathered> Communicator::AllGatherV(const Tensor& send) {
  CAVS_RETURN_IF_ERROR(CheckBuffer(send, "allgatherv", "send"));
  const int w = world_size();
  Tensor mine = Tensor::Host({2}, core::DType::kInt64);
  mine.data<int64_t>()[0] = NumSlices(send.shape());
  mine.data<int64_t>()[1] = SliceElements(send.shape());
  CAVS_ASSIGN_OR_RETURN(Tensor mine_dev, mine.CopyTo(buffer_device()));
  CAVS_ASSIGN_OR_RETURN(Tensor all_dev, Tensor::Empty({2 * static_cast<int64_t>(w)},
                                                      core::DType::kInt64, buffer_device()));
  CAVS_RETURN_IF_ERROR(AllGather(mine_dev, all_dev));
  CAVS_ASSIGN_OR_RETURN(Tensor all, all_dev.CopyTo(core::Device::Cpu()));
  const int64_t* sizes = all.data<int64_t>();
  // Ranks that send nothing may have any trailing shape; the others must agree.
  int reference = -1;
  Gathered out;
  int64_t total = 0;
  for (int r = 0; r < w; ++r) {
    out.counts.push_back(sizes[2 * r]);
    total += sizes[2 * r];
    if (sizes[2 * r] == 0) continue;
    if (reference < 0) reference = r;
    if (sizes[2 * r + 1] != sizes[2 * reference + 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "allgatherv: rank ", r, " sends slices of ", sizes[2 * r + 1], " elements but rank ",
          reference, " sends slices of ", sizes[2 * reference + 1]));
    }
  }
  std::vector<int64_t> dims = send.shape().dims();
  if (dims.empty()) dims.push_back(1);
  Tensor local = send;
  if (reference >= 0 && SliceElements(send.shape()) != sizes[2 * reference + 1]) {
    dims = {0, sizes[2 * reference + 1]};  // this rank sends nothing: take the senders' width
    local = send.View(core::Shape(dims));
  }
  dims[0] = total;
  CAVS_ASSIGN_OR_RETURN(out.data, Tensor::Empty(core::Shape(dims), send.dtype(), buffer_device()));
  CAVS_RETURN_IF_ERROR(AllGatherV(local, out.data, out.counts));
  return out;
}

// ---- Factory -----------------------------------------------------------------------------------

namespace {

// The registered backends, in registration order (the order an unknown kind's error lists them).
struct BackendRegistry {
  std::mutex mu;
  std::vector<std::pair<std::string, CommunicatorFactory>> backends;
};

BackendRegistry& Backends() {
  static BackendRegistry* registry = new BackendRegistry();
  return *registry;
}

// Set on the thread registering the built-in backends (lazily, at the first MakeCommunicator):
// a kind a program registered before that keeps its factory.
thread_local bool registering_builtins = false;

}  // namespace

void RegisterCommunicatorBackend(std::string kind, CommunicatorFactory factory) {
  BackendRegistry& r = Backends();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& [name, f] : r.backends) {
    if (name == kind) {
      if (!registering_builtins) f = std::move(factory);
      return;
    }
  }
  r.backends.emplace_back(std::move(kind), std::move(factory));
}

absl::StatusOr<std::unique_ptr<Communicator>> MakeCommunicator(absl::string_view kind,
                                                               const CommOptions& options) {
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("communicator timeout must be positive, got ",
                                                   absl::FormatDuration(options.timeout)));
  }
  static std::once_flag builtin;
  std::call_once(builtin, [] {
    registering_builtins = true;
    internal::RegisterBuiltinCommunicators();
    registering_builtins = false;
  });
  if (kind == "auto") kind = LaunchedByMpi() ? "mpi" : "single";
  CommunicatorFactory factory;
  std::vector<std::string> known = {"auto"};
  {
    BackendRegistry& r = Backends();
    std::lock_guard<std::mutex> lock(r.mu);
    for (const auto& [name, f] : r.backends) {
      if (name == kind) factory = f;
      known.push_back(name);
    }
  }
  if (factory == nullptr) {
    const std::string last = known.back();
    known.pop_back();
    return absl::InvalidArgumentError(absl::StrCat("unknown communicator kind '", kind,
                                                   "': expected ", absl::StrJoin(known, ", "),
                                                   " or ", last));
  }
  return factory(options);
}

}  // namespace cavs::distributed
