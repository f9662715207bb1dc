// End to end, the unhappy paths: malformed NVMe/TCP at a live target (only that connection ends), bad
// configurations through the binary (exit 2, one line naming file:line and field, nothing started), and
// SIGTERM with I/O in flight (the target drains and exits 0; the initiator reports errors, no hang).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "e2e_common.h"
#include "protocol/fabrics.h"
#include "protocol/properties.h"
#include "protocol/tcp_pdu.h"

namespace e2e {
namespace {

using rdmablk::initiator::Controller;
namespace p = rdmablk::protocol;
namespace pt = rdmablk::protocol::tcp;

// ---------------------------------------------------------------------------------------------------------
// Malformed PDUs at a live target
// ---------------------------------------------------------------------------------------------------------

void send_all(int fd, const std::vector<uint8_t>& bytes) {
  std::size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<std::size_t>(n);
  }
}

std::vector<uint8_t> icreq_bytes(uint8_t hlen = pt::kIcPduLen) {
  auto req = pt::build_icreq({});
  req.ch.hlen = hlen;
  std::vector<uint8_t> b(sizeof(req));
  p::store(b.data(), req);
  return b;
}

// A PDU of `type` with an 8-byte common header and `total` bytes in all (hlen and plen as given).
std::vector<uint8_t> pdu(uint8_t type, uint8_t flags, uint8_t hlen, uint8_t pdo, uint32_t plen, std::size_t total) {
  std::vector<uint8_t> b(total, 0);
  b[0] = type;
  b[1] = flags;
  b[2] = hlen;
  b[3] = pdo;
  std::memcpy(&b[4], &plen, 4);  // little-endian host
  return b;
}

struct MalformedCase {
  const char* name;
  bool handshake_first;
  std::vector<uint8_t> bytes;
};

std::vector<MalformedCase> malformed_cases() {
  std::vector<MalformedCase> cases;
  cases.push_back({"garbage instead of ICReq", false, std::vector<uint8_t>(16, 0xFF)});
  cases.push_back({"ICReq with hlen 100", false, icreq_bytes(100)});
  cases.push_back({"CapsuleCmd before ICReq", false, pdu(0x04, 0, 72, 0, 72, 72)});
  cases.push_back({"unknown PDU type 0x08", true, pdu(0x08, 0, 24, 0, 24, 24)});
  cases.push_back({"CapsuleCmd with plen 100 and no data offset", true, pdu(0x04, 0, 72, 0, 100, 100)});
  cases.push_back({"CapsuleCmd with hlen 40", true, pdu(0x04, 0, 40, 0, 72, 72)});
  cases.push_back({"controller-to-host PDU (CapsuleResp) from the host", true, pdu(0x05, 0, 24, 0, 24, 24)});
  {
    // H2CData for a transfer tag the controller never handed out.
    auto b = pdu(0x06, pt::kFlagLastPdu, 24, 24, 24 + 512, 24 + 512);
    const uint16_t cccid = 1, ttag = 77;
    const uint32_t datal = 512;
    std::memcpy(&b[8], &cccid, 2);
    std::memcpy(&b[10], &ttag, 2);
    std::memcpy(&b[16], &datal, 4);
    cases.push_back({"H2CData with an unknown ttag", true, b});
  }
  return cases;
}

// Finds a C2HTermReq among the PDUs received (after the ICResp, if any).
bool has_term_req(const std::vector<uint8_t>& stream) {
  std::size_t at = 0;
  while (at + 8 <= stream.size()) {
    uint32_t plen = 0;
    std::memcpy(&plen, &stream[at + 4], 4);
    if (stream[at] == static_cast<uint8_t>(pt::PduType::c2h_term_req)) return true;
    if (plen < 8) return false;
    at += plen;
  }
  return false;
}

TEST(RobustnessE2e, MalformedPdusCloseOnlyTheirConnection) {
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace)));
  auto good = connect_or_fail(controller_options(t.io_port(), kSubnqn), t);
  ASSERT_TRUE(good);
  auto q = io_queue_or_fail(*good, 1);
  ASSERT_TRUE(q);

  uint64_t lba = 0;
  auto good_io = [&](const std::string& after) {
    auto data = pattern(32768, static_cast<uint32_t>(lba));
    std::vector<uint8_t> back(data.size());
    auto w = write_blocks(*q, 1, lba, 512, data);
    ASSERT_TRUE(w) << "after " << after << ": " << w.error().message;
    auto r = read_blocks(*q, 1, lba, 512, back);
    ASSERT_TRUE(r) << "after " << after << ": " << r.error().message;
    EXPECT_TRUE(back == data) << "after " << after;
    good->service();
    lba += data.size() / 512;
  };

  good_io("connect");
  for (const auto& c : malformed_cases()) {
    SCOPED_TRACE(c.name);
    int fd = raw_connect(t.io_port());
    ASSERT_GE(fd, 0);
    std::vector<uint8_t> received;
    if (c.handshake_first) {
      send_all(fd, icreq_bytes());
      // The ICResp arrives before anything else; keep whatever came with it.
      auto deadline = std::chrono::steady_clock::now() + 30s;
      while (received.size() < pt::kIcPduLen && std::chrono::steady_clock::now() < deadline) {
        uint8_t buf[256];
        ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0) received.insert(received.end(), buf, buf + n);
        if (n == 0) break;
        if (n < 0) std::this_thread::sleep_for(1ms);
      }
      ASSERT_GE(received.size(), pt::kIcPduLen) << "no ICResp";
      ASSERT_EQ(received[0], static_cast<uint8_t>(pt::PduType::ic_resp));
      received.erase(received.begin(), received.begin() + pt::kIcPduLen);
    }
    send_all(fd, c.bytes);
    EXPECT_TRUE(wait_peer_closed(fd, 30s, &received)) << "the target kept the bad connection open";
    EXPECT_TRUE(has_term_req(received)) << "no C2HTermReq before the close (" << received.size() << " bytes)";
    ::close(fd);
    good_io(c.name);
  }

  // A PDU cut short by the host hanging up, and a connection that never says anything: no harm done.
  {
    int fd = raw_connect(t.io_port());
    ASSERT_GE(fd, 0);
    send_all(fd, icreq_bytes());
    auto cut = pdu(0x04, 0, 72, 0, 72 + 4096, 40);
    send_all(fd, cut);
    ::close(fd);
    int idle = raw_connect(t.io_port());
    ASSERT_GE(idle, 0);
    good_io("a truncated CapsuleCmd");
    ::close(idle);
  }

  EXPECT_TRUE(t.wait_for_log("protocol error, terminating connection")) << t.log();
  EXPECT_FALSE(good->failed()) << good->failure();
  q->disconnect();
  EXPECT_TRUE(good->shutdown());
  // The target is intact: a new controller works, and it stops cleanly (the fixture checks exit 0).
  auto again = connect_or_fail(controller_options(t.io_port(), kSubnqn, kHostB), t);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->shutdown());
}

// ---------------------------------------------------------------------------------------------------------
// Configuration errors through the binary
// ---------------------------------------------------------------------------------------------------------

struct ConfigRun {
  ProcessResult result;
  std::string path;
};

ConfigRun run_target_on(const TempDir& dir, const std::string& name, const std::string& yaml,
                        std::vector<std::string> extra = {}) {
  ConfigRun r;
  r.path = (dir.path() / name).string();
  write_file(r.path, yaml);
  std::vector<std::string> args = {"--config", r.path};
  args.insert(args.end(), extra.begin(), extra.end());
  r.result = run_target(args, dir.path());
  return r;
}

// Exit status 2 and exactly one line: "rdmablk-target: FILE:LINE:COL: FIELD: ..." containing `detail`.
void expect_config_error(const ConfigRun& r, int line, const std::string& field, const std::string& detail) {
  SCOPED_TRACE(r.path);
  EXPECT_FALSE(r.result.timed_out) << "the target started on a bad config";
  EXPECT_EQ(r.result.exit_status, 2) << r.result.err;
  const std::string& err = r.result.err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << "not exactly one line:\n" << err;
  const std::string prefix = "rdmablk-target: " + r.path + ":" + std::to_string(line) + ":";
  EXPECT_EQ(err.rfind(prefix, 0), 0u) << "expected a line starting with '" << prefix << "', got:\n" << err;
  EXPECT_NE(err.find(": " + field + ": "), std::string::npos) << "field " << field << " not named:\n" << err;
  EXPECT_NE(err.find(detail), std::string::npos) << err;
  EXPECT_EQ(r.result.out.find("ready"), std::string::npos);
}

std::string base_config(uint16_t port, const std::string& subsystem_tail) {
  return "listeners:\n"
         "  - transport: tcp\n"
         "    address: 127.0.0.1\n"
         "    port: " +
         std::to_string(port) +
         "\n"
         "subsystems:\n"
         "  - nqn: nqn.2024-11.io.rdmablk:cfg\n"   // line 6
         "    allow_any_host: true\n"              // line 7
         "    namespaces:\n"                       // line 8
         "      - nsid: 1\n"                       // line 9
         "        backend: ram\n"                  // line 10
         "        size: 1MiB\n" +                  // line 11
         subsystem_tail;
}

// Reads exactly out.size() bytes within `limit` (false on EOF, error or time out).
bool recv_exact(int fd, std::span<uint8_t> out, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::size_t got = 0;
  while (got < out.size()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::recv(fd, out.data() + got, out.size() - got, 0);
    if (n <= 0) return false;
    got += static_cast<std::size_t>(n);
  }
  return true;
}

// Issue 10, found 1: a command that moves no data may carry a data SGL of 16 zero bytes (type 0, length 0);
// Linux nvmet and SPDK run it, and some hosts send it so. A raw host (no initiator library, which would
// fill in its own descriptor) connects an admin queue and sends Property Get, Property Set (CC.EN) and Keep Alive that way; a
// non-zero length that the binding cannot carry is still refused.
TEST(RobustnessE2e, NoDataCommandsWithAnAllZeroSglRun) {
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace)));
  int fd = raw_connect(t.io_port());
  ASSERT_GE(fd, 0);
  const auto icreq = pt::build_icreq({});
  std::vector<uint8_t> req(sizeof(icreq));
  p::store(req.data(), icreq);
  send_all(fd, req);
  std::array<uint8_t, sizeof(pt::IcRespPdu)> icresp{};
  ASSERT_TRUE(recv_exact(fd, icresp, 60s)) << "no ICResp";
  auto session = pt::host_session(icreq, p::load<pt::IcRespPdu>(icresp.data()));
  ASSERT_TRUE(session) << session.error().what;

  // Sends one command capsule (with `data` in the capsule) and returns the status of its response.
  auto run = [&](const p::Sqe& sqe, const std::vector<uint8_t>& data = {}) -> std::optional<p::Status> {
    pt::SqeBytes bytes{};
    std::memcpy(bytes.data(), &sqe, bytes.size());
    const auto cmd = pt::build_capsule_cmd(bytes, static_cast<uint32_t>(data.size()), *session);
    std::vector<uint8_t> pdu_bytes(sizeof(cmd));
    p::store(pdu_bytes.data(), cmd);
    pdu_bytes.insert(pdu_bytes.end(), data.begin(), data.end());
    send_all(fd, pdu_bytes);
    std::array<uint8_t, sizeof(pt::CapsuleRespPdu)> resp{};
    if (!recv_exact(fd, resp, 60s)) return std::nullopt;
    const auto r = p::load<pt::CapsuleRespPdu>(resp.data());
    if (r.ch.pdu_type != static_cast<uint8_t>(pt::PduType::capsule_resp)) return std::nullopt;
    return p::load<p::Cqe>(r.cqe.data()).get_status();
  };

  const auto connect_data = p::make_connect_data(host_identity(kHostA).hostid, p::kCntlidDynamic, kSubnqn, kHostA);
  std::vector<uint8_t> data(sizeof(connect_data));
  std::memcpy(data.data(), &connect_data, data.size());
  auto connected = run(p::to_sqe(p::make_connect(1, 0, 31, 0, 0, p::make_in_capsule_sgl(0, p::kConnectDataSize))), data);
  ASSERT_TRUE(connected.has_value()) << t.log();
  ASSERT_TRUE(connected->ok()) << p::status_name(*connected);

  auto get_cap = p::to_sqe(p::make_property_get(2, p::property::cap, true));
  get_cap.hdr.dptr = p::SglDescriptor{};  // 16 zero bytes
  auto cap = run(get_cap);
  ASSERT_TRUE(cap.has_value()) << t.log();
  EXPECT_TRUE(cap->ok()) << p::status_name(*cap);
  auto enable = p::to_sqe(p::make_property_set(5, p::property::cc, p::Cc{}.set_en(true).set_iosqes(6).set_iocqes(4).value, false));
  enable.hdr.dptr = p::SglDescriptor{};
  auto enabled = run(enable);
  ASSERT_TRUE(enabled.has_value()) << t.log();
  EXPECT_TRUE(enabled->ok()) << p::status_name(*enabled);
  auto keep_alive = p::make_keep_alive(3);
  keep_alive.hdr.dptr = p::SglDescriptor{};
  auto ka = run(keep_alive);
  ASSERT_TRUE(ka.has_value()) << t.log();
  EXPECT_TRUE(ka->ok()) << p::status_name(*ka);
  // A keyed descriptor (RDMA's) with a length: NVMe/TCP cannot carry it, still refused.
  auto keyed = p::make_keep_alive(4);
  keyed.hdr.dptr = p::make_keyed_sgl(0x1000, 4096, 0x42);
  auto refused = run(keyed);
  ASSERT_TRUE(refused.has_value()) << t.log();
  EXPECT_EQ(*refused, p::status::sgl_descriptor_type_invalid) << p::status_name(*refused);
  ::close(fd);
}

TEST(RobustnessE2e, BadConfigurationsExitWithStatus2AndOneLineNamingFileLineAndField) {
  TempDir dir(kE2eDir);
  const uint16_t port = pick_free_port();

  // A good one first: --check-config says so, exits 0, and starts nothing.
  auto good = run_target_on(dir, "good.yaml", base_config(port, ""), {"--check-config"});
  EXPECT_EQ(good.result.exit_status, 0) << good.result.err;
  EXPECT_NE(good.result.out.find("config OK"), std::string::npos) << good.result.out;
  EXPECT_EQ(good.result.err, "");

  expect_config_error(run_target_on(dir, "duplicate-nsid.yaml",
                                    base_config(port, "      - nsid: 1\n        backend: ram\n        size: 1MiB\n")),
                      12, "subsystems[0].namespaces[1].nsid", "duplicate NSID 1");
  expect_config_error(run_target_on(dir, "unknown-key.yaml",
                                    base_config(port, "        blocksize: 4096\n")),
                      12, "subsystems[0].namespaces[0].blocksize", "unknown key");
  {
    std::string yaml = base_config(port, "");
    yaml.replace(yaml.find("nqn.2024-11.io.rdmablk:cfg"), std::strlen("nqn.2024-11.io.rdmablk:cfg"),
                 "nqn.2024.rdmablk:cfg");
    expect_config_error(run_target_on(dir, "bad-nqn.yaml", yaml), 6, "subsystems[0].nqn", "invalid NQN");
  }
  {
    // A file namespace whose file does not exist and has no size to create it with.
    expect_config_error(run_target_on(dir, "missing-file.yaml",
                                      base_config(port, "      - nsid: 2\n        backend: file\n"
                                                        "        path: missing.img\n")),
                        14, "subsystems[0].namespaces[1].path", "does not exist");
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "missing.img"));
  }
  {
    // The port taken by someone else (us). A file namespace that would be created must not be.
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << std::strerror(errno);
    ASSERT_EQ(::listen(fd, 4), 0);
    const std::string tail = "      - nsid: 2\n        backend: file\n        path: created.img\n        size: 1MiB\n";
    expect_config_error(run_target_on(dir, "port-in-use.yaml", base_config(port, tail)), 4, "listeners[0].port",
                        "already in use");
    expect_config_error(run_target_on(dir, "port-in-use.yaml", base_config(port, tail), {"--check-config"}), 4,
                        "listeners[0].port", "already in use");
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "created.img")) << "a bad config created a namespace file";
    ::close(fd);
  }
  {
    // No such file at all.
    const std::string missing = (dir.path() / "no-such.yaml").string();
    auto r = run_target({"--config", missing}, dir.path());
    EXPECT_EQ(r.exit_status, 2) << r.err;
    EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
  }
}

// ---------------------------------------------------------------------------------------------------------
// SIGTERM with I/O in flight
// ---------------------------------------------------------------------------------------------------------

// Waits until namespace `nsid` has completed at least `reads` reads and `writes` writes, by the daemon's own
// counters (`ctl stats` on its control socket): I/O has really flowed, where a sleep would race the bench's
// start-up on a loaded machine.
::testing::AssertionResult wait_for_commands(const TargetProcess& t, uint32_t nsid, uint64_t reads, uint64_t writes) {
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  std::string last;
  for (;;) {
    auto r = ctl(t, {"stats", "--namespace", std::to_string(nsid)});
    last = r.out + r.err;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    if (r.exit_status == 0 && !j.is_discarded()) {
      for (const auto& n : j["namespaces"]) {
        if (n["nsid"] == nsid && n["read"]["commands"].get<uint64_t>() >= reads &&
            n["write"]["commands"].get<uint64_t>() >= writes)
          return ::testing::AssertionSuccess();
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return ::testing::AssertionFailure() << "namespace " << nsid << " did not reach " << reads << " reads and "
                                           << writes << " writes within 60 s; last stats:\n"
                                           << last << "\n--- target log ---\n"
                                           << t.log();
    }
    std::this_thread::sleep_for(50ms);
  }
}

// The bench jobs below are time based with a runtime far beyond the test (600 s): they end only because the
// target goes away, so neither the stop nor the bench's exit can be mistaken for the job running out.
TEST(RobustnessE2e, SigtermWithIoInFlightDrainsAndTheInitiatorReportsErrors) {
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace, "", "log_level: debug\n")));
  const auto job_path = t.dir() / "busy.fio";
  write_file(job_path, R"([global]
namespace=1
iodepth=32
runtime=600
time_based

[big-writes]
rw=randwrite
bs=64k
size=16m

[small-reads]
rw=randread
bs=4k
offset=16m
size=16m
)");
  BackgroundProcess bench(bench_argv(t, job_path.string()), t.dir(), "bench-busy");
  ASSERT_TRUE(bench.started());
  // Both jobs have done I/O (big-writes writes, small-reads reads; one queue depth each and more).
  ASSERT_TRUE(wait_for_commands(t, 1, 64, 64));

  // SIGTERM drains what is in flight and exits; the bench would go on for 600 s.
  ASSERT_TRUE(t.stop());
  const std::string log = t.log();
  EXPECT_NE(log.find("SIGTERM: draining in-flight I/O"), std::string::npos);
  EXPECT_NE(log.find("rdmablk-target stopped"), std::string::npos);
  EXPECT_EQ(log.find("still draining"), std::string::npos) << log;

  // The bench does not hang (its runtime is 600 s) and reports the failure: exit 1, an error per job.
  auto r = bench.wait(60s);
  ASSERT_FALSE(r.timed_out) << "rdmablk bench hung after the target stopped\n" << r.err;
  EXPECT_EQ(r.signal, 0) << "rdmablk bench died of signal " << r.signal << "\n" << r.err;
  EXPECT_EQ(r.exit_status, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("rdmablk: error: job"), std::string::npos) << r.err;
  // The report is the JSON document on stdout, and nothing else (log lines go to stderr).
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "no JSON report after the failure:\n" << r.out << r.err;
  ASSERT_EQ(j["jobs"].size(), 2u);
  for (const auto& job : j["jobs"]) {
    EXPECT_NE(job["error"], 0) << job.dump(2);
    EXPECT_GT(job["read"]["io_bytes"].get<uint64_t>() + job["write"]["io_bytes"].get<uint64_t>(), 0u)
        << "no I/O completed before the stop";
  }
}

// `rdmablk bench --output-format=json` prints only the JSON document on stdout, as fio does, so that tools
// can parse it, even when the transport logs a lost connection (those lines go to stderr).
TEST(RobustnessE2e, BenchJsonOutputIsOnlyJsonWhenTheTargetGoesAway) {
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace)));
  const auto job_path = t.dir() / "busy.fio";
  write_file(job_path, "[w]\nnamespace=1\nrw=randwrite\nbs=64k\niodepth=16\nruntime=600\ntime_based\n");
  BackgroundProcess bench(bench_argv(t, job_path.string()), t.dir(), "bench-json");
  ASSERT_TRUE(bench.started());
  ASSERT_TRUE(wait_for_commands(t, 1, 0, 16));  // writing
  ASSERT_TRUE(t.stop());
  auto r = bench.wait(60s);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_status, 1) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "stdout is not one JSON document:\n" << r.out.substr(0, 600);
}

}  // namespace
}  // namespace e2e
