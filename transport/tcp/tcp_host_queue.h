// The NVMe/TCP host queue (tcp_host.h): its protocol state machine over HostQueueBase (host_queue_base.h):
// capsules, R2T-solicited H2CData and their send batch, C2HData straight into the caller's buffer,
// CapsuleResp, deferred completions (a response that overtook the command's data) and digest errors. How
// the bytes reach the socket is tcp_host_io.h (plain, kTLS or userspace TLS records); the waits, protocol errors'
// C2HTermReq and the connection sequence are tcp_host.cpp's, the one file that includes this header.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <spdlog/spdlog.h>

#include "protocol/crc32c.h"
#include "protocol/sgl.h"
#include "protocol/tcp_pdu.h"
#include "transport/host_queue_base.h"
#include "transport/slot_fifo.h"
#include "transport/tcp/pdu_receiver.h"
#include "transport/tcp/tcp_host_io.h"
#include "transport/tcp/tcp_io.h"

namespace rdmablk::transport::tcp::detail {

namespace p = rdmablk::protocol;
namespace pt = rdmablk::protocol::tcp;

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

class TcpHostQueue final : public HostQueueBase<TcpHostQueue, HostSlot>, private PduReceiver::Handler {
  friend class HostQueueBase<TcpHostQueue, HostSlot>;

 public:
  TcpHostQueue(int fd, const HostQueueOptions& opts, const pt::TcpSession& session, std::unique_ptr<TcpHostIo> io);
  ~TcpHostQueue() override;

  p::Status submit(HostCommand& cmd) noexcept override {
    if (error_ != 0 || fd_ < 0) return p::status::transient_transport_error;
    if (free_cids_.empty()) return p::status::command_interrupted;  // queue full: retry after a completion
    const std::size_t len = cmd.data.size();
    if (len > UINT32_MAX) return p::status::data_sgl_length_invalid;
    enqueue(prepare_slot(cmd), cmd);
    return p::status::success;
  }

  // Both capsules go into the send FIFO one after the other, so they leave in that order with no other
  // capsule between them (H2CData PDUs, which are no submission entries, may follow either later).
  p::Status submit_fused(HostCommand& first, HostCommand& second) noexcept override {
    if (error_ != 0 || fd_ < 0) return p::status::transient_transport_error;
    if (free_cids_.size() < 2) return p::status::command_interrupted;
    if (first.data.size() > UINT32_MAX || second.data.size() > UINT32_MAX) return p::status::data_sgl_length_invalid;
    const auto [c1, c2] = prepare_pair(first, second);
    enqueue(c1, first);
    enqueue(c2, second);
    return p::status::success;
  }

  uint16_t entries() const noexcept override { return static_cast<uint16_t>(slots_.size()); }
  // MAXH2CDATA only sizes H2CData PDUs (the queue splits writes into them): no transfer limit on TCP.
  uint32_t max_transfer() const noexcept override { return UINT32_MAX; }
  void set_in_capsule_limit(uint32_t bytes) noexcept override { in_capsule_limit_ = bytes; }

  void close() noexcept override;

 private:
  // ---- HostQueueBase hooks --------------------------------------------------------------------------

  static constexpr bool kDriveWhileProgress = true;  // a received R2T queues data to send
  bool io_open() const noexcept { return fd_ >= 0; }

  bool drive() noexcept;

  int wait(Clock::time_point deadline) noexcept;

  // ---- send -----------------------------------------------------------------------------------------

  // The command in prepare_slot()'s slot `cid`: its data descriptor, then its capsule at the FIFO's end.
  void enqueue(uint16_t cid, HostCommand& cmd) noexcept {
    HostSlot& s = activate(cid, cmd);
    const auto len = static_cast<uint32_t>(cmd.data.size());
    if (fits_in_capsule(cmd)) {
      cmd.sqe.hdr.dptr = p::make_in_capsule_sgl(0, len);
      s.in_capsule = true;
    } else {
      cmd.sqe.hdr.dptr = p::make_transport_sgl(moves_data(cmd) ? len : 0);
    }
    queue_tx(cid, HTx::capsule);
  }

  void queue_tx(uint16_t cid, HTx kind) noexcept {
    HostSlot& s = slots_[cid];
    s.tx = kind;
    if (s.in_txq) return;
    s.in_txq = true;
    txq_.push_back(slots_, cid);
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
  bool flush_tx() noexcept;

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

  bool receive() noexcept;

  void process_rx() noexcept { rx_.process(*this); }


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

  // A fault in the PDU header just received, which the Termination Request carries as the offending part.
  void header_error(const pt::PduError& e) noexcept { protocol_error(e, rx_.header().data(), rx_.header().size()); }

  // The data a C2HData carries or an R2T asks for starts at `expected_offset` and fits the command's buffer.
  bool data_range_ok(uint32_t offset, uint32_t length, uint32_t expected_offset, const HostSlot& s) noexcept {
    auto range = pt::check_data_range(offset, length, expected_offset, static_cast<uint32_t>(s.cmd->data.size()));
    if (!range) header_error(range.error());
    return static_cast<bool>(range);
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
          header_error(pt::PduError{offsetof(pt::CapsuleRespPdu, cqe) + offsetof(p::Cqe, cid),
                                    "CapsuleResp for a command not outstanding", pt::Fes::invalid_header_field});
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
          header_error(pt::PduError{offsetof(pt::C2HDataHdr, cccid), "C2HData for no read command",
                                    pt::Fes::invalid_header_field});
          return;
        }
        if (!data_range_ok(h.datao.get(), h.datal.get(), s->c2h_received, *s)) return;
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
          header_error(pt::PduError{offsetof(pt::R2tPdu, cccid), "R2T for no write waiting for one",
                                    pt::Fes::invalid_header_field});
          return;
        }
        if (!data_range_ok(r.r2to.get(), r.r2tl.get(), s->h2c_solicited, *s)) return;
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
        header_error(pt::PduError{0, "unexpected PDU", pt::Fes::pdu_sequence_error});
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
    txq_.remove(slots_, cid);
    slots_[cid].in_txq = false;
  }

  // ---- errors ---------------------------------------------------------------------------------------

  bool protocol_error(const pt::PduError& e, const uint8_t* hdr, std::size_t len) noexcept;

  void fail(int err, const char* what) noexcept;

  // Every outstanding command completes once with `st` (retryable: another path or a reconnect may work).
  void fail_all(p::Status st) noexcept {
    if (error_ == 0) error_ = ENOTCONN;
    tx_.reset();  // nothing more is sent: no iovec points into a caller's buffer any more
    tx_sent_ = tx_queued_;
    txq_ = {};
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
  SlotFifo<&HostSlot::tx_next> txq_;  // slots with a capsule or H2CData to serialize, in order

  PduReceiver rx_;
  uint16_t rx_cid_ = kNone;
  std::unique_ptr<TcpHostIo> io_;  // plain, kTLS or userspace TLS records: the socket's bytes
};

}  // namespace rdmablk::transport::tcp::detail
