// Helpers shared by the examples/data tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tests/testing/temp_dir.h"

namespace cavs::examples::testing {

// Whether `text` contains `part` (gmock's HasSubstr without linking gmock).
inline ::testing::AssertionResult Has(absl::string_view text, absl::string_view part) {
  if (text.find(part) != absl::string_view::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' lacks '" << part << "'";
}

// The message of `status` as a std::string (readable in gtest failure output).
inline std::string Msg(const absl::Status& status) { return std::string(status.message()); }

// Writes `text` to a file named `name` in the test's temporary folder; returns its path.
inline std::string WriteTemp(const std::string& name, const std::string& text) {
  // In the process's own folder (removed at exit): ctest runs each test in its own process, in
  // parallel, and several tests write files of the same name.
  const std::string path = cavs::tests::TempPath(name);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr) << path;
  if (f == nullptr) return path;
  EXPECT_EQ(std::fwrite(text.data(), 1, text.size(), f), text.size());
  std::fclose(f);
  return path;
}

// Whether `path` can be opened for reading.
inline bool FileExists(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  std::fclose(f);
  return true;
}

}  // namespace cavs::examples::testing
