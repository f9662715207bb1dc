// The request lifecycle every target transport shares (what nvmet core.c keeps out of its transports):
// request slots and their free list, SGL checks against the binding's limits, buffers and buffer waiters,
// the count of requests the core holds, the TargetQueue calls' state checks and the close sequence. A
// transport (NVMe/TCP, RDMA, later TLS on TCP) adds only how bytes move: receive a capsule, fetch host
// data, send data + completion, and when its I/O is idle.
//
// A request's life (RequestStage):
//   free -> [wait_buffer] -> [receiving] -> core <-> fetching -> sending -> free
// `wait_buffer`: parsed, no pool buffer free yet (it waits on the pool, never allocates), or the queue holds
// its buffer limit already (it waits on the queue's own list, so that one queue cannot drain the pool that
// every queue of its reactor shares). `receiving`: its
// in-capsule data is still arriving (NVMe/TCP). `core`: the core has it. `fetching`: the core asked for host
// data (R2T + H2CData, RDMA READ). `sending`: complete() was called (or the transport answered the command
// itself): data and the completion are on their way; the slot is recycled when the transport is done with
// its memory.
//
// Close sequence (close(), a protocol error, a dead connection): begin_close() in the transport stops its
// I/O and calls close_requests(): waiting and receiving requests are dropped, requests being fetched go back
// to the core with a transient transport error, the core hears on_queue_closed once. Requests the core
// still holds come back by complete()/release(); when it holds none and the transport's I/O is idle the
// queue recycles everything and the transport destroys itself (destroy_queue()).
//
// Static polymorphism (CRTP): the hooks are plain calls the compiler can inline; the data path takes no
// extra indirect call. Derived must provide:
//   void start_fetch(Slot&)      the core wants host data in req.data: R2T / RDMA READ
//   void start_send(Slot&)       send s.with_data ? data then CQE : CQE (req.cqe ids are filled)
//   void buffer_ready(Slot&)     a waited-for buffer is attached (s.buf, req.data): carry on
//   void on_recycle(Slot&)       transport state of a slot going free (CID bitmap, RECV repost)
//   bool buffer_in_use(const Slot&)  the device still owns s.buf (RDMA WR in flight): freed later
//   bool io_idle()               nothing of the transport's own is in flight any more
//   void destroy_queue()         the queue is finished: free it (may delete this)
//   void begin_close()           stop I/O, then close_requests()
//   const char* log_name()       "nvme-tcp", "nvme-rdma"
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "protocol/command.h"
#include "protocol/sgl.h"
#include "protocol/status.h"
#include "transport/buffer_pool.h"
#include "transport/slot_fifo.h"
#include "transport/target_queue.h"

namespace rdmablk::transport {

enum class RequestStage : uint8_t { free, wait_buffer, receiving, core, fetching, sending };

struct RequestSlot {
  TargetRequest req;
  struct Waiter {
    BufferWaiter w;
    RequestSlot* slot;
  } waiter{};
  Buffer buf{};
  RequestStage stage = RequestStage::free;
  bool with_data = false;    // sending: controller -> host data goes before the CQE
  uint16_t cid = 0;
  uint32_t buf_offset = 0;   // where req.data starts in buf (in-capsule data at an SGL offset)
  uint32_t reserved = 0;     // bytes counted against the queue's buffer limit for this slot
  uint16_t limit_next = 0xFFFF;  // next slot waiting for room under the queue's buffer limit
  bool limit_waiting = false;    // on that list
};

// What a command's data SGL asks of the transport, once checked against the binding (one parser for all
// transports, so the rules cannot drift apart).
struct DataPlan {
  DataDirection direction = DataDirection::none;  // none: the command moves no data
  uint32_t length = 0;
  protocol::SglKind kind = protocol::SglKind::transport;
  uint32_t icd_offset = 0;   // in-capsule: where the command's data starts in the capsule's data
  uint64_t remote_addr = 0;  // keyed
  uint32_t rkey = 0;         // keyed
  bool invalidate = false;   // keyed 0x4F
  bool moves_data() const noexcept { return direction != DataDirection::none; }
};

struct BindingLimits {
  protocol::SglAccept accept = protocol::SglAccept::any;
  uint32_t in_capsule = 0;    // in-capsule data bytes this queue takes
  uint32_t max_transfer = 0;  // longest data transfer (MDTS in bytes)
  // NVMe/TCP: the capsule PDU declares its data, so data in a capsule whose SGL does not point into it is
  // an error. RDMA: bytes after the SQE are data only when the SGL says so.
  bool capsule_declares_data = false;
};

// Check the data SGL of `sqe` (with `icd_len` bytes of data in the capsule) against `lim`. On success
// fills `out` (direction none for a command that moves no data) and returns success; otherwise the NVMe
// status to complete the command with. A zero-length descriptor of any type is accepted for a command that
// moves no data (as nvmet and SPDK do: some hosts send 16 zero bytes there).
protocol::Status plan_data_transfer(const protocol::Sqe& sqe, uint32_t icd_len, const BindingLimits& lim,
                                    DataPlan& out) noexcept;

template <class Derived, class Slot>
class TargetQueueBase : public TargetQueue {
 public:
  // ---- TargetQueue ----------------------------------------------------------------------------------

  void fetch_data(TargetRequest& req) noexcept final {
    Slot* s = slot_of(req);
    if (s == nullptr || s->stage != RequestStage::core || state_ != State::live) return;  // closing: released
    if (req.direction != DataDirection::host_to_controller || req.data_length == 0 || req.data_in_capsule) {
      handler_.on_data_ready(req, protocol::status::success);
      return;
    }
    s->stage = RequestStage::fetching;
    self().start_fetch(*s);
  }

  void complete(TargetRequest& req, bool with_data) noexcept final {
    Slot* s = slot_of(req);
    if (s == nullptr || (s->stage != RequestStage::core && s->stage != RequestStage::fetching)) return;
    --core_held_;
    if (state_ != State::live) {
      recycle(*s);
      maybe_finish();
      return;
    }
    fill_cqe_ids(*s);
    s->with_data = with_data && req.direction == DataDirection::controller_to_host && req.data_length != 0 &&
                   req.data != nullptr;
    s->stage = RequestStage::sending;
    self().start_send(*s);
    maybe_finish();
  }

  void release(TargetRequest& req) noexcept final {
    Slot* s = slot_of(req);
    if (s == nullptr || (s->stage != RequestStage::core && s->stage != RequestStage::fetching)) return;
    --core_held_;
    recycle(*s);
    maybe_finish();
  }

  void close(const char* reason) noexcept final {
    if (state_ != State::live) return;
    spdlog::info("{} {}: closing queue {}: {}", self().log_name(), peer_, qid_, reason != nullptr ? reason : "");
    self().begin_close();
  }

  void set_connected(uint16_t qid, uint16_t sq_entries, bool sq_flow_control_disabled) noexcept final {
    qid_ = qid;
    qid_known_ = true;
    if (sq_entries != 0) sq_entries_ = sq_entries;
    sq_flow_disabled_ = sq_flow_control_disabled;
  }

  const TransportAddress& local_address() const noexcept final { return local_; }
  const std::string& peer_name() const noexcept final { return peer_; }

  // Introspection (tests, logs).
  bool closing() const noexcept { return state_ != State::live; }
  bool finished() const noexcept { return state_ == State::closed; }
  unsigned core_held() const noexcept { return core_held_; }
  unsigned in_flight_requests() const noexcept { return static_cast<unsigned>(slots_.size() - free_slots_.size()); }
  // Buffer bytes counted against the queue's limit now (held, or waited for on the pool).
  uint64_t buffer_bytes_reserved() const noexcept { return buffer_reserved_; }

 protected:
  enum class State : uint8_t { live, closing, closed };
  static constexpr uint16_t kNoSlot = 0xFFFF;

  TargetQueueBase(BufferPool& pool, TargetQueueHandler& handler, std::size_t slots, TransportAddress local,
                  std::string peer)
      : pool_(pool), handler_(handler), local_(std::move(local)), peer_(std::move(peer)) {
    slots_ = std::vector<Slot>(std::min<std::size_t>(std::max<std::size_t>(slots, 1), kNoSlot));
    free_slots_.reserve(slots_.size());
    for (std::size_t i = slots_.size(); i-- > 0;) {
      Slot& s = slots_[i];
      s.req.queue = this;
      s.req.tag = static_cast<uint16_t>(i);
      s.waiter.slot = &s;
      s.waiter.w.fn = &TargetQueueBase::on_buffer;
      free_slots_.push_back(static_cast<uint16_t>(i));
    }
  }
  ~TargetQueueBase() override {
    for (Slot& s : slots_) {
      if (s.waiter.w.waiting) pool_.cancel_wait(s.waiter.w);
      if (s.buf) pool_.release(s.buf);
      s.buf = Buffer{};
    }
  }

  Derived& self() noexcept { return static_cast<Derived&>(*this); }

  Slot* slot_of(TargetRequest& req) noexcept {
    if (req.queue != this || req.tag >= slots_.size()) return nullptr;
    return &slots_[req.tag];
  }

  // A free slot for a new command (nullptr: the host has more outstanding than the queue allows, a
  // protocol error), reset and holding a copy of `sqe`. Advances SQHD.
  Slot* take_slot(const protocol::Sqe& sqe) noexcept {
    if (sq_entries_ != 0 && ++sqhd_ >= sq_entries_) sqhd_ = 0;  // no division on the data path
    if (free_slots_.empty()) return nullptr;
    Slot& s = slots_[free_slots_.back()];
    free_slots_.pop_back();
    s.req.sqe = sqe;
    s.req.cqe = protocol::Cqe{};
    s.req.direction = DataDirection::none;
    s.req.data_length = 0;
    s.req.data = nullptr;
    s.req.data_in_capsule = false;
    s.req.fixed_buffer_index = -1;
    s.cid = sqe.hdr.cid.get();
    s.with_data = false;
    s.buf_offset = 0;
    s.stage = RequestStage::core;  // provisional: the transport sets the real stage
    return &s;
  }

  void fill_cqe_ids(Slot& s) noexcept {
    s.req.cqe.cid.set(s.cid);
    s.req.cqe.sqid.set(qid_);
    s.req.cqe.sqhd.set(sqhd_);
  }

  // Attach a pool buffer of `bytes` (data at `offset` in it) or, when none is free or the queue holds its
  // buffer limit, wait for one: buffer_ready() follows then. True when attached now. `limited` = false for
  // in-capsule data, which must land somewhere before the connection reads on: its bytes are bounded by the
  // queue depth times the in-capsule size, and counting them could stop a queue whose buffers all wait for
  // host data behind them (R2T + H2CData).
  bool attach_or_wait(Slot& s, std::size_t bytes, uint32_t offset = 0, bool limited = true) noexcept {
    s.buf_offset = offset;
    s.waiter.w.bytes = bytes;
    if (limited && buffer_limit_ != 0) {
      const auto need = static_cast<uint32_t>(pool_.capacity_for(bytes));
      // An empty queue always gets one command's worth, so a limit below max I/O size cannot stall it.
      if (buffer_reserved_ != 0 && buffer_reserved_ + need > buffer_limit_) {
        s.stage = RequestStage::wait_buffer;
        limit_push(s);
        return false;
      }
      s.reserved = need;
      buffer_reserved_ += need;
    }
    return acquire_or_wait(s);
  }

  // At most this many buffer bytes held (or waited for on the pool) at once; 0 = no limit.
  void set_buffer_limit(uint64_t bytes) noexcept { buffer_limit_ = bytes; }


  // The core gets the command.
  void dispatch(Slot& s) noexcept {
    s.stage = RequestStage::core;
    ++core_held_;
    handler_.on_command(s.req);
  }

  // A command the core never sees: the transport answers it with `st`.
  void early_complete(Slot& s, protocol::Status st) noexcept {
    s.req.cqe = protocol::Cqe{};
    s.req.cqe.set_status(st);
    s.with_data = false;
    if (state_ != State::live) {
      recycle(s);
      return;
    }
    fill_cqe_ids(s);
    s.stage = RequestStage::sending;
    self().start_send(s);
  }

  void recycle(Slot& s) noexcept {
    if (s.stage == RequestStage::free) return;
    if (s.waiter.w.waiting) pool_.cancel_wait(s.waiter.w);
    if (s.limit_waiting) limit_remove(s);
    self().on_recycle(s);
    s.stage = RequestStage::free;
    s.req.data = nullptr;
    free_slots_.push_back(s.req.tag);
    if (self().buffer_in_use(s)) return;  // the transport frees it when the device is done (release_buffer)
    release_buffer(s);
  }

  // Give s's buffer back to the pool (last: it may go to a waiter, which runs more code).
  void release_buffer(Slot& s) noexcept {
    Buffer b = s.buf;
    s.buf = Buffer{};
    const bool had_reserved = s.reserved != 0;
    buffer_reserved_ -= s.reserved;
    s.reserved = 0;
    if (b) pool_.release(b);
    if (had_reserved) admit_limit_waiters();
  }

  // The transport has stopped its I/O: requests that wait for a buffer or for in-capsule data are dropped,
  // requests being fetched go back to the core with a transient transport error, the core hears once
  // that the queue closed.
  void close_requests() noexcept {
    for (Slot& s : slots_) {
      if (s.stage == RequestStage::wait_buffer || s.stage == RequestStage::receiving) recycle(s);
    }
    for (Slot& s : slots_) {
      if (s.stage == RequestStage::fetching) {
        s.stage = RequestStage::core;
        handler_.on_data_ready(s.req, protocol::status::transient_transport_error);
      }
    }
    if (created_ && !closed_notified_) {
      closed_notified_ = true;
      handler_.on_queue_closed(*this);
    }
  }

  // The core has the queue (on_queue_created).
  void announce() noexcept {
    handler_.on_queue_created(*this);
    created_ = true;
  }

  // Finish a closing queue once the core holds nothing and the transport's I/O is idle.
  void maybe_finish() noexcept {
    if (state_ != State::closing || !created_ || core_held_ != 0 || !self().io_idle()) return;
    for (Slot& s : slots_) {
      if (s.stage != RequestStage::free) recycle(s);
    }
    state_ = State::closed;
    self().destroy_queue();  // may delete this
  }

  BufferPool& pool_;
  TargetQueueHandler& handler_;
  TransportAddress local_;
  std::string peer_;
  State state_ = State::live;
  bool created_ = false;
  bool closed_notified_ = false;
  bool qid_known_ = false;
  uint16_t qid_ = 0;
  uint16_t sq_entries_ = 0;
  uint16_t sqhd_ = 0;
  bool sq_flow_disabled_ = false;  // the host's Connect disabled SQ flow control (SQHD not looked at)
  unsigned core_held_ = 0;
  std::vector<Slot> slots_;
  std::vector<uint16_t> free_slots_;

 private:
  bool acquire_or_wait(Slot& s) noexcept {
    Buffer b = pool_.acquire(s.waiter.w.bytes);
    if (!b) {
      s.stage = RequestStage::wait_buffer;
      pool_.wait(s.waiter.w);
      return false;
    }
    attach(s, b);
    return true;
  }

  void limit_push(Slot& s) noexcept {
    s.limit_waiting = true;
    limit_waiters_.push_back(slots_, s.req.tag);
  }

  // Only when a queue closes or a host-started command is dropped: a scan is fine.
  void limit_remove(Slot& s) noexcept {
    limit_waiters_.remove(slots_, s.req.tag);
    s.limit_waiting = false;
  }

  // Room under the limit again: the oldest waiters go on to the pool, in order. buffer_ready() may complete
  // a command and free more room from inside this loop; the outer loop carries on from the list's head.
  void admit_limit_waiters() noexcept {
    if (admitting_ || state_ != State::live) return;
    admitting_ = true;
    while (!limit_waiters_.empty() && state_ == State::live) {
      Slot& s = slots_[limit_waiters_.front()];
      const auto need = static_cast<uint32_t>(pool_.capacity_for(s.waiter.w.bytes));
      if (buffer_reserved_ != 0 && buffer_reserved_ + need > buffer_limit_) break;
      limit_waiters_.pop_front(slots_);
      s.limit_waiting = false;
      s.reserved = need;
      buffer_reserved_ += need;
      if (acquire_or_wait(s)) self().buffer_ready(s);
    }
    admitting_ = false;
  }

  uint64_t buffer_limit_ = 0;
  uint64_t buffer_reserved_ = 0;
  SlotFifo<&RequestSlot::limit_next> limit_waiters_;  // slots waiting for room under buffer_limit_
  bool admitting_ = false;

  void attach(Slot& s, Buffer b) noexcept {
    s.buf = b;
    s.req.data = b.data + s.buf_offset;
    s.req.fixed_buffer_index = BufferPool::kFixedBufferIndex;
  }

  static void on_buffer(BufferWaiter* w, Buffer b) noexcept {
    auto* s = static_cast<Slot*>(reinterpret_cast<RequestSlot::Waiter*>(w)->slot);
    static_cast<TargetQueueBase*>(s->req.queue)->buffer_arrived(*s, b);
  }

  void buffer_arrived(Slot& s, Buffer b) noexcept {
    if (s.stage != RequestStage::wait_buffer || state_ != State::live) {
      pool_.release(b);
      return;
    }
    attach(s, b);
    self().buffer_ready(s);
  }
};

}  // namespace rdmablk::transport
