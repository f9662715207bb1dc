// NVMe/TCP, controller side: the per-connection state machine (the TargetQueue the core sees), without a
// socket. Split as RDMA is (rdma_queue.h): everything the binding decides (PDU sequencing, in-capsule data,
// R2T windows, C2HData + CapsuleResp serialization, send batching, teardown order) sits here and is driven
// through TcpQueueIo, which is io_uring on the reactor in tcp_queue_io.h (plain, or TLS below the queue)
// and a fake in the unit tests.
//
// Data path (no allocation, no locks): the request lifecycle of TargetQueueBase (slots = 2 x queue depth, as
// nvmet-tcp: a slot whose CapsuleResp is on the wire but not yet reported sent must not block the host's next
// command with the same CID); one PduReceiver (many PDUs per recv; long payloads received in place); one
// gather batch with at most one send in flight, carrying every PDU that became ready meanwhile (responses of
// many commands coalesced into one send). Data lands in and leaves from the reactor BufferPool's buffers.
//
// Decisions:
//   - C2HData SUCCESS (TcpTargetOptions::c2h_success): a read that completed with an all-zero result has its
//     last C2HData PDU flagged SUCCESS and no CapsuleResp, one PDU less per read, when the host disabled
//     SQ flow control at Connect (as nvmet-tcp does: SQHD, which only a CapsuleResp carries, is then not
//     needed). `always` also does it for hosts that kept SQ flow control, as SPDK's target does by
//     default; SPDK's and Linux's hosts complete on it either way, but the spec ties it to SQFC off.
//   - R2Ts: at most MAXR2T + 1 outstanding per command (the host's ICReq; Linux and SPDK hosts ask for 1),
//     each at most MAXH2CDATA bytes; the next R2T of a command goes out as soon as a window is filled.
//   - A data digest error is fatal to the connection, like nvmet-tcp and SPDK: C2HTermReq with FES 3 (the
//     only digest FES the spec defines; SPDK sends the same), FEI 0.
//   - Protocol violations: C2HTermReq (FES/FEI from the validator) after the batch in flight, then the
//     socket is shut down; the close sequence of TargetQueueBase follows.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "protocol/defaults.h"
#include "protocol/tcp_pdu.h"
#include "transport/buffer_pool.h"
#include "transport/slot_fifo.h"
#include "transport/tcp/c2h_success.h"
#include "transport/target_queue_base.h"
#include "transport/tcp/pdu_receiver.h"
#include "transport/tcp/tcp_io.h"
#include "transport/tcp/tcp_tls.h"

namespace rdmablk::transport::tcp {

struct TcpTargetOptions {
  uint32_t maxh2cdata = 128 * 1024;        // ICResp MAXH2CDATA; >= 4096 and a multiple of 4 (Linux host checks)
  uint32_t max_c2h_data = 128 * 1024;      // data bytes per C2HData PDU
  uint32_t admin_in_capsule = protocol::defaults::kAdminInCapsule;  // in-capsule data accepted on the admin queue
  uint32_t io_in_capsule = protocol::defaults::kTcpIoInCapsule;  // ... on I/O queues (IOCCSZ = (64 + this) / 16)
  uint16_t max_queue_depth = 128;          // commands the host may have outstanding per connection
  uint32_t max_data_transfer = 1024 * 1024;  // longest data SGL accepted (MDTS); longer -> SGL length invalid
  uint32_t rx_buffer = 64 * 1024;          // receive staging bytes per connection
  uint64_t max_buffer_bytes = 0;           // pool buffer bytes one connection may hold (in-capsule data
                                           // aside); 0 = no limit
  TcpTlsServerOptions tls;                 // TLS 1.3 before ICReq (tcp_tls.h); policy none: plain only
  C2hSuccess c2h_success = C2hSuccess::sq_flow_disabled;
};

// The socket as the queue sees it (plaintext: TLS, when there is any, is below it). At most one recv and
// one send are in flight; their results come back through TcpTargetQueue::on_recv_done / on_send_done, on
// the queue's thread, never from inside the call.
class TcpQueueIo {
 public:
  virtual void recv(const iovec* iov, unsigned n) noexcept = 0;
  virtual void send(const iovec* iov, unsigned n) noexcept = 0;
  // Best effort, now, without waiting: a TermReq right before the socket is shut down.
  virtual void send_now(std::span<const uint8_t> bytes) noexcept = 0;
  virtual void shutdown() noexcept = 0;  // both directions: a recv or send in flight then completes
  // on_close_timer() after `delay` unless cancelled. One timer at a time.
  virtual void start_close_timer(std::chrono::milliseconds delay) noexcept = 0;
  virtual void cancel_close_timer() noexcept = 0;
  // The queue is finished: free it and the socket (later, not from inside this call).
  virtual void destroy() noexcept = 0;

 protected:
  ~TcpQueueIo() = default;
};

struct TcpSlot : RequestSlot {
  enum class Tx : uint8_t { none, r2t, resp };
  static constexpr uint16_t kNone = 0xFFFF;
  Tx tx = Tx::none;          // what it has to send (it is on the send queue)
  bool cid_active = false;   // holds its CID in the in-flight bitmap
  bool in_txq = false;
  uint16_t tx_next = kNone;  // send FIFO link
  uint32_t r2t_sent = 0;        // end of the last R2T window sent: [0, r2t_sent) has been asked for
  uint32_t data_received = 0;   // H2CData bytes received
  uint32_t tx_offset = 0;       // C2H data bytes serialized so far
};

class TcpTargetQueue final : public TargetQueueBase<TcpTargetQueue, TcpSlot>, private PduReceiver::Handler {
 public:
  TcpTargetQueue(TcpQueueIo& io, BufferPool& pool, TargetQueueHandler& handler, const TcpTargetOptions& opts,
                 TransportAddress local, std::string peer);
  ~TcpTargetQueue() override;
  TcpTargetQueue(const TcpTargetQueue&) = delete;
  TcpTargetQueue& operator=(const TcpTargetQueue&) = delete;

  // The connection is up: tell the core, start receiving.
  void start() noexcept;
  // Results of the recv / send submitted through TcpQueueIo (bytes or -errno).
  void on_recv_done(int res) noexcept;
  void on_send_done(int res) noexcept;
  void on_close_timer() noexcept;

  TransportType transport_type() const noexcept override { return TransportType::tcp; }

  // Introspection (tests).
  const protocol::tcp::TcpSession& session() const noexcept { return session_; }

  // The TLS session the connection runs under (active false: plain NVMe/TCP). Set by the connection once
  // the handshake is done, before any PDU is received; the core may check the Connect's host NQN against
  // tls().hostnqn.
  const TlsConnectionInfo& tls() const noexcept { return tls_; }
  void set_tls(TlsConnectionInfo info) noexcept { tls_ = std::move(info); }
  std::optional<TlsIdentity> tls_identity() const override {
    if (!tls_.active) return std::nullopt;
    return TlsIdentity{tls_.identity, tls_.hostnqn, tls_.subnqn, tls_.ktls};
  }

 private:
  friend class TargetQueueBase<TcpTargetQueue, TcpSlot>;
  using Slot = TcpSlot;
  using Tx = TcpSlot::Tx;
  static constexpr uint16_t kNone = TcpSlot::kNone;

  // ---- TargetQueueBase hooks ----
  void start_fetch(Slot& s) noexcept;
  void start_send(Slot& s) noexcept;
  void buffer_ready(Slot& s) noexcept;
  void on_recycle(Slot& s) noexcept;
  static bool buffer_in_use(const Slot&) noexcept { return false; }  // a send in flight holds no slot's buffer
  bool io_idle() const noexcept { return shut_ && !recv_inflight_ && !send_inflight_; }
  void destroy_queue() noexcept;
  void begin_close() noexcept;
  static const char* log_name() noexcept { return "nvme-tcp"; }

  // ---- PduReceiver::Handler ----
  void on_pdu(PduReceiver& rx) noexcept override;
  void on_pdu_data(PduReceiver& rx, bool digest_ok) noexcept override;
  void on_pdu_error(const protocol::tcp::PduError& e, std::span<const uint8_t> offending) noexcept override;

  bool cid_busy(uint16_t cid) const noexcept { return (cid_bits_[cid >> 6] >> (cid & 63) & 1) != 0; }
  void set_cid(uint16_t cid) noexcept { cid_bits_[cid >> 6] |= uint64_t{1} << (cid & 63); }
  void clear_cid(uint16_t cid) noexcept { cid_bits_[cid >> 6] &= ~(uint64_t{1} << (cid & 63)); }
  BindingLimits limits_for(const protocol::Sqe& sqe) const noexcept;
  bool awaiting_host_data() const noexcept;

  void arm_recv() noexcept;
  void process_rx() noexcept;
  void on_icreq() noexcept;
  void on_term_req() noexcept;
  void on_capsule() noexcept;
  void on_h2c_data() noexcept;
  void data_done() noexcept;
  void reject(Slot& s, protocol::Status st) noexcept;
  void send_r2ts(Slot& s) noexcept;
  // Bytes one R2T asks for: windows are aligned on it from offset 0.
  uint32_t r2t_window() const noexcept {
    return std::max<uint32_t>(session_.maxh2cdata, protocol::tcp::kMinMaxH2CData);
  }

  void queue_tx(Slot& s, Tx kind) noexcept;
  template <typename Pdu>
  void put_header(const Pdu& pdu) noexcept;
  bool response_folds_into_data(const protocol::Cqe& cqe) const noexcept;
  bool serialize(Slot& s) noexcept;
  void kick_tx() noexcept;
  void submit_send() noexcept;

  void fatal(const protocol::tcp::PduError& e, std::span<const uint8_t> offending) noexcept;
  void finish_closing_io() noexcept;
  void shutdown_socket() noexcept;

  TcpQueueIo& io_;
  TcpTargetOptions opts_;
  protocol::tcp::TcpSession session_{};
  bool shut_ = false;
  bool close_timer_armed_ = false;
  std::vector<uint64_t> cid_bits_;

  // Receive.
  PduReceiver rx_;
  bool recv_inflight_ = false;
  bool in_rx_ = false;
  iovec rx_iov_[2]{};
  Slot* rx_slot_ = nullptr;  // the command whose data the current PDU carries

  // Send.
  TxBatch tx_;
  bool send_inflight_ = false;
  SlotFifo<&TcpSlot::tx_next> txq_;  // slots with a PDU to send (in_txq)
  std::array<uint16_t, TxBatch::kMaxIov> tx_done_{};  // slots whose CapsuleResp is in the batch
  unsigned tx_done_count_ = 0;
  bool icresp_pending_ = false;
  protocol::tcp::IcRespPdu icresp_{};
  bool term_pending_ = false;
  std::array<uint8_t, protocol::tcp::kTermReqMaxPlen> term_buf_{};
  std::size_t term_len_ = 0;

  TlsConnectionInfo tls_;
};

}  // namespace rdmablk::transport::tcp
