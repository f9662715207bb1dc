// Helpers for the backend tests: where their temporary directories go, aligned buffers, synchronous I/O, private mounts.
#pragma once

#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "support/temp_dir.h"

namespace rdmablk::backend::test {

namespace st = protocol::status;

// The backend tests' directories (tests/support/temp_dir.h): under /tmp (often tmpfs: buffered I/O, and
// the tests that mount a file system on theirs), or under /var/tmp, a disk file system, for O_DIRECT.
using rdmablk::testing::TempDir;
inline const TempDir::Options kTmp{.prefix = "rdmablk-backend", .parent = "/tmp", .keep_on_failure = false};
inline const TempDir::Options kVarTmp{.prefix = "rdmablk-backend", .parent = "/var/tmp", .keep_on_failure = false};

// Page-aligned, zero-filled memory (O_DIRECT-safe).
struct AlignedBuf {
  explicit AlignedBuf(size_t n) : size(n) {
    void* p = nullptr;
    if (::posix_memalign(&p, 4096, n == 0 ? 4096 : n) != 0) std::abort();
    std::memset(p, 0, n);
    data.reset(static_cast<char*>(p));
  }
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data;
  size_t size;
  char* get() const { return data.get(); }
  iovec iov() const { return iovec{data.get(), size}; }
};

inline void fill_pattern(char* p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = static_cast<char>(x);
  }
}

inline bool all_zero(const char* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != 0) return false;
  return true;
}

// Submits one request and waits for its completion. Returns the submit status if it was refused.
inline Status run(Queue& q, Request req) {
  req.user_data = 0xC0FFEE;
  const Status s = q.submit(req);
  if (!s.ok()) return s;
  Completion c[1];
  for (int i = 0; i < 1000; ++i) {
    if (q.reap(c, 1) == 1) {
      EXPECT_EQ(c[0].user_data, 0xC0FFEEu);
      return c[0].status;
    }
  }
  ADD_FAILURE() << "no completion";
  return st::internal_error;
}

inline Request rw(Op op, uint64_t slba, uint32_t nlb, void* buf, int buf_index = -1, bool fua = false) {
  Request r;
  r.op = op;
  r.slba = slba;
  r.nlb = nlb;
  r.buf = buf;
  r.buf_index = buf_index;
  r.fua = fua;
  return r;
}

inline Request range(Op op, uint64_t slba, uint32_t nlb) { return rw(op, slba, nlb, nullptr); }

// Enters a private mount namespace once per process (mounts made afterwards are invisible outside
// and vanish with the process). Empty string on success, else why not.
inline std::string enter_private_mount_ns() {
  static std::string result = [] {
    if (::unshare(CLONE_NEWNS) != 0) return std::string("unshare(CLONE_NEWNS): ") + std::strerror(errno);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
      return std::string("mount --make-rprivate /: ") + std::strerror(errno);
    return std::string();
  }();
  return result;
}

// Mounts a file system of `type` on dir (in the private namespace). Empty string on success.
inline std::string mount_on(TempDir& dir, const char* type, const char* data) {
  std::string why = enter_private_mount_ns();
  if (!why.empty()) return why;
  if (::mount("none", dir.path().c_str(), type, 0, data) != 0)
    return std::string("mount -t ") + type + ": " + std::strerror(errno);
  dir.set_mounted();
  return {};
}

inline uint64_t allocated_bytes(const std::string& path) {
  struct stat sb {};
  if (::stat(path.c_str(), &sb) != 0) return ~0ull;
  return static_cast<uint64_t>(sb.st_blocks) * 512;
}

}  // namespace rdmablk::backend::test
