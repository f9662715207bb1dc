// The live progress line of `rdmablk bench` (fio's "Jobs: 2 (f=2): [RW][40.0%][r=...,w=...]..."): counters
// each job's thread updates, and a thread that prints them once a second while the jobs run.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

namespace rdmablk::initiator::bench::detail {

struct Progress {
  std::atomic<uint64_t> read_bytes{0}, write_bytes{0}, read_ios{0}, write_ios{0};
  std::atomic<uint64_t> done_bytes{0}, total_bytes{0};
  std::atomic<char> phase{'P'};  // P setup/waiting, R/W/M/D running, V verifying, _ done
  std::atomic<bool> finished{false};
  uint64_t planned_ns = 0;       // time_based: ramp + runtime
};

// Prints the line for `progress` to `out` every second from start() until the destructor, which clears it.
class ProgressLine {
 public:
  ProgressLine(std::FILE* out, const std::vector<std::unique_ptr<Progress>>& progress) : out_(out), progress_(progress) {}
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  void start();

 private:
  void print(double dt);

  std::FILE* out_;
  const std::vector<std::unique_ptr<Progress>>& progress_;
  std::chrono::steady_clock::time_point start_{};
  std::atomic<bool> done_{false};
  std::thread thread_;
  uint64_t last_r_ = 0, last_w_ = 0, last_ri_ = 0, last_wi_ = 0;  // totals at the previous line
};

}  // namespace rdmablk::initiator::bench::detail
