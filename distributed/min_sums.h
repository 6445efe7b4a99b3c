// Internal to distributed/: sums of min(w, cap) over a set of works w, for the cost model's
// fair shares of a link (cost_model.cc) and its queued chains (queued_chains.h).
//
// Thread-safety: none; each belongs to one prediction.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace cavs::distributed::internal {

// Sums of min(w, cap) over a growing set of works: a Fenwick tree over the works' ranks.
class MinSums {
 public:
  // Empty, for any of `works` to be added.
  explicit MinSums(std::vector<double> works) : sorted_(std::move(works)) {
    std::sort(sorted_.begin(), sorted_.end());
    count_.assign(sorted_.size() + 1, 0.0);
    sum_.assign(sorted_.size() + 1, 0.0);
  }
  void Add(double w) {
    const size_t at = std::lower_bound(sorted_.begin(), sorted_.end(), w) - sorted_.begin();
    for (size_t i = at + 1; i < count_.size(); i += i & (~i + 1)) count_[i] += 1, sum_[i] += w;
    added_ += 1;
  }
  // The sum over the works added of min(w, cap).
  double Of(double cap) const {
    size_t i = std::upper_bound(sorted_.begin(), sorted_.end(), cap) - sorted_.begin();
    double below = 0.0, count = 0.0;
    for (; i > 0; i -= i & (~i + 1)) below += sum_[i], count += count_[i];
    return below + cap * (added_ - count);
  }

 private:
  std::vector<double> sorted_;
  std::vector<double> count_, sum_;
  double added_ = 0.0;
};

// The same sums over a fixed set of works: sorted, with prefix sums.
class AllMinSums {
 public:
  AllMinSums() = default;
  explicit AllMinSums(const std::vector<double>& works) { Set(works); }
  // The set is `works` (its buffers reused).
  void Set(const std::vector<double>& works) {
    sorted_.assign(works.begin(), works.end());
    std::sort(sorted_.begin(), sorted_.end());
    prefix_.assign(sorted_.size() + 1, 0.0);
    for (size_t i = 0; i < sorted_.size(); ++i) prefix_[i + 1] = prefix_[i] + sorted_[i];
  }
  double Of(double cap) const {
    const size_t below = std::upper_bound(sorted_.begin(), sorted_.end(), cap) - sorted_.begin();
    return prefix_[below] + cap * static_cast<double>(sorted_.size() - below);
  }

 private:
  std::vector<double> sorted_, prefix_;
};

}  // namespace cavs::distributed::internal
