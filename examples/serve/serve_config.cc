#include "examples/serve/serve_config.h"

#include <cstdint>
#include <functional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "scheduler/plan.h"

namespace cavs::serve {
namespace {

using Setter = std::function<absl::Status(ServeConfig&, const std::string&)>;

struct FlagSpec {
  const char* name;
  const char* value_name;
  const char* help;
  Setter set;
};

// An integer flag in [lo, hi], stored by `store`.
Setter Int(const char* name, int64_t lo, int64_t hi,
           std::function<void(ServeConfig&, int64_t)> store) {
  return [=](ServeConfig& c, const std::string& v) {
    int64_t x = 0;
    if (!absl::SimpleAtoi(v, &x) || x < lo || x > hi) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": '", v, "' is not an integer from ", lo, " to ", hi));
    }
    store(c, x);
    return absl::OkStatus();
  };
}

Setter OnOff(const char* name, bool ServeConfig::*field) {
  return [=](ServeConfig& c, const std::string& v) {
    if (v != "on" && v != "off") {
      return absl::InvalidArgumentError(absl::StrCat("--", name, ": '", v, "' is not on or off"));
    }
    c.*field = v == "on";
    return absl::OkStatus();
  };
}

Setter Text(const char* name, std::function<std::string&(ServeConfig&)> field) {
  return [=](ServeConfig& c, const std::string& v) {
    if (v.empty()) return absl::InvalidArgumentError(absl::StrCat("--", name, ": empty value"));
    field(c) = v;
    return absl::OkStatus();
  };
}

const std::vector<FlagSpec>& Flags() {
  static const std::vector<FlagSpec> flags = {
      {"checkpoint", "PATH",
       "the model: a checkpoint of cavs-train, or a directory of them (the newest that verifies)",
       Text("checkpoint", [](ServeConfig& c) -> std::string& { return c.checkpoint; })},
      {"device", "cpu|cuda", "where the model runs (default cpu)",
       Text("device", [](ServeConfig& c) -> std::string& { return c.device; })},
      {"host", "ADDR", "the address to listen on (default 127.0.0.1)",
       Text("host", [](ServeConfig& c) -> std::string& { return c.server.host; })},
      {"port", "N", "the port (default 8080; 0: any free port, printed at start)",
       Int("port", 0, 65535,
           [](ServeConfig& c, int64_t x) { c.server.port = static_cast<int>(x); })},
      {"max-batch", "N",
       "samples per batch at most; a batch starts once this many wait (default 256)",
       Int("max-batch", 1, 1 << 20,
           [](ServeConfig& c, int64_t x) { c.server.batching.max_batch = x; })},
      {"max-wait-us", "US", "a batch starts once its oldest sample waited this long (default 2000)",
       Int("max-wait-us", 0, 60'000'000,
           [](ServeConfig& c, int64_t x) {
             c.server.batching.max_wait = std::chrono::microseconds(x);
           })},
      {"batch-policy", "NAME",
       "when a batch starts: size-or-deadline (default), or eager (also when nothing runs)",
       Text("batch-policy", [](ServeConfig& c) -> std::string& { return c.server.policy; })},
      {"queue", "N", "samples waiting at most; more is answered 503 (default 4096)",
       Int("queue", 1, 1 << 24,
           [](ServeConfig& c, int64_t x) { c.server.batcher.queue_capacity = x; })},
      {"max-body-bytes", "N", "a longer request body is answered 413 (default 1048576)",
       Int("max-body-bytes", 1, int64_t{1} << 30,
           [](ServeConfig& c, int64_t x) { c.server.max_body_bytes = x; })},
      {"max-inputs", "N", "inputs per request at most (default 256)",
       Int("max-inputs", 1, 1 << 20,
           [](ServeConfig& c, int64_t x) { c.server.limits.max_inputs = x; })},
      {"max-depth", "N",
       "rounds of an input at most: a tree's nesting and height, a language model's sentence's "
       "words + 1 (default 100)",
       Int("max-depth", 1, 100000,
           [](ServeConfig& c, int64_t x) { c.server.limits.max_depth = static_cast<int>(x); })},
      {"max-words", "N", "words per input at most (default 512)",
       Int("max-words", 1, 1 << 20,
           [](ServeConfig& c, int64_t x) { c.server.limits.max_words = static_cast<int>(x); })},
      {"max-top-k", "N", "a language model's \"top_k\" at most (default 100)",
       Int("max-top-k", 0, 1 << 20,
           [](ServeConfig& c, int64_t x) { c.server.limits.max_top_k = static_cast<int>(x); })},
      {"http-threads", "N", "connections served at once (default 64)",
       Int("http-threads", 1, 4096,
           [](ServeConfig& c, int64_t x) { c.server.http_threads = static_cast<int>(x); })},
      {"threads", "N", "CPU threads of the engine (default 0: the runtime's choice)",
       Int("threads", 0, 1024, [](ServeConfig& c, int64_t x) { c.threads = static_cast<int>(x); })},
      {"fold", "on|off", "fold the input projections (Engine::FoldInputProjections; default on)",
       OnOff("fold", &ServeConfig::fold)},
      {"join", "on|off",
       "inputs that arrive while a batch runs join it between its rounds where they fit in the "
       "rounds left (Engine::RunJoining; CPU and height policy; default off)",
       OnOff("join", &ServeConfig::join)},
      {"policy", "NAME", "the engine's round policy: height (default), depth, agenda",
       [](ServeConfig& c, const std::string& v) -> absl::Status {
         CAVS_ASSIGN_OR_RETURN(c.server.plan.policy, scheduler::ParsePolicy(v));
         return absl::OkStatus();
       }},
  };
  return flags;
}

}  // namespace

absl::StatusOr<ServeConfig> ParseServeFlags(const std::vector<std::string>& args) {
  ServeConfig c;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      c.help = true;
      continue;
    }
    if (arg.size() < 3 || arg.rfind("--", 0) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", arg, "' (flags look like --name=value)"));
    }
    const size_t eq = arg.find('=');
    std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    for (char& ch : name) ch = ch == '_' ? '-' : ch;
    const FlagSpec* flag = nullptr;
    for (const FlagSpec& f : Flags()) {
      if (name == f.name) flag = &f;
    }
    if (flag == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " (see --help)"));
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
    }
    CAVS_RETURN_IF_ERROR(flag->set(c, value));
  }
  c.server.batcher.fold = c.fold;
  c.server.batcher.join = c.join;
  if (!c.help && c.checkpoint.empty()) {
    return absl::InvalidArgumentError("--checkpoint is required (a checkpoint of cavs-train)");
  }
  return c;
}

std::string ServeHelpText() {
  std::string out =
      "Usage: cavs-serve --checkpoint=PATH [--flag=value ...]\n"
      "Serves a model trained by cavs-train over HTTP/1.1 (docs/serving.md):\n"
      "  POST /v1/predict, GET /healthz, GET /metrics\n\nFlags:\n";
  for (const FlagSpec& f : Flags()) {
    absl::StrAppend(&out, "  --", f.name, "=", f.value_name, "\n      ", f.help, "\n");
  }
  return out;
}

}  // namespace cavs::serve
