// The cost model: the predicted time of one training step of a model (ModelProfile) on a
// cluster (ClusterSpec) under a strategy (Strategy), broken down per synchronizer unit.
//
// The step is replayed as the GradientSynchronizer runs it (docs/distributed.md, "The cost
// model", has the equations):
//   - forward, then backward; each parameter's gradient is ready at its profiled offset into
//     backward (at the end of backward where the profile has none); where the profile measured
//     the synchronizer's hooks, its times are the compute's own work plus the polls' share of
//     the thread and, for each unit that starts in compute, a cost a byte it carries;
//   - the strategy splits into units by the synchronizer's own planner (unit_plan.h: a bucket
//     per allreduce group, a unit per PS shard, one per sparse table), started in its order
//     (latest-created parameter first), each when its parameters are ready and the unit before
//     it has started;
//   - each unit is a chain of collectives (a flat bucket: one allreduce; hierarchical: a reduce
//     in every host, an allreduce among the hosts' leaders, a broadcast in every host; a PS
//     shard: a reduce to its server and a broadcast back; a sparse table: an allgather of the
//     counts and of the touched rows; a sparse PS shard: counts, a gather of the rows to the
//     server, which broadcasts the union back), each an alpha-beta Phase of the cluster's
//     algorithms (distributed/collective_cost.h);
//   - concurrent collectives contend: each link direction, and each host's CPU (the software
//     time of messages), is a queue that serves the work put on it in the order it would
//     arrive if nothing else ran, never idle while work waits; and units that run side by side
//     share each link fairly: a unit's chain is slowed, once, by its neighbours' traffic on
//     the links it uses (at most its own work there per neighbour; a PS shard on MPI's
//     trees, whose broadcast starts once its reduce is through, also stage by stage: each
//     neighbour slows the first stage that shares a link with it, less its bytes on that
//     stage's own connections, and the stages after wait for it); and a connection (a pair
//     of hosts) sends in order: a unit's first message on a pair waits, once, for the bytes
//     the units started before it queued there at their start (their first crossing phase).
//     A unit ends when its own chain, every queue holding its work, its shared chain and its
//     queued chain are done. So the step time is monotone: more bandwidth, less latency or
//     less overhead never predicts a slower step;
//   - a compressed bucket's float16 encode runs in its Start, on the thread that computes the
//     gradients: it comes first in the unit's chain and delays the rest of backward (and the
//     readiness of the units after it); its float16 sums are its reducing ranks' CPU time in
//     the phases that reduce; its decode runs in Complete, after every unit is done (the
//     cluster's Fp16Costs per element; 0 where it has none);
//   - while k units are in flight during compute, a second of compute's own work takes
//     (1 + c k) / (1 - S) (c: the profile's poll_cost, the polls Advance every unit in flight;
//     S: the sum over them of b m / s, b the profile's poll_cost_per_mb, m the MB the busiest
//     rank moves in the unit and s its span: the transport's copies in the polls), so compute
//     ends later and the units after it are ready later; the units' ends are found again
//     from the new starts (the polls' time is their own progress, not time on top of it);
//   - the step ends when backward and the last unit are done, plus the units' Complete and the
//     optimizer.
// Per-message overheads, efficiency and duplex are ClusterSpec fields, to be calibrated from
// measurements (distributed/calibration.h).
//
// Thread-safety: a CostModel caches collective costs; one thread at a time. PredictStepTime is
// a pure function.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distributed/cluster_spec.h"
#include "distributed/model_profile.h"
#include "distributed/strategy.h"
#include "distributed/unit_plan.h"

namespace cavs::distributed {

namespace internal {
class Collectives;
}  // namespace internal

// One synchronizer unit's predicted timeline. Times in seconds from the start of the step.
struct UnitPrediction {
  std::string name;  // as the synchronizer names it: "allreduce bucket 0 (out_W, out_b)", ...
  UnitKind kind = UnitKind::kBucket;
  int64_t payload_bytes = 0;  // gradient bytes the unit carries from one rank (fp16: halved)
  double ready_s = 0.0;       // its last parameter's gradient is ready
  double start_s = 0.0;       // started (ready, and the unit before it started)
  double end_s = 0.0;         // its last collective is done everywhere
  // The part of the step it alone accounts for past backward: how far its end extends the
  // latest end among backward and the units that finish before it.
  double exposed_s = 0.0;
};

// A parameter server rank's traffic, summed over the PS shards it serves.
struct ServerLoad {
  int rank = -1;  // -1: no PS unit
  int host = -1;
  double bytes_in = 0.0;   // received by the server rank
  double bytes_out = 0.0;  // sent by it
  int shards = 0;
};

// A host's network link over the step.
struct LinkLoad {
  int host = -1;  // -1: a single host, no network
  double bytes_out = 0.0;
  double bytes_in = 0.0;
  double busy_s = 0.0;  // time the busier direction (or the duplex budget) was busy
};

struct Prediction {
  double forward_s = 0.0;
  // The profile's, its hooks at this strategy's times (hooks_s), plus the units' Start run
  // during it (encodes).
  double backward_s = 0.0;
  // Of compute, the synchronizer's hooks (the transport's work in the polls) at the share and
  // cost a byte the profile measured, as this strategy's units start (docs/distributed.md, "The
  // transport's CPU time"). The profile's own hooks_ms under the strategy it was taken with.
  double hooks_s = 0.0;
  // Of hooks_s, the polls while units are in flight (the profile's poll_cost), net of the
  // profiled strategy's own, which the profile's compute already holds: a strategy with fewer
  // units in flight in compute than the profiled one gets a negative term.
  double polls_in_flight_s = 0.0;
  double optimizer_s = 0.0;
  double compute_s = 0.0;       // forward + backward
  double comm_end_s = 0.0;      // the last unit's end (0 without units)
  double exposed_comm_s = 0.0;  // max(0, comm_end - compute): communication not hidden
  // The units' Complete, which runs when every unit is done (float16 decodes).
  double complete_s = 0.0;
  double step_s = 0.0;                // compute + exposed communication + complete + optimizer
  std::vector<UnitPrediction> units;  // in start order
  ServerLoad busiest_server;          // the PS rank moving the most bytes (in + out)
  LinkLoad busiest_link;              // the host link busy the longest
  // Predict with a bound stopped short of the queues, the shared links or the queued chains:
  // every end, and so step_s, is at most the full prediction's. Stopped before the queues,
  // the units' ends are their chains alone and comm_end_s the queues' floor (the latest end
  // any order of their jobs allows), so the units' exposed_s need not sum to exposed_comm_s.
  bool lower_bound = false;
  // The collectives its units run, as bits 1 << Collective.
  unsigned collectives = 0;
};

// The model for one profile on one cluster; predicts many strategies, caching the collectives.
class CostModel {
 public:
  // Errors: a profile without parameters, a cluster without ranks, a profiled strategy (the
  // profile's `strategy`) that its builder cannot make for the cluster's ranks.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<CostModel>> Create(ModelProfile profile,
                                                                         ClusterSpec cluster);
  ~CostModel();

  // Servers named by host (hH.L) are the cluster's hosts' ranks. Errors (InvalidArgument,
  // naming the parameter): the strategy's world size is not the cluster's; a parameter without
  // an entry or an entry for none; allreduce on a row-sparse or sparse on a dense gradient; a
  // server out of range, or a host or local rank the cluster does not have; shards that do not
  // tile the rows.
  [[nodiscard]] absl::StatusOr<Prediction> Predict(const Strategy& strategy);
  // As Predict, but where the step is already above `bound_s` before the queues are served
  // (each queue's jobs sorted: an allgather over H hosts has H jobs a phase on each of 3H link
  // resources), the shared links costed or the queued chains replayed (each unit visits every
  // pair of hosts its messages use, H^2 for that allgather), it stops there and returns that
  // lower bound, marked `lower_bound`. For a search that needs only the strategies below a
  // bound.
  [[nodiscard]] absl::StatusOr<Prediction> Predict(const Strategy& strategy, double bound_s);

  const ModelProfile& profile() const { return profile_; }
  const ClusterSpec& cluster() const { return cluster_; }

  // What a unit in flight costs compute per second of its own work (the profile's poll_cost
  // until set). REQUIRES: 0 <= cost.
  double poll_cost() const { return poll_cost_; }
  void set_poll_cost(double cost) { poll_cost_ = cost; }
  // What a MB the busiest rank moves in a unit in flight during compute costs compute (the
  // profile's poll_cost_per_mb until set). REQUIRES: 0 <= cost.
  double poll_cost_per_mb() const { return poll_cost_per_mb_; }
  void set_poll_cost_per_mb(double cost) { poll_cost_per_mb_ = cost; }

  // The poll cost at which `early`'s predicted compute over `profiled`'s is `ratio` (their
  // measured compute's): a bisection over [0, kMaxPollCost], the ends where the ratio is
  // beyond what they predict, 0 where no cost moves it. The model's own cost is left as it
  // was. Errors: as Predict; ratio not positive.
  struct PollCostFit {
    double cost = 0.0;
    double ratio = 0.0;      // the measured ratio it was fitted to
    double at_zero = 0.0;    // the predicted ratio with no cost
    double at_max = 0.0;     // ... and with kMaxPollCost
    double predicted = 0.0;  // ... and with `cost`
  };
  [[nodiscard]] absl::StatusOr<PollCostFit> FitPollCost(const Strategy& profiled,
                                                        const Strategy& early, double ratio);

 private:
  CostModel(ModelProfile profile, ClusterSpec cluster);
  // The profiled strategy (profiled_, where the profile names the builder it ran under) and
  // the hooks' basis: where it measured its hooks with units in flight, the bytes its busiest
  // rank moved in the units that started in compute (the start costs are then charged per
  // host by those bytes); else 0 (by the payload, on every rank alike).
  absl::Status MeasureHooksBasis();
  // The profiled strategy's own polls in flight at the current poll cost (its
  // Prediction::polls_in_flight_s before the net), cached per cost; 0 without a profiled
  // strategy.
  absl::StatusOr<double> ProfiledPolls();

  ModelProfile profile_;
  ClusterSpec cluster_;
  std::unique_ptr<internal::Collectives> collectives_;
  double hooks_basis_bytes_ = 0.0;
  double poll_cost_ = 0.0, poll_cost_per_mb_ = 0.0;
  std::optional<Strategy> profiled_;  // the profile's `strategy`, built for the cluster
  bool in_profiled_ = false;          // predicting it for ProfiledPolls
  // ProfiledPolls' cache: the costs it was taken at, and its polls.
  double profiled_polls_cost_ = -1.0, profiled_polls_per_mb_ = -1.0, profiled_polls_s_ = 0.0;
};

// The units in flight during the predicted compute, on average over it (0 without compute).
double MeanUnitsInFlight(const Prediction& p);

// CostModel::Create(profile, cluster) and Predict(strategy), once.
[[nodiscard]] absl::StatusOr<Prediction> PredictStepTime(const Strategy& strategy,
                                                         const ModelProfile& profile,
                                                         const ClusterSpec& cluster);

// The profiled strategy's measured step as a calibration point at the model's own message
// sizes (docs/distributed.md, "The profiled step"). The probe calibrates each collective at two
// sizes (1 and 4 MB where the links allow) and the model extrapolates the line; the profile's
// steps ran the model's real buckets. The factors (and minimum factors) of the collectives the
// profiled strategy runs are scaled by one s in [kMinStepScale, kMaxStepScale] so that its
// predicted step is the measured one: the step never shrinks as s grows (more bytes on each
// link), so bisection finds it, or the bound nearer to it. The other collectives, and every
// fixed time, are as the probe left them. Where the profiled strategy's predicted exposed
// communication is under kMinExposedShare of the measured step, the step says little about the
// links (a few ms of noise would move s far): the cluster stays as it is.
inline constexpr double kMinStepScale = 0.5, kMaxStepScale = 2.0, kMinExposedShare = 0.1;

struct StepCalibration {
  ClusterSpec cluster;        // the input's, with the profiled collectives' factors scaled by s
  double scale = 1.0;         // s (1: unchanged)
  double measured_s = 0.0;    // the profiled strategy's measured step
  double predicted_s = 0.0;   // its prediction on the input cluster
  double calibrated_s = 0.0;  // and on the calibrated one
  unsigned collectives = 0;   // the ones scaled, as bits 1 << Collective
  std::string unchanged;      // why the cluster was left as it is ("" where it was not)
};

// "calibrated at the profiled step (754.20 ms): allreduce, allgather x0.812 (predicted 881.71
// ms before, 754.20 after)", or why the cluster is unchanged.
std::string DescribeStepCalibration(const StepCalibration& c);

// Errors: as CostModel::Create and Predict for `profiled`; measured_s not positive.
[[nodiscard]] absl::StatusOr<StepCalibration> CalibrateToProfiledStep(const ModelProfile& profile,
                                                                      const ClusterSpec& cluster,
                                                                      const Strategy& profiled,
                                                                      double measured_s);

}  // namespace cavs::distributed
