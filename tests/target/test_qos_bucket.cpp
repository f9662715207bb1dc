// QoS token buckets (target/qos/): what the reactors are granted over simulated time against the rate, the
// burst and the debt a big command leaves; per-host and per-kind accounting; threads sharing one budget.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "target/qos/namespace_qos.h"

namespace rdmablk::target::qos {
namespace {

constexpr uint64_t kMs = 1'000'000;  // ns
constexpr uint64_t kStart = 1'000 * kMs;

// Spends `cost` from `a` as often as it can at each 100 us step over [kStart, kStart + duration): how many.
uint64_t spend_for(SharedBucket& b, std::vector<Allowance>& reactors, uint64_t cost, uint64_t duration_ns) {
  uint64_t granted = 0;
  for (uint64_t t = kStart; t < kStart + duration_ns; t += kMs / 10)
    for (auto& a : reactors)
      while (a.spend(b, cost, t)) ++granted;
  return granted;
}

TEST(QosBucket, GrantsTheRateOverASecondWithinTheBurst) {
  SharedBucket b;
  b.set_rate(5000);
  std::vector<Allowance> reactors(2);
  const uint64_t granted = spend_for(b, reactors, 1, 1000 * kMs);
  // A full burst (10 ms) at the start, then the rate; at most one batch (1 ms) more per reactor.
  EXPECT_GE(granted, 5000u);
  EXPECT_LE(granted, 5000u + 50 + 2 * 5);
}

TEST(QosBucket, LongRunsLandOnTheRate) {
  SharedBucket b;
  b.set_rate(123'456);
  std::vector<Allowance> reactors(3);
  const uint64_t granted = spend_for(b, reactors, 1, 10'000 * kMs);
  EXPECT_NEAR(static_cast<double>(granted), 1'234'560.0, 1'234'560.0 * 0.002);
}

TEST(QosBucket, ACommandBiggerThanTheBurstGoesAndLeavesADebt) {
  SharedBucket b;
  b.set_rate(1'000'000);  // 1 MB/s: a 10 KB burst
  Allowance a;
  EXPECT_TRUE(a.spend(b, 1 << 20, kStart)) << "a positive bucket lets a 1 MiB command go";
  EXPECT_LT(b.level(), 0);
  EXPECT_FALSE(a.spend(b, 4096, kStart + 500 * kMs)) << "half a second later the debt is not paid";
  EXPECT_TRUE(a.spend(b, 4096, kStart + 1100 * kMs)) << "~1.05 s after: paid, and the next goes";
}

TEST(QosBucket, IdleTimeFillsOnlyTheBurst) {
  SharedBucket b;
  b.set_rate(1000);
  std::vector<Allowance> reactors(1);
  EXPECT_LE(spend_for(b, reactors, 1, kMs / 10), 11u);
  // An hour idle: still at most 10 ms of the rate (+ a batch).
  uint64_t n = 0;
  while (reactors[0].spend(b, 1, kStart + 3'600'000 * kMs)) ++n;
  EXPECT_LE(n, 11u);
  EXPECT_GE(n, 9u);
}

TEST(QosBucket, ThreadsSharingABudgetGetNoMoreThanItHolds) {
  SharedBucket b;
  b.set_rate(100'000);
  std::atomic<uint64_t> granted{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&] {
      Allowance a;
      uint64_t n = 0;
      for (uint64_t t = kStart; t < kStart + 100 * kMs; t += kMs / 10)
        while (a.spend(b, 1, t)) ++n;
      granted += n;
    });
  }
  for (auto& t : threads) t.join();
  // 100 ms of the rate = 10,000, + the burst (1,000), + a batch (100) per thread. The threads' clocks are
  // not in step, so a late thread may find the refills already made: the lower bound is loose.
  EXPECT_LE(granted.load(), 10'000u + 1'000 + 4 * 100);
  EXPECT_GE(granted.load(), 9'000u);
}

TEST(QosLimitsTest, EveryKindCountsItsOwnCommands) {
  NamespaceQosConfig c;
  c.limits.read_mbps = 1;  // 1 MB/s of reads: a 10 KB burst
  NamespaceQos qos(c);
  ASSERT_TRUE(qos.active());
  ReactorQos local;
  uint64_t reads = 0, writes = 0;
  for (int i = 0; i < 100; ++i) {
    reads += admit(qos, local, -1, Cost{false, 4096}, kStart);
    writes += admit(qos, local, -1, Cost{true, 4096}, kStart);
  }
  EXPECT_EQ(writes, 100u) << "writes are not limited by read_mbps";
  EXPECT_LE(reads, 4u);
  EXPECT_GE(reads, 2u);
}

TEST(QosLimitsTest, AHostsLimitAddsToTheNamespaces) {
  NamespaceQosConfig c;
  c.limits.iops = 100'000;
  c.hosts.push_back(HostQosConfig{"nqn.h1", QosLimits{1000, 0, 0, 0}, {}});
  NamespaceQos qos(c);
  EXPECT_EQ(qos.host_index("nqn.h1"), 0);
  EXPECT_EQ(qos.host_index("nqn.h2"), -1);
  ReactorQos local;
  local.hosts.resize(qos.host_count());
  uint64_t h1 = 0, h2 = 0;
  for (int i = 0; i < 200; ++i) {
    h1 += admit(qos, local, 0, Cost{false, 512}, kStart);
    h2 += admit(qos, local, -1, Cost{false, 512}, kStart);
  }
  EXPECT_LE(h1, 12u) << "host 1: 10 ms of 1000/s (+ a batch)";
  EXPECT_EQ(h2, 200u) << "the namespace's own budget is far from spent";
}

TEST(QosLimitsTest, LimitsChangeInPlace) {
  NamespaceQosConfig c;
  NamespaceQos qos(c);
  EXPECT_FALSE(qos.active());
  c.limits.iops = 10;
  ASSERT_TRUE(qos.same_hosts(c));
  qos.set(c);
  EXPECT_TRUE(qos.active());
  EXPECT_EQ(qos.budget().buckets[0].rate(), 10u);
  c.hosts.push_back(HostQosConfig{"nqn.h1", QosLimits{1, 0, 0, 0}, {}});
  EXPECT_FALSE(qos.same_hosts(c)) << "another host list needs a new NamespaceQos";
}

}  // namespace
}  // namespace rdmablk::target::qos
