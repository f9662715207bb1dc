// Latency statistics for `rdmablk bench`: an HDR-style log-linear histogram of completion latencies in
// nanoseconds (128 linear sub-buckets per power of two: every value below 128 ns is exact, above that a
// bucket spans 1/128 of its power of two, so a reported percentile is within 1/256 of the true sample
// value), plus exact min/max/mean/stddev (Welford). Recording never allocates; histograms merge by adding
// buckets, so per-job statistics combine into group totals.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace rdmablk::initiator::bench {

// fio's default percentile list (stat.c def_percentile_list).
inline constexpr std::array<double, 17> kFioPercentiles{1.0,  5.0,  10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0,
                                                        80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99};

class LatencyHistogram {
 public:
  static constexpr unsigned kSubBits = 7;
  static constexpr uint64_t kSub = uint64_t{1} << kSubBits;
  static constexpr std::size_t kBuckets = (64 - kSubBits + 1) * kSub;

  LatencyHistogram();
  LatencyHistogram(const LatencyHistogram& other);
  LatencyHistogram& operator=(const LatencyHistogram& other);
  LatencyHistogram(LatencyHistogram&&) noexcept = default;
  LatencyHistogram& operator=(LatencyHistogram&&) noexcept = default;

  void record(uint64_t ns) noexcept;
  void merge(const LatencyHistogram& other) noexcept;
  void reset() noexcept;

  uint64_t count() const noexcept { return n_; }
  uint64_t min() const noexcept { return n_ ? min_ : 0; }
  uint64_t max() const noexcept { return max_; }
  double mean() const noexcept { return mean_; }
  double stddev() const noexcept;  // sample standard deviation (n - 1), as fio
  // fio's rule: the first bucket whose cumulative count reaches p% of the samples; its midpoint, clamped
  // to [min, max]. 0 without samples.
  uint64_t percentile(double p) const noexcept;

  static std::size_t index(uint64_t v) noexcept;
  static uint64_t bucket_low(std::size_t i) noexcept;
  static uint64_t bucket_high(std::size_t i) noexcept;  // inclusive
  std::span<const uint64_t> buckets() const noexcept { return {buckets_.get(), kBuckets}; }

 private:
  void copy_summary(const LatencyHistogram& o) noexcept;  // count, min, max, mean, M2: all but the buckets

  std::unique_ptr<uint64_t[]> buckets_;
  uint64_t n_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
  double mean_ = 0;
  double m2_ = 0;
};

// One direction (read or write) of one job.
struct DirectionStats {
  LatencyHistogram clat;      // submit -> completion, ns
  uint64_t ios = 0;
  uint64_t bytes = 0;
  uint64_t runtime_ns = 0;    // time this direction was active, ramp excluded
  void merge(const DirectionStats& o) noexcept;
  void reset() noexcept;
  uint64_t runtime_ms() const noexcept { return (runtime_ns + 500000) / 1000000; }
  // fio's integer arithmetic: bytes/s = 1000 * bytes / runtime_ms.
  uint64_t bw_bytes() const noexcept { return runtime_ms() ? 1000 * bytes / runtime_ms() : 0; }
  double iops() const noexcept { return runtime_ms() ? 1000.0 * static_cast<double>(ios) / static_cast<double>(runtime_ms()) : 0; }
};

// One interval of a job's progress (for bandwidth/IOPS logs and --plot): what completed in
// (t_ms - interval, t_ms], per direction (read, write, trim). t_ms counts from the job's start, ramp
// included.
struct IntervalSample {
  uint64_t t_ms = 0;
  std::array<uint64_t, 3> ios{};
  std::array<uint64_t, 3> bytes{};
};

}  // namespace rdmablk::initiator::bench
