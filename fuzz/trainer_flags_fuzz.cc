// libFuzzer target: cavs-train's command-line parser (examples/trainer/trainer_config.h). The
// input is the argument list, one argument per line ('\n' separates them; argv[0] is added).
// Any input must give an InvalidArgument of one line, or a configuration that ValidateConfig
// accepts and whose integer flags hold exactly the values given (read back here from the
// arguments, independently of the parser: a value wrapped into a narrower type is a bug).
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "core/status.h"
#include "examples/trainer/trainer_config.h"

namespace {

using cavs::trainer::TrainerConfig;

// The integer flags and their fields, widened.
const std::map<std::string, int64_t (*)(const TrainerConfig&)>& IntegerFlags() {
  static const auto* flags = new std::map<std::string, int64_t (*)(const TrainerConfig&)>{
      {"max-train", [](const TrainerConfig& c) -> int64_t { return c.max_train; }},
      {"max-dev", [](const TrainerConfig& c) -> int64_t { return c.max_dev; }},
      {"epochs", [](const TrainerConfig& c) -> int64_t { return c.epochs; }},
      {"batch", [](const TrainerConfig& c) -> int64_t { return c.batch; }},
      {"hidden", [](const TrainerConfig& c) -> int64_t { return c.hidden; }},
      {"embed", [](const TrainerConfig& c) -> int64_t { return c.embed; }},
      {"min-count", [](const TrainerConfig& c) -> int64_t { return c.min_count; }},
      {"threads", [](const TrainerConfig& c) -> int64_t { return c.threads; }},
      {"plan-threads", [](const TrainerConfig& c) -> int64_t { return c.plan_threads; }},
  };
  return *flags;
}

// The value the last `--name=value` or `--name value` of an integer flag gives, by name.
std::map<std::string, std::string> LastIntegerValues(const std::vector<std::string>& args) {
  std::map<std::string, std::string> last;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) continue;
    const size_t eq = a.find('=');
    const std::string name = absl::StrReplaceAll(
        a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2), {{"_", "-"}});
    std::string value;
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else if (name != "resume" && name != "quiet" && name != "help" && i + 1 < args.size()) {
      value = args[++i];  // every other flag takes the next argument as its value
    }
    if (IntegerFlags().count(name) != 0 || name == "seed") last[name] = value;
  }
  return last;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> args = {"cavs-train"};
  if (size > 0) {
    for (absl::string_view a : absl::StrSplit(text, '\n')) args.emplace_back(a);
  }
  absl::StatusOr<TrainerConfig> config = cavs::trainer::ParseTrainerFlags(args);
  if (!config.ok()) {
    const absl::Status& s = config.status();
    CAVS_CHECK(absl::IsInvalidArgument(s), "not an InvalidArgument: ", s.ToString());
    CAVS_CHECK(!s.message().empty() && s.message().find('\n') == absl::string_view::npos,
               "error empty or of several lines: ", s.message());
    return 0;
  }
  if (config->help) return 0;
  const absl::Status valid = cavs::trainer::ValidateConfig(*config);
  CAVS_CHECK(valid.ok(), "parsed, then rejected: ", valid.ToString());
  for (const auto& [name, value] : LastIntegerValues(args)) {
    if (name == "seed") {
      uint64_t want = 0;
      if (absl::SimpleAtoi(value, &want)) CAVS_CHECK(config->seed == want, "--seed=", value);
      continue;
    }
    int64_t want = 0;
    if (!absl::SimpleAtoi(value, &want)) continue;
    const int64_t got = IntegerFlags().at(name)(*config);
    CAVS_CHECK(got == want, "--", name, "=", value, " became ", got);
  }
  return 0;
}
