// Target core: QoS limits on the reactors (target/core/qos_gate.cpp). Reads over a namespace's budget wait and
// go in arrival order as it refills, while another namespace's reads go at once; what waits when the
// namespace is removed, its limit changes or the queue closes completes or is released, never left behind.
// The budget refills by the real clock; the release timer is the fake reactor's (advance()).
#include <thread>

#include "target/core_test_util.h"
#include "target/gated_backend.h"

namespace rdmablk::target::testing {
namespace {

using Clock = std::chrono::steady_clock;

// With iops 1 the first read leaves the bucket ~0.99 s in debt, so the next ones wait, unless the test
// itself took that long to submit them (a machine loaded beyond reason): then it cannot tell.
bool slower_than_the_debt(Clock::time_point since) { return Clock::now() - since > std::chrono::milliseconds(900); }
constexpr const char* kTooSlow = "submitting took longer than the budget's debt lasts: cannot tell";

TargetConfig limited_config(uint64_t iops) {
  TargetConfig c = test_config();
  c.subsystems[0].namespaces[0].qos.limits.iops = iops;  // sub1 nsid 1 (512 B blocks); nsid 2 unlimited
  return c;
}

class CoreQos : public ::testing::Test {
 protected:
  explicit CoreQos(uint64_t iops = 1) : h(limited_config(iops)) {}
  void SetUp() override {
    cntlid = h.bring_up(*admin);
    io = h.io_queue(cntlid, 1);
    io->completions.clear();  // the Connect: only reads from here on
  }
  uint16_t submit_read(uint32_t nsid) {
    const uint16_t cid = h.next_cid();
    io->submit(sqe_of(p::make_read(cid, nsid, 0, 1, CoreHarness::sgl_for(*io, nsid == 2 ? 4096 : 512))));
    return cid;
  }
  std::vector<uint16_t> completed_cids() const {
    std::vector<uint16_t> out;
    for (const auto& c : io->completions) out.push_back(c.cqe.cid.get());
    return out;
  }
  // Fires the release timer until `n` commands completed (the budget refills by the real clock).
  void release_until(std::size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);  // a hang, not a delay
    while (io->completions.size() < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      h.reactor.advance(std::chrono::milliseconds(1));
    }
    ASSERT_GE(io->completions.size(), n);
  }
  stats::NamespaceStats ns_stats(uint32_t nsid) {
    TargetStatus s;
    h.core().fill_status(s);
    for (auto& n : s.namespace_stats)
      if (n.subsystem == kSub1 && n.nsid == nsid) return n;
    ADD_FAILURE() << "no statistics for nsid " << nsid;
    return {};
  }

  CoreHarness h;
  std::unique_ptr<FakeTargetQueue> admin = h.queue();
  std::unique_ptr<FakeTargetQueue> io;
  uint16_t cntlid = 0;
};

class CoreQosThousand : public CoreQos {
 protected:
  CoreQosThousand() : CoreQos(1000) {}
};

TEST_F(CoreQosThousand, CommandsOverTheBudgetWaitInOrderAndOthersDoNot) {
  std::vector<uint16_t> limited, unlimited;
  const auto t0 = Clock::now();
  for (int i = 0; i < 40; ++i) {
    limited.push_back(submit_read(1));
    if (i % 8 == 0) unlimited.push_back(submit_read(2));
  }
  h.reactor.run();
  const auto elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  // The burst (10 ms of 1000/s) went, and what the clock added meanwhile (1 a millisecond) and a batch; the
  // unlimited namespace's reads all went, none waited behind the others.
  for (uint16_t cid : unlimited) EXPECT_TRUE(io->result(cid)) << "nsid 2 cid " << cid;
  const std::size_t at_once = io->completions.size() - unlimited.size();
  EXPECT_GE(at_once, 10u);
  EXPECT_LE(at_once, 10u + 1 + static_cast<std::size_t>(elapsed_ms) + 1);
  if (at_once == limited.size()) GTEST_SKIP() << "submitting took " << elapsed_ms << " ms: nothing had to wait";
  release_until(limited.size() + unlimited.size());
  std::vector<uint16_t> order;
  for (uint16_t cid : completed_cids())
    if (std::find(unlimited.begin(), unlimited.end(), cid) == unlimited.end()) order.push_back(cid);
  EXPECT_EQ(order, limited) << "released in arrival order";
  for (const auto& c : io->completions) EXPECT_TRUE(c.status().ok());
  const auto s1 = ns_stats(1);
  EXPECT_EQ(s1.io.throttled_commands, limited.size() - at_once);
  EXPECT_GT(s1.io.throttled_ns, 0u);
  ASSERT_EQ(s1.qos.size(), 1u);
  EXPECT_EQ(s1.qos[0].iops, 1000u);
  EXPECT_EQ(s1.qos[0].throttled_commands, s1.io.throttled_commands);
  EXPECT_TRUE(ns_stats(2).qos.empty());
  EXPECT_EQ(ns_stats(2).io.throttled_commands, 0u);
  EXPECT_EQ(h.reactor.timer_count(), 0u) << "no timer once nothing waits";
}

TEST_F(CoreQos, RemovingTheNamespaceCompletesWhatWaits) {
  std::vector<uint16_t> cids;
  const auto t0 = Clock::now();
  for (int i = 0; i < 4; ++i) cids.push_back(submit_read(1));
  h.reactor.run();
  if (slower_than_the_debt(t0)) GTEST_SKIP() << kTooSlow;
  ASSERT_EQ(io->completions.size(), 1u) << "iops 1: one goes, the rest wait about a second each";
  auto next = limited_config(1);
  next.subsystems[0].namespaces.erase(next.subsystems[0].namespaces.begin());
  auto r = h.core().reload(next);
  ASSERT_TRUE(r) << r.error().message;
  h.reactor.run();
  h.reactor.advance(std::chrono::milliseconds(1));
  EXPECT_EQ(completed_cids(), cids) << "validated before the removal: they end on the old backend";
  EXPECT_EQ(h.reactor.timer_count(), 0u);
  EXPECT_EQ(h.read(*io, 1, 0, 1, 512).status(), st::invalid_namespace);
}

TEST_F(CoreQos, AClosedQueueReleasesWhatWaits) {
  std::vector<uint16_t> cids;
  const auto t0 = Clock::now();
  for (int i = 0; i < 4; ++i) cids.push_back(submit_read(1));
  h.reactor.run();
  if (slower_than_the_debt(t0)) GTEST_SKIP() << kTooSlow;
  ASSERT_EQ(io->completions.size(), 1u);
  io->close("connection reset");
  h.reactor.run();
  EXPECT_TRUE(io->released.empty()) << "still held while they wait";
  h.reactor.advance(std::chrono::milliseconds(1));
  std::sort(io->released.begin(), io->released.end());
  EXPECT_EQ(io->released, std::vector<uint16_t>(cids.begin() + 1, cids.end())) << "the three that waited";
  EXPECT_EQ(io->completions.size(), 1u) << "the waiting ones never reached the backend";
  EXPECT_EQ(h.reactor.timer_count(), 0u);
  auto io2 = h.io_queue(cntlid, 2);  // the controller goes on
  EXPECT_TRUE(h.read(*io2, 2, 0, 1, 4096).status().ok());
}

TEST_F(CoreQos, ALimitChangesLive) {
  std::vector<uint16_t> cids;
  const auto t0 = Clock::now();
  for (int i = 0; i < 4; ++i) cids.push_back(submit_read(1));
  h.reactor.run();
  if (slower_than_the_debt(t0)) GTEST_SKIP() << kTooSlow;
  ASSERT_EQ(io->completions.size(), 1u);
  // Lifted: what waits goes, and new reads do not wait.
  auto r = h.core().reload(limited_config(0));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->qos_changed, 1u);
  EXPECT_EQ(r->namespaces_changed, 0u) << "the same backend";
  h.reactor.run();
  h.reactor.advance(std::chrono::milliseconds(1));
  EXPECT_EQ(completed_cids(), cids);
  for (int i = 0; i < 50; ++i) submit_read(1);
  h.reactor.run();
  EXPECT_EQ(io->completions.size(), 54u);
  EXPECT_TRUE(ns_stats(1).qos.empty());
  // Limited again: the next reads wait.
  ASSERT_TRUE(h.core().reload(limited_config(1)));
  h.reactor.run();
  for (int i = 0; i < 4; ++i) submit_read(1);
  h.reactor.run();
  EXPECT_LE(io->completions.size(), 55u);
  EXPECT_EQ(ns_stats(1).qos.at(0).iops, 1u);
  EXPECT_TRUE(plan_changes(h.core().running_config(), limited_config(1)).empty());
}

// A new limit (or mask) copies the namespace but keeps its backend: the reactor goes on with the backend
// queue it has, rather than opening another and draining the old one.
TEST(CoreQosQueues, ALimitChangeKeepsTheBackendQueue) {
  Gate gate;
  gate.depth = 32;
  set_backend_wrapper([&gate](std::unique_ptr<backend::Backend> b) -> std::unique_ptr<backend::Backend> {
    return std::make_unique<GatedBackend>(std::move(b), gate);
  });
  struct Unwrap {
    ~Unwrap() { set_backend_wrapper({}); }
  } unwrap;
  CoreHarness h(limited_config(100000));
  auto admin = h.queue();
  auto io = h.io_queue(h.bring_up(*admin), 1);
  auto read = [&] {
    io->submit(sqe_of(p::make_read(h.next_cid(), 1, 0, 1, CoreHarness::sgl_for(*io, 512))));
    h.reactor.run();
  };
  read();
  const unsigned opened = gate.queues_opened;
  ASSERT_GE(opened, 1u);
  for (uint64_t iops : {200000u, 0u, 300000u}) {
    auto r = h.core().reload(limited_config(iops));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->qos_changed, 1u);
    h.reactor.run();
    read();
  }
  EXPECT_EQ(gate.queues_opened, opened);
  EXPECT_EQ(io->completions.size(), 5u);  // the Connect and four reads
  for (const auto& c : io->completions) EXPECT_TRUE(c.status().ok()) << p::status_name(c.status());
}

// A write_mbps limit holds back writes (after their data came), not reads; the writes land in order, whole.
TEST(CoreQosWrites, WritesWaitForTheirBandwidthAndLandWhole) {
  TargetConfig config = test_config();
  config.subsystems[0].namespaces[0].qos.limits.write_mbps = 1;  // 1 MB/s: a 10 KB burst
  CoreHarness h(config);
  auto admin = h.queue();
  auto io = h.io_queue(h.bring_up(*admin), 1);
  io->completions.clear();
  constexpr uint32_t kBlocks = 512;  // 256 KiB: the first leaves a debt of about a quarter of a second
  std::vector<uint16_t> cids;
  const auto t0 = Clock::now();
  for (uint8_t i = 0; i < 3; ++i) {
    const uint16_t cid = h.next_cid();
    io->submit(sqe_of(p::make_write(cid, 1, uint64_t{i} * kBlocks, kBlocks, CoreHarness::sgl_for(*io, kBlocks * 512))),
               pattern(kBlocks * 512, i));
    cids.push_back(cid);
  }
  const uint16_t read_cid = h.next_cid();
  io->submit(sqe_of(p::make_read(read_cid, 1, 3 * kBlocks, 1, CoreHarness::sgl_for(*io, 512))));
  h.reactor.run();
  if (Clock::now() - t0 > std::chrono::milliseconds(200)) GTEST_SKIP() << kTooSlow;
  EXPECT_TRUE(io->result(read_cid)) << "reads are not limited by write_mbps";
  EXPECT_TRUE(io->result(cids[0]));
  EXPECT_FALSE(io->result(cids[1])) << "the second waits out the first's debt";
  const auto deadline = Clock::now() + std::chrono::seconds(30);  // a hang, not a delay
  while (io->completions.size() < 4 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    h.reactor.advance(std::chrono::milliseconds(1));
  }
  std::vector<uint16_t> writes;
  for (const auto& c : io->completions) {
    EXPECT_TRUE(c.status().ok());
    if (c.cqe.cid.get() != read_cid) writes.push_back(c.cqe.cid.get());
  }
  EXPECT_EQ(writes, cids) << "in arrival order";
  for (uint8_t i = 0; i < 3; ++i)
    EXPECT_EQ(h.read(*io, 1, uint64_t{i} * kBlocks, kBlocks, kBlocks * 512).data, pattern(kBlocks * 512, i));
}

// A host's own limit holds back that host's commands only; the live-management API's way in (a hand-made
// change list) applies like a reload's.
TEST(CoreQosHosts, AHostsLimitHoldsBackThatHostOnly) {
  TargetConfig config = limited_config(0);
  config.subsystems[0].namespaces[0].qos.hosts.push_back(HostQosConfig{kHost1, QosLimits{1, 0, 0, 0}, {}});
  CoreHarness h(config);
  auto admin1 = h.queue(), admin2 = h.queue();
  auto io1 = h.io_queue(h.bring_up(*admin1, kSub1, kHost1, 0, kHostId1), 1, kSub1, kHost1, kHostId1);
  auto io2 = h.io_queue(h.bring_up(*admin2, kSub1, kHost2, 0, kHostId2), 1, kSub1, kHost2, kHostId2);
  io1->completions.clear();
  io2->completions.clear();
  const auto t0 = Clock::now();
  for (int i = 0; i < 4; ++i) {
    io1->submit(sqe_of(p::make_read(h.next_cid(), 1, 0, 1, CoreHarness::sgl_for(*io1, 512))));
    io2->submit(sqe_of(p::make_read(h.next_cid(), 1, 0, 1, CoreHarness::sgl_for(*io2, 512))));
  }
  h.reactor.run();
  if (slower_than_the_debt(t0)) GTEST_SKIP() << kTooSlow;
  EXPECT_EQ(io1->completions.size(), 1u) << "host 1: 1 IOPS";
  EXPECT_EQ(io2->completions.size(), 4u) << "host 2 has no limit of its own, nor has the namespace";
  auto ns1_stats = [&h] {
    TargetStatus s;
    h.core().fill_status(s);
    for (auto& n : s.namespace_stats)
      if (n.subsystem == kSub1 && n.nsid == 1) return n;
    ADD_FAILURE() << "no statistics for sub1 nsid 1";
    return stats::NamespaceStats{};
  };
  const auto ns1 = ns1_stats();
  ASSERT_EQ(ns1.qos.size(), 2u);
  EXPECT_EQ(ns1.qos[1].host, kHost1);
  EXPECT_EQ(ns1.qos[1].iops, 1u);

  // Lifted by a hand-made change list: what waits goes.
  NamespaceQosConfig lifted;
  auto r =
      h.core().apply_changes(ChangeList{change::QosChanged{kSub1, 1, config.subsystems[0].namespaces[0].qos, lifted}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->qos_changed, 1u);
  h.reactor.run();
  h.reactor.advance(std::chrono::milliseconds(1));
  EXPECT_EQ(io1->completions.size(), 4u);
  EXPECT_EQ(ns1_stats().qos.size(), 0u);
  EXPECT_EQ(h.reactor.timer_count(), 0u);
  EXPECT_TRUE(plan_changes(h.core().running_config(), limited_config(0)).empty());
}

}  // namespace
}  // namespace rdmablk::target::testing
