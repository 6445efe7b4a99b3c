// Agenda (DyNet's): each round takes the vertices whose children are all done, at most
// `max_round_rows` of them, oldest uid first; bounds a round's memory at the cost of rounds.
#include <memory>

#include "scheduler/batching_policy.h"
#include "scheduler/policies/policy_graph.h"

namespace cavs::scheduler {
namespace {

class AgendaPolicy final : public BatchingPolicy {
 public:
  explicit AgendaPolicy(int64_t cap) : cap_(cap) {}
  std::string name() const override { return "agenda"; }
  std::vector<int32_t> Rounds(const BatchGraphs& batch) const override {
    return policies::RoundsBottomUp(policies::Merge(batch), cap_);
  }

 private:
  int64_t cap_;
};

}  // namespace

std::unique_ptr<BatchingPolicy> MakeAgendaPolicy(int64_t max_round_rows) {
  return std::make_unique<AgendaPolicy>(max_round_rows);
}

}  // namespace cavs::scheduler
