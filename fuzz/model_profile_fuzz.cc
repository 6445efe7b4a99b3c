// libFuzzer target: the model profile format (distributed/model_profile.h), on a file's bytes.
// Any input must give an error naming the file, or a profile that survives a serialize/parse
// round trip unchanged and whose union-of-rows estimate stays within its documented bounds
// (at least touched_rows, at most the table and ranks x touched_rows).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"
#include "distributed/model_profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cavs::distributed;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ModelProfile> parsed = ParseModelProfile(text, "fuzz.txt");
  if (!parsed.ok()) {
    const absl::string_view m = parsed.status().message();
    CAVS_CHECK(m.substr(0, 8) == "fuzz.txt", "error not naming the file: ", m);
    return 0;
  }
  const std::string once = SerializeModelProfile(*parsed);
  absl::StatusOr<ModelProfile> again = ParseModelProfile(once, "again.txt");
  CAVS_CHECK(again.ok(), "the serialized profile does not parse: ", again.status().ToString(), "\n",
             once);
  CAVS_CHECK(*again == *parsed, "round trip changed the profile:\n", once);
  for (const ParamProfile& p : parsed->params) {
    if (!p.sparse) continue;
    for (int ranks : {1, 2, 3, 8, 1000}) {
      const double rows = p.UnionRows(ranks);
      const double table = static_cast<double>(p.rows());
      CAVS_CHECK(rows <= table * (1 + 1e-9) && rows <= ranks * p.touched_rows * (1 + 1e-9) &&
                     rows >= std::min(p.touched_rows, table) * (1 - 1e-9),
                 p.name, ": UnionRows(", ranks, ") = ", rows, ", touched ", p.touched_rows,
                 ", table ", table);
    }
  }
  return 0;
}
