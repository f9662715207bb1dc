// QoS on the reactors (docs/configuration.md#qos): a Read or Write of a namespace with limits spends its cost
// from this reactor's allowances (target/qos/namespace_qos.h) before it goes to the backend; one over its
// budget waits on its channel, in arrival order per host with limits (one list for the rest) and direction
// (a write waiting for write_mbps holds back no read), and a timer on this reactor releases what the
// refilled budget allows, every millisecond while any wait, each list first in turn. Other namespaces'
// commands never wait behind them. Reactor thread only.
#include <spdlog/spdlog.h>

#include "target/core/core_internal.h"

namespace rdmablk::target {

namespace {

// The tick of the release timer: the reactor's timers count milliseconds, and a bucket's batch is 1 ms.
constexpr std::chrono::milliseconds kReleaseTick{1};

qos::Cost cost_of(const NsChannel& ch, const RequestState& rs) noexcept {
  return qos::Cost{rs.op == backend::Op::write, uint64_t{rs.blocks} * ch.ns->geometry.block_size};
}

}  // namespace

bool ReactorState::qos_admit(CoreQueue& q, TargetRequest& req) noexcept {
  RequestState& rs = request_state(req);
  NsChannel& ch = *rs.channel;
  qos::NamespaceQos& limits = *ch.qos;
  rs.qos_host = limits.has_hosts() ? limits.host_index(q.ctrl->hostnqn) : -1;
  auto& waiting = ch.qos_waiting[2 * static_cast<std::size_t>(rs.qos_host + 1) + (rs.op == backend::Op::write)];
  const uint64_t now = now_ns();
  // First come, first served: a new command does not overtake those already waiting.
  if (waiting.empty() && qos::admit(limits, ch.qos_local, rs.qos_host, cost_of(ch, rs), now)) return true;
  rs.qos_since_ns = now;
  waiting.push_back(req);
  ++ch.qos_parked;
  ++q.parked;  // a closing queue waits for it (qos_release completes it)
  qos_arm(ch);
  return false;
}

void ReactorState::qos_arm(NsChannel& ch) noexcept {
  if (ch.qos_timer != 0) return;
  try {
    ch.qos_timer = reactor_.schedule(kReleaseTick, [this, c = &ch] {
      c->qos_timer = 0;
      qos_release(*c);
    });
  } catch (const std::exception& e) {
    // No memory for a timer: the commands would wait forever; nothing better than saying so.
    spdlog::critical("cannot arm the QoS release timer: {}", e.what());
  }
}

void ReactorState::qos_release(NsChannel& ch) noexcept {
  const uint64_t now = monotonic_ns();
  // Each list goes first in turn, so that one whose commands keep a shared budget (iops, mbps) spent does
  // not starve the others.
  const std::size_t lists = ch.qos_waiting.size();
  const std::size_t first = ch.qos_first_list++ % lists;
  for (std::size_t n = 0; n < lists; ++n) {
    auto& waiting = ch.qos_waiting[(first + n) % lists];
    while (!waiting.empty()) {
      TargetRequest& req = *waiting.front();
      RequestState& rs = request_state(req);
      CoreQueue& q = core_queue(req);
      // A closed queue's command ends now; a retired channel (the namespace removed or replaced, its limits
      // changed) lets its commands go without waiting, so that it drains.
      if (!q.closed && !ch.retired && !qos::admit(*ch.qos, ch.qos_local, rs.qos_host, cost_of(ch, rs), now)) break;
      waiting.pop_front();
      --ch.qos_parked;
      --q.parked;
      const uint64_t waited = now > rs.qos_since_ns ? now - rs.qos_since_ns : 0;
      if (rs.ns_stats != nullptr) rs.ns_stats->record_throttled(waited);
      if (rs.qos_host >= 0) {
        qos::HostThrottle& t = ch.qos->host_throttle(static_cast<std::size_t>(rs.qos_host));
        t.commands.fetch_add(1, std::memory_order_relaxed);
        t.ns.fetch_add(waited, std::memory_order_relaxed);
      }
      if (q.closed) {  // the host is gone: write nothing more of it (nothing was submitted or locked yet)
        core_.finish(req, st::aborted_sq_deletion);
        core_.release_queue_if_drained(q);
        continue;
      }
      core_.submit_admitted(q, req);
    }
  }
  if (ch.qos_parked != 0) qos_arm(ch);
}

}  // namespace rdmablk::target
