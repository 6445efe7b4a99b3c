// Sequence LSTM on one GPU: the batched engine against cuDNN's LSTM on the same variable-length
// batches, in one binary and one run.
//
// Lengths: the sentences of $CAVS_BENCH_PTB (e.g. ../shared/data/ptb/valid.txt; words + 1 for
// "<s>", as examples/data/text_reader.h builds them), else lengths drawn from a geometric-like
// distribution with PTB valid's mean (about 21 words + 1). Tokens and labels are random.
// Embedding 512, hidden 512, one layer, fp32, 64 sentences a batch; training = forward +
// backward with the weight gradients (no optimizer step in either: cuDNN has none).
//
// BM_EngineLstm/0: Engine::Run with the Lstm function of vertex/models.h (planning included).
//   The engine also runs the embedding lookup, a 16-class output layer and the loss, which
//   cuDNN does not. BM_EngineLstm/1: as cavs-train runs it on a GPU: the plans made ahead (the
//   trainer makes them on other threads), Engine::Submit of batch i+1 before Finish of batch i
//   (so each batch goes as one CUDA graph with the default kernel options).
// BM_CudnnLstm/0: per batch, what a framework does: describe the packed batch
//   (CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, lengths sorted longest first), upload the
//   lengths, cudnnRNNForward (training), cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8,
//   then wait for the stream (as the engine waits for its loss). BM_CudnnLstm/1: the same calls,
//   waiting only for the batch before (as /1 of the engine).
// Both report sentences/s (items_per_second) and tokens/s.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/kernel_environment.h"
#include "bench/rate_reporter.h"
#include "core/parameter.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/cudnn_status.h"
#include "scheduler/engine.h"
#include "vertex/models.h"

namespace cavs {
namespace {

constexpr int kBatch = 64;
constexpr int kHidden = 512;
constexpr int kEmbed = 512;
constexpr int kVocab = 10000;
constexpr int kClasses = 16;
constexpr int kNumBatches = 32;

// Sentence lengths (vertices per chain), kBatch * kNumBatches of them.
const std::vector<int>& Lengths() {
  static const std::vector<int>* lengths = [] {
    auto* out = new std::vector<int>();
    if (const char* path = std::getenv("CAVS_BENCH_PTB")) {
      std::ifstream in(path);
      std::string line;
      while (std::getline(in, line) && out->size() < kBatch * kNumBatches) {
        std::istringstream words(line);
        int n = 0;
        for (std::string w; words >> w;) ++n;
        if (n > 0) out->push_back(n + 1);
      }
    }
    std::mt19937 rng(7);
    std::geometric_distribution<int> extra(1.0 / 18.0);  // 4 + 17 on average, + 1 for <s>
    while (out->size() < kBatch * kNumBatches) out->push_back(5 + std::min(extra(rng), 120));
    double mean = 0;
    for (int n : *out) mean += n;
    std::fprintf(stderr, "lengths: %zu sentences, mean %.1f vertices (%s)\n", out->size(),
                 mean / out->size(), std::getenv("CAVS_BENCH_PTB") ? "PTB" : "generated");
    return out;
  }();
  return *lengths;
}

std::vector<std::vector<scheduler::Graph>> Batches() {
  std::mt19937 rng(11);
  std::vector<std::vector<scheduler::Graph>> out(kNumBatches);
  for (int b = 0; b < kNumBatches; ++b) {
    for (int i = 0; i < kBatch; ++i) {
      scheduler::Graph g = scheduler::Graph::Chain(Lengths()[b * kBatch + i]);
      for (int v = 0; v < g.num_vertices(); ++v) {
        g.tokens.push_back(static_cast<int32_t>(rng() % kVocab));
        g.labels.push_back(static_cast<int32_t>(rng() % kClasses));
      }
      out[b].push_back(std::move(g));
    }
  }
  return out;
}

int64_t Tokens(int b) {
  int64_t t = 0;
  for (int i = 0; i < kBatch; ++i) t += Lengths()[b * kBatch + i];
  return t;
}

void SetRates(benchmark::State& state, int64_t tokens) {
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.counters["tokens_per_second"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}

void BM_EngineLstm(benchmark::State& state) {
  const core::Device dev = core::Device::Cuda(0);
  if (!core::DeviceAvailable(core::DeviceType::kCuda)) {
    state.SkipWithError("no CUDA device");
    return;
  }
  vertex::models::CellConfig c{kVocab, kEmbed, kHidden, kClasses, 0.0f};
  absl::StatusOr<vertex::Function> f = vertex::models::Lstm(c);
  core::ParameterStore store(1, dev);
  scheduler::EngineOptions eo;
  eo.device = dev;
  auto engine = f.ok() ? scheduler::Engine::Create(&*f, &store, eo)
                       : absl::StatusOr<std::unique_ptr<scheduler::Engine>>(f.status());
  if (!engine.ok()) {
    state.SkipWithError(engine.status().ToString().c_str());
    return;
  }
  const auto batches = Batches();
  const bool pipelined = state.range(0) == 1;
  scheduler::RunOptions ro;
  ro.training = true;
  ro.backward = true;
  std::vector<scheduler::Plan> plans;
  for (int b = 0; pipelined && b < kNumBatches; ++b) {
    absl::StatusOr<scheduler::Plan> plan = (*engine)->PlanBatch(batches[b]);
    if (!plan.ok()) return state.SkipWithError(plan.status().ToString().c_str());
    plans.push_back(std::move(*plan));
  }
  std::optional<scheduler::PendingRun> pending;
  auto finish = [&]() -> absl::Status {
    if (!pending.has_value()) return absl::OkStatus();
    absl::Status s = (*engine)->Finish(std::move(*pending)).status();
    pending.reset();
    return s;
  };
  auto step = [&](int b) -> absl::Status {
    CAVS_RETURN_IF_ERROR(store.ZeroGrad());
    if (!pipelined) return (*engine)->Run(batches[b], ro).status();
    CAVS_ASSIGN_OR_RETURN(scheduler::PendingRun next, (*engine)->Submit(plans[b], ro));
    CAVS_RETURN_IF_ERROR(finish());
    pending = std::move(next);
    return absl::OkStatus();
  };
  for (int b = 0; b < kNumBatches; ++b) {
    if (absl::Status s = step(b); !s.ok()) return state.SkipWithError(s.ToString().c_str());
  }
  int64_t tokens = 0, i = 0;
  double rounds = 0, graphs = 0;
  for (auto _ : state) {
    const int b = static_cast<int>(i++ % kNumBatches);
    if (absl::Status s = step(b); !s.ok()) return state.SkipWithError(s.ToString().c_str());
    tokens += Tokens(b);
    rounds += (*engine)->stats().rounds;
    graphs += (*engine)->stats().graph ? 1 : 0;
  }
  if (absl::Status s = finish(); !s.ok()) return state.SkipWithError(s.ToString().c_str());
  SetRates(state, tokens);
  state.counters["graph_share"] = graphs / state.iterations();
  state.counters["rounds"] = rounds / state.iterations();
  state.counters["kernels_per_round"] =
      (*engine)->ForwardLaunchesPerRound() + (*engine)->BackwardLaunchesPerRound();
  state.counters["kernels_per_batch"] = static_cast<double>((*engine)->stats().commands);
}

// One cuDNN LSTM layer and the device buffers for the largest batch.
class CudnnLstm {
 public:
  ~CudnnLstm();
  absl::Status Init(cudaStream_t stream, int max_tokens);
  // Forward (training), backward data and backward weights over one packed batch; then waits
  // for the stream, or with `pipelined` only for the step before this one.
  absl::Status Step(std::vector<int> lengths, bool pipelined = false);
  // Waits for every step queued.
  absl::Status Drain() { return CAVS_CUDA_STATUS(cudaStreamSynchronize(stream_)); }

 private:
  absl::Status Describe(const std::vector<int>& lengths);
  absl::Status Grow(void** p, size_t* have, size_t want);

  cudaStream_t stream_ = nullptr;
  cudnnHandle_t handle_ = nullptr;
  cudnnRNNDescriptor_t rnn_ = nullptr;
  cudnnDropoutDescriptor_t dropout_ = nullptr;
  cudnnRNNDataDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr;
  cudnnTensorDescriptor_t h_desc_ = nullptr;
  float *x_ = nullptr, *y_ = nullptr, *dx_ = nullptr, *dy_ = nullptr;
  void *weights_ = nullptr, *dweights_ = nullptr, *work_ = nullptr, *reserve_ = nullptr;
  int* dev_lengths_ = nullptr;
  size_t weight_bytes_ = 0, work_bytes_ = 0, reserve_bytes_ = 0;
  cudaEvent_t done_[2] = {nullptr, nullptr};  // the pipelined steps' ends, alternately
  int64_t steps_ = 0;
};

CudnnLstm::~CudnnLstm() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  for (void* p : {static_cast<void*>(x_), static_cast<void*>(y_), static_cast<void*>(dx_),
                  static_cast<void*>(dy_), weights_, dweights_, work_, reserve_,
                  static_cast<void*>(dev_lengths_)}) {
    cudaFree(p);
  }
  for (cudaEvent_t e : done_) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  if (x_desc_) cudnnDestroyRNNDataDescriptor(x_desc_);
  if (y_desc_) cudnnDestroyRNNDataDescriptor(y_desc_);
  if (h_desc_) cudnnDestroyTensorDescriptor(h_desc_);
  if (rnn_) cudnnDestroyRNNDescriptor(rnn_);
  if (dropout_) cudnnDestroyDropoutDescriptor(dropout_);
  if (handle_) cudnnDestroy(handle_);
}

absl::Status CudnnLstm::Init(cudaStream_t stream, int max_tokens) {
  stream_ = stream;
  for (cudaEvent_t& e : done_) {
    CAVS_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  CAVS_CUDNN_RETURN_IF_ERROR(cudnnCreate(&handle_));
  CAVS_CUDNN_RETURN_IF_ERROR(cudnnSetStream(handle_, stream));
  CAVS_CUDNN_RETURN_IF_ERROR(cudnnCreateDropoutDescriptor(&dropout_));
  CAVS_CUDNN_RETURN_IF_ERROR(cudnnSetDropoutDescriptor(dropout_, handle_, 0.0f, nullptr, 0, 0));
  CAVS_CUDNN_RETURN_IF_ERROR(cudnnCreateRNNDescriptor(&rnn_));
  CAVS_CUDNN_RETURN_IF_ERROR(cudnnSetRNNDescriptor_v8(
      rnn_, CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS, CUDNN_UNIDIRECTIONAL,
      CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_DEFAULT_MATH, kEmbed, kHidden,
      kHidden, 1, dropout_, CUDNN_RNN_PADDED_IO_DISABLED));
  CAVS_CUDNN_RETURN_IF_ERROR(cudnnCreateRNNDataDescriptor(&x_desc_));
  CAVS_CUDNN_RETURN_IF_ERROR(cudnnCreateRNNDataDescriptor(&y_desc_));
  CAVS_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&h_desc_));
  const int dims[3] = {1, kBatch, kHidden}, strides[3] = {kBatch * kHidden, kHidden, 1};
  CAVS_CUDNN_RETURN_IF_ERROR(
      cudnnSetTensorNdDescriptor(h_desc_, CUDNN_DATA_FLOAT, 3, dims, strides));
  CAVS_CUDNN_RETURN_IF_ERROR(cudnnGetRNNWeightSpaceSize(handle_, rnn_, &weight_bytes_));
  const size_t act = static_cast<size_t>(max_tokens) * kHidden * sizeof(float);
  for (float** p : {&x_, &y_, &dx_, &dy_}) {
    CAVS_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(p), act));
  }
  CAVS_CUDA_RETURN_IF_ERROR(cudaMalloc(&weights_, weight_bytes_));
  CAVS_CUDA_RETURN_IF_ERROR(cudaMalloc(&dweights_, weight_bytes_));
  CAVS_CUDA_RETURN_IF_ERROR(
      cudaMalloc(reinterpret_cast<void**>(&dev_lengths_), kBatch * sizeof(int)));
  // Small non-zero data: no timing on zeros.
  std::vector<float> fill(std::max(act, weight_bytes_) / sizeof(float));
  for (size_t i = 0; i < fill.size(); ++i) fill[i] = 0.01f * static_cast<float>(i % 97) - 0.48f;
  for (void* p : {static_cast<void*>(x_), static_cast<void*>(dy_)}) {
    CAVS_CUDA_RETURN_IF_ERROR(cudaMemcpy(p, fill.data(), act, cudaMemcpyHostToDevice));
  }
  for (size_t i = 0; i < fill.size(); ++i) fill[i] *= 0.1f;
  CAVS_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(weights_, fill.data(), weight_bytes_, cudaMemcpyHostToDevice));
  return absl::OkStatus();
}

absl::Status CudnnLstm::Grow(void** p, size_t* have, size_t want) {
  if (want <= *have) return absl::OkStatus();
  CAVS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  CAVS_CUDA_RETURN_IF_ERROR(cudaFree(*p));
  CAVS_CUDA_RETURN_IF_ERROR(cudaMalloc(p, want));
  *have = want;
  return absl::OkStatus();
}

absl::Status CudnnLstm::Describe(const std::vector<int>& lengths) {
  const int max_len = lengths.front();
  for (cudnnRNNDataDescriptor_t d : {x_desc_, y_desc_}) {
    CAVS_CUDNN_RETURN_IF_ERROR(cudnnSetRNNDataDescriptor(
        d, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, max_len, kBatch,
        d == x_desc_ ? kEmbed : kHidden, lengths.data(), nullptr));
  }
  size_t work = 0, reserve = 0;
  CAVS_CUDNN_RETURN_IF_ERROR(
      cudnnGetRNNTempSpaceSizes(handle_, rnn_, CUDNN_FWD_MODE_TRAINING, x_desc_, &work, &reserve));
  CAVS_RETURN_IF_ERROR(Grow(&work_, &work_bytes_, work));
  CAVS_RETURN_IF_ERROR(Grow(&reserve_, &reserve_bytes_, reserve));
  CAVS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dev_lengths_, lengths.data(), kBatch * sizeof(int),
                                            cudaMemcpyHostToDevice, stream_));
  return absl::OkStatus();
}

absl::Status CudnnLstm::Step(std::vector<int> lengths, bool pipelined) {
  std::sort(lengths.begin(), lengths.end(), std::greater<int>());  // packed: longest first
  CAVS_RETURN_IF_ERROR(Describe(lengths));
  CAVS_CUDNN_RETURN_IF_ERROR(cudnnRNNForward(handle_, rnn_, CUDNN_FWD_MODE_TRAINING, dev_lengths_,
                                             x_desc_, x_, y_desc_, y_, h_desc_, nullptr, nullptr,
                                             h_desc_, nullptr, nullptr, weight_bytes_, weights_,
                                             work_bytes_, work_, reserve_bytes_, reserve_));
  CAVS_CUDNN_RETURN_IF_ERROR(cudnnRNNBackwardData_v8(
      handle_, rnn_, dev_lengths_, y_desc_, y_, dy_, x_desc_, dx_, h_desc_, nullptr, nullptr,
      nullptr, h_desc_, nullptr, nullptr, nullptr, weight_bytes_, weights_, work_bytes_, work_,
      reserve_bytes_, reserve_));
  CAVS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dweights_, 0, weight_bytes_, stream_));
  CAVS_CUDNN_RETURN_IF_ERROR(cudnnRNNBackwardWeights_v8(
      handle_, rnn_, CUDNN_WGRAD_MODE_ADD, dev_lengths_, x_desc_, x_, h_desc_, nullptr, y_desc_, y_,
      weight_bytes_, dweights_, work_bytes_, work_, reserve_bytes_, reserve_));
  if (!pipelined) {
    CAVS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }
  const int64_t step = steps_++;
  CAVS_CUDA_RETURN_IF_ERROR(cudaEventRecord(done_[step % 2], stream_));
  if (step > 0) CAVS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(done_[(step + 1) % 2]));
  return absl::OkStatus();
}

void BM_CudnnLstm(benchmark::State& state) {
  absl::StatusOr<ops::cuda::CudaBackend*> backend = ops::cuda::GetCudaBackend(0);
  if (!backend.ok()) return state.SkipWithError(backend.status().ToString().c_str());
  int max_tokens = 0;
  for (int b = 0; b < kNumBatches; ++b) max_tokens = std::max<int>(max_tokens, Tokens(b));
  CudnnLstm lstm;
  if (absl::Status s = lstm.Init((*backend)->stream(), max_tokens); !s.ok()) {
    return state.SkipWithError(s.ToString().c_str());
  }
  auto lengths_of = [](int b) {
    return std::vector<int>(Lengths().begin() + b * kBatch, Lengths().begin() + (b + 1) * kBatch);
  };
  for (int b = 0; b < kNumBatches; ++b) {
    if (absl::Status s = lstm.Step(lengths_of(b)); !s.ok()) {
      return state.SkipWithError(s.ToString().c_str());
    }
  }
  int64_t tokens = 0, i = 0;
  const bool pipelined = state.range(0) == 1;
  for (auto _ : state) {
    const int b = static_cast<int>(i++ % kNumBatches);
    if (absl::Status s = lstm.Step(lengths_of(b), pipelined); !s.ok()) {
      return state.SkipWithError(s.ToString().c_str());
    }
    tokens += Tokens(b);
  }
  if (absl::Status s = lstm.Drain(); !s.ok()) return state.SkipWithError(s.ToString().c_str());
  SetRates(state, tokens);
}

BENCHMARK(BM_EngineLstm)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);
BENCHMARK(BM_CudnnLstm)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

// Prints the engine's rate over cuDNN's, each way, against the 1.2x.
class RatioReporter : public bench::RateReporter {
 public:
  void Finalize() override {
    ConsoleReporter::Finalize();
    static const char* kWays[] = {"waiting for each batch", "pipelined"};
    for (int way = 0; way < 2; ++way) {
      const std::string suffix = absl::StrCat("/", way, "/min_time:2.000/real_time");
      const double engine = Rate("BM_EngineLstm" + suffix), cudnn = Rate("BM_CudnnLstm" + suffix);
      if (engine == 0 || cudnn == 0) continue;
      std::printf("RATIO engine/cuDNN, %-22s %.2fx  (target 1.20x: %s)\n", kWays[way],
                  engine / cudnn, engine >= 1.2 * cudnn ? "met" : "missed");
    }
  }
};

}  // namespace
}  // namespace cavs

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  cavs::bench::ApplyKernelEnvironment("lstm_gpu_benchmark");
  cavs::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
