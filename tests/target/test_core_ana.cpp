// Target core: Asymmetric Namespace Access (Identify fields, the ANA log page per listener, I/O statuses, ANA
// Change events on reload and from the control path) and controller ID ranges.
#include "protocol/ana.h"
#include "target/core_test_util.h"

namespace rdmablk::target::testing {
namespace {

using p::AnaState;

// Two io listeners on 10.0.0.1 (4420: group 2 inaccessible; 4421: group 2 non-optimized) and the discovery
// listener; sub1's ns 2 is in group 2, ns 1 in the default group 1.
TargetConfig two_path_config() {
  auto c = test_config();
  c.listeners[0].address = "10.0.0.1";
  c.listeners[0].ana = {AnaGroupState{2, AnaState::inaccessible, {}}};
  ListenerConfig b = c.listeners[0];
  b.port = 4421;
  b.ana = {AnaGroupState{2, AnaState::non_optimized, {}}};
  c.listeners.push_back(b);
  c.subsystems[0].namespaces[1].ana_group = 2;
  return c;
}

std::vector<uint8_t> le32_bytes(uint32_t v) {
  return {static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v >> 16),
          static_cast<uint8_t>(v >> 24)};
}

// What the spec's Figures 226-227 say the log holds, written out byte by byte (not through make_ana_log).
struct ExpectedGroup {
  uint32_t id;
  uint8_t state;
  std::vector<uint32_t> nsids;
};
std::vector<uint8_t> expected_log(uint64_t chgcnt, const std::vector<ExpectedGroup>& groups, bool rgo = false) {
  std::vector<uint8_t> out(16, 0);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(chgcnt >> (8 * i));
  out[8] = static_cast<uint8_t>(groups.size());
  for (const auto& g : groups) {
    std::vector<uint8_t> d(32, 0);
    auto id = le32_bytes(g.id);
    std::copy(id.begin(), id.end(), d.begin());
    auto n = le32_bytes(rgo ? 0u : static_cast<uint32_t>(g.nsids.size()));
    std::copy(n.begin(), n.end(), d.begin() + 4);
    for (int i = 0; i < 8; ++i) d[8 + i] = static_cast<uint8_t>(chgcnt >> (8 * i));
    d[16] = g.state;
    out.insert(out.end(), d.begin(), d.end());
    if (rgo) continue;
    for (uint32_t nsid : g.nsids) {
      auto b = le32_bytes(nsid);
      out.insert(out.end(), b.begin(), b.end());
    }
  }
  return out;
}

class CoreAna : public ::testing::Test {
 protected:
  explicit CoreAna(TargetConfig config = two_path_config()) : h(std::move(config)) {}

  // The ANA log as the Linux host reads it: NSID FFFFFFFFh, 4 KiB from offset 0, LSP as given.
  std::vector<uint8_t> ana_log(FakeTargetQueue& admin, bool rgo = false, uint64_t offset = 0, uint32_t len = 4096,
                               bool rae = false) {
    auto cmd = p::make_get_log_page(h.next_cid(), p::LogPageId::ana, p::kNsidAll, offset, len,
                                    CoreHarness::sgl_for(admin, len), rae);
    if (rgo) cmd.set_lsp(p::kAnaLspRgo);
    auto c = h.run(admin, sqe_of(cmd));
    EXPECT_TRUE(c.status().ok()) << p::status_name(c.status());
    return c.data;
  }
  static std::vector<uint8_t> head(const std::vector<uint8_t>& v, std::size_t n) {
    return {v.begin(), v.begin() + static_cast<std::ptrdiff_t>(std::min(n, v.size()))};
  }
  // Admin + one I/O queue of a controller connected through `port`.
  struct Path {
    std::unique_ptr<FakeTargetQueue> admin, io;
    uint16_t cntlid = 0;
  };
  Path connect_path(uint16_t port) {
    Path path;
    path.admin = h.queue(transport::TransportType::tcp, "10.0.0.1", port);
    path.cntlid = h.bring_up(*path.admin);
    path.io = h.queue(transport::TransportType::tcp, "10.0.0.1", port);
    EXPECT_TRUE(h.connect(*path.io, 1, 127, kSub1, kHost1, path.cntlid).status().ok());
    return path;
  }

  CoreHarness h;
};

// The fields nvme_mpath_init_identify reads: CMIC bit 3, MNAN (non-zero, <= NN), ANACAP, ANATT, NANAGRPID,
// ANAGRPMAX, and the log size it derives (which must fit MDTS or the host turns ANA off).
TEST_F(CoreAna, IdentifyControllerReportsAnaAsTheLinuxHostNeedsIt) {
  auto a = connect_path(4420);
  const auto id = from_bytes<p::IdentifyController>(h.identify(*a.admin, p::Cns::controller, 0).data);
  EXPECT_EQ(id.cmic, p::idctl::kCmicMultiPort | p::idctl::kCmicMultiController | p::idctl::kCmicAna);
  EXPECT_NE(id.oaes.get() & p::idctl::kOaesAnaChange, 0u);
  EXPECT_EQ(id.anatt, 10);
  EXPECT_EQ(id.anacap, 0x1F);  // all five states, ANAGRPID may change (bit 6 clear), as nvmet
  EXPECT_EQ(id.anagrpmax.get(), 128u);
  EXPECT_EQ(id.nanagrpid.get(), 128u);
  EXPECT_GT(id.mnan.get(), 0u);
  EXPECT_LE(id.mnan.get(), id.nn.get());
  EXPECT_LE(p::ana_log_max_size(id.nanagrpid.get(), id.mnan.get()), (4096ull << id.mdts));
  // The Linux host enables AENs with OAES & its supported set: NS attribute + ANA change must be accepted.
  EXPECT_TRUE(h.set_feature(*a.admin, p::FeatureId::async_event_configuration,
                            p::kAecNamespaceAttribute | p::kAecAnaChange)
                  .status()
                  .ok());
}

TEST_F(CoreAna, IdentifyNamespaceReportsTheGroup) {
  auto a = connect_path(4420);
  EXPECT_EQ(from_bytes<p::IdentifyNamespace>(h.identify(*a.admin, p::Cns::namespace_, 1).data).anagrpid.get(), 1u);
  EXPECT_EQ(from_bytes<p::IdentifyNamespace>(h.identify(*a.admin, p::Cns::namespace_, 2).data).anagrpid.get(), 2u);
  // I/O Command Set Independent Identify Namespace: ANAGRPID at bytes 7:4 (Base 2.0 Figure 280).
  const auto ind = h.identify(*a.admin, p::Cns::io_independent_namespace, 2).data;
  EXPECT_EQ(std::vector<uint8_t>(ind.begin() + 4, ind.begin() + 8), le32_bytes(2));
}

TEST_F(CoreAna, LogPageReportsTheStatesOfTheAdminQueuesListener) {
  auto a = connect_path(4420);
  auto b = connect_path(4421);
  const auto log_a = ana_log(*a.admin);
  const auto log_b = ana_log(*b.admin);
  // Groups 1 and 2, ascending, each with its NSIDs; the rest of the 4 KiB transfer is zero.
  const auto want_a = expected_log(0, {{1, 0x01, {1}}, {2, 0x03, {2}}});
  const auto want_b = expected_log(0, {{1, 0x01, {1}}, {2, 0x02, {2}}});
  EXPECT_EQ(head(log_a, want_a.size()), want_a);
  EXPECT_EQ(head(log_b, want_b.size()), want_b);
  EXPECT_TRUE(std::all_of(log_a.begin() + static_cast<std::ptrdiff_t>(want_a.size()), log_a.end(),
                          [](uint8_t x) { return x == 0; }));
}

TEST_F(CoreAna, ReturnGroupsOnlyOmitsTheNsidLists) {
  auto a = connect_path(4420);
  const auto want = expected_log(0, {{1, 0x01, {1}}, {2, 0x03, {2}}}, /*rgo=*/true);
  EXPECT_EQ(head(ana_log(*a.admin, /*rgo=*/true), want.size()), want);
  EXPECT_EQ(want.size(), 16u + 2 * 32u);
}

TEST_F(CoreAna, PartialReadsAtAnOffset) {
  auto a = connect_path(4420);
  const auto whole = expected_log(0, {{1, 0x01, {1}}, {2, 0x03, {2}}});
  const auto part = ana_log(*a.admin, false, 16, 36);  // the first descriptor and its NSID
  EXPECT_EQ(part, std::vector<uint8_t>(whole.begin() + 16, whole.begin() + 52));
  // Beyond the end of the log: Invalid Field, as the other log pages.
  auto cmd = p::make_get_log_page(h.next_cid(), p::LogPageId::ana, p::kNsidAll, 4096, 4,
                                  CoreHarness::sgl_for(*a.admin, 4), false);
  EXPECT_EQ(h.run(*a.admin, sqe_of(cmd)).status(), st::invalid_field);
}

TEST_F(CoreAna, IoIsRefusedThroughAPathWhereTheGroupIsInaccessible) {
  auto a = connect_path(4420);
  auto b = connect_path(4421);
  const auto data = pattern(4096, 3);
  auto refused = h.write(*a.io, 2, 0, 1, data);
  EXPECT_EQ(refused.status(), st::ana_inaccessible);
  EXPECT_FALSE(refused.status().dnr());  // the host fails over and retries on another path
  EXPECT_EQ(h.read(*a.io, 2, 0, 1, 4096).status(), st::ana_inaccessible);
  // The same namespace through the other listener, and group 1 through this one, work.
  ASSERT_TRUE(h.write(*b.io, 2, 0, 1, data).status().ok());
  EXPECT_EQ(h.read(*b.io, 2, 0, 1, 4096).data, data);
  EXPECT_TRUE(h.write(*a.io, 1, 0, 1, pattern(512, 1)).status().ok());
}

TEST_F(CoreAna, EveryStateGivesItsStatus) {
  auto a = connect_path(4420);
  const std::vector<std::pair<AnaState, p::Status>> cases = {
      {AnaState::optimized, st::success},
      {AnaState::non_optimized, st::success},
      {AnaState::inaccessible, st::ana_inaccessible},
      {AnaState::persistent_loss, st::ana_persistent_loss},
      {AnaState::change, st::ana_transition},
  };
  for (const auto& [state, status] : cases) {
    ASSERT_TRUE(h.core().set_ana_state("10.0.0.1:4420", 2, state));
    EXPECT_EQ(h.read(*a.io, 2, 0, 1, 4096).status(), status) << p::ana_state_name(state);
    EXPECT_EQ(h.write(*a.io, 2, 0, 1, pattern(4096, 9)).status(), status) << p::ana_state_name(state);
    const auto log = ana_log(*a.admin);
    EXPECT_EQ(log[16 + 32 + 4 + 16], static_cast<uint8_t>(state));  // group 2's ANAS
  }
}

TEST_F(CoreAna, AWriteWhoseGroupBecomesInaccessibleWhileItsDataMovesFails) {
  auto b = connect_path(4421);
  b.io->hold_fetches = true;
  const uint16_t cid = h.next_cid();
  b.io->submit(sqe_of(p::make_write(cid, 2, 0, 1, CoreHarness::sgl_for(*b.io, 4096))), pattern(4096, 5));
  h.reactor.run();
  ASSERT_FALSE(b.io->result(cid).has_value());
  ASSERT_TRUE(h.core().set_ana_state("10.0.0.1:4421", 2, AnaState::inaccessible));
  b.io->deliver_held_fetches();
  h.reactor.run();
  ASSERT_TRUE(b.io->result(cid).has_value());
  EXPECT_EQ(b.io->result(cid)->status(), st::ana_inaccessible);
}

TEST_F(CoreAna, ReloadChangingAStateSendsAnaChangeAndBumpsTheChangeCount) {
  auto a = connect_path(4420);
  auto b = connect_path(4421);
  for (auto* q : {a.admin.get(), b.admin.get()})
    ASSERT_TRUE(h.set_feature(*q, p::FeatureId::async_event_configuration, p::kAecNamespaceAttribute | p::kAecAnaChange)
                    .status()
                    .ok());
  const uint16_t aer_a = h.post_aer(*a.admin);
  const uint16_t aer_b = h.post_aer(*b.admin);
  auto config = two_path_config();
  config.listeners[0].ana = {AnaGroupState{2, AnaState::optimized, {}}};  // 4420: group 2 back
  auto r = h.core().reload(config);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->ana_changes, 1u);
  EXPECT_EQ(r->namespaces_changed + r->namespaces_added + r->namespaces_removed, 0u);
  h.reactor.run();
  ASSERT_TRUE(a.admin->result(aer_a).has_value());
  EXPECT_EQ(a.admin->result(aer_a)->dw0(), 0x000C0302u);  // notice, ANA change, LID 0Ch
  EXPECT_FALSE(b.admin->result(aer_b).has_value());        // nothing changed on 4421
  EXPECT_EQ(h.core().ana_change_count(), 1u);
  const auto want = expected_log(1, {{1, 0x01, {1}}, {2, 0x01, {2}}});
  EXPECT_EQ(head(ana_log(*a.admin, false, 0, 4096, /*rae=*/true), want.size()), want);
  EXPECT_TRUE(h.write(*a.io, 2, 0, 1, pattern(4096, 1)).status().ok());

  // Read with RAE: still masked, so another change bumps the count but sends nothing.
  const uint16_t aer_a2 = h.post_aer(*a.admin);
  config.listeners[0].ana = {AnaGroupState{2, AnaState::change, {}}};
  ASSERT_TRUE(h.core().reload(config));
  h.reactor.run();
  EXPECT_FALSE(a.admin->result(aer_a2).has_value());
  EXPECT_EQ(h.core().ana_change_count(), 2u);
  // Read without RAE: unmasked; the next change is reported.
  EXPECT_EQ(ana_log(*a.admin)[0], 2);
  config.listeners[0].ana = {AnaGroupState{2, AnaState::inaccessible, {}}};
  ASSERT_TRUE(h.core().reload(config));
  h.reactor.run();
  ASSERT_TRUE(a.admin->result(aer_a2).has_value());
  EXPECT_EQ(a.admin->result(aer_a2)->dw0(), p::kAnaChangeEvent);
  // A reload that changes nothing ANA does not count.
  ASSERT_TRUE(h.core().reload(config));
  EXPECT_EQ(h.core().ana_change_count(), 3u);
}

TEST_F(CoreAna, ANewListenerIsNoAnaChange) {
  auto a = connect_path(4420);
  auto config = two_path_config();
  ListenerConfig c = config.listeners.back();
  c.port = 4422;
  c.ana = {AnaGroupState{1, AnaState::inaccessible, {}}};
  config.listeners.push_back(c);
  auto r = h.core().reload(config);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->ana_changes, 0u);
  EXPECT_EQ(h.core().ana_change_count(), 0u);
  // Its states apply to queues that come in on it.
  auto q = h.queue(transport::TransportType::tcp, "10.0.0.1", 4422);
  ASSERT_TRUE(h.connect(*q, 2, 127, kSub1, kHost1, a.cntlid).status().ok());  // I/O queue 2, another listener
  EXPECT_EQ(h.read(*q, 1, 0, 1, 512).status(), st::ana_inaccessible);
  EXPECT_TRUE(h.read(*a.io, 1, 0, 1, 512).status().ok());
}

TEST_F(CoreAna, NoAnaEventWithoutTheAecBit) {
  auto a = connect_path(4420);
  ASSERT_TRUE(h.set_feature(*a.admin, p::FeatureId::async_event_configuration, p::kAecNamespaceAttribute).status().ok());
  const uint16_t aer = h.post_aer(*a.admin);
  ASSERT_TRUE(h.core().set_ana_state("10.0.0.1:4420", 1, AnaState::non_optimized));
  h.reactor.run();
  EXPECT_FALSE(a.admin->result(aer).has_value());
  EXPECT_EQ(ana_log(*a.admin)[16 + 16], 0x02);  // but the log says it
}

TEST_F(CoreAna, ReloadMovingANamespaceKeepsItsDataAndSendsAnaChangeNotNamespaceChanged) {
  auto b = connect_path(4421);
  ASSERT_TRUE(h.set_feature(*b.admin, p::FeatureId::async_event_configuration, p::kAecNamespaceAttribute | p::kAecAnaChange)
                  .status()
                  .ok());
  const auto data = pattern(512, 77);
  ASSERT_TRUE(h.write(*b.io, 1, 10, 1, data).status().ok());
  const uint16_t aer = h.post_aer(*b.admin);
  auto config = two_path_config();
  config.subsystems[0].namespaces[0].ana_group = 2;  // ns 1: group 1 -> 2
  auto r = h.core().reload(config);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->ana_changes, 1u);
  EXPECT_EQ(r->namespaces_changed, 0u);
  h.reactor.run();
  ASSERT_TRUE(b.admin->result(aer).has_value());
  EXPECT_EQ(b.admin->result(aer)->dw0(), p::kAnaChangeEvent);
  EXPECT_EQ(from_bytes<p::IdentifyNamespace>(h.identify(*b.admin, p::Cns::namespace_, 1).data).anagrpid.get(), 2u);
  const auto want = expected_log(1, {{1, 0x01, {}}, {2, 0x02, {1, 2}}});  // group 1 stays (the default group)
  EXPECT_EQ(head(ana_log(*b.admin), want.size()), want);
  EXPECT_EQ(h.read(*b.io, 1, 10, 1, 512).data, data);  // the same backend
  // The control socket's namespaces verb shows the group.
  TargetStatus status;
  h.core().fill_status(status);
  bool seen = false;
  for (const auto& sub : status.subsystems) {
    for (const auto& ns : sub.namespaces) {
      if (sub.nqn != kSub1 || ns.nsid != 1) continue;
      EXPECT_EQ(ns.ana_group, 2u);
      seen = true;
    }
  }
  EXPECT_TRUE(seen);
}

TEST_F(CoreAna, ControlPathSetsAStateOnOneListener) {
  auto a = connect_path(4420);
  auto b = connect_path(4421);
  for (auto* q : {a.admin.get(), b.admin.get()})
    ASSERT_TRUE(h.set_feature(*q, p::FeatureId::async_event_configuration, p::kAecAnaChange).status().ok());
  const uint16_t aer_a = h.post_aer(*a.admin);
  const uint16_t aer_b = h.post_aer(*b.admin);
  auto r = h.core().set_ana_state("10.0.0.1:4421", 2, AnaState::inaccessible);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(*r);
  h.reactor.run();
  EXPECT_FALSE(a.admin->result(aer_a).has_value());
  ASSERT_TRUE(b.admin->result(aer_b).has_value());
  EXPECT_EQ(h.read(*b.io, 2, 0, 1, 4096).status(), st::ana_inaccessible);
  EXPECT_EQ(h.core().ana_change_count(), 1u);
  // The same state again: nothing changes.
  r = h.core().set_ana_state("10.0.0.1:4421", 2, AnaState::inaccessible);
  ASSERT_TRUE(r);
  EXPECT_FALSE(*r);
  EXPECT_EQ(h.core().ana_change_count(), 1u);
  // Errors.
  EXPECT_FALSE(h.core().set_ana_state("10.0.0.1:4999", 2, AnaState::optimized));
  EXPECT_FALSE(h.core().set_ana_state("10.0.0.1:8009", 1, AnaState::optimized));  // a discovery listener
  EXPECT_FALSE(h.core().set_ana_state("10.0.0.1:4421", 0, AnaState::optimized));
  EXPECT_FALSE(h.core().set_ana_state("10.0.0.1:4421", 129, AnaState::optimized));
  EXPECT_FALSE(h.core().set_ana_state("10.0.0.1", 1, AnaState::optimized));
}

// --- controller ID ranges ------------------------------------------------------------------------------

TEST(CoreCntlid, ControllersTakeIdsFromTheSubsystemsRangeOnly) {
  auto config = test_config();
  config.subsystems[0].cntlid_min = 10;
  config.subsystems[0].cntlid_max = 12;
  CoreHarness h(config);
  std::vector<std::unique_ptr<FakeTargetQueue>> admins;
  std::vector<uint16_t> ids;
  for (int i = 0; i < 3; ++i) {
    admins.push_back(h.queue());
    auto c = h.connect(*admins.back(), 0, 31, kSub1, kHost1);
    ASSERT_TRUE(c.status().ok()) << p::status_name(c.status());
    ids.push_back(p::connect_result_cntlid(c.dw0()));
  }
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<uint16_t>{10, 11, 12}));
  // Exhausted: the Connect error of a full controller table.
  auto extra = h.queue();
  EXPECT_EQ(h.connect(*extra, 0, 31, kSub1, kHost1).status(), st::connect_controller_busy);
  // Another subsystem (whole range) and the discovery controller are not limited by it.
  auto other = h.queue();
  auto c2 = h.connect(*other, 0, 31, kSub2, kHost1);
  ASSERT_TRUE(c2.status().ok());
  const uint16_t other_id = p::connect_result_cntlid(c2.dw0());
  EXPECT_TRUE(other_id < 10 || other_id > 12);
  // One goes away: its ID is free again.
  admins[1]->close("test");
  h.reactor.run();
  auto again = h.queue();
  auto c3 = h.connect(*again, 0, 31, kSub1, kHost1);
  ASSERT_TRUE(c3.status().ok());
  const uint16_t id3 = p::connect_result_cntlid(c3.dw0());
  EXPECT_GE(id3, 10);
  EXPECT_LE(id3, 12);
  // Identify reports it.
  ASSERT_TRUE(h.enable(*again).status().ok());
  EXPECT_EQ(from_bytes<p::IdentifyController>(h.identify(*again, p::Cns::controller, 0).data).cntlid.get(), id3);
}

TEST(CoreCntlid, ReloadChangesTheRangeForNewControllers) {
  auto config = test_config();
  config.subsystems[0].cntlid_min = 100;
  config.subsystems[0].cntlid_max = 100;
  CoreHarness h(config);
  auto a = h.queue();
  auto c = h.connect(*a, 0, 31, kSub1, kHost1);
  ASSERT_TRUE(c.status().ok());
  EXPECT_EQ(p::connect_result_cntlid(c.dw0()), 100);
  config.subsystems[0].cntlid_min = 200;
  config.subsystems[0].cntlid_max = 201;
  ASSERT_TRUE(h.core().reload(config));
  auto b = h.queue();
  auto c2 = h.connect(*b, 0, 31, kSub1, kHost1);
  ASSERT_TRUE(c2.status().ok());
  EXPECT_EQ(p::connect_result_cntlid(c2.dw0()), 200);
  EXPECT_EQ(h.core().controller_count(), 2u);  // the existing controller keeps its ID
}

}  // namespace
}  // namespace rdmablk::target::testing
