// The target's Prometheus metrics: a TargetStatus snapshot rendered in the text exposition format 0.0.4,
// for the /metrics endpoint (target/metrics/metrics_http.h serves it). Control thread; allocates, may throw
// std::bad_alloc like any control-path string building.
//
// Names follow Prometheus conventions: base units (seconds, bytes), `_total` on counters, one family per
// quantity with the command class as an `op` label ("read" / "write" / "other"), so that
// sum without(op) (...) is the namespace's total. Series (labels in braces):
//
//   rdmablk_target_info{version}                              gauge 1
//   rdmablk_target_uptime_seconds                             gauge
//   rdmablk_target_config_last_reload_timestamp_seconds       gauge (Unix time; absent before a load)
//   rdmablk_listener_info{transport,address,port,role}        gauge 1 per listener
//   rdmablk_subsystems                                        gauge, configured subsystems
//   rdmablk_namespaces                                        gauge, namespaces over all subsystems
//   rdmablk_controllers{subsystem,transport}                  gauge, connected controllers (0 for every
//                                                             configured subsystem x listener transport;
//                                                             discovery controllers under the discovery NQN)
//   rdmablk_namespace_info{subsystem,nsid,backend,path,uuid,read_only}   gauge 1
//   rdmablk_namespace_size_bytes{subsystem,nsid}              gauge
//   rdmablk_namespace_block_size_bytes{subsystem,nsid}        gauge
//   rdmablk_namespace_commands_total{subsystem,nsid,op}       counter, completed commands (errors included)
//   rdmablk_namespace_bytes_total{subsystem,nsid,op}          counter, op = read | write (data moved by
//                                                             successful commands; other commands move none)
//   rdmablk_namespace_errors_total{subsystem,nsid,status}     counter per status seen (stats::status_field_name,
//                                                             e.g. "LBA Out of Range"); absent until one occurs
//   rdmablk_namespace_latency_seconds{subsystem,nsid,op}      histogram, arrival to completion; `le` at
//                                                             kLatencyBucketBoundsNs (see there)
//   rdmablk_reactor_info{reactor,cpu}                         gauge 1 (cpu = "none" when not pinned)
//   rdmablk_reactor_busy_seconds_total{reactor}               counter, time spent working
//   rdmablk_buffer_pool_buffers{reactor,state}                gauge, state = free | in_use
//   rdmablk_buffer_pool_bytes{reactor}                        gauge, the pool's registered memory
//
// With MetricsOptions::per_controller, also per I/O controller (one series set per connection: cntlid
// changes on every reconnect, hence off by default):
//   rdmablk_controller_commands_total{subsystem,cntlid,hostnqn,op}
//   rdmablk_controller_bytes_total{subsystem,cntlid,hostnqn,op}
//   rdmablk_controller_errors_total{subsystem,cntlid,hostnqn,status}
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "target/core/status.h"

namespace rdmablk::target {

// The Content-Type of render_prometheus's text.
inline constexpr const char* kPrometheusTextContentType = "text/plain; version=0.0.4; charset=utf-8";

// The latency histogram's bucket bounds in nanoseconds (`le` is the bound in seconds): powers of two,
// where buckets of the internal log-linear histogram end, so every cumulative count is exact. Every power
// from 2^12 (4.096 us) to 2^26 (67 ms), then every other one up to 2^34 (17.2 s); +Inf is added. Latencies
// are whole nanoseconds and a bucket counts those below its bound: a command of exactly 2^k ns lands in
// the next bucket (Prometheus' `le` would include it; one nanosecond is below the histogram's resolution).
// prometheus-cpp prints `le` with 16 significant digits, so 2^13 and 2^23 ns read "8.192000000000001e-06"
// and "0.008388608000000001" (no double prints shorter); they parse back to exactly 8192e-9 and 8388608e-9.
inline constexpr std::array<uint64_t, 19> kLatencyBucketBoundsNs = {
    uint64_t{1} << 12, uint64_t{1} << 13, uint64_t{1} << 14, uint64_t{1} << 15, uint64_t{1} << 16,
    uint64_t{1} << 17, uint64_t{1} << 18, uint64_t{1} << 19, uint64_t{1} << 20, uint64_t{1} << 21,
    uint64_t{1} << 22, uint64_t{1} << 23, uint64_t{1} << 24, uint64_t{1} << 25, uint64_t{1} << 26,
    uint64_t{1} << 28, uint64_t{1} << 30, uint64_t{1} << 32, uint64_t{1} << 34};

struct MetricsOptions {
  // rdmablk_controller_* counters per I/O controller (see the file comment).
  bool per_controller = false;
};

// The exposition text of `status`: every family with # HELP and # TYPE, families without samples left
// out, label values escaped by the serializer and made valid UTF-8 (invalid bytes become U+FFFD: a host's
// NQN is peer input, and one bad label value makes Prometheus drop the whole scrape).
std::string render_prometheus(const TargetStatus& status, const MetricsOptions& options = {});

}  // namespace rdmablk::target
