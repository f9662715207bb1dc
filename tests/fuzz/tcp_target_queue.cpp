// The NVMe/TCP target connection (transport/tcp/tcp_target_queue.*) fed the input as the host's byte
// stream, through its socket seam (TcpQueueIo) with a fake socket, the way tcp_queue_io.cpp drives it from
// io_uring: one recv and one send in flight, completions delivered later, short recvs and short sends.
// Behind it a fake core takes every command: it answers at once or holds it for a while, fetches host
// data, returns read data, fails some commands, and on a fabrics Connect tells the queue what was
// connected. At the end of the input the host closes the connection (EOF), the close timer fires if the
// queue armed it, and the core gives back what it still holds.
//
// Input: 4 bytes of setup, then the host's stream.
//   [0..1] seed for chunk sizes and the core's and socket's choices; [2] bits 0-1 MAXH2CDATA (4 KiB << n),
//   bits 2-3 in-capsule data limits, bits 4-6 queue depth (1 << n); [3] bits 0-1 staging (4 KiB << n),
//   bits 2-3 how often the core holds a command.
// Invariants:
//   - everything the target sends is a valid NVMe/TCP stream for a host (our host-side PduReceiver, its
//     session set up by the ICResp it sees): no malformed PDU, R2Ts and C2HData within the limits;
//   - the queue never has two recvs or two sends in flight, and after shutdown() asks for nothing more;
//   - a command reaches the core with a buffer of exactly its data length (ASan watches the accesses),
//     within the MDTS, and direction matching the opcode;
//   - the connection always ends: on_queue_closed once, destroy() once, every pool buffer back.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz_util.h"
#include "protocol/command.h"
#include "protocol/completion.h"
#include "protocol/endian.h"
#include "protocol/fabrics.h"
#include "protocol/status.h"
#include "protocol/tcp_pdu.h"
#include "transport/buffer_pool.h"
#include "transport/tcp/pdu_receiver.h"
#include "transport/tcp/tcp_target_queue.h"

namespace {

namespace p = rdmablk::protocol;
namespace pt = rdmablk::protocol::tcp;
namespace tr = rdmablk::transport;
using rdmablk::fuzz::Rng;
using tr::tcp::C2hSuccess;
using tr::tcp::PduReceiver;
using tr::tcp::TcpQueueIo;
using tr::tcp::TcpTargetOptions;
using tr::tcp::TcpTargetQueue;

constexpr unsigned kSmallBuffers = 64;
constexpr unsigned kLargeBuffers = 16;
constexpr std::size_t kLargeSize = 256 * 1024;

class FakeSocket final : public TcpQueueIo {
 public:
  void recv(const iovec* iov, unsigned n) noexcept override {
    FUZZ_CHECK(!recv_pending);  // one recv at a time
    FUZZ_CHECK(!destroyed);
    FUZZ_CHECK(n >= 1 && n <= 2);
    recv_iov.assign(iov, iov + n);
    recv_pending = true;
  }
  void send(const iovec* iov, unsigned n) noexcept override {
    FUZZ_CHECK(!send_pending);  // one send at a time
    FUZZ_CHECK(!destroyed);
    FUZZ_CHECK(n >= 1);
    std::size_t total = 0;
    for (unsigned i = 0; i < n; ++i) total += iov[i].iov_len;
    FUZZ_CHECK(total != 0);
    send_iov.assign(iov, iov + n);
    send_pending = true;
  }
  void send_now(std::span<const uint8_t> bytes) noexcept override {
    FUZZ_CHECK(!send_pending);  // a TermReq goes out only when no batch is half sent
    FUZZ_CHECK(!shut);
    wire.insert(wire.end(), bytes.begin(), bytes.end());
  }
  void shutdown() noexcept override {
    FUZZ_CHECK(!shut);
    shut = true;
  }
  void start_close_timer(std::chrono::milliseconds) noexcept override {
    FUZZ_CHECK(!timer);
    timer = true;
  }
  void cancel_close_timer() noexcept override { timer = false; }
  void destroy() noexcept override {
    FUZZ_CHECK(!destroyed);
    destroyed = true;
  }

  std::vector<iovec> recv_iov, send_iov;
  bool recv_pending = false, send_pending = false, shut = false, timer = false, destroyed = false;
  std::vector<uint8_t> wire;  // everything the target sent, in order
};

// The host reading what the target sends.
struct HostParser final : PduReceiver::Handler {
  pt::TcpSession session{};
  PduReceiver rx{64 * 1024, pt::Receiver::host, session};
  std::size_t parsed = 0;
  uint32_t maxh2cdata = 0;
  uint32_t max_c2h = 0;
  C2hSuccess c2h_success = C2hSuccess::off;
  bool sq_flow_disabled = false;  // a Connect the core accepted disabled SQ flow control
  const pt::TcpSession* target_session = nullptr;
  bool term = false;

  void on_pdu(PduReceiver& r) noexcept override {
    const auto& info = r.pdu();
    FUZZ_CHECK(!term);  // nothing follows a C2HTermReq
    switch (info.type) {
      case pt::PduType::ic_resp: {
        const auto icresp = p::load<pt::IcRespPdu>(r.header().data());
        // The host's ICReq is in the input; what the target took from it (HPDA) is in its session.
        pt::IcReqParams params;
        params.hpda = target_session->hpda;
        params.hdgst = (icresp.dgst & pt::kDigestHeader) != 0;
        params.ddgst = (icresp.dgst & pt::kDigestData) != 0;
        auto s = pt::host_session(pt::build_icreq(params), icresp);
        FUZZ_CHECK(s.has_value());
        FUZZ_CHECK(s->maxh2cdata == maxh2cdata);
        session = *s;
        break;
      }
      case pt::PduType::r2t: {
        const auto r2t = p::load<pt::R2tPdu>(r.header().data());
        FUZZ_CHECK(r2t.r2tl.get() <= maxh2cdata);
        break;
      }
      case pt::PduType::c2h_data: {
        const auto c2h = p::load<pt::C2HDataHdr>(r.header().data());
        FUZZ_CHECK(c2h.datal.get() <= max_c2h);
        if ((c2h.ch.flags & pt::kFlagSuccess) != 0) {
          // The response rides on the last data PDU only, and only where the options allow it.
          FUZZ_CHECK((c2h.ch.flags & pt::kFlagLastPdu) != 0);
          FUZZ_CHECK(c2h_success == C2hSuccess::always ||
                     (c2h_success == C2hSuccess::sq_flow_disabled && sq_flow_disabled));
        }
        break;
      }
      case pt::PduType::c2h_term_req: term = true; break;
      default: break;
    }
  }
  void on_pdu_data(PduReceiver&, bool) noexcept override {}  // data is dropped: no digest to check
  void on_pdu_error(const pt::PduError& e, std::span<const uint8_t>) noexcept override {
    std::fprintf(stderr, "target sent a malformed stream: %s\n", e.what);
    FUZZ_FAIL("the target's stream is valid NVMe/TCP");
  }

  void feed(const std::vector<uint8_t>& wire) {
    while (parsed < wire.size() && !rx.stopped()) {
      iovec iov[2];
      const unsigned n = rx.prepare(iov);
      FUZZ_CHECK(n != 0);
      std::size_t got = 0;
      for (unsigned i = 0; i < n && parsed + got < wire.size(); ++i) {
        const std::size_t take = std::min(iov[i].iov_len, wire.size() - parsed - got);
        std::memcpy(iov[i].iov_base, wire.data() + parsed + got, take);
        got += take;
      }
      rx.commit(got);
      parsed += got;
      rx.process(*this);
    }
  }
};

// The target core's side, with choices from the input's seed.
class FakeCore final : public tr::TargetQueueHandler {
 public:
  FakeCore(Rng& rng, unsigned hold_one_in, uint32_t mdts) : rng_(rng), hold_one_in_(hold_one_in), mdts_(mdts) {}

  void on_queue_created(tr::TargetQueue&) noexcept override { ++created; }
  void on_command(tr::TargetRequest& req) noexcept override {
    FUZZ_CHECK(!closed);
    FUZZ_CHECK(req.queue != nullptr);
    FUZZ_CHECK(req.data_length <= mdts_);
    if (req.direction != tr::DataDirection::none) {
      FUZZ_CHECK(req.data_length != 0 && req.data != nullptr);
      bool bidir = false;
      FUZZ_CHECK(tr::command_direction(req.sqe, bidir) == req.direction);
    }
    // In-capsule data is there now: read all of it.
    if (req.data_in_capsule) checksum_ += sum(req);
    ++commands;
    if (hold_one_in_ != 0 && rng_.one_in(hold_one_in_)) {
      held_.push_back(&req);
      return;
    }
    run(req);
  }
  void on_data_ready(tr::TargetRequest& req, p::Status st) noexcept override {
    FUZZ_CHECK(fetching_ > 0);
    --fetching_;
    if (!st.ok()) {
      // The queue is closing: complete or give back.
      if (rng_.one_in(2)) {
        req.queue->release(req);
      } else {
        req.cqe.set_status(st);
        req.queue->complete(req, false);
      }
      return;
    }
    checksum_ += sum(req);
    req.cqe.set_status(rng_.one_in(8) ? p::status::internal_error : p::status::success);
    req.queue->complete(req, false);
  }
  void on_queue_closed(tr::TargetQueue&) noexcept override {
    FUZZ_CHECK(!closed);
    FUZZ_CHECK(fetching_ == 0);  // every fetch was answered (with an error) before this
    closed = true;
  }

  // Let one held command go on (true when there was one).
  bool release_one() {
    if (held_.empty()) return false;
    const std::size_t i = rng_.next() % held_.size();
    tr::TargetRequest* req = held_[i];
    held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
    if (closed && rng_.one_in(2)) {
      req->queue->release(*req);
    } else {
      run(*req);
    }
    return true;
  }
  bool holding() const { return !held_.empty(); }

  int created = 0;
  bool closed = false;
  bool sq_flow_disabled = false;
  unsigned commands = 0;

 private:
  static uint64_t sum(const tr::TargetRequest& req) {
    uint64_t s = 0;
    for (uint32_t i = 0; i < req.data_length; ++i) s += req.data[i];
    return s;
  }

  void run(tr::TargetRequest& req) {
    const p::Sqe& sqe = req.sqe;
    if (req.direction == tr::DataDirection::host_to_controller && !req.data_in_capsule && !closed &&
        !rng_.one_in(8)) {
      ++fetching_;
      req.queue->fetch_data(req);
      return;
    }
    if (req.direction == tr::DataDirection::controller_to_host && !rng_.one_in(8)) {
      std::memset(req.data, 0xA5, req.data_length);
      req.cqe.set_status(p::status::success);
      req.queue->complete(req, true);
      return;
    }
    // A fabrics Connect that succeeds tells the queue its qid and size, as the core does.
    if (sqe.hdr.opcode == p::kFabricsOpcode &&
        static_cast<p::FabricsType>(sqe.hdr.nsid.get() & 0xFF) == p::FabricsType::connect && !closed &&
        rng_.one_in(2)) {
      const auto c = p::as<p::ConnectCommand>(sqe);
      req.queue->set_connected(c.qid.get(), static_cast<uint16_t>(c.sqsize.get() + 1u), c.sq_flow_control_disabled());
      if (c.sq_flow_control_disabled()) sq_flow_disabled = true;
      req.cqe.set_status(p::status::success);
    } else {
      req.cqe.set_status(rng_.one_in(4) ? p::status::invalid_field : p::status::success);
    }
    req.queue->complete(req, false);
  }

  Rng& rng_;
  unsigned hold_one_in_;
  uint32_t mdts_;
  std::vector<tr::TargetRequest*> held_;
  unsigned fetching_ = 0;
  uint64_t checksum_ = 0;
};

tr::BufferPool& pool() {
  static std::unique_ptr<tr::BufferPool> pool = [] {
    tr::BufferPoolOptions o;
    o.small_size = 16 * 1024;
    o.small_count = kSmallBuffers;
    o.large_size = kLargeSize;
    o.large_count = kLargeBuffers;
    auto made = tr::BufferPool::create(o);
    FUZZ_CHECK(made.has_value());
    return std::move(*made);
  }();
  return *pool;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rdmablk::fuzz::quiet_logs();
  pool();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  Rng rng(static_cast<uint64_t>(data[0] | data[1] << 8));
  TcpTargetOptions opts;
  opts.maxh2cdata = 4096u << (data[2] & 3);
  opts.max_c2h_data = 4096u << ((data[2] >> 2) & 3);
  opts.admin_in_capsule = (data[2] & 4) != 0 ? 8192 : 4096;
  opts.io_in_capsule = (data[2] & 8) != 0 ? 8192 : 0;
  opts.max_queue_depth = static_cast<uint16_t>(1u << ((data[2] >> 4) & 7));
  opts.max_data_transfer = kLargeSize;
  opts.rx_buffer = static_cast<uint32_t>(4096u << (data[3] & 3));
  const unsigned hold_one_in = (data[3] >> 2) & 3 ? 1u << ((data[3] >> 2) & 3) : 0;
  constexpr C2hSuccess kFold[] = {C2hSuccess::sq_flow_disabled, C2hSuccess::off, C2hSuccess::always,
                                  C2hSuccess::sq_flow_disabled};
  opts.c2h_success = kFold[(data[3] >> 4) & 3];
  const std::vector<uint8_t> stream(data + 4, data + size);

  FakeSocket sock;
  FakeCore core(rng, hold_one_in, opts.max_data_transfer);
  HostParser host;
  host.maxh2cdata = opts.maxh2cdata;
  host.max_c2h = std::max<uint32_t>(opts.max_c2h_data, 4096);
  host.c2h_success = opts.c2h_success;
  auto q = std::make_unique<TcpTargetQueue>(sock, pool(), core, opts, tr::TransportAddress{}, "fuzz:1");
  host.target_session = &q->session();
  q->start();
  FUZZ_CHECK(core.created == 1);

  auto complete_send = [&](bool partial) {
    std::size_t budget = partial ? rng.range(1, 8192) : SIZE_MAX;
    std::size_t took = 0;
    for (const iovec& v : sock.send_iov) {
      const std::size_t take = std::min(budget - took, v.iov_len);
      const auto* b = static_cast<const uint8_t*>(v.iov_base);
      sock.wire.insert(sock.wire.end(), b, b + take);
      took += take;
      if (took == budget) break;
    }
    sock.send_pending = false;
    q->on_send_done(static_cast<int>(took));
  };

  // The host's stream, in recv-sized pieces, with sends and held commands completing in between.
  std::size_t pos = 0;
  for (unsigned round = 0; round < 1000000 && !sock.destroyed; ++round) {
    const unsigned pick = static_cast<unsigned>(rng.next() % 8);
    if (pick < 4 && sock.recv_pending && pos < stream.size() && !sock.shut) {
      std::size_t chunk = std::min<std::size_t>(stream.size() - pos, rng.one_in(4) ? SIZE_MAX : rng.range(1, 2048));
      std::size_t got = 0;
      for (const iovec& v : sock.recv_iov) {
        const std::size_t take = std::min(chunk - got, v.iov_len);
        std::memcpy(v.iov_base, stream.data() + pos + got, take);
        got += take;
        if (got == chunk) break;
      }
      pos += got;
      sock.recv_pending = false;
      q->on_recv_done(static_cast<int>(got));
    } else if (pick < 6 && sock.send_pending) {
      complete_send(rng.one_in(3));
    } else if (pick == 6 && core.release_one()) {
    } else if (pos == stream.size() || sock.shut || !sock.recv_pending) {
      // The input is used up (or the queue stopped reading): wind down.
      if (sock.send_pending) {
        complete_send(false);
      } else if (core.release_one()) {
      } else if (sock.recv_pending) {
        sock.recv_pending = false;
        q->on_recv_done(sock.shut ? -ECONNRESET : 0);  // the host closes (EOF), or the shut socket fails it
      } else if (sock.timer) {
        sock.timer = false;
        q->on_close_timer();
      } else if (!sock.shut && pos < stream.size()) {
        // Reading is paused for a buffer that only a held command frees: the core goes on.
        if (!core.release_one()) FUZZ_FAIL("reading paused with nothing to wait for");
      } else if (!sock.destroyed) {
        FUZZ_FAIL("the queue is stuck: no I/O in flight, no timer, nothing held, not destroyed");
      }
    }
    host.sq_flow_disabled = core.sq_flow_disabled;
    host.feed(sock.wire);
  }
  FUZZ_CHECK(sock.destroyed);
  FUZZ_CHECK(core.closed);
  FUZZ_CHECK(!core.holding());
  FUZZ_CHECK(!sock.recv_pending && !sock.send_pending);
  q.reset();
  FUZZ_CHECK(pool().free_small() == kSmallBuffers);
  FUZZ_CHECK(pool().free_large() == kLargeBuffers);
  FUZZ_CHECK(pool().waiters() == 0);
  return 0;
}
