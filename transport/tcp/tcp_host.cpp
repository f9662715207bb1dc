// NVMe/TCP, host side: one HostQueue over a non-blocking socket driven by plain syscalls from poll().
//
// Why not io_uring here: a host queue is polled by its owner thread (bench job, CLI, ublk queue) that
// has no reactor; sendmsg/readv on a non-blocking socket batch just as well (one sendmsg carries every
// queued PDU, one readv pulls up to 64 KiB of PDUs or steers C2HData straight into the caller's buffer),
// and ::poll() is the wait when there is nothing to do.
//
// TLS (HostQueueOptions::tls): the handshake runs in connect_tcp_host_queue() before ICReq, reading record
// by record when kTLS may follow; with kTLS the queue is the plain one on the same fd, else HostTls below
// stands in for sendmsg / readv (userspace records: a send's iovecs gathered into records, a receive's
// iovecs filled from decrypted records).
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
#include "transport/tcp/pdu_receiver.h"
#include "transport/tcp/tcp_io.h"
#include "transport/tcp/tcp_tls.h"

namespace rdmablk::transport {

namespace p = rdmablk::protocol;
namespace pt = rdmablk::protocol::tcp;

namespace tcp {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint16_t kNone = 0xFFFF;

enum class HTx : uint8_t { none, capsule, h2c };

struct HostSlot {
  HostCommand* cmd = nullptr;
  bool active = false;
  bool in_capsule = false;
  bool in_txq = false;
  bool digest_error = false;
  HTx tx = HTx::none;
  uint16_t tx_next = kNone;
  uint16_t ttag = 0;
  uint32_t c2h_received = 0;  // next expected C2HData offset
  uint32_t h2c_solicited = 0;  // bytes asked for by R2Ts so far (end of the last R2T)
  uint32_t tx_offset = 0;     // next H2CData byte to serialize
  uint32_t tx_end = 0;        // end of the current R2T window
  // Send accounting: the stream position (TcpHostQueue::tx_queued_) just past the last byte of this
  // command's data put in the send batch. Until the socket has taken that much (tx_sent_), iovecs still
  // point into the caller's buffer, so the command must not complete.
  uint64_t tx_data_end = 0;
  bool response_deferred = false;  // its CQE arrived while its data was still being sent
  p::Cqe deferred_cqe{};
};

// Wait for `events` on fd until `deadline`. Returns revents, 0 on timeout, -errno on failure.
// Waits for `events` on `fd` (or POLLIN on `wake_fd` when >= 0) until `deadline`. Returns fd's revents,
// 0 on timeout or wake-up, -errno on failure.
int wait_fd(int fd, short events, Clock::time_point deadline, int wake_fd = -1) noexcept {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left < 0) left = 0;
    pollfd pfds[2] = {{fd, events, 0}, {wake_fd, POLLIN, 0}};
    int rc = ::poll(pfds, wake_fd >= 0 ? 2 : 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (rc > 0) return pfds[0].revents;
    if (rc == 0) return 0;
    if (errno != EINTR) return -errno;
  }
}

// Userspace TLS records on a non-blocking socket: what sendmsg / readv / send are on a plain queue.
struct HostTls {
  static constexpr std::size_t kCipher = 64 * 1024;
  static constexpr std::size_t kMaxPlainPerSend = 256 * 1024;

  std::unique_ptr<security::TlsSession> session;
  std::vector<uint8_t> rx = std::vector<uint8_t>(kCipher);
  std::vector<uint8_t> tx = std::vector<uint8_t>(kCipher);
  std::size_t tx_off = 0;
  std::size_t tx_len = 0;
  std::vector<uint8_t> stage = std::vector<uint8_t>(kTlsRecordPlain);
  std::string where;  // the controller's address, for logs

  bool out_pending() const noexcept { return tx_off != tx_len || session->pending_output() != 0; }

  // Sends queued ciphertext without blocking: 1 all out, 0 the socket is full, -errno.
  int flush(int fd) noexcept {
    for (;;) {
      if (tx_off == tx_len) {
        tx_off = 0;
        tx_len = session->read_output(tx);
        if (tx_len == 0) return 1;
      }
      ssize_t n = ::send(fd, tx.data() + tx_off, tx_len - tx_off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        return -errno;
      }
      tx_off += static_cast<std::size_t>(n);
    }
  }

  // sendmsg: plaintext bytes taken (encrypted; the ciphertext goes out now or with later flushes), or -1
  // with errno (EAGAIN while earlier ciphertext waits for the socket).
  ssize_t send(int fd, const iovec* iov, unsigned n) noexcept {
    if (out_pending()) {
      const int f = flush(fd);
      if (f < 0) return errno = -f, -1;
      if (f == 0) return errno = EAGAIN, -1;
    }
    const long taken = encrypt_iov(*session, iov, n, kMaxPlainPerSend, stage);
    if (taken < 0) return errno = EPROTO, -1;
    const int f = flush(fd);
    if (f < 0) return errno = -f, -1;
    return taken;
  }

  // readv: plaintext bytes, 0 at the end of the stream, -1 with errno (EAGAIN: nothing more for now).
  ssize_t recv(int fd, const iovec* iov, unsigned n) noexcept {
    for (;;) {
      const TlsFill f = decrypt_iov(*session, iov, n);
      if (out_pending()) (void)flush(fd);  // a KeyUpdate answered
      if (f.status == security::TlsIo::failed) {
        spdlog::warn("nvme-tcp host {}: TLS: {}", where, session->error().message);
        return errno = EPROTO, -1;
      }
      if (f.bytes != 0) return static_cast<ssize_t>(f.bytes);
      if (f.status == security::TlsIo::closed) return 0;
      ssize_t r = ::recv(fd, rx.data(), rx.size(), MSG_DONTWAIT);
      if (r <= 0) {
        if (r < 0 && errno == EINTR) continue;
        return r;
      }
      if (!session->feed(std::span<const uint8_t>(rx.data(), static_cast<std::size_t>(r)))) {
        return errno = ENOMEM, -1;
      }
    }
  }

  // A TermReq right before the connection goes: best effort.
  void send_now(int fd, std::span<const uint8_t> bytes) noexcept {
    if (out_pending() || session->encrypt(bytes) != security::TlsIo::ok) return;
    (void)flush(fd);
  }
};

class TcpHostQueue final : public HostQueueBase<TcpHostQueue, HostSlot>, private PduReceiver::Handler {
  friend class HostQueueBase<TcpHostQueue, HostSlot>;

 public:
  TcpHostQueue(int fd, const HostQueueOptions& opts, const pt::TcpSession& session, std::unique_ptr<HostTls> tls,
               bool ktls)
      : HostQueueBase(opts), fd_(fd), session_(session), rx_(64 * 1024, pt::Receiver::host, session_),
        tls_(std::move(tls)), ktls_(ktls) {
    const std::size_t n = std::max<uint16_t>(opts.entries, 1);
    init_slots(n, n);
  }
  ~TcpHostQueue() override { close(); }

  p::Status submit(HostCommand& cmd) noexcept override {
    if (error_ != 0 || fd_ < 0) return p::status::transient_transport_error;
    if (free_cids_.empty()) return p::status::command_interrupted;  // queue full: retry after a completion
    const std::size_t len = cmd.data.size();
    if (len > UINT32_MAX) return p::status::data_sgl_length_invalid;
    const uint16_t cid = prepare_slot(cmd);
    HostSlot& s = activate(cid, cmd);
    if (fits_in_capsule(cmd)) {
      cmd.sqe.hdr.dptr = p::make_in_capsule_sgl(0, static_cast<uint32_t>(len));
      s.in_capsule = true;
    } else {
      cmd.sqe.hdr.dptr = p::make_transport_sgl(moves_data(cmd) ? static_cast<uint32_t>(len) : 0);
    }
    queue_tx(cid, HTx::capsule);
    return p::status::success;
  }

  uint16_t entries() const noexcept override { return static_cast<uint16_t>(slots_.size()); }
  // MAXH2CDATA only sizes H2CData PDUs (the queue splits writes into them): no transfer limit on TCP.
  uint32_t max_transfer() const noexcept override { return UINT32_MAX; }
  void set_in_capsule_limit(uint32_t bytes) noexcept override { in_capsule_limit_ = bytes; }

  void close() noexcept override {
    if (fd_ < 0) return;
    fail_all(p::status::transient_transport_error);
    ::close(fd_);
    fd_ = -1;
  }

 private:
  // ---- HostQueueBase hooks --------------------------------------------------------------------------

  static constexpr bool kDriveWhileProgress = true;  // a received R2T queues data to send
  bool io_open() const noexcept { return fd_ >= 0; }

  bool drive() noexcept {
    bool progress = flush_tx();
    if (error_ == 0) progress |= receive();
    return progress;
  }

  int wait(Clock::time_point deadline) noexcept {
    short events = POLLIN;
    if (!tx_.empty() || txq_head_ != kNone || (tls_ && tls_->out_pending())) events |= POLLOUT;
    const int rc = wait_fd(fd_, events, deadline, wake_fd_);
    if (rc < 0) fail(-rc, "poll");
    return rc;  // 0: timeout, or the wake fd: the owner has other work
  }

  // ---- send -----------------------------------------------------------------------------------------

  void queue_tx(uint16_t cid, HTx kind) noexcept {
    HostSlot& s = slots_[cid];
    s.tx = kind;
    if (s.in_txq) return;
    s.in_txq = true;
    s.tx_next = kNone;
    if (txq_tail_ == kNone) {
      txq_head_ = cid;
    } else {
      slots_[txq_tail_].tx_next = cid;
    }
    txq_tail_ = cid;
  }

  void tx_add(const void* d, std::size_t len) noexcept {
    tx_.add(d, len);
    tx_queued_ += len;
  }

  template <typename Pdu>
  void put_header(const Pdu& pdu) noexcept {
    std::size_t n =
        pt::write_pdu_header(pdu, std::span<uint8_t>(tx_.arena.data() + tx_.used, TxBatch::kArena - tx_.used));
    tx_add(tx_.alloc(n), n);
  }

  // The caller's data (the command in slot `cid`) and its digest.
  void put_data(uint16_t cid, const uint8_t* d, uint32_t len) noexcept {
    tx_add(d, len);
    slots_[cid].tx_data_end = tx_queued_;
    if (session_.ddgst) {
      uint8_t* dg = tx_.alloc(pt::kDigestLen);
      pt::store_digest(dg, p::crc32c(d, len));
      tx_add(dg, pt::kDigestLen);
    }
  }

  bool serialize(uint16_t cid) noexcept {
    HostSlot& s = slots_[cid];
    HostCommand& cmd = *s.cmd;
    if (s.tx == HTx::capsule) {
      if (!tx_.room(3, TxBatch::kMaxPduOverhead)) return false;
      const uint32_t icd = s.in_capsule ? static_cast<uint32_t>(cmd.data.size()) : 0;
      put_header(pt::build_capsule_cmd(p::load<pt::SqeBytes>(&cmd.sqe), icd, session_));
      if (icd != 0) put_data(cid, cmd.data.data(), icd);
    } else if (s.tx == HTx::h2c) {
      const uint32_t max = std::max<uint32_t>(session_.maxh2cdata, pt::kMinMaxH2CData);
      while (s.tx_offset < s.tx_end) {
        if (!tx_.room(3, TxBatch::kMaxPduOverhead)) return false;
        const uint32_t chunk = std::min(max, s.tx_end - s.tx_offset);
        const bool last = s.tx_offset + chunk == s.tx_end;
        put_header(pt::build_h2c_data(cid, s.ttag, s.tx_offset, chunk, last, session_));
        put_data(cid, cmd.data.data() + s.tx_offset, chunk);
        s.tx_offset += chunk;
      }
    }
    s.tx = HTx::none;
    return true;
  }

  // Send what is queued, batch after batch, until done or the socket is full. True if bytes went out.
  bool flush_tx() noexcept {
    bool progress = false;
    if (tls_ && tls_->out_pending()) {
      const int f = tls_->flush(fd_);
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
        while (txq_head_ != kNone) {
          const uint16_t cid = txq_head_;
          if (!serialize(cid)) break;
          HostSlot& s = slots_[cid];
          txq_head_ = s.tx_next;
          if (txq_head_ == kNone) txq_tail_ = kNone;
          s.in_txq = false;
        }
        if (tx_.empty()) return progress;
      }
      msghdr m{};
      m.msg_iov = tx_.pending();
      m.msg_iovlen = tx_.pending_count();
      ssize_t n = tls_ ? tls_->send(fd_, m.msg_iov, static_cast<unsigned>(m.msg_iovlen))
                       : ::sendmsg(fd_, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
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

  // Commands answered while their data was still being sent complete once the socket has taken it.
  void finish_deferred() noexcept {
    for (std::size_t i = 0; i < slots_.size() && deferred_ != 0; ++i) {
      HostSlot& s = slots_[i];
      if (s.active && s.response_deferred && s.tx_data_end <= tx_sent_) {
        complete(static_cast<uint16_t>(i), caller_cqe(s, s.deferred_cqe));
      }
    }
  }

  // ---- receive --------------------------------------------------------------------------------------

  bool receive() noexcept {
    bool progress = false;
    for (int rounds = 0; rounds < 16 && error_ == 0; ++rounds) {
      iovec iov[2];
      unsigned cnt = rx_.prepare(iov);
      if (cnt == 0) break;  // stopped after an error
      ssize_t n = tls_    ? tls_->recv(fd_, iov, cnt)
                  : ktls_ ? ktls_recv_logged(iov, cnt)
                          : ::readv(fd_, iov, static_cast<int>(cnt));
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

  void process_rx() noexcept { rx_.process(*this); }

  ssize_t ktls_recv_logged(const iovec* iov, unsigned cnt) noexcept {
    std::string why;
    const ssize_t n = ktls_recv(fd_, iov, cnt, why);
    if (n < 0 && errno == EPROTO) spdlog::warn("nvme-tcp host {}: kernel TLS: {}", to_uri(opts_.address), why);
    return n;
  }

  // ---- PduReceiver::Handler -------------------------------------------------------------------------

  void on_pdu(PduReceiver& /*rx*/) noexcept override {
    rx_cid_ = kNone;
    on_header();
  }

  void on_pdu_data(PduReceiver& /*rx*/, bool digest_ok) noexcept override {
    if (!digest_ok) {
      // Like the Linux host: not fatal, the command fails with a data transfer error.
      if (rx_cid_ != kNone) slots_[rx_cid_].digest_error = true;
      spdlog::warn("nvme-tcp host {}: data digest error (cid {})", to_uri(opts_.address), rx_cid_);
    }
    data_done();
  }

  void on_pdu_error(const pt::PduError& e, std::span<const uint8_t> offending) noexcept override {
    protocol_error(e, offending.data(), offending.size());
  }

  // A command still waiting for its response (a deferred one has had it).
  HostSlot* active_slot(uint16_t cid) noexcept {
    if (cid >= slots_.size() || !slots_[cid].active || slots_[cid].response_deferred) return nullptr;
    return &slots_[cid];
  }

  void on_header() noexcept {
    switch (rx_.pdu().type) {
      case pt::PduType::capsule_resp: {
        const auto cqe = p::load<p::Cqe>(rx_.header().data() + offsetof(pt::CapsuleRespPdu, cqe));
        const uint16_t cid = cqe.cid.get();
        if (active_slot(cid) == nullptr) {
          protocol_error(pt::PduError{offsetof(pt::CapsuleRespPdu, cqe) + offsetof(p::Cqe, cid),
                                      "CapsuleResp for a command not outstanding", pt::Fes::invalid_header_field},
                         rx_.header().data(), rx_.header().size());
          return;
        }
        finish(cid, cqe);
        return;
      }
      case pt::PduType::c2h_data: {
        const auto h = p::load<pt::C2HDataHdr>(rx_.header().data());
        const uint16_t cid = h.cccid.get();
        HostSlot* s = active_slot(cid);
        if (s == nullptr || s->cmd->direction != DataDirection::controller_to_host) {
          protocol_error(pt::PduError{offsetof(pt::C2HDataHdr, cccid), "C2HData for no read command",
                                      pt::Fes::invalid_header_field},
                         rx_.header().data(), rx_.header().size());
          return;
        }
        auto range = pt::check_data_range(h.datao.get(), h.datal.get(), s->c2h_received,
                                          static_cast<uint32_t>(s->cmd->data.size()));
        if (!range) {
          protocol_error(range.error(), rx_.header().data(), rx_.header().size());
          return;
        }
        rx_cid_ = cid;
        rx_.data_to(s->cmd->data.data() + h.datao.get());
        return;
      }
      case pt::PduType::r2t: {
        const auto r = p::load<pt::R2tPdu>(rx_.header().data());
        const uint16_t cid = r.cccid.get();
        HostSlot* s = active_slot(cid);
        if (s == nullptr || s->cmd->direction != DataDirection::host_to_controller || s->in_capsule ||
            s->tx_offset != s->tx_end || s->in_txq) {
          protocol_error(pt::PduError{offsetof(pt::R2tPdu, cccid), "R2T for no write waiting for one",
                                      pt::Fes::invalid_header_field},
                         rx_.header().data(), rx_.header().size());
          return;
        }
        auto range = pt::check_data_range(r.r2to.get(), r.r2tl.get(), s->h2c_solicited,
                                          static_cast<uint32_t>(s->cmd->data.size()));
        if (!range) {
          protocol_error(range.error(), rx_.header().data(), rx_.header().size());
          return;
        }
        s->ttag = r.ttag.get();
        s->tx_offset = r.r2to.get();
        s->tx_end = r.r2to.get() + r.r2tl.get();
        s->h2c_solicited = s->tx_end;
        queue_tx(cid, HTx::h2c);
        return;
      }
      case pt::PduType::c2h_term_req: {
        const auto t = p::load<pt::TermReqHdr>(rx_.header().data());
        spdlog::warn("nvme-tcp host {}: controller terminated the connection: {} (FES {:#x}, FEI {})",
                     to_uri(opts_.address), pt::fes_name(static_cast<pt::Fes>(t.fes.get())), t.fes.get(),
                     t.fei.get());
        fail(ECONNRESET, nullptr);
        return;
      }
      default:
        protocol_error(pt::PduError{0, "unexpected PDU", pt::Fes::pdu_sequence_error}, rx_.header().data(),
                       rx_.header().size());
        return;
    }
  }

  void data_done() noexcept {
    if (rx_.pdu().type != pt::PduType::c2h_data || rx_cid_ == kNone) return;
    HostSlot* s = active_slot(rx_cid_);
    if (s == nullptr) return;
    s->c2h_received += rx_.pdu().data_len;
    if ((rx_.pdu().flags & pt::kFlagSuccess) != 0) {
      // SUCCESS: no CapsuleResp follows; synthesize a successful CQE.
      p::Cqe cqe = p::make_cqe(rx_cid_, opts_.qid, 0, p::status::success);
      finish(rx_cid_, cqe);
    }
  }

  // The response to a command arrived. A controller may answer a write (typically with an error) before
  // the host has sent all of its data: bytes of the caller's buffer may still sit in the send batch, so the
  // completion (after which the caller may free or reuse the buffer) waits until the socket has taken them.
  void finish(uint16_t cid, p::Cqe cqe) noexcept {
    HostSlot& s = slots_[cid];
    if (s.in_txq) unlink_tx(cid);  // nothing more of it gets serialized
    if (s.tx_data_end > tx_sent_) {
      s.response_deferred = true;
      s.deferred_cqe = cqe;
      ++deferred_;
      return;
    }
    complete(cid, caller_cqe(s, cqe));
  }

  void release_slot(uint16_t cid, HostSlot& s) noexcept {
    if (s.response_deferred) {
      s.response_deferred = false;
      --deferred_;
    }
    if (s.in_txq) unlink_tx(cid);
  }

  // What the caller sees: a data digest error turns a success into a Data Transfer Error.
  static p::Cqe caller_cqe(const HostSlot& s, p::Cqe cqe) noexcept {
    if (s.digest_error && cqe.get_status().ok()) cqe.set_status(p::status::data_transfer_error);
    return cqe;
  }

  void unlink_tx(uint16_t cid) noexcept {
    uint16_t prev = kNone;
    for (uint16_t c = txq_head_; c != kNone; prev = c, c = slots_[c].tx_next) {
      if (c != cid) continue;
      if (prev == kNone) {
        txq_head_ = slots_[c].tx_next;
      } else {
        slots_[prev].tx_next = slots_[c].tx_next;
      }
      if (txq_tail_ == c) txq_tail_ = prev;
      break;
    }
    slots_[cid].in_txq = false;
  }

  // ---- errors ---------------------------------------------------------------------------------------

  bool protocol_error(const pt::PduError& e, const uint8_t* hdr, std::size_t len) noexcept {
    spdlog::warn("nvme-tcp host {}: protocol error from controller: {} ({}, offset {})", to_uri(opts_.address),
                 e.what, pt::fes_name(e.fes), e.offset);
    std::array<uint8_t, pt::kTermReqMaxPlen> term{};
    std::size_t n = pt::write_term_req(term, pt::PduType::h2c_term_req, e, std::span<const uint8_t>(hdr, len));
    if (n != 0 && tx_.empty()) {
      if (tls_) {
        tls_->send_now(fd_, std::span<const uint8_t>(term.data(), n));
      } else {
        ssize_t rc = ::send(fd_, term.data(), n, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)rc;
      }
    }
    fail(EPROTO, nullptr);
    return false;
  }

  void fail(int err, const char* what) noexcept {
    if (!set_error(err)) return;
    rx_.stop();
    if (what != nullptr) {
      spdlog::warn("nvme-tcp host {}: {}: {}", to_uri(opts_.address), what, std::strerror(error_));
    }
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
    fail_all(p::status::transient_transport_error);
  }

  // Every outstanding command completes once with `st` (retryable: another path or a reconnect may work).
  void fail_all(p::Status st) noexcept {
    if (error_ == 0) error_ = ENOTCONN;
    tx_.reset();  // nothing more is sent: no iovec points into a caller's buffer any more
    tx_sent_ = tx_queued_;
    txq_head_ = txq_tail_ = kNone;
    for (HostSlot& s : slots_) s.in_txq = false;
    fail_outstanding(st);
  }

  // A command the controller already answered keeps that answer.
  p::Cqe failure_cqe(uint16_t cid, p::Status st) const noexcept {
    const HostSlot& s = slots_[cid];
    return caller_cqe(s, s.response_deferred ? s.deferred_cqe : p::make_cqe(cid, opts_.qid, 0, st));
  }

  int fd_;
  pt::TcpSession session_;

  TxBatch tx_;
  uint64_t tx_queued_ = 0;  // bytes ever put in the send batch
  uint64_t tx_sent_ = 0;    // bytes the socket took (sendmsg)
  unsigned deferred_ = 0;   // slots with response_deferred
  uint16_t txq_head_ = kNone;
  uint16_t txq_tail_ = kNone;

  PduReceiver rx_;
  uint16_t rx_cid_ = kNone;
  std::unique_ptr<HostTls> tls_;  // userspace TLS records; null: plain TCP or kTLS
  bool ktls_ = false;             // records in the kernel: receive through ktls_recv (control records)
};

// Read or write exactly `len` bytes with a deadline on a non-blocking socket.
// With `tls` (userspace records) the bytes are plaintext inside TLS.
Result<void> io_exact(int fd, uint8_t* buf, std::size_t len, bool writing, Clock::time_point deadline,
                      const char* what, HostTls* tls = nullptr, bool ktls = false) {
  std::size_t done = 0;
  while (done < len || (writing && tls != nullptr && tls->out_pending())) {
    ssize_t n;
    if (ktls && !writing) {
      const iovec v{buf + done, len - done};
      std::string why;
      n = ktls_recv(fd, &v, 1, why);
      if (n < 0 && errno == EPROTO) return make_error(std::string(what) + ": kernel TLS: " + why, EPROTO);
    } else if (tls == nullptr) {
      n = writing ? ::send(fd, buf + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT)
                  : ::recv(fd, buf + done, len - done, MSG_DONTWAIT);
    } else if (writing) {
      const iovec v{buf + done, len - done};
      if (done == len) {
        const int f = tls->flush(fd);
        n = f < 0 ? (errno = -f, -1) : f == 0 ? (errno = EAGAIN, -1) : 0;
        if (f == 1) break;
      } else {
        n = tls->send(fd, &v, 1);
      }
    } else {
      const iovec v{buf + done, len - done};
      n = tls->recv(fd, &v, 1);
    }
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0 && !writing) return make_error(std::string(what) + ": connection closed by the controller", ECONNRESET);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      int e = errno;
      return make_error(std::string(what) + ": " + std::strerror(e), e);
    }
    int rc = wait_fd(fd, writing ? POLLOUT : POLLIN, deadline);
    if (rc == 0) return make_error(std::string(what) + ": timed out", ETIMEDOUT);
    if (rc < 0) return make_error(std::string(what) + ": " + std::strerror(-rc), -rc);
  }
  return {};
}


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
  for (;;) {
    const security::TlsStep step = session->handshake();
    // Our flight (or the alert after a failure) goes out first.
    while (session->pending_output() != 0) {
      const std::size_t n = session->read_output(buf);
      if (auto r = io_exact(fd, buf.data(), n, true, deadline, "sending the TLS handshake"); !r) {
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
                                   Clock::time_point deadline, HostTls* tls, bool ktls) {
  pt::IcReqParams params;
  params.hdgst = opts.header_digest;
  params.ddgst = opts.data_digest;
  params.maxr2t = 0;  // one R2T outstanding per command
  const pt::IcReqPdu icreq = pt::build_icreq(params);
  std::array<uint8_t, pt::kIcPduLen> buf{};
  p::store(buf.data(), icreq);
  if (auto r = io_exact(fd, buf.data(), buf.size(), true, deadline, "sending ICReq", tls); !r) {
    return tl::unexpected(r.error());
  }
  if (auto r = io_exact(fd, buf.data(), pt::kCommonHeaderLen, false, deadline, "receiving ICResp", tls, ktls); !r) {
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
  if (auto r = io_exact(fd, buf.data() + pt::kCommonHeaderLen, pt::kIcPduLen - pt::kCommonHeaderLen, false,
                        deadline, "receiving ICResp", tls, ktls);
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
  std::unique_ptr<HostTls> tls;
  bool ktls = false;
  if (opts.tls) {
    auto session = tls_handshake(fd, *opts.tls, where, deadline);
    if (!session) return fail(session.error());
    ktls = (*session)->ktls_enabled();
    if (!ktls) {
      try {
        tls = std::make_unique<HostTls>();
      } catch (...) {
        return fail(Error{"TLS with " + where + ": out of memory", ENOMEM});
      }
      tls->session = std::move(*session);
      tls->where = where;
    }
  }

  auto session = exchange_ic(fd, opts, where, deadline, tls.get(), ktls);
  if (!session) return fail(session.error());
  return std::unique_ptr<HostQueue>(new TcpHostQueue(fd, opts, *session, std::move(tls), ktls));
}

}  // namespace tcp
}  // namespace rdmablk::transport
