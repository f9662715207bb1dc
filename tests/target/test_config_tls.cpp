// The target config's NVMe/TCP TLS settings: a listener's `tls: none | optional | required` (refused on RDMA),
// a host entry's `tls_psk` / `tls_psk_file` (read by load_config() with the key-file checks), the global
// `tls_psk_derivation`, the PSK store the daemon's server context looks keys up in, the discovery log's
// TREQ/TSAS, and no key in any message or description.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "protocol/log_pages.h"
#include "security/tls_psk.h"
#include "target/config/config.h"
#include "target/daemon/transport_options.h"
#include "support/temp_dir.h"

namespace {

using namespace rdmablk::target;
using rdmablk::security::PskDerivation;
using rdmablk::security::PskHash;
using rdmablk::security::PskIdentity;
using rdmablk::transport::tcp::TlsPolicy;
namespace fs = std::filesystem;

constexpr const char* kHostA = "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555";
constexpr const char* kHostB = "nqn.2014-08.org.nvmexpress:uuid:99999999-2222-3333-4444-555555555555";
constexpr const char* kSub = "nqn.2024-11.io.rdmablk:test";
// The interchange-format example of the NVMe/TCP transport specification (also in nvme-cli's and libnvme's
// documentation): 32 bytes, SHA-256 transform. Its CRC-32 was checked with python3 zlib.crc32.
constexpr const char* kSpecKey = "NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:";
constexpr const char* kKeyBody = "VRLbtnN9AQb2WXW3c9";  // a piece of the key that must never show up

std::string doc(const std::string& listener_extra, const std::string& hosts_block, const std::string& top = "") {
  return top + "listeners: [{address: 127.0.0.1" + listener_extra + "}]\n" +
         "subsystems:\n"
         "  - nqn: " + kSub + "\n" +
         "    namespaces: [{nsid: 1, backend: ram, size: 1MiB}]\n"
         "    hosts:\n" +
         hosts_block;
}

std::string parse_error(const std::string& text) {
  auto config = parse_config(text, "t.yaml");
  EXPECT_FALSE(config) << "parsed unexpectedly";
  return config ? std::string() : config.error().message;
}

using rdmablk::testing::TempDir;

TEST(ConfigTls, ListenerPolicyDefaultsToNoneAndParses) {
  auto plain = parse_config(doc("", std::string("      - ") + kHostA + "\n"), "t.yaml");
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_EQ(plain->listeners[0].tls, TlsPolicy::none);
  for (auto [text, policy] : {std::pair{"none", TlsPolicy::none}, std::pair{"optional", TlsPolicy::optional},
                              std::pair{"required", TlsPolicy::required}}) {
    auto c = parse_config(doc(std::string(", tls: ") + text, std::string("      - ") + kHostA + "\n"), "t.yaml");
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->listeners[0].tls, policy) << text;
  }
  auto c = parse_config(doc(", tls: required", std::string("      - ") + kHostA + "\n"), "t.yaml");
  ASSERT_TRUE(c);
  EXPECT_NE(describe(*c).find("tls required"), std::string::npos) << describe(*c);
}

TEST(ConfigTls, ListenerPolicyErrors) {
  const std::string hosts = std::string("      - ") + kHostA + "\n";
  std::string e = parse_error(doc(", tls: always", hosts));
  EXPECT_NE(e.find("t.yaml:1:"), std::string::npos) << e;
  EXPECT_NE(e.find("listeners[0].tls"), std::string::npos) << e;
  e = parse_error(doc(", transport: rdma, tls: required", hosts));
  EXPECT_NE(e.find("listeners[0].tls"), std::string::npos) << e;
  EXPECT_NE(e.find("NVMe/TCP listeners only"), std::string::npos) << e;
  // tls: none on an RDMA listener says nothing that is not true: allowed.
  EXPECT_TRUE(parse_config(doc(", transport: rdma, tls: none", hosts), "t.yaml"));
}

TEST(ConfigTls, HostPskInlineIsParsedAndNeverDescribed) {
  const std::string text = doc(", tls: required", std::string("      - nqn: ") + kHostA + "\n" +
                                                      "        tls_psk: \"" + kSpecKey + "\"\n" +
                                                      "      - " + kHostB + "\n");
  auto c = parse_config(text, "t.yaml");
  ASSERT_TRUE(c) << c.error().message;
  const auto& hosts = c->subsystems[0].host_configs;
  ASSERT_EQ(hosts.size(), 2u);
  ASSERT_TRUE(hosts[0].tls_psk.key);
  EXPECT_EQ(hosts[0].tls_psk.key->hash, PskHash::sha256);
  EXPECT_EQ(hosts[0].tls_psk.key->key.size(), 32u);
  EXPECT_EQ(hosts[0].tls_psk.describe(), "set");
  EXPECT_FALSE(hosts[1].tls_psk.configured());
  EXPECT_EQ(hosts[1].tls_psk.describe(), "none");
  const std::string d = describe(*c);
  EXPECT_NE(d.find("TLS PSKs for 1 host"), std::string::npos) << d;
  EXPECT_EQ(d.find(kKeyBody), std::string::npos) << d;
}

TEST(ConfigTls, HostPskErrorsNeverQuoteTheKey) {
  // A bad CRC (last base64 characters changed): the error names the line and field, not the key.
  const std::string bad = "NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrA:";
  std::string e = parse_error(doc(", tls: optional", std::string("      - nqn: ") + kHostA + "\n" +
                                                         "        tls_psk: \"" + bad + "\"\n"));
  EXPECT_NE(e.find("t.yaml:7:"), std::string::npos) << e;
  EXPECT_NE(e.find("subsystems[0].hosts[0].tls_psk"), std::string::npos) << e;
  EXPECT_EQ(e.find(kKeyBody), std::string::npos) << e;
  e = parse_error(doc(", tls: optional", std::string("      - nqn: ") + kHostA + "\n" + "        tls_psk: \"" +
                                             kSpecKey + "\"\n" + "        tls_psk_file: /etc/k\n"));
  EXPECT_NE(e.find("not both"), std::string::npos) << e;
  EXPECT_EQ(e.find(kKeyBody), std::string::npos) << e;
  // A DH-HMAC-CHAP secret where a TLS PSK belongs.
  e = parse_error(doc(", tls: optional", std::string("      - nqn: ") + kHostA + "\n" +
                                             "        tls_psk: \"DHHC-1:00:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:\"\n"));
  EXPECT_NE(e.find("tls_psk"), std::string::npos) << e;
  EXPECT_EQ(e.find(kKeyBody), std::string::npos) << e;
}

TEST(ConfigTls, APskWithoutATlsListenerIsAWarning) {
  auto c = parse_config(doc("", std::string("      - nqn: ") + kHostA + "\n" + "        tls_psk: \"" + kSpecKey + "\"\n"),
                        "t.yaml");
  ASSERT_TRUE(c) << c.error().message;
  bool warned = false;
  for (const auto& w : c->warnings) warned |= w.find("no listener has tls") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST(ConfigTls, DerivationIsGlobalAndRestartOnly) {
  const std::string hosts = std::string("      - ") + kHostA + "\n";
  auto standard = parse_config(doc(", tls: optional", hosts), "t.yaml");
  auto compat = parse_config(doc(", tls: optional", hosts, "tls_psk_derivation: libnvme_compat\n"), "t.yaml");
  ASSERT_TRUE(standard && compat);
  EXPECT_EQ(standard->tls_psk_derivation, PskDerivation::standard);
  EXPECT_EQ(compat->tls_psk_derivation, PskDerivation::libnvme_compat);
  EXPECT_EQ(restart_only_changes(*standard, *compat), std::vector<std::string>{"tls_psk_derivation"});
  auto required = parse_config(doc(", tls: required", hosts), "t.yaml");
  ASSERT_TRUE(required);
  EXPECT_TRUE(restart_only_changes(*standard, *required).empty()) << "a listener's TLS policy changes live";
  std::string e = parse_error(doc("", hosts, "tls_psk_derivation: old\n"));
  EXPECT_NE(e.find("tls_psk_derivation"), std::string::npos) << e;
}

TEST(ConfigTls, PskFilesAreReadWithTheKeyFileChecks) {
  TempDir dir;
  dir.write("host.psk", std::string(kSpecKey) + "\n", 0600);
  dir.write("open.psk", std::string(kSpecKey) + "\n", 0644);
  dir.write("garbage.psk", "NVMeTLSkey-1:01:AAAA:\n", 0600);
  auto config_with = [&](const std::string& file) {
    return dir.write("t.yaml", doc(", tls: required", std::string("      - nqn: ") + kHostA + "\n" +
                                                          "        tls_psk_file: " + file + "\n"));
  };
  auto ok = load_config(config_with("host.psk").string());  // relative to the config's directory
  ASSERT_TRUE(ok) << ok.error().message;
  const auto& psk = ok->subsystems[0].host_configs[0].tls_psk;
  ASSERT_TRUE(psk.key);
  EXPECT_EQ(psk.file, (dir.path() / "host.psk").string());
  EXPECT_EQ(psk.describe(), "file " + (dir.path() / "host.psk").string());
  auto inline_config = parse_config(doc("", std::string("      - nqn: ") + kHostA + "\n" + "        tls_psk: \"" + kSpecKey + "\"\n"),
                                    "t.yaml");
  ASSERT_TRUE(inline_config);
  EXPECT_TRUE(psk.key->key.equals(inline_config->subsystems[0].host_configs[0].tls_psk.key->key.bytes()));

  auto open = load_config(config_with("open.psk").string());
  ASSERT_FALSE(open);
  EXPECT_NE(open.error().message.find("mode 0644"), std::string::npos) << open.error().message;
  EXPECT_NE(open.error().message.find("tls_psk_file"), std::string::npos) << open.error().message;
  auto garbage = load_config(config_with("garbage.psk").string());
  ASSERT_FALSE(garbage);
  EXPECT_NE(garbage.error().message.find("garbage.psk"), std::string::npos) << garbage.error().message;
  ::symlink((dir.path() / "host.psk").c_str(), (dir.path() / "link.psk").c_str());
  auto link = load_config(config_with("link.psk").string());
  ASSERT_FALSE(link);
  EXPECT_NE(link.error().message.find("symbolic link"), std::string::npos) << link.error().message;
}

TEST(ConfigTls, PskStoreFindsTheHostsKeyForTheSubsystemAndForDiscovery) {
  auto c = parse_config(doc(", tls: required", std::string("      - nqn: ") + kHostA + "\n" + "        tls_psk: \"" +
                                                    kSpecKey + "\"\n" + "      - " + kHostB + "\n"),
                        "t.yaml");
  ASSERT_TRUE(c) << c.error().message;
  auto store = std::make_shared<TlsPskStore>();
  store->update(*c);
  EXPECT_EQ(store->size(), 1u);
  PskIdentity id;
  id.hostnqn = kHostA;
  id.subnqn = kSub;
  auto found = store->find(id);
  ASSERT_TRUE(found);
  EXPECT_TRUE(found->key.equals(c->subsystems[0].host_configs[0].tls_psk.key->key.bytes()));
  id.subnqn = "nqn.2014-08.org.nvmexpress.discovery";
  EXPECT_TRUE(store->find(id));
  id.subnqn = "nqn.2024-11.io.rdmablk:other";
  EXPECT_FALSE(store->find(id));
  id.hostnqn = kHostB;
  id.subnqn = kSub;
  EXPECT_FALSE(store->find(id));  // listed, but without a PSK
  // A reload without the key: gone for the next handshake.
  auto without = parse_config(doc(", tls: required", std::string("      - ") + kHostA + "\n"), "t.yaml");
  ASSERT_TRUE(without);
  store->update(*without);
  id.hostnqn = kHostA;
  EXPECT_FALSE(store->find(id));

  auto context = tls_server_context(store, PskDerivation::standard);
  ASSERT_TRUE(context) << context.error().message;
  auto opts = tls_server_options(c->listeners[0], *context);
  EXPECT_EQ(opts.policy, TlsPolicy::required);
  EXPECT_EQ(opts.context, *context);
  ListenerConfig plain;
  EXPECT_EQ(tls_server_options(plain, *context).context, nullptr);
}

}  // namespace
