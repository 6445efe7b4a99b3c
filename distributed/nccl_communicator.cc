#include "distributed/nccl_communicator.h"

#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/backend.h"
#include "core/status.h"
#include "distributed/comm_state.h"
#include "distributed/communicator.h"
#include "distributed/nccl_status.h"

namespace cavs::distributed {

namespace {

using core::DType;
using core::Tensor;

ncclDataType_t NcclType(DType t) {
  switch (t) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat16:
      return ncclFloat16;
    case DType::kBFloat16:
      return ncclBfloat16;
    case DType::kInt32:
      return ncclInt32;
    case DType::kInt64:
      return ncclInt64;
  }
  return ncclUint8;
}

// An NCCL communicator shared by a cavs communicator and its Works; an abandoned Work aborts it
// (the only way to stop kernels waiting for a dead peer).
struct NcclHandle {
  ncclComm_t comm = nullptr;
  bool aborted = false;
  ~NcclHandle() {
    if (comm != nullptr && !aborted) ncclCommDestroy(comm);
  }
  void Abort() {
    if (comm != nullptr && !aborted) ncclCommAbort(comm);
    aborted = true;
  }
};

// Polls a nonblocking communicator until its pending call has finished, against `timeout`.
absl::Status AwaitComm(NcclHandle& handle, absl::Duration timeout, const std::string& what) {
  const absl::Time start = absl::Now();
  for (int iteration = 0;; ++iteration) {
    ncclResult_t state = ncclSuccess;
    CAVS_NCCL_RETURN_IF_ERROR(ncclCommGetAsyncError(handle.comm, &state));
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) {
      return internal::NcclStatus(state, "ncclCommGetAsyncError", __FILE__, __LINE__);
    }
    if (absl::Now() - start > timeout) {
      handle.Abort();
      return absl::DeadlineExceededError(
          absl::StrCat(what, " made no progress for ", absl::FormatDuration(timeout)));
    }
    internal::PollPause(iteration);
  }
}

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<internal::CommState> state, std::string what,
           std::shared_ptr<NcclHandle> handle, cudaEvent_t event, std::vector<Tensor> tensors)
      : Work(std::move(state), std::move(what)),
        handle_(std::move(handle)),
        event_(event),
        tensors_(std::move(tensors)) {}

  ~NcclWork() override {
    if (!done()) {
      BreakOnAbandon();
      handle_->Abort();  // stops the kernels, so the buffers may be freed
    }
    cudaEventDestroy(event_);
  }

 protected:
  absl::StatusOr<bool> Poll() override {
    const cudaError_t query = cudaEventQuery(event_);
    if (query == cudaSuccess) return true;
    if (query != cudaErrorNotReady) {
      return internal::NcclCudaStatus(query, "cudaEventQuery", __FILE__, __LINE__);
    }
    ncclResult_t async = ncclSuccess;
    CAVS_NCCL_RETURN_IF_ERROR(ncclCommGetAsyncError(handle_->comm, &async));
    CAVS_NCCL_RETURN_IF_ERROR(async);
    return false;
  }

 private:
  std::shared_ptr<NcclHandle> handle_;
  cudaEvent_t event_;
  std::vector<Tensor> tensors_;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::shared_ptr<internal::CommState> state, std::shared_ptr<NcclHandle> handle,
                   int device, cudaStream_t stream)
      : Communicator(std::move(state)),
        handle_(std::move(handle)),
        device_(device),
        stream_(stream) {}

  ~NcclCommunicator() override {
    handle_.reset();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  static absl::StatusOr<std::unique_ptr<Communicator>> Create(
      std::shared_ptr<internal::CommState> state, std::shared_ptr<NcclHandle> handle, int device);

 protected:
  WorkOr DoAllReduce(Tensor buf, std::string what) override {
    return Enqueue(std::move(what), {buf}, [&] {
      return ncclAllReduce(buf.raw_data(), buf.raw_data(), buf.numel(), NcclType(buf.dtype()),
                           ncclSum, handle_->comm, stream_);
    });
  }
  WorkOr DoReduce(Tensor buf, int root, std::string what) override {
    return Enqueue(std::move(what), {buf}, [&] {
      return ncclReduce(buf.raw_data(), buf.raw_data(), buf.numel(), NcclType(buf.dtype()), ncclSum,
                        root, handle_->comm, stream_);
    });
  }
  WorkOr DoReduceScatter(Tensor send, Tensor recv, std::string what) override {
    return Enqueue(std::move(what), {send, recv}, [&] {
      return ncclReduceScatter(send.raw_data(), recv.raw_data(), recv.numel(),
                               NcclType(send.dtype()), ncclSum, handle_->comm, stream_);
    });
  }
  WorkOr DoAllGather(Tensor send, Tensor recv, std::string what) override {
    return Enqueue(std::move(what), {send, recv}, [&] {
      return ncclAllGather(send.raw_data(), recv.raw_data(), send.numel(), NcclType(send.dtype()),
                           handle_->comm, stream_);
    });
  }
  WorkOr DoAllGatherV(Tensor send, Tensor recv, std::vector<int64_t> counts,
                      std::string what) override {
    return Enqueue(std::move(what), {send, recv}, [&] {
      ncclGroupStart();
      int64_t offset = 0;
      for (int r = 0; r < world_size(); ++r) {
        ncclResult_t result = ncclBroadcast(send.raw_data(), At(recv, offset), counts[r],
                                            NcclType(send.dtype()), r, handle_->comm, stream_);
        if (result != ncclSuccess && result != ncclInProgress) {
          ncclGroupEnd();
          return result;
        }
        offset += counts[r];
      }
      return ncclGroupEnd();
    });
  }
  WorkOr DoGatherV(Tensor send, Tensor recv, std::vector<int64_t> counts, int root,
                   std::string what) override;
  WorkOr DoBroadcast(Tensor buf, int root, std::string what) override {
    return Enqueue(std::move(what), {buf}, [&] {
      return ncclBroadcast(buf.raw_data(), buf.raw_data(), buf.numel(), NcclType(buf.dtype()), root,
                           handle_->comm, stream_);
    });
  }
  WorkOr DoSend(Tensor buf, int peer, int, std::string what) override {
    return Enqueue(std::move(what), {buf}, [&] {
      return ncclSend(buf.raw_data(), buf.numel(), NcclType(buf.dtype()), peer, handle_->comm,
                      stream_);
    });
  }
  WorkOr DoRecv(Tensor buf, int peer, int, std::string what) override {
    return Enqueue(std::move(what), {buf}, [&] {
      return ncclRecv(buf.raw_data(), buf.numel(), NcclType(buf.dtype()), peer, handle_->comm,
                      stream_);
    });
  }
  WorkOr DoBarrier(std::string what) override {
    CAVS_ASSIGN_OR_RETURN(Tensor flag, Tensor::Zeros({1}, DType::kInt32, buffer_device()));
    return Enqueue(std::move(what), {flag}, [&] {
      return ncclAllReduce(flag.raw_data(), flag.raw_data(), 1, ncclInt32, ncclSum, handle_->comm,
                           stream_);
    });
  }
  absl::StatusOr<std::unique_ptr<Communicator>> DoDuplicate() override;
  absl::StatusOr<std::unique_ptr<Communicator>> DoSplit(
      int color, int key, std::shared_ptr<internal::CommState> state) override;
  absl::StatusOr<int64_t> DoHostKey() override;
  // ncclCommSplit of this communicator: the duplicate (color 0, key rank) and Split.
  absl::StatusOr<std::unique_ptr<Communicator>> SplitComm(
      int color, int key, std::shared_ptr<internal::CommState> state);
  bool AcceptsDevice(core::Device device) const override { return device == buffer_device(); }

 private:
  static void* At(const Tensor& t, int64_t element) {
    return static_cast<char*>(t.raw_data()) + element * static_cast<int64_t>(SizeOf(t.dtype()));
  }

  // Waits for cavs's stream, runs `call` (the NCCL calls) and returns a Work completing with an
  // event recorded after them. The base class has checked the buffers' device.
  WorkOr Enqueue(std::string what, std::vector<Tensor> tensors,
                 const std::function<ncclResult_t()>& call) {
    CAVS_ASSIGN_OR_RETURN(core::Backend * backend, core::GetBackend(buffer_device()));
    CAVS_RETURN_IF_ERROR(backend->Synchronize());
    CAVS_NCCL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    CAVS_NCCL_RETURN_IF_ERROR(call());
    CAVS_RETURN_IF_ERROR(AwaitComm(*handle_, options().timeout, what));
    cudaEvent_t event = nullptr;
    CAVS_NCCL_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    if (cudaError_t e = cudaEventRecord(event, stream_); e != cudaSuccess) {
      cudaEventDestroy(event);
      return internal::NcclCudaStatus(e, "cudaEventRecord", __FILE__, __LINE__);
    }
    return WorkOr(std::make_unique<NcclWork>(shared_state(), std::move(what), handle_, event,
                                             std::move(tensors)));
  }

  std::shared_ptr<NcclHandle> handle_;
  int device_;
  cudaStream_t stream_;
};

Communicator::WorkOr NcclCommunicator::DoGatherV(Tensor send, Tensor recv,
                                                 std::vector<int64_t> counts, int root,
                                                 std::string what) {
  const bool is_root = root == rank();
  return Enqueue(std::move(what), {send, recv}, [&] {
    const ncclDataType_t type = NcclType(send.dtype());
    ncclGroupStart();
    ncclResult_t result = ncclSuccess;
    if (!is_root) {
      result = ncclSend(send.raw_data(), counts[rank()], type, root, handle_->comm, stream_);
    } else {
      int64_t offset = 0;
      for (int r = 0; r < world_size() && (result == ncclSuccess || result == ncclInProgress);
           ++r) {
        if (r == root) {
          if (cudaMemcpyAsync(At(recv, offset), send.raw_data(), send.nbytes(),
                              cudaMemcpyDeviceToDevice, stream_) != cudaSuccess) {
            result = ncclUnhandledCudaError;
          }
        } else {
          result = ncclRecv(At(recv, offset), counts[r], type, r, handle_->comm, stream_);
        }
        offset += counts[r];
      }
    }
    const ncclResult_t end = ncclGroupEnd();
    return result == ncclSuccess || result == ncclInProgress ? end : result;
  });
}

absl::StatusOr<std::unique_ptr<Communicator>> NcclCommunicator::Create(
    std::shared_ptr<internal::CommState> state, std::shared_ptr<NcclHandle> handle, int device) {
  cudaStream_t stream = nullptr;
  CAVS_NCCL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  CAVS_NCCL_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(std::move(state), std::move(handle), device, stream));
}

absl::StatusOr<std::unique_ptr<Communicator>> NcclCommunicator::DoDuplicate() {
  return SplitComm(0, rank(), shared_state());
}

absl::StatusOr<std::unique_ptr<Communicator>> NcclCommunicator::DoSplit(
    int color, int key, std::shared_ptr<internal::CommState> state) {
  return SplitComm(color, key, std::move(state));
}

absl::StatusOr<int64_t> NcclCommunicator::DoHostKey() { return internal::HostKey(); }

absl::StatusOr<std::unique_ptr<Communicator>> NcclCommunicator::SplitComm(
    int color, int key, std::shared_ptr<internal::CommState> state) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  auto handle = std::make_shared<NcclHandle>();
  CAVS_NCCL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  CAVS_NCCL_RETURN_IF_ERROR(ncclCommSplit(handle_->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color,
                                          key, &handle->comm, &config));
  // In nonblocking mode the new handle appears once the parent has done its part of the split.
  absl::Status ready = AwaitComm(*handle_, options().timeout, "ncclCommSplit");
  if (ready.ok() && color < 0) return std::unique_ptr<Communicator>();
  if (ready.ok() && handle->comm == nullptr) {
    ready = absl::InternalError("ncclCommSplit returned no communicator");
  }
  if (ready.ok()) ready = AwaitComm(*handle, options().timeout, "ncclCommSplit");
  if (!ready.ok()) {
    shared_state()->Break(ready);
    return ready;
  }
  return Create(std::move(state), std::move(handle), device_);
}

// The device of this rank: its rank among the processes of its node, modulo the device count.
absl::StatusOr<int> PickDevice(int world_rank) {
  int count = 0;
  CAVS_NCCL_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (count <= 0) return absl::FailedPreconditionError("the NCCL communicator needs a CUDA device");
  int local_rank = world_rank;
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const char* value = std::getenv(var);
    if (value != nullptr && absl::SimpleAtoi(value, &local_rank)) break;
  }
  return local_rank % count;
}

absl::StatusOr<std::unique_ptr<Communicator>> MakeNcclCommunicator(const CommOptions& options) {
  CAVS_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> mpi, MakeCommunicator("mpi", options));
  CAVS_ASSIGN_OR_RETURN(int device, PickDevice(mpi->rank()));
  CAVS_RETURN_IF_ERROR(core::GetBackend(core::Device::Cuda(device)).status());
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (mpi->rank() == 0) CAVS_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
  static_assert(sizeof(ncclUniqueId) % sizeof(int64_t) == 0);
  Tensor bytes = Tensor::Host({static_cast<int64_t>(sizeof(id) / sizeof(int64_t))}, DType::kInt64);
  std::memcpy(bytes.raw_data(), &id, sizeof(id));
  CAVS_RETURN_IF_ERROR(mpi->Broadcast(bytes, 0));
  std::memcpy(&id, bytes.raw_data(), sizeof(id));

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  auto handle = std::make_shared<NcclHandle>();
  CAVS_NCCL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  CAVS_NCCL_RETURN_IF_ERROR(
      ncclCommInitRankConfig(&handle->comm, mpi->world_size(), id, mpi->rank(), &config));
  CAVS_RETURN_IF_ERROR(AwaitComm(*handle, options.timeout, "ncclCommInitRankConfig"));
  auto state = std::make_shared<internal::CommState>("nccl", mpi->rank(), mpi->world_size(),
                                                     options, core::Device::Cuda(device));
  return NcclCommunicator::Create(std::move(state), std::move(handle), device);
}

}  // namespace

void RegisterNcclCommunicator() { RegisterCommunicatorBackend("nccl", MakeNcclCommunicator); }

}  // namespace cavs::distributed
