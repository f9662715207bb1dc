#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "initiator/bench/stats.h"

using namespace rdmablk::initiator::bench;

TEST(Histogram, BucketsAreContiguousAndContainTheirValues) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 200000; ++i) {
    uint64_t v = rng() >> (rng() % 64);
    auto idx = LatencyHistogram::index(v);
    ASSERT_LT(idx, LatencyHistogram::kBuckets);
    ASSERT_LE(LatencyHistogram::bucket_low(idx), v);
    ASSERT_GE(LatencyHistogram::bucket_high(idx), v);
  }
  for (std::size_t i = 0; i + 1 < LatencyHistogram::kBuckets; ++i) {
    ASSERT_EQ(LatencyHistogram::bucket_high(i) + 1, LatencyHistogram::bucket_low(i + 1)) << i;
  }
  EXPECT_EQ(LatencyHistogram::index(UINT64_MAX), LatencyHistogram::kBuckets - 1);
  EXPECT_EQ(LatencyHistogram::index(127), 127u);  // exact below 128 ns
}

TEST(Histogram, PercentilesMatchSortedDataWithinTheErrorBound) {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> dist(10.0, 1.0);  // ~22 us median, long tail
  std::vector<uint64_t> samples;
  LatencyHistogram h;
  for (int i = 0; i < 100000; ++i) {
    auto v = static_cast<uint64_t>(dist(rng));
    samples.push_back(v);
    h.record(v);
  }
  std::sort(samples.begin(), samples.end());
  for (double p : kFioPercentiles) {
    // fio's rank rule: the smallest value with at least p% of the samples at or below it.
    auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(samples.size())));
    uint64_t exact = samples[std::max<std::size_t>(rank, 1) - 1];
    uint64_t got = h.percentile(p);
    EXPECT_LE(std::llabs(static_cast<long long>(got) - static_cast<long long>(exact)),
              static_cast<long long>(exact / 256 + 1))
        << "p" << p << " exact " << exact << " got " << got;
  }
  EXPECT_EQ(h.min(), samples.front());
  EXPECT_EQ(h.max(), samples.back());
  EXPECT_LE(samples.back() - h.percentile(100.0), samples.back() / 256 + 1);
}

TEST(Histogram, MeanAndSampleStddevAreExact) {
  LatencyHistogram h;
  std::vector<double> xs{100, 200, 300, 400, 1000};
  for (double x : xs) h.record(static_cast<uint64_t>(x));
  EXPECT_DOUBLE_EQ(h.mean(), 400.0);
  double ss = 0;
  for (double x : xs) ss += (x - 400) * (x - 400);
  EXPECT_NEAR(h.stddev(), std::sqrt(ss / 4), 1e-9);
  EXPECT_EQ(h.count(), 5u);
}

TEST(Histogram, MergeEqualsRecordingEverythingInOne) {
  std::mt19937_64 rng(7);
  LatencyHistogram a, b, all;
  for (int i = 0; i < 5000; ++i) {
    uint64_t v = rng() % 1000000;
    (i % 3 ? a : b).record(v);
    all.record(v);
  }
  LatencyHistogram merged;  // merging into an empty one, then another
  merged.merge(a);
  merged.merge(b);
  EXPECT_EQ(merged.count(), all.count());
  EXPECT_EQ(merged.min(), all.min());
  EXPECT_EQ(merged.max(), all.max());
  EXPECT_NEAR(merged.mean(), all.mean(), 1e-6);
  EXPECT_NEAR(merged.stddev(), all.stddev(), 1e-6);
  EXPECT_TRUE(std::equal(merged.buckets().begin(), merged.buckets().end(), all.buckets().begin()));
  for (double p : kFioPercentiles) EXPECT_EQ(merged.percentile(p), all.percentile(p));

  DirectionStats d1, d2;
  d1.ios = 3;
  d1.bytes = 300;
  d1.runtime_ns = 5;
  d2.ios = 1;
  d2.bytes = 100;
  d2.runtime_ns = 9;
  d1.merge(d2);
  EXPECT_EQ(d1.ios, 4u);
  EXPECT_EQ(d1.bytes, 400u);
  EXPECT_EQ(d1.runtime_ns, 9u);
}

TEST(Histogram, EmptyAndResetAndCopy) {
  LatencyHistogram h;
  EXPECT_EQ(h.percentile(50), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.stddev(), 0.0);
  h.record(5);
  LatencyHistogram copy(h);
  h.reset();
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(copy.count(), 1u);
  EXPECT_EQ(copy.percentile(50), 5u);
}

TEST(DirectionStats, BandwidthAndIopsUseFioIntegerArithmetic) {
  DirectionStats d;
  d.ios = 1000;
  d.bytes = 4096000;
  d.runtime_ns = 1000000000;
  EXPECT_EQ(d.runtime_ms(), 1000u);
  EXPECT_EQ(d.bw_bytes(), 4096000u);
  EXPECT_DOUBLE_EQ(d.iops(), 1000.0);
}
