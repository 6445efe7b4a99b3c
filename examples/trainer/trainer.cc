#include "examples/trainer/trainer.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status.h"
#include "examples/trainer/output_files.h"
#include "ops/kernels.h"
#include "scheduler/plan.h"
#include "scheduler/plan_queue.h"

namespace cavs::trainer {
namespace {

constexpr size_t kEvalBatch = 200;

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::vector<scheduler::Graph> Slice(const std::vector<scheduler::Graph>& all,
                                    const std::vector<size_t>& order, size_t begin, size_t end) {
  std::vector<scheduler::Graph> out;
  out.reserve(end - begin);
  for (size_t i = begin; i < end; ++i) out.push_back(all[order[i]]);
  return out;
}

// An evaluation's figures in the dev_* fields of an epoch record (the epoch line's format).
EpochRecord Figures(const EvalMetrics& m) {
  EpochRecord r;
  r.dev_loss = m.MeanLoss();
  r.dev_root_acc = m.RootAccuracy();
  r.dev_binary_acc = m.BinaryAccuracy();
  r.dev_all_acc = m.AllNodesAccuracy();
  r.dev_perplexity = m.Perplexity();
  return r;
}

// ',"<prefix>_epoch":3,"<prefix>_root_acc":0.45,"<prefix>_binary_acc":0.84' (or perplexity).
void AppendTestJson(std::string* json, const char* prefix, int epoch, const EvalMetrics& m,
                    bool language_model) {
  absl::StrAppendFormat(json, ",\"%s_epoch\":%d", prefix, epoch);
  if (language_model) {
    absl::StrAppend(json, ",\"", prefix, "_perplexity\":", JsonNumber(m.Perplexity()));
  } else {
    absl::StrAppend(json, ",\"", prefix, "_root_acc\":", JsonNumber(m.RootAccuracy()), ",\"",
                    prefix, "_binary_acc\":", JsonNumber(m.BinaryAccuracy()));
  }
}

}  // namespace

uint64_t StepDropoutSeed(uint64_t seed, int64_t step) {
  return core::HashName(absl::StrCat("dropout:", seed, ":", step));
}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const TrainerConfig& config,
                                                         const TrainOptions& options) {
  CAVS_RETURN_IF_ERROR(ValidateConfig(config));
  // Before the data loads, so that a misconfigured output fails at once, not after an epoch.
  CAVS_RETURN_IF_ERROR(CheckOutputs(config));
  std::unique_ptr<Trainer> t(new Trainer(config, options));
  CAVS_RETURN_IF_ERROR(t->Build());
  if (!config.checkpoint_dir.empty() && t->is_chief()) {
    CAVS_RETURN_IF_ERROR(t->RemoveStaleCheckpointFiles());
  }
  if (config.resume) CAVS_RETURN_IF_ERROR(t->Resume());
  if (t->distributed()) CAVS_RETURN_IF_ERROR(t->CheckSameRun());
  return t;
}

absl::Status Trainer::Build() {
  CAVS_ASSIGN_OR_RETURN(kind_, ParseModelKind(config_.model));
  CAVS_ASSIGN_OR_RETURN(data_, LoadDataset(config_));
  vertex::models::CellConfig cell{data_.vocab_size, config_.embed, config_.hidden, data_.classes,
                                  static_cast<float>(config_.dropout)};
  // The sizes come from flags: an error here (a row too wide for a vertex function, parameters
  // that do not fit in memory) names them, not only a shape or a byte count.
  auto model_error = [&](const absl::Status& s) {
    return absl::Status(
        s.code(), absl::StrCat("cannot build the model --model=", config_.model,
                               " --hidden=", config_.hidden, " --embed=", config_.embed,
                               " (vocabulary of ", data_.vocab_size, " words): ", s.message()));
  };
  absl::StatusOr<vertex::Function> f = MakeModel(kind_, cell);
  if (!f.ok()) return model_error(f.status());
  function_ = std::make_unique<vertex::Function>(*std::move(f));
  CAVS_ASSIGN_OR_RETURN(core::Device device, core::ParseDevice(config_.device));
  store_ = std::make_unique<core::ParameterStore>(config_.seed, device);
  scheduler::EngineOptions eo;
  eo.device = device;
  if (config_.kernels.has_value() || config_.threads > 0) {
    eo.kernels = config_.kernels.value_or(ops::GetKernelOptions());
    if (config_.threads > 0) eo.kernels->cpu.threads = config_.threads;
  }
  CAVS_ASSIGN_OR_RETURN(eo.plan.policy, scheduler::ParsePolicy(config_.policy));
  absl::StatusOr<std::unique_ptr<scheduler::Engine>> engine =
      scheduler::Engine::Create(function_.get(), store_.get(), eo);
  if (!engine.ok()) return model_error(engine.status());
  engine_ = *std::move(engine);
  core::OptimizerConfig oc;
  CAVS_ASSIGN_OR_RETURN(oc.kind, core::ParseOptimizerKind(config_.optimizer));
  oc.lr = static_cast<float>(config_.lr);
  oc.weight_decay = static_cast<float>(config_.weight_decay);
  oc.clip_norm = static_cast<float>(config_.clip);
  CAVS_ASSIGN_OR_RETURN(optimizer_, core::MakeOptimizer(oc));
  return SetUpDistributed();
}

absl::StatusOr<double> Trainer::TrainEpoch(int epoch, double* trees_per_sec) {
  if (distributed()) return TrainEpochDistributed(epoch, trees_per_sec);
  const auto& train = data_.train;
  std::vector<size_t> order(train.size());
  std::iota(order.begin(), order.end(), size_t{0});
  shuffle_rng_.Shuffle(order);
  ProgressBar bar(options_.out, options_.progress && options_.out != nullptr);
  bar.Start(epoch, static_cast<int64_t>(train.size()));
  auto start = std::chrono::steady_clock::now();
  double loss_sum = 0.0;
  int64_t labelled = 0;
  std::unique_ptr<scheduler::PlanQueue> queue =
      QueueBatches(train, order, 0, train.size(), config_.batch);
  // Each batch's results are read after the next batch and its optimizer step are queued
  // (Engine::Submit/Finish), so on a GPU the host queues batch i+1 while the device runs
  // batch i; the loss shown lags one batch. On the CPU Submit computes everything.
  std::optional<scheduler::PendingRun> pending;
  size_t pending_end = 0;
  int64_t pending_step = 0;
  auto finish = [&]() -> absl::Status {
    if (!pending.has_value()) return absl::OkStatus();
    const int64_t t = TraceRecorder::Now();
    absl::StatusOr<scheduler::RunResult> r = engine_->Finish(std::move(*pending));
    pending.reset();
    CAVS_RETURN_IF_ERROR(r.status());
    trace_.Span("results", t, {{"step", pending_step}});
    loss_sum += r->loss_sum;
    labelled += r->labelled;
    bar.Update(static_cast<int64_t>(pending_end), labelled > 0 ? loss_sum / labelled : 0.0);
    return absl::OkStatus();
  };
  for (size_t begin = 0; begin < train.size(); begin += config_.batch) {
    size_t end = std::min(train.size(), begin + config_.batch);
    const int64_t step = optimizer_->step(), t0 = TraceRecorder::Now();
    CAVS_ASSIGN_OR_RETURN(scheduler::PlannedBatch planned, queue->Next());
    const std::vector<scheduler::Graph>& batch = *planned.graphs;
    trace_.Span("data", t0, {{"step", step}, {"samples", static_cast<int64_t>(batch.size())}});
    scheduler::RunOptions ro;
    ro.training = true;
    ro.backward = true;
    ro.dropout_seed = StepDropoutSeed(config_.seed, step);
    const int64_t t1 = TraceRecorder::Now();
    CAVS_RETURN_IF_ERROR(store_->ZeroGrad());
    CAVS_ASSIGN_OR_RETURN(scheduler::PendingRun next, engine_->Submit(planned.plan, ro));
    trace_.Span("forward+backward", t1, {{"step", step}, {"rounds", engine_->stats().rounds}});
    const int64_t t2 = TraceRecorder::Now();
    CAVS_RETURN_IF_ERROR(optimizer_->Step(*store_));
    trace_.Span("optimizer", t2, {{"step", step}});
    if (options_.after_step) options_.after_step(optimizer_->step());
    CAVS_RETURN_IF_ERROR(finish());
    pending = std::move(next);
    pending_end = end;
    pending_step = step;
  }
  CAVS_RETURN_IF_ERROR(finish());
  bar.Finish();
  double seconds = Since(start);
  *trees_per_sec = seconds > 0 ? train.size() / seconds : 0.0;
  return labelled > 0 ? loss_sum / labelled : 0.0;
}

absl::StatusOr<EvalMetrics> Trainer::Evaluate(const std::vector<scheduler::Graph>& graphs) {
  const int64_t t0 = TraceRecorder::Now();
  if (!distributed()) {
    CAVS_ASSIGN_OR_RETURN(EvalMetrics m, EvaluateShard(graphs, 0, graphs.size()));
    trace_.Span("eval", t0, {{"samples", static_cast<int64_t>(graphs.size())}});
    return m;
  }
  auto [first, last] = RankSlice(0, graphs.size(), rank(), world_size());
  CAVS_ASSIGN_OR_RETURN(EvalMetrics m, EvaluateShard(graphs, first, last));
  std::vector<double> reals = {m.loss_sum};
  std::vector<int64_t> counts = {m.labelled,     m.correct,      m.roots,
                                 m.root_correct, m.binary_roots, m.binary_correct};
  CAVS_RETURN_IF_ERROR(SumOverRanks(&reals, &counts));
  m = EvalMetrics{reals[0], counts[0], counts[1], counts[2], counts[3], counts[4], counts[5]};
  trace_.Span("eval", t0, {{"samples", static_cast<int64_t>(last - first)}});
  return m;
}

int Trainer::PlanThreads() const {
  if (config_.plan_threads >= 0) return config_.plan_threads;
  if (config_.device == "cpu") return 0;
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(cores - 1, 1, 4);
}

std::unique_ptr<scheduler::PlanQueue> Trainer::QueueBatches(
    const std::vector<scheduler::Graph>& graphs, const std::vector<size_t>& order, size_t first,
    size_t last, size_t batch, bool rank_slice) const {
  const size_t count = last > first ? (last - first + batch - 1) / batch : 0;
  const int rank = this->rank(), world = world_size();
  return std::make_unique<scheduler::PlanQueue>(
      engine_.get(), static_cast<int64_t>(count),
      [&graphs, &order, first, last, batch, rank_slice, rank, world](int64_t i) {
        size_t begin = first + static_cast<size_t>(i) * batch;
        size_t end = std::min(last, begin + batch);
        if (rank_slice) std::tie(begin, end) = RankSlice(begin, end, rank, world);
        return std::make_shared<const std::vector<scheduler::Graph>>(
            Slice(graphs, order, begin, end));
      },
      scheduler::PlanQueueOptions{.threads = PlanThreads()});
}

absl::StatusOr<bool> Trainer::FoldForEval(const std::vector<scheduler::Graph>& graphs, size_t first,
                                          size_t last) {
  if (config_.fold_eval == "off" || engine_->foldable_projections() == 0) return false;
  if (config_.fold_eval == "auto") {
    // Folding multiplies every row of the table once; the evaluation multiplies one row per
    // token instead, and the folded rows' gather is not free: on the CPU, SST's dev set (1,101
    // trees, about 1.3 tokens a vocabulary row) evaluated in 122-130 ms plain and 140-148
    // folded. So only where the tokens outnumber the vocabulary four times.
    int64_t tokens = 0, vocab = 0;
    for (size_t i = first; i < last; ++i) {
      for (int32_t t : graphs[i].tokens) tokens += t >= 0 ? 1 : 0;
    }
    for (const auto& p : store_->parameters()) {
      if (p->sparse_grad) vocab = std::max(vocab, p->value.rows());
    }
    if (tokens <= 4 * vocab) return false;
  }
  CAVS_RETURN_IF_ERROR(engine_->FoldInputProjections());  // from the parameters as they are now
  ++evaluations_folded_;
  return true;
}

absl::StatusOr<EvalMetrics> Trainer::EvaluateShard(const std::vector<scheduler::Graph>& graphs,
                                                   size_t first, size_t last) {
  EvalMetrics m;
  std::vector<size_t> order(graphs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  scheduler::RunOptions ro;
  ro.training = false;
  ro.backward = false;
  ro.keep_outputs = !data_.language_model;  // the binary accuracy reads the root's logits
  ro.batch_invariant = true;  // a sample's figures as cavs-serve gives them, whatever its batch
  CAVS_ASSIGN_OR_RETURN(ro.folded_projections, FoldForEval(graphs, first, last));
  std::unique_ptr<scheduler::PlanQueue> queue =
      QueueBatches(graphs, order, first, last, kEvalBatch);
  // Batch i's results are read after batch i+1 is queued, as in TrainEpoch.
  std::optional<scheduler::PendingRun> pending;
  std::shared_ptr<const std::vector<scheduler::Graph>> pending_batch;
  auto finish = [&]() -> absl::Status {
    if (!pending.has_value()) return absl::OkStatus();
    absl::StatusOr<scheduler::RunResult> r = engine_->Finish(std::move(*pending));
    pending.reset();
    CAVS_RETURN_IF_ERROR(r.status());
    return AccumulateMetrics(*pending_batch, *r, !data_.language_model, data_.classes, &m);
  };
  for (size_t begin = first; begin < last; begin += kEvalBatch) {
    CAVS_ASSIGN_OR_RETURN(scheduler::PlannedBatch planned, queue->Next());
    CAVS_ASSIGN_OR_RETURN(scheduler::PendingRun next, engine_->Submit(planned.plan, ro));
    CAVS_RETURN_IF_ERROR(finish());
    pending = std::move(next);
    pending_batch = planned.graphs;
  }
  CAVS_RETURN_IF_ERROR(finish());
  engine_->ClearFoldedProjections();  // the tables (55 MB on SST) are not kept for training
  return m;
}

absl::Status Trainer::Run() {
  if (!options_.startup_line.empty()) Say(options_.startup_line);
  absl::Status status = RunEpochs();
  if (!config_.trace.empty()) {
    absl::Status written = trace_.Write(TracePath(config_.trace, rank()));
    if (status.ok()) status = written;
  }
  return status;
}

absl::Status Trainer::RunEpochs() {
  for (int epoch = epochs_done_ + 1; epoch <= config_.epochs; ++epoch) {
    EpochRecord record;
    record.epoch = epoch;
    CAVS_ASSIGN_OR_RETURN(record.train_loss, TrainEpoch(epoch, &record.trees_per_sec));
    CAVS_ASSIGN_OR_RETURN(EvalMetrics dev, Evaluate(data_.dev));
    const EpochRecord figures = Figures(dev);
    record.dev_loss = figures.dev_loss;
    record.dev_root_acc = figures.dev_root_acc;
    record.dev_binary_acc = figures.dev_binary_acc;
    record.dev_all_acc = figures.dev_all_acc;
    record.dev_perplexity = figures.dev_perplexity;
    CAVS_RETURN_IF_ERROR(FinishEpoch(record));
  }
  if (auto_ != nullptr && !auto_->decided()) CAVS_RETURN_IF_ERROR(ConcludeAutoStrategy());
  return FinishRun();
}

absl::StatusOr<std::vector<core::Tensor>> Trainer::CopyParameters() const {
  std::vector<core::Tensor> out;
  for (const auto& p : store_->parameters()) {
    core::Tensor host = core::Tensor::Host(p->value.shape(), p->value.dtype());
    CAVS_RETURN_IF_ERROR(host.CopyFrom(p->value));
    out.push_back(std::move(host));
  }
  return out;
}

absl::Status Trainer::SetParameters(const std::vector<core::Tensor>& values) {
  const auto& params = store_->parameters();
  CAVS_CHECK(values.size() == params.size(), "kept parameters of another store");
  for (size_t i = 0; i < params.size(); ++i)
    CAVS_RETURN_IF_ERROR(params[i]->value.CopyFrom(values[i]));
  return absl::OkStatus();
}

absl::Status Trainer::FinishRun() {
  const bool test = !data_.test.empty();
  std::optional<EvalMetrics> last_test, best_test;
  if (test) {
    CAVS_ASSIGN_OR_RETURN(last_test, Evaluate(data_.test));
  }
  // Without a kept epoch (none beat another after a resume whose best did not reload), the
  // last epoch's parameters are the ones tested and saved.
  const int best = best_.epoch != 0 ? best_.epoch : epochs_done_;
  if (best == epochs_done_) {
    CAVS_RETURN_IF_ERROR(SaveBest(best));
    return WriteOutputs(best, test ? &*last_test : nullptr, nullptr);
  }
  CAVS_ASSIGN_OR_RETURN(std::vector<core::Tensor> last, CopyParameters());
  CAVS_RETURN_IF_ERROR(SetParameters(best_.values));
  absl::Status status = absl::OkStatus();
  if (test) {
    absl::StatusOr<EvalMetrics> m = Evaluate(data_.test);
    if (m.ok()) best_test = *m;
    status = m.status();
  }
  if (status.ok()) status = SaveBest(best);
  CAVS_RETURN_IF_ERROR(SetParameters(last));  // the store ends with the last epoch's
  CAVS_RETURN_IF_ERROR(status);
  return WriteOutputs(best, test ? &*best_test : nullptr, test ? &*last_test : nullptr);
}

absl::Status Trainer::FinishEpoch(EpochRecord record) {
  if (!std::isfinite(record.train_loss)) {
    // Nothing of this epoch is kept: its parameters are garbage, and a checkpoint of them would
    // only be resumed into the same wall.
    return absl::OutOfRangeError(absl::StrFormat(
        "training diverged in epoch %d: the training loss is %s; try a lower --lr (this run has "
        "--lr=%g)%s",
        record.epoch, std::isnan(record.train_loss) ? "NaN" : "infinite", config_.lr,
        config_.clip > 0 ? "" : " or --clip"));
  }
  epochs_done_ = record.epoch;
  record.seconds = Elapsed();
  curve_.push_back(record);
  Say(EpochLine(record, config_.epochs, data_.language_model));
  const double score = DevScore(record, data_.language_model);
  if (KeepsBest() && (best_.epoch == 0 || score > best_.score)) {
    CAVS_ASSIGN_OR_RETURN(best_.values, CopyParameters());
    best_.epoch = record.epoch;
    best_.score = score;
  }
  CAVS_RETURN_IF_ERROR(OutputStatus());      // a full stdout stops the run at its first line
  if (!is_chief()) return absl::OkStatus();  // rank 0 alone writes files
  // The checkpoint first, then the logs, each rewritten whole from the curve (which the
  // checkpoint holds): a failure in between leaves logs that the resumed run rewrites, never a
  // line twice or a checkpoint lost to a log's error.
  if (!config_.checkpoint_dir.empty()) {
    const int64_t t0 = TraceRecorder::Now();
    CAVS_RETURN_IF_ERROR(SaveEpochCheckpoint());
    trace_.Span("checkpoint", t0, {{"epoch", record.epoch}});
  }
  if (!config_.log_json.empty()) {
    std::string lines;
    for (const EpochRecord& r : curve_) {
      absl::StrAppend(&lines, EpochJson(r, config_.model, data_.language_model), "\n");
    }
    CAVS_RETURN_IF_ERROR(WriteTextFile("--log-json", config_.log_json, lines));
  }
  if (!config_.csv.empty()) {
    CAVS_RETURN_IF_ERROR(WriteCsv("--csv", config_.csv, curve_, data_.language_model));
  }
  return absl::OkStatus();
}

absl::Status Trainer::WriteOutputs(int test_epoch, const EvalMetrics* test,
                                   const EvalMetrics* last_test) {
  std::string csv = config_.csv;
  if (!config_.plot.empty() && is_chief()) {
    if (csv.empty()) {
      csv = config_.plot + ".csv";
      CAVS_RETURN_IF_ERROR(WriteCsv("--plot", csv, curve_, data_.language_model));
    }
    CAVS_ASSIGN_OR_RETURN(std::string note, PlotCurve(csv, config_.plot, data_.language_model,
                                                      absl::StrCat("cavs-train ", config_.model)));
    Say(note);
  }
  EpochRecord last = curve_.empty() ? EpochRecord{} : curve_.back();
  std::string json = EpochJson(last, config_.model, data_.language_model);
  json.pop_back();  // reopen the object
  if (!curve_.empty()) {
    const EpochRecord& best = BestEpoch(curve_, data_.language_model);
    Say(BestLine(best, data_.language_model));
    absl::StrAppendFormat(&json, ",\"best_epoch\":%d", best.epoch);
    if (data_.language_model) {
      absl::StrAppend(&json, ",\"best_dev_perplexity\":", JsonNumber(best.dev_perplexity));
    } else {
      absl::StrAppend(&json, ",\"best_dev_root_acc\":", JsonNumber(best.dev_root_acc),
                      ",\"best_dev_binary_acc\":", JsonNumber(best.dev_binary_acc));
    }
  }
  absl::StrAppendFormat(&json, ",\"epochs\":%d,\"train_samples\":%d,\"dev_samples\":%d",
                        epochs_done_, data_.train.size(), data_.dev.size());
  absl::StrAppendFormat(&json, ",\"hidden\":%d,\"embed\":%d,\"vocab\":%d,\"parameters\":%d",
                        config_.hidden, config_.embed, data_.vocab_size, store_->NumElements());
  if (world_size() > 1) {
    // This rank's traffic under CommStats' payload model (the wire count is the network's).
    const distributed::CommStats comm = comm_->stats();
    absl::StrAppendFormat(&json, ",\"ranks\":%d,\"comm_bytes_sent\":%d,\"comm_bytes_received\":%d",
                          world_size(), comm.bytes_sent, comm.bytes_received);
  }
  if (test != nullptr) {
    // The best dev epoch's parameters, or (a resumed run whose best did not reload) the best
    // kept since.
    const bool best =
        !curve_.empty() && test_epoch == BestEpoch(curve_, data_.language_model).epoch;
    Say(TestLine(test_epoch, best ? "best dev" : "best kept", Figures(*test),
                 data_.language_model));
    if (last_test != nullptr) {
      Say(TestLine(epochs_done_, "last", Figures(*last_test), data_.language_model));
    }
    AppendTestJson(&json, "test", test_epoch, *test, data_.language_model);
    AppendTestJson(&json, "last_test", epochs_done_, last_test != nullptr ? *last_test : *test,
                   data_.language_model);
  }
  if (!config_.save_best.empty()) {
    Say(absl::StrCat("--save-best: the parameters of epoch ", test_epoch, " are in ",
                     config_.save_best));
  }
  summary_json_ = json + "}";
  Say("SUMMARY " + summary_json_);
  return OutputStatus();
}

double Trainer::Elapsed() const { return elapsed_before_ + Since(start_); }

void Trainer::Say(const std::string& line) const {
  if (options_.out == nullptr || !is_chief()) return;
  errno = 0;
  *options_.out << line << std::endl;
  if (!*options_.out && out_error_ == 0) out_error_ = errno != 0 ? errno : EIO;
}

absl::Status Trainer::OutputStatus() const {
  if (out_error_ == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("cannot write the run's output (the epoch lines, "
                   "stdout for cavs-train): ",
                   std::strerror(out_error_)));
}

}  // namespace cavs::trainer
