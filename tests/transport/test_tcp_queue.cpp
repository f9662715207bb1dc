// The NVMe/TCP target queue's state machine over a fake socket (no io_uring, no kernel): what goes into
// each send and when a slot may be reused, driven byte by byte where it matters. Coalesced responses,
// short sends, several R2Ts in flight per command, LAST_PDU before the end of an R2T, in-capsule data
// waiting for a pool buffer.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "protocol/command.h"
#include "protocol/completion.h"
#include "protocol/sgl.h"
#include "protocol/tcp_pdu.h"
#include "transport/buffer_pool.h"
#include "transport/recording_core.h"
#include "transport/tcp/pdu_receiver.h"
#include "transport/tcp/tcp_target_queue.h"

namespace rdmablk::transport::tcp {
namespace {

namespace p = rdmablk::protocol;
namespace pt = rdmablk::protocol::tcp;

// The socket: records the recv / send the queue asks for; the test completes them.
class FakeIo final : public TcpQueueIo {
 public:
  void recv(const iovec* iov, unsigned n) noexcept override {
    EXPECT_FALSE(recv_pending) << "two recvs in flight";
    recv_iov.assign(iov, iov + n);
    recv_pending = true;
  }
  void send(const iovec* iov, unsigned n) noexcept override {
    EXPECT_FALSE(send_pending) << "two sends in flight";
    send_iov.assign(iov, iov + n);
    send_pending = true;
    ++sends;
  }
  void send_now(std::span<const uint8_t> bytes) noexcept override { sent.insert(sent.end(), bytes.begin(), bytes.end()); }
  void shutdown() noexcept override { ++shutdowns; }
  void start_close_timer(std::chrono::milliseconds) noexcept override { timer = true; }
  void cancel_close_timer() noexcept override { timer = false; }
  void destroy() noexcept override { ++destroys; }

  std::vector<iovec> recv_iov, send_iov;
  bool recv_pending = false, send_pending = false, timer = false;
  unsigned sends = 0, shutdowns = 0, destroys = 0;
  std::vector<uint8_t> sent;  // everything the "socket" took, in order
};

// The host's view of what the target sent.
struct HostView final : PduReceiver::Handler {
  struct R2t {
    uint16_t cid, ttag;
    uint32_t offset, length;
  };
  std::vector<p::Cqe> responses;
  std::vector<R2t> r2ts;
  struct C2h {
    uint16_t cid;
    uint32_t offset, length;
    uint8_t flags;
  };
  std::vector<C2h> c2hs;
  unsigned term_reqs = 0;
  unsigned icresps = 0;
  void on_pdu(PduReceiver& rx) noexcept override {
    switch (rx.pdu().type) {
      case pt::PduType::capsule_resp:
        responses.push_back(p::load<p::Cqe>(rx.header().data() + offsetof(pt::CapsuleRespPdu, cqe)));
        break;
      case pt::PduType::r2t: {
        const auto r = p::load<pt::R2tPdu>(rx.header().data());
        r2ts.push_back({r.cccid.get(), r.ttag.get(), r.r2to.get(), r.r2tl.get()});
        break;
      }
      case pt::PduType::c2h_data: {
        const auto d = p::load<pt::C2HDataHdr>(rx.header().data());
        c2hs.push_back({d.cccid.get(), d.datao.get(), d.datal.get(), d.ch.flags});
        break;
      }
      case pt::PduType::c2h_term_req: ++term_reqs; break;
      case pt::PduType::ic_resp: ++icresps; break;
      default: break;
    }
  }
  void on_pdu_data(PduReceiver&, bool) noexcept override {}
  void on_pdu_error(const pt::PduError& e, std::span<const uint8_t>) noexcept override {
    ADD_FAILURE() << "target sent a malformed stream: " << e.what;
  }
};

struct Harness {
  FakeIo io;
  RecordingCore core;
  std::unique_ptr<BufferPool> pool;
  std::unique_ptr<TcpTargetQueue> q;
  pt::TcpSession host_session{};
  pt::TcpSession parse_session{};  // what the host-side parser checks against (established after ICResp)
  HostView view;
  std::unique_ptr<PduReceiver> parser;
  std::size_t parsed = 0;

  explicit Harness(TcpTargetOptions opts = {}, BufferPoolOptions popts = {}) {
    pool = std::move(*BufferPool::create(popts));
    q = std::make_unique<TcpTargetQueue>(io, *pool, core, opts, TransportAddress{}, "fake:1");
    parser = std::make_unique<PduReceiver>(256 * 1024, pt::Receiver::host, parse_session);
    q->start();
  }

  // Deliver bytes to the pending recv, `chunk` at a time (a recv completion per chunk).
  void deliver(const std::vector<uint8_t>& bytes, std::size_t chunk = SIZE_MAX) {
    std::size_t pos = 0;
    while (pos < bytes.size()) {
      ASSERT_TRUE(io.recv_pending) << "the queue stopped receiving with " << bytes.size() - pos << " bytes left";
      std::size_t budget = std::min(chunk, bytes.size() - pos), got = 0;
      for (const iovec& v : io.recv_iov) {
        const std::size_t take = std::min(budget - got, v.iov_len);
        std::memcpy(v.iov_base, bytes.data() + pos + got, take);
        got += take;
        if (got == budget) break;
      }
      pos += got;
      io.recv_pending = false;
      q->on_recv_done(static_cast<int>(got));
    }
  }

  // Let the pending send take at most `max` bytes; returns false when none was pending.
  bool complete_send(std::size_t max = SIZE_MAX) {
    if (!io.send_pending) return false;
    std::size_t took = 0;
    for (const iovec& v : io.send_iov) {
      const std::size_t take = std::min(max - took, v.iov_len);
      const auto* b = static_cast<const uint8_t*>(v.iov_base);
      io.sent.insert(io.sent.end(), b, b + take);
      took += take;
      if (took == max) break;
    }
    io.send_pending = false;
    q->on_send_done(static_cast<int>(took));
    return true;
  }
  void drain_sends(std::size_t max = SIZE_MAX) {
    while (complete_send(max)) {
    }
    parse();
  }

  // Run what the target sent so far through a host-side parser.
  void parse() {
    while (parsed < io.sent.size()) {
      iovec iov[2];
      const unsigned n = parser->prepare(iov);
      ASSERT_NE(n, 0u);
      const std::size_t take = std::min(iov[0].iov_len, io.sent.size() - parsed);
      std::memcpy(iov[0].iov_base, io.sent.data() + parsed, take);
      parser->commit(take);
      parsed += take;
      parser->process(view);
      if (view.icresps != 0) parse_session.established = true;
    }
  }

  void connect(uint32_t maxr2t = 0) {
    pt::IcReqPdu icreq = pt::build_icreq(pt::IcReqParams{});
    icreq.maxr2t.set(maxr2t);
    std::vector<uint8_t> b(sizeof(icreq));
    p::store(b.data(), icreq);
    deliver(b);
    drain_sends();
    ASSERT_EQ(view.icresps, 1u);
    host_session.established = true;
    host_session.maxh2cdata = q->session().maxh2cdata;
    set_connected();
  }
  void set_connected(bool sq_flow_disabled = false) {
    static_cast<TargetQueue&>(*q).set_connected(1, 128, sq_flow_disabled);
  }

  std::vector<uint8_t> capsule(const p::Sqe& sqe, std::span<const uint8_t> icd = {}) {
    std::vector<uint8_t> out(256);
    const auto pdu = pt::build_capsule_cmd(p::load<pt::SqeBytes>(&sqe), static_cast<uint32_t>(icd.size()), host_session);
    out.resize(pt::write_pdu_header(pdu, out));
    out.insert(out.end(), icd.begin(), icd.end());
    return out;
  }
  std::vector<uint8_t> h2c(uint16_t cid, uint16_t ttag, uint32_t offset, std::span<const uint8_t> data, bool last) {
    std::vector<uint8_t> out(256);
    const auto pdu = pt::build_h2c_data(cid, ttag, offset, static_cast<uint32_t>(data.size()), last, host_session);
    out.resize(pt::write_pdu_header(pdu, out));
    out.insert(out.end(), data.begin(), data.end());
    return out;
  }
};

p::Sqe flush(uint16_t cid) { return p::make_flush(cid, 1); }
p::Sqe write_cmd(uint16_t cid, uint32_t bytes, bool in_capsule) {
  auto w = p::make_write(cid, 1, 0, bytes / 512,
                         in_capsule ? p::make_in_capsule_sgl(0, bytes) : p::make_transport_sgl(bytes));
  return p::load<p::Sqe>(&w);
}
void append(std::vector<uint8_t>& to, const std::vector<uint8_t>& b) { to.insert(to.end(), b.begin(), b.end()); }

TEST(TcpQueue, ResponsesOfManyCommandsShareOneSend) {
  Harness h;
  h.connect();
  const unsigned sends_before = h.io.sends;
  std::vector<uint8_t> stream;
  for (uint16_t cid = 0; cid < 32; ++cid) append(stream, h.capsule(flush(cid)));
  h.deliver(stream);  // one recv: 32 commands, each completed by the core at once
  h.drain_sends();
  ASSERT_EQ(h.view.responses.size(), 32u);
  for (uint16_t cid = 0; cid < 32; ++cid) EXPECT_EQ(h.view.responses[cid].cid.get(), cid);
  // The first response leaves alone (nothing else is ready yet); the other 31 are ready while it is in
  // flight and share the next send.
  EXPECT_EQ(h.io.sends - sends_before, 2u);
  EXPECT_EQ(h.q->in_flight_requests(), 0u);
}

TEST(TcpQueue, ShortSendsResumeAtTheRightByteAndFreeSlotsOnlyWhenOut) {
  Harness h;
  h.connect();
  std::vector<uint8_t> stream;
  for (uint16_t cid = 0; cid < 8; ++cid) append(stream, h.capsule(flush(cid)));
  h.deliver(stream);
  // 7 bytes per send completion: PDU boundaries fall anywhere.
  unsigned rounds = 0;
  while (h.io.send_pending) {
    EXPECT_GT(h.q->in_flight_requests(), 0u) << "a slot was freed while its response was still being sent";
    h.complete_send(7);
    ++rounds;
  }
  h.parse();
  EXPECT_GT(rounds, 8u);
  ASSERT_EQ(h.view.responses.size(), 8u);
  for (uint16_t cid = 0; cid < 8; ++cid) EXPECT_EQ(h.view.responses[cid].cid.get(), cid);
  EXPECT_EQ(h.q->in_flight_requests(), 0u);
}

TEST(TcpQueue, SeveralR2TsInFlightWhenTheHostAllowsThem) {
  Harness h;
  h.connect(/*maxr2t=*/3);  // 0's based: four outstanding
  const uint32_t len = 512 * 1024, window = h.q->session().maxh2cdata;
  ASSERT_EQ(len / window, 4u);
  h.deliver(h.capsule(write_cmd(5, len, false)));
  h.drain_sends();
  ASSERT_EQ(h.view.r2ts.size(), 4u) << "all four windows are asked for at once";
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(h.view.r2ts[i].offset, i * window);
    EXPECT_EQ(h.view.r2ts[i].length, window);
    EXPECT_EQ(h.view.r2ts[i].cid, 5);
  }
  std::vector<uint8_t> data(len);
  for (uint32_t i = 0; i < len; ++i) data[i] = static_cast<uint8_t>(i * 13 + 1);
  std::vector<uint8_t> stream;
  for (uint32_t i = 0; i < 4; ++i) {
    append(stream, h.h2c(5, h.view.r2ts[i].ttag, i * window, std::span(data).subspan(i * window, window), true));
  }
  h.deliver(stream, 10000);
  ASSERT_EQ(h.core.data_ready.size(), 1u);
  EXPECT_TRUE(h.core.data_ready[0].second.ok());
  EXPECT_EQ(std::memcmp(h.core.data_ready[0].first->data, data.data(), len), 0);
  h.drain_sends();
  ASSERT_EQ(h.view.responses.size(), 1u);
}

TEST(TcpQueue, OneR2TAtATimeByDefaultInOrder) {
  Harness h;
  h.connect();
  const uint32_t len = 384 * 1024, window = h.q->session().maxh2cdata;
  h.deliver(h.capsule(write_cmd(9, len, false)));
  std::vector<uint8_t> data(len, 0x5C);
  for (uint32_t i = 0; i < len / window; ++i) {
    h.drain_sends();
    ASSERT_EQ(h.view.r2ts.size(), i + 1) << "window " << i;
    EXPECT_EQ(h.view.r2ts[i].offset, i * window);
    EXPECT_TRUE(h.core.data_ready.empty());
    h.deliver(h.h2c(9, h.view.r2ts[i].ttag, i * window, std::span(data).subspan(i * window, window), true));
  }
  ASSERT_EQ(h.core.data_ready.size(), 1u);
  h.drain_sends();
  EXPECT_EQ(h.view.responses.size(), 1u);
}

TEST(TcpQueue, LastPduBeforeTheEndOfTheR2TIsAProtocolError) {
  Harness h;
  h.connect();
  h.deliver(h.capsule(write_cmd(3, 64 * 1024, false)));
  h.drain_sends();
  ASSERT_EQ(h.view.r2ts.size(), 1u);
  std::vector<uint8_t> part(4096, 1);
  h.deliver(h.h2c(3, h.view.r2ts[0].ttag, 0, part, /*last=*/true));
  h.drain_sends();
  EXPECT_EQ(h.view.term_reqs, 1u);
  EXPECT_EQ(h.core.closed, 1);
  ASSERT_EQ(h.core.data_ready.size(), 1u);
  EXPECT_EQ(h.core.data_ready[0].second, p::status::transient_transport_error);
  EXPECT_EQ(h.io.shutdowns, 1u);
  EXPECT_EQ(h.io.destroys, 1u);  // the core completed it; nothing else held
}

TEST(TcpQueue, InCapsuleWriteWaitsForABufferWithoutReading) {
  BufferPoolOptions po;
  po.small_count = 1;
  po.large_count = 1;
  Harness h({}, po);
  h.connect();
  h.core.hold = true;
  std::vector<uint8_t> a(4096, 0xA1), b(4096, 0xB2), c(8192, 0xC3);
  // Two buffers in the pool: the first two writes take them, the third must wait for one.
  std::vector<uint8_t> stream;
  append(stream, h.capsule(write_cmd(1, 4096, true), a));
  append(stream, h.capsule(write_cmd(2, 4096, true), b));
  append(stream, h.capsule(write_cmd(3, 8192, true), c));
  append(stream, h.capsule(flush(4)));
  h.deliver(stream);
  ASSERT_EQ(h.core.commands.size(), 2u);
  EXPECT_FALSE(h.io.recv_pending) << "no room for the third write's data: the queue must stop reading";
  // The core finishes the first write: its buffer goes to the third, which then gets its data, and
  // reading resumes (the flush behind it arrives too).
  TargetRequest* first = h.core.commands[0];
  first->queue->complete(*first, false);
  h.drain_sends();
  ASSERT_EQ(h.core.commands.size(), 4u);
  EXPECT_EQ(h.core.commands[2]->data_length, 8192u);
  EXPECT_EQ(std::memcmp(h.core.commands[2]->data, c.data(), c.size()), 0);
  EXPECT_TRUE(h.io.recv_pending);
}

TEST(TcpQueue, ZeroLengthDescriptorOfAnyTypeIsAcceptedWithoutData) {
  Harness h;
  h.connect();
  p::Sqe ka = p::make_keep_alive(7);
  ka.hdr.dptr = p::SglDescriptor{};  // 16 zero bytes: type 0x00 (data block, address subtype), length 0
  h.deliver(h.capsule(ka));
  h.drain_sends();
  ASSERT_EQ(h.core.commands.size(), 1u) << "the command must reach the core";
  ASSERT_EQ(h.view.responses.size(), 1u);
  EXPECT_TRUE(h.view.responses[0].get_status().ok());
  // A non-zero length that does not fit the binding is still refused.
  p::Sqe bad = p::make_keep_alive(8);
  bad.hdr.dptr = p::make_keyed_sgl(0x1000, 4096, 0x42);
  h.deliver(h.capsule(bad));
  h.drain_sends();
  ASSERT_EQ(h.view.responses.size(), 2u);
  EXPECT_EQ(h.view.responses[1].get_status(), p::status::sgl_descriptor_type_invalid);
}


p::Sqe read_cmd(uint16_t cid, uint32_t bytes) {
  auto r = p::make_read(cid, 1, 0, bytes / 512, p::make_transport_sgl(bytes));
  return p::load<p::Sqe>(&r);
}

// limits.queue_buffer_bytes: a queue holding its share waits on its own list; the pool keeps the rest for
// the other queues of the reactor; completions let the waiters on in order.
TEST(TcpQueue, BufferLimitKeepsAQueueToItsShareOfThePool) {
  TcpTargetOptions o;
  o.max_buffer_bytes = 2u << 20;  // two large (1 MiB) buffers
  Harness h(o);
  h.connect();
  h.core.hold = true;
  const unsigned large_before = h.pool->free_large();
  std::vector<uint8_t> stream;
  for (uint16_t cid = 1; cid <= 5; ++cid) append(stream, h.capsule(read_cmd(cid, 64 * 1024)));
  h.deliver(stream);
  ASSERT_EQ(h.core.commands.size(), 2u) << "a 64 KiB read takes a 1 MiB buffer: two fit under 2 MiB";
  EXPECT_EQ(h.pool->free_large(), large_before - 2) << "the others wait on the queue, not on the pool";
  EXPECT_EQ(h.pool->waiters(), 0u);
  EXPECT_TRUE(h.io.recv_pending) << "the queue keeps reading while its commands wait";
  EXPECT_EQ(h.q->buffer_bytes_reserved(), 2u << 20);
  // Each completion lets the oldest waiter on.
  for (std::size_t done = 0; done < 3; ++done) {
    TargetRequest* r = h.core.commands[done];
    std::memset(r->data, 0xAB, r->data_length);
    r->queue->complete(*r, true);
    h.drain_sends();
    ASSERT_EQ(h.core.commands.size(), 3 + done);
    EXPECT_EQ(h.core.commands.back()->sqe.hdr.cid.get(), 3 + done) << "waiters go on in arrival order";
  }
  for (std::size_t i = 3; i < 5; ++i) h.core.commands[i]->queue->complete(*h.core.commands[i], false);
  h.drain_sends();
  EXPECT_EQ(h.view.responses.size(), 5u);
  EXPECT_EQ(h.q->buffer_bytes_reserved(), 0u);
  EXPECT_EQ(h.pool->free_large(), large_before);
}

TEST(TcpQueue, InCapsuleDataIsNotCountedAgainstTheBufferLimit) {
  TcpTargetOptions o;
  o.max_buffer_bytes = 64 * 1024;  // less than one large buffer: one R2T write at a time
  Harness h(o);
  h.connect();
  h.core.hold = true;
  std::vector<uint8_t> data(4096, 0x11);
  std::vector<uint8_t> stream;
  append(stream, h.capsule(write_cmd(1, 128 * 1024, false)));  // takes the queue's share
  append(stream, h.capsule(write_cmd(2, 128 * 1024, false)));  // waits for it
  for (uint16_t cid = 3; cid < 11; ++cid) append(stream, h.capsule(write_cmd(cid, 4096, true), data));
  h.deliver(stream);
  // The R2T write's buffer is held until its data arrives, which needs the connection to keep reading:
  // the in-capsule writes behind it must not wait for the limit.
  EXPECT_EQ(h.core.commands.size(), 9u);
  EXPECT_TRUE(h.io.recv_pending);
}

TEST(TcpQueue, ClosingWithCommandsWaitingForTheBufferLimitFreesEverything) {
  TcpTargetOptions o;
  o.max_buffer_bytes = 1u << 20;
  Harness h(o);
  h.connect();
  h.core.hold = true;
  std::vector<uint8_t> stream;
  for (uint16_t cid = 1; cid <= 4; ++cid) append(stream, h.capsule(read_cmd(cid, 128 * 1024)));
  h.deliver(stream);
  ASSERT_EQ(h.core.commands.size(), 1u);
  static_cast<TargetQueue&>(*h.q).close("test");
  h.drain_sends();
  if (h.io.recv_pending) {
    h.io.recv_pending = false;
    h.q->on_recv_done(0);
  }
  EXPECT_EQ(h.core.closed, 1);
  EXPECT_EQ(h.io.destroys, 0u) << "the core still holds one command";
  h.core.commands[0]->queue->release(*h.core.commands[0]);
  EXPECT_EQ(h.io.destroys, 1u);
  EXPECT_EQ(h.q->buffer_bytes_reserved(), 0u);
  EXPECT_EQ(h.pool->waiters(), 0u);
}

struct FoldCase {
  const char* name;
  C2hSuccess mode;
  bool sq_flow_disabled;  // what the host's Connect said
  uint16_t sc;            // the read's status (generic set)
  uint32_t dw0;           // its DW0
  bool folded;            // expected: SUCCESS on the last C2HData and no CapsuleResp
};

// A read's completion rides on its last C2HData PDU only when it succeeded with nothing in DW0/DW1 and the
// mode allows it for this queue; otherwise a CapsuleResp follows the data, as before.
TEST(TcpQueue, ReadResponseFoldsIntoTheLastC2HDataOnlyWhenAllowed) {
  const FoldCase cases[] = {
      {"auto, host disabled SQ flow control", C2hSuccess::sq_flow_disabled, true, 0, 0, true},
      {"auto, host kept SQ flow control", C2hSuccess::sq_flow_disabled, false, 0, 0, false},
      {"always, host kept SQ flow control", C2hSuccess::always, false, 0, 0, true},
      {"off", C2hSuccess::off, true, 0, 0, false},
      {"always, an error status", C2hSuccess::always, true, 0x02, 0, false},
      {"always, a result in DW0", C2hSuccess::always, true, 0, 7, false},
  };
  for (const FoldCase& c : cases) {
    SCOPED_TRACE(c.name);
    TcpTargetOptions o;
    o.c2h_success = c.mode;
    o.max_c2h_data = 4096;  // 3 C2HData PDUs for 12 KiB: SUCCESS only on the last
    Harness h(o);
    h.connect();
    h.set_connected(c.sq_flow_disabled);
    h.core.hold = true;
    h.deliver(h.capsule(read_cmd(5, 12288)));
    ASSERT_EQ(h.core.commands.size(), 1u);
    TargetRequest& req = *h.core.commands[0];
    std::memset(req.data, 0xCD, req.data_length);
    req.cqe.set_status(p::Status(p::StatusCodeType::generic, static_cast<uint8_t>(c.sc)));
    req.cqe.dw0.set(c.dw0);
    req.queue->complete(req, true);
    h.drain_sends();
    ASSERT_EQ(h.view.c2hs.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
      const bool last = i == 2;
      EXPECT_EQ(h.view.c2hs[i].cid, 5u);
      EXPECT_EQ(h.view.c2hs[i].offset, 4096u * i);
      EXPECT_EQ((h.view.c2hs[i].flags & pt::kFlagLastPdu) != 0, last);
      EXPECT_EQ((h.view.c2hs[i].flags & pt::kFlagSuccess) != 0, last && c.folded);
    }
    if (c.folded) {
      EXPECT_TRUE(h.view.responses.empty());
    } else {
      ASSERT_EQ(h.view.responses.size(), 1u);
      EXPECT_EQ(h.view.responses[0].cid.get(), 5u);
      EXPECT_EQ(h.view.responses[0].get_status().sc(), c.sc);
      EXPECT_EQ(h.view.responses[0].dw0.get(), c.dw0);
    }
    EXPECT_EQ(h.q->in_flight_requests(), 0u) << "the slot is freed once the last PDU is out";
    // The CID is free for the host's next command either way.
    h.core.hold = false;
    h.deliver(h.capsule(read_cmd(5, 4096)));
    h.drain_sends();
    EXPECT_EQ(h.view.term_reqs, 0u);
  }
}


}  // namespace
}  // namespace rdmablk::transport::tcp
