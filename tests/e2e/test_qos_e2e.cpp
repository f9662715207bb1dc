// QoS end to end over NVMe/TCP: `rdmablk bench` at QD32 on a namespace limited to 5,000 IOPS beside an
// unlimited one on the same (only) reactor. Asserted is what holds on a loaded machine: the limited namespace
// never goes above its limit by more than the bucket's burst over the run, it is throttled and the other is
// not, the statistics show it, and a reload changes the limit live. How close to the limit it lands and
// how much of its own rate the unlimited namespace keeps are figures: bench/qos_bench.py prints them. The
// bandwidth limits hold each direction to its own rate.
#include <gtest/gtest.h>

#include "e2e_common.h"

namespace e2e {
namespace {

constexpr uint64_t kLimit = 5000;
constexpr int kRuntimeS = 4;

// Both namespaces on one reactor: the limited one must not slow the other there.
std::string qos_config(uint64_t iops) {
  return config_with_namespaces(
      "      - nsid: 1\n        backend: null\n        size: 1GiB\n        qos:\n          iops: " +
          std::to_string(iops) + "\n      - nsid: 2\n        backend: null\n        size: 1GiB\n",
      "", "", 1);
}

// The namespace's entry of `ctl stats`.
nlohmann::json ns_stats(const TargetProcess& t, uint32_t nsid) {
  auto r = ctl(t, {"stats"});
  EXPECT_EQ(r.exit_status, 0) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (!j.is_discarded())
    for (const auto& n : j["namespaces"])
      if (n["nsid"] == nsid) return n;
  ADD_FAILURE() << "no stats for namespace " << nsid << ": " << r.out;
  return nlohmann::json::object();
}

TEST(QosE2e, ALimitedNamespaceStaysUnderItsLimitBesideAnUnlimitedOne) {
  TargetProcess t;
  ASSERT_TRUE(t.start(qos_config(kLimit)));
  const std::string job = "[global]\nrw=randread\nbs=4k\niodepth=32\nruntime=" + std::to_string(kRuntimeS) +
                          "\ntime_based\n\n[limited]\nnamespace=1\n\n[unlimited]\nnamespace=2\n";
  auto j = run_bench_json(t, "qos", job);
  ASSERT_EQ(j["jobs"].size(), 2u) << j.dump(2);
  const auto& limited = j["jobs"][0];
  const auto& unlimited = j["jobs"][1];
  ASSERT_EQ(limited["jobname"], "limited");
  EXPECT_EQ(limited["error"], 0);
  EXPECT_EQ(unlimited["error"], 0);
  const double limited_iops = limited["read"]["iops"].get<double>();
  const double unlimited_iops = unlimited["read"]["iops"].get<double>();
  // An upper bound whatever the load: the rate, plus the burst (10 ms of it), a batch and the queue depth
  // (granted just before the window) spread over the run; 2% for the bench's own clock.
  const double bound = kLimit * 1.02 + (kLimit / 100.0 + kLimit / 1000.0 + 32) / kRuntimeS;
  EXPECT_LE(limited_iops, bound) << "unlimited beside it: " << unlimited_iops << " IOPS";
  EXPECT_GT(limited_iops, 0.0);
  EXPECT_GT(unlimited["read"]["io_bytes"].get<uint64_t>(), 0u);
  std::printf("[ figures  ] limited %.0f IOPS (limit %llu), unlimited beside it %.0f IOPS\n", limited_iops,
              static_cast<unsigned long long>(kLimit), unlimited_iops);

  const auto s1 = ns_stats(t, 1);
  const auto s2 = ns_stats(t, 2);
  ASSERT_TRUE(s1.contains("qos")) << s1.dump(2);
  EXPECT_EQ(s1["qos"][0]["iops"], kLimit);
  EXPECT_GT(s1["qos"][0]["throttled_commands"].get<uint64_t>(), 0u) << "QD32 against 5,000 IOPS must wait";
  EXPECT_GT(s1["qos"][0]["throttled_ns"].get<uint64_t>(), 0u);
  EXPECT_FALSE(s2.contains("qos")) << s2.dump(2);

  // Changed live: the same backend, the new limit in the statistics and in force.
  ASSERT_TRUE(t.reload(qos_config(2000)));
  EXPECT_TRUE(t.wait_for_log("QoS changed 1", 30s)) << t.log();
  EXPECT_EQ(ns_stats(t, 1)["qos"][0]["iops"], 2000u);
  auto again =
      run_bench_json(t, "qos-2000", "[limited]\nnamespace=1\nrw=randread\nbs=4k\niodepth=32\nruntime=2\ntime_based\n");
  ASSERT_EQ(again["jobs"].size(), 1u);
  EXPECT_LE(again["jobs"][0]["read"]["iops"].get<double>(), 2000 * 1.02 + (20 + 2 + 32) / 2.0);
  EXPECT_TRUE(t.stop());
}

// Bandwidth limits per direction: 64 KiB random reads and writes at once on a namespace limited to 20 MB/s
// of reads and 10 MB/s of writes. Each direction stays under its own limit (the same bound as above, in
// bytes); neither limit holds the other direction back to its rate (reads go beyond 10 MB/s).
TEST(QosE2e, ReadAndWriteBandwidthLimitsHoldEachDirection) {
  constexpr double kReadLimit = 20e6;
  constexpr double kWriteLimit = 10e6;
  constexpr int kSeconds = 3;
  TargetProcess t;
  ASSERT_TRUE(
      t.start(config_with_namespaces("      - nsid: 1\n        backend: null\n        size: 1GiB\n"
                                     "        qos:\n          read_mbps: 20\n          write_mbps: 10\n",
                                     "", "", 1)));
  const std::string job = "[global]\nnamespace=1\nbs=64k\niodepth=8\nruntime=" + std::to_string(kSeconds) +
                          "\ntime_based\n\n[reads]\nrw=randread\n\n[writes]\nrw=randwrite\n";
  auto j = run_bench_json(t, "qos-mbps", job);
  ASSERT_EQ(j["jobs"].size(), 2u) << j.dump(2);
  const auto& reads = j["jobs"][0]["read"];
  const auto& writes = j["jobs"][1]["write"];
  EXPECT_EQ(j["jobs"][0]["error"], 0);
  EXPECT_EQ(j["jobs"][1]["error"], 0);
  auto bound = [](double limit) { return limit * 1.02 + (limit / 100 + limit / 1000 + 8 * 65536.0) / kSeconds; };
  const double read_bw = reads["bw_bytes"].get<double>();
  const double write_bw = writes["bw_bytes"].get<double>();
  EXPECT_LE(read_bw, bound(kReadLimit));
  EXPECT_LE(write_bw, bound(kWriteLimit));
  EXPECT_GT(read_bw, bound(kWriteLimit)) << "reads held back to the write limit";
  EXPECT_GT(write_bw, 0.0);
  std::printf("[ figures  ] reads %.1f MB/s (limit 20), writes %.1f MB/s (limit 10)\n", read_bw / 1e6, write_bw / 1e6);
  const auto s = ns_stats(t, 1);
  ASSERT_TRUE(s.contains("qos")) << s.dump(2);
  EXPECT_EQ(s["qos"][0]["read_mbps"], 20u);
  EXPECT_EQ(s["qos"][0]["write_mbps"], 10u);
  EXPECT_GT(s["qos"][0]["throttled_commands"].get<uint64_t>(), 0u);
  EXPECT_TRUE(t.stop());
}

}  // namespace
}  // namespace e2e
