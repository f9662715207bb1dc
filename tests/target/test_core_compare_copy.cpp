// Target core: Compare, fused Compare and Write, and Copy on a ram namespace (commands/compare_copy.cpp,
// commands/fused.cpp): their statuses as NVMe Base 2.0 and the NVM Command Set give them, the data they leave,
// and the pair's atomicity against other writes (core/range_lock.h), with completions held in the backend.
#include <cstring>

#include "protocol/identify.h"
#include "protocol/reservation.h"
#include "target/core_test_util.h"
#include "target/gated_backend.h"

namespace rdmablk::target::testing {
namespace {

using p::FusedOperation;

p::Sqe compare_sqe(uint16_t cid, uint32_t nsid, uint64_t slba, uint32_t blocks,
                   FusedOperation fuse = FusedOperation::normal) {
  auto c = p::make_write(cid, nsid, slba, blocks, p::make_transport_sgl(blocks * 512));
  c.hdr.opcode = static_cast<uint8_t>(p::IoOpcode::compare);
  c.hdr.set_fuse(fuse);
  return p::to_sqe(c);
}

p::Sqe write_sqe(uint16_t cid, uint32_t nsid, uint64_t slba, uint32_t blocks,
                 FusedOperation fuse = FusedOperation::normal) {
  auto c = p::make_write(cid, nsid, slba, blocks, p::make_transport_sgl(blocks * 512));
  c.hdr.set_fuse(fuse);
  return p::to_sqe(c);
}

struct Range {
  uint64_t slba;
  uint32_t blocks;
};

std::vector<uint8_t> copy_ranges(std::initializer_list<Range> ranges) {
  std::vector<uint8_t> out;
  for (const Range& r : ranges) {
    p::CopySourceRange e{};
    e.slba.set(r.slba);
    e.nlb.set(static_cast<uint16_t>(r.blocks - 1));
    const auto* b = reinterpret_cast<const uint8_t*>(&e);
    out.insert(out.end(), b, b + sizeof(e));
  }
  return out;
}

p::Sqe copy_sqe(uint16_t cid, uint32_t nsid, uint64_t dest, uint32_t ranges, uint8_t format = 0) {
  p::CopyCommand c{};
  c.hdr = p::make_header(static_cast<uint8_t>(p::IoOpcode::copy), cid, nsid);
  c.hdr.dptr = p::make_transport_sgl(ranges * 32);
  c.set(dest, ranges);
  c.cdw12.set(c.cdw12.get() | uint32_t{format} << 8);
  return p::to_sqe(c);
}

class CoreCompare : public ::testing::Test {
 protected:
  void SetUp() override {
    cntlid = h.bring_up(*admin);
    io = h.io_queue(cntlid, 1);
    ASSERT_TRUE(h.write(*io, 1, 10, 4, pattern(4 * 512, 7)).status().ok());
  }
  p::Status run(const p::Sqe& sqe, std::vector<uint8_t> data = {}) { return h.run(*io, sqe, std::move(data)).status(); }
  // Submits both halves of a fused pair back to back; returns their statuses.
  std::pair<p::Status, p::Status> caw(uint64_t slba, uint32_t blocks, std::vector<uint8_t> expect,
                                      std::vector<uint8_t> replace) {
    const uint16_t c1 = h.next_cid(), c2 = h.next_cid();
    io->submit(compare_sqe(c1, 1, slba, blocks, FusedOperation::first), std::move(expect));
    io->submit(write_sqe(c2, 1, slba, blocks, FusedOperation::second), std::move(replace));
    h.reactor.run();
    auto r1 = io->result(c1), r2 = io->result(c2);
    EXPECT_TRUE(r1 && r2) << "a half did not complete";
    return {r1 ? r1->status() : p::status::internal_error, r2 ? r2->status() : p::status::internal_error};
  }
  CoreHarness h;
  std::unique_ptr<FakeTargetQueue> admin = h.queue();
  std::unique_ptr<FakeTargetQueue> io;
  uint16_t cntlid = 0;
};

TEST_F(CoreCompare, CompareMatchesOrFailsWithCompareFailure) {
  EXPECT_TRUE(run(compare_sqe(h.next_cid(), 1, 10, 4), pattern(4 * 512, 7)).ok());
  auto other = pattern(4 * 512, 7);
  other[1000] ^= 1;
  const p::Status s = run(compare_sqe(h.next_cid(), 1, 10, 4), other);
  EXPECT_TRUE(s.is(p::status::compare_failure)) << p::status_name(s);
  EXPECT_EQ(s.sct(), p::StatusCodeType::media_error);  // SCT 2h, SC 85h (not Internal Error)
  EXPECT_TRUE(s.dnr());
  // Out of range and on a missing namespace: the spec's statuses.
  EXPECT_TRUE(run(compare_sqe(h.next_cid(), 1, 2047, 2), pattern(1024, 1)).is(p::status::lba_out_of_range));
  EXPECT_TRUE(run(compare_sqe(h.next_cid(), 9, 0, 1), pattern(512, 1)).is(p::status::invalid_namespace));
}

TEST_F(CoreCompare, IdentifyAnnouncesCompareFusedAndCopy) {
  auto id = h.identify(*admin, p::Cns::controller, 0);
  ASSERT_TRUE(id.status().ok());
  const auto ctrl = from_bytes<p::IdentifyController>(id.data);
  EXPECT_NE(ctrl.oncs.get() & p::idctl::kOncsCompare, 0);
  EXPECT_NE(ctrl.oncs.get() & p::idctl::kOncsCopy, 0);
  EXPECT_NE(ctrl.fuses.get() & p::idctl::kFusesCompareWrite, 0);
  EXPECT_EQ(ctrl.ocfs.get() & 1, 1);
  auto ns = h.identify(*admin, p::Cns::namespace_, 1);
  ASSERT_TRUE(ns.status().ok());
  const auto idns = from_bytes<p::IdentifyNamespace>(ns.data);
  EXPECT_GT(idns.mcl.get(), 0u);
  EXPECT_GT(idns.mssrl.get(), 0u);
  EXPECT_LE(idns.mssrl.get(), idns.mcl.get());
  EXPECT_EQ(idns.msrc, 127);
}

TEST_F(CoreCompare, FusedCompareAndWriteReplacesOnlyOnAMatch) {
  auto [c, w] = caw(10, 4, pattern(4 * 512, 7), pattern(4 * 512, 8));
  EXPECT_TRUE(c.ok()) << p::status_name(c);
  EXPECT_TRUE(w.ok()) << p::status_name(w);
  EXPECT_EQ(h.read(*io, 1, 10, 4, 4 * 512).data, pattern(4 * 512, 8));
  // The old data no longer matches: nothing is written, the Write says why.
  std::tie(c, w) = caw(10, 4, pattern(4 * 512, 7), pattern(4 * 512, 9));
  EXPECT_TRUE(c.is(p::status::compare_failure)) << p::status_name(c);
  EXPECT_TRUE(w.is(p::status::aborted_failed_fused)) << p::status_name(w);
  EXPECT_EQ(h.read(*io, 1, 10, 4, 4 * 512).data, pattern(4 * 512, 8));
}

TEST_F(CoreCompare, AFusedHalfWithoutItsPartnerIsMissingFused) {
  // A first half followed by an ordinary command: the first is Missing Fused, the other runs.
  const uint16_t first = h.next_cid();
  io->submit(compare_sqe(first, 1, 10, 4, FusedOperation::first), pattern(4 * 512, 7));
  h.reactor.run();
  EXPECT_FALSE(io->result(first).has_value());  // held until the next command
  auto r = h.read(*io, 1, 10, 4, 4 * 512);
  EXPECT_TRUE(r.status().ok());
  ASSERT_TRUE(io->result(first).has_value());
  EXPECT_TRUE(io->result(first)->status().is(p::status::aborted_missing_fused));
  // A lone second half.
  const p::Status s = run(write_sqe(h.next_cid(), 1, 10, 4, FusedOperation::second), pattern(4 * 512, 1));
  EXPECT_TRUE(s.is(p::status::aborted_missing_fused)) << p::status_name(s);
  EXPECT_EQ(h.read(*io, 1, 10, 4, 4 * 512).data, pattern(4 * 512, 7));  // nothing written
  // FUSE 11b is reserved.
  auto bad = write_sqe(h.next_cid(), 1, 10, 1);
  bad.hdr.flags = static_cast<uint8_t>(bad.hdr.flags | 3);
  EXPECT_TRUE(run(bad, pattern(512, 1)).is(p::status::invalid_field));
}

TEST_F(CoreCompare, HalvesThatDisagreeOrAreNotCompareThenWriteAreRefused) {
  // Different ranges: Invalid Field, both, nothing written.
  const uint16_t c1 = h.next_cid(), c2 = h.next_cid();
  io->submit(compare_sqe(c1, 1, 10, 4, FusedOperation::first), pattern(4 * 512, 7));
  io->submit(write_sqe(c2, 1, 11, 4, FusedOperation::second), pattern(4 * 512, 1));
  h.reactor.run();
  EXPECT_TRUE(io->result(c1)->status().is(p::status::invalid_field));
  EXPECT_TRUE(io->result(c2)->status().is(p::status::invalid_field));
  // A Write as the first half: it fails (Invalid Field), its second is Failed Fused.
  const uint16_t c3 = h.next_cid(), c4 = h.next_cid();
  io->submit(write_sqe(c3, 1, 10, 4, FusedOperation::first), pattern(4 * 512, 1));
  io->submit(write_sqe(c4, 1, 10, 4, FusedOperation::second), pattern(4 * 512, 1));
  h.reactor.run();
  EXPECT_TRUE(io->result(c3)->status().is(p::status::invalid_field));
  EXPECT_TRUE(io->result(c4)->status().is(p::status::aborted_failed_fused));
  // A first half out of range: LBA Out of Range for it, Failed Fused for the Write.
  auto [c, w] = caw(2047, 2, pattern(1024, 1), pattern(1024, 2));
  EXPECT_TRUE(c.is(p::status::lba_out_of_range)) << p::status_name(c);
  EXPECT_TRUE(w.is(p::status::aborted_failed_fused)) << p::status_name(w);
  EXPECT_EQ(h.read(*io, 1, 10, 4, 4 * 512).data, pattern(4 * 512, 7));
}

TEST_F(CoreCompare, CopyCopiesRangesInsideTheTarget) {
  ASSERT_TRUE(h.write(*io, 1, 100, 2, pattern(2 * 512, 3)).status().ok());
  const uint16_t cid = h.next_cid();
  EXPECT_TRUE(run(copy_sqe(cid, 1, 500, 2), copy_ranges({{100, 2}, {10, 4}})).ok());
  auto r = h.read(*io, 1, 500, 6, 6 * 512);
  auto expect = pattern(2 * 512, 3);
  const auto second = pattern(4 * 512, 7);
  expect.insert(expect.end(), second.begin(), second.end());
  EXPECT_EQ(r.data, expect);
  // Overlapping source and destination: every source is read before the write.
  EXPECT_TRUE(run(copy_sqe(h.next_cid(), 1, 11, 1), copy_ranges({{10, 4}})).ok());
  auto o = h.read(*io, 1, 11, 4, 4 * 512);
  EXPECT_EQ(o.data, pattern(4 * 512, 7));
}

TEST_F(CoreCompare, CopyRefusesWhatItCannotDoWithTheSpecsStatuses) {
  // Destination or a source past the end.
  EXPECT_TRUE(run(copy_sqe(h.next_cid(), 1, 2047, 1), copy_ranges({{10, 2}})).is(p::status::lba_out_of_range));
  EXPECT_TRUE(run(copy_sqe(h.next_cid(), 1, 0, 1), copy_ranges({{2047, 2}})).is(p::status::lba_out_of_range));
  // Another descriptor format: Invalid Field. More ranges than MSRC + 1: Command Size Limit Exceeded.
  EXPECT_TRUE(run(copy_sqe(h.next_cid(), 1, 0, 1, 1), copy_ranges({{10, 1}})).is(p::status::invalid_field));
  std::vector<uint8_t> many;
  for (int i = 0; i < 129; ++i) {
    const auto one = copy_ranges({{static_cast<uint64_t>(i), 1}});
    many.insert(many.end(), one.begin(), one.end());
  }
  EXPECT_TRUE(run(copy_sqe(h.next_cid(), 1, 1000, 129), many).is(p::status::command_size_limit_exceeded));
  // More blocks than MCL (one MDTS here).
  const uint32_t mcl = from_bytes<p::IdentifyNamespace>(h.identify(*admin, p::Cns::namespace_, 1).data).mcl.get();
  std::vector<uint8_t> big;
  for (uint32_t done = 0; done <= mcl; done += 256) {
    const auto one = copy_ranges({{0, 256}});
    big.insert(big.end(), one.begin(), one.end());
  }
  const auto n = static_cast<uint32_t>(big.size() / 32);
  ASSERT_LE(n, 128u);
  EXPECT_TRUE(run(copy_sqe(h.next_cid(), 1, 0, n), big).is(p::status::command_size_limit_exceeded));
  // A read-only namespace (subsystem 2): write protected.
  auto admin2 = h.queue();
  const uint16_t c2 = h.bring_up(*admin2, kSub2);
  auto io2 = h.io_queue(c2, 1, kSub2);
  EXPECT_TRUE(h.run(*io2, copy_sqe(h.next_cid(), 1, 0, 1), copy_ranges({{8, 1}}))
                  .status()
                  .is(p::status::namespace_write_protected));
}

// With completions held in the backend: a fused pair holds its blocks against every other write.
class CoreCompareAtomic : public ::testing::Test {
 protected:
  CoreCompareAtomic() {
    set_backend_wrapper([this](std::unique_ptr<backend::Backend> b) -> std::unique_ptr<backend::Backend> {
      return std::make_unique<GatedBackend>(std::move(b), gate);
    });
    gate.depth = 64;
    h = std::make_unique<CoreHarness>();
    admin = h->queue();
  }
  ~CoreCompareAtomic() override { set_backend_wrapper({}); }
  void SetUp() override {
    cntlid = h->bring_up(*admin);
    io = h->io_queue(cntlid, 1);
    io2 = h->io_queue(cntlid, 2);
    ASSERT_TRUE(h->write(*io, 1, 10, 4, pattern(4 * 512, 7)).status().ok());
    gate.accepted.clear();
  }
  Gate gate;
  std::unique_ptr<CoreHarness> h;
  std::unique_ptr<FakeTargetQueue> admin, io, io2;
  uint16_t cntlid = 0;
};

TEST_F(CoreCompareAtomic, WritesOverlappingALockedRangeWaitForThePair) {
  gate.open = 0;  // nothing completes for now
  const uint16_t c1 = h->next_cid(), c2 = h->next_cid();
  io->submit(compare_sqe(c1, 1, 10, 4, FusedOperation::first), pattern(4 * 512, 7));
  io->submit(write_sqe(c2, 1, 10, 4, FusedOperation::second), pattern(4 * 512, 8));
  h->reactor.run();
  ASSERT_EQ(gate.accepted, (std::vector<uint64_t>{10}));  // the pair's read, under its lock
  // From another queue: an overlapping write waits, one elsewhere goes on.
  const uint16_t over = h->next_cid(), apart = h->next_cid();
  io2->submit(write_sqe(over, 1, 12, 1), pattern(512, 9));
  io2->submit(write_sqe(apart, 1, 100, 1), pattern(512, 9));
  h->reactor.run();
  EXPECT_EQ(gate.accepted, (std::vector<uint64_t>{10, 100}));
  gate.open = UINT_MAX;
  h->reactor.run();
  h->reactor.run();
  ASSERT_TRUE(io->result(c1) && io->result(c2) && io2->result(over) && io2->result(apart));
  EXPECT_TRUE(io->result(c1)->status().ok());
  EXPECT_TRUE(io->result(c2)->status().ok());
  EXPECT_TRUE(io2->result(over)->status().ok());
  // The pair's write before the waiting one: block 12 holds the later write.
  EXPECT_EQ(gate.accepted, (std::vector<uint64_t>{10, 100, 10, 12}));
  auto expect = pattern(4 * 512, 8);
  const auto later = pattern(512, 9);
  std::copy(later.begin(), later.end(), expect.begin() + 2 * 512);
  EXPECT_EQ(h->read(*io, 1, 10, 4, 4 * 512).data, expect);
}

TEST_F(CoreCompareAtomic, APairWaitsForWritesAlreadyInFlight) {
  gate.open = 0;
  const uint16_t w = h->next_cid();
  io2->submit(write_sqe(w, 1, 11, 1), pattern(512, 5));
  h->reactor.run();
  ASSERT_EQ(gate.accepted, (std::vector<uint64_t>{11}));
  const uint16_t c1 = h->next_cid(), c2 = h->next_cid();
  auto expect = pattern(4 * 512, 7);
  const auto mid = pattern(512, 5);
  std::copy(mid.begin(), mid.end(), expect.begin() + 512);  // what the write in flight leaves
  io->submit(compare_sqe(c1, 1, 10, 4, FusedOperation::first), expect);
  io->submit(write_sqe(c2, 1, 10, 4, FusedOperation::second), pattern(4 * 512, 8));
  h->reactor.run();
  EXPECT_EQ(gate.accepted, (std::vector<uint64_t>{11}));  // the pair has not read yet
  gate.open = UINT_MAX;
  h->reactor.run();
  h->reactor.run();
  ASSERT_TRUE(io->result(c1) && io->result(c2));
  EXPECT_TRUE(io->result(c1)->status().ok()) << p::status_name(io->result(c1)->status());
  EXPECT_TRUE(io->result(c2)->status().ok());
  EXPECT_EQ(h->read(*io, 1, 10, 4, 4 * 512).data, pattern(4 * 512, 8));
}

TEST_F(CoreCompareAtomic, AQueueClosingUnderALockReleasesEverything) {
  gate.open = 0;
  const uint16_t c1 = h->next_cid(), c2 = h->next_cid(), over = h->next_cid();
  io->submit(compare_sqe(c1, 1, 10, 4, FusedOperation::first), pattern(4 * 512, 7));
  io->submit(write_sqe(c2, 1, 10, 4, FusedOperation::second), pattern(4 * 512, 8));
  io2->submit(write_sqe(over, 1, 10, 1), pattern(512, 9));
  h->reactor.run();
  io2->close("test");  // the waiting write's host is gone
  h->reactor.run();
  gate.open = UINT_MAX;
  h->reactor.run();
  h->reactor.run();
  EXPECT_TRUE(io->result(c1)->status().ok());
  EXPECT_FALSE(io2->result(over).has_value());  // released, never written
  EXPECT_EQ(h->read(*io, 1, 10, 4, 4 * 512).data, pattern(4 * 512, 8));
}

}  // namespace
}  // namespace rdmablk::target::testing
