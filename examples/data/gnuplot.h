// Running gnuplot from the example binaries (cavs-train's learning curve, cavs-sim's scaling
// plot) without a shell: the binary is looked up on $PATH here and started with posix_spawn,
// so no path of the user's ever reaches a shell, and every path inside a script is quoted for
// gnuplot. Shared so that each binary only writes its own script.
//
// Thread-safety: RunGnuplot waits for the child; call from one thread at a time.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cavs::examples {

// `text` as a single-quoted gnuplot string: inside one only the quote is special, written twice.
std::string GnuplotQuote(absl::string_view text);

// Runs gnuplot on the script at `script_path` (its output discarded) and waits for it. Returns
// false, without error, when there is no gnuplot on $PATH; an error when it cannot be started,
// fails or is killed.
[[nodiscard]] absl::StatusOr<bool> RunGnuplot(const std::string& script_path);

}  // namespace cavs::examples
