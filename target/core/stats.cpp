#include "target/core/stats.h"

#include <cmath>

#include "protocol/status.h"

namespace rdmablk::target::stats {

const char* op_class_name(OpClass c) noexcept {
  switch (c) {
    case OpClass::read: return "read";
    case OpClass::write: return "write";
    case OpClass::other: return "other";
  }
  return "other";
}

void IoStats::record_error(uint16_t status_field) noexcept {
  // Keyed by SCT + SC only: DNR/More/CRD do not make another kind of error.
  const uint16_t key = status_field & 0x7FF;
  for (unsigned i = 0; i < kErrorSlots; ++i) {
    const uint16_t s = error_status_[i].load(std::memory_order_relaxed);
    if (s == key) {
      bump(error_count_[i], 1);
      return;
    }
    if (s == 0) {
      // Count first, then publish the slot: a reader never sees a claimed slot with a stale count of another.
      error_count_[i].store(1, std::memory_order_relaxed);
      error_status_[i].store(key, std::memory_order_release);
      return;
    }
  }
  // Every slot taken by other statuses: the last one is the catch-all.
  const uint16_t last = error_status_[kErrorSlots - 1].load(std::memory_order_relaxed);
  if (last != kOtherErrorStatus) {
    // Keep the table's promise of one status per slot: fold the last slot into "other".
    error_status_[kErrorSlots - 1].store(kOtherErrorStatus, std::memory_order_release);
  }
  bump(error_count_[kErrorSlots - 1], 1);
}

void HistogramSnapshot::merge(const HistogramSnapshot& o) {
  for (unsigned i = 0; i < kLatencyBuckets; ++i) buckets[i] += o.buckets[i];
  count += o.count;
  sum_ns += o.sum_ns;
}

uint64_t HistogramSnapshot::percentile_ns(double p) const noexcept {
  uint64_t total = 0;
  for (uint64_t b : buckets) total += b;
  if (total == 0) return 0;
  p = std::min(std::max(p, 0.0), 1.0);
  // The rank of the p-quantile (1-based): the smallest commands count whose share is >= p.
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(p * static_cast<double>(total))));
  uint64_t seen = 0;
  for (unsigned i = 0; i < kLatencyBuckets; ++i) {
    seen += buckets[i];
    if (seen >= rank) return i + 1 < kLatencyBuckets ? bucket_upper(i) - 1 : bucket_lower(i);
  }
  return bucket_lower(kLatencyBuckets - 1);
}

uint64_t HistogramSnapshot::count_below(uint64_t bound_ns) const noexcept {
  uint64_t n = 0;
  for (unsigned i = 0; i < kLatencyBuckets && bucket_upper(i) <= bound_ns; ++i) n += buckets[i];
  return n;
}

void OpSnapshot::merge(const OpSnapshot& o) {
  commands += o.commands;
  bytes += o.bytes;
  latency.merge(o.latency);
}

void IoStatsSnapshot::add(const IoStats& live) {
  for (unsigned c = 0; c < kOpClasses; ++c) {
    const auto& p = live.ops_[c];
    OpSnapshot& s = ops[c];
    // The histogram is read bucket by bucket; its count is their sum, so that count and buckets agree.
    uint64_t n = 0;
    for (unsigned i = 0; i < kLatencyBuckets; ++i) {
      const uint64_t b = p.latency[i].load(std::memory_order_relaxed);
      s.latency.buckets[i] += b;
      n += b;
    }
    s.latency.count += n;
    s.latency.sum_ns += p.latency_sum_ns.load(std::memory_order_relaxed);
    s.commands += p.commands.load(std::memory_order_relaxed);
    s.bytes += p.bytes.load(std::memory_order_relaxed);
  }
  for (unsigned i = 0; i < kErrorSlots; ++i) {
    const uint16_t key = live.error_status_[i].load(std::memory_order_acquire);
    if (key == 0) break;
    errors[key] += live.error_count_[i].load(std::memory_order_relaxed);
  }
  throttled_commands += live.throttled_commands_.load(std::memory_order_relaxed);
  throttled_ns += live.throttled_ns_.load(std::memory_order_relaxed);
}

void IoStatsSnapshot::merge(const IoStatsSnapshot& o) {
  for (unsigned c = 0; c < kOpClasses; ++c) ops[c].merge(o.ops[c]);
  for (const auto& [k, v] : o.errors) errors[k] += v;
  throttled_commands += o.throttled_commands;
  throttled_ns += o.throttled_ns;
}

uint64_t IoStatsSnapshot::total_commands() const noexcept {
  uint64_t n = 0;
  for (const auto& o : ops) n += o.commands;
  return n;
}

uint64_t IoStatsSnapshot::total_errors() const noexcept {
  uint64_t n = 0;
  for (const auto& [k, v] : errors) n += v;
  return n;
}

std::string status_field_name(uint16_t status_field) {
  if (status_field == kOtherErrorStatus) return "other";
  return protocol::status_name(protocol::Status::from_field(status_field));
}

}  // namespace rdmablk::target::stats
