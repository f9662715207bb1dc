// Statistics blocks: histogram buckets and percentiles, error slots, merging.
#include <gtest/gtest.h>

#include "protocol/status.h"
#include "target/core/stats.h"

namespace rdmablk::target::stats {
namespace {

TEST(LatencyHistogram, EveryValueFallsInsideItsBucket) {
  for (uint64_t v : {0ull, 1ull, 7ull, 8ull, 9ull, 15ull, 16ull, 100ull, 999ull, 1000ull, 4096ull, 123'456ull,
                     1'000'000ull, 987'654'321ull, (1ull << 39) - 1}) {
    const unsigned b = latency_bucket(v);
    ASSERT_LT(b, kLatencyBuckets);
    EXPECT_LE(bucket_lower(b), v) << v;
    EXPECT_GT(bucket_upper(b), v) << v;
  }
  // Buckets tile the line: each starts where the previous ended, and widths stay within 1/8 of the value.
  for (unsigned i = 1; i + 1 < kLatencyBuckets; ++i) {
    ASSERT_EQ(bucket_lower(i), bucket_upper(i - 1)) << i;
    if (i >= kSubBuckets) {
      EXPECT_LE((bucket_upper(i) - bucket_lower(i)) * 8, bucket_lower(i)) << i;
    }
  }
  EXPECT_EQ(latency_bucket(UINT64_MAX), kLatencyBuckets - 1);
}

TEST(IoStats, RecordsCountsBytesLatencyAndErrors) {
  IoStats live;
  for (int i = 0; i < 90; ++i) live.record(OpClass::read, 4096, 10'000, 0);   // 10 us
  for (int i = 0; i < 10; ++i) live.record(OpClass::read, 4096, 1'000'000, 0);  // 1 ms
  live.record(OpClass::write, 0, 5'000, protocol::status::lba_out_of_range.field());
  live.record(OpClass::write, 0, 5'000, protocol::status::lba_out_of_range.field() | 0x4000);  // + DNR: same key
  live.record(OpClass::other, 0, 2'000, 0);
  IoStatsSnapshot s;
  s.add(live);
  EXPECT_EQ(s.op(OpClass::read).commands, 100u);
  EXPECT_EQ(s.op(OpClass::read).bytes, 409'600u);
  EXPECT_EQ(s.op(OpClass::write).commands, 2u);
  EXPECT_EQ(s.op(OpClass::write).bytes, 0u);
  EXPECT_EQ(s.op(OpClass::other).commands, 1u);
  EXPECT_EQ(s.total_commands(), 103u);
  ASSERT_EQ(s.errors.size(), 1u);
  EXPECT_EQ(s.errors.begin()->second, 2u);
  EXPECT_EQ(status_field_name(s.errors.begin()->first), "LBA Out of Range");
  const auto& h = s.op(OpClass::read).latency;
  EXPECT_EQ(h.count, 100u);
  EXPECT_EQ(h.sum_ns, 90u * 10'000 + 10u * 1'000'000);
  // p50 and p90 are 10 us within a bucket's width; p99 is the 1 ms group.
  EXPECT_GE(h.percentile_ns(0.5), 10'000u);
  EXPECT_LE(h.percentile_ns(0.5), 11'250u);
  EXPECT_LE(h.percentile_ns(0.9), 11'250u);
  EXPECT_GE(h.percentile_ns(0.99), 1'000'000u);
  EXPECT_LE(h.percentile_ns(0.99), 1'125'000u);
  // Exact below a power of two: everything under 16384 ns is the 90 fast reads.
  EXPECT_EQ(h.count_below(16'384), 90u);
  EXPECT_EQ(h.count_below(1u << 21), 100u);
  EXPECT_EQ(HistogramSnapshot{}.percentile_ns(0.99), 0u);
}

TEST(IoStats, MoreDistinctErrorsThanSlotsFoldIntoOther) {
  IoStats live;
  for (unsigned sc = 1; sc <= kErrorSlots + 4; ++sc) live.record(OpClass::other, 0, 1, static_cast<uint16_t>(sc));
  IoStatsSnapshot s;
  s.add(live);
  EXPECT_EQ(s.total_errors(), kErrorSlots + 4);  // none lost
  EXPECT_EQ(s.errors.size(), kErrorSlots);
  EXPECT_EQ(s.errors.count(kOtherErrorStatus), 1u);
  EXPECT_EQ(status_field_name(kOtherErrorStatus), "other");
}

TEST(IoStats, SnapshotsMerge) {
  IoStats a, b;
  a.record(OpClass::read, 512, 100, 0);
  b.record(OpClass::read, 1024, 200, protocol::status::invalid_namespace.field());
  IoStatsSnapshot sa, sb;
  sa.add(a);
  sb.add(b);
  sa.merge(sb);
  EXPECT_EQ(sa.op(OpClass::read).commands, 2u);
  EXPECT_EQ(sa.op(OpClass::read).bytes, 1536u);
  EXPECT_EQ(sa.op(OpClass::read).latency.count, 2u);
  EXPECT_EQ(sa.total_errors(), 1u);
}

}  // namespace
}  // namespace rdmablk::target::stats
