// DH-HMAC-CHAP on the command line and in the attach config: -S/--dhchap-secret and -C/--dhchap-ctrl-secret
// in the kernel's option string (libnvme's order), the attach YAML keys (inline or from a file that is not
// world-readable), and `rdmablk gen-dhchap-key`. Secrets must never show up in messages.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "initiator/cli/attach_config.h"
#include "initiator/cli_runner.h"
#include "initiator/host/kernel_fabrics.h"
#include "security/dhchap_key.h"
#include "support/temp_dir.h"

using namespace rdmablk;
using namespace rdmablk::initiator;
namespace fs = std::filesystem;
namespace dh = rdmablk::security::dhchap;

namespace {

constexpr const char* kNqn = "nqn.2024-11.io.rdmablk:vol0";
// Printed by nvme-cli 2.3 `nvme gen-dhchap-key` (the same strings tests/security/test_dhchap_key.cpp
// checks): a 32-byte key, and a 64-byte one whose base64 ends in '=' padding.
constexpr const char* kKey32 = "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:";
constexpr const char* kKey64 =
    "DHHC-1:00:iGVJVNG+u/App0+yioN/FjXYMjbd6dmqLzaghuo5bpBaRAnKHfoxbMYEuE4/zL+EdAUcHY8aMk8vLYBt9KuArMEXLis=:";
// The base64 part of each, to look for in messages.
constexpr const char* kKey32Body = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh";
constexpr const char* kKey64Body = "iGVJVNG+u/App0+yioN/FjXYMjbd6dmqLzaghuo5bp";

bool contains(const std::string& s, std::string_view what) { return s.find(what) != std::string::npos; }

// A temporary folder, removed afterwards.
using rdmablk::testing::TempDir;

KernelConnectParams params() {
  KernelConnectParams p;
  p.transport = "tcp";
  p.traddr = "127.0.0.1";
  p.trsvcid = "4420";
  p.nqn = kNqn;
  p.hostnqn = "nqn.2014-08.org.nvmexpress:uuid:4a7e9c3b-1d2f-4e6a-8b5c-7d9e0f1a2b3c";
  p.nr_io_queues = 2;
  return p;
}

}  // namespace

// ---- the kernel's option string --------------------------------------------------------------------------

TEST(KernelFabricsDhchap, SecretsGoAfterTheHostIdentityAsLibnvmeWritesThem) {
  auto p = params();
  p.dhchap_secret = kKey32;
  p.dhchap_ctrl_secret = std::string(kKey64) + "\n";  // from a key file: the newline must not reach the kernel
  auto s = build_connect_options(p);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(*s, std::string("nqn=nqn.2024-11.io.rdmablk:vol0,transport=tcp,traddr=127.0.0.1,trsvcid=4420,"
                            "hostnqn=nqn.2014-08.org.nvmexpress:uuid:4a7e9c3b-1d2f-4e6a-8b5c-7d9e0f1a2b3c,"
                            "dhchap_secret=") +
                    kKey32 + ",dhchap_ctrl_secret=" + kKey64 + ",nr_io_queues=2");
}

TEST(KernelFabricsDhchap, BadSecretsAreRefusedWithoutQuotingThem) {
  auto p = params();
  p.dhchap_secret = "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaX:";  // CRC wrong
  auto s = build_connect_options(p);
  ASSERT_FALSE(s);
  EXPECT_TRUE(contains(s.error().message, "invalid --dhchap-secret")) << s.error().message;
  EXPECT_FALSE(contains(s.error().message, kKey32Body));

  p = params();
  p.dhchap_secret = std::string(kKey32) + ",nr_io_queues=99";  // an injected option
  EXPECT_FALSE(build_connect_options(p));

  p = params();
  p.dhchap_ctrl_secret = kKey64;
  s = build_connect_options(p);
  ASSERT_FALSE(s);
  EXPECT_TRUE(contains(s.error().message, "--dhchap-ctrl-secret needs --dhchap-secret")) << s.error().message;
  EXPECT_FALSE(contains(s.error().message, kKey64Body));
}

// `rdmablk connect -S -C` writes them to the fabrics device. A regular file stands in for it: the option
// string lands in the file and the (empty) reply fails to parse, which is all this test needs.
TEST(KernelFabricsDhchap, ConnectPassesTheSecretsToTheKernel) {
  TempDir dir;
  CliEnv env;
  env.kernel_paths.fabrics_device = dir.write("nvme-fabrics", "", 0600).string();
  env.kernel_paths.sysfs_nvme = (dir.path() / "sys").string();
  auto r = rdmablk::testing::run_cli(env, {"connect", "-a", "127.0.0.1", "-n", kNqn, "-q",
                                           "nqn.2014-08.org.nvmexpress:uuid:4a7e9c3b-1d2f-4e6a-8b5c-7d9e0f1a2b3c",
                                           "--dhchap-secret", kKey32, "--dhchap-ctrl-secret", kKey64});
  EXPECT_EQ(r.code, 1);
  std::ifstream in(env.kernel_paths.fabrics_device);
  std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(written.ends_with(std::string(",hostid=4a7e9c3b-1d2f-4e6a-8b5c-7d9e0f1a2b3c,dhchap_secret=") + kKey32 +
                                ",dhchap_ctrl_secret=" + kKey64))
      << written;
  EXPECT_FALSE(contains(r.err, kKey32Body)) << r.err;
  EXPECT_FALSE(contains(r.err, kKey64Body)) << r.err;

  // -S / -C are nvme-cli's short forms.
  std::ofstream(env.kernel_paths.fabrics_device, std::ios::trunc).flush();
  r = rdmablk::testing::run_cli(env, {"connect", "-a", "127.0.0.1", "-n", kNqn, "-S", kKey32});
  std::ifstream again(env.kernel_paths.fabrics_device);
  written.assign((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(contains(written, std::string(",dhchap_secret=") + kKey32)) << written;
  EXPECT_FALSE(contains(written, "dhchap_ctrl_secret"));

  // A bad secret stops before the kernel is asked.
  std::ofstream(env.kernel_paths.fabrics_device, std::ios::trunc).flush();
  r = rdmablk::testing::run_cli(env, {"connect", "-a", "127.0.0.1", "-n", kNqn, "-S", "DHHC-1:07:xyz:"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "invalid --dhchap-secret")) << r.err;
  EXPECT_EQ(fs::file_size(env.kernel_paths.fabrics_device), 0u);
}

TEST(KernelFabricsDhchap, RejectedKeyErrnoSaysAuthentication) {
  auto p = params();
  EXPECT_TRUE(contains(describe_connect_errno(EKEYREJECTED, p), "pass --dhchap-secret"));
  p.dhchap_secret = kKey32;
  std::string m = describe_connect_errno(EKEYREJECTED, p);
  EXPECT_TRUE(contains(m, "authentication failed")) << m;
  EXPECT_FALSE(contains(m, kKey32Body));
}

// ---- the attach config ------------------------------------------------------------------------------------

namespace {

const std::string kBase = "address: 192.168.100.10\nnqn: nqn.2024-11.io.rdmablk:vol1\n";

Result<AttachConfig> parse(const std::string& extra) { return parse_attach_config(kBase + extra, "a.yaml"); }

}  // namespace

TEST(AttachConfigDhchap, InlineSecrets) {
  auto c = parse(std::string("dhchap_secret: \"") + kKey32 + "\"\ndhchap_ctrl_secret: \"" + kKey64 + "\"\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->dhchap_secret, kKey32);
  EXPECT_EQ(c->dhchap_ctrl_secret, kKey64);
  auto none = parse("");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->dhchap_secret.empty());
  EXPECT_TRUE(none->dhchap_ctrl_secret.empty());
}

TEST(AttachConfigDhchap, SecretsFromFilesThatOnlyTheOwnerReads) {
  TempDir dir;
  auto host = dir.write("host.key", std::string(kKey32) + "\n", 0600);
  auto ctrl = dir.write("ctrl.key", kKey64, 0440);
  auto c = parse("dhchap_secret_file: " + host.string() + "\ndhchap_ctrl_secret_file: " + ctrl.string() + "\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->dhchap_secret, kKey32);  // the file's first line
  EXPECT_EQ(c->dhchap_ctrl_secret, kKey64);

  auto open = dir.write("open.key", kKey32, 0644);
  auto e = parse("dhchap_secret_file: " + open.string() + "\n");
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().message, "a.yaml:3:21: dhchap_secret_file: " + open.string() +
                                   ": mode 0644 lets other users read or change the secret (chmod 600 it; a group may "
                                   "only read it)");

  e = parse("dhchap_secret_file: host.key\n");
  ASSERT_FALSE(e);
  EXPECT_TRUE(contains(e.error().message, "is not an absolute path")) << e.error().message;
  e = parse("dhchap_secret_file: " + (dir.path() / "missing").string() + "\n");
  ASSERT_FALSE(e);
  EXPECT_TRUE(contains(e.error().message, "No such file or directory")) << e.error().message;

  auto bad = dir.write("bad.key", "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaX:\n", 0600);
  e = parse("dhchap_secret_file: " + bad.string() + "\n");
  ASSERT_FALSE(e);
  EXPECT_TRUE(contains(e.error().message, "a.yaml:3:21: dhchap_secret_file: ")) << e.error().message;
  EXPECT_FALSE(contains(e.error().message, kKey32Body));
}

TEST(AttachConfigDhchap, Errors) {
  TempDir dir;
  auto host = dir.write("host.key", kKey32, 0600);
  auto e = parse(std::string("dhchap_secret: \"") + kKey32 + "\"\ndhchap_secret_file: " + host.string() + "\n");
  ASSERT_FALSE(e);
  EXPECT_TRUE(contains(e.error().message, "a.yaml:4:1: dhchap_secret_file: give dhchap_secret or dhchap_secret_file, "
                                          "not both"))
      << e.error().message;

  e = parse(std::string("dhchap_ctrl_secret: \"") + kKey64 + "\"\n");
  ASSERT_FALSE(e);
  EXPECT_TRUE(contains(e.error().message, "a.yaml:3:1: dhchap_ctrl_secret: needs dhchap_secret")) << e.error().message;
  EXPECT_FALSE(contains(e.error().message, kKey64Body));

  e = parse("dhchap_secret: \"DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaX:\"\n");
  ASSERT_FALSE(e);
  EXPECT_TRUE(contains(e.error().message, "a.yaml:3:16: dhchap_secret: ")) << e.error().message;
  EXPECT_FALSE(contains(e.error().message, kKey32Body));

  e = parse("dhchap_secret: [1, 2]\n");
  ASSERT_FALSE(e);
  EXPECT_FALSE(contains(e.error().message, "dhchap_secret_file"));  // the known key, not a suggestion
}

TEST(AttachConfigDhchap, AttachCommandTakesTheFlagsOrTheConfig) {
  // --config says everything: the secret flags are refused beside it (before anything is read).
  auto r = rdmablk::testing::run_cli(CliEnv{}, {"attach", "--config", "/nonexistent.yaml", "-S", kKey32});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "--dhchap-secret and --config both given")) << r.err;
  EXPECT_FALSE(contains(r.err, kKey32Body));
  // Without --config the flags are checked like the others.
  r = rdmablk::testing::run_cli(CliEnv{}, {"attach", "--userspace", "-a", "127.0.0.1", "-n", kNqn, "-C", kKey64});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "--dhchap-ctrl-secret needs --dhchap-secret")) << r.err;
}

// ---- gen-dhchap-key ---------------------------------------------------------------------------------------

TEST(GenDhchapKey, PrintsKeysThatParseBack) {
  struct Case {
    std::vector<const char*> args;
    std::size_t length;
    dh::KeyTransform transform;
  };
  const std::vector<Case> cases = {
      {{}, 32, dh::KeyTransform::none},
      {{"--key-length", "48"}, 48, dh::KeyTransform::none},
      {{"-l", "64"}, 64, dh::KeyTransform::none},
      {{"--hmac", "1"}, 32, dh::KeyTransform::sha256},
      {{"-m", "2", "-n", "nqn.2024-11.io.rdmablk:host1"}, 48, dh::KeyTransform::sha384},
      {{"--hmac", "3", "--key-length", "64"}, 64, dh::KeyTransform::sha512},
  };
  for (const auto& c : cases) {
    std::vector<const char*> args{"gen-dhchap-key"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto r = rdmablk::testing::run_cli(CliEnv{}, args);
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_FALSE(r.out.empty());
    EXPECT_EQ(r.out.back(), '\n');
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1);
    std::string text = r.out.substr(0, r.out.size() - 1);
    auto k = dh::DhchapKey::parse(text);
    ASSERT_TRUE(k) << k.error().message;
    EXPECT_EQ(k->secret().size(), c.length) << text;
    EXPECT_EQ(k->transform(), c.transform) << text;
    EXPECT_EQ(k->format(), text);
    EXPECT_TRUE(text.starts_with(fmt::format("DHHC-1:{:02x}:", static_cast<unsigned>(c.transform)))) << text;
  }
  // Random each time.
  std::set<std::string> seen;
  for (int i = 0; i < 4; ++i) seen.insert(rdmablk::testing::run_cli(CliEnv{}, {"gen-dhchap-key"}).out);
  EXPECT_EQ(seen.size(), 4u);
}

TEST(GenDhchapKey, RefusesWhatNvmeCliRefuses) {
  auto r = rdmablk::testing::run_cli(CliEnv{}, {"gen-dhchap-key", "--hmac", "1", "--key-length", "64"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "--key-length 64 does not fit --hmac 1 (it needs 32)")) << r.err;
  r = rdmablk::testing::run_cli(CliEnv{}, {"gen-dhchap-key", "--hmac", "4"});
  EXPECT_EQ(r.code, 2);
  r = rdmablk::testing::run_cli(CliEnv{}, {"gen-dhchap-key", "--key-length", "40"});
  EXPECT_EQ(r.code, 2);
  r = rdmablk::testing::run_cli(CliEnv{}, {"gen-dhchap-key", "--hmac", "1", "--nqn", "not an nqn"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "invalid NQN")) << r.err;
  EXPECT_TRUE(r.out.empty());
}
