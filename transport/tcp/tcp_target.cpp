#include "transport/tcp/tcp_target.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>

#include <spdlog/spdlog.h>

#include "protocol/tcp_pdu.h"
#include "transport/log_limit.h"
#include "transport/tcp/tcp_io.h"
#include "transport/tcp/tcp_target_queue.h"

namespace rdmablk::transport::tcp {

namespace pt = rdmablk::protocol::tcp;

namespace {

std::atomic<unsigned> g_live_connections{0};
std::atomic<unsigned> g_live_acceptors{0};

// A connection on its reactor: the socket driven by the reactor's io_uring (RECVMSG / SENDMSG), under the
// TcpTargetQueue state machine. Deleted (by a posted task) when the queue is finished.
//
// With a TLS policy the connection sits between the queue and the socket (the queue never knows): the
// queue's first recv starts a MSG_PEEK of the first byte (0x16: a ClientHello; else plain NVMe/TCP, refused
// under `required` by closing the socket, as nvmet does), then the handshake runs on this reactor through
// io_uring recv/send; the queue's recv stays pending meanwhile, so a stalled handshake is ended by the
// core's connect timeout like a silent plain connection. After it: kTLS when the kernel has it (the queue's
// recv/send then go to the socket as on a plain connection), else userspace records: what a recv brings
// is decrypted into the queue's iovecs, what the queue sends is encrypted into a ciphertext buffer whose
// flush completes the queue's send (with the plaintext bytes taken: at most kMaxPlainPerSend, so a big
// batch is a short send to the queue, which resumes it). Without a TLS policy none of this runs (one
// pointer test per recv/send).
class TcpTargetConnection final : private TcpQueueIo {
 public:
  TcpTargetConnection(int fd, const ReactorSlot& where, TargetQueueHandler& handler, const TcpTargetOptions& opts,
                      ConnectionTicket ticket)
      : ticket_(std::move(ticket)),
        reactor_(*where.reactor),
        fd_(fd),
        queue_(*this, *where.pool, handler, opts, local_address_of(fd), peer_name_of(fd)) {
    recv_op_ = ConnOp{IoOp{&TcpTargetConnection::on_recv_cqe}, this};
    send_op_ = ConnOp{IoOp{&TcpTargetConnection::on_send_cqe}, this};
    if (opts.tls.policy != TlsPolicy::none && opts.tls.context) {
      tls_ = std::make_unique<Tls>();
      tls_->required = opts.tls.policy == TlsPolicy::required;
      tls_->allow_ktls = opts.tls.allow_ktls;
      tls_->context = opts.tls.context;
      tls_rx_op_ = ConnOp{IoOp{&TcpTargetConnection::on_tls_rx_cqe}, this};
      tls_tx_op_ = ConnOp{IoOp{&TcpTargetConnection::on_tls_tx_cqe}, this};
      rx_nop_op_ = ConnOp{IoOp{&TcpTargetConnection::on_rx_nop_cqe}, this};
      tx_nop_op_ = ConnOp{IoOp{&TcpTargetConnection::on_tx_nop_cqe}, this};
      ktls_recv_op_ = ConnOp{IoOp{&TcpTargetConnection::on_ktls_recv_cqe}, this};
    }
    g_live_connections.fetch_add(1, std::memory_order_relaxed);
  }

  ~TcpTargetConnection() {
    if (timer_ != 0) reactor_.cancel(timer_);
    if (fd_ >= 0) ::close(fd_);
    g_live_connections.fetch_sub(1, std::memory_order_relaxed);
  }

  void start() noexcept { queue_.start(); }

 private:
  // An IoOp with a way back to its connection (standard layout: IoOp* -> ConnOp* is a plain cast).
  struct ConnOp {
    IoOp op;
    TcpTargetConnection* self;
  };
  static void on_recv_cqe(IoOp* op, int res, uint32_t /*flags*/) noexcept {
    reinterpret_cast<ConnOp*>(op)->self->queue_.on_recv_done(res);
  }
  static void on_send_cqe(IoOp* op, int res, uint32_t /*flags*/) noexcept {
    reinterpret_cast<ConnOp*>(op)->self->queue_.on_send_done(res);
  }

  // ---- TcpQueueIo -----------------------------------------------------------------------------------

  void recv(const iovec* iov, unsigned n) noexcept override {
    if (tls_ && !tls_->passthrough()) return tls_recv(iov, n);
    plain_recv(iov, n);
  }

  void send(const iovec* iov, unsigned n) noexcept override {
    if (tls_ && !tls_->passthrough()) return tls_send(iov, n);
    plain_send(iov, n);
  }

  // Straight from the stack's send buffer: a plain non-blocking send keeps the error path simple.
  void send_now(std::span<const uint8_t> bytes) noexcept override {
    if (tls_ && !tls_->passthrough()) return tls_send_now(bytes);
    ssize_t rc = ::send(fd_, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)rc;
  }

  void shutdown() noexcept override {
    if (tls_) tls_->shut = true;
    if (tls_ && tls_->stage == Stage::userspace) tls_close_notify();
    ::shutdown(fd_, SHUT_RDWR);
  }

  void start_close_timer(std::chrono::milliseconds delay) noexcept override {
    try {
      timer_ = reactor_.schedule(delay, [this] {
        timer_ = 0;
        queue_.on_close_timer();
      });
    } catch (...) {
      queue_.on_close_timer();  // no memory for a timer: give up on the TermReq now
    }
  }

  void cancel_close_timer() noexcept override {
    if (timer_ == 0) return;
    reactor_.cancel(timer_);
    timer_ = 0;
  }

  void destroy() noexcept override {
    if (tls_) {
      // Our own socket operations (a flush of the alert, a peek) may still be in flight: free after them.
      tls_->destroying = true;
      tls_maybe_free();
      return;
    }
    ::close(fd_);
    fd_ = -1;
    reactor_.post([this] { delete this; });  // not now: callers up the stack may still touch us
  }

  void plain_recv(const iovec* iov, unsigned n) noexcept {
    rx_msg_ = msghdr{};
    rx_msg_.msg_iov = const_cast<iovec*>(iov);
    rx_msg_.msg_iovlen = n;
    if (tls_ && tls_->stage == Stage::ktls) {
      // kTLS reports a record that is not application data through a control message.
      rx_msg_.msg_control = tls_->cmsg.data();
      rx_msg_.msg_controllen = tls_->cmsg.size();
      io_uring_prep_recvmsg(reactor_.sqe_for(&ktls_recv_op_.op), fd_, &rx_msg_, 0);
      return;
    }
    io_uring_prep_recvmsg(reactor_.sqe_for(&recv_op_.op), fd_, &rx_msg_, 0);
  }

  static void on_ktls_recv_cqe(IoOp* op, int res, uint32_t) noexcept {
    TcpTargetConnection* c = self_of(op);
    if (res > 0) {
      std::optional<KtlsControl> ctl;
      try {
        ctl = ktls_control(c->rx_msg_, static_cast<std::size_t>(res));
      } catch (...) {
        return c->queue_.on_recv_done(-ENOMEM);
      }
      if (ctl) {
        // Its payload sits in the queue's free staging space: not committed, nothing is lost.
        if (ctl->skip) return c->plain_recv(c->rx_msg_.msg_iov, static_cast<unsigned>(c->rx_msg_.msg_iovlen));
        if (ctl->close_notify) {
          spdlog::debug("nvme-tcp {}: kernel TLS: {}", c->queue_.peer_name(), ctl->description);
          return c->queue_.on_recv_done(0);
        }
        if (peer_error_log_allowed()) {
          spdlog::warn("nvme-tcp {}: kernel TLS: {}, closing", c->queue_.peer_name(), ctl->description);
        }
        return c->queue_.on_recv_done(-EPROTO);
      }
    }
    c->queue_.on_recv_done(res);
  }

  void plain_send(const iovec* iov, unsigned n) noexcept {
    tx_msg_ = msghdr{};
    tx_msg_.msg_iov = const_cast<iovec*>(iov);
    tx_msg_.msg_iovlen = n;
    io_uring_prep_sendmsg(reactor_.sqe_for(&send_op_.op), fd_, &tx_msg_, MSG_NOSIGNAL);
  }

  // ---- TLS ------------------------------------------------------------------------------------------

  enum class Stage : uint8_t {
    peek,       // waiting for the first byte
    handshake,  // TLS handshake in progress
    userspace,  // records encrypted / decrypted here
    ktls,       // records in the kernel: plain recv/send
    plain,      // optional policy, the host speaks plain NVMe/TCP
    failed,     // refused or handshake failed: the queue was told, nothing more is read
  };
  static constexpr std::size_t kRxCipher = 64 * 1024;  // ciphertext per recv (userspace records)
  static constexpr std::size_t kTxCipher = 64 * 1024;  // ciphertext per send
  static constexpr std::size_t kMaxPlainPerSend = 256 * 1024;

  struct Tls {
    Stage stage = Stage::peek;
    bool required = false;
    bool allow_ktls = true;
    bool want_ktls = false;  // handshake done, kTLS to be enabled once our output is flushed
    bool destroying = false;
    bool shut = false;  // we shut the socket down (the queue is closing): its EOF is ours
    std::shared_ptr<const security::TlsContext> context;
    std::unique_ptr<security::TlsSession> session;
    // The queue's recv and send waiting on us.
    const iovec* rx_iov = nullptr;
    unsigned rx_n = 0;
    bool rx_wanted = false;
    bool tx_wanted = false;
    std::size_t tx_plain = 0;
    int rx_result = 0;
    int tx_result = 0;
    // Our socket operations (at most one recv and one send) and pending NOPs.
    bool sock_rx = false;
    bool sock_tx = false;
    unsigned nops = 0;
    uint8_t first_byte = 0;
    std::vector<uint8_t> rx_buf;
    std::vector<uint8_t> tx_buf;
    std::size_t tx_off = 0;
    std::size_t tx_len = 0;
    std::vector<uint8_t> stage_buf;
    alignas(cmsghdr) std::array<uint8_t, kKtlsCmsgSpace> cmsg{};  // kTLS recvmsg's record type

    bool passthrough() const noexcept { return stage == Stage::ktls || stage == Stage::plain; }
    bool ktls_possible() const noexcept { return allow_ktls && security::probe_ktls().available; }
  };

  static TcpTargetConnection* self_of(IoOp* op) noexcept { return reinterpret_cast<ConnOp*>(op)->self; }
  static void on_tls_rx_cqe(IoOp* op, int res, uint32_t) noexcept { self_of(op)->tls_rx_done(res); }
  static void on_tls_tx_cqe(IoOp* op, int res, uint32_t) noexcept { self_of(op)->tls_tx_done(res); }
  static void on_rx_nop_cqe(IoOp* op, int, uint32_t) noexcept {
    TcpTargetConnection* c = self_of(op);
    --c->tls_->nops;
    if (c->tls_->destroying) return c->tls_maybe_free();
    c->queue_.on_recv_done(c->tls_->rx_result);
  }
  static void on_tx_nop_cqe(IoOp* op, int, uint32_t) noexcept {
    TcpTargetConnection* c = self_of(op);
    --c->tls_->nops;
    if (c->tls_->destroying) return c->tls_maybe_free();
    c->queue_.on_send_done(c->tls_->tx_result);
  }

  void tls_maybe_free() noexcept {
    Tls& t = *tls_;
    if (t.sock_rx || t.sock_tx || t.nops != 0) return;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    t.stage = Stage::failed;
    reactor_.post([this] { delete this; });
  }

  // The queue's recv completes with `res` from inside a CQE callback (now) or from inside recv() (later,
  // through a NOP: the queue expects its results never from inside the call).
  void finish_rx(int res, bool now) noexcept {
    Tls& t = *tls_;
    t.rx_wanted = false;
    if (now) return queue_.on_recv_done(res);
    t.rx_result = res;
    ++t.nops;
    io_uring_prep_nop(reactor_.sqe_for(&rx_nop_op_.op));
  }

  void finish_tx(int res, bool now) noexcept {
    Tls& t = *tls_;
    t.tx_wanted = false;
    if (now) return queue_.on_send_done(res);
    t.tx_result = res;
    ++t.nops;
    io_uring_prep_nop(reactor_.sqe_for(&tx_nop_op_.op));
  }

  void tls_recv(const iovec* iov, unsigned n) noexcept {
    Tls& t = *tls_;
    t.rx_iov = iov;
    t.rx_n = n;
    t.rx_wanted = true;
    switch (t.stage) {
      case Stage::peek:
      case Stage::handshake:
        if (!t.sock_rx) submit_tls_read();
        return;
      case Stage::userspace: return pump_rx(false);
      case Stage::failed: return finish_rx(0, false);
      case Stage::ktls:
      case Stage::plain: break;
    }
  }

  void submit_tls_read() noexcept {
    Tls& t = *tls_;
    t.sock_rx = true;
    io_uring_sqe* sqe = reactor_.sqe_for(&tls_rx_op_.op);
    if (t.stage == Stage::peek) {
      io_uring_prep_recv(sqe, fd_, &t.first_byte, 1, MSG_PEEK);
      return;
    }
    std::size_t want = t.rx_buf.size();
    // Record by record while the connection may still go to kTLS: nothing for the kernel stays with us.
    if (t.stage == Stage::handshake && t.ktls_possible()) want = std::min(want, t.session->next_read_size());
    io_uring_prep_recv(sqe, fd_, t.rx_buf.data(), want, 0);
  }

  // Decrypts what the session holds into the queue's recv; reads more when it holds nothing.
  void pump_rx(bool now) noexcept {
    Tls& t = *tls_;
    if (!t.rx_wanted || t.sock_rx) return;
    const TlsFill f = decrypt_iov(*t.session, t.rx_iov, t.rx_n);
    flush_tls_output();  // a KeyUpdate may have been answered
    switch (f.status) {
      case security::TlsIo::ok: return finish_rx(static_cast<int>(f.bytes), now);
      case security::TlsIo::need_input:
        if (f.bytes != 0) return finish_rx(static_cast<int>(f.bytes), now);
        return submit_tls_read();
      case security::TlsIo::closed:
        spdlog::debug("nvme-tcp {}: TLS close_notify from the host", queue_.peer_name());
        return finish_rx(0, now);
      case security::TlsIo::failed:
        if (peer_error_log_allowed()) {
          spdlog::warn("nvme-tcp {}: TLS record error, closing: {}", queue_.peer_name(), t.session->error().message);
        }
        t.stage = Stage::failed;
        return finish_rx(-EPROTO, now);
    }
  }

  void tls_rx_done(int res) noexcept {
    Tls& t = *tls_;
    t.sock_rx = false;
    if (t.destroying) return tls_maybe_free();
    if (res == -EAGAIN || res == -EINTR || res == -ENOBUFS) return submit_tls_read();
    switch (t.stage) {
      case Stage::peek: return on_first_byte(res);
      case Stage::handshake: return on_handshake_bytes(res);
      case Stage::userspace:
        if (res <= 0) return finish_rx(res, true);
        if (!t.session->feed(std::span<const uint8_t>(t.rx_buf.data(), static_cast<std::size_t>(res)))) {
          return finish_rx(-ENOMEM, true);
        }
        return pump_rx(true);
      case Stage::ktls:
      case Stage::plain:
      case Stage::failed:
        // The stage changed while this read was in flight (cannot happen: reads stop first).
        if (t.rx_wanted) finish_rx(res <= 0 ? res : -EPROTO, true);
        return;
    }
  }

  void on_first_byte(int res) noexcept {
    Tls& t = *tls_;
    if (res <= 0) return finish_rx(res, true);  // closed before saying anything: the queue logs it
    if (t.first_byte == kTlsHandshakeRecord) return start_handshake();
    if (!t.required) {
      t.stage = Stage::plain;  // optional: plain NVMe/TCP from here on, the queue's recv goes to the socket
      t.rx_buf = {};
      t.rx_wanted = false;
      return plain_recv(t.rx_iov, t.rx_n);
    }
    if (peer_error_log_allowed()) {
      spdlog::warn("nvme-tcp {}: plain NVMe/TCP refused: this listener requires TLS 1.3 (first byte {:#04x}, not "
                   "a TLS handshake record)",
                   queue_.peer_name(), t.first_byte);
    }
    t.stage = Stage::failed;
    finish_rx(0, true);
  }

  void start_handshake() noexcept {
    Tls& t = *tls_;
    auto s = security::TlsSession::server(t.context);
    if (!s) {
      if (peer_error_log_allowed()) {
        spdlog::warn("nvme-tcp {}: cannot start TLS: {}", queue_.peer_name(), s.error().message);
      }
      t.stage = Stage::failed;
      return finish_rx(-ENOMEM, true);
    }
    try {
      t.rx_buf.resize(kRxCipher);
      t.tx_buf.resize(kTxCipher);
      t.stage_buf.resize(kTlsRecordPlain);
    } catch (...) {
      t.stage = Stage::failed;
      return finish_rx(-ENOMEM, true);
    }
    t.session = std::move(*s);
    t.stage = Stage::handshake;
    submit_tls_read();
  }

  void on_handshake_bytes(int res) noexcept {
    Tls& t = *tls_;
    if (res <= 0) {
      if (!t.shut && peer_error_log_allowed()) {
        spdlog::warn("nvme-tcp {}: TLS handshake failed: the host {}", queue_.peer_name(),
                     res == 0 ? "closed the connection" : std::strerror(-res));
      }
      t.stage = Stage::failed;
      return finish_rx(res, true);
    }
    if (!t.session->feed(std::span<const uint8_t>(t.rx_buf.data(), static_cast<std::size_t>(res)))) {
      t.stage = Stage::failed;
      return finish_rx(-ENOMEM, true);
    }
    switch (t.session->handshake()) {
      case security::TlsStep::need_input:
        flush_tls_output();
        return submit_tls_read();
      case security::TlsStep::failed: return handshake_failed();
      case security::TlsStep::done: break;
    }
    flush_tls_output();
    if (t.ktls_possible()) {
      t.want_ktls = true;
      if (!t.sock_tx && t.tx_off == t.tx_len && t.session->pending_output() == 0) enable_ktls();
      return;  // else once the output is out (tls_tx_done)
    }
    t.stage = Stage::userspace;
    established();
    pump_rx(true);
  }

  void handshake_failed() noexcept {
    Tls& t = *tls_;
    const security::TlsError& e = t.session->error();
    if (peer_error_log_allowed()) {
      spdlog::warn("nvme-tcp {}: TLS handshake failed: {}: {}", queue_.peer_name(), security::to_string(e.kind),
                   e.message);
    }
    // The alert, best effort and only on a quiet stream (never in the middle of a record of ours).
    if (!t.sock_tx && t.tx_off == t.tx_len) {
      std::array<uint8_t, 64> alert{};
      const std::size_t n = t.session->read_output(alert);
      if (n != 0) {
        ssize_t rc = ::send(fd_, alert.data(), n, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)rc;
      }
    }
    t.stage = Stage::failed;
    finish_rx(0, true);  // the queue closes (the core hears once); we said why
  }

  void enable_ktls() noexcept {
    Tls& t = *tls_;
    t.want_ktls = false;
    auto r = t.session->enable_ktls(fd_);
    if (!r) {
      if (!t.session->handshake_done()) {
        // TLS_TX is in the kernel, TLS_RX is not: neither path works any more.
        if (peer_error_log_allowed()) {
          spdlog::warn("nvme-tcp {}: kTLS hand-off failed, closing: {}", queue_.peer_name(), r.error().message);
        }
        t.stage = Stage::failed;
        return finish_rx(-EPROTO, true);
      }
      spdlog::debug("nvme-tcp {}: kTLS not used ({}): userspace TLS records", queue_.peer_name(), r.error().message);
      t.stage = Stage::userspace;
      established();
      return pump_rx(true);
    }
    t.stage = Stage::ktls;
    established();
    t.rx_buf = {};
    t.tx_buf = {};
    t.stage_buf = {};
    t.tx_off = t.tx_len = 0;
    if (t.rx_wanted) {
      t.rx_wanted = false;
      plain_recv(t.rx_iov, t.rx_n);
    }
  }

  void established() noexcept {
    try {
      TlsConnectionInfo info = connection_info(*tls_->session);
      spdlog::info("nvme-tcp {}: {}", queue_.peer_name(), describe(info));
      queue_.set_tls(std::move(info));
    } catch (...) {
    }
  }

  void tls_send(const iovec* iov, unsigned n) noexcept {
    Tls& t = *tls_;
    if (t.stage != Stage::userspace) return finish_tx(-EPIPE, false);
    const long taken = encrypt_iov(*t.session, iov, n, kMaxPlainPerSend, t.stage_buf);
    if (taken < 0) {
      if (peer_error_log_allowed()) {
        spdlog::warn("nvme-tcp {}: TLS encrypt failed: {}", queue_.peer_name(), t.session->error().message);
      }
      return finish_tx(-EPROTO, false);
    }
    t.tx_wanted = true;
    t.tx_plain = static_cast<std::size_t>(taken);
    flush_tls_output();
  }

  // Sends the session's output (one socket send at a time, partial sends resumed).
  void flush_tls_output() noexcept {
    Tls& t = *tls_;
    if (t.sock_tx) return;
    if (t.tx_off == t.tx_len) {
      t.tx_off = 0;
      t.tx_len = t.session->read_output(t.tx_buf);
      if (t.tx_len == 0) return;
    }
    t.sock_tx = true;
    io_uring_prep_send(reactor_.sqe_for(&tls_tx_op_.op), fd_, t.tx_buf.data() + t.tx_off, t.tx_len - t.tx_off,
                       MSG_NOSIGNAL);
  }

  void tls_tx_done(int res) noexcept {
    Tls& t = *tls_;
    t.sock_tx = false;
    if (t.destroying) return tls_maybe_free();
    if (res == -EAGAIN || res == -EINTR) return flush_tls_output();
    if (res <= 0) {
      t.tx_off = t.tx_len = 0;
      if (res == 0) res = -EPIPE;
      if (t.tx_wanted) finish_tx(res, true);
      // A handshake whose flight cannot be sent ends here, not in a read that waits for nothing.
      if (t.rx_wanted && !t.sock_rx && (t.stage == Stage::handshake || t.want_ktls)) {
        t.want_ktls = false;
        t.stage = Stage::failed;
        finish_rx(res, true);
      }
      return;
    }
    t.tx_off += static_cast<std::size_t>(res);
    if (t.tx_off < t.tx_len || t.session->pending_output() != 0) return flush_tls_output();
    if (t.want_ktls) enable_ktls();
    if (t.tx_wanted) finish_tx(static_cast<int>(t.tx_plain), true);
  }

  // A TermReq right before the socket goes: encrypted, best effort, only when no record of ours is half out.
  void tls_send_now(std::span<const uint8_t> bytes) noexcept {
    Tls& t = *tls_;
    if (t.stage != Stage::userspace || t.sock_tx || t.tx_off != t.tx_len || t.session->pending_output() != 0) return;
    if (t.session->encrypt(bytes) != security::TlsIo::ok) return;
    std::array<uint8_t, 512> out{};
    const std::size_t n = t.session->read_output(out);
    ssize_t rc = ::send(fd_, out.data(), n, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)rc;
  }

  void tls_close_notify() noexcept {
    Tls& t = *tls_;
    if (t.sock_tx || t.tx_off != t.tx_len || t.session->pending_output() != 0) return;
    t.session->close();
    std::array<uint8_t, 64> out{};
    const std::size_t n = t.session->read_output(out);
    if (n != 0) {
      ssize_t rc = ::send(fd_, out.data(), n, MSG_DONTWAIT | MSG_NOSIGNAL);
      (void)rc;
    }
  }

  ConnectionTicket ticket_;  // our place under the connection limits, freed last
  Reactor& reactor_;
  int fd_;
  TcpTargetQueue queue_;
  ConnOp recv_op_{};
  ConnOp send_op_{};
  msghdr rx_msg_{};
  msghdr tx_msg_{};
  uint64_t timer_ = 0;
  std::unique_ptr<Tls> tls_;  // null without a TLS policy
  ConnOp tls_rx_op_{};
  ConnOp tls_tx_op_{};
  ConnOp rx_nop_op_{};
  ConnOp tx_nop_op_{};
  ConnOp ktls_recv_op_{};
};

}  // namespace

unsigned live_tcp_target_connections() noexcept { return g_live_connections.load(std::memory_order_relaxed); }
unsigned live_tcp_acceptors() noexcept { return g_live_acceptors.load(std::memory_order_relaxed); }

// ---- listener ---------------------------------------------------------------------------------------

struct TcpListener::Acceptor {
  struct Op {
    IoOp op;
    Acceptor* self;
  };
  std::vector<ReactorSlot> reactors;
  TargetQueueHandler* handler = nullptr;
  TcpTargetOptions opts;
  std::shared_ptr<ConnectionGate> gate;
  unsigned gate_listener = 0;
  std::string name;  // "127.0.0.1:4420", for logs
  int fd = -1;
  Op op{};
  bool multishot = true;
  bool seen_success = false;
  bool armed = false;
  bool stopping = false;
  uint64_t retry_timer = 0;  // a re-arm after EMFILE/ENFILE/ENOMEM is pending: stop cancels it
  std::size_t next = 0;

  Acceptor() { g_live_acceptors.fetch_add(1, std::memory_order_relaxed); }
  ~Acceptor() { g_live_acceptors.fetch_sub(1, std::memory_order_relaxed); }
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;

  Reactor& home() const noexcept { return *reactors[0].reactor; }

  void arm() noexcept {
    if (armed || stopping) return;
    io_uring_sqe* sqe = home().sqe_for(&op.op);
    if (multishot) {
      io_uring_prep_multishot_accept(sqe, fd, nullptr, nullptr, SOCK_CLOEXEC);
    } else {
      io_uring_prep_accept(sqe, fd, nullptr, nullptr, SOCK_CLOEXEC);
    }
    armed = true;
  }

  static void on_cqe(IoOp* o, int res, uint32_t flags) noexcept {
    reinterpret_cast<Op*>(o)->self->on_accept(res, flags);
  }

  void on_accept(int res, uint32_t flags) noexcept {
    const bool more = (flags & IORING_CQE_F_MORE) != 0;
    if (!more) armed = false;
    if (res >= 0) {
      seen_success = true;
      if (stopping) {
        ::close(res);
      } else {
        hand_off(res);
      }
    } else if (res == -EINVAL && multishot && !seen_success && !stopping) {
      spdlog::info("nvme-tcp: multishot accept not supported, re-arming single-shot accepts");
      multishot = false;
    } else if (res != -ECANCELED && !stopping && peer_error_log_allowed()) {
      spdlog::warn("nvme-tcp: accept failed: {}", std::strerror(-res));
    }
    if (armed) return;
    if (stopping) {
      ::close(fd);
      delete this;
      return;
    }
    if (res == -EMFILE || res == -ENFILE || res == -ENOMEM) {
      // Out of descriptors or memory: try again in a while instead of spinning on the error. The timer
      // holds `this`, so stop_on_reactor() cancels it before the acceptor is deleted.
      try {
        retry_timer = home().schedule(std::chrono::milliseconds(100), [this] {
          retry_timer = 0;
          arm();
        });
        return;
      } catch (...) {
        retry_timer = 0;  // cannot even allocate the timer: re-arm at once
      }
    }
    arm();
  }

  void hand_off(int cfd) noexcept {
    auto* ticket = new (std::nothrow) ConnectionTicket();
    if (ticket == nullptr) {
      ::close(cfd);
      return;
    }
    if (gate && !admit(cfd, *ticket)) {
      delete ticket;
      ::close(cfd);
      return;
    }
    int one = 1;
    ::setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    const ReactorSlot where = reactors[next++ % reactors.size()];
    TargetQueueHandler* h = handler;
    const TcpTargetOptions o = opts;
    try {
      where.reactor->post([cfd, where, h, o, ticket] {
        std::unique_ptr<ConnectionTicket> t(ticket);
        TcpTargetConnection* c = nullptr;
        try {
          c = new TcpTargetConnection(cfd, where, *h, o, std::move(*t));
        } catch (...) {
          ::close(cfd);
          return;
        }
        c->start();
      });
    } catch (...) {
      delete ticket;
      ::close(cfd);
    }
  }

  bool admit(int cfd, ConnectionTicket& ticket) noexcept {
    sockaddr_storage peer{};
    socklen_t len = sizeof(peer);
    if (::getpeername(cfd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return false;  // already gone
    std::string why;
    if (gate->admit(gate_listener, host_of(reinterpret_cast<sockaddr*>(&peer)), ticket, why)) return true;
    if (peer_error_log_allowed()) {
      spdlog::warn("nvme-tcp {}: connection from {} refused: {}", name, peer_name_of(cfd), why);
    }
    return false;
  }

  void stop_on_reactor() noexcept {
    stopping = true;
    if (retry_timer != 0) {
      home().cancel(retry_timer);
      retry_timer = 0;
    }
    if (!armed) {
      ::close(fd);
      delete this;
      return;
    }
    io_uring_sqe* sqe = home().sqe();
    io_uring_prep_cancel(sqe, &op.op, 0);
    io_uring_sqe_set_data64(sqe, 0);
  }
};

Result<std::unique_ptr<TcpListener>> TcpListener::create(const TransportAddress& address,
                                                        std::vector<ReactorSlot> reactors,
                                                        TargetQueueHandler& handler, const TcpTargetOptions& opts,
                                                        std::shared_ptr<ConnectionGate> gate) {
  if (reactors.empty()) return make_error("TCP listener needs at least one reactor", EINVAL);
  for (const auto& r : reactors) {
    if (r.reactor == nullptr || r.pool == nullptr) return make_error("TCP listener: reactor without buffer pool", EINVAL);
  }
  if (opts.maxh2cdata < pt::kMinMaxH2CData || opts.maxh2cdata % 4 != 0) {
    return make_error("maxh2cdata must be >= 4096 and a multiple of 4", EINVAL);
  }
  if (opts.tls.policy != TlsPolicy::none) {
    if (!opts.tls.context || !opts.tls.context->is_server()) {
      return make_error("a TCP listener with TLS needs a server TLS context", EINVAL);
    }
    // Probed once here (it may open sockets) rather than on a reactor at the first handshake.
    if (opts.tls.allow_ktls) {
      const auto& k = security::probe_ktls();
      spdlog::debug("nvme-tcp: kernel TLS {}: {}", k.available ? "available" : "not available", k.reason);
    }
  }
  auto sa = resolve_address(address, true);
  if (!sa) return tl::unexpected(sa.error());
  const std::string where = (address.traddr.empty() ? "*" : address.traddr) + ":" + std::to_string(address.trsvcid);
  int fd = ::socket(sa->storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error("socket: " + std::string(std::strerror(errno)), errno);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, sa->get(), sa->len) != 0 || ::listen(fd, 1024) != 0) {
    int e = errno;
    ::close(fd);
    return make_error("cannot listen on " + where + ": " + std::strerror(e), e);
  }
  std::unique_ptr<TcpListener> l(new TcpListener());
  l->address_ = local_address_of(fd);
  if (!address.traddr.empty()) l->address_.traddr = address.traddr;
  auto* a = new Acceptor();
  a->reactors = std::move(reactors);
  a->handler = &handler;
  a->opts = opts;
  a->name = where;
  if (gate) {
    a->gate_listener = gate->add_listener(where);
    a->gate = std::move(gate);
  }
  a->fd = fd;
  a->op.op.fn = &Acceptor::on_cqe;
  a->op.self = a;
  l->acceptor_ = a;
  a->home().post([a] { a->arm(); });
  return l;
}

TcpListener::~TcpListener() { stop(); }

const TransportAddress& TcpListener::address() const noexcept { return address_; }

void TcpListener::stop() noexcept {
  Acceptor* a = acceptor_;
  if (a == nullptr) return;
  acceptor_ = nullptr;
  try {
    a->home().post([a] { a->stop_on_reactor(); });
  } catch (...) {
  }
}

}  // namespace rdmablk::transport::tcp
