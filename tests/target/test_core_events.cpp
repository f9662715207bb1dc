// Target core: asynchronous events and configuration reload (SIGHUP).
#include "target/core_test_util.h"

namespace rdmablk::target::testing {
namespace {

const uint32_t kNsChangedEvent = p::async_event_result(p::AsyncEventType::notice, 0, 0x04);

class CoreEvents : public ::testing::Test {
 protected:
  void SetUp() override {
    cntlid = h.bring_up(*admin);
    io = h.io_queue(cntlid, 1);
  }
  TargetConfig with_ns3() {
    auto c = test_config();
    c.subsystems[0].namespaces.push_back(ram_ns(kSub1, 3, 2 << 20));
    return c;
  }
  std::vector<uint32_t> changed_list(bool rae = false) {
    auto c = h.get_log(*admin, p::LogPageId::changed_namespace_list, 0, 4096, rae);
    EXPECT_TRUE(c.status().ok());
    const auto log = from_bytes<p::ChangedNamespaceList>(c.data);
    std::vector<uint32_t> out;
    for (const auto& n : log.nsid)
      if (n.get() != 0) out.push_back(n.get());
    return out;
  }
  CoreHarness h;
  std::unique_ptr<FakeTargetQueue> admin = h.queue();
  std::unique_ptr<FakeTargetQueue> io;
  uint16_t cntlid = 0;
};

TEST_F(CoreEvents, AerLimitIsFour) {
  std::vector<uint16_t> held;
  for (int i = 0; i < 4; ++i) held.push_back(h.post_aer(*admin));
  for (uint16_t cid : held) EXPECT_FALSE(admin->result(cid).has_value());
  const uint16_t extra = h.post_aer(*admin);
  auto c = admin->result(extra);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->status(), st::async_event_request_limit_exceeded);
}

TEST_F(CoreEvents, NamespaceAddedByReloadCompletesTheAerAndIsUsable) {
  ASSERT_TRUE(h.set_feature(*admin, p::FeatureId::async_event_configuration, p::kAecNamespaceAttribute).status().ok());
  const uint16_t aer = h.post_aer(*admin);
  auto r = h.core().reload(with_ns3());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->namespaces_added, 1u);
  h.reactor.run();
  auto ev = admin->result(aer);
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->dw0(), kNsChangedEvent);
  // What the Linux host does next: the changed list, the active list, Identify, I/O.
  EXPECT_EQ(changed_list(), std::vector<uint32_t>{3});
  EXPECT_TRUE(changed_list().empty());  // cleared by the read (RAE = 0)
  auto list = from_bytes<p::NamespaceList>(h.identify(*admin, p::Cns::active_namespace_list, 0).data);
  EXPECT_EQ(list.nsid[2].get(), 3u);
  const auto ns = from_bytes<p::IdentifyNamespace>(h.identify(*admin, p::Cns::namespace_, 3).data);
  EXPECT_EQ(ns.nsze.get(), (2u << 20) / 512);
  const auto data = pattern(4096, 42);
  ASSERT_TRUE(h.write(*io, 3, 4000, 8, data).status().ok());
  EXPECT_EQ(h.read(*io, 3, 4000, 8, 4096).data, data);
  // Data on the untouched namespace survived the reload.
  ASSERT_TRUE(h.write(*io, 1, 0, 1, pattern(512, 1)).status().ok());
  EXPECT_EQ(h.read(*io, 1, 0, 1, 512).data, pattern(512, 1));
}

// An AER that reaches the core after a reload queued its event but before every reactor applied the new
// tables waits for them: the host must not learn of the change while an I/O queue can still reach the old
// namespace set.
TEST_F(CoreEvents, AerArrivingBeforeTheReactorsHaveTheNewTablesWaitsForThem) {
  ASSERT_TRUE(h.set_feature(*admin, p::FeatureId::async_event_configuration, p::kAecNamespaceAttribute).status().ok());
  auto r = h.core().reload(with_ns3());
  ASSERT_TRUE(r) << r.error().message;
  const uint16_t aer = h.next_cid();
  admin->submit(p::make_async_event_request(aer));  // the table updates are still posted, not run
  EXPECT_FALSE(admin->result(aer).has_value()) << "the event went out before the reactors had the new tables";
  h.reactor.run();
  auto ev = admin->result(aer);
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->dw0(), kNsChangedEvent);
  EXPECT_EQ(changed_list(), std::vector<uint32_t>{3});
}

TEST_F(CoreEvents, EventsAreFoldedUntilTheLogIsRead) {
  ASSERT_TRUE(h.set_feature(*admin, p::FeatureId::async_event_configuration, p::kAecNamespaceAttribute).status().ok());
  const uint16_t aer1 = h.post_aer(*admin);
  ASSERT_TRUE(h.core().reload(with_ns3()));
  h.reactor.run();
  ASSERT_TRUE(admin->result(aer1).has_value());
  const uint16_t aer2 = h.post_aer(*admin);
  ASSERT_TRUE(h.core().reload(test_config()));  // ns 3 removed again before the host read the log
  h.reactor.run();
  EXPECT_FALSE(admin->result(aer2).has_value());  // masked: no second event
  EXPECT_EQ(changed_list(/*rae=*/true), std::vector<uint32_t>{3});  // RAE keeps the event masked
  ASSERT_TRUE(h.core().reload(with_ns3()));
  h.reactor.run();
  EXPECT_FALSE(admin->result(aer2).has_value());
  EXPECT_EQ(changed_list(), std::vector<uint32_t>{3});  // read: unmasked
  ASSERT_TRUE(h.core().reload(test_config()));
  h.reactor.run();
  ASSERT_TRUE(admin->result(aer2).has_value());
  EXPECT_EQ(admin->result(aer2)->dw0(), kNsChangedEvent);
}

TEST_F(CoreEvents, NoEventWithoutAecButTheListIsKept) {
  const uint16_t aer = h.post_aer(*admin);
  ASSERT_TRUE(h.core().reload(with_ns3()));
  h.reactor.run();
  EXPECT_FALSE(admin->result(aer).has_value());
  EXPECT_EQ(changed_list(), std::vector<uint32_t>{3});
}

TEST_F(CoreEvents, RemovedNamespaceBecomesInvalidAndReplacedNamespaceIsFresh) {
  ASSERT_TRUE(h.write(*io, 2, 0, 1, pattern(4096, 7)).status().ok());
  auto config = test_config();
  config.subsystems[0].namespaces.pop_back();  // ns 2 removed
  auto r = h.core().reload(config);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->namespaces_removed, 1u);
  h.reactor.run();
  EXPECT_EQ(h.read(*io, 2, 0, 1, 4096).status(), st::invalid_namespace);
  auto zeroes = from_bytes<p::IdentifyNamespace>(h.identify(*admin, p::Cns::namespace_, 2).data);
  EXPECT_EQ(zeroes.ncap.get(), 0u);
  // Back, with another size: a new backend.
  config.subsystems[0].namespaces.push_back(ram_ns(kSub1, 2, 2 << 20, 4096));
  ASSERT_TRUE(h.core().reload(config));
  h.reactor.run();
  auto r2 = h.read(*io, 2, 0, 1, 4096);
  ASSERT_TRUE(r2.status().ok());
  EXPECT_TRUE(std::all_of(r2.data.begin(), r2.data.end(), [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(h.read(*io, 2, 511, 1, 4096).status().ok(), true);
}

TEST_F(CoreEvents, ReloadDropsHostsNoLongerAllowedAndKeepsTheOthers) {
  auto admin2 = h.queue();
  const uint16_t c2 = h.bring_up(*admin2, kSub2, kHost1);
  auto io2 = h.io_queue(c2, 1, kSub2, kHost1);
  auto config = test_config();
  config.subsystems[1].hosts = {kHost2};
  auto r = h.core().reload(config);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->controllers_dropped, 1u);
  h.reactor.run();
  EXPECT_TRUE(admin2->closed);
  EXPECT_TRUE(io2->closed);
  EXPECT_EQ(admin2->close_reason, "host no longer allowed");
  // The sub1 controller is untouched.
  EXPECT_FALSE(admin->closed);
  EXPECT_TRUE(h.read(*io, 1, 0, 1, 512).status().ok());
  // And host1 can no longer connect to sub2.
  auto again = h.queue();
  EXPECT_EQ(h.connect(*again, 0, 31, kSub2, kHost1).status(), st::connect_invalid_host);
}

TEST_F(CoreEvents, ReloadAddsAndRemovesSubsystems) {
  auto config = test_config();
  config.subsystems.erase(config.subsystems.begin());  // sub1 (ours) goes away
  SubsystemConfig s3;
  s3.nqn = "nqn.2024-01.io.rdmablk:new";
  s3.allow_any_host = true;
  s3.namespaces = {ram_ns(s3.nqn, 1, 1 << 20, 512, false, BackendKind::null)};
  config.subsystems.push_back(s3);
  auto r = h.core().reload(config);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->subsystems_added, 1u);
  EXPECT_EQ(r->subsystems_removed, 1u);
  h.reactor.run();
  EXPECT_TRUE(admin->closed);
  EXPECT_EQ(admin->close_reason, "subsystem removed");
  auto q = h.queue();
  auto io3 = h.io_queue(h.bring_up(*q, s3.nqn, kHost2), 1, s3.nqn, kHost2);
  EXPECT_TRUE(h.write(*io3, 1, 0, 1, pattern(512, 1)).status().ok());
  EXPECT_TRUE(h.read(*io3, 1, 0, 1, 512).status().ok());
}

TEST_F(CoreEvents, FailedReloadChangesNothing) {
  auto config = with_ns3();
  config.subsystems[0].namespaces.back().size = 1000;  // not a multiple of the block size
  auto r = h.core().reload(config);
  EXPECT_FALSE(r);
  EXPECT_EQ(h.identify(*admin, p::Cns::namespace_, 3).data[8], 0);  // NCAP 0: not there
  EXPECT_TRUE(changed_list().empty());
}

}  // namespace
}  // namespace rdmablk::target::testing
