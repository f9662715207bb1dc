#include "transport/rdma/rdma_queue.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>

#include <spdlog/spdlog.h>

#include "protocol/command.h"
#include "protocol/fabrics.h"
#include "protocol/sgl.h"

namespace rdmablk::transport::rdma {

namespace p = rdmablk::protocol;
namespace cm = rdmablk::protocol::rdma_cm;

namespace {

std::atomic<unsigned> g_live_queues{0};


std::size_t round_up(std::size_t v, std::size_t a) noexcept { return (v + a - 1) / a * a; }

}  // namespace

unsigned live_rdma_target_queues() noexcept { return g_live_queues.load(std::memory_order_relaxed); }

// ---- sizing -------------------------------------------------------------------------------------------

tl::expected<QueueSizing, cm::CmError> size_queue(const cm::ConnectRequest& req, uint8_t peer_initiator_depth,
                                                  uint8_t peer_responder_resources, const DeviceLimits& dev,
                                                  const RdmaTargetOptions& opts) noexcept {
  auto refuse = [](cm::RejectStatus st, uint32_t off, const char* what) {
    return tl::unexpected<cm::CmError>(cm::CmError{st, off, what});
  };
  QueueSizing s;
  s.qid = req.qid;
  const uint32_t entries = req.sq_entries();
  s.sq_entries = static_cast<uint16_t>(entries);
  if (dev.max_sge < 1 || dev.max_qp_wr < 2 || dev.max_msg_size == 0) {
    return refuse(cm::RejectStatus::no_resources, 0, "device limits too small");
  }
  // Every command the host may have outstanding needs a RECV (the CQE SEND is posted after its repost).
  if (entries > dev.max_qp_wr) {
    return refuse(cm::RejectStatus::invalid_hsqsize, offsetof(cm::CmRequest, hsqsize),
                  "HSQSIZE + 1 above the device's max_qp_wr");
  }
  // The host must be able to take a CQE for every command it may have outstanding.
  if (req.hrqsize < entries) {
    return refuse(cm::RejectStatus::invalid_hrqsize, offsetof(cm::CmRequest, hrqsize), "HRQSIZE below HSQSIZE + 1");
  }
  s.recv_count = s.sq_entries;
  s.slots = static_cast<uint16_t>(std::min<uint32_t>(entries * 2, 0xFFFE));
  s.in_capsule = req.qid == 0 ? opts.admin_in_capsule : opts.io_in_capsule;
  s.recv_size = static_cast<uint32_t>(round_up(kSqeSize + s.in_capsule, 64));
  s.in_capsule = s.recv_size - kSqeSize;
  // One WR per chunk; a chain is at most kMaxChainChunks data WRs + the SEND.
  const uint32_t max_transfer = std::min(opts.max_data_transfer, p::kSglKeyedMaxLength);
  s.chunk = std::max<uint32_t>(dev.max_msg_size, (max_transfer + kMaxChainChunks - 1) / kMaxChainChunks);
  if (s.chunk > dev.max_msg_size) {
    return refuse(cm::RejectStatus::no_resources, 0, "device max message size too small for MDTS");
  }
  const uint32_t chain = (max_transfer + s.chunk - 1) / s.chunk + 1;
  // Enough for every command to have a chain posted at once; the budget handles a smaller device limit.
  const uint64_t want = uint64_t{entries} * chain + 1;
  s.sq_depth = static_cast<uint32_t>(std::min<uint64_t>(want, dev.max_qp_wr));
  if (s.sq_depth < chain) return refuse(cm::RejectStatus::no_resources, 0, "device send queue too small");
  // ORD: the RDMA READs we may have in flight; the host offers them as its responder resources.
  s.initiator_depth = static_cast<uint8_t>(std::min<uint32_t>(peer_initiator_depth, dev.max_qp_init_rd_atom));
  s.responder_resources = static_cast<uint8_t>(std::min<uint32_t>(peer_responder_resources, dev.max_qp_rd_atom));
  if (s.initiator_depth == 0) {
    return refuse(cm::RejectStatus::invalid_ord, 0, "no RDMA READ allowed (initiator depth 0)");
  }
  s.crqsize = s.sq_entries;
  if (dev.max_cqe != 0 && s.cq_need() > dev.max_cqe) {
    return refuse(cm::RejectStatus::no_resources, 0, "queue larger than the device's completion queue");
  }
  return s;
}

std::size_t queue_region_bytes(const QueueSizing& s) noexcept {
  return std::size_t{s.recv_count} * s.recv_size + std::size_t{s.slots} * kCqeSize;
}

// ---- queue --------------------------------------------------------------------------------------------

RdmaTargetQueue::RdmaTargetQueue(RdmaQpOps& ops, BufferPool& pool, TargetQueueHandler& handler,
                                 const RdmaTargetOptions& opts, const RdmaQueueSetup& setup)
    : TargetQueueBase(pool, handler, setup.sizing.slots, setup.local, setup.peer),
      ops_(ops),
      opts_(opts),
      sizing_(setup.sizing),
      recv_lkey_(setup.recv_lkey),
      pool_lkey_(setup.pool_lkey),
      inline_cqe_(setup.max_inline >= kCqeSize) {
  qid_ = sizing_.qid;
  sq_entries_ = sizing_.sq_entries;
  set_buffer_limit(opts.max_buffer_bytes);
  limits_.accept = p::SglAccept::rdma;
  limits_.in_capsule = sizing_.in_capsule;
  limits_.max_transfer = opts_.max_data_transfer;
  limits_.capsule_declares_data = false;  // bytes after the SQE are data only when the SGL says so
  recvs_ = std::vector<Recv>(sizing_.recv_count);
  uint8_t* cqes = setup.region + std::size_t{sizing_.recv_count} * sizing_.recv_size;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    s.send_ctx = WrCtx{this, WrKind::send, static_cast<uint16_t>(i)};
    s.read_ctx = WrCtx{this, WrKind::read, static_cast<uint16_t>(i)};
    s.rsp = cqes + i * kCqeSize;
  }
  for (std::size_t i = 0; i < recvs_.size(); ++i) {
    recvs_[i].ctx = WrCtx{this, WrKind::recv, static_cast<uint16_t>(i)};
    recvs_[i].buf = setup.region + i * sizing_.recv_size;
  }
  g_live_queues.fetch_add(1, std::memory_order_relaxed);
}

RdmaTargetQueue::~RdmaTargetQueue() { g_live_queues.fetch_sub(1, std::memory_order_relaxed); }

unsigned RdmaTargetQueue::pending_count() const noexcept {
  return pending_.size(slots_);
}

bool RdmaTargetQueue::repost_recv(uint16_t index) noexcept {
  Recv& r = recvs_[index];
  if (r.posted || state_ != State::live) return true;
  ibv_sge sge{reinterpret_cast<uintptr_t>(r.buf), sizing_.recv_size, recv_lkey_};
  ibv_recv_wr wr{};
  wr.wr_id = reinterpret_cast<uintptr_t>(&r.ctx);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (int rc = ops_.post_recv(&wr); rc != 0) {
    if (peer_error_log_allowed()) spdlog::warn("nvme-rdma {}: post_recv failed: {}", peer_, std::strerror(rc));
    return false;
  }
  r.posted = true;
  ++recv_outstanding_;
  return true;
}

// The RECV a request holds goes back to the host (its in-capsule data is consumed, or there was none).
bool RdmaTargetQueue::give_back_recv(Slot& s) noexcept {
  if (s.recv == kNone) return true;
  const uint16_t r = s.recv;
  s.recv = kNone;
  if (repost_recv(r)) return true;
  fatal("cannot repost a receive buffer");
  return false;
}

bool RdmaTargetQueue::post_initial_recvs() noexcept {
  for (std::size_t i = 0; i < recvs_.size(); ++i) {
    if (!repost_recv(static_cast<uint16_t>(i))) return false;
  }
  return true;
}

void RdmaTargetQueue::start() noexcept {
  announce();
  maybe_finish();
}

// ---- completions --------------------------------------------------------------------------------------

void RdmaTargetQueue::on_completion(const WrCtx& ctx, const ibv_wc& wc) noexcept {
  in_completion_ = true;
  switch (ctx.kind) {
    case WrKind::recv:
      if (ctx.index < recvs_.size()) on_recv(recvs_[ctx.index], wc);
      break;
    case WrKind::send:
      if (ctx.index < slots_.size()) on_send_done(slots_[ctx.index], wc);
      break;
    case WrKind::read:
      if (ctx.index < slots_.size()) on_read_done(slots_[ctx.index], wc);
      break;
  }
  in_completion_ = false;
  if (state_ == State::live) run_pending();
  maybe_finish();
}

void RdmaTargetQueue::wc_error(const ibv_wc& wc, const char* what) noexcept {
  if (state_ != State::live) return;
  if (wc.status != IBV_WC_WR_FLUSH_ERR && peer_error_log_allowed()) {
    spdlog::warn("nvme-rdma {}: {} completion failed: {} (vendor error {:#x}); closing the queue", peer_, what,
                 ibv_wc_status_str(wc.status), wc.vendor_err);
  }
  begin_close();
}

void RdmaTargetQueue::on_recv(Recv& r, const ibv_wc& wc) noexcept {
  r.posted = false;
  --recv_outstanding_;
  if (wc.status != IBV_WC_SUCCESS) return wc_error(wc, "RECV");
  if (state_ != State::live) return;
  if (wc.opcode != IBV_WC_RECV) return fatal("unexpected receive completion opcode");
  if (wc.byte_len < kSqeSize) return fatal("capsule shorter than a 64-byte SQE");
  Slot* s = take_slot(p::load<p::Sqe>(r.buf));
  if (s == nullptr) return fatal("more commands outstanding than the queue size");
  parse_capsule(*s, wc.byte_len, r.ctx.index);
}

void RdmaTargetQueue::parse_capsule(Slot& s, uint32_t len, uint16_t recv_index) noexcept {
  s.keyed = false;
  s.invalidate = false;
  s.post = Post::none;
  s.recv = recv_index;  // held until we know whether the capsule carries data

  DataPlan plan;
  if (const p::Status st = plan_data_transfer(s.req.sqe, len - kSqeSize, limits_, plan); !st.ok()) {
    return early_complete(s, st);
  }
  if (!plan.moves_data()) {
    if (!give_back_recv(s) || state_ != State::live) return recycle(s);
    return dispatch(s);
  }
  s.req.direction = plan.direction;
  s.req.data_length = plan.length;
  if (plan.kind == p::SglKind::in_capsule) {
    s.req.data_in_capsule = true;
    // No copy: the RECV stays ours until complete() reposts it.
    s.req.data = recvs_[recv_index].buf + kSqeSize + plan.icd_offset;
    return dispatch(s);
  }
  s.keyed = true;
  s.invalidate = plan.invalidate;
  s.raddr = plan.remote_addr;
  s.rkey = plan.rkey;
  if (!give_back_recv(s) || state_ != State::live) return recycle(s);
  if (attach_or_wait(s, plan.length)) dispatch(s);
}

// ---- TargetQueueBase hooks ----------------------------------------------------------------------------

void RdmaTargetQueue::start_send(Slot& s) noexcept {
  s.with_data = s.with_data && s.keyed;
  if (s.recv != kNone) {
    // In-capsule data is consumed: the RECV goes back before the CQE can reach the host.
    s.req.data = nullptr;
    if (!give_back_recv(s)) return;
  }
  if (state_ != State::live) return recycle(s);
  queue_post(s, Post::response);
}

void RdmaTargetQueue::on_recycle(Slot& s) noexcept {
  s.post = Post::none;
  if (s.recv != kNone) {
    const uint16_t r = s.recv;
    s.recv = kNone;
    repost_recv(r);  // no-op while closing
  }
}

void RdmaTargetQueue::connection_lost(const char* why) noexcept {
  if (state_ != State::live) return;
  spdlog::debug("nvme-rdma {}: queue {}: {}", peer_, qid_, why);
  begin_close();
}

// ---- send queue -----------------------------------------------------------------------------------------

void RdmaTargetQueue::queue_post(Slot& s, Post what) noexcept {
  s.post = what;
  if (pending_.empty() && try_post(s)) return;
  pending_.push_back(slots_, s.req.tag);
}

void RdmaTargetQueue::run_pending() noexcept {
  while (!pending_.empty() && state_ == State::live) {
    if (!try_post(slots_[pending_.front()])) break;
    pending_.pop_front(slots_);
  }
}

// Posts s's chain if the send queue has room. False when it must wait (s is left for the caller to queue).
bool RdmaTargetQueue::try_post(Slot& s) noexcept {
  if (state_ != State::live) return false;
  const uint32_t need = s.post == Post::read ? chunks(s.req.data_length)
                                            : (s.with_data ? chunks(s.req.data_length) : 0) + 1;
  if (sq_used_ + need > sizing_.sq_depth) return false;
  const bool ok = s.post == Post::read ? post_read(s) : post_response(s);
  if (!ok) {
    fatal("ibv_post_send failed");
    return true;  // consumed (the queue is closing; teardown recycles it)
  }
  sq_used_ += need;
  ++send_outstanding_;
  return true;
}

// The first `n` WRs of a chain that moves a slot's data to or from the host's buffer, one per chunk, each
// linked to the next (the caller ends the chain). Only the WRs used are initialised (zeroing the whole
// arrays was a fifth of the per-command cost).
inline void RdmaTargetQueue::fill_data_wrs(const Slot& s, uint32_t n, ibv_wr_opcode op, ibv_send_wr* wrs,
                                           ibv_sge* sges) const noexcept {
  for (uint32_t i = 0; i < n; ++i) {
    wrs[i] = ibv_send_wr{};
    const uint32_t off = i * sizing_.chunk;
    const uint32_t len = std::min(sizing_.chunk, s.req.data_length - off);
    sges[i] = ibv_sge{reinterpret_cast<uintptr_t>(s.req.data + off), len, pool_lkey_};
    ibv_send_wr& wr = wrs[i];
    wr.opcode = op;
    wr.sg_list = &sges[i];
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = s.raddr + off;
    wr.wr.rdma.rkey = s.rkey;
    wr.next = &wrs[i + 1];
  }
}

bool RdmaTargetQueue::post_read(Slot& s) noexcept {
  std::array<ibv_send_wr, kMaxChainChunks> wrs;
  std::array<ibv_sge, kMaxChainChunks> sges;
  const uint32_t n = chunks(s.req.data_length);
  fill_data_wrs(s, n, IBV_WR_RDMA_READ, wrs.data(), sges.data());
  ibv_send_wr& last = wrs[n - 1];  // n >= 1: fetch_data() starts no READ without data
  last.next = nullptr;
  last.wr_id = reinterpret_cast<uintptr_t>(&s.read_ctx);
  last.send_flags = IBV_SEND_SIGNALED;
  s.read_wrs = n;
  s.read_inflight = true;
  if (ops_.post_send(wrs.data()) != 0) {
    s.read_inflight = false;
    return false;
  }
  return true;
}

bool RdmaTargetQueue::post_response(Slot& s) noexcept {
  std::array<ibv_send_wr, kMaxChainChunks + 1> wrs;
  std::array<ibv_sge, kMaxChainChunks + 1> sges;
  const uint32_t n = s.with_data ? chunks(s.req.data_length) : 0;
  fill_data_wrs(s, n, IBV_WR_RDMA_WRITE, wrs.data(), sges.data());
  std::memcpy(s.rsp, &s.req.cqe, kCqeSize);
  sges[n] = ibv_sge{reinterpret_cast<uintptr_t>(s.rsp), kCqeSize, recv_lkey_};
  ibv_send_wr& send = wrs[n];
  send = ibv_send_wr{};
  send.wr_id = reinterpret_cast<uintptr_t>(&s.send_ctx);
  send.sg_list = &sges[n];
  send.num_sge = 1;
  send.send_flags = IBV_SEND_SIGNALED | (inline_cqe_ ? unsigned{IBV_SEND_INLINE} : 0u);
  if (s.keyed && s.invalidate) {
    send.opcode = IBV_WR_SEND_WITH_INV;
    send.invalidate_rkey = s.rkey;
  } else {
    send.opcode = IBV_WR_SEND;
  }
  s.send_wrs = n + 1;
  s.send_inflight = true;
  if (ops_.post_send(wrs.data()) != 0) {
    s.send_inflight = false;
    return false;
  }
  return true;
}

void RdmaTargetQueue::on_send_done(Slot& s, const ibv_wc& wc) noexcept {
  if (!s.send_inflight) return;
  s.send_inflight = false;
  sq_used_ -= std::min(sq_used_, s.send_wrs);
  --send_outstanding_;
  if (wc.status != IBV_WC_SUCCESS) wc_error(wc, "SEND");
  recycle(s);
}

void RdmaTargetQueue::on_read_done(Slot& s, const ibv_wc& wc) noexcept {
  if (!s.read_inflight) return;
  s.read_inflight = false;
  sq_used_ -= std::min(sq_used_, s.read_wrs);
  --send_outstanding_;
  if (s.stage == RequestStage::free) {  // released while the READ was in flight: the buffer is free now
    release_buffer(s);
    if (wc.status != IBV_WC_SUCCESS) wc_error(wc, "RDMA READ");
    return;
  }
  if (wc.status != IBV_WC_SUCCESS) {
    wc_error(wc, "RDMA READ");  // begin_close gives the request back to the core (it is being fetched)
    return;
  }
  if (s.stage != RequestStage::fetching || state_ != State::live) return;
  s.stage = RequestStage::core;
  handler_.on_data_ready(s.req, p::status::success);
}

// ---- teardown -------------------------------------------------------------------------------------------

void RdmaTargetQueue::fatal(const char* what) noexcept {
  if (state_ != State::live) return;
  if (peer_error_log_allowed()) spdlog::warn("nvme-rdma {}: queue {}: protocol error, closing: {}", peer_, qid_, what);
  begin_close();
}

void RdmaTargetQueue::begin_close() noexcept {
  if (state_ != State::live) return;
  state_ = State::closing;
  ops_.disconnect();
  // Unposted chains are dropped: responses are recycled, reads (still being fetched) fail in close_requests.
  while (!pending_.empty()) {
    Slot& s = slots_[pending_.pop_front(slots_)];
    if (s.post != Post::read) recycle(s);
  }
  close_requests();
  maybe_finish();
}

}  // namespace rdmablk::transport::rdma
