// NVMe/TCP TLS on the command line and in the attach config: --tls / --tls-key (nvme-cli's --tls_key) /
// --tls-key-file, the kernel's option string (",tls" last, as libnvme's build_options), the attach YAML's
// tls / tls_key / tls_key_file, and `rdmablk gen-tls-key`. Keys never show up in messages.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "initiator/cli/attach_config.h"
#include "initiator/cli_runner.h"
#include "initiator/host/controller.h"
#include "initiator/host/kernel_fabrics.h"
#include "security/tls_psk.h"
#include "transport/tcp/tcp_tls.h"
#include "support/temp_dir.h"

using namespace rdmablk;
using namespace rdmablk::initiator;
namespace fs = std::filesystem;

namespace {

constexpr const char* kNqn = "nqn.2024-11.io.rdmablk:vol0";
constexpr const char* kHost = "nqn.2014-08.org.nvmexpress:uuid:4a7e9c3b-1d2f-4e6a-8b5c-7d9e0f1a2b3c";
// The NVMe/TCP specification's interchange example (also in nvme-cli's docs); its CRC-32 checked with python3
// zlib.crc32.
constexpr const char* kKey = "NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:";
constexpr const char* kKeyBody = "VRLbtnN9AQb2WXW3c9";
constexpr const char* kBadKey = "NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrA:";  // CRC wrong

bool contains(const std::string& s, std::string_view what) { return s.find(what) != std::string::npos; }

using rdmablk::testing::TempDir;

// A connector that records what the controller asked for and refuses to connect (no network needed).
struct RecordingConnector {
  std::shared_ptr<std::vector<transport::HostQueueOptions>> seen = std::make_shared<std::vector<transport::HostQueueOptions>>();
  QueueConnector get() {
    auto s = seen;
    return [s](const transport::HostQueueOptions& o) -> Result<std::unique_ptr<transport::HostQueue>> {
      s->push_back(o);
      return make_error("refused by the test", ECONNREFUSED);
    };
  }
};

}  // namespace

TEST(CliTls, KernelConnectPassesTlsLast) {
  KernelConnectParams p;
  p.transport = "tcp";
  p.traddr = "127.0.0.1";
  p.trsvcid = "4420";
  p.nqn = kNqn;
  p.hostnqn = kHost;
  p.nr_io_queues = 2;
  p.tls = true;
  auto s = build_connect_options(p);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(*s, std::string("nqn=nqn.2024-11.io.rdmablk:vol0,transport=tcp,traddr=127.0.0.1,trsvcid=4420,hostnqn=") +
                    kHost + ",nr_io_queues=2,tls");
}

TEST(CliTls, ConnectThroughTheKernelWritesTlsAndRefusesAKeyOnTheCommandLine) {
  TempDir dir;
  CliEnv env;
  env.kernel_paths.fabrics_device = dir.write("nvme-fabrics", "", 0600).string();
  env.kernel_paths.sysfs_nvme = (dir.path() / "sys").string();
  auto r = rdmablk::testing::run_cli(env, {"connect", "-a", "127.0.0.1", "-n", kNqn, "-q", kHost, "--tls"});
  EXPECT_EQ(r.code, 1);
  std::ifstream in(env.kernel_paths.fabrics_device);
  std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(written.ends_with(",tls")) << written;

  r = rdmablk::testing::run_cli(env, {"connect", "-a", "127.0.0.1", "-n", kNqn, "-q", kHost, "--tls_key", kKey});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, ".nvme keyring")) << r.err;
  EXPECT_FALSE(contains(r.err, kKeyBody)) << r.err;
}

TEST(CliTls, UserspaceCommandsOfferThePskOnEveryQueue) {
  RecordingConnector rec;
  CliEnv env;
  env.connector = rec.get();
  auto r = rdmablk::testing::run_cli(env, {"identify", "-a", "127.0.0.1", "-n", kNqn, "-q", kHost, "--tls-key", kKey});
  EXPECT_NE(r.code, 0);
  ASSERT_EQ(rec.seen->size(), 1u) << r.err;
  const auto& tls = rec.seen->front().tls;
  ASSERT_TRUE(tls);
  EXPECT_EQ(tls->config.hostnqn, kHost);
  EXPECT_EQ(tls->config.subnqn, kNqn);
  EXPECT_EQ(tls->config.identity_version, 1);
  EXPECT_EQ(tls->config.psk.hash, security::PskHash::sha256);
  EXPECT_TRUE(tls->context);
  EXPECT_FALSE(contains(r.err, kKeyBody)) << r.err;

  // Discovery with a key from a 0600 file: the identity names the discovery NQN.
  TempDir dir;
  const auto key_file = dir.write("host.psk", std::string(kKey) + "\n", 0600);
  rec.seen->clear();
  r = rdmablk::testing::run_cli(env, {"discover", "-a", "127.0.0.1", "-q", kHost, "--tls-key-file", key_file.c_str()});
  ASSERT_EQ(rec.seen->size(), 1u) << r.err;
  ASSERT_TRUE(rec.seen->front().tls);
  EXPECT_EQ(rec.seen->front().tls->config.subnqn, "nqn.2014-08.org.nvmexpress.discovery");

  // No TLS flag: plain.
  rec.seen->clear();
  r = rdmablk::testing::run_cli(env, {"identify", "-a", "127.0.0.1", "-n", kNqn, "-q", kHost});
  ASSERT_EQ(rec.seen->size(), 1u) << r.err;
  EXPECT_FALSE(rec.seen->front().tls);
}

TEST(CliTls, BadKeysAndFilesAreRefusedBeforeConnecting) {
  RecordingConnector rec;
  CliEnv env;
  env.connector = rec.get();
  TempDir dir;
  struct Case {
    std::vector<const char*> args;
    const char* says;
  };
  const auto open_file = dir.write("open.psk", std::string(kKey) + "\n", 0644);
  const auto bad_file = dir.write("bad.psk", std::string(kBadKey) + "\n", 0600);
  const std::vector<Case> cases = {
      {{"--tls"}, "--tls-key"},
      {{"--tls-key", kBadKey}, "invalid --tls-key"},
      {{"--tls-key-file", open_file.c_str()}, "mode 0644 lets other users read"},
      {{"--tls-key-file", bad_file.c_str()}, "bad.psk"},
      {{"--tls-key-file", "/nonexistent/key"}, "cannot read"},
      {{"--tls-key", kKey, "-t", "rdma"}, "NVMe/TCP"},
  };
  for (const auto& c : cases) {
    std::vector<const char*> args{"identify", "-a", "127.0.0.1", "-n", kNqn, "-q", kHost};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto r = rdmablk::testing::run_cli(env, args);
    EXPECT_EQ(r.code, 2) << c.says << ": " << r.err;
    EXPECT_TRUE(contains(r.err, c.says)) << r.err;
    EXPECT_FALSE(contains(r.err, kKeyBody)) << r.err;
  }
  EXPECT_TRUE(rec.seen->empty());
}

TEST(CliTls, AttachConfigKeys) {
  TempDir dir;
  const auto key_file = dir.write("vol.psk", std::string(kKey) + "\n", 0600);
  auto c = parse_attach_config(std::string("address: 127.0.0.1\nnqn: ") + kNqn + "\ntls_key: \"" + kKey + "\"\n", "a.yaml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->tls);
  EXPECT_EQ(c->tls_key, kKey);
  c = parse_attach_config(std::string("address: 127.0.0.1\nnqn: ") + kNqn + "\ntls_key_file: " + key_file.string() + "\n",
                          "a.yaml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->tls_key, kKey);
  c = parse_attach_config(std::string("address: 127.0.0.1\nnqn: ") + kNqn + "\nmode: kernel\ntls: true\n", "a.yaml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->tls);
  EXPECT_TRUE(c->tls_key.empty());

  struct Bad {
    std::string extra;
    const char* says;
  };
  const std::vector<Bad> bad = {
      {"tls: true\n", "needs tls_key"},
      {std::string("tls_key: \"") + kBadKey + "\"\n", "a.yaml:3:"},
      {std::string("mode: kernel\ntls_key: \"") + kKey + "\"\n", "keyring"},
      {std::string("transport: rdma\ntls_key: \"") + kKey + "\"\n", "tcp only"},
      {std::string("tls: false\ntls_key: \"") + kKey + "\"\n", "tls: false"},
      {"tls_key_file: " + dir.write("open.psk", std::string(kKey) + "\n", 0644).string() + "\n", "mode 0644 lets other users read"},
  };
  for (const auto& b : bad) {
    auto r = parse_attach_config(std::string("address: 127.0.0.1\nnqn: ") + kNqn + "\n" + b.extra, "a.yaml");
    ASSERT_FALSE(r) << b.extra;
    EXPECT_TRUE(contains(r.error().message, b.says)) << r.error().message;
    EXPECT_FALSE(contains(r.error().message, kKeyBody)) << r.error().message;
  }
  // --config says everything: the TLS flags are refused beside it.
  auto r = rdmablk::testing::run_cli(CliEnv{}, {"attach", "--config", "/nonexistent.yaml", "--tls-key", kKey});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "--tls-key and --config both given")) << r.err;
}

TEST(CliTls, GenTlsKeyPrintsKeysThatParseBack) {
  std::set<std::string> seen;
  for (auto [args, hash, length] : {std::tuple{std::vector<const char*>{"gen-tls-key"}, security::PskHash::sha256, 32u},
                                    std::tuple{std::vector<const char*>{"gen-tls-key", "-m", "2"}, security::PskHash::sha384, 48u},
                                    std::tuple{std::vector<const char*>{"gen-tls-key", "--hmac", "1"}, security::PskHash::sha256, 32u}}) {
    auto r = rdmablk::testing::run_cli(CliEnv{}, args);
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_TRUE(r.out.ends_with(":\n")) << r.out;
    auto k = security::parse_psk_interchange(r.out);
    ASSERT_TRUE(k) << k.error().message;
    EXPECT_EQ(k->hash, hash);
    EXPECT_EQ(k->key.size(), length);
    EXPECT_TRUE(seen.insert(r.out).second) << "the same key twice";
  }
  auto r = rdmablk::testing::run_cli(CliEnv{}, {"gen-tls-key", "-m", "3"});
  EXPECT_NE(r.code, 0);
}
