// One job (one numjobs copy) on its own thread: its own controller connection (admin queue + I/O queue 1),
// the I/O loop, verification, statistics and logs (runner.h describes the model). Internal to the runner.
//
// job_worker.cpp sets the job up and runs its loops, job_worker_pass.cpp is one pass of I/O (the main
// workload or a verify read-back), job_worker_io.cpp submits an I/O and takes its completion.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "initiator/bench/buffers.h"
#include "initiator/bench/log.h"
#include "initiator/bench/progress.h"
#include "initiator/bench/runner.h"
#include "initiator/bench/verify.h"
#include "initiator/bench/workload.h"

namespace rdmablk::initiator::bench::detail {

using Clock = std::chrono::steady_clock;

inline uint64_t ns_since_epoch(Clock::time_point t) noexcept {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

inline uint64_t now_ns() noexcept { return ns_since_epoch(Clock::now()); }

// fio's flow control: the jobs sharing a flow_id keep their I/O counts in the ratio of their weights.
// A job that ends takes its weight and its I/O out (fio's flow_exit_job), so that it holds nobody back.
struct FlowShared {
  std::atomic<uint64_t> total{0};
  std::atomic<uint64_t> total_weight{0};
};

// Extents a job wrote and must read back: offset -> length; a later write replaces the extents it
// overlaps (their old contents are gone, so they are not checked).
using ExtentMap = std::map<uint64_t, uint64_t>;
void add_extent(ExtentMap& m, uint64_t off, uint64_t len);

class JobWorker {
 public:
  // job_number: 1-based over the job file (fio's thread_number; seeds and log names use it).
  JobWorker(const JobSpec& spec, unsigned job_number, const ConnectionDefaults& conn, Progress& progress,
            FlowShared* flow)
      : spec_(spec), job_number_(job_number), conn_(conn), progress_(progress), flow_(flow), logs_(spec, job_number) {}

  // Runs the job to its end or its first error; the result holds either.
  JobResult run();

 private:
  enum class SlotKind : uint8_t { io, flush };
  // One queue entry's command and buffer (qd_ of them, allocated once).
  struct Slot {
    transport::HostCommand cmd{};
    uint8_t* buf = nullptr;
    alignas(16) uint8_t dsm[sizeof(protocol::DsmRange)]{};
    uint64_t offset = 0;
    uint64_t len = 0;
    uint64_t submit_ns = 0;
    Ddir ddir = kRead;
    SlotKind kind = SlotKind::io;
    bool verify_read = false;  // a read-back of the verify pass
    bool read_into = false;    // the buffer holds data read from the namespace
    uint32_t index = 0;
    JobWorker* job = nullptr;
  };

  // Where the I/O of a pass comes from: the generator (the job's workload) or a list of extents to read
  // back and check (the verify pass).
  struct Pass {
    bool main = true;
    bool time_based = false;
    uint64_t budget_bytes = UINT64_MAX;
    uint64_t budget_ios = UINT64_MAX;
    const ExtentMap* extents = nullptr;  // verify pass
  };

  // What one run of run_pass() has done so far.
  struct PassState {
    uint64_t issued_bytes = 0, issued_ios = 0;
    bool exhausted = false;           // the pass has no more I/O to issue
    std::optional<IoUnit> pending;    // taken from the pass but held (think time, rate, flow)
    uint64_t think_until = 0;         // ns (now_ns clock) before which no I/O is issued
    unsigned since_think = 0;
    unsigned writes_since_flush = 0;
    uint64_t backlog = 0;             // writes since the last verify_backlog check
    ExtentMap backlog_extents;
    bool budget_spent(const Pass& p) const noexcept {
      return issued_bytes >= p.budget_bytes || issued_ios >= p.budget_ios;
    }
  };

  // Set-up (job_worker.cpp), in this order.
  Result<void> execute();
  Result<void> connect();           // controller, namespace, transfer limits
  Result<void> plan_region();       // offset and size within the namespace
  Result<void> prepare_workload();  // seed, I/O generator, rate limiter
  Result<void> open_io_queue();     // queue depth, latency_target probing
  Result<void> prepare_slots();     // buffers and their contents, verifier
  void plan_verification();         // what is read back and checked
  Result<void> run_loops();
  void collect_usage(JobResult& res, const rusage& before, Clock::duration elapsed) const;
  void finish_logs(JobResult& res);

  // The ramp has ended: statistics count from now on.
  void check_ramp(Clock::time_point now) noexcept;
  // The job's runtime (after the ramp) has passed.
  bool time_up() const noexcept { return spec_.runtime.count() && stats_active_ && Clock::now() - stats_start_ >= spec_.runtime; }
  Result<void> verify_extents(const ExtentMap& extents);
  Result<void> flush_and_wait();
  void close_interval(uint64_t t_ms, bool final);

  // One pass (job_worker_pass.cpp).
  Result<void> run_pass(const Pass& p);
  char pass_phase(const Pass& p) const noexcept;
  void tick(Clock::time_point now_tp, uint64_t now);
  uint64_t issue(const Pass& p, PassState& st, uint64_t now, bool& stop, bool backlog_due);
  bool ready_to_issue(const Pass& p, PassState& st, uint64_t now, uint64_t& wait_until);
  void issued_main(const IoUnit& u, PassState& st);
  Result<void> verify_backlog(PassState& st);
  bool wait_for_io(unsigned in_flight, uint64_t wait_until);
  void account_pass_time(const Pass& p, Clock::time_point pass_start);
  void latency_window_check(uint64_t now);
  bool flow_ahead() const noexcept;
  bool next_unit(const Pass& p, IoUnit& u);
  void think(uint64_t total, uint64_t spin, uint64_t& think_until) noexcept;
  unsigned in_flight() const noexcept { return qd_ - static_cast<unsigned>(free_.size()); }

  // The data path (job_worker_io.cpp).
  bool submit(const IoUnit& u, bool verify_read);
  void submit_flush();
  void fail(int err, std::string message) noexcept;
  static void on_complete(transport::HostCommand& cmd, const protocol::Cqe& cqe) noexcept;
  void complete(Slot& s, const protocol::Cqe& cqe) noexcept;

  struct FreeDeleter {
    void operator()(uint8_t* p) const noexcept { std::free(p); }
  };

  const JobSpec& spec_;
  const unsigned job_number_;
  const ConnectionDefaults& conn_;
  Progress& progress_;
  FlowShared* flow_;
  JobLogs logs_;
  std::unique_ptr<Controller> ctrl_;
  std::unique_ptr<IoQueue> io_;
  uint32_t nsid_ = 1;
  uint64_t lba_size_ = 512;
  uint64_t max_bs_ = 4096;
  uint64_t region_start_ = 0;
  uint64_t region_len_ = 0;
  unsigned qd_ = 1;
  unsigned depth_limit_ = 1;
  bool refill_hold_ = false;
  std::optional<IoGenerator> gen_;
  std::optional<RateLimiter> rate_;
  std::optional<Verifier> verifier_;
  std::optional<BufferFiller> filler_;
  std::unique_ptr<uint8_t, FreeDeleter> buffers_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  ExtentMap written_;
  ExtentMap::const_iterator extent_it_;
  bool track_writes_ = false;
  bool check_reads_ = false;
  bool flush_requested_ = false;
  std::optional<uint64_t> verify_seed_;
  uint64_t seed_ = 1;
  uint64_t flow_own_ = 0;
  // Latency target probing.
  std::optional<LatencyHistogram> window_hist_;
  uint64_t window_start_ns_ = 0;
  unsigned lat_good_ = 0, lat_bad_ = 0;
  bool depth_settled_ = false;
  // Time.
  Clock::time_point job_t0_{};
  Clock::time_point stats_start_{};
  Clock::time_point ramp_end_{};
  uint64_t io_t0_ns_ = 0;
  bool stats_active_ = false;
  // Timeline.
  uint64_t interval_ms_ = 500;
  uint64_t next_sample_ms_ = 0;
  std::array<uint64_t, 3> interval_ios_{};
  std::array<uint64_t, 3> interval_bytes_{};
  std::vector<IntervalSample> timeline_;
  bool failed_ = false;
  int error_ = 0;
  std::string error_message_;
  std::array<DirectionStats, kDdirs> stats_;
};

}  // namespace rdmablk::initiator::bench::detail
