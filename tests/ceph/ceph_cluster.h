// The throw-away Ceph cluster the `ceph` tests run against (tests/ceph/ceph-cluster).
//
// Under ctest the fixture test ceph.cluster_start starts one cluster for the whole label and names its
// directory in RDMABLK_CEPH_DIR (ceph.cluster_stop removes it). Run by hand without that variable, the
// test binary starts its own cluster in a temporary directory on first use and stops it at exit.
// Without the ceph packages the tests skip, saying why. Each test creates its own images (unique names),
// so tests may share the cluster and run in parallel.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "support/ports.h"

namespace ceph_test {

#ifndef RDMABLK_SOURCE_DIR
#error "RDMABLK_SOURCE_DIR must name the source tree"
#endif

inline std::string fixture_script() { return std::string(RDMABLK_SOURCE_DIR) + "/tests/ceph/ceph-cluster"; }

// sh -c COMMAND; returns the exit status (-1 if killed), stdout+stderr in *out.
inline int shell(const std::string& command, std::string* out = nullptr) {
  std::string cmd = command + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  std::string text;
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  const int st = ::pclose(p);
  if (out != nullptr) *out = std::move(text);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

class Cluster {
 public:
  // The cluster, or nullptr with *why set (the reason to skip, or a start failure's output).
  static const Cluster* get(std::string* why) {
    static Cluster* c = nullptr;
    static std::string reason;
    static bool tried = false;
    if (!tried) {
      tried = true;
      c = start(&reason);
    }
    if (c == nullptr) *why = reason;
    return c;
  }

  const std::string& dir() const { return dir_; }
  std::string conf() const { return dir_ + "/ceph.conf"; }
  std::string rdmablk_keyring() const { return dir_ + "/rdmablk.keyring"; }
  // The mon's msgr2 port (from the conf's `mon host`).
  int mon_port() const {
    std::ifstream in(conf());
    std::string line;
    while (std::getline(in, line)) {
      const std::string key = "mon host = [v2:127.0.0.1:";
      if (line.rfind(key, 0) == 0) return std::atoi(line.c_str() + key.size());
    }
    return 0;
  }

  // A copy of the conf (at `path`) whose mon is on two ports nobody listens on (free a moment ago), with
  // `extra` added to [global]. Returns the "127.0.0.1:PORT" of its msgr2 address.
  std::string write_dead_conf(const std::string& path, const std::string& extra = "") const {
    std::ifstream in(conf());
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    const int v2 = rdmablk::testing::pick_free_port(), v1 = rdmablk::testing::pick_free_port();
    const std::string dead = "127.0.0.1:" + std::to_string(v2);
    const size_t at = text.find("mon host = ");
    const size_t end = text.find('\n', at);
    text.replace(at, end - at, "mon host = [v2:" + dead + ",v1:127.0.0.1:" + std::to_string(v1) + "]");
    text.replace(text.find("[global]\n") + 9, 0, extra);
    std::ofstream(path) << text;
    return dead;
  }
  // `rbd ARGS` as client.admin against this cluster; exit status, output in *out.
  int rbd(const std::string& args, std::string* out = nullptr) const {
    return shell("env -u CEPH_KEYRING -u CEPH_ARGS -u CEPH_CONF timeout 60 rbd -c " + conf() +
                     " -n client.admin " + args,
                 out);
  }
  // A new image in pool rbd (optionally in RADOS namespace ns), with a name unique to this process.
  std::string create_image(const std::string& stem, const std::string& size = "64M", const std::string& ns = "") const {
    static std::atomic<int> counter{0};
    const std::string name = stem + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    std::string out;
    if (!ns.empty()) rbd("namespace create rbd/" + ns, &out);  // fails harmlessly when it exists
    const std::string spec = ns.empty() ? "rbd/" + name : "rbd/" + ns + "/" + name;
    const int rc = rbd("create --size " + size + " " + spec, &out);
    EXPECT_EQ(rc, 0) << "rbd create " << spec << ": " << out;
    return name;
  }

 private:
  static Cluster* start(std::string* why) {
    if (const char* d = std::getenv("RDMABLK_CEPH_DIR"); d != nullptr && *d != '\0') {
      if (!std::filesystem::exists(std::string(d) + "/ceph.conf")) {
        *why = std::string("the ctest fixture ceph.cluster_start did not start a cluster in ") + d +
               " (see its output: the ceph packages may be missing)";
        return nullptr;
      }
      return new Cluster(d);
    }
    char tmpl[] = "/tmp/rdmablk-ceph-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      *why = "mkdtemp failed";
      return nullptr;
    }
    const std::string dir = std::string(tmpl) + "/cluster";
    std::string out;
    const int rc = shell(fixture_script() + " start " + dir, &out);
    if (rc == 77) {
      *why = out;
      std::filesystem::remove_all(tmpl);
      return nullptr;
    }
    if (rc != 0) {
      *why = "FAILED to start the Ceph cluster (exit " + std::to_string(rc) + "):\n" + out;
      return nullptr;
    }
    auto* c = new Cluster(dir);
    static std::string root = tmpl;
    std::atexit([] {
      std::string ignored;
      shell(fixture_script() + " stop " + root + "/cluster", &ignored);
      std::filesystem::remove_all(root);
    });
    return c;
  }
  explicit Cluster(std::string dir) : dir_(std::move(dir)) {}

  std::string dir_;
};

// In a test body: the cluster, or GTEST_SKIP / FAIL with the reason.
#define CEPH_CLUSTER_OR_SKIP(var)                                                       \
  std::string ceph_why_;                                                                \
  const ::ceph_test::Cluster* var = ::ceph_test::Cluster::get(&ceph_why_);              \
  if (var == nullptr) {                                                                 \
    if (ceph_why_.rfind("FAILED", 0) == 0) FAIL() << ceph_why_;                         \
    GTEST_SKIP() << ceph_why_;                                                          \
  }

}  // namespace ceph_test
