#include "examples/data/gnuplot.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace cavs::examples {
namespace {

// The executable `binary` in a folder of $PATH, or "" if there is none. Searched here rather
// than by a shell, so that no path of the user's ever reaches a shell.
std::string FindOnPath(const std::string& binary) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "", ':')) {
    std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", binary);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// Runs `argv` (argv[0] a path) without a shell, its output discarded, and waits for it.
absl::Status RunQuietly(const std::vector<std::string>& argv) {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  // The child starts with default signal actions: cavs-train ignores SIGXFSZ (train_main.cc),
  // which gnuplot should not inherit.
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGXFSZ);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int error = posix_spawn(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (error != 0) {
    return absl::InternalError(absl::StrCat("cannot run ", argv[0], ": ", std::strerror(error)));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return absl::InternalError(absl::StrCat("waiting for ", argv[0], ": ", std::strerror(errno)));
    }
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  return absl::InternalError(
      WIFEXITED(status) ? absl::StrCat(argv[0], " exited with status ", WEXITSTATUS(status))
                        : absl::StrCat(argv[0], " was killed by signal ", WTERMSIG(status)));
}

}  // namespace

std::string GnuplotQuote(absl::string_view text) {
  // In a single-quoted gnuplot string nothing is special (no backquote substitution, no
  // macros, no escapes) except the quote itself, written twice.
  return absl::StrCat("'", absl::StrReplaceAll(text, {{"'", "''"}}), "'");
}

absl::StatusOr<bool> RunGnuplot(const std::string& script_path) {
  const std::string gnuplot = FindOnPath("gnuplot");
  if (gnuplot.empty()) return false;
  // "./" before a relative path, which gnuplot would otherwise read as an option if it began
  // with '-'.
  absl::Status ran =
      RunQuietly({gnuplot, script_path[0] == '/' ? script_path : "./" + script_path});
  if (!ran.ok()) {
    return absl::InternalError(
        absl::StrCat("gnuplot failed on ", script_path, ": ", ran.message()));
  }
  return true;
}

}  // namespace cavs::examples
