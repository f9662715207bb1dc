// A private directory under $TMPDIR for one test, removed with everything in it at the end, and a
// helper that writes a file into it with a given mode (key files must be 0600 for the code under test).
#pragma once

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace rdmablk::testing {

class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "rdmablk-test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (std::string(prefix) + "-XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Writes `text` to path()/name (creating its directories) and sets `mode`; returns the file's path.
  std::filesystem::path write(const std::string& name, const std::string& text, mode_t mode = 0600) const {
    const auto p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    ::chmod(p.c_str(), mode);
    return p;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace rdmablk::testing
