#include "distributed/communicator_backends.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "distributed/communicator.h"
#include "distributed/mpi_communicator.h"
#include "distributed/nccl_communicator.h"
#include "distributed/single_communicator.h"

namespace cavs::distributed::internal {

namespace {

// A backend this build lacks: asking for it is a FailedPrecondition saying how to build it.
[[maybe_unused]] void RegisterMissing(std::string kind, std::string why) {
  RegisterCommunicatorBackend(
      std::move(kind),
      [why = std::move(why)](const CommOptions&) -> absl::StatusOr<std::unique_ptr<Communicator>> {
        return absl::FailedPreconditionError(why);
      });
}

}  // namespace

void RegisterBuiltinCommunicators() {
  RegisterSingleCommunicator();
#if defined(CAVS_WITH_MPI)
  RegisterMpiCommunicator();
#else
  RegisterMissing("mpi",
                  "communicator 'mpi' requested, but this build of cavs has no MPI (configure with "
                  "-DCAVS_WITH_MPI=ON and install an MPI such as libopenmpi-dev)");
#endif
#if defined(CAVS_WITH_NCCL) && defined(CAVS_WITH_MPI)
  RegisterNcclCommunicator();
#else
  RegisterMissing("nccl",
                  "communicator 'nccl' requested, but this build of cavs has no NCCL (configure "
                  "with -DCAVS_WITH_CUDA=ON -DCAVS_WITH_NCCL=ON -DCAVS_WITH_MPI=ON)");
#endif
}

}  // namespace cavs::distributed::internal
