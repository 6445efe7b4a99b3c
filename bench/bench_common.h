// What the Tree-LSTM benchmarks share: their data — the SST train trees at $CAVS_BENCH_SST
// (e.g. ../shared/data/sst/train.txt), else the bundled synthetic treebank, in fixed batches —
// their timing setup, and (rate_reporter.h) a reporter that keeps each run's rate for the
// summary lines.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/rate_reporter.h"
#include "examples/data/sst_reader.h"
#include "scheduler/graph.h"

namespace cavs::bench {

// Loaded once; a missing or malformed file stops the benchmark with the reader's message.
inline const examples::SstDataset& Data() {
  static const examples::SstDataset* data = [] {
    const char* env = std::getenv("CAVS_BENCH_SST");
    const std::string train = env ? env : CAVS_SOURCE_DIR "/data/synthetic/train.txt";
    absl::StatusOr<examples::SstDataset> d = examples::LoadSstDataset(train, train);
    if (!d.ok()) {
      std::fprintf(stderr, "cannot read %s: %s\n", train.c_str(), d.status().ToString().c_str());
      std::abort();
    }
    std::fprintf(stderr, "data: %s (%zu trees, vocabulary %d)\n", train.c_str(), d->train.size(),
                 d->vocabulary.size());
    return new examples::SstDataset(*std::move(d));
  }();
  return *data;
}

// Up to 64 consecutive batches of `batch` training trees, in file order.
inline std::vector<std::vector<scheduler::Graph>> Batches(int batch) {
  const auto& trees = Data().train;
  std::vector<std::vector<scheduler::Graph>> out;
  for (size_t i = 0; i + batch <= trees.size() && out.size() < 64; i += batch) {
    out.emplace_back();
    for (int j = 0; j < batch; ++j) out.back().push_back(trees[i + j].graph);
  }
  return out;
}

// Real time in milliseconds, at least two seconds of measurement.
inline void Timed(benchmark::internal::Benchmark* b) {
  b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
}

}  // namespace cavs::bench
