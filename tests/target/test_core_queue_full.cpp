// Target core: a full backend queue never fails a command. The command waits on its namespace's channel, first
// come first served, and goes on when a completion makes room (as SPDK's NVMe-oF target does with
// spdk_bdev_queue_io_wait on -ENOMEM); the host never sees the backend's queue_full.
#include "target/core_test_util.h"
#include "target/gated_backend.h"

namespace rdmablk::target::testing {
namespace {

class CoreQueueFull : public ::testing::Test {
 protected:
  CoreQueueFull() {
    set_backend_wrapper([this](std::unique_ptr<backend::Backend> b) -> std::unique_ptr<backend::Backend> {
      return std::make_unique<GatedBackend>(std::move(b), gate);
    });
    h = std::make_unique<CoreHarness>();
    admin = h->queue();
  }
  ~CoreQueueFull() override { set_backend_wrapper({}); }
  void SetUp() override {
    cntlid = h->bring_up(*admin);
    io = h->io_queue(cntlid, 1);
    io->completions.clear();  // the Connect's
  }

  uint16_t submit_write(uint64_t slba, uint32_t blocks, uint8_t seed) {
    const uint16_t cid = h->next_cid();
    io->submit(sqe_of(p::make_write(cid, 1, slba, blocks, p::make_transport_sgl(blocks * 512))),
               pattern(blocks * 512, seed));
    return cid;
  }
  std::vector<uint16_t> completed_cids() const {
    std::vector<uint16_t> out;
    for (const auto& c : io->completions) out.push_back(c.cqe.cid.get());
    return out;
  }

  Gate gate;
  std::unique_ptr<CoreHarness> h;
  std::unique_ptr<FakeTargetQueue> admin;
  std::unique_ptr<FakeTargetQueue> io;
  uint16_t cntlid = 0;
};

TEST_F(CoreQueueFull, CommandsWaitForRoomInsteadOfFailingAndGoOnInOrder) {
  gate.open = 0;  // nothing completes for now
  std::vector<uint16_t> cids;
  for (uint8_t i = 0; i < 6; ++i) cids.push_back(submit_write(i * 8u, 1, i));
  h->reactor.run();
  // Two writes in the backend, four waiting: none failed.
  EXPECT_TRUE(io->completions.empty());
  EXPECT_EQ(gate.accepted, (std::vector<uint64_t>{0, 8}));
  EXPECT_GE(gate.full_answers, 1u);

  // One completion makes room for one waiting command: the oldest.
  gate.open = 1;
  h->reactor.run();
  EXPECT_EQ(completed_cids(), (std::vector<uint16_t>{cids[0]}));
  EXPECT_EQ(gate.accepted, (std::vector<uint64_t>{0, 8, 16}));

  // A new command does not overtake the waiting ones.
  cids.push_back(submit_write(48, 1, 6));
  h->reactor.run();
  EXPECT_EQ(gate.accepted.size(), 3u);

  gate.open = UINT_MAX;
  h->reactor.run();
  EXPECT_EQ(gate.accepted, (std::vector<uint64_t>{0, 8, 16, 24, 32, 40, 48}));
  ASSERT_EQ(completed_cids(), cids);
  for (const auto& c : io->completions) EXPECT_EQ(c.status(), st::success) << p::status_name(c.status());
  for (uint8_t i = 0; i < 7; ++i) EXPECT_EQ(h->read(*io, 1, i * 8u, 1, 512).data, pattern(512, i)) << int{i};
}

TEST_F(CoreQueueFull, DsmGoesOnWithItsNextRangeAfterWaiting) {
  ASSERT_TRUE(h->write(*io, 1, 0, 64, pattern(64 * 512, 3)).status().ok());
  gate.accepted.clear();
  gate.open = 0;
  // Six ranges, one of them empty (skipped): five deallocates through a queue of depth 2.
  const std::vector<std::pair<uint64_t, uint32_t>> ranges{{0, 2}, {10, 2}, {20, 0}, {30, 2}, {40, 2}, {50, 2}};
  std::vector<uint8_t> list(ranges.size() * sizeof(p::DsmRange));
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    p::DsmRange r{};
    r.slba.set(ranges[i].first);
    r.nlb.set(ranges[i].second);
    std::memcpy(list.data() + i * sizeof(r), &r, sizeof(r));
  }
  const uint16_t cid = h->next_cid();
  io->submit(sqe_of(p::make_dsm(cid, 1, 6, p::DsmCommand::kDeallocate, p::make_transport_sgl(96))), list);
  h->reactor.run();
  EXPECT_FALSE(io->result(cid).has_value());
  EXPECT_EQ(gate.accepted, (std::vector<uint64_t>{0, 10}));

  gate.open = UINT_MAX;
  h->reactor.run();
  ASSERT_TRUE(io->result(cid).has_value());
  EXPECT_EQ(io->result(cid)->status(), st::success);
  EXPECT_EQ(gate.accepted, (std::vector<uint64_t>{0, 10, 30, 40, 50}));
  const auto data = h->read(*io, 1, 0, 64, 64 * 512).data;
  const auto expect = pattern(64 * 512, 3);
  for (uint64_t lba = 0; lba < 64; ++lba) {
    const bool zero = lba < 2 || (lba >= 10 && lba < 12) || (lba >= 30 && lba < 32) || (lba >= 40 && lba < 42) ||
                      (lba >= 50 && lba < 52);
    for (uint64_t i = lba * 512; i < (lba + 1) * 512; ++i) ASSERT_EQ(data[i], zero ? 0 : expect[i]) << "lba " << lba;
  }
}

TEST_F(CoreQueueFull, WaitingCommandsOfAClosedQueueAreReleasedWithoutReachingTheBackend) {
  gate.open = 0;
  std::vector<uint16_t> cids;
  for (uint8_t i = 0; i < 4; ++i) cids.push_back(submit_write(i * 8u, 1, i));
  h->reactor.run();
  io->close("connection reset");
  h->reactor.run();
  EXPECT_TRUE(io->released.empty());  // two in the backend, two waiting: all still held
  gate.open = UINT_MAX;
  h->reactor.run();
  EXPECT_TRUE(io->completions.empty());
  std::sort(io->released.begin(), io->released.end());
  EXPECT_EQ(io->released, cids);
  EXPECT_EQ(gate.accepted, (std::vector<uint64_t>{0, 8}));  // the waiting writes were never submitted
  // The controller goes on.
  auto io2 = h->io_queue(cntlid, 2);
  EXPECT_TRUE(h->read(*io2, 1, 0, 1, 512).status().ok());
}

TEST_F(CoreQueueFull, ABackendFullWithNothingInFlightIsAnInternalError) {
  // No completion would ever make room: waiting would hang the command.
  gate.always_full = true;
  EXPECT_EQ(h->read(*io, 1, 0, 1, 512).status(), st::internal_error);
}

}  // namespace
}  // namespace rdmablk::target::testing
