// I/O statistics of the target: per-namespace and per-controller command counts, bytes, errors by status
// and latency histograms, for the control socket (`stats`), Prometheus (/metrics) and the SMART log.
//
// Recording is lock-free and single-writer: every IoStats block is written by one reactor thread only (a
// queue's block by the queue's reactor, a namespace's per-reactor block by that reactor), with relaxed
// load + store (plain moves on x86, no locked instruction, no cache line written by two threads). The
// control thread reads blocks with relaxed loads and merges them into IoStatsSnapshot on request; a
// snapshot taken while I/O runs may be short by the commands in flight, never torn in a way that matters.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace rdmablk::target::stats {

// Latency histogram over nanoseconds, log-linear: values below 8 have a bucket each, then every power of
// two is split into 8 sub-buckets (<= 12.5% relative width). The last bucket also holds everything above
// 2^39 ns (~9 minutes).
inline constexpr unsigned kSubBucketBits = 3;
inline constexpr unsigned kSubBuckets = 1u << kSubBucketBits;
inline constexpr unsigned kMaxPower = 39;
inline constexpr unsigned kLatencyBuckets = (kMaxPower - kSubBucketBits + 2) * kSubBuckets;

constexpr unsigned latency_bucket(uint64_t ns) noexcept {
  if (ns < kSubBuckets) return static_cast<unsigned>(ns);
  const unsigned msb = 63u - static_cast<unsigned>(__builtin_clzll(ns));
  if (msb > kMaxPower) return kLatencyBuckets - 1;
  return (msb - kSubBucketBits + 1) * kSubBuckets +
         static_cast<unsigned>((ns >> (msb - kSubBucketBits)) & (kSubBuckets - 1));
}
// The smallest value of bucket i, and the first value past it (its exclusive upper bound).
constexpr uint64_t bucket_lower(unsigned i) noexcept {
  if (i < kSubBuckets) return i;
  const unsigned group = i / kSubBuckets;  // >= 1
  const unsigned msb = group + kSubBucketBits - 1;
  return (uint64_t{1} << msb) + (uint64_t{i % kSubBuckets} << (msb - kSubBucketBits));
}
constexpr uint64_t bucket_upper(unsigned i) noexcept {
  return i + 1 < kLatencyBuckets ? bucket_lower(i + 1) : UINT64_MAX;
}
static_assert(latency_bucket(0) == 0 && latency_bucket(7) == 7 && latency_bucket(8) == 8 && latency_bucket(15) == 15);
static_assert(latency_bucket(16) == 16 && latency_bucket(17) == 16 && latency_bucket(18) == 17);
static_assert(bucket_lower(latency_bucket(1'000'000)) <= 1'000'000 && bucket_upper(latency_bucket(1'000'000)) > 1'000'000);
static_assert(latency_bucket(uint64_t{1} << 40) == kLatencyBuckets - 1);

// Command classes the counters and histograms are kept for.
enum class OpClass : uint8_t { read = 0, write = 1, other = 2 };
inline constexpr unsigned kOpClasses = 3;
const char* op_class_name(OpClass c) noexcept;  // "read" / "write" / "other"

// Distinct error statuses kept per block; further ones count under status field 0xFFFF ("other").
inline constexpr unsigned kErrorSlots = 16;
inline constexpr uint16_t kOtherErrorStatus = 0xFFFF;

// One writer thread; see the file comment.
class IoStats {
 public:
  // A completed command: its class, the bytes it moved (0 for no-data commands), its latency from arrival
  // to completion, and its status field (Status::field(), 0 = success).
  void record(OpClass c, uint64_t bytes, uint64_t latency_ns, uint16_t status_field) noexcept {
    PerOp& p = ops_[static_cast<unsigned>(c)];
    bump(p.commands, 1);
    bump(p.bytes, bytes);
    bump(p.latency_sum_ns, latency_ns);
    bump(p.latency[latency_bucket(latency_ns)], 1);
    if (status_field != 0) record_error(status_field);
  }
  // A command that waited `ns` for its QoS budget (target/core/qos_gate.cpp).
  void record_throttled(uint64_t ns) noexcept {
    bump(throttled_commands_, 1);
    bump(throttled_ns_, ns);
  }

 private:
  friend struct IoStatsSnapshot;
  static void bump(std::atomic<uint64_t>& c, uint64_t v) noexcept {
    c.store(c.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
  }
  void record_error(uint16_t status_field) noexcept;

  struct PerOp {
    std::atomic<uint64_t> commands{0};
    std::atomic<uint64_t> bytes{0};
    std::atomic<uint64_t> latency_sum_ns{0};
    std::array<std::atomic<uint64_t>, kLatencyBuckets> latency{};
  };
  std::array<PerOp, kOpClasses> ops_{};
  // Error slots: status field (0 = free) and count; claimed in order by the writer.
  std::array<std::atomic<uint16_t>, kErrorSlots> error_status_{};
  std::array<std::atomic<uint64_t>, kErrorSlots> error_count_{};
  std::atomic<uint64_t> throttled_commands_{0};
  std::atomic<uint64_t> throttled_ns_{0};
};

struct HistogramSnapshot {
  std::vector<uint64_t> buckets = std::vector<uint64_t>(kLatencyBuckets, 0);
  uint64_t count = 0;
  uint64_t sum_ns = 0;

  void merge(const HistogramSnapshot& o);
  // The latency at or below which a fraction p (0..1) of commands completed: the upper bound of the bucket
  // holding that rank (an overestimate by at most the bucket's width), 0 when empty.
  uint64_t percentile_ns(double p) const noexcept;
  // Commands whose latency was below `bound_ns`, counting whole buckets whose upper bound is <= bound_ns
  // (exact when bound_ns is a bucket boundary, e.g. a power of two).
  uint64_t count_below(uint64_t bound_ns) const noexcept;
};

struct OpSnapshot {
  uint64_t commands = 0;
  uint64_t bytes = 0;
  HistogramSnapshot latency;
  void merge(const OpSnapshot& o);
};

// A merged, plain copy of one or more IoStats blocks.
struct IoStatsSnapshot {
  std::array<OpSnapshot, kOpClasses> ops{};
  std::map<uint16_t, uint64_t> errors;  // status field -> commands that completed with it
  uint64_t throttled_commands = 0;      // commands that waited for a QoS budget
  uint64_t throttled_ns = 0;            // the time they waited, summed

  void add(const IoStats& live);  // relaxed reads of a live block
  void merge(const IoStatsSnapshot& o);
  const OpSnapshot& op(OpClass c) const noexcept { return ops[static_cast<unsigned>(c)]; }
  uint64_t total_commands() const noexcept;
  uint64_t total_errors() const noexcept;
};

// The name of an error key for tables and labels (protocol::status_name: "LBA Out of Range", "SCT 1 SC
// 0x80" when unnamed; "other" for kOtherErrorStatus). Keys are SCT + SC (status field & 0x7FF).
std::string status_field_name(uint16_t status_field);

// --- what the control socket and /metrics report ------------------------------------------------------

// One set of QoS limits and how much it held commands back.
struct QosStats {
  std::string host;  // empty: the namespace's own limits; else the host NQN they are for
  uint64_t iops = 0;  // the configured limits (0 = unlimited)
  uint64_t mbps = 0;
  uint64_t read_mbps = 0;
  uint64_t write_mbps = 0;
  uint64_t throttled_commands = 0;
  uint64_t throttled_ns = 0;
};

struct NamespaceStats {
  std::string subsystem;  // NQN
  uint32_t nsid = 0;
  IoStatsSnapshot io;
  // QoS: empty when the namespace has no limits; else its own (host empty, throttling from `io`) and then
  // one per limited host.
  std::vector<QosStats> qos;
};

struct ControllerStats {
  uint16_t cntlid = 0;
  std::string subsystem;
  std::string hostnqn;
  IoStatsSnapshot io;
};

struct ReactorStats {
  unsigned index = 0;
  int cpu = -1;               // pinned CPU, -1 = not pinned
  uint64_t busy_ns = 0;       // time spent doing work (not sleeping, not idle polling) since start
  uint64_t uptime_ns = 0;     // time since the reactor started
  double recent_busy_ratio = 0;  // busy share of the last few seconds (the daemon's periodic sample)
  bool responsive = true;     // answered the daemon's last heartbeat
  uint64_t buffers_total = 0; // buffer pool: small + large buffers
  uint64_t buffers_in_use = 0;
  uint64_t buffer_bytes = 0;  // bytes of the whole pool
};

}  // namespace rdmablk::target::stats
