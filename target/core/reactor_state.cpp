// The core's per-reactor state (ReactorState, core_internal.h): each reactor's view of the subsystems'
// namespaces, its backend queues (channels) opened on first use, the submission of a command's backend
// requests with parking while a backend queue is full, and the poller that reaps completions. Reactor thread
// only, no locks (the statistics map aside).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>

#include "target/commands/io_commands.h"
#include "target/core/core_internal.h"

namespace rdmablk::target {

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
  for (auto& ch : channels_) {
    unwatch(*ch);
    if (ch->qos_timer != 0) reactor_.cancel(ch->qos_timer);
    ch->qos_timer = 0;
  }
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
    // A namespace copied for a new mask or QoS limits keeps its backend and its QoS state: its channel (the
    // backend queue, what waits for its budget) goes on serving it. A new backend or a new host list of
    // QoS limits gets a channel of its own.
    if (NsSlot* old = v.find(ns->nsid);
        old != nullptr && old->channel != nullptr && old->ns->backend == ns->backend && old->ns->qos == ns->qos) {
      slot.channel = old->channel;
      slot.channel->ns = ns;
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
    ch->qos = slot.ns->qos.get();
    ch->qos_local.hosts.resize(ch->qos->host_count());
    ch->qos_waiting.resize(2 * (ch->qos->host_count() + 1));
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
      if (!ch.parked.empty()) resume_parked(ch);
    }
    retired = retired || ch.retired;
  }
  if (retired) {
    std::erase_if(channels_, [this](const std::unique_ptr<NsChannel>& ch) {
      if (!ch->retired || ch->in_flight != 0 || !ch->parked.empty() || ch->queue->in_flight() != 0 ||
          ch->qos_parked != 0 || ch->qos_timer != 0)
        return false;
      unwatch(*ch);
      return true;
    });
  }
  return work;
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
  while (next_backend_request(req, rs, b)) {
    NsChannel& ch = *rs.channel;
    b.user_data = reinterpret_cast<uint64_t>(&req);
    Status s = backend::queue_full;
    // First come, first served: a new command does not overtake those waiting for room.
    if (resumed || ch.parked.empty()) {
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

void ReactorState::post_range_granted(TargetRequest& req) noexcept {
  try {
    reactor_.post([this, &req] { core_.range_granted(req); });
  } catch (const std::exception& e) {
    // No memory for the message: the command would wait forever; nothing better than saying so.
    spdlog::critical("cannot resume a command waiting for a range lock: {}", e.what());
  }
}

void ReactorState::park(NsChannel& ch, CoreQueue& q, TargetRequest& req, bool front) noexcept {
  ++q.parked;
  if (front) {  // resumed and still no room: it stays first
    ch.parked.push_front(req);
  } else {
    ch.parked.push_back(req);
  }
}

void ReactorState::resume_parked(NsChannel& ch) noexcept {
  while (!ch.parked.empty()) {
    TargetRequest& req = ch.parked.pop_front();
    RequestState& rs = request_state(req);
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

}  // namespace rdmablk::target
