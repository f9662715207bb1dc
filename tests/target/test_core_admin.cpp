// Target core: Identify, Get Log Page, Set/Get Features, Keep Alive, Abort on an I/O controller.
#include "target/core_test_util.h"

namespace rdmablk::target::testing {
namespace {

class CoreAdmin : public ::testing::Test {
 protected:
  void SetUp() override { cntlid = h.bring_up(*admin); }
  CoreHarness h;
  std::unique_ptr<FakeTargetQueue> admin = h.queue();
  uint16_t cntlid = 0;
};

TEST_F(CoreAdmin, IdentifyControllerReportsWhatTheLinuxHostChecks) {
  auto c = h.identify(*admin, p::Cns::controller, 0);
  ASSERT_TRUE(c.status().ok());
  ASSERT_TRUE(c.with_data);
  const auto id = from_bytes<p::IdentifyController>(c.data);
  EXPECT_EQ(id.cntlid.get(), cntlid);
  EXPECT_EQ(std::string(id.sn.data(), 10), "SERIAL0001");
  EXPECT_EQ(std::string(id.mn.data(), 12), "rdmablk test");
  EXPECT_EQ(id.mn[12], ' ');
  EXPECT_EQ(id.ver.get(), 0x00010300u);
  EXPECT_EQ(id.cntrltype, p::idctl::kCntrltypeIo);
  EXPECT_EQ(id.mdts, 8);  // 1 MiB / 4 KiB = 2^8
  EXPECT_EQ(id.kas.get(), 10);
  EXPECT_EQ(id.sqes, 0x66);
  EXPECT_EQ(id.cqes, 0x44);
  EXPECT_EQ(id.maxcmd.get(), 128);
  EXPECT_EQ(id.nn.get(), 1024u);
  EXPECT_EQ(id.aerl, 3);
  EXPECT_EQ(id.oncs.get(), p::idctl::kOncsCompare | p::idctl::kOncsDsm | p::idctl::kOncsWriteZeroes |
                               p::idctl::kOncsCopy | p::idctl::kOncsReservations);
  EXPECT_EQ(id.fuses.get(), p::idctl::kFusesCompareWrite);
  EXPECT_EQ(id.oaes.get(), p::idctl::kOaesNamespaceAttribute | p::idctl::kOaesAnaChange);
  EXPECT_EQ(id.ctratt.get(), p::idctl::kCtrattHostId128 | p::idctl::kCtrattTbkas);
  EXPECT_EQ(id.vwc, 0);  // ram namespaces have no volatile cache
  // TCP: SGLs, offsets (in-capsule), transport data blocks; no keyed SGLs.
  EXPECT_EQ(id.sgls.get(), p::idctl::kSglsSupported | p::idctl::kSglsOffset | p::idctl::kSglsTransport);
  EXPECT_EQ(id.ioccsz.get(), (64u + 16384u) / 16u);
  EXPECT_EQ(id.iorcsz.get(), 1u);
  EXPECT_EQ(id.icdoff.get(), 0);
  EXPECT_EQ(id.msdbd, 1);
  EXPECT_EQ(id.fcatt, 0);
  EXPECT_EQ(std::string(id.subnqn.data()), kSub1);
}

TEST(CoreAdminRdma, IdentifyControllerAdvertisesKeyedSglsOnRdma) {
  CoreHarness h;
  auto admin = h.queue(transport::TransportType::rdma);
  h.bring_up(*admin);
  auto id = from_bytes<p::IdentifyController>(h.identify(*admin, p::Cns::controller, 0).data);
  EXPECT_NE(id.sgls.get() & p::idctl::kSglsKeyed, 0u);
  EXPECT_EQ(id.icdoff.get(), 0);
}

TEST_F(CoreAdmin, IdentifyNamespace) {
  auto c = h.identify(*admin, p::Cns::namespace_, 2);
  ASSERT_TRUE(c.status().ok());
  const auto ns = from_bytes<p::IdentifyNamespace>(c.data);
  EXPECT_EQ(ns.nsze.get(), (1u << 20) / 4096);
  EXPECT_EQ(ns.ncap.get(), ns.nsze.get());
  EXPECT_EQ(ns.nlbaf, 0);
  EXPECT_EQ(ns.flbas, 0);
  EXPECT_EQ(ns.lbaf[0].lbads, 12);
  EXPECT_EQ(ns.nsfeat & p::idns::kNsfeatThinProvisioning, p::idns::kNsfeatThinProvisioning);
  EXPECT_EQ(ns.nguid, derive_nguid(kSub1, 2));
  EXPECT_EQ(ns.nsattr, 0);
  const auto ns1 = from_bytes<p::IdentifyNamespace>(h.identify(*admin, p::Cns::namespace_, 1).data);
  EXPECT_EQ(ns1.nsze.get(), (1u << 20) / 512);
  EXPECT_EQ(ns1.lbaf[0].lbads, 9);
}

// DLFEAT comes from what the backend reports, not from its kind: ram deallocates to zeroes, null deallocates
// without touching anything (still thin provisioned: Deallocate is accepted).
TEST(CoreAdminDeallocate, DlfeatFollowsTheBackendCapability) {
  auto config = test_config();
  config.subsystems[0].namespaces.push_back(ram_ns(kSub1, 3, 1 << 20, 512, false, BackendKind::null));
  CoreHarness h(config);
  auto admin = h.queue();
  h.bring_up(*admin);
  const auto ram = from_bytes<p::IdentifyNamespace>(h.identify(*admin, p::Cns::namespace_, 1).data);
  EXPECT_EQ(ram.dlfeat, p::idns::kDlfeatReadZeroes | p::idns::kDlfeatWriteZeroesDeallocate);
  EXPECT_EQ(ram.nsfeat & p::idns::kNsfeatThinProvisioning, p::idns::kNsfeatThinProvisioning);
  const auto null = from_bytes<p::IdentifyNamespace>(h.identify(*admin, p::Cns::namespace_, 3).data);
  EXPECT_EQ(null.dlfeat, 0);
  EXPECT_EQ(null.nsfeat & p::idns::kNsfeatThinProvisioning, p::idns::kNsfeatThinProvisioning);
}

TEST(CoreAdminReadOnly, ReadOnlyNamespaceIsWriteProtected) {
  CoreHarness h;
  auto admin = h.queue();
  h.bring_up(*admin, kSub2, kHost1);
  const auto ns = from_bytes<p::IdentifyNamespace>(h.identify(*admin, p::Cns::namespace_, 1).data);
  EXPECT_EQ(ns.nsattr & p::idns::kNsattrWriteProtected, p::idns::kNsattrWriteProtected);
}

TEST_F(CoreAdmin, IdentifyNamespaceInactiveIsZeroesAndBroadcastIsInvalid) {
  auto c = h.identify(*admin, p::Cns::namespace_, 7);
  ASSERT_TRUE(c.status().ok());
  EXPECT_TRUE(std::all_of(c.data.begin(), c.data.end(), [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(h.identify(*admin, p::Cns::namespace_, 0).status(), st::invalid_namespace);
  EXPECT_EQ(h.identify(*admin, p::Cns::namespace_, 0xFFFFFFFF).status(), st::invalid_namespace);
}

TEST_F(CoreAdmin, ActiveNamespaceList) {
  auto all = from_bytes<p::NamespaceList>(h.identify(*admin, p::Cns::active_namespace_list, 0).data);
  EXPECT_EQ(all.nsid[0].get(), 1u);
  EXPECT_EQ(all.nsid[1].get(), 2u);
  EXPECT_EQ(all.nsid[2].get(), 0u);
  auto after1 = from_bytes<p::NamespaceList>(h.identify(*admin, p::Cns::active_namespace_list, 1).data);
  EXPECT_EQ(after1.nsid[0].get(), 2u);
  EXPECT_EQ(after1.nsid[1].get(), 0u);
  EXPECT_EQ(h.identify(*admin, p::Cns::active_namespace_list, 0xFFFFFFFE).status(), st::invalid_namespace);
}

TEST_F(CoreAdmin, NamespaceIdDescriptorList) {
  auto c = h.identify(*admin, p::Cns::ns_id_descriptor_list, 1);
  ASSERT_TRUE(c.status().ok());
  auto ids = p::parse_ns_id_descriptor_list(c.data);
  ASSERT_TRUE(ids);
  ASSERT_TRUE(ids->nguid && ids->uuid && ids->csi);
  EXPECT_EQ(*ids->nguid, derive_nguid(kSub1, 1));
  EXPECT_EQ(*ids->uuid, derive_uuid(kSub1, 1));
  EXPECT_EQ(*ids->csi, 0);
  EXPECT_EQ(h.identify(*admin, p::Cns::ns_id_descriptor_list, 9).status(), st::invalid_namespace);
}

TEST_F(CoreAdmin, IdentifyOtherCnsAndBadLengths) {
  auto c = h.identify(*admin, p::Cns::io_independent_namespace, 1);
  ASSERT_TRUE(c.status().ok());
  EXPECT_EQ(c.data[1], p::idns::kNmicShared);
  EXPECT_EQ(c.data[14], 1);  // NSTAT: ready
  EXPECT_EQ(h.identify(*admin, p::Cns::controller_list, 0).status(), st::invalid_field);
  EXPECT_EQ(h.identify(*admin, p::Cns::controller, 0, 2048).status(), st::data_sgl_length_invalid);
  // A keyed SGL on a TCP queue is not a descriptor type this transport knows.
  auto keyed = p::make_identify(h.next_cid(), p::Cns::controller, 0, p::make_keyed_sgl(0x1000, 4096, 7));
  EXPECT_EQ(h.run(*admin, sqe_of(keyed)).status(), st::sgl_descriptor_type_invalid);
  // In-capsule data cannot carry controller -> host data.
  auto incap = p::make_identify(h.next_cid(), p::Cns::controller, 0, p::make_in_capsule_sgl(0, 4096));
  EXPECT_EQ(h.run(*admin, sqe_of(incap)).status(), st::invalid_field);
}

TEST_F(CoreAdmin, MalformedAdminCommands) {
  auto fused = p::make_identify(h.next_cid(), p::Cns::controller, 0, p::make_transport_sgl(4096));
  fused.hdr.set_fuse(p::FusedOperation::first);
  EXPECT_EQ(h.run(*admin, sqe_of(fused)).status(), st::invalid_field);
  auto prp = p::make_identify(h.next_cid(), p::Cns::controller, 0, p::make_transport_sgl(4096));
  prp.hdr.set_psdt(p::Psdt::prp);
  EXPECT_EQ(h.run(*admin, sqe_of(prp)).status(), st::invalid_field);
  p::Sqe unknown{};
  unknown.hdr = p::make_header(static_cast<uint8_t>(p::AdminOpcode::format_nvm), h.next_cid(), 1);
  EXPECT_EQ(h.run(*admin, unknown).status(), st::invalid_opcode);
  p::Sqe create_sq{};
  create_sq.hdr = p::make_header(static_cast<uint8_t>(p::AdminOpcode::create_io_sq), h.next_cid(), 0);
  EXPECT_EQ(h.run(*admin, create_sq).status(), st::invalid_opcode);
  // I/O opcodes on the admin queue mean admin commands (0x02 = Get Log Page) - Read 0x02 with a bad LID:
  EXPECT_EQ(h.get_log(*admin, static_cast<p::LogPageId>(0x42), 0, 512).status(), st::invalid_field);
}

TEST_F(CoreAdmin, AbortAnswersNotAborted) {
  auto c = h.run(*admin, sqe_of(p::make_abort(h.next_cid(), 1, 33)));
  EXPECT_TRUE(c.status().ok());
  EXPECT_EQ(c.dw0() & 1u, 1u);
}

TEST_F(CoreAdmin, LogPagesFirmwareEffectsAndOffsets) {
  auto fw = h.get_log(*admin, p::LogPageId::firmware_slot, 0, 512);
  ASSERT_TRUE(fw.status().ok());
  const auto slot = from_bytes<p::FirmwareSlotLog>(fw.data);
  EXPECT_EQ(slot.afi, 1);
  EXPECT_EQ(std::string(slot.frs[0].data(), 5), "0.1.0");

  auto fx = h.get_log(*admin, p::LogPageId::commands_supported_effects, 0, 4096);
  ASSERT_TRUE(fx.status().ok());
  const auto effects = from_bytes<p::CommandEffectsLog>(fx.data);
  EXPECT_EQ(effects.acs[0x06].get(), p::effects::kCsupp);
  EXPECT_EQ(effects.iocs[0x01].get(), p::effects::kCsupp | p::effects::kLbcc);
  EXPECT_EQ(effects.iocs[0x02].get(), p::effects::kCsupp);

  // LPO: a partial read at an offset returns that part of the page.
  auto tail = h.get_log(*admin, p::LogPageId::commands_supported_effects, 1024 + 4, 8);
  ASSERT_TRUE(tail.status().ok());
  EXPECT_EQ(from_bytes<p::le32>(tail.data).get(), p::effects::kCsupp | p::effects::kLbcc);  // iocs[1]
  // Reading past the end of the page is zero filled; starting past it is an error.
  auto past = h.get_log(*admin, p::LogPageId::smart_health, 508, 16);
  ASSERT_TRUE(past.status().ok());
  EXPECT_EQ(past.data[8], 0);
  EXPECT_EQ(h.get_log(*admin, p::LogPageId::smart_health, 516, 4).status(), st::invalid_field);
  EXPECT_EQ(h.get_log(*admin, p::LogPageId::smart_health, 2, 4).status(), st::invalid_field);  // not dword aligned
  EXPECT_EQ(h.get_log(*admin, p::LogPageId::discovery, 0, 1024).status(), st::invalid_field);  // not a discovery ctrl
  // NUMD must match the SGL.
  auto mismatch = p::make_get_log_page(h.next_cid(), p::LogPageId::smart_health, 0, 0, 512, p::make_transport_sgl(256));
  EXPECT_EQ(h.run(*admin, sqe_of(mismatch)).status(), st::data_sgl_length_invalid);
}

TEST_F(CoreAdmin, ErrorLogRecordsFailedCommands) {
  EXPECT_EQ(h.identify(*admin, p::Cns::namespace_, 0).status(), st::invalid_namespace);
  const uint16_t failed_cid = 1000;
  auto bad = p::make_identify(failed_cid, p::Cns::controller_list, 0, p::make_transport_sgl(4096));
  EXPECT_EQ(h.run(*admin, sqe_of(bad)).status(), st::invalid_field);
  auto c = h.get_log(*admin, p::LogPageId::error_information, 0, 128);
  ASSERT_TRUE(c.status().ok());
  const auto newest = from_bytes<p::ErrorLogEntry>(c.data, 0);
  const auto older = from_bytes<p::ErrorLogEntry>(c.data, 64);
  EXPECT_EQ(newest.error_count.get(), 2u);
  EXPECT_EQ(newest.cid.get(), failed_cid);
  EXPECT_EQ(p::Status::from_cqe_status(newest.status.get()), st::invalid_field);
  EXPECT_EQ(older.error_count.get(), 1u);
  EXPECT_EQ(p::Status::from_cqe_status(older.status.get()), st::invalid_namespace);
}

TEST_F(CoreAdmin, NumberOfQueues) {
  auto c = h.set_feature(*admin, p::FeatureId::number_of_queues, p::number_of_queues_value(1, 1));
  ASSERT_TRUE(c.status().ok());
  EXPECT_EQ(c.dw0(), p::number_of_queues_value(1, 1));
  EXPECT_EQ(h.get_feature(*admin, p::FeatureId::number_of_queues).dw0(), p::number_of_queues_value(1, 1));
  // Asking for more than max_io_queues (4) gets 4.
  c = h.set_feature(*admin, p::FeatureId::number_of_queues, p::number_of_queues_value(63, 63));
  EXPECT_EQ(c.dw0(), p::number_of_queues_value(3, 3));
  EXPECT_EQ(h.set_feature(*admin, p::FeatureId::number_of_queues, 0xFFFF).status(), st::invalid_field);
  // Back to 2 queues: qid 3 is then refused.
  h.set_feature(*admin, p::FeatureId::number_of_queues, p::number_of_queues_value(1, 1));
  auto io3 = h.queue();
  EXPECT_EQ(h.connect(*io3, 3, 127, kSub1, kHost1, cntlid).status(), st::connect_invalid_parameters);
  auto io1 = h.io_queue(cntlid, 1);
  // Not changeable once I/O queues exist.
  EXPECT_EQ(h.set_feature(*admin, p::FeatureId::number_of_queues, p::number_of_queues_value(3, 3)).status(),
            st::command_sequence_error);
}

TEST_F(CoreAdmin, FeaturesKeepAliveAecWriteCacheHostId) {
  EXPECT_TRUE(h.set_feature(*admin, p::FeatureId::keep_alive_timer, 15000).status().ok());
  EXPECT_EQ(h.get_feature(*admin, p::FeatureId::keep_alive_timer).dw0(), 15000u);
  EXPECT_TRUE(h.set_feature(*admin, p::FeatureId::async_event_configuration, p::kAecNamespaceAttribute).status().ok());
  EXPECT_EQ(h.get_feature(*admin, p::FeatureId::async_event_configuration).dw0(), p::kAecNamespaceAttribute);
  EXPECT_EQ(h.set_feature(*admin, p::FeatureId::async_event_configuration, p::kAecDiscoveryLogChange).status(),
            st::invalid_field);
  EXPECT_EQ(h.get_feature(*admin, p::FeatureId::volatile_write_cache).dw0(), 1u);
  EXPECT_TRUE(h.set_feature(*admin, p::FeatureId::volatile_write_cache, 0).status().ok());
  EXPECT_EQ(h.get_feature(*admin, p::FeatureId::volatile_write_cache).dw0(), 0u);
  EXPECT_EQ(h.get_feature(*admin, p::FeatureId::volatile_write_cache, p::FeatureSelect::supported_capabilities).dw0(),
            4u);
  // Host identifier: 128 bits through the data buffer; EXHID is required; it cannot be set.
  auto get_hostid = p::make_get_features(h.next_cid(), p::FeatureId::host_identifier);
  get_hostid.cdw11.set(1);
  get_hostid.hdr.dptr = p::make_transport_sgl(16);
  auto hid = h.run(*admin, sqe_of(get_hostid));
  ASSERT_TRUE(hid.status().ok());
  EXPECT_TRUE(std::equal(kHostId1.begin(), kHostId1.end(), hid.data.begin()));
  auto no_exhid = p::make_get_features(h.next_cid(), p::FeatureId::host_identifier);
  no_exhid.hdr.dptr = p::make_transport_sgl(16);
  EXPECT_EQ(h.run(*admin, sqe_of(no_exhid)).status(), st::invalid_field);
  EXPECT_EQ(h.set_feature(*admin, p::FeatureId::host_identifier, 0).status(), st::command_sequence_error);
  // Unknown features, saving.
  EXPECT_EQ(h.set_feature(*admin, p::FeatureId::timestamp, 0).status(), st::invalid_field);
  EXPECT_EQ(h.get_feature(*admin, p::FeatureId::lba_range_type).status(), st::invalid_field);
  EXPECT_EQ(
      h.run(*admin, sqe_of(p::make_set_features(h.next_cid(), p::FeatureId::keep_alive_timer, 1000, true))).status(),
      st::feature_id_not_saveable);
}

TEST(CoreKeepAlive, ExpiryTearsTheControllerDown) {
  CoreHarness h;
  auto admin = h.queue();
  const uint16_t cntlid = h.bring_up(*admin, kSub1, kHost1, /*kato=*/1000);
  auto io = h.io_queue(cntlid, 1);
  EXPECT_EQ(h.core().controller_count(), 1u);
  h.reactor.advance(std::chrono::milliseconds(1000));  // commands since connect: re-armed
  EXPECT_FALSE(admin->closed);
  h.reactor.advance(std::chrono::milliseconds(1000));  // silence for a whole KATO: gone
  EXPECT_TRUE(admin->closed);
  EXPECT_TRUE(io->closed);
  EXPECT_EQ(admin->close_reason, "keep-alive timeout");
  EXPECT_EQ(io->close_reason, "keep-alive timeout");
  EXPECT_EQ(h.core().controller_count(), 0u);
  // The cntlid is gone: an I/O queue cannot join it any more.
  auto late = h.queue();
  EXPECT_EQ(h.connect(*late, 2, 127, kSub1, kHost1, cntlid).status(), st::connect_invalid_parameters);
}

TEST(CoreKeepAlive, KeepAliveCommandsAndTrafficKeepItAlive) {
  CoreHarness h;
  auto admin = h.queue();
  const uint16_t cntlid = h.bring_up(*admin, kSub1, kHost1, 1000);
  auto io = h.io_queue(cntlid, 1);
  for (int i = 0; i < 5; ++i) {
    h.reactor.advance(std::chrono::milliseconds(600));
    ASSERT_TRUE(h.run(*admin, p::make_keep_alive(h.next_cid())).status().ok());
  }
  for (int i = 0; i < 5; ++i) {  // traffic based: I/O alone keeps it alive
    h.reactor.advance(std::chrono::milliseconds(600));
    ASSERT_TRUE(h.read(*io, 1, 0, 1, 512).status().ok());
  }
  EXPECT_FALSE(admin->closed);
  EXPECT_EQ(h.core().controller_count(), 1u);
}

TEST(CoreKeepAlive, ZeroKatoDisablesTheTimer) {
  CoreHarness h;
  auto admin = h.queue();
  h.bring_up(*admin, kSub1, kHost1, 0);
  EXPECT_EQ(h.reactor.timer_count(), 0u);
  h.reactor.advance(std::chrono::hours(10));
  EXPECT_FALSE(admin->closed);
  // Turning it on with Set Features starts it.
  ASSERT_TRUE(h.set_feature(*admin, p::FeatureId::keep_alive_timer, 500).status().ok());
  EXPECT_EQ(h.reactor.timer_count(), 1u);
  h.reactor.advance(std::chrono::milliseconds(1000));
  EXPECT_TRUE(admin->closed);
}

// A controller torn down before its KATO ran out takes its keep-alive check with it: the timer's weak_ptr
// would otherwise keep the controller's memory (make_shared, ~4.4 KiB) for up to a KATO (at most
// keep_alive.max_timeout_ms, 1 h by default) after the host left, so a host churning controllers pins
// memory in proportion (found by the connection storm e2e test: RSS grew ~5 MiB per 1000 cycles at KATO 30 s).
TEST(CoreKeepAlive, TeardownCancelsTheTimer) {
  CoreHarness h;
  auto admin = h.queue();
  const uint16_t cntlid = h.bring_up(*admin, kSub1, kHost1, /*kato=*/30'000);
  auto io = h.io_queue(cntlid, 1);
  EXPECT_EQ(h.reactor.timer_count(), 1u);
  admin->close("host went away");
  h.reactor.run();
  EXPECT_EQ(h.core().controller_count(), 0u);
  EXPECT_EQ(h.reactor.timer_count(), 0u) << "the keep-alive check outlived its controller";
}

TEST(CoreLifecycle, ClosingTheAdminQueueFreesTheControllerAndItsIoQueues) {
  CoreHarness h;
  auto admin = h.queue();
  const uint16_t cntlid = h.bring_up(*admin);
  auto io1 = h.io_queue(cntlid, 1);
  auto io2 = h.io_queue(cntlid, 2);
  const uint16_t aer = h.post_aer(*admin);
  admin->close("host went away");
  h.reactor.run();
  EXPECT_TRUE(io1->closed);
  EXPECT_TRUE(io2->closed);
  EXPECT_EQ(h.core().controller_count(), 0u);
  // The outstanding AER is handed back, not completed.
  EXPECT_FALSE(admin->result(aer).has_value());
  ASSERT_EQ(admin->released.size(), 1u);
  EXPECT_EQ(admin->released[0], aer);
}

TEST(CoreLifecycle, ShutdownClosesEveryQueue) {
  CoreHarness h;
  auto admin = h.queue();
  auto io = h.io_queue(h.bring_up(*admin), 1);
  auto idle = h.queue();
  h.core().shutdown("target shutting down");
  h.reactor.run();
  EXPECT_TRUE(admin->closed);
  EXPECT_TRUE(io->closed);
  EXPECT_TRUE(idle->closed);
  EXPECT_EQ(h.core().controller_count(), 0u);
}

}  // namespace
}  // namespace rdmablk::target::testing
