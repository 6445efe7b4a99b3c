// A test process's temporary files, all in one folder that is removed when the process exits, so
// that the suite leaves nothing behind, also when a test fails: the folder is
// <testing::TempDir()>/cavs_test_<pid>_XXXXXX (testing::TempDir() honours TEST_TMPDIR and TMPDIR),
// made at first use and removed with everything in it by a static destructor (a failed ASSERT
// returns from the test body; the process still exits normally). A crash leaves it behind, and
// CTest's cavs_tmpdir_check names it (tests/CMakeLists.txt).
//
// Thread-safety: TempRoot() may be called from any thread (a function-local static).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

namespace cavs::tests {
namespace internal {

class ProcessTempDir {
 public:
  ProcessTempDir() : owner_(::getpid()) {
    std::string pattern = ::testing::TempDir() + "cavs_test_" + std::to_string(owner_) + "_XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      const int err = errno;
      ADD_FAILURE() << "mkdtemp " << pattern << ": " << std::strerror(err);
      std::abort();
    }
    path_ = pattern;
  }
  // Only in the process that made it: a forked child that exits must not remove its parent's.
  ~ProcessTempDir() {
    if (::getpid() != owner_) return;
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  pid_t owner_;
  std::string path_;
};

}  // namespace internal

// This process's temporary folder (made at the first call, removed at exit).
inline const std::string& TempRoot() {
  static internal::ProcessTempDir dir;
  return dir.path();
}

// The path `name` inside TempRoot(); nothing is created.
inline std::string TempPath(const std::string& name) { return TempRoot() + "/" + name; }

// A new empty folder `name` inside TempRoot() (emptied if it exists); returns its path.
inline std::string FreshTempDir(const std::string& name) {
  const std::string dir = TempPath(name);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace cavs::tests
