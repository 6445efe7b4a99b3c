#include "distributed/sync_units.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/optimizer.h"
#include "core/status.h"
#include "distributed/half.h"

namespace cavs::distributed::internal {

namespace {

using core::Device;
using core::DType;
using core::Parameter;
using core::Tensor;

// `t` itself if it lives on `device`, else a copy there.
absl::StatusOr<Tensor> OnDevice(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  return t.CopyTo(device);
}

// Multiplies a float32 tensor by `factor` with the optimizer kernels of its device.
absl::Status ScaleInPlace(const Tensor& t, float factor) {
  if (factor == 1.0f || t.numel() == 0) return absl::OkStatus();
  CAVS_ASSIGN_OR_RETURN(core::OptimizerKernels * kernels,
                        core::GetOptimizerKernels(t.device().type));
  const core::FloatBuffer buffer{t.data<float>(), t.numel()};
  return kernels->Scale({&buffer, 1}, factor);
}

// Elements [offset, offset + n) of a flat tensor, as an [n, 1] view.
Tensor FlatSlice(const Tensor& flat, int64_t offset, int64_t n) {
  return flat.View(core::Shape({flat.numel(), 1})).Rows(offset, offset + n);
}

// Every parameter's gradient as [rows, cols] (scalars and vectors included).
Tensor GradMatrix(const Parameter& p) {
  return p.grad.View(core::Shape({p.value.rows(), p.value.cols()}));
}

Tensor HostScalar(int64_t v) {
  Tensor t = Tensor::Host({1}, DType::kInt64);
  t.data<int64_t>()[0] = v;
  return t;
}

// Starts every operation of one stage; done when all have completed.
class Stage {
 public:
  absl::Status Add(absl::StatusOr<std::unique_ptr<Work>> work) {
    CAVS_RETURN_IF_ERROR(work.status());
    works_.push_back(*std::move(work));
    return absl::OkStatus();
  }
  absl::StatusOr<bool> Test() {
    bool all = true;
    for (auto& w : works_) {
      CAVS_ASSIGN_OR_RETURN(bool done, w->Test());
      all = all && done;
    }
    return all;
  }
  void Clear() { works_.clear(); }

 private:
  std::vector<std::unique_ptr<Work>> works_;
};

// ---- AllReduce bucket
// ----------------------------------------------------------------------------

// The communicators a bucket's sum travels over. Flat: one allreduce on `flat` (shared with
// the other flat buckets, which start in the same order on every rank). Hierarchical: a reduce
// to the host's leader on `local`, an allreduce among the leaders on `leaders` (null off the
// leaders), a broadcast on `local`; both owned by this bucket (its stages start at different
// times on different ranks).
struct BucketComms {
  Communicator* flat = nullptr;
  std::unique_ptr<Communicator> local;
  std::unique_ptr<Communicator> leaders;
};

class BucketUnit final : public SyncUnit {
 public:
  BucketUnit(BucketComms comms, std::vector<Parameter*> params, std::vector<int> indices,
             std::string name, Compressor compressor, Tensor flat)
      : SyncUnit(std::move(indices), std::move(name)),
        comms_(std::move(comms)),
        params_(std::move(params)),
        compressor_(compressor),
        flat_(std::move(flat)) {}

  bool NeedsScaleAtStart() const override { return compressor_ == Compressor::kFp16; }

  absl::Status Start(float prescale) override {
    int64_t offset = 0;
    for (Parameter* p : params_) {
      CAVS_RETURN_IF_ERROR(core::ValidateGradient(*p));
      CAVS_RETURN_IF_ERROR(FlatSlice(flat_, offset, p->grad.numel()).CopyFrom(p->grad));
      offset += p->grad.numel();
    }
    wire_ = flat_;
    if (compressor_ == Compressor::kFp16) {
      // Scaled before the cast, so that sums of many samples stay within float16's range.
      CAVS_ASSIGN_OR_RETURN(Tensor host, OnDevice(flat_, Device::Cpu()));
      Tensor half = Tensor::Host(flat_.shape(), DType::kFloat16);
      FloatsToHalves(host.data<float>(), prescale, static_cast<uint16_t*>(half.raw_data()),
                     host.numel());
      CAVS_ASSIGN_OR_RETURN(wire_, OnDevice(half, flat_.device()));
    }
    stage_ = -1;
    return StartNext();
  }

  absl::StatusOr<bool> Advance() override {
    while (work_ != nullptr) {
      CAVS_ASSIGN_OR_RETURN(bool done, work_->Test());
      if (!done) return false;
      Progressed();
      CAVS_RETURN_IF_ERROR(StartNext());
    }
    return true;
  }

  absl::Status Complete(float scale) override {
    if (compressor_ == Compressor::kFp16) {
      CAVS_ASSIGN_OR_RETURN(Tensor half, OnDevice(wire_, Device::Cpu()));
      Tensor host = Tensor::Host(flat_.shape());
      HalvesToFloats(static_cast<const uint16_t*>(half.raw_data()), host.data<float>(),
                     host.numel());
      CAVS_RETURN_IF_ERROR(flat_.CopyFrom(host));
    } else {
      CAVS_RETURN_IF_ERROR(ScaleInPlace(flat_, scale));
    }
    int64_t offset = 0;
    for (Parameter* p : params_) {
      CAVS_RETURN_IF_ERROR(p->grad.CopyFrom(FlatSlice(flat_, offset, p->grad.numel())));
      offset += p->grad.numel();
    }
    work_.reset();
    return absl::OkStatus();
  }

 private:
  // Starts the next stage that has something to do (work_ stays null after the last).
  absl::Status StartNext() {
    work_.reset();
    if (comms_.flat != nullptr) {
      if (++stage_ == 0) {
        CAVS_ASSIGN_OR_RETURN(work_, comms_.flat->StartAllReduce(wire_));
      }
      return absl::OkStatus();
    }
    Communicator* local = comms_.local.get();
    Communicator* leaders = comms_.leaders.get();
    while (work_ == nullptr && ++stage_ < 3) {
      if (stage_ == 0 && local->world_size() > 1) {
        CAVS_ASSIGN_OR_RETURN(work_, local->StartReduce(wire_, 0));
      } else if (stage_ == 1 && leaders != nullptr && leaders->world_size() > 1) {
        CAVS_ASSIGN_OR_RETURN(work_, leaders->StartAllReduce(wire_));
      } else if (stage_ == 2 && local->world_size() > 1) {
        CAVS_ASSIGN_OR_RETURN(work_, local->StartBroadcast(wire_, 0));
      }
    }
    return absl::OkStatus();
  }

  BucketComms comms_;
  std::vector<Parameter*> params_;
  Compressor compressor_;
  Tensor flat_;  // float32 [sum of numel], on the communicator's buffer device
  Tensor wire_;  // what is summed: flat_, or its float16 copy
  int stage_ = -1;
  std::unique_ptr<Work> work_;
};

// ---- PS shard of a dense gradient
// ----------------------------------------------------------------

class PsDenseUnit final : public SyncUnit {
 public:
  PsDenseUnit(std::unique_ptr<Communicator> comm, Parameter* p, int index, std::string name,
              int64_t begin, int64_t end, int server)
      : SyncUnit({index}, std::move(name)),
        comm_(std::move(comm)),
        param_(p),
        begin_(begin),
        end_(end),
        server_(server) {}

  absl::Status Start(float) override {
    CAVS_RETURN_IF_ERROR(core::ValidateGradient(*param_));
    view_ = GradMatrix(*param_).Rows(begin_, end_);
    stage_ = 1;
    return stage_ops_.Add(comm_->StartReduce(view_, server_));
  }

  absl::StatusOr<bool> Advance() override {
    CAVS_ASSIGN_OR_RETURN(bool done, stage_ops_.Test());
    if (!done) return false;
    stage_ops_.Clear();
    Progressed();
    if (stage_ == 1) {  // the server holds the sum: send it back
      stage_ = 2;
      CAVS_RETURN_IF_ERROR(stage_ops_.Add(comm_->StartBroadcast(view_, server_)));
      return false;
    }
    return true;
  }

  absl::Status Complete(float scale) override { return ScaleInPlace(view_, scale); }

 private:
  std::unique_ptr<Communicator> comm_;
  Parameter* param_;
  int64_t begin_, end_;
  int server_;
  Tensor view_;
  int stage_ = 0;
  Stage stage_ops_;
};

// ---- Row-sparse gradients
// ------------------------------------------------------------------------

// What both sparse units share: this rank's rows of the shard, and the count exchange.
class SparseBase : public SyncUnit {
 public:
  const SparseRows* sparse_result() const override { return &result_; }

 protected:
  SparseBase(std::unique_ptr<Communicator> comm, Parameter* p, int index, std::string name,
             int64_t begin, int64_t end)
      : SyncUnit({index}, std::move(name)),
        comm_(std::move(comm)),
        param_(p),
        begin_(begin),
        end_(end) {}

  // Picks this rank's rows in [begin_, end_) and starts the allgather of every rank's count.
  absl::Status StartCounts() {
    CAVS_RETURN_IF_ERROR(core::ValidateGradient(*param_));
    result_ = SparseRows{};
    CAVS_ASSIGN_OR_RETURN(Tensor values, OnDevice(param_->grad_values, Device::Cpu()));
    const int64_t cols = param_->value.cols();
    std::vector<int64_t> picked;
    for (size_t i = 0; i < param_->grad_rows.size(); ++i) {
      const int64_t r = param_->grad_rows[i];
      if (r >= begin_ && r < end_) picked.push_back(static_cast<int64_t>(i));
    }
    const int64_t n = static_cast<int64_t>(picked.size());
    Tensor rows = Tensor::Host({n}, DType::kInt64);
    Tensor vals = Tensor::Host({n, cols});
    for (int64_t k = 0; k < n; ++k) {
      rows.data<int64_t>()[k] = param_->grad_rows[picked[k]];
      std::memcpy(vals.data<float>() + k * cols, values.data<float>() + picked[k] * cols,
                  cols * sizeof(float));
    }
    const Device dev = comm_->buffer_device();
    CAVS_ASSIGN_OR_RETURN(my_rows_, OnDevice(rows, dev));
    CAVS_ASSIGN_OR_RETURN(my_values_, OnDevice(vals, dev));
    CAVS_ASSIGN_OR_RETURN(Tensor count, OnDevice(HostScalar(n), dev));
    CAVS_ASSIGN_OR_RETURN(counts_, Tensor::Empty({comm_->world_size()}, DType::kInt64, dev));
    return stage_ops_.Add(comm_->StartAllGather(count, counts_));
  }

  // The counts gathered by StartCounts, on the host.
  absl::StatusOr<std::vector<int64_t>> Counts() const {
    CAVS_ASSIGN_OR_RETURN(Tensor host, OnDevice(counts_, Device::Cpu()));
    const int64_t* c = host.data<int64_t>();
    return std::vector<int64_t>(c, c + host.numel());
  }

  // Sums duplicates of gathered rows and values (on any device) into result_ (unscaled).
  absl::Status Reduce(const Tensor& rows, const Tensor& values) {
    CAVS_ASSIGN_OR_RETURN(Tensor host_rows, OnDevice(rows, Device::Cpu()));
    CAVS_ASSIGN_OR_RETURN(Tensor host_values, OnDevice(values, Device::Cpu()));
    result_ = SumDuplicateRows(host_rows.data<int64_t>(), host_rows.numel(), host_values);
    return absl::OkStatus();
  }

  int64_t cols() const { return param_->value.cols(); }

  std::unique_ptr<Communicator> comm_;
  Parameter* param_;
  int64_t begin_, end_;
  Tensor my_rows_, my_values_, counts_;
  Stage stage_ops_;
  SparseRows result_;
};

class SparseUnit final : public SparseBase {
 public:
  SparseUnit(std::unique_ptr<Communicator> comm, Parameter* p, int index, std::string name)
      : SparseBase(std::move(comm), p, index, std::move(name), 0, p->value.rows()) {}

  absl::Status Start(float) override {
    stage_ = 1;
    return StartCounts();
  }

  absl::StatusOr<bool> Advance() override {
    CAVS_ASSIGN_OR_RETURN(bool done, stage_ops_.Test());
    if (!done) return false;
    stage_ops_.Clear();
    Progressed();
    if (stage_ == 2) return true;
    stage_ = 2;  // counts known: gather the rows and values themselves
    CAVS_ASSIGN_OR_RETURN(std::vector<int64_t> counts, Counts());
    int64_t total = 0;
    for (int64_t c : counts) total += c;
    const Device dev = comm_->buffer_device();
    CAVS_ASSIGN_OR_RETURN(all_rows_, Tensor::Empty({total}, DType::kInt64, dev));
    CAVS_ASSIGN_OR_RETURN(all_values_, Tensor::Empty({total, cols()}, DType::kFloat32, dev));
    CAVS_RETURN_IF_ERROR(stage_ops_.Add(comm_->StartAllGatherV(my_rows_, all_rows_, counts)));
    CAVS_RETURN_IF_ERROR(stage_ops_.Add(comm_->StartAllGatherV(my_values_, all_values_, counts)));
    return false;
  }

  absl::Status Complete(float scale) override {
    CAVS_RETURN_IF_ERROR(Reduce(all_rows_, all_values_));
    return ScaleInPlace(result_.values, scale);
  }

 private:
  int stage_ = 0;
  Tensor all_rows_, all_values_;
};

class PsSparseUnit final : public SparseBase {
 public:
  PsSparseUnit(std::unique_ptr<Communicator> comm, Parameter* p, int index, std::string name,
               int64_t begin, int64_t end, int server)
      : SparseBase(std::move(comm), p, index, std::move(name), begin, end), server_(server) {}

  absl::Status Start(float) override {
    stage_ = 1;
    return StartCounts();
  }

  absl::StatusOr<bool> Advance() override {
    CAVS_ASSIGN_OR_RETURN(bool done, stage_ops_.Test());
    if (!done) return false;
    stage_ops_.Clear();
    Progressed();
    const bool is_server = comm_->rank() == server_;
    const Device dev = comm_->buffer_device();
    switch (stage_++) {
      case 1: {  // counts known: gather the shard's rows and values to the server
        CAVS_ASSIGN_OR_RETURN(std::vector<int64_t> counts, Counts());
        int64_t total = 0;
        for (int64_t c : counts) total += c;
        if (is_server) {
          CAVS_ASSIGN_OR_RETURN(wire_rows_, Tensor::Empty({total}, DType::kInt64, dev));
          CAVS_ASSIGN_OR_RETURN(wire_values_, Tensor::Empty({total, cols()}, DType::kFloat32, dev));
        }
        CAVS_RETURN_IF_ERROR(
            stage_ops_.Add(comm_->StartGatherV(my_rows_, wire_rows_, counts, server_)));
        return StartAndContinue(comm_->StartGatherV(my_values_, wire_values_, counts, server_));
      }
      case 2: {  // the server sums duplicates and announces how many rows it has
        if (is_server) CAVS_RETURN_IF_ERROR(Reduce(wire_rows_, wire_values_));
        CAVS_ASSIGN_OR_RETURN(unique_,
                              OnDevice(HostScalar(static_cast<int64_t>(result_.rows.size())), dev));
        return StartAndContinue(comm_->StartBroadcast(unique_, server_));
      }
      case 3: {  // everyone receives the server's rows and values
        CAVS_ASSIGN_OR_RETURN(Tensor n_host, OnDevice(unique_, Device::Cpu()));
        const int64_t n = n_host.data<int64_t>()[0];
        Tensor rows = Tensor::Host({n}, DType::kInt64);
        if (is_server && n > 0) {
          std::memcpy(rows.raw_data(), result_.rows.data(), n * sizeof(int64_t));
        }
        CAVS_ASSIGN_OR_RETURN(wire_rows_, OnDevice(rows, dev));
        if (is_server) {
          CAVS_ASSIGN_OR_RETURN(wire_values_, OnDevice(result_.values, dev));
        } else {
          CAVS_ASSIGN_OR_RETURN(wire_values_, Tensor::Empty({n, cols()}, DType::kFloat32, dev));
        }
        CAVS_RETURN_IF_ERROR(stage_ops_.Add(comm_->StartBroadcast(wire_rows_, server_)));
        return StartAndContinue(comm_->StartBroadcast(wire_values_, server_));
      }
      default:
        return true;
    }
  }

  absl::Status Complete(float scale) override {
    CAVS_ASSIGN_OR_RETURN(Tensor rows, OnDevice(wire_rows_, Device::Cpu()));
    const int64_t* r = rows.data<int64_t>();
    result_.rows.assign(r, r + rows.numel());
    CAVS_ASSIGN_OR_RETURN(Tensor values, OnDevice(wire_values_, Device::Cpu()));
    // A private copy: on the host, wire_values_ may share storage with the server's result.
    result_.values = Tensor::Host(values.shape());
    CAVS_RETURN_IF_ERROR(result_.values.CopyFrom(values));
    return ScaleInPlace(result_.values, scale);
  }

 private:
  absl::StatusOr<bool> StartAndContinue(absl::StatusOr<std::unique_ptr<Work>> work) {
    CAVS_RETURN_IF_ERROR(stage_ops_.Add(std::move(work)));
    return false;
  }

  int server_;
  int stage_ = 0;
  Tensor wire_rows_, wire_values_, unique_;
};

std::string ShardName(const char* kind, const Parameter& p, int64_t begin, int64_t end,
                      int server) {
  std::string name = absl::StrCat(kind, " '", p.name, "'");
  if (begin != 0 || end != p.value.rows()) absl::StrAppend(&name, " rows [", begin, ", ", end, ")");
  if (server >= 0) absl::StrAppend(&name, " on server ", server);
  return name;
}

}  // namespace

SparseRows SumDuplicateRows(const int64_t* rows, int64_t n, const Tensor& values) {
  const int64_t cols = values.cols();
  SparseRows out;
  out.rows.assign(rows, rows + n);
  std::sort(out.rows.begin(), out.rows.end());
  out.rows.erase(std::unique(out.rows.begin(), out.rows.end()), out.rows.end());
  out.values = Tensor::Host({static_cast<int64_t>(out.rows.size()), cols});
  float* dst = out.values.data<float>();
  const float* src = values.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k =
        std::lower_bound(out.rows.begin(), out.rows.end(), rows[i]) - out.rows.begin();
    for (int64_t c = 0; c < cols; ++c) dst[k * cols + c] += src[i * cols + c];
  }
  return out;
}

namespace {

absl::StatusOr<std::unique_ptr<SyncUnit>> MakeBucket(BucketComms comms, core::Device device,
                                                     const core::ParameterStore& store,
                                                     std::vector<int> params, int group,
                                                     Compressor compressor) {
  std::vector<Parameter*> ps;
  std::vector<std::string> names;
  int64_t total = 0;
  for (int i : params) {
    ps.push_back(store.parameters()[i].get());
    names.push_back(ps.back()->name);
    total += ps.back()->value.numel();
  }
  CAVS_ASSIGN_OR_RETURN(Tensor flat, Tensor::Zeros({total}, DType::kFloat32, device));
  std::string name = absl::StrCat("allreduce bucket ", group, " (", absl::StrJoin(names, ", "),
                                  compressor == Compressor::kFp16 ? "; fp16" : "",
                                  comms.flat == nullptr ? "; hierarchical" : "", ")");
  return std::unique_ptr<SyncUnit>(new BucketUnit(std::move(comms), std::move(ps),
                                                  std::move(params), std::move(name), compressor,
                                                  std::move(flat)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SyncUnit>> MakeBucketUnit(Communicator* comm,
                                                         const core::ParameterStore& store,
                                                         std::vector<int> params, int group,
                                                         Compressor compressor) {
  BucketComms comms;
  comms.flat = comm;
  return MakeBucket(std::move(comms), comm->buffer_device(), store, std::move(params), group,
                    compressor);
}

absl::StatusOr<std::unique_ptr<SyncUnit>> MakeHierarchicalBucketUnit(
    std::unique_ptr<Communicator> local, std::unique_ptr<Communicator> leaders,
    const core::ParameterStore& store, std::vector<int> params, int group, Compressor compressor) {
  if (local == nullptr) return absl::InvalidArgumentError("hierarchical bucket: no local group");
  const core::Device device = local->buffer_device();
  BucketComms comms;
  comms.local = std::move(local);
  comms.leaders = std::move(leaders);
  return MakeBucket(std::move(comms), device, store, std::move(params), group, compressor);
}

absl::StatusOr<std::unique_ptr<SyncUnit>> MakePsUnit(std::unique_ptr<Communicator> comm,
                                                     const core::ParameterStore& store, int param,
                                                     int64_t row_begin, int64_t row_end,
                                                     int server) {
  Parameter* p = store.parameters()[param].get();
  if (p->sparse_grad) {
    return std::unique_ptr<SyncUnit>(
        new PsSparseUnit(std::move(comm), p, param, ShardName("ps", *p, row_begin, row_end, server),
                         row_begin, row_end, server));
  }
  return std::unique_ptr<SyncUnit>(new PsDenseUnit(std::move(comm), p, param,
                                                   ShardName("ps", *p, row_begin, row_end, server),
                                                   row_begin, row_end, server));
}

absl::StatusOr<std::unique_ptr<SyncUnit>> MakeSparseUnit(std::unique_ptr<Communicator> comm,
                                                         const core::ParameterStore& store,
                                                         int param) {
  Parameter* p = store.parameters()[param].get();
  return std::unique_ptr<SyncUnit>(new SparseUnit(
      std::move(comm), p, param, ShardName("sparse allgather", *p, 0, p->value.rows(), -1)));
}

}  // namespace cavs::distributed::internal
