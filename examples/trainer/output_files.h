// The files a cavs-train run writes (--checkpoint-dir, --log-json, --csv, --plot, --trace),
// checked before any training, so that a misconfigured output is an error at once rather than
// after the first epoch, and an output never replaces an input or a previous run's checkpoints.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "examples/trainer/trainer_config.h"

namespace cavs::trainer {

// Checks every output of `config`:
// - --checkpoint-dir is a directory (created here if missing) that can be written; without
//   --resume it must not hold checkpoint files already (another run's: resuming or a fresh
//   directory are the only ways not to mix two runs);
// - --log-json, --csv, --save-best, --plot (and the FILE.png.gp / FILE.png.csv beside it) and
//   --trace name files that can be written (an existing writable file, or a writable directory
//   to create one in), none of them a directory, the same file as another output, or the same
//   file as an input (--train, --dev, --test, --strategy-file).
// Errors: InvalidArgument naming the flag, the path and the reason; FailedPrecondition for the
// checkpoints of another run. Creates --checkpoint-dir, and nothing else.
[[nodiscard]] absl::Status CheckOutputs(const TrainerConfig& config);

}  // namespace cavs::trainer
