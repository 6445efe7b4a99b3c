#include "distributed/mpi_communicator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "distributed/comm_state.h"
#include "distributed/communicator.h"
#include "distributed/half.h"
#include "distributed/host_staging.h"
#include "distributed/mpi_status.h"

namespace cavs::distributed {

namespace {

using core::DType;
using core::Tensor;

// ---- MPI environment ---------------------------------------------------------------------------

void HalfSum(void* in, void* inout, int* len, MPI_Datatype*) {
  AddHalves(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(inout), *len);
}

void BFloat16Sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    b[i] = FloatToBFloat16(BFloat16ToFloat(a[i]) + BFloat16ToFloat(b[i]));
  }
}

struct MpiGlobals {
  MPI_Op half_sum = MPI_OP_NULL;
  MPI_Op bfloat16_sum = MPI_OP_NULL;
};

// Set when an operation is given up on (its Work destroyed unfinished), with the longest timeout
// of the communicators that gave up: a peer may be dead.
std::atomic<bool> g_abandoned{false};
std::atomic<int64_t> g_abandon_timeout_ms{0};
// Set when MPI_Finalize has returned at exit: the rest of the exit (static destructors, a leak
// checker's scan) is not MPI's to time out.
std::atomic<bool> g_finalize_returned{false};

void FinalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (g_abandoned.load()) {
    // MPI_Finalize synchronizes with every process of the job, so after a peer died it can
    // wait forever (seen with Open MPI 4.1: survivors of a killed rank spun in
    // ompi_mpi_finalize). Give it the communicator's timeout, then leave without it, failing.
    const int64_t ms = std::max<int64_t>(g_abandon_timeout_ms.load(), 1000);
    std::thread([ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      if (!g_finalize_returned.load()) std::_Exit(EXIT_FAILURE);
    }).detach();
  }
  MPI_Finalize();
  g_finalize_returned.store(true);
}

// Open MPI advances a nonblocking collective only inside MPI calls, and the synchronizer polls
// with short sleeps between them; libnbc's default algorithms for large buffers are segmented
// (a chain reduce and broadcast, many rounds), each round waiting for a poll. Unless the user
// set them, use binomial reduce and broadcast and Rabenseifner's allreduce (bench/RESULTS.md,
// "Emulated cluster": a 16 MiB reduce + broadcast between 2 ranks 1.3-2.1 s with the chain or
// Rabenseifner reduce, 32-35 ms binomial; a 16 MiB allreduce across 2 hosts x 2 ranks at
// 100 Mbit/s 1.13x its bound with Rabenseifner, 2.2x recursive doubling, 3.2x binomial). Read by
// Open MPI at MPI_Init (these are its own MCA variables: the user's values win); every rank
// sets the same, so the ranks agree on the algorithms. Other MPIs ignore them.
void PreferPolledProgressCollectives() {
  setenv("OMPI_MCA_coll_libnbc_ireduce_algorithm", "2", /*overwrite=*/0);     // binomial
  setenv("OMPI_MCA_coll_libnbc_ibcast_algorithm", "2", /*overwrite=*/0);      // binomial
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", /*overwrite=*/0);  // Rabenseifner
}

// Open MPI's TCP transport's eager limit (its MCA variable btl_tcp_eager_limit, as the job set
// it), read once through the MPI tool interface after MPI_Init; 0 where there is none (another
// MPI, or a job without the TCP transport).
int64_t TcpEagerLimit() {
  static const int64_t limit = [] {
    int provided = 0, index = -1;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return int64_t{0};
    int64_t value = 0;
    char name[256], desc[256];
    int name_len = sizeof(name), desc_len = sizeof(desc), verbosity = 0, bind = 0, scope = 0;
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_T_enum enumtype;
    MPI_T_cvar_handle handle;
    int count = 0;
    if (MPI_T_cvar_get_index("btl_tcp_eager_limit", &index) == MPI_SUCCESS &&
        MPI_T_cvar_get_info(index, name, &name_len, &verbosity, &type, &enumtype, desc, &desc_len,
                            &bind, &scope) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
      if (count == 1) {
        unsigned long long wide = 0;  // NOLINT(runtime/int): MPI's own types
        unsigned narrow = 0;
        if ((type == MPI_UNSIGNED_LONG || type == MPI_UNSIGNED_LONG_LONG) &&
            sizeof(unsigned long) == sizeof(wide) &&  // NOLINT(runtime/int)
            MPI_T_cvar_read(handle, &wide) == MPI_SUCCESS) {
          value = static_cast<int64_t>(wide);
        } else if ((type == MPI_UNSIGNED || type == MPI_INT) &&
                   MPI_T_cvar_read(handle, &narrow) == MPI_SUCCESS) {
          value = narrow;
        }
      }
      MPI_T_cvar_handle_free(&handle);
    }
    MPI_T_finalize();
    return value;
  }();
  return limit;
}

// Initializes MPI once (unless the program did) and defines the half-precision sums.
absl::StatusOr<const MpiGlobals*> EnsureMpi() {
  static std::mutex mu;
  static MpiGlobals* globals = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (globals != nullptr) return globals;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) return absl::FailedPreconditionError("MPI has already been finalized");
  if (!initialized) {
    PreferPolledProgressCollectives();
    int provided = 0;
    CAVS_MPI_RETURN_IF_ERROR(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided));
    std::atexit(FinalizeAtExit);
  }
  auto* g = new MpiGlobals();  // lives until exit, like MPI itself
  CAVS_MPI_RETURN_IF_ERROR(MPI_Op_create(&HalfSum, /*commute=*/1, &g->half_sum));
  CAVS_MPI_RETURN_IF_ERROR(MPI_Op_create(&BFloat16Sum, /*commute=*/1, &g->bfloat16_sum));
  globals = g;
  return globals;
}

bool MpiFinalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

MPI_Datatype MpiType(DType t) {
  switch (t) {
    case DType::kFloat32:
      return MPI_FLOAT;
    case DType::kFloat16:
    case DType::kBFloat16:
      return MPI_UINT16_T;
    case DType::kInt32:
      return MPI_INT32_T;
    case DType::kInt64:
      return MPI_INT64_T;
  }
  return MPI_BYTE;
}

absl::StatusOr<int> MpiCount(int64_t n, const std::string& what) {
  if (n <= INT_MAX) return static_cast<int>(n);
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": ", n, " elements exceed MPI's count limit of ", INT_MAX));
}

// ---- Work
// ----------------------------------------------------------------------------------------

// One posted MPI request and everything it reads or writes until it completes.
struct InFlight {
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<HostStaging> staging;  // copied back to devices on completion
  std::vector<Tensor> tensors;       // keeps the buffers alive
  std::vector<int> counts, displs;   // the V collectives' arrays
};

class MpiWork final : public Work {
 public:
  MpiWork(std::shared_ptr<internal::CommState> state, std::string what)
      : Work(std::move(state), std::move(what)) {}

  ~MpiWork() override {
    if (done() || parts_.request == MPI_REQUEST_NULL || MpiFinalized()) return;
    BreakOnAbandon();
    const int64_t ms = absl::ToInt64Milliseconds(state().options().timeout);
    int64_t seen = g_abandon_timeout_ms.load();
    while (ms > seen && !g_abandon_timeout_ms.compare_exchange_weak(seen, ms)) {
    }
    g_abandoned.store(true);
    // MPI cannot cancel a collective, so the transport may still write into these buffers:
    // they stay allocated until the process exits.
    static auto* abandoned = new std::vector<InFlight>();
    abandoned->push_back(std::move(parts_));
  }

  InFlight& parts() { return parts_; }

 protected:
  absl::StatusOr<bool> Poll() override {
    int flag = 0;
    CAVS_MPI_RETURN_IF_ERROR(MPI_Test(&parts_.request, &flag, MPI_STATUS_IGNORE));
    if (!flag) return false;
    for (HostStaging& s : parts_.staging) CAVS_RETURN_IF_ERROR(s.Finish());
    return true;
  }

 private:
  InFlight parts_;
};

// ---- Communicator
// --------------------------------------------------------------------------------

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(std::shared_ptr<internal::CommState> state, const MpiGlobals* globals,
                  MPI_Comm comm)
      : Communicator(std::move(state)), globals_(globals), comm_(comm) {}

  ~MpiCommunicator() override {
    if (comm_ != MPI_COMM_NULL && !MpiFinalized()) MPI_Comm_free(&comm_);
  }

  // A PS shard in pieces under the TCP eager limit (less 4 KiB for the transport's headers),
  // where that leaves pieces of 4 KiB or more.
  int64_t DefaultPieceBytes() const override {
    const int64_t piece = TcpEagerLimit() - 4096;
    return piece >= 4096 ? piece : 0;
  }

  // Duplicates `parent` (MPI_Comm_idup, polled against the timeout) under `state`.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(
      std::shared_ptr<internal::CommState> state, const MpiGlobals* globals, MPI_Comm parent);

 protected:
  WorkOr DoAllReduce(Tensor buf, std::string what) override {
    auto work = std::make_unique<MpiWork>(shared_state(), what);
    CAVS_ASSIGN_OR_RETURN(int n, MpiCount(buf.numel(), what));
    CAVS_ASSIGN_OR_RETURN(void* p, Stage(*work, buf, true, true));
    CAVS_MPI_RETURN_IF_ERROR(MPI_Iallreduce(MPI_IN_PLACE, p, n, MpiType(buf.dtype()),
                                            SumOp(buf.dtype()), comm_, &work->parts().request));
    return WorkOr(std::move(work));
  }

  WorkOr DoReduce(Tensor buf, int root, std::string what) override {
    auto work = std::make_unique<MpiWork>(shared_state(), what);
    CAVS_ASSIGN_OR_RETURN(int n, MpiCount(buf.numel(), what));
    const bool is_root = root == rank();
    CAVS_ASSIGN_OR_RETURN(void* p, Stage(*work, buf, true, is_root));
    CAVS_MPI_RETURN_IF_ERROR(MPI_Ireduce(is_root ? MPI_IN_PLACE : p, is_root ? p : nullptr, n,
                                         MpiType(buf.dtype()), SumOp(buf.dtype()), root, comm_,
                                         &work->parts().request));
    return WorkOr(std::move(work));
  }

  WorkOr DoReduceScatter(Tensor send, Tensor recv, std::string what) override {
    auto work = std::make_unique<MpiWork>(shared_state(), what);
    CAVS_ASSIGN_OR_RETURN(int n, MpiCount(recv.numel(), what));
    CAVS_ASSIGN_OR_RETURN(void* s, Stage(*work, send, true, false));
    CAVS_ASSIGN_OR_RETURN(void* r, Stage(*work, recv, false, true));
    CAVS_MPI_RETURN_IF_ERROR(MPI_Ireduce_scatter_block(
        s, r, n, MpiType(send.dtype()), SumOp(send.dtype()), comm_, &work->parts().request));
    return WorkOr(std::move(work));
  }

  WorkOr DoAllGather(Tensor send, Tensor recv, std::string what) override {
    auto work = std::make_unique<MpiWork>(shared_state(), what);
    CAVS_ASSIGN_OR_RETURN(int n, MpiCount(recv.numel(), what));
    CAVS_ASSIGN_OR_RETURN(void* s, Stage(*work, send, true, false));
    CAVS_ASSIGN_OR_RETURN(void* r, Stage(*work, recv, false, true));
    const MPI_Datatype type = MpiType(send.dtype());
    CAVS_MPI_RETURN_IF_ERROR(MPI_Iallgather(s, n / world_size(), type, r, n / world_size(), type,
                                            comm_, &work->parts().request));
    return WorkOr(std::move(work));
  }

  WorkOr DoAllGatherV(Tensor send, Tensor recv, std::vector<int64_t> elem_counts,
                      std::string what) override {
    auto work = std::make_unique<MpiWork>(shared_state(), what);
    CAVS_RETURN_IF_ERROR(SetCounts(*work, elem_counts, what));
    CAVS_ASSIGN_OR_RETURN(void* s, Stage(*work, send, true, false));
    CAVS_ASSIGN_OR_RETURN(void* r, Stage(*work, recv, false, true));
    const MPI_Datatype type = MpiType(send.dtype());
    InFlight& f = work->parts();
    CAVS_MPI_RETURN_IF_ERROR(MPI_Iallgatherv(s, f.counts[rank()], type, r, f.counts.data(),
                                             f.displs.data(), type, comm_, &f.request));
    return WorkOr(std::move(work));
  }

  WorkOr DoGatherV(Tensor send, Tensor recv, std::vector<int64_t> elem_counts, int root,
                   std::string what) override {
    auto work = std::make_unique<MpiWork>(shared_state(), what);
    CAVS_RETURN_IF_ERROR(SetCounts(*work, elem_counts, what));
    const bool is_root = root == rank();
    CAVS_ASSIGN_OR_RETURN(void* s, Stage(*work, send, true, false));
    void* r = nullptr;
    if (is_root) {
      CAVS_ASSIGN_OR_RETURN(r, Stage(*work, recv, false, true));
    }
    const MPI_Datatype type = MpiType(send.dtype());
    InFlight& f = work->parts();
    CAVS_MPI_RETURN_IF_ERROR(MPI_Igatherv(s, f.counts[rank()], type, r, f.counts.data(),
                                          f.displs.data(), type, root, comm_, &f.request));
    return WorkOr(std::move(work));
  }

  WorkOr DoBroadcast(Tensor buf, int root, std::string what) override {
    auto work = std::make_unique<MpiWork>(shared_state(), what);
    CAVS_ASSIGN_OR_RETURN(int n, MpiCount(buf.numel(), what));
    const bool is_root = root == rank();
    CAVS_ASSIGN_OR_RETURN(void* p, Stage(*work, buf, is_root, !is_root));
    CAVS_MPI_RETURN_IF_ERROR(
        MPI_Ibcast(p, n, MpiType(buf.dtype()), root, comm_, &work->parts().request));
    return WorkOr(std::move(work));
  }

  WorkOr DoSend(Tensor buf, int peer, int tag, std::string what) override {
    auto work = std::make_unique<MpiWork>(shared_state(), what);
    CAVS_ASSIGN_OR_RETURN(int n, MpiCount(buf.numel(), what));
    CAVS_ASSIGN_OR_RETURN(void* p, Stage(*work, buf, true, false));
    CAVS_MPI_RETURN_IF_ERROR(
        MPI_Isend(p, n, MpiType(buf.dtype()), peer, tag, comm_, &work->parts().request));
    return WorkOr(std::move(work));
  }

  WorkOr DoRecv(Tensor buf, int peer, int tag, std::string what) override {
    auto work = std::make_unique<MpiWork>(shared_state(), what);
    CAVS_ASSIGN_OR_RETURN(int n, MpiCount(buf.numel(), what));
    CAVS_ASSIGN_OR_RETURN(void* p, Stage(*work, buf, false, true));
    CAVS_MPI_RETURN_IF_ERROR(
        MPI_Irecv(p, n, MpiType(buf.dtype()), peer, tag, comm_, &work->parts().request));
    return WorkOr(std::move(work));
  }

  WorkOr DoBarrier(std::string what) override {
    auto work = std::make_unique<MpiWork>(shared_state(), std::move(what));
    CAVS_MPI_RETURN_IF_ERROR(MPI_Ibarrier(comm_, &work->parts().request));
    return WorkOr(std::move(work));
  }

  absl::StatusOr<std::unique_ptr<Communicator>> DoDuplicate() override {
    return Create(shared_state(), globals_, comm_);
  }

  absl::StatusOr<std::unique_ptr<Communicator>> DoSplit(
      int color, int key, std::shared_ptr<internal::CommState> state) override {
    // Blocking, but every rank has just passed the colors' allgather.
    MPI_Comm split = MPI_COMM_NULL;
    CAVS_MPI_RETURN_IF_ERROR(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &split));
    if (split == MPI_COMM_NULL) return std::unique_ptr<Communicator>();
    absl::StatusOr<std::unique_ptr<Communicator>> made = Create(std::move(state), globals_, split);
    MPI_Comm_free(&split);
    return made;
  }

  absl::StatusOr<int64_t> DoHostKey() override { return internal::HostKey(); }

 private:
  MPI_Op SumOp(DType t) const {
    if (t == DType::kFloat16) return globals_->half_sum;
    if (t == DType::kBFloat16) return globals_->bfloat16_sum;
    return MPI_SUM;
  }

  // The host address MPI works on for `t` (staged when `t` is on a device).
  static absl::StatusOr<void*> Stage(MpiWork& work, const Tensor& t, bool copy_in, bool copy_out) {
    CAVS_ASSIGN_OR_RETURN(HostStaging staging, HostStaging::Create(t, copy_in, copy_out));
    void* p = staging.data();
    work.parts().staging.push_back(std::move(staging));
    work.parts().tensors.push_back(t);
    return p;
  }

  static absl::Status SetCounts(MpiWork& work, const std::vector<int64_t>& elem_counts,
                                const std::string& what) {
    InFlight& f = work.parts();
    int64_t offset = 0;
    for (int64_t c : elem_counts) {
      CAVS_ASSIGN_OR_RETURN(int count, MpiCount(c, what));
      CAVS_ASSIGN_OR_RETURN(int displ, MpiCount(offset, what));
      f.counts.push_back(count);
      f.displs.push_back(displ);
      offset += c;
    }
    return MpiCount(offset, what).status();
  }

  const MpiGlobals* globals_;
  MPI_Comm comm_;
};

absl::StatusOr<std::unique_ptr<Communicator>> MpiCommunicator::Create(
    std::shared_ptr<internal::CommState> state, const MpiGlobals* globals, MPI_Comm parent) {
  MPI_Comm comm = MPI_COMM_NULL;
  {
    MpiWork dup(state, absl::StrCat("communicator duplicate #", state->NextSequence()));
    CAVS_MPI_RETURN_IF_ERROR(MPI_Comm_idup(parent, &comm, &dup.parts().request));
    CAVS_RETURN_IF_ERROR(dup.Wait());
  }
  CAVS_MPI_RETURN_IF_ERROR(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  return std::unique_ptr<Communicator>(new MpiCommunicator(std::move(state), globals, comm));
}

absl::StatusOr<std::unique_ptr<Communicator>> MakeMpiCommunicator(const CommOptions& options) {
  CAVS_ASSIGN_OR_RETURN(const MpiGlobals* globals, EnsureMpi());
  int rank = 0, size = 0;
  CAVS_MPI_RETURN_IF_ERROR(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CAVS_MPI_RETURN_IF_ERROR(MPI_Comm_size(MPI_COMM_WORLD, &size));
  auto state =
      std::make_shared<internal::CommState>("mpi", rank, size, options, core::Device::Cpu());
  return MpiCommunicator::Create(std::move(state), globals, MPI_COMM_WORLD);
}

}  // namespace

void RegisterMpiCommunicator() { RegisterCommunicatorBackend("mpi", MakeMpiCommunicator); }

}  // namespace cavs::distributed
