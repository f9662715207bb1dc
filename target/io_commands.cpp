// NVM I/O commands (NVM Command Set 1.0, 3): Read, Write, Flush, Write Zeroes, Dataset Management, and the
// per-reactor backend queues they run on. No locks here: an I/O queue reaches its namespaces through its
// reactor's SubsystemView and the backend queues through NsChannels, both owned by the reactor thread.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>

#include "target/core_internal.h"

namespace rdmablk::target {

namespace {

using protocol::IoOpcode;
using transport::DataDirection;

// LBA range check without computing slba + nlb (overflow safe).
constexpr bool range_ok(uint64_t slba, uint64_t nlb, uint64_t nsze) noexcept {
  return slba < nsze && nlb <= nsze - slba;
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
  for (const auto& ns : table->namespaces) v->slots.push_back(NsSlot{ns->nsid, ns, nullptr});
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
    NsSlot slot{ns->nsid, ns, nullptr};
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
    if (ch.in_flight > 0 && reap(ch) > 0) work = true;
    retired = retired || ch.retired;
  }
  if (retired) {
    std::erase_if(channels_, [this](const std::unique_ptr<NsChannel>& ch) {
      if (!ch->retired || ch->in_flight != 0 || ch->queue->in_flight() != 0) return false;
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
  Controller& ctrl = *q.ctrl;
  const auto& h = req.sqe.hdr;
  if (!ctrl.ready.load(std::memory_order_relaxed)) {
    finish(req, st::command_sequence_error);
    return;
  }
  if (Status s = check_common_flags(h); !s.ok()) {
    finish(req, s);
    return;
  }
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
      finish(req, st::invalid_opcode);
      return;
  }
  NsSlot* slot = q.view->find(h.nsid.get());
  if (slot == nullptr) {
    finish(req, st::invalid_namespace);
    return;
  }
  const Namespace& ns = *slot->ns;
  const uint64_t nsze = ns.geometry.num_blocks;
  RequestState& rs = request_state(req);

  switch (op) {
    case IoOpcode::read:
    case IoOpcode::write: {
      const auto cmd = protocol::as<protocol::ReadWriteCommand>(req.sqe);
      const uint64_t bytes = uint64_t{cmd.block_count()} * ns.geometry.block_size;
      if (bytes > limits_.max_io_size) {
        finish(req, st::invalid_field);  // above MDTS
        return;
      }
      const bool write = op == IoOpcode::write;
      if (Status s = check_data(req, write ? DataDirection::host_to_controller : DataDirection::controller_to_host,
                                static_cast<uint32_t>(bytes));
          !s.ok()) {
        finish(req, s);
        return;
      }
      if (write && ns.read_only) {
        finish(req, st::namespace_write_protected);
        return;
      }
      if (!range_ok(cmd.start_lba(), cmd.block_count(), nsze)) {
        finish(req, st::lba_out_of_range);
        return;
      }
      rs.slba = cmd.start_lba();
      rs.blocks = cmd.block_count();
      if (write) {
        rs.stage = Stage::write;
        if (req.data_in_capsule) {
          io_data_ready(q, req, st::success);
        } else {
          req.queue->fetch_data(req);
        }
        return;
      }
      NsChannel* ch = bind_channel(q, req, *slot);
      if (ch == nullptr) return;
      backend::Request b;
      b.op = backend::Op::read;
      b.slba = rs.slba;
      b.nlb = rs.blocks;
      b.buf = req.data;
      b.buf_index = ch->fixed_buffers ? req.fixed_buffer_index : -1;
      submit_one(q, req, b);
      return;
    }
    case IoOpcode::flush: {
      NsChannel* ch = bind_channel(q, req, *slot);
      if (ch == nullptr) return;
      backend::Request b;
      b.op = backend::Op::flush;
      submit_one(q, req, b);
      return;
    }
    case IoOpcode::write_zeroes: {
      const auto cmd = protocol::as<protocol::WriteZeroesCommand>(req.sqe);
      if (ns.read_only) {
        finish(req, st::namespace_write_protected);
        return;
      }
      if (!range_ok(cmd.start_lba(), cmd.block_count(), nsze)) {
        finish(req, st::lba_out_of_range);
        return;
      }
      NsChannel* ch = bind_channel(q, req, *slot);
      if (ch == nullptr) return;
      backend::Request b;
      // DEAC: the host allows deallocation; our deallocated blocks read back as zeroes (DLFEAT).
      b.op = cmd.deallocate() && ns.geometry.caps.deallocate ? backend::Op::deallocate : backend::Op::write_zeroes;
      b.slba = cmd.start_lba();
      b.nlb = cmd.block_count();
      b.fua = cmd.fua();
      submit_one(q, req, b);
      return;
    }
    case IoOpcode::dataset_management: {
      const auto cmd = protocol::as<protocol::DsmCommand>(req.sqe);
      if (!cmd.deallocate()) {
        finish(req, st::success);  // IDR/IDW hints only: nothing to do
        return;
      }
      if (ns.read_only) {
        finish(req, st::namespace_write_protected);
        return;
      }
      const uint32_t needed = cmd.data_length();
      auto sgl = protocol::decode_data_sgl(h.dptr, req.queue->transport_type() == transport::TransportType::rdma
                                                       ? protocol::SglAccept::rdma
                                                       : protocol::SglAccept::tcp);
      if (!sgl) {
        finish(req, st::sgl_descriptor_type_invalid);
        return;
      }
      if (req.data_length < needed) {  // nvmet: the transfer may be longer than the ranges, not shorter
        finish(req, st::data_sgl_length_invalid);
        return;
      }
      rs.stage = Stage::dsm;
      if (req.data_in_capsule) {
        io_data_ready(q, req, st::success);
      } else {
        req.queue->fetch_data(req);
      }
      return;
    }
    default:
      break;
  }
  finish(req, st::invalid_opcode);
}

void TargetCore::io_data_ready(CoreQueue& q, TargetRequest& req, Status /*status*/) noexcept {
  RequestState& rs = request_state(req);
  // Look the namespace up again: a reload may have replaced it while the data moved.
  NsSlot* slot = q.view->find(req.sqe.hdr.nsid.get());
  if (slot == nullptr) {
    finish(req, st::invalid_namespace);
    return;
  }
  const Namespace& ns = *slot->ns;
  if (ns.read_only) {
    finish(req, st::namespace_write_protected);
    return;
  }
  NsChannel* ch = bind_channel(q, req, *slot);
  if (ch == nullptr) return;
  const uint64_t nsze = ns.geometry.num_blocks;

  if (rs.stage == Stage::write) {
    const auto cmd = protocol::as<protocol::ReadWriteCommand>(req.sqe);
    if (!range_ok(rs.slba, rs.blocks, nsze) || uint64_t{rs.blocks} * ns.geometry.block_size != req.data_length) {
      finish(req, st::lba_out_of_range);
      return;
    }
    backend::Request b;
    b.op = backend::Op::write;
    b.slba = rs.slba;
    b.nlb = rs.blocks;
    b.buf = req.data;
    b.buf_index = ch->fixed_buffers ? req.fixed_buffer_index : -1;
    // With the volatile write cache turned off by the host, every write must be durable.
    b.fua = cmd.fua() || (ns.volatile_cache() && !q.ctrl->write_cache.load(std::memory_order_relaxed));
    submit_one(q, req, b);
    return;
  }

  // Dataset Management, deallocate: check every range first, then submit one deallocate per range.
  const auto cmd = protocol::as<protocol::DsmCommand>(req.sqe);
  const uint32_t n = cmd.range_count();
  for (uint32_t i = 0; i < n; ++i) {
    const auto r = protocol::load<protocol::DsmRange>(req.data + i * sizeof(protocol::DsmRange));
    if (r.nlb.get() != 0 && !range_ok(r.slba.get(), r.nlb.get(), nsze)) {
      finish(req, st::lba_out_of_range);
      return;
    }
  }
  if (!ns.geometry.caps.deallocate) {
    finish(req, st::success);  // deallocation is advisory
    return;
  }
  rs.pending = 1;  // guard: completions reaped while submitting must not finish the command early
  for (uint32_t i = 0; i < n; ++i) {
    const auto r = protocol::load<protocol::DsmRange>(req.data + i * sizeof(protocol::DsmRange));
    if (r.nlb.get() == 0) continue;
    backend::Request b;
    b.op = backend::Op::deallocate;
    b.slba = r.slba.get();
    b.nlb = r.nlb.get();
    if (!submit_backend(q, req, b)) break;
  }
  if (--rs.pending == 0) io_request_done(q, req);
}

NsChannel* TargetCore::bind_channel(CoreQueue& q, TargetRequest& req, NsSlot& slot) noexcept {
  NsChannel* ch = q.rs->channel(slot);
  if (ch == nullptr) {
    finish(req, st::internal_error);
    return nullptr;
  }
  request_state(req).channel = ch;
  return ch;
}

void TargetCore::submit_one(CoreQueue& q, TargetRequest& req, const backend::Request& b) noexcept {
  RequestState& rs = request_state(req);
  rs.pending = 1;  // guard: a completion reaped while submitting must not finish the command early
  submit_backend(q, req, b);
  if (--rs.pending == 0) io_request_done(q, req);
}

bool TargetCore::submit_backend(CoreQueue& q, TargetRequest& req, backend::Request b) noexcept {
  RequestState& rs = request_state(req);
  NsChannel& ch = *rs.channel;
  b.user_data = reinterpret_cast<uint64_t>(&req);
  Status s = ch.queue->submit(b);
  if (s == backend::queue_full) {
    q.rs->reap(ch);  // make room, then try once more
    s = ch.queue->submit(b);
  }
  if (!s.ok()) {
    if (rs.status_field == 0) rs.status_field = s.field();
    return false;
  }
  ++ch.in_flight;
  ++q.backend_in_flight;
  ++rs.pending;
  return true;
}

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
  if (status.ok()) {
    if (op == IoOpcode::read) {
      q.counters.add(q.counters.read_commands, 1);
      q.counters.add(q.counters.read_sectors, req.data_length / 512);
    } else if (op == IoOpcode::write) {
      q.counters.add(q.counters.write_commands, 1);
      q.counters.add(q.counters.write_sectors, req.data_length / 512);
    }
  }
  finish(req, status, 0, op == IoOpcode::read);
  release_queue_if_drained(q);
}

}  // namespace rdmablk::target
