// libFuzzer target: the strategy text format (distributed/strategy.h), on a --strategy-file's
// bytes. Any input must give an error "strategy ..." (a quoted name may hold any byte, "\n"
// too, and errors repeat names as they are), or a strategy that survives
// a serialize/parse round trip unchanged. A parsed strategy is then checked against a small
// store (an embedding table with a row-sparse gradient and two dense weights), as cavs-train
// does before training; where that accepts it, every parameter-server shard split must tile the
// parameter's rows (what the synchronizer relies on).
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>

#include "core/initializer.h"
#include "core/parameter.h"
#include "core/status.h"
#include "distributed/strategy.h"

namespace {

const cavs::core::ParameterStore& Store() {
  static const cavs::core::ParameterStore* store = [] {
    auto* s = new cavs::core::ParameterStore(1);
    const cavs::core::Initializer init = cavs::core::Initializer::Zeros();
    CAVS_CHECK(s->GetOrCreate("embed/E", cavs::core::Shape({10, 4}), init, true).ok());
    CAVS_CHECK(s->GetOrCreate("fc/W", cavs::core::Shape({4, 4}), init).ok());
    CAVS_CHECK(s->GetOrCreate("out/W", cavs::core::Shape({4, 5}), init).ok());
    return s;
  }();
  return *store;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cavs::distributed;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Strategy> parsed = ParseStrategy(text);
  if (!parsed.ok()) {
    const absl::string_view m = parsed.status().message();
    CAVS_CHECK(m.substr(0, 8) == "strategy", "error not naming the strategy: ", m);
    return 0;
  }
  const std::string serialized = SerializeStrategy(*parsed);
  absl::StatusOr<Strategy> again = ParseStrategy(serialized);
  CAVS_CHECK(again.ok(), "the serialized strategy does not parse: ", again.status().ToString(),
             "\n", serialized);
  CAVS_CHECK(*again == *parsed, "round trip changed the strategy:\n", serialized);
  CAVS_CHECK(SerializeStrategy(*again) == serialized, "serializing is not deterministic");

  const cavs::core::ParameterStore& store = Store();
  if (!ValidateStrategy(*parsed, store).ok()) return 0;
  for (const auto& p : store.parameters()) {
    const ParamStrategy* entry = parsed->Find(p->name);
    CAVS_CHECK(entry != nullptr, "validated without an entry for ", p->name);
    const auto* ps = std::get_if<ParameterServerSync>(&entry->sync);
    if (ps == nullptr) continue;
    const int64_t rows = p->value.rows();
    const std::vector<int64_t> splits = ShardRowSplits(*ps, rows);
    CAVS_CHECK(splits.size() == ps->placement.size() + 1, p->name, ": split count");
    CAVS_CHECK(splits.front() == 0 && splits.back() == rows, p->name, ": splits do not tile");
    for (size_t i = 1; i < splits.size(); ++i) {
      CAVS_CHECK(splits[i] > splits[i - 1], p->name, ": an empty or reversed shard");
    }
    for (int server : ps->placement) {
      CAVS_CHECK(server >= 0 && server < parsed->world_size, p->name, ": server ", server);
    }
  }
  return 0;
}
