// Shared pieces of the NVMe/TCP tests: a reactor thread, a RAM "core" behind a TcpListener, raw sockets.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "protocol/command.h"
#include "protocol/completion.h"
#include "protocol/crc32c.h"
#include "protocol/tcp_pdu.h"
#include "transport/buffer_pool.h"
#include "transport/host_queue.h"
#include "transport/reactor.h"
#include "transport/target_queue.h"
#include "transport/tcp/tcp_target.h"
#include "reactor_set.h"
#include "support/pattern.h"
#include "support/ports.h"

namespace tcptest {

using namespace rdmablk;
using namespace rdmablk::transport;
using namespace std::chrono_literals;
namespace p = rdmablk::protocol;
namespace pt = rdmablk::protocol::tcp;

inline constexpr uint32_t kBlock = 512;
inline constexpr std::size_t kRamSize = 8 * 1024 * 1024;

// A toy core: Write (0x01) / Read (0x02) on a RAM array in 512-byte blocks, everything else succeeds with
// no data. With `hold_writes` a write is kept (never fetched or completed), so tests can keep a command
// in flight; held requests are released when their queue closes.
class RamHandler : public TargetQueueHandler {
 public:
  RamHandler() : ram(kRamSize) {}
  void on_queue_created(TargetQueue& q) noexcept override {
    ++created;
    std::lock_guard lock(mu);
    queues.push_back(&q);
  }
  void on_command(TargetRequest& req) noexcept override {
    ++commands;
    const auto rw = p::as<p::ReadWriteCommand>(req.sqe);
    const uint64_t off = rw.start_lba() * kBlock;
    const uint64_t len = uint64_t{rw.block_count()} * kBlock;
    switch (req.sqe.hdr.opcode) {
      case 0x01:  // write
        if (hold_writes) {
          std::lock_guard lock(mu);
          held.push_back(&req);
          return;
        }
        if (off + len > ram.size() || len != req.data_length) return finish(req, p::status::lba_out_of_range, false);
        req.queue->fetch_data(req);
        return;
      case 0x02:  // read
        if (off + len > ram.size() || len != req.data_length) return finish(req, p::status::lba_out_of_range, false);
        std::memcpy(req.data, ram.data() + off, len);
        return finish(req, p::status::success, true);
      default:
        last_in_capsule = req.data_in_capsule;
        last_length = req.data_length;
        return finish(req, p::status::success, false);
    }
  }
  void on_data_ready(TargetRequest& req, p::Status st) noexcept override {
    if (!st.ok()) return finish(req, st, false);
    const auto rw = p::as<p::ReadWriteCommand>(req.sqe);
    std::memcpy(ram.data() + rw.start_lba() * kBlock, req.data, req.data_length);
    finish(req, p::status::success, false);
  }
  void on_queue_closed(TargetQueue& q) noexcept override {
    ++closed;
    std::lock_guard lock(mu);
    std::erase(queues, &q);
    std::vector<TargetRequest*> mine;
    for (auto* r : held) {
      if (r->queue == &q) mine.push_back(r);
    }
    std::erase_if(held, [&](TargetRequest* r) { return r->queue == &q; });
    for (auto* r : mine) q.release(*r);
  }
  void finish(TargetRequest& req, p::Status st, bool with_data) noexcept {
    req.cqe.set_status(st);
    req.queue->complete(req, with_data);
  }

  std::vector<uint8_t> ram;
  std::atomic<int> created{0};
  std::atomic<int> closed{0};
  std::atomic<int> commands{0};
  std::atomic<bool> hold_writes{false};
  std::atomic<bool> last_in_capsule{false};
  std::atomic<uint32_t> last_length{0};
  std::mutex mu;
  std::vector<TargetQueue*> queues;
  std::vector<TargetRequest*> held;
};

// The limits of the waits below only end a hang: each returns at its event, which on loopback normally comes
// within milliseconds; 30 s holds on a loaded 2-core machine with qemu beside it.
template <typename Pred>
bool wait_until(Pred pred, std::chrono::milliseconds limit = 30s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return pred();
}

// N reactors on threads, each with a pool, and a listener on 127.0.0.1:0.
struct TargetFixture {
  ReactorSet reactors;
  RamHandler handler;
  std::unique_ptr<tcp::TcpListener> listener;

  static BufferPoolOptions test_pool(BufferPoolOptions popts) {
    if (popts.small_count == BufferPoolOptions{}.small_count) {
      popts.small_count = 64;
      popts.large_count = 8;
    }
    return popts;
  }

  explicit TargetFixture(tcp::TcpTargetOptions opts = {}, unsigned nreactors = 1, BufferPoolOptions popts = {})
      : reactors(nreactors, test_pool(popts), "tcp-test") {
    TransportAddress a;
    a.traddr = "127.0.0.1";
    a.trsvcid = 0;
    auto l = tcp::TcpListener::create(a, reactors.slots(), handler, opts);
    EXPECT_TRUE(l) << (l ? "" : l.error().message);
    if (l) listener = std::move(*l);
    if (listener) {
      EXPECT_TRUE(listener->start());
    }
  }
  ~TargetFixture() {
    // Tests close their host sockets; every connection must then go away on its own.
    EXPECT_TRUE(wait_until([] { return tcp::live_tcp_target_connections() == 0; }))
        << tcp::live_tcp_target_connections() << " connections still alive";
    listener.reset();
    std::this_thread::sleep_for(30ms);
    reactors.stop();
  }
  uint16_t port() const { return listener->address().trsvcid; }

  // Another listener on 127.0.0.1:port (0: a port the kernel chooses) served by reactor 0, not started.
  auto another_listener(uint16_t port = 0, tcp::TcpTargetOptions opts = {}) {
    std::vector<ReactorSlot> slots{{reactors[0].reactor.get(), reactors[0].pool.get()}};
    TransportAddress a;
    a.traddr = "127.0.0.1";
    a.trsvcid = port;
    return tcp::TcpListener::create(a, slots, handler, opts);
  }

  HostQueueOptions host_options(uint32_t in_capsule = 8192, bool hd = false, bool dd = false) const {
    HostQueueOptions o;
    o.address.type = TransportType::tcp;
    o.address.traddr = "127.0.0.1";
    o.address.trsvcid = port();
    o.entries = 128;
    o.in_capsule_limit = in_capsule;
    o.header_digest = hd;
    o.data_digest = dd;
    o.connect_timeout = 30s;
    return o;
  }
};

// ---- host-side command helpers -------------------------------------------------------------------

struct Io {
  HostCommand cmd;
  bool done = false;
  p::Cqe cqe{};
};

inline void on_io_complete(HostCommand& c, const p::Cqe& cqe) noexcept {
  auto* io = static_cast<Io*>(c.context);
  io->done = true;
  io->cqe = cqe;
}

inline void prep_rw(Io& io, bool write, uint64_t lba, std::span<uint8_t> data) {
  p::ReadWriteCommand rw{};
  rw.hdr = p::make_header(write ? 0x01 : 0x02, 0, 1);
  rw.set_start_lba(lba);
  rw.set_block_count(static_cast<uint32_t>(data.size() / kBlock));
  io = Io{};
  io.cmd.sqe = p::to_sqe(rw);
  io.cmd.direction = write ? DataDirection::host_to_controller : DataDirection::controller_to_host;
  io.cmd.data = data;
  io.cmd.on_complete = &on_io_complete;
  io.cmd.context = &io;
}

inline p::Status run_one(HostQueue& q, Io& io) {
  auto st = q.submit(io.cmd);
  if (!st.ok()) return st;
  auto end = std::chrono::steady_clock::now() + 30s;
  while (!io.done && std::chrono::steady_clock::now() < end) {
    int rc = q.poll(1, 100ms);
    if (rc < 0) break;
  }
  if (!io.done) return p::status::internal_error;
  return io.cqe.get_status();
}

using rdmablk::testing::pattern;  // tests/support/pattern.h

// Writes `bytes` of a seeded pattern at `lba`, reads them back and compares (any transport).
inline void write_read_verify(HostQueue& q, uint64_t lba, std::size_t bytes, uint32_t seed) {
  auto data = pattern(bytes, seed);
  Io io;
  prep_rw(io, true, lba, data);
  ASSERT_EQ(run_one(q, io), p::status::success) << "write " << bytes;
  std::vector<uint8_t> back(bytes, 0);
  prep_rw(io, false, lba, back);
  ASSERT_EQ(run_one(q, io), p::status::success) << "read " << bytes;
  EXPECT_EQ(back, data) << bytes << " bytes at LBA " << lba;
}

// ---- raw sockets ---------------------------------------------------------------------------------

using rdmablk::testing::raw_connect;  // tests/support/ports.h

inline void send_all(int fd, const void* buf, std::size_t len) {
  const auto* b = static_cast<const uint8_t*>(buf);
  while (len > 0) {
    ssize_t n = ::send(fd, b, len, MSG_NOSIGNAL);
    if (n <= 0) return;
    b += n;
    len -= static_cast<std::size_t>(n);
  }
}

// Read exactly n bytes (or fewer on EOF/timeout).
inline std::vector<uint8_t> recv_n(int fd, std::size_t n, std::chrono::milliseconds limit = 30s) {
  std::vector<uint8_t> out;
  auto end = std::chrono::steady_clock::now() + limit;
  while (out.size() < n) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left)) <= 0) break;
    uint8_t buf[4096];
    ssize_t r = ::recv(fd, buf, std::min(sizeof(buf), n - out.size()), 0);
    if (r <= 0) break;
    out.insert(out.end(), buf, buf + r);
  }
  return out;
}

// True when the peer closed (EOF or reset) within the limit.
inline bool peer_closed(int fd, std::chrono::milliseconds limit = 30s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, 50) <= 0) continue;
    uint8_t buf[4096];
    ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
    if (r <= 0) return true;
  }
  return false;
}

// ICReq/ICResp on a raw socket; returns the session the controller granted.
inline pt::TcpSession raw_handshake(int fd, bool hd = false, bool dd = false) {
  pt::IcReqParams prm;
  prm.hdgst = hd;
  prm.ddgst = dd;
  auto req = pt::build_icreq(prm);
  send_all(fd, &req, sizeof(req));
  auto resp = recv_n(fd, pt::kIcPduLen);
  EXPECT_EQ(resp.size(), pt::kIcPduLen);
  if (resp.size() != pt::kIcPduLen) return {};
  auto s = pt::host_session(req, p::load<pt::IcRespPdu>(resp.data()));
  EXPECT_TRUE(s);
  return s ? *s : pt::TcpSession{};
}

struct TermReq {
  bool got = false;
  uint8_t type = 0;
  uint16_t fes = 0;
  uint32_t fei = 0;
  uint32_t plen = 0;
};

// Read PDUs until a TermReq (returned) or EOF.
inline TermReq read_term_req(int fd) {
  TermReq t;
  for (;;) {
    auto ch = recv_n(fd, 8);
    if (ch.size() < 8) return t;
    auto c = p::load<pt::CommonHeader>(ch.data());
    auto rest = recv_n(fd, c.plen.get() - 8);
    if (c.pdu_type == static_cast<uint8_t>(pt::PduType::c2h_term_req)) {
      std::vector<uint8_t> all = ch;
      all.insert(all.end(), rest.begin(), rest.end());
      if (all.size() < sizeof(pt::TermReqHdr)) return t;
      auto h = p::load<pt::TermReqHdr>(all.data());
      t.got = true;
      t.type = h.ch.pdu_type;
      t.fes = h.fes.get();
      t.fei = static_cast<uint32_t>(h.fei.get());
      t.plen = h.ch.plen.get();
      return t;
    }
  }
}

inline std::vector<uint8_t> pdu_bytes(const void* pdu) {
  std::vector<uint8_t> out(256);
  std::size_t n = pt::write_pdu_header(pdu, out);
  out.resize(n);
  return out;
}

inline p::Sqe write_sqe(uint16_t cid, uint64_t lba, uint32_t bytes, p::SglDescriptor sgl) {
  p::ReadWriteCommand rw{};
  rw.hdr = p::make_header(0x01, cid, 1);
  rw.set_start_lba(lba);
  rw.set_block_count(bytes / kBlock);
  rw.hdr.dptr = sgl;
  return p::to_sqe(rw);
}

}  // namespace tcptest
