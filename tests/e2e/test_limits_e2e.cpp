// End to end, the resource limits (limits.connections): a connection that never completes Connect is closed
// after connect_timeout_ms, a host beyond per_host and a listener beyond per_listener get their new
// connections closed at once with a log line naming the limit, places come back when connections close, and
// connected controllers carry on untouched throughout.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "e2e_common.h"
#include "protocol/tcp_pdu.h"

namespace e2e {
namespace {

namespace p = rdmablk::protocol;
namespace pt = rdmablk::protocol::tcp;

std::string limits_config(const std::string& connections) {
  return config_with_namespaces(kRamNamespace, "", "limits:\n  connections: " + connections + "\n");
}

// Sends ICReq; true when a whole ICResp comes back within `limit` (the target accepted the connection).
bool handshake(int fd, std::chrono::milliseconds limit = 30s) {
  auto req = pt::build_icreq({});
  std::vector<uint8_t> b(sizeof(req));
  p::store(b.data(), req);
  if (::send(fd, b.data(), b.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(b.size())) return false;
  std::vector<uint8_t> resp(pt::kIcPduLen);
  std::size_t got = 0;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (got < resp.size()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) return false;
    ssize_t n = ::recv(fd, resp.data() + got, resp.size() - got, 0);
    if (n <= 0) return false;
    got += static_cast<std::size_t>(n);
  }
  return resp[0] == static_cast<uint8_t>(pt::PduType::ic_resp);
}

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// A write and a read-back on the controller's queue: it still works.
void check_io(rdmablk::initiator::IoQueue& q, uint32_t seed) {
  auto data = pattern(4096, seed);
  auto w = write_blocks(q, 1, seed % 64, 512, data);
  ASSERT_TRUE(w && w->get_status().ok());
  std::vector<uint8_t> back(4096);
  auto r = read_blocks(q, 1, seed % 64, 512, back);
  ASSERT_TRUE(r && r->get_status().ok());
  EXPECT_EQ(back, data);
}

TEST(Limits, ConnectionsWithoutConnectAreClosedAfterTheTimeout) {
  TargetProcess t;
  ASSERT_TRUE(t.start(limits_config("{connect_timeout_ms: 1500}")));
  auto ctrl = connect_or_fail(controller_options(t.io_port(), kSubnqn), t);
  ASSERT_NE(ctrl, nullptr);
  auto q = io_queue_or_fail(*ctrl, 1);
  ASSERT_NE(q, nullptr);

  Fd silent(raw_connect(t.io_port()));  // never sends ICReq
  Fd icreq_only(raw_connect(t.discovery_port()));
  ASSERT_GE(silent.fd, 0);
  ASSERT_GE(icreq_only.fd, 0);
  ASSERT_TRUE(handshake(icreq_only.fd)) << t.log();
  // The timeout is 1.5 s; the margin is for a loaded machine, the test ends as soon as both are closed.
  EXPECT_TRUE(wait_peer_closed(silent.fd, 60s)) << t.log();
  EXPECT_TRUE(wait_peer_closed(icreq_only.fd, 60s)) << t.log();
  EXPECT_TRUE(t.wait_for_log("no Connect within 1500 ms (limits.connections.connect_timeout_ms)", 30s)) << t.log();
  // Well past the timeout, the controller that did connect is untouched.
  check_io(*q, 7);
  EXPECT_TRUE(ctrl->identify_controller().has_value()) << "the admin queue too";
}

TEST(Limits, AHostBeyondPerHostIsRefusedUntilOneOfItsConnectionsCloses) {
  TargetProcess t;
  ASSERT_TRUE(t.start(limits_config("{per_host: 3, connect_timeout_ms: 600000}")));
  auto ctrl = connect_or_fail(controller_options(t.io_port(), kSubnqn), t);  // admin queue: 1
  ASSERT_NE(ctrl, nullptr);
  auto q = io_queue_or_fail(*ctrl, 1);  // 2
  ASSERT_NE(q, nullptr);
  auto third = std::make_unique<Fd>(raw_connect(t.io_port()));
  ASSERT_TRUE(handshake(third->fd)) << "the third connection is within the limit\n" << t.log();

  const std::size_t from = t.log_size();
  Fd fourth(raw_connect(t.discovery_port()));  // the limit counts every listener
  ASSERT_GE(fourth.fd, 0);
  EXPECT_FALSE(handshake(fourth.fd)) << "a fourth connection from 127.0.0.1 must be refused";
  EXPECT_TRUE(wait_peer_closed(fourth.fd, 30s));
  EXPECT_TRUE(t.wait_for_log("refused: 3 connections from 127.0.0.1 are open (limits.connections.per_host)", 30s,
                             from))
      << t.log();
  check_io(*q, 11);

  // One closes: its place comes back as soon as the target has seen it go (retried until then).
  third.reset();
  bool admitted = false;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!admitted && std::chrono::steady_clock::now() < deadline) {
    Fd again(raw_connect(t.io_port()));
    admitted = again.fd >= 0 && handshake(again.fd, 30s);
    if (!admitted) std::this_thread::sleep_for(50ms);  // the target has not processed the close yet
  }
  EXPECT_TRUE(admitted) << t.log();
  check_io(*q, 13);
}

TEST(Limits, AFullListenerRefusesWhileOthersStillAccept) {
  TargetProcess t;
  ASSERT_TRUE(t.start(limits_config("{per_listener: 2, per_host: 0, connect_timeout_ms: 600000}")));
  Fd a(raw_connect(t.io_port())), b(raw_connect(t.io_port()));
  ASSERT_TRUE(handshake(a.fd)) << t.log();
  ASSERT_TRUE(handshake(b.fd)) << t.log();
  Fd c(raw_connect(t.io_port()));
  EXPECT_FALSE(handshake(c.fd)) << "a third connection on a listener limited to 2";
  EXPECT_TRUE(t.wait_for_log("connections are open on 127.0.0.1:" + std::to_string(t.io_port()) +
                                 " (limits.connections.per_listener)",
                             30s))
      << t.log();
  Fd d(raw_connect(t.discovery_port()));
  EXPECT_TRUE(handshake(d.fd)) << "the discovery listener has its own count\n" << t.log();
}

}  // namespace
}  // namespace e2e
