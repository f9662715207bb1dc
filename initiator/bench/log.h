// fio's per-job log files for `rdmablk bench` (write_lat_log, write_bw_log, write_iops_log with
// log_avg_msec, log_offset, per_job_logs), byte for byte in fio 3.33's format so that fio's own tools
// (fio_generate_plots, fio2gnuplot, ...) read them.
//
// Format (fio iolog.c flush_samples), one line per sample:
//     time_ms, value, ddir, bs, prio                (log_offset=0)
//     time_ms, value, ddir, bs, offset, prio        (log_offset=1)
// printed as "%lu, %ld, %u, %llu[, %llu], %u\n": ddir 0 read, 1 write, 2 trim; prio is 0 (fio writes
// 1 only for real-time class I/O priorities, which NVMe-oF has none of). Values: latency in ns, bandwidth
// in KiB/s, IOPS in I/Os per second. Time counts from fio's "epoch", which fio resets when ramp_time
// ends (time.c ramp_time_over -> reset_all_stats): nothing is logged during the ramp.
//
// Two modes, as fio:
//   - log_avg_msec=0 (fio's default): one line per completed I/O in every log (stat.c add_log_sample's
//     "no time averaging" path): clat and lat = the I/O's latency, bw = bytes * 1000000 / latency_ns
//     (fio's add_bw_sample: "KB/s" per I/O; 0 for a 0 ns latency), iops = 1; bs = the I/O's length,
//     offset = the I/O's byte offset. Costs 32 bytes of memory per I/O until write().
//   - log_avg_msec=N: latency logs average each direction's latencies over windows of N ms; a window is
//     closed by the first I/O that completes N ms or more after the window's start (that I/O is counted
//     in it and its time is the line's time), the next window starts at that time rounded down to a
//     multiple of N, and finish() closes the open windows. bw/iops logs take one sample per direction
//     that moved data every N ms (fio's helper thread, stat.c __add_samples: KiB/s = bytes * 1000 /
//     ms / 1024, IOPS = ios * 1000 / ms, integer arithmetic); a partial last interval is not logged (fio
//     3.33 does not either). Averaged lines carry bs 0 and offset 0. Value = the window's mean rounded
//     half up (fio's running mean), or its maximum with log_max_value.
//
// slat: we time submission -> completion only, so the _slat log is written empty (as fio does for its
// synchronous engines) and _lat equals _clat.
//
// File names (init.c gen_log_name): PREFIX_TYPE.N.log with per_job_logs=1 (N = fio's job number, 1-based
// over the whole job file, numjobs copies numbered one after the other), PREFIX_TYPE.log with
// per_job_logs=0; then fio appends every job's lines to the shared file (iolog.c flush_log opens it with
// "a", so lines from an earlier run stay too) and truncates with per_job_logs=1. TYPE is lat, slat, clat
// (write_lat_log), bw, iops. An empty prefix turns that log off: fio's `write_bw_log` without a value
// means the job name as prefix, which the job parser fills in.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "initiator/bench/job_file.h"
#include "protocol/result.h"

namespace rdmablk::initiator::bench {

enum class LogKind : uint8_t { clat, slat, lat, bw, iops };
inline constexpr std::size_t kLogKinds = 5;
const char* log_kind_name(LogKind k) noexcept;  // "clat", "slat", "lat", "bw", "iops"

// One line of a fio log.
struct LogSample {
  uint64_t t_ms = 0;
  int64_t value = 0;
  Ddir ddir = kRead;
  uint64_t bs = 0;
  uint64_t offset = 0;  // written only with log_offset; 0 when read from a file without the column
  uint32_t prio = 0;
  bool operator==(const LogSample&) const = default;
};

// "PREFIX_TYPE.N.log" / "PREFIX_TYPE.log".
std::string fio_log_name(const std::string& prefix, LogKind kind, unsigned job_number, bool per_job_logs);
// One line as fio prints it, with the trailing newline.
std::string format_log_line(const LogSample& s, bool log_offset);
// Reads a fio log (ours or fio's): 5 columns, 6 with offsets, 4 from fio before 3.x; a log_prio column in
// hex ("0x2001") is accepted. Errors name the file and line.
Result<std::vector<LogSample>> read_fio_log(const std::string& path);

// The logs of one job. Not thread safe: one owner (the thread running the job). Recording never throws;
// if memory runs out a log stops growing (as fio's __add_log_sample disables the log) and dropped() says so.
class JobLogs {
 public:
  // job_number: 1-based over the whole job file, in JobFile::jobs order (fio's thread_number).
  // log_max_value: fio's option of that name (log the window's maximum instead of its mean).
  JobLogs(const JobSpec& spec, unsigned job_number, bool log_max_value = false);
  ~JobLogs();
  JobLogs(JobLogs&&) noexcept;
  JobLogs& operator=(JobLogs&&) noexcept;
  JobLogs(const JobLogs&) = delete;
  JobLogs& operator=(const JobLogs&) = delete;

  // Any of write_lat_log / write_bw_log / write_iops_log set. When false the calls below do nothing.
  bool enabled() const noexcept;
  bool logs(LogKind k) const noexcept;
  bool averaged() const noexcept;  // log_avg_msec > 0

  // All times are ms since the job started issuing I/O, ramp_time included (the clock of
  // IntervalSample::t_ms); the logs drop what happens before spec.ramp_time and count from its end.
  // Per completed I/O (read, write or trim): lat_ns = submission -> completion, len in bytes, offset in
  // bytes from the start of the namespace.
  void on_io(uint64_t t_ms, Ddir d, uint64_t lat_ns, uint64_t len, uint64_t offset) noexcept;
  // The runner's clock, at least every few ms while the job runs (more often is cheap: it returns at once
  // until next_tick_ms()). Takes the bw/iops samples of averaged logs.
  void tick(uint64_t t_ms) noexcept;
  // When tick() has work next (UINT64_MAX: never, e.g. not averaged or no bw/iops log).
  uint64_t next_tick_ms() const noexcept;
  // The job is done (after its last I/O, verify included): closes the averaging windows at t_ms. Later
  // on_io/tick calls are ignored.
  void finish(uint64_t t_ms) noexcept;

  // What write() puts into the file of `k` (empty when that log is off).
  std::vector<LogSample> samples(LogKind k) const;
  // The files write() writes, in fio's order (lat, slat, clat, bw, iops).
  std::vector<std::string> paths() const;
  // Writes the files (relative names are in the current directory): truncated with per_job_logs=1,
  // appended to with per_job_logs=0 (fio). Returns paths(). Call after finish().
  Result<std::vector<std::string>> write() const;
  // Samples lost because memory ran out.
  bool dropped() const noexcept;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace rdmablk::initiator::bench
