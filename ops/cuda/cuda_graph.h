// CudaGraphReplay: a unit of work queued on a stream captured into a CUDA graph and launched as
// one graph (Kernels::QueueRecorded on CUDA, KernelOptions::cuda.graphs).
//
// Why: on an H100 a training batch of 64 SST trees was about 0.19 ms of device work at the floor
// but 1.2 ms of wall time, the device waiting for launches the host queued at 4-8 us each. A
// captured launch costs the host less than a real one, and the graph's kernels follow each other
// on the device without the host in between.
//
// How: the stream is captured (thread-local mode: this thread's calls that could synchronize
// fail the capture instead of the program) while the caller queues its launches; the captured
// graph updates in place the executable graph kept for its topology, the sequence of its node
// types (cudaGraphExecUpdate takes a graph of the same topology with other kernels, kernel
// arguments, grid sizes and copy addresses: every batch with as many launches of each kind in
// the same order, whatever its sizes), or is instantiated where there is none or the update is
// refused; then the executable graph is launched. An update does not touch launches already
// queued, so a batch's graph may be updated while the last one still runs. Executable graphs
// are kept for the kMaxGraphs topologies used last.
//
// Measured (H200, SST Tree-LSTM, bench/RESULTS.md): capturing costs the host about three
// quarters of launching, and the device cannot start a graph before its capture ends. So a
// graph pays where the host captures batch i+1 while the device runs batch i (pipelined Submit
// and Finish): inference at batch 256 gained 17-19%; a lone Run waits for its whole capture.
//
// A capture that fails (a launch that synchronizes, as cuBLASLt's autotuning does, or a kernel
// module loaded for the first time where loading is refused under capture) leaves nothing
// queued: the same launches are then queued one by one, and the failure is counted. The
// results are bit-equal either way: the same kernels with the same arguments in the same order.
//
// Thread-safety: one caller at a time (the kernels' own rule).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cavs::ops::cuda {

class CudaGraphReplay {
 public:
  // What the replays so far did.
  struct Stats {
    int64_t launched = 0;      // units launched as one graph
    int64_t instantiated = 0;  // executable graphs made (a new topology, refused updates)
    int64_t updated = 0;       // executable graphs updated in place
    int64_t fallbacks = 0;     // captures that failed: the unit went launch by launch
    int64_t nodes = 0;         // nodes of the last graph launched
  };
  static constexpr int kMaxGraphs = 256;

  CudaGraphReplay() = default;
  ~CudaGraphReplay();
  CudaGraphReplay(const CudaGraphReplay&) = delete;
  CudaGraphReplay& operator=(const CudaGraphReplay&) = delete;

  // Queues what `queue` queues on `stream` as one graph (true), or launch by launch where the
  // capture failed or the stream is already being captured (false). Errors: queue()'s own when
  // it fails outside a capture too, and those of instantiating or launching the graph.
  [[nodiscard]] absl::StatusOr<bool> Queue(cudaStream_t stream,
                                           const std::function<absl::Status()>& queue);
  // Destroys every executable graph (after the work queued with them: a graph launched is
  // kept alive by the driver until it has run).
  void Clear();
  const Stats& stats() const { return stats_; }

 private:
  struct Entry {
    cudaGraphExec_t exec = nullptr;
    uint64_t last_use = 0;
  };
  // A graph's topology: a hash of its node types in order, and their count.
  using Topology = std::pair<uint64_t, size_t>;
  absl::StatusOr<Topology> TopologyOf(cudaGraph_t graph);
  // The executable graph for `graph` of topology `t`: updated or made.
  absl::StatusOr<cudaGraphExec_t> Executable(const Topology& t, cudaGraph_t graph);

  absl::flat_hash_map<Topology, Entry> execs_;
  std::vector<cudaGraphNode_t> node_buffer_;  // Topology's, kept across calls
  uint64_t uses_ = 0;
  Stats stats_;
};

}  // namespace cavs::ops::cuda
