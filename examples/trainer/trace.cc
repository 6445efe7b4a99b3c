#include "examples/trainer/trace.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "examples/data/text_file.h"

namespace cavs::trainer {

int64_t TraceRecorder::Now() { return absl::GetCurrentTimeNanos() / 1000; }

void TraceRecorder::Span(absl::string_view name, int64_t start_us, Args args) {
  SpanTo(name, start_us, Now(), std::move(args));
}

void TraceRecorder::SpanTo(absl::string_view name, int64_t start_us, int64_t end_us, Args args) {
  if (!enabled_) return;
  events_.push_back({std::string(name), start_us, end_us - start_us, std::move(args)});
}

std::string TraceRecorder::Json() const {
  // Names and arg keys are the trainer's own identifiers: no characters JSON must escape.
  std::string out =
      absl::StrCat("{\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":", rank_,
                   ",\"tid\":0,\"args\":{\"name\":\"cavs-train rank ", rank_, "\"}}");
  for (const Event& e : events_) {
    absl::StrAppend(&out, ",\n{\"name\":\"", e.name,
                    "\",\"cat\":\"cavs\",\"ph\":\"X\",\"ts\":", e.start_us,
                    ",\"dur\":", e.duration_us, ",\"pid\":", rank_, ",\"tid\":0,\"args\":{");
    for (size_t i = 0; i < e.args.size(); ++i) {
      absl::StrAppend(&out, i ? "," : "", "\"", e.args[i].first, "\":", e.args[i].second);
    }
    absl::StrAppend(&out, "}}");
  }
  absl::StrAppend(&out, "\n],\"displayTimeUnit\":\"ms\"}\n");
  return out;
}

absl::Status TraceRecorder::Write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  // Checked before the run (output_files.h): a failure now is the machine's (a full disk), an
  // error like a checkpoint's.
  if (const std::optional<examples::WriteFailure> failed = examples::WriteWholeFile(tmp, Json())) {
    std::remove(tmp.c_str());
    return absl::InternalError(
        absl::StrCat("--trace: cannot write ", tmp, ": ", std::strerror(failed->error)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return absl::InternalError(
        absl::StrCat("--trace: cannot rename ", tmp, " to ", path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

std::string TracePath(const std::string& base, int rank) {
  return absl::StrCat(base, ".rank", rank, ".json");
}

}  // namespace cavs::trainer
