// The three kinds of host socket I/O (tcp_host_io.h) and the blocking steps of the connection sequence.
#include "transport/tcp/tcp_host_io.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <spdlog/spdlog.h>

#include "security/tls_session.h"
#include "transport/tcp/tcp_tls.h"

namespace rdmablk::transport::tcp {

using Clock = std::chrono::steady_clock;

void TcpHostIo::send_now(int fd, std::span<const uint8_t> bytes) noexcept {
  const iovec v{const_cast<uint8_t*>(bytes.data()), bytes.size()};
  (void)send(fd, &v, 1);
}

namespace {

class PlainHostIo : public TcpHostIo {
 public:
  ssize_t send(int fd, const iovec* iov, unsigned n) noexcept override {
    msghdr m{};
    m.msg_iov = const_cast<iovec*>(iov);
    m.msg_iovlen = n;
    return ::sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  ssize_t recv(int fd, const iovec* iov, unsigned n) noexcept override { return ::readv(fd, iov, static_cast<int>(n)); }
};

// Records in the kernel: sends are plain; receives go through recvmsg to see (and refuse) control records.
class KtlsHostIo final : public PlainHostIo {
 public:
  KtlsHostIo(std::unique_ptr<security::TlsSession> session, std::string where)
      : session_(std::move(session)), where_(std::move(where)) {}
  ssize_t recv(int fd, const iovec* iov, unsigned n) noexcept override {
    const ssize_t got = ktls_recv(fd, iov, n, why_);
    if (got < 0 && errno == EPROTO) spdlog::warn("nvme-tcp host {}: kernel TLS: {}", where_, why_);
    return got;
  }
  std::string protocol_failure() const override { return "kernel TLS: " + why_; }

 private:
  std::unique_ptr<security::TlsSession> session_;  // kept for the connection's life (its keys are the kernel's)
  std::string where_;
  std::string why_;  // ktls_recv's reason for the last EPROTO
};

// Userspace TLS records.
class TlsRecordHostIo final : public TcpHostIo {
 public:
  static constexpr std::size_t kCipher = 64 * 1024;
  static constexpr std::size_t kMaxPlainPerSend = 256 * 1024;

  TlsRecordHostIo(std::unique_ptr<security::TlsSession> session, std::string where)
      : session_(std::move(session)), where_(std::move(where)) {}

  bool out_pending() const noexcept override { return tx_off_ != tx_len_ || session_->pending_output() != 0; }

  int flush(int fd) noexcept override {
    for (;;) {
      if (tx_off_ == tx_len_) {
        tx_off_ = 0;
        tx_len_ = session_->read_output(tx_);
        if (tx_len_ == 0) return 1;
      }
      const ssize_t n = ::send(fd, tx_.data() + tx_off_, tx_len_ - tx_off_, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        return -errno;
      }
      tx_off_ += static_cast<std::size_t>(n);
    }
  }

  // Plaintext taken is encrypted at once; its ciphertext goes out now or with later flushes. EAGAIN while
  // earlier ciphertext still waits for the socket.
  ssize_t send(int fd, const iovec* iov, unsigned n) noexcept override {
    if (out_pending()) {
      const int f = flush(fd);
      if (f < 0) return errno = -f, -1;
      if (f == 0) return errno = EAGAIN, -1;
    }
    const long taken = encrypt_iov(*session_, iov, n, kMaxPlainPerSend, stage_);
    if (taken < 0) return errno = EPROTO, -1;
    const int f = flush(fd);
    if (f < 0) return errno = -f, -1;
    return taken;
  }

  ssize_t recv(int fd, const iovec* iov, unsigned n) noexcept override {
    for (;;) {
      const TlsFill f = decrypt_iov(*session_, iov, n);
      if (out_pending()) (void)flush(fd);  // a KeyUpdate answered
      if (f.status == security::TlsIo::failed) {
        spdlog::warn("nvme-tcp host {}: TLS: {}", where_, session_->error().message);
        return errno = EPROTO, -1;
      }
      if (f.bytes != 0) return static_cast<ssize_t>(f.bytes);
      if (f.status == security::TlsIo::closed) return 0;
      const ssize_t r = ::recv(fd, rx_.data(), rx_.size(), MSG_DONTWAIT);
      if (r <= 0) {
        if (r < 0 && errno == EINTR) continue;
        return r;
      }
      if (!session_->feed(std::span<const uint8_t>(rx_.data(), static_cast<std::size_t>(r)))) {
        return errno = ENOMEM, -1;
      }
    }
  }

  void send_now(int fd, std::span<const uint8_t> bytes) noexcept override {
    if (out_pending() || session_->encrypt(bytes) != security::TlsIo::ok) return;
    (void)flush(fd);
  }

 private:
  std::unique_ptr<security::TlsSession> session_;
  std::string where_;
  std::vector<uint8_t> rx_ = std::vector<uint8_t>(kCipher);
  std::vector<uint8_t> tx_ = std::vector<uint8_t>(kCipher);
  std::size_t tx_off_ = 0;
  std::size_t tx_len_ = 0;
  std::vector<uint8_t> stage_ = std::vector<uint8_t>(kTlsRecordPlain);
};

}  // namespace

TcpHostIo& plain_tcp_host_io() noexcept {
  static PlainHostIo plain;
  return plain;
}

std::unique_ptr<TcpHostIo> make_tcp_host_io(std::unique_ptr<security::TlsSession> tls, std::string where) {
  try {
    if (!tls) return std::make_unique<PlainHostIo>();
    if (tls->ktls_enabled()) return std::make_unique<KtlsHostIo>(std::move(tls), std::move(where));
    return std::make_unique<TlsRecordHostIo>(std::move(tls), std::move(where));
  } catch (...) {
    return nullptr;
  }
}

int wait_fd(int fd, short events, Clock::time_point deadline, int wake_fd) noexcept {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left < 0) left = 0;
    pollfd pfds[2] = {{fd, events, 0}, {wake_fd, POLLIN, 0}};
    const int rc = ::poll(pfds, wake_fd >= 0 ? 2 : 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (rc > 0) return pfds[0].revents;
    if (rc == 0) return 0;
    if (errno != EINTR) return -errno;
  }
}

Result<void> io_exact(TcpHostIo& io, int fd, uint8_t* buf, std::size_t len, bool writing, Clock::time_point deadline,
                      const char* what) {
  std::size_t done = 0;
  for (;;) {
    ssize_t n;
    if (done < len) {
      const iovec v{buf + done, len - done};
      n = writing ? io.send(fd, &v, 1) : io.recv(fd, &v, 1);
    } else if (writing && io.out_pending()) {
      const int f = io.flush(fd);
      if (f == 1) break;
      n = f < 0 ? (errno = -f, -1) : (errno = EAGAIN, -1);
    } else {
      break;
    }
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0 && !writing) return make_error(std::string(what) + ": connection closed by the controller", ECONNRESET);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      const int e = errno;
      const std::string detail = e == EPROTO && !writing ? io.protocol_failure() : std::string();
      return make_error(std::string(what) + ": " + (detail.empty() ? std::strerror(e) : detail), e);
    }
    const int rc = wait_fd(fd, writing ? POLLOUT : POLLIN, deadline);
    if (rc == 0) return make_error(std::string(what) + ": timed out", ETIMEDOUT);
    if (rc < 0) return make_error(std::string(what) + ": " + std::strerror(-rc), -rc);
  }
  return {};
}

}  // namespace rdmablk::transport::tcp
