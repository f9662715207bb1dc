#include "transport/rdma/rdma_target.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <netdb.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <mutex>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "transport/rdma/rdma_util.h"

namespace rdmablk::transport::rdma {

namespace cm = rdmablk::protocol::rdma_cm;

namespace {

std::atomic<unsigned> g_live_contexts{0};

struct ReactorRdma;

// An IoOp with its owner: io_uring POLL_ADD on an fd.
struct FdOp {
  IoOp op;
  void* self;
};

// ---- per reactor and device: PD, pool MR, completion channel, CQ ------------------------------------

struct DeviceCq final : Poller {
  ReactorRdma* owner = nullptr;
  ibv_context* verbs = nullptr;
  ibv_pd* pd = nullptr;
  ibv_mr* pool_mr = nullptr;
  ibv_comp_channel* cc = nullptr;
  ibv_cq* cq = nullptr;
  uint32_t cq_size = 0;
  uint32_t cq_reserved = 0;
  bool notify_armed = false;
  bool fd_armed = false;
  unsigned idle_polls = 0;
  FdOp op{};

  bool poll() noexcept override;
  void arm_fd() noexcept;
  static void on_fd(IoOp* o, int res, uint32_t flags) noexcept;
  void destroy() noexcept;
};

struct ReactorRdma {
  Reactor* reactor = nullptr;
  BufferPool* pool = nullptr;
  rdma_event_channel* ch = nullptr;
  FdOp ch_op{};
  bool ch_armed = false;
  std::vector<std::unique_ptr<DeviceCq>> devices;
  unsigned refs = 0;
  bool stopping = false;
  unsigned ops_in_flight = 0;

  void arm_channel() noexcept;
  static void on_channel(IoOp* o, int res, uint32_t flags) noexcept;
  void handle_cm_events() noexcept;
  Result<DeviceCq*> device_for(ibv_context* verbs);
  void release() noexcept;
  void maybe_delete() noexcept;
};

std::mutex g_registry_mu;
std::unordered_map<Reactor*, ReactorRdma*> g_registry;

// The context of `reactor`, created on first use. Call on the reactor's thread.
Result<ReactorRdma*> acquire_context(Reactor* reactor, BufferPool* pool) {
  {
    std::lock_guard lock(g_registry_mu);
    auto it = g_registry.find(reactor);
    if (it != g_registry.end() && !it->second->stopping) {
      ++it->second->refs;
      return it->second;
    }
  }
  rdma_event_channel* ch = rdma_create_event_channel();
  if (ch == nullptr) return make_error(std::string("rdma_create_event_channel: ") + std::strerror(errno), errno);
  if (set_nonblocking(ch->fd) != 0) {
    int e = errno;
    rdma_destroy_event_channel(ch);
    return make_error(std::string("fcntl O_NONBLOCK: ") + std::strerror(e), e);
  }
  auto* rr = new ReactorRdma();
  rr->reactor = reactor;
  rr->pool = pool;
  rr->ch = ch;
  rr->ch_op.op.fn = &ReactorRdma::on_channel;
  rr->ch_op.self = rr;
  rr->refs = 1;
  {
    std::lock_guard lock(g_registry_mu);
    g_registry[reactor] = rr;
  }
  g_live_contexts.fetch_add(1, std::memory_order_relaxed);
  rr->arm_channel();
  return rr;
}

}  // namespace

unsigned live_rdma_reactor_contexts() noexcept { return g_live_contexts.load(std::memory_order_relaxed); }

// ---- the connection: QP + registered region + the queue state machine ----------------------------------

namespace {

class RdmaConnection final : public RdmaQpOps {
 public:
  RdmaConnection(ReactorRdma* rr, DeviceCq* dev, rdma_cm_id* id) : rr_(rr), dev_(dev), id_(id) {}
  ~RdmaConnection() override {
    queue_.reset();
    rr_->release();
  }
  // Our place under the connection limits (freed with the connection).
  void hold(ConnectionTicket ticket) noexcept { ticket_ = std::move(ticket); }

  // On the reactor: QP, region, RECVs, accept. On failure the caller rejects and destroys the id.
  Result<void> setup(const QueueSizing& sizing, TargetQueueHandler& handler, const RdmaTargetOptions& opts) {
    region_bytes_ = (queue_region_bytes(sizing) + 4095) / 4096 * 4096;
    region_ = static_cast<uint8_t*>(std::aligned_alloc(4096, region_bytes_));
    if (region_ == nullptr) return make_error("out of memory", ENOMEM);
    std::memset(region_, 0, region_bytes_);
    mr_ = ibv_reg_mr(dev_->pd, region_, region_bytes_, kLocalWriteAccess);
    if (mr_ == nullptr) return make_error(std::string("ibv_reg_mr: ") + std::strerror(errno), errno);
    ibv_qp_init_attr qa{};
    qa.send_cq = dev_->cq;
    qa.recv_cq = dev_->cq;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = sizing.sq_depth;
    qa.cap.max_recv_wr = sizing.recv_count;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    qa.cap.max_inline_data = kCqeSize;  // asked for; what the device grants comes back in qa.cap
    qa.sq_sig_all = 0;
    ibv_qp_init_attr ask = qa;
    if (rdma_create_qp(id_, dev_->pd, &qa) != 0) {
      qa = ask;
      qa.cap.max_inline_data = 0;  // the device may not do inline sends at all
      if (rdma_create_qp(id_, dev_->pd, &qa) != 0) {
        return make_error(std::string("rdma_create_qp: ") + std::strerror(errno), errno);
      }
    }
    qp_created_ = true;
    dev_->cq_reserved += sizing.cq_need();
    cq_need_ = sizing.cq_need();
    RdmaQueueSetup qs;
    qs.sizing = sizing;
    qs.region = region_;
    qs.recv_lkey = mr_->lkey;
    qs.pool_lkey = dev_->pool_mr->lkey;
    qs.max_inline = qa.cap.max_inline_data;
    qs.local = cm_local_address(id_);
    qs.peer = cm_peer_name(id_);
    queue_ = std::make_unique<RdmaTargetQueue>(*this, *rr_->pool, handler, opts, qs);
    if (!queue_->post_initial_recvs()) return make_error("posting the receive buffers failed", EIO);
    const auto acc = cm::make_accept(sizing.crqsize);
    rdma_conn_param param{};
    param.private_data = &acc;
    param.private_data_len = sizeof(acc);
    param.responder_resources = sizing.responder_resources;
    param.initiator_depth = sizing.initiator_depth;
    param.flow_control = 1;
    param.rnr_retry_count = 7;
    if (rdma_accept(id_, &param) != 0) return make_error(std::string("rdma_accept: ") + std::strerror(errno), errno);
    id_->context = this;
    spdlog::debug("nvme-rdma {}: queue {} accepted ({} entries, SQ {}, ORD {}, inline {})", qs.peer, sizing.qid,
                  sizing.sq_entries, sizing.sq_depth, sizing.initiator_depth, qa.cap.max_inline_data);
    queue_->start();
    return {};
  }

  // Setup failed: free what it made (the id is the caller's).
  void undo_setup() noexcept {
    queue_.reset();
    free_verbs(false);
  }

  void on_cm_event(rdma_cm_event_type type, int status) noexcept {
    switch (type) {
      case RDMA_CM_EVENT_ESTABLISHED:
        break;
      case RDMA_CM_EVENT_DISCONNECTED:
        queue_->connection_lost("host disconnected");
        break;
      case RDMA_CM_EVENT_TIMEWAIT_EXIT:
        break;
      case RDMA_CM_EVENT_DEVICE_REMOVAL:
        if (peer_error_log_allowed()) spdlog::warn("nvme-rdma {}: RDMA device removed", queue_->peer_name());
        queue_->connection_lost("device removal");
        break;
      default:
        if (peer_error_log_allowed()) {
          spdlog::warn("nvme-rdma {}: {} (status {}): closing the queue", queue_->peer_name(), rdma_event_str(type),
                       status);
        }
        queue_->connection_lost(rdma_event_str(type));
        break;
    }
  }

  RdmaTargetQueue& queue() noexcept { return *queue_; }

  // ---- RdmaQpOps ----------------------------------------------------------------------------------
  int post_send(ibv_send_wr* wr) noexcept override {
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(id_->qp, wr, &bad);
  }
  int post_recv(ibv_recv_wr* wr) noexcept override {
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(id_->qp, wr, &bad);
  }
  void disconnect() noexcept override {
    if (disconnected_) return;
    disconnected_ = true;
    rdma_disconnect(id_);  // sends DREQ and moves the QP to the error state (may fail if not connected)
    if (id_->qp != nullptr) {
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_ERR;
      ibv_modify_qp(id_->qp, &a, IBV_QP_STATE);  // make sure everything posted flushes
    }
  }
  void destroy() noexcept override {
    free_verbs(true);
    Reactor* r = rr_->reactor;
    r->post([this] { delete this; });  // not now: the queue is on the stack
  }

 private:
  ConnectionTicket ticket_;
  void free_verbs(bool destroy_id) noexcept {
    if (qp_created_) {
      rdma_destroy_qp(id_);
      qp_created_ = false;
      dev_->cq_reserved -= std::min(dev_->cq_reserved, cq_need_);
    }
    if (mr_ != nullptr) ibv_dereg_mr(mr_);
    mr_ = nullptr;
    std::free(region_);
    region_ = nullptr;
    if (destroy_id && id_ != nullptr) {
      id_->context = nullptr;
      rdma_destroy_id(id_);
      id_ = nullptr;
    }
  }

  ReactorRdma* rr_;
  DeviceCq* dev_;
  rdma_cm_id* id_;
  uint8_t* region_ = nullptr;
  std::size_t region_bytes_ = 0;
  ibv_mr* mr_ = nullptr;
  bool qp_created_ = false;
  bool disconnected_ = false;
  uint32_t cq_need_ = 0;
  std::unique_ptr<RdmaTargetQueue> queue_;
};

}  // namespace

// ---- DeviceCq -------------------------------------------------------------------------------------------

namespace {

constexpr int kPollBatch = 32;
// Empty polls before the CQ is armed and the reactor allowed to sleep (a few microseconds of spinning).
constexpr unsigned kIdlePollsBeforeArm = 64;

void dispatch_wc(const ibv_wc& wc) noexcept {
  if (wc.wr_id == 0) return;  // an unsignaled WR flushed by a QP in error: its chain's signaled WR reports
  const auto* ctx = reinterpret_cast<const WrCtx*>(static_cast<uintptr_t>(wc.wr_id));
  ctx->queue->on_completion(*ctx, wc);
}

}  // namespace

bool DeviceCq::poll() noexcept {
  ibv_wc wcs[kPollBatch];
  int n = ibv_poll_cq(cq, kPollBatch, wcs);
  if (n > 0) {
    idle_polls = 0;
    for (int i = 0; i < n; ++i) dispatch_wc(wcs[i]);
    return true;
  }
  if (n < 0 && peer_error_log_allowed()) spdlog::error("nvme-rdma: ibv_poll_cq failed: {}", n);
  if (notify_armed) return false;
  if (++idle_polls < kIdlePollsBeforeArm) return true;  // keep the reactor spinning until armed
  if (ibv_req_notify_cq(cq, 0) != 0) {
    if (peer_error_log_allowed()) spdlog::error("nvme-rdma: ibv_req_notify_cq failed");
    return true;
  }
  notify_armed = true;
  // A completion that arrived before the arm raises no event: look once more.
  n = ibv_poll_cq(cq, kPollBatch, wcs);
  if (n > 0) {
    idle_polls = 0;
    for (int i = 0; i < n; ++i) dispatch_wc(wcs[i]);
    return true;
  }
  return false;
}

void DeviceCq::arm_fd() noexcept {
  if (fd_armed || owner->stopping) return;
  io_uring_sqe* sqe = owner->reactor->sqe_for(&op.op);
  io_uring_prep_poll_add(sqe, cc->fd, POLLIN);
  fd_armed = true;
  ++owner->ops_in_flight;
}

void DeviceCq::on_fd(IoOp* o, int res, uint32_t /*flags*/) noexcept {
  auto* d = static_cast<DeviceCq*>(reinterpret_cast<FdOp*>(o)->self);
  d->fd_armed = false;
  ReactorRdma* rr = d->owner;
  --rr->ops_in_flight;
  if (rr->stopping) {
    rr->maybe_delete();
    return;
  }
  if (res >= 0) {
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    unsigned events = 0;
    while (ibv_get_cq_event(d->cc, &ev_cq, &ev_ctx) == 0) ++events;
    if (events != 0) ibv_ack_cq_events(d->cq, events);
    d->notify_armed = false;
    d->idle_polls = 0;
  }
  d->arm_fd();
}

void DeviceCq::destroy() noexcept {
  if (cq != nullptr) ibv_destroy_cq(cq);
  if (cc != nullptr) ibv_destroy_comp_channel(cc);
  if (pool_mr != nullptr) ibv_dereg_mr(pool_mr);
  if (pd != nullptr) ibv_dealloc_pd(pd);
  cq = nullptr;
  cc = nullptr;
  pool_mr = nullptr;
  pd = nullptr;
}

// ---- ReactorRdma ----------------------------------------------------------------------------------------

void ReactorRdma::arm_channel() noexcept {
  if (ch_armed || stopping) return;
  io_uring_sqe* sqe = reactor->sqe_for(&ch_op.op);
  io_uring_prep_poll_add(sqe, ch->fd, POLLIN);
  ch_armed = true;
  ++ops_in_flight;
}

void ReactorRdma::on_channel(IoOp* o, int res, uint32_t /*flags*/) noexcept {
  auto* rr = static_cast<ReactorRdma*>(reinterpret_cast<FdOp*>(o)->self);
  rr->ch_armed = false;
  --rr->ops_in_flight;
  if (rr->stopping) {
    rr->maybe_delete();
    return;
  }
  if (res >= 0) rr->handle_cm_events();
  rr->arm_channel();
}

void ReactorRdma::handle_cm_events() noexcept {
  rdma_cm_event* ev = nullptr;
  while (rdma_get_cm_event(ch, &ev) == 0) {
    auto* conn = static_cast<RdmaConnection*>(ev->id != nullptr ? ev->id->context : nullptr);
    const rdma_cm_event_type type = ev->event;
    const int status = ev->status;
    rdma_ack_cm_event(ev);
    if (conn != nullptr) conn->on_cm_event(type, status);
  }
}

Result<DeviceCq*> ReactorRdma::device_for(ibv_context* verbs) {
  for (auto& d : devices) {
    if (d->verbs == verbs) return d.get();
  }
  auto d = std::make_unique<DeviceCq>();
  d->owner = this;
  d->verbs = verbs;
  d->op.op.fn = &DeviceCq::on_fd;
  d->op.self = d.get();
  auto fail = [&](const char* what) -> Result<DeviceCq*> {
    int e = errno;
    d->destroy();
    return make_error(std::string(what) + ": " + std::strerror(e), e);
  };
  ibv_device_attr attr{};
  if (ibv_query_device(verbs, &attr) != 0) return fail("ibv_query_device");
  d->pd = ibv_alloc_pd(verbs);
  if (d->pd == nullptr) return fail("ibv_alloc_pd");
  const iovec region = pool->region();
  // The target only reads into and writes from pool buffers: no remote access to them.
  d->pool_mr = ibv_reg_mr(d->pd, region.iov_base, region.iov_len, kLocalWriteAccess);
  if (d->pool_mr == nullptr) return fail("ibv_reg_mr (buffer pool)");
  d->cc = ibv_create_comp_channel(verbs);
  if (d->cc == nullptr) return fail("ibv_create_comp_channel");
  if (set_nonblocking(d->cc->fd) != 0) return fail("fcntl O_NONBLOCK");
  d->cq_size = static_cast<uint32_t>(std::clamp<int>(attr.max_cqe, 1, static_cast<int>(kReactorCqEntries)));
  d->cq = ibv_create_cq(verbs, static_cast<int>(d->cq_size), nullptr, d->cc, 0);
  if (d->cq == nullptr) return fail("ibv_create_cq");
  reactor->add_poller(d.get());
  d->arm_fd();
  devices.push_back(std::move(d));
  return devices.back().get();
}

void ReactorRdma::release() noexcept {
  if (refs == 0 || --refs != 0) return;
  stopping = true;
  {
    std::lock_guard lock(g_registry_mu);
    auto it = g_registry.find(reactor);
    if (it != g_registry.end() && it->second == this) g_registry.erase(it);
  }
  for (auto& d : devices) {
    reactor->remove_poller(d.get());
    if (d->fd_armed) {
      io_uring_sqe* sqe = reactor->sqe();
      io_uring_prep_cancel(sqe, &d->op.op, 0);
      io_uring_sqe_set_data64(sqe, 0);
    }
  }
  if (ch_armed) {
    io_uring_sqe* sqe = reactor->sqe();
    io_uring_prep_cancel(sqe, &ch_op.op, 0);
    io_uring_sqe_set_data64(sqe, 0);
  }
  maybe_delete();
}

void ReactorRdma::maybe_delete() noexcept {
  if (!stopping || ops_in_flight != 0) return;
  for (auto& d : devices) {
    // Events raised but not yet read must be acked before the CQ goes.
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    unsigned events = 0;
    while (ibv_get_cq_event(d->cc, &ev_cq, &ev_ctx) == 0) ++events;
    if (events != 0) ibv_ack_cq_events(d->cq, events);
    d->destroy();
  }
  devices.clear();
  rdma_destroy_event_channel(ch);
  g_live_contexts.fetch_sub(1, std::memory_order_relaxed);
  delete this;
}

// ---- listener -------------------------------------------------------------------------------------------

struct RdmaListener::Impl final : ListenerHome {
  std::vector<ReactorSlot> reactors;
  TargetQueueHandler* handler = nullptr;
  RdmaTargetOptions opts;
  rdma_event_channel* ch = nullptr;
  rdma_cm_id* id = nullptr;
  FdOp op{};
  bool armed = false;
  bool stopping = false;
  std::size_t next = 0;
  std::map<ibv_context*, DeviceLimits> limits;
  std::string where;
  std::shared_ptr<ConnectionGate> gate;
  unsigned gate_listener = 0;
  // The reference each reactor's context holds for this listener (set and cleared on that reactor).
  std::shared_ptr<std::vector<ReactorRdma*>> contexts;

  Reactor& home() const noexcept override { return *reactors[0].reactor; }
  void start_on_reactor() noexcept override { arm(); }

  void arm() noexcept {
    if (armed || stopping) return;
    io_uring_sqe* sqe = home().sqe_for(&op.op);
    io_uring_prep_poll_add(sqe, ch->fd, POLLIN);
    armed = true;
  }

  static void on_cqe(IoOp* o, int res, uint32_t /*flags*/) noexcept {
    auto* self = static_cast<Impl*>(reinterpret_cast<FdOp*>(o)->self);
    self->armed = false;
    if (self->stopping) {
      self->finish_stop();
      return;
    }
    if (res >= 0) self->handle_events();
    self->arm();
  }

  void handle_events() noexcept {
    rdma_cm_event* ev = nullptr;
    while (!stopping && rdma_get_cm_event(ch, &ev) == 0) {
      if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
        on_connect_request(ev);  // acks
        continue;
      }
      const rdma_cm_event_type type = ev->event;
      const bool ours = ev->id == id;
      rdma_ack_cm_event(ev);
      if (ours && type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
        spdlog::error("nvme-rdma: listener {}: RDMA device removed", where);
      } else if (!ours) {
        spdlog::debug("nvme-rdma: listener {}: {} for a queue not yet handed off", where, rdma_event_str(type));
      }
    }
  }

  const DeviceLimits* limits_for(ibv_context* verbs, uint8_t port) noexcept {
    auto it = limits.find(verbs);
    if (it != limits.end()) return &it->second;
    ibv_device_attr a{};
    ibv_port_attr pa{};
    if (ibv_query_device(verbs, &a) != 0 || ibv_query_port(verbs, port, &pa) != 0) return nullptr;
    DeviceLimits l;
    l.max_qp_wr = static_cast<uint32_t>(std::max(a.max_qp_wr, 0));
    l.max_sge = static_cast<uint32_t>(std::max(a.max_sge, 0));
    l.max_qp_rd_atom = static_cast<uint32_t>(std::max(a.max_qp_rd_atom, 0));
    l.max_qp_init_rd_atom = static_cast<uint32_t>(std::max(a.max_qp_init_rd_atom, 0));
    l.max_msg_size = pa.max_msg_sz;
    l.max_cqe = std::min<uint32_t>(static_cast<uint32_t>(std::max(a.max_cqe, 0)), kReactorCqEntries);
    spdlog::info("nvme-rdma: device {}: max_qp_wr {}, max_sge {}, max_qp_rd_atom {}, max_qp_init_rd_atom {}, "
                 "max_msg_sz {}, max_cqe {}",
                 ibv_get_device_name(verbs->device), l.max_qp_wr, l.max_sge, l.max_qp_rd_atom,
                 l.max_qp_init_rd_atom, l.max_msg_size, a.max_cqe);
    return &limits.emplace(verbs, l).first->second;
  }

  void on_connect_request(rdma_cm_event* ev) noexcept {
    rdma_cm_id* cid = ev->id;
    cid->context = nullptr;
    std::array<uint8_t, 64> pdata{};
    const std::size_t plen = std::min<std::size_t>(ev->param.conn.private_data_len, pdata.size());
    if (ev->param.conn.private_data != nullptr) std::memcpy(pdata.data(), ev->param.conn.private_data, plen);
    const uint8_t peer_ird = ev->param.conn.responder_resources;
    const uint8_t peer_ord = ev->param.conn.initiator_depth;
    rdma_ack_cm_event(ev);
    const std::string peer = cm_peer_name(cid);

    auto* ticket = new (std::nothrow) ConnectionTicket();
    if (ticket == nullptr) return refuse(cid, peer, cm::CmError{cm::RejectStatus::no_resources, 0, "out of memory"});
    std::string why;
    if (gate && !gate->admit(gate_listener, host_of(rdma_get_peer_addr(cid)), *ticket, why)) {
      delete ticket;
      if (peer_error_log_allowed()) spdlog::warn("nvme-rdma {}: connection from {} refused: {}", where, peer, why);
      const auto rej = cm::make_reject(cm::RejectStatus::no_resources);
      rdma_reject(cid, &rej, sizeof(rej));
      rdma_destroy_id(cid);
      return;
    }
    std::unique_ptr<ConnectionTicket> held(ticket);

    cm::ConnectLimits cl;
    cl.max_io_queue_entries = opts.max_queue_depth;
    auto req = cm::decode_request(plen != 0 ? pdata.data() : nullptr, plen, cl);
    if (!req) return refuse(cid, peer, req.error());
    const DeviceLimits* dl = limits_for(cid->verbs, cid->port_num);
    if (dl == nullptr) {
      return refuse(cid, peer, cm::CmError{cm::RejectStatus::no_resources, 0, "cannot query the RDMA device"});
    }
    // In our point of view: initiator_depth = READs the host lets us issue (its responder resources).
    auto sizing = size_queue(*req, peer_ord, peer_ird, *dl, opts);
    if (!sizing) return refuse(cid, peer, sizing.error());
    const ReactorSlot where_to = reactors[next++ % reactors.size()];
    TargetQueueHandler* h = handler;
    const RdmaTargetOptions o = opts;
    const QueueSizing s = *sizing;
    try {
      where_to.reactor->post([cid, where_to, h, o, s, peer, t = held.get()] {
        accept_on_reactor(cid, where_to, *h, o, s, peer, std::unique_ptr<ConnectionTicket>(t));
      });
      held.release();
    } catch (...) {
      refuse(cid, peer, cm::CmError{cm::RejectStatus::no_resources, 0, "out of memory"});
    }
  }

  static void refuse(rdma_cm_id* cid, const std::string& peer, const cm::CmError& e) noexcept {
    if (peer_error_log_allowed()) {
      spdlog::warn("nvme-rdma {}: refusing queue: {} ({}, offset {})", peer, e.what,
                   cm::reject_status_name(e.status), e.offset);
    }
    const auto rej = cm::make_reject(e.status);
    rdma_reject(cid, &rej, sizeof(rej));
    rdma_destroy_id(cid);
  }

  static void accept_on_reactor(rdma_cm_id* cid, ReactorSlot where_to, TargetQueueHandler& handler,
                                const RdmaTargetOptions& opts, const QueueSizing& sizing,
                                const std::string& peer, std::unique_ptr<ConnectionTicket> ticket) noexcept {
    auto rr = acquire_context(where_to.reactor, where_to.pool);
    if (!rr) {
      if (peer_error_log_allowed()) spdlog::error("nvme-rdma: reactor context: {}", rr.error().message);
      return refuse(cid, peer, cm::CmError{cm::RejectStatus::no_resources, 0, "no reactor context"});
    }
    ReactorRdma* ctx = *rr;
    if (rdma_migrate_id(cid, ctx->ch) != 0) {
      ctx->release();
      return refuse(cid, peer, cm::CmError{cm::RejectStatus::no_resources, 0, "rdma_migrate_id failed"});
    }
    auto dev = ctx->device_for(cid->verbs);
    if (!dev) {
      if (peer_error_log_allowed()) spdlog::error("nvme-rdma: device setup: {}", dev.error().message);
      ctx->release();
      return refuse(cid, peer, cm::CmError{cm::RejectStatus::no_resources, 0, "device setup failed"});
    }
    if ((*dev)->cq_reserved + sizing.cq_need() > (*dev)->cq_size) {
      ctx->release();
      return refuse(cid, peer, cm::CmError{cm::RejectStatus::no_resources, 0, "reactor completion queue full"});
    }
    auto* conn = new (std::nothrow) RdmaConnection(ctx, *dev, cid);
    if (conn == nullptr) {
      ctx->release();
      return refuse(cid, peer, cm::CmError{cm::RejectStatus::no_resources, 0, "out of memory"});
    }
    conn->hold(std::move(*ticket));
    Result<void> ok = make_error("exception", ENOMEM);
    try {
      ok = conn->setup(sizing, handler, opts);
    } catch (...) {
    }
    if (!ok) {
      if (peer_error_log_allowed()) spdlog::warn("nvme-rdma {}: cannot set up the queue: {}", peer, ok.error().message);
      conn->undo_setup();
      cid->context = nullptr;
      delete conn;  // releases ctx
      refuse(cid, peer, cm::CmError{cm::RejectStatus::no_resources, 0, "queue setup failed"});
    }
  }

  void stop_on_reactor() noexcept override {
    stopping = true;
    if (id != nullptr) {
      rdma_destroy_id(id);
      id = nullptr;
    }
    if (!armed) {
      finish_stop();
      return;
    }
    io_uring_sqe* sqe = home().sqe();
    io_uring_prep_cancel(sqe, &op.op, 0);
    io_uring_sqe_set_data64(sqe, 0);
  }

  void finish_stop() noexcept {
    // Connect requests already handed to a reactor were migrated off this channel or will fail there.
    rdma_destroy_event_channel(ch);
    ch = nullptr;
    for (std::size_t i = 0; i < reactors.size(); ++i) {
      Reactor* re = reactors[i].reactor;
      auto held = contexts;
      re->post([held, i] {
        ReactorRdma* rr = (*held)[i];
        (*held)[i] = nullptr;
        if (rr != nullptr) rr->release();
      });
    }
    delete this;
  }
};

Result<std::unique_ptr<RdmaListener>> RdmaListener::create(const TransportAddress& address,
                                                          std::vector<ReactorSlot> reactors,
                                                          TargetQueueHandler& handler, const RdmaTargetOptions& opts,
                                                          std::shared_ptr<ConnectionGate> gate) {
  if (auto valid = check_reactors(reactors, "RDMA"); !valid) return tl::unexpected(valid.error());
  if (opts.max_data_transfer == 0 || opts.max_data_transfer > protocol::kSglKeyedMaxLength) {
    return make_error("RDMA max data transfer must be 1..16 MiB - 1", EINVAL);
  }
  const std::string where = (address.traddr.empty() ? "*" : address.traddr) + ":" + std::to_string(address.trsvcid);
  auto sa = resolve_address(address, true);
  if (!sa) return tl::unexpected(sa.error());
  rdma_event_channel* ch = rdma_create_event_channel();
  if (ch == nullptr) {
    int e = errno;
    return make_error("cannot listen on rdma " + where + ": rdma_create_event_channel: " + std::strerror(e) +
                          " (no RDMA support on this machine?)",
                      e);
  }
  if (set_nonblocking(ch->fd) != 0) {
    int e = errno;
    rdma_destroy_event_channel(ch);
    return make_error("fcntl: " + std::string(std::strerror(e)), e);
  }
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) {
    int e = errno;
    rdma_destroy_event_channel(ch);
    return make_error("rdma_create_id: " + std::string(std::strerror(e)), e);
  }
  if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&sa->storage)) != 0 || rdma_listen(id, 1024) != 0) {
    int e = errno;
    rdma_destroy_id(id);
    rdma_destroy_event_channel(ch);
    return make_error("cannot listen on rdma " + where + ": " + std::strerror(e) +
                          (e == EADDRNOTAVAIL || e == ENODEV ? " (no RDMA device on that address?)" : ""),
                      e);
  }
  std::unique_ptr<RdmaListener> l(new RdmaListener());
  l->address_ = address;
  l->address_.type = TransportType::rdma;
  l->address_.trsvcid = ntohs(rdma_get_src_port(id));
  auto* impl = new Impl();
  impl->handler = &handler;
  impl->opts = opts;
  impl->ch = ch;
  impl->id = id;
  impl->op.op.fn = &Impl::on_cqe;
  impl->op.self = impl;
  impl->where = where;
  if (gate) {
    impl->gate_listener = gate->add_listener("rdma " + where);  // apart from a TCP listener on the same port
    impl->gate = std::move(gate);
  }
  // Each reactor keeps its verbs context while the listener lives (no PD/CQ/MR churn per connection).
  impl->contexts = std::make_shared<std::vector<ReactorRdma*>>(reactors.size(), nullptr);
  for (std::size_t i = 0; i < reactors.size(); ++i) {
    Reactor* re = reactors[i].reactor;
    BufferPool* pool = reactors[i].pool;
    auto held = impl->contexts;
    re->post([re, pool, held, i] {
      auto c = acquire_context(re, pool);
      if (c) {
        (*held)[i] = *c;
      } else {
        spdlog::error("nvme-rdma: reactor context: {}", c.error().message);
      }
    });
  }
  impl->reactors = std::move(reactors);
  l->home_ = impl;
  spdlog::info("nvme-rdma: listening on {}:{}", address.traddr.empty() ? "*" : address.traddr, l->address_.trsvcid);
  return l;
}

}  // namespace rdmablk::transport::rdma
