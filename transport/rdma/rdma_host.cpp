#include "transport/rdma/rdma_host.h"

#include <poll.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <spdlog/spdlog.h>

#include "protocol/defaults.h"
#include "protocol/rdma_cm.h"
#include "protocol/sgl.h"
#include "transport/host_queue_base.h"
#include "transport/rdma/rdma_queue.h"
#include "transport/rdma/rdma_util.h"

namespace rdmablk::transport::rdma {

namespace p = rdmablk::protocol;
namespace cm = rdmablk::protocol::rdma_cm;

namespace {

using Clock = HostClock;
std::atomic<unsigned> g_live_host_queues{0};

// Capsule buffer capacity per entry beyond the SQE (protocol/defaults.h).
constexpr uint32_t kHostMaxInCapsule = protocol::defaults::kRdmaHostInCapsuleCap;
constexpr int kPollBatch = 32;
constexpr uint64_t kRecvTag = 1ull << 32;  // wr_id: kRecvTag | index for RECVs, cid for SENDs
constexpr int kDataAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;

// The next CM event on a non-blocking channel, waiting until `deadline`. Null on timeout (errno ETIMEDOUT).
rdma_cm_event* next_cm_event(rdma_event_channel* ch, Clock::time_point deadline) noexcept {
  for (;;) {
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(ch, &ev) == 0) return ev;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return nullptr;
    pollfd pfd{ch->fd, POLLIN, 0};
    int rc = ::poll(&pfd, 1, remaining_ms(deadline));
    if (rc == 0) {
      errno = ETIMEDOUT;
      return nullptr;
    }
    if (rc < 0 && errno != EINTR) return nullptr;
  }
}

struct HostSlot {
  HostCommand* cmd = nullptr;
  ibv_mr* own_mr = nullptr;  // registered for this command only
  bool active = false;
};

struct UserMr {
  uintptr_t start = 0;
  uintptr_t end = 0;
  ibv_mr* mr = nullptr;
};

class RdmaHostQueue final : public HostQueueBase<RdmaHostQueue, HostSlot> {
  friend class HostQueueBase<RdmaHostQueue, HostSlot>;

 public:
  explicit RdmaHostQueue(const HostQueueOptions& opts) : HostQueueBase(opts) {
    in_capsule_limit_ = 0;  // set once connected
    g_live_host_queues.fetch_add(1);
  }
  ~RdmaHostQueue() override {
    close();
    g_live_host_queues.fetch_sub(1);
  }

  Result<void> connect() {
    const auto deadline = Clock::now() + opts_.connect_timeout;
    if (opts_.entries < 2) return fail_connect("a queue needs at least 2 entries", EINVAL);
    if (opts_.address.traddr.empty()) return make_error("no address to connect to", EINVAL);
    if (auto r = resolve_route(deadline); !r) return r;
    ibv_device_attr attr{};
    ibv_port_attr pattr{};
    if (ibv_query_device(id_->verbs, &attr) != 0) return fail_connect("ibv_query_device", errno);
    if (ibv_query_port(id_->verbs, id_->port_num, &pattr) != 0) return fail_connect("ibv_query_port", errno);
    max_msg_ = pattr.max_msg_sz;
    entries_ = opts_.entries;
    if (static_cast<int>(entries_) > attr.max_qp_wr) entries_ = static_cast<uint16_t>(attr.max_qp_wr);
    sq_depth_ = std::min<uint32_t>(uint32_t{entries_} * 2, static_cast<uint32_t>(attr.max_qp_wr));
    if (auto r = create_verbs(attr); !r) return r;
    if (auto r = setup_capsules(nullptr); !r) return r;
    if (auto r = exchange_connect(attr, deadline); !r) return r;
    if (usable_entries_ == 0) usable_entries_ = entries_;
    mark_connected();
    return {};
  }

  // A connected queue over verbs objects made elsewhere (fakes in tests): nothing of them is destroyed.
  Result<void> adopt(const RdmaHostVerbs& v) {
    borrowed_ = true;
    pd_ = v.pd;
    cc_ = v.cc;
    cq_ = v.cq;
    qp_ = v.qp;
    max_msg_ = v.max_msg;
    entries_ = usable_entries_ = opts_.entries;
    sq_depth_ = uint32_t{entries_} * 2;
    if (auto r = setup_capsules(v.region_mr); !r) return r;
    mark_connected();
    return {};
  }

  Result<void> register_buffer(std::span<uint8_t> buf) override {
    if (pd_ == nullptr) return make_error("queue not connected", ENOTCONN);
    ibv_mr* mr = ibv_reg_mr(pd_, buf.data(), buf.size(), kDataAccess);
    if (mr == nullptr) return make_error(std::string("ibv_reg_mr: ") + std::strerror(errno), errno);
    const auto start = reinterpret_cast<uintptr_t>(buf.data());
    user_mrs_.push_back(UserMr{start, start + buf.size(), mr});
    return {};
  }

  // ---- HostQueue ----------------------------------------------------------------------------------

  p::Status submit(HostCommand& cmd) noexcept override {
    if (p::Status st = admit(cmd, nullptr); !st.ok()) return st;
    std::array<Send, 1> one{Send{prepare_slot(cmd), 0, &cmd}};
    if (!build_capsule(one[0])) return p::status::internal_error;
    return post(one);
  }

  // Both capsules in one chain of SENDs posted together: adjacent on the QP, nothing between them.
  p::Status submit_fused(HostCommand& first, HostCommand& second) noexcept override {
    if (p::Status st = admit(first, &second); !st.ok()) return st;
    const auto [c1, c2] = prepare_pair(first, second);
    std::array<Send, 2> pair{Send{c1, 0, &first}, Send{c2, 0, &second}};
    if (!build_capsule(pair[0])) return p::status::internal_error;
    if (!build_capsule(pair[1])) {
      drop_own_mr(slots_[c1]);
      return p::status::internal_error;
    }
    return post(pair);
  }

  uint16_t entries() const noexcept override { return usable_entries_ != 0 ? usable_entries_ : opts_.entries; }
  uint32_t max_transfer() const noexcept override {
    return std::min<uint32_t>(max_msg_ == 0 ? p::kSglKeyedMaxLength : max_msg_, p::kSglKeyedMaxLength);
  }
  void set_in_capsule_limit(uint32_t bytes) noexcept override { in_capsule_limit_ = std::min(bytes, kHostMaxInCapsule); }

  void close() noexcept override {
    if (closed_) return;
    closed_ = true;
    fail_outstanding(p::status::transient_transport_error);
    if (id_ != nullptr && connected_) rdma_disconnect(id_);
    connected_ = false;
    if (borrowed_) {
      std::free(region_);
      region_ = nullptr;
      return;
    }
    destroy_verbs();
  }

 private:
  // ---- connect steps ------------------------------------------------------------------------------

  Result<void> fail_connect(const std::string& what, int e) const {
    return make_error("rdma connect to " + to_uri(opts_.address) + ": " + what +
                          (e != 0 ? std::string(": ") + std::strerror(e) : ""),
                      e != 0 ? e : EIO);
  }

  // The CM event channel and id, the address and the route to the controller.
  Result<void> resolve_route(Clock::time_point deadline) {
    auto dst = resolve_address(opts_.address, false);
    if (!dst) return tl::unexpected(dst.error());
    ch_ = rdma_create_event_channel();
    if (ch_ == nullptr) return fail_connect("rdma_create_event_channel (no RDMA support here?)", errno);
    if (set_nonblocking(ch_->fd) != 0) return fail_connect("fcntl", errno);
    if (rdma_create_id(ch_, &id_, this, RDMA_PS_TCP) != 0) return fail_connect("rdma_create_id", errno);
    const int tmo = std::max(remaining_ms(deadline), 1);
    if (rdma_resolve_addr(id_, nullptr, reinterpret_cast<sockaddr*>(&dst->storage), tmo) != 0) {
      return fail_connect("rdma_resolve_addr", errno);
    }
    if (auto r = expect_event(RDMA_CM_EVENT_ADDR_RESOLVED, deadline); !r) return r;
    if (rdma_resolve_route(id_, std::max(remaining_ms(deadline), 1)) != 0) {
      return fail_connect("rdma_resolve_route", errno);
    }
    return expect_event(RDMA_CM_EVENT_ROUTE_RESOLVED, deadline);
  }

  // PD, completion channel, one CQ for sends and receives, the RC QP.
  Result<void> create_verbs(const ibv_device_attr& attr) {
    pd_ = ibv_alloc_pd(id_->verbs);
    if (pd_ == nullptr) return fail_connect("ibv_alloc_pd", errno);
    cc_ = ibv_create_comp_channel(id_->verbs);
    if (cc_ == nullptr) return fail_connect("ibv_create_comp_channel", errno);
    if (set_nonblocking(cc_->fd) != 0) return fail_connect("fcntl", errno);
    const int cqe = static_cast<int>(std::min<uint32_t>(uint32_t{entries_} + sq_depth_, static_cast<uint32_t>(attr.max_cqe)));
    cq_ = ibv_create_cq(id_->verbs, cqe, nullptr, cc_, 0);
    if (cq_ == nullptr) return fail_connect("ibv_create_cq", errno);
    ibv_qp_init_attr qa{};
    qa.send_cq = cq_;
    qa.recv_cq = cq_;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = sq_depth_;
    qa.cap.max_recv_wr = entries_;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    if (rdma_create_qp(id_, pd_, &qa) != 0) return fail_connect("rdma_create_qp", errno);
    qp_ = id_->qp;
    return {};
  }

  // One registered region: a capsule buffer per entry, then a CQE buffer per entry, each CQE's RECV posted.
  Result<void> setup_capsules(ibv_mr* region_mr) {
    capsule_size_ = kSqeSize + kHostMaxInCapsule;
    region_bytes_ = (std::size_t{entries_} * capsule_size_ + std::size_t{entries_} * kCqeSize + 4095) / 4096 * 4096;
    region_ = static_cast<uint8_t*>(std::aligned_alloc(4096, region_bytes_));
    if (region_ == nullptr) return fail_connect("out of memory", ENOMEM);
    std::memset(region_, 0, region_bytes_);
    region_mr_ = region_mr != nullptr ? region_mr : ibv_reg_mr(pd_, region_, region_bytes_, kLocalWriteAccess);
    if (region_mr_ == nullptr) return fail_connect("ibv_reg_mr", errno);
    init_slots(entries_, entries_);
    for (uint16_t i = 0; i < entries_; ++i) {
      if (post_recv(i) != 0) return fail_connect("ibv_post_recv", errno);
    }
    return {};
  }

  // rdma_connect with the binding's private data, then the accept (CRQSIZE may shrink the queue) or why not.
  Result<void> exchange_connect(const ibv_device_attr& attr, Clock::time_point deadline) {
    const auto req = cm::make_request(opts_.qid, entries_);
    rdma_conn_param param{};
    param.private_data = &req;
    param.private_data_len = sizeof(req);
    param.responder_resources = static_cast<uint8_t>(std::clamp(attr.max_qp_rd_atom, 0, 255));
    param.initiator_depth = 0;
    param.flow_control = 1;
    param.retry_count = 7;
    param.rnr_retry_count = 7;
    if (rdma_connect(id_, &param) != 0) return fail_connect("rdma_connect", errno);
    rdma_cm_event* ev = next_cm_event(ch_, deadline);
    if (ev == nullptr) return fail_connect("waiting for the accept", errno);
    const rdma_cm_event_type type = ev->event;
    const int status = ev->status;
    if (type == RDMA_CM_EVENT_ESTABLISHED) {
      auto crq = cm::decode_accept(ev->param.conn.private_data, ev->param.conn.private_data_len);
      rdma_ack_cm_event(ev);
      if (!crq) return fail_connect(std::string("bad accept private data: ") + crq.error().what, EPROTO);
      if (*crq < entries_) usable_entries_ = *crq;  // the controller provides fewer SQ entries
      return {};
    }
    if (type == RDMA_CM_EVENT_REJECTED) {
      auto st = cm::decode_reject(ev->param.conn.private_data, ev->param.conn.private_data_len);
      rdma_ack_cm_event(ev);
      if (st) return fail_connect(std::string("rejected: ") + cm::reject_status_name(*st), ECONNREFUSED);
      return fail_connect("rejected (status " + std::to_string(status) + ")", ECONNREFUSED);
    }
    rdma_ack_cm_event(ev);
    return fail_connect(std::string(rdma_event_str(type)) + " (status " + std::to_string(status) + ")", ECONNREFUSED);
  }

  void mark_connected() noexcept {
    // CIDs beyond what the controller accepts are never handed out.
    init_slots(entries_, usable_entries_);
    connected_ = true;
    in_capsule_limit_ = std::min(opts_.in_capsule_limit, kHostMaxInCapsule);
  }

  Result<void> expect_event(rdma_cm_event_type want, Clock::time_point deadline) {
    rdma_cm_event* ev = next_cm_event(ch_, deadline);
    if (ev == nullptr) return fail_connect(std::string("waiting for ") + rdma_event_str(want), errno);
    const rdma_cm_event_type got = ev->event;
    const int status = ev->status;
    rdma_ack_cm_event(ev);
    if (got != want) {
      return make_error("rdma connect to " + to_uri(opts_.address) + ": " + rdma_event_str(got) + " (status " +
                            std::to_string(status) + ")",
                        status < 0 ? -status : EHOSTUNREACH);
    }
    return {};
  }

  void destroy_verbs() noexcept {
    if (qp_ != nullptr) rdma_destroy_qp(id_);
    qp_ = nullptr;
    for (UserMr& m : user_mrs_) ibv_dereg_mr(m.mr);
    user_mrs_.clear();
    if (region_mr_ != nullptr) ibv_dereg_mr(region_mr_);
    region_mr_ = nullptr;
    std::free(region_);
    region_ = nullptr;
    if (cq_ != nullptr) {
      ack_cq_events();
      ibv_destroy_cq(cq_);
    }
    cq_ = nullptr;
    if (cc_ != nullptr) ibv_destroy_comp_channel(cc_);
    cc_ = nullptr;
    if (pd_ != nullptr) ibv_dealloc_pd(pd_);
    pd_ = nullptr;
    if (id_ != nullptr) rdma_destroy_id(id_);
    id_ = nullptr;
    if (ch_ != nullptr) rdma_destroy_event_channel(ch_);
    ch_ = nullptr;
  }

  // ---- data path ----------------------------------------------------------------------------------

  // The rkey the target moves the command's data with: a registered region's, else an MR for this command.
  // False when the buffer cannot be registered.
  bool data_rkey(HostCommand& cmd, HostSlot& s, uint32_t& rkey) noexcept {
    const auto start = reinterpret_cast<uintptr_t>(cmd.data.data());
    const std::size_t len = cmd.data.size();
    rkey = 0;
    for (const UserMr& m : user_mrs_) {
      if (start >= m.start && len <= m.end - start) {
        rkey = m.mr->rkey;
        break;
      }
    }
    if (rkey != 0) return true;
    s.own_mr = ibv_reg_mr(pd_, cmd.data.data(), len, kDataAccess);
    if (s.own_mr == nullptr) {
      if (spdlog::should_log(spdlog::level::warn)) {
        spdlog::warn("nvme-rdma {}: cannot register a {}-byte buffer: {}", to_uri(opts_.address), len,
                     std::strerror(errno));
      }
      return false;
    }
    rkey = s.own_mr->rkey;
    return true;
  }

  // A command on its way to the QP: its slot and the bytes of its capsule (SQE + in-capsule data).
  struct Send {
    uint16_t cid;
    uint32_t len;
    HostCommand* cmd;
  };

  // Room for `cmd` (and `second`, a fused pair's other half): free CIDs, send queue space, transfer sizes.
  p::Status admit(const HostCommand& cmd, const HostCommand* second) noexcept {
    if (error_ != 0 || !connected_) return p::status::transient_transport_error;
    const unsigned need = second != nullptr ? 2 : 1;
    if (free_cids_.size() < need) return p::status::command_interrupted;
    if (sends_outstanding_ + need > sq_depth_) {
      reap();
      if (error_ != 0) return p::status::transient_transport_error;
      if (sends_outstanding_ + need > sq_depth_) return p::status::command_interrupted;
    }
    for (const HostCommand* c : {&cmd, second}) {
      if (c != nullptr && moves_data(*c) && c->data.size() > max_transfer()) return p::status::data_sgl_length_invalid;
    }
    return p::status::success;
  }

  uint8_t* capsule_of(uint16_t cid) const noexcept { return region_ + std::size_t{cid} * capsule_size_; }

  // The capsule of the command in prepare_slot()'s slot: data in it, or a keyed SGL (false: the buffer
  // cannot be registered).
  bool build_capsule(Send& out) noexcept {
    HostCommand& cmd = *out.cmd;
    uint8_t* capsule = capsule_of(out.cid);
    const std::size_t len = cmd.data.size();
    out.len = kSqeSize;
    if (fits_in_capsule(cmd)) {
      cmd.sqe.hdr.dptr = p::make_in_capsule_sgl(0, static_cast<uint32_t>(len));
      std::memcpy(capsule + kSqeSize, cmd.data.data(), len);
      out.len += static_cast<uint32_t>(len);
    } else if (moves_data(cmd)) {
      uint32_t rkey = 0;
      if (!data_rkey(cmd, slots_[out.cid], rkey)) return false;
      cmd.sqe.hdr.dptr = p::make_keyed_sgl(reinterpret_cast<uintptr_t>(cmd.data.data()), static_cast<uint32_t>(len),
                                           rkey, false);
    } else {
      cmd.sqe.hdr.dptr = p::make_keyed_sgl(0, 0, 0, false);  // no data: a null keyed descriptor
    }
    std::memcpy(capsule, &cmd.sqe, kSqeSize);
    return true;
  }

  void drop_own_mr(HostSlot& s) noexcept {
    if (s.own_mr != nullptr) ibv_dereg_mr(s.own_mr);
    s.own_mr = nullptr;
  }

  // One ibv_post_send for all of `sends` (one command, or a fused pair chained: one unit), then they are
  // outstanding. A failed post fails the queue.
  template <std::size_t N>
  p::Status post(std::array<Send, N>& sends) noexcept {
    std::array<ibv_sge, N> sge{};
    std::array<ibv_send_wr, N> wr{};
    for (std::size_t i = 0; i < N; ++i) {
      sge[i] = ibv_sge{reinterpret_cast<uintptr_t>(capsule_of(sends[i].cid)), sends[i].len, region_mr_->lkey};
      wr[i].wr_id = sends[i].cid;
      wr[i].sg_list = &sge[i];
      wr[i].num_sge = 1;
      wr[i].opcode = IBV_WR_SEND;
      wr[i].send_flags = IBV_SEND_SIGNALED;
      wr[i].next = i + 1 < N ? &wr[i + 1] : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(qp_, wr.data(), &bad); rc != 0) {
      for (Send& s : sends) drop_own_mr(slots_[s.cid]);
      fail(rc, "ibv_post_send");
      return p::status::transient_transport_error;
    }
    for (Send& s : sends) {
      activate(s.cid, *s.cmd);
      ++sends_outstanding_;
    }
    return p::status::success;
  }

  uint8_t* cqe_buffer(uint16_t index) const noexcept {
    return region_ + std::size_t{entries_} * capsule_size_ + std::size_t{index} * kCqeSize;
  }

  int post_recv(uint16_t index) noexcept {
    ibv_sge sge{reinterpret_cast<uintptr_t>(cqe_buffer(index)), kCqeSize, region_mr_->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = kRecvTag | index;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(qp_, &wr, &bad);
  }

  int reap() noexcept {
    int total = 0;
    for (;;) {
      ibv_wc wcs[kPollBatch];
      int n = ibv_poll_cq(cq_, kPollBatch, wcs);
      if (n < 0) {
        fail(EIO, "ibv_poll_cq");
        return total;
      }
      for (int i = 0; i < n; ++i) on_wc(wcs[i]);
      total += n;
      if (n < kPollBatch) return total;
    }
  }

  void on_wc(const ibv_wc& wc) noexcept {
    if ((wc.wr_id & kRecvTag) == 0) {
      if (sends_outstanding_ > 0) --sends_outstanding_;
      if (wc.status != IBV_WC_SUCCESS) fail(EIO, "SEND", &wc);
      return;
    }
    const auto index = static_cast<uint16_t>(wc.wr_id & 0xFFFF);
    if (wc.status != IBV_WC_SUCCESS) {
      fail(ECONNRESET, "RECV", &wc);
      return;
    }
    if (error_ != 0) return;
    if (wc.byte_len < kCqeSize) {
      fail(EPROTO, "CQE shorter than 16 bytes");
      return;
    }
    const auto cqe = p::load<p::Cqe>(cqe_buffer(index));
    if (post_recv(index) != 0) {
      fail(EIO, "ibv_post_recv");
      return;
    }
    const uint16_t cid = cqe.cid.get();
    if (cid >= slots_.size() || !slots_[cid].active) {
      fail(EPROTO, "CQE for a command that is not outstanding");
      return;
    }
    complete(cid, cqe);
  }

  void check_cm_events() noexcept {
    rdma_cm_event* ev = nullptr;
    while (ch_ != nullptr && rdma_get_cm_event(ch_, &ev) == 0) {
      const rdma_cm_event_type type = ev->event;
      rdma_ack_cm_event(ev);
      if (type == RDMA_CM_EVENT_DISCONNECTED || type == RDMA_CM_EVENT_DEVICE_REMOVAL ||
          type == RDMA_CM_EVENT_TIMEWAIT_EXIT) {
        fail(ECONNRESET, rdma_event_str(type));
      }
    }
  }

  void ack_cq_events() noexcept {
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    unsigned events = 0;
    while (cc_ != nullptr && ibv_get_cq_event(cc_, &ev_cq, &ev_ctx) == 0) ++events;
    if (events != 0) ibv_ack_cq_events(cq_, events);
  }

  void fail(int err, const char* what, const ibv_wc* wc = nullptr) noexcept {
    if (!set_error(err)) return;
    if (wc != nullptr && wc->status != IBV_WC_WR_FLUSH_ERR) {
      spdlog::warn("nvme-rdma {}: {} completion failed: {}", to_uri(opts_.address), what, ibv_wc_status_str(wc->status));
    } else {
      spdlog::debug("nvme-rdma {}: queue failed: {}", to_uri(opts_.address), what);
    }
    if (id_ != nullptr && connected_) rdma_disconnect(id_);
    fail_outstanding(p::status::transient_transport_error);
  }

  // ---- HostQueueBase hooks ------------------------------------------------------------------------

  static constexpr bool kDriveWhileProgress = false;  // reap() drains the CQ
  bool io_open() const noexcept { return connected_; }

  // The CM channel (a disconnect) is read by wait(), before each sleep, and by every 64th idle round here:
  // a busy-polling queue spins on the CQ without a syscall per round, and poll(0) callers, which never
  // wait, still see a disconnect.
  bool drive() noexcept {
    const int n = reap();
    if (n == 0 && (++idle_rounds_ & 63u) == 0) check_cm_events();
    return n > 0;
  }

  // Arm the CQ first (then poll once more: a completion that came before the arm raises no event), else
  // sleep on the completion channel, the CM channel and the wake fd.
  int wait(Clock::time_point deadline) noexcept {
    check_cm_events();
    if (error_ != 0) return -1;
    if (!notify_armed_) {
      if (ibv_req_notify_cq(cq_, 0) != 0) {
        fail(EIO, "ibv_req_notify_cq");
        return -1;
      }
      notify_armed_ = true;
      return 1;
    }
    pollfd pfds[3] = {{cc_->fd, POLLIN, 0}, {ch_ != nullptr ? ch_->fd : -1, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    int rc = ::poll(pfds, wake_fd_ >= 0 ? 3 : 2, remaining_ms(deadline));
    if (rc < 0 && errno != EINTR) {
      fail(errno, "poll");
      return -1;
    }
    if (rc > 0 && (pfds[2].revents & POLLIN) != 0) return 0;  // the owner has other work
    if (rc > 0 && (pfds[0].revents & POLLIN) != 0) {
      ack_cq_events();
      notify_armed_ = false;
    }
    return 1;
  }

  p::Cqe failure_cqe(uint16_t cid, p::Status st) const noexcept {
    p::Cqe cqe{};
    cqe.set_status(st);
    cqe.cid.set(cid);
    return cqe;
  }

  void release_slot(uint16_t /*cid*/, HostSlot& s) noexcept { drop_own_mr(s); }

  rdma_event_channel* ch_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* cc_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  uint8_t* region_ = nullptr;
  std::size_t region_bytes_ = 0;
  ibv_mr* region_mr_ = nullptr;
  std::vector<UserMr> user_mrs_;
  uint32_t capsule_size_ = 0;
  uint32_t sq_depth_ = 0;
  uint32_t max_msg_ = 0;
  uint16_t entries_ = 0;
  uint16_t usable_entries_ = 0;
  unsigned sends_outstanding_ = 0;
  unsigned idle_rounds_ = 0;  // drive() rounds that reaped nothing (every 64th reads the CM channel)
  bool connected_ = false;
  bool notify_armed_ = false;
  bool closed_ = false;
  bool borrowed_ = false;  // adopt(): the verbs objects are someone else's
};

}  // namespace

Result<std::unique_ptr<HostQueue>> connect_rdma_host_queue(const HostQueueOptions& opts) {
  auto q = std::make_unique<RdmaHostQueue>(opts);
  if (auto r = q->connect(); !r) return tl::unexpected(r.error());
  return std::unique_ptr<HostQueue>(std::move(q));
}

Result<void> register_host_buffer(HostQueue& queue, std::span<uint8_t> buffer) {
  auto* q = dynamic_cast<RdmaHostQueue*>(&queue);
  if (q == nullptr) return make_error("not an RDMA queue", EINVAL);
  return q->register_buffer(buffer);
}

Result<std::unique_ptr<HostQueue>> adopt_rdma_host_queue(const HostQueueOptions& opts, const RdmaHostVerbs& verbs) {
  auto q = std::make_unique<RdmaHostQueue>(opts);
  if (auto r = q->adopt(verbs); !r) return tl::unexpected(r.error());
  return std::unique_ptr<HostQueue>(std::move(q));
}

unsigned live_rdma_host_queues() noexcept { return g_live_host_queues.load(); }

}  // namespace rdmablk::transport::rdma
