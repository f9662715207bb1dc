// NVMe-oF RDMA transport binding, controller side: the per-queue request state machine.
//
// RdmaTargetQueue is the TargetQueue the core sees. It owns no verbs object: it posts work requests
// through RdmaQpOps (the connection's QP in rdma_target.cpp, a fake in tests/transport/test_rdma_*.cpp) and
// is fed work completions by the reactor's CQ poller. That keeps everything the binding decides (SGL
// validation, queue sizing, send-queue budgeting, teardown ordering) testable without a device.
//
// Buffers:
//   - RECV buffers (64-byte SQE + in-capsule data) and the 16-byte CQE send buffers live in one region per
//     queue, registered by the connection (recv_lkey). In-capsule data is NOT copied: req.data points into
//     the RECV buffer, which stays owned by the request until complete()/release() and is reposted then,
//     just before the CQE SEND (as nvmet-rdma does), so the host always finds a RECV for its next command.
//     Commands without in-capsule data give their RECV back as soon as the SQE is copied out.
//   - Keyed transfers use a buffer from the reactor's BufferPool (registered once per reactor and device,
//     pool_lkey; the same region is io_uring fixed buffer 0): host memory -> RDMA READ -> buffer ->
//     WRITE_FIXED, READ_FIXED -> buffer -> RDMA WRITE -> host memory. No copy. A request that finds the
//     pool empty waits on the pool (BufferWaiter) before the core sees it.
//
// Work requests: an RDMA READ chain (one WR per device max-message chunk, only the last signaled) per
// write, and per completion one chain of RDMA WRITEs (unsignaled) + the SEND of the CQE (signaled;
// SEND_WITH_INV carrying the host's rkey when it asked with SGL 0x4F). RC ordering makes the SEND land
// after the data. Unsignaled WRs carry wr_id 0. Send-queue budget: a chain needs free SQ slots for all of
// its WRs; one that does not fit waits on the pending FIFO and is posted, in order, as completions free
// slots.
//
// Teardown: a completion error, a CM event (DISCONNECTED, DEVICE_REMOVAL, ...) or close() moves the QP to
// the error state (ops.disconnect()); every posted RECV and signaled WR then completes (flushed). The
// core gets on_data_ready(transient transport error) for reads in flight, then on_queue_closed once;
// requests it still holds come back by release(). When nothing is posted and the core holds nothing,
// ops.destroy() frees the QP, the id and the registered region.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "protocol/defaults.h"
#include "protocol/rdma_cm.h"
#include "protocol/status.h"
#include "transport/address.h"
#include "transport/buffer_pool.h"
#include "transport/log_limit.h"
#include "transport/slot_fifo.h"
#include "transport/target_queue.h"
#include "transport/target_queue_base.h"

namespace rdmablk::transport::rdma {

inline constexpr uint32_t kSqeSize = 64;
inline constexpr uint32_t kCqeSize = 16;
inline constexpr unsigned kMaxChainChunks = 16;  // data WRs per chain (MDTS / device max message size)

struct RdmaTargetOptions {
  uint32_t admin_in_capsule = protocol::defaults::kAdminInCapsule;  // in-capsule data accepted on the admin queue
  uint32_t io_in_capsule = protocol::defaults::kRdmaIoInCapsule;  // ... on I/O queues (IOCCSZ = (64 + this) / 16)
  uint16_t max_queue_depth = 128;            // highest HSQSIZE + 1 accepted for an I/O queue
  uint32_t max_data_transfer = 1024 * 1024;  // longest keyed SGL accepted (MDTS); longer -> SGL length invalid
  uint64_t max_buffer_bytes = 0;             // pool buffer bytes one queue may hold; 0 = no limit
};
// Each reactor's CQ (per device) has this many entries, capped by the device's max_cqe; a queue reserves
// RECVs + send-queue depth of it and is refused (no resources) when the CQ is full.
inline constexpr uint32_t kReactorCqEntries = 16384;

// What the device allows (ibv_query_device + ibv_query_port): queried, never assumed.
struct DeviceLimits {
  uint32_t max_qp_wr = 0;
  uint32_t max_sge = 0;
  uint32_t max_qp_rd_atom = 0;       // responder resources (IRD) the device supports per QP
  uint32_t max_qp_init_rd_atom = 0;  // initiator depth (ORD) per QP
  uint32_t max_msg_size = 0;         // port max_msg_sz
  uint32_t max_cqe = 0;
};

// A queue's dimensions, from the CM request's private data and conn params and the device limits.
struct QueueSizing {
  uint16_t qid = 0;
  uint16_t sq_entries = 0;        // HSQSIZE + 1: commands the host may have outstanding
  uint16_t recv_count = 0;        // RECVs posted (= sq_entries)
  uint16_t slots = 0;             // request contexts (2 x sq_entries: a slot whose SEND is unreaped is busy)
  uint32_t sq_depth = 0;          // send queue work requests
  uint32_t in_capsule = 0;        // in-capsule data bytes per RECV
  uint32_t recv_size = 0;         // 64 + in_capsule
  uint32_t chunk = 0;             // bytes per RDMA READ/WRITE WR
  uint8_t initiator_depth = 0;    // our ORD: RDMA READs in flight (accept conn param)
  uint8_t responder_resources = 0;
  uint16_t crqsize = 0;           // accept private data
  uint32_t cq_need() const noexcept { return uint32_t{recv_count} + sq_depth; }
};

// peer_initiator_depth / peer_responder_resources: the CONNECT_REQUEST event's conn params (already in
// our point of view: initiator_depth = READs the host lets us have in flight). Fails with the binding's
// reject status.
tl::expected<QueueSizing, protocol::rdma_cm::CmError> size_queue(const protocol::rdma_cm::ConnectRequest& req,
                                                                uint8_t peer_initiator_depth,
                                                                uint8_t peer_responder_resources,
                                                                const DeviceLimits& dev,
                                                                const RdmaTargetOptions& opts) noexcept;

// The verbs a queue uses. Real: the connection's QP; tests: a fake that records the WRs.
class RdmaQpOps {
 public:
  virtual ~RdmaQpOps() = default;
  virtual int post_send(ibv_send_wr* wr) noexcept = 0;  // 0 or errno
  virtual int post_recv(ibv_recv_wr* wr) noexcept = 0;
  virtual void disconnect() noexcept = 0;  // rdma_disconnect + QP to error: everything posted flushes
  virtual void destroy() noexcept = 0;     // the queue is finished: free the QP, the id, and the queue
};

// What a work request id points at.
enum class WrKind : uint8_t { recv, send, read };
class RdmaTargetQueue;
struct WrCtx {
  RdmaTargetQueue* queue = nullptr;
  WrKind kind = WrKind::recv;
  uint16_t index = 0;
};

struct RdmaQueueSetup {
  QueueSizing sizing;
  uint8_t* region = nullptr;  // recv_count * recv_size bytes of RECV buffers, then slots * 16 CQE buffers
  uint32_t recv_lkey = 0;
  uint32_t pool_lkey = 0;
  uint32_t max_inline = 0;  // the QP's max_inline_data as created
  TransportAddress local;
  std::string peer;
};

// Bytes the registered region of a queue needs.
std::size_t queue_region_bytes(const QueueSizing& s) noexcept;

struct RdmaSlot : RequestSlot {
  enum class Post : uint8_t { none, read, response };
  static constexpr uint16_t kNone = 0xFFFF;
  WrCtx send_ctx{};
  WrCtx read_ctx{};
  uint8_t* rsp = nullptr;  // registered CQE buffer
  Post post = Post::none;  // waiting for send-queue room (on the pending FIFO) to post this
  bool read_inflight = false;  // a READ chain is posted (the buffer is the device's until it completes)
  bool send_inflight = false;
  bool keyed = false;
  bool invalidate = false;
  uint16_t recv = kNone;  // RECV buffer held (in-capsule data)
  uint16_t next = kNone;  // pending FIFO
  uint32_t read_wrs = 0;
  uint32_t send_wrs = 0;
  uint64_t raddr = 0;
  uint32_t rkey = 0;
};

class RdmaTargetQueue final : public TargetQueueBase<RdmaTargetQueue, RdmaSlot> {
 public:
  RdmaTargetQueue(RdmaQpOps& ops, BufferPool& pool, TargetQueueHandler& handler, const RdmaTargetOptions& opts,
                  const RdmaQueueSetup& setup);
  ~RdmaTargetQueue() override;
  RdmaTargetQueue(const RdmaTargetQueue&) = delete;
  RdmaTargetQueue& operator=(const RdmaTargetQueue&) = delete;

  // Post the RECVs (before rdma_accept). False when posting failed (the caller rejects).
  bool post_initial_recvs() noexcept;
  // The connection is accepted: tell the core.
  void start() noexcept;
  // A work completion whose wr_id is one of this queue's WrCtx.
  void on_completion(const WrCtx& ctx, const ibv_wc& wc) noexcept;
  // The connection went away (CM event) or could not be established.
  void connection_lost(const char* why) noexcept;

  TransportType transport_type() const noexcept override { return TransportType::rdma; }

  // Introspection (tests, logs).
  uint32_t sq_used() const noexcept { return sq_used_; }
  unsigned pending_count() const noexcept;
  unsigned recvs_posted() const noexcept { return recv_outstanding_; }
  const QueueSizing& sizing() const noexcept { return sizing_; }

 private:
  friend class TargetQueueBase<RdmaTargetQueue, RdmaSlot>;
  using Slot = RdmaSlot;
  using Post = RdmaSlot::Post;
  static constexpr uint16_t kNone = RdmaSlot::kNone;

  struct Recv {
    WrCtx ctx{};
    uint8_t* buf = nullptr;
    bool posted = false;
  };

  // ---- TargetQueueBase hooks ----
  void start_fetch(Slot& s) noexcept { queue_post(s, Post::read); }
  void start_send(Slot& s) noexcept;
  void buffer_ready(Slot& s) noexcept { dispatch(s); }
  void on_recycle(Slot& s) noexcept;
  static bool buffer_in_use(const Slot& s) noexcept { return s.read_inflight || s.send_inflight; }
  bool io_idle() const noexcept { return recv_outstanding_ == 0 && send_outstanding_ == 0 && !in_completion_; }
  void destroy_queue() noexcept { ops_.destroy(); }
  void begin_close() noexcept;
  static const char* log_name() noexcept { return "nvme-rdma"; }

  uint32_t chunks(uint32_t len) const noexcept { return len == 0 ? 0 : (len + sizing_.chunk - 1) / sizing_.chunk; }
  bool repost_recv(uint16_t index) noexcept;
  bool give_back_recv(Slot& s) noexcept;
  void on_recv(Recv& r, const ibv_wc& wc) noexcept;
  void on_send_done(Slot& s, const ibv_wc& wc) noexcept;
  void on_read_done(Slot& s, const ibv_wc& wc) noexcept;
  void parse_capsule(Slot& s, uint32_t len, uint16_t recv_index) noexcept;
  void queue_post(Slot& s, Post what) noexcept;
  bool try_post(Slot& s) noexcept;
  void fill_data_wrs(const Slot& s, uint32_t n, ibv_wr_opcode op, ibv_send_wr* wrs, ibv_sge* sges) const noexcept;
  bool post_read(Slot& s) noexcept;
  bool post_response(Slot& s) noexcept;
  void run_pending() noexcept;
  void fatal(const char* what) noexcept;
  void wc_error(const ibv_wc& wc, const char* what) noexcept;

  RdmaQpOps& ops_;
  RdmaTargetOptions opts_;
  QueueSizing sizing_;
  BindingLimits limits_;
  uint32_t recv_lkey_;
  uint32_t pool_lkey_;
  bool inline_cqe_;

  bool in_completion_ = false;
  unsigned recv_outstanding_ = 0;
  unsigned send_outstanding_ = 0;  // signaled WRs posted, not completed
  uint32_t sq_used_ = 0;
  SlotFifo<&RdmaSlot::next> pending_;  // chains waiting for room in the send queue

  std::vector<Recv> recvs_;
};

// Queues alive in this process (tests wait for teardown with it).
unsigned live_rdma_target_queues() noexcept;


}  // namespace rdmablk::transport::rdma
