// Prometheus' own checker for the /metrics text, shared by the unit and end-to-end tests. scripts/setup
// puts promtool in ${RDMABLK_DEPS_DIR:-/var/cache/rdmablk}/promtool/ (taken out of Debian's `prometheus`
// package without installing the server); $RDMABLK_PROMTOOL, /usr/bin/promtool and $PATH also work.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

namespace rdmablk::test_support {

inline std::string find_promtool() {
  if (const char* env = std::getenv("RDMABLK_PROMTOOL"); env != nullptr && *env != '\0') return env;
  const char* deps = std::getenv("RDMABLK_DEPS_DIR");
  const std::string cached = std::string(deps != nullptr && *deps != '\0' ? deps : "/var/cache/rdmablk") + "/promtool/promtool";
  if (::access(cached.c_str(), X_OK) == 0) return cached;
  if (::access("/usr/bin/promtool", X_OK) == 0) return "/usr/bin/promtool";
  return "promtool";
}

// Runs `promtool check metrics` on `text`; returns its exit status and output (127: promtool not found).
inline std::pair<int, std::string> promtool_check(const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string file = (dir / ("rdmablk-metrics-" + std::to_string(::getpid()) + ".txt")).string();
  {
    std::ofstream f(file, std::ios::binary);
    f << text;
  }
  const std::string cmd = find_promtool() + " check metrics < '" + file + "' 2>&1";
  std::string output;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) output.append(buf, n);
  const int status = ::pclose(p);
  std::filesystem::remove(file);
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (rc == 127) output += "\n(promtool not found: scripts/setup fetches it)";
  return {rc, output};
}

}  // namespace rdmablk::test_support
