#include "initiator/bench/stats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace rdmablk::initiator::bench {

LatencyHistogram::LatencyHistogram() : buckets_(new uint64_t[kBuckets]()) {}

LatencyHistogram::LatencyHistogram(const LatencyHistogram& o) : buckets_(new uint64_t[kBuckets]) {
  std::memcpy(buckets_.get(), o.buckets_.get(), kBuckets * sizeof(uint64_t));
  copy_summary(o);
}

LatencyHistogram& LatencyHistogram::operator=(const LatencyHistogram& o) {
  if (this != &o) {
    if (!buckets_) buckets_.reset(new uint64_t[kBuckets]);
    std::memcpy(buckets_.get(), o.buckets_.get(), kBuckets * sizeof(uint64_t));
    copy_summary(o);
  }
  return *this;
}

void LatencyHistogram::copy_summary(const LatencyHistogram& o) noexcept {
  n_ = o.n_;
  min_ = o.min_;
  max_ = o.max_;
  mean_ = o.mean_;
  m2_ = o.m2_;
}

std::size_t LatencyHistogram::index(uint64_t v) noexcept {
  if (v < kSub) return static_cast<std::size_t>(v);
  unsigned msb = 63u - static_cast<unsigned>(std::countl_zero(v));
  unsigned shift = msb - kSubBits;
  return static_cast<std::size_t>((uint64_t{shift} + 1) * kSub + ((v >> shift) - kSub));
}

uint64_t LatencyHistogram::bucket_low(std::size_t i) noexcept {
  if (i < kSub) return i;
  uint64_t shift = i / kSub - 1;
  uint64_t mant = i % kSub + kSub;
  return mant << shift;
}

uint64_t LatencyHistogram::bucket_high(std::size_t i) noexcept {
  if (i < kSub) return i;
  uint64_t shift = i / kSub - 1;
  return bucket_low(i) + ((uint64_t{1} << shift) - 1);
}

void LatencyHistogram::record(uint64_t ns) noexcept {
  ++buckets_[index(ns)];
  ++n_;
  min_ = std::min(min_, ns);
  max_ = std::max(max_, ns);
  double x = static_cast<double>(ns);
  double delta = x - mean_;
  mean_ += delta / static_cast<double>(n_);
  m2_ += delta * (x - mean_);
}

void LatencyHistogram::merge(const LatencyHistogram& o) noexcept {
  if (o.n_ == 0) return;
  for (std::size_t i = 0; i < kBuckets; ++i) buckets_[i] += o.buckets_[i];
  if (n_ == 0) {
    copy_summary(o);
    return;
  }
  // Chan et al.'s parallel combination of mean and M2.
  double na = static_cast<double>(n_), nb = static_cast<double>(o.n_), n = na + nb;
  double delta = o.mean_ - mean_;
  mean_ += delta * nb / n;
  m2_ += o.m2_ + delta * delta * na * nb / n;
  n_ += o.n_;
  min_ = std::min(min_, o.min_);
  max_ = std::max(max_, o.max_);
}

void LatencyHistogram::reset() noexcept {
  std::memset(buckets_.get(), 0, kBuckets * sizeof(uint64_t));
  n_ = 0;
  min_ = UINT64_MAX;
  max_ = 0;
  mean_ = 0;
  m2_ = 0;
}

double LatencyHistogram::stddev() const noexcept {
  return n_ > 1 ? std::sqrt(m2_ / static_cast<double>(n_ - 1)) : 0.0;
}

uint64_t LatencyHistogram::percentile(double p) const noexcept {
  if (n_ == 0) return 0;
  double target = p / 100.0 * static_cast<double>(n_);
  uint64_t sum = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    sum += buckets_[i];
    if (buckets_[i] && static_cast<double>(sum) >= target) {
      uint64_t lo = bucket_low(i), hi = bucket_high(i);
      uint64_t mid = lo + (hi - lo) / 2;
      return std::clamp(mid, min_, max_);
    }
  }
  return max_;
}

void DirectionStats::merge(const DirectionStats& o) noexcept {
  clat.merge(o.clat);
  ios += o.ios;
  bytes += o.bytes;
  runtime_ns = std::max(runtime_ns, o.runtime_ns);
}

void DirectionStats::reset() noexcept {
  clat.reset();
  ios = 0;
  bytes = 0;
  runtime_ns = 0;
}

}  // namespace rdmablk::initiator::bench
