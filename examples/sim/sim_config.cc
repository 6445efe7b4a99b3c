#include "examples/sim/sim_config.h"

#include <functional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "core/status.h"
#include "distributed/model_profile.h"

namespace cavs::sim {
namespace {

using Setter = std::function<absl::Status(SimConfig&, const std::string&)>;

struct FlagSpec {
  const char* name;
  const char* value_name;  // empty for boolean flags
  const char* help;
  Setter set;
};

constexpr int kMaxHosts = 1 << 16;

Setter Path(const char* name, std::string SimConfig::*field) {
  return [name, field](SimConfig& c, const std::string& v) {
    if (v.empty()) return absl::InvalidArgumentError(absl::StrCat("--", name, ": empty path"));
    c.*field = v;
    return absl::OkStatus();
  };
}

Setter Int(const char* name, int SimConfig::*field, int min, int max) {
  return [=](SimConfig& c, const std::string& v) {
    int x = 0;
    if (!absl::SimpleAtoi(v, &x) || x < min || x > max) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": '", v, "' is not an integer in [", min, ", ", max, "]"));
    }
    c.*field = x;
    return absl::OkStatus();
  };
}

Setter Double(const char* name, double SimConfig::*field, double max) {
  return [=](SimConfig& c, const std::string& v) {
    double x = 0;
    if (!absl::SimpleAtod(v, &x) || !(x >= 0 && x <= max)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": '", v, "' is not a number in [0, ", max, "]"));
    }
    c.*field = x;
    return absl::OkStatus();
  };
}

Setter Bool(const char* name, bool SimConfig::*field) {
  return [name, field](SimConfig& c, const std::string& v) {
    if (v.empty() || v == "true" || v == "1") {
      c.*field = true;
    } else if (v == "false" || v == "0") {
      c.*field = false;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": '", v, "' is not true or false"));
    }
    return absl::OkStatus();
  };
}

absl::Status SetScaling(SimConfig& c, const std::string& v) {
  c.scaling.clear();
  if (v == "none") return absl::OkStatus();
  for (absl::string_view item : absl::StrSplit(v, ',')) {
    int hosts = 0;
    if (!absl::SimpleAtoi(item, &hosts) || hosts < 1 || hosts > kMaxHosts) {
      return absl::InvalidArgumentError(absl::StrCat("--scaling: '", item,
                                                     "' is not a host count in [1, ", kMaxHosts,
                                                     "] (expected a list like 1,2,4,8 or none)"));
    }
    c.scaling.push_back(hosts);
  }
  return absl::OkStatus();
}

const std::vector<FlagSpec>& Flags() {
  using C = SimConfig;
  static const auto* flags = new std::vector<FlagSpec>{
      {"profile", "FILE", "the model profile (docs/distributed.md); required",
       Path("profile", &C::profile_path)},
      {"cluster", "FILE", "the cluster description (docs/distributed.md); required",
       Path("cluster", &C::cluster_path)},
      {"strategy-file", "FILE", "also predict this strategy (the strategy text format)",
       Path("strategy-file", &C::strategy_path)},
      {"strategy-out", "FILE",
       "write the best strategy to FILE, the searched ones --top lists to FILE.1, FILE.2, ... "
       "(auto#1, auto#2, ... as --strategy=auto numbers them)",
       Path("strategy-out", &C::strategy_out)},
      {"measured", "FILE",
       "measured step times, lines 'STRATEGY MS [SE_%]' (a builder, file, auto#N of --top; "
       "SE_%: the measurement's standard error): the model corrected by them as "
       "--strategy=auto's trials correct it, checked out of sample",
       Path("measured", &C::measured_path)},
      {"allow-compression", "", "let the search use fp16 buckets (it changes the gradients)",
       Bool("allow-compression", &C::allow_compression)},
      {"poll-cost", "C",
       "what a unit in flight during compute costs it, s a second of its own work, instead of "
       "the profile's poll_cost (docs/distributed.md)",
       Double("poll-cost", &C::poll_cost, distributed::kMaxPollCost)},
      {"poll-cost-per-mb", "S",
       "what a MB a rank moves in units in flight during compute costs it, s, instead of the "
       "profile's poll_cost_per_mb (docs/distributed.md)",
       Double("poll-cost-per-mb", &C::poll_cost_per_mb, distributed::kMaxPollCostPerMb)},
      {"scaling", "H1,H2,..", "host counts of the scaling table, or none (default 1,2,4,...,256)",
       SetScaling},
      {"ranks-per-host", "N", "ranks per host in the scaling table (default 8)",
       Int("ranks-per-host", &C::ranks_per_host, 1, 1024)},
      {"plot", "FILE.png", "plot the scaling table with gnuplot (writes FILE.png.csv and .gp)",
       Path("plot", &C::plot)},
      {"top", "N", "searched strategies to list (default 3)", Int("top", &C::top, 1, 100)},
      {"units", "BOOL", "print each strategy's units (default true)", Bool("units", &C::units)},
      {"help", "", "print this help and exit", Bool("help", &C::help)},
  };
  return *flags;
}

const FlagSpec* FindFlag(const std::string& name) {
  const std::string canonical = absl::StrReplaceAll(name, {{"_", "-"}});
  for (const FlagSpec& f : Flags()) {
    if (canonical == f.name) return &f;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<SimConfig> ParseSimFlags(const std::vector<std::string>& args) {
  SimConfig config;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 3 || arg.rfind("--", 0) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", arg, "' (flags look like --name=value)"));
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const FlagSpec* flag = FindFlag(name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " (see --help)"));
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (*flag->value_name != '\0' && std::string(flag->value_name) != "BOOL") {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("--", flag->name, " needs a value"));
      }
      value = args[++i];
    }
    CAVS_RETURN_IF_ERROR(flag->set(config, value));
  }
  if (config.help) return config;
  if (config.profile_path.empty()) return absl::InvalidArgumentError("--profile is required");
  if (config.cluster_path.empty()) return absl::InvalidArgumentError("--cluster is required");
  if (!config.plot.empty() && config.scaling.empty()) {
    return absl::InvalidArgumentError("--plot draws the scaling table: --scaling=none has none");
  }
  return config;
}

std::string SimHelpText() {
  std::string text =
      "usage: cavs-sim --profile=FILE --cluster=FILE [flags]\n\n"
      "Predicts the training step time of every strategy builder and of a searched strategy\n"
      "for a model profile on a cluster, with a scaling table (docs/distributed.md).\n\n"
      "flags:\n";
  for (const FlagSpec& f : Flags()) {
    const std::string head = *f.value_name == '\0' ? absl::StrCat("--", f.name)
                                                   : absl::StrCat("--", f.name, "=", f.value_name);
    absl::StrAppend(&text, "  ", head, std::string(head.size() < 26 ? 26 - head.size() : 1, ' '),
                    f.help, "\n");
  }
  absl::StrAppend(&text,
                  "\nexit status: 0 done, 2 a bad flag or input file (errors name the file, line "
                  "and field), 1 any other failure\n");
  return text;
}

}  // namespace cavs::sim
