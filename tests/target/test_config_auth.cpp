// The target config's DH-HMAC-CHAP settings: `hosts:` entries as maps with dhchap_key / dhchap_key_file /
// dhchap_ctrl_key(_file) / dhchap_hashes / dhchap_dhgroups, the subsystem's require_authentication, key
// files read by load_config() with their mode checked, and no secret in any message or description.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "security/dhchap_key.h"
#include "target/config/config.h"
#include "support/temp_dir.h"

namespace {

using namespace rdmablk::target;
using rdmablk::protocol::auth::DhGroupId;
using rdmablk::protocol::auth::HashId;
using rdmablk::security::dhchap::DhchapKey;
using rdmablk::security::dhchap::KeyTransform;
namespace fs = std::filesystem;

constexpr const char* kHostA = "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555";
constexpr const char* kHostB = "nqn.2014-08.org.nvmexpress:uuid:99999999-2222-3333-4444-555555555555";

std::string secret(std::size_t len = 32, KeyTransform t = KeyTransform::sha256) {
  auto k = DhchapKey::generate(len, t);
  EXPECT_TRUE(k);
  return k->format();
}

// The document with `hosts_block` (lines indented for `hosts:`) and `extra` subsystem keys.
std::string doc(const std::string& hosts_block, const std::string& extra = "") {
  return "listeners: [{address: 127.0.0.1}]\n"
         "subsystems:\n"
         "  - nqn: nqn.2024-11.io.rdmablk:test\n" +
         extra +
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

TEST(ConfigAuth, HostEntriesAreNqnsOrMapsWithSecrets) {
  const std::string host_key = secret(32, KeyTransform::sha256);
  const std::string ctrl_key = secret(48, KeyTransform::none);
  const std::string text = doc(std::string("      - ") + kHostB + "\n" +               // line 6
                               "      - nqn: " + kHostA + "\n" +                       // line 7
                               "        dhchap_key: \"" + host_key + "\"\n" +          // line 8
                               "        dhchap_ctrl_key: '" + ctrl_key + "'\n" +       // line 9
                               "        dhchap_hashes: [sha512, sha256]\n" +
                               "        dhchap_dhgroups: [ffdhe4096, null]\n");
  auto config = parse_config(text, "t.yaml");
  ASSERT_TRUE(config) << config.error().message;
  const SubsystemConfig& sub = config->subsystems[0];
  ASSERT_EQ(sub.hosts.size(), 2u);
  EXPECT_EQ(sub.hosts[0], kHostB);
  EXPECT_EQ(sub.hosts[1], kHostA);
  ASSERT_EQ(sub.host_configs.size(), 2u);
  EXPECT_FALSE(sub.require_authentication);

  const HostConfig* b = sub.find_host(kHostB);
  ASSERT_NE(b, nullptr);
  EXPECT_FALSE(b->dhchap_key.configured());
  EXPECT_EQ(b->dhchap_key.describe(), "none");
  EXPECT_EQ(b->dhchap_hashes.size(), 3u);  // defaults: all
  EXPECT_EQ(b->dhchap_dhgroups.size(), 6u);

  const HostConfig* a = sub.find_host(kHostA);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->dhchap_key.key);
  EXPECT_EQ(a->dhchap_key.key->format(), host_key);
  EXPECT_EQ(a->dhchap_key.at.line, 8);
  ASSERT_TRUE(a->dhchap_ctrl_key.key);
  EXPECT_EQ(a->dhchap_ctrl_key.key->format(), ctrl_key);
  EXPECT_EQ(a->dhchap_key.describe(), "set");
  EXPECT_EQ(a->dhchap_hashes, (std::vector<HashId>{HashId::sha512, HashId::sha256}));
  EXPECT_EQ(a->dhchap_dhgroups, (std::vector<DhGroupId>{DhGroupId::ffdhe4096, DhGroupId::null}));
  EXPECT_EQ(sub.find_host("nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000000"), nullptr);

  // What the startup log and --check-config print names no secret.
  const std::string summary = describe(*config);
  EXPECT_NE(summary.find("DH-HMAC-CHAP for 1 host"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("DHHC-1"), std::string::npos);
  EXPECT_TRUE(config->warnings.empty());
}

TEST(ConfigAuth, TheReadmesPythonRecipeMakesAUsableSecret) {
  // From the python3 one-liner of docs/security.md#making-secrets, with k = bytes(range(32)) instead of
  // os.urandom(32):
  //   "DHHC-1:00:" + base64.b64encode(k + zlib.crc32(k).to_bytes(4, "little")).decode() + ":"
  auto config = parse_config(doc(std::string("      - nqn: ") + kHostA +
                                 "\n        dhchap_key: \"DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:\"\n"),
                             "t.yaml");
  ASSERT_TRUE(config) << config.error().message;
  const auto& key = config->subsystems[0].host_configs[0].dhchap_key.key;
  ASSERT_TRUE(key);
  ASSERT_EQ(key->secret().size(), 32u);
  for (std::size_t i = 0; i < 32; ++i) EXPECT_EQ(key->secret()[i], i);
  EXPECT_EQ(key->transform(), KeyTransform::none);
}

TEST(ConfigAuth, RequireAuthentication) {
  const std::string key = secret();
  auto config = parse_config(doc(std::string("      - {nqn: ") + kHostA + ", dhchap_key: \"" + key + "\"}\n",
                                 "    require_authentication: true\n"),
                             "t.yaml");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_TRUE(config->subsystems[0].require_authentication);
  EXPECT_TRUE(config->warnings.empty());
  // A listed host without a secret would be refused: allowed, with a warning naming its line.
  config = parse_config(doc(std::string("      - ") + kHostB + "\n", "    require_authentication: true\n"), "t.yaml");
  ASSERT_TRUE(config) << config.error().message;
  ASSERT_EQ(config->warnings.size(), 1u);
  EXPECT_EQ(config->warnings[0],
            "t.yaml:7:9: subsystems[0].hosts[0]: no dhchap_key, and the subsystem requires authentication: this "
            "host will be refused");
  EXPECT_EQ(parse_error(doc(std::string("      - ") + kHostB + "\n", "    require_authentication: maybe\n")),
            "t.yaml:4:29: subsystems[0].require_authentication: expected true or false, got 'maybe'");
}

TEST(ConfigAuth, ErrorsNameTheLineAndFieldAndNeverTheSecret) {
  std::string key = secret();
  // A corrupted secret (one base64 character changed: the CRC no longer matches).
  std::string bad = key;
  bad[12] = bad[12] == 'A' ? 'B' : 'A';
  std::string err = parse_error(doc(std::string("      - nqn: ") + kHostA + "\n        dhchap_key: \"" + bad + "\"\n"));
  EXPECT_EQ(err.rfind("t.yaml:7:21: subsystems[0].hosts[0].dhchap_key: ", 0), 0u) << err;
  EXPECT_EQ(err.find(bad.substr(10, 20)), std::string::npos) << "the message quotes the secret: " << err;

  EXPECT_EQ(parse_error(doc(std::string("      - nqn: ") + kHostA + "\n        dhchap_key: \"" + key +
                            "\"\n        dhchap_key_file: /k\n")),
            "t.yaml:8:9: subsystems[0].hosts[0].dhchap_key_file: give dhchap_key or dhchap_key_file, not both "
            "(dhchap_key at line 7)");
  EXPECT_EQ(parse_error(doc(std::string("      - nqn: ") + kHostA + "\n        dhchap_ctrl_key: \"" + key + "\"\n")),
            "t.yaml:7:9: subsystems[0].hosts[0].dhchap_ctrl_key: a controller secret needs the host's own "
            "dhchap_key (bidirectional authentication authenticates the host first)");
  EXPECT_EQ(parse_error(doc(std::string("      - nqn: ") + kHostA + "\n        dhchap_key: \"" + key +
                            "\"\n        dhchap_hashes: [sha256, md5]\n")),
            "t.yaml:8:33: subsystems[0].hosts[0].dhchap_hashes[1]: unknown hash function 'md5' (expected sha256, "
            "sha384 or sha512)");
  EXPECT_EQ(parse_error(doc(std::string("      - nqn: ") + kHostA + "\n        dhchap_key: \"" + key +
                            "\"\n        dhchap_dhgroups: [ffdhe2048, ffdhe2048]\n")),
            "t.yaml:8:38: subsystems[0].hosts[0].dhchap_dhgroups[1]: listed twice");
  EXPECT_EQ(parse_error(doc(std::string("      - nqn: ") + kHostA + "\n        dhchap_key: \"" + key +
                            "\"\n        dhchap_dhgroups: []\n")),
            "t.yaml:8:26: subsystems[0].hosts[0].dhchap_dhgroups: an empty list (leave the key out for all of them)");
  EXPECT_EQ(parse_error(doc("      - dhchap_key: \"" + key + "\"\n")),
            "t.yaml:6:9: subsystems[0].hosts[0].nqn: missing (required: the host's NQN)");
  err = parse_error(doc(std::string("      - nqn: ") + kHostA + "\n        dhchap_secret: x\n"));
  EXPECT_NE(err.find("t.yaml:7:9: subsystems[0].hosts[0].dhchap_secret: unknown key"), std::string::npos) << err;
  EXPECT_EQ(parse_error(doc(std::string("      - ") + kHostA + "\n      - {nqn: " + kHostA + "}\n")),
            "t.yaml:7:15: subsystems[0].hosts[1].nqn: duplicate host NQN (first at line 6)");
}

TEST(ConfigAuth, HashesAndGroupsWithoutASecretAreIgnoredWithAWarning) {
  auto config = parse_config(doc(std::string("      - nqn: ") + kHostA + "\n        dhchap_hashes: [sha256]\n"),
                             "t.yaml");
  ASSERT_TRUE(config) << config.error().message;
  ASSERT_EQ(config->warnings.size(), 1u);
  EXPECT_EQ(config->warnings[0], "t.yaml:7:9: subsystems[0].hosts[0].dhchap_hashes: ignored: the host has no dhchap_key");
}

TEST(ConfigAuth, KeyFilesAreReadByLoadConfigWithTheirModeChecked) {
  TempDir dir;
  const std::string host_key = secret(48, KeyTransform::sha384);
  const std::string ctrl_key = secret(64, KeyTransform::sha512);
  dir.write("keys/host", host_key + "\n", 0600);
  dir.write("keys/ctrl", ctrl_key + "\n", 0400);
  const std::string hosts = std::string("      - nqn: ") + kHostA +
                            "\n        dhchap_key_file: keys/host\n        dhchap_ctrl_key_file: keys/ctrl\n";
  auto path = dir.write("target.yaml", doc(hosts), 0644);

  // parse_config only records the path.
  auto parsed = parse_config(doc(hosts), "t.yaml");
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_FALSE(parsed->subsystems[0].host_configs[0].dhchap_key.key);
  EXPECT_EQ(parsed->subsystems[0].host_configs[0].dhchap_key.file, "keys/host");

  auto config = load_config(path.string());
  ASSERT_TRUE(config) << config.error().message;
  const HostConfig& h = config->subsystems[0].host_configs[0];
  ASSERT_TRUE(h.dhchap_key.key);
  EXPECT_EQ(h.dhchap_key.key->format(), host_key);
  ASSERT_TRUE(h.dhchap_ctrl_key.key);
  EXPECT_EQ(h.dhchap_ctrl_key.key->format(), ctrl_key);
  EXPECT_EQ(h.dhchap_key.file, (dir.path() / "keys/host").string());
  EXPECT_EQ(h.dhchap_key.describe(), "file " + (dir.path() / "keys/host").string());

  // Readable by others: refused, naming the YAML line, the field, the file and its mode.
  ::chmod((dir.path() / "keys/host").c_str(), 0644);
  auto r = load_config(path.string());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, path.string() + ":7:26: subsystems[0].hosts[0].dhchap_key_file: " +
                                   (dir.path() / "keys/host").string() +
                                   ": mode 0644 lets other users read or change the secret (chmod 600 it; a group "
                                   "may only read it)");
  EXPECT_EQ(r.error().message.find(host_key), std::string::npos);
  // Group-writable: refused too; group-readable is fine.
  ::chmod((dir.path() / "keys/host").c_str(), 0660);
  EXPECT_FALSE(load_config(path.string()));
  ::chmod((dir.path() / "keys/host").c_str(), 0640);
  EXPECT_TRUE(load_config(path.string()));

  // Missing file, a symbolic link, a directory, and a file that is not a secret.
  ::unlink((dir.path() / "keys/ctrl").c_str());
  r = load_config(path.string());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, path.string() + ":8:31: subsystems[0].hosts[0].dhchap_ctrl_key_file: cannot read " +
                                   (dir.path() / "keys/ctrl").string() + ": No such file or directory");
  fs::create_symlink(dir.path() / "keys/host", dir.path() / "keys/ctrl");
  r = load_config(path.string());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("a symbolic link"), std::string::npos) << r.error().message;
  fs::remove(dir.path() / "keys/ctrl");
  fs::create_directory(dir.path() / "keys/ctrl");
  ::chmod((dir.path() / "keys/ctrl").c_str(), 0700);
  r = load_config(path.string());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("not a regular file"), std::string::npos) << r.error().message;
  fs::remove(dir.path() / "keys/ctrl");
  dir.write("keys/ctrl", "DHHC-1:01:not base64 at all!:\n", 0600);
  r = load_config(path.string());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message.rfind(path.string() + ":8:31: subsystems[0].hosts[0].dhchap_ctrl_key_file: " +
                                        (dir.path() / "keys/ctrl").string() + ": ",
                                    0),
            0u)
      << r.error().message;
  EXPECT_EQ(r.error().message.find("not base64 at all"), std::string::npos) << r.error().message;
}

}  // namespace
