#include "examples/trainer/report.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/status.h"
#include "examples/data/gnuplot.h"
#include "examples/data/text_file.h"

namespace cavs::trainer {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

void ProgressBar::Start(int epoch, int64_t total) {
  epoch_ = epoch;
  total_ = total;
  start_ = std::chrono::steady_clock::now();
  last_draw_ = start_ - std::chrono::seconds(1);
}

void ProgressBar::Update(int64_t done, double loss) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  double elapsed = SecondsSince(start_);
  double rate = elapsed > 0 ? done / elapsed : 0.0;
  double eta = rate > 0 ? (total_ - done) / rate : 0.0;
  constexpr int kWidth = 30;
  int filled = total_ > 0 ? static_cast<int>(kWidth * done / total_) : kWidth;
  std::string bar(filled, '=');
  if (filled < kWidth) bar += '>';
  bar.resize(kWidth, ' ');
  *out_ << absl::StrFormat("\repoch %d [%s] %d/%d  loss %.4f  %.0f trees/s  ETA %s   ", epoch_, bar,
                           done, total_, loss, rate, FormatDuration(eta))
        << std::flush;
}

void ProgressBar::Finish() {
  if (enabled_) *out_ << "\r" << std::string(100, ' ') << "\r" << std::flush;
}

std::string FormatDuration(double seconds) {
  if (seconds < 60) return absl::StrFormat("%.1fs", seconds);
  int64_t s = static_cast<int64_t>(seconds + 0.5);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm", s / 3600, (s / 60) % 60);
}

namespace {

// "45.05%", or "n/a" for a metric that does not exist (NaN: no binary root in the dev set).
std::string Percent(double x) {
  return std::isnan(x) ? std::string("n/a") : absl::StrFormat("%.2f%%", 100 * x);
}

std::string AccuracyFields(const EpochRecord& r) {
  return absl::StrCat("root ", Percent(r.dev_root_acc), "  binary ", Percent(r.dev_binary_acc),
                      "  all-nodes ", Percent(r.dev_all_acc));
}

}  // namespace

std::string EpochLine(const EpochRecord& r, int epochs, bool language_model) {
  std::string dev = language_model ? absl::StrFormat("dev ppl %.2f", r.dev_perplexity)
                                   : absl::StrCat("dev ", AccuracyFields(r));
  return absl::StrFormat("epoch %d/%d  train loss %.4f  %s  %.0f trees/s  %s", r.epoch, epochs,
                         r.train_loss, dev, r.trees_per_sec, FormatDuration(r.seconds));
}

std::string JsonNumber(double x) {
  // JSON has no NaN or infinity; a diverged run's loss must not make the line unparseable.
  return std::isfinite(x) ? absl::StrFormat("%.6g", x) : std::string("null");
}

std::string EpochJson(const EpochRecord& r, const std::string& model, bool language_model) {
  std::string dev = language_model
                        ? absl::StrCat("\"dev_perplexity\":", JsonNumber(r.dev_perplexity))
                        : absl::StrCat("\"dev_root_acc\":", JsonNumber(r.dev_root_acc),
                                       ",\"dev_binary_acc\":", JsonNumber(r.dev_binary_acc),
                                       ",\"dev_all_acc\":", JsonNumber(r.dev_all_acc));
  return absl::StrCat("{\"model\":\"", model, "\",\"epoch\":", r.epoch,
                      ",\"train_loss\":", JsonNumber(r.train_loss),
                      ",\"dev_loss\":", JsonNumber(r.dev_loss), ",", dev,
                      ",\"trees_per_sec\":", JsonNumber(r.trees_per_sec),
                      ",\"seconds\":", JsonNumber(r.seconds), "}");
}

double DevScore(const EpochRecord& r, bool language_model) {
  const double x = language_model ? -r.dev_perplexity : r.dev_root_acc;
  return std::isnan(x) ? -std::numeric_limits<double>::infinity() : x;
}

const EpochRecord& BestEpoch(const std::vector<EpochRecord>& curve, bool language_model) {
  size_t best = 0;
  for (size_t i = 1; i < curve.size(); ++i) {
    if (DevScore(curve[i], language_model) > DevScore(curve[best], language_model)) best = i;
  }
  return curve[best];
}

std::string BestLine(const EpochRecord& best, bool language_model) {
  if (language_model) {
    return absl::StrFormat("best dev epoch %d: ppl %.2f", best.epoch, best.dev_perplexity);
  }
  return absl::StrCat("best dev epoch ", best.epoch, ": ", AccuracyFields(best));
}

std::string TestLine(int epoch, absl::string_view which, const EpochRecord& figures,
                     bool language_model) {
  const std::string head = absl::StrCat("test on epoch ", epoch, " (", which, "): ");
  if (language_model) return absl::StrFormat("%sppl %.2f", head, figures.dev_perplexity);
  return head + AccuracyFields(figures);
}

std::string CsvHeader(bool language_model) {
  return language_model ? "epoch,train_loss,dev_loss,dev_perplexity,trees_per_sec,seconds"
                        : "epoch,train_loss,dev_loss,dev_root_acc,dev_binary_acc,dev_all_acc,"
                          "trees_per_sec,seconds";
}

std::string CsvRow(const EpochRecord& r, bool language_model) {
  if (language_model) {
    return absl::StrFormat("%d,%.9g,%.9g,%.9g,%.9g,%.9g", r.epoch, r.train_loss, r.dev_loss,
                           r.dev_perplexity, r.trees_per_sec, r.seconds);
  }
  return absl::StrFormat("%d,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g", r.epoch, r.train_loss, r.dev_loss,
                         r.dev_root_acc, r.dev_binary_acc, r.dev_all_acc, r.trees_per_sec,
                         r.seconds);
}

absl::StatusOr<std::vector<EpochRecord>> ParseCsvRows(const std::string& rows,
                                                      bool language_model) {
  std::vector<EpochRecord> out;
  for (absl::string_view line : absl::StrSplit(rows, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ',');
    std::vector<double> v(f.size());
    bool ok = f.size() == (language_model ? 6u : 8u);
    for (size_t i = 0; ok && i < f.size(); ++i) ok = absl::SimpleAtod(f[i], &v[i]);
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("bad learning-curve row '", line, "'"));
    EpochRecord r;
    r.epoch = static_cast<int>(v[0]);
    r.train_loss = v[1];
    r.dev_loss = v[2];
    if (language_model) {
      r.dev_perplexity = v[3];
    } else {
      r.dev_root_acc = v[3];
      r.dev_binary_acc = v[4];
      r.dev_all_acc = v[5];
    }
    r.trees_per_sec = v[v.size() - 2];
    r.seconds = v.back();
    out.push_back(r);
  }
  return out;
}

absl::Status WriteTextFile(const std::string& flag, const std::string& path,
                           const std::string& text) {
  const std::optional<examples::WriteFailure> failed = examples::WriteWholeFile(path, text);
  if (!failed.has_value()) return absl::OkStatus();
  // The path was checked before the run (output_files.h): what fails now is the machine (a
  // full disk, a quota, EIO), a failure like a checkpoint's, not a usage error.
  return absl::InternalError(
      failed->open
          ? absl::StrCat(flag, ": cannot write ", path, ": ", std::strerror(failed->error))
          : absl::StrCat(flag, ": writing ", path, " failed: ", std::strerror(failed->error)));
}

absl::Status WriteCsv(const std::string& flag, const std::string& path,
                      const std::vector<EpochRecord>& records, bool language_model) {
  std::string text = CsvHeader(language_model) + "\n";
  for (const EpochRecord& r : records) absl::StrAppend(&text, CsvRow(r, language_model), "\n");
  return WriteTextFile(flag, path, text);
}

std::string GnuplotQuote(absl::string_view text) { return examples::GnuplotQuote(text); }

absl::StatusOr<std::string> PlotCurve(const std::string& csv_path, const std::string& png_path,
                                      bool language_model, const std::string& title) {
  for (const std::string* path : {&csv_path, &png_path, &title}) {
    // A line break would end the script's command, and the rest would run as gnuplot commands.
    if (path->find_first_of("\n\r") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--plot: '", *path, "' contains a line break, which gnuplot cannot take"));
    }
  }
  const std::string script_path = png_path + ".gp";
  const std::string metric = language_model ? "dev perplexity" : "dev root accuracy";
  const std::string script = absl::StrCat(
      "set terminal pngcairo size 800,500 noenhanced\n", "set output ", GnuplotQuote(png_path),
      "\nset datafile separator ','\nset key autotitle columnhead\n", "set title ",
      GnuplotQuote(title), "\nset xlabel 'epoch'\nset ylabel 'train loss'\n", "set y2label ",
      GnuplotQuote(metric), "\nset ytics nomirror\nset y2tics\nset grid\n", "plot ",
      GnuplotQuote(csv_path), " using 1:2 with linespoints title 'train loss', '' using 1:4 title ",
      GnuplotQuote(metric), " axes x1y2 with linespoints\n");
  CAVS_RETURN_IF_ERROR(WriteTextFile("--plot", script_path, script));
  absl::StatusOr<bool> ran = examples::RunGnuplot(script_path);
  if (!ran.ok()) {
    return absl::InternalError(absl::StrCat("--plot: ", ran.status().message()));
  }
  if (!*ran) {
    return absl::StrCat("no gnuplot on PATH: wrote only ", csv_path, " and ", script_path,
                        " (apt-get install gnuplot-nox for --plot)");
  }
  return absl::StrCat("plot written to ", png_path);
}

}  // namespace cavs::trainer
