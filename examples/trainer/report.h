// What cavs-train shows and writes: a progress bar, epoch lines, JSON lines, the learning-curve
// CSV and its gnuplot PNG.
//
// The progress bar is redrawn with '\r' only when the output is a terminal; otherwise it draws
// nothing, so logs and pipes get one line per epoch. Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cavs::trainer {

// One epoch's figures. Sentiment runs fill the accuracies, language models the perplexity.
struct EpochRecord {
  int epoch = 0;
  double train_loss = 0.0;  // mean per labelled vertex over the epoch
  double dev_loss = 0.0;
  double dev_root_acc = 0.0;
  double dev_binary_acc = 0.0;
  double dev_all_acc = 0.0;
  double dev_perplexity = 0.0;
  double trees_per_sec = 0.0;  // training samples per second of training time
  double seconds = 0.0;        // wall time since the run started (resumed runs: cumulative)
};

class ProgressBar {
 public:
  // Draws to `out` only if `enabled` (a terminal).
  ProgressBar(std::ostream* out, bool enabled) : out_(out), enabled_(enabled) {}
  void Start(int epoch, int64_t total);
  // `done` samples of `total` finished; redraws at most every 100 ms.
  void Update(int64_t done, double loss);
  // Erases the bar.
  void Finish();

 private:
  std::ostream* out_;
  bool enabled_;
  int epoch_ = 0;
  int64_t total_ = 0;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// "1m05s", "12.3s".
std::string FormatDuration(double seconds);

// The human line of one epoch.
std::string EpochLine(const EpochRecord& r, int epochs, bool language_model);
// `x` as a JSON number ("%.6g"), or null where it is not finite (JSON has no NaN).
std::string JsonNumber(double x);
// One JSON object (no newline) for --log-json and the SUMMARY line.
std::string EpochJson(const EpochRecord& r, const std::string& model, bool language_model);

// How good an epoch's dev figures are, higher is better: the root accuracy, or minus the
// perplexity; -infinity where there is no such figure (NaN).
double DevScore(const EpochRecord& r, bool language_model);
// The epoch with the best dev metric (highest DevScore), the first of equals.
// REQUIRES: !curve.empty().
const EpochRecord& BestEpoch(const std::vector<EpochRecord>& curve, bool language_model);
// "best dev epoch 3: root 45.05%  binary 84.52%  all-nodes 81.50%" (or perplexity).
std::string BestLine(const EpochRecord& best, bool language_model);

// "test on epoch 3 (best dev): root 45.05%  binary 84.52%  all-nodes 81.50%" (or perplexity):
// the test figures, carried in the dev_* fields of `figures`, of the parameters of `epoch`;
// `which` says which epoch that is.
std::string TestLine(int epoch, absl::string_view which, const EpochRecord& figures,
                     bool language_model);

// CSV rows (no header), and the header, of the learning curve.
std::string CsvHeader(bool language_model);
std::string CsvRow(const EpochRecord& r, bool language_model);
// Parses rows written by CsvRow (a checkpoint keeps the curve so far).
[[nodiscard]] absl::StatusOr<std::vector<EpochRecord>> ParseCsvRows(const std::string& rows,
                                                                    bool language_model);

// Writes `text` to `path` (truncate + write: atomic enough for a log), checking the write, the
// flush and the close, so that a full disk is an error. Errors are Internal (as a checkpoint's
// write errors are) naming `flag` (the flag that named the path), the path and the reason.
[[nodiscard]] absl::Status WriteTextFile(const std::string& flag, const std::string& path,
                                         const std::string& text);

// Writes the header and `records` to `path` (WriteTextFile; `flag` names the path in errors).
[[nodiscard]] absl::Status WriteCsv(const std::string& flag, const std::string& path,
                                    const std::vector<EpochRecord>& records, bool language_model);

// `text` as a single-quoted gnuplot string: inside one only the quote is special, written twice.
std::string GnuplotQuote(absl::string_view text);

// Plots `csv_path` into `png_path` with the gnuplot binary: writes the script `png_path`.gp
// (every path in it quoted with GnuplotQuote; a path with a line break is an InvalidArgument),
// then runs gnuplot on it without a shell and waits for it. Train loss on the left axis, the
// dev metric (root accuracy, or perplexity) on the right. Returns a note on what happened
// (written, or why not: no gnuplot on PATH); an error if the script cannot be written or
// gnuplot fails.
[[nodiscard]] absl::StatusOr<std::string> PlotCurve(const std::string& csv_path,
                                                    const std::string& png_path,
                                                    bool language_model, const std::string& title);

}  // namespace cavs::trainer
