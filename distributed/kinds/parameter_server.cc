#include "distributed/kinds/parameter_server.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace cavs::distributed::kinds {

namespace {

using core::Device;
using core::DType;
using core::Parameter;
using core::Tensor;
using internal::OnDevice;

// ---- Running units

// Every parameter's gradient as [rows, cols] (scalars and vectors included).
Tensor GradMatrix(const Parameter& p) {
  return p.grad.View(core::Shape({p.value.rows(), p.value.cols()}));
}

// Adds `from` into `into` elementwise (float32, same size, any device: summed on the host).
absl::Status AddInto(Tensor into, const Tensor& from) {
  CAVS_ASSIGN_OR_RETURN(Tensor sum, OnDevice(into, Device::Cpu()));
  CAVS_ASSIGN_OR_RETURN(Tensor add, OnDevice(from, Device::Cpu()));
  float* __restrict__ s = sum.data<float>();
  const float* __restrict__ a = add.data<float>();
  for (int64_t i = 0, n = sum.numel(); i < n; ++i) s[i] += a[i];
  if (sum.raw_data() != into.raw_data()) CAVS_RETURN_IF_ERROR(into.CopyFrom(sum));
  return absl::OkStatus();
}

// [a, b) ranges cutting `n` items of `item_bytes` bytes each into pieces of at most `piece_bytes`
// (at least one item a piece; 0 or less: one piece); one range [0, 0) where n is 0.
std::vector<std::pair<int64_t, int64_t>> Cut(int64_t n, int64_t item_bytes, int64_t piece_bytes) {
  const int64_t step =
      piece_bytes > 0 ? std::max<int64_t>(1, piece_bytes / std::max<int64_t>(1, item_bytes)) : n;
  std::vector<std::pair<int64_t, int64_t>> pieces;
  for (int64_t a = 0; a < n; a += step) pieces.push_back({a, std::min(n, a + step)});
  if (pieces.empty()) pieces.push_back({0, 0});
  return pieces;
}

// Starts sending the root's `buf` straight to every other rank (the root) or receiving it from
// the root (the others), tagged `tag`: a broadcast without a tree.
absl::Status StartFanOut(Communicator& comm, const Tensor& buf, int root, int tag,
                         internal::Stage& stage) {
  if (comm.rank() != root) return stage.Add(comm.StartRecv(buf, root, tag));
  for (int peer = 0; peer < comm.world_size(); ++peer) {
    if (peer != root) CAVS_RETURN_IF_ERROR(stage.Add(comm.StartSend(buf, peer, tag)));
  }
  return absl::OkStatus();
}

class PsDenseUnit final : public internal::SyncUnit {
 public:
  PsDenseUnit(std::unique_ptr<Communicator> comm, Parameter* p, int index, std::string name,
              int64_t begin, int64_t end, int server, PsRoute route)
      : SyncUnit({index}, std::move(name)),
        comm_(std::move(comm)),
        param_(p),
        begin_(begin),
        end_(end),
        server_(server),
        route_(route),
        piece_bytes_(comm_->PieceBytes()) {}

  absl::Status Start(float) override {
    CAVS_RETURN_IF_ERROR(core::ValidateGradient(*param_));
    view_ = GradMatrix(*param_).Rows(begin_, end_);
    stage_ = 1;
    // In pieces of at most piece_bytes_ (whole elements), all under way at once.
    pieces_ = Cut(view_.numel(), static_cast<int64_t>(SizeOf(view_.dtype())), piece_bytes_);
    if (route_ == PsRoute::kDirect) return StartDirect();
    for (size_t i = 0; i < pieces_.size(); ++i) {
      CAVS_RETURN_IF_ERROR(stage_ops_.Add(comm_->StartReduce(PieceOf(view_, i), server_)));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<bool> Advance() override {
    if (route_ == PsRoute::kDirect) return AdvanceDirect();
    CAVS_ASSIGN_OR_RETURN(bool done, stage_ops_.Test());
    if (!done) return false;
    stage_ops_.Clear();
    Progressed();
    if (stage_ == 1) {  // the server holds the sum: send it back
      stage_ = 2;
      for (size_t i = 0; i < pieces_.size(); ++i) {
        CAVS_RETURN_IF_ERROR(stage_ops_.Add(comm_->StartBroadcast(PieceOf(view_, i), server_)));
      }
      return false;
    }
    return true;
  }

  absl::Status Complete(float scale) override { return internal::ScaleInPlace(view_, scale); }

 private:
  // Piece i of `whole` (the shard, or a buffer of its size): its elements pieces_[i] of it
  // flattened; where there is one piece, all of it in the shard's shape (so that a single-piece
  // shard keeps its shape on the wire).
  Tensor PieceOf(const Tensor& whole, size_t i) const {
    if (pieces_.size() == 1) return whole.View(view_.shape());
    return whole.View(core::Shape({view_.numel(), 1})).Rows(pieces_[i].first, pieces_[i].second);
  }

  // The direct route, piece by piece: each piece goes to the server as soon as it can; the
  // server adds a piece's arrivals in rank order once all are in and sends the sum straight
  // back, while later pieces are still arriving. Every message between a pair goes in piece
  // order, both ways (a piece turns back only after the pieces before it have), and so matches
  // in order with one tag: MPI matches a pair's messages of one tag in the order they were
  // posted, NCCL its sends and receives in the order they were queued.
  absl::Status StartDirect() {
    const int world = comm_->world_size();
    const bool server = comm_->rank() == server_;
    piece_ops_.clear();
    piece_ops_.resize(pieces_.size());
    piece_stage_.assign(pieces_.size(), 1);
    if (server &&
        (incoming_.size() != static_cast<size_t>(world) || incoming_[0].numel() != view_.numel() ||
         incoming_[0].device() != view_.device())) {
      incoming_.assign(world, Tensor());
      for (int r = 0; r < world; ++r) {
        if (r == server_) continue;
        CAVS_ASSIGN_OR_RETURN(incoming_[r],
                              Tensor::Empty({view_.numel(), 1}, view_.dtype(), view_.device()));
      }
    }
    for (size_t i = 0; i < pieces_.size(); ++i) {
      if (!server) {
        CAVS_RETURN_IF_ERROR(piece_ops_[i].Add(comm_->StartSend(PieceOf(view_, i), server_, 0)));
        continue;
      }
      for (int r = 0; r < world; ++r) {
        if (r == server_) continue;
        CAVS_RETURN_IF_ERROR(piece_ops_[i].Add(comm_->StartRecv(PieceOf(incoming_[r], i), r, 0)));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<bool> AdvanceDirect() {
    const bool server = comm_->rank() == server_;
    bool turning = true;    // every piece before this one has turned back
    bool returning = true;  // every piece before this one on its way back is through
    for (size_t i = 0; i < pieces_.size(); ++i) {
      int& stage = piece_stage_[i];
      // A poll of one operation progresses them all (Stage::Test): a later piece's return,
      // started after this one's, is looked at once the earlier ones are through.
      if (stage == 3 || (stage == 1 && !turning) || (stage == 2 && !returning)) continue;
      CAVS_ASSIGN_OR_RETURN(bool done, piece_ops_[i].Test());
      if (!done) {
        turning = turning && stage == 2;
        returning = returning && stage == 1;
        continue;
      }
      piece_ops_[i].Clear();
      Progressed();
      if (stage++ == 2) continue;  // the sum is back (or sent): done
      // Arrived (the server) or left (the others, whose buffer can now take the sum): the
      // server adds the arrivals in rank order and the sum goes back.
      const Tensor piece = PieceOf(view_, i);
      if (server) {
        for (int r = 0; r < comm_->world_size(); ++r) {
          if (r != server_) CAVS_RETURN_IF_ERROR(AddInto(piece, PieceOf(incoming_[r], i)));
        }
      }
      CAVS_RETURN_IF_ERROR(StartFanOut(*comm_, piece, server_, 0, piece_ops_[i]));
    }
    return std::all_of(piece_stage_.begin(), piece_stage_.end(), [](int s) { return s == 3; });
  }

  std::unique_ptr<Communicator> comm_;
  Parameter* param_;
  int64_t begin_, end_;
  int server_;
  PsRoute route_;
  int64_t piece_bytes_;  // the communicator's PieceBytes, fixed for its life
  Tensor view_;
  std::vector<std::pair<int64_t, int64_t>> pieces_;  // [a, b) elements of the flat shard
  int stage_ = 0;
  internal::Stage stage_ops_;
  // The direct route: per piece its operations and stage (1 to the server, 2 back, 3 done),
  // and on the server each other rank's shard as it arrives.
  std::vector<internal::Stage> piece_ops_;
  std::vector<int> piece_stage_;
  std::vector<Tensor> incoming_;
};

class PsSparseUnit final : public internal::SparseBase {
 public:
  PsSparseUnit(std::unique_ptr<Communicator> comm, Parameter* p, int index, std::string name,
               int64_t begin, int64_t end, int server, PsRoute route)
      : SparseBase(std::move(comm), p, index, std::move(name), begin, end, server),
        server_(server),
        route_(route),
        piece_bytes_(comm_->PieceBytes()) {}

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
        CAVS_ASSIGN_OR_RETURN(
            unique_,
            OnDevice(internal::HostScalar(static_cast<int64_t>(result_.rows.size())), dev));
        CAVS_RETURN_IF_ERROR(SendBack(unique_, 0));
        return false;
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
        CAVS_RETURN_IF_ERROR(SendBack(wire_rows_, 1));
        CAVS_RETURN_IF_ERROR(SendBack(wire_values_, 2));
        return false;
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
    return internal::ScaleInPlace(result_.values, scale);
  }

 private:
  absl::StatusOr<bool> StartAndContinue(absl::StatusOr<std::unique_ptr<Work>> work) {
    CAVS_RETURN_IF_ERROR(stage_ops_.Add(std::move(work)));
    return false;
  }

  // The server's `buf` to every rank, a broadcast or on the direct route straight to each, in
  // pieces of whole rows of at most piece_bytes_, all under way at once (every rank knows the
  // rows: the same pieces).
  absl::Status SendBack(const Tensor& buf, int tag) {
    const auto send = [&](const Tensor& piece) {
      return route_ == PsRoute::kDirect ? StartFanOut(*comm_, piece, server_, tag, stage_ops_)
                                        : stage_ops_.Add(comm_->StartBroadcast(piece, server_));
    };
    const Tensor m = buf.shape().rank() == 1 ? buf.View(core::Shape({buf.numel(), 1})) : buf;
    const auto pieces =
        Cut(m.rows(), m.cols() * static_cast<int64_t>(SizeOf(m.dtype())), piece_bytes_);
    if (pieces.size() == 1) return send(buf);
    for (const auto& [a, b] : pieces) CAVS_RETURN_IF_ERROR(send(m.Rows(a, b)));
    return absl::OkStatus();
  }

  int server_;
  PsRoute route_;
  int64_t piece_bytes_;  // the communicator's PieceBytes, fixed for its life
  Tensor wire_rows_, wire_values_, unique_;
};

// ---- The kind

// "h1.0,h0,h2.1": servers named by host (hH.L, or hH for local rank 0).
absl::StatusOr<std::vector<HostRank>> ParseHostList(absl::string_view text) {
  std::vector<HostRank> out;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    HostRank hr;
    std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(item, '.');
    const bool host_ok = absl::ConsumePrefix(&parts.first, "h") &&
                         absl::SimpleAtoi(parts.first, &hr.host) && hr.host >= 0;
    const bool local_ok = absl::StrContains(item, '.')
                              ? absl::SimpleAtoi(parts.second, &hr.local) && hr.local >= 0
                              : true;
    if (!host_ok || !local_ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad value '", item, "' for placement (a rank, or hH.L: host H's L-th rank)"));
    }
    out.push_back(hr);
  }
  return out;
}

class ParameterServer final : public SyncKindFor<ParameterServerSync> {
 public:
  const char* keyword() const override { return "ps"; }

  absl::StatusOr<ParamSync> Parse(const std::vector<std::string>& tokens) const override {
    CAVS_ASSIGN_OR_RETURN(auto options,
                          ParseOptions(tokens, "ps", {"placement", "rows", "staleness", "route"}));
    ParameterServerSync sync;
    auto placement = options.find("placement");
    if (placement == options.end()) {
      return absl::InvalidArgumentError("ps needs placement=<server rank per shard>");
    }
    if (absl::StartsWith(placement->second, "h")) {
      CAVS_ASSIGN_OR_RETURN(sync.host_placement, ParseHostList(placement->second));
    } else {
      CAVS_ASSIGN_OR_RETURN(sync.placement, ParseIntList<int>("placement", placement->second));
    }
    const size_t shards = static_cast<size_t>(NumShards(sync));
    if (auto it = options.find("rows"); it != options.end()) {
      CAVS_ASSIGN_OR_RETURN(sync.row_splits, ParseIntList<int64_t>("rows", it->second));
      if (sync.row_splits.size() != shards + 1) {
        return absl::InvalidArgumentError(absl::StrCat("rows has ", sync.row_splits.size(),
                                                       " boundaries for ", shards,
                                                       " shards (expected ", shards + 1, ")"));
      }
      if (sync.row_splits[0] != 0 ||
          std::adjacent_find(sync.row_splits.begin(), sync.row_splits.end(),
                             std::greater_equal<int64_t>()) != sync.row_splits.end()) {
        return absl::InvalidArgumentError("rows must start at 0 and increase strictly");
      }
    }
    if (auto it = options.find("staleness"); it != options.end()) {
      CAVS_ASSIGN_OR_RETURN(sync.staleness, ParseInt<int>("staleness", it->second, 0));
    }
    if (auto it = options.find("route"); it != options.end()) {
      if (it->second == "direct") {
        sync.route = PsRoute::kDirect;
      } else if (it->second != "collective") {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown route '", it->second, "' (expected collective or direct)"));
      }
    }
    return sync;
  }

  std::string Describe(const ParamSync& sync) const override {
    const auto& ps = Get(sync);
    std::string s = "ps placement=";
    if (!ps.host_placement.empty()) {
      absl::StrAppend(&s, absl::StrJoin(ps.host_placement, ",", [](std::string* out, HostRank h) {
        absl::StrAppend(out, "h", h.host, ".", h.local);
      }));
    } else {
      absl::StrAppend(&s, absl::StrJoin(ps.placement, ","));
    }
    if (!ps.row_splits.empty()) absl::StrAppend(&s, " rows=", absl::StrJoin(ps.row_splits, ","));
    absl::StrAppend(&s, " staleness=", ps.staleness);
    if (ps.route == PsRoute::kDirect) absl::StrAppend(&s, " route=direct");
    return s;
  }

  absl::Status CheckWorldSize(const ParamSync& sync, const std::string& param,
                              int world_size) const override {
    for (int server : Get(sync).placement) {
      if (server >= world_size) {
        return absl::InvalidArgumentError(absl::StrCat("server rank ", server, " of parameter '",
                                                       param, "' is out of range for world_size ",
                                                       world_size));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckParameter(const ParamSync& sync, const core::Parameter& p,
                              int world_size) const override {
    const auto& ps = Get(sync);
    if (ps.placement.empty() && ps.host_placement.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", p.name, "': ps has no server"));
    }
    if (!ps.placement.empty() && !ps.host_placement.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", p.name, "': ps names servers both by rank and by host"));
    }
    // Servers named by host are checked when they are resolved against the ranks' hosts.
    CAVS_RETURN_IF_ERROR(CheckServers(ps, p.name, world_size));
    const int64_t rows = p.value.rows();
    const int64_t shards = NumShards(ps);
    if (!ps.row_splits.empty() && ps.row_splits.back() != rows) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", p.name, "': shard rows end at ",
                                                     ps.row_splits.back(), " but it has ", rows,
                                                     " rows"));
    }
    if (ps.row_splits.empty() && shards > std::max<int64_t>(rows, 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", p.name, "': ", shards, " shards for ", rows, " rows"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckProfile(const ParamSync& sync, const ParamProfile& p,
                            int world_size) const override {
    const auto& ps = Get(sync);
    if (ps.placement.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", p.name, "': ps has no server"));
    }
    CAVS_RETURN_IF_ERROR(CheckServers(ps, p.name, world_size));
    const std::vector<int64_t> splits = ShardRowSplits(ps, p.rows());
    const bool tiles = splits.size() == ps.placement.size() + 1 && splits.front() == 0 &&
                       splits.back() == p.rows() &&
                       std::adjacent_find(splits.begin(), splits.end(),
                                          std::greater_equal<int64_t>()) == splits.end();
    if (!tiles) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", p.name, "': shards [",
                                                     absl::StrJoin(splits, ", "),
                                                     "] do not tile its ", p.rows(), " rows"));
    }
    return absl::OkStatus();
  }

  bool NamesHosts(const ParamSync& sync) const override {
    return !Get(sync).host_placement.empty();
  }

  absl::Status ResolveHosts(ParamSync& sync, const std::string& param,
                            const std::vector<int>& host_of_rank) const override {
    auto& ps = Get(sync);
    if (ps.host_placement.empty()) return absl::OkStatus();
    int hosts = 0;
    for (int h : host_of_rank) hosts = std::max(hosts, h + 1);
    ps.placement.clear();
    for (const HostRank& hr : ps.host_placement) {
      int rank = -1, seen = 0;
      for (int r = 0; r < static_cast<int>(host_of_rank.size()) && rank < 0; ++r) {
        if (host_of_rank[r] == hr.host && seen++ == hr.local) rank = r;
      }
      if (rank < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "parameter '", param, "': server h", hr.host, ".", hr.local, ": ",
            hr.host >= hosts ? absl::StrCat("there are ", hosts, " hosts")
                             : absl::StrCat("host ", hr.host, " has ", seen, " ranks")));
      }
      ps.placement.push_back(rank);
    }
    ps.host_placement.clear();
    return absl::OkStatus();
  }

  absl::Status CheckRunnable(const ParamSync& sync, const std::string& param) const override {
    const int staleness = Get(sync).staleness;
    if (staleness == 0) return absl::OkStatus();
    return absl::UnimplementedError(
        absl::StrCat("parameter '", param, "': bounded staleness (staleness=", staleness,
                     ") is not supported by the gradient synchronizer yet; use staleness=0"));
  }

  std::vector<UnitKind> unit_kinds() const override {
    return {UnitKind::kPsShard, UnitKind::kPsSparseShard};
  }

  std::vector<UnitSpec> Plan(const ParamSync& sync, int index,
                             const UnitParam& param) const override {
    const auto& ps = Get(sync);
    const std::vector<int64_t> splits = ShardRowSplits(ps, param.rows);
    std::vector<UnitSpec> specs;
    for (size_t s = 0; s < ps.placement.size(); ++s) {
      UnitSpec spec;
      spec.kind = param.sparse ? UnitKind::kPsSparseShard : UnitKind::kPsShard;
      spec.key = index;
      spec.shard = static_cast<int>(s);
      spec.params = {index};
      spec.begin = splits[s];
      spec.end = splits[s + 1];
      spec.server = ps.placement[s];
      spec.route = ps.route;
      specs.push_back(std::move(spec));
    }
    return specs;
  }

  std::string UnitName(const UnitSpec& unit, const std::vector<UnitParam>& params) const override {
    std::string name = ShardUnitName("ps", params[unit.key], unit);
    if (unit.route == PsRoute::kDirect) absl::StrAppend(&name, ", direct");
    return name;
  }

  absl::StatusOr<std::unique_ptr<internal::SyncUnit>> MakeUnit(
      const UnitSpec& unit, UnitContext& context) const override {
    // Duplicates are collective: every rank makes them in the same order.
    CAVS_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, context.comm().Duplicate());
    Parameter* p = context.store().parameters()[unit.key].get();
    std::string name = UnitName(unit, context.params());
    if (p->sparse_grad) {
      return std::unique_ptr<internal::SyncUnit>(
          new PsSparseUnit(std::move(comm), p, unit.key, std::move(name), unit.begin, unit.end,
                           unit.server, unit.route));
    }
    return std::unique_ptr<internal::SyncUnit>(new PsDenseUnit(std::move(comm), p, unit.key,
                                                               std::move(name), unit.begin,
                                                               unit.end, unit.server, unit.route));
  }

  UnitCost Cost(const UnitSpec& unit, const ModelProfile& profile,
                internal::Collectives& c) const override {
    const std::vector<int>& all = c.layout().all;  // ranks 0..W-1: a rank is its own index
    const ParamProfile& p = profile.params[unit.key];
    const double shard_rows = static_cast<double>(unit.end - unit.begin);
    const bool direct = unit.route == PsRoute::kDirect;
    if (unit.kind == UnitKind::kPsShard) {
      const double bytes = shard_rows * p.cols() * 4.0;
      UnitCost cost;
      cost.payload_bytes = static_cast<int64_t>(bytes);
      cost.phases = {c.Run(Collective::kReduce, all, unit.server, bytes, direct),
                     c.Run(Collective::kBroadcast, all, unit.server, bytes, direct)};
      // On the trees every piece's reduce, then every piece's broadcast; the direct route
      // turns each piece back while later ones arrive.
      cost.staged = !direct;
      return cost;
    }
    // Row-sparse: each row travels as an int64 id and cols floats; a shard holds the touched
    // rows and the union that the profile's spread puts in its rows (without one, a share in
    // proportion to its rows).
    const double row_bytes = p.row_bytes();
    const double touched = p.TouchedIn(unit.begin, unit.end);
    const double unique = p.UnionIn(static_cast<int>(all.size()), unit.begin, unit.end);
    UnitCost cost;
    cost.payload_bytes = static_cast<int64_t>(touched * row_bytes);
    cost.phases = {c.Run(Collective::kGather, all, unit.server, 8.0),  // the row counts
                   c.Run(Collective::kGather, all, unit.server, touched * row_bytes),
                   c.Run(Collective::kBroadcast, all, unit.server, 8.0, direct),
                   c.Run(Collective::kBroadcast, all, unit.server, unique * row_bytes, direct)};
    return cost;
  }

 private:
  // The servers named by rank are within world_size.
  static absl::Status CheckServers(const ParameterServerSync& ps, const std::string& param,
                                   int world_size) {
    for (int server : ps.placement) {
      if (server < 0 || server >= world_size) {
        return absl::InvalidArgumentError(absl::StrCat("parameter '", param, "': server rank ",
                                                       server, " is out of range for world_size ",
                                                       world_size));
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace

const SyncKind& ParameterServerKind() {
  static const ParameterServer* kind = new ParameterServer();
  return *kind;
}

}  // namespace cavs::distributed::kinds
