#include "transport/tcp/tcp_target.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <span>

#include <spdlog/spdlog.h>

#include "protocol/command.h"
#include "protocol/crc32c.h"
#include "protocol/fabrics.h"
#include "protocol/sgl.h"
#include "protocol/tcp_pdu.h"
#include "transport/log_limit.h"
#include "transport/tcp/pdu_receiver.h"
#include "transport/tcp/tcp_io.h"

namespace rdmablk::transport::tcp {

namespace p = rdmablk::protocol;
namespace pt = rdmablk::protocol::tcp;

class TcpTargetConnection;

namespace {

std::atomic<unsigned> g_live_connections{0};

constexpr uint16_t kNone = 0xFFFF;
constexpr auto kCloseGrace = std::chrono::milliseconds(1000);


enum class SlotState : uint8_t {
  free,
  wait_buffer,  // command parsed, waiting for a pool buffer
  rx_capsule,   // receiving its in-capsule data
  core,         // with the core (on_command called)
  r2t,          // core asked for data: R2T sent / H2CData arriving
  tx,           // complete() called: C2HData / CapsuleResp being sent
};

enum class TxKind : uint8_t { none, r2t, resp };

struct Slot {
  TargetRequest req;
  struct Waiter {
    BufferWaiter w;
    Slot* slot;
  } waiter{};
  TcpTargetConnection* conn = nullptr;
  Buffer buf{};
  SlotState state = SlotState::free;
  TxKind tx_kind = TxKind::none;
  bool cid_active = false;  // holds its CID in the in-flight bitmap
  bool in_txq = false;
  bool tx_with_data = false;
  uint16_t cid = 0;
  uint16_t tx_next = kNone;
  uint32_t icd_offset = 0;     // SGL offset into the in-capsule data
  uint32_t r2t_start = 0;      // current R2T window [r2t_start, r2t_end)
  uint32_t r2t_end = 0;
  uint32_t data_received = 0;  // next expected H2CData offset
  uint32_t tx_offset = 0;      // C2H data bytes serialized so far
};

}  // namespace

class TcpTargetConnection final : public TargetQueue, private PduReceiver::Handler {
 public:
  TcpTargetConnection(int fd, const ReactorSlot& where, TargetQueueHandler& handler, const TcpTargetOptions& opts)
      : reactor_(*where.reactor),
        pool_(*where.pool),
        handler_(handler),
        opts_(opts),
        fd_(fd),
        local_(local_address_of(fd)),
        peer_(peer_name_of(fd)),
        rx_(opts.rx_buffer, pt::Receiver::controller, session_) {
    const std::size_t nslots = std::size_t{std::max<uint16_t>(opts.max_queue_depth, 1)} * 2;
    slots_ = std::vector<Slot>(std::min<std::size_t>(nslots, kNone));
    free_slots_.reserve(slots_.size());
    for (std::size_t i = slots_.size(); i-- > 0;) {
      Slot& s = slots_[i];
      s.conn = this;
      s.req.queue = this;
      s.req.tag = static_cast<uint16_t>(i);
      s.waiter.slot = &s;
      s.waiter.w.fn = &TcpTargetConnection::on_buffer;
      free_slots_.push_back(static_cast<uint16_t>(i));
    }
    cid_bits_.assign(65536 / 64, 0);
    recv_op_ = ConnOp{IoOp{&TcpTargetConnection::on_recv_cqe}, this};
    send_op_ = ConnOp{IoOp{&TcpTargetConnection::on_send_cqe}, this};
    g_live_connections.fetch_add(1, std::memory_order_relaxed);
  }

  ~TcpTargetConnection() override {
    if (fd_ >= 0) ::close(fd_);
    g_live_connections.fetch_sub(1, std::memory_order_relaxed);
  }

  void start() noexcept {
    handler_.on_queue_created(*this);
    created_ = true;
    if (state_ == State::icreq) arm_recv();
    maybe_finish();
  }

  // ---- TargetQueue ----------------------------------------------------------------------------------

  void fetch_data(TargetRequest& req) noexcept override {
    Slot* s = slot_of(req);
    if (s == nullptr || s->state != SlotState::core) return;
    if (state_ != State::live) return;  // closing: the core releases it
    if (req.direction != DataDirection::host_to_controller || req.data_length == 0 || req.data_in_capsule) {
      handler_.on_data_ready(req, p::status::success);
      return;
    }
    s->state = SlotState::r2t;
    s->data_received = 0;
    start_r2t(*s);
  }

  void complete(TargetRequest& req, bool with_data) noexcept override {
    Slot* s = slot_of(req);
    if (s == nullptr || (s->state != SlotState::core && s->state != SlotState::r2t)) return;
    --core_held_;
    if (state_ != State::live) {
      recycle(*s);
      maybe_finish();
      return;
    }
    s->state = SlotState::tx;
    s->tx_with_data = with_data && req.direction == DataDirection::controller_to_host && req.data_length != 0 &&
                      req.data != nullptr;
    s->tx_offset = 0;
    fill_cqe_ids(*s);
    queue_tx(*s, TxKind::resp);
  }

  void release(TargetRequest& req) noexcept override {
    Slot* s = slot_of(req);
    if (s == nullptr || (s->state != SlotState::core && s->state != SlotState::r2t)) return;
    --core_held_;
    recycle(*s);
    maybe_finish();
  }

  void close(const char* reason) noexcept override {
    if (state_ == State::closing || state_ == State::closed) return;
    spdlog::info("nvme-tcp {}: closing connection: {}", peer_, reason != nullptr ? reason : "");
    begin_close();
  }

  void set_connected(uint16_t qid, uint16_t sq_entries) noexcept override {
    qid_ = qid;
    qid_known_ = true;
    sq_entries_ = sq_entries;
  }

  TransportType transport_type() const noexcept override { return TransportType::tcp; }
  const TransportAddress& local_address() const noexcept override { return local_; }
  const std::string& peer_name() const noexcept override { return peer_; }

 private:
  enum class State : uint8_t { icreq, live, closing, closed };

  // ---- helpers --------------------------------------------------------------------------------------

  Slot* slot_of(TargetRequest& req) noexcept {
    if (req.queue != this || req.tag >= slots_.size()) return nullptr;
    return &slots_[req.tag];
  }
  bool cid_busy(uint16_t cid) const noexcept { return (cid_bits_[cid >> 6] >> (cid & 63) & 1) != 0; }
  void set_cid(uint16_t cid) noexcept { cid_bits_[cid >> 6] |= uint64_t{1} << (cid & 63); }
  void clear_cid(uint16_t cid) noexcept { cid_bits_[cid >> 6] &= ~(uint64_t{1} << (cid & 63)); }

  uint32_t in_capsule_limit(const p::Sqe& sqe) const noexcept {
    if (qid_known_) return qid_ == 0 ? opts_.admin_in_capsule : opts_.io_in_capsule;
    // Before Connect completes only the Connect's own QID tells admin from I/O.
    if (sqe.hdr.opcode == p::kFabricsOpcode &&
        static_cast<p::FabricsType>(sqe.hdr.nsid.get() & 0xFF) == p::FabricsType::connect) {
      return p::as<p::ConnectCommand>(sqe).qid.get() == 0 ? opts_.admin_in_capsule : opts_.io_in_capsule;
    }
    return opts_.admin_in_capsule;
  }

  void fill_cqe_ids(Slot& s) noexcept {
    s.req.cqe.cid.set(s.cid);
    s.req.cqe.sqid.set(qid_);
    s.req.cqe.sqhd.set(sqhd_);
  }

  // ---- receive --------------------------------------------------------------------------------------

  void arm_recv() noexcept {
    if (recv_inflight_ || state_ == State::closing || state_ == State::closed) return;
    unsigned n = rx_.prepare(rx_iov_);
    if (n == 0) return;  // paused until a buffer is free (buffer_arrived() re-arms)
    rx_msg_ = msghdr{};
    rx_msg_.msg_iov = rx_iov_;
    rx_msg_.msg_iovlen = n;
    io_uring_sqe* sqe = reactor_.sqe_for(&recv_op_.op);
    io_uring_prep_recvmsg(sqe, fd_, &rx_msg_, 0);
    recv_inflight_ = true;
  }

  // An IoOp with a way back to its connection (standard layout: IoOp* -> ConnOp* is a plain cast).
  struct ConnOp {
    IoOp op;
    TcpTargetConnection* self;
  };
  static void on_recv_cqe(IoOp* op, int res, uint32_t /*flags*/) noexcept {
    reinterpret_cast<ConnOp*>(op)->self->on_recv(res);
  }
  static void on_send_cqe(IoOp* op, int res, uint32_t /*flags*/) noexcept {
    reinterpret_cast<ConnOp*>(op)->self->on_send(res);
  }

  void on_recv(int res) noexcept {
    recv_inflight_ = false;
    if (state_ == State::closing || state_ == State::closed) {
      maybe_finish();
      return;
    }
    if (res == -EAGAIN || res == -EINTR || res == -ENOBUFS) {
      arm_recv();
      return;
    }
    if (res <= 0) {
      if (res == 0) {
        // Mid-transfer: inside a PDU, or owing write data the core asked for. Commands parked in the
        // core (the Asynchronous Event Request every Linux host leaves outstanding) are not a transfer.
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

  bool awaiting_host_data() const noexcept {
    for (const auto& slot : slots_) {
      if (slot.state == SlotState::rx_capsule || slot.state == SlotState::r2t) return true;
    }
    return false;
  }

  unsigned in_flight_commands() const noexcept {
    return static_cast<unsigned>(slots_.size() - free_slots_.size());
  }

  void process_rx() noexcept {
    if (in_rx_) return;
    in_rx_ = true;
    if (state_ == State::icreq || state_ == State::live) rx_.process(*this);
    in_rx_ = false;
  }

  // ---- PduReceiver::Handler -------------------------------------------------------------------------

  void on_pdu_error(const pt::PduError& e, std::span<const uint8_t> offending) noexcept override { fatal(e, offending); }

  // PDUs without data are handled here; for data PDUs the handler says where the data goes (rx_.data_to:
  // a request buffer; nothing: dropped) or pauses the receiver until a buffer is free.
  void on_pdu(PduReceiver& /*rx*/) noexcept override {
    rx_slot_ = nullptr;
    switch (rx_.pdu().type) {
      case pt::PduType::ic_req: on_icreq(); break;
      case pt::PduType::h2c_term_req: on_term_req(); return;
      case pt::PduType::capsule_cmd: on_capsule(); break;
      case pt::PduType::h2c_data: on_h2c_data(); break;
      default:
        // The validator only lets controller-bound types through; anything else is a sequence error.
        fatal(pt::PduError{0, "unexpected PDU", pt::Fes::pdu_sequence_error}, rx_.header());
        return;
    }
  }

  void on_pdu_data(PduReceiver& /*rx*/, bool digest_ok) noexcept override {
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
  void data_done() noexcept {
    Slot* s = rx_slot_;
    rx_slot_ = nullptr;
    if (s == nullptr) return;
    if (rx_.pdu().type == pt::PduType::capsule_cmd) {
      if (s->state == SlotState::rx_capsule) dispatch(*s);
      return;
    }
    // H2CData
    if (s->state != SlotState::r2t) return;
    s->data_received += rx_.pdu().data_len;
    if (s->data_received < s->r2t_end) return;
    if (s->data_received >= s->req.data_length) {
      s->state = SlotState::core;
      handler_.on_data_ready(s->req, p::status::success);
    } else {
      start_r2t(*s);
    }
  }

  void on_icreq() noexcept {
    const auto icreq = p::load<pt::IcReqPdu>(rx_.header().data());
    session_ = pt::controller_session(icreq, 0, opts_.maxh2cdata);
    icresp_ = pt::build_icresp(session_);
    icresp_pending_ = true;
    state_ = State::live;
    kick_tx();
  }

  void on_term_req() noexcept {
    const auto t = p::load<pt::TermReqHdr>(rx_.header().data());
    if (peer_error_log_allowed()) {
      spdlog::warn("nvme-tcp {}: host terminated the connection: {} (FES {:#x}, FEI {})", peer_,
                   pt::fes_name(static_cast<pt::Fes>(t.fes.get())), t.fes.get(), t.fei.get());
    }
    begin_close();
  }

  void on_capsule() noexcept {
    const auto sqe = p::load<p::Sqe>(rx_.header().data() + offsetof(pt::CapsuleCmdPdu, sqe));
    if (sq_entries_ != 0) sqhd_ = static_cast<uint16_t>((sqhd_ + 1) % sq_entries_);
    if (free_slots_.empty()) {
      fatal(pt::PduError{0, "more commands outstanding than the queue depth", pt::Fes::pdu_sequence_error},
            rx_.header());
      return;
    }
    Slot& s = slots_[free_slots_.back()];
    free_slots_.pop_back();
    s.req.sqe = sqe;
    s.req.cqe = p::Cqe{};
    s.req.direction = DataDirection::none;
    s.req.data_length = 0;
    s.req.data = nullptr;
    s.req.data_in_capsule = false;
    s.req.fixed_buffer_index = -1;
    s.cid = sqe.hdr.cid.get();
    s.state = SlotState::core;  // provisional; fixed below
    s.tx_kind = TxKind::none;
    s.icd_offset = 0;
    const uint32_t icd_len = rx_.pdu().data_len;

    if (cid_busy(s.cid)) return early_complete(s, p::status::command_id_conflict);
    set_cid(s.cid);
    s.cid_active = true;

    auto sgl = p::decode_data_sgl(sqe.hdr.dptr, p::SglAccept::tcp, offsetof(p::SqeHeader, dptr));
    if (!sgl) return early_complete(s, p::status::sgl_descriptor_type_invalid);
    bool bidir = false;
    DataDirection dir = command_direction(sqe, bidir);
    const uint32_t length = sgl->length;
    if (bidir && length != 0) return early_complete(s, p::status::invalid_field);
    if (length == 0 || dir == DataDirection::none) {
      if (icd_len != 0) return early_complete(s, p::status::data_sgl_length_invalid);
      return dispatch(s);
    }
    if (length > opts_.max_data_transfer) return early_complete(s, p::status::data_sgl_length_invalid);
    bool in_capsule = sgl->kind == p::SglKind::in_capsule;
    if (in_capsule) {
      if (dir != DataDirection::host_to_controller) return early_complete(s, p::status::invalid_field);
      if (icd_len > in_capsule_limit(sqe)) return early_complete(s, p::status::data_sgl_length_invalid);
      if (sgl->addr > icd_len) return early_complete(s, p::status::sgl_offset_invalid);
      if (!p::sgl_fits_in_capsule(*sgl, icd_len)) return early_complete(s, p::status::data_sgl_length_invalid);
      s.icd_offset = static_cast<uint32_t>(sgl->addr);
    } else if (icd_len != 0) {
      return early_complete(s, p::status::invalid_field);  // 0x5A with data in the capsule
    }
    s.req.direction = dir;
    s.req.data_length = length;
    s.req.data_in_capsule = in_capsule;
    const std::size_t need = in_capsule ? std::max<uint32_t>(icd_len, length) : length;
    Buffer b = pool_.acquire(need);
    if (!b) {
      s.state = SlotState::wait_buffer;
      s.waiter.w.bytes = need;
      pool_.wait(s.waiter.w);
      if (in_capsule) {
        rx_.pause();  // the data must land somewhere: stop reading until a buffer comes
        rx_slot_ = &s;
      }
      return;
    }
    attach_buffer(s, b);
    if (in_capsule) {
      s.state = SlotState::rx_capsule;
      rx_slot_ = &s;
      rx_.data_to(b.data);
      return;
    }
    dispatch(s);
  }

  void attach_buffer(Slot& s, Buffer b) noexcept {
    s.buf = b;
    s.req.data = b.data + s.icd_offset;
    s.req.fixed_buffer_index = BufferPool::kFixedBufferIndex;
  }

  static void on_buffer(BufferWaiter* w, Buffer b) noexcept {
    Slot* s = reinterpret_cast<Slot::Waiter*>(w)->slot;
    s->conn->buffer_arrived(*s, b);
  }

  void buffer_arrived(Slot& s, Buffer b) noexcept {
    if (s.state != SlotState::wait_buffer || state_ != State::live) {
      pool_.release(b);
      return;
    }
    attach_buffer(s, b);
    if (!s.req.data_in_capsule) {
      dispatch(s);
      return;
    }
    // Resume receiving the in-capsule data into the new buffer.
    s.state = SlotState::rx_capsule;
    rx_slot_ = &s;
    rx_.resume(b.data);
    if (!in_rx_) {
      process_rx();
      arm_recv();
      maybe_finish();
    }
  }

  void dispatch(Slot& s) noexcept {
    s.state = SlotState::core;
    ++core_held_;
    handler_.on_command(s.req);
  }

  // A command the core never sees: drop its in-capsule data, answer with `st`.
  void early_complete(Slot& s, p::Status st) noexcept {
    rx_.data_to(nullptr);
    rx_slot_ = nullptr;
    s.state = SlotState::tx;
    s.tx_with_data = false;
    s.req.cqe = p::Cqe{};
    s.req.cqe.set_status(st);
    fill_cqe_ids(s);
    queue_tx(s, TxKind::resp);
  }

  void on_h2c_data() noexcept {
    const auto h = p::load<pt::H2CDataHdr>(rx_.header().data());
    const uint16_t ttag = h.ttag.get();
    const auto hdr = rx_.header();
    if (ttag >= slots_.size() || slots_[ttag].state != SlotState::r2t) {
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
    auto range = pt::check_data_range(h.datao.get(), h.datal.get(), s.data_received, s.r2t_end);
    if (!range) return fatal(range.error(), hdr);
    rx_slot_ = &s;
    rx_.data_to(s.req.data + h.datao.get());
  }

  void start_r2t(Slot& s) noexcept {
    s.r2t_start = s.data_received;
    s.r2t_end = s.r2t_start + std::min(s.req.data_length - s.r2t_start, session_.maxh2cdata);
    queue_tx(s, TxKind::r2t);
  }

  // ---- send -----------------------------------------------------------------------------------------

  void queue_tx(Slot& s, TxKind kind) noexcept {
    s.tx_kind = kind;
    if (!s.in_txq) {
      s.in_txq = true;
      s.tx_next = kNone;
      if (txq_tail_ == kNone) {
        txq_head_ = s.req.tag;
      } else {
        slots_[txq_tail_].tx_next = s.req.tag;
      }
      txq_tail_ = s.req.tag;
    }
    kick_tx();
  }

  template <typename Pdu>
  bool put_header(const Pdu& pdu) noexcept {
    std::size_t n = pt::write_pdu_header(pdu, std::span<uint8_t>(tx_.arena.data() + tx_.used, TxBatch::kArena - tx_.used));
    if (n == 0) return false;
    tx_.add(tx_.alloc(n), n);
    return true;
  }

  // Serialize what `s` has to send into the batch. False when the batch is full (s keeps its place).
  bool serialize(Slot& s) noexcept {
    if (s.tx_kind == TxKind::r2t) {
      if (!tx_.room(1, TxBatch::kMaxPduOverhead)) return false;
      put_header(pt::build_r2t(s.cid, s.req.tag, s.r2t_start, s.r2t_end - s.r2t_start, session_));
      s.tx_kind = TxKind::none;
      return true;
    }
    if (s.tx_kind != TxKind::resp) return true;
    if (s.tx_with_data) {
      const uint32_t len = s.req.data_length;
      const uint32_t max_chunk = std::max<uint32_t>(opts_.max_c2h_data, 4096);
      while (s.tx_offset < len) {
        if (!tx_.room(3, TxBatch::kMaxPduOverhead)) return false;
        const uint32_t chunk = std::min(max_chunk, len - s.tx_offset);
        const bool last = s.tx_offset + chunk == len;
        put_header(pt::build_c2h_data(s.cid, s.tx_offset, chunk, last, false, session_));
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
    if (!tx_.room(1, TxBatch::kMaxPduOverhead)) return false;
    put_header(pt::build_capsule_resp(p::load<pt::CqeBytes>(&s.req.cqe), session_));
    s.tx_kind = TxKind::none;
    tx_done_[tx_done_count_++] = s.req.tag;
    // The host may reuse the CID as soon as it sees this CapsuleResp, possibly before our send
    // completion is reaped: free the CID now, the slot when the bytes are out.
    if (s.cid_active) {
      clear_cid(s.cid);
      s.cid_active = false;
    }
    return true;
  }

  void kick_tx() noexcept {
    if (send_inflight_ || state_ != State::live) return;
    tx_.reset();
    tx_done_count_ = 0;
    if (icresp_pending_) {
      put_header(icresp_);
      icresp_pending_ = false;
    }
    while (txq_head_ != kNone) {
      Slot& s = slots_[txq_head_];
      if (!serialize(s)) break;
      txq_head_ = s.tx_next;
      if (txq_head_ == kNone) txq_tail_ = kNone;
      s.in_txq = false;
      s.tx_next = kNone;
    }
    if (!tx_.empty()) submit_send();
  }

  void submit_send() noexcept {
    tx_msg_ = msghdr{};
    tx_msg_.msg_iov = tx_.pending();
    tx_msg_.msg_iovlen = tx_.pending_count();
    io_uring_sqe* sqe = reactor_.sqe_for(&send_op_.op);
    io_uring_prep_sendmsg(sqe, fd_, &tx_msg_, MSG_NOSIGNAL);
    send_inflight_ = true;
  }

  void on_send(int res) noexcept {
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
    if (!tx_.consume(static_cast<std::size_t>(res))) {
      if (res > 0) {
        submit_send();  // short send: resume where it stopped (also while closing: PDU boundaries)
        return;
      }
    }
    // Batch out: recycle the requests it finished (copy first: recycling may start a new batch).
    std::array<uint16_t, TxBatch::kMaxIov> done;
    const unsigned n = tx_done_count_;
    std::copy_n(tx_done_.begin(), n, done.begin());
    tx_done_count_ = 0;
    tx_.reset();
    for (unsigned i = 0; i < n; ++i) {
      Slot& s = slots_[done[i]];
      if (s.state == SlotState::tx && s.tx_kind == TxKind::none && !s.in_txq) recycle(s);
    }
    if (state_ == State::closing) {
      finish_closing_io();
      maybe_finish();
      return;
    }
    kick_tx();
  }

  // ---- teardown -------------------------------------------------------------------------------------

  void recycle(Slot& s) noexcept {
    if (s.state == SlotState::free) return;
    if (s.waiter.w.waiting) pool_.cancel_wait(s.waiter.w);
    if (s.cid_active) {
      clear_cid(s.cid);
      s.cid_active = false;
    }
    s.state = SlotState::free;
    s.tx_kind = TxKind::none;
    Buffer b = s.buf;
    s.buf = Buffer{};
    s.req.data = nullptr;
    free_slots_.push_back(s.req.tag);
    if (b) pool_.release(b);  // last: may hand the buffer to a waiter, which runs more code
  }

  void fatal(const pt::PduError& e, std::span<const uint8_t> offending) noexcept {
    if (state_ == State::closing || state_ == State::closed) return;
    if (peer_error_log_allowed()) {
      spdlog::warn("nvme-tcp {}: protocol error, terminating connection: {} ({}, FEI {})", peer_, e.what,
                   pt::fes_name(e.fes), e.fei());
    }
    term_len_ = pt::write_term_req(term_buf_, pt::PduType::c2h_term_req, e, offending);
    term_pending_ = term_len_ != 0;
    begin_close();
  }

  void begin_close() noexcept {
    if (state_ == State::closing || state_ == State::closed) return;
    state_ = State::closing;
    rx_.stop();
    // Unsent work is dropped (requests in it are recycled when the socket is done).
    while (txq_head_ != kNone) {
      Slot& s = slots_[txq_head_];
      txq_head_ = s.tx_next;
      s.in_txq = false;
      s.tx_next = kNone;
      s.tx_kind = TxKind::none;
    }
    txq_tail_ = kNone;
    icresp_pending_ = false;
    for (Slot& s : slots_) {
      if (s.state == SlotState::wait_buffer || s.state == SlotState::rx_capsule) recycle(s);
    }
    // Requests the core waits data for will get none: tell it, so it can finish them.
    for (Slot& s : slots_) {
      if (s.state == SlotState::r2t) {
        s.state = SlotState::core;
        handler_.on_data_ready(s.req, p::status::transient_transport_error);
      }
    }
    if (created_ && !closed_notified_) {
      closed_notified_ = true;
      handler_.on_queue_closed(*this);
    }
    if (!send_inflight_) {
      finish_closing_io();
    } else {
      // A batch is on its way: the TermReq goes after it, unless the peer stops reading.
      close_timer_ = reactor_.schedule(kCloseGrace, [this] {
        close_timer_ = 0;
        term_pending_ = false;
        shutdown_socket();
      });
    }
    maybe_finish();
  }

  // No send in flight any more: send the TermReq (small, best effort, straight from the stack's send
  // buffer: a plain non-blocking send keeps the error path simple) and shut the socket down.
  void finish_closing_io() noexcept {
    if (term_pending_) {
      term_pending_ = false;
      ssize_t rc = ::send(fd_, term_buf_.data(), term_len_, MSG_DONTWAIT | MSG_NOSIGNAL);
      (void)rc;
    }
    shutdown_socket();
  }

  void shutdown_socket() noexcept {
    if (shut_ || fd_ < 0) return;
    shut_ = true;
    ::shutdown(fd_, SHUT_RDWR);
  }

  void maybe_finish() noexcept {
    if (state_ != State::closing || !shut_ || recv_inflight_ || send_inflight_ || core_held_ != 0 || !created_) return;
    if (close_timer_ != 0) {
      reactor_.cancel(close_timer_);
      close_timer_ = 0;
    }
    for (Slot& s : slots_) {
      if (s.state != SlotState::free) recycle(s);
    }
    state_ = State::closed;
    ::close(fd_);
    fd_ = -1;
    reactor_.post([this] { delete this; });  // not now: callers up the stack may still touch us
  }

  Reactor& reactor_;
  BufferPool& pool_;
  TargetQueueHandler& handler_;
  TcpTargetOptions opts_;
  int fd_;
  TransportAddress local_;
  std::string peer_;

  State state_ = State::icreq;
  pt::TcpSession session_{};
  bool created_ = false;
  bool closed_notified_ = false;
  bool shut_ = false;
  uint16_t qid_ = 0;
  bool qid_known_ = false;
  uint16_t sq_entries_ = 0;
  uint16_t sqhd_ = 0;
  unsigned core_held_ = 0;

  std::vector<Slot> slots_;
  std::vector<uint16_t> free_slots_;
  std::vector<uint64_t> cid_bits_;
  ConnOp recv_op_{};
  ConnOp send_op_{};

  // Receive.
  PduReceiver rx_;
  bool recv_inflight_ = false;
  bool in_rx_ = false;
  msghdr rx_msg_{};
  iovec rx_iov_[2]{};
  Slot* rx_slot_ = nullptr;

  // Send.
  TxBatch tx_;
  bool send_inflight_ = false;
  msghdr tx_msg_{};
  uint16_t txq_head_ = kNone;
  uint16_t txq_tail_ = kNone;
  std::array<uint16_t, TxBatch::kMaxIov> tx_done_{};
  unsigned tx_done_count_ = 0;
  bool icresp_pending_ = false;
  pt::IcRespPdu icresp_{};
  bool term_pending_ = false;
  std::array<uint8_t, pt::kTermReqMaxPlen> term_buf_{};
  std::size_t term_len_ = 0;
  uint64_t close_timer_ = 0;
};

unsigned live_tcp_target_connections() noexcept { return g_live_connections.load(std::memory_order_relaxed); }

// ---- listener ---------------------------------------------------------------------------------------

struct TcpListener::Acceptor {
  struct Op {
    IoOp op;
    Acceptor* self;
  };
  std::vector<ReactorSlot> reactors;
  TargetQueueHandler* handler = nullptr;
  TcpTargetOptions opts;
  int fd = -1;
  Op op{};
  bool multishot = true;
  bool seen_success = false;
  bool armed = false;
  bool stopping = false;
  std::size_t next = 0;

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
      home().schedule(std::chrono::milliseconds(100), [this] { arm(); });
      return;
    }
    arm();
  }

  void hand_off(int cfd) noexcept {
    int one = 1;
    ::setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    const ReactorSlot where = reactors[next++ % reactors.size()];
    TargetQueueHandler* h = handler;
    const TcpTargetOptions o = opts;
    try {
      where.reactor->post([cfd, where, h, o] {
        auto* c = new TcpTargetConnection(cfd, where, *h, o);
        c->start();
      });
    } catch (...) {
      ::close(cfd);
    }
  }

  void stop_on_reactor() noexcept {
    stopping = true;
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
                                                        TargetQueueHandler& handler, const TcpTargetOptions& opts) {
  if (reactors.empty()) return make_error("TCP listener needs at least one reactor", EINVAL);
  for (const auto& r : reactors) {
    if (r.reactor == nullptr || r.pool == nullptr) return make_error("TCP listener: reactor without buffer pool", EINVAL);
  }
  if (opts.maxh2cdata < pt::kMinMaxH2CData || opts.maxh2cdata % 4 != 0) {
    return make_error("maxh2cdata must be >= 4096 and a multiple of 4", EINVAL);
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
