// Target core: the reservation commands as two hosts see them through the core (commands/reservations.cpp):
// access from holder, registrant and non-registrant, registrations shared by the controllers of one host,
// notices (AEN, log page 80h, the mask feature), Preempt and Abort waiting out the preempted host's writes,
// persistence through a restart (feature 83h, CPTPL), Identify and the command table, and bad input. The
// rules themselves are the model's, tested in test_reservation_model.cpp.
#include <cstring>

#include "protocol/identify.h"
#include "protocol/reservation.h"
#include "support/temp_dir.h"
#include "target/core_test_util.h"
#include "target/gated_backend.h"

namespace rdmablk::target::testing {
namespace {

using RT = p::ReservationType;

std::vector<uint8_t> keys(uint64_t a, uint64_t b = 0) {
  std::vector<uint8_t> out(16);
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<uint8_t>(a >> (8 * i));
    out[8 + i] = static_cast<uint8_t>(b >> (8 * i));
  }
  return out;
}

p::Sqe io_sqe(p::IoOpcode op, uint16_t cid, uint32_t nsid, uint32_t cdw10, uint32_t len) {
  p::ReservationRegisterCommand c{};
  c.hdr = p::make_header(static_cast<uint8_t>(op), cid, nsid);
  c.hdr.dptr = p::make_transport_sgl(len);
  c.cdw10.set(cdw10);
  return p::to_sqe(c);
}

// CDW10 of Register: RREGA, IEKEY, CPTPL; of Acquire/Release: action, IEKEY, RTYPE.
uint32_t reg10(uint8_t action, bool iekey = false, uint8_t cptpl = 0) {
  return action | (iekey ? 1u << 3 : 0u) | uint32_t{cptpl} << 30;
}
uint32_t acq10(uint8_t action, RT t, bool iekey = false) {
  return action | (iekey ? 1u << 3 : 0u) | uint32_t{static_cast<uint8_t>(t)} << 8;
}

struct Report {
  uint32_t gen = 0;
  uint8_t rtype = 0;
  uint16_t registrants = 0;
  uint8_t ptpls = 0;
  std::vector<p::RegisteredControllerExt> entries;
};

// Two hosts on sub1 namespace 1: A (kHost1, two controllers) and B (kHost2).
class CoreReservations : public ::testing::Test {
 protected:
  explicit CoreReservations(TargetConfig config = test_config()) : h(std::move(config)) {}
  void SetUp() override {
    ctrl_a = h.bring_up(*admin_a, kSub1, kHost1, 0, kHostId1);
    ctrl_a2 = h.bring_up(*admin_a2, kSub1, kHost1, 0, kHostId1);
    ctrl_b = h.bring_up(*admin_b, kSub1, kHost2, 0, kHostId2);
    io_a = h.io_queue(ctrl_a, 1, kSub1, kHost1, kHostId1);
    io_a2 = h.io_queue(ctrl_a2, 1, kSub1, kHost1, kHostId1);
    io_b = h.io_queue(ctrl_b, 1, kSub1, kHost2, kHostId2);
  }
  p::Status run(FakeTargetQueue& q, p::IoOpcode op, uint32_t cdw10, std::vector<uint8_t> data, uint32_t nsid = 1) {
    const auto len = static_cast<uint32_t>(data.size());
    return h.run(q, io_sqe(op, h.next_cid(), nsid, cdw10, len), std::move(data)).status();
  }
  p::Status reg(FakeTargetQueue& q, uint64_t nrkey, uint8_t cptpl = 0) {
    return run(q, p::IoOpcode::reservation_register, reg10(0, false, cptpl), keys(0, nrkey));
  }
  p::Status acquire(FakeTargetQueue& q, uint64_t crkey, RT t) {
    return run(q, p::IoOpcode::reservation_acquire, acq10(0, t), keys(crkey));
  }
  p::Status preempt(FakeTargetQueue& q, uint64_t crkey, uint64_t prkey, RT t, bool abort = false) {
    return run(q, p::IoOpcode::reservation_acquire, acq10(abort ? 2 : 1, t), keys(crkey, prkey));
  }
  p::Status release(FakeTargetQueue& q, uint64_t crkey, RT t, uint8_t action = 0) {
    return run(q, p::IoOpcode::reservation_release, acq10(action, t), keys(crkey));
  }
  Report report(FakeTargetQueue& q, uint32_t bytes = 4096) {
    auto sqe = io_sqe(p::IoOpcode::reservation_report, h.next_cid(), 1, bytes / 4 - 1, bytes);
    sqe.cdw11.set(1);  // EDS
    auto c = h.run(q, sqe);
    EXPECT_TRUE(c.status().ok()) << p::status_name(c.status());
    Report r;
    if (c.data.size() < sizeof(p::ReservationStatusExtHeader)) return r;
    const auto hdr = from_bytes<p::ReservationStatusExtHeader>(c.data);
    r.gen = hdr.h.gen.get();
    r.rtype = hdr.h.rtype;
    r.registrants = static_cast<uint16_t>(hdr.h.regctl[0] | hdr.h.regctl[1] << 8);
    r.ptpls = hdr.h.ptpls;
    for (std::size_t i = 0; i < r.registrants; ++i) {
      const std::size_t at = sizeof(hdr) + i * sizeof(p::RegisteredControllerExt);
      if (at + sizeof(p::RegisteredControllerExt) > c.data.size()) break;
      r.entries.push_back(from_bytes<p::RegisteredControllerExt>(c.data, at));
    }
    return r;
  }
  p::Status write(FakeTargetQueue& q) { return h.write(q, 1, 8, 1, pattern(512, 3)).status(); }
  p::Status read(FakeTargetQueue& q) { return h.read(q, 1, 8, 1, 512).status(); }

  CoreHarness h;
  std::unique_ptr<FakeTargetQueue> admin_a = h.queue(), admin_a2 = h.queue(), admin_b = h.queue();
  std::unique_ptr<FakeTargetQueue> io_a, io_a2, io_b;
  uint16_t ctrl_a = 0, ctrl_a2 = 0, ctrl_b = 0;
};

TEST_F(CoreReservations, IdentifyAndTheEffectsLogAnnounceThem) {
  auto ctrl = from_bytes<p::IdentifyController>(h.identify(*admin_a, p::Cns::controller, 0).data);
  EXPECT_NE(ctrl.oncs.get() & p::idctl::kOncsReservations, 0);
  auto ns = from_bytes<p::IdentifyNamespace>(h.identify(*admin_a, p::Cns::namespace_, 1).data);
  // Every type and IEKEY; no PTPL without a state directory.
  EXPECT_EQ(ns.rescap, p::rescap::kAll & ~p::rescap::kPersistThroughPowerLoss);
  EXPECT_NE(ns.nmic & p::idns::kNmicShared, 0);
  auto log = from_bytes<p::CommandEffectsLog>(
      h.get_log(*admin_a, p::LogPageId::commands_supported_effects, 0, sizeof(p::CommandEffectsLog)).data);
  for (auto op : {p::IoOpcode::reservation_register, p::IoOpcode::reservation_report, p::IoOpcode::reservation_acquire,
                  p::IoOpcode::reservation_release})
    EXPECT_NE(log.iocs[static_cast<uint8_t>(op)].get() & p::effects::kCsupp, 0) << static_cast<int>(op);
}

TEST_F(CoreReservations, WriteExclusiveLetsOthersReadNotWrite) {
  ASSERT_TRUE(reg(*io_a, 0xA).ok());
  ASSERT_TRUE(reg(*io_b, 0xB).ok());
  ASSERT_TRUE(acquire(*io_a, 0xA, RT::write_exclusive).ok());
  EXPECT_TRUE(write(*io_a).ok());
  EXPECT_TRUE(write(*io_a2).ok()) << "a second controller of the holder's host holds it too";
  EXPECT_TRUE(write(*io_b).is(p::status::reservation_conflict));
  EXPECT_TRUE(read(*io_b).ok());
  // Flush is in the write group, Compare in the read group.
  EXPECT_TRUE(h.run(*io_b, p::make_flush(h.next_cid(), 1)).status().is(p::status::reservation_conflict));
  const Report r = report(*io_b);
  EXPECT_EQ(r.gen, 2u);  // two Registers; Acquire does not count
  EXPECT_EQ(r.rtype, static_cast<uint8_t>(RT::write_exclusive));
  ASSERT_EQ(r.entries.size(), 2u);
  EXPECT_EQ(r.entries[0].hostid, kHostId1);
  EXPECT_EQ(r.entries[0].rcsts, p::kRcstsHoldsReservation);
  EXPECT_EQ(r.entries[0].cntlid.get(), std::min(ctrl_a, ctrl_a2));
  EXPECT_EQ(r.entries[1].hostid, kHostId2);
  EXPECT_EQ(r.entries[1].rcsts, 0);
  EXPECT_EQ(r.entries[1].rkey.get(), 0xBu);
}

TEST_F(CoreReservations, ExclusiveAccessKeepsEveryoneElseOut) {
  ASSERT_TRUE(reg(*io_a, 0xA).ok());
  ASSERT_TRUE(acquire(*io_a, 0xA, RT::exclusive_access).ok());
  EXPECT_TRUE(read(*io_b).is(p::status::reservation_conflict));
  EXPECT_TRUE(write(*io_b).is(p::status::reservation_conflict));
  EXPECT_TRUE(read(*io_a).ok());
  ASSERT_TRUE(release(*io_a, 0xA, RT::exclusive_access).ok());
  EXPECT_TRUE(write(*io_b).ok()) << "no reservation: every host may write";
}

TEST_F(CoreReservations, RegistrantsOnlyTypesLetRegistrantsWrite) {
  ASSERT_TRUE(reg(*io_a, 0xA).ok());
  ASSERT_TRUE(acquire(*io_a, 0xA, RT::write_exclusive_registrants_only).ok());
  EXPECT_TRUE(write(*io_b).is(p::status::reservation_conflict));
  ASSERT_TRUE(reg(*io_b, 0xB).ok());
  EXPECT_TRUE(write(*io_b).ok());
}

TEST_F(CoreReservations, PreemptMovesTheReservationAndNotifiesTheLoser) {
  ASSERT_TRUE(reg(*io_a, 0xA).ok());
  ASSERT_TRUE(reg(*io_b, 0xB).ok());
  ASSERT_TRUE(acquire(*io_a, 0xA, RT::write_exclusive).ok());
  const uint16_t aer_a = h.post_aer(*admin_a), aer_b = h.post_aer(*admin_b);
  ASSERT_TRUE(preempt(*io_b, 0xB, 0xA, RT::exclusive_access).ok());
  h.reactor.run();
  // A (both its controllers) lost its registration: an AEN for the reservation log page.
  ASSERT_TRUE(admin_a->result(aer_a));
  const uint32_t dw0 = admin_a->result(aer_a)->dw0();
  EXPECT_EQ(p::async_event_type(dw0), p::AsyncEventType::io_command_specific);
  EXPECT_EQ(p::async_event_lid(dw0), static_cast<uint8_t>(p::LogPageId::reservation_notification));
  EXPECT_FALSE(admin_b->result(aer_b)) << "the preempting host gets no notice";
  auto log = from_bytes<p::ReservationNotificationLog>(
      h.get_log(*admin_a, p::LogPageId::reservation_notification, 0, 64).data);
  EXPECT_EQ(log.type, static_cast<uint8_t>(p::ReservationNotice::registration_preempted));
  EXPECT_EQ(log.nsid.get(), 1u);
  EXPECT_EQ(log.count.get(), 1u);
  EXPECT_EQ(log.available, 0);
  auto empty = from_bytes<p::ReservationNotificationLog>(
      h.get_log(*admin_a, p::LogPageId::reservation_notification, 0, 64).data);
  EXPECT_EQ(empty.type, 0) << "one notice, read once";
  EXPECT_TRUE(write(*io_a).is(p::status::reservation_conflict));
  EXPECT_TRUE(read(*io_a).is(p::status::reservation_conflict));
  EXPECT_TRUE(write(*io_b).ok());
}

TEST_F(CoreReservations, TheMaskFeatureSilencesNotices) {
  ASSERT_TRUE(reg(*io_a, 0xA).ok());
  ASSERT_TRUE(reg(*io_b, 0xB).ok());
  ASSERT_TRUE(acquire(*io_a, 0xA, RT::write_exclusive).ok());
  auto set = sqe_of(p::make_set_features(h.next_cid(), p::FeatureId::reservation_notification_mask,
                                         p::resv_mask::kRegistrationPreempted));
  set.hdr.nsid.set(p::kNsidAll);
  ASSERT_TRUE(h.run(*admin_a, set).status().ok());
  auto get = sqe_of(p::make_get_features(h.next_cid(), p::FeatureId::reservation_notification_mask));
  get.hdr.nsid.set(1);
  EXPECT_EQ(h.run(*admin_a, get).dw0(), p::resv_mask::kRegistrationPreempted);
  ASSERT_TRUE(preempt(*io_b, 0xB, 0xA, RT::write_exclusive).ok());
  auto log = from_bytes<p::ReservationNotificationLog>(
      h.get_log(*admin_a, p::LogPageId::reservation_notification, 0, 64).data);
  EXPECT_EQ(log.type, 0);
  // Another controller of the same host has its own mask.
  auto log2 = from_bytes<p::ReservationNotificationLog>(
      h.get_log(*admin_a2, p::LogPageId::reservation_notification, 0, 64).data);
  EXPECT_EQ(log2.type, static_cast<uint8_t>(p::ReservationNotice::registration_preempted));
  set.hdr.cid.set(h.next_cid());
  set.cdw11.set(1u << 0);  // a reserved bit
  EXPECT_TRUE(h.run(*admin_a, set).status().is(p::status::invalid_field));
}

TEST_F(CoreReservations, BadInputGetsTheSpecsStatus) {
  EXPECT_TRUE(run(*io_a, p::IoOpcode::reservation_register, reg10(0), keys(0, 1), 9).is(p::status::invalid_namespace));
  EXPECT_TRUE(run(*io_a, p::IoOpcode::reservation_register, reg10(0), std::vector<uint8_t>(8))
                  .is(p::status::data_sgl_length_invalid));
  EXPECT_TRUE(run(*io_a, p::IoOpcode::reservation_register, reg10(3), keys(0, 1)).is(p::status::invalid_field));
  EXPECT_TRUE(run(*io_a, p::IoOpcode::reservation_register, reg10(0, false, 1), keys(0, 1))
                  .is(p::status::invalid_field));  // CPTPL 01b is reserved
  EXPECT_TRUE(run(*io_a, p::IoOpcode::reservation_register, reg10(0, false, 3), keys(0, 1))
                  .is(p::status::invalid_field));  // PTPL without a state directory
  ASSERT_TRUE(reg(*io_a, 0xA).ok());
  EXPECT_TRUE(acquire(*io_a, 0xA, static_cast<RT>(7)).is(p::status::invalid_field));
  EXPECT_TRUE(acquire(*io_a, 0xA, RT::none).is(p::status::invalid_field));
  EXPECT_TRUE(acquire(*io_a, 0xBAD, RT::write_exclusive).is(p::status::reservation_conflict));
  EXPECT_TRUE(acquire(*io_b, 0xA, RT::write_exclusive).is(p::status::reservation_conflict)) << "B is no registrant";
  EXPECT_TRUE(run(*io_a, p::IoOpcode::reservation_release, acq10(2, RT::write_exclusive), keys(0xA))
                  .is(p::status::invalid_field));
  EXPECT_TRUE(run(*io_a, p::IoOpcode::reservation_release, acq10(0, RT::none), std::vector<uint8_t>(4))
                  .is(p::status::data_sgl_length_invalid));
  // Report without EDS: a fabrics host has a 128-bit host identifier.
  auto sqe = io_sqe(p::IoOpcode::reservation_report, h.next_cid(), 1, 4096 / 4 - 1, 4096);
  EXPECT_TRUE(h.run(*io_a, sqe).status().is(p::status::host_id_inconsistent_format));
  // Fused bits on a command that cannot be fused: answered (Invalid Field) when the next command shows that
  // no second half follows.
  const uint16_t fused_cid = h.next_cid();
  auto fused = io_sqe(p::IoOpcode::reservation_register, fused_cid, 1, reg10(0), 16);
  fused.hdr.set_fuse(p::FusedOperation::first);
  io_a->submit(fused, keys(0, 5));
  h.reactor.run();
  EXPECT_FALSE(io_a->result(fused_cid));
  EXPECT_EQ(report(*io_a).entries.size(), 1u) << "nothing the refused commands asked for happened";
  ASSERT_TRUE(io_a->result(fused_cid));
  EXPECT_TRUE(io_a->result(fused_cid)->status().is(p::status::invalid_field));
}

TEST_F(CoreReservations, ReportIsCutToTheLengthAsked) {
  ASSERT_TRUE(reg(*io_a, 0xA).ok());
  ASSERT_TRUE(reg(*io_b, 0xB).ok());
  const Report r = report(*io_a, 64 + 64);  // the header and one entry of two
  EXPECT_EQ(r.registrants, 2);
  EXPECT_EQ(r.entries.size(), 1u);
}

// Preempt and Abort waits for the preempted host's write in the backend; a write of that host that starts
// later is refused.
class CoreReservationsAbort : public ::testing::Test {
 protected:
  CoreReservationsAbort() {
    set_backend_wrapper([this](std::unique_ptr<backend::Backend> b) -> std::unique_ptr<backend::Backend> {
      return std::make_unique<GatedBackend>(std::move(b), gate);
    });
    gate.depth = 64;
    h = std::make_unique<CoreHarness>();
  }
  ~CoreReservationsAbort() override { set_backend_wrapper({}); }
  Gate gate;
  std::unique_ptr<CoreHarness> h;
};

TEST_F(CoreReservationsAbort, PreemptAndAbortWaitsOutThePreemptedWrites) {
  auto admin_a = h->queue(), admin_b = h->queue();
  const uint16_t a = h->bring_up(*admin_a, kSub1, kHost1, 0, kHostId1);
  const uint16_t b = h->bring_up(*admin_b, kSub1, kHost2, 0, kHostId2);
  auto io_a = h->io_queue(a, 1, kSub1, kHost1, kHostId1);
  auto io_b = h->io_queue(b, 1, kSub1, kHost2, kHostId2);
  auto run = [&](FakeTargetQueue& q, p::IoOpcode op, uint32_t cdw10, std::vector<uint8_t> d) {
    return h->run(q, io_sqe(op, h->next_cid(), 1, cdw10, 16), std::move(d)).status();
  };
  ASSERT_TRUE(run(*io_a, p::IoOpcode::reservation_register, reg10(0), keys(0, 0xA)).ok());
  ASSERT_TRUE(run(*io_b, p::IoOpcode::reservation_register, reg10(0), keys(0, 0xB)).ok());
  ASSERT_TRUE(
      run(*io_a, p::IoOpcode::reservation_acquire, acq10(0, RT::write_exclusive_registrants_only), keys(0xA)).ok());
  gate.open = 0;  // B's write stays in the backend
  const uint16_t w = h->next_cid();
  io_b->submit(sqe_of(p::make_write(w, 1, 20, 1, p::make_transport_sgl(512))), pattern(512, 4));
  h->reactor.run();
  ASSERT_EQ(gate.accepted.size(), 1u);
  const uint16_t pa = h->next_cid();
  io_a->submit(io_sqe(p::IoOpcode::reservation_acquire, pa, 1, acq10(2, RT::write_exclusive), 16), keys(0xA, 0xB));
  h->reactor.run();
  EXPECT_FALSE(io_a->result(pa)) << "the Acquire waits for B's write";
  // B is no registrant any more: its next write is refused at once.
  EXPECT_TRUE(h->write(*io_b, 1, 21, 1, pattern(512, 5)).status().is(p::status::reservation_conflict));
  gate.open = UINT_MAX;
  h->reactor.run();
  h->reactor.run();
  ASSERT_TRUE(io_b->result(w) && io_a->result(pa));
  EXPECT_TRUE(io_b->result(w)->status().ok()) << "waited out, not aborted";
  EXPECT_TRUE(io_a->result(pa)->status().ok());
}

// With a state directory: PTPL set survives a restart of the core, PTPL cleared does not.
class CoreReservationsPersist : public ::testing::Test {
 protected:
  TargetConfig config() {
    auto c = test_config();
    c.state_dir = dir.path().string();
    return c;
  }
  rdmablk::testing::TempDir dir;
};

TEST_F(CoreReservationsPersist, PtplKeepsRegistrationsAcrossARestart) {
  {
    CoreHarness h(config());
    auto admin = h.queue();
    const uint16_t c = h.bring_up(*admin);
    auto io = h.io_queue(c, 1);
    auto ns = from_bytes<p::IdentifyNamespace>(h.identify(*admin, p::Cns::namespace_, 1).data);
    EXPECT_EQ(ns.rescap, p::rescap::kAll);
    // Register with CPTPL 11b on ns 1; ns 2 registers without it.
    ASSERT_TRUE(
        h.run(*io, io_sqe(p::IoOpcode::reservation_register, h.next_cid(), 1, reg10(0, false, 3), 16), keys(0, 0x11))
            .status()
            .ok());
    ASSERT_TRUE(h.run(*io,
                      io_sqe(p::IoOpcode::reservation_acquire, h.next_cid(), 1, acq10(0, RT::exclusive_access), 16),
                      keys(0x11))
                    .status()
                    .ok());
    ASSERT_TRUE(h.run(*io, io_sqe(p::IoOpcode::reservation_register, h.next_cid(), 2, reg10(0), 16), keys(0, 0x22))
                    .status()
                    .ok());
    auto get = sqe_of(p::make_get_features(h.next_cid(), p::FeatureId::reservation_persistence));
    get.hdr.nsid.set(1);
    EXPECT_EQ(h.run(*admin, get).dw0(), 1u);
  }
  CoreHarness h(config());
  auto admin_b = h.queue();
  const uint16_t b = h.bring_up(*admin_b, kSub1, kHost2, 0, kHostId2);
  auto io_b = h.io_queue(b, 1, kSub1, kHost2, kHostId2);
  EXPECT_TRUE(h.read(*io_b, 1, 0, 1, 512).status().is(p::status::reservation_conflict)) << "the reservation held";
  EXPECT_TRUE(h.read(*io_b, 2, 0, 1, 4096).status().ok());
  // Namespace 2 had PTPL cleared: nothing of it came back; Set Features 83h turns it on there.
  auto set = sqe_of(p::make_set_features(h.next_cid(), p::FeatureId::reservation_persistence, 1));
  set.hdr.nsid.set(2);
  EXPECT_TRUE(h.run(*admin_b, set).status().ok());
  auto get = sqe_of(p::make_get_features(h.next_cid(), p::FeatureId::reservation_persistence));
  get.hdr.nsid.set(2);
  EXPECT_EQ(h.run(*admin_b, get).dw0(), 1u);
}

}  // namespace
}  // namespace rdmablk::target::testing
