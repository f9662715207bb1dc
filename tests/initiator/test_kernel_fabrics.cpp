// The kernel NVMe-oF host library and the connect/connect-all/disconnect/list commands, on a fake sysfs
// tree in a temporary folder. The fabrics device is a pseudo-terminal: the code under test opens, writes
// and reads it exactly as it does /dev/nvme-fabrics, and a thread on the master side plays the kernel.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "initiator/cli/cli.h"
#include "initiator/cli_runner.h"
#include "initiator/host/kernel_fabrics.h"

using namespace rdmablk;
using namespace rdmablk::initiator;
namespace fs = std::filesystem;

namespace {

constexpr const char* kNqn = "nqn.2024-11.io.rdmablk:vol0";
constexpr const char* kHostNqn = "nqn.2014-08.org.nvmexpress:uuid:4a7e9c3b-1d2f-4e6a-8b5c-7d9e0f1a2b3c";

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put(const fs::path& p, const std::string& content) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << content;
}

// A temporary root with sys/class/nvme, sys/class/nvme-subsystem and dev, and helpers that lay controllers
// and namespaces out the way the kernel does (attribute files end in a newline, as sysfs ones do).
class FakeKernel {
 public:
  FakeKernel() {
    char tmpl[] = "/tmp/rdmablk-kfab.XXXXXX";
    root_ = ::mkdtemp(tmpl);
    paths.fabrics_device = (root_ / "dev/nvme-fabrics").string();
    paths.sysfs_nvme = (root_ / "sys/class/nvme").string();
    paths.sysfs_subsys = (root_ / "sys/class/nvme-subsystem").string();
    paths.dev_dir = (root_ / "dev").string();
    fs::create_directories(paths.sysfs_nvme);
    fs::create_directories(paths.sysfs_subsys);
    fs::create_directories(paths.dev_dir);
  }
  ~FakeKernel() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  FakeKernel(const FakeKernel&) = delete;
  FakeKernel& operator=(const FakeKernel&) = delete;

  fs::path ctrl_dir(const std::string& name) const { return fs::path(paths.sysfs_nvme) / name; }

  void add_controller(const std::string& name, const std::string& transport, const std::string& address,
                      const std::string& nqn, unsigned cntlid = 1, const std::string& state = "live") {
    auto d = ctrl_dir(name);
    put(d / "transport", transport + "\n");
    put(d / "address", address + "\n");
    put(d / "state", state + "\n");
    put(d / "subsysnqn", nqn + "\n");
    put(d / "cntlid", std::to_string(cntlid) + "\n");
    put(d / "model", "rdmablk                                 \n");
    put(d / "serial", "SERIAL0001          \n");
    put(d / "delete_controller", "");
  }
  // Without native multipath: the disk nvmeXnY is a child of the controller.
  void add_disk(const std::string& ctrl, const std::string& disk, uint32_t nsid, uint64_t sectors, bool node = true) {
    auto d = ctrl_dir(ctrl) / disk;
    put(d / "nsid", std::to_string(nsid) + "\n");
    put(d / "size", std::to_string(sectors) + "\n");
    if (node) put(fs::path(paths.dev_dir) / disk, "");
  }
  // Native multipath: the controller has the hidden path nvmeKcCnY, the head nvmeKnY is in the subsystem.
  // With ana_state, the path also has the kernel's ANA attributes (drivers/nvme/host/sysfs.c prints both
  // with a newline; the head has neither).
  void add_multipath_ns(const std::string& ctrl, unsigned subsys, unsigned ctrl_instance, unsigned head,
                        uint32_t nsid, uint64_t sectors, const std::string& ana_state = "", unsigned ana_grpid = 1) {
    auto path = ctrl_dir(ctrl) / ("nvme" + std::to_string(subsys) + "c" + std::to_string(ctrl_instance) + "n" +
                                  std::to_string(head));
    put(path / "nsid", std::to_string(nsid) + "\n");
    put(path / "size", "0\n");  // hidden paths are not sized for users: the head must be read
    if (!ana_state.empty()) {
      put(path / "ana_state", ana_state + "\n");
      put(path / "ana_grpid", std::to_string(ana_grpid) + "\n");
    }
    std::string head_name = "nvme" + std::to_string(subsys) + "n" + std::to_string(head);
    auto h = fs::path(paths.sysfs_subsys) / ("nvme-subsys" + std::to_string(subsys)) / head_name;
    put(h / "nsid", std::to_string(nsid) + "\n");
    put(h / "size", std::to_string(sectors) + "\n");
    put(fs::path(paths.dev_dir) / head_name, "");
  }

  KernelFabricsPaths paths;

 private:
  fs::path root_;
};

// The kernel's side of /dev/nvme-fabrics, on the master of a pseudo-terminal whose slave (in raw mode) is
// the "device" the code under test opens: it reads one option string and answers with `reply`.
class FakeFabricsDevice {
 public:
  explicit FakeFabricsDevice(std::string reply, std::function<void()> after_reply = {})
      : reply_(std::move(reply)), after_reply_(std::move(after_reply)) {
    master_ = ::posix_openpt(O_RDWR | O_NOCTTY);
    if (master_ < 0 || ::grantpt(master_) != 0 || ::unlockpt(master_) != 0) return;
    path_ = ::ptsname(master_);
    // Held open for the test: a pty keeps its termios while a slave is open. Raw: no echo, no mangling.
    slave_ = ::open(path_.c_str(), O_RDWR | O_NOCTTY);
    termios t{};
    if (slave_ < 0 || ::tcgetattr(slave_, &t) != 0) return;
    ::cfmakeraw(&t);
    if (::tcsetattr(slave_, TCSANOW, &t) != 0) return;
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeFabricsDevice() {
    if (thread_.joinable()) thread_.join();
    if (slave_ >= 0) ::close(slave_);
    if (master_ >= 0) ::close(master_);
  }
  FakeFabricsDevice(const FakeFabricsDevice&) = delete;
  FakeFabricsDevice& operator=(const FakeFabricsDevice&) = delete;

  bool usable() const { return thread_.joinable(); }
  const std::string& path() const { return path_; }
  std::string received() {
    if (thread_.joinable()) thread_.join();
    return received_;
  }

 private:
  void serve() {
    // The option string carries no newline: it is complete once no more bytes come for a while.
    pollfd p{master_, POLLIN, 0};
    char buf[4096];
    while (::poll(&p, 1, received_.empty() ? 60000 : 200) > 0) {  // the first bytes: an event, 60 s for a hang
      ssize_t r = ::read(master_, buf, sizeof(buf));
      if (r <= 0) break;
      received_.append(buf, static_cast<std::size_t>(r));
    }
    if (received_.empty()) return;
    (void)!::write(master_, reply_.data(), reply_.size());
    if (after_reply_) after_reply_();
  }

  std::string reply_;
  std::function<void()> after_reply_;
  int master_ = -1;
  int slave_ = -1;
  std::string path_;
  std::string received_;
  std::thread thread_;
};

KernelConnectParams full_params() {
  KernelConnectParams p;
  p.transport = "tcp";
  p.traddr = "127.0.0.1";
  p.trsvcid = "4420";
  p.nqn = kNqn;
  p.hostnqn = kHostNqn;
  p.hostid = "4a7e9c3b-1d2f-4e6a-8b5c-7d9e0f1a2b3c";
  p.nr_io_queues = 4;
  p.queue_size = 256;
  p.keep_alive_tmo = 10;
  p.reconnect_delay = 2;
  p.ctrl_loss_tmo = -1;
  return p;
}

KernelConnectParams minimal_params() {
  KernelConnectParams p;
  p.transport = "rdma";
  p.traddr = "192.168.77.1";
  p.nqn = kNqn;
  return p;
}

}  // namespace

// ---- option strings -------------------------------------------------------------------------------------

TEST(KernelFabricsOptions, AllOptionsInLibnvmeOrder) {
  auto s = build_connect_options(full_params());
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(*s,
            "nqn=nqn.2024-11.io.rdmablk:vol0,transport=tcp,traddr=127.0.0.1,trsvcid=4420,"
            "hostnqn=nqn.2014-08.org.nvmexpress:uuid:4a7e9c3b-1d2f-4e6a-8b5c-7d9e0f1a2b3c,"
            "hostid=4a7e9c3b-1d2f-4e6a-8b5c-7d9e0f1a2b3c,nr_io_queues=4,queue_size=256,keep_alive_tmo=10,"
            "reconnect_delay=2,ctrl_loss_tmo=-1");
}

TEST(KernelFabricsOptions, OnlyTheGivenOptions) {
  auto s = build_connect_options(minimal_params());
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(*s, "nqn=nqn.2024-11.io.rdmablk:vol0,transport=rdma,traddr=192.168.77.1");
  auto p = minimal_params();
  p.keep_alive_tmo = 0;  // 0 is a real value (keep-alive off), not "absent"
  EXPECT_EQ(*build_connect_options(p), "nqn=nqn.2024-11.io.rdmablk:vol0,transport=rdma,traddr=192.168.77.1,keep_alive_tmo=0");
}

TEST(KernelFabricsOptions, RejectsWhatTheKernelWouldMisparse) {
  auto expect_error = [](KernelConnectParams p, const std::string& needle) {
    auto s = build_connect_options(p);
    ASSERT_FALSE(s) << "accepted: " << *s;
    EXPECT_NE(s.error().message.find(needle), std::string::npos) << s.error().message;
  };
  auto p = full_params();
  p.traddr = "127.0.0.1,nr_io_queues=1000";
  expect_error(p, "invalid traddr");
  p = full_params();
  p.hostid = "a=b";
  expect_error(p, "invalid hostid");
  p = full_params();
  p.trsvcid = "4420\n";
  expect_error(p, "invalid trsvcid");
  p = full_params();
  p.nqn = "not-an-nqn";
  expect_error(p, "invalid subsystem NQN 'not-an-nqn'");
  p = full_params();
  p.hostnqn = "nqn.bad";
  expect_error(p, "invalid host NQN");
  p = full_params();
  p.transport = "fc";
  expect_error(p, "unsupported transport 'fc'");
  p = full_params();
  p.traddr.clear();
  expect_error(p, "-a/--traddr");
  p = full_params();
  p.nqn.clear();
  expect_error(p, "-n/--nqn");
  p = full_params();
  p.queue_size = 8;
  expect_error(p, "queue_size 8 is out of range (16..1024)");
  p = full_params();
  p.nr_io_queues = 0;
  expect_error(p, "nr_io_queues");
  p = full_params();
  p.reconnect_delay = 0;
  expect_error(p, "reconnect_delay");
  p = full_params();
  p.ctrl_loss_tmo = -2;
  expect_error(p, "ctrl_loss_tmo");
}

// ---- the kernel's reply -----------------------------------------------------------------------------------

TEST(KernelFabricsReply, ParsesInstanceAndCntlid) {
  auto r = parse_connect_reply("instance=3,cntlid=17\n");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->instance, 3u);
  EXPECT_EQ(r->cntlid, 17u);
  r = parse_connect_reply("cntlid=1,instance=0");  // order-independent, newline optional
  ASSERT_TRUE(r);
  EXPECT_EQ(r->instance, 0u);
  EXPECT_EQ(r->cntlid, 1u);
}

TEST(KernelFabricsReply, RejectsGarbage) {
  for (std::string_view bad : {"", "\n", "hello", "instance=3", "cntlid=1", "instance=x,cntlid=1", "instance=-1,cntlid=1",
                               "instance=1 ,cntlid=2", "instance,cntlid"}) {
    auto r = parse_connect_reply(bad);
    ASSERT_FALSE(r) << "accepted '" << bad << "'";
    EXPECT_NE(r.error().message.find("cannot parse the kernel's connect reply"), std::string::npos);
  }
}

TEST(KernelFabricsErrors, ErrnoMessagesSayWhatTheKernelMeant) {
  auto p = full_params();
  EXPECT_NE(describe_connect_errno(EALREADY, p).find("already connected"), std::string::npos);
  EXPECT_NE(describe_connect_errno(ECONNREFUSED, p).find("connection refused"), std::string::npos);
  EXPECT_NE(describe_connect_errno(EINVAL, p).find("modprobe nvme-tcp"), std::string::npos);
  EXPECT_NE(describe_connect_errno(EADDRINUSE, p).find("hostnqn already in use"), std::string::npos);
  EXPECT_NE(describe_connect_errno(EIO, p).find("dmesg"), std::string::npos);
  // Every message names the connection it was about.
  EXPECT_NE(describe_connect_errno(EIO, p).find("tcp 127.0.0.1:4420 nqn.2024-11.io.rdmablk:vol0"), std::string::npos)
      << describe_connect_errno(EIO, p);
}

TEST(KernelFabricsErrors, MissingFabricsDeviceSuggestsUblk) {
  FakeKernel k;
  auto c = connect_controller(k.paths, full_params(), std::chrono::milliseconds(100));
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().errno_value, ENOENT);
  EXPECT_NE(c.error().message.find("the kernel NVMe-oF host is not available (modprobe nvme-fabrics"),
            std::string::npos)
      << c.error().message;
  EXPECT_NE(c.error().message.find("rdmablk attach --userspace"), std::string::npos);
}

TEST(KernelFabricsErrors, RefusedBeforeTouchingTheDeviceWhenOptionsAreBad) {
  FakeKernel k;
  auto p = full_params();
  p.traddr = "1.2.3.4,x";
  auto c = connect_controller(k.paths, p, std::chrono::milliseconds(100));
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("invalid traddr"), std::string::npos);
}

// ---- connect through the device ---------------------------------------------------------------------------

TEST(KernelFabricsConnect, WritesOptionsReadsReplyAndWaitsForTheNamespaces) {
  FakeKernel k;
  k.add_controller("nvme3", "tcp", "traddr=127.0.0.1,trsvcid=4420,src_addr=127.0.0.1", kNqn, 5);
  // The kernel scans namespaces after the connect returns: they show up only after the reply.
  FakeFabricsDevice dev("instance=3,cntlid=5\n", [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    k.add_disk("nvme3", "nvme3n1", 1, 2097152);
  });
  if (!dev.usable()) GTEST_SKIP() << "no pseudo-terminals here";
  k.paths.fabrics_device = dev.path();
  auto c = connect_controller(k.paths, full_params(), std::chrono::milliseconds(60000));  // ends when they are there
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(dev.received(), *build_connect_options(full_params()));
  EXPECT_EQ(c->name, "nvme3");
  EXPECT_EQ(c->cntlid, 5u);
  ASSERT_EQ(c->namespaces.size(), 1u);
  EXPECT_EQ(c->namespaces[0].block_device, k.paths.dev_dir + "/nvme3n1");
  EXPECT_EQ(c->namespaces[0].size_bytes, 2097152ull * 512);
  EXPECT_TRUE(c->namespaces[0].node_present);
}

TEST(KernelFabricsConnect, GarbageReplyIsAnError) {
  FakeKernel k;
  FakeFabricsDevice dev("what?\n");
  if (!dev.usable()) GTEST_SKIP() << "no pseudo-terminals here";
  k.paths.fabrics_device = dev.path();
  auto c = connect_controller(k.paths, minimal_params(), std::chrono::milliseconds(100));
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("cannot parse the kernel's connect reply 'what? '"), std::string::npos)
      << c.error().message;
}

TEST(KernelFabricsConnect, ControllerWithoutNamespacesIsReturnedAfterTheTimeout) {
  FakeKernel k;
  k.add_controller("nvme0", "rdma", "traddr=192.168.77.1,trsvcid=4420", kNqn);
  FakeFabricsDevice dev("instance=0,cntlid=1\n");
  if (!dev.usable()) GTEST_SKIP() << "no pseudo-terminals here";
  k.paths.fabrics_device = dev.path();
  auto t0 = std::chrono::steady_clock::now();
  auto c = connect_controller(k.paths, minimal_params(), std::chrono::milliseconds(300));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(300));
  EXPECT_TRUE(c->namespaces.empty());
}

// ---- sysfs ------------------------------------------------------------------------------------------------

TEST(KernelFabricsSysfs, ListsFabricsControllersAndSkipsPcie) {
  FakeKernel k;
  k.add_controller("nvme0", "pcie", "0000:01:00.0", "nqn.2014.08.org.nvmexpress:8086-local");
  k.add_disk("nvme0", "nvme0n1", 1, 1000);
  k.add_controller("nvme2", "rdma", "traddr=192.168.77.1,trsvcid=4420", "nqn.2024-11.io.rdmablk:b", 2, "connecting");
  k.add_controller("nvme1", "tcp", "traddr=127.0.0.1,trsvcid=4420,src_addr=127.0.0.1", kNqn, 7);
  k.add_disk("nvme1", "nvme1n2", 2, 4096);
  k.add_disk("nvme1", "nvme1n1", 1, 2048, false);
  put(k.ctrl_dir("nvme1") / "power" / "control", "auto\n");  // other children are not namespaces

  auto list = list_controllers(k.paths);
  ASSERT_EQ(list.size(), 2u);
  const auto& c = list[0];
  EXPECT_EQ(c.name, "nvme1");
  EXPECT_EQ(c.instance, 1u);
  EXPECT_EQ(c.transport, "tcp");
  EXPECT_EQ(c.address, "traddr=127.0.0.1,trsvcid=4420,src_addr=127.0.0.1");
  EXPECT_EQ(c.traddr, "127.0.0.1");
  EXPECT_EQ(c.trsvcid, "4420");
  EXPECT_EQ(c.state, "live");
  EXPECT_EQ(c.subsysnqn, kNqn);
  EXPECT_EQ(c.cntlid, 7u);
  EXPECT_EQ(c.model, "rdmablk");
  EXPECT_EQ(c.serial, "SERIAL0001");
  ASSERT_EQ(c.namespaces.size(), 2u);
  EXPECT_EQ(c.namespaces[0].nsid, 1u);
  EXPECT_EQ(c.namespaces[0].name, "nvme1n1");
  EXPECT_EQ(c.namespaces[0].size_bytes, 2048u * 512);
  EXPECT_FALSE(c.namespaces[0].node_present);
  EXPECT_EQ(c.namespaces[1].block_device, k.paths.dev_dir + "/nvme1n2");
  EXPECT_TRUE(c.namespaces[1].node_present);
  EXPECT_EQ(list[1].name, "nvme2");
  EXPECT_EQ(list[1].state, "connecting");
  EXPECT_TRUE(list[1].namespaces.empty());

  auto all = list_controllers(k.paths, true);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].transport, "pcie");
}

TEST(KernelFabricsSysfs, NativeMultipathReportsTheHeadDisk) {
  FakeKernel k;
  // Two paths (controllers nvme4, nvme5) to subsystem 2; namespace head nvme2n1 (nsid 1).
  k.add_controller("nvme4", "tcp", "traddr=10.0.0.1,trsvcid=4420", kNqn, 1);
  k.add_controller("nvme5", "tcp", "traddr=10.0.0.2,trsvcid=4420", kNqn, 2);
  k.add_multipath_ns("nvme4", 2, 4, 1, 1, 524288);
  k.add_multipath_ns("nvme5", 2, 5, 1, 1, 524288);
  auto list = list_controllers(k.paths);
  ASSERT_EQ(list.size(), 2u);
  for (const auto& c : list) {
    ASSERT_EQ(c.namespaces.size(), 1u) << c.name;
    EXPECT_EQ(c.namespaces[0].name, "nvme2n1");
    EXPECT_EQ(c.namespaces[0].block_device, k.paths.dev_dir + "/nvme2n1");
    EXPECT_EQ(c.namespaces[0].size_bytes, 524288ull * 512);  // from the head, not the hidden path
    EXPECT_TRUE(c.namespaces[0].node_present);
  }
}

TEST(KernelFabricsSysfs, MultipathDevicesGroupPathsWithTheirAnaStates) {
  FakeKernel k;
  // Subsystem 10 through nvme1 (A, optimized) and nvme3 (B, its controller reconnecting, non-optimized);
  // subsystem 2 through nvme2 alone (a head with one path, ANA group 7); nvme0 a plain disk (no multipath).
  k.add_controller("nvme3", "tcp", "traddr=10.0.0.2,trsvcid=4421", kNqn, 1000, "connecting");
  k.add_controller("nvme1", "tcp", "traddr=10.0.0.1,trsvcid=4420", kNqn, 1);
  k.add_controller("nvme2", "rdma", "traddr=10.0.0.9,trsvcid=4420", "nqn.2024-11.io.rdmablk:other", 5);
  k.add_controller("nvme0", "tcp", "traddr=10.0.0.8,trsvcid=4420", "nqn.2024-11.io.rdmablk:plain", 9);
  k.add_multipath_ns("nvme1", 10, 1, 1, 1, 2048, "optimized");
  k.add_multipath_ns("nvme3", 10, 3, 1, 1, 2048, "non-optimized");
  k.add_multipath_ns("nvme2", 2, 2, 4, 3, 4096, "inaccessible", 7);
  k.add_disk("nvme0", "nvme0n1", 1, 100);
  auto ctrls = list_controllers(k.paths);
  ASSERT_EQ(ctrls.size(), 4u);
  ASSERT_EQ(ctrls[1].name, "nvme1");
  ASSERT_EQ(ctrls[1].namespaces.size(), 1u);
  EXPECT_EQ(ctrls[1].namespaces[0].path, "nvme10c1n1");
  EXPECT_EQ(ctrls[1].namespaces[0].ana_state, "optimized");
  EXPECT_EQ(ctrls[1].namespaces[0].ana_grpid, 1u);
  EXPECT_TRUE(ctrls[0].namespaces[0].path.empty()) << "a plain disk is no path";
  EXPECT_TRUE(ctrls[0].namespaces[0].ana_state.empty());
  EXPECT_FALSE(ctrls[0].namespaces[0].ana_grpid);

  auto heads = multipath_devices(ctrls);
  ASSERT_EQ(heads.size(), 2u) << "nvme0n1 is not a multipath head";
  // Numeric order: subsystem 2 before subsystem 10 (a string sort would put nvme10n1 first).
  EXPECT_EQ(heads[0].name, "nvme2n4");
  EXPECT_EQ(heads[0].nsid, 3u);
  ASSERT_EQ(heads[0].paths.size(), 1u);
  EXPECT_EQ(heads[0].paths[0].controller, "nvme2");
  EXPECT_EQ(heads[0].paths[0].ana_state, "inaccessible");
  EXPECT_EQ(heads[0].paths[0].ana_grpid, 7u);
  const auto& d = heads[1];
  EXPECT_EQ(d.name, "nvme10n1");
  EXPECT_EQ(d.block_device, k.paths.dev_dir + "/nvme10n1");
  EXPECT_EQ(d.subsysnqn, kNqn);
  EXPECT_EQ(d.size_bytes, 2048ull * 512);
  ASSERT_EQ(d.paths.size(), 2u);
  EXPECT_EQ(d.paths[0].controller, "nvme1");  // by controller instance
  EXPECT_EQ(d.paths[0].path, "nvme10c1n1");
  EXPECT_EQ(d.paths[0].state, "live");
  EXPECT_EQ(d.paths[0].ana_state, "optimized");
  EXPECT_EQ(d.paths[0].cntlid, 1u);
  EXPECT_EQ(d.paths[1].controller, "nvme3");
  EXPECT_EQ(d.paths[1].address, "traddr=10.0.0.2,trsvcid=4421");
  EXPECT_EQ(d.paths[1].state, "connecting");
  EXPECT_EQ(d.paths[1].ana_state, "non-optimized");
  EXPECT_EQ(d.paths[1].cntlid, 1000u);
}

TEST(KernelFabricsSysfs, MultipathWithoutAnaHasNoAnaState) {
  FakeKernel k;
  k.add_controller("nvme0", "tcp", "traddr=10.0.0.1,trsvcid=4420", kNqn, 1);
  k.add_multipath_ns("nvme0", 0, 0, 1, 1, 2048);  // no ana_state / ana_grpid files
  auto heads = multipath_devices(list_controllers(k.paths));
  ASSERT_EQ(heads.size(), 1u);
  ASSERT_EQ(heads[0].paths.size(), 1u);
  EXPECT_TRUE(heads[0].paths[0].ana_state.empty());
  EXPECT_FALSE(heads[0].paths[0].ana_grpid);
}

TEST(KernelFabricsSysfs, AddressFields) {
  EXPECT_EQ(address_field("traddr=10.0.0.1,trsvcid=4420,src_addr=10.0.0.9", "trsvcid"), "4420");
  EXPECT_EQ(address_field("traddr=10.0.0.1,trsvcid=4420,src_addr=10.0.0.9", "traddr"), "10.0.0.1");
  EXPECT_EQ(address_field("host_traddr=1.1.1.1,traddr=2.2.2.2", "traddr"), "2.2.2.2");
  EXPECT_EQ(address_field("traddr=10.0.0.1", "trsvcid"), "");
  EXPECT_EQ(address_field("", "traddr"), "");
}

// ---- disconnect -------------------------------------------------------------------------------------------

TEST(KernelFabricsDisconnect, ByNqnWritesOneToEveryMatchingController) {
  FakeKernel k;
  k.add_controller("nvme0", "tcp", "traddr=10.0.0.1,trsvcid=4420", kNqn);
  k.add_controller("nvme1", "rdma", "traddr=10.0.0.2,trsvcid=4420", kNqn);
  k.add_controller("nvme2", "tcp", "traddr=10.0.0.1,trsvcid=4420", "nqn.2024-11.io.rdmablk:other");
  auto r = disconnect_nqn(k.paths, kNqn);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, (std::vector<std::string>{"nvme0", "nvme1"}));
  EXPECT_EQ(slurp(k.ctrl_dir("nvme0") / "delete_controller"), "1");
  EXPECT_EQ(slurp(k.ctrl_dir("nvme1") / "delete_controller"), "1");
  EXPECT_EQ(slurp(k.ctrl_dir("nvme2") / "delete_controller"), "");
}

TEST(KernelFabricsDisconnect, NoMatchIsAnError) {
  FakeKernel k;
  k.add_controller("nvme0", "tcp", "traddr=10.0.0.1,trsvcid=4420", kNqn);
  auto r = disconnect_nqn(k.paths, "nqn.2024-11.io.rdmablk:nope");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().errno_value, ENOENT);
  EXPECT_EQ(r.error().message, "no NVMe controller connected to nqn.2024-11.io.rdmablk:nope");
  EXPECT_EQ(slurp(k.ctrl_dir("nvme0") / "delete_controller"), "");
  auto d = disconnect_device(k.paths, "/dev/nvme9");
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("no NVMe controller /dev/nvme9"), std::string::npos);
  d = disconnect_device(k.paths, "/dev/nvme0n4");
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("no NVMe controller has namespace /dev/nvme0n4"), std::string::npos);
  d = disconnect_device(k.paths, "/dev/sda");
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("'/dev/sda' is not an NVMe controller or namespace device"), std::string::npos);
}

TEST(KernelFabricsDisconnect, DeviceNamesAreNormalised) {
  FakeKernel k;
  k.add_controller("nvme0", "tcp", "traddr=10.0.0.1,trsvcid=4420", kNqn);
  k.add_disk("nvme0", "nvme0n1", 1, 100);
  k.add_controller("nvme4", "tcp", "traddr=10.0.0.1,trsvcid=4420", "nqn.2024-11.io.rdmablk:mp");
  k.add_controller("nvme5", "tcp", "traddr=10.0.0.2,trsvcid=4420", "nqn.2024-11.io.rdmablk:mp");
  k.add_multipath_ns("nvme4", 2, 4, 1, 1, 100);
  k.add_multipath_ns("nvme5", 2, 5, 1, 1, 100);
  using V = std::vector<std::string>;
  EXPECT_EQ(*controllers_for_device(k.paths, "nvme0"), V{"nvme0"});
  EXPECT_EQ(*controllers_for_device(k.paths, "/dev/nvme0"), V{"nvme0"});
  EXPECT_EQ(*controllers_for_device(k.paths, "/dev/nvme0n1"), V{"nvme0"});
  EXPECT_EQ(*controllers_for_device(k.paths, "nvme0n1"), V{"nvme0"});
  EXPECT_EQ(*controllers_for_device(k.paths, "/dev/nvme2n1"), (V{"nvme4", "nvme5"}));  // every path of the head

  auto r = disconnect_device(k.paths, "/dev/nvme0n1");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(slurp(k.ctrl_dir("nvme0") / "delete_controller"), "1");
  EXPECT_EQ(slurp(k.ctrl_dir("nvme4") / "delete_controller"), "");
}

TEST(KernelFabricsDisconnect, UnwritableDeleteControllerIsAnError) {
  FakeKernel k;
  k.add_controller("nvme0", "tcp", "traddr=10.0.0.1,trsvcid=4420", kNqn);
  fs::remove(k.ctrl_dir("nvme0") / "delete_controller");
  fs::create_directory(k.ctrl_dir("nvme0") / "delete_controller");  // open(O_WRONLY) -> EISDIR
  auto r = disconnect_nqn(k.paths, kNqn);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("cannot disconnect nvme0"), std::string::npos) << r.error().message;
}

// ---- the CLI ----------------------------------------------------------------------------------------------

namespace {

using rdmablk::testing::CliRun;

// Records of ublk attachments go to a temporary RDMABLK_RUN_DIR for the duration of a test.
class RunDir {
 public:
  RunDir() {
    char tmpl[] = "/tmp/rdmablk-run.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ::setenv("RDMABLK_RUN_DIR", dir_.c_str(), 1);
  }
  ~RunDir() {
    ::unsetenv("RDMABLK_RUN_DIR");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;
  fs::path ublk() const { return dir_ / "ublk"; }

 private:
  fs::path dir_;
};

CliRun run_cli(const FakeKernel& k, std::vector<const char*> args) {
  CliEnv env;
  env.kernel_paths = k.paths;
  env.kernel_ns_timeout = std::chrono::milliseconds(2000);
  return rdmablk::testing::run_cli(env, std::move(args));
}

}  // namespace

TEST(KernelFabricsCli, ListOnNothing) {
  FakeKernel k;
  RunDir run;
  auto r = run_cli(k, {"list"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "No NVMe-oF volumes attached\n");
  r = run_cli(k, {"list", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["controllers"].empty());
  EXPECT_TRUE(j["ublk"].empty());
}

TEST(KernelFabricsCli, ListShowsControllersAndUblkAttachments) {
  FakeKernel k;
  RunDir run;
  k.add_controller("nvme0", "tcp", "traddr=127.0.0.1,trsvcid=4420,src_addr=127.0.0.1", kNqn, 1);
  k.add_disk("nvme0", "nvme0n1", 1, 2097152);
  put(run.ublk() / "ublkb3.json",
      nlohmann::json{{"device", "/dev/ublkb3"}, {"dev_id", 3}, {"pid", ::getpid()}, {"transport", "rdma"},
                     {"traddr", "10.0.0.1"}, {"trsvcid", "4420"}, {"subnqn", kNqn}, {"nsid", 2}, {"state", "live"}}
          .dump());
  auto r = run_cli(k, {"list"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "Kernel NVMe-oF controllers:\n"
                   "nvme0 tcp traddr=127.0.0.1,trsvcid=4420,src_addr=127.0.0.1 live nqn.2024-11.io.rdmablk:vol0 (cntlid 1)\n"
                   "  " + k.paths.dev_dir + "/nvme0n1 nsid 1 1.07 GB\n"
                   "Userspace (ublk) attachments:\n"
                   "/dev/ublkb3 pid " + std::to_string(::getpid()) +
                   " rdma traddr=10.0.0.1,trsvcid=4420 nqn.2024-11.io.rdmablk:vol0 nsid 2 live\n");
  r = run_cli(k, {"list", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["controllers"][0]["name"], "nvme0");
  EXPECT_EQ(j["controllers"][0]["state"], "live");
  EXPECT_EQ(j["controllers"][0]["namespaces"][0]["size_bytes"], 2097152ull * 512);
  EXPECT_EQ(j["ublk"][0]["device"], "/dev/ublkb3");
  EXPECT_EQ(j["ublk"][0]["nsid"], 2);
}

TEST(KernelFabricsCli, ListGroupsMultipathPathsWithAnaStates) {
  FakeKernel k;
  RunDir run;
  k.add_controller("nvme0", "tcp", "traddr=10.0.2.2,trsvcid=4420,src_addr=10.0.2.15", kNqn, 1);
  k.add_controller("nvme1", "tcp", "traddr=10.0.2.2,trsvcid=4421,src_addr=10.0.2.15", kNqn, 1000, "connecting");
  k.add_multipath_ns("nvme0", 0, 0, 1, 1, 524288, "optimized");
  k.add_multipath_ns("nvme1", 0, 1, 1, 1, 524288, "non-optimized");
  auto r = run_cli(k, {"list"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string dev = k.paths.dev_dir + "/nvme0n1";
  // The controller lines stay as they were (scripts match them); the heads follow, with each path's state.
  EXPECT_EQ(r.out, "Kernel NVMe-oF controllers:\n"
                   "nvme0 tcp traddr=10.0.2.2,trsvcid=4420,src_addr=10.0.2.15 live nqn.2024-11.io.rdmablk:vol0 (cntlid 1)\n"
                   "  " + dev + " nsid 1 268.44 MB\n"
                   "nvme1 tcp traddr=10.0.2.2,trsvcid=4421,src_addr=10.0.2.15 connecting nqn.2024-11.io.rdmablk:vol0 (cntlid 1000)\n"
                   "  " + dev + " nsid 1 268.44 MB\n"
                   "Kernel NVMe-oF multipath devices:\n" +
                   dev + " nsid 1 268.44 MB nqn.2024-11.io.rdmablk:vol0, 2 paths\n"
                   "  nvme0 tcp traddr=10.0.2.2,trsvcid=4420,src_addr=10.0.2.15 live optimized (cntlid 1)\n"
                   "  nvme1 tcp traddr=10.0.2.2,trsvcid=4421,src_addr=10.0.2.15 connecting non-optimized (cntlid 1000)\n");
  r = run_cli(k, {"list", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["controllers"][0]["namespaces"][0]["path"], "nvme0c0n1");
  EXPECT_EQ(j["controllers"][1]["namespaces"][0]["ana_state"], "non-optimized");
  EXPECT_EQ(j["controllers"][1]["namespaces"][0]["ana_grpid"], 1);
  ASSERT_EQ(j["multipath"].size(), 1u);
  const auto& m = j["multipath"][0];
  EXPECT_EQ(m["device"], dev);
  EXPECT_EQ(m["nsid"], 1);
  EXPECT_EQ(m["subsysnqn"], kNqn);
  ASSERT_EQ(m["paths"].size(), 2u);
  EXPECT_EQ(m["paths"][0]["controller"], "nvme0");
  EXPECT_EQ(m["paths"][0]["path"], "nvme0c0n1");
  EXPECT_EQ(m["paths"][0]["state"], "live");
  EXPECT_EQ(m["paths"][0]["ana_state"], "optimized");
  EXPECT_EQ(m["paths"][1]["controller"], "nvme1");
  EXPECT_EQ(m["paths"][1]["state"], "connecting");
  EXPECT_EQ(m["paths"][1]["ana_state"], "non-optimized");
  EXPECT_EQ(m["paths"][1]["cntlid"], 1000);
  EXPECT_EQ(m["paths"][1]["transport"], "tcp");
}

TEST(KernelFabricsCli, DisconnectWithoutMatchOrArguments) {
  FakeKernel k;
  RunDir run;
  auto r = run_cli(k, {"disconnect", "-n", kNqn});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "rdmablk: error: no NVMe controller connected to nqn.2024-11.io.rdmablk:vol0 and no userspace "
                   "(ublk) attachment either\n");
  r = run_cli(k, {"disconnect", "-d", "/dev/ublkb0"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "rdmablk: error: no userspace (ublk) attachment for /dev/ublkb0\n");
  r = run_cli(k, {"disconnect"});
  EXPECT_EQ(r.code, 2);
  r = run_cli(k, {"disconnect", "-n", kNqn, "-d", "nvme0"});
  EXPECT_EQ(r.code, 2);
}

TEST(KernelFabricsCli, DisconnectByNqnAndDevice) {
  FakeKernel k;
  RunDir run;
  k.add_controller("nvme0", "tcp", "traddr=127.0.0.1,trsvcid=4420", kNqn);
  k.add_controller("nvme1", "tcp", "traddr=127.0.0.1,trsvcid=4420", "nqn.2024-11.io.rdmablk:b");
  k.add_disk("nvme1", "nvme1n1", 1, 100);
  auto r = run_cli(k, {"disconnect", "-n", kNqn});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "NQN:nqn.2024-11.io.rdmablk:vol0 disconnected 1 controller(s): nvme0\n");
  r = run_cli(k, {"disconnect", "-d", "/dev/nvme1n1"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "disconnected 1 controller(s): nvme1\n");
  EXPECT_EQ(slurp(k.ctrl_dir("nvme0") / "delete_controller"), "1");
  EXPECT_EQ(slurp(k.ctrl_dir("nvme1") / "delete_controller"), "1");
}

TEST(KernelFabricsCli, ConnectWithoutKernelHostSuggestsUblk) {
  FakeKernel k;
  auto r = run_cli(k, {"connect", "-t", "tcp", "-a", "127.0.0.1", "-n", kNqn});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("the kernel NVMe-oF host is not available"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("use `rdmablk attach --userspace` (ublk) instead"), std::string::npos) << r.err;
  r = run_cli(k, {"connect", "-a", "127.0.0.1", "-n", "bad nqn"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("invalid subsystem NQN"), std::string::npos) << r.err;
  r = run_cli(k, {"connect", "-a", "127.0.0.1", "-n", kNqn, "-k", "5", "--kato", "6"});
  EXPECT_EQ(r.code, 2);  // the same setting twice
}

TEST(KernelFabricsCli, ConnectPrintsControllerAndDevices) {
  FakeKernel k;
  k.add_controller("nvme0", "tcp", "traddr=127.0.0.1,trsvcid=4420,src_addr=127.0.0.1", kNqn, 1);
  k.add_disk("nvme0", "nvme0n1", 1, 2097152);
  FakeFabricsDevice dev("instance=0,cntlid=1\n");
  if (!dev.usable()) GTEST_SKIP() << "no pseudo-terminals here";
  k.paths.fabrics_device = dev.path();
  auto r = run_cli(k, {"connect", "-t", "tcp", "-a", "127.0.0.1", "-n", kNqn, "-q", kHostNqn, "-i", "2", "-Q", "64",
                       "-l", "30", "-c", "3", "-k", "15"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(dev.received(),
            "nqn=nqn.2024-11.io.rdmablk:vol0,transport=tcp,traddr=127.0.0.1,trsvcid=4420,hostnqn=" +
                std::string(kHostNqn) +
                ",hostid=4a7e9c3b-1d2f-4e6a-8b5c-7d9e0f1a2b3c,nr_io_queues=2,queue_size=64,keep_alive_tmo=15,"
                "reconnect_delay=3,ctrl_loss_tmo=30");
  EXPECT_EQ(r.out, "connected nvme0: tcp traddr=127.0.0.1,trsvcid=4420 nqn.2024-11.io.rdmablk:vol0 (cntlid 1)\n" +
                       k.paths.dev_dir + "/nvme0n1 nsid 1 1.07 GB\n");
}
