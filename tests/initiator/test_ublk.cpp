// The parts of the ublk attach that need no kernel: device geometry and parameters from Identify, NVMe
// status -> errno, the reconnect policy, device names, and the clear error where ublk is missing. The
// data path itself runs against the real driver in the VM lab (tests/vm/attach-ublk).
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "initiator/cli_runner.h"
#include "initiator/ublk/control.h"
#include "initiator/ublk/geometry.h"
#include "initiator/ublk/reconnect.h"

using namespace rdmablk;
using namespace rdmablk::initiator;
using namespace rdmablk::initiator::ublk;
using namespace std::chrono_literals;

namespace {

NamespaceInfo ns_of(uint64_t blocks, uint32_t block_size) {
  NamespaceInfo ns;
  ns.nsid = 1;
  ns.size_blocks = blocks;
  ns.block_size = block_size;
  return ns;
}

protocol::IdentifyController ctrl_with(uint8_t vwc, uint16_t oncs) {
  protocol::IdentifyController id{};
  id.vwc = vwc;
  id.oncs.set(oncs);
  return id;
}

}  // namespace

TEST(UblkGeometry, SizeBlocksAndDefaultTransfer) {
  auto g = geometry_for(ctrl_with(0, 0), ns_of(2048, 512), 0);
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(g->size_bytes, 2048u * 512);
  EXPECT_EQ(g->block_size, 512u);
  EXPECT_EQ(g->max_io_bytes, kMaxIoBytes);
  EXPECT_FALSE(g->volatile_cache);
  EXPECT_FALSE(g->discard);
  EXPECT_FALSE(g->write_zeroes);
  EXPECT_FALSE(g->read_only);
}

TEST(UblkGeometry, TransferLimitFromMdtsRoundedToPages) {
  auto g = geometry_for(ctrl_with(0, 0), ns_of(1 << 20, 4096), 128 * 1024 + 100);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->max_io_bytes, 128u * 1024);
  auto tiny = geometry_for(ctrl_with(0, 0), ns_of(1 << 20, 4096), 2048);
  ASSERT_FALSE(tiny);
  EXPECT_NE(tiny.error().message.find("below one block"), std::string::npos) << tiny.error().message;
}

TEST(UblkGeometry, FeaturesFromVwcOncsAndWriteProtect) {
  auto ns = ns_of(4096, 4096);
  ns.id.nsattr = 1;  // write protected
  auto g = geometry_for(ctrl_with(1, (1u << 2) | (1u << 3)), ns, 0);
  ASSERT_TRUE(g);
  EXPECT_TRUE(g->volatile_cache);
  EXPECT_TRUE(g->discard);
  EXPECT_TRUE(g->write_zeroes);
  EXPECT_TRUE(g->read_only);
}

TEST(UblkGeometry, RejectsBlockSizesLinuxCannotHave) {
  for (uint32_t bs : {0u, 256u, 520u, 8192u}) {
    auto g = geometry_for(ctrl_with(0, 0), ns_of(100, bs), 0);
    ASSERT_FALSE(g) << bs;
    EXPECT_NE(g.error().message.find("logical block size"), std::string::npos);
  }
  EXPECT_FALSE(geometry_for(ctrl_with(0, 0), ns_of(0, 512), 0));
}

TEST(UblkParams, BasicAndDiscard) {
  Geometry g;
  g.size_bytes = uint64_t{1} << 30;
  g.block_size = 4096;
  g.max_io_bytes = 256 * 1024;
  g.volatile_cache = true;
  g.discard = true;
  g.write_zeroes = true;
  ublk_params p = params_for(g);
  EXPECT_EQ(p.len, sizeof(ublk_params));
  EXPECT_EQ(p.types, static_cast<unsigned>(UBLK_PARAM_TYPE_BASIC | UBLK_PARAM_TYPE_DISCARD));
  EXPECT_EQ(p.basic.logical_bs_shift, 12);
  EXPECT_EQ(p.basic.physical_bs_shift, 12);
  EXPECT_EQ(p.basic.max_sectors, 512u);
  EXPECT_EQ(p.basic.dev_sectors, (uint64_t{1} << 30) / 512);
  EXPECT_EQ(p.basic.attrs, static_cast<unsigned>(UBLK_ATTR_VOLATILE_CACHE | UBLK_ATTR_FUA));
  EXPECT_EQ(p.discard.discard_granularity, 4096u);
  EXPECT_EQ(p.discard.max_discard_segments, 1);  // the driver passes one range per request
  EXPECT_EQ(p.discard.max_discard_sectors % 8, 0u);
  EXPECT_EQ(p.discard.max_write_zeroes_sectors, 65536u * 8);  // NLB is 16 bits
}

TEST(UblkParams, NoCacheNoDiscardReadOnly) {
  Geometry g;
  g.size_bytes = 1 << 20;
  g.block_size = 512;
  g.max_io_bytes = 4096;
  g.read_only = true;
  ublk_params p = params_for(g);
  EXPECT_EQ(p.types, static_cast<unsigned>(UBLK_PARAM_TYPE_BASIC));
  EXPECT_EQ(p.basic.attrs, static_cast<unsigned>(UBLK_ATTR_READ_ONLY));
  EXPECT_EQ(p.basic.logical_bs_shift, 9);
  EXPECT_EQ(p.basic.max_sectors, 8u);
}

TEST(UblkStatus, ErrnoForNvmeStatus) {
  namespace st = protocol::status;
  EXPECT_EQ(errno_for_status(st::success), 0);
  EXPECT_EQ(errno_for_status(st::capacity_exceeded), -ENOSPC);
  EXPECT_EQ(errno_for_status(st::capacity_exceeded.with_dnr(false)), -ENOSPC);  // DNR does not matter
  EXPECT_EQ(errno_for_status(st::invalid_opcode), -EOPNOTSUPP);
  EXPECT_EQ(errno_for_status(st::lba_out_of_range), -EIO);
  EXPECT_EQ(errno_for_status(st::namespace_write_protected), -EIO);
}

TEST(UblkReconnect, BackoffDoublesUpToTheDelay) {
  ReconnectPolicy p(600s, 10s);
  const auto t0 = ReconnectPolicy::Clock::time_point{} + 1000s;
  EXPECT_FALSE(p.down());
  p.lost(t0);
  EXPECT_TRUE(p.due(t0));  // the first attempt at once
  std::vector<long> waits;
  auto now = t0;
  for (int i = 0; i < 6; ++i) {
    p.attempt_failed(now);
    waits.push_back(std::chrono::duration_cast<std::chrono::seconds>(p.next_attempt() - now).count());
    EXPECT_FALSE(p.due(now));
    now = p.next_attempt();
    EXPECT_TRUE(p.due(now));
  }
  EXPECT_EQ(waits, (std::vector<long>{1, 2, 4, 8, 10, 10}));
  p.reconnected();
  EXPECT_FALSE(p.down());
  EXPECT_FALSE(p.due(now + 100s));
  p.lost(now);  // a new loss starts the backoff again
  p.attempt_failed(now);
  EXPECT_EQ(p.next_attempt() - now, 1s);
}

TEST(UblkReconnect, LossTimeout) {
  const auto t0 = ReconnectPolicy::Clock::time_point{} + 1000s;
  ReconnectPolicy p(30s, 5s);
  p.lost(t0);
  EXPECT_FALSE(p.expired(t0 + 29s));
  EXPECT_TRUE(p.expired(t0 + 30s));
  p.reconnected();
  EXPECT_FALSE(p.expired(t0 + 60s));
  ReconnectPolicy forever(-1s, 5s);
  forever.lost(t0);
  EXPECT_FALSE(forever.expired(t0 + 100000s));
}

TEST(UblkNames, BlockDevicePaths) {
  EXPECT_EQ(block_device_path(3), "/dev/ublkb3");
  EXPECT_EQ(char_device_path(3), "/dev/ublkc3");
  EXPECT_EQ(parse_block_device("/dev/ublkb12").value(), 12u);
  EXPECT_EQ(parse_block_device("ublkb0").value(), 0u);
  for (const char* bad : {"/dev/ublkc0", "/dev/ublkb", "ublkb1x", "/dev/nvme0n1", ""}) {
    EXPECT_FALSE(parse_block_device(bad)) << bad;
  }
}

TEST(UblkControl, MissingDriverSaysWhatToDo) {
  auto c = Control::open("/nonexistent/ublk-control");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("ublk is not available"), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find("ublk_drv"), std::string::npos);
  EXPECT_NE(c.error().message.find("rdmablk connect"), std::string::npos);
}

namespace {
rdmablk::testing::CliRun cli(std::vector<const char*> args) {
  CliEnv env;
  env.connector = [](const transport::HostQueueOptions&) -> Result<std::unique_ptr<transport::HostQueue>> {
    return make_error("no network in this test", ECONNREFUSED);
  };
  return rdmablk::testing::run_cli(env, std::move(args));
}
}  // namespace

TEST(UblkCli, AttachWithoutUblkFailsClearlyBeforeConnecting) {
  ::setenv("RDMABLK_UBLK_CONTROL", "/nonexistent/ublk-control", 1);
  auto r = cli({"attach", "--userspace", "--foreground", "-t", "tcp", "-a", "127.0.0.1", "-s", "4420", "-n",
                "nqn.2024-01.io.rdmablk:vol"});
  ::unsetenv("RDMABLK_UBLK_CONTROL");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("ublk is not available"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("no network"), std::string::npos) << "connected before checking ublk: " << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(UblkCli, AttachUsageErrors) {
  auto r = cli({"attach", "-a", "127.0.0.1", "-n", "nqn.2024-01.io.rdmablk:vol"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--userspace"), std::string::npos) << r.err;
  r = cli({"attach", "--userspace", "-a", "127.0.0.1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("-n/--nqn"), std::string::npos) << r.err;
  r = cli({"attach", "--config", "/nonexistent/attach.yaml", "-a", "127.0.0.1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--traddr and --config"), std::string::npos) << r.err;
  r = cli({"attach", "--userspace", "-a", "127.0.0.1", "-n", "nqn.2024-01.io.rdmablk:vol", "-Q", "5000"});
  EXPECT_EQ(r.code, 2);
}

TEST(UblkCli, AttachSeveralPathsUsageErrors) {
  const char* nqn = "nqn.2024-01.io.rdmablk:vol";
  auto r = cli({"attach", "--userspace", "-a", "127.0.0.1:4420", "-a", "127.0.0.1", "-n", nqn});
  EXPECT_EQ(r.code, 2);  // -s defaults to 4420: the same path twice
  EXPECT_NE(r.err.find("-a 127.0.0.1: the same path is given twice"), std::string::npos) << r.err;
  r = cli({"attach", "--userspace", "-a", "127.0.0.1:4420", "-a", "127.0.0.1:99999", "-n", nqn});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("port '99999' is not a number in 1..65535"), std::string::npos) << r.err;
  r = cli({"attach", "--userspace", "-a", "[fe80::1", "-n", nqn});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no ']'"), std::string::npos) << r.err;
}

TEST(UblkCli, AttachTwoPathsGetsAsFarAsUblk) {
  // Both values parse (ADDR:PORT and [IPv6]:PORT): the attach fails only where ublk is missing.
  ::setenv("RDMABLK_UBLK_CONTROL", "/nonexistent/ublk-control", 1);
  auto r = cli({"attach", "--userspace", "--foreground", "-a", "127.0.0.1:4420", "-a", "[::1]:4421", "-n",
                "nqn.2024-01.io.rdmablk:vol"});
  ::unsetenv("RDMABLK_UBLK_CONTROL");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("ublk is not available"), std::string::npos) << r.err;
}

TEST(UblkCli, DetachUnknownDevice) {
  ::setenv("RDMABLK_RUN_DIR", ::testing::TempDir().c_str(), 1);
  auto r = cli({"detach", "nqn.2024-01.io.rdmablk:nothing-attached"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no attachment matches"), std::string::npos) << r.err;
  ::unsetenv("RDMABLK_RUN_DIR");
}

TEST(UblkCli, BackgroundAttachReportsTheChildsError) {
  // Without --foreground the command forks; the parent must relay the child's error and fail.
  ::setenv("RDMABLK_UBLK_CONTROL", "/nonexistent/ublk-control", 1);
  auto r = cli({"attach", "--userspace", "-t", "tcp", "-a", "127.0.0.1", "-n", "nqn.2024-01.io.rdmablk:vol"});
  ::unsetenv("RDMABLK_UBLK_CONTROL");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("ublk is not available"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}
