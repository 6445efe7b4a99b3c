#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "distributed/builders.h"
#include "distributed/cost_model.h"
#include "examples/sim/sim_config.h"
#include "examples/sim/sim_report.h"
#include "gtest/gtest.h"

namespace cavs::sim {
namespace {

const std::string kData = CAVS_SIM_DATA_DIR;
const std::string kSst = kData + "/sst_tree_lstm.profile";
const std::string kLm = kData + "/lstm_lm.profile";
const std::string kTestbed = kData + "/testbed_4x1_1gbit.cluster";

std::string FreshDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/cavs_sim_" + name + "_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Removes a FreshDir when the test ends, an ASSERT's early return included.
struct RemoveAtEnd {
  std::string dir;
  ~RemoveAtEnd() { std::filesystem::remove_all(dir); }
};

// The SST profile on the 1 Gbit/s test bed, no scaling table.
SimConfig SstOnTestbed() {
  SimConfig config;
  config.profile_path = kSst;
  config.cluster_path = kTestbed;
  config.scaling.clear();
  return config;
}

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

absl::StatusOr<SimConfig> Flags(std::vector<std::string> args) {
  args.insert(args.begin(), "cavs-sim");
  return ParseSimFlags(args);
}

// Runs the report; the output, or the error message.
std::string Report(const SimConfig& config, absl::Status* status = nullptr) {
  std::ostringstream out;
  absl::Status s = RunSim(config, out);
  if (status != nullptr) *status = s;
  EXPECT_TRUE(status != nullptr || s.ok()) << s;
  return s.ok() ? out.str() : std::string(s.message());
}

// The step ms printed for `label` in the table of predictions.
double TableStepMs(const std::string& report, const std::string& label) {
  for (absl::string_view line : absl::StrSplit(report, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    double ms = 0;
    if (f.size() > 2 && f[0] == label && absl::SimpleAtod(f[1], &ms)) return ms;
  }
  return -1;
}

TEST(SimFlagsTest, DefaultsAndErrors) {
  absl::StatusOr<SimConfig> c = Flags({"--profile=p", "--cluster", "c"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->profile_path, "p");
  EXPECT_EQ(c->cluster_path, "c");
  EXPECT_EQ(c->scaling, (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256}));
  EXPECT_EQ(c->ranks_per_host, 8);
  EXPECT_FALSE(c->allow_compression);
  EXPECT_EQ(c->poll_cost, -1);  // the profile's
  EXPECT_EQ(c->poll_cost_per_mb, -1);
  c = Flags({"--profile=p", "--cluster=c", "--allow_compression", "--scaling=none",
             "--ranks-per-host=4", "--units=false", "--top=2", "--poll-cost=1.5",
             "--poll-cost-per-mb=0.003"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->poll_cost, 1.5);
  EXPECT_EQ(c->poll_cost_per_mb, 0.003);
  EXPECT_TRUE(c->allow_compression);
  EXPECT_TRUE(c->scaling.empty());
  EXPECT_EQ(c->ranks_per_host, 4);
  EXPECT_FALSE(c->units);
  EXPECT_EQ(c->top, 2);
  EXPECT_TRUE(Flags({"--help"})->help);
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--cluster=c"}, "--profile is required"},
      {{"--profile=p"}, "--cluster is required"},
      {{"--profile=p", "--cluster=c", "--bogus"}, "unknown flag --bogus (see --help)"},
      {{"--profile=", "--cluster=c"}, "--profile: empty path"},
      {{"--profile=p", "--cluster=c", "--scaling=1,x"},
       "--scaling: 'x' is not a host count in [1, 65536] (expected a list like 1,2,4,8 or none)"},
      {{"--profile=p", "--cluster=c", "--ranks-per-host=0"},
       "--ranks-per-host: '0' is not an integer in [1, 1024]"},
      {{"--profile=p", "--cluster=c", "--scaling=none", "--plot=x.png"},
       "--plot draws the scaling table: --scaling=none has none"},
      {{"--profile=p", "--cluster=c", "--top"}, "--top needs a value"},
      {{"--profile=p", "--cluster=c", "--poll-cost=-1"},
       "--poll-cost: '-1' is not a number in [0, 20]"},
      {{"--profile=p", "--cluster=c", "--poll-cost-per-mb=1"},
       "--poll-cost-per-mb: '1' is not a number in [0, 0.1]"},
      {{"stray"}, "unexpected argument 'stray' (flags look like --name=value)"},
  };
  for (const auto& [args, error] : bad) {
    absl::StatusOr<SimConfig> r = Flags(args);
    ASSERT_FALSE(r.ok()) << error;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), error);
  }
  EXPECT_NE(SimHelpText().find("--strategy-file=FILE"), std::string::npos);
}

// The committed examples: every builder's row is the cost model's prediction for it, the
// searched strategy is listed, parses, and is not predicted slower than any builder.
TEST(SimReportTest, PredictsEveryBuilderAndTheSearchOnTheExamples) {
  for (const std::string& cluster_file :
       {kTestbed, kData + "/testbed_2x2_100mbit.cluster", kData + "/uneven_2x2.cluster",
        kData + "/gpu_4x8_100gbit.cluster"}) {
    for (const std::string& profile_file : {kSst, kLm}) {
      SimConfig config;
      config.profile_path = profile_file;
      config.cluster_path = cluster_file;
      config.scaling = {1, 2};
      const std::string report = Report(config);
      absl::StatusOr<distributed::ModelProfile> profile =
          distributed::ParseModelProfile(Read(profile_file), profile_file);
      absl::StatusOr<distributed::ClusterSpec> cluster =
          distributed::ParseClusterSpec(Read(cluster_file), cluster_file);
      ASSERT_TRUE(profile.ok() && cluster.ok());
      core::ParameterStore store;
      ASSERT_TRUE(distributed::AddProfileParameters(*profile, &store).ok());
      const double best = TableStepMs(report, "auto");
      ASSERT_GT(best, 0) << report;
      for (const std::string& name : distributed::StrategyBuilderNames()) {
        absl::StatusOr<distributed::Strategy> s =
            distributed::BuildStrategy(name, store, cluster->world_size());
        ASSERT_TRUE(s.ok());
        absl::StatusOr<distributed::Prediction> p =
            distributed::PredictStepTime(*s, *profile, *cluster);
        ASSERT_TRUE(p.ok());
        EXPECT_NEAR(TableStepMs(report, name), p->step_s * 1e3, 0.006) << name << "\n" << report;
        EXPECT_LE(best, TableStepMs(report, name)) << name;
        EXPECT_NE(report.find(name + ": "), std::string::npos);  // its units
      }
      const size_t text = report.find("# cavs distributed strategy");
      ASSERT_NE(text, std::string::npos) << report;
      const size_t end = report.find("\n\nscaling:", text);
      absl::StatusOr<distributed::Strategy> searched =
          distributed::ParseStrategy(report.substr(text, end - text));
      ASSERT_TRUE(searched.ok()) << searched.status();
      EXPECT_TRUE(distributed::ValidateStrategy(*searched, store).ok());
      EXPECT_NE(report.find("search: "), std::string::npos);
      EXPECT_NE(report.find("scaling: hosts x 8 ranks"), std::string::npos);
    }
  }
}

// --strategy-out writes the searched strategy; --strategy-file reads it back and predicts the
// same step; the plot's CSV has a row per scale and a column per strategy.
TEST(SimReportTest, StrategyFilesAndPlotFiles) {
  const std::string dir = FreshDir("files");
  const RemoveAtEnd cleanup{dir};
  SimConfig config;
  config.profile_path = kSst;
  config.cluster_path = kTestbed;
  config.scaling = {1, 2, 4};
  config.ranks_per_host = 2;
  config.strategy_out = dir + "/auto.txt";
  config.plot = dir + "/scaling.png";
  config.top = 3;
  const std::string first = Report(config);
  ASSERT_TRUE(std::filesystem::exists(config.strategy_out));
  // The searched strategies as --strategy=auto numbers them go beside it, auto#N to FILE.N.
  const std::string out = config.strategy_out;
  for (const char* n : {".1", ".2", ".3"}) ASSERT_TRUE(std::filesystem::exists(out + n)) << n;
  EXPECT_FALSE(std::filesystem::exists(out + ".4"));
  EXPECT_NE(first.find("auto#1 to #3 to " + out + ".1 to .3"), std::string::npos) << first;
  config.strategy_out.clear();
  config.top = 1;
  config.strategy_path = out;
  const std::string second = Report(config);
  EXPECT_GT(TableStepMs(second, "file"), 0) << second;
  EXPECT_EQ(TableStepMs(second, "file"), TableStepMs(first, "auto"));
  config.strategy_path = out + ".3";
  EXPECT_GE(TableStepMs(Report(config), "file"), TableStepMs(second, "file"));
  const std::string csv = Read(config.plot + ".csv");
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u) << csv;
  EXPECT_EQ(lines[0],
            "ranks,allreduce,ps,ps-lb,partitioned-ps,hybrid,hier-allreduce,hier-hybrid,auto");
  EXPECT_EQ(lines[1].rfind("2,", 0), 0u);
  EXPECT_EQ(lines[3].rfind("8,", 0), 0u);
  EXPECT_NE(Read(config.plot + ".gp").find("set output '" + config.plot + "'"), std::string::npos);
}

TEST(SimReportTest, BadInputsNameTheFileLineAndField) {
  const std::string dir = FreshDir("bad");
  const RemoveAtEnd cleanup{dir};
  const std::string profile = dir + "/bad.profile";
  Write(profile, "version 1\nforward_ms 1\nbackward_ms 2\nparam a shape=4,x\n");
  SimConfig config;
  config.profile_path = profile;
  config.cluster_path = kTestbed;
  absl::Status status;
  EXPECT_EQ(Report(config, &status),
            profile +
                " line 4: field 'shape': bad dimension 'x' in '4,x' (expected positive "
                "integers)");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);

  const std::string cluster = dir + "/bad.cluster";
  Write(cluster, "version 1\ninter duplex=2\nhosts 2 bandwidth_gbit=1\n");
  config.profile_path = kSst;
  config.cluster_path = cluster;
  EXPECT_EQ(Report(config, &status),
            cluster + " line 2: field 'duplex': bad value '2' (expected a number in (0, 1])");

  config.cluster_path = dir + "/missing.cluster";
  EXPECT_EQ(Report(config, &status).rfind("--cluster: cannot read " + config.cluster_path, 0), 0u);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);

  const std::string strategy = dir + "/wrong.strategy";  // 2 ranks, the cluster has 4
  Write(strategy,
        "version 1\nworld_size 2\nparam embedding sparse\nparam W allreduce\n"
        "param U allreduce\nparam b allreduce\nparam out_W allreduce\n"
        "param out_b allreduce\n");
  config.cluster_path = kTestbed;
  config.strategy_path = strategy;
  EXPECT_EQ(Report(config, &status),
            strategy + ": the strategy is for world_size 2; the cluster has 4 ranks");
  Write(strategy, "version 1\nworld_size 4\nparam embedding allreduce\n");
  EXPECT_EQ(Report(config, &status),
            strategy +
                ": parameter 'embedding' has a row-sparse gradient; allreduce needs a dense "
                "one (use sparse or ps)");
  config.strategy_path.clear();
  config.strategy_out = kSst;  // never overwrite an input
  EXPECT_EQ(Report(config, &status), "--strategy-out: " + kSst + " is the input --profile=" + kSst);
}

// The fields of `label`'s line in the --measured correction's table.
std::vector<std::string> CorrectionRow(const std::string& report, const std::string& label) {
  const size_t table = report.find("\ncorrected by the ");
  if (table == std::string::npos) return {};
  for (absl::string_view line : absl::StrSplit(report.substr(table), '\n')) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (!f.empty() && f[0] == label) return f;
  }
  return {};
}

// --measured: the model corrected by measured steps, each measured one predicted from the
// others. Measurements equal to the predictions leave the model as it is; a step 5 ms slower
// than predicted everywhere is an offset, which the unmeasured strategies get too.
TEST(SimReportTest, MeasuredStepsCorrectTheModel) {
  const std::string dir = FreshDir("measured");
  const RemoveAtEnd cleanup{dir};
  SimConfig config = SstOnTestbed();
  config.units = false;
  const std::string plain = Report(config);
  const std::vector<std::string> labels = {"allreduce", "ps", "ps-lb", "partitioned-ps"};
  auto measured_file = [&](double extra_ms) {
    std::string text = "# strategy, ms\n";
    for (const std::string& label : labels) {
      absl::StrAppend(&text, label, " ", TableStepMs(plain, label) + extra_ms, "\n");
    }
    // The search's first, from its line "  auto#1: 80.38 ms, 2 units".
    absl::StrAppend(&text, "auto#1 ", TableStepMs(plain, "auto#1:") + extra_ms, "\n");
    const std::string path = dir + "/measured.txt";
    Write(path, text);
    return path;
  };
  config.measured_path = measured_file(0);
  std::string report = Report(config);
  EXPECT_NE(report.find("corrected by the 5 measured (--measured=" + config.measured_path + ")"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("out of sample (each measured one corrected from the others): median "
                        "|error| 0.0%, largest 0.0%; the model alone: median |error| 0.0%"),
            std::string::npos)
      << report;
  std::vector<std::string> row = CorrectionRow(report, "auto#1");
  ASSERT_EQ(row.size(), 5u) << report;
  EXPECT_EQ(row[3], row[1]);                            // measured as predicted
  EXPECT_EQ(CorrectionRow(report, "auto").size(), 0u);  // the searched are auto#N there

  config.measured_path = measured_file(5.0);
  report = Report(config);
  row = CorrectionRow(report, "hybrid");  // not measured
  ASSERT_EQ(row.size(), 5u) << report;
  EXPECT_EQ(row[3], "-");
  double predicted = 0, corrected = 0;
  ASSERT_TRUE(absl::SimpleAtod(row[1], &predicted) && absl::SimpleAtod(row[2], &corrected));
  EXPECT_GT(corrected, predicted + 4.0) << report;  // the offset, shrunk by the prior
  EXPECT_LT(corrected, predicted + 5.01) << report;
}

// A profile with its profiled step calibrates the cluster there before anything is predicted:
// hybrid, the strategy it ran, then predicts the measured step, and the line says by how much.
TEST(SimReportTest, AProfiledStepCalibratesTheCluster) {
  const std::string dir = FreshDir("profiled");
  const RemoveAtEnd cleanup{dir};
  SimConfig config = SstOnTestbed();
  config.units = false;
  const std::string plain = Report(config);
  const double hybrid = TableStepMs(plain, "hybrid");
  ASSERT_GT(hybrid, 0) << plain;
  EXPECT_EQ(plain.find("calibrated at the profiled step"), std::string::npos) << plain;
  const double measured = std::round(1.15 * hybrid * 100) / 100;
  config.profile_path = dir + "/profiled.profile";
  Write(config.profile_path, absl::StrCat(Read(kSst), "strategy hybrid\nstep_ms ", measured, "\n"));
  const std::string report = Report(config);
  EXPECT_NE(report.find(absl::StrFormat("calibrated at the profiled step (%.2f ms): allreduce, "
                                        "allgather x",
                                        measured)),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("under 'hybrid'"), std::string::npos) << report;
  EXPECT_NEAR(TableStepMs(report, "hybrid"), measured, 0.011) << report;
  EXPECT_NEAR(TableStepMs(report, "allreduce"), measured, 0.011) << report;
}

TEST(SimReportTest, BadMeasuredFilesNameTheFileLineAndField) {
  const std::string dir = FreshDir("bad_measured");
  const RemoveAtEnd cleanup{dir};
  SimConfig config = SstOnTestbed();
  config.measured_path = dir + "/measured.txt";
  const std::string& path = config.measured_path;
  absl::Status status;
  auto error = [&](const std::string& text) {
    Write(path, text);
    return Report(config, &status);
  };
  EXPECT_EQ(error("bogus 3\n")
                .rfind(path + " line 1: field 'strategy': unknown 'bogus' "
                              "(expected one of allreduce, ps, ",
                       0),
            0u)
      << error("bogus 3\n");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(error("auto#4 80\n").find("unknown 'auto#4'"), std::string::npos);  // --top 3
  EXPECT_NE(error("auto 80\n").find("unknown 'auto'"), std::string::npos);      // auto#1, ...
  EXPECT_EQ(error("ps 80\n\nps 81\n"),
            path + " line 3: field 'strategy': 'ps' is measured on line 1 already");
  EXPECT_EQ(error("ps x\n"),
            path + " line 1: field 'ms': bad value 'x' (expected a positive number)");
  EXPECT_EQ(error("ps -2\n"),
            path + " line 1: field 'ms': bad value '-2' (expected a positive number)");
  EXPECT_EQ(error("ps\n"), path + " line 1: field 'ms': missing (expected LABEL MS)");
  EXPECT_EQ(error("ps 80 x\n"),
            path + " line 1: field 'se_%': bad value 'x' (expected a number >= 0, or -)");
  EXPECT_EQ(error("ps 80 -1\n"),
            path + " line 1: field 'se_%': bad value '-1' (expected a number >= 0, or -)");
  EXPECT_EQ(error("ps 80 2.5 81\n"), path + " line 1: field 'se_%': unexpected '81' after it");
  EXPECT_EQ(error("# nothing\n"), path + ": no measured strategy");
  config.measured_path = dir + "/missing.txt";
  EXPECT_EQ(Report(config, &status).rfind("--measured: cannot read " + config.measured_path, 0),
            0u);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
}

struct Outcome {
  int status = -1;
  std::string output;
};

Outcome RunBinary(const std::string& flags) {
  Outcome o;
  const std::string cmd = std::string(CAVS_SIM_BINARY) + " " + flags + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return o;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) o.output.append(buffer, n);
  const int raw = pclose(pipe);
  o.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return o;
}

TEST(SimMainTest, ExitStatusAndOneErrorLine) {
  Outcome ok = RunBinary("--profile=" + kLm + " --cluster=" + kTestbed + " --scaling=1,2");
  EXPECT_EQ(ok.status, 0) << ok.output;
  EXPECT_NE(ok.output.find("predicted step (ms)"), std::string::npos);
  for (const std::string& flags :
       {std::string("--bogus"), "--profile=" + kLm, "--profile=/nonexistent --cluster=" + kTestbed,
        "--profile=" + kTestbed + " --cluster=" + kTestbed}) {
    Outcome o = RunBinary(flags);
    EXPECT_EQ(o.status, 2) << flags << ": " << o.output;
    EXPECT_EQ(o.output.rfind("cavs-sim: error: ", 0), 0u) << o.output;
    EXPECT_EQ(o.output.find('\n'), o.output.size() - 1) << o.output;
  }
  EXPECT_EQ(RunBinary("--help").status, 0);
}

}  // namespace
}  // namespace cavs::sim
