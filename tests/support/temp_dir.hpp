// A fresh, empty folder under the system temp folder for one test, removed with everything
// in it when the test ends (pass or fail).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace testsupport {

struct TempDir {
  std::filesystem::path path;
  /// `prefix` names the folder (luminal-<prefix>-XXXXXX) so a leftover says which test made it.
  explicit TempDir(const std::string& prefix) {
    std::string t = (std::filesystem::temp_directory_path() / ("luminal-" + prefix + "-XXXXXX")).string();
    if (::mkdtemp(t.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + t);
    path = t;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace testsupport
