#include "transport/tcp/tcp_target_queue.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "protocol/command.h"
#include "protocol/crc32c.h"
#include "protocol/fabrics.h"
#include "transport/log_limit.h"

namespace rdmablk::transport::tcp {

namespace p = rdmablk::protocol;
namespace pt = rdmablk::protocol::tcp;

namespace {
constexpr auto kCloseGrace = std::chrono::milliseconds(1000);
}  // namespace

TcpTargetQueue::TcpTargetQueue(TcpQueueIo& io, BufferPool& pool, TargetQueueHandler& handler,
                               const TcpTargetOptions& opts, TransportAddress local, std::string peer)
    : TargetQueueBase(pool, handler, std::size_t{std::max<uint16_t>(opts.max_queue_depth, 1)} * 2, std::move(local),
                      std::move(peer)),
      io_(io),
      opts_(opts),
      rx_(opts.rx_buffer, pt::Receiver::controller, session_) {
  cid_bits_.assign(65536 / 64, 0);
  set_buffer_limit(opts.max_buffer_bytes);
}

TcpTargetQueue::~TcpTargetQueue() = default;

void TcpTargetQueue::start() noexcept {
  announce();
  arm_recv();
  maybe_finish();
}

// ---- receive ------------------------------------------------------------------------------------------

void TcpTargetQueue::arm_recv() noexcept {
  if (recv_inflight_ || state_ != State::live) return;
  const unsigned n = rx_.prepare(rx_iov_);
  if (n == 0) return;  // paused until a buffer is free (buffer_ready() re-arms)
  recv_inflight_ = true;
  io_.recv(rx_iov_, n);
}

void TcpTargetQueue::on_recv_done(int res) noexcept {
  recv_inflight_ = false;
  if (state_ != State::live) {
    maybe_finish();
    return;
  }
  if (res == -EAGAIN || res == -EINTR || res == -ENOBUFS) {
    arm_recv();
    return;
  }
  if (res <= 0) {
    if (res == 0) {
      // Mid-transfer: inside a PDU, or owing write data the core asked for. Commands parked in the core
      // (the Asynchronous Event Request every Linux host leaves outstanding) are not a transfer.
      const bool mid_pdu = !rx_.at_pdu_boundary() || awaiting_host_data();
      if (mid_pdu && peer_error_log_allowed()) {
        spdlog::warn("nvme-tcp {}: peer closed the connection mid-transfer", peer_);
      } else {
        spdlog::debug("nvme-tcp {}: peer closed the connection", peer_);
      }
    } else if (peer_error_log_allowed()) {
      spdlog::warn("nvme-tcp {}: receive failed: {}", peer_, std::strerror(-res));
    }
    begin_close();
    return;
  }
  rx_.commit(static_cast<std::size_t>(res));
  process_rx();
  arm_recv();
  maybe_finish();
}

bool TcpTargetQueue::awaiting_host_data() const noexcept {
  for (const auto& s : slots_) {
    if (s.stage == RequestStage::receiving || s.stage == RequestStage::fetching) return true;
  }
  return false;
}

void TcpTargetQueue::process_rx() noexcept {
  if (in_rx_) return;
  in_rx_ = true;
  if (state_ == State::live) rx_.process(*this);
  in_rx_ = false;
}

void TcpTargetQueue::on_pdu_error(const pt::PduError& e, std::span<const uint8_t> offending) noexcept {
  fatal(e, offending);
}

// PDUs without data are handled here; for data PDUs the handler says where the data goes (rx_.data_to: a
// request buffer; nothing: dropped) or pauses the receiver until a buffer is free.
void TcpTargetQueue::on_pdu(PduReceiver& /*rx*/) noexcept {
  rx_slot_ = nullptr;
  switch (rx_.pdu().type) {
    case pt::PduType::ic_req: on_icreq(); return;
    case pt::PduType::h2c_term_req: on_term_req(); return;
    case pt::PduType::capsule_cmd: on_capsule(); return;
    case pt::PduType::h2c_data: on_h2c_data(); return;
    default:
      // The validator only lets controller-bound types through; anything else is a sequence error.
      fatal(pt::PduError{0, "unexpected PDU", pt::Fes::pdu_sequence_error}, rx_.header());
      return;
  }
}

void TcpTargetQueue::on_pdu_data(PduReceiver& /*rx*/, bool digest_ok) noexcept {
  if (!digest_ok) {
    // Fatal, like nvmet-tcp and SPDK (FES 3: the only digest FES the spec defines).
    fatal(pt::PduError{rx_.pdu().data_offset + rx_.pdu().data_len, "data digest mismatch",
                       pt::Fes::header_digest_error},
          rx_.header());
    return;
  }
  data_done();
}

// All data (and its digest) of the current PDU is in.
void TcpTargetQueue::data_done() noexcept {
  Slot* s = rx_slot_;
  rx_slot_ = nullptr;
  if (s == nullptr) return;
  if (rx_.pdu().type == pt::PduType::capsule_cmd) {
    if (s->stage == RequestStage::receiving) dispatch(*s);
    return;
  }
  // H2CData
  if (s->stage != RequestStage::fetching) return;
  s->data_received += rx_.pdu().data_len;
  if (s->data_received >= s->req.data_length) {
    s->stage = RequestStage::core;
    handler_.on_data_ready(s->req, p::status::success);
  } else {
    send_r2ts(*s);
  }
}

void TcpTargetQueue::on_icreq() noexcept {
  const auto icreq = p::load<pt::IcReqPdu>(rx_.header().data());
  session_ = pt::controller_session(icreq, 0, opts_.maxh2cdata);
  icresp_ = pt::build_icresp(session_);
  icresp_pending_ = true;
  kick_tx();
}

void TcpTargetQueue::on_term_req() noexcept {
  const auto t = p::load<pt::TermReqHdr>(rx_.header().data());
  if (peer_error_log_allowed()) {
    spdlog::warn("nvme-tcp {}: host terminated the connection: {} (FES {:#x}, FEI {})", peer_,
                 pt::fes_name(static_cast<pt::Fes>(t.fes.get())), t.fes.get(), t.fei.get());
  }
  rx_.stop();
  begin_close();
}

BindingLimits TcpTargetQueue::limits_for(const p::Sqe& sqe) const noexcept {
  BindingLimits lim;
  lim.accept = p::SglAccept::tcp;
  lim.max_transfer = opts_.max_data_transfer;
  lim.capsule_declares_data = true;
  bool admin = qid_ == 0;
  if (!qid_known_) {
    // Before Connect completes only the Connect's own QID tells admin from I/O.
    admin = !(sqe.hdr.opcode == p::kFabricsOpcode &&
              static_cast<p::FabricsType>(sqe.hdr.nsid.get() & 0xFF) == p::FabricsType::connect &&
              p::as<p::ConnectCommand>(sqe).qid.get() != 0);
  }
  lim.in_capsule = admin ? opts_.admin_in_capsule : opts_.io_in_capsule;
  return lim;
}

void TcpTargetQueue::on_capsule() noexcept {
  Slot* sp = take_slot(p::load<p::Sqe>(rx_.header().data() + offsetof(pt::CapsuleCmdPdu, sqe)));
  if (sp == nullptr) {
    return fatal(pt::PduError{0, "more commands outstanding than the queue depth", pt::Fes::pdu_sequence_error},
                 rx_.header());
  }
  Slot& s = *sp;  // tx is none: on_recycle() reset it
  const uint32_t icd_len = rx_.pdu().data_len;
  if (cid_busy(s.cid)) return reject(s, p::status::command_id_conflict);
  set_cid(s.cid);
  s.cid_active = true;

  DataPlan plan;
  if (const p::Status st = plan_data_transfer(s.req.sqe, icd_len, limits_for(s.req.sqe), plan); !st.ok()) {
    return reject(s, st);
  }
  if (!plan.moves_data()) return dispatch(s);
  const bool in_capsule = plan.kind == p::SglKind::in_capsule;
  s.req.direction = plan.direction;
  s.req.data_length = plan.length;
  s.req.data_in_capsule = in_capsule;
  if (!in_capsule) {
    if (attach_or_wait(s, plan.length)) dispatch(s);
    return;
  }
  // The whole capsule data lands in the buffer; the command's data starts at the SGL offset in it.
  rx_slot_ = &s;
  if (!attach_or_wait(s, std::max(icd_len, plan.length), plan.icd_offset, /*limited=*/false)) {
    rx_.pause();  // the data must land somewhere: stop reading until a buffer comes
    return;
  }
  s.stage = RequestStage::receiving;
  rx_.data_to(s.buf.data);
}

// A command the core never sees: drop its in-capsule data, answer with `st`.
void TcpTargetQueue::reject(Slot& s, p::Status st) noexcept {
  rx_.data_to(nullptr);
  rx_slot_ = nullptr;
  early_complete(s, st);
}

void TcpTargetQueue::buffer_ready(Slot& s) noexcept {
  if (!s.req.data_in_capsule) {
    dispatch(s);
    return;
  }
  // Resume receiving the in-capsule data into the new buffer.
  s.stage = RequestStage::receiving;
  rx_slot_ = &s;
  rx_.resume(s.buf.data);
  if (!in_rx_) {
    process_rx();
    arm_recv();
    maybe_finish();
  }
}

void TcpTargetQueue::on_h2c_data() noexcept {
  const auto h = p::load<pt::H2CDataHdr>(rx_.header().data());
  const uint16_t ttag = h.ttag.get();
  const auto hdr = rx_.header();
  if (ttag >= slots_.size() || slots_[ttag].stage != RequestStage::fetching) {
    return fatal(pt::PduError{offsetof(pt::H2CDataHdr, ttag), "H2CData TTAG names no transfer",
                              pt::Fes::invalid_header_field},
                 hdr);
  }
  Slot& s = slots_[ttag];
  if (h.cccid.get() != s.cid) {
    return fatal(pt::PduError{offsetof(pt::H2CDataHdr, cccid), "H2CData CCCID does not match the TTAG",
                              pt::Fes::invalid_header_field},
                 hdr);
  }
  auto range = pt::check_data_range(h.datao.get(), h.datal.get(), s.data_received, s.r2t_sent);
  if (!range) return fatal(range.error(), hdr);
  // LAST_PDU ends an R2T's data: only where a window ends (a host that says so earlier would leave the
  // command waiting for data it will never send).
  const uint32_t end = h.datao.get() + h.datal.get();
  const uint32_t window = r2t_window();
  const bool window_end = end == s.req.data_length || end % window == 0;
  if ((h.ch.flags & pt::kFlagLastPdu) != 0 && !window_end) {
    return fatal(pt::PduError{offsetof(pt::H2CDataHdr, ch) + offsetof(pt::CommonHeader, flags),
                              "H2CData LAST_PDU before the end of the R2T's data", pt::Fes::invalid_header_field},
                 hdr);
  }
  rx_slot_ = &s;
  rx_.data_to(s.req.data + h.datao.get());
}

// ---- TargetQueueBase hooks ----------------------------------------------------------------------------

void TcpTargetQueue::start_fetch(Slot& s) noexcept {
  s.data_received = 0;
  s.r2t_sent = 0;
  s.tx_offset = 0;
  send_r2ts(s);
}

// Ask for the next windows of host data: up to MAXR2T + 1 R2Ts outstanding, each MAXH2CDATA bytes at most.
void TcpTargetQueue::send_r2ts(Slot& s) noexcept {
  const uint32_t window = r2t_window();
  const uint32_t len = s.req.data_length;
  auto windows = [window](uint32_t bytes) { return (bytes + window - 1) / window; };
  const uint32_t done = s.data_received / window;  // windows completely received
  const uint32_t max_outstanding = session_.maxr2t + 1;
  bool more = false;
  while (s.r2t_sent < len && windows(s.r2t_sent) - done < max_outstanding) {
    s.r2t_sent += std::min(window, len - s.r2t_sent);
    more = true;
  }
  if (more) queue_tx(s, Tx::r2t);
}

void TcpTargetQueue::start_send(Slot& s) noexcept {
  s.tx_offset = 0;
  queue_tx(s, Tx::resp);
}

void TcpTargetQueue::on_recycle(Slot& s) noexcept {
  if (s.cid_active) {
    clear_cid(s.cid);
    s.cid_active = false;
  }
  s.tx = Tx::none;
}

// ---- send ---------------------------------------------------------------------------------------------

void TcpTargetQueue::queue_tx(Slot& s, Tx kind) noexcept {
  s.tx = kind;
  if (!s.in_txq) {
    s.in_txq = true;
    txq_.push_back(slots_, s.req.tag);
  }
  kick_tx();
}

template <typename Pdu>
void TcpTargetQueue::put_header(const Pdu& pdu) noexcept {
  const std::size_t n =
      pt::write_pdu_header(pdu, std::span<uint8_t>(tx_.arena.data() + tx_.used, TxBatch::kArena - tx_.used));
  if (n != 0) tx_.add(tx_.alloc(n), n);
}

// Whether a read's completion may ride on its last C2HData PDU (SUCCESS) instead of a CapsuleResp: it
// succeeded with nothing else to say (status field, DW0 and DW1 zero: what the host synthesizes) and the
// options allow it.
bool TcpTargetQueue::response_folds_into_data(const p::Cqe& cqe) const noexcept {
  if (opts_.c2h_success == C2hSuccess::off) return false;
  if (opts_.c2h_success == C2hSuccess::sq_flow_disabled && !sq_flow_disabled_) return false;
  return cqe.get_status() == p::Status{} && cqe.dw0.get() == 0 && cqe.dw1.get() == 0;
}

// Serialize what `s` has to send into the batch. False when the batch is full (s keeps its place).
bool TcpTargetQueue::serialize(Slot& s) noexcept {
  if (s.tx == Tx::r2t) {
    const uint32_t window = r2t_window();
    while (s.tx_offset < s.r2t_sent) {
      if (!tx_.room(1, TxBatch::kMaxPduOverhead)) return false;
      const uint32_t chunk = std::min(window, s.r2t_sent - s.tx_offset);
      put_header(pt::build_r2t(s.cid, s.req.tag, s.tx_offset, chunk, session_));
      s.tx_offset += chunk;
    }
    s.tx = Tx::none;
    return true;
  }
  if (s.tx != Tx::resp) return true;
  // Only with a C2HData PDU to carry it: a zero-length read still gets its CapsuleResp.
  const bool fold = s.with_data && s.req.data_length != 0 && response_folds_into_data(s.req.cqe);
  if (s.with_data) {
    const uint32_t len = s.req.data_length;
    const uint32_t max_chunk = std::max<uint32_t>(opts_.max_c2h_data, 4096);
    while (s.tx_offset < len) {
      if (!tx_.room(3, TxBatch::kMaxPduOverhead)) return false;
      const uint32_t chunk = std::min(max_chunk, len - s.tx_offset);
      const bool last = s.tx_offset + chunk == len;
      put_header(pt::build_c2h_data(s.cid, s.tx_offset, chunk, last, last && fold, session_));
      const uint8_t* d = s.req.data + s.tx_offset;
      tx_.add(d, chunk);
      if (session_.ddgst) {
        uint8_t* dg = tx_.alloc(pt::kDigestLen);
        pt::store_digest(dg, p::crc32c(d, chunk));
        tx_.add(dg, pt::kDigestLen);
      }
      s.tx_offset += chunk;
    }
  }
  if (!fold) {
    if (!tx_.room(1, TxBatch::kMaxPduOverhead)) return false;
    put_header(pt::build_capsule_resp(p::load<pt::CqeBytes>(&s.req.cqe), session_));
  }
  s.tx = Tx::none;
  tx_done_[tx_done_count_++] = s.req.tag;
  // The host may reuse the CID as soon as it sees this CapsuleResp, possibly before our send completion
  // is reaped: free the CID now, the slot (and its buffer, which the batch points into) when the bytes
  // are out.
  if (s.cid_active) {
    clear_cid(s.cid);
    s.cid_active = false;
  }
  return true;
}

// Put everything ready into one batch and send it (one send in flight: what becomes ready meanwhile goes
// into the next batch, so responses of many commands share one send).
void TcpTargetQueue::kick_tx() noexcept {
  if (send_inflight_ || state_ != State::live) return;
  tx_.reset();
  tx_done_count_ = 0;
  if (icresp_pending_) {
    put_header(icresp_);
    icresp_pending_ = false;
  }
  while (!txq_.empty()) {
    Slot& s = slots_[txq_.front()];
    if (!serialize(s)) break;
    txq_.pop_front(slots_);
    s.in_txq = false;
  }
  if (!tx_.empty()) submit_send();
}

void TcpTargetQueue::submit_send() noexcept {
  send_inflight_ = true;
  io_.send(tx_.pending(), tx_.pending_count());
}

void TcpTargetQueue::on_send_done(int res) noexcept {
  send_inflight_ = false;
  if (res == -EAGAIN || res == -EINTR) {
    if (state_ == State::live) {
      submit_send();
      return;
    }
    res = -EPIPE;
  }
  if (res < 0) {
    if (state_ == State::live) {
      if (peer_error_log_allowed()) spdlog::warn("nvme-tcp {}: send failed: {}", peer_, std::strerror(-res));
      begin_close();
    }
    tx_.reset();
    tx_done_count_ = 0;
    term_pending_ = false;  // the socket is gone: no TermReq either
    shutdown_socket();
    maybe_finish();
    return;
  }
  if (!tx_.consume(static_cast<std::size_t>(res)) && res > 0) {
    submit_send();  // short send: resume where it stopped (also while closing: PDU boundaries)
    return;
  }
  // Batch out: recycle the requests it finished (copy first: recycling may start a new batch).
  std::array<uint16_t, TxBatch::kMaxIov> done;
  const unsigned n = tx_done_count_;
  std::copy_n(tx_done_.begin(), n, done.begin());
  tx_done_count_ = 0;
  tx_.reset();
  for (unsigned i = 0; i < n; ++i) {
    Slot& s = slots_[done[i]];
    if (s.stage == RequestStage::sending && s.tx == Tx::none && !s.in_txq) recycle(s);
  }
  if (state_ == State::closing) {
    finish_closing_io();
    maybe_finish();
    return;
  }
  kick_tx();
}

// ---- teardown -----------------------------------------------------------------------------------------

void TcpTargetQueue::fatal(const pt::PduError& e, std::span<const uint8_t> offending) noexcept {
  rx_.stop();
  if (state_ != State::live) return;
  if (peer_error_log_allowed()) {
    spdlog::warn("nvme-tcp {}: protocol error, terminating connection: {} ({}, FEI {})", peer_, e.what,
                 pt::fes_name(e.fes), e.fei());
  }
  term_len_ = pt::write_term_req(term_buf_, pt::PduType::c2h_term_req, e, offending);
  term_pending_ = term_len_ != 0;
  begin_close();
}

void TcpTargetQueue::begin_close() noexcept {
  if (state_ != State::live) return;
  state_ = State::closing;
  rx_.stop();
  // Unsent work is dropped (requests in it are recycled when the socket is done).
  while (!txq_.empty()) {
    Slot& s = slots_[txq_.pop_front(slots_)];
    s.in_txq = false;
    s.tx = Tx::none;
  }
  icresp_pending_ = false;
  close_requests();
  if (!send_inflight_) {
    finish_closing_io();
  } else {
    // A batch is on its way: the TermReq goes after it, unless the peer stops reading.
    close_timer_armed_ = true;
    io_.start_close_timer(kCloseGrace);
  }
  maybe_finish();
}

void TcpTargetQueue::on_close_timer() noexcept {
  close_timer_armed_ = false;
  term_pending_ = false;
  shutdown_socket();
  maybe_finish();
}

// No send in flight any more: send the TermReq (small, best effort) and shut the socket down.
void TcpTargetQueue::finish_closing_io() noexcept {
  if (term_pending_) {
    term_pending_ = false;
    io_.send_now(std::span<const uint8_t>(term_buf_.data(), term_len_));
  }
  shutdown_socket();
}

void TcpTargetQueue::shutdown_socket() noexcept {
  if (shut_) return;
  shut_ = true;
  io_.shutdown();
}

void TcpTargetQueue::destroy_queue() noexcept {
  if (close_timer_armed_) {
    close_timer_armed_ = false;
    io_.cancel_close_timer();
  }
  io_.destroy();
}

}  // namespace rdmablk::transport::tcp
