// NVMe/TCP, host side: one HostQueue over a non-blocking socket driven by plain syscalls from poll(). The
// queue's protocol state machine is tcp_host_queue.h; here are its socket I/O, TLS and the connection.
//
// Why not io_uring here: a host queue is polled by its owner thread (bench job, CLI, ublk queue) that
// has no reactor; sendmsg/readv on a non-blocking socket batch just as well (one sendmsg carries every
// queued PDU, one readv pulls up to 64 KiB of PDUs or steers C2HData straight into the caller's buffer),
// and ::poll() is the wait when there is nothing to do.
//
// TLS (HostQueueOptions::tls): the handshake runs in connect_tcp_host_queue() before ICReq, reading record
// by record when kTLS may follow; afterwards the queue's bytes go through a TcpHostIo (tcp_host_io.h) that
// is plain, kTLS or userspace records, so nothing here branches on TLS.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <span>
#include <vector>

#include <spdlog/spdlog.h>

#include "protocol/crc32c.h"
#include "protocol/sgl.h"
#include "protocol/tcp_pdu.h"
#include "transport/host_queue.h"
#include "transport/host_queue_base.h"
#include "transport/tcp/tcp_host.h"
#include "transport/tcp/tcp_host_queue.h"
#include "transport/tcp/pdu_receiver.h"
#include "transport/tcp/tcp_host_io.h"
#include "transport/tcp/tcp_io.h"
#include "transport/tcp/tcp_tls.h"

namespace rdmablk::transport {

namespace p = rdmablk::protocol;
namespace pt = rdmablk::protocol::tcp;

namespace tcp {

using Clock = std::chrono::steady_clock;

namespace detail {

// ---- TcpHostQueue: socket I/O and errors ---------------------------------------------------------

TcpHostQueue::TcpHostQueue(int fd, const HostQueueOptions& opts, const pt::TcpSession& session,
                           std::unique_ptr<TcpHostIo> io)
    : HostQueueBase(opts), fd_(fd), session_(session), rx_(64 * 1024, pt::Receiver::host, session_),
      io_(std::move(io)) {
  const std::size_t n = std::max<uint16_t>(opts.entries, 1);
  init_slots(n, n);
}

TcpHostQueue::~TcpHostQueue() { close(); }

void TcpHostQueue::close() noexcept {
  if (fd_ < 0) return;
  fail_all(p::status::transient_transport_error);
  ::close(fd_);
  fd_ = -1;
}

bool TcpHostQueue::drive() noexcept {
  bool progress = flush_tx();
  if (error_ == 0) progress |= receive();
  return progress;
}

int TcpHostQueue::wait(Clock::time_point deadline) noexcept {
  short events = POLLIN;
  if (!tx_.empty() || !txq_.empty() || io_->out_pending()) events |= POLLOUT;
  const int rc = wait_fd(fd_, events, deadline, wake_fd_);
  if (rc < 0) fail(-rc, "poll");
  return rc;  // 0: timeout, or the wake fd: the owner has other work
}

bool TcpHostQueue::flush_tx() noexcept {
  bool progress = false;
  if (io_->out_pending()) {
    const int f = io_->flush(fd_);
    if (f < 0) {
      fail(-f, "send");
      return false;
    }
    if (f == 0) return false;
    progress = true;
  }
  for (;;) {
    if (tx_.empty()) {
      tx_.reset();
      while (!txq_.empty()) {
        const uint16_t cid = txq_.front();
        if (!serialize(cid)) break;
        txq_.pop_front(slots_);
        slots_[cid].in_txq = false;
      }
      if (tx_.empty()) return progress;
    }
    const ssize_t n = io_->send(fd_, tx_.pending(), static_cast<unsigned>(tx_.pending_count()));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return progress;
      fail(errno, "send");
      return progress;
    }
    progress = true;
    tx_sent_ += static_cast<uint64_t>(n);
    if (tx_.consume(static_cast<std::size_t>(n))) tx_.reset();
    if (deferred_ != 0) finish_deferred();
  }
}

bool TcpHostQueue::receive() noexcept {
  bool progress = false;
  for (int rounds = 0; rounds < 16 && error_ == 0; ++rounds) {
    iovec iov[2];
    unsigned cnt = rx_.prepare(iov);
    if (cnt == 0) break;  // stopped after an error
    const ssize_t n = io_->recv(fd_, iov, cnt);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      fail(errno, "receive");
      break;
    }
    if (n == 0) {
      fail(ECONNRESET, "controller closed the connection");
      break;
    }
    progress = true;
    rx_.commit(static_cast<std::size_t>(n));
    process_rx();
    if (static_cast<std::size_t>(n) < iov[0].iov_len + (cnt > 1 ? iov[1].iov_len : 0)) break;  // drained
  }
  return progress;
}

bool TcpHostQueue::protocol_error(const pt::PduError& e, const uint8_t* hdr, std::size_t len) noexcept {
  spdlog::warn("nvme-tcp host {}: protocol error from controller: {} ({}, offset {})", to_uri(opts_.address),
               e.what, pt::fes_name(e.fes), e.offset);
  std::array<uint8_t, pt::kTermReqMaxPlen> term{};
  std::size_t n = pt::write_term_req(term, pt::PduType::h2c_term_req, e, std::span<const uint8_t>(hdr, len));
  if (n != 0 && tx_.empty()) io_->send_now(fd_, std::span<const uint8_t>(term.data(), n));
  fail(EPROTO, nullptr);
  return false;
}

void TcpHostQueue::fail(int err, const char* what) noexcept {
  if (!set_error(err)) return;
  rx_.stop();
  if (what != nullptr) {
    spdlog::warn("nvme-tcp host {}: {}: {}", to_uri(opts_.address), what, std::strerror(error_));
  }
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  fail_all(p::status::transient_transport_error);
}

}  // namespace detail

namespace {

using detail::TcpHostQueue;


// The TLS 1.3 handshake before ICReq. Returns the session established (kTLS enabled on fd when possible:
// then nothing more is needed from it) or why it failed, in words a user can act on.
Result<std::unique_ptr<security::TlsSession>> tls_handshake(int fd, const TcpTlsClientOptions& tls,
                                                            const std::string& where, Clock::time_point deadline) {
  auto failed = [&where](const std::string& why, int err) {
    return make_error("TLS handshake with " + where + " failed: " + why, err);
  };
  std::shared_ptr<const security::TlsContext> context = tls.context;
  if (!context) {
    auto c = security::TlsContext::client();
    if (!c) return failed(c.error().message, EINVAL);
    context = *c;
  }
  auto made = security::TlsSession::client(context, tls.config);
  if (!made) return failed(made.error().message, EINVAL);
  std::unique_ptr<security::TlsSession> session = std::move(*made);
  const bool ktls = tls.allow_ktls && security::probe_ktls().available;
  std::array<uint8_t, 16 * 1024 + 256> buf{};
  TcpHostIo& plain = plain_tcp_host_io();  // the handshake's flights are not inside TLS yet
  for (;;) {
    const security::TlsStep step = session->handshake();
    // Our flight (or the alert after a failure) goes out first.
    while (session->pending_output() != 0) {
      const std::size_t n = session->read_output(buf);
      if (auto r = io_exact(plain, fd, buf.data(), n, true, deadline, "sending the TLS handshake"); !r) {
        if (step == security::TlsStep::failed) break;
        return failed(r.error().message, r.error().errno_value);
      }
    }
    if (step == security::TlsStep::done) break;
    if (step == security::TlsStep::failed) {
      const security::TlsError& e = session->error();
      std::string why = std::string(security::to_string(e.kind)) + " (" + e.message + ")";
      if (e.kind == security::TlsFailure::protocol) why += "; does the controller speak TLS on this port?";
      return failed(why, e.kind == security::TlsFailure::wrong_psk || e.kind == security::TlsFailure::unknown_identity
                             ? EACCES
                             : EPROTO);
    }
    // Record by record when kTLS follows: nothing meant for the kernel may stay in the session.
    const std::size_t want = ktls ? std::min(buf.size(), session->next_read_size()) : buf.size();
    ssize_t n = ::recv(fd, buf.data(), want, MSG_DONTWAIT);
    if (n == 0) {
      return failed("the controller closed the connection (a plain NVMe/TCP port, or it refused our identity)",
                    ECONNRESET);
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return failed(std::strerror(errno), errno);
      const int rc = wait_fd(fd, POLLIN, deadline);
      if (rc == 0) return failed("timed out", ETIMEDOUT);
      if (rc < 0) return failed(std::strerror(-rc), -rc);
      continue;
    }
    if (!session->feed(std::span<const uint8_t>(buf.data(), static_cast<std::size_t>(n)))) {
      return failed("out of memory", ENOMEM);
    }
  }
  if (ktls) {
    auto r = session->enable_ktls(fd);
    if (!r && !session->handshake_done()) return failed(r.error().message, EPROTO);  // TX set, RX not
    if (!r) spdlog::debug("nvme-tcp host {}: kTLS not used ({}): userspace TLS records", where, r.error().message);
  }
  spdlog::info("nvme-tcp host {}: {}", where, describe(connection_info(*session)));
  return session;
}

// The TCP connection to the controller on a non-blocking socket, up to `deadline`.
Result<void> connect_socket(int fd, const SocketAddress& sa, const std::string& where, Clock::time_point deadline) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (::connect(fd, sa.get(), sa.len) == 0) return {};
  if (errno != EINPROGRESS) {
    int e = errno;
    return make_error("connect to " + where + ": " + std::strerror(e), e);
  }
  int rc = wait_fd(fd, POLLOUT, deadline);
  if (rc == 0) return make_error("connect to " + where + ": timed out", ETIMEDOUT);
  int err = 0;
  socklen_t len = sizeof(err);
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (rc < 0) err = -rc;
  if (err != 0) return make_error("connect to " + where + ": " + std::strerror(err), err);
  return {};
}

// Connection initialization: ICReq -> ICResp (inside TLS when `tls` or kTLS). The session it negotiated.
Result<pt::TcpSession> exchange_ic(int fd, const HostQueueOptions& opts, const std::string& where,
                                   Clock::time_point deadline, TcpHostIo& io) {
  pt::IcReqParams params;
  params.hdgst = opts.header_digest;
  params.ddgst = opts.data_digest;
  params.maxr2t = 0;  // one R2T outstanding per command
  const pt::IcReqPdu icreq = pt::build_icreq(params);
  std::array<uint8_t, pt::kIcPduLen> buf{};
  p::store(buf.data(), icreq);
  if (auto r = io_exact(io, fd, buf.data(), buf.size(), true, deadline, "sending ICReq"); !r) {
    return tl::unexpected(r.error());
  }
  if (auto r = io_exact(io, fd, buf.data(), pt::kCommonHeaderLen, false, deadline, "receiving ICResp"); !r) {
    Error e = r.error();
    // A listener that requires TLS closes a plain connection without a word (as nvmet does).
    if (!opts.tls && e.errno_value == ECONNRESET) e.message += " (does " + where + " require TLS?)";
    return tl::unexpected(std::move(e));
  }
  pt::TcpSession initial{};
  auto ch = pt::validate_common_header(buf.data(), pt::kCommonHeaderLen, initial, pt::Receiver::host);
  if (!ch) return make_error(std::string("bad ICResp from ") + where + ": " + ch.error().what, EPROTO);
  if (ch->type == pt::PduType::c2h_term_req) {
    return make_error("controller " + where + " refused the connection (C2HTermReq)", ECONNREFUSED);
  }
  if (auto r = io_exact(io, fd, buf.data() + pt::kCommonHeaderLen, pt::kIcPduLen - pt::kCommonHeaderLen, false,
                        deadline, "receiving ICResp");
      !r) {
    return tl::unexpected(r.error());
  }
  auto info = pt::validate_pdu_header(buf.data(), buf.size(), initial, pt::Receiver::host);
  if (!info || info->type != pt::PduType::ic_resp) {
    return make_error("bad ICResp from " + where + ": " + (info ? "not an ICResp" : info.error().what), EPROTO);
  }
  auto session = pt::host_session(icreq, p::load<pt::IcRespPdu>(buf.data()));
  if (!session) return make_error("bad ICResp from " + where + ": " + session.error().what, EPROTO);
  return *session;
}

}  // namespace

Result<std::unique_ptr<HostQueue>> connect_tcp_host_queue(const HostQueueOptions& opts) {
  const auto deadline = Clock::now() + opts.connect_timeout;
  const std::string where = to_uri(opts.address);
  auto sa = resolve_address(opts.address, false);
  if (!sa) return tl::unexpected(sa.error());
  int fd = ::socket(sa->storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return make_error("socket: " + std::string(std::strerror(errno)), errno);
  auto fail = [&](Error e) -> Result<std::unique_ptr<HostQueue>> {
    ::close(fd);
    return tl::unexpected(std::move(e));
  };
  if (auto r = connect_socket(fd, *sa, where, deadline); !r) return fail(r.error());

  // TLS first (TP 8011): ICReq/ICResp travel inside it.
  std::unique_ptr<security::TlsSession> tls;
  if (opts.tls) {
    auto session = tls_handshake(fd, *opts.tls, where, deadline);
    if (!session) return fail(session.error());
    tls = std::move(*session);
  }
  std::unique_ptr<TcpHostIo> io = make_tcp_host_io(std::move(tls), where);
  if (!io) return fail(Error{"connection to " + where + ": out of memory", ENOMEM});

  auto session = exchange_ic(fd, opts, where, deadline, *io);
  if (!session) return fail(session.error());
  return std::unique_ptr<HostQueue>(new TcpHostQueue(fd, opts, *session, std::move(io)));
}
}  // namespace tcp
}  // namespace rdmablk::transport
