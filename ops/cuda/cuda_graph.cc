#include "ops/cuda/cuda_graph.h"

#include <string_view>
#include <utility>

#include "core/random.h"
#include "core/status.h"
#include "ops/cuda/cuda_status.h"

namespace cavs::ops::cuda {

CudaGraphReplay::~CudaGraphReplay() { Clear(); }

void CudaGraphReplay::Clear() {
  for (auto& [shape, e] : execs_) cudaGraphExecDestroy(e.exec);
  execs_.clear();
}

absl::StatusOr<cudaGraphExec_t> CudaGraphReplay::Executable(uint64_t shape, cudaGraph_t graph,
                                                            size_t nodes) {
  auto it = execs_.find({shape, nodes});
  if (it != execs_.end()) {
    cudaGraphExecUpdateResultInfo info{};
    if (cudaGraphExecUpdate(it->second.exec, graph, &info) == cudaSuccess) {
      ++stats_.updated;
      it->second.last_use = ++uses_;
      return it->second.exec;
    }
    // Refused (a restriction of cudaGraphExecUpdate the node types do not show: a copy between
    // other kinds of memory, say): made anew below. The error is not sticky; clear it for the next
    // call's check.
    (void)cudaGetLastError();
    cudaGraphExecDestroy(it->second.exec);
    execs_.erase(it);
  }
  if (static_cast<int>(execs_.size()) >= kMaxGraphs) {  // the least recently used goes
    auto oldest = execs_.begin();
    for (auto e = execs_.begin(); e != execs_.end(); ++e) {
      if (e->second.last_use < oldest->second.last_use) oldest = e;
    }
    cudaGraphExecDestroy(oldest->second.exec);
    execs_.erase(oldest);
  }
  cudaGraphExec_t exec = nullptr;
  CAVS_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&exec, graph, 0));
  ++stats_.instantiated;
  execs_[{shape, nodes}] = Entry{exec, ++uses_};
  return exec;
}

absl::StatusOr<uint64_t> CudaGraphReplay::Topology(cudaGraph_t graph, size_t nodes) {
  node_buffer_.resize(nodes);
  size_t n = nodes;
  CAVS_CUDA_RETURN_IF_ERROR(cudaGraphGetNodes(graph, node_buffer_.data(), &n));
  uint64_t h = core::kFnv1aBasis;
  for (size_t i = 0; i < n; ++i) {
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    CAVS_CUDA_RETURN_IF_ERROR(cudaGraphNodeGetType(node_buffer_[i], &type));
    const auto t = static_cast<uint32_t>(type);
    h = core::Fnv1a(std::string_view(reinterpret_cast<const char*>(&t), sizeof(t)), h);
  }
  return h;
}

absl::StatusOr<bool> CudaGraphReplay::Queue(cudaStream_t stream,
                                            const std::function<absl::Status()>& queue) {
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  CAVS_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capturing));
  if (capturing != cudaStreamCaptureStatusNone) {  // inside a caller's capture: part of theirs
    CAVS_RETURN_IF_ERROR(queue());
    return false;
  }
  CAVS_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const absl::Status queued = queue();
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (!queued.ok() || ended != cudaSuccess || graph == nullptr) {
    // Nothing of it reached the device: queue it again, launch by launch. A launch that failed
    // for its own reasons fails again there, with its own error.
    if (graph != nullptr) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    ++stats_.fallbacks;
    CAVS_RETURN_IF_ERROR(queue());
    return false;
  }
  size_t nodes = 0;
  absl::Status s = CAVS_CUDA_STATUS(cudaGraphGetNodes(graph, nullptr, &nodes));
  bool launched = false;
  if (s.ok() && nodes > 0) {
    absl::StatusOr<uint64_t> shape = Topology(graph, nodes);
    s = shape.status();
    absl::StatusOr<cudaGraphExec_t> exec =
        s.ok() ? Executable(*shape, graph, nodes) : absl::StatusOr<cudaGraphExec_t>(s);
    s = exec.status();
    if (s.ok()) s = CAVS_CUDA_STATUS(cudaGraphLaunch(*exec, stream));
    launched = s.ok();
  }
  cudaGraphDestroy(graph);  // the executable graph holds what it needs
  CAVS_RETURN_IF_ERROR(s);
  if (launched) {
    ++stats_.launched;
    stats_.nodes = static_cast<int64_t>(nodes);
  }
  return launched;
}

}  // namespace cavs::ops::cuda
