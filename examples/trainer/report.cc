#include "examples/trainer/report.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace cavs::trainer {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

bool OnPath(const std::string& binary) {
  return std::system(absl::StrCat("command -v ", binary, " >/dev/null 2>&1").c_str()) == 0;
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

std::string EpochLine(const EpochRecord& r, int epochs, bool language_model) {
  std::string dev =
      language_model
          ? absl::StrFormat("dev ppl %.2f", r.dev_perplexity)
          : absl::StrFormat("dev root %.2f%%  binary %.2f%%  all-nodes %.2f%%",
                            100 * r.dev_root_acc, 100 * r.dev_binary_acc, 100 * r.dev_all_acc);
  return absl::StrFormat("epoch %d/%d  train loss %.4f  %s  %.0f trees/s  %s", r.epoch, epochs,
                         r.train_loss, dev, r.trees_per_sec, FormatDuration(r.seconds));
}

std::string EpochJson(const EpochRecord& r, const std::string& model, bool language_model) {
  std::string dev =
      language_model
          ? absl::StrFormat("\"dev_perplexity\":%.6g", r.dev_perplexity)
          : absl::StrFormat("\"dev_root_acc\":%.6g,\"dev_binary_acc\":%.6g,\"dev_all_acc\":%.6g",
                            r.dev_root_acc, r.dev_binary_acc, r.dev_all_acc);
  return absl::StrFormat(
      "{\"model\":\"%s\",\"epoch\":%d,\"train_loss\":%.6g,\"dev_loss\":%.6g,%s,"
      "\"trees_per_sec\":%.6g,\"seconds\":%.6g}",
      model, r.epoch, r.train_loss, r.dev_loss, dev, r.trees_per_sec, r.seconds);
}

const EpochRecord& BestEpoch(const std::vector<EpochRecord>& curve, bool language_model) {
  size_t best = 0;
  for (size_t i = 1; i < curve.size(); ++i) {
    bool better = language_model ? curve[i].dev_perplexity < curve[best].dev_perplexity
                                 : curve[i].dev_root_acc > curve[best].dev_root_acc;
    if (better) best = i;
  }
  return curve[best];
}

std::string BestLine(const EpochRecord& best, bool language_model) {
  if (language_model) {
    return absl::StrFormat("best dev epoch %d: ppl %.2f", best.epoch, best.dev_perplexity);
  }
  return absl::StrFormat("best dev epoch %d: root %.2f%%  binary %.2f%%  all-nodes %.2f%%",
                         best.epoch, 100 * best.dev_root_acc, 100 * best.dev_binary_acc,
                         100 * best.dev_all_acc);
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

absl::Status WriteCsv(const std::string& path, const std::vector<EpochRecord>& records,
                      bool language_model) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return absl::InvalidArgumentError(absl::StrCat("--csv: cannot write ", path));
  out << CsvHeader(language_model) << "\n";
  for (const EpochRecord& r : records) out << CsvRow(r, language_model) << "\n";
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("--csv: write to ", path, " failed"));
  return absl::OkStatus();
}

absl::StatusOr<std::string> PlotCurve(const std::string& csv_path, const std::string& png_path,
                                      bool language_model, const std::string& title) {
  if (!OnPath("gnuplot")) {
    return absl::StrCat("no gnuplot on PATH: wrote only ", csv_path,
                        " (apt-get install gnuplot-nox for --plot)");
  }
  std::string script_path = png_path + ".gp";
  std::ofstream gp(script_path, std::ios::trunc);
  if (!gp) return absl::InvalidArgumentError(absl::StrCat("--plot: cannot write ", script_path));
  std::string metric = language_model ? "4 title 'dev perplexity'" : "4 title 'dev root accuracy'";
  gp << "set terminal pngcairo size 800,500 noenhanced\n"
     << "set output '" << png_path << "'\n"
     << "set datafile separator ','\nset key autotitle columnhead\n"
     << "set title '" << title << "'\nset xlabel 'epoch'\nset ylabel 'train loss'\n"
     << "set y2label '" << (language_model ? "dev perplexity" : "dev root accuracy") << "'\n"
     << "set ytics nomirror\nset y2tics\nset grid\n"
     << "plot '" << csv_path
     << "' using 1:2 with linespoints title 'train loss', '' using 1:" << metric
     << " axes x1y2 with linespoints\n";
  gp.close();
  std::string cmd = absl::StrCat("gnuplot '", script_path, "' >/dev/null 2>&1");
  if (std::system(cmd.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("gnuplot failed on ", script_path));
  }
  return absl::StrCat("plot written to ", png_path);
}

}  // namespace cavs::trainer
