// NVM I/O commands (NVM Command Set 1.0, 3): Read, Write, Flush, Write Zeroes, Dataset Management, and the
// per-reactor backend queues they run on. No locks here: an I/O queue reaches its namespaces through its
// reactor's SubsystemView and the backend queues through NsChannels, both owned by the reactor thread.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>

#include "protocol/ana.h"
#include "target/core/core_internal.h"

namespace rdmablk::target {

namespace {

using protocol::IoOpcode;
using transport::DataDirection;

// LBA range check without computing slba + nlb (overflow safe).
constexpr bool range_ok(uint64_t slba, uint64_t nlb, uint64_t nsze) noexcept {
  return slba < nsze && nlb <= nsze - slba;
}

// What an I/O command touches in its namespace, for check_access().
struct IoAccess {
  bool writes = false;  // it modifies the namespace: Write, Write Zeroes, DSM deallocate
  uint64_t slba = 0;    // its LBA range [slba, slba + nlb); nlb = 0: none (Flush, DSM)
  uint64_t nlb = 0;
  // Host data received for that range, which must be exactly nlb blocks; 0 = not checked (before the data
  // moves, check_data() checks the SGL length against the same namespace).
  uint64_t data_bytes = 0;
  const uint8_t* dsm_ranges = nullptr;  // DSM deallocate, once received: dsm_range_count DsmRange entries
  uint32_t dsm_range_count = 0;
};

// The access check of every I/O command, when it arrives and again once its host data is here (a reload may
// have removed or replaced the namespace while the data moved): the namespace is active (Invalid Namespace),
// a command that writes is not on a write-protected namespace (Namespace Write Protected), and its LBA range,
// the data received for it, and each non-empty DSM range fit the namespace (LBA Out of Range; the data no
// longer fits when the namespace was replaced by one with another block size).
Status check_access(const NsSlot* slot, const IoAccess& a) noexcept {
  if (slot == nullptr) return st::invalid_namespace;
  const Namespace& ns = *slot->ns;
  if (a.writes && ns.read_only) return st::namespace_write_protected;
  const uint64_t nsze = ns.geometry.num_blocks;
  if (a.nlb != 0 && !range_ok(a.slba, a.nlb, nsze)) return st::lba_out_of_range;
  if (a.data_bytes != 0 && a.data_bytes != a.nlb * ns.geometry.block_size) return st::lba_out_of_range;
  for (uint32_t i = 0; i < a.dsm_range_count; ++i) {
    const auto r = protocol::load<protocol::DsmRange>(a.dsm_ranges + std::size_t{i} * sizeof(protocol::DsmRange));
    if (r.nlb.get() != 0 && !range_ok(r.slba.get(), r.nlb.get(), nsze)) return st::lba_out_of_range;
  }
  return st::success;
}

// The namespace's backend queue on this reactor, recorded in the request: Internal Error when it cannot be
// opened.
Status open_channel(CoreQueue& q, RequestState& rs, NsSlot& slot) noexcept {
  rs.channel = q.rs->channel(slot);
  return rs.channel != nullptr ? st::success : st::internal_error;
}

// The path's ANA state for the namespace (nvmet_check_ana_state): I/O through a listener where its group is
// inaccessible, lost or in transition fails with a path-related status, without DNR, so the host retries on
// another path.
Status check_ana(const CoreQueue& q, const Namespace& ns) noexcept {
  return protocol::ana_io_status(q.ana_port->get(ns.ana_group.load(std::memory_order_relaxed)));
}

// Validates a new I/O command and fills its RequestState: success, or the status to complete it with. The
// order of the checks decides the status of a command with several faults: controller ready, command flags,
// opcode, namespace, the transfer of Read and Write (MDTS, data SGL), the access (check_access), the range
// list transfer of a DSM deallocate.
Status prepare_io(CoreQueue& q, TargetRequest& req, const QueueLimits& limits) noexcept {
  Controller& ctrl = *q.ctrl;
  const auto& h = req.sqe.hdr;
  if (!ctrl.ready.load(std::memory_order_relaxed)) return st::command_sequence_error;
  if (Status s = check_common_flags(h); !s.ok()) return s;
  ctrl.touch_if_traffic_based();
  const auto op = static_cast<IoOpcode>(h.opcode);
  switch (op) {
    case IoOpcode::read:
    case IoOpcode::write:
    case IoOpcode::flush:
    case IoOpcode::write_zeroes:
    case IoOpcode::dataset_management:
      break;
    default:
      return st::invalid_opcode;
  }
  NsSlot* const slot = q.view->find(h.nsid.get());
  RequestState& rs = request_state(req);
  IoAccess access;
  if (slot != nullptr) {  // (a missing namespace is check_access's to report)
    rs.ns_stats = slot->stats;
    if (Status s = check_ana(q, *slot->ns); !s.ok()) return s;  // before the command's own checks, as nvmet
    const backend::Geometry& geo = slot->ns->geometry;
    switch (op) {
      case IoOpcode::read:
      case IoOpcode::write: {
        const auto cmd = protocol::as<protocol::ReadWriteCommand>(req.sqe);
        const uint64_t bytes = uint64_t{cmd.block_count()} * geo.block_size;
        if (bytes > limits.max_io_size) return st::invalid_field;  // above MDTS
        const bool write = op == IoOpcode::write;
        if (Status s = check_data(req, write ? DataDirection::host_to_controller : DataDirection::controller_to_host,
                                  static_cast<uint32_t>(bytes));
            !s.ok())
          return s;
        access.writes = write;
        access.slba = cmd.start_lba();
        access.nlb = cmd.block_count();
        rs.op = write ? backend::Op::write : backend::Op::read;
        rs.stage = write ? Stage::write : Stage::none;
        rs.slba = cmd.start_lba();
        rs.blocks = cmd.block_count();
        rs.count = 1;
        break;
      }
      case IoOpcode::flush:
        rs.op = backend::Op::flush;
        rs.count = 1;
        break;
      case IoOpcode::write_zeroes: {
        const auto cmd = protocol::as<protocol::WriteZeroesCommand>(req.sqe);
        access.writes = true;
        access.slba = cmd.start_lba();
        access.nlb = cmd.block_count();
        // DEAC: the host allows deallocation, which zeroes only where deallocated blocks read as zeroes (DLFEAT).
        rs.op = cmd.deallocate() && geo.caps.deallocate && geo.caps.deallocated_reads_zeroes ? backend::Op::deallocate
                                                                                              : backend::Op::write_zeroes;
        rs.slba = cmd.start_lba();
        rs.blocks = cmd.block_count();
        rs.fua = cmd.fua();
        rs.count = 1;
        break;
      }
      case IoOpcode::dataset_management:
        // Only the deallocate attribute does something; IDR/IDW hints alone complete at once (count 0).
        if (protocol::as<protocol::DsmCommand>(req.sqe).deallocate()) {
          access.writes = true;
          rs.stage = Stage::dsm;
        }
        break;
      default:
        break;
    }
  }
  if (Status s = check_access(slot, access); !s.ok()) return s;
  if (rs.stage == Stage::dsm) {
    // The range list comes next (io_data_ready checks the ranges): a data SGL this transport takes, and at
    // least as long as the ranges (nvmet: the transfer may be longer, not shorter).
    auto sgl = protocol::decode_data_sgl(h.dptr, req.queue->transport_type() == transport::TransportType::rdma
                                                     ? protocol::SglAccept::rdma
                                                     : protocol::SglAccept::tcp);
    if (!sgl) return st::sgl_descriptor_type_invalid;
    if (req.data_length < protocol::as<protocol::DsmCommand>(req.sqe).data_length()) return st::data_sgl_length_invalid;
  }
  if (rs.stage == Stage::none && rs.count != 0) return open_channel(q, rs, *slot);
  return st::success;
}

// Checks a Write or DSM deallocate again once its host data has arrived, against the namespace as it is now,
// and finishes its RequestState: success, or the status to complete it with.
Status prepare_with_data(CoreQueue& q, TargetRequest& req) noexcept {
  RequestState& rs = request_state(req);
  NsSlot* const slot = q.view->find(req.sqe.hdr.nsid.get());
  const bool write = rs.stage == Stage::write;
  const uint32_t ranges = write ? 0 : protocol::as<protocol::DsmCommand>(req.sqe).range_count();
  IoAccess access;
  access.writes = true;
  if (write) {
    access.slba = rs.slba;
    access.nlb = rs.blocks;
    access.data_bytes = req.data_length;
  } else {
    access.dsm_ranges = req.data;  // handle_io checked that they all arrived
    access.dsm_range_count = ranges;
  }
  if (Status s = check_access(slot, access); !s.ok()) return s;
  const Namespace& ns = *slot->ns;
  if (Status s = check_ana(q, ns); !s.ok()) return s;  // the state may have changed while the data moved
  if (write) {
    // With the volatile write cache turned off by the host, every write must be durable.
    rs.fua = protocol::as<protocol::ReadWriteCommand>(req.sqe).fua() ||
             (ns.volatile_cache() && !q.ctrl->write_cache.load(std::memory_order_relaxed));
  } else {
    // One deallocate per range; none where the backend cannot deallocate (deallocation is advisory).
    rs.count = ns.geometry.caps.deallocate ? static_cast<uint16_t>(ranges) : 0;
  }
  return rs.count != 0 ? open_channel(q, rs, *slot) : st::success;
}

// The backend request number rs.next of the command, moving rs.next past empty DSM ranges. False when they
// have all been submitted.
bool next_request(TargetRequest& req, RequestState& rs, backend::Request& b) noexcept {
  if (rs.stage == Stage::dsm) {
    for (; rs.next < rs.count; ++rs.next) {
      const auto r = protocol::load<protocol::DsmRange>(req.data + std::size_t{rs.next} * sizeof(protocol::DsmRange));
      if (r.nlb.get() == 0) continue;
      b = backend::Request{};
      b.op = backend::Op::deallocate;
      b.slba = r.slba.get();
      b.nlb = r.nlb.get();
      return true;
    }
    return false;
  }
  if (rs.next >= rs.count) return false;
  b = backend::Request{};
  b.op = rs.op;
  b.slba = rs.slba;
  b.nlb = rs.blocks;
  b.fua = rs.fua;
  if (rs.op == backend::Op::read || rs.op == backend::Op::write) {
    b.buf = req.data;
    b.buf_index = rs.channel->fixed_buffers ? req.fixed_buffer_index : -1;
  }
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Reactor state: views and channels
// ---------------------------------------------------------------------------------------------------------

NsSlot* SubsystemView::find(uint32_t nsid) noexcept {
  auto it = std::lower_bound(slots.begin(), slots.end(), nsid,
                             [](const NsSlot& s, uint32_t id) { return s.nsid < id; });
  if (it == slots.end() || it->nsid != nsid) return nullptr;
  return &*it;
}

ReactorState::~ReactorState() { detach(); }

void ReactorState::detach() noexcept {
  if (poller_added_) {
    reactor_.remove_poller(this);
    poller_added_ = false;
  }
  for (auto& ch : channels_) unwatch(*ch);
}

void ReactorState::unwatch(NsChannel& ch) noexcept {
  if (!ch.watched) return;
  reactor_.unwatch_fd(&ch.watch.op);
  ch.watched = false;
}

stats::IoStats* ReactorState::namespace_stats(const std::string& nqn, uint32_t nsid) {
  std::lock_guard lock(ns_stats_mu_);
  auto& block = ns_stats_[{nqn, nsid}];
  if (!block) block = std::make_unique<stats::IoStats>();
  return block.get();
}

void ReactorState::collect_namespace_stats(const std::string& nqn, uint32_t nsid, stats::IoStatsSnapshot& out) const {
  std::lock_guard lock(ns_stats_mu_);
  if (auto it = ns_stats_.find({nqn, nsid}); it != ns_stats_.end()) out.add(*it->second);
}

SubsystemView* ReactorState::view(const std::shared_ptr<Subsystem>& subsys,
                                  const std::shared_ptr<const NamespaceTable>& table) {
  auto it = views_.find(subsys.get());
  if (it != views_.end()) {
    if (table && (!it->second->table || table->generation > it->second->table->generation)) update(subsys, table);
    return it->second.get();
  }
  auto v = std::make_unique<SubsystemView>();
  v->subsys = subsys;
  v->table = table;
  for (const auto& ns : table->namespaces)
    v->slots.push_back(NsSlot{ns->nsid, ns, nullptr, namespace_stats(subsys->nqn, ns->nsid)});
  auto* raw = v.get();
  views_.emplace(subsys.get(), std::move(v));
  return raw;
}

void ReactorState::update(const std::shared_ptr<Subsystem>& subsys,
                          const std::shared_ptr<const NamespaceTable>& table) {
  auto it = views_.find(subsys.get());
  if (it == views_.end()) return;  // no queue here uses it yet: view() will read the current table
  SubsystemView& v = *it->second;
  if (v.table && table->generation <= v.table->generation) return;  // stale message
  std::vector<NsSlot> slots;
  for (const auto& ns : table->namespaces) {
    NsSlot slot{ns->nsid, ns, nullptr, namespace_stats(subsys->nqn, ns->nsid)};
    if (NsSlot* old = v.find(ns->nsid); old != nullptr && old->ns == ns) {
      slot.channel = old->channel;
      old->channel = nullptr;
    }
    slots.push_back(std::move(slot));
  }
  for (auto& old : v.slots)
    if (old.channel != nullptr) old.channel->retired = true;  // freed by poll() once drained
  v.slots = std::move(slots);
  v.table = table;
}

NsChannel* ReactorState::channel(NsSlot& slot) noexcept {
  if (slot.channel != nullptr) return slot.channel;
  try {
    backend::QueueOptions opts;
    opts.depth = backend_depth_;
    opts.buffers = reactor_.registered_buffers();
    auto queue = slot.ns->backend->open_queue(opts);
    if (!queue) {
      spdlog::error("namespace {}: cannot open a backend queue: {}", slot.nsid, queue.error().message);
      return nullptr;
    }
    auto ch = std::make_unique<NsChannel>();
    ch->ns = slot.ns;
    ch->queue = std::move(*queue);
    ch->fixed_buffers = !opts.buffers.empty();
    slot.channel = ch.get();
    if (const int fd = ch->queue->event_fd(); fd >= 0) {
      ch->watch.channel = ch.get();
      ch->watch.op.fn = [](transport::IoOp* op, int res, uint32_t) noexcept {
        NsChannel& c = *reinterpret_cast<NsChannel::Watch*>(op)->channel;
        if (res < 0) return;  // the poll failed (logged by the reactor): completions are still reaped by polling
        // Reset the readiness now, before poll() reaps: a completion due after this re-signals it. The
        // reactor counts this CQE as work and runs its pollers next.
        c.queue->clear_event();
      };
      reactor_.watch_fd(fd, &ch->watch.op);
      ch->watched = true;
    }
    channels_.push_back(std::move(ch));
    if (!poller_added_) {
      reactor_.add_poller(this);
      poller_added_ = true;
    }
    return slot.channel;
  } catch (const std::exception& e) {
    spdlog::error("namespace {}: cannot open a backend queue: {}", slot.nsid, e.what());
    return nullptr;
  }
}

unsigned ReactorState::reap(NsChannel& ch) noexcept {
  std::array<backend::Completion, 64> done;
  const unsigned n = ch.queue->reap(done);
  for (unsigned i = 0; i < n; ++i) {
    --ch.in_flight;
    core_.backend_completed(*reinterpret_cast<TargetRequest*>(done[i].user_data), done[i].status);
  }
  return n;
}

bool ReactorState::poll() noexcept {
  bool work = false;
  bool retired = false;
  // By index: a completion may start new commands that open channels (push_back).
  for (std::size_t i = 0; i < channels_.size(); ++i) {
    NsChannel& ch = *channels_[i];
    // Work only when something was reaped: while I/O is merely in flight the reactor may sleep, and the
    // watch on the queue's event_fd() wakes it when completions are due.
    if (ch.in_flight > 0 && reap(ch) > 0) {
      work = true;
      if (ch.parked_head != nullptr) resume_parked(ch);
    }
    retired = retired || ch.retired;
  }
  if (retired) {
    std::erase_if(channels_, [this](const std::unique_ptr<NsChannel>& ch) {
      if (!ch->retired || ch->in_flight != 0 || ch->parked_head != nullptr || ch->queue->in_flight() != 0)
        return false;
      unwatch(*ch);
      return true;
    });
  }
  return work;
}

// ---------------------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------------------

void TargetCore::handle_io(CoreQueue& q, TargetRequest& req) noexcept {
  if (const Status s = prepare_io(q, req, limits_); !s.ok()) {
    finish(req, s);
    return;
  }
  if (request_state(req).stage == Stage::none) {
    q.rs->submit(q, req);  // Read, Flush, Write Zeroes, DSM hints
  } else if (req.data_in_capsule) {
    io_data_ready(q, req, st::success);  // Write, DSM deallocate: the data came with the command
  } else {
    req.queue->fetch_data(req);  // then on_data_ready -> io_data_ready
  }
}

void TargetCore::io_data_ready(CoreQueue& q, TargetRequest& req, Status /*status*/) noexcept {
  if (const Status s = prepare_with_data(q, req); !s.ok()) {
    finish(req, s);
    return;
  }
  q.rs->submit(q, req);
}

// ---------------------------------------------------------------------------------------------------------
// Backend submission: a full backend queue parks the command on its channel
// ---------------------------------------------------------------------------------------------------------

void ReactorState::submit(CoreQueue& q, TargetRequest& req) noexcept {
  ++request_state(req).pending;  // the hold: completions reaped while submitting must not complete it early
  submit_from_next(q, req, /*resumed=*/false);
}

bool ReactorState::submit_from_next(CoreQueue& q, TargetRequest& req, bool resumed) noexcept {
  RequestState& rs = request_state(req);
  backend::Request b;
  while (next_request(req, rs, b)) {
    NsChannel& ch = *rs.channel;
    b.user_data = reinterpret_cast<uint64_t>(&req);
    Status s = backend::queue_full;
    // First come, first served: a new command does not overtake those waiting for room.
    if (resumed || ch.parked_head == nullptr) {
      s = ch.queue->submit(b);
      // Completions already due make room at once (ram and null complete inside submit()).
      if (s == backend::queue_full && ch.in_flight > 0 && reap(ch) > 0) s = ch.queue->submit(b);
    }
    if (s == backend::queue_full) {
      if (ch.in_flight > 0) {  // a completion will make room: wait for it (ReactorState::poll resumes)
        park(ch, q, req, /*front=*/resumed);
        return false;
      }
      s = st::internal_error;  // full with nothing in flight: nothing would ever make room (a broken backend)
    }
    if (!s.ok()) {  // refused: the command's status; what it already submitted still completes
      if (rs.status_field == 0) rs.status_field = s.field();
      break;
    }
    ++ch.in_flight;
    ++q.backend_in_flight;
    ++rs.pending;
    ++rs.next;
  }
  if (--rs.pending == 0) core_.io_request_done(q, req);
  return true;
}

void ReactorState::park(NsChannel& ch, CoreQueue& q, TargetRequest& req, bool front) noexcept {
  RequestState& rs = request_state(req);
  ++q.parked;
  if (front) {  // resumed and still no room: it stays first
    rs.next_parked = ch.parked_head;
    ch.parked_head = &req;
    if (ch.parked_tail == nullptr) ch.parked_tail = &req;
    return;
  }
  rs.next_parked = nullptr;
  if (ch.parked_tail != nullptr) {
    request_state(*ch.parked_tail).next_parked = &req;
  } else {
    ch.parked_head = &req;
  }
  ch.parked_tail = &req;
}

void ReactorState::resume_parked(NsChannel& ch) noexcept {
  while (ch.parked_head != nullptr) {
    TargetRequest& req = *ch.parked_head;
    RequestState& rs = request_state(req);
    ch.parked_head = rs.next_parked;
    if (ch.parked_head == nullptr) ch.parked_tail = nullptr;
    rs.next_parked = nullptr;
    CoreQueue& q = core_queue(req);
    --q.parked;
    if (q.closed) {
      // The host is gone: submit nothing more of it (a write now could land after the host has retried it
      // elsewhere). Released once what it already submitted has ended.
      if (rs.status_field == 0) rs.status_field = st::aborted_sq_deletion.field();
      if (--rs.pending == 0) core_.io_request_done(q, req);
      continue;
    }
    if (!submit_from_next(q, req, /*resumed=*/true)) return;  // full again: it waits at the head
  }
}

// ---------------------------------------------------------------------------------------------------------
// Completion
// ---------------------------------------------------------------------------------------------------------

void TargetCore::backend_completed(TargetRequest& req, Status status) noexcept {
  CoreQueue& q = core_queue(req);
  RequestState& rs = request_state(req);
  --q.backend_in_flight;
  if (!status.ok() && rs.status_field == 0) rs.status_field = status.field();
  if (--rs.pending > 0) return;
  io_request_done(q, req);
}

void TargetCore::io_request_done(CoreQueue& q, TargetRequest& req) noexcept {
  RequestState& rs = request_state(req);
  const Status status = rs.status_field != 0 ? Status::from_field(rs.status_field) : st::success;
  const auto op = static_cast<IoOpcode>(rs.opcode);
  finish(req, status, 0, op == IoOpcode::read);
  release_queue_if_drained(q);
}

}  // namespace rdmablk::target
