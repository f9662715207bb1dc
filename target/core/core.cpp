// Queue lifecycle, dispatch, completion, keep-alive, asynchronous events, table updates and shutdown.
#include "target/core/core.h"

#include <atomic>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>
#include <cstring>

#include "target/core/core_internal.h"
#include "transport/log_limit.h"

namespace rdmablk::target {

using protocol::Status;

Status check_data(const TargetRequest& req, transport::DataDirection dir, uint32_t needed) noexcept {
  // The transport planned the transfer from the SGL (transport::plan_data_transfer: descriptor type, in-capsule
  // data only host to controller, length limits) before the command got here: no second decode.
  if (needed == 0) return st::success;
  if (req.data_length != needed) return st::data_sgl_length_invalid;
  if (dir == transport::DataDirection::controller_to_host && req.data == nullptr) return st::internal_error;
  return st::success;
}

// ---------------------------------------------------------------------------------------------------------
// Construction
// ---------------------------------------------------------------------------------------------------------

TargetCore::TargetCore(const TargetConfig& config, std::vector<CoreReactor*> reactors, CoreOptions options)
    : limits_(config.limits), options_(std::move(options)), reactors_(std::move(reactors)),
      ana_(config.listeners),
      namespace_hooks_{options_.on_namespace_resize, config.state_dir, config.group.enabled,
                       [link = group_event_link_](const std::string& subnqn, uint32_t nsid, RangeLocks& locks,
                                                  std::span<const reservations::GroupEvent> events) {
                         std::lock_guard lock(link->mu);
                         if (link->core != nullptr) link->core->take_group_reservation_events(subnqn, nsid, locks, events);
                       }},
      listeners_(config.listeners), subsystem_configs_(config.subsystems) {
  group_event_link_->core = this;
  // A backend queue serves every I/O queue of its reactor for one namespace.
  const uint64_t depth = std::clamp<uint64_t>(uint64_t{limits_.io_queue_depth} * limits_.max_io_queues, 256, 4096);
  for (CoreReactor* r : reactors_)
    reactor_states_.push_back(std::make_unique<ReactorState>(*this, *r, static_cast<unsigned>(depth)));
  discovery_serial_ = derive_serial(protocol::kDiscoveryNqn);
}

Result<std::unique_ptr<TargetCore>> TargetCore::create(const TargetConfig& config, std::vector<CoreReactor*> reactors,
                                                       CoreOptions options) {
  if (reactors.empty()) return make_error("the target core needs at least one reactor");
  std::unique_ptr<TargetCore> core(new TargetCore(config, std::move(reactors), std::move(options)));
  for (const auto& sc : config.subsystems) {
    auto sub = build_subsystem(sc, core->table_generation_, core->namespace_hooks_);
    if (!sub) return tl::unexpected(sub.error());
    core->subsystems_.emplace(sc.nqn, std::move(*sub));
  }
  return core;
}

TargetCore::~TargetCore() {
  {
    std::lock_guard lock(group_event_link_->mu);  // waits for a listener that is running
    group_event_link_->core = nullptr;
  }
  for (auto& rs : reactor_states_) rs->detach();
  // Queues the transports never reported closed (the daemon stops reactors first): drop their state.
  for (auto& w : queues_) {
    if (auto q = w.lock()) {
      q->ctrl.reset();
      q->self.reset();
    }
  }
}

void TargetCore::recheck_shared_reservations() {
  std::vector<std::shared_ptr<reservations::NamespaceReservations>> all;
  {
    std::lock_guard lock(mu_);
    for (const auto& [nqn, sub] : subsystems_) {
      for (const auto& ns : sub->table->namespaces) all.push_back(ns->reservations);
    }
  }
  for (const auto& r : all) r->recheck_shared();
}

std::size_t TargetCore::controller_count() const {
  std::lock_guard lock(mu_);
  return controllers_.size();
}

uint64_t TargetCore::discovery_generation() const {
  std::lock_guard lock(mu_);
  return discovery_genctr_;
}

ReactorState& TargetCore::reactor_state_for_current_thread() noexcept {
  for (auto& rs : reactor_states_)
    if (rs->reactor().on_thread()) return *rs;
  spdlog::error("target core: a queue was created outside every reactor thread; using the first reactor");
  return *reactor_states_.front();
}

// ---------------------------------------------------------------------------------------------------------
// Queue lifecycle
// ---------------------------------------------------------------------------------------------------------

void TargetCore::on_queue_created(transport::TargetQueue& queue) noexcept {
  auto q = std::make_shared<CoreQueue>();
  q->tq = &queue;
  q->local = queue.local_address();
  q->rs = &reactor_state_for_current_thread();
  q->self = q;
  queue.core_queue = q.get();
  start_connect_timer(*q);
  q->ana_port = ana_.port_for(q->local);
  std::lock_guard lock(mu_);
  std::erase_if(queues_, [](const std::weak_ptr<CoreQueue>& w) { return w.expired(); });
  queues_.push_back(q);
}

// A connection must finish its handshake, Fabrics Connect and (where required) DH-HMAC-CHAP in time: one
// that never speaks, stops after ICReq or stalls in the middle of authenticating would otherwise hold a
// socket, its buffers and a place under the connection limits forever.
void TargetCore::start_connect_timer(CoreQueue& q) noexcept {
  const uint32_t ms = limits_.connections.connect_timeout_ms;
  if (ms == 0) return;
  try {
    std::weak_ptr<CoreQueue> weak = q.self;
    q.connect_timer = q.rs->reactor().schedule(std::chrono::milliseconds(ms), [weak, ms] {
      auto queue = weak.lock();
      if (!queue) return;
      queue->connect_timer = 0;
      if (queue->closed) return;
      const bool unconnected = queue->state == QueueState::unconnected;
      if (!unconnected && (!queue->auth || queue->authenticated)) return;
      if (transport::peer_error_log_allowed()) {
        spdlog::warn("{}: connection from {} closed: {} within {} ms (limits.connections.connect_timeout_ms)",
                     transport::to_uri(queue->local), queue->tq->peer_name(),
                     unconnected ? "no Connect" : "not authenticated (DH-HMAC-CHAP)", ms);
      }
      queue->tq->close(unconnected ? "no Connect in time" : "not authenticated in time");
    });
  } catch (...) {
    // No memory for a timer: the connection simply has no deadline.
  }
}

void TargetCore::cancel_connect_timer(CoreQueue& q) noexcept {
  if (q.connect_timer == 0) return;
  q.rs->reactor().cancel(q.connect_timer);
  q.connect_timer = 0;
}

void TargetCore::on_queue_closed(transport::TargetQueue& queue) noexcept {
  auto* qp = static_cast<CoreQueue*>(queue.core_queue);
  if (qp == nullptr || qp->closed) return;
  CoreQueue& q = *qp;
  q.closed = true;
  cancel_connect_timer(q);
  std::vector<TargetRequest*> held;
  std::vector<std::function<void()>> after;
  {
    std::lock_guard lock(mu_);
    if (auto ctrl = q.ctrl) {
      if (q.state == QueueState::admin) {
        held.swap(ctrl->aer_requests);
        if (!ctrl->dead) {
          spdlog::info("controller {} ({} on {}): admin queue closed by {}", ctrl->cntlid,
                       ctrl->discovery ? "discovery" : ctrl->subsys->nqn, ctrl->hostnqn, queue.peer_name());
          teardown_locked(ctrl, "admin queue closed", after);
        }
      } else if (q.state == QueueState::io) {
        if (q.qid < ctrl->io_queue_table.size()) ctrl->io_queue_table[q.qid].reset();
        // Commands still in flight on it complete as released, uncounted.
        ctrl->closed_io.add(q.io_stats);
      }
    }
  }
  if (TargetRequest* first = std::exchange(q.fused_first, nullptr)) held.push_back(first);  // its pair never came
  for (TargetRequest* r : held) queue.release(*r);
  for (auto& fn : after) fn();
  release_queue_if_drained(q);
}

void TargetCore::release_queue_if_drained(CoreQueue& q) noexcept {
  // Never touch q.tq here: after the last release() the transport may already have freed it.
  if (q.closed && q.backend_in_flight == 0 && q.parked == 0 && q.self) {
    q.ctrl.reset();
    auto keep = std::move(q.self);  // destroyed at the end of this scope
  }
}

void TargetCore::finish(TargetRequest& req, Status status, uint32_t dw0, bool with_data, uint32_t dw1) noexcept {
  auto* qp = static_cast<CoreQueue*>(req.queue->core_queue);
  req.cqe.dw0.set(dw0);
  req.cqe.dw1.set(dw1);
  req.cqe.set_status(status);
  if (!status.ok() && qp != nullptr && qp->ctrl) {
    const auto& h = req.sqe.hdr;
    qp->ctrl->record_error(qp->qid, h.cid.get(), status, h.nsid.get(), h.opcode);
  }
  if (qp == nullptr || qp->closed) {
    req.queue->release(req);
    return;
  }
  account(*qp, req, status);
  req.queue->complete(req, with_data && status.ok());
}

void TargetCore::account(CoreQueue& q, const TargetRequest& req, Status status) noexcept {
  q.commands_completed.store(q.commands_completed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  // I/O statistics: commands of I/O queues, not the Connect that made the queue one.
  if (q.state != QueueState::io || req.sqe.hdr.opcode == protocol::kFabricsOpcode) return;
  const RequestState& rs = *std::launder(reinterpret_cast<const RequestState*>(req.core.data()));
  const auto op = static_cast<protocol::IoOpcode>(req.sqe.hdr.opcode);
  const stats::OpClass cls = op == protocol::IoOpcode::read    ? stats::OpClass::read
                             : op == protocol::IoOpcode::write ? stats::OpClass::write
                                                               : stats::OpClass::other;
  const uint64_t bytes = status.ok() && cls != stats::OpClass::other ? req.data_length : 0;
  const uint64_t now = q.rs->now_ns();
  const uint64_t latency = now > rs.arrived_ns ? now - rs.arrived_ns : 0;
  q.io_stats.record(cls, bytes, latency, status.field());
  if (rs.ns_stats != nullptr) rs.ns_stats->record(cls, bytes, latency, status.field());
}

void TargetCore::finish_with_data(TargetRequest& req, std::span<const uint8_t> bytes) noexcept {
  const std::size_t n = std::min<std::size_t>(bytes.size(), req.data_length);
  if (n > 0) std::memcpy(req.data, bytes.data(), n);
  if (req.data_length > n) std::memset(req.data + n, 0, req.data_length - n);
  finish(req, st::success, 0, req.data_length > 0);
}

// ---------------------------------------------------------------------------------------------------------
// Keep alive
// ---------------------------------------------------------------------------------------------------------

// The timer runs on the admin queue's reactor every KATO. A command since the previous check (Keep Alive,
// or any command with traffic based keep alive) re-arms it; none means the host is gone. Like nvmet, the
// controller therefore goes away between KATO and 2 x KATO after the host's last command.
void TargetCore::start_keep_alive_locked(const std::shared_ptr<Controller>& ctrl) {
  if (ctrl->kato_ms == 0 || ctrl->keep_alive_armed || ctrl->dead) return;
  ctrl->keep_alive_armed = true;
  std::weak_ptr<Controller> weak = ctrl;
  ctrl->keep_alive_timer = ctrl->admin_reactor->schedule(std::chrono::milliseconds(ctrl->kato_ms),
                                                         [this, weak] { keep_alive_check(weak); });
}

void TargetCore::keep_alive_check(const std::weak_ptr<Controller>& weak) {
  auto ctrl = weak.lock();
  if (!ctrl) return;
  std::vector<std::function<void()>> after;
  {
    std::lock_guard lock(mu_);
    ctrl->keep_alive_armed = false;
    ctrl->keep_alive_timer = 0;
    if (ctrl->dead || ctrl->kato_ms == 0) return;
    if (ctrl->ka_activity.exchange(false, std::memory_order_relaxed)) {
      start_keep_alive_locked(ctrl);
      return;
    }
    spdlog::warn("controller {} ({} on {}): keep-alive timeout ({} ms) expired, tearing it down", ctrl->cntlid,
                 ctrl->discovery ? std::string(protocol::kDiscoveryNqn) : ctrl->subsys->nqn, ctrl->hostnqn,
                 ctrl->kato_ms);
    teardown_locked(ctrl, "keep-alive timeout", after);
  }
  for (auto& fn : after) fn();
}

void TargetCore::teardown_locked(const std::shared_ptr<Controller>& ctrl, const char* reason,
                                 std::vector<std::function<void()>>& after) {
  if (ctrl->dead) return;
  ctrl->dead = true;
  ctrl->ready.store(false, std::memory_order_relaxed);
  controllers_.remove(ctrl->cntlid);
  if (ctrl->keep_alive_timer != 0) {
    ctrl->admin_reactor->cancel(ctrl->keep_alive_timer);  // from another thread: posted to the admin reactor
    ctrl->keep_alive_timer = 0;
    ctrl->keep_alive_armed = false;
  }
  std::vector<std::weak_ptr<CoreQueue>> queues;
  queues.push_back(ctrl->admin_queue);
  for (auto& w : ctrl->io_queue_table)
    if (!w.expired()) queues.push_back(w);
  for (auto& w : queues) {
    auto q = w.lock();
    if (!q) continue;
    CoreReactor* reactor = &q->rs->reactor();
    after.push_back([reactor, w, reason] {
      reactor->post([w, reason] {
        if (auto qq = w.lock(); qq && !qq->closed) qq->tq->close(reason);
      });
    });
  }
}

// ---------------------------------------------------------------------------------------------------------
// Asynchronous events
// ---------------------------------------------------------------------------------------------------------

void TargetCore::post_deliver_events(const EventRelease& release) {
  std::weak_ptr<Controller> weak = release.ctrl;
  const uint64_t upto = release.upto;
  release.ctrl->admin_reactor->post([this, weak, upto] {
    auto c = weak.lock();
    if (!c) return;
    {
      std::lock_guard lock(mu_);
      c->released_seq = std::max(c->released_seq, upto);
    }
    deliver_events(*c);
  });
}

// An AER that arrives while a reload's event waits for its tables does not take that event early: only
// released events go out.
void TargetCore::deliver_events(Controller& ctrl) noexcept {
  std::vector<std::pair<TargetRequest*, uint32_t>> out;
  {
    std::lock_guard lock(mu_);
    if (ctrl.dead) return;
    while (!ctrl.aer_requests.empty() && !ctrl.pending_events.empty() &&
           ctrl.pending_events.front().seq <= ctrl.released_seq) {
      out.emplace_back(ctrl.aer_requests.front(), ctrl.pending_events.front().dw0);
      ctrl.aer_requests.erase(ctrl.aer_requests.begin());
      ctrl.pending_events.pop_front();
    }
  }
  for (auto [req, dw0] : out) finish(*req, st::success, dw0);
}

// ---------------------------------------------------------------------------------------------------------
// Namespace changes (reload: reload_apply.cpp) and shutdown
// ---------------------------------------------------------------------------------------------------------

void TargetCore::publish_tables(const TableUpdates& tables, EventReleases notify) {
  auto deliver = [this, notify = std::make_shared<EventReleases>(std::move(notify))] {
    for (auto& r : *notify) post_deliver_events(r);
  };
  const std::size_t updates = tables.size() * reactor_states_.size();
  if (updates == 0) {
    deliver();
    return;
  }
  auto remaining = std::make_shared<std::atomic<std::size_t>>(updates);
  for (const auto& [sub, table] : tables) {
    for (auto& rs : reactor_states_) {
      ReactorState* state = rs.get();
      state->reactor().post([state, sub = sub, table = table, remaining, deliver] {
        state->update(sub, table);
        if (remaining->fetch_sub(1) == 1) deliver();
      });
    }
  }
}

unsigned TargetCore::refresh_namespace_sizes() {
  // 1. Ask every backend, without the lock (librbd may wait on the cluster).
  TableUpdates current;  // each subsystem with its table as it is now
  {
    std::lock_guard lock(mu_);
    for (const auto& [nqn, sub] : subsystems_) current.emplace_back(sub, sub->table);
  }
  std::map<const Namespace*, std::shared_ptr<Namespace>> resized;  // old -> new
  for (const auto& [sub, table] : current) {
    for (const auto& ns : table->namespaces) {
      auto blocks = ns->backend->refresh_size();
      if (!blocks) {
        spdlog::warn("subsystem {}: namespace {}: {}", sub->nqn, ns->nsid, blocks.error().message);
        continue;
      }
      if (*blocks == ns->geometry.num_blocks) continue;
      spdlog::info("subsystem {}: namespace {} resized from {} to {} blocks of {} bytes", sub->nqn, ns->nsid,
                   ns->geometry.num_blocks, *blocks, ns->geometry.block_size);
      resized.emplace(ns.get(), resized_namespace(*ns, *blocks));
    }
  }
  if (resized.empty()) return 0;

  // 2. Publish, under the lock: the tables as they are now (a reload may have replaced a namespace meanwhile;
  // then it was opened afresh and has its size already).
  unsigned count = 0;
  TableUpdates tables;
  EventReleases notify;
  {
    std::lock_guard lock(mu_);
    const uint64_t gen = ++table_generation_;
    for (auto& [nqn, sub] : subsystems_) {
      auto table = std::make_shared<NamespaceTable>(*sub->table);
      std::vector<uint32_t> changed;
      for (auto& ns : table->namespaces) {
        auto it = resized.find(ns.get());
        if (it == resized.end()) continue;
        ns = it->second;
        changed.push_back(ns->nsid);
      }
      if (changed.empty()) continue;
      count += static_cast<unsigned>(changed.size());
      table->generation = gen;
      sub->table = table;
      tables.emplace_back(sub, table);
      for (auto& [id, ctrl] : controllers_) {
        if (ctrl->discovery || ctrl->dead || ctrl->subsys != sub) continue;
        std::vector<uint32_t> seen = changed;  // not those masked from its host
        std::erase_if(seen, [&](uint32_t nsid) { return !(*table->find(nsid))->config.visible_to(ctrl->hostnqn); });
        if (seen.empty()) continue;
        ControllerRegistry::note_changed_namespaces(*ctrl, seen);
        notify.push_back(ControllerRegistry::release_of(ctrl));
      }
    }
  }
  publish_tables(tables, std::move(notify));
  return count;
}

void TargetCore::shutdown(const char* reason) {
  std::vector<std::function<void()>> after;
  std::vector<std::weak_ptr<CoreQueue>> loose;
  {
    std::lock_guard lock(mu_);
    std::vector<std::shared_ptr<Controller>> all;
    for (auto& [id, ctrl] : controllers_) all.push_back(ctrl);
    for (auto& ctrl : all) teardown_locked(ctrl, reason, after);
    loose = queues_;
  }
  for (auto& w : loose) {
    auto q = w.lock();
    if (!q || q->state != QueueState::unconnected) continue;
    CoreReactor* reactor = &q->rs->reactor();
    reactor->post([w, reason] {
      if (auto qq = w.lock(); qq && !qq->closed) qq->tq->close(reason);
    });
  }
  for (auto& fn : after) fn();
}

}  // namespace rdmablk::target
