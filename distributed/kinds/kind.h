// A synchronizer kind: everything cavs knows about one alternative of ParamSync
// (distributed/strategy.h), behind one interface, each kind in its own file pair
// (distributed/kinds/allreduce.cc, parameter_server.cc, sparse_allgather.cc):
//
//   - its line in a strategy file: the keyword, the options it reads, the text it writes;
//   - its checks: against a model's parameter (ValidateStrategy), against a profile's parameter
//     (the cost model), which entries may share a unit, servers named by host;
//   - the units it becomes (PlanUnits), their names, the running units (GradientSynchronizer)
//     and their cost term (CostModel): the collectives each unit runs, as alpha-beta phases.
//
// The kinds are listed once, in kinds/kind.cc (AllKinds). strategy.cc, unit_plan.cc,
// synchronizer.cc and cost_model.cc reach a kind only through this interface, so a new kind is
// its struct in ParamSync, its file pair here, and one line in that list (docs/distributed.md,
// "Where a synchronizer kind lives"). The builders and the search choose among kinds and name
// them directly: they are policies over kinds, not parts of one.
//
// Thread-safety: kinds are immutable singletons; UnitContext is used by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/parameter.h"
#include "core/status.h"
#include "distributed/collective_cost.h"
#include "distributed/communicator.h"
#include "distributed/model_profile.h"
#include "distributed/strategy.h"
#include "distributed/sync_units.h"
#include "distributed/unit_plan.h"

namespace cavs::distributed::kinds {

// What a kind's running units are made with (GradientSynchronizer::Create). Duplicate, Split and
// the topology are collective: every rank makes the same units in the same order, so every rank
// makes the same calls.
class UnitContext {
 public:
  // REQUIRES: all outlive the context; `shared` and the store outlive the units.
  UnitContext(Communicator* comm, Communicator* shared, const core::ParameterStore* store,
              const std::vector<UnitParam>* params)
      : comm_(comm), shared_(shared), store_(store), params_(params) {}

  // The synchronizer's communicator: a unit that needs one of its own duplicates or splits it.
  Communicator& comm() const { return *comm_; }
  // One communicator for units that start in the same order on every rank (the flat buckets).
  Communicator* shared() const { return shared_; }
  const core::ParameterStore& store() const { return *store_; }
  // The store's parameters as the planner took them (names for the units' names).
  const std::vector<UnitParam>& params() const { return *params_; }
  // Which ranks share a host: comm().DiscoverTopology(), asked on the first call only.
  [[nodiscard]] absl::StatusOr<const Topology*> topology();

 private:
  Communicator* comm_;
  Communicator* shared_;
  const core::ParameterStore* store_;
  const std::vector<UnitParam>* params_;
  std::optional<Topology> topology_;
};

// A unit's cost term: the collectives it runs, in order, each a phase over the cluster's ranks
// (collectives.layout()), and the work a rank's own thread does for it outside them.
struct UnitCost {
  std::vector<internal::Phase> phases;
  int64_t payload_bytes = 0;  // the gradient bytes it carries from one rank
  // s of Start's work, on the thread that marks gradients ready (the backward's): the float16
  // encode of a compressed bucket.
  double start_s = 0.0;
  // s of Complete's work, which runs when every unit is done: the float16 decode.
  double complete_s = 0.0;
  // Its phases run as stages on every rank, each started once the one before is through there
  // (a PS shard on MPI's trees: every piece's reduce, then every piece's broadcast): the cost
  // model's shared-link term charges each neighbour to the first stage that shares a link with
  // it, so a neighbour that delays the first stage is not hidden in the second's time. Else
  // the term judges the chain whole (its phases pipelined, or in pieces that overlap).
  bool staged = false;
};

class SyncKind {
 public:
  virtual ~SyncKind() = default;

  // ---- The strategy file

  // The word after a parameter's name in a strategy line: "allreduce", "ps", "sparse".
  virtual const char* keyword() const = 0;
  // Whether `sync` is this kind's alternative of ParamSync.
  virtual bool Holds(const ParamSync& sync) const = 0;
  // The synchronizer of a line `param NAME KEYWORD key=value...` (tokens as TokenizeLine gives
  // them). Errors name the option; the caller adds the line.
  [[nodiscard]] virtual absl::StatusOr<ParamSync> Parse(
      const std::vector<std::string>& tokens) const = 0;
  // The text after the parameter's name; Parse reads it back to the same value.
  virtual std::string Describe(const ParamSync& sync) const = 0;
  // What a file alone can be checked for once its world_size is known: the ranks `sync` names
  // exist. Error naming `param`.
  [[nodiscard]] virtual absl::Status CheckWorldSize(const ParamSync& sync, const std::string& param,
                                                    int world_size) const;

  // ---- Checks

  // Against a model's parameter (ValidateStrategy; its dtype is already checked). Error naming it.
  [[nodiscard]] virtual absl::Status CheckParameter(const ParamSync& sync, const core::Parameter& p,
                                                    int world_size) const = 0;
  // Against a profile's parameter (CostModel::Predict; servers already resolved to ranks).
  [[nodiscard]] virtual absl::Status CheckProfile(const ParamSync& sync, const ParamProfile& p,
                                                  int world_size) const = 0;
  // Entries of this kind with the same fusion group share one unit (allreduce's buckets), which
  // PlanUnits makes from the first one's spec; nullopt: units of its own.
  virtual std::optional<int> FusionGroup(const ParamSync& sync) const;
  // Whether `sync` (of `param`) may share a unit with `first` (of `first_param`), the group's
  // earliest-created entry. Error naming both.
  [[nodiscard]] virtual absl::Status CheckFusion(const ParamSync& first,
                                                 const std::string& first_param,
                                                 const ParamSync& sync,
                                                 const std::string& param) const;
  // Servers named by host (ps placement=hH.L): whether `sync` has any, and `sync` with them
  // replaced by their ranks (host_of_rank: every rank's host). Error naming `param`.
  virtual bool NamesHosts(const ParamSync& sync) const;
  [[nodiscard]] virtual absl::Status ResolveHosts(ParamSync& sync, const std::string& param,
                                                  const std::vector<int>& host_of_rank) const;
  // What GradientSynchronizer::Create refuses because it cannot run it yet (Unimplemented).
  [[nodiscard]] virtual absl::Status CheckRunnable(const ParamSync& sync,
                                                   const std::string& param) const;

  // ---- Units

  // The unit kinds Plan makes.
  virtual std::vector<UnitKind> unit_kinds() const = 0;
  // The units of parameter `index` (`param`) alone, in row order. REQUIRES: checked.
  virtual std::vector<UnitSpec> Plan(const ParamSync& sync, int index,
                                     const UnitParam& param) const = 0;
  // "allreduce bucket 0 (fc/W, fc/b)", "ps 'E' rows [0, 50) on server 1": one name for the
  // synchronizer's errors and the cost model's report. `params`: PlanUnits' parameters.
  virtual std::string UnitName(const UnitSpec& unit,
                               const std::vector<UnitParam>& params) const = 0;
  // The running unit (distributed/sync_units.h).
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<internal::SyncUnit>> MakeUnit(
      const UnitSpec& unit, UnitContext& context) const = 0;
  // Its cost term (collectives.cluster() is the cluster).
  virtual UnitCost Cost(const UnitSpec& unit, const ModelProfile& profile,
                        internal::Collectives& collectives) const = 0;
};

// A kind whose alternative of ParamSync is `Sync`: Holds, and typed access for the rest.
template <typename Sync>
class SyncKindFor : public SyncKind {
 public:
  bool Holds(const ParamSync& sync) const final { return std::holds_alternative<Sync>(sync); }

 protected:
  static const Sync& Get(const ParamSync& sync) { return std::get<Sync>(sync); }
  static Sync& Get(ParamSync& sync) { return std::get<Sync>(sync); }
};

// Every kind, in the order of ParamSync's alternatives.
const std::vector<const SyncKind*>& AllKinds();
// The kind of a synchronizer, and of a unit.
const SyncKind& KindOf(const ParamSync& sync);
const SyncKind& KindOf(UnitKind unit);
// The kind whose keyword is `keyword`, or nullptr.
const SyncKind* FindKind(absl::string_view keyword);
// "allreduce, ps or sparse": every keyword, for errors.
std::string KindKeywords();

// ---- For the kinds' parsers and names

// "bad value 'x' for KEY (expected an integer >= MIN)".
template <typename T>
absl::StatusOr<T> ParseInt(absl::string_view key, absl::string_view value, T min_value) {
  T v{};
  if (!absl::SimpleAtoi(value, &v) || v < min_value) {
    return absl::InvalidArgumentError(absl::StrCat("bad value '", value, "' for ", key,
                                                   " (expected an integer >= ", min_value, ")"));
  }
  return v;
}

// Comma-separated integers >= 0.
template <typename T>
absl::StatusOr<std::vector<T>> ParseIntList(absl::string_view key, absl::string_view value) {
  std::vector<T> out;
  for (absl::string_view item : absl::StrSplit(value, ',')) {
    CAVS_ASSIGN_OR_RETURN(T v, ParseInt<T>(key, item, 0));
    out.push_back(v);
  }
  return out;
}

// The key=value options after a line's keyword (tokens[3...]); each key at most once and among
// `allowed`. Errors: "unknown option 'x' for KIND (expected a=, b=)", "option 'a' given twice".
[[nodiscard]] absl::StatusOr<absl::flat_hash_map<std::string, std::string>> ParseOptions(
    const std::vector<std::string>& tokens, absl::string_view kind,
    const std::vector<std::string>& allowed);

// "KIND 'NAME'", with " rows [B, E)" unless the unit covers every row, and " on server S" where it
// has one: the name of a unit of one parameter.
std::string ShardUnitName(absl::string_view kind, const UnitParam& param, const UnitSpec& unit);

}  // namespace cavs::distributed::kinds
