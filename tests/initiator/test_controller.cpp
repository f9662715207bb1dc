#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "initiator/fake_target.h"
#include "initiator/host/controller.h"
#include "initiator/host/discovery_strings.h"

using namespace rdmablk;
using namespace rdmablk::initiator;
using namespace rdmablk::testing;
using namespace std::chrono_literals;

namespace {

std::vector<uint8_t> admin_opcodes(FakeTarget& t) {
  std::vector<uint8_t> out;
  for (const auto& s : t.admin_log) out.push_back(s.hdr.opcode);
  return out;
}

}  // namespace

TEST(Controller, BringUpLikeTheLinuxHost) {
  FakeTarget t;
  FakeConnector conn{&t};
  auto ctrl = Controller::connect(test_options(t, conn));
  ASSERT_TRUE(ctrl) << ctrl.error().message;
  auto& c = **ctrl;
  EXPECT_EQ(c.cntlid(), 1);
  EXPECT_EQ(c.cap().mqes(), 127);
  EXPECT_EQ(c.vs().major(), 1);
  EXPECT_EQ(field_string(c.identity().sn.data(), 20), "FAKE0001");
  EXPECT_EQ(c.max_transfer_bytes(), 128u * 1024);
  EXPECT_EQ(c.granted_io_queues(), 1);
  ASSERT_EQ(c.namespaces().size(), 1u);
  EXPECT_EQ(c.namespaces()[0].block_size, 512u);
  EXPECT_EQ(c.namespaces()[0].size_blocks, 2048u);
  ASSERT_TRUE(c.namespaces()[0].uuid.has_value());
  EXPECT_EQ((*c.namespaces()[0].uuid)[0], 0x11);

  // Admin queue: qid 0, 32 entries, 8 KiB in-capsule; Connect: SQSIZE 31, KATO, CATTR SQ flow control off.
  ASSERT_GE(conn.seen->size(), 1u);
  EXPECT_EQ((*conn.seen)[0].qid, 0);
  EXPECT_EQ((*conn.seen)[0].entries, 32);
  EXPECT_EQ(t.last_connect.qid.get(), 0);
  EXPECT_EQ(t.last_connect.sqsize.get(), 31);
  EXPECT_EQ(t.last_connect.kato.get(), 5000u);
  EXPECT_TRUE(t.last_connect.sq_flow_control_disabled());
  EXPECT_EQ(t.last_hostnqn, test_host().hostnqn);

  // The order of the bring-up.
  std::vector<uint8_t> expect{0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x06, 0x09, 0x06, 0x06, 0x06};
  EXPECT_EQ(admin_opcodes(t), expect);
  auto cc_set = protocol::as<protocol::PropertySetCommand>(t.admin_log[3]);
  EXPECT_EQ(cc_set.offset.get(), protocol::property::cc);
  protocol::Cc cc{static_cast<uint32_t>(cc_set.value.get())};
  EXPECT_TRUE(cc.en());
  EXPECT_EQ(cc.iosqes(), 6);
  EXPECT_EQ(cc.iocqes(), 4);
  EXPECT_EQ(protocol::as<protocol::PropertyGetCommand>(t.admin_log[4]).offset.get(), protocol::property::csts);
}

TEST(Controller, ConnectRejectedAsInvalidHostSaysSoWithTheAddress) {
  FakeTarget t;
  t.allowed_hosts = {"nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000001"};
  FakeConnector conn{&t};
  auto ctrl = Controller::connect(test_options(t, conn));
  ASSERT_FALSE(ctrl);
  const auto& m = ctrl.error().message;
  EXPECT_NE(m.find("Connect Invalid Host"), std::string::npos) << m;
  EXPECT_NE(m.find("tcp://127.0.0.1:4420"), std::string::npos) << m;
  EXPECT_NE(m.find(test_host().hostnqn), std::string::npos) << m;
}

TEST(Controller, ConnectInvalidParametersReportsTheOffset) {
  FakeTarget t;
  FakeConnector conn{&t};
  auto o = test_options(t, conn);
  o.subnqn = "nqn.2024-01.io.rdmablk:other";
  auto ctrl = Controller::connect(o);
  ASSERT_FALSE(ctrl);
  EXPECT_NE(ctrl.error().message.find("at byte 256 of the connect data"), std::string::npos) << ctrl.error().message;
}

TEST(Controller, RefusedConnectionNamesTheAddress) {
  FakeTarget t;
  FakeConnector conn{&t};
  conn.refuse = true;
  auto ctrl = Controller::connect(test_options(t, conn));
  ASSERT_FALSE(ctrl);
  EXPECT_EQ(ctrl.error().message, "cannot connect to tcp://127.0.0.1:4420: Connection refused");
}

TEST(Controller, CntlidMismatchFailsBringUp) {
  FakeTarget t;
  t.lie_about_cntlid = true;
  FakeConnector conn{&t};
  auto ctrl = Controller::connect(test_options(t, conn));
  ASSERT_FALSE(ctrl);
  EXPECT_NE(ctrl.error().message.find("CNTLID"), std::string::npos);
}

TEST(Controller, NotReadyWithinCapTimeout) {
  FakeTarget t;
  t.never_ready = true;
  t.cap_to = 1;  // 500 ms
  FakeConnector conn{&t};
  auto start = std::chrono::steady_clock::now();
  auto ctrl = Controller::connect(test_options(t, conn));
  ASSERT_FALSE(ctrl);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 450ms);
  EXPECT_NE(ctrl.error().message.find("CSTS.RDY"), std::string::npos) << ctrl.error().message;
}

TEST(Controller, CommandTimeoutClosesTheQueueAndFailsTheController) {
  FakeTarget t;
  FakeConnector conn{&t};
  conn.drop_opcode = 0x06;  // Identify never answered
  auto o = test_options(t, conn);
  o.command_timeout = 100ms;
  auto ctrl = Controller::connect(o);
  ASSERT_FALSE(ctrl);
  EXPECT_NE(ctrl.error().message.find("Identify timed out after 100 ms"), std::string::npos) << ctrl.error().message;
}

TEST(Controller, InvalidSubsystemNqnIsRejectedBeforeConnecting) {
  FakeTarget t;
  FakeConnector conn{&t};
  auto o = test_options(t, conn);
  o.subnqn = "not-an-nqn";
  auto ctrl = Controller::connect(o);
  ASSERT_FALSE(ctrl);
  EXPECT_NE(ctrl.error().message.find("invalid subsystem NQN"), std::string::npos);
  EXPECT_TRUE(conn.seen->empty());
}

TEST(Controller, IoQueueConnectAndSyncAndAsyncIo) {
  FakeTarget t;
  FakeConnector conn{&t};
  auto ctrl = Controller::connect(test_options(t, conn));
  ASSERT_TRUE(ctrl) << ctrl.error().message;
  auto q = (*ctrl)->connect_io_queue(1, 16);
  ASSERT_TRUE(q) << q.error().message;
  EXPECT_EQ(t.last_connect.qid.get(), 1);
  EXPECT_EQ(t.last_connect.sqsize.get(), 15);
  EXPECT_EQ(conn.seen->back().qid, 1);
  EXPECT_EQ(conn.seen->back().in_capsule_limit, 8192u);

  std::vector<uint8_t> out(1024, 0xAB), in(1024, 0);
  struct Ctx {
    int done = 0;
    protocol::Status st{};
  } ctx;
  transport::HostCommand w{}, r{};
  for (auto* c : {&w, &r}) {
    c->context = &ctx;
    c->on_complete = [](transport::HostCommand& cmd, const protocol::Cqe& cqe) noexcept {
      auto* x = static_cast<Ctx*>(cmd.context);
      ++x->done;
      x->st = cqe.get_status();
    };
  }
  ASSERT_TRUE((*q)->submit_write(w, 1, 10, 2, out).ok());
  while (ctx.done < 1) ASSERT_GE((*q)->poll(1, 100ms), 0);
  EXPECT_TRUE(ctx.st.ok());
  ASSERT_TRUE((*q)->submit_read(r, 1, 10, 2, in).ok());
  while (ctx.done < 2) ASSERT_GE((*q)->poll(1, 100ms), 0);
  EXPECT_EQ(in, out);

  // Beyond MDTS: refused up front.
  std::vector<uint8_t> big(256 * 1024);
  EXPECT_TRUE((*q)->submit_read(r, 1, 0, 512, big).is(protocol::status::invalid_field));

  // Out of range: a clear NVMe status in the error.
  auto bad = (*q)->execute(protocol::to_sqe(protocol::make_read(0, 1, 4096, 1, {})), std::span(in).first(512),
                           transport::DataDirection::controller_to_host);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("LBA Out of Range"), std::string::npos) << bad.error().message;

  // I/O queue beyond what Set Features granted.
  auto q9 = (*ctrl)->connect_io_queue(9, 16);
  ASSERT_FALSE(q9);
  EXPECT_NE(q9.error().message.find("out of range"), std::string::npos);
  (*q)->disconnect();
}

TEST(Controller, KeepAliveEveryHalfKato) {
  FakeTarget t;
  FakeConnector conn{&t};
  auto o = test_options(t, conn);
  o.kato_ms = 20;
  auto ctrl = Controller::connect(o);
  ASSERT_TRUE(ctrl) << ctrl.error().message;
  // Run until five Keep Alives went out (an event: a fixed window would count fewer when this thread is
  // descheduled on a loaded machine), then check that they came no more often than every KATO/2: the
  // first is sent after `start`, the fifth at least 4 x 10 ms later, and counted after it was sent.
  const auto start = std::chrono::steady_clock::now();
  while (t.keep_alives.load() < 5 && std::chrono::steady_clock::now() - start < 30s) {
    (*ctrl)->service();
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_GE(t.keep_alives.load(), 5) << "fewer than 5 Keep Alives in 30 s with a 20 ms KATO";
  EXPECT_GE(std::chrono::steady_clock::now() - start, 40ms) << "Keep Alive more often than every KATO/2";
  EXPECT_FALSE((*ctrl)->failed()) << (*ctrl)->failure();
}

TEST(Controller, UnansweredKeepAliveFailsTheControllerAfterKato) {
  FakeTarget t;
  FakeConnector conn{&t};
  conn.drop_opcode = 0x18;  // Keep Alive never answered (bring-up sends none)
  auto o = test_options(t, conn);
  o.kato_ms = 40;
  auto ctrl = Controller::connect(o);
  ASSERT_TRUE(ctrl) << ctrl.error().message;
  const auto start = std::chrono::steady_clock::now();
  while (!(*ctrl)->failed() && std::chrono::steady_clock::now() - start < 30s) {
    (*ctrl)->service();
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE((*ctrl)->failed()) << "an unanswered Keep Alive never failed the controller";
  EXPECT_GE(std::chrono::steady_clock::now() - start, 40ms);  // not before a whole KATO
  EXPECT_NE((*ctrl)->failure().find("Keep Alive unanswered for 40 ms"), std::string::npos) << (*ctrl)->failure();
}

TEST(Controller, ShutdownSetsShnAndWaitsForShst) {
  FakeTarget t;
  FakeConnector conn{&t};
  auto ctrl = Controller::connect(test_options(t, conn));
  ASSERT_TRUE(ctrl) << ctrl.error().message;
  ASSERT_TRUE((*ctrl)->shutdown());
  protocol::Cc cc{t.ctrls[1].cc};
  EXPECT_EQ(cc.shn(), static_cast<uint8_t>(protocol::Cc::Shn::normal));
}

TEST(Discovery, ReassemblesTheLogFromDwordAlignedChunks) {
  FakeTarget t;
  for (int i = 0; i < 3; ++i) {
    t.discovery_entries.push_back(
        make_discovery_entry("nqn.2024-01.io.rdmablk:vol" + std::to_string(i), "10.0.0.1", "4420", uint16_t(i + 1)));
  }
  FakeConnector conn{&t};
  auto o = test_options(t, conn);
  o.kato_ms = 0;
  auto ctrl = Controller::connect_discovery(o);
  ASSERT_TRUE(ctrl) << ctrl.error().message;
  EXPECT_EQ(t.last_hostnqn, test_host().hostnqn);
  auto log = (*ctrl)->discovery_log(512);
  ASSERT_TRUE(log) << log.error().message;
  EXPECT_EQ(log->genctr, 7u);
  EXPECT_EQ(log->reads, 1u);
  ASSERT_EQ(log->entries.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(field_string(log->entries[i].subnqn.data(), 256), "nqn.2024-01.io.rdmablk:vol" + std::to_string(i));
    EXPECT_EQ(log->entries[i].portid.get(), i + 1);
  }
  // Header (2 x 512), entries (6 x 512), header again (2 x 512).
  ASSERT_EQ(t.log_page_offsets.size(), 10u);
  for (std::size_t i = 0; i < t.log_page_offsets.size(); ++i) {
    EXPECT_EQ(t.log_page_offsets[i] % 4, 0u);
    EXPECT_EQ(t.log_page_lengths[i], 512u);
  }
  EXPECT_EQ(t.log_page_offsets[2], 1024u);
  EXPECT_EQ(t.log_page_offsets[7], 3584u);
}

TEST(Discovery, RereadsWhenTheGenerationCounterChanges) {
  FakeTarget t;
  t.discovery_entries.push_back(make_discovery_entry("nqn.2024-01.io.rdmablk:a", "10.0.0.1", "4420", 1));
  t.bump_genctr_after_log_reads = 2;  // changes while the entries are being read
  FakeConnector conn{&t};
  auto o = test_options(t, conn);
  o.kato_ms = 0;
  auto ctrl = Controller::connect_discovery(o);
  ASSERT_TRUE(ctrl) << ctrl.error().message;
  auto log = (*ctrl)->discovery_log(4096);
  ASSERT_TRUE(log) << log.error().message;
  EXPECT_EQ(log->reads, 2u);
  EXPECT_EQ(log->genctr, 8u);
  EXPECT_EQ(log->entries.size(), 1u);

  t.bump_genctr_after_log_reads = t.log_reads + 1;
  auto once = (*ctrl)->discovery_log(4096, 1);
  ASSERT_FALSE(once);
  EXPECT_NE(once.error().message.find("kept changing"), std::string::npos);
}

TEST(Discovery, EmptyLogAndStrings) {
  FakeTarget t;
  FakeConnector conn{&t};
  auto o = test_options(t, conn);
  auto ctrl = Controller::connect_discovery(o);
  ASSERT_TRUE(ctrl) << ctrl.error().message;
  auto log = (*ctrl)->discovery_log();
  ASSERT_TRUE(log);
  EXPECT_TRUE(log->entries.empty());
  EXPECT_STREQ(trtype_str(3), "tcp");
  EXPECT_STREQ(adrfam_str(1), "ipv4");
  EXPECT_STREQ(subtype_str(2), "nvme subsystem");
  EXPECT_STREQ(subtype_str(3), "current discovery subsystem");
  EXPECT_STREQ(treq_str(0), "not specified");
  EXPECT_STREQ(eflags_str(0), "none");
  EXPECT_STREQ(sectype_str(0), "none");
}

TEST(HostIdentity, UuidRoundTripAndRejects) {
  auto id = parse_uuid("3FA85F64-5717-4562-B3FC-2C963F66AFA6");
  ASSERT_TRUE(id);
  EXPECT_EQ(format_uuid(*id), "3fa85f64-5717-4562-b3fc-2c963f66afa6");
  EXPECT_TRUE(parse_uuid("3fa85f6457174562b3fc2c963f66afa6"));
  for (const char* bad : {"", "3fa85f64-5717-4562-b3fc-2c963f66afa", "3fa85f64-5717-4562-b3fc-2c963f66afag",
                          "3fa85f645-717-4562-b3fc-2c963f66afa6", "3fa85f64-5717-4562-b3fc-2c963f66afa6-"}) {
    EXPECT_FALSE(parse_uuid(bad)) << bad;
  }
}

TEST(HostIdentity, DefaultsFollowNvmeCli) {
  auto dir = std::filesystem::temp_directory_path() / ("rdmablk-hostid-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  HostIdentitySources src{(dir / "hostnqn").string(), (dir / "hostid").string()};

  // No files: a generated uuid NQN whose UUID is the host id, stable across calls.
  auto a = resolve_host_identity(std::nullopt, std::nullopt, src);
  auto b = resolve_host_identity(std::nullopt, std::nullopt, src);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->hostnqn, "nqn.2014-08.org.nvmexpress:uuid:" + format_uuid(a->hostid));
  EXPECT_EQ(a->hostid, b->hostid);

  // /etc/nvme/hostnqn in uuid form: its UUID becomes the host id.
  std::ofstream(src.hostnqn_file) << "nqn.2014-08.org.nvmexpress:uuid:3fa85f64-5717-4562-b3fc-2c963f66afa6\n";
  auto c = resolve_host_identity(std::nullopt, std::nullopt, src);
  ASSERT_TRUE(c);
  EXPECT_EQ(format_uuid(c->hostid), "3fa85f64-5717-4562-b3fc-2c963f66afa6");

  // Flags win; bad values are rejected.
  auto d = resolve_host_identity("nqn.2024-01.io.example:host1", "00000000-0000-0000-0000-000000000001", src);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->hostnqn, "nqn.2024-01.io.example:host1");
  EXPECT_EQ(d->hostid[15], 1);
  EXPECT_FALSE(resolve_host_identity("bogus", std::nullopt, src));
  EXPECT_FALSE(resolve_host_identity(std::nullopt, "xyz", src));
  std::filesystem::remove_all(dir);
}

TEST(Status, DescribeNamesTheStatus) {
  EXPECT_EQ(describe_status(protocol::status::connect_invalid_host), "Connect Invalid Host (SCT 0x1 SC 0x84, DNR)");
  EXPECT_EQ(describe_status(protocol::status::lba_out_of_range).substr(0, 16), "LBA Out of Range");
}
