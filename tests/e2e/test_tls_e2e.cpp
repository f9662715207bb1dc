// End to end, NVMe/TCP over TLS 1.3 with a PSK: the real rdmablk-target with `tls: required` and
// `tls: optional` listeners and a host PSK from a 0600 file, against the rdmablk CLI (--tls-key /
// --tls-key-file) and the initiator library. A plain host is refused at ICReq (the host says the target may
// require TLS, the target logs it), a wrong PSK fails the handshake, the right one serves a verified bench
// job and digests inside TLS, an optional listener serves both, discovery shows the secure channel, and a
// reload changes a listener's TLS policy for new connections.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include "e2e_common.h"
#include "security/tls_psk.h"

namespace e2e {
namespace {

using rdmablk::initiator::Controller;
namespace sec = rdmablk::security;

std::string new_psk(sec::PskHash hash = sec::PskHash::sha256) {
  auto k = sec::generate_configured_psk(hash);
  EXPECT_TRUE(k);
  auto text = sec::format_psk_interchange(*k);
  EXPECT_TRUE(text);
  return text ? *text : std::string();
}

// io listener with `tls: POLICY`, a plain discovery listener; kHostA has the PSK in ${DIR}/host-a.psk,
// kHostB is listed without one.
std::string tls_config(const std::string& policy) {
  return std::string(R"(listeners:
  - transport: tcp
    address: 127.0.0.1
    port: ${IO_PORT}
    tls: )") + policy + R"(
  - transport: tcp
    address: 127.0.0.1
    port: ${DISC_PORT}
    role: discovery
reactors: 2
subsystems:
  - nqn: ${NQN}
    hosts:
      - nqn: )" + kHostA + R"(
        tls_psk_file: host-a.psk
      - )" + kHostB + R"(
    namespaces:
      - nsid: 1
        backend: ram
        size: 32MiB
)";
}

struct TlsTarget {
  TargetProcess t;
  std::string psk = new_psk();
  std::filesystem::path psk_file;

  ::testing::AssertionResult start(const std::string& policy) {
    write_file(t.dir() / "host-a.psk", psk + "\n");
    ::chmod((t.dir() / "host-a.psk").c_str(), 0600);
    psk_file = t.dir() / "host-a.psk";
    return t.start(tls_config(policy));
  }
};

std::vector<std::string> cli(const TargetProcess& t, const std::string& command, std::vector<std::string> extra,
                             const std::string& hostnqn = kHostA) {
  std::vector<std::string> argv{RDMABLK_CLI_BINARY, command, "-t", "tcp", "-a", "127.0.0.1", "-s",
                                std::to_string(t.io_port()), "-n", kSubnqn, "-q", hostnqn};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

std::string dump(const ProcessResult& r, const TargetProcess& t) {
  return "exit " + std::to_string(r.exit_status) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err +
         "\n--- target log ---\n" + t.log();
}

TEST(TlsE2e, RequiredRefusesPlainAndWrongKeysAndServesTheRightOne) {
  TlsTarget tt;
  ASSERT_TRUE(tt.start("required"));
  TargetProcess& t = tt.t;
  EXPECT_TRUE(t.wait_for_log("tls required")) << t.log();
  EXPECT_EQ(t.log().find(tt.psk.substr(16, 20)), std::string::npos) << "the PSK is in the log";

  // A plain host: the socket is closed at ICReq; the host asks whether TLS is required, the target says why.
  std::size_t mark = t.log_size();
  auto plain = run_process(cli(t, "identify", {}), t.dir(), 60s);
  EXPECT_NE(plain.exit_status, 0) << dump(plain, t);
  EXPECT_NE(plain.err.find("require TLS"), std::string::npos) << dump(plain, t);
  EXPECT_TRUE(t.wait_for_log("plain NVMe/TCP refused", 10s, mark)) << t.log();

  // A wrong PSK: the handshake fails on both sides.
  mark = t.log_size();
  auto wrong = run_process(cli(t, "identify", {"--tls-key", new_psk()}), t.dir(), 60s);
  EXPECT_NE(wrong.exit_status, 0) << dump(wrong, t);
  EXPECT_NE(wrong.err.find("TLS"), std::string::npos) << dump(wrong, t);
  EXPECT_TRUE(t.wait_for_log("TLS handshake failed", 10s, mark)) << t.log();

  // kHostB has no PSK: an identity the target has no key for.
  mark = t.log_size();
  auto unknown = run_process(cli(t, "identify", {"--tls-key", tt.psk}, kHostB), t.dir(), 60s);
  EXPECT_NE(unknown.exit_status, 0) << dump(unknown, t);
  EXPECT_TRUE(t.wait_for_log("TLS handshake failed", 10s, mark)) << t.log();

  // --tls alone has no key to offer in userspace: refused before connecting.
  auto no_key = run_process(cli(t, "identify", {"--tls"}), t.dir(), 60s);
  EXPECT_EQ(no_key.exit_status, 2) << dump(no_key, t);
  EXPECT_NE(no_key.err.find("--tls-key"), std::string::npos) << dump(no_key, t);

  // The right PSK, in nvme-cli's spelling: identify works and the target logs the TLS session.
  mark = t.log_size();
  auto ok = run_process(cli(t, "identify", {"--tls_key", tt.psk}), t.dir(), 60s);
  EXPECT_EQ(ok.exit_status, 0) << dump(ok, t);
  EXPECT_TRUE(t.wait_for_log("TLS 1.3", 10s, mark)) << t.log();
  const std::string log = t.log().substr(mark);
  EXPECT_TRUE(log.find("kernel TLS") != std::string::npos || log.find("userspace TLS") != std::string::npos) << log;

  // A verified bench job over TLS (key from a file).
  const auto job = t.dir() / "verify.fio";
  write_file(job, "[global]\nnamespace=1\nbs=4k\niodepth=16\n\n[verify]\nrw=randwrite\nsize=4m\nverify=crc32c\n");
  auto argv = bench_argv(t, job.string());
  argv.insert(argv.end(), {"--tls-key-file", tt.psk_file.string()});
  auto bench = run_process(argv, t.dir(), 120s);
  ASSERT_EQ(bench.exit_status, 0) << dump(bench, t);
  auto j = nlohmann::json::parse(bench.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << bench.out;
  EXPECT_EQ(j["jobs"][0]["error"], 0);
  EXPECT_EQ(j["jobs"][0]["write"]["io_bytes"], 4u << 20);
  EXPECT_EQ(j["jobs"][0]["read"]["io_bytes"], 4u << 20) << "verify reads every written block back";

  // A key file other users may read is refused.
  ::chmod(tt.psk_file.c_str(), 0644);
  auto open = run_process(cli(t, "identify", {"--tls-key-file", tt.psk_file.string()}), t.dir(), 60s);
  EXPECT_EQ(open.exit_status, 2) << dump(open, t);
  EXPECT_NE(open.err.find("mode 0644 lets other users read"), std::string::npos) << dump(open, t);
  EXPECT_EQ(open.err.find(tt.psk.substr(16, 20)), std::string::npos);
}

TEST(TlsE2e, LibraryWithDigestsInsideTls) {
  TlsTarget tt;
  ASSERT_TRUE(tt.start("required"));
  TargetProcess& t = tt.t;
  auto opts = controller_options(t.io_port(), kSubnqn);
  opts.header_digest = true;
  opts.data_digest = true;
  auto psk = rdmablk::initiator::parse_tls_key(tt.psk, "key");
  ASSERT_TRUE(psk);
  opts.tls.psk = *psk;
  auto ctrl = connect_or_fail(opts, t);
  ASSERT_TRUE(ctrl);
  auto q = io_queue_or_fail(*ctrl, 1);
  ASSERT_TRUE(q);
  uint64_t lba = 0;
  for (uint32_t len : {512u, 4096u, 65536u, 512u * 1024u}) {
    auto data = pattern(len, len);
    std::vector<uint8_t> back(len);
    auto w = write_blocks(*q, 1, lba, 512, data);
    ASSERT_TRUE(w) << len << " bytes: " << w.error().message;
    auto r = read_blocks(*q, 1, lba, 512, back);
    ASSERT_TRUE(r) << len << " bytes: " << r.error().message;
    EXPECT_TRUE(back == data) << len << " bytes differ";
    lba += len / 512;
  }
  EXPECT_EQ(t.log().find("digest"), std::string::npos) << t.log();
  q->disconnect();
  EXPECT_TRUE(ctrl->shutdown());

  // The PSK is host A's: host B holding a copy offers an identity naming host B, for which the target has
  // no key, so it cannot borrow host A's.
  auto other = controller_options(t.io_port(), kSubnqn, kHostB);
  other.tls.psk = *psk;
  auto refused = Controller::connect(other);
  EXPECT_FALSE(refused);
}

TEST(TlsE2e, OptionalServesBothAndDiscoveryShowsTheSecureChannel) {
  TlsTarget tt;
  ASSERT_TRUE(tt.start("optional"));
  TargetProcess& t = tt.t;
  auto plain = run_process(cli(t, "identify", {}), t.dir(), 60s);
  EXPECT_EQ(plain.exit_status, 0) << dump(plain, t);
  std::size_t mark = t.log_size();
  auto tls = run_process(cli(t, "identify", {"--tls-key", tt.psk}), t.dir(), 60s);
  EXPECT_EQ(tls.exit_status, 0) << dump(tls, t);
  EXPECT_TRUE(t.wait_for_log("TLS 1.3", 10s, mark)) << t.log();

  // The discovery log (from the plain discovery listener): the io listener's entry says TLS 1.3, not required.
  auto disc = run_process({RDMABLK_CLI_BINARY, "discover", "-t", "tcp", "-a", "127.0.0.1", "-s",
                           std::to_string(t.discovery_port()), "-q", kHostA, "-o", "json"},
                          t.dir(), 60s);
  ASSERT_EQ(disc.exit_status, 0) << dump(disc, t);
  auto j = nlohmann::json::parse(disc.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << disc.out;
  bool found_io = false, found_disc = false;
  for (const auto& r : j["records"]) {
    if (r["trsvcid"] == std::to_string(t.io_port())) {
      found_io = true;
      EXPECT_EQ(r["treq"], "not required") << r.dump();
      EXPECT_EQ(r["sectype"], "tls13") << r.dump();
    } else if (r["trsvcid"] == std::to_string(t.discovery_port())) {
      found_disc = true;
      EXPECT_EQ(r["treq"], "not specified") << r.dump();
      EXPECT_EQ(r["sectype"], "none") << r.dump();
    }
  }
  EXPECT_TRUE(found_io && found_disc) << disc.out;
}

TEST(TlsE2e, ReloadSwapsThePsksForNewHandshakes) {
  TlsTarget tt;
  ASSERT_TRUE(tt.start("required"));
  TargetProcess& t = tt.t;
  const std::string old_psk = tt.psk;
  const std::string new_psk_text = new_psk();
  write_file(tt.psk_file, new_psk_text + "\n");
  ::chmod(tt.psk_file.c_str(), 0600);
  ASSERT_TRUE(t.reload(tls_config("required")));
  auto old_key = run_process(cli(t, "identify", {"--tls-key", old_psk}), t.dir(), 60s);
  EXPECT_NE(old_key.exit_status, 0) << dump(old_key, t);
  auto new_key = run_process(cli(t, "identify", {"--tls-key", new_psk_text}), t.dir(), 60s);
  EXPECT_EQ(new_key.exit_status, 0) << dump(new_key, t);
}

// A listener's `tls` changes at a reload, for the connections accepted from then on: a target started
// plain (no TLS context yet) requires TLS after the reload, and a host connected before goes on in plain.
TEST(TlsE2e, AReloadChangesTlsForNewConnectionsOnly) {
  TlsTarget tt;
  ASSERT_TRUE(tt.start("none"));
  TargetProcess& t = tt.t;
  auto before = connect_or_fail(controller_options(t.io_port(), kSubnqn), t);
  ASSERT_TRUE(before);
  auto q = io_queue_or_fail(*before, 1);
  ASSERT_TRUE(q);
  auto plain = run_process(cli(t, "identify", {}), t.dir(), 60s);
  EXPECT_EQ(plain.exit_status, 0) << dump(plain, t);

  ASSERT_TRUE(t.reload(tls_config("required")));
  EXPECT_TRUE(t.wait_for_log("changed; new connections get the new settings")) << t.log();
  plain = run_process(cli(t, "identify", {}), t.dir(), 60s);
  EXPECT_NE(plain.exit_status, 0) << dump(plain, t);
  EXPECT_NE(plain.err.find("require TLS"), std::string::npos) << dump(plain, t);
  auto tls = run_process(cli(t, "identify", {"--tls-key", tt.psk}), t.dir(), 60s);
  EXPECT_EQ(tls.exit_status, 0) << dump(tls, t);
  auto data = pattern(4096, 7);
  std::vector<uint8_t> back(4096);
  ASSERT_TRUE(write_blocks(*q, 1, 0, 512, data));
  ASSERT_TRUE(read_blocks(*q, 1, 0, 512, back));
  EXPECT_EQ(back, data) << "the plain connection from before the reload";

  ASSERT_TRUE(t.reload(tls_config("none")));
  plain = run_process(cli(t, "identify", {}), t.dir(), 60s);
  EXPECT_EQ(plain.exit_status, 0) << dump(plain, t);
  q->disconnect();
  EXPECT_TRUE(before->shutdown());
}

TEST(TlsE2e, RequiredListenerIsAdvertisedAsRequired) {
  TlsTarget tt;
  ASSERT_TRUE(tt.start("required"));
  TargetProcess& t = tt.t;
  auto disc = run_process({RDMABLK_CLI_BINARY, "discover", "-t", "tcp", "-a", "127.0.0.1", "-s",
                           std::to_string(t.discovery_port()), "-q", kHostA, "-o", "json"},
                          t.dir(), 60s);
  ASSERT_EQ(disc.exit_status, 0) << dump(disc, t);
  auto j = nlohmann::json::parse(disc.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << disc.out;
  bool found = false;
  for (const auto& r : j["records"]) {
    if (r["trsvcid"] != std::to_string(t.io_port())) continue;
    found = true;
    EXPECT_EQ(r["treq"], "required") << r.dump();
    EXPECT_EQ(r["sectype"], "tls13") << r.dump();
  }
  EXPECT_TRUE(found) << disc.out;
}

}  // namespace
}  // namespace e2e
