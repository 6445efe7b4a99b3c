// libFuzzer target: the SST tree reader (examples/data/sst_reader.h), on a file's bytes.
// Any input must give either an error "fuzz:line:column: ..." or trees that pass
// ValidateSstTree and survive a format/parse round trip unchanged; anything else aborts, which
// libFuzzer reports. Corpus: fuzz/corpus/sst_reader (docs/fuzzing.md).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/status.h"
#include "examples/data/sst_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cavs::examples;
  SstReadOptions options;
  options.max_line_bytes = 1 << 16;
  options.max_depth = 200;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<SstTree>> trees = ReadSstString(text, "fuzz", options);
  if (!trees.ok()) {
    CAVS_CHECK(trees.status().message().find("fuzz:") == 0,
               "error without a location: ", trees.status().message());
    return 0;
  }
  for (const SstTree& tree : *trees) {
    const absl::Status valid = ValidateSstTree(tree);
    CAVS_CHECK(valid.ok(), valid.message());
    // Binarization can nest deeper than the input did: no caps on the re-parse.
    SstReadOptions uncapped;
    uncapped.max_line_bytes = size_t{1} << 30;
    uncapped.max_depth = 1 << 30;
    absl::StatusOr<SstTree> again = ParseSstTree(FormatSstTree(tree), uncapped);
    CAVS_CHECK(again.ok(), again.status().message());
    CAVS_CHECK(again->words == tree.words && again->graph.labels == tree.graph.labels &&
                   again->graph.child_ids == tree.graph.child_ids,
               "round trip changed the tree");
  }
  return 0;
}
