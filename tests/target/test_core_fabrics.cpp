// Target core: Connect (admin and I/O queues) and Property Get/Set, good and malformed.
#include "target/core_test_util.h"

namespace rdmablk::target::testing {
namespace {

TEST(CoreConnect, AdminConnectReturnsCntlidAndTellsTheTransport) {
  CoreHarness h;
  auto q = h.queue();
  auto c = h.connect(*q, 0, 31, kSub1, kHost1, p::kCntlidDynamic, 5000);
  ASSERT_TRUE(c.status().ok()) << p::status_name(c.status());
  const uint16_t cntlid = p::connect_result_cntlid(c.dw0());
  EXPECT_GE(cntlid, 1);
  EXPECT_LE(cntlid, 0xFFEF);
  EXPECT_TRUE(q->connected);
  EXPECT_EQ(q->qid, 0);
  EXPECT_EQ(q->sq_entries, 32);
  EXPECT_EQ(h.core().controller_count(), 1u);
  // A second host gets another controller id.
  auto q2 = h.queue();
  auto c2 = h.connect(*q2, 0, 31, kSub1, kHost2);
  ASSERT_TRUE(c2.status().ok());
  EXPECT_NE(p::connect_result_cntlid(c2.dw0()), cntlid);
}

TEST(CoreConnect, ConnectDataFetchedWhenNotInCapsule) {
  CoreHarness h;
  auto q = h.queue();
  auto c = h.connect(*q, 0, 31, kSub1, kHost1, p::kCntlidDynamic, 0, kHostId1, /*in_capsule=*/false);
  EXPECT_TRUE(c.status().ok());
  EXPECT_EQ(q->fetches, 1);
}

struct BadAdminConnect {
  const char* name;
  uint16_t sqsize0;
  const char* subnqn;
  const char* hostnqn;
  uint16_t cntlid;
  p::Status status;
  uint32_t dw0;  // IATTR / IPO for Connect Invalid Parameters
};

class CoreBadAdminConnect : public ::testing::TestWithParam<BadAdminConnect> {};

TEST_P(CoreBadAdminConnect, Rejected) {
  const auto& t = GetParam();
  CoreHarness h;
  auto q = h.queue();
  auto c = h.connect(*q, 0, t.sqsize0, t.subnqn, t.hostnqn, t.cntlid);
  EXPECT_EQ(c.status(), t.status) << p::status_name(c.status());
  EXPECT_EQ(c.dw0(), t.dw0);
  EXPECT_FALSE(q->connected);
  EXPECT_EQ(h.core().controller_count(), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Table, CoreBadAdminConnect,
    ::testing::Values(
        BadAdminConnect{"unknown_subnqn", 31, "nqn.2024-01.io.rdmablk:nope", kHost1, 0xFFFF,
                        st::connect_invalid_parameters, p::connect_invalid_param_result(true, 256)},
        BadAdminConnect{"host_not_allowed", 31, kSub2, kHost2, 0xFFFF, st::connect_invalid_host,
                        p::connect_invalid_param_result(true, 512)},
        BadAdminConnect{"static_cntlid", 31, kSub1, kHost1, 5, st::connect_invalid_parameters,
                        p::connect_invalid_param_result(true, 16)},
        BadAdminConnect{"sqsize_too_big", 32, kSub1, kHost1, 0xFFFF, st::connect_invalid_parameters,
                        p::connect_invalid_param_result(false, 44)},
        BadAdminConnect{"sqsize_zero", 0, kSub1, kHost1, 0xFFFF, st::connect_invalid_parameters,
                        p::connect_invalid_param_result(false, 44)},
        BadAdminConnect{"sqsize_65536", 0xFFFF, kSub1, kHost1, 0xFFFF, st::connect_invalid_parameters,
                        p::connect_invalid_param_result(false, 44)},
        BadAdminConnect{"empty_hostnqn", 31, kSub1, "", 0xFFFF, st::connect_invalid_parameters,
                        p::connect_invalid_param_result(true, 512)},
        BadAdminConnect{"malformed_subnqn", 31, "nqn.2024-13.bad", kHost1, 0xFFFF, st::connect_invalid_parameters,
                        p::connect_invalid_param_result(true, 256 + 9)}),
    [](const auto& p_info) { return std::string(p_info.param.name); });

TEST(CoreConnect, BadRecordFormat) {
  CoreHarness h;
  auto q = h.queue();
  auto data = p::make_connect_data(kHostId1, p::kCntlidDynamic, kSub1, kHost1);
  std::vector<uint8_t> bytes(sizeof(data));
  std::memcpy(bytes.data(), &data, sizeof(data));
  auto cmd = p::make_connect(1, 0, 31, 0, 0, p::make_in_capsule_sgl(0, 1024));
  cmd.recfmt.set(1);
  auto c = h.run(*q, sqe_of(cmd), bytes);
  EXPECT_EQ(c.status(), st::connect_incompatible_format);
}

TEST(CoreConnect, ConnectDataLengthMustBe1024) {
  CoreHarness h;
  auto q = h.queue();
  auto c = h.run(*q, sqe_of(p::make_connect(1, 0, 31, 0, 0, p::make_in_capsule_sgl(0, 512))),
                 std::vector<uint8_t>(512, 0));
  EXPECT_EQ(c.status(), st::data_sgl_length_invalid);
}

TEST(CoreConnect, CommandsBeforeConnectAreSequenceErrors) {
  CoreHarness h;
  auto q = h.queue();
  EXPECT_EQ(h.identify(*q, p::Cns::controller, 0).status(), st::command_sequence_error);
  EXPECT_EQ(h.prop_get(*q, p::property::cap, true).status(), st::command_sequence_error);
  EXPECT_EQ(h.run(*q, p::make_keep_alive(h.next_cid())).status(), st::command_sequence_error);
  EXPECT_EQ(h.run(*q, p::to_sqe(p::make_read(h.next_cid(), 1, 0, 1, p::make_transport_sgl(512)))).status(),
            st::command_sequence_error);
}

TEST(CoreConnect, SecondConnectOnAConnectedQueueIsASequenceError) {
  CoreHarness h;
  auto q = h.queue();
  ASSERT_TRUE(h.connect(*q, 0, 31, kSub1, kHost1).status().ok());
  EXPECT_EQ(h.connect(*q, 0, 31, kSub1, kHost1).status(), st::command_sequence_error);
  EXPECT_EQ(h.core().controller_count(), 1u);
}

TEST(CoreConnect, IoQueueConnects) {
  CoreHarness h;
  auto admin = h.queue();
  const uint16_t cntlid = h.bring_up(*admin);
  auto io = h.queue();
  auto c = h.connect(*io, 1, 127, kSub1, kHost1, cntlid);
  ASSERT_TRUE(c.status().ok()) << p::status_name(c.status());
  EXPECT_EQ(p::connect_result_cntlid(c.dw0()), cntlid);
  EXPECT_EQ(io->qid, 1);
  EXPECT_EQ(io->sq_entries, 128);
}

struct BadIoConnect {
  const char* name;
  uint16_t qid;
  uint16_t sqsize0;
  int cntlid_delta;  // added to the real cntlid
  const char* hostnqn;
  bool other_hostid;
  p::Status status;
  uint32_t dw0;
};

class CoreBadIoConnect : public ::testing::TestWithParam<BadIoConnect> {};

TEST_P(CoreBadIoConnect, Rejected) {
  const auto& t = GetParam();
  CoreHarness h;
  auto admin = h.queue();
  const uint16_t cntlid = h.bring_up(*admin);
  auto io = h.queue();
  auto c = h.connect(*io, t.qid, t.sqsize0, kSub1, t.hostnqn, static_cast<uint16_t>(cntlid + t.cntlid_delta), 0,
                     t.other_hostid ? kHostId2 : kHostId1);
  EXPECT_EQ(c.status(), t.status) << p::status_name(c.status());
  EXPECT_EQ(c.dw0(), t.dw0);
  EXPECT_FALSE(io->connected);
}

INSTANTIATE_TEST_SUITE_P(
    Table, CoreBadIoConnect,
    ::testing::Values(
        BadIoConnect{"unknown_cntlid", 1, 127, 7, kHost1, false, st::connect_invalid_parameters,
                     p::connect_invalid_param_result(true, 16)},
        BadIoConnect{"other_hostnqn", 1, 127, 0, kHost2, false, st::connect_invalid_parameters,
                     p::connect_invalid_param_result(true, 16)},
        BadIoConnect{"other_hostid", 1, 127, 0, kHost1, true, st::connect_invalid_parameters,
                     p::connect_invalid_param_result(true, 16)},
        BadIoConnect{"qid_too_big", 5, 127, 0, kHost1, false, st::connect_invalid_parameters,
                     p::connect_invalid_param_result(false, 42)},
        BadIoConnect{"sqsize_too_big", 1, 128, 0, kHost1, false, st::connect_invalid_parameters,
                     p::connect_invalid_param_result(false, 44)},
        BadIoConnect{"sqsize_zero", 1, 0, 0, kHost1, false, st::connect_invalid_parameters,
                     p::connect_invalid_param_result(false, 44)}),
    [](const auto& p_info) { return std::string(p_info.param.name); });

TEST(CoreConnect, IoQueueBeforeEnableIsASequenceError) {
  CoreHarness h;
  auto admin = h.queue();
  auto c = h.connect(*admin, 0, 31, kSub1, kHost1);
  const uint16_t cntlid = p::connect_result_cntlid(c.dw0());
  auto io = h.queue();
  EXPECT_EQ(h.connect(*io, 1, 127, kSub1, kHost1, cntlid).status(), st::command_sequence_error);
}

TEST(CoreConnect, SameQidTwiceIsASequenceError) {
  CoreHarness h;
  auto admin = h.queue();
  const uint16_t cntlid = h.bring_up(*admin);
  auto io1 = h.io_queue(cntlid, 1);
  auto io2 = h.queue();
  EXPECT_EQ(h.connect(*io2, 1, 127, kSub1, kHost1, cntlid).status(), st::command_sequence_error);
  // Once the first is gone the qid can be connected again.
  io1->close("test");
  h.reactor.run();
  EXPECT_TRUE(h.connect(*io2, 1, 127, kSub1, kHost1, cntlid).status().ok());
}

TEST(CoreConnect, IoQueueOfADiscoveryControllerIsRefused) {
  CoreHarness h;
  auto admin = h.queue();
  const uint16_t cntlid = h.bring_up(*admin, p::kDiscoveryNqn);
  auto io = h.queue();
  auto c = h.connect(*io, 1, 31, p::kDiscoveryNqn, kHost1, cntlid);
  EXPECT_EQ(c.status(), st::connect_invalid_parameters);
}

// The Linux host: CAP, VS, CC.EN=1, poll CSTS.RDY; at disconnect CC.SHN=01b, poll CSTS.SHST.
TEST(CoreProperties, LinuxHostSequence) {
  CoreHarness h;
  auto q = h.queue();
  ASSERT_TRUE(h.connect(*q, 0, 31, kSub1, kHost1).status().ok());
  auto cap_c = h.prop_get(*q, p::property::cap, true);
  ASSERT_TRUE(cap_c.status().ok());
  const p::Cap cap{cap_c.cqe.result64()};
  EXPECT_EQ(cap.mqes(), 127);
  EXPECT_TRUE(cap.cqr());
  EXPECT_EQ(cap.to(), 15);
  EXPECT_EQ(cap.css() & p::Cap::kCssNvm, p::Cap::kCssNvm);
  EXPECT_EQ(cap.mpsmin(), 0);
  EXPECT_EQ(h.prop_get(*q, p::property::vs, false).dw0(), 0x00010300u);
  EXPECT_EQ(h.prop_get(*q, p::property::csts, false).dw0(), 0u);
  ASSERT_TRUE(h.enable(*q).status().ok());
  EXPECT_EQ(h.prop_get(*q, p::property::cc, false).dw0(), CoreHarness::good_cc());
  EXPECT_TRUE(p::Csts{h.prop_get(*q, p::property::csts, false).dw0()}.rdy());
  // Shutdown.
  auto cc = p::Cc{CoreHarness::good_cc()}.set_shn(p::Cc::Shn::normal);
  ASSERT_TRUE(h.prop_set(*q, p::property::cc, cc.value).status().ok());
  const p::Csts csts{h.prop_get(*q, p::property::csts, false).dw0()};
  EXPECT_EQ(csts.shst(), static_cast<uint8_t>(p::Csts::Shst::complete));
  EXPECT_FALSE(csts.rdy());
  // Admin commands other than fabrics ones now need the controller enabled again.
  EXPECT_EQ(h.identify(*q, p::Cns::controller, 0).status(), st::command_sequence_error);
}

TEST(CoreProperties, BadSizesAndOffsetsAreInvalidField) {
  CoreHarness h;
  auto q = h.queue();
  ASSERT_TRUE(h.connect(*q, 0, 31, kSub1, kHost1).status().ok());
  EXPECT_EQ(h.prop_get(*q, p::property::cap, false).status(), st::invalid_field);
  EXPECT_EQ(h.prop_get(*q, p::property::vs, true).status(), st::invalid_field);
  EXPECT_EQ(h.prop_get(*q, 0x40, false).status(), st::invalid_field);
  EXPECT_EQ(h.prop_set(*q, p::property::cap, 1, true).status(), st::invalid_field);
  EXPECT_EQ(h.prop_set(*q, p::property::cc, CoreHarness::good_cc(), true).status(), st::invalid_field);
  EXPECT_EQ(h.prop_set(*q, p::property::csts, 1).status(), st::invalid_field);
}

TEST(CoreProperties, UnsupportedQueueEntrySizesSetFatalStatus) {
  CoreHarness h;
  auto q = h.queue();
  ASSERT_TRUE(h.connect(*q, 0, 31, kSub1, kHost1).status().ok());
  const auto cc = p::Cc{}.set_en(true).set_iosqes(7).set_iocqes(4);
  ASSERT_TRUE(h.prop_set(*q, p::property::cc, cc.value).status().ok());
  const p::Csts csts{h.prop_get(*q, p::property::csts, false).dw0()};
  EXPECT_TRUE(csts.cfs());
  EXPECT_FALSE(csts.rdy());
  EXPECT_EQ(h.identify(*q, p::Cns::controller, 0).status(), st::command_sequence_error);
}

TEST(CoreProperties, PropertiesOnAnIoQueueAreInvalidOpcode) {
  CoreHarness h;
  auto admin = h.queue();
  auto io = h.io_queue(h.bring_up(*admin), 1);
  EXPECT_EQ(h.prop_get(*io, p::property::cap, true).status(), st::invalid_opcode);
}

}  // namespace
}  // namespace rdmablk::target::testing
