// rdma_queue_bench's measurement: one lane (reactor thread) per reactor, told what to do by the main thread,
// and the per-workload series of CPU ns per command they produce.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/rdma_queue_bench/setup.h"

namespace rdmablk::bench::rdma_queue {

// One reactor's share of one timed run.
struct LaneRun {
  uint64_t cpu_ns = 0;
  uint64_t wall_ns = 0;
  uint64_t commands = 0;  // completed in the timed loop
  uint64_t turns = 0;
  uint64_t rdma_writes = 0;
  uint64_t rdma_reads = 0;
  uint64_t sends = 0;
  uint64_t chains = 0;
};

// One reactor thread and what it owns. Aligned: lanes never share a cache line through the bench itself.
struct alignas(64) Lane {
  unsigned index = 0;
  int cpu = -1;
  uint16_t qid = 1;
  uint16_t cntlid = 0;  // of the controller whose admin queue is on this lane
  uint16_t next_cid = 0;
  std::unique_ptr<transport::BufferPool> pool;
  std::unique_ptr<Driver> driver;
  std::unique_ptr<FakeCq> cq;
  Host host;
  BenchQueue admin;  // empty unless this lane has a controller's admin queue
  BenchQueue io;
  LaneRun last;
  std::thread thread;
};

// What the lanes are told to do; lanes [first, first + lanes) take part.
enum class Op : uint8_t { connect_admin, connect_io, run, close_io, close_admin, exit };
struct Task {
  Op op = Op::exit;
  unsigned lanes = 0;
  unsigned first = 0;
  Kind kind = Kind::read;
  uint64_t count = 0;
};

// One workload at one reactor count: per round, the sum of the reactor threads' CPU over the sum of their
// commands, and each thread's own figure.
struct Series {
  std::vector<double> ns_per_cmd;
  std::vector<double> wall_ns_per_cmd;
  std::vector<std::vector<double>> lane_ns_per_cmd;  // [lane][round]
  double median = 0;
  double min = 0;
  double wall_median = 0;
  std::vector<double> lane_median;
  double rdma_writes = 0;  // WRs per command (last round)
  double rdma_reads = 0;
  double sends = 0;
  double chains = 0;
  double turns = 0;  // reactor turns per command
};

struct WorkloadResult {
  std::string name;
  Series multi;   // --reactors N at once (the only one when N = 1)
  Series single;  // N > 1: each reactor alone in turn, in the same rounds (lane_ns_per_cmd: each one's)
};


double median_of(std::vector<double> v);

struct Bench {
  Config cfg;
  target::TargetConfig config;
  std::vector<std::unique_ptr<Lane>> lanes;
  std::vector<std::unique_ptr<target::TargetCore>> cores;  // one; --controllers isolated: one per reactor

  // The lanes' orders: a task per generation; the main thread waits for the taking-part lanes to be done.
  std::mutex mu;
  std::condition_variable task_cv;
  std::condition_variable done_cv;
  uint64_t generation = 0;
  Task task;
  unsigned done = 0;
  alignas(64) std::atomic<unsigned> started{0};   // lanes at the start line of a timed run
  alignas(64) std::atomic<unsigned> finished{0};  // lanes past the end of their timed loop

  bool shared_controller() const noexcept { return cfg.controllers == "shared"; }
  bool isolated() const noexcept { return cfg.controllers == "isolated"; }
  unsigned admin_lanes() const noexcept { return shared_controller() ? 1u : cfg.reactors; }
  target::TargetCore& core_of(const Lane& l) noexcept { return *cores[isolated() ? l.index : 0]; }

  // The lanes, the core(s), the lanes' threads; then the admin and I/O queues connected.
  void setup();
  // Warm-up of every workload on every reactor, then the rounds interleaved (read, write, write-icd, read,
  // ...) so that noise from the rest of the machine spreads over all of them. With N > 1 reactors a round
  // of a workload is each reactor alone in turn (reactor 0, 1, ...: so that the one-reactor figure is the
  // same CPUs' as the N-reactor one, as vCPUs of a VM run at different speeds), then all N at once.
  std::vector<WorkloadResult> measure(const std::vector<Workload>& workloads);
  // I/O queues, then the admin queues, each on its reactor's thread; then the threads end and the core goes.
  void teardown();

 private:
  void run_task(const Task& t);  // main thread: hands `t` to the lanes and waits until those taking part are done
  void lane_main(Lane& l);
  void perform(Lane& l, const Task& t);
  void connect_admin(Lane& l);
  void connect_io(Lane& l);
  p::Sqe command(Kind kind) const;
  LaneRun run(Lane& l, Kind kind, uint64_t count, unsigned running);
  std::vector<LaneRun> run_lanes(Kind kind, uint64_t count, unsigned first, unsigned running);
  static void record(Series& s, const std::vector<LaneRun>& runs);
  static void summarize(Series& s);
  static void close_queue(Lane& l, BenchQueue& b);
};

}  // namespace rdmablk::bench::rdma_queue
