// rdma_queue_bench's shared pieces: the run's configuration, the namespace it measures, and small helpers.
#pragma once

#include <time.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace rdmablk::bench::rdma_queue {

constexpr uint32_t kNsid = 1;
constexpr uint32_t kBlockSize = 4096;
constexpr uint64_t kNsBytes = 1ull << 40;  // null: no memory behind it
constexpr const char* kSubNqn = "nqn.2024-11.io.rdmablk:bench";
constexpr const char* kHostNqn = "nqn.2014-08.org.nvmexpress:uuid:0b1e5a1e-0000-4000-8000-00000000be4c";
constexpr std::array<uint8_t, 16> kHostId{0xb1, 0xe5, 0xa1, 0xe0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0xbe, 0x4c};
constexpr uint32_t kHostKey = 0x1234;
constexpr uint64_t kHostAddr = 0x7f0000000000ull;

enum class Kind : uint8_t { read, write_keyed, write_in_capsule };

struct Workload {
  std::string name;
  Kind kind;
};

struct Config {
  uint64_t commands = 2'000'000;
  unsigned rounds = 5;
  uint64_t warmup = 200'000;
  unsigned qd = 32;
  unsigned queue_size = 128;
  uint32_t bs = 4096;
  std::vector<std::string> workloads{"read", "write", "write-icd"};
  std::string driver = "reactor";
  bool invalidate = false;
  uint64_t qos_iops = 0;  // the namespace's QoS limit (0 = none); far above the rate: the check's cost alone
  bool json = false;
  unsigned reactors = 1;
  std::vector<int> cpus;  // reactor i runs on cpus[i]; empty: the i-th CPU of the process's affinity mask
  std::string controllers = "shared";  // shared: one controller, I/O queue i + 1 on reactor i; per-reactor;
                                       // isolated (a TargetCore per reactor)
};

[[noreturn]] inline void die(const std::string& what) {
  fmt::print(stderr, "rdma_queue_bench: {}\n", what);
  std::fflush(nullptr);
  std::_Exit(1);  // also from a reactor thread: no static destructors under the other threads' feet
}

inline uint64_t thread_cpu_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Page-aligned, zeroed memory (the daemon's queue regions and pools are registered, page-aligned memory).
struct AlignedRegion {
  explicit AlignedRegion(std::size_t n) : size((n + 4095) / 4096 * 4096) {
    data = static_cast<uint8_t*>(std::aligned_alloc(4096, size));
    if (data == nullptr) throw std::bad_alloc();
    std::memset(data, 0, size);
  }
  ~AlignedRegion() { std::free(data); }
  AlignedRegion(const AlignedRegion&) = delete;
  AlignedRegion& operator=(const AlignedRegion&) = delete;
  uint8_t* data = nullptr;
  std::size_t size = 0;
};

}  // namespace rdmablk::bench::rdma_queue
