// fio-compatible output for `rdmablk bench`: the normal text report (stat.c show_thread_status_normal /
// show_ddir_status / show_clat_percentiles / show_group_stats) and the JSON layout (show_thread_status_json /
// add_ddir_status_json / add_ddir_lat_json), so that tools that parse fio's output parse ours.
//
// Filled: per job jobname, groupid, job_start, error, elapsed, job options, desc (description=),
// read/write/trim with io_bytes, io_kbytes, bw_bytes, bw, iops, runtime, total_ios, short_ios, drop_ios,
// slat_ns (no samples: we measure submit->completion only), clat_ns and lat_ns (min, max, mean, stddev,
// N, percentile), job_runtime, usr_cpu, sys_cpu, ctx, majf, minf, latency_ns/latency_us/latency_ms
// distributions. Not filled (no periodic sampling): bw_min/bw_max/bw_agg/bw_mean/bw_dev/bw_samples,
// iops_min/... , iodepth_level.
//
// The job options that shape the report, as fio:
//   - groups: one "Run status group N (all jobs):" block per groupid with READ/WRITE/TRIM lines;
//   - group_reporting: consecutive jobs of a group are reported as one ("NAME: (groupid=N, jobs=M)",
//     one JSON job entry): latencies merged, bytes and I/Os added, runtime the longest, CPU time added;
//   - percentile_list (the job's list, sorted, printed with as many decimals as it needs),
//     clat_percentiles=0 (none), lat_percentiles=1 ("lat percentiles" too; total latency is the
//     completion latency here, since we time each I/O from submission to completion);
//   - unified_rw_reporting: mixed = one "mixed" direction summing read, write and trim (JSON key
//     "mixed" instead of read/write/trim; group lines "MIXED"); both = the directions, then mixed.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "initiator/bench/job_file.h"
#include "initiator/bench/stats.h"

namespace rdmablk::initiator::bench {

inline constexpr const char* kFioVersion = "rdmablk-0.1.0";

struct JobResult {
  JobSpec spec;
  int error = 0;                  // errno style, 0 = success (fio reports verify failures as EILSEQ, 84)
  std::string error_message;
  DirectionStats read;
  DirectionStats write;
  DirectionStats trim;
  std::vector<IntervalSample> timeline;  // every ~log_avg_msec (default 500 ms) while the job ran
  uint64_t job_start_ms = 0;      // wall clock, ms since the epoch
  uint64_t job_runtime_ms = 0;
  double usr_cpu = 0;             // percent of job_runtime
  double sys_cpu = 0;
  uint64_t ctx = 0, majf = 0, minf = 0;
};

enum class N2sUnit { none, per_sec, byte, byte_per_sec };
// fio's num2str(): at most `maxdigits` digits, k/M/G (pow2: Ki/Mi/Gi) prefixes, decimals where room is left.
std::string num2str(uint64_t num, int maxdigits, int base, bool pow2, N2sUnit unit);

std::string text_report(const std::vector<JobResult>& results);
// The client's CPU time (usr + sys over the job) per completed I/O, in microseconds; 0 without I/O.
double cpu_us_per_io(const JobResult& r) noexcept;
nlohmann::ordered_json json_report(const Options& global_options, const std::vector<JobResult>& results,
                                   std::chrono::system_clock::time_point when);

}  // namespace rdmablk::initiator::bench
