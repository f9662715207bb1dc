// The host queue against a fake controller that answers a write before taking its data: the command must
// not complete (letting the caller free its buffer) while the host still has that buffer's bytes to send.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "protocol/command.h"
#include "protocol/completion.h"
#include "protocol/tcp_pdu.h"
#include "transport/host_queue.h"

namespace {

namespace p = rdmablk::protocol;
namespace pt = rdmablk::protocol::tcp;
using namespace std::chrono_literals;
using rdmablk::transport::DataDirection;
using rdmablk::transport::HostCommand;
using rdmablk::transport::HostQueue;
using rdmablk::transport::HostQueueOptions;
using rdmablk::transport::TransportType;

constexpr std::size_t kWrite = 1 << 20;  // far more than both socket buffers hold
constexpr int kSmallBuffer = 4096;

bool read_exact(int fd, void* buf, std::size_t n) {
  auto* b = static_cast<uint8_t*>(buf);
  while (n != 0) {
    ssize_t r = ::recv(fd, b, n, 0);
    if (r <= 0) return false;
    b += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

// The host queue's socket: the one connected to `target_port` from `local_port`.
int find_host_socket(uint16_t local_port, uint16_t target_port) {
  for (int fd = 3; fd < 4096; ++fd) {
    sockaddr_in self{}, peer{};
    socklen_t sl = sizeof(self), pl = sizeof(peer);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &sl) != 0 || self.sin_family != AF_INET) continue;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) continue;
    if (ntohs(self.sin_port) == local_port && ntohs(peer.sin_port) == target_port) return fd;
  }
  return -1;
}

struct State {
  bool completed = false;
  p::Status status;
  std::unique_ptr<uint8_t[]> buffer;  // the caller's write buffer: poisoned and freed on completion
};

void on_complete(HostCommand& cmd, const p::Cqe& cqe) noexcept {
  auto& s = *static_cast<State*>(cmd.context);
  s.completed = true;
  s.status = cqe.get_status();
  // What a caller may do once its command completed: reuse the buffer, or free it (under ASan a later send
  // from it is a heap-use-after-free; without, the freed 1 MiB is unmapped and sendmsg fails with EFAULT).
  std::memset(s.buffer.get(), 0xEE, kWrite);
  s.buffer.reset();
  cmd.data = {};
}

TEST(TcpHostEarlyResponse, WriteCompletesOnlyAfterItsDataLeftTheHost) {
  // Fake controller: a listening socket with a small receive buffer (inherited by the accepted socket).
  int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(lfd, 0);
  int small = kSmallBuffer;
  ::setsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(lfd, 1), 0);
  socklen_t al = sizeof(addr);
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &al);
  const uint16_t port = ntohs(addr.sin_port);

  int cfd = -1;
  uint16_t host_port = 0;
  pt::TcpSession session{};
  std::thread ic([&] {  // accept and answer the ICReq while the host waits for the ICResp
    sockaddr_in peer{};
    socklen_t pl = sizeof(peer);
    cfd = ::accept4(lfd, reinterpret_cast<sockaddr*>(&peer), &pl, SOCK_CLOEXEC);
    if (cfd < 0) return;
    host_port = ntohs(peer.sin_port);
    std::array<uint8_t, pt::kIcPduLen> buf{};
    if (!read_exact(cfd, buf.data(), buf.size())) return;
    session = pt::controller_session(p::load<pt::IcReqPdu>(buf.data()), 0, 128 * 1024);
    const auto resp = pt::build_icresp(session);
    std::array<uint8_t, pt::kIcPduLen> out{};
    p::store(out.data(), resp);
    (void)!::send(cfd, out.data(), out.size(), MSG_NOSIGNAL);
  });
  HostQueueOptions o;
  o.address = {TransportType::tcp, "127.0.0.1", port};
  o.qid = 1;
  o.entries = 4;
  o.in_capsule_limit = 2 * kWrite;  // the whole write goes in the capsule
  auto q = rdmablk::transport::connect_host_queue(o);
  ic.join();
  ASSERT_TRUE(q) << q.error().message;
  ASSERT_GE(cfd, 0);
  HostQueue& host = **q;
  const int hfd = find_host_socket(host_port, port);
  ASSERT_GE(hfd, 0);
  ASSERT_EQ(::setsockopt(hfd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);

  State state;
  state.buffer = std::make_unique<uint8_t[]>(kWrite);
  std::vector<uint8_t> expect(kWrite);
  for (std::size_t i = 0; i < kWrite; ++i) expect[i] = static_cast<uint8_t>(i * 31 + (i >> 12));
  std::memcpy(state.buffer.get(), expect.data(), kWrite);
  HostCommand cmd;
  cmd.sqe = p::to_sqe(p::make_write(0, 1, 0, kWrite / 512, p::make_in_capsule_sgl(0, kWrite)));
  cmd.direction = DataDirection::host_to_controller;
  cmd.data = {state.buffer.get(), kWrite};
  cmd.on_complete = &on_complete;
  cmd.context = &state;
  ASSERT_TRUE(host.submit(cmd).ok());
  ASSERT_EQ(host.poll(0, 0ms), 0);  // the socket takes what fits

  // The controller reads the capsule header only and fails the command at once.
  std::array<uint8_t, sizeof(pt::CapsuleCmdPdu)> hdr{};
  ASSERT_TRUE(read_exact(cfd, hdr.data(), hdr.size()));
  const auto capsule = p::load<pt::CapsuleCmdPdu>(hdr.data());
  const auto sqe = p::load<p::Sqe>(capsule.sqe.data());
  const p::Cqe cqe = p::make_cqe(sqe.hdr.cid.get(), 1, 0, p::status::namespace_not_ready);
  std::array<uint8_t, 64> out{};
  const std::size_t n = pt::write_pdu_header(pt::build_capsule_resp(p::load<pt::CqeBytes>(&cqe), session), out);
  ASSERT_EQ(::send(cfd, out.data(), n, MSG_NOSIGNAL), static_cast<ssize_t>(n));

  // The host sees the response while most of the write is still in its buffer: no completion yet.
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(host.poll(1, 20ms), 0);
    ASSERT_FALSE(state.completed) << "completed while its data was still being sent";
  }
  EXPECT_EQ(host.outstanding(), 1u);

  // The controller drains the data; the command completes once the host has handed all of it to the kernel.
  std::vector<uint8_t> got;
  got.reserve(kWrite);
  std::vector<uint8_t> chunk(64 * 1024);
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (got.size() < kWrite && std::chrono::steady_clock::now() < deadline) {
    ssize_t r = ::recv(cfd, chunk.data(), chunk.size(), MSG_DONTWAIT);
    if (r > 0) got.insert(got.end(), chunk.begin(), chunk.begin() + r);
    ASSERT_GE(host.poll(0, 0ms), 0) << "the host failed (sent from a freed buffer?)";
    if (r <= 0) std::this_thread::sleep_for(1ms);
  }
  for (int i = 0; i < 300 && !state.completed; ++i) ASSERT_GE(host.poll(1, 100ms), 0);  // up to 30 s
  EXPECT_TRUE(state.completed);
  EXPECT_EQ(state.status, p::status::namespace_not_ready);
  EXPECT_EQ(host.outstanding(), 0u);
  ASSERT_EQ(got.size(), kWrite);
  EXPECT_TRUE(got == expect) << "the controller received bytes written after the command completed";

  host.close();
  ::close(cfd);
  ::close(lfd);
}

}  // namespace
