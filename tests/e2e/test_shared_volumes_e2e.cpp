// Shared volumes end to end over NVMe/TCP: Compare, Copy and fused Compare and Write sent by the initiator
// library (initiator/host/shared_volume.h, IoQueue::submit_compare_and_write) and by the `rdmablk compare` /
// `rdmablk copy` verbs, against the real rdmablk-target on a ram namespace. Sizes cover data in the command
// capsule (up to 16 KiB here) and data the target asks for with R2T. The reservation verbs are tested
// against the fake target (tests/initiator/test_cli_shared.cpp): the target does not run them yet.
#include <gtest/gtest.h>

#include "e2e_common.h"
#include "initiator/host/shared_volume.h"
#include "protocol/status.h"

namespace e2e {
namespace {

using rdmablk::initiator::compare_blocks;
using rdmablk::initiator::copy_blocks;
using rdmablk::initiator::CopyRange;
using rdmablk::initiator::IoQueue;
using rdmablk::transport::HostCommand;
namespace p = rdmablk::protocol;

constexpr uint32_t kBs = 512;

struct Half {
  int calls = 0;
  p::Status status{};
  static void on_complete(HostCommand& cmd, const p::Cqe& cqe) noexcept {
    auto* h = static_cast<Half*>(cmd.context);
    ++h->calls;
    h->status = cqe.get_status();
  }
  HostCommand command() {
    HostCommand c{};
    c.on_complete = &on_complete;
    c.context = this;
    return c;
  }
};

// Polls until every half has completed (bounded only against a hang).
::testing::AssertionResult wait_all(IoQueue& q, const std::vector<const Half*>& halves) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  for (;;) {
    bool all = true;
    for (const Half* h : halves) all = all && h->calls > 0;
    if (all) return ::testing::AssertionSuccess();
    if (std::chrono::steady_clock::now() > deadline) return ::testing::AssertionFailure() << "no completion in 30 s";
    if (int rc = q.poll(1, 100ms); rc < 0) return ::testing::AssertionFailure() << "poll: " << rc;
  }
}

class SharedVolumesE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace)));
    ctrl = connect_or_fail(controller_options(t.io_port(), kSubnqn, kHostA, 120'000, 2), t);
    ASSERT_TRUE(ctrl);
    q = io_queue_or_fail(*ctrl, 1);
    ASSERT_TRUE(q);
  }

  void put(uint64_t slba, std::vector<uint8_t> data) {
    auto w = write_blocks(*q, 1, slba, kBs, data);
    ASSERT_TRUE(w) << w.error().message;
  }
  std::vector<uint8_t> get(uint64_t slba, uint32_t bytes) {
    std::vector<uint8_t> back(bytes, 0xEE);
    auto r = read_blocks(*q, 1, slba, kBs, back);
    EXPECT_TRUE(r) << r.error().message;
    return back;
  }

  TargetProcess t;
  std::unique_ptr<rdmablk::initiator::Controller> ctrl;
  std::unique_ptr<IoQueue> q;
};

TEST_F(SharedVolumesE2e, CompareMatchesAndMiscompares) {
  for (uint32_t bytes : {kBs, 4096u, 65536u}) {
    auto data = pattern(bytes, bytes);
    put(100, data);
    auto same = compare_blocks(*q, 1, 100, bytes / kBs, data);
    EXPECT_TRUE(same) << bytes << ": " << same.error().message;
    data[bytes - 1] ^= 1;  // the last byte differs
    auto differ = compare_blocks(*q, 1, 100, bytes / kBs, data);
    ASSERT_FALSE(differ) << bytes;
    EXPECT_NE(differ.error().message.find("Compare failed: Compare Failure (SCT 0x2 SC 0x85, DNR)"), std::string::npos)
        << differ.error().message;
  }
}

TEST_F(SharedVolumesE2e, CopyGathersRangesToTheDestination) {
  auto a = pattern(kBs, 1), b = pattern(8 * kBs, 2), c = pattern(40 * kBs, 3);
  put(10, a);
  put(50, b);
  put(1000, c);
  const std::vector<CopyRange> ranges{{50, 8}, {10, 1}, {1000, 40}};
  auto r = copy_blocks(*q, 1, 5000, ranges);
  ASSERT_TRUE(r) << r.error().message;
  std::vector<uint8_t> expect = b;
  expect.insert(expect.end(), a.begin(), a.end());
  expect.insert(expect.end(), c.begin(), c.end());
  EXPECT_EQ(get(5000, static_cast<uint32_t>(expect.size())), expect);
  EXPECT_EQ(get(50, 8 * kBs), b) << "the sources stay";

  const std::vector<CopyRange> outside{{65535, 2}};  // 32 MiB = 65536 blocks: the second block is past the end
  auto bad = copy_blocks(*q, 1, 0, outside);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("LBA Out of Range"), std::string::npos) << bad.error().message;
}

TEST_F(SharedVolumesE2e, FusedCompareAndWriteWritesOnAMatch) {
  for (uint32_t bytes : {kBs, 65536u}) {
    auto old_data = pattern(bytes, 10 + bytes), new_data = pattern(bytes, 20 + bytes);
    put(200, old_data);
    Half cmp, wr;
    HostCommand first = cmp.command(), second = wr.command();
    ASSERT_TRUE(q->submit_compare_and_write(first, second, 1, 200, bytes / kBs, old_data, new_data).ok());
    ASSERT_TRUE(wait_all(*q, {&cmp, &wr})) << t.log();
    EXPECT_TRUE(cmp.status.ok()) << bytes << ": " << p::status_name(cmp.status);
    EXPECT_TRUE(wr.status.ok()) << bytes << ": " << p::status_name(wr.status);
    EXPECT_EQ(get(200, bytes), new_data) << bytes;
  }
}

TEST_F(SharedVolumesE2e, FusedMiscompareAbortsTheWriteAndLeavesTheData) {
  for (uint32_t bytes : {kBs, 65536u}) {
    auto old_data = pattern(bytes, 30 + bytes), expect = pattern(bytes, 40 + bytes), new_data = pattern(bytes, 50);
    put(300, old_data);
    Half cmp, wr;
    HostCommand first = cmp.command(), second = wr.command();
    ASSERT_TRUE(q->submit_compare_and_write(first, second, 1, 300, bytes / kBs, expect, new_data).ok());
    ASSERT_TRUE(wait_all(*q, {&cmp, &wr})) << t.log();
    EXPECT_TRUE(cmp.status.is(p::status::compare_failure)) << p::status_name(cmp.status);
    EXPECT_TRUE(wr.status.is(p::status::aborted_failed_fused)) << p::status_name(wr.status);
    EXPECT_EQ(get(300, bytes), old_data) << "nothing written";
  }
}

// Writes queued before and after the pair on the same queue: the pair still reaches the target as adjacent
// entries (a half on its own would get Missing Fused Command), and everything completes.
TEST_F(SharedVolumesE2e, FusedPairAmidOtherCommandsOnTheQueue) {
  auto old_data = pattern(kBs, 60), new_data = pattern(kBs, 61);
  put(400, old_data);
  std::vector<std::vector<uint8_t>> bufs;
  for (int i = 0; i < 8; ++i) bufs.push_back(pattern(4096, 70 + i));
  std::vector<Half> others(8);
  std::vector<HostCommand> cmds;
  cmds.reserve(8);
  for (int i = 0; i < 8; ++i) cmds.push_back(others[i].command());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(q->submit_write(cmds[i], 1, 1000 + 8 * i, 8, bufs[i]).ok());
  Half cmp, wr;
  HostCommand first = cmp.command(), second = wr.command();
  ASSERT_TRUE(q->submit_compare_and_write(first, second, 1, 400, 1, old_data, new_data).ok());
  for (int i = 4; i < 8; ++i) ASSERT_TRUE(q->submit_write(cmds[i], 1, 1000 + 8 * i, 8, bufs[i]).ok());
  std::vector<const Half*> all{&cmp, &wr};
  for (const Half& h : others) all.push_back(&h);
  ASSERT_TRUE(wait_all(*q, all)) << t.log();
  EXPECT_TRUE(cmp.status.ok()) << p::status_name(cmp.status);
  EXPECT_TRUE(wr.status.ok()) << p::status_name(wr.status);
  for (const Half& h : others) EXPECT_TRUE(h.status.ok()) << p::status_name(h.status);
  EXPECT_EQ(get(400, kBs), new_data);
  EXPECT_EQ(get(1000 + 8 * 7, 4096), bufs[7]);
}

// NVMe/TCP with one free slot: the pair is refused whole (a half sent alone would be held by the target as a
// first half, and the next pair would then fail with Missing Fused Command); with room again, it goes.
TEST_F(SharedVolumesE2e, FusedPairOnAFullQueueIsRefusedWhole) {
  auto small = io_queue_or_fail(*ctrl, 2, 4);  // 4 slots
  ASSERT_TRUE(small);
  auto old_data = pattern(kBs, 90), new_data = pattern(kBs, 91);
  put(500, old_data);
  std::vector<std::vector<uint8_t>> bufs{pattern(kBs, 92), pattern(kBs, 93), pattern(kBs, 94)};
  std::vector<Half> fill(3);
  std::vector<HostCommand> cmds;
  cmds.reserve(3);
  for (int i = 0; i < 3; ++i) {
    cmds.push_back(fill[i].command());
    ASSERT_TRUE(small->submit_write(cmds[i], 1, 2000 + i, 1, bufs[i]).ok());
  }
  Half cmp, wr;
  HostCommand first = cmp.command(), second = wr.command();
  EXPECT_EQ(small->submit_compare_and_write(first, second, 1, 500, 1, old_data, new_data),
            p::status::command_interrupted);
  EXPECT_EQ(small->queue().outstanding(), 3u);
  ASSERT_TRUE(wait_all(*small, {&fill[0], &fill[1], &fill[2]})) << t.log();
  ASSERT_TRUE(small->submit_compare_and_write(first, second, 1, 500, 1, old_data, new_data).ok());
  ASSERT_TRUE(wait_all(*small, {&cmp, &wr})) << t.log();
  EXPECT_TRUE(cmp.status.ok()) << p::status_name(cmp.status);
  EXPECT_TRUE(wr.status.ok()) << p::status_name(wr.status);
  EXPECT_EQ(cmp.calls + wr.calls, 2) << "each half completed once";
  EXPECT_EQ(get(500, kBs), new_data);
}

// `rdmablk compare` and `rdmablk copy` against the target, as a user runs them.
TEST_F(SharedVolumesE2e, CliCompareAndCopy) {
  auto data = pattern(2048, 80);
  put(600, data);
  const auto same = t.dir() / "same.bin";
  const auto other = t.dir() / "other.bin";
  write_file(same, std::string(data.begin(), data.end()));
  auto changed = data;
  changed[100] ^= 0xFF;
  write_file(other, std::string(changed.begin(), changed.end()));
  const std::string uri = "tcp://127.0.0.1:" + std::to_string(t.io_port()) + "/" + kSubnqn + "/1";
  const std::vector<std::string> host{"--hostnqn", kHostA, "--hostid",
                                      rdmablk::initiator::format_uuid(host_identity(kHostA).hostid)};
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), RDMABLK_CLI_BINARY);
    args.insert(args.end(), host.begin(), host.end());
    return run_process(args, t.dir(), 60s);
  };

  auto ok = cli({"compare", uri, "-s", "600", "-c", "3", "-z", "2048", "-d", same.string()});
  EXPECT_EQ(ok.exit_status, 0) << ok.err;
  EXPECT_EQ(ok.out, "compare: Success\n");

  auto miss =
      cli({"compare", uri, "--start-block=600", "--block-count=3", "--data-size=2048", "--data=" + other.string()});
  EXPECT_EQ(miss.exit_status, 1) << miss.out;
  EXPECT_NE(miss.err.find("Compare Failure"), std::string::npos) << miss.err;

  auto copy = cli({"copy", uri, "-d", "700", "-s", "602,600", "-b", "1,1"});
  EXPECT_EQ(copy.exit_status, 0) << copy.err;
  EXPECT_EQ(copy.out, "NVMe Copy: success\n");
  std::vector<uint8_t> expect(data.begin() + 1024, data.end());
  expect.insert(expect.end(), data.begin(), data.begin() + 1024);
  EXPECT_EQ(get(700, 2048), expect);

  auto out_of_range = cli({"copy", uri, "-d", "0", "-s", "65535", "-b", "1"});
  EXPECT_EQ(out_of_range.exit_status, 1);
  EXPECT_NE(out_of_range.err.find("LBA Out of Range"), std::string::npos) << out_of_range.err;
}

}  // namespace
}  // namespace e2e
