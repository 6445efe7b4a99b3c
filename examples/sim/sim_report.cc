#include "examples/sim/sim_report.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/status.h"
#include "distributed/builders.h"
#include "distributed/stats.h"
#include "distributed/strategy_search.h"
#include "distributed/trial_correction.h"
#include "examples/data/gnuplot.h"
#include "examples/data/text_file.h"

namespace cavs::sim {

namespace {

using distributed::ClusterSpec;
using distributed::ModelProfile;
using distributed::Prediction;
using distributed::Strategy;

constexpr size_t kUnitsShown = 12;

double Ms(double s) { return s * 1e3; }
double Mb(double bytes) { return bytes / 1e6; }

absl::StatusOr<std::string> ReadFile(const std::string& flag, const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::NotFoundError(absl::StrCat(flag, ": cannot read ", path, ": ",
                                            std::strerror(errno != 0 ? errno : ENOENT)));
  }
  std::stringstream text;
  text << file.rdbuf();
  if (file.bad()) return absl::NotFoundError(absl::StrCat(flag, ": error reading ", path));
  return text.str();
}

std::string HostsLine(const ClusterSpec& c) {
  std::string s = absl::StrCat(c.hosts.size(), " hosts, ", c.world_size(), " ranks:");
  for (size_t i = 0; i < c.hosts.size() && i < 8; ++i) {
    absl::StrAppendFormat(&s, " %s %dx%gGbit/s", c.hosts[i].name, c.hosts[i].ranks,
                          c.hosts[i].bandwidth * 8 / 1e9);
  }
  if (c.hosts.size() > 8) absl::StrAppend(&s, " ...");
  return s;
}

std::string ServerText(const distributed::ServerLoad& s) {
  if (s.rank < 0) return "-";
  return absl::StrFormat("rank %d: %.2f MB in, %.2f MB out, %d shard%s", s.rank, Mb(s.bytes_in),
                         Mb(s.bytes_out), s.shards, s.shards == 1 ? "" : "s");
}

std::string LinkText(const distributed::LinkLoad& l, const ClusterSpec& c) {
  if (l.host < 0) return "-";
  return absl::StrFormat("%s: %.2f MB out, %.2f MB in, busy %.2f ms", c.hosts[l.host].name,
                         Mb(l.bytes_out), Mb(l.bytes_in), Ms(l.busy_s));
}

}  // namespace

absl::StatusOr<std::vector<Row>> PredictBuilders(const ModelProfile& profile,
                                                 const ClusterSpec& cluster,
                                                 const core::ParameterStore& store) {
  CAVS_ASSIGN_OR_RETURN(std::unique_ptr<distributed::CostModel> model,
                        distributed::CostModel::Create(profile, cluster));
  std::vector<Row> rows;
  for (const std::string& name : distributed::StrategyBuilderNames()) {
    CAVS_ASSIGN_OR_RETURN(Strategy s,
                          distributed::BuildStrategy(name, store, cluster.world_size()));
    CAVS_ASSIGN_OR_RETURN(Prediction p, model->Predict(s));
    rows.push_back({name, std::move(s), std::move(p)});
  }
  return rows;
}

std::string FormatTable(const std::vector<Row>& rows, const ClusterSpec& cluster) {
  double best = rows.empty() ? 0 : rows[0].prediction.step_s;
  size_t width = 8;
  for (const Row& r : rows) {
    best = std::min(best, r.prediction.step_s);
    width = std::max(width, r.label.size());
  }
  std::string out = absl::StrFormat("%-*s %9s %9s %9s %9s %9s %6s %8s  %-44s %s\n", width,
                                    "strategy", "step ms", "compute", "hooks", "exposed", "optim",
                                    "units", "vs best", "busiest server", "busiest link");
  for (const Row& r : rows) {
    const Prediction& p = r.prediction;
    absl::StrAppendFormat(&out, "%-*s %9.2f %9.2f %9.2f %9.2f %9.2f %6d %7.2fx  %-44s %s\n", width,
                          r.label, Ms(p.step_s), Ms(p.compute_s), Ms(p.hooks_s),
                          Ms(p.exposed_comm_s), Ms(p.optimizer_s), p.units.size(),
                          best > 0 ? p.step_s / best : 1.0, ServerText(p.busiest_server),
                          LinkText(p.busiest_link, cluster));
  }
  return out;
}

std::string FormatUnits(const Row& row) {
  std::string out = absl::StrFormat("%s: %d units (ms from the start of the step; MB per rank)\n",
                                    row.label, row.prediction.units.size());
  absl::StrAppendFormat(&out, "  %9s %9s %9s %9s %9s  %s\n", "ready", "start", "end", "exposed",
                        "MB", "unit");
  for (size_t i = 0; i < row.prediction.units.size() && i < kUnitsShown; ++i) {
    const distributed::UnitPrediction& u = row.prediction.units[i];
    absl::StrAppendFormat(&out, "  %9.2f %9.2f %9.2f %9.2f %9.3f  %s\n", Ms(u.ready_s),
                          Ms(u.start_s), Ms(u.end_s), Ms(u.exposed_s), Mb(u.payload_bytes), u.name);
  }
  if (row.prediction.units.size() > kUnitsShown) {
    absl::StrAppendFormat(&out, "  ... and %d more units\n",
                          row.prediction.units.size() - kUnitsShown);
  }
  return out;
}

std::string FormatScaling(const std::vector<ScalingRow>& rows,
                          const std::vector<std::string>& labels, int64_t batch_per_rank) {
  std::string out = absl::StrFormat("%6s %6s", "hosts", "ranks");
  for (const std::string& l : labels)
    absl::StrAppendFormat(&out, " %*s", std::max<size_t>(9, l.size()), l);
  absl::StrAppendFormat(&out, " %14s\n", batch_per_rank > 0 ? "auto samples/s" : "auto steps/s");
  for (const ScalingRow& r : rows) {
    absl::StrAppendFormat(&out, "%6d %6d", r.hosts, r.ranks);
    for (size_t i = 0; i < labels.size(); ++i) {
      absl::StrAppendFormat(&out, " %*.2f", std::max<size_t>(9, labels[i].size()), Ms(r.step_s[i]));
    }
    const double per_step = batch_per_rank > 0 ? r.ranks * batch_per_rank : 1.0;
    absl::StrAppendFormat(&out, " %14.0f\n", per_step / r.step_s.back());
  }
  return out;
}

std::string ScalingCsv(const std::vector<ScalingRow>& rows, const std::vector<std::string>& labels,
                       int64_t batch_per_rank) {
  std::string out = "ranks";
  for (const std::string& l : labels) absl::StrAppend(&out, ",", l);
  absl::StrAppend(&out, "\n");
  for (const ScalingRow& r : rows) {
    absl::StrAppend(&out, r.ranks);
    const double per_step = batch_per_rank > 0 ? r.ranks * batch_per_rank : r.ranks;
    for (double s : r.step_s) absl::StrAppendFormat(&out, ",%.6g", per_step / s);
    absl::StrAppend(&out, "\n");
  }
  return out;
}

namespace {

// The strategy file, checked against the model and the cluster.
absl::StatusOr<Row> StrategyFileRow(const std::string& path, const ModelProfile& profile,
                                    const ClusterSpec& cluster, const core::ParameterStore& store) {
  CAVS_ASSIGN_OR_RETURN(std::string text, ReadFile("--strategy-file", path));
  absl::StatusOr<Strategy> s = distributed::ParseStrategy(text);
  absl::Status status = s.status();
  if (status.ok()) status = distributed::ValidateStrategy(*s, store);
  if (status.ok() && s->world_size != cluster.world_size()) {
    status = absl::InvalidArgumentError(absl::StrCat("the strategy is for world_size ",
                                                     s->world_size, "; the cluster has ",
                                                     cluster.world_size(), " ranks"));
  }
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", status.message()));
  }
  CAVS_ASSIGN_OR_RETURN(Prediction p, distributed::PredictStepTime(*s, profile, cluster));
  return Row{"file", *std::move(s), std::move(p)};
}

absl::StatusOr<std::vector<ScalingRow>> Scale(const SimConfig& config, const ModelProfile& profile,
                                              const ClusterSpec& cluster,
                                              const core::ParameterStore& store,
                                              std::vector<std::string>* labels) {
  std::vector<ScalingRow> rows;
  for (int hosts : config.scaling) {
    const ClusterSpec scaled = distributed::ScaleCluster(cluster, hosts, config.ranks_per_host);
    CAVS_ASSIGN_OR_RETURN(std::vector<Row> predicted, PredictBuilders(profile, scaled, store));
    distributed::SearchOptions options;
    options.allow_compression = config.allow_compression;
    options.top_k = 1;
    for (const Row& r : predicted) options.seeds.push_back(r.strategy);
    CAVS_ASSIGN_OR_RETURN(distributed::SearchReport search,
                          distributed::SearchStrategies(profile, scaled, options));
    predicted.push_back({"auto", search.best[0].strategy, search.best[0].prediction});
    ScalingRow row{hosts, scaled.world_size(), {}};
    labels->clear();
    for (const Row& r : predicted) {
      labels->push_back(r.label);
      row.step_s.push_back(r.prediction.step_s);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

absl::Status Plot(const SimConfig& config, const std::vector<ScalingRow>& rows,
                  const std::vector<std::string>& labels, const ModelProfile& profile,
                  const ClusterSpec& cluster, std::ostream& out) {
  const std::string title =
      absl::StrCat("cavs-sim: ", profile.name, " on ", cluster.name, " (weak scaling, ",
                   config.ranks_per_host, " ranks per host)");
  for (const std::string* s : {&config.plot, &title}) {
    if (s->find_first_of("\n\r") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--plot: '", *s, "' contains a line break, which gnuplot cannot take"));
    }
  }
  const std::string csv = config.plot + ".csv", script = config.plot + ".gp";
  const std::string ylabel = profile.batch_per_rank > 0 ? "samples/s" : "steps/s x ranks";
  const std::string gp = absl::StrCat(
      "set terminal pngcairo size 900,560 noenhanced\nset output ",
      examples::GnuplotQuote(config.plot),
      "\nset datafile separator ','\nset key autotitle columnhead outside right\nset title ",
      examples::GnuplotQuote(title), "\nset xlabel 'ranks'\nset ylabel ",
      examples::GnuplotQuote(ylabel), "\nset logscale x 2\nset logscale y 10\nset grid\n",
      "plot for [i=2:", labels.size() + 1, "] ", examples::GnuplotQuote(csv),
      " using 1:i with linespoints\n");
  for (const auto& [path, text] :
       {std::pair{csv, ScalingCsv(rows, labels, profile.batch_per_rank)}, std::pair{script, gp}}) {
    if (const auto failed = examples::WriteWholeFile(path, text); failed.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--plot: cannot write ", path, ": ", std::strerror(failed->error)));
    }
  }
  CAVS_ASSIGN_OR_RETURN(bool ran, examples::RunGnuplot(script));
  out << (ran ? absl::StrCat("plot written to ", config.plot, "\n")
              : absl::StrCat("no gnuplot on PATH: wrote only ", csv, " and ", script,
                             " (apt-get install gnuplot-nox for --plot)\n"));
  return absl::OkStatus();
}

// What the search found against the builders (rows: the builders first), and the searched
// strategies as --strategy=auto numbers them (`ranked`).
std::string SearchSummary(const std::vector<Row>& rows, const distributed::SearchReport& search,
                          const distributed::SearchReport& ranked, double seconds) {
  const Row* best_builder = &rows[0];
  for (size_t i = 0; i < distributed::StrategyBuilderNames().size(); ++i) {
    if (rows[i].prediction.step_s < best_builder->prediction.step_s) best_builder = &rows[i];
  }
  const double best = search.best[0].prediction.step_s;
  std::string out = absl::StrFormat(
      "search: %d strategies costed (%d only until above a bound) in %.2f s; the best predicts "
      "%.2f ms, %.2fx the best builder (%s, %.2f ms)\n",
      search.evaluated, search.bounded, seconds, Ms(best), best_builder->prediction.step_s / best,
      best_builder->label, Ms(best_builder->prediction.step_s));
  for (size_t i = 0; i < ranked.best.size(); ++i) {
    absl::StrAppendFormat(&out, "  auto#%d: %.2f ms, %d units\n", i + 1,
                          Ms(ranked.best[i].prediction.step_s),
                          ranked.best[i].prediction.units.size());
  }
  return out;
}

// One --measured line: the row it measures, its step and that measurement's standard error.
struct Measured {
  size_t row = 0;  // index into the labels
  double step_s = 0.0;
  double standard_error_s = 0.0;  // 0: not given
};

// --measured: one strategy's measured step time a line, "LABEL MS [SE_%]" (a builder, "file", or
// "auto#N", N up to --top, as --strategy=auto numbers the searched ones; SE_%, the measurement's
// standard error in % of MS, as --strategy=auto's report gives it); a field starting with '#'
// starts a comment. Errors name the file, the line and the field.
absl::StatusOr<std::vector<Measured>> ParseMeasured(const std::string& text,
                                                    const std::string& path,
                                                    const std::vector<std::string>& labels) {
  std::vector<Measured> measured;
  std::vector<int> line_of(labels.size(), 0);
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    std::vector<absl::string_view> f =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    // A field starting with '#' starts a comment ("auto#2" is a label).
    f.erase(std::find_if(f.begin(), f.end(),
                         [](absl::string_view x) { return absl::StartsWith(x, "#"); }),
            f.end());
    if (f.empty()) continue;
    auto bad = [&](absl::string_view field, absl::string_view message) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " line ", line_no, ": field '", field, "': ", message));
    };
    const std::string label(f[0]);
    const auto it = std::find(labels.begin(), labels.end(), label);
    if (it == labels.end()) {
      return bad("strategy", absl::StrCat("unknown '", f[0], "' (expected one of ",
                                          absl::StrJoin(labels, ", "), ")"));
    }
    const size_t index = static_cast<size_t>(it - labels.begin());
    if (line_of[index] != 0) {
      return bad("strategy",
                 absl::StrCat("'", label, "' is measured on line ", line_of[index], " already"));
    }
    if (f.size() < 2) return bad("ms", "missing (expected LABEL MS)");
    double ms = 0;
    if (!absl::SimpleAtod(f[1], &ms) || !(ms > 0) || !std::isfinite(ms)) {
      return bad("ms", absl::StrCat("bad value '", f[1], "' (expected a positive number)"));
    }
    double se = 0;
    if (f.size() > 2 && f[2] != "-" &&
        (!absl::SimpleAtod(f[2], &se) || !(se >= 0) || !std::isfinite(se))) {
      return bad("se_%", absl::StrCat("bad value '", f[2], "' (expected a number >= 0, or -)"));
    }
    if (f.size() > 3) return bad("se_%", absl::StrCat("unexpected '", f[3], "' after it"));
    line_of[index] = line_no;
    measured.push_back({index, ms / 1e3, se / 100 * ms / 1e3});
  }
  if (measured.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no measured strategy"));
  }
  return measured;
}

// "median |error| 1.3%, largest 5.0%".
std::string ErrorsText(const std::vector<double>& errors) {
  std::vector<double> abs_errors;
  for (double e : errors) abs_errors.push_back(std::abs(e));
  return absl::StrFormat("median |error| %.1f%%, largest %.1f%%",
                         100 * distributed::Median(abs_errors),
                         100 * *std::max_element(abs_errors.begin(), abs_errors.end()));
}

// The model corrected by the measured rows: the fit, each row predicted, corrected (a measured
// one from the others: out of sample) and measured, and the errors out of sample beside the
// model's own.
std::string FormatCorrection(const std::vector<Row>& rows, const std::vector<Measured>& measured,
                             const std::string& path) {
  std::vector<distributed::Trial> trials;
  std::vector<double> model_errors;
  std::vector<int> trial_of(rows.size(), -1);  // a measured row's index in trials
  for (const Measured& m : measured) {
    trial_of[m.row] = static_cast<int>(trials.size());
    trials.push_back({&rows[m.row].prediction, m.step_s, m.standard_error_s});
    model_errors.push_back((rows[m.row].prediction.step_s - m.step_s) / m.step_s);
  }
  const std::vector<double> oos = distributed::LeaveOneOutErrors(trials);
  const std::vector<double> oos_trials_scale =
      distributed::LeaveOneOutErrors(trials, 0.5, distributed::Ridge::kTrials);
  std::string out =
      absl::StrFormat("corrected by the %d measured (--measured=%s): %s\n", trials.size(), path,
                      distributed::FitTrialCorrection(trials).Describe());
  absl::StrAppendFormat(&out, "%-16s %12s %12s %12s %8s\n", "strategy", "predicted_ms",
                        "corrected_ms", "measured_ms", "error");
  for (size_t i = 0; i < rows.size(); ++i) {
    const double predicted = Ms(rows[i].prediction.step_s);
    if (trial_of[i] < 0) {
      absl::StrAppendFormat(&out, "%-16s %12.2f %12.2f %12s %8s\n", rows[i].label, predicted,
                            Ms(distributed::CorrectedStep(trials, rows[i].prediction)), "-", "-");
      continue;
    }
    // Measured: corrected from the others (out of sample).
    const double m = trials[trial_of[i]].measured_s, error = oos[trial_of[i]];
    absl::StrAppendFormat(&out, "%-16s %12.2f %12.2f %12.2f %+7.1f%%\n", rows[i].label, predicted,
                          Ms(m * (1 + error)), Ms(m), 100 * error);
  }
  absl::StrAppend(
      &out, "out of sample (each measured one corrected from the others): ", ErrorsText(oos),
      "; the model alone: ", ErrorsText(model_errors),
      "; the ridge on the measured ones' scale alone: ", ErrorsText(oos_trials_scale), "\n");
  return out;
}

// The files cavs-sim writes must not be the files it reads.
absl::Status CheckOutputs(const SimConfig& config) {
  std::vector<std::pair<std::string, std::string>> outputs;
  if (!config.strategy_out.empty()) {
    outputs.emplace_back("--strategy-out", config.strategy_out);
    for (int i = 1; i <= config.top; ++i) {
      outputs.emplace_back("--strategy-out", absl::StrCat(config.strategy_out, ".", i));
    }
  }
  if (!config.plot.empty()) {
    for (const char* suffix : {"", ".csv", ".gp"}) {
      outputs.emplace_back("--plot", config.plot + suffix);
    }
  }
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"--profile", config.profile_path},
      {"--cluster", config.cluster_path},
      {"--strategy-file", config.strategy_path},
      {"--measured", config.measured_path}};
  for (const auto& [out_flag, out_path] : outputs) {
    for (const auto& [in_flag, in_path] : inputs) {
      std::error_code ec;
      if (!in_path.empty() && std::filesystem::equivalent(out_path, in_path, ec)) {
        return absl::InvalidArgumentError(
            absl::StrCat(out_flag, ": ", out_path, " is the input ", in_flag, "=", in_path));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunSim(const SimConfig& config, std::ostream& out) {
  CAVS_RETURN_IF_ERROR(CheckOutputs(config));
  CAVS_ASSIGN_OR_RETURN(std::string profile_text, ReadFile("--profile", config.profile_path));
  CAVS_ASSIGN_OR_RETURN(ModelProfile profile,
                        distributed::ParseModelProfile(profile_text, config.profile_path));
  CAVS_ASSIGN_OR_RETURN(std::string cluster_text, ReadFile("--cluster", config.cluster_path));
  CAVS_ASSIGN_OR_RETURN(ClusterSpec cluster,
                        distributed::ParseClusterSpec(cluster_text, config.cluster_path));
  if (config.poll_cost >= 0) profile.poll_cost = config.poll_cost;
  if (config.poll_cost_per_mb >= 0) profile.poll_cost_per_mb = config.poll_cost_per_mb;
  core::ParameterStore store;
  CAVS_RETURN_IF_ERROR(distributed::AddProfileParameters(profile, &store));
  // A profile that measured its own steps calibrates the cluster there, as --strategy=auto's
  // search does; everything below (the scaling table too) predicts on the calibrated cluster.
  std::string calibration_line;
  if (!profile.strategy.empty()) {
    CAVS_ASSIGN_OR_RETURN(
        const distributed::Strategy profiled,
        distributed::BuildStrategy(profile.strategy, store, cluster.world_size()));
    CAVS_ASSIGN_OR_RETURN(
        const distributed::StepCalibration calibration,
        distributed::CalibrateToProfiledStep(profile, cluster, profiled, 1e-3 * profile.step_ms));
    cluster = calibration.cluster;
    calibration_line = absl::StrCat("        ", distributed::DescribeStepCalibration(calibration),
                                    ", under '", profile.strategy, "'\n");
  }
  if (profile.poll_cost > 0 || !profile.early_strategy.empty() || config.poll_cost >= 0) {
    absl::StrAppendFormat(
        &calibration_line,
        "        polls while units are in flight: %.3f s a second of compute's own per unit",
        profile.poll_cost);
    if (config.poll_cost >= 0) {
      absl::StrAppend(&calibration_line, " (--poll-cost)");
    } else if (!profile.early_strategy.empty()) {
      absl::StrAppendFormat(&calibration_line, " (fitted where '%s''s compute was %.3fx '%s''s)",
                            profile.early_strategy, profile.early_compute_ratio, profile.strategy);
    }
    absl::StrAppend(&calibration_line, "\n");
  }
  if (profile.poll_cost_per_mb > 0) {
    absl::StrAppendFormat(&calibration_line,
                          "        the transport's bytes in the polls: %.3g ms of compute a MB a "
                          "rank moves in units in flight during it%s\n",
                          1e3 * profile.poll_cost_per_mb,
                          config.poll_cost_per_mb >= 0 ? " (--poll-cost-per-mb)" : "");
  }
  std::string measured_text;
  if (!config.measured_path.empty()) {
    CAVS_ASSIGN_OR_RETURN(measured_text, ReadFile("--measured", config.measured_path));
  }
  std::optional<Row> file_row;
  if (!config.strategy_path.empty()) {
    CAVS_ASSIGN_OR_RETURN(file_row, StrategyFileRow(config.strategy_path, profile, cluster, store));
  }
  int64_t bytes = 0;
  for (const distributed::ParamProfile& p : profile.params) bytes += p.bytes();
  out << absl::StrFormat("model   %s: %d parameters, %.2f MB; %d samples per rank per step\n",
                         profile.name, profile.params.size(), Mb(bytes), profile.batch_per_rank)
      << absl::StrFormat("cluster %s: %s\n", cluster.name, HostsLine(cluster)) << calibration_line
      << "\n";

  CAVS_ASSIGN_OR_RETURN(std::vector<Row> rows, PredictBuilders(profile, cluster, store));
  const auto started = std::chrono::steady_clock::now();
  distributed::SearchOptions options;
  options.allow_compression = config.allow_compression;
  options.top_k = config.top;
  // The searched strategies as --strategy=auto ranks them, auto#1, auto#2, ...: without the
  // builders as seeds (it tries those apart), so distinct strategies, none a builder's unless
  // the search found it.
  CAVS_ASSIGN_OR_RETURN(distributed::SearchReport ranked,
                        distributed::SearchStrategies(profile, cluster, options));
  // The best, never predicted slower than a builder: the builders ranked beside.
  for (const Row& r : rows) options.seeds.push_back(r.strategy);
  options.top_k = 1;
  CAVS_ASSIGN_OR_RETURN(distributed::SearchReport search,
                        distributed::SearchStrategies(profile, cluster, options));
  const double search_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (file_row.has_value()) rows.push_back(*file_row);
  rows.push_back({"auto", search.best[0].strategy, search.best[0].prediction});
  out << "predicted step (ms)\n" << FormatTable(rows, cluster) << "\n";
  if (config.units) {
    for (const Row& r : rows) out << FormatUnits(r) << "\n";
  }
  out << SearchSummary(rows, search, ranked, search_s);
  if (!config.measured_path.empty()) {
    // The table's rows less "auto", then the searched strategies, as auto#N.
    std::vector<Row> named(rows.begin(), rows.end() - 1);
    for (size_t i = 0; i < ranked.best.size(); ++i) {
      named.push_back(
          {absl::StrCat("auto#", i + 1), ranked.best[i].strategy, ranked.best[i].prediction});
    }
    std::vector<std::string> labels;
    for (const Row& r : named) labels.push_back(r.label);
    CAVS_ASSIGN_OR_RETURN(auto measured,
                          ParseMeasured(measured_text, config.measured_path, labels));
    out << "\n" << FormatCorrection(named, measured, config.measured_path);
  }
  const std::string best_text = distributed::SerializeStrategy(search.best[0].strategy);
  out << "\n" << best_text;
  if (!config.strategy_out.empty()) {
    // The best to FILE, auto#N to FILE.N.
    for (size_t i = 0; i <= ranked.best.size(); ++i) {
      const std::string path =
          i == 0 ? config.strategy_out : absl::StrCat(config.strategy_out, ".", i);
      const std::string text =
          i == 0 ? best_text : distributed::SerializeStrategy(ranked.best[i - 1].strategy);
      if (const auto failed = examples::WriteWholeFile(path, text); failed.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat("--strategy-out: cannot write ", path, ": ",
                                                       std::strerror(failed->error)));
      }
    }
    out << "(written to " << config.strategy_out << "; auto#1 to #" << ranked.best.size() << " to "
        << config.strategy_out << ".1 to ." << ranked.best.size() << ")\n";
  }
  if (config.scaling.empty()) return absl::OkStatus();
  std::vector<std::string> labels;
  CAVS_ASSIGN_OR_RETURN(std::vector<ScalingRow> scaling,
                        Scale(config, profile, cluster, store, &labels));
  out << absl::StrFormat(
             "\nscaling: hosts x %d ranks, links as in %s, %d samples per rank; predicted step "
             "ms\n",
             config.ranks_per_host, cluster.name, profile.batch_per_rank)
      << FormatScaling(scaling, labels, profile.batch_per_rank);
  if (!config.plot.empty()) {
    CAVS_RETURN_IF_ERROR(Plot(config, scaling, labels, profile, cluster, out));
  }
  return absl::OkStatus();
}

}  // namespace cavs::sim
