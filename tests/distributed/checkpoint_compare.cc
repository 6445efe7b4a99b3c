// checkpoint_compare A B [--tolerance=T]: compares the parameters of two checkpoints (the same
// names and shapes). Prints each parameter's largest difference relative to the largest magnitude
// of its values in A; exits 0 when every one is at most T (default 0: the same bits), 1 when one
// differs more, 2 when a file does not load or the two hold different parameters. Used by the
// emulated-cluster test (tests/distributed/cluster_test.sh) to compare training across hosts
// with training over loopback.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "core/checkpoint.h"
#include "core/initializer.h"
#include "core/parameter.h"
#include "core/status.h"

namespace cavs {
namespace {

// A store holding the parameters `path` was saved with, loaded from it.
absl::StatusOr<std::unique_ptr<core::ParameterStore>> Load(const std::string& path) {
  CAVS_ASSIGN_OR_RETURN(core::CheckpointInfo info, core::ReadCheckpointMetadata(path));
  auto store = std::make_unique<core::ParameterStore>();
  for (const core::CheckpointTensorInfo& t : info.tensors) {
    if (t.kind != core::CheckpointEntryKind::kParameter) continue;
    CAVS_RETURN_IF_ERROR(store->GetOrCreate(t.name, t.shape, core::Initializer::Zeros()).status());
  }
  CAVS_RETURN_IF_ERROR(core::LoadCheckpoint(path, *store, nullptr).status());
  return store;
}

int Main(int argc, char** argv) {
  double tolerance = 0;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (absl::StartsWith(arg, "--tolerance=")) {
      if (!absl::SimpleAtod(arg.substr(12), &tolerance) || !(tolerance >= 0)) {
        std::fprintf(stderr, "checkpoint_compare: bad %s\n", arg.c_str());
        return 2;
      }
    } else {
      files.push_back(arg);
    }
  }
  if (files.size() != 2) {
    std::fprintf(stderr, "usage: checkpoint_compare A B [--tolerance=T]\n");
    return 2;
  }
  absl::StatusOr<std::unique_ptr<core::ParameterStore>> a = Load(files[0]), b = Load(files[1]);
  if (!a.ok() || !b.ok()) {
    std::fprintf(stderr, "checkpoint_compare: %s\n",
                 (a.ok() ? b.status() : a.status()).ToString().c_str());
    return 2;
  }
  if ((*a)->size() != (*b)->size()) {
    std::fprintf(stderr, "checkpoint_compare: %d parameters against %d\n", (*a)->size(),
                 (*b)->size());
    return 2;
  }
  bool within = true;
  for (const auto& pa : (*a)->parameters()) {
    const core::Parameter* pb = (*b)->Find(pa->name);
    if (pb == nullptr || pb->value.shape() != pa->value.shape()) {
      std::fprintf(stderr, "checkpoint_compare: '%s' is not in %s with the same shape\n",
                   pa->name.c_str(), files[1].c_str());
      return 2;
    }
    const std::vector<float> va = pa->value.ToVector(), vb = pb->value.ToVector();
    double scale = 0, diff = 0;
    for (size_t i = 0; i < va.size(); ++i) {
      scale = std::max(scale, std::fabs(static_cast<double>(va[i])));
      diff = std::max(diff, std::fabs(static_cast<double>(va[i]) - vb[i]));
    }
    const double rel = scale > 0 ? diff / scale : diff;
    within = within && rel <= tolerance;
    std::printf("%-24s %12zu values  max |a-b| / max |a| = %.3g\n", pa->name.c_str(), va.size(),
                rel);
  }
  return within ? 0 : 1;
}

}  // namespace
}  // namespace cavs

int main(int argc, char** argv) { return cavs::Main(argc, argv); }
