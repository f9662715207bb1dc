// The one temporary directory of the tests: a private mkdtemp directory for one test, removed with
// everything in it at the end. Options say where (default $TMPDIR, else /tmp; the backend tests ask for
// /var/tmp, a disk file system, where they need O_DIRECT), and whether to keep it when the test failed
// (e2e: the target's log and config stay for inspection, and the path is printed). write() makes a file
// of a given mode (key files must be 0600 for the code under test); set_mounted() says a file system was
// mounted on the directory, detached before the removal.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace rdmablk::testing {

struct TempDirOptions {
  std::string prefix = "rdmablk-test";  // the directory is PARENT/PREFIX-XXXXXX
  std::filesystem::path parent;         // empty: $TMPDIR, or /tmp when that is unset or empty
  bool keep_on_failure = false;         // keep it (and print its path) when the current test has failed
};

class TempDir {
 public:
  using Options = TempDirOptions;

  TempDir() : TempDir(Options{}) {}
  // A failed mkdtemp is a test failure; path() is then empty and ok() false.
  explicit TempDir(const Options& options) : keep_on_failure_(options.keep_on_failure) {
    std::filesystem::path parent = options.parent;
    if (parent.empty()) {
      const char* env = std::getenv("TMPDIR");
      parent = env != nullptr && *env != '\0' ? env : "/tmp";
    }
    std::string tmpl = (parent / (options.prefix + "-XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp(" << tmpl << "): " << std::strerror(errno);
      return;
    }
    path_ = tmpl;
  }
  ~TempDir() {
    if (path_.empty()) return;
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
    if (keep_on_failure_ && ::testing::Test::HasFailure()) {
      std::fprintf(stderr, "[TempDir] keeping %s for inspection (the test failed)\n", path_.c_str());
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::filesystem::path& path() const { return path_; }
  // path()/name as a string (for APIs that take one).
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Writes `text` to path()/name (creating its directories) and sets `mode`; returns the file's path.
  std::filesystem::path write(const std::string& name, const std::string& text, mode_t mode = 0600) const {
    const auto p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    ::chmod(p.c_str(), mode);
    return p;
  }
  // A file system is mounted on path(): the destructor detaches it (umount2 MNT_DETACH) first.
  void set_mounted() { mounted_ = true; }

 private:
  std::filesystem::path path_;
  bool keep_on_failure_ = false;
  bool mounted_ = false;
};

}  // namespace rdmablk::testing
