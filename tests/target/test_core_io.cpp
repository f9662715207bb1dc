// Target core: NVM I/O commands on a ram backend, good and malformed.
#include "target/core_test_util.h"

namespace rdmablk::target::testing {
namespace {

class CoreIo : public ::testing::Test {
 protected:
  void SetUp() override {
    cntlid = h.bring_up(*admin);
    io = h.io_queue(cntlid, 1);
  }
  CoreHarness h;
  std::unique_ptr<FakeTargetQueue> admin = h.queue();
  std::unique_ptr<FakeTargetQueue> io;
  uint16_t cntlid = 0;
};

TEST_F(CoreIo, WriteThenReadReturnsTheData) {
  const auto data = pattern(8 * 512, 3);
  auto w = h.write(*io, 1, 10, 8, data);
  ASSERT_TRUE(w.status().ok()) << p::status_name(w.status());
  EXPECT_EQ(io->fetches, 1);  // the data came by fetch_data (R2T / RDMA READ)
  auto r = h.read(*io, 1, 10, 8, 8 * 512);
  ASSERT_TRUE(r.status().ok());
  ASSERT_TRUE(r.with_data);
  EXPECT_EQ(r.data, data);
  // Unwritten blocks read as zeroes.
  auto z = h.read(*io, 1, 100, 1, 512);
  EXPECT_TRUE(std::all_of(z.data.begin(), z.data.end(), [](uint8_t b) { return b == 0; }));
}

TEST_F(CoreIo, InCapsuleWriteOnA4KNamespace) {
  const auto data = pattern(4096, 9);
  auto w = h.write(*io, 2, 255, 1, data, /*in_capsule=*/true);  // the last block
  ASSERT_TRUE(w.status().ok());
  EXPECT_EQ(io->fetches, 0);
  EXPECT_EQ(h.read(*io, 2, 255, 1, 4096).data, data);
}

TEST(CoreIoRdma, KeyedSglsOnRdma) {
  CoreHarness h;
  auto admin = h.queue(transport::TransportType::rdma);
  const uint16_t cntlid = h.bring_up(*admin);
  auto io = h.queue(transport::TransportType::rdma);
  ASSERT_TRUE(h.connect(*io, 1, 127, kSub1, kHost1, cntlid).status().ok());
  const auto data = pattern(2048, 1);
  ASSERT_TRUE(h.write(*io, 1, 0, 4, data).status().ok());
  EXPECT_EQ(h.read(*io, 1, 0, 4, 2048).data, data);
}

TEST_F(CoreIo, FlushWriteZeroesAndDeallocate) {
  ASSERT_TRUE(h.write(*io, 1, 0, 64, pattern(64 * 512, 5)).status().ok());
  EXPECT_TRUE(h.run(*io, p::make_flush(h.next_cid(), 1)).status().ok());
  // Write Zeroes over 8..15, with DEAC over 16..23.
  EXPECT_TRUE(h.run(*io, sqe_of(p::make_write_zeroes(h.next_cid(), 1, 8, 8))).status().ok());
  EXPECT_TRUE(h.run(*io, sqe_of(p::make_write_zeroes(h.next_cid(), 1, 16, 8, /*deallocate=*/true))).status().ok());
  // DSM deallocate 32..35 and 40..41 (and an empty range that is ignored).
  std::vector<uint8_t> ranges(3 * sizeof(p::DsmRange));
  auto put = [&](int i, uint64_t slba, uint32_t nlb) {
    p::DsmRange r{};
    r.slba.set(slba);
    r.nlb.set(nlb);
    std::memcpy(ranges.data() + i * sizeof(r), &r, sizeof(r));
  };
  put(0, 32, 4);
  put(1, 40, 2);
  put(2, 60, 0);
  auto dsm = p::make_dsm(h.next_cid(), 1, 3, p::DsmCommand::kDeallocate, p::make_transport_sgl(48));
  EXPECT_TRUE(h.run(*io, sqe_of(dsm), ranges).status().ok());
  auto r = h.read(*io, 1, 0, 64, 64 * 512);
  ASSERT_TRUE(r.status().ok());
  const auto expect = pattern(64 * 512, 5);
  for (uint64_t lba = 0; lba < 64; ++lba) {
    const bool zero = (lba >= 8 && lba < 24) || (lba >= 32 && lba < 36) || (lba >= 40 && lba < 42);
    for (uint64_t i = lba * 512; i < (lba + 1) * 512; ++i) {
      ASSERT_EQ(r.data[i], zero ? 0 : expect[i]) << "lba " << lba;
    }
  }
  // DSM with only hints (no AD) is accepted and does nothing.
  auto hint = p::make_dsm(h.next_cid(), 1, 1, p::DsmCommand::kIntegralRead, p::make_transport_sgl(16));
  EXPECT_TRUE(h.run(*io, sqe_of(hint), std::vector<uint8_t>(16, 0)).status().ok());
}

struct BadIo {
  const char* name;
  std::function<p::Sqe(uint16_t cid)> make;
  std::vector<uint8_t> host_data;
  p::Status status;
};

class CoreBadIo : public CoreIo, public ::testing::WithParamInterface<BadIo> {};

TEST_P(CoreBadIo, CompletesWithTheExactStatus) {
  const auto& t = GetParam();
  const uint16_t cid = h.next_cid();
  auto c = h.run(*io, t.make(cid), t.host_data);
  EXPECT_EQ(c.status(), t.status) << p::status_name(c.status()) << " expected " << p::status_name(t.status);
  // The queue goes on.
  EXPECT_TRUE(h.read(*io, 1, 0, 1, 512).status().ok());
}

std::vector<uint8_t> dsm_range(uint64_t slba, uint32_t nlb) {
  p::DsmRange r{};
  r.slba.set(slba);
  r.nlb.set(nlb);
  std::vector<uint8_t> v(sizeof(r));
  std::memcpy(v.data(), &r, sizeof(r));
  return v;
}

const auto tsgl = [](uint32_t n) { return p::make_transport_sgl(n); };
constexpr uint64_t kNsze1 = (1u << 20) / 512;

INSTANTIATE_TEST_SUITE_P(
    Table, CoreBadIo,
    ::testing::Values(
        BadIo{"unknown_opcode",
              [](uint16_t cid) {
                p::Sqe s{};
                s.hdr = p::make_header(0x04, cid, 1);  // Write Uncorrectable: not supported
                return s;
              },
              {}, st::invalid_opcode},
        BadIo{"admin_opcode_on_io_queue",
              [](uint16_t cid) {
                p::Sqe s{};
                s.hdr = p::make_header(0x18, cid, 1);
                return s;
              },
              {}, st::invalid_opcode},
        BadIo{"nsid_not_active", [](uint16_t cid) { return p::to_sqe(p::make_read(cid, 9, 0, 1, tsgl(512))); }, {},
              st::invalid_namespace},
        BadIo{"nsid_zero", [](uint16_t cid) { return p::to_sqe(p::make_read(cid, 0, 0, 1, tsgl(512))); }, {},
              st::invalid_namespace},
        BadIo{"nsid_broadcast_flush", [](uint16_t cid) { return p::make_flush(cid, 0xFFFFFFFF); }, {},
              st::invalid_namespace},
        BadIo{"slba_near_2_64",
              [](uint16_t cid) { return p::to_sqe(p::make_read(cid, 1, ~uint64_t{0}, 2, tsgl(1024))); }, {},
              st::lba_out_of_range},
        BadIo{"range_past_the_end",
              [](uint16_t cid) { return p::to_sqe(p::make_read(cid, 1, kNsze1 - 1, 2, tsgl(1024))); }, {},
              st::lba_out_of_range},
        BadIo{"write_past_the_end",
              [](uint16_t cid) { return p::to_sqe(p::make_write(cid, 1, kNsze1, 1, tsgl(512))); },
              std::vector<uint8_t>(512, 1), st::lba_out_of_range},
        BadIo{"write_zeroes_overflow",
              [](uint16_t cid) { return p::to_sqe(p::make_write_zeroes(cid, 1, ~uint64_t{0} - 3, 8)); }, {},
              st::lba_out_of_range},
        BadIo{"sgl_shorter_than_blocks",
              [](uint16_t cid) { return p::to_sqe(p::make_read(cid, 1, 0, 2, tsgl(512))); }, {},
              st::data_sgl_length_invalid},
        BadIo{"sgl_longer_than_blocks",
              [](uint16_t cid) { return p::to_sqe(p::make_write(cid, 1, 0, 1, tsgl(1024))); },
              std::vector<uint8_t>(1024, 1), st::data_sgl_length_invalid},
        BadIo{"above_mdts",
              [](uint16_t cid) { return p::to_sqe(p::make_read(cid, 1, 0, 65536, tsgl(4096))); }, {},
              st::invalid_field},
        // A second fused half with no first (the pairs: test_core_compare_copy.cpp).
        BadIo{"fused",
              [](uint16_t cid) {
                auto c = p::make_read(cid, 1, 0, 1, tsgl(512));
                c.hdr.set_fuse(p::FusedOperation::second);
                return p::to_sqe(c);
              },
              {}, st::aborted_missing_fused},
        BadIo{"prp_data_pointer",
              [](uint16_t cid) {
                auto c = p::make_read(cid, 1, 0, 1, tsgl(512));
                c.hdr.set_psdt(p::Psdt::prp);
                return p::to_sqe(c);
              },
              {}, st::invalid_field},
        BadIo{"keyed_sgl_on_tcp",
              [](uint16_t cid) { return p::to_sqe(p::make_read(cid, 1, 0, 1, p::make_keyed_sgl(0x1000, 512, 9))); },
              {}, st::sgl_descriptor_type_invalid},
        BadIo{"in_capsule_sgl_for_a_read",
              [](uint16_t cid) { return p::to_sqe(p::make_read(cid, 1, 0, 1, p::make_in_capsule_sgl(0, 512))); },
              {}, st::invalid_field},
        BadIo{"dsm_range_out_of_range",
              [](uint16_t cid) { return p::to_sqe(p::make_dsm(cid, 1, 1, p::DsmCommand::kDeallocate, tsgl(16))); },
              dsm_range(kNsze1 - 2, 4), st::lba_out_of_range},
        BadIo{"dsm_range_overflow",
              [](uint16_t cid) { return p::to_sqe(p::make_dsm(cid, 1, 1, p::DsmCommand::kDeallocate, tsgl(16))); },
              dsm_range(~uint64_t{0}, 2), st::lba_out_of_range},
        BadIo{"dsm_data_shorter_than_ranges",
              [](uint16_t cid) { return p::to_sqe(p::make_dsm(cid, 1, 2, p::DsmCommand::kDeallocate, tsgl(16))); },
              dsm_range(0, 1), st::data_sgl_length_invalid},
        BadIo{"dsm_hints_nsid_not_active",
              [](uint16_t cid) { return p::to_sqe(p::make_dsm(cid, 9, 1, p::DsmCommand::kIntegralRead, tsgl(16))); },
              std::vector<uint8_t>(16, 0), st::invalid_namespace},
        BadIo{"dsm_keyed_sgl_on_tcp",
              [](uint16_t cid) {
                return p::to_sqe(p::make_dsm(cid, 1, 1, p::DsmCommand::kDeallocate, p::make_keyed_sgl(0x1000, 16, 9)));
              },
              {}, st::sgl_descriptor_type_invalid},
        BadIo{"write_zeroes_nsid_not_active",
              [](uint16_t cid) { return p::to_sqe(p::make_write_zeroes(cid, 9, 0, 1)); }, {}, st::invalid_namespace},
        BadIo{"write_zeroes_past_the_end",
              [](uint16_t cid) { return p::to_sqe(p::make_write_zeroes(cid, 1, kNsze1 - 1, 2)); }, {},
              st::lba_out_of_range},
        BadIo{"above_mdts_beats_sgl_length",  // MDTS is checked before the data SGL
              [](uint16_t cid) { return p::to_sqe(p::make_read(cid, 1, 0, 4096, tsgl(512))); }, {}, st::invalid_field},
        BadIo{"sgl_length_beats_lba_range",  // the data SGL is checked before the LBA range
              [](uint16_t cid) { return p::to_sqe(p::make_read(cid, 1, kNsze1, 2, tsgl(512))); }, {},
              st::data_sgl_length_invalid},
        BadIo{"property_get_on_io_queue",
              [](uint16_t cid) { return p::to_sqe(p::make_property_get(cid, 0, true)); }, {}, st::invalid_opcode}),
    [](const auto& p_info) { return std::string(p_info.param.name); });

TEST(CoreIoReadOnly, WritesToAReadOnlyNamespaceAreWriteProtected) {
  CoreHarness h;
  auto admin = h.queue();
  auto io = h.io_queue(h.bring_up(*admin, kSub2, kHost1), 1, kSub2, kHost1);
  EXPECT_EQ(h.write(*io, 1, 0, 1, std::vector<uint8_t>(512, 1)).status(), st::namespace_write_protected);
  EXPECT_EQ(h.run(*io, sqe_of(p::make_write_zeroes(h.next_cid(), 1, 0, 1))).status(), st::namespace_write_protected);
  auto dsm = p::make_dsm(h.next_cid(), 1, 1, p::DsmCommand::kDeallocate, p::make_transport_sgl(16));
  EXPECT_EQ(h.run(*io, sqe_of(dsm), dsm_range(0, 1)).status(), st::namespace_write_protected);
  EXPECT_TRUE(h.read(*io, 1, 0, 1, 512).status().ok());
  EXPECT_TRUE(h.run(*io, p::make_flush(h.next_cid(), 1)).status().ok());
  // DSM with hints only writes nothing: fine on a read-only namespace.
  auto hint = p::make_dsm(h.next_cid(), 1, 1, p::DsmCommand::kIntegralRead, p::make_transport_sgl(16));
  EXPECT_TRUE(h.run(*io, sqe_of(hint), std::vector<uint8_t>(16, 0)).status().ok());
  // Precedence: a wrong data SGL is reported before the write protection, the write protection before the
  // DSM range list transfer.
  EXPECT_EQ(h.write(*io, 1, 0, 1, std::vector<uint8_t>(1024, 1)).status(), st::data_sgl_length_invalid);
  auto short_dsm = p::make_dsm(h.next_cid(), 1, 2, p::DsmCommand::kDeallocate, p::make_transport_sgl(16));
  EXPECT_EQ(h.run(*io, sqe_of(short_dsm), dsm_range(0, 1)).status(), st::namespace_write_protected);
}

// The namespace of a Write or DSM deallocate changes while its data moves (a reload between the R2T and the
// H2CData): the access is checked again, against the namespace as it is when the data arrives.
TEST_F(CoreIo, AccessIsCheckedAgainWhenTheDataArrives) {
  auto changed = [](const std::function<void(SubsystemConfig&)>& fn) {
    auto c = test_config();
    fn(c.subsystems[0]);
    return c;
  };
  const auto removed = changed([](SubsystemConfig& s) { s.namespaces.erase(s.namespaces.begin()); });
  const auto read_only = changed([](SubsystemConfig& s) { s.namespaces[0].read_only = true; });
  const auto shrunk = changed([](SubsystemConfig& s) { s.namespaces[0].size = 64 * 512; });
  const auto block_4k = changed([](SubsystemConfig& s) { s.namespaces[0].block_size = 4096; });
  const auto unchanged = test_config();
  const auto write = [](uint64_t slba) {
    return [slba](uint16_t cid) { return p::to_sqe(p::make_write(cid, 1, slba, 1, tsgl(512))); };
  };
  const auto dsm = [](uint16_t cid) { return p::to_sqe(p::make_dsm(cid, 1, 1, p::DsmCommand::kDeallocate, tsgl(16))); };
  struct Case {
    const char* name;
    const TargetConfig* config;
    std::function<p::Sqe(uint16_t)> make;
    std::vector<uint8_t> data;
    p::Status status;
  };
  const Case cases[] = {
      {"write, namespace removed", &removed, write(0), std::vector<uint8_t>(512, 7), st::invalid_namespace},
      {"write, namespace now read-only", &read_only, write(0), std::vector<uint8_t>(512, 7),
       st::namespace_write_protected},
      {"write, namespace shrunk", &shrunk, write(100), std::vector<uint8_t>(512, 7), st::lba_out_of_range},
      {"write, other block size", &block_4k, write(0), std::vector<uint8_t>(512, 7), st::lba_out_of_range},
      {"dsm, namespace removed", &removed, dsm, dsm_range(0, 1), st::invalid_namespace},
      {"dsm, namespace now read-only", &read_only, dsm, dsm_range(0, 1), st::namespace_write_protected},
      {"dsm, namespace shrunk", &shrunk, dsm, dsm_range(100, 1), st::lba_out_of_range},
      {"write, namespace unchanged", &unchanged, write(100), std::vector<uint8_t>(512, 7), st::success},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    io->hold_fetches = true;
    const uint16_t cid = h.next_cid();
    io->submit(c.make(cid), c.data);
    ASSERT_EQ(io->held_fetches.size(), 1u);
    ASSERT_TRUE(h.core().reload(*c.config));
    h.reactor.run();  // the reactor takes the new namespace table
    io->hold_fetches = false;
    io->deliver_held_fetches();
    h.reactor.run();
    const auto r = io->result(cid);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status(), c.status) << p::status_name(r->status());
    ASSERT_TRUE(h.core().reload(test_config()));
    h.reactor.run();
  }
}

TEST_F(CoreIo, IoOnADisabledControllerIsASequenceError) {
  ASSERT_TRUE(h.prop_set(*admin, p::property::cc, 0).status().ok());  // CC.EN = 0
  EXPECT_EQ(h.read(*io, 1, 0, 1, 512).status(), st::command_sequence_error);
  ASSERT_TRUE(h.enable(*admin).status().ok());
  EXPECT_TRUE(h.read(*io, 1, 0, 1, 512).status().ok());
}

TEST_F(CoreIo, FailedDataFetchCompletesWithTheTransportStatus) {
  io->fetch_status = st::transient_transport_error;
  EXPECT_EQ(h.write(*io, 1, 0, 1, std::vector<uint8_t>(512, 1)).status(), st::transient_transport_error);
}

TEST_F(CoreIo, SmartLogCountsHostCommandsAndDataUnits) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(h.write(*io, 1, 0, 8, pattern(4096, 1)).status().ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(h.read(*io, 1, 0, 8, 4096).status().ok());
  auto io2 = h.io_queue(cntlid, 2);
  ASSERT_TRUE(h.read(*io2, 1, 0, 1, 512).status().ok());
  io2->close("test");  // counters of closed queues are kept
  h.reactor.run();
  const auto log = from_bytes<p::SmartLog>(h.get_log(*admin, p::LogPageId::smart_health, 0, 512).data);
  EXPECT_EQ(log.host_write_commands.low(), 3u);
  EXPECT_EQ(log.host_read_commands.low(), 3u);
  EXPECT_EQ(log.data_units_written.low(), 1u);  // 24 sectors: rounded up to one unit of 1000
  EXPECT_EQ(log.data_units_read.low(), 1u);
}

TEST_F(CoreIo, IoInFlightWhenTheQueueClosesIsReleasedNotCompleted) {
  const uint16_t cid = h.next_cid();
  io->submit(p::to_sqe(p::make_read(cid, 1, 0, 1, p::make_transport_sgl(512))));  // submitted, not reaped
  EXPECT_FALSE(io->result(cid).has_value());
  io->close("connection reset");
  h.reactor.run();  // the poller reaps the backend completion
  EXPECT_FALSE(io->result(cid).has_value());
  ASSERT_EQ(io->released.size(), 1u);
  EXPECT_EQ(io->released[0], cid);
}

}  // namespace
}  // namespace rdmablk::target::testing
