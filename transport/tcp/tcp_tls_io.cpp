// The TLS queue I/O of a target connection (tcp_queue_io.h): TLS 1.3 under the TcpTargetQueue, which
// never knows. Until the handshake is done and after a failure the queue's recv waits here; afterwards its
// recv/send go to the socket (kTLS, or a plain host under the optional policy) or through userspace records
// (a ciphertext flush completes the queue's send with the plaintext bytes taken: at most kMaxPlainPerSend,
// so a big batch is a short send to the queue, which resumes it).
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include <spdlog/spdlog.h>

#include "transport/log_limit.h"
#include "transport/tcp/tcp_queue_io.h"

namespace rdmablk::transport::tcp {

namespace {

class TlsQueueIo final : public TcpSocketIo {
 public:
  TlsQueueIo(Reactor& reactor, int fd, const TcpTlsServerOptions& opts)
      : TcpSocketIo(reactor, fd),
        required_(opts.policy == TlsPolicy::required),
        allow_ktls_(opts.allow_ktls),
        context_(opts.context) {
    bind(tls_rx_op_, [](IoOp* op, int res, uint32_t) noexcept { self_of<TlsQueueIo>(op)->tls_rx_done(res); });
    bind(tls_tx_op_, [](IoOp* op, int res, uint32_t) noexcept { self_of<TlsQueueIo>(op)->tls_tx_done(res); });
    bind(rx_nop_op_, &TlsQueueIo::on_rx_nop_cqe);
    bind(tx_nop_op_, &TlsQueueIo::on_tx_nop_cqe);
    bind(ktls_recv_op_, &TlsQueueIo::on_ktls_recv_cqe);
  }

  void recv(const iovec* iov, unsigned n) noexcept override {
    if (stage_ == Stage::plain) return TcpSocketIo::recv(iov, n);
    // kTLS reports a record that is not application data through a control message.
    if (stage_ == Stage::ktls) return submit_recvmsg(ktls_recv_op_, iov, n, cmsg_);
    tls_recv(iov, n);
  }

  void send(const iovec* iov, unsigned n) noexcept override {
    if (passthrough()) return TcpSocketIo::send(iov, n);
    tls_send(iov, n);
  }

  void send_now(std::span<const uint8_t> bytes) noexcept override {
    if (passthrough()) return TcpSocketIo::send_now(bytes);
    tls_send_now(bytes);
  }

  void shutdown() noexcept override {
    shut_ = true;
    if (stage_ == Stage::userspace) tls_close_notify();
    TcpSocketIo::shutdown();
  }

  void destroy() noexcept override {
    // Our own socket operations (a flush of the alert, a peek) may still be in flight: free after them.
    destroying_ = true;
    tls_maybe_free();
  }

 private:
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

  bool passthrough() const noexcept { return stage_ == Stage::ktls || stage_ == Stage::plain; }
  bool ktls_possible() const noexcept { return allow_ktls_ && security::probe_ktls().available; }

  static void on_ktls_recv_cqe(IoOp* op, int res, uint32_t) noexcept {
    TlsQueueIo* c = self_of<TlsQueueIo>(op);
    if (res > 0) {
      std::optional<KtlsControl> ctl;
      try {
        ctl = ktls_control(c->rx_msg_, static_cast<std::size_t>(res));
      } catch (...) {
        return c->queue_->on_recv_done(-ENOMEM);
      }
      if (ctl) {
        // Its payload sits in the queue's free staging space: not committed, nothing is lost.
        if (ctl->skip) return c->recv(c->rx_msg_.msg_iov, static_cast<unsigned>(c->rx_msg_.msg_iovlen));
        if (ctl->close_notify) {
          spdlog::debug("nvme-tcp {}: kernel TLS: {}", c->queue_->peer_name(), ctl->description);
          return c->queue_->on_recv_done(0);
        }
        if (peer_error_log_allowed()) {
          spdlog::warn("nvme-tcp {}: kernel TLS: {}, closing", c->queue_->peer_name(), ctl->description);
        }
        return c->queue_->on_recv_done(-EPROTO);
      }
    }
    c->queue_->on_recv_done(res);
  }

  static void on_rx_nop_cqe(IoOp* op, int, uint32_t) noexcept {
    TlsQueueIo* c = self_of<TlsQueueIo>(op);
    --c->nops_;
    if (c->destroying_) return c->tls_maybe_free();
    c->queue_->on_recv_done(c->rx_result_);
  }
  static void on_tx_nop_cqe(IoOp* op, int, uint32_t) noexcept {
    TlsQueueIo* c = self_of<TlsQueueIo>(op);
    --c->nops_;
    if (c->destroying_) return c->tls_maybe_free();
    c->queue_->on_send_done(c->tx_result_);
  }

  void tls_maybe_free() noexcept {
    if (sock_rx_ || sock_tx_ || nops_ != 0) return;
    stage_ = Stage::failed;
    close_and_release();
  }

  // The queue's recv completes with `res` from inside a CQE callback (now) or from inside recv() (later,
  // through a NOP: the queue expects its results never from inside the call).
  void finish_rx(int res, bool now) noexcept {
    rx_wanted_ = false;
    if (now) return queue_->on_recv_done(res);
    rx_result_ = res;
    ++nops_;
    io_uring_prep_nop(reactor_.sqe_for(&rx_nop_op_.op));
  }

  void finish_tx(int res, bool now) noexcept {
    tx_wanted_ = false;
    if (now) return queue_->on_send_done(res);
    tx_result_ = res;
    ++nops_;
    io_uring_prep_nop(reactor_.sqe_for(&tx_nop_op_.op));
  }

  void tls_recv(const iovec* iov, unsigned n) noexcept {
    rx_iov_ = iov;
    rx_n_ = n;
    rx_wanted_ = true;
    switch (stage_) {
      case Stage::peek:
      case Stage::handshake:
        if (!sock_rx_) submit_tls_read();
        return;
      case Stage::userspace: return pump_rx(false);
      case Stage::failed: return finish_rx(0, false);
      case Stage::ktls:
      case Stage::plain: break;
    }
  }

  void submit_tls_read() noexcept {
    sock_rx_ = true;
    io_uring_sqe* sqe = reactor_.sqe_for(&tls_rx_op_.op);
    if (stage_ == Stage::peek) {
      io_uring_prep_recv(sqe, fd_, &first_byte_, 1, MSG_PEEK);
      return;
    }
    std::size_t want = rx_buf_.size();
    // Record by record while the connection may still go to kTLS: nothing for the kernel stays with us.
    if (stage_ == Stage::handshake && ktls_possible()) want = std::min(want, session_->next_read_size());
    io_uring_prep_recv(sqe, fd_, rx_buf_.data(), want, 0);
  }

  // Decrypts what the session holds into the queue's recv; reads more when it holds nothing.
  void pump_rx(bool now) noexcept {
    if (!rx_wanted_ || sock_rx_) return;
    const TlsFill f = decrypt_iov(*session_, rx_iov_, rx_n_);
    flush_tls_output();  // a KeyUpdate may have been answered
    switch (f.status) {
      case security::TlsIo::ok: return finish_rx(static_cast<int>(f.bytes), now);
      case security::TlsIo::need_input:
        if (f.bytes != 0) return finish_rx(static_cast<int>(f.bytes), now);
        return submit_tls_read();
      case security::TlsIo::closed:
        spdlog::debug("nvme-tcp {}: TLS close_notify from the host", queue_->peer_name());
        return finish_rx(0, now);
      case security::TlsIo::failed:
        if (peer_error_log_allowed()) {
          spdlog::warn("nvme-tcp {}: TLS record error, closing: {}", queue_->peer_name(), session_->error().message);
        }
        stage_ = Stage::failed;
        return finish_rx(-EPROTO, now);
    }
  }

  void tls_rx_done(int res) noexcept {
    sock_rx_ = false;
    if (destroying_) return tls_maybe_free();
    if (res == -EAGAIN || res == -EINTR || res == -ENOBUFS) return submit_tls_read();
    switch (stage_) {
      case Stage::peek: return on_first_byte(res);
      case Stage::handshake: return on_handshake_bytes(res);
      case Stage::userspace:
        if (res <= 0) return finish_rx(res, true);
        if (!session_->feed(std::span<const uint8_t>(rx_buf_.data(), static_cast<std::size_t>(res)))) {
          return finish_rx(-ENOMEM, true);
        }
        return pump_rx(true);
      case Stage::ktls:
      case Stage::plain:
      case Stage::failed:
        // The stage changed while this read was in flight (cannot happen: reads stop first).
        if (rx_wanted_) finish_rx(res <= 0 ? res : -EPROTO, true);
        return;
    }
  }

  void on_first_byte(int res) noexcept {
    if (res <= 0) return finish_rx(res, true);  // closed before saying anything: the queue logs it
    if (first_byte_ == kTlsHandshakeRecord) return start_handshake();
    if (!required_) {
      stage_ = Stage::plain;  // optional: plain NVMe/TCP from here on, the queue's recv goes to the socket
      rx_buf_ = {};
      rx_wanted_ = false;
      return TcpSocketIo::recv(rx_iov_, rx_n_);
    }
    if (peer_error_log_allowed()) {
      spdlog::warn("nvme-tcp {}: plain NVMe/TCP refused: this listener requires TLS 1.3 (first byte {:#04x}, not "
                   "a TLS handshake record)",
                   queue_->peer_name(), first_byte_);
    }
    stage_ = Stage::failed;
    finish_rx(0, true);
  }

  void start_handshake() noexcept {
    auto s = security::TlsSession::server(context_);
    if (!s) {
      if (peer_error_log_allowed()) {
        spdlog::warn("nvme-tcp {}: cannot start TLS: {}", queue_->peer_name(), s.error().message);
      }
      stage_ = Stage::failed;
      return finish_rx(-ENOMEM, true);
    }
    try {
      rx_buf_.resize(kRxCipher);
      tx_buf_.resize(kTxCipher);
      stage_buf_.resize(kTlsRecordPlain);
    } catch (...) {
      stage_ = Stage::failed;
      return finish_rx(-ENOMEM, true);
    }
    session_ = std::move(*s);
    stage_ = Stage::handshake;
    submit_tls_read();
  }

  void on_handshake_bytes(int res) noexcept {
    if (res <= 0) {
      if (!shut_ && peer_error_log_allowed()) {
        spdlog::warn("nvme-tcp {}: TLS handshake failed: the host {}", queue_->peer_name(),
                     res == 0 ? "closed the connection" : std::strerror(-res));
      }
      stage_ = Stage::failed;
      return finish_rx(res, true);
    }
    if (!session_->feed(std::span<const uint8_t>(rx_buf_.data(), static_cast<std::size_t>(res)))) {
      stage_ = Stage::failed;
      return finish_rx(-ENOMEM, true);
    }
    switch (session_->handshake()) {
      case security::TlsStep::need_input:
        flush_tls_output();
        return submit_tls_read();
      case security::TlsStep::failed: return handshake_failed();
      case security::TlsStep::done: break;
    }
    flush_tls_output();
    if (ktls_possible()) {
      want_ktls_ = true;
      if (!sock_tx_ && tx_off_ == tx_len_ && session_->pending_output() == 0) enable_ktls();
      return;  // else once the output is out (tls_tx_done)
    }
    stage_ = Stage::userspace;
    established();
    pump_rx(true);
  }

  void handshake_failed() noexcept {
    const security::TlsError& e = session_->error();
    if (peer_error_log_allowed()) {
      spdlog::warn("nvme-tcp {}: TLS handshake failed: {}: {}", queue_->peer_name(), security::to_string(e.kind),
                   e.message);
    }
    // The alert, best effort and only on a quiet stream (never in the middle of a record of ours).
    if (!sock_tx_ && tx_off_ == tx_len_) {
      std::array<uint8_t, 64> alert{};
      const std::size_t n = session_->read_output(alert);
      if (n != 0) {
        ssize_t rc = ::send(fd_, alert.data(), n, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)rc;
      }
    }
    stage_ = Stage::failed;
    finish_rx(0, true);  // the queue closes (the core hears once); we said why
  }

  void enable_ktls() noexcept {
    want_ktls_ = false;
    auto r = session_->enable_ktls(fd_);
    if (!r) {
      if (!session_->handshake_done()) {
        // TLS_TX is in the kernel, TLS_RX is not: neither path works any more.
        if (peer_error_log_allowed()) {
          spdlog::warn("nvme-tcp {}: kTLS hand-off failed, closing: {}", queue_->peer_name(), r.error().message);
        }
        stage_ = Stage::failed;
        return finish_rx(-EPROTO, true);
      }
      spdlog::debug("nvme-tcp {}: kTLS not used ({}): userspace TLS records", queue_->peer_name(), r.error().message);
      stage_ = Stage::userspace;
      established();
      return pump_rx(true);
    }
    stage_ = Stage::ktls;
    established();
    rx_buf_ = {};
    tx_buf_ = {};
    stage_buf_ = {};
    tx_off_ = tx_len_ = 0;
    if (rx_wanted_) {
      rx_wanted_ = false;
      recv(rx_iov_, rx_n_);
    }
  }

  void established() noexcept {
    try {
      TlsConnectionInfo info = connection_info(*session_);
      spdlog::info("nvme-tcp {}: {}", queue_->peer_name(), describe(info));
      queue_->set_tls(std::move(info));
    } catch (...) {
    }
  }

  void tls_send(const iovec* iov, unsigned n) noexcept {
    if (stage_ != Stage::userspace) return finish_tx(-EPIPE, false);
    const long taken = encrypt_iov(*session_, iov, n, kMaxPlainPerSend, stage_buf_);
    if (taken < 0) {
      if (peer_error_log_allowed()) {
        spdlog::warn("nvme-tcp {}: TLS encrypt failed: {}", queue_->peer_name(), session_->error().message);
      }
      return finish_tx(-EPROTO, false);
    }
    tx_wanted_ = true;
    tx_plain_ = static_cast<std::size_t>(taken);
    flush_tls_output();
  }

  // Sends the session's output (one socket send at a time, partial sends resumed).
  void flush_tls_output() noexcept {
    if (sock_tx_) return;
    if (tx_off_ == tx_len_) {
      tx_off_ = 0;
      tx_len_ = session_->read_output(tx_buf_);
      if (tx_len_ == 0) return;
    }
    sock_tx_ = true;
    io_uring_prep_send(reactor_.sqe_for(&tls_tx_op_.op), fd_, tx_buf_.data() + tx_off_, tx_len_ - tx_off_,
                       MSG_NOSIGNAL);
  }

  void tls_tx_done(int res) noexcept {
    sock_tx_ = false;
    if (destroying_) return tls_maybe_free();
    if (res == -EAGAIN || res == -EINTR) return flush_tls_output();
    if (res <= 0) {
      tx_off_ = tx_len_ = 0;
      if (res == 0) res = -EPIPE;
      if (tx_wanted_) finish_tx(res, true);
      // A handshake whose flight cannot be sent ends here, not in a read that waits for nothing.
      if (rx_wanted_ && !sock_rx_ && (stage_ == Stage::handshake || want_ktls_)) {
        want_ktls_ = false;
        stage_ = Stage::failed;
        finish_rx(res, true);
      }
      return;
    }
    tx_off_ += static_cast<std::size_t>(res);
    if (tx_off_ < tx_len_ || session_->pending_output() != 0) return flush_tls_output();
    if (want_ktls_) enable_ktls();
    if (tx_wanted_) finish_tx(static_cast<int>(tx_plain_), true);
  }

  // A TermReq right before the socket goes: encrypted, best effort, only when no record of ours is half out.
  void tls_send_now(std::span<const uint8_t> bytes) noexcept {
    if (stage_ != Stage::userspace || sock_tx_ || tx_off_ != tx_len_ || session_->pending_output() != 0) return;
    if (session_->encrypt(bytes) != security::TlsIo::ok) return;
    std::array<uint8_t, 512> out{};
    const std::size_t n = session_->read_output(out);
    ssize_t rc = ::send(fd_, out.data(), n, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)rc;
  }

  void tls_close_notify() noexcept {
    if (sock_tx_ || tx_off_ != tx_len_ || session_->pending_output() != 0) return;
    session_->close();
    std::array<uint8_t, 64> out{};
    const std::size_t n = session_->read_output(out);
    if (n != 0) {
      ssize_t rc = ::send(fd_, out.data(), n, MSG_DONTWAIT | MSG_NOSIGNAL);
      (void)rc;
    }
  }

  Stage stage_ = Stage::peek;
  bool required_ = false;
  bool allow_ktls_ = true;
  bool want_ktls_ = false;  // handshake done, kTLS to be enabled once our output is flushed
  bool destroying_ = false;
  bool shut_ = false;  // we shut the socket down (the queue is closing): its EOF is ours
  std::shared_ptr<const security::TlsContext> context_;
  std::unique_ptr<security::TlsSession> session_;
  // The queue's recv and send waiting on us.
  const iovec* rx_iov_ = nullptr;
  unsigned rx_n_ = 0;
  bool rx_wanted_ = false;
  bool tx_wanted_ = false;
  std::size_t tx_plain_ = 0;
  int rx_result_ = 0;
  int tx_result_ = 0;
  // Our socket operations (at most one recv and one send) and pending NOPs.
  bool sock_rx_ = false;
  bool sock_tx_ = false;
  unsigned nops_ = 0;
  uint8_t first_byte_ = 0;
  std::vector<uint8_t> rx_buf_;
  std::vector<uint8_t> tx_buf_;
  std::size_t tx_off_ = 0;
  std::size_t tx_len_ = 0;
  std::vector<uint8_t> stage_buf_;
  alignas(cmsghdr) std::array<uint8_t, kKtlsCmsgSpace> cmsg_{};  // kTLS recvmsg's record type
  Op tls_rx_op_{};
  Op tls_tx_op_{};
  Op rx_nop_op_{};
  Op tx_nop_op_{};
  Op ktls_recv_op_{};
};

}  // namespace

std::unique_ptr<TcpSocketIo> make_tls_queue_io(Reactor& reactor, int fd, const TcpTlsServerOptions& tls) {
  return std::make_unique<TlsQueueIo>(reactor, fd, tls);
}

}  // namespace rdmablk::transport::tcp
