// HostQueue::set_wake_fd: a thread that serves another event source too (the ublk attach: its io_uring)
// sleeps in the host queue's poll() and must be woken by that source, not only by completions.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <thread>

#include "protocol/command.h"
#include "protocol/tcp_pdu.h"
#include "transport/host_queue.h"

namespace {

namespace p = rdmablk::protocol;
namespace pt = rdmablk::protocol::tcp;
using namespace std::chrono_literals;
using rdmablk::transport::DataDirection;
using rdmablk::transport::HostCommand;
using rdmablk::transport::HostQueueOptions;
using rdmablk::transport::TransportType;

// A controller that completes the NVMe/TCP handshake and then never answers a command.
struct SilentController {
  int lfd = -1, cfd = -1;
  uint16_t port = 0;
  std::thread ic;

  SilentController() {
    lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(lfd, 1);
    socklen_t al = sizeof(addr);
    ::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &al);
    port = ntohs(addr.sin_port);
    ic = std::thread([this] {
      cfd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
      if (cfd < 0) return;
      std::array<uint8_t, pt::kIcPduLen> buf{};
      std::size_t got = 0;
      while (got < buf.size()) {
        ssize_t r = ::recv(cfd, buf.data() + got, buf.size() - got, 0);
        if (r <= 0) return;
        got += static_cast<std::size_t>(r);
      }
      const auto session = pt::controller_session(p::load<pt::IcReqPdu>(buf.data()), 0, 128 * 1024);
      std::array<uint8_t, pt::kIcPduLen> out{};
      p::store(out.data(), pt::build_icresp(session));
      (void)!::send(cfd, out.data(), out.size(), MSG_NOSIGNAL);
    });
  }
  ~SilentController() {
    if (ic.joinable()) ic.join();
    if (cfd >= 0) ::close(cfd);
    ::close(lfd);
  }
};

void ignore(HostCommand&, const p::Cqe&) noexcept {}

}  // namespace

TEST(HostQueueWake, TcpPollReturnsWhenTheWakeFdIsReadable) {
  SilentController ctl;
  HostQueueOptions o;
  o.address = {TransportType::tcp, "127.0.0.1", ctl.port};
  o.qid = 1;
  o.entries = 4;
  auto q = rdmablk::transport::connect_host_queue(o);
  ctl.ic.join();
  ASSERT_TRUE(q) << q.error().message;
  auto& host = **q;
  HostCommand cmd;
  cmd.sqe = p::make_flush(0, 1);
  cmd.direction = DataDirection::none;
  cmd.on_complete = &ignore;
  ASSERT_TRUE(host.submit(cmd).ok());

  // A registered region is accepted as is by a transport that needs no registration.
  std::array<uint8_t, 4096> region{};
  EXPECT_TRUE(host.register_buffer(region));

  int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_GE(efd, 0);
  host.set_wake_fd(efd);
  std::thread waker([efd] {
    std::this_thread::sleep_for(100ms);
    uint64_t one = 1;
    (void)!::write(efd, &one, sizeof(one));
  });
  const auto t0 = std::chrono::steady_clock::now();
  const int n = host.poll(1, 60s);  // nothing will complete: only the wake fd can end this early
  const auto waited = std::chrono::steady_clock::now() - t0;
  waker.join();
  EXPECT_EQ(n, 0);
  EXPECT_LT(waited, 30s) << "poll() slept through the wake fd";
  EXPECT_EQ(host.outstanding(), 1u);  // the command is still on the wire: nothing was failed

  // Without a wake fd, a readable eventfd does not end the wait early.
  host.set_wake_fd(-1);
  const auto t1 = std::chrono::steady_clock::now();
  EXPECT_EQ(host.poll(1, 200ms), 0);
  EXPECT_GE(std::chrono::steady_clock::now() - t1, 150ms);
  host.close();
  ::close(efd);
}
