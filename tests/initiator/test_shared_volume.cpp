// The host side of shared volumes against the fake target: how Compare, fused Compare and Write, Copy and
// the four reservation commands are encoded (opcodes, CDW10-12 bits, the data they carry), the statuses
// the caller sees, and the parsing of Reservation Status data (plain, extended, truncated, too short).
#include <gtest/gtest.h>

#include <cstring>

#include "initiator/fake_target.h"
#include "initiator/host/controller.h"
#include "initiator/host/shared_volume.h"
#include "protocol/reservation.h"

using namespace rdmablk;
using namespace rdmablk::initiator;
using namespace rdmablk::testing;
using namespace std::chrono_literals;

namespace {

struct Done {
  int calls = 0;
  protocol::Status status{};
};

void on_done(transport::HostCommand& cmd, const protocol::Cqe& cqe) noexcept {
  auto* d = static_cast<Done*>(cmd.context);
  ++d->calls;
  d->status = cqe.get_status();
}

class SharedVolume : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = Controller::connect(test_options(t, conn));
    ASSERT_TRUE(c) << c.error().message;
    ctrl = std::move(*c);
    auto q = ctrl->connect_io_queue(1, 16);
    ASSERT_TRUE(q) << q.error().message;
    io = std::move(*q);
  }

  transport::HostCommand command(Done& d) {
    transport::HostCommand cmd{};
    cmd.on_complete = &on_done;
    cmd.context = &d;
    return cmd;
  }

  // Polls until every one of `done` has completed (the fake answers on the first poll).
  void wait(std::initializer_list<Done*> done) {
    auto all = [&] {
      for (Done* d : done) {
        if (d->calls == 0) return false;
      }
      return true;
    };
    while (!all()) ASSERT_GE(io->poll(1, 100ms), 0);
  }

  std::vector<uint8_t> ns_bytes(uint64_t slba, uint32_t blocks) {
    auto* ns = t.find_ns(1);
    return {ns->data.begin() + static_cast<long>(slba * 512),
            ns->data.begin() + static_cast<long>((slba + blocks) * 512)};
  }

  void fill_ns(uint64_t slba, const std::vector<uint8_t>& bytes) {
    std::memcpy(t.find_ns(1)->data.data() + slba * 512, bytes.data(), bytes.size());
  }

  FakeTarget t;
  FakeConnector conn{&t};
  std::unique_ptr<Controller> ctrl;
  std::unique_ptr<IoQueue> io;
};

TEST_F(SharedVolume, CompareEncodesTheBlocksAndReportsCompareFailure) {
  fill_ns(20, std::vector<uint8_t>(1024, 0x5C));
  std::vector<uint8_t> same(1024, 0x5C), other(1024, 0x5D);
  Done a, b;
  auto ca = command(a), cb = command(b);
  ASSERT_TRUE(io->submit_compare(ca, 1, 20, 2, same).ok());
  ASSERT_TRUE(io->submit_compare(cb, 1, 20, 2, other).ok());
  wait({&a, &b});
  EXPECT_TRUE(a.status.ok());
  EXPECT_EQ(b.status, protocol::status::compare_failure);

  const auto& sqe = t.io_log.back();
  EXPECT_EQ(sqe.hdr.opcode, 0x05);
  EXPECT_EQ(sqe.hdr.fuse(), protocol::FusedOperation::normal);
  const auto rw = protocol::as<protocol::ReadWriteCommand>(sqe);
  EXPECT_EQ(rw.start_lba(), 20u);
  EXPECT_EQ(rw.nlb(), 1u) << "NLB is 0-based";
  EXPECT_EQ(t.io_data.back(), other) << "the Compare carries the data to the controller";
  EXPECT_EQ(ns_bytes(20, 2), same) << "a Compare writes nothing";
}

TEST_F(SharedVolume, CompareRefusesZeroBlocksAndTransfersAboveMdts) {
  Done d;
  auto cmd = command(d);
  std::vector<uint8_t> big(256 * 1024);
  EXPECT_EQ(io->submit_compare(cmd, 1, 0, 0, big), protocol::status::invalid_field);
  EXPECT_EQ(io->submit_compare(cmd, 1, 0, 512, big), protocol::status::invalid_field);
  EXPECT_TRUE(t.io_log.empty());
}

TEST_F(SharedVolume, FusedPairIsAdjacentWithItsFuseBitsAndWritesOnAMatch) {
  fill_ns(8, std::vector<uint8_t>(512, 0x11));
  std::vector<uint8_t> expect(512, 0x11), replace(512, 0x22);
  Done c, w;
  auto first = command(c), second = command(w);
  ASSERT_TRUE(io->submit_compare_and_write(first, second, 1, 8, 1, expect, replace, /*fua=*/true).ok());
  wait({&c, &w});
  EXPECT_TRUE(c.status.ok());
  EXPECT_TRUE(w.status.ok());
  EXPECT_EQ(ns_bytes(8, 1), replace);

  ASSERT_EQ(t.io_log.size(), 2u);
  const auto cmp = protocol::as<protocol::ReadWriteCommand>(t.io_log[0]);
  const auto wr = protocol::as<protocol::ReadWriteCommand>(t.io_log[1]);
  EXPECT_EQ(cmp.hdr.opcode, 0x05);
  EXPECT_EQ(cmp.hdr.flags & protocol::kSqeFuseMask, 0x1) << "FUSE 01b: first half";
  EXPECT_EQ(wr.hdr.opcode, 0x01);
  EXPECT_EQ(wr.hdr.flags & protocol::kSqeFuseMask, 0x2) << "FUSE 10b: second half";
  EXPECT_EQ(cmp.start_lba(), wr.start_lba());
  EXPECT_EQ(cmp.nlb(), wr.nlb());
  EXPECT_FALSE(cmp.fua());
  EXPECT_TRUE(wr.fua());
  EXPECT_EQ(t.io_data[0], expect);
  EXPECT_EQ(t.io_data[1], replace);
}

TEST_F(SharedVolume, FusedMiscompareFailsTheCompareAndAbortsTheWrite) {
  fill_ns(8, std::vector<uint8_t>(512, 0x11));
  std::vector<uint8_t> expect(512, 0x33), replace(512, 0x22);
  Done c, w;
  auto first = command(c), second = command(w);
  ASSERT_TRUE(io->submit_compare_and_write(first, second, 1, 8, 1, expect, replace).ok());
  wait({&c, &w});
  EXPECT_EQ(c.status, protocol::status::compare_failure);
  EXPECT_TRUE(w.status.is(protocol::status::aborted_failed_fused)) << protocol::status_name(w.status);
  EXPECT_EQ(ns_bytes(8, 1), std::vector<uint8_t>(512, 0x11)) << "nothing written";
}

TEST_F(SharedVolume, FusedPairWithBuffersOfDifferentSizesIsRefusedWhole) {
  std::vector<uint8_t> expect(512), replace(1024);
  Done c, w;
  auto first = command(c), second = command(w);
  EXPECT_EQ(io->submit_compare_and_write(first, second, 1, 1, 1, expect, replace), protocol::status::invalid_field);
  EXPECT_EQ(io->queue().outstanding(), 0u);
}

TEST_F(SharedVolume, CopyEncodesDestinationRangeCountAndFormat0Entries) {
  fill_ns(100, std::vector<uint8_t>(512, 0xA1));
  fill_ns(200, std::vector<uint8_t>(1024, 0xB2));
  const std::vector<CopyRange> ranges{{100, 1}, {200, 2}};
  auto list = encode_copy_ranges(ranges);
  ASSERT_TRUE(list) << list.error().message;
  ASSERT_EQ(list->size(), 64u);
  EXPECT_EQ(protocol::load<protocol::CopySourceRange>(list->data() + 32).slba.get(), 200u);
  EXPECT_EQ(protocol::load<protocol::CopySourceRange>(list->data() + 32).nlb.get(), 1u) << "NLB is 0-based";
  EXPECT_EQ((*list)[8], 100) << "SLBA at byte 8, little endian";

  Done d;
  auto cmd = command(d);
  ASSERT_TRUE(io->submit_copy(cmd, 1, 300, *list).ok());
  wait({&d});
  EXPECT_TRUE(d.status.ok());
  const auto c = protocol::as<protocol::CopyCommand>(t.io_log.back());
  EXPECT_EQ(c.hdr.opcode, 0x19);
  EXPECT_EQ(c.sdlba.get(), 300u);
  EXPECT_EQ(c.cdw12.get() & 0xFF, 1u) << "NR is 0-based";
  EXPECT_EQ(c.descriptor_format(), 0);
  EXPECT_FALSE(c.fua());
  EXPECT_EQ(t.io_data.back(), *list);
  std::vector<uint8_t> expect(512, 0xA1);
  expect.insert(expect.end(), 1024, 0xB2);
  EXPECT_EQ(ns_bytes(300, 3), expect);

  // Not whole entries, none, too many: refused before anything is sent.
  const auto sent = t.io_log.size();
  std::vector<uint8_t> odd(40), none, many(257 * 32);
  EXPECT_EQ(io->submit_copy(cmd, 1, 0, odd), protocol::status::invalid_field);
  EXPECT_EQ(io->submit_copy(cmd, 1, 0, none), protocol::status::invalid_field);
  EXPECT_EQ(io->submit_copy(cmd, 1, 0, many), protocol::status::invalid_field);
  EXPECT_EQ(t.io_log.size(), sent);
}

TEST(CopyRanges, RefusesEmptyTooManyAndBadBlockCounts) {
  EXPECT_FALSE(encode_copy_ranges({}));
  std::vector<CopyRange> many(257, CopyRange{0, 1});
  EXPECT_FALSE(encode_copy_ranges(many));
  EXPECT_TRUE(encode_copy_ranges(std::span(many).first(256)));
  const CopyRange zero{5, 0}, huge{5, 65537}, max{5, 65536};
  EXPECT_FALSE(encode_copy_ranges(std::span(&zero, 1)));
  EXPECT_FALSE(encode_copy_ranges(std::span(&huge, 1)));
  auto m = encode_copy_ranges(std::span(&max, 1));
  ASSERT_TRUE(m);
  EXPECT_EQ(protocol::load<protocol::CopySourceRange>(m->data()).nlb.get(), 0xFFFFu);
}

// ---------------------------------------------------------------------------------------------------------
// Reservations
// ---------------------------------------------------------------------------------------------------------

TEST(ReservationEncoding, Cdw10BitsOfRegisterAcquireRelease) {
  using namespace protocol;
  auto reg =
      as<ReservationRegisterCommand>(make_reservation_register(3, RegisterAction::replace_key, true, ChangePtpl::set));
  EXPECT_EQ(reg.hdr.opcode, 0x0D);
  EXPECT_EQ(reg.hdr.nsid.get(), 3u);
  EXPECT_EQ(reg.hdr.psdt(), Psdt::sgl_mptr_contiguous);
  EXPECT_EQ(reg.cdw10.get(), 0xC000000Au) << "RREGA 2 in 2:0, IEKEY bit 3, CPTPL 3 in 31:30";

  auto acq = as<ReservationAcquireCommand>(make_reservation_acquire(1, AcquireAction::preempt_and_abort, false,
                                                                    ReservationType::exclusive_access_all_registrants));
  EXPECT_EQ(acq.hdr.opcode, 0x11);
  EXPECT_EQ(acq.cdw10.get(), 0x0602u) << "RACQA 2 in 2:0, RTYPE 6 in 15:8";

  auto rel = as<ReservationReleaseCommand>(
      make_reservation_release(1, ReleaseAction::clear, true, ReservationType::write_exclusive));
  EXPECT_EQ(rel.hdr.opcode, 0x15);
  EXPECT_EQ(rel.cdw10.get(), 0x0109u) << "RRELA 1, IEKEY, RTYPE 1";

  auto rep = as<ReservationReportCommand>(make_reservation_report(1, true, 4096));
  EXPECT_EQ(rep.hdr.opcode, 0x0E);
  EXPECT_EQ(rep.cdw10.get(), 1023u) << "NUMD is 0-based dwords";
  EXPECT_EQ(rep.cdw11.get(), 1u) << "EDS";
}

TEST_F(SharedVolume, ReservationCommandsCarryTheirKeysLittleEndian) {
  using namespace protocol;
  ASSERT_TRUE(reservation_register(*io, 1, RegisterAction::register_key, false, ChangePtpl::no_change, 0x1111,
                                   0x0102030405060708));
  ASSERT_EQ(t.io_data.back().size(), 16u);
  EXPECT_EQ(load<ReservationRegisterData>(t.io_data.back().data()).crkey.get(), 0x1111u);
  EXPECT_EQ(t.io_data.back()[8], 0x08) << "NRKEY at byte 8, little endian";
  EXPECT_EQ(t.io_log.back().hdr.opcode, 0x0D);

  ASSERT_TRUE(reservation_acquire(*io, 1, AcquireAction::preempt, false, ReservationType::write_exclusive, 0xAA, 0xBB));
  ASSERT_EQ(t.io_data.back().size(), 16u);
  EXPECT_EQ(load<ReservationAcquireData>(t.io_data.back().data()).crkey.get(), 0xAAu);
  EXPECT_EQ(load<ReservationAcquireData>(t.io_data.back().data()).prkey.get(), 0xBBu);
  EXPECT_EQ(as<ReservationAcquireCommand>(t.io_log.back()).action(), 1);

  ASSERT_TRUE(reservation_release(*io, 1, ReleaseAction::release, false, ReservationType::write_exclusive, 0xAA));
  ASSERT_EQ(t.io_data.back().size(), 8u);
  EXPECT_EQ(load<ReservationReleaseData>(t.io_data.back().data()).crkey.get(), 0xAAu);
}

TEST_F(SharedVolume, AFailedReservationCommandNamesTheStatus) {
  t.reservation_answer = protocol::status::reservation_conflict;
  auto r = reservation_acquire(*io, 1, protocol::AcquireAction::acquire, false,
                               protocol::ReservationType::write_exclusive, 1, 0);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("Reservation Acquire failed: Reservation Conflict"), std::string::npos)
      << r.error().message;
}

std::vector<uint8_t> report_bytes(bool eds, uint16_t regctl, unsigned entries) {
  using namespace protocol;
  const std::size_t header = eds ? 64 : 24, entry = eds ? 64 : 24;
  std::vector<uint8_t> out(header + entries * entry);
  ReservationStatusHeader h{};
  h.gen.set(0x01020304);
  h.rtype = 5;
  h.regctl = {static_cast<uint8_t>(regctl & 0xFF), static_cast<uint8_t>(regctl >> 8)};
  h.ptpls = 1;
  store(out.data(), h);
  for (unsigned i = 0; i < entries; ++i) {
    uint8_t* at = out.data() + header + i * entry;
    if (eds) {
      RegisteredControllerExt e{};
      e.cntlid.set(static_cast<uint16_t>(0x10 + i));
      e.rcsts = i == 0 ? 1 : 0;
      e.rkey.set(0xABCD0000 + i);
      for (std::size_t b = 0; b < 16; ++b) e.hostid[b] = static_cast<uint8_t>(0xF0 + b);
      store(at, e);
    } else {
      RegisteredController e{};
      e.cntlid.set(kCntlidNone);
      e.rcsts = 0;
      e.hostid.set(0x1122334455667788 + i);
      e.rkey.set(0x99 + i);
      store(at, e);
    }
  }
  return out;
}

TEST(ReservationReport, ParsesHeaderAndEntries) {
  auto s = parse_reservation_report(report_bytes(false, 2, 2), false);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->generation, 0x01020304u);
  EXPECT_EQ(s->rtype, 5);
  EXPECT_EQ(s->regctl, 2);
  EXPECT_EQ(s->ptpls, 1);
  EXPECT_FALSE(s->truncated());
  ASSERT_EQ(s->registrants.size(), 2u);
  EXPECT_EQ(s->registrants[1].cntlid, protocol::kCntlidNone);
  EXPECT_EQ(s->registrants[1].hostid64(), 0x1122334455667789u);
  EXPECT_EQ(s->registrants[1].rkey, 0x9Au);
  EXPECT_FALSE(s->registrants[1].holds_reservation());
}

TEST(ReservationReport, ParsesExtendedEntriesWith128BitHostIds) {
  auto s = parse_reservation_report(report_bytes(true, 1, 1), true);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE(s->extended);
  ASSERT_EQ(s->registrants.size(), 1u);
  const auto& r = s->registrants[0];
  EXPECT_EQ(r.cntlid, 0x10);
  EXPECT_TRUE(r.holds_reservation());
  EXPECT_EQ(r.rkey, 0xABCD0000u);
  EXPECT_EQ(r.hostid[0], 0xF0);
  EXPECT_EQ(r.hostid[15], 0xFF);
}

TEST(ReservationReport, TruncatedAndShortData) {
  // The controller counts 3 registrants; the data read holds 1 whole entry and half of the next.
  auto bytes = report_bytes(false, 3, 2);
  bytes.resize(24 + 24 + 12);
  auto s = parse_reservation_report(bytes, false);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->regctl, 3);
  EXPECT_EQ(s->registrants.size(), 1u);
  EXPECT_TRUE(s->truncated());

  // Header only.
  auto h = parse_reservation_report(std::span(bytes).first(24), false);
  ASSERT_TRUE(h);
  EXPECT_TRUE(h->registrants.empty());

  // Shorter than the header (24 bytes, 64 extended): an error.
  EXPECT_FALSE(parse_reservation_report(std::span(bytes).first(20), false));
  auto ext = report_bytes(true, 0, 0);
  EXPECT_FALSE(parse_reservation_report(std::span(ext).first(40), true));
  // More entries in the data than REGCTL counts: only REGCTL.
  auto extra = report_bytes(false, 1, 3);
  auto one = parse_reservation_report(extra, false);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->registrants.size(), 1u);
}

TEST_F(SharedVolume, ReportReadsTheBytesAskedForAndParsesThem) {
  t.reservation_report = report_bytes(true, 1, 1);
  auto s = reservation_report(*io, 1, true, 128);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->registrants.size(), 1u);
  const auto rep = protocol::as<protocol::ReservationReportCommand>(t.io_log.back());
  EXPECT_EQ(rep.data_length(), 128u);
  EXPECT_TRUE(rep.extended());

  const auto sent = t.io_log.size();
  EXPECT_FALSE(reservation_report(*io, 1, false, 30)) << "not whole dwords";
  EXPECT_FALSE(reservation_report(*io, 1, true, 24)) << "shorter than the extended header";
  EXPECT_EQ(t.io_log.size(), sent);
}

}  // namespace
