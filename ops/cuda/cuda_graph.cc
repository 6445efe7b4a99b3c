#include "ops/cuda/cuda_graph.h"

#include <memory>
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

absl::StatusOr<cudaGraphExec_t> CudaGraphReplay::Executable(const Topology& t, cudaGraph_t graph) {
  auto it = execs_.find(t);
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
  execs_[t] = Entry{exec, ++uses_};
  return exec;
}

absl::StatusOr<CudaGraphReplay::Topology> CudaGraphReplay::TopologyOf(cudaGraph_t graph) {
  size_t n = 0;
  CAVS_CUDA_RETURN_IF_ERROR(cudaGraphGetNodes(graph, nullptr, &n));
  node_buffer_.resize(n);
  CAVS_CUDA_RETURN_IF_ERROR(cudaGraphGetNodes(graph, node_buffer_.data(), &n));
  uint64_t h = core::kFnv1aBasis;
  for (size_t i = 0; i < n; ++i) {
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    CAVS_CUDA_RETURN_IF_ERROR(cudaGraphNodeGetType(node_buffer_[i], &type));
    const auto t = static_cast<uint32_t>(type);
    h = core::Fnv1a(std::string_view(reinterpret_cast<const char*>(&t), sizeof(t)), h);
  }
  return Topology{h, n};
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
  cudaGraph_t captured = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &captured);
  // Destroyed on every return: an executable graph holds what it needs.
  const std::unique_ptr<CUgraph_st, decltype(&cudaGraphDestroy)> graph(captured, &cudaGraphDestroy);
  if (!queued.ok() || ended != cudaSuccess || graph == nullptr) {
    // Nothing of it reached the device: queue it again, launch by launch. A launch that failed
    // for its own reasons fails again there, with its own error.
    (void)cudaGetLastError();
    ++stats_.fallbacks;
    CAVS_RETURN_IF_ERROR(queue());
    return false;
  }
  CAVS_ASSIGN_OR_RETURN(const Topology t, TopologyOf(graph.get()));
  if (t.second == 0) return false;  // nothing was queued
  CAVS_ASSIGN_OR_RETURN(cudaGraphExec_t exec, Executable(t, graph.get()));
  CAVS_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec, stream));
  ++stats_.launched;
  stats_.nodes = static_cast<int64_t>(t.second);
  return true;
}

}  // namespace cavs::ops::cuda
